//! `pqtls serve`: an HTTPS/1.1 server (or plain HTTP, `--plain`) over the lab's sans-IO TLS
//! endpoints. N worker threads, each with its own `mio` event loop and its own listening
//! socket on the same address (`SO_REUSEPORT`: the kernel spreads connections over them).
//! Per connection the server CPU of the handshake is the thread CPU clock around the stack's
//! calls (the trace's call boundaries, as in situ), summed into the counters.

use crate::http::{self, Route};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use pqtls_core::backend::{Endpoint, EndpointOptions, Prepared};
use pqtls_core::load::count_error;
pub use pqtls_core::load::ErrorCount;
use pqtls_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// How to serve.
#[derive(Clone)]
pub struct ServeOptions {
    /// Where to listen; port 0 picks a free one (all workers share it).
    pub listen: SocketAddr,
    pub threads: usize,
    /// TLS contexts (`None`: plain HTTP, e.g. behind a TLS-terminating load balancer).
    pub tls: Option<Arc<dyn Prepared>>,
    /// How endpoints are made (trace detail, clock, key log).
    pub endpoint: EndpointOptions,
    /// Keep connections open between requests when the client asks to (false: close after
    /// every response).
    pub keep_alive: bool,
}

/// The server's counters, shared by its workers.
#[derive(Debug, Default)]
pub struct Stats {
    connections: AtomicU64,
    handshakes: AtomicU64,
    requests: AtomicU64,
    response_bytes: AtomicU64,
    handshake_cpu_ns: AtomicU64,
    errors: Mutex<Vec<ErrorCount>>,
    /// With traced endpoints (`--trace`): Σ ns per canonical step over the handshakes.
    steps_ns: Mutex<indexmap::IndexMap<String, u64>>,
}

/// Why a connection failed.
struct Failure {
    kind: &'static str,
    message: String,
}

fn fail(kind: &'static str) -> impl Fn(Error) -> Failure {
    move |e| Failure { kind, message: e.to_string() }
}

fn io_fail(e: std::io::Error) -> Failure {
    Failure { kind: "io", message: e.to_string() }
}

impl Stats {
    fn error(&self, kind: &str, message: String) {
        let mut e = match self.errors.lock() {
            Ok(e) => e,
            Err(p) => p.into_inner(),
        };
        count_error(&mut e, kind, message);
    }

    pub fn snapshot(&self) -> StatsSnapshot {
        let errors = match self.errors.lock() {
            Ok(e) => e.clone(),
            Err(p) => p.into_inner().clone(),
        };
        let handshakes = self.handshakes.load(Ordering::Relaxed);
        let cpu = self.handshake_cpu_ns.load(Ordering::Relaxed);
        StatsSnapshot {
            connections: self.connections.load(Ordering::Relaxed),
            handshakes,
            requests: self.requests.load(Ordering::Relaxed),
            response_bytes: self.response_bytes.load(Ordering::Relaxed),
            handshake_cpu_ns_total: cpu,
            handshake_cpu_ns_mean: if handshakes > 0 { cpu as f64 / handshakes as f64 } else { 0.0 },
            errors,
            steps_ns_mean: (self.steps_ns.lock().unwrap_or_else(|p| p.into_inner()).iter())
                .map(|(k, v)| (k.clone(), *v as f64 / handshakes.max(1) as f64))
                .collect(),
        }
    }
}

/// The counters at one moment (`GET /stats` answers with this as JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    pub connections: u64,
    /// Completed TLS handshakes.
    pub handshakes: u64,
    pub requests: u64,
    pub response_bytes: u64,
    /// Server CPU inside the TLS stack's calls until each handshake completed, summed.
    pub handshake_cpu_ns_total: u64,
    pub handshake_cpu_ns_mean: f64,
    /// Errors by kind (`tls`, `http`, `io`), with the last message of each.
    pub errors: Vec<ErrorCount>,
    /// With `--trace`: the server's mean CPU per canonical step per handshake, under load
    /// (the in-situ attribution rule, docs/attribution.md); empty otherwise.
    #[serde(default, skip_serializing_if = "indexmap::IndexMap::is_empty")]
    pub steps_ns_mean: indexmap::IndexMap<String, f64>,
}

/// A running server; stopped (workers joined) by [`Server::stop`] or when dropped.
pub struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    wakers: Vec<Arc<Waker>>,
    workers: Vec<JoinHandle<Result<()>>>,
    stats: Arc<Stats>,
}

