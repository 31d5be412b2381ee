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
//! handshake's negotiated parameters must match what was asked; a mismatch ends the run with
//! an error naming both.

use crate::http::{self, ResponseReader};
use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};
use pqtls_core::backend::{Endpoint, EndpointOptions, Negotiated, Prepared};
use pqtls_core::load::{add_errors, count_error, histogram, ErrorCount};
use pqtls_core::timeline::{Timeline, LAYER_NAMES};
use pqtls_core::{Error, Result};
use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
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
        let (authority, path) = match rest.find('/') {
            Some(i) => (&rest[..i], &rest[i..]),
            None => (rest, "/"),
        };
        if authority.is_empty() {
            return Err(bad("no host"));
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
        Ok(Target { addr, host: authority.to_string(), path: path.to_string(), tls })
    }

    pub fn url(&self) -> String {
        format!("{}://{}{}", if self.tls { "https" } else { "http" }, self.host, self.path)
    }
}

/// What the handshakes must negotiate (names as [`Negotiated`] reports them; `None`: any).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    pub group: Option<String>,
    pub cipher: Option<String>,
    pub sigalg: Option<String>,
}

impl Expect {
    /// The differences between what was negotiated and what was asked (empty: as asked).
    /// Names are compared without case and `-`/`_` (stacks spell groups differently).
    pub fn mismatches(&self, got: &Negotiated) -> Vec<String> {
        let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], "");
        let mut v = Vec::new();
        for (what, want, have) in [
            ("group", &self.group, &got.group),
            ("cipher suite", &self.cipher, &got.cipher),
            ("signature algorithm", &self.sigalg, &got.sigalg),
        ] {
            if let Some(w) = want {
                if norm(w) != norm(have) {
                    v.push(format!("{what} {have} (asked: {w})"));
                }
            }
        }
        v
    }
}

/// How to load.
#[derive(Clone)]
pub struct LoadOptions {
    pub target: Target,
    /// Client contexts (`None` with an `http://` target).
    pub tls: Option<Arc<dyn Prepared>>,
    pub endpoint: EndpointOptions,
    pub threads: usize,
    /// Concurrent connections per thread.
    pub connections: usize,
    /// Open loop at this many requests per second in total; `None`: closed loop.
    pub rate_per_s: Option<f64>,
    /// Several requests per connection (false: one request per TLS connection).
    pub keep_alive: bool,
    /// Run, unmeasured, for this long first.
    pub warmup: Duration,
    /// Measure for this long.
    pub duration: Duration,
    /// Closed loop: stop after this many measured requests (before `duration` if reached).
    pub requests: Option<u64>,
    /// A transaction not complete after this long is abandoned (an error of kind `timeout`).
    pub timeout: Duration,
    pub expect: Expect,
    /// Keep every measured transaction's timeline (for layers).
    pub timelines: bool,
}

/// Progress as the run goes.
#[derive(Clone, Debug)]
pub struct LoadProgress {
    pub phase: &'static str,
    pub elapsed: Duration,
    pub requests: u64,
    pub errors: u64,
}

/// What a load run measured (the measurement turns it into a record).
#[derive(Debug)]
pub struct LoadRun {
    /// Latency per measured request (from its due time, open loop, or its start), ns.
    pub latency: Histogram<u64>,
    pub ttfb: Histogram<u64>,
    /// Per layer ([`LAYER_NAMES`]), of the measured transactions.
    pub layers: Vec<Histogram<u64>>,
    pub requests: u64,
    pub handshakes: u64,
    /// Due (open loop) or started but not complete when the run ended.
    pub unfinished: u64,
    pub errors: Vec<ErrorCount>,
    pub negotiated: Option<Negotiated>,
    pub duration_ns: u64,
    /// CPU of the load threads over the whole run (warm-up included), ns.
    pub thread_cpu_ns: u64,
    /// Requests (measured and not) over which `thread_cpu_ns` was spent.
    pub all_requests: u64,
    /// Client CPU inside the stack's calls, summed over measured handshakes, ns.
    pub handshake_cpu_ns: u64,
    /// Completed measured requests in each second of the measured window.
    pub per_second: Vec<u64>,
    pub timelines: Vec<Timeline>,
    /// The wall clock (Unix ns) at the run's origin, the 0 of the timelines (read next to
    /// the monotonic origin; puts the timelines next to a capture's packets).
    pub origin_unix_ns: u64,
    /// `duration`, `requests` or `interrupted`.
    pub stopped: String,
    /// The message sizes of one handshake (thread 0's first), read from its bytes with its
    /// secrets; `Err` says why they could not be.
    pub messages: Option<std::result::Result<indexmap::IndexMap<String, u64>, String>>,
    /// That handshake's bytes per direction: client → server (to its Finished), server → client.
    pub handshake_bytes: (u64, u64),
}

