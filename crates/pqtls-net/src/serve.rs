//! `pqtls serve`: an HTTPS/1.1 server (or plain HTTP, `--plain`) over the lab's sans-IO TLS
//! endpoints. N worker threads, each with its own `mio` event loop, all accepting from ONE
//! listening socket (no `SO_REUSEPORT`: no other process can bind the port while it is held,
//! and a port another process holds is an error, docs/serve.md).
//! Per connection the server CPU of the handshake is the thread CPU clock around the stack's
//! calls (the trace's call boundaries, as in situ), summed into the counters.
//!
//! Against hostile peers: a handshake, a request head, an idle keep-alive connection and a
//! stalled response each have a timeout ([`Limits`]); connections are capped (by default from
//! the file-descriptor limit; over the cap they are accepted and closed at once, counted);
//! when accepting fails for want of descriptors (EMFILE/ENFILE) the workers stop accepting for
//! a moment instead of spinning. Every refusal is counted in `/stats`.

use crate::http::{self, Route};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Token, Waker};
use pqtls_core::backend::{Endpoint, EndpointOptions, Prepared};
pub use pqtls_core::load::ErrorCount;
use pqtls_core::load::{count_error, PhaseTotals};
use pqtls_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

/// How long a connection may take at each stage, and how many may be open: what keeps hostile
/// or broken peers from holding the server. The defaults are nginx's (`ssl_handshake_timeout`,
/// `client_header_timeout`, `keepalive_timeout`, `send_timeout`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// From accepting a connection to the end of its TLS handshake (in total: a peer that
    /// trickles its ClientHello is closed all the same).
    pub handshake_timeout: Duration,
    /// From the first byte of a request head (for a connection's first request: from the end
    /// of the handshake, or from accepting without TLS) until the head is complete.
    pub header_timeout: Duration,
    /// A keep-alive connection between a response and the next request's first byte.
    pub idle_timeout: Duration,
    /// A response the peer stops reading: this long without a byte written.
    pub send_timeout: Duration,
    /// Connections open at once (all workers); more are accepted and closed at once.
    /// `None`: [`default_max_connections`].
    pub max_connections: Option<usize>,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            handshake_timeout: Duration::from_secs(60),
            header_timeout: Duration::from_secs(60),
            idle_timeout: Duration::from_secs(75),
            send_timeout: Duration::from_secs(60),
            max_connections: None,
        }
    }
}

/// Descriptors kept for everything but connections: stdio, the key log, each worker's event
/// loop, waker and listening socket, the TLS libraries' files.
fn reserved_fds(workers: usize) -> u64 {
    24 + 3 * workers as u64
}

/// The soft limit on open files of this process (`ulimit -n`), if it can be read.
pub fn fd_limit() -> Option<u64> {
    use nix::sys::resource::{getrlimit, Resource};
    getrlimit(Resource::RLIMIT_NOFILE).ok().map(|(soft, _hard)| soft)
}

/// The default connection cap: what the file-descriptor limit leaves after
/// [`reserved_fds`] (at least 1; 4096 when the limit cannot be read... or is unlimited, at most
/// 1 << 20).
pub fn default_max_connections(workers: usize) -> usize {
    match fd_limit() {
        Some(limit) => limit.saturating_sub(reserved_fds(workers)).clamp(1, 1 << 20) as usize,
        None => 4096,
    }
}

/// The connection cap the file-descriptor limit allows without EMFILE (for a warning when one
/// above it is asked for).
pub fn fd_capacity(workers: usize) -> Option<usize> {
    fd_limit().map(|l| l.saturating_sub(reserved_fds(workers)) as usize)
}

