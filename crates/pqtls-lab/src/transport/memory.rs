//! The in-memory transport: both endpoints in the calling thread, bytes handed over in
//! memory. The reference for per-step costs.

use super::{Batch, Handshake, Transport, TransportKind};
use pqtls_core::backend::{Endpoint, EndpointOptions, Prepared};
use pqtls_core::trace::{attribute, RecordCount, RecordCounter};
use pqtls_core::{Error, Result};
use std::sync::Arc;

/// The in-memory transport.
#[derive(Clone, Copy, Debug, Default)]
pub struct Memory;

impl Transport for Memory {
    fn kind(&self) -> TransportKind {
        TransportKind::Memory
    }

    fn run(
        &mut self,
        prepared: Arc<dyn Prepared>,
        handshakes: u64,
        opts: &EndpointOptions,
        stop: &dyn Fn() -> bool,
    ) -> Result<Batch> {
        one_by_one(handshakes, stop, || handshake(prepared.as_ref(), opts))
    }
}

/// Up to `handshakes` handshakes made by `next`, one after another in this thread, `stop`
/// polled after each (the one-thread transports: memory and QUIC).
pub fn one_by_one(
    handshakes: u64,
    stop: &dyn Fn() -> bool,
    mut next: impl FnMut() -> Result<Handshake>,
) -> Result<Batch> {
    let mut batch = Batch { handshakes: Vec::with_capacity(handshakes as usize), notes: Vec::new() };
    for _ in 0..handshakes {
        batch.handshakes.push(next()?);
        if stop() {
            break;
        }
    }
    Ok(batch)
}

/// Bytes per direction of one exchange.
#[derive(Clone, Copy, Debug, Default)]
pub struct Exchange {
    pub client_to_server: RecordCount,
    pub server_to_client: RecordCount,
}

/// Runs one handshake between two endpoints in this thread. Each side is driven only when
/// it has received something new (plus the client's first call), so no empty calls pad the
/// measurement.
pub fn in_memory(client: &mut dyn Endpoint, server: &mut dyn Endpoint) -> Result<Exchange> {
    let mut c2s = RecordCounter::default();
    let mut s2c = RecordCounter::default();
    let mut buf = Vec::with_capacity(16 * 1024);
    let mut client_done = client.drive()?;
    let mut server_done = false;
    let mut to_server = move_bytes(client, server, &mut buf, &mut c2s)?;
    let mut to_client = false;
    for _ in 0..64 {
        if !to_server && !to_client {
            break;
        }
        if to_server {
            server_done = server.drive()?;
            to_client = move_bytes(server, client, &mut buf, &mut s2c)?;
            to_server = false;
        }
        if to_client {
            client_done = client.drive()?;
            to_server = move_bytes(client, server, &mut buf, &mut c2s)?;
            to_client = false;
        }
    }
    if !(client_done && server_done) {
        return Err(Error::tls(
            "driver",
            format!(
                "the handshake stalled: client {}, server {} and no bytes left to move",
                if client_done { "done" } else { "waiting" },
                if server_done { "done" } else { "waiting" }
            ),
        ));
    }
    client.finish()?;
    server.finish()?;
    Ok(Exchange { client_to_server: c2s.count, server_to_client: s2c.count })
}

fn move_bytes(
    from: &mut dyn Endpoint,
    to: &mut dyn Endpoint,
    buf: &mut Vec<u8>,
    counter: &mut RecordCounter,
) -> Result<bool> {
    buf.clear();
    from.take_output(buf)?;
    if buf.is_empty() {
        return Ok(false);
    }
    counter.feed(buf);
    to.receive(buf)?;
    Ok(true)
}

/// One complete in-memory handshake from a prepared configuration, attributed.
pub fn handshake(prepared: &dyn Prepared, opts: &EndpointOptions) -> Result<Handshake> {
    let mut client = prepared.client(opts)?;
    let mut server = prepared.server(opts)?;
    let ex = in_memory(client.as_mut(), server.as_mut())?;
    let events = client.trace().events.len() + server.trace().events.len();
    Ok(Handshake {
        events,
        client: attribute(client.trace()),
        server: attribute(server.trace()),
        client_to_server: ex.client_to_server,
        server_to_client: ex.server_to_client,
        negotiated: client.negotiated()?,
        quic: None,
    })
}
