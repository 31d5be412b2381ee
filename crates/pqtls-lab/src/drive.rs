//! Drivers: move bytes between a client and a server endpoint until both are done.
//!
//! - [`in_memory`]: both endpoints in the calling thread, buffers in memory. Nothing but the
//!   two stacks runs, so the per-step CPU times are the stacks' own.
//! - [`Threads`]: client and server in two threads pinned to two CPUs, over a UNIX
//!   socketpair, one handshake after another (a barrier between handshakes keeps them apart).
//!   A cross-check of the in-memory mode: same steps, real kernel I/O.

use pqtls_core::backend::{Endpoint, EndpointOptions, Negotiated, Prepared};
use pqtls_core::trace::{attribute, RecordCount, RecordCounter, SideSample};
use pqtls_core::{Error, Result};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::Arc;

/// One handshake's outcome: each side's attributed sample and the bytes per direction.
#[derive(Clone, Debug)]
pub struct Handshake {
    pub client: SideSample,
    pub server: SideSample,
    pub client_to_server: RecordCount,
    pub server_to_client: RecordCount,
    pub negotiated: Negotiated,
    /// Trace events recorded (client + server).
    pub events: usize,
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

/// Bytes per direction of one exchange.
#[derive(Clone, Copy, Debug, Default)]
pub struct Exchange {
    pub client_to_server: RecordCount,
    pub server_to_client: RecordCount,
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
    })
}

/// Pins the calling thread to one CPU. Returns false (and changes nothing) when the CPU
/// does not exist or the call is refused.
pub fn pin_to_cpu(cpu: usize) -> bool {
    // SAFETY: cpu_set_t is plain data; CPU_SET writes within it for cpu < CPU_SETSIZE.
    unsafe {
        if cpu >= libc::CPU_SETSIZE as usize {
            return false;
        }
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpu, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) == 0
    }
}

/// Two threads, pinned, over a socketpair.
pub struct Threads {
    /// CPUs for the client and the server thread.
    pub cpus: (usize, usize),
    /// Wait for the peer by spinning on a non-blocking socket rather than sleeping in read().
    pub spin: bool,
}

/// What the thread mode returns: handshakes in order, and whether pinning succeeded.
pub struct ThreadRun {
    pub handshakes: Vec<Handshake>,
    pub pinned: bool,
}

impl Threads {
    /// Runs up to `n` handshakes; `stop` is polled between handshakes. The client thread
    /// (the caller's) decides how many happen and ends the run by closing its socket.
    pub fn run(
        &self,
        prepared: Arc<dyn Prepared>,
        n: u64,
        opts: &EndpointOptions,
        stop: &dyn Fn() -> bool,
    ) -> Result<ThreadRun> {
        let (mut cs, ss) = UnixStream::pair().map_err(|e| Error::io("creating a socketpair", e))?;
        for s in [&cs, &ss] {
            s.set_nonblocking(self.spin).map_err(|e| Error::io("setting the socketpair non-blocking", e))?;
        }
        let server = {
            let prepared = prepared.clone();
            let cpu = self.cpus.1;
            let opts = opts.clone();
            std::thread::Builder::new()
                .name("pqtls-server".into())
                .spawn(move || serve_all(prepared.as_ref(), ss, &opts, cpu))
                .map_err(|e| Error::io("starting the server thread", e))?
        };
        let pinned_client = pin_to_cpu(self.cpus.0);
        let mut client_side = Vec::new();
        let mut error = None;
        for _ in 0..n {
            let result = prepared.client(opts).and_then(|mut ep| {
                let sent = exchange(ep.as_mut(), &mut cs, true, spin_read)?;
                let neg = ep.negotiated()?;
                Ok((attribute(ep.trace()), sent, neg))
            });
            match result {
                Ok(r) => client_side.push(r),
                Err(e) => {
                    error = Some(e);
                    break;
                }
            }
            if stop() {
                break;
            }
        }
        // Closing our end tells the server thread the run is over.
        drop(cs);
        let server_result = server.join().map_err(|_| Error::Other("the server thread panicked".into()))?;
        if let Some(e) = error {
            return Err(e);
        }
        let (server_side, pinned_server) = server_result?;
        if server_side.len() != client_side.len() {
            return Err(Error::tls(
                "driver",
                format!("client completed {} handshakes, server {}", client_side.len(), server_side.len()),
            ));
        }
        let handshakes = client_side
            .into_iter()
            .zip(server_side)
            .map(|((client, c2s, negotiated), (server, s2c))| Handshake {
                client,
                server,
                client_to_server: c2s,
                server_to_client: s2c,
                negotiated,
                events: 0,
            })
            .collect();
        Ok(ThreadRun { handshakes, pinned: pinned_client && pinned_server })
    }
}