/// The server's counters, shared by its workers.
#[derive(Debug, Default)]
pub struct Stats {
    connections: AtomicU64,
    /// Connections open now.
    open: AtomicUsize,
    max_connections: AtomicUsize,
    handshakes: AtomicU64,
    requests: AtomicU64,
    response_bytes: AtomicU64,
    response_bytes_asked: AtomicU64,
    timeouts: [AtomicU64; 4],
    refused_at_cap: AtomicU64,
    accept_errors: AtomicU64,
    handshake_cpu_ns: AtomicU64,
    /// Its phases ([`pqtls_core::load::HandshakePhases`]), summed.
    first_flight_cpu_ns: AtomicU64,
    completion_cpu_ns: AtomicU64,
    errors: Mutex<Vec<ErrorCount>>,
    /// With traced endpoints (`--trace`): Σ ns per canonical step over the handshakes.
    steps_ns: Mutex<indexmap::IndexMap<String, u64>>,
    /// The process's heap is counted ([`Server::count_heap`]): what the counters cover.
    heap: Mutex<Option<pqtls_core::backend::AllocationCoverage>>,
    /// What the workers' threads allocated and freed while allocations were counted (each
    /// worker adds its thread's counters after every round of events): the server's own heap
    /// traffic even when the load generator shares the process.
    workers_heap: WorkersHeap,
}

/// Sums of the workers' thread-local allocation counters ([`Stats::workers_heap`]).
#[derive(Debug, Default)]
struct WorkersHeap {
    allocations: AtomicU64,
    frees: AtomicU64,
    allocated_bytes: AtomicU64,
    freed_bytes: AtomicU64,
}

impl WorkersHeap {
    /// Adds what this thread counted since `last` (and moves `last` on).
    fn publish(&self, last: &mut pqtls_core::memory::MemStamp) {
        let now = pqtls_core::memory::stamp();
        let d = now.since(last);
        self.allocations.fetch_add(d.allocations, Ordering::Relaxed);
        self.frees.fetch_add(d.frees, Ordering::Relaxed);
        self.allocated_bytes.fetch_add(d.allocated_bytes, Ordering::Relaxed);
        self.freed_bytes.fetch_add(d.freed_bytes, Ordering::Relaxed);
        *last = now;
    }

    fn reading(&self) -> pqtls_core::resident::HeapReading {
        let r = |a: &AtomicU64| a.load(Ordering::Relaxed);
        pqtls_core::resident::HeapReading::of(
            r(&self.allocations),
            r(&self.frees),
            r(&self.allocated_bytes),
            r(&self.freed_bytes),
        )
    }
}

/// Why a connection failed.
struct Failure {
    kind: &'static str,
    message: String,
}

fn fail(kind: &'static str) -> impl Fn(Error) -> Failure {
    move |e| Failure { kind, message: e.to_string() }
}

