//! `pqtls load`: the load generator. Threads × connections, each thread with its own `mio`
//! event loop and its own share of the connections and of the rate.
//!
//! - **Closed loop** (no rate): every connection slot starts its next transaction as soon as
//!   the previous one ends; latency counts from that start.
//! - **Open loop** (a rate): transactions are due on a timetable (thread `i` of `n` at
//!   `t0 + (k + i/n) / rate_i`); a due transaction waits for a free slot if all are busy, and
//!   its latency counts from when it was *due*, not from when it could start — a stalled
//!   server shows up in the percentiles instead of silently lowering the rate (no coordinated
//!   omission, as wrk2). Achieved vs target rate is reported.
//!
//! Every transaction keeps its client-side [`Timeline`] (connect, connected, ClientHello
//! written, handshake done, request written, first and last response byte). The client CPU
//! of a handshake is the thread CPU clock around the stack's calls, as in situ. The first
//! handshake's negotiated parameters (group, cipher suite, signature scheme) must match what was
//! asked; a mismatch ends the run with an error naming both.
//!
//! Against hostile servers and bad limits: the file descriptors the connections need are
//! checked (the soft limit raised to the hard one when needed, or the run refused with the
//! number of connections that fits); a transaction's timeout covers it from its start to its
//! last byte, whatever trickles in; response bodies are bounded ([`LoadOptions::max_body_bytes`],
//! errors of kind `body`); the open loop's queue of due requests is bounded (what does not fit
//! is counted as errors of kind `queue`); a server that goes away mid-run (connections refused
//! for [`GONE_AFTER`] after it had answered) ends the run, `stopped = "server gone"`, with the
//! rate over the time it answered; Ctrl-C ends every phase within ~50 ms.

use crate::http;
use crate::response::{Progress, ResponseReader};
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use pqtls_core::backend::{Endpoint, EndpointOptions, Negotiated, Prepared};
use pqtls_core::link::Screened;
use pqtls_core::load::{add_errors, count_error, ErrorCount, PhaseTotals};
pub use pqtls_core::load::{LoadProgress, LoadRun};
use pqtls_core::timeline::Timeline;
use pqtls_core::{Error, Result};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Where the load goes: `http(s)://host[:port]/path`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub addr: SocketAddr,
    /// The `Host` header (and what the URL said).
    pub host: String,
    pub path: String,
    pub tls: bool,
}

impl Target {
    /// Parses and resolves a URL.
    pub fn parse(url: &str) -> Result<Target> {
        let bad = |why: &str| {
            Error::Invalid(format!("URL {url:?}: {why}; give e.g. https://127.0.0.1:8443/1KiB or http://[::1]:8080/"))
        };
        let (tls, rest) = if let Some(r) = url.strip_prefix("https://") {
            (true, r)
        } else if let Some(r) = url.strip_prefix("http://") {
            (false, r)
        } else {
            return Err(bad("it must start with https:// or http://"));
        };
        let (authority, tail) = rest.split_at(rest.find(['/', '?', '#']).unwrap_or(rest.len()));
        if authority.is_empty() {
            return Err(bad("no host"));
        }
        if authority.contains('@') {
            return Err(bad("user information (user@host) is not sent by pqtls load; leave it out"));
        }
        // A fragment is the client's own: never sent (RFC 3986 §3.5).
        let tail = tail.split('#').next().unwrap_or("");
        let path = if tail.starts_with('/') { tail.to_string() } else { format!("/{tail}") };
        // What would go into the request line as it is: a space or a line break there would
        // make another request (or headers) than the URL says.
        if let Some((i, c)) = path.char_indices().find(|(_, c)| !c.is_ascii_graphic()) {
            let what = match c {
                ' ' => "a space".to_string(),
                c if c.is_control() => format!("the control character {c:?}"),
                c => format!("{c:?}, not ASCII"),
            };
            return Err(bad(&format!(
                "its path has {what} at character {i}, which a request line cannot carry; percent-encode it \
                 (e.g. %20 for a space)"
            )));
        }
        let has_port = match authority.rfind(']') {
            Some(b) => authority[b..].contains(':'),
            None => authority.contains(':'),
        };
        let with_port =
            if has_port { authority.to_string() } else { format!("{authority}:{}", if tls { 443 } else { 80 }) };
        let addr = with_port
            .to_socket_addrs()
            .map_err(|e| bad(&format!("the host does not resolve ({e})")))?
            .next()
            .ok_or_else(|| bad("the host has no address"))?;
        Ok(Target { addr, host: authority.to_string(), path, tls })
    }

    pub fn url(&self) -> String {
        format!("{}://{}{}", if self.tls { "https" } else { "http" }, self.host, self.path)
    }

    /// The host without its port (and an IPv6 address without its brackets): the name a
    /// server's certificate is checked for.
    pub fn name(&self) -> &str {
        let h = self.host.as_str();
        match h.strip_prefix('[') {
            Some(rest) => rest.split(']').next().unwrap_or(rest),
            None => h.rsplit_once(':').map_or(h, |(name, _)| name),
        }
    }
}

/// Requests waiting for a free connection in the open loop, over all threads, at most (16 B
/// each); due requests beyond are not sent and are counted as errors of kind `queue`.
pub const MAX_QUEUED: usize = 1_000_000;
/// A response body over this is an error of kind `body`, unless the URL's path names the size
/// asked for (`/1KiB`: that size is the limit). `pqtls load --max-body`.
pub const DEFAULT_MAX_BODY_BYTES: u64 = 64 << 20;
/// Connections refused this long (and nothing answered since) after the server had answered:
/// the server is gone and the run ends (`stopped = "server gone"`).
pub const GONE_AFTER: Duration = Duration::from_secs(1);
/// New connections one thread opens per turn of its event loop (the rest on the next turns:
/// events and Ctrl-C are seen while thousands connect).
const CONNECTS_PER_TURN: usize = 256;
/// File descriptors kept free for everything else (key logs, captures, the PKI, threads' event
/// loops…).
const SPARE_FDS: u64 = 64;

impl Target {
    /// The body size the path asks for (`/1KiB` → 1024), when it names one (`/` names none:
    /// other servers answer it with a page of their own).
    pub fn asked_bytes(&self) -> Option<u64> {
        let p = self.path.split('?').next().unwrap_or("");
        p.strip_prefix('/').filter(|s| !s.is_empty()).and_then(|s| pqtls_core::units::bytes(s).ok())
    }
}

/// Makes sure `threads × connections` sockets (each with `fds_per_connection` descriptors in
/// this process: 2 when this process also serves them) fit under RLIMIT_NOFILE: the soft limit
/// is raised up to the hard one when needed; beyond the hard limit, an error naming the
/// connections that fit and how to raise the limit. Returns the soft limit now in force.
pub fn ensure_fds(threads: usize, connections: usize, fds_per_connection: u64) -> Result<u64> {
    let sockets = (threads as u64) * (connections as u64) * fds_per_connection;
    let what = format!(
        "{threads} threads × {connections} connections need about {{need}} file descriptors{}",
        if fds_per_connection > 1 { " (each connection's server side is in this process too)" } else { "" }
    );
    ensure_descriptors(sockets, 2 * threads as u64, &what, "pqtls load …", &|hard, open| {
        let room = hard.saturating_sub(open + 2 * SPARE_FDS + 2 * threads as u64) / fds_per_connection.max(1);
        let per_thread = room / threads.max(1) as u64;
        if per_thread == 0 {
            format!("not even 1 connection per thread fits: give fewer --threads (at most {room})")
        } else {
            format!("at most {per_thread} connections per thread fit: give --connections {per_thread}")
        }
    })
}