/// The server thread: one endpoint after another until the client closes the socket at a
/// handshake boundary. Input is fed one whole TLS record at a time, so bytes of the next
/// handshake that arrive early are kept for the next endpoint.
fn serve_all(
    prepared: &dyn Prepared,
    mut sock: UnixStream,
    opts: &EndpointOptions,
    cpu: usize,
) -> Result<(Vec<(SideSample, RecordCount)>, bool)> {
    let pinned = pin_to_cpu(cpu);
    let mut out = Vec::new();
    let mut pending: Vec<u8> = Vec::new();
    let mut input = vec![0u8; 64 * 1024];
    let mut buf = Vec::with_capacity(16 * 1024);
    loop {
        let mut ep: Option<Box<dyn Endpoint>> = None;
        let mut sent = RecordCounter::default();
        loop {
            let Some(len) = whole_record(&pending) else {
                let n = spin_read(&mut sock, &mut input).map_err(|e| Error::io("server read", e))?;
                if n == 0 {
                    if ep.is_none() && pending.is_empty() {
                        return Ok((out, pinned));
                    }
                    return Err(Error::tls("driver", "the client closed the connection during the handshake"));
                }
                pending.extend_from_slice(&input[..n]);
                continue;
            };
            let e = match &mut ep {
                Some(e) => e,
                None => ep.insert(prepared.server(opts)?),
            };
            e.receive(&pending[..len])?;
            pending.drain(..len);
            let done = e.drive()?;
            buf.clear();
            e.take_output(&mut buf)?;
            if !buf.is_empty() {
                sent.feed(&buf);
                sock.write_all(&buf).map_err(|e| Error::io("server write", e))?;
            }
            if done {
                break;
            }
        }
        if let Some(mut e) = ep {
            e.finish()?;
            out.push((attribute(e.trace()), sent.count));
        }
    }
}

/// Reads what is there, spinning while nothing is: the waiting side keeps its CPU busy, as a
/// loaded server's would, instead of sleeping and coming back to cold caches (on the 2-vCPU
/// VMs we measure on, sleeping made cheap handshakes ~50 % slower; see docs/benchmarks.md).
/// The socket must be non-blocking.
fn spin_read(sock: &mut UnixStream, buf: &mut [u8]) -> std::io::Result<usize> {
    loop {
        match sock.read(buf) {
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => std::hint::spin_loop(),
            other => return other,
        }
    }
}

/// Length of the first whole TLS record in `data`, if it is all there.
fn whole_record(data: &[u8]) -> Option<usize> {
    if data.len() < 5 {
        return None;
    }
    let len = 5 + u16::from_be_bytes([data[3], data[4]]) as usize;
    (data.len() >= len).then_some(len)
}

/// Runs one endpoint's handshake over a blocking byte stream (a TCP connection to a peer
/// that pqtls does not control): the client writes first, a server reads first.
pub fn over_stream<S: Read + Write>(ep: &mut dyn Endpoint, stream: &mut S, client: bool) -> Result<RecordCount> {
    exchange(ep, stream, client, |s: &mut S, b: &mut [u8]| s.read(b))
}

/// One endpoint's handshake over a stream, reading with `read`: drive, send what the stack
/// wrote, read the peer's answer, until this side is done.
fn exchange<S: Read + Write>(
    ep: &mut dyn Endpoint,
    stream: &mut S,
    client: bool,
    mut read: impl FnMut(&mut S, &mut [u8]) -> std::io::Result<usize>,
) -> Result<RecordCount> {
    let mut sent = RecordCounter::default();
    let mut out = Vec::with_capacity(16 * 1024);
    let mut input = vec![0u8; 64 * 1024];
    let mut first = client;
    loop {
        if !first {
            let n = read(stream, &mut input).map_err(|e| Error::io("reading from the peer", e))?;
            if n == 0 {
                return Err(Error::tls("driver", "the peer closed the connection during the handshake"));
            }
            ep.receive(&input[..n])?;
        }
        first = false;
        let done = ep.drive()?;
        out.clear();
        ep.take_output(&mut out)?;
        if !out.is_empty() {
            sent.feed(&out);
            stream.write_all(&out).map_err(|e| Error::io("writing to the peer", e))?;
            stream.flush().map_err(|e| Error::io("writing to the peer", e))?;
        }
        if done {
            ep.finish()?;
            return Ok(sent.count);
        }
    }
}