/// A connection whose TLS failed (a bad ClientHello, a record that does not decrypt): the alert
/// its stack queued goes out before the close (RFC 8446 §6: the peer learns why), after what was
/// still waiting to be written — one non-blocking write, best effort (a peer that does not read
/// does not hold the server).
fn send_alert(c: &mut Conn) {
    let Some(ep) = c.tls.as_mut() else { return };
    let mut out = std::mem::take(&mut c.out);
    if ep.take_output(&mut out).is_ok() && !out.is_empty() {
        let _ = std::io::Write::write(&mut c.stream, &out);
    }
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
        let timeout = |p: Phase| self.timeouts[p as usize].load(Ordering::Relaxed);
        StatsSnapshot {
            connections: self.connections.load(Ordering::Relaxed),
            // No address validation over TCP.
            address_validated: 0,
            open_connections: self.open.load(Ordering::Relaxed) as u64,
            max_connections: self.max_connections.load(Ordering::Relaxed) as u64,
            handshakes,
            requests: self.requests.load(Ordering::Relaxed),
            response_bytes: self.response_bytes.load(Ordering::Relaxed),
            response_bytes_asked: self.response_bytes_asked.load(Ordering::Relaxed),
            timeouts: Timeouts {
                handshake: timeout(Phase::Handshake),
                header: timeout(Phase::Head),
                idle: timeout(Phase::Idle),
                send: timeout(Phase::Send),
            },
            refused_at_cap: self.refused_at_cap.load(Ordering::Relaxed),
            accept_errors: self.accept_errors.load(Ordering::Relaxed),
            handshake_cpu_ns_total: cpu,
            handshake_cpu_ns_mean: if handshakes > 0 { cpu as f64 / handshakes as f64 } else { 0.0 },
            phase_cpu_ns: PhaseTotals {
                first_flight_cpu_ns: self.first_flight_cpu_ns.load(Ordering::Relaxed),
                completion_cpu_ns: self.completion_cpu_ns.load(Ordering::Relaxed),
            },
            errors,
            steps_ns_mean: (self.steps_ns.lock().unwrap_or_else(|p| p.into_inner()).iter())
                .map(|(k, v)| (k.clone(), *v as f64 / handshakes.max(1) as f64))
                .collect(),
            heap: self.heap.lock().unwrap_or_else(|p| p.into_inner()).as_ref().and_then(|c| {
                pqtls_core::memory::process_totals().map(|reading| pqtls_core::resident::HeapCounters {
                    reading,
                    counted: c.counted.clone(),
                    not_counted: c.not_counted.clone(),
                })
            }),
            workers_heap: pqtls_core::memory::counting().then(|| self.workers_heap.reading()),
            negotiated_groups: indexmap::IndexMap::new(),
        }
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// The counters at one moment (`GET /stats` answers with this as JSON).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StatsSnapshot {
    /// Connections accepted and served (not those refused at the cap).
    pub connections: u64,
    /// QUIC: connections that came with a valid address-validation token (0 over TCP; not in
    /// `/stats` then).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub address_validated: u64,
    /// Connections open at this moment.
    #[serde(default)]
    pub open_connections: u64,
    /// The connection cap.
    #[serde(default)]
    pub max_connections: u64,
    /// Completed TLS handshakes.
    pub handshakes: u64,
    pub requests: u64,
    /// Response body bytes written to the sockets (a response the client abandons counts what
    /// was sent, to within one 16 KiB chunk, not what it asked for).
    pub response_bytes: u64,
    /// Response body bytes asked for (the `Content-Length`s of the responses begun).
    #[serde(default)]
    pub response_bytes_asked: u64,
    /// Connections closed because a stage took longer than its timeout.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Connections accepted and closed at once because `max_connections` were open.
    #[serde(default)]
    pub refused_at_cap: u64,
    /// Failed accepts (EMFILE/ENFILE: out of file descriptors; the workers then stop accepting
    /// for a moment), with the last message under `errors` (kind `accept`).
    #[serde(default)]
    pub accept_errors: u64,
    /// Server CPU inside the TLS stack's calls until each handshake completed, summed.
    pub handshake_cpu_ns_total: u64,
    pub handshake_cpu_ns_mean: f64,
    /// Its phases (pqtls_core::load::HandshakePhases), summed (zero from older servers).
    #[serde(default)]
    pub phase_cpu_ns: PhaseTotals,
    /// Errors by kind (`tls`, `http`, `io`), with the last message of each.
    pub errors: Vec<ErrorCount>,
    /// With `--trace`: the server's mean CPU per canonical step per handshake, under load
    /// (the in-situ attribution rule, docs/attribution.md); empty otherwise.
    #[serde(default, skip_serializing_if = "indexmap::IndexMap::is_empty")]
    pub steps_ns_mean: indexmap::IndexMap<String, f64>,
    /// With `--memory`: the process's heap now (every thread's counted allocations since the
    /// server started), and what is counted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<pqtls_core::resident::HeapCounters>,
    /// While allocations are counted (`pqtls load --memory` with the server in its process,
    /// `pqtls serve --memory`): what the worker threads allocated and freed since counting
    /// began — the server's own heap traffic, whoever else shares the process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers_heap: Option<pqtls_core::resident::HeapReading>,
    /// `serve --quic`: completed handshakes by the group they negotiated (read from the
    /// ServerHello written); empty over TCP.
    #[serde(default, skip_serializing_if = "indexmap::IndexMap::is_empty")]
    pub negotiated_groups: indexmap::IndexMap<String, u64>,
}