/// Makes sure `sockets` descriptors (and `extra` more: event loops, threads) fit under
/// RLIMIT_NOFILE besides those open now and [`SPARE_FDS`]: the soft limit is raised up to the
/// hard one when needed; beyond the hard limit, an error — `what` (with `{need}` for the count)
/// and `fit(hard, open)` saying what would fit, and how to raise the limit for `command`.
/// Returns the soft limit now in force.
pub fn ensure_descriptors(
    sockets: u64,
    extra: u64,
    what: &str,
    command: &str,
    fit: &dyn Fn(u64, u64) -> String,
) -> Result<u64> {
    use nix::sys::resource::{getrlimit, setrlimit, Resource};
    let (soft, hard) =
        getrlimit(Resource::RLIMIT_NOFILE).map_err(|e| Error::io("reading RLIMIT_NOFILE", std::io::Error::from(e)))?;
    let open = std::fs::read_dir("/proc/self/fd").map(|d| d.count() as u64).unwrap_or(16);
    let need = open + sockets + SPARE_FDS + extra;
    if need <= soft {
        return Ok(soft);
    }
    if need <= hard {
        setrlimit(Resource::RLIMIT_NOFILE, hard, hard)
            .map_err(|e| Error::io("raising RLIMIT_NOFILE to its hard limit", std::io::Error::from(e)))?;
        return Ok(hard);
    }
    // The advice keeps another SPARE_FDS free: what is opened between this check and the next
    // one of the same run (output files, the PKI, the TLS libraries, a capture) must not make
    // the run that follows it fail again by a few descriptors.
    let advised = need + SPARE_FDS;
    Err(Error::Invalid(format!(
        "{}, but this process may open at most {hard} (RLIMIT_NOFILE: soft {soft}, hard {hard}); {} — or raise the \
         limit first: `ulimit -n {advised}` in the shell (above the hard limit, as root; for other users, `nofile` in \
         /etc/security/limits.conf), or `prlimit --nofile={advised}:{advised} -- {command}`",
        what.replace("{need}", &need.to_string()),
        fit(hard, open)
    )))
}

use crate::carrier::tally::{RunState, Tally};
use crate::carrier::Timetable;
pub use crate::carrier::{Client, Expect, LoadOptions};

/// What every worker shares: the run's state, and how the server answered lately.
struct Shared {
    state: RunState,
    /// ns since the origin (+1) of the last completed response, anyone's (0: none yet).
    last_success_ns: AtomicU64,
    /// ns since the origin (+1) of the first refused connection since the last success (0: none).
    refused_since_ns: AtomicU64,
}

impl std::ops::Deref for Shared {
    type Target = RunState;
    fn deref(&self) -> &RunState {
        &self.state
    }
}

/// Runs the load; returns what was measured, or an error when nothing could be (nothing
/// listening, a wrong root, another group negotiated…).
pub fn run(opts: &LoadOptions, interrupt: &AtomicBool, progress: &mut dyn FnMut(&LoadProgress)) -> Result<LoadRun> {
    validate(opts)?;
    ensure_fds(opts.threads, opts.connections, 1)?;
    let shared = Arc::new(Shared {
        state: RunState::new(opts.requests),
        last_success_ns: AtomicU64::new(0),
        refused_since_ns: AtomicU64::new(0),
    });
    let origin = Instant::now();
    let origin_mono_ns = pqtls_core::trace::wall_ns();
    let origin_unix_ns =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let measure_from = origin + opts.warmup;
    let measure_to = measure_from + opts.duration;
    let mut workers = Vec::new();
    for i in 0..opts.threads {
        let slots = opts.connections;
        let plan = Plan {
            index: i,
            slots,
            timetable: opts.rate_per_s.map(|r| Timetable {
                origin,
                rate_per_s: r / opts.threads as f64,
                index: i,
                threads: opts.threads,
            }),
            origin,
            origin_mono_ns,
            measure_from,
            measure_to,
            queue_limit: (MAX_QUEUED / opts.threads).max(1),
        };
        let (o, s) = (opts.clone(), shared.clone());
        let w = std::thread::Builder::new()
            .name(format!("pqtls-load-{i}"))
            .spawn(move || Worker::new(o, s, plan).and_then(Worker::run))
            .map_err(|e| Error::io("starting a load thread", e))?;
        workers.push(w);
    }
    let stopped = supervise(&workers, &shared, opts, [origin, measure_from, measure_to], interrupt, progress);
    let mut results = Vec::new();
    for w in workers {
        results.push(w.join().unwrap_or_else(|_| Err(Error::Other("a load thread panicked".into())))?);
    }
    if let Some(why) = shared.take_fatal() {
        return Err(Error::Invalid(why));
    }
    let measure_to = shared.window_end(measure_to);
    let end = match stopped {
        "duration" => measure_to,
        // The time the server answered: to its last completed response.
        "server gone" => {
            let last = shared.last_success_ns.load(Ordering::SeqCst).saturating_sub(1);
            (origin + Duration::from_nanos(last)).clamp(measure_from, measure_to)
        }
        _ => Instant::now().min(measure_to),
    };
    let duration_ns = end.saturating_duration_since(measure_from).as_nanos() as u64;
    let mut total = ThreadResult::empty(opts.duration);
    for r in results {
        total.add(r)?;
    }
    let Tally {
        latency,
        ttfb,
        layers,
        requests,
        handshakes,
        handshake_cpu_ns,
        all_requests,
        unfinished,
        errors,
        per_second,
        timelines,
    } = total.tally;
    let mut run = LoadRun {
        latency,
        ttfb,
        layers,
        requests,
        handshakes,
        unfinished,
        errors,
        negotiated: shared.negotiated(),
        duration_ns,
        thread_cpu_ns: total.thread_cpu_ns,
        all_requests,
        handshake_cpu_ns,
        verification_cpu_ns: total.verification_cpu_ns,
        phase_cpu_ns: total.phase_cpu_ns,
        per_second,
        timelines,
        origin_unix_ns,
        stopped: stopped.to_string(),
        messages: total.messages,
        handshake_bytes: total.handshake_bytes,
        client_hello_segments: total.client_hello_segments,
        client_hello_datagrams: None,
        stalls: opts.stalls.as_ref().map(|s| shared.stalls.report(s)),
        first_connection: None,
    };
    if run.stopped == "server gone" {
        // Only the seconds it answered (not the dead ones after).
        run.per_second.truncate((run.duration_ns.div_ceil(1_000_000_000) as usize).max(1));
    }
    run.timelines.sort_by_key(|t| t.scheduled_ns.or(t.connect_start_ns).unwrap_or(t.request_ns));
    Ok(run)
}