/// What every worker shares.
struct Shared {
    stop: AtomicBool,
    completed: AtomicU64,
    errors: AtomicU64,
    /// Requests still allowed (closed loop with a fixed count).
    budget: Option<AtomicU64>,
    /// Requests completed by anyone, warm-up included (a run that never succeeds stops early).
    successes: AtomicU64,
    /// Set once: the reason the run must end with an error.
    fatal: Mutex<Option<String>>,
    negotiated: Mutex<Option<Negotiated>>,
}

impl Shared {
    fn fatal(&self, why: String) {
        let mut f = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(why);
        }
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Runs the load; returns what was measured, or an error when nothing could be (nothing
/// listening, a wrong root, another group negotiated…).
pub fn run(opts: &LoadOptions, interrupt: &AtomicBool, progress: &mut dyn FnMut(&LoadProgress)) -> Result<LoadRun> {
    validate(opts)?;
    let shared = Arc::new(Shared {
        stop: AtomicBool::new(false),
        completed: AtomicU64::new(0),
        errors: AtomicU64::new(0),
        budget: opts.requests.map(AtomicU64::new),
        successes: AtomicU64::new(0),
        fatal: Mutex::new(None),
        negotiated: Mutex::new(None),
    });
    let origin = Instant::now();
    let origin_unix_ns =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let measure_from = origin + opts.warmup;
    let measure_to = measure_from + opts.duration;
    let mut workers = Vec::new();
    for i in 0..opts.threads {
        let slots = opts.connections;
        let plan = Plan {
            index: i,
            threads: opts.threads,
            slots,
            rate_per_s: opts.rate_per_s.map(|r| r / opts.threads as f64),
            origin,
            measure_from,
            measure_to,
        };
        let (o, s) = (opts.clone(), shared.clone());
        let w = std::thread::Builder::new()
            .name(format!("pqtls-load-{i}"))
            .spawn(move || Worker::new(o, s, plan).and_then(Worker::run))
            .map_err(|e| Error::io("starting a load thread", e))?;
        workers.push(w);
    }
    let mut stopped = "duration";
    let mut last = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if workers.iter().all(|w| w.is_finished()) {
            if opts.requests.is_some() && now < measure_to {
                stopped = "requests";
            }
            break;
        }
        if interrupt.load(Ordering::SeqCst) {
            stopped = "interrupted";
            shared.stop.store(true, Ordering::SeqCst);
        }
        if now.duration_since(last) >= Duration::from_secs(1) {
            last = now;
            progress(&LoadProgress {
                phase: if now < measure_from { "warm-up" } else { "measuring" },
                elapsed: now.duration_since(origin),
                requests: shared.completed.load(Ordering::Relaxed),
                errors: shared.errors.load(Ordering::Relaxed),
            });
        }
    }
    let mut results = Vec::new();
    for w in workers {
        results.push(w.join().unwrap_or_else(|_| Err(Error::Other("a load thread panicked".into())))?);
    }
    if let Some(why) = shared.fatal.lock().unwrap_or_else(|p| p.into_inner()).take() {
        return Err(Error::Invalid(why));
    }
    let end = if stopped == "duration" { measure_to } else { Instant::now().min(measure_to) };
    let duration_ns = end.saturating_duration_since(measure_from).as_nanos() as u64;
    let mut run = LoadRun {
        latency: histogram(),
        ttfb: histogram(),
        layers: LAYER_NAMES.iter().map(|_| histogram()).collect(),
        requests: 0,
        handshakes: 0,
        unfinished: 0,
        errors: Vec::new(),
        negotiated: shared.negotiated.lock().unwrap_or_else(|p| p.into_inner()).clone(),
        duration_ns,
        thread_cpu_ns: 0,
        all_requests: 0,
        handshake_cpu_ns: 0,
        per_second: vec![0; (opts.duration.as_secs_f64().ceil() as usize).max(1)],
        timelines: Vec::new(),
        origin_unix_ns,
        stopped: stopped.to_string(),
        messages: None,
        handshake_bytes: (0, 0),
    };
    for r in results {
        merge(&mut run.latency, &r.latency)?;
        merge(&mut run.ttfb, &r.ttfb)?;
        for (a, b) in run.layers.iter_mut().zip(&r.layers) {
            merge(a, b)?;
        }
        run.requests += r.requests;
        run.handshakes += r.handshakes;
        run.unfinished += r.unfinished;
        run.thread_cpu_ns += r.thread_cpu_ns;
        run.all_requests += r.all_requests;
        run.handshake_cpu_ns += r.handshake_cpu_ns;
        for (a, b) in run.per_second.iter_mut().zip(&r.per_second) {
            *a += b;
        }
        add_errors(&mut run.errors, &r.errors);
        run.timelines.extend(r.timelines);
        if r.messages.is_some() {
            run.messages = r.messages;
            run.handshake_bytes = r.handshake_bytes;
        }
    }
    run.timelines.sort_by_key(|t| t.scheduled_ns.or(t.connect_start_ns).unwrap_or(t.request_ns));
    Ok(run)
}

fn merge(a: &mut Histogram<u64>, b: &Histogram<u64>) -> Result<()> {
    a.add(b).map_err(|e| Error::Other(format!("merging latency histograms: {e:?}")))
}

fn validate(o: &LoadOptions) -> Result<()> {
    if o.threads == 0 || o.threads > 1024 {
        return Err(Error::Invalid(format!("{} load threads: give 1 to 1024 (e.g. --threads 4)", o.threads)));
    }
    if o.connections == 0 || o.connections > 100_000 {
        return Err(Error::Invalid(format!(
            "{} connections per thread: give 1 to 100000 (e.g. --connections 4)",
            o.connections
        )));
    }
    if let Some(r) = o.rate_per_s {
        if !(r.is_finite() && r > 0.0) {
            return Err(Error::Invalid(format!("rate {r}/s: give a positive rate, e.g. --rate 100/s")));
        }
    }
    if o.duration.is_zero() {
        return Err(Error::Invalid("a duration of 0: give e.g. --duration 10s".into()));
    }
    if o.requests == Some(0) {
        return Err(Error::Invalid("--requests 0: give at least 1".into()));
    }
    if o.target.tls != o.tls.is_some() {
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
    threads: usize,
    slots: usize,
    rate_per_s: Option<f64>,
    origin: Instant,
    measure_from: Instant,
    measure_to: Instant,
}

/// The `k`-th due time of a thread's timetable: `origin + (k + index/threads) / rate`, in
/// whole ns (threads are spread evenly over one interval).
fn due_at(plan: &Plan, rate_per_s: f64, k: u64) -> Instant {
    let phase = plan.index as f64 / plan.threads as f64;
    plan.origin + Duration::from_nanos(((k as f64 + phase) * 1e9 / rate_per_s).round() as u64)
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
    /// The connection's handshake has been counted (and its CPU summed).
    handshake_counted: bool,
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

/// What one thread measured.
struct ThreadResult {
    latency: Histogram<u64>,
    ttfb: Histogram<u64>,
    layers: Vec<Histogram<u64>>,
    requests: u64,
    handshakes: u64,
    unfinished: u64,
    errors: Vec<ErrorCount>,
    thread_cpu_ns: u64,
    all_requests: u64,
    handshake_cpu_ns: u64,
    per_second: Vec<u64>,
    timelines: Vec<Timeline>,
    /// Thread 0: message sizes of its first complete handshake.
    messages: Option<std::result::Result<indexmap::IndexMap<String, u64>, String>>,
    /// Bytes of that handshake per direction (until the client's Finished; the server's
    /// flight until the client completed).
    handshake_bytes: (u64, u64),
}

struct Worker {
    opts: LoadOptions,
    shared: Arc<Shared>,
    plan: Plan,
    poll: Poll,
    conns: Vec<Option<Conn>>,
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

/// Why a transaction failed: a kind for the counters and a message.
struct Failure {
    kind: &'static str,
    message: String,
}

fn failure(kind: &'static str) -> impl Fn(Error) -> Failure {
    move |e| Failure { kind, message: e.to_string() }
}

fn io_failure(kind: &'static str, e: std::io::Error) -> Failure {
    Failure { kind, message: e.to_string() }
}

impl Worker {
    fn new(opts: LoadOptions, shared: Arc<Shared>, plan: Plan) -> Result<Worker> {
        let poll = Poll::new().map_err(|e| Error::io("creating an event loop", e))?;
        let request = http::get(&opts.target.path, &opts.target.host, opts.keep_alive);
        let next_due = plan.rate_per_s.map(|r| due_at(&plan, r, 0));
        let seconds = (opts.duration.as_secs_f64().ceil() as usize).max(1);
        Ok(Worker {
            poll,
            conns: (0..plan.slots).map(|_| None).collect(),
            backlog: VecDeque::new(),
            next_due,
            due_count: 0,
            request,
            buf: vec![0; 64 * 1024],
            tap: (plan.index == 0 && opts.tls.is_some()).then(|| Tap {
                keys: Arc::new(pqtls_core::backend::MemoryKeyLog::new()),
                slot: None,
                client_to_server: Vec::new(),
                server_to_client: Vec::new(),
                done: false,
            }),
            out: ThreadResult {
                latency: histogram(),
                ttfb: histogram(),
                layers: LAYER_NAMES.iter().map(|_| histogram()).collect(),
                requests: 0,
                handshakes: 0,
                unfinished: 0,
                errors: Vec::new(),
                thread_cpu_ns: 0,
                all_requests: 0,
                handshake_cpu_ns: 0,
                per_second: vec![0; seconds],
                timelines: Vec::new(),
                messages: None,
                handshake_bytes: (0, 0),
            },
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
            let ending = now >= self.plan.measure_to || self.shared.stop.load(Ordering::SeqCst);
            if !ending {
                self.issue(now);
            }
            self.expire(now);
            if ending && self.conns.iter().all(|c| c.as_ref().is_none_or(|c| c.state == State::Idle)) {
                break;
            }
            if ending && now >= self.plan.measure_to + self.opts.timeout {
                break;
            }
            let wait = match self.next_due {
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
        if self.plan.rate_per_s.is_some() {
            self.out.unfinished += self.backlog.iter().filter(|d| self.measured(**d)).count() as u64;
        }
        self.out.thread_cpu_ns = pqtls_core::trace::thread_cpu_ns().saturating_sub(cpu0);
        Ok(self.out)
    }

    fn measured(&self, t: Instant) -> bool {
        t >= self.plan.measure_from && t < self.plan.measure_to
    }

    /// Starts what is due: open loop, the timetable's transactions up to now; closed loop, one
    /// on every free slot.
    fn issue(&mut self, now: Instant) {
        if let Some(rate) = self.plan.rate_per_s {
            while let Some(due) = self.next_due.filter(|d| *d <= now) {
                self.backlog.push_back(due);
                self.due_count += 1;
                self.next_due = Some(due_at(&self.plan, rate, self.due_count));
            }
            while let Some(&due) = self.backlog.front() {
                let Some(slot) = self.free_slot() else { break };
                self.backlog.pop_front();
                self.start(slot, Some(due), now);
            }
        } else {
            while let Some(slot) = self.free_slot() {
                if let Some(b) = &self.shared.budget {
                    if now >= self.plan.measure_from
                        && b.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err()
                    {
                        self.shared.stop.store(true, Ordering::SeqCst);
                        return;
                    }
                }
                self.start(slot, None, now);
            }
        }
    }

    /// A slot without a transaction: an idle kept-alive connection first, else an empty one.
    fn free_slot(&self) -> Option<usize> {
        self.conns
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| c.state == State::Idle))
            .or_else(|| self.conns.iter().position(Option::is_none))
    }

    /// Starts a transaction on `slot`: on its idle connection, or on a new one.
    fn start(&mut self, slot: usize, due: Option<Instant>, now: Instant) {
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
            return;
        }
        match self.connect(slot, tx, now) {
            Ok(c) => self.conns[slot] = Some(c),
            Err(f) => self.failed(tx, f),
        }
    }

    fn connect(&mut self, slot: usize, tx: Tx, now: Instant) -> std::result::Result<Conn, Failure> {
        let tapped = self.tap.as_ref().is_some_and(|t| t.slot.is_none() && !t.done);
        let tls = match &self.opts.tls {
            Some(p) if tapped => {
                let keys = self.tap.as_ref().expect("checked").keys.clone();
                let key_log: Arc<dyn pqtls_core::backend::KeyLog> = match &self.opts.endpoint.key_log {
                    Some(user) => Arc::new(Tee(user.clone(), keys)),
                    None => keys,
                };
                let opts = EndpointOptions { key_log: Some(key_log), ..self.opts.endpoint.clone() };
                Some(p.client(&opts).map_err(failure("tls"))?)
            }
            Some(p) => Some(p.client(&self.opts.endpoint).map_err(failure("tls"))?),
            None => None,
        };
        if tapped {
            if let Some(t) = self.tap.as_mut() {
                t.slot = Some(slot);
            }
        }
        let connect_start = self.ns(Instant::now().max(now));
        let mut stream = TcpStream::connect(self.opts.target.addr).map_err(|e| io_failure("connect", e))?;
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
            response: ResponseReader::new(),
            want_write: true,
            handshake_counted: false,
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
    }

    fn failed(&mut self, tx: Tx, f: Failure) {
        self.shared.errors.fetch_add(1, Ordering::Relaxed);
        // Before any success, an error that will repeat ends the run with what would work; a
        // timeout may be a slow server (SLH-DSA signing under load): counted, not fatal.
        if self.shared.successes.load(Ordering::Relaxed) == 0 && f.kind != "timeout" {
            let hint = match f.kind {
                "connect" => format!(
                    "; is a server listening at {}? (e.g. pqtls serve --listen {})",
                    self.opts.target.addr, self.opts.target.addr
                ),
                "tls" => " (check the group, chain and root the server uses against the ones asked for)".to_string(),
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
                return Err(io_failure("connect", e));
            }
            match c.stream.peer_addr() {
                Ok(_) => {}
                Err(e) if e.kind() == ErrorKind::NotConnected => return Ok(true),
                Err(e) => return Err(io_failure("connect", e)),
            }
            c.timeline.connected_ns = Some(self.ns(Instant::now()));
            match c.tls.as_mut() {
                Some(ep) => {
                    ep.drive().map_err(failure("tls"))?;
                    ep.take_output(&mut c.out).map_err(failure("tls"))?;
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
                if c.state == State::Idle && !self.opts.keep_alive {
                    self.buf = buf;
                    return Ok(false);
                }
            };
            self.buf = buf;
            r?;
        }
        let keep = self.flush(c, slot)?;
        if eof {
            return match c.state {
                State::Idle => Ok(false),
                State::Handshaking => Err(Failure {
                    kind: "tls",
                    message: "the server closed the connection during the handshake".into(),
                }),
                _ => Err(Failure {
                    kind: "http",
                    message: match c.response.status() {
                        None => "the server closed the connection before responding".into(),
                        Some(_) => format!(
                            "the server closed the connection after {} body bytes, {} short",
                            c.response.body_bytes,
                            c.response.body_left()
                        ),
                    },
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
                    ep.trace().clear();
                    if !c.handshake_counted {
                        c.handshake_counted = true;
                        if c.tx.is_some_and(|t| t.measured) {
                            self.out.handshakes += 1;
                            self.out.handshake_cpu_ns += cpu;
                        }
                    }
                    self.send_request(c)?;
                    return Ok(());
                }
                ep.read_app(&mut c.plain).map_err(failure("tls"))?;
                ep.trace().clear();
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
        let data = std::mem::take(&mut c.plain);
        match c.response.feed(&data).map_err(|m| Failure { kind: "http", message: m })? {
            http::Progress::More => Ok(()),
            http::Progress::Done { status, extra } => {
                c.timeline.last_byte_ns = self.ns(now);
                if extra > 0 {
                    return Err(Failure { kind: "http", message: format!("{extra} bytes after the response") });
                }
                if status != 200 {
                    return Err(Failure {
                        kind: "http",
                        message: format!("status {status} for {} (expected 200)", self.opts.target.path),
                    });
                }
                self.completed(c, now);
                Ok(())
            }
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
        c.response = ResponseReader::new();
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
        self.out.all_requests += 1;
        let tx = c.tx.take();
        c.state = State::Idle;
        let Some(tx) = tx.filter(|t| t.measured) else { return };
        self.shared.completed.fetch_add(1, Ordering::Relaxed);
        self.out.requests += 1;
        let t = c.timeline;
        let _ = self.out.latency.record(t.latency_ns().max(1));
        let _ = self.out.ttfb.record(t.ttfb_ns().max(1));
        if let Ok(l) = t.layers() {
            for (h, (_, v)) in self.out.layers.iter_mut().zip(l.named()) {
                let _ = h.record(v.max(1));
            }
        }
        let second = now.saturating_duration_since(self.plan.measure_from).as_secs() as usize;
        if let Some(s) = self.out.per_second.get_mut(second) {
            *s += 1;
        }
        if self.opts.timelines {
            self.out.timelines.push(t);
        }
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
        if c.state == State::Idle && (!self.opts.keep_alive || c.response.closes) {
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
                self.failed(
                    tx,
                    Failure {
                        kind: "timeout",
                        message: format!("no complete response within {:?} (while {state:?})", self.opts.timeout),
                    },
                );
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
    fn mismatches_name_both_values() {
        let e = Expect { group: Some("X25519MLKEM768".into()), cipher: None, sigalg: Some("mldsa65".into()) };
        let got = Negotiated { group: "X25519MLKEM768".into(), sigalg: "ML-DSA-65".into(), ..Negotiated::default() };
        assert!(e.mismatches(&got).is_empty());
        let got = Negotiated { group: "x25519".into(), sigalg: "mldsa65".into(), ..Negotiated::default() };
        assert_eq!(e.mismatches(&got), vec!["group x25519 (asked: X25519MLKEM768)".to_string()]);
    }
}
