//! `pqtls serve --quic`: an HTTP/3 server (h3 over quinn, on a tokio runtime of its own) with
//! the rustls backend's configuration. What a request is answered with is the caller's
//! ([`Routes`]: pqtls-net's `GET /<size>` and `/stats`, one definition for TCP and QUIC); this
//! module carries it — bodies of `n` bytes written in 16 KiB chunks, counted as sent once
//! quinn took them — and keeps the counters: connections, handshakes and their TLS CPU
//! ([`crate::h3::Observed`]), requests, bytes, errors by kind.

use crate::h3::{self, Observed, Seen};
use bytes::Bytes;
use indexmap::IndexMap;
use pqtls_core::catalogue::CodepointOverrides;
use pqtls_core::load::{count_error, ErrorCount};
use pqtls_core::{Error, Result};
use quinn::crypto::rustls::QuicServerConfig;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// What a request is answered with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// 200 with a body of this many bytes (`application/octet-stream`).
    Bytes(u64),
    /// Any status with this body (JSON for 200, plain text otherwise).
    Body { status: u16, body: Vec<u8> },
}

/// How requests are answered: given the method, the path (with its query) and the server's
/// counters now.
pub trait Routes: Send + Sync {
    fn answer(&self, method: &str, path: &str, counters: &CountersSnapshot) -> Answer;
}

/// How to serve.
pub struct ServeOptions {
    /// The UDP address; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Worker threads of the runtime.
    pub workers: usize,
    /// The rustls server configuration with ALPN h3 ([`h3::configs`]: the contexts `Stacks::prepare` made).
    pub tls: Arc<QuicServerConfig>,
    pub routes: Arc<dyn Routes>,
    /// The run's code points, to name the groups negotiated.
    pub codepoints: CodepointOverrides,
    /// The server's initial window and MTU (quinn's defaults unless set).
    pub tuning: crate::tuning::Tuning,
}

/// The server's counters.
#[derive(Debug, Default)]
pub struct Counters {
    connections: AtomicU64,
    address_validated: AtomicU64,
    handshakes: AtomicU64,
    handshake_cpu_ns: AtomicU64,
    requests: AtomicU64,
    response_bytes: AtomicU64,
    response_bytes_asked: AtomicU64,
    errors: Mutex<Vec<ErrorCount>>,
    groups: Mutex<IndexMap<String, u64>>,
}

/// The counters at one moment.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CountersSnapshot {
    /// Connection attempts accepted (Initial packets that began a connection).
    pub connections: u64,
    /// Completed TLS handshakes.
    pub handshakes: u64,
    /// Connections whose first packet carried a valid address-validation token (their
    /// address valid at once: no 3× limit; only with `Tuning::address_tokens`).
    pub address_validated: u64,
    /// Server CPU inside rustls until each handshake completed, summed, ns.
    pub handshake_cpu_ns_total: u64,
    pub requests: u64,
    /// Response body bytes handed to QUIC streams, and asked for.
    pub response_bytes: u64,
    pub response_bytes_asked: u64,
    /// Errors by kind (`tls`: a handshake that failed; `http`; `io`).
    pub errors: Vec<ErrorCount>,
    /// Completed handshakes by the group they negotiated (read from the ServerHello written).
    pub groups: IndexMap<String, u64>,
}

impl Counters {
    fn error(&self, kind: &str, message: String) {
        count_error(&mut self.errors.lock().unwrap_or_else(|p| p.into_inner()), kind, message);
    }

    pub fn snapshot(&self) -> CountersSnapshot {
        CountersSnapshot {
            connections: self.connections.load(Ordering::Relaxed),
            handshakes: self.handshakes.load(Ordering::Relaxed),
            address_validated: self.address_validated.load(Ordering::Relaxed),
            handshake_cpu_ns_total: self.handshake_cpu_ns.load(Ordering::Relaxed),
            requests: self.requests.load(Ordering::Relaxed),
            response_bytes: self.response_bytes.load(Ordering::Relaxed),
            response_bytes_asked: self.response_bytes_asked.load(Ordering::Relaxed),
            errors: self.errors.lock().unwrap_or_else(|p| p.into_inner()).clone(),
            groups: self.groups.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        }
    }
}

/// A running HTTP/3 server; stopped by [`Server::stop`] or when dropped (its connections
/// closed, its runtime and socket gone).
pub struct Server {
    addr: SocketAddr,
    endpoint: quinn::Endpoint,
    runtime: Option<tokio::runtime::Runtime>,
    counters: Arc<Counters>,
}

/// Body bytes per `send_data` call.
const CHUNK: usize = 16 * 1024;
static FILL: [u8; CHUNK] = [b'x'; CHUNK];

