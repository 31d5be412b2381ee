//! In situ over QUIC: one handshake between a quinn-proto client and server connection in
//! memory, in the calling thread, sans-IO — datagrams handed from one endpoint to the other
//! (`Endpoint::handle`, `Connection::handle_event`, `poll_transmit`) on a virtual clock that
//! only moves when both sides wait on a timer (no sleeping). The rustls configurations are the
//! ones the in-situ rustls backend prepared (`pqtls_rustls::configs`: its timed provider,
//! groups, chain, mTLS, resumption), wrapped in quinn's `QuicClientConfig`/`QuicServerConfig`,
//! and every call into quinn-proto is a traced call named like the TLS endpoint's calls
//! (`pqtls_rustls::Tracer`), so the same canonical steps come out.
//!
//! The handshake is done when the client has its `Event::Connected` (it processed the server's
//! Finished and wrote its own) and the server has its `Event::Connected` (it processed the
//! client's Finished: handshake complete and confirmed on the server); what either side then
//! still has in flight (the server's HANDSHAKE_DONE, a NewSessionTicket) is delivered before
//! the exchange ends. See docs/quic.md.

use crate::session::{SessionWatch, Watch, Watched};
use crate::wire;
use bytes::BytesMut;
use pqtls_core::backend::PKI_SERVER_NAME as SERVER_NAME;
use pqtls_core::backend::{EndpointOptions, Negotiated, Prepared};
use pqtls_core::quic::{Amplification, QuicDirection, QuicHandshaker, QuicWire, HANDSHAKE};
use pqtls_core::trace::{attribute, HsType, RecordCount};
use pqtls_core::transport::Handshake;
use pqtls_core::{Error, Result};
use pqtls_rustls::{Configs, Tracer};
use pqtls_tls13::wire::{encrypted_extensions, hello_extensions, server_hello_suite, server_key_share, Reassembler};
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::{
    ClientConfig, Connection, ConnectionHandle, DatagramEvent, Endpoint, EndpointConfig, Event, ServerConfig,
    TransportConfig,
};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Instant;

const STACK: &str = "rustls over QUIC";
/// Exchanges (a delivery each way) after which a handshake that is not done is called stalled.
const MAX_EXCHANGES: u32 = 64;
/// The TLS extension `pre_shared_key` (a ServerHello that carries it resumed a session).
const PRE_SHARED_KEY: u16 = 41;
/// The TLS extension `quic_transport_parameters` (RFC 9001 §8.2).
const QUIC_TRANSPORT_PARAMETERS: u16 = 57;
const CLIENT_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1)), 40_000);
const SERVER_ADDR: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)), 443);

/// The QUIC in-situ driver (what `pqtls insitu --transport quic` runs).
#[derive(Clone, Debug, Default)]
pub struct Driver;

impl QuicHandshaker for Driver {
    fn handshake(&self, prepared: &dyn Prepared, opts: &EndpointOptions) -> Result<Handshake> {
        let configs = pqtls_rustls::configs(prepared).ok_or_else(|| {
            Error::Unsupported(
                "transport = quic runs on the rustls stack only (quinn carries rustls): this configuration was not \
                 prepared by the rustls backend; use stack = rustls"
                    .into(),
            )
        })?;
        handshake(&configs, opts)
    }
}

/// The TLS handshake bytes a session wrote (the CRYPTO frames' data), taken by the driver
/// after each call.
type Sink = Arc<Mutex<Vec<u8>>>;

fn take(sink: &Sink) -> Vec<u8> {
    std::mem::take(&mut *sink.lock().unwrap_or_else(|e| e.into_inner()))
}

/// Copies what each session writes to the configuration's [`Sink`] (untimed: the driver's
/// tracer times the calls).
struct Copying(Sink);

impl Watch for Copying {
    type Session = Copying;
    fn session(&self, _is_client: bool) -> Copying {
        Copying(self.0.clone())
    }
}

impl SessionWatch for Copying {
    const TIMED: bool = false;
    fn call(&mut self, _cpu_ns: u64, _read: Option<&[u8]>, wrote: &[u8], _handshaking: bool) {
        if !wrote.is_empty() {
            self.0.lock().unwrap_or_else(|e| e.into_inner()).extend_from_slice(wrote);
        }
    }
}

/// quinn's transport settings for the in-memory run: its defaults (1,200-byte initial MTU,
/// NewReno-free default congestion controller — CUBIC — with its default initial window), path
/// MTU discovery off (its probes would add datagrams that are not the handshake's).
fn transport_config() -> Arc<TransportConfig> {
    let mut t = TransportConfig::default();
    t.mtu_discovery_config(None);
    Arc::new(t)
}