/// Connections closed by each timeout of [`Limits`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeouts {
    pub handshake: u64,
    pub header: u64,
    pub idle: u64,
    pub send: u64,
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

/// The listening socket, shared by every worker. `SO_REUSEADDR` (rebinding a port whose old
/// connections linger in TIME_WAIT) but not `SO_REUSEPORT`: with it, a second process that also
/// sets it could bind the same port and take part of our connections (or we part of its).
fn listener(addr: SocketAddr) -> Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let ctx = |what: &str| format!("{what} {addr}");
    let s = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))
        .map_err(|e| Error::io(ctx("creating a socket for"), e))?;
    s.set_reuse_address(true).map_err(|e| Error::io(ctx("SO_REUSEADDR on"), e))?;
    s.set_nonblocking(true).map_err(|e| Error::io(ctx("non-blocking"), e))?;
    s.bind(&addr.into()).map_err(|e| match e.kind() {
        ErrorKind::AddrInUse => Error::Invalid(format!(
            "{addr} is in use by another program (another server listens there); stop it or pick another port \
             (e.g. --listen 127.0.0.1:0 for a free one)"
        )),
        _ => Error::io(ctx("binding"), e),
    })?;
    s.listen(1024).map_err(|e| Error::io(ctx("listening on"), e))?;
    Ok(s.into())
}

impl Server {
    /// Binds and starts the workers, with the default [`Limits`].
    pub fn start(opts: ServeOptions) -> Result<Server> {
        Server::start_with(opts, Limits::default())
    }