impl Server {
    /// Binds the UDP socket (a port in use is an error saying so) and starts serving.
    pub fn start(opts: ServeOptions) -> Result<Server> {
        if opts.workers == 0 || opts.workers > 256 {
            return Err(Error::Invalid(format!("{} server workers: give 1 to 256 (e.g. --workers 2)", opts.workers)));
        }
        let socket = h3::bind_udp(opts.listen)?;
        let addr = socket.local_addr().map_err(|e| Error::io("reading the bound UDP address", e))?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(opts.workers)
            .thread_name("pqtls-serve-quic")
            .enable_all()
            .build()
            .map_err(|e| Error::io("starting the server's runtime", e))?;
        let counters = Arc::new(Counters::default());
        let on_done = {
            let (c, codepoints) = (counters.clone(), opts.codepoints.clone());
            Arc::new(move |s: &Seen| {
                c.handshakes.fetch_add(1, Ordering::Relaxed);
                c.handshake_cpu_ns.fetch_add(s.cpu_ns, Ordering::Relaxed);
                let group = s.negotiated(&codepoints).group;
                *c.groups.lock().unwrap_or_else(|p| p.into_inner()).entry(group).or_insert(0) += 1;
            })
        };
        let crypto = Arc::new(Observed::server(opts.tls.clone(), on_done));
        opts.tuning.validate()?;
        let mut config = quinn::ServerConfig::with_crypto(crypto);
        config.transport_config(Arc::new(opts.tuning.transport()));
        config.validation_token_config(opts.tuning.validation_tokens());
        let endpoint = {
            let _guard = runtime.enter();
            quinn::Endpoint::new(quinn::EndpointConfig::default(), Some(config), socket, Arc::new(quinn::TokioRuntime))
                .map_err(|e| Error::io(format!("starting QUIC on UDP {addr}"), e))?
        };
        let (ep, c, routes) = (endpoint.clone(), counters.clone(), opts.routes.clone());
        runtime.spawn(async move {
            while let Some(incoming) = ep.accept().await {
                c.connections.fetch_add(1, Ordering::Relaxed);
                if incoming.remote_address_validated() {
                    c.address_validated.fetch_add(1, Ordering::Relaxed);
                }
                tokio::spawn(connection(incoming, c.clone(), routes.clone()));
            }
        });
        Ok(Server { addr, endpoint, runtime: Some(runtime), counters })
    }

    /// The UDP address it listens on (the port chosen when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn counters(&self) -> CountersSnapshot {
        self.counters.snapshot()
    }

    /// Closes every connection, stops the runtime (its threads joined) and releases the port.
    pub fn stop(mut self) -> CountersSnapshot {
        self.halt();
        self.counters.snapshot()
    }

    fn halt(&mut self) {
        if let Some(rt) = self.runtime.take() {
            self.endpoint.close(0u32.into(), b"server stopping");
            // The CONNECTION_CLOSE frames go out before the socket is dropped.
            let ep = self.endpoint.clone();
            rt.block_on(async move {
                let _ = tokio::time::timeout(Duration::from_millis(500), ep.wait_idle()).await;
            });
            rt.shutdown_timeout(Duration::from_secs(2));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.halt();
    }
}

/// One connection: the handshake, then its requests, each on a task of its own.
async fn connection(incoming: quinn::Incoming, counters: Arc<Counters>, routes: Arc<dyn Routes>) {
    let conn = match incoming.await {
        Ok(c) => c,
        Err(e) => return counters.error("tls", format!("handshake: {e}")),
    };
    let mut h3 = match ::h3::server::Connection::<_, Bytes>::new(h3_quinn::Connection::new(conn)).await {
        Ok(h) => h,
        Err(e) => return counters.error("http", format!("HTTP/3 connection: {e}")),
    };
    loop {
        match h3.accept().await {
            Ok(Some(resolver)) => {
                let (c, r) = (counters.clone(), routes.clone());
                tokio::spawn(async move {
                    if let Err(e) = request(resolver, &c, r.as_ref()).await {
                        c.error("http", e);
                    }
                });
            }
            Ok(None) => break,
            Err(e) => {
                // A client that closes its connection with H3_NO_ERROR after its responses is
                // the normal end; any other close (or an idle timeout) is counted.
                if !e.is_h3_no_error() {
                    counters.error("http", format!("HTTP/3 connection: {e}"));
                }
                break;
            }
        }
    }
}

async fn request(
    resolver: ::h3::server::RequestResolver<h3_quinn::Connection, Bytes>,
    counters: &Counters,
    routes: &dyn Routes,
) -> std::result::Result<(), String> {
    let (req, mut stream) = resolver.resolve_request().await.map_err(|e| format!("reading a request: {e}"))?;
    counters.requests.fetch_add(1, Ordering::Relaxed);
    let path = req.uri().path_and_query().map_or("/", |p| p.as_str());
    let answer = routes.answer(req.method().as_str(), path, &counters.snapshot());
    let send = |e: ::h3::error::StreamError| format!("answering {path}: {e}");
    match answer {
        Answer::Bytes(n) => {
            let head = http::Response::builder()
                .status(200)
                .header("content-type", "application/octet-stream")
                .header("content-length", n)
                .body(())
                .map_err(|e| e.to_string())?;
            counters.response_bytes_asked.fetch_add(n, Ordering::Relaxed);
            stream.send_response(head).await.map_err(send)?;
            let mut left = n;
            while left > 0 {
                let k = (left as usize).min(CHUNK);
                stream.send_data(Bytes::from_static(&FILL[..k])).await.map_err(send)?;
                counters.response_bytes.fetch_add(k as u64, Ordering::Relaxed);
                left -= k as u64;
            }
        }
        Answer::Body { status, body } => {
            let ctype = if status == 200 { "application/json" } else { "text/plain" };
            let head = http::Response::builder()
                .status(status)
                .header("content-type", ctype)
                .header("content-length", body.len())
                .body(())
                .map_err(|e| e.to_string())?;
            stream.send_response(head).await.map_err(send)?;
            stream.send_data(Bytes::from(body)).await.map_err(send)?;
        }
    }
    stream.finish().await.map_err(send)
}