/// Watches the load threads until they are done: Ctrl-C stops them, and so does a server gone
/// (refused for [`GONE_AFTER`] after it had answered, nothing answered since); progress once a
/// second. Returns why the run stopped. `times`: the origin, and the measured stretch.
fn supervise(
    workers: &[std::thread::JoinHandle<Result<ThreadResult>>],
    shared: &Shared,
    opts: &LoadOptions,
    [origin, measure_from, measure_to]: [Instant; 3],
    interrupt: &AtomicBool,
    progress: &mut dyn FnMut(&LoadProgress),
) -> &'static str {
    let mut stopped = "duration";
    let mut last = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if workers.iter().all(|w| w.is_finished()) {
            if opts.requests.is_some() && now < shared.window_end(measure_to) {
                stopped = "requests";
            }
            break;
        }
        shared.supervise_turn(interrupt, &mut stopped, [origin, measure_from], &mut last, progress);
        // Refused for GONE_AFTER after the server had answered, nothing answered since: gone.
        let refused = shared.refused_since_ns.load(Ordering::SeqCst);
        let since_origin = now.duration_since(origin).as_nanos() as u64 + 1;
        if stopped == "duration"
            && refused > 0
            && since_origin.saturating_sub(refused) >= GONE_AFTER.as_nanos() as u64
            && shared.last_success_ns.load(Ordering::SeqCst) < refused
        {
            stopped = "server gone";
            shared.halt();
        }
    }
    stopped
}

fn validate(o: &LoadOptions) -> Result<()> {
    pqtls_core::load::check_shape(o.threads, 1024, o.connections, o.rate_per_s, o.duration, o.requests)?;
    let Client::Tcp { tls, .. } = &o.client else {
        return Err(Error::Invalid(format!("{}: the TCP load generator runs over TCP, not QUIC", o.target.url())));
    };
    if o.target.tls != tls.is_some() {
        return Err(Error::Invalid(format!(
            "{}: {}",
            o.target.url(),
            if o.target.tls { "an https:// target needs TLS contexts" } else { "an http:// target takes no TLS" }
        )));
    }
    Ok(())
}

/// One thread's share.
struct Plan {
    index: usize,
    slots: usize,
    /// Open loop: the thread's timetable.
    timetable: Option<Timetable>,
    origin: Instant,
    /// The monotonic clock at `origin`, ns (the delay emulator's clock: stall screening).
    origin_mono_ns: u64,
    measure_from: Instant,
    measure_to: Instant,
    /// Open loop: due requests that may wait for a free slot.
    queue_limit: usize,
}

/// A transaction in flight: when it was due (open loop) and whether it is measured.
#[derive(Clone, Copy, Debug)]
struct Tx {
    due: Option<Instant>,
    measured: bool,
    started: Instant,
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
enum State {
    Connecting,
    Handshaking,
    /// Waiting for the response.
    Requesting,
    /// Kept alive, no transaction.
    Idle,
}

struct Conn {
    stream: TcpStream,
    tls: Option<Box<dyn Endpoint>>,
    state: State,
    tx: Option<Tx>,
    timeline: Timeline,
    /// Bytes waiting for the socket.
    out: Vec<u8>,
    /// Decrypted (or plain) bytes not yet given to the response reader.
    plain: Vec<u8>,
    response: ResponseReader,
    want_write: bool,
    /// The server's close_notify was read.
    peer_closed: bool,
    /// The connection's handshake has been counted (and its CPU summed).
    handshake_counted: bool,
    /// What its handshake added to the measured sums (taken back when its transaction is
    /// measured again: [`LoadOptions::stalls`]).
    handshake_added: Option<(u64, PhaseTotals, Option<u64>)>,
    /// The handshake's CPU until the ClientHello was written.
    first_flight_cpu_ns: u64,
    /// Moments still to stamp when the pending output reaches the socket.
    stamp_hello: bool,
    stamp_done: bool,
    stamp_request: bool,
}

/// The bytes of one handshake, as each side sent them, and its secrets: the handshake's
/// message sizes come from them (decrypted as a capture would be, crates/pqtls-capture).
struct Tap {
    keys: Arc<pqtls_core::backend::MemoryKeyLog>,
    slot: Option<usize>,
    client_to_server: Vec<u8>,
    server_to_client: Vec<u8>,
    /// The data segments the client had sent when the server's first bytes arrived: its
    /// ClientHello's.
    client_hello_segments: Option<u64>,
    /// The handshake completed: nothing more is kept.
    done: bool,
}

/// Sends the secrets to two key logs (the user's file and the tap).
struct Tee(Arc<dyn pqtls_core::backend::KeyLog>, Arc<pqtls_core::backend::MemoryKeyLog>);

impl pqtls_core::backend::KeyLog for Tee {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        self.0.log(label, client_random, secret);
        pqtls_core::backend::KeyLog::log(self.1.as_ref(), label, client_random, secret);
    }
}

/// What one thread measured: its [`Tally`], and what only the TCP generator reads (the
/// thread's CPU, the verification's and the handshake phases' CPU, the tapped handshake).
struct ThreadResult {
    tally: Tally,
    thread_cpu_ns: u64,
    verification_cpu_ns: Option<u64>,
    phase_cpu_ns: PhaseTotals,
    /// Thread 0: message sizes of its first complete handshake.
    messages: Option<std::result::Result<indexmap::IndexMap<String, u64>, String>>,
    /// Bytes of that handshake per direction (until the client's Finished; the server's
    /// flight until the client completed).
    handshake_bytes: (u64, u64),
    /// The segments that handshake's ClientHello took.
    client_hello_segments: Option<u64>,
}

impl std::ops::Deref for ThreadResult {
    type Target = Tally;
    fn deref(&self) -> &Tally {
        &self.tally
    }
}

impl std::ops::DerefMut for ThreadResult {
    fn deref_mut(&mut self) -> &mut Tally {
        &mut self.tally
    }
}

impl ThreadResult {
    /// Nothing measured yet, with a count for each second of a run of `duration` (one at least).
    fn empty(duration: Duration) -> ThreadResult {
        ThreadResult {
            tally: Tally::new(duration),
            thread_cpu_ns: 0,
            verification_cpu_ns: None,
            phase_cpu_ns: PhaseTotals::default(),
            messages: None,
            handshake_bytes: (0, 0),
            client_hello_segments: None,
        }
    }

    /// Adds another thread's result; its handshake's sizes taken when it has them.
    fn add(&mut self, other: ThreadResult) -> Result<()> {
        self.tally.add(other.tally)?;
        self.thread_cpu_ns += other.thread_cpu_ns;
        self.phase_cpu_ns += other.phase_cpu_ns;
        if let Some(v) = other.verification_cpu_ns {
            *self.verification_cpu_ns.get_or_insert(0) += v;
        }
        if other.messages.is_some() {
            self.messages = other.messages;
            self.handshake_bytes = other.handshake_bytes;
            self.client_hello_segments = other.client_hello_segments;
        }
        Ok(())
    }
}