const LISTENER: Token = Token(0);
const WAKER: Token = Token(1);
const FIRST_CONN: usize = 2;

/// A listening socket with `SO_REUSEPORT`, so that every worker can have its own.
fn listener(addr: SocketAddr) -> Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let ctx = |what: &str| format!("{what} {addr}");
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| Error::io(ctx("creating a socket for"), e))?;
    s.set_reuse_address(true).map_err(|e| Error::io(ctx("SO_REUSEADDR on"), e))?;
    s.set_reuse_port(true).map_err(|e| Error::io(ctx("SO_REUSEPORT on"), e))?;
    s.set_nonblocking(true).map_err(|e| Error::io(ctx("non-blocking"), e))?;
    s.bind(&addr.into()).map_err(|e| match e.kind() {
        ErrorKind::AddrInUse => Error::Invalid(format!(
            "{addr} is in use by another program; pick another port (e.g. --listen 127.0.0.1:0 for a free one)"
        )),
        _ => Error::io(ctx("binding"), e),
    })?;
    s.listen(1024).map_err(|e| Error::io(ctx("listening on"), e))?;
    Ok(s.into())
}

impl Server {
    /// Binds and starts the workers.
    pub fn start(opts: ServeOptions) -> Result<Server> {
        if opts.threads == 0 || opts.threads > 256 {
            return Err(Error::Invalid(format!("{} server workers: give 1 to 256 (e.g. --workers 2)", opts.threads)));
        }
        let first = listener(opts.listen)?;
        // Port 0: every further worker binds the port the first one got.
        let addr = first.local_addr().map_err(|e| Error::io("reading the bound address", e))?;
        let mut sockets = vec![first];
        for _ in 1..opts.threads {
            sockets.push(listener(addr)?);
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        let mut wakers = Vec::new();
        let mut workers = Vec::new();
        for (i, sock) in sockets.into_iter().enumerate() {
            let poll = Poll::new().map_err(|e| Error::io("creating an event loop", e))?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating a waker", e))?);
            wakers.push(waker);
            let (stop, stats, opts) = (stop.clone(), stats.clone(), opts.clone());
            let worker = std::thread::Builder::new()
                .name(format!("pqtls-serve-{i}"))
                .spawn(move || Worker::new(poll, TcpListener::from_std(sock), opts, stats, stop).run())
                .map_err(|e| Error::io("starting a server thread", e))?;
            workers.push(worker);
        }
        Ok(Server { addr, stop, wakers, workers, stats })
    }

    /// The address it listens on (the port chosen when 0 was asked).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    pub fn stats(&self) -> StatsSnapshot {
        self.stats.snapshot()
    }

    /// Stops accepting, closes every connection, joins the workers; the first worker error,
    /// if any, is returned.
    pub fn stop(mut self) -> Result<StatsSnapshot> {
        self.halt()?;
        Ok(self.stats.snapshot())
    }

    fn halt(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        for w in &self.wakers {
            let _ = w.wake();
        }
        let mut first = Ok(());
        for w in self.workers.drain(..) {
            let r = w.join().unwrap_or_else(|_| Err(Error::Other("a server thread panicked".into())));
            if first.is_ok() {
                first = r;
            }
        }
        first
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.halt();
    }
}

/// One connection's state.
struct Conn {
    stream: TcpStream,
    token: Token,
    tls: Option<Box<dyn Endpoint>>,
    handshake_done: bool,
    /// Plaintext received and not yet parsed.
    plain_in: Vec<u8>,
    /// Bytes (TLS records, or plaintext without TLS) waiting for the socket.
    out: Vec<u8>,
    /// Body bytes of the current response still to produce.
    body_left: u64,
    /// Close once everything queued is written.
    closing: bool,
    /// The close_notify was queued (once: a second SSL_shutdown would wait for the peer's).
    close_sent: bool,
    /// Interest registered for writing (the socket was full).
    want_write: bool,
}

struct Worker {
    poll: Poll,
    listener: TcpListener,
    opts: ServeOptions,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    conns: Vec<Option<Conn>>,
}

/// Body bytes produced per step (and the most plaintext queued per TLS write).
const CHUNK: usize = 16 * 1024;

impl Worker {
    fn new(poll: Poll, listener: TcpListener, opts: ServeOptions, stats: Arc<Stats>, stop: Arc<AtomicBool>) -> Worker {
        Worker { poll, listener, opts, stats, stop, conns: Vec::new() }
    }