    /// Binds and starts the workers.
    pub fn start_with(opts: ServeOptions, limits: Limits) -> Result<Server> {
        if opts.threads == 0 || opts.threads > 256 {
            return Err(Error::Invalid(format!("{} server workers: give 1 to 256 (e.g. --workers 2)", opts.threads)));
        }
        for (what, d) in [
            ("handshake", limits.handshake_timeout),
            ("header", limits.header_timeout),
            ("idle", limits.idle_timeout),
            ("send", limits.send_timeout),
        ] {
            if d.is_zero() {
                return Err(Error::Invalid(format!("a {what} timeout of 0: give a duration, e.g. 10s")));
            }
        }
        let max_connections = limits.max_connections.unwrap_or_else(|| default_max_connections(opts.threads));
        if max_connections == 0 {
            return Err(Error::Invalid("at most 0 connections: give at least 1 (e.g. --max-connections 1000)".into()));
        }
        let first = listener(opts.listen)?;
        let addr = first.local_addr().map_err(|e| Error::io("reading the bound address", e))?;
        // One listening socket; each worker accepts from its own descriptor of it.
        let mut sockets = Vec::new();
        for _ in 1..opts.threads {
            sockets.push(first.try_clone().map_err(|e| Error::io(format!("sharing the socket of {addr}"), e))?);
        }
        sockets.push(first);
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        stats.max_connections.store(max_connections, Ordering::Relaxed);
        let mut wakers = Vec::new();
        let mut workers = Vec::new();
        for (i, sock) in sockets.into_iter().enumerate() {
            let poll = Poll::new().map_err(|e| Error::io("creating an event loop", e))?;
            let waker = Arc::new(Waker::new(poll.registry(), WAKER).map_err(|e| Error::io("creating a waker", e))?);
            wakers.push(waker);
            let (stop, stats, opts, limits) = (stop.clone(), stats.clone(), opts.clone(), limits.clone());
            let worker = std::thread::Builder::new()
                .name(format!("pqtls-serve-{i}"))
                .spawn(move || {
                    let mut w = Worker::new(poll, TcpListener::from_std(sock), opts, stats, stop);
                    w.limits = limits;
                    w.max_connections = max_connections;
                    w.run()
                })
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

    /// Reports the process's heap in the counters from now on (`pqtls serve --memory`): the
    /// caller has started process-wide counting ([`pqtls_core::memory::start_process_totals`])
    /// with `coverage`'s hooks in place.
    pub fn count_heap(&self, coverage: pqtls_core::backend::AllocationCoverage) {
        *self.stats.heap.lock().unwrap_or_else(|p| p.into_inner()) = Some(coverage);
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

/// What a connection is waiting for: each stage has its timeout (the index into
/// `Stats::timeouts`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Handshake = 0,
    /// A request head (the first one after the handshake, or one begun).
    Head = 1,
    /// Keep-alive: nothing asked since the last response.
    Idle = 2,
    /// A response is being written.
    Send = 3,
}

/// One connection's state.
struct Conn {
    stream: TcpStream,
    token: Token,
    tls: Option<Box<dyn Endpoint>>,
    handshake_done: bool,
    /// The handshake's CPU up to writing the server's first flight, once written.
    first_flight_cpu_ns: Option<u64>,
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
    phase: Phase,
    /// When the phase began (for `Send`: the last byte written); its deadline counts from here.
    since: Instant,
    /// Requests answered on this connection.
    served: u64,
    /// Bytes written to the socket so far, and the body bytes queued in `out`: (the written
    /// count at which the chunk's last byte is out, its body bytes).
    written: u64,
    body_marks: VecDeque<(u64, u64)>,
    /// How far `plain_in` was searched for the end of a head.
    head_scanned: usize,
    /// Reading stopped with bytes perhaps left in the socket: pipelined requests wait there
    /// until what was asked before is answered and written.
    read_paused: bool,
}

struct Worker {
    poll: Poll,
    listener: TcpListener,
    opts: ServeOptions,
    stats: Arc<Stats>,
    stop: Arc<AtomicBool>,
    conns: Vec<Option<Conn>>,
    limits: Limits,
    max_connections: usize,
    /// When the next deadline may have passed (the connections are swept then).
    next_sweep: Instant,
    /// Accepting stopped until then (the process ran out of file descriptors).
    accept_paused_until: Option<Instant>,
    /// This thread's allocation counters when last added to [`Stats::workers_heap`].
    heap_published: pqtls_core::memory::MemStamp,
}

/// How long accepting stops after EMFILE/ENFILE.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(250);
/// The longest wait for events (the stop flag is also checked then).
const TICK: Duration = Duration::from_millis(500);
/// Plaintext received and not yet answered that a connection may hold: past it, the server
/// stops reading from the connection until what was asked is answered (a client pipelining
/// requests is slowed by TCP's flow control, not served from ever more memory).
const MAX_PENDING_BYTES: usize = 4 * http::MAX_HEAD_BYTES;
/// Bytes waiting for the socket past which reading stops the same way (answers to pipelined
/// requests for little or nothing, to a client that reads none of them).
const MAX_QUEUED_OUT_BYTES: usize = 16 * CHUNK;

/// Body bytes produced per step (and the most plaintext queued per TLS write).
const CHUNK: usize = 16 * 1024;

impl Worker {
    fn new(poll: Poll, listener: TcpListener, opts: ServeOptions, stats: Arc<Stats>, stop: Arc<AtomicBool>) -> Worker {
        Worker {
            poll,
            listener,
            opts,
            stats,
            stop,
            conns: Vec::new(),
            limits: Limits::default(),
            max_connections: usize::MAX,
            next_sweep: Instant::now() + TICK,
            accept_paused_until: None,
            heap_published: pqtls_core::memory::stamp(),
        }
    }

    fn timeout(&self, p: Phase) -> Duration {
        match p {
            Phase::Handshake => self.limits.handshake_timeout,
            Phase::Head => self.limits.header_timeout,
            Phase::Idle => self.limits.idle_timeout,
            Phase::Send => self.limits.send_timeout,
        }
    }

    /// Sets a connection's phase from its state (a new phase starts its clock) and makes sure
    /// the sweep comes by its deadline.
    fn settle(&mut self, c: &mut Conn) {
        let phase = if !c.handshake_done {
            Phase::Handshake
        } else if !c.out.is_empty() || c.body_left > 0 {
            Phase::Send
        } else if !c.plain_in.is_empty() || c.served == 0 {
            Phase::Head
        } else {
            Phase::Idle
        };
        if phase != c.phase {
            c.phase = phase;
            c.since = Instant::now();
        }
        let deadline = c.since + self.timeout(c.phase);
        self.next_sweep = self.next_sweep.min(deadline);
    }

    /// Closes the connections whose phase took longer than its timeout, counted by phase.
    fn sweep(&mut self) {
        let now = Instant::now();
        let mut next = now + TICK;
        for slot in 0..self.conns.len() {
            let Some(c) = &self.conns[slot] else { continue };
            let deadline = c.since + self.timeout(c.phase);
            if deadline <= now {
                let Some(c) = self.conns[slot].take() else { continue };
                self.stats.timeouts[c.phase as usize].fetch_add(1, Ordering::Relaxed);
                self.close(c);
            } else {
                next = next.min(deadline);
            }
        }
        self.next_sweep = next;
    }

    fn run(mut self) -> Result<()> {
        self.poll
            .registry()
            .register(&mut self.listener, LISTENER, Interest::READABLE)
            .map_err(|e| Error::io("registering the listener", e))?;
        let mut events = Events::with_capacity(1024);
        while !self.stop.load(Ordering::SeqCst) {
            let now = Instant::now();
            let mut wake = self.next_sweep.min(now + TICK);
            if let Some(t) = self.accept_paused_until {
                wake = wake.min(t);
            }
            match self.poll.poll(&mut events, Some(wake.saturating_duration_since(now))) {
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
            let now = Instant::now();
            if now >= self.next_sweep {
                self.sweep();
            }
            // The listener is edge-triggered: connections that waited in the backlog while
            // accepting was paused raise no new event.
            if self.accept_paused_until.is_some_and(|t| now >= t) {
                self.accept();
            }
            if pqtls_core::memory::counting() {
                self.stats.workers_heap.publish(&mut self.heap_published);
            }
        }
        Ok(())
    }

    fn accept(&mut self) {
        if let Some(t) = self.accept_paused_until {
            if Instant::now() < t {
                return;
            }
            self.accept_paused_until = None;
        }
        loop {
            match self.listener.accept() {
                Ok((mut stream, _)) => {
                    if self.stats.open.load(Ordering::Relaxed) >= self.max_connections {
                        // Closed at once: the peer learns now, rather than waiting in the backlog.
                        self.stats.refused_at_cap.fetch_add(1, Ordering::Relaxed);
                        let _ = stream.shutdown(std::net::Shutdown::Both);
                        continue;
                    }
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
                    self.stats.open.fetch_add(1, Ordering::Relaxed);
                    let handshake_done = tls.is_none();
                    let mut conn = Conn {
                        stream,
                        token: Token(slot + FIRST_CONN),
                        tls,
                        handshake_done,
                        first_flight_cpu_ns: None,
                        plain_in: Vec::new(),
                        out: Vec::new(),
                        body_left: 0,
                        closing: false,
                        close_sent: false,
                        want_write: false,
                        phase: if handshake_done { Phase::Head } else { Phase::Handshake },
                        since: Instant::now(),
                        served: 0,
                        written: 0,
                        body_marks: VecDeque::new(),
                        head_scanned: 0,
                        read_paused: false,
                    };
                    self.settle(&mut conn);
                    self.conns[slot] = Some(conn);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // The peer gave up before it was accepted: nothing to do about it.
                Err(e) if e.kind() == ErrorKind::ConnectionAborted => continue,
                Err(e) => {
                    // EMFILE/ENFILE (out of descriptors), ENOBUFS/ENOMEM: accepting again at
                    // once would fail again (a busy loop); stop for a moment. The connections
                    // waiting meanwhile stay in the backlog.
                    use nix::errno::Errno;
                    let why = match e.raw_os_error().map(Errno::from_raw) {
                        Some(Errno::EMFILE) => " (this process is out of file descriptors: ulimit -n)",
                        Some(Errno::ENFILE) => " (the system is out of file descriptors)",
                        _ => "",
                    };
                    self.stats.accept_errors.fetch_add(1, Ordering::Relaxed);
                    self.stats.error("accept", format!("accepting: {e}{why}"));
                    self.accept_paused_until = Some(Instant::now() + ACCEPT_BACKOFF);
                    return;
                }
            }
        }
    }

    fn on_conn(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(mut conn) = self.conns.get_mut(slot).and_then(Option::take) else { return };
        let keep = self.serve(&mut conn, readable, writable);
        match keep {
            Ok(true) => {
                self.settle(&mut conn);
                self.conns[slot] = Some(conn);
            }
            Ok(false) => self.close(conn),
            Err(f) => {
                if f.kind == "tls" {
                    send_alert(&mut conn);
                }
                self.stats.error(f.kind, f.message);
                self.close(conn);
            }
        }
    }

    fn close(&mut self, mut conn: Conn) {
        self.stats.open.fetch_sub(1, Ordering::Relaxed);
        let _ = self.poll.registry().deregister(&mut conn.stream);
        let _ = conn.stream.shutdown(std::net::Shutdown::Both);
    }

    /// Moves one connection forward; `Ok(false)`: it is finished; `Err(kind)`: it failed.
    fn serve(&mut self, c: &mut Conn, readable: bool, writable: bool) -> std::result::Result<bool, Failure> {
        let mut peer_gone = false;
        let mut readable = readable;
        loop {
            if readable {
                peer_gone = self.read(c)?;
            }
            if readable || writable {
                self.produce(c)?;
                if !self.flush(c)? {
                    return Ok(true);
                }
            }
            // Everything asked so far is answered and written: read the requests that waited
            // in the socket (no event comes for them: readiness is edge-triggered).
            if c.read_paused && !peer_gone && !c.closing {
                readable = true;
                continue;
            }
            break;
        }
        if peer_gone || (c.closing && c.out.is_empty() && c.body_left == 0) {
            return Ok(false);
        }
        Ok(true)
    }

    /// Reads what the socket has (until it would block, or until enough is waiting to be
    /// answered or written: then `read_paused`), answering the complete requests as it goes;
    /// `Ok(true)`: the peer closed its side.
    fn read(&mut self, c: &mut Conn) -> std::result::Result<bool, Failure> {
        c.read_paused = false;
        let mut buf = [0u8; 64 * 1024];
        let mut peer_gone = false;
        loop {
            match c.stream.read(&mut buf) {
                Ok(0) => {
                    peer_gone = true;
                    break;
                }
                Ok(n) => {
                    self.input(c, &buf[..n])?;
                    // Answer (or refuse) what is complete before reading more, so that what a
                    // connection holds stays bounded.
                    self.requests(c)?;
                    if c.closing {
                        break;
                    }
                    if c.plain_in.len() > MAX_PENDING_BYTES || c.out.len() > MAX_QUEUED_OUT_BYTES {
                        c.read_paused = true;
                        break;
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_fail(e)),
            }
        }
        self.requests(c)?;
        Ok(peer_gone)
    }

    /// Bytes from the socket: through TLS when there is TLS.
    fn input(&mut self, c: &mut Conn, data: &[u8]) -> std::result::Result<(), Failure> {
        let Some(ep) = c.tls.as_mut() else {
            c.plain_in.extend_from_slice(data);
            return Ok(());
        };
        let mark = ep.trace().events.len();
        ep.receive(data).map_err(fail("tls"))?;
        if !c.handshake_done {
            let queued = c.out.len();
            let done = ep.drive().map_err(fail("tls"))?;
            ep.take_output(&mut c.out).map_err(fail("tls"))?;
            if c.first_flight_cpu_ns.is_none() && c.out.len() > queued {
                c.first_flight_cpu_ns = Some(ep.trace().calls_cpu_ns_since(0));
            }
            if !done {
                return Ok(());
            }
            c.handshake_done = true;
            let completion = ep.trace().calls_cpu_ns_since(mark);
            let sample = pqtls_core::trace::attribute(ep.trace());
            let cpu = sample.total_cpu_ns;
            self.stats.first_flight_cpu_ns.fetch_add(c.first_flight_cpu_ns.unwrap_or(0), Ordering::Relaxed);
            self.stats.completion_cpu_ns.fetch_add(completion, Ordering::Relaxed);
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
        while c.body_left == 0 && !c.closing && !c.plain_in.is_empty() {
            // Parse a head's first bytes (bytes that are not HTTP are refused at once), then
            // again only once its end may be there or the limit is reached: a head sent byte by
            // byte is not parsed again for every byte.
            let limit = c.plain_in.len().min(http::MAX_HEAD_BYTES);
            if c.head_scanned > 0
                && c.plain_in.len() < http::MAX_HEAD_BYTES
                && !http::head_may_end(&c.plain_in, c.head_scanned)
            {
                c.head_scanned = limit;
                return Ok(());
            }
            let (req, used) = match http::parse(&c.plain_in) {
                Ok(Some(x)) => x,
                Ok(None) => {
                    c.head_scanned = limit;
                    return Ok(());
                }
                Err(e) => {
                    self.respond(c, e.status, format!("{}\n", e.message).into_bytes(), false)?;
                    self.stats.error("http", e.message);
                    return Ok(());
                }
            };
            c.plain_in.drain(..used);
            c.head_scanned = 0;
            c.served += 1;
            self.stats.requests.fetch_add(1, Ordering::Relaxed);
            let keep = req.keep_alive && self.opts.keep_alive;
            match http::route(&req) {
                Route::Bytes(n) => {
                    self.write_plain(c, &http::head(200, n, keep, "application/octet-stream"))?;
                    c.body_left = n;
                    self.stats.response_bytes_asked.fetch_add(n, Ordering::Relaxed);
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
            // Counted as sent once the socket took the chunk's last byte.
            c.body_marks.push_back((c.written + c.out.len() as u64, n as u64));
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
                        c.written += n as u64;
                        if c.handshake_done {
                            // The send timeout counts from the last progress (the handshake's
                            // from its start).
                            c.since = Instant::now();
                        }
                        let mut sent = 0;
                        while c.body_marks.front().is_some_and(|&(end, _)| end <= c.written) {
                            sent += c.body_marks.pop_front().map_or(0, |(_, b)| b);
                        }
                        if sent > 0 {
                            self.stats.response_bytes.fetch_add(sent, Ordering::Relaxed);
                        }
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
            if c.body_left > 0 {
                self.produce(c)?;
                continue;
            }
            // The next pipelined request, if the client sent one already: answered in this
            // loop, not by recursion (thousands of small requests may be waiting).
            if !c.closing && !c.plain_in.is_empty() {
                self.requests(c)?;
                if !c.out.is_empty() || c.body_left > 0 {
                    continue;
                }
            }
            break;
        }
        if c.want_write {
            c.want_write = false;
            self.poll.registry().reregister(&mut c.stream, c.token, Interest::READABLE).map_err(io_fail)?;
        }
        Ok(true)
    }
}