struct Worker {
    opts: LoadOptions,
    /// The client contexts (`None`: plain HTTP) and the endpoints' options ([`Client::Tcp`]).
    tls: Option<Arc<dyn Prepared>>,
    endpoint: EndpointOptions,
    shared: Arc<Shared>,
    plan: Plan,
    poll: Poll,
    conns: Vec<Option<Conn>>,
    /// Slots that may hold an idle kept-alive connection / no connection (checked when taken;
    /// `queued_*` keep each slot in each queue at most once).
    idle_q: VecDeque<usize>,
    empty_q: VecDeque<usize>,
    queued_idle: Vec<bool>,
    queued_empty: Vec<bool>,
    /// A response body over this is an error of kind `body`; the hint says where it comes from.
    body_limit: u64,
    body_hint: String,
    /// When transactions are next checked against the timeout.
    next_expire: Instant,
    /// The last turn opened as many connections as one turn may, and more wait.
    more_to_connect: bool,
    /// Open loop: due transactions waiting for a free slot.
    backlog: VecDeque<Instant>,
    /// Open loop: the next due time.
    next_due: Option<Instant>,
    due_count: u64,
    request: Vec<u8>,
    /// Socket reads land here.
    buf: Vec<u8>,
    /// Thread 0 with TLS: one handshake's bytes and secrets.
    tap: Option<Tap>,
    out: ThreadResult,
}

/// The handshake bytes kept of the tapped connection, at most (a server that never completes
/// its handshake does not grow them further).
const TAP_MAX_BYTES: usize = 1 << 20;

/// Why a transaction failed: a kind for the counters and a message.
struct Failure {
    kind: &'static str,
    message: String,
}

/// A failure of `kind` — or of kind `verify` when the server's chain did not verify.
fn failure(kind: &'static str) -> impl Fn(Error) -> Failure {
    move |e| match e {
        Error::Verification { .. } => Failure { kind: "verify", message: e.to_string() },
        e => Failure { kind, message: e.to_string() },
    }
}

fn io_failure(kind: &'static str, e: std::io::Error) -> Failure {
    Failure { kind, message: e.to_string() }
}