/// The Initial packets' suite: always TLS_AES_128_GCM_SHA256 (RFC 9001 §5.2), whatever the
/// configuration's cipher suite.
fn initial_suite() -> Result<rustls::quic::Suite> {
    rustls::crypto::aws_lc_rs::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .ok_or_else(|| Error::Other("aws-lc-rs' TLS_AES_128_GCM_SHA256 has no QUIC support".into()))
}

fn quic_error(context: &str) -> impl FnOnce(String) -> Error + '_ {
    move |e| Error::tls(STACK, format!("{context}: {e}"))
}

/// One side: its endpoint, its connection once it has one, its tracing and its handshake bytes.
struct Peer {
    endpoint: Endpoint,
    conn: Option<(ConnectionHandle, Connection)>,
    tracer: Tracer,
    sink: Sink,
    messages: Reassembler,
    /// ServerHello and HelloRetryRequest bodies this side wrote.
    hellos: Vec<(HsType, Vec<u8>)>,
    /// The `quic_transport_parameters` extension's bytes (header included) this side sent.
    transport_parameters_bytes: u64,
    crypto_bytes: u64,
    done: bool,
    dir: QuicDirection,
}

impl Peer {
    /// Reports the handshake messages this side wrote since the last call (outside calls).
    fn report_writes(&mut self) {
        let new = take(&self.sink);
        self.crypto_bytes += new.len() as u64;
        let msgs: Vec<(HsType, usize, Vec<u8>, _)> = self
            .messages
            .push(&new)
            .map(|m| (m.kind(), m.len(), m.body().to_vec(), m.compressed_certificate()))
            .collect();
        for (kind, len, body, compressed) in msgs {
            self.tracer.wrote(kind, len as u32);
            self.tracer.wrote_compressed(compressed);
            let extensions = match kind {
                HsType::ClientHello => hello_extensions(&body, true),
                HsType::EncryptedExtensions => encrypted_extensions(&body),
                _ => None,
            };
            if let Some((_, data)) = extensions.iter().flatten().find(|(t, _)| *t == QUIC_TRANSPORT_PARAMETERS) {
                self.transport_parameters_bytes = 4 + data.len() as u64;
            }
            if matches!(kind, HsType::ServerHello | HsType::HelloRetryRequest) {
                self.hellos.push((kind, body));
            }
        }
    }

    /// Hands `datagrams` to this side (one traced `process_new_packets` call) and notes
    /// whether its handshake completed.
    fn receive(&mut self, datagrams: &[Vec<u8>], now: Instant, from: SocketAddr) -> Result<()> {
        let Peer { endpoint, conn, tracer, done, .. } = self;
        let result = tracer.call("process_new_packets", || -> std::result::Result<(), String> {
            let mut buf = Vec::new();
            for d in datagrams {
                match endpoint.handle(now, from, None, None, BytesMut::from(&d[..]), &mut buf) {
                    Some(DatagramEvent::NewConnection(incoming)) => {
                        let c = endpoint.accept(incoming, now, &mut buf, None).map_err(|e| e.cause.to_string())?;
                        *conn = Some(c);
                    }
                    Some(DatagramEvent::ConnectionEvent(_, ev)) => {
                        if let Some((_, c)) = conn.as_mut() {
                            c.handle_event(ev);
                        }
                    }
                    Some(DatagramEvent::Response(_)) => {
                        return Err("the endpoint answered a datagram by itself (stateless reset or version \
                                    negotiation): the datagram was not for this connection"
                            .into())
                    }
                    None => {}
                }
                pump(endpoint, conn, done)?;
            }
            Ok(())
        });
        result.map_err(quic_error("handling the peer's datagrams"))?;
        self.report_writes();
        Ok(())
    }

    /// The datagrams this side has to send now (one traced `write_tls` call), appended to
    /// `out`; the number sent.
    fn transmit(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) -> Result<u64> {
        let Peer { conn, tracer, .. } = self;
        let Some((_, c)) = conn.as_mut() else { return Ok(0) };
        let start = out.len();
        let r = tracer.call("write_tls", || -> std::result::Result<(), String> {
            let mut buf = Vec::with_capacity(1500);
            while let Some(t) = c.poll_transmit(now, 1, &mut buf) {
                out.push(buf[..t.size].to_vec());
                buf.clear();
            }
            Ok(())
        });
        r.map_err(quic_error("building datagrams"))?;
        self.report_writes();
        let sent = &out[start..];
        for d in sent {
            self.dir.datagrams += 1;
            self.dir.datagram_bytes += d.len() as u64;
            self.dir.datagram_sizes_bytes.push(d.len() as u64);
            for p in wire::packets(d)? {
                *self.dir.packets.entry(p.kind.to_string()).or_insert(0) += 1;
                *self.dir.packet_bytes.entry(p.kind.to_string()).or_insert(0) += p.len_bytes as u64;
            }
        }
        if !sent.is_empty() {
            self.dir.flights.push(sent.len() as u64);
        }
        Ok(sent.len() as u64)
    }