    fn run(mut self) -> Result<()> {
        self.poll
            .registry()
            .register(&mut self.listener, LISTENER, Interest::READABLE)
            .map_err(|e| Error::io("registering the listener", e))?;
        let mut events = Events::with_capacity(1024);
        while !self.stop.load(Ordering::SeqCst) {
            match self.poll.poll(&mut events, Some(Duration::from_millis(500))) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("waiting for events", e)),
            }
            for ev in events.iter() {
                match ev.token() {
                    LISTENER => self.accept(),
                    WAKER => {}
                    Token(t) => self.on_conn(t - FIRST_CONN, ev.is_readable(), ev.is_writable()),
                }
            }
        }
        Ok(())
    }

    fn accept(&mut self) {
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let tls = match &self.opts.tls {
                        Some(p) => match p.server(&self.opts.endpoint) {
                            Ok(ep) => Some(ep),
                            Err(e) => {
                                self.stats.error("tls", e.to_string());
                                continue;
                            }
                        },
                        None => None,
                    };
                    let slot = self.conns.iter().position(Option::is_none).unwrap_or_else(|| {
                        self.conns.push(None);
                        self.conns.len() - 1
                    });
                    if let Err(e) =
                        self.poll.registry().register(&mut stream, Token(slot + FIRST_CONN), Interest::READABLE)
                    {
                        self.stats.error("io", e.to_string());
                        continue;
                    }
                    self.stats.connections.fetch_add(1, Ordering::Relaxed);
                    let handshake_done = tls.is_none();
                    self.conns[slot] = Some(Conn {
                        stream,
                        token: Token(slot + FIRST_CONN),
                        tls,
                        handshake_done,
                        plain_in: Vec::new(),
                        out: Vec::new(),
                        body_left: 0,
                        closing: false,
                        close_sent: false,
                        want_write: false,
                    });
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => {
                    self.stats.error("io", format!("accepting: {e}"));
                    return;
                }
            }
        }
    }

    fn on_conn(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else { return };
        let keep = self.serve(&mut conn, readable, writable);
        match keep {
            Ok(true) => self.conns[slot] = Some(conn),
            Ok(false) => self.close(conn),
            Err(f) => {
                self.stats.error(f.kind, f.message);
                self.close(conn);
            }
        }
    }

    fn close(&mut self, mut conn: Conn) {
        let _ = self.poll.registry().deregister(&mut conn.stream);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    }

    /// Moves one connection forward; `Ok(false)`: it is finished; `Err(kind)`: it failed.
    fn serve(&mut self, c: &mut Conn, readable: bool, writable: bool) -> std::result::Result<bool, Failure> {
        let mut peer_gone = false;
        if readable {
            let mut buf = [0u8; 64 * 1024];
            loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        peer_gone = true;
                        break;
                    }
                    Ok(n) => self.input(c, &buf[..n])?,
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_fail(e)),
                }
            }
            self.requests(c)?;
        }
        if readable || writable {
            self.produce(c)?;
            if !self.flush(c)? {
                return Ok(true);
            }
        }
        if peer_gone || (c.closing && c.out.is_empty() && c.body_left == 0) {
            return Ok(false);
        }
        Ok(true)
    }

    /// Bytes from the socket: through TLS when there is TLS.
    fn input(&mut self, c: &mut Conn, data: &[u8]) -> std::result::Result<(), Failure> {
        let Some(ep) = c.tls.as_mut() else {
            c.plain_in.extend_from_slice(data);
            return Ok(());
        };
        ep.receive(data).map_err(fail("tls"))?;
        if !c.handshake_done {
            let done = ep.drive().map_err(fail("tls"))?;
            ep.take_output(&mut c.out).map_err(fail("tls"))?;
            if !done {
                return Ok(());
            }
            c.handshake_done = true;
            let sample = pqtls_core::trace::attribute(ep.trace());
            let cpu = sample.total_cpu_ns;
            if self.opts.endpoint.traced {
                let mut steps = self.stats.steps_ns.lock().unwrap_or_else(|p| p.into_inner());
                for (k, v) in &sample.steps {
                    *steps.entry(k.clone()).or_insert(0) += v;
                }
            }
            ep.trace().clear();
            self.stats.handshakes.fetch_add(1, Ordering::Relaxed);
            self.stats.handshake_cpu_ns.fetch_add(cpu, Ordering::Relaxed);
        }
        ep.read_app(&mut c.plain_in).map_err(fail("tls"))?;
        // Keep the trace from growing over a long keep-alive connection.
        ep.trace().clear();
        if ep.peer_closed() {
            c.closing = true;
        }
        Ok(())
    }

    /// Parses the complete requests received and queues their responses (one at a time: the
    /// next request waits until the body of the current one is produced).
    fn requests(&mut self, c: &mut Conn) -> std::result::Result<(), Failure> {
        while c.body_left == 0 && !c.closing {
            let (req, used) = match http::parse(&c.plain_in) {
                Ok(Some(x)) => x,
                Ok(None) => return Ok(()),
                Err(e) => {
                    self.respond(c, 400, format!("{e}\n").into_bytes(), false)?;
                    self.stats.error("http", e);
                    return Ok(());
                }
            };
            c.plain_in.drain(..used);
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            let keep = req.keep_alive && self.opts.keep_alive;
            match http::route(&req) {
                Route::Bytes(n) => {
                    self.write_plain(c, &http::head(200, n, keep, "application/octet-stream"))?;
                    c.body_left = n;
                    self.stats.response_bytes.fetch_add(n, Ordering::Relaxed);
                    c.closing = !keep;
                }
                Route::Stats => {
                    let body = serde_json::to_vec(&self.stats.snapshot())
                        .map_err(|e| Failure { kind: "http", message: e.to_string() })?;
                    self.respond(c, 200, body, keep)?;
                }
                Route::Error(status, why) => self.respond(c, status, format!("{why}\n").into_bytes(), keep)?,
            }
            if c.closing {
                self.produce(c)?;
            }
        }
        Ok(())
    }

    fn respond(&mut self, c: &mut Conn, status: u16, body: Vec<u8>, keep: bool) -> std::result::Result<(), Failure> {
        let ctype = if status == 200 { "application/json" } else { "text/plain" };
        self.write_plain(c, &http::head(status, body.len() as u64, keep, ctype))?;
        self.write_plain(c, &body)?;
        c.closing = !keep;
        Ok(())
    }

    /// Queues plaintext: encrypted when there is TLS.
    fn write_plain(&mut self, c: &mut Conn, data: &[u8]) -> std::result::Result<(), Failure> {
        match c.tls.as_mut() {
            Some(ep) => {
                ep.write_app(data).map_err(fail("tls"))?;
                ep.take_output(&mut c.out).map_err(fail("tls"))?;
                ep.trace().clear();
            }
            None => c.out.extend_from_slice(data),
        }
        Ok(())
    }

    /// Produces body bytes while the output queue is short; at the end of a closing
    /// response, the close_notify.
    fn produce(&mut self, c: &mut Conn) -> std::result::Result<(), Failure> {
        const FILL: [u8; CHUNK] = [b'x'; CHUNK];
        while c.body_left > 0 && c.out.len() < 4 * CHUNK {
            let n = (c.body_left as usize).min(CHUNK);
            self.write_plain(c, &FILL[..n])?;
            c.body_left -= n as u64;
        }
        if c.body_left == 0 && c.closing && !c.close_sent {
            c.close_sent = true;
            if let Some(ep) = c.tls.as_mut() {
                if c.handshake_done {
                    ep.close().map_err(fail("tls"))?;
                    ep.take_output(&mut c.out).map_err(fail("tls"))?;
                }
            }
        }
        Ok(())
    }

    /// Writes what is queued; `Ok(false)` when the socket is full (writable interest set).
    fn flush(&mut self, c: &mut Conn) -> std::result::Result<bool, Failure> {
        loop {
            while !c.out.is_empty() {
                match c.stream.write(&c.out) {
                    Ok(0) => return Err(Failure { kind: "io", message: "the socket accepted no bytes".into() }),
                    Ok(n) => {
                        c.out.drain(..n);
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => {
                        if !c.want_write {
                            c.want_write = true;
                            self.poll
                                .registry()
                                .reregister(&mut c.stream, c.token, Interest::READABLE | Interest::WRITABLE)
                                .map_err(io_fail)?;
                        }
                        return Ok(false);
                    }
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => return Err(io_fail(e)),
                }
            }
            if c.body_left == 0 {
                break;
            }
            self.produce(c)?;
        }
        if c.want_write {
            c.want_write = false;
            self.poll.registry().reregister(&mut c.stream, c.token, Interest::READABLE).map_err(io_fail)?;
        }
        // The next pipelined request, if the client sent one already.
        if !c.closing && !c.plain_in.is_empty() {
            self.requests(c)?;
            if !c.out.is_empty() || c.body_left > 0 {
                return self.flush(c);
            }
        }
        Ok(true)
    }
}