impl Worker {
    fn new(opts: LoadOptions, shared: Arc<Shared>, plan: Plan) -> Result<Worker> {
        let Client::Tcp { tls, endpoint } = opts.client.clone() else {
            return Err(Error::Invalid("the TCP load generator was given a QUIC client".into()));
        };
        let poll = Poll::new().map_err(|e| Error::io("creating an event loop", e))?;
        let request = http::get(&opts.target.path, &opts.target.host, opts.keep_alive);
        let next_due = plan.timetable.map(|t| t.due_at(0));
        let (body_limit, body_hint) = match opts.target.asked_bytes() {
            Some(n) => (n, format!("{} asks for {n} bytes", opts.target.path)),
            None => (
                opts.max_body_bytes,
                format!("--max-body {} (the path names no size)", pqtls_core::units::format_bytes(opts.max_body_bytes)),
            ),
        };
        Ok(Worker {
            poll,
            conns: (0..plan.slots).map(|_| None).collect(),
            idle_q: VecDeque::new(),
            empty_q: (0..plan.slots).collect(),
            queued_idle: vec![false; plan.slots],
            queued_empty: vec![true; plan.slots],
            body_limit,
            body_hint,
            next_expire: plan.origin,
            more_to_connect: false,
            backlog: VecDeque::new(),
            next_due,
            due_count: 0,
            request,
            buf: vec![0; 64 * 1024],
            tap: (plan.index == 0 && tls.is_some()).then(|| Tap {
                keys: Arc::new(pqtls_core::backend::MemoryKeyLog::new()),
                slot: None,
                client_to_server: Vec::new(),
                server_to_client: Vec::new(),
                client_hello_segments: None,
                done: false,
            }),
            out: ThreadResult::empty(opts.duration),
            tls,
            endpoint,
            opts,
            shared,
            plan,
        })
    }

    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.plan.origin).as_nanos() as u64
    }

    fn run(mut self) -> Result<ThreadResult> {
        let cpu0 = pqtls_core::trace::thread_cpu_ns();
        let mut events = Events::with_capacity(1024);
        loop {
            let now = Instant::now();
            if self.shared.abort.load(Ordering::SeqCst) {
                break;
            }
            let measure_to = self.shared.window_end(self.plan.measure_to);
            // An open loop goes on past its end while requests due before it are not yet sent
            // (the generator was stalled or stopped across the end): they go late, measured
            // from their due times.
            let overdue = self.plan.timetable.is_some_and(|tt| tt.due_at(self.due_count) < self.plan.measure_to);
            let ending = (now >= measure_to && !overdue) || self.shared.stop.load(Ordering::SeqCst);
            if !ending {
                self.issue(now);
            }
            if now >= self.next_expire {
                self.expire(now);
                self.next_expire = now + Duration::from_millis(5).min(self.opts.timeout / 4);
            }
            if ending && self.conns.iter().all(|c| c.as_ref().is_none_or(|c| c.state == State::Idle)) {
                break;
            }
            if ending && now >= measure_to + self.opts.timeout {
                break;
            }
            let wait = match self.next_due {
                // More connections to open than one turn opens: just look at the events.
                _ if self.more_to_connect && !ending => Duration::ZERO,
                Some(d) if !ending => d.saturating_duration_since(now).min(Duration::from_millis(50)),
                _ => Duration::from_millis(50),
            };
            match self.poll.poll(&mut events, Some(wait)) {
                Ok(()) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(Error::io("waiting for events", e)),
            }
            for ev in events.iter() {
                self.on_event(ev.token().0, ev.is_readable() || ev.is_read_closed(), ev.is_writable());
            }
        }
        // What is still in flight did not finish.
        for slot in 0..self.conns.len() {
            if let Some(c) = self.conns[slot].take() {
                if let Some(tx) = c.tx {
                    if tx.measured {
                        self.out.unfinished += 1;
                    }
                }
                self.close(c);
            }
        }
        if let Some(tt) = self.plan.timetable {
            self.out.unfinished += self.backlog.iter().filter(|d| self.measured(**d)).count() as u64;
            // Due but never queued (the run was interrupted or ended by an error first): unfinished
            // too — every due request is sent, late if need be, or counted, none dropped.
            let to =
                tt.first_due_at_or_after(self.due_count, tt.due_by(self.plan.measure_to) + 1, self.plan.measure_to);
            let from = tt.first_due_at_or_after(self.due_count, to, self.plan.measure_from);
            self.out.unfinished += to - from;
        }
        self.out.thread_cpu_ns = pqtls_core::trace::thread_cpu_ns().saturating_sub(cpu0);
        Ok(self.out)
    }

    fn measured(&self, t: Instant) -> bool {
        t >= self.plan.measure_from && t < self.shared.window_end(self.plan.measure_to)
    }

    /// Starts what is due: open loop, the timetable's transactions up to now; closed loop, one
    /// on every free slot.
    fn issue(&mut self, now: Instant) {
        let mut connects = 0;
        if let Some(tt) = self.plan.timetable {
            if self.next_due.is_some_and(|d| d <= now) {
                // Everything due by now (none due at or after the end of the measured stretch):
                // queued up to the limit, the rest counted as not sent (computed, not looped
                // over: a rate of millions per second costs nothing here).
                let end = tt.due_by(now).min(tt.first_due_at_or_after(
                    self.due_count,
                    tt.due_by(self.plan.measure_to) + 1,
                    self.plan.measure_to,
                ));
                let room = self.plan.queue_limit.saturating_sub(self.backlog.len()) as u64;
                let queued_to = end.min(self.due_count + room);
                for k in self.due_count..queued_to {
                    self.backlog.push_back(tt.due_at(k));
                }
                if queued_to < end {
                    let from = tt.first_due_at_or_after(queued_to, end, self.plan.measure_from);
                    let to = tt.first_due_at_or_after(queued_to, end, self.plan.measure_to);
                    let measured = to.saturating_sub(from);
                    self.shared.errors.fetch_add(end - queued_to, Ordering::Relaxed);
                    if measured > 0 {
                        add_errors(
                            &mut self.out.errors,
                            &[ErrorCount {
                                kind: "queue".into(),
                                count: measured,
                                last: format!(
                                    "not sent: queue full ({} due requests already waiting for a free connection \
                                     on this thread; lower --rate or add --connections)",
                                    self.backlog.len()
                                ),
                            }],
                        );
                    }
                }
                self.due_count = end;
                self.next_due = Some(tt.due_at(end));
            }
            while let Some(&due) = self.backlog.front() {
                let Some(slot) = self.free_slot(connects < CONNECTS_PER_TURN) else { break };
                self.backlog.pop_front();
                connects += usize::from(self.conns[slot].is_none());
                if !self.start(slot, Some(due), now) {
                    break;
                }
            }
            self.more_to_connect = connects >= CONNECTS_PER_TURN && !self.backlog.is_empty();
        } else {
            while let Some(slot) = self.free_slot(connects < CONNECTS_PER_TURN) {
                if let Some(b) = &self.shared.budget {
                    if now >= self.plan.measure_from
                        && b.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err()
                    {
                        self.release(slot);
                        self.shared.stop.store(true, Ordering::SeqCst);
                        return;
                    }
                }
                connects += usize::from(self.conns[slot].is_none());
                if !self.start(slot, None, now) {
                    // A connection that cannot even be opened: the next turn tries again (after
                    // the events and the stop flag are looked at).
                    break;
                }
            }
            self.more_to_connect = connects >= CONNECTS_PER_TURN && !self.empty_q.is_empty();
        }
    }

    /// A slot without a transaction, taken from its queue: an idle kept-alive connection first,
    /// else an empty slot (when `connect` allows opening a connection this turn).
    fn free_slot(&mut self, connect: bool) -> Option<usize> {
        while let Some(slot) = self.idle_q.pop_front() {
            self.queued_idle[slot] = false;
            if self.conns[slot].as_ref().is_some_and(|c| c.state == State::Idle && c.tx.is_none()) {
                return Some(slot);
            }
        }
        if !connect {
            return None;
        }
        while let Some(slot) = self.empty_q.pop_front() {
            self.queued_empty[slot] = false;
            if self.conns[slot].is_none() {
                return Some(slot);
            }
        }
        None
    }

    /// Puts a slot taken by [`Self::free_slot`] (or changed) back in the queue it now belongs to.
    fn release(&mut self, slot: usize) {
        match &self.conns[slot] {
            None if !self.queued_empty[slot] => {
                self.queued_empty[slot] = true;
                self.empty_q.push_back(slot);
            }
            Some(c) if c.state == State::Idle && c.tx.is_none() && !self.queued_idle[slot] => {
                self.queued_idle[slot] = true;
                self.idle_q.push_back(slot);
            }
            _ => {}
        }
    }

    /// Starts a transaction on `slot`: on its idle connection, or on a new one. `false`: a new
    /// connection could not even be opened (the transaction failed).
    fn start(&mut self, slot: usize, due: Option<Instant>, now: Instant) -> bool {
        let measured = self.measured(due.unwrap_or(now));
        let tx = Tx { due, measured, started: now };
        if let Some(c) = self.conns[slot].as_mut() {
            c.tx = Some(tx);
            c.timeline = Timeline {
                scheduled_ns: due.map(|d| d.saturating_duration_since(self.plan.origin).as_nanos() as u64),
                client_port: c.timeline.client_port,
                ..Timeline::default()
            };
            let mut c = self.conns[slot].take().expect("slot checked above");
            let r = self.send_request(&mut c).and_then(|()| self.flush(&mut c, slot));
            self.settle(slot, c, r);
            return true;
        }
        match self.connect(slot, tx, now) {
            Ok(c) => {
                self.conns[slot] = Some(c);
                true
            }
            Err(f) => {
                self.release(slot);
                self.failed(tx, f);
                false
            }
        }
    }

    /// A connection that failed to connect; refused after the server had answered: maybe gone.
    fn connect_failed(&self, e: std::io::Error) -> Failure {
        if e.kind() == ErrorKind::ConnectionRefused && self.shared.successes.load(Ordering::Relaxed) > 0 {
            let now = self.ns(Instant::now()) + 1;
            let _ = self.shared.refused_since_ns.compare_exchange(0, now, Ordering::SeqCst, Ordering::SeqCst);
        }
        io_failure("connect", e)
    }

    fn connect(&mut self, slot: usize, tx: Tx, now: Instant) -> std::result::Result<Conn, Failure> {
        let tapped = self.tap.as_ref().is_some_and(|t| t.slot.is_none() && !t.done);
        let tls = match &self.tls {
            Some(p) if tapped => {
                let keys = self.tap.as_ref().expect("checked").keys.clone();
                let key_log: Arc<dyn pqtls_core::backend::KeyLog> = match &self.endpoint.key_log {
                    Some(user) => Arc::new(Tee(user.clone(), keys)),
                    None => keys,
                };
                let opts = EndpointOptions { key_log: Some(key_log), ..self.endpoint.clone() };
                Some(p.client(&opts).map_err(failure("tls"))?)
            }
            Some(p) => Some(p.client(&self.endpoint).map_err(failure("tls"))?),
            None => None,
        };
        if tapped {
            if let Some(t) = self.tap.as_mut() {
                t.slot = Some(slot);
            }
        }
        let connect_start = self.ns(Instant::now().max(now));
        let mut stream = TcpStream::connect(self.opts.target.addr).map_err(|e| self.connect_failed(e))?;
        let _ = stream.set_nodelay(true);
        // The local port matches this connection to a capture's (one getsockname, only when
        // timelines are kept).
        let client_port = if self.opts.timelines { stream.local_addr().ok().map(|a| a.port()) } else { None };
        self.poll
            .registry()
            .register(&mut stream, Token(slot), Interest::READABLE | Interest::WRITABLE)
            .map_err(|e| io_failure("io", e))?;
        Ok(Conn {
            stream,
            tls,
            state: State::Connecting,
            tx: Some(tx),
            timeline: Timeline {
                scheduled_ns: tx.due.map(|d| self.ns(d)),
                connect_start_ns: Some(connect_start),
                client_port,
                ..Timeline::default()
            },
            out: Vec::new(),
            plain: Vec::new(),
            response: ResponseReader::new(self.body_limit),
            want_write: true,
            peer_closed: false,
            handshake_counted: false,
            handshake_added: None,
            first_flight_cpu_ns: 0,
            stamp_hello: false,
            stamp_done: false,
            stamp_request: false,
        })
    }

    fn on_event(&mut self, slot: usize, readable: bool, writable: bool) {
        let Some(mut c) = self.conns.get_mut(slot).and_then(Option::take) else { return };
        let r = self.advance(&mut c, slot, readable, writable);
        self.settle(slot, c, r);
    }

    /// Puts a connection back, or closes it and counts its failure.
    fn settle(&mut self, slot: usize, c: Conn, r: std::result::Result<bool, Failure>) {
        match r {
            Ok(true) => self.conns[slot] = Some(c),
            Ok(false) => self.close(c),
            Err(f) => {
                let tx = c.tx;
                self.close(c);
                match tx {
                    Some(tx) => self.failed(tx, f),
                    None => {} // an idle connection closed by the server: not a failed request
                }
            }
        }
        self.release(slot);
    }

    fn failed(&mut self, tx: Tx, f: Failure) {
        self.shared.errors.fetch_add(1, Ordering::Relaxed);
        // Before any success, an error that will repeat ends the run with what would work; a
        // timeout may be a slow server (SLH-DSA signing under load): counted, not fatal.
        if self.shared.successes.load(Ordering::Relaxed) == 0 && f.kind != "timeout" {
            let hint = match f.kind {
                "connect" if f.message.contains("Too many open files") => {
                    "; out of file descriptors: give fewer --connections or raise `ulimit -n`".to_string()
                }
                "connect" => format!(
                    "; is a server listening at {}? (e.g. pqtls serve --listen {})",
                    self.opts.target.addr, self.opts.target.addr
                ),
                "tls" => " (check the group, chain and root the server uses against the ones asked for)".to_string(),
                "verify" => format!(
                    " (the client trusted: {}; give the server's CA with --ca FILE (a PEM bundle), --ca system for \
                     the system's store, --servername NAME for the name its certificate is for, or --no-verify \
                     to measure without verifying the chain)",
                    self.opts.trust
                ),
                _ => String::new(),
            };
            self.shared.fatal(format!(
                "{}: {} error before any request succeeded: {}{hint}",
                self.opts.target.url(),
                f.kind,
                f.message
            ));
        }
        if tx.measured {
            count_error(&mut self.out.errors, f.kind, f.message);
        }
    }

    /// The tapped handshake completed: its message sizes from its bytes and secrets.
    fn finish_tap(&mut self, slot: usize) {
        let Some(t) = self.tap.as_mut().filter(|t| t.slot == Some(slot) && !t.done) else { return };
        t.done = true;
        let keys = pqtls_capture::KeyLog::from_logged(&t.keys.secrets());
        self.out.messages = Some(
            pqtls_capture::handshake_messages(&t.client_to_server, &t.server_to_client, &keys)
                .map_err(|e| e.to_string()),
        );
        self.out.handshake_bytes = (t.client_to_server.len() as u64, t.server_to_client.len() as u64);
        self.out.client_hello_segments = t.client_hello_segments;
        t.client_to_server = Vec::new();
        t.server_to_client = Vec::new();
    }

    fn close(&mut self, mut c: Conn) {
        if let Some(t) = self.tap.as_mut().filter(|t| !t.done && t.slot.is_some()) {
            if c.state == State::Connecting || c.state == State::Handshaking {
                // The tapped connection failed before completing: tap the next one.
                t.slot = None;
                t.client_to_server.clear();
                t.server_to_client.clear();
            }
        }
        let _ = self.poll.registry().deregister(&mut c.stream);
        // Dropping the stream closes it.
    }

    /// Moves one connection forward. `Ok(false)`: it is finished (closed cleanly).
    fn advance(
        &mut self,
        c: &mut Conn,
        slot: usize,
        readable: bool,
        writable: bool,
    ) -> std::result::Result<bool, Failure> {
        if c.state == State::Connecting {
            if !writable && !readable {
                return Ok(true);
            }
            if let Ok(Some(e)) | Err(e) = c.stream.take_error() {
                return Err(self.connect_failed(e));
            }
            match c.stream.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotConnected => return Ok(true),
                Err(e) => return Err(self.connect_failed(e)),
            }
            c.timeline.connected_ns = Some(self.ns(Instant::now()));
            match c.tls.as_mut() {
                Some(ep) => {
                    ep.drive().map_err(failure("tls"))?;
                    ep.take_output(&mut c.out).map_err(failure("tls"))?;
                    c.first_flight_cpu_ns = ep.trace().calls_cpu_ns_since(0);
                    c.stamp_hello = true;
                    c.state = State::Handshaking;
                }
                None => self.send_request(c)?,
            }
            return self.flush(c, slot);
        }
        let mut eof = false;
        if readable {
            // The worker's buffer (not a fresh 64 KiB on the stack, zeroed per event).
            let mut buf = std::mem::take(&mut self.buf);
            let r = loop {
                match c.stream.read(&mut buf) {
                    Ok(0) => {
                        eof = true;
                        break Ok(());
                    }
                    Ok(n) => {
                        if let Some(t) = self.tap.as_mut().filter(|t| t.slot == Some(slot) && !t.done) {
                            if t.server_to_client.is_empty() {
                                // The server answered: every segment the client sent so far
                                // carried its ClientHello.
                                t.client_hello_segments = pqtls_netlab::tcpinfo::data_segments_out(&c.stream).ok();
                            }
                            if t.server_to_client.len() + n > TAP_MAX_BYTES {
                                break Err(Failure {
                                    kind: "tls",
                                    message: format!(
                                        "the server sent over {TAP_MAX_BYTES} bytes without completing the handshake"
                                    ),
                                });
                            }
                            t.server_to_client.extend_from_slice(&buf[..n]);
                        }
                        if let Err(f) = self.input(c, &buf[..n]) {
                            break Err(f);
                        }
                    }
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break Ok(()),
                    Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                    Err(e) => break Err(io_failure("io", e)),
                }
                if c.state == State::Idle && (!self.opts.keep_alive || c.response.closes()) {
                    self.buf = buf;
                    return Ok(false);
                }
                // Bytes that keep coming do not hold a transaction past its timeout.
                if let Some(tx) = c.tx {
                    if Instant::now().saturating_duration_since(tx.started) > self.opts.timeout {
                        break Err(self.timed_out(c.state));
                    }
                }
            };
            self.buf = buf;
            r?;
        }
        let keep = self.flush(c, slot)?;
        if eof || c.peer_closed {
            return match c.state {
                State::Idle => Ok(false),
                State::Handshaking => Err(Failure {
                    kind: "tls",
                    message: "the server closed the connection during the handshake".into(),
                }),
                State::Requesting => match c.response.eof() {
                    // A close-delimited body ends here.
                    Ok(Progress::Done { status, .. }) => {
                        self.response_done(c, status, Instant::now())?;
                        Ok(false)
                    }
                    Ok(Progress::More) => Err(Failure { kind: "http", message: "a response cut short".into() }),
                    Err(e) => Err(self.response_failure(e)),
                },
                State::Connecting => Err(Failure {
                    kind: "connect",
                    message: "the server closed the connection before it was established".into(),
                }),
            };
        }
        Ok(keep)
    }

    /// Bytes from the socket.
    fn input(&mut self, c: &mut Conn, data: &[u8]) -> std::result::Result<(), Failure> {
        match c.tls.as_mut() {
            None => c.plain.extend_from_slice(data),
            Some(ep) => {
                let mark = ep.trace().events.len();
                ep.receive(data).map_err(failure("tls"))?;
                if c.state == State::Handshaking {
                    let done = ep.drive().map_err(failure("tls"))?;
                    ep.take_output(&mut c.out).map_err(failure("tls"))?;
                    if !done {
                        return Ok(());
                    }
                    c.stamp_done = true;
                    let negotiated = ep.negotiated().map_err(failure("tls"))?;
                    self.check(&negotiated)?;
                    let cpu = pqtls_core::trace::attribute(ep.trace()).total_cpu_ns;
                    let phases = PhaseTotals {
                        first_flight_cpu_ns: c.first_flight_cpu_ns,
                        completion_cpu_ns: ep.trace().calls_cpu_ns_since(mark),
                    };
                    let verification = ep.trace().verification_cpu_ns;
                    ep.trace().clear();
                    if !c.handshake_counted {
                        c.handshake_counted = true;
                        if c.tx.is_some_and(|t| t.measured) {
                            self.out.handshakes += 1;
                            self.out.handshake_cpu_ns += cpu;
                            self.out.phase_cpu_ns += phases;
                            if let Some(v) = verification {
                                *self.out.verification_cpu_ns.get_or_insert(0) += v;
                            }
                            c.handshake_added = Some((cpu, phases, verification));
                        }
                    }
                    self.send_request(c)?;
                    return Ok(());
                }
                ep.read_app(&mut c.plain).map_err(failure("tls"))?;
                ep.trace().clear();
                // close_notify: the end of the stream as the TCP close is (a close-delimited
                // body ends here; servers such as `openssl s_server -www` wait for the client
                // to close the connection after it).
                c.peer_closed = ep.peer_closed();
            }
        }
        if c.state != State::Requesting || c.plain.is_empty() {
            if c.state == State::Idle && !c.plain.is_empty() {
                return Err(Failure { kind: "http", message: "the server sent bytes nobody asked for".into() });
            }
            return Ok(());
        }
        let now = Instant::now();
        if c.response.status().is_none() && c.timeline.first_byte_ns == 0 {
            c.timeline.first_byte_ns = self.ns(now);
        }
        let mut data = std::mem::take(&mut c.plain);
        let r = c.response.feed(&data);
        data.clear();
        c.plain = data; // its capacity, for the next bytes
        match r.map_err(|e| self.response_failure(e))? {
            Progress::More => Ok(()),
            Progress::Done { status, extra } => {
                if extra > 0 {
                    return Err(Failure { kind: "http", message: format!("{extra} bytes after the response") });
                }
                self.response_done(c, status, now)
            }
        }
    }

    /// A response read to its end.
    fn response_done(&mut self, c: &mut Conn, status: u16, now: Instant) -> std::result::Result<(), Failure> {
        c.timeline.last_byte_ns = self.ns(now);
        if status != 200 {
            return Err(Failure {
                kind: "http",
                message: format!("status {status} for {} (expected 200)", self.opts.target.path),
            });
        }
        // A path that names a size is pqtls serve's `GET /<size>`: a body of another length
        // (a server that closed early, or answered something else) is not a success.
        if let Some(asked) = self.opts.target.asked_bytes() {
            let got = c.response.body_bytes();
            if got != asked {
                return Err(Failure {
                    kind: "body",
                    message: format!("a body of {got} bytes, but {} asks for {asked}", self.opts.target.path),
                });
            }
        }
        self.completed(c, now);
        Ok(())
    }

    fn response_failure(&self, e: crate::response::ResponseError) -> Failure {
        match e.kind {
            "body" => Failure { kind: "body", message: format!("{} (the limit: {})", e.message, self.body_hint) },
            kind => Failure { kind, message: e.message },
        }
    }

    fn timed_out(&self, state: State) -> Failure {
        Failure {
            kind: "timeout",
            message: format!("no complete response within {:?} (while {state:?})", self.opts.timeout),
        }
    }

    /// The negotiated parameters against what was asked: the first handshake's are kept for
    /// the record; any mismatch ends the run.
    fn check(&mut self, got: &Negotiated) -> std::result::Result<(), Failure> {
        let wrong = self.opts.expect.mismatches(got);
        if !wrong.is_empty() {
            let why = format!(
                "{} negotiated {} — not what was asked; configure the server for it, or ask for what it offers",
                self.opts.target.url(),
                wrong.join(", ")
            );
            self.shared.fatal(why.clone());
            return Err(Failure { kind: "negotiation", message: why });
        }
        let mut n = self.shared.negotiated.lock().unwrap_or_else(|p| p.into_inner());
        if n.is_none() {
            *n = Some(got.clone());
        }
        Ok(())
    }

    fn send_request(&mut self, c: &mut Conn) -> std::result::Result<(), Failure> {
        c.response = ResponseReader::new(self.body_limit);
        match c.tls.as_mut() {
            Some(ep) => {
                ep.write_app(&self.request).map_err(failure("tls"))?;
                ep.take_output(&mut c.out).map_err(failure("tls"))?;
                ep.trace().clear();
            }
            None => c.out.extend_from_slice(&self.request),
        }
        c.stamp_request = true;
        c.state = State::Requesting;
        Ok(())
    }

    /// A response read to its last byte.
    fn completed(&mut self, c: &mut Conn, now: Instant) {
        self.shared.successes.fetch_add(1, Ordering::Relaxed);
        self.shared.last_success_ns.fetch_max(self.ns(now) + 1, Ordering::SeqCst);
        if self.shared.refused_since_ns.load(Ordering::Relaxed) != 0 {
            self.shared.refused_since_ns.store(0, Ordering::SeqCst);
        }
        self.out.all_requests += 1;
        let tx = c.tx.take();
        c.state = State::Idle;
        let added = c.handshake_added.take();
        let Some(tx) = tx.filter(|t| t.measured) else { return };
        let t = c.timeline;
        if let Some(screen) = &self.opts.stalls {
            let (from, to) = t.span_ns();
            let origin = self.plan.origin_mono_ns;
            match self.shared.stalls.judge(screen, origin + from, origin + to) {
                Screened::Keep => {}
                Screened::Again { pause } => {
                    // Discarded whole: its handshake leaves the sums, and the closed loop's
                    // count gets the transaction back (a duration-bound run just has one less).
                    // The pause holds this thread (a transfer: its one connection); a run of a
                    // fixed count measures that much longer.
                    std::thread::sleep(pause);
                    self.shared.extend_window(Duration::from_nanos(to.saturating_sub(from)) + pause);
                    if let Some((cpu, phases, verification)) = added {
                        self.out.handshakes -= 1;
                        self.out.handshake_cpu_ns -= cpu;
                        self.out.phase_cpu_ns.first_flight_cpu_ns -= phases.first_flight_cpu_ns;
                        self.out.phase_cpu_ns.completion_cpu_ns -= phases.completion_cpu_ns;
                        if let (Some(v), Some(sum)) = (verification, self.out.verification_cpu_ns.as_mut()) {
                            *sum -= v;
                        }
                    }
                    if let Some(b) = &self.shared.budget {
                        b.fetch_add(1, Ordering::SeqCst);
                    }
                    return;
                }
                Screened::TooMany(why) => {
                    self.shared.fatal(why);
                    return;
                }
            }
        }
        self.shared.completed.fetch_add(1, Ordering::Relaxed);
        let second = now.saturating_duration_since(self.plan.measure_from).as_secs() as usize;
        self.out.record(&t, second, self.opts.timelines);
        let _ = tx;
    }

    /// Writes what is queued, stamping the moments whose bytes just left; `Ok(false)`: the
    /// connection is done (not kept alive).
    fn flush(&mut self, c: &mut Conn, slot: usize) -> std::result::Result<bool, Failure> {
        while !c.out.is_empty() {
            let now = Instant::now();
            match c.stream.write(&c.out) {
                Ok(0) => return Err(Failure { kind: "io", message: "the socket accepted no bytes".into() }),
                Ok(n) => {
                    if let Some(t) = self.tap.as_mut().filter(|t| t.slot == Some(slot) && !t.done) {
                        t.client_to_server.extend_from_slice(&c.out[..n]);
                    }
                    let t = self.ns(now);
                    if std::mem::take(&mut c.stamp_hello) {
                        c.timeline.client_hello_ns = Some(t);
                    }
                    if std::mem::take(&mut c.stamp_done) {
                        c.timeline.handshake_done_ns = Some(t);
                        self.finish_tap(slot);
                    }
                    if std::mem::take(&mut c.stamp_request) {
                        c.timeline.request_ns = t;
                    }
                    c.out.drain(..n);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => {
                    if !c.want_write {
                        c.want_write = true;
                        self.poll
                            .registry()
                            .reregister(&mut c.stream, Token(slot), Interest::READABLE | Interest::WRITABLE)
                            .map_err(|e| io_failure("io", e))?;
                    }
                    return Ok(true);
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_failure("io", e)),
            }
        }
        if c.want_write && c.state != State::Connecting {
            c.want_write = false;
            self.poll
                .registry()
                .reregister(&mut c.stream, Token(slot), Interest::READABLE)
                .map_err(|e| io_failure("io", e))?;
        }
        if c.state == State::Idle && (!self.opts.keep_alive || c.response.closes()) {
            return Ok(false);
        }
        Ok(true)
    }

    /// Abandons transactions older than the timeout.
    fn expire(&mut self, now: Instant) {
        for slot in 0..self.conns.len() {
            let late = self.conns[slot]
                .as_ref()
                .and_then(|c| c.tx)
                .is_some_and(|tx| now.saturating_duration_since(tx.started) > self.opts.timeout);
            if late {
                let c = self.conns[slot].take().expect("checked above");
                let state = c.state;
                let tx = c.tx.expect("checked above");
                self.close(c);
                self.release(slot);
                let f = self.timed_out(state);
                self.failed(tx, f);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_parse_or_say_why() {
        let t = Target::parse("https://127.0.0.1:8443/1KiB").unwrap();
        assert_eq!((t.addr.port(), t.path.as_str(), t.tls), (8443, "/1KiB", true));
        let t = Target::parse("http://[::1]:8080").unwrap();
        assert_eq!((t.addr.port(), t.path.as_str(), t.tls), (8080, "/", false));
        assert_eq!(Target::parse("https://localhost/").unwrap().addr.port(), 443);
        for bad in ["ftp://x/", "127.0.0.1:8443", "https:///x", "https://no.such.host.invalid/"] {
            let e = Target::parse(bad).unwrap_err().to_string();
            assert!(e.contains("give e.g. https://"), "{bad}: {e}");
        }
    }

    #[test]
    fn urls_whose_path_a_request_line_cannot_carry_are_refused_and_fragments_are_not_sent() {
        for (url, why) in [
            ("http://127.0.0.1:8080/a b", "a space at character 2"),
            ("http://127.0.0.1:8080/1KiB\r\nX-Injected: 1", "the control character '\\r' at character 5"),
            ("http://127.0.0.1:8080/\u{e9}", "'\u{e9}', not ASCII"),
            ("http://user:secret@127.0.0.1:8080/", "user information (user@host) is not sent"),
        ] {
            let e = Target::parse(url).unwrap_err().to_string();
            assert!(e.contains(why) && e.contains("give e.g. https://"), "{url:?}: {e}");
        }
        let t = Target::parse("http://127.0.0.1:8080/1KiB?x=1#part").unwrap();
        assert_eq!((t.path.as_str(), t.addr.port()), ("/1KiB?x=1", 8080));
        assert_eq!(t.asked_bytes(), Some(1024));
        let t = Target::parse("http://127.0.0.1:8080?x=1").unwrap();
        assert_eq!((t.path.as_str(), t.host.as_str()), ("/?x=1", "127.0.0.1:8080"));
        assert_eq!(Target::parse("http://127.0.0.1:8080#top").unwrap().path, "/");
    }

    #[test]
    fn mismatches_name_both_values() {
        let e = Expect {
            group: Some("X25519MLKEM768".into()),
            cipher: None,
            sigalg: Some("mldsa65".into()),
            cert_compression: None,
        };
        let got = Negotiated { group: "X25519MLKEM768".into(), sigalg: "ML-DSA-65".into(), ..Negotiated::default() };
        assert!(e.mismatches(&got).is_empty());
        let got = Negotiated { group: "x25519".into(), sigalg: "mldsa65".into(), ..Negotiated::default() };
        assert_eq!(e.mismatches(&got), vec!["group x25519 (asked: X25519MLKEM768)".to_string()]);
        // The signature scheme is checked as the group and cipher are.
        let got = Negotiated { group: "X25519MLKEM768".into(), sigalg: "ed25519".into(), ..Negotiated::default() };
        assert_eq!(e.mismatches(&got), vec!["signature algorithm ed25519 (asked: mldsa65)".to_string()]);
        let got = Negotiated { group: "X25519MLKEM768".into(), ..Negotiated::default() };
        assert_eq!(e.mismatches(&got), vec!["signature algorithm  (asked: mldsa65)".to_string()]);
        // Certificate compression: a chain that came uncompressed is named; resumed ones carry none.
        let e = Expect { cert_compression: Some("brotli".into()), ..Expect::default() };
        let mut got = Negotiated { cert_compression: Some("none".into()), ..Negotiated::default() };
        assert_eq!(
            e.mismatches(&got),
            vec!["the server's chain uncompressed (asked: the chain compressed with brotli)".to_string()]
        );
        got.resumed = true;
        assert!(e.mismatches(&got).is_empty());
        got = Negotiated { cert_compression: Some("brotli".into()), ..Negotiated::default() };
        assert!(e.mismatches(&got).is_empty());
    }

    #[test]
    fn sizes_in_paths_are_body_limits() {
        let size = |u: &str| Target::parse(u).unwrap().asked_bytes();
        assert_eq!(size("http://127.0.0.1:1/1KiB"), Some(1024));
        assert_eq!(size("http://127.0.0.1:1/64KiB?x=1"), Some(65536));
        assert_eq!(size("http://127.0.0.1:1/"), None);
        assert_eq!(size("http://127.0.0.1:1/index.html"), None);
    }

    #[test]
    fn due_counts_match_the_timetable() {
        let origin = Instant::now();
        for (index, threads) in [(0, 1), (1, 3), (2, 3)] {
            for rate_per_s in [1.0, 7.0, 1000.0, 9_999_999.0] {
                let p = Timetable { origin, rate_per_s, index, threads };
                for ms in [0u64, 1, 13, 999, 2500] {
                    let now = p.origin + Duration::from_millis(ms);
                    let k = p.due_by(now);
                    assert!(k == 0 || p.due_at(k - 1) <= now, "{rate_per_s} {ms}");
                    assert!(p.due_at(k) > now, "{rate_per_s} {ms}");
                    let t = p.origin + Duration::from_millis(ms / 2);
                    let f = p.first_due_at_or_after(0, k, t);
                    assert!(f == k || p.due_at(f) >= t);
                    assert!(f == 0 || p.due_at(f - 1) < t);
                }
            }
        }
    }
}