    /// Fires this side's timer if it is due at `now` (one traced `write_tls` call: what a timer
    /// does is resend or send what waited).
    fn timeout(&mut self, now: Instant) {
        if let Some((_, c)) = self.conn.as_mut() {
            if c.poll_timeout().is_some_and(|t| t <= now) {
                self.tracer.call("write_tls", || c.handle_timeout(now));
            }
        }
    }

    fn next_timer(&mut self) -> Option<Instant> {
        self.conn.as_mut().and_then(|(_, c)| c.poll_timeout())
    }
}

/// Moves events between the connection and its endpoint and reads the connection's events.
fn pump(
    endpoint: &mut Endpoint,
    conn: &mut Option<(ConnectionHandle, Connection)>,
    done: &mut bool,
) -> std::result::Result<(), String> {
    let Some((ch, c)) = conn.as_mut() else { return Ok(()) };
    while let Some(ev) = c.poll_endpoint_events() {
        if let Some(back) = endpoint.handle_event(*ch, ev) {
            c.handle_event(back);
        }
    }
    while let Some(ev) = c.poll() {
        match ev {
            Event::Connected => *done = true,
            Event::ConnectionLost { reason } => return Err(format!("the connection was lost: {reason}")),
            _ => {}
        }
    }
    Ok(())
}

/// One handshake over QUIC in memory from `configs`.
pub fn handshake(configs: &Configs, opts: &EndpointOptions) -> Result<Handshake> {
    let initial = initial_suite()?;
    let client_crypto = QuicClientConfig::with_initial(configs.client.clone(), initial)
        .map_err(|e| Error::Unsupported(format!("rustls' client configuration cannot run QUIC: {e}")))?;
    let server_crypto = QuicServerConfig::with_initial(configs.server.clone(), initial)
        .map_err(|e| Error::Unsupported(format!("rustls' server configuration cannot run QUIC: {e}")))?;
    let transport = transport_config();
    let client_sink = Sink::default();
    let server_sink = Sink::default();
    let mut client_config =
        ClientConfig::new(Arc::new(Watched { inner: Arc::new(client_crypto), watch: Copying(client_sink.clone()) }));
    client_config.transport_config(transport.clone());
    let mut server_config = ServerConfig::with_crypto(Arc::new(Watched {
        inner: Arc::new(server_crypto),
        watch: Copying(server_sink.clone()),
    }));
    server_config.transport_config(transport);
    let endpoint_config = Arc::new(EndpointConfig::default());
    let side = |endpoint: Endpoint, is_client: bool, sink: Sink| Peer {
        endpoint,
        conn: None,
        tracer: Tracer::new(opts, is_client),
        sink,
        messages: Reassembler::default(),
        hellos: Vec::new(),
        crypto_bytes: 0,
        transport_parameters_bytes: 0,
        done: false,
        dir: QuicDirection::default(),
    };
    let mut client = side(Endpoint::new(endpoint_config.clone(), None, false, None), true, client_sink);
    let mut server =
        side(Endpoint::new(endpoint_config, Some(Arc::new(server_config)), false, None), false, server_sink);
    // The virtual clock: it starts now and moves only to a timer both sides wait on.
    let mut now = Instant::now();

    let Peer { endpoint, tracer, .. } = &mut client;
    let c = tracer
        .call("write_client_hello", || endpoint.connect(now, client_config, SERVER_ADDR, SERVER_NAME))
        .map_err(|e| Error::tls(STACK, format!("starting the client connection: {e}")))?;
    client.conn = Some(c);
    client.report_writes();

    let mut to_server = Vec::new();
    client.transmit(now, &mut to_server)?;
    let mut to_client: Vec<Vec<u8>> = Vec::new();
    let mut rounds = 0u64;
    let mut amp = Amplification::default();
    let mut validated = false;
    let mut client_done_after: Option<u64> = None;
    let mut timers = 0u64;
    for _ in 0..MAX_EXCHANGES {
        if to_server.is_empty() && to_client.is_empty() {
            if client.done && server.done {
                break;
            }
            // Both wait: move the clock to the first timer and fire it (a loss would need it;
            // pacing or a PTO can).
            let Some(t) = [client.next_timer(), server.next_timer()].into_iter().flatten().min() else {
                break;
            };
            now = now.max(t);
            timers += 1;
            client.timeout(now);
            server.timeout(now);
            client.transmit(now, &mut to_server)?;
            server.transmit(now, &mut to_client)?;
            continue;
        }
        if !to_server.is_empty() {
            if !(client.done && server.done) {
                rounds += 1;
            }
            for d in &to_server {
                if validated {
                    continue;
                }
                if wire::packets(d)?.iter().any(|p| p.kind == HANDSHAKE) {
                    validated = true;
                    amp.sent_before_validation_bytes = server.dir.datagram_bytes;
                } else {
                    amp.received_before_validation_bytes += d.len() as u64;
                }
            }
            let flight = std::mem::take(&mut to_server);
            server.receive(&flight, now, CLIENT_ADDR)?;
            server.transmit(now, &mut to_client)?;
        }
        if !to_client.is_empty() {
            let flight = std::mem::take(&mut to_client);
            let was_done = client.done;
            client.receive(&flight, now, SERVER_ADDR)?;
            if client.done && !was_done {
                client_done_after = Some(rounds);
            }
            client.transmit(now, &mut to_server)?;
        }
    }
    if !(client.done && server.done) {
        return Err(Error::tls(
            STACK,
            format!(
                "the handshake stalled after {rounds} rounds: client {}, server {}",
                if client.done { "done" } else { "waiting" },
                if server.done { "done" } else { "waiting" }
            ),
        ));
    }
    if !validated {
        amp.sent_before_validation_bytes = server.dir.datagram_bytes;
    }
    amp.limit_bytes = 3 * amp.received_before_validation_bytes;
    amp.client_flights_to_send_all = client_done_after.unwrap_or(rounds);
    // Limited: the server stopped within one datagram of its budget and waited for the client.
    amp.limited = amp.client_flights_to_send_all > 1
        && amp.sent_before_validation_bytes + 1200 > amp.limit_bytes
        && server.hellos.iter().all(|(k, _)| *k != HsType::HelloRetryRequest);
    client.dir.crypto_bytes = client.crypto_bytes;
    server.dir.crypto_bytes = server.crypto_bytes;
    client.dir.transport_parameters_bytes = client.transport_parameters_bytes;
    server.dir.transport_parameters_bytes = server.transport_parameters_bytes;
    for d in [&mut client.dir, &mut server.dir] {
        d.not_handshake_data_bytes = d.datagram_bytes.saturating_sub(d.crypto_bytes);
    }
    let mut negotiated = negotiated(configs, &server.hellos, client.tracer.peer_scheme(), client.tracer.kx_starts())?;
    // How the server's chain arrived (certificate compression): a full handshake receives one.
    negotiated.cert_compression = client.tracer.cert_compression(!negotiated.resumed);
    let events = client.tracer.trace().events.len() + server.tracer.trace().events.len();
    let wire = QuicWire {
        version: 1,
        client_to_server: client.dir.clone(),
        server_to_client: server.dir.clone(),
        amplification: amp,
        rounds,
        timers_fired: timers,
    };
    Ok(Handshake {
        client: attribute(client.tracer.trace()),
        server: attribute(server.tracer.trace()),
        client_to_server: RecordCount { bytes: client.dir.datagram_bytes, records: client.dir.datagrams },
        server_to_client: RecordCount { bytes: server.dir.datagram_bytes, records: server.dir.datagrams },
        negotiated,
        events,
        quic: Some(wire),
    })
}

/// What was negotiated, from the ServerHello the server wrote (quinn does not expose rustls'
/// connection) and the signature scheme the client verified.
fn negotiated(
    configs: &Configs,
    hellos: &[(HsType, Vec<u8>)],
    peer_scheme: Option<u16>,
    kx_starts: u32,
) -> Result<Negotiated> {
    let hrr = hellos.iter().any(|(k, _)| *k == HsType::HelloRetryRequest) || kx_starts > 1;
    let (_, sh) = hellos.iter().rev().find(|(k, _)| *k == HsType::ServerHello).ok_or_else(|| {
        Error::tls(STACK, "the handshake completed without a ServerHello in the server's CRYPTO data")
    })?;
    let resumed = hello_extensions(sh, false).is_some_and(|exts| exts.iter().any(|(t, _)| *t == PRE_SHARED_KEY));
    Ok(pqtls_rustls::negotiated_names(
        &configs.codepoints,
        server_key_share(sh).map(|(g, _)| g),
        peer_scheme,
        server_hello_suite(sh),
        hrr,
        resumed,
        "TLSv1.3".into(),
    ))
}
