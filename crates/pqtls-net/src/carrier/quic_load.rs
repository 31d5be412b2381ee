//! The QUIC carrier's load generator: HTTP/3 (h3 over quinn, on a tokio runtime of its own),
//! from the same [`LoadOptions`] to the same [`LoadRun`] as the TCP generator, the open loop on
//! the same [`Timetable`]:
//!
//! - **threads** are the runtime's workers, and each load thread has its own quinn endpoint
//!   (one UDP socket) with its share of the connections and of the rate;
//! - **closed loop**: every connection slot starts its next transaction as soon as the last
//!   one ended; **open loop**: transactions are due on each thread's timetable
//!   (`t0 + (k + i/n) / rate_i`) and wait for a free slot, their latency counting from when
//!   they were due (no coordinated omission); at most `queue_limit` wait, the rest are errors of
//!   kind `queue`;
//! - one connection per request (or, with keep-alive, closed loop only, one connection per
//!   slot carrying request after request);
//! - the [`Timeline`] of a QUIC transaction: `connect_start_ns` = `connected_ns` =
//!   `client_hello_ns` = the connection begun (quinn builds the ClientHello and sends the first
//!   Initial at once; there is no TCP connect), `handshake_done_ns` = the handshake complete at
//!   the client, then request, first byte (the response's HEADERS frame) and last byte. So the
//!   `tcp` and `tcp_to_tls` layers are 0 and `tls` is the QUIC handshake (docs/quic-load.md);
//! - each endpoint's socket counts the datagrams of each connection's first flight
//!   ([`FirstFlights`]): the record's `client_hello_datagrams`, of the handshake whose messages
//!   it holds.

use super::quic::QuicClient;
use super::tally::{RunState, Tally};
use super::Timetable;
use super::{Client, LoadOptions};
use bytes::Buf;
use pqtls_core::link::Screened;
use pqtls_core::load::{count_error, LoadProgress, LoadRun};
use pqtls_core::timeline::Timeline;
use pqtls_core::transfer::QuicCounters;
use pqtls_core::{Error, Result};
use pqtls_quic::flights::FirstFlights;
use pqtls_quic::h3::{self, Observed, Seen};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::time::Instant as TokioInstant;

/// A connection's statistics as pqtls records them.
fn counters(conn: &quinn::Connection) -> QuicCounters {
    let s = conn.stats();
    QuicCounters {
        client_datagrams: s.udp_tx.datagrams,
        client_bytes: s.udp_tx.bytes,
        server_datagrams: s.udp_rx.datagrams,
        server_bytes: s.udp_rx.bytes,
        lost_packets: s.path.lost_packets,
        congestion_events: s.path.congestion_events,
        mtu_bytes: u64::from(s.path.current_mtu),
        cwnd_bytes: s.path.cwnd,
    }
}

/// HTTP/3's code for a connection closed with nothing wrong (RFC 9114 §8.1).
const H3_NO_ERROR: u32 = 0x100;

/// Due requests that may wait for a free slot in the open loop, over all threads.
pub const MAX_QUEUED: usize = 1_000_000;

fn validate(o: &LoadOptions) -> Result<()> {
    pqtls_core::load::check_shape(o.threads, 256, o.connections, o.rate_per_s, o.duration, o.requests)?;
    quic(o)?.tuning.validate()?;
    if o.rate_per_s.is_some() && o.keep_alive {
        return Err(Error::Unsupported(
            "an open loop with keep-alive is not built over HTTP/3: give keep_alive = false (one connection per \
             request) or a closed loop (rate = max)"
                .into(),
        ));
    }
    Ok(())
}

/// The QUIC client of `o` (an error for a TCP one).
fn quic(o: &LoadOptions) -> Result<&QuicClient> {
    match &o.client {
        Client::Quic(q) => Ok(q),
        Client::Tcp { .. } => {
            Err(Error::Invalid(format!("{}: the HTTP/3 load generator runs over QUIC, not TCP", o.target.url())))
        }
    }
}

/// What every task shares: the run's state, its options, clocks and what QUIC adds.
struct Shared {
    state: RunState,
    opts: LoadOptions,
    quic: QuicClient,
    origin: Instant,
    /// The monotonic clock at `origin`, ns (the delay emulator's clock: stall screening).
    origin_mono_ns: u64,
    measure_from: Instant,
    measure_to: Instant,
    /// What the first handshake's client saw (its messages: the record's bytes; read at the
    /// end, when its last message, the client's Finished, has been written).
    first: Mutex<Option<Arc<Mutex<Seen>>>>,
    /// Open loop: due requests waiting for a slot now, over all threads.
    queued: AtomicU64,
    /// quinn's counters of the first connection that completed its transaction.
    counters: Mutex<Option<(QuicCounters, QuicCounters)>>,
    /// The datagrams of the first ClientHello of the handshake in `first`.
    client_hello_datagrams: Mutex<Option<u64>>,
}

/// A load thread's quinn endpoint and its socket's first flights.
#[derive(Clone)]
struct Socket {
    endpoint: quinn::Endpoint,
    flights: Arc<FirstFlights>,
}

impl std::ops::Deref for Shared {
    type Target = RunState;
    fn deref(&self) -> &RunState {
        &self.state
    }
}

impl Shared {
    fn ns(&self, t: Instant) -> u64 {
        t.saturating_duration_since(self.origin).as_nanos() as u64
    }
}

/// What one slot (or the open loop's transactions of one thread) measured: a [`Tally`].
impl Tally {
    /// One completed transaction; measured when it started (or was due) in the measured
    /// stretch. Returns how long the slot waits before its next one (a transaction the stall
    /// screen discarded).
    fn done(&mut self, s: &Shared, t: &Timeline, handshake: Option<u64>, measured: bool) -> Option<Duration> {
        self.all_requests += 1;
        s.successes.fetch_add(1, Ordering::Relaxed);
        if !measured {
            return None;
        }
        if let Some(screen) = &s.opts.stalls {
            let (from, to) = t.span_ns();
            match s.stalls.judge(screen, s.origin_mono_ns + from, s.origin_mono_ns + to) {
                Screened::Keep => {}
                Screened::Again { pause } => {
                    // Discarded whole; the closed loop's count gets the transaction back after
                    // the pause (its slot waits for it: `closed_slot`), and a run of a fixed
                    // count measures that much longer.
                    s.extend_window(Duration::from_nanos(to.saturating_sub(from)) + pause);
                    if let Some(b) = &s.budget {
                        b.fetch_add(1, Ordering::SeqCst);
                    }
                    return Some(pause);
                }
                Screened::TooMany(why) => {
                    s.fatal(why);
                    return None;
                }
            }
        }
        s.completed.fetch_add(1, Ordering::Relaxed);
        if let Some(cpu) = handshake {
            self.handshakes += 1;
            self.handshake_cpu_ns += cpu;
        }
        let from = s.ns(s.measure_from);
        let second = (t.last_byte_ns.saturating_sub(from) / 1_000_000_000) as usize;
        self.record(t, second, s.opts.timelines);
        None
    }

    fn error(&mut self, s: &Shared, kind: &str, message: String) {
        s.errors.fetch_add(1, Ordering::Relaxed);
        count_error(&mut self.errors, kind, message);
    }
}

/// Why one transaction failed.
struct Failure {
    kind: &'static str,
    message: String,
}

fn failure(kind: &'static str, message: impl Into<String>) -> Failure {
    Failure { kind, message: message.into() }
}

/// Runs the load; returns what was measured (with quinn's counters of the first connection),
/// or an error when nothing could be (nothing answering QUIC there, no h3, another group
/// negotiated…).
pub fn run(opts: &LoadOptions, interrupt: &AtomicBool, progress: &mut dyn FnMut(&LoadProgress)) -> Result<LoadRun> {
    validate(opts)?;
    let thread_cpu_ns = Arc::new(AtomicU64::new(0));
    let runtime = {
        let cpu = thread_cpu_ns.clone();
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(opts.threads)
            .thread_name("pqtls-load-quic")
            .enable_all()
            .on_thread_stop(move || {
                cpu.fetch_add(pqtls_core::trace::thread_cpu_ns(), Ordering::Relaxed);
            })
            .build()
            .map_err(|e| Error::io("starting the load runtime", e))?
    };
    let origin = Instant::now();
    let origin_unix_ns =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let shared = Arc::new(Shared {
        state: RunState::new(opts.requests),
        opts: opts.clone(),
        quic: quic(opts)?.clone(),
        origin,
        origin_mono_ns: pqtls_core::trace::wall_ns(),
        measure_from: origin + opts.warmup,
        measure_to: origin + opts.warmup + opts.duration,
        first: Mutex::new(None),
        queued: AtomicU64::new(0),
        counters: Mutex::new(None),
        client_hello_datagrams: Mutex::new(None),
    });
    let mut endpoints = Vec::new();
    let mut tasks = Vec::new();
    for i in 0..opts.threads {
        let bind: SocketAddr =
            if opts.target.addr.is_ipv4() { "0.0.0.0:0".parse() } else { "[::]:0".parse() }.expect("a valid address");
        let socket = h3::bind_udp(bind)?;
        let endpoint = {
            let _guard = runtime.enter();
            let socket = quinn::Runtime::wrap_udp_socket(&quinn::TokioRuntime, socket)
                .map_err(|e| Error::io("starting a QUIC client endpoint", e))?;
            let flights = Arc::new(FirstFlights::new(socket));
            let endpoint = quinn::Endpoint::new_with_abstract_socket(
                quinn::EndpointConfig::default(),
                None,
                flights.clone(),
                Arc::new(quinn::TokioRuntime),
            )
            .map_err(|e| Error::io("starting a QUIC client endpoint", e))?;
            Socket { endpoint, flights }
        };
        endpoints.push(endpoint.endpoint.clone());
        match opts.rate_per_s {
            None => {
                for _ in 0..opts.connections {
                    tasks.push(runtime.spawn(closed_slot(endpoint.clone(), shared.clone())));
                }
            }
            Some(rate) => {
                let per_thread = rate / opts.threads as f64;
                tasks.push(runtime.spawn(open_thread(endpoint.clone(), shared.clone(), i, per_thread)));
            }
        }
    }
    // Supervise: Ctrl-C, progress once a second, until every task is done.
    let mut stopped = "duration";
    let mut last = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(20));
        let now = Instant::now();
        if tasks.iter().all(|t| t.is_finished()) {
            if opts.requests.is_some() && now < shared.window_end(shared.measure_to) && stopped == "duration" {
                stopped = "requests";
            }
            break;
        }
        shared.supervise_turn(interrupt, &mut stopped, [origin, shared.measure_from], &mut last, progress);
    }
    let measure_to = shared.window_end(shared.measure_to);
    let end = if stopped == "duration" { measure_to } else { Instant::now().min(measure_to) };
    let mut total = Tally::new(opts.duration);
    for t in tasks {
        let tally = runtime.block_on(t).map_err(|e| Error::Other(format!("a load task failed: {e}")))?;
        total.add(tally)?;
    }
    for e in &endpoints {
        e.close(H3_NO_ERROR.into(), b"load done");
    }
    runtime.block_on(async {
        for e in &endpoints {
            let _ = tokio::time::timeout(Duration::from_millis(500), e.wait_idle()).await;
        }
    });
    drop(endpoints);
    runtime.shutdown_timeout(Duration::from_secs(2));
    if let Some(why) = shared.take_fatal() {
        return Err(Error::Invalid(why));
    }
    let first = shared.first.lock().unwrap_or_else(|p| p.into_inner()).take();
    let first = first.map(|f| f.lock().unwrap_or_else(|p| p.into_inner()).clone());
    let negotiated = shared.negotiated();
    let mut timelines = total.timelines;
    timelines.sort_by_key(|t| t.scheduled_ns.or(t.connect_start_ns).unwrap_or(t.request_ns));
    let run = LoadRun {
        latency: total.latency,
        ttfb: total.ttfb,
        layers: total.layers,
        requests: total.requests,
        handshakes: total.handshakes,
        unfinished: total.unfinished,
        errors: total.errors,
        negotiated,
        duration_ns: end.saturating_duration_since(shared.measure_from).as_nanos() as u64,
        thread_cpu_ns: thread_cpu_ns.load(Ordering::Relaxed),
        all_requests: total.all_requests,
        handshake_cpu_ns: total.handshake_cpu_ns,
        // The prepared verifier counts it (h3::H3Configs::verifications): the measurement fills it.
        verification_cpu_ns: None,
        phase_cpu_ns: Default::default(),
        per_second: total.per_second,
        timelines,
        origin_unix_ns,
        stopped: stopped.to_string(),
        handshake_bytes: first.as_ref().map_or((0, 0), Seen::bytes),
        client_hello_segments: None,
        client_hello_datagrams: shared.client_hello_datagrams.lock().unwrap_or_else(|p| p.into_inner()).take(),
        messages: first.map(|s| Ok(s.message_table())),
        stalls: opts.stalls.as_ref().map(|screen| shared.stalls.report(screen)),
        first_connection: shared.counters.lock().unwrap_or_else(|p| p.into_inner()).take(),
    };
    Ok(run)
}

/// A closed-loop slot: transaction after transaction until the measured stretch ends (or the
/// request budget is spent).
async fn closed_slot(endpoint: Socket, s: Arc<Shared>) -> Tally {
    let mut tally = Tally::new(s.opts.duration);
    let mut kept: Option<Kept> = None;
    loop {
        let now = Instant::now();
        if s.stop.load(Ordering::SeqCst) || now >= s.window_end(s.measure_to) {
            break;
        }
        let measured = now >= s.measure_from;
        if measured {
            if let Some(b) = &s.budget {
                if b.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1)).is_err() {
                    s.stop.store(true, Ordering::SeqCst);
                    break;
                }
            }
        }
        let outcome = abortable(&s, transaction(&endpoint, &s, None, &mut kept)).await;
        if let Some(pause) = settle(&s, &mut tally, outcome, measured) {
            tokio::time::sleep(pause).await;
        }
    }
    if let Some(k) = kept {
        k.conn.close(H3_NO_ERROR.into(), b"done");
    }
    tally
}

/// The open loop of one thread: its timetable, each due transaction waiting for one of the
/// thread's slots.
async fn open_thread(endpoint: Socket, s: Arc<Shared>, index: usize, rate: f64) -> Tally {
    let slots = Arc::new(tokio::sync::Semaphore::new(s.opts.connections));
    let queue_limit = (MAX_QUEUED / s.opts.threads).max(1) as u64;
    let timetable = Timetable { origin: s.origin, rate_per_s: rate, index, threads: s.opts.threads };
    let mut running = tokio::task::JoinSet::new();
    let mut tally = Tally::new(s.opts.duration);
    let mut waiting = 0u64;
    for k in 0u64.. {
        let due = timetable.due_at(k);
        if due >= s.measure_to || s.stop.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep_until(TokioInstant::from_std(due)).await;
        while let Some(Ok((t, _))) = running.try_join_next() {
            let t: Tally = t;
            let _ = tally.add(t);
            waiting = waiting.saturating_sub(1);
        }
        if s.stop.load(Ordering::SeqCst) {
            break;
        }
        let measured = due >= s.measure_from;
        if slots.available_permits() == 0 {
            if s.queued.load(Ordering::Relaxed) >= queue_limit * s.opts.threads as u64 {
                tally.error(&s, "queue", "the open loop's queue of due requests is full".into());
                continue;
            }
        }
        s.queued.fetch_add(1, Ordering::Relaxed);
        waiting += 1;
        let (ep, sh, sl) = (endpoint.clone(), s.clone(), slots.clone());
        running.spawn(async move {
            let mut t = Tally::new(sh.opts.duration);
            let permit = sl.acquire_owned().await;
            sh.queued.fetch_sub(1, Ordering::Relaxed);
            let scheduled = sh.ns(due);
            let outcome = abortable(&sh, transaction(&ep, &sh, Some(scheduled), &mut None)).await;
            drop(permit);
            settle(&sh, &mut t, outcome, measured);
            (t, ())
        });
    }
    while let Some(r) = running.join_next().await {
        if let Ok((t, _)) = r {
            let _ = tally.add(t);
        }
    }
    tally
}

/// A transaction's end: `None` when the run was aborted under it (unfinished).
type Outcome = Option<std::result::Result<(Timeline, Option<u64>), Failure>>;

async fn abortable(
    s: &Shared,
    tx: impl std::future::Future<Output = std::result::Result<(Timeline, Option<u64>), Failure>>,
) -> Outcome {
    let abort = async {
        while !s.abort.load(Ordering::SeqCst) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::select! {
        r = tokio::time::timeout(s.opts.timeout, tx) => Some(r.unwrap_or_else(|_| Err(failure(
            "timeout",
            format!("not complete {:?} after it started (--timeout)", s.opts.timeout),
        )))),
        _ = abort => None,
    }
}

/// A transaction's end in `tally`; the pause before the slot's next one, if any.
fn settle(s: &Shared, tally: &mut Tally, outcome: Outcome, measured: bool) -> Option<Duration> {
    match outcome {
        None => tally.unfinished += u64::from(measured),
        Some(Ok((t, handshake))) => return tally.done(s, &t, handshake, measured),
        Some(Err(f)) => {
            // Before any success: nothing answers as it should; say so once, not per request.
            if s.successes.load(Ordering::SeqCst) == 0 && matches!(f.kind, "timeout" | "alpn") {
                s.fatal(f.message.clone());
            }
            tally.error(s, f.kind, f.message);
        }
    }
    None
}

/// A connection kept open between requests (keep-alive).
struct Kept {
    conn: quinn::Connection,
    send: ::h3::client::SendRequest<h3_quinn::OpenStreams, bytes::Bytes>,
}

/// One transaction: a new connection (or the kept one), one GET, its response read to the end.
/// Returns the timeline and, for a new connection, the client's TLS CPU of its handshake.
async fn transaction(
    socket: &Socket,
    s: &Shared,
    scheduled_ns: Option<u64>,
    kept: &mut Option<Kept>,
) -> std::result::Result<(Timeline, Option<u64>), Failure> {
    let (o, q) = (&s.opts, &s.quic);
    let mut t = Timeline { scheduled_ns, ..Timeline::default() };
    let mut handshake = None;
    let mut at_handshake = None;
    if kept.is_none() {
        let seen = Arc::new(Mutex::new(Seen::default()));
        let mut config = quinn::ClientConfig::new(Arc::new(Observed::client(q.tls.clone(), seen.clone())));
        let mut transport = q.tuning.transport();
        transport.max_idle_timeout(quinn::IdleTimeout::try_from(o.timeout.min(Duration::from_secs(600))).ok());
        config.transport_config(Arc::new(transport));
        if let Some(tokens) = &q.tokens {
            config.token_store(tokens.clone());
        }
        let start = s.ns(Instant::now());
        t.connect_start_ns = Some(start);
        t.connected_ns = Some(start);
        t.client_hello_ns = Some(start);
        let connecting = socket
            .endpoint
            .connect_with(config, o.target.addr, &q.server_name)
            .map_err(|e| failure("connect", format!("connecting to {}: {e}", o.target.addr)))?;
        // Given up before the transaction's own timeout — with room for the TCP probe that names
        // a TCP-only server, and for a late timer on a busy machine — so that a server that
        // never answers is named as such rather than as a slow transaction.
        let conn = match tokio::time::timeout(o.timeout.mul_f64(0.75), connecting).await {
            Ok(c) => c.map_err(|e| handshake_failure(o, e))?,
            Err(_) => return Err(handshake_failure(o, quinn::ConnectionError::TimedOut)),
        };
        t.handshake_done_ns = Some(s.ns(Instant::now()));
        at_handshake = Some(counters(&conn));
        let (cpu_ns, dcid) = {
            let seen = seen.lock().unwrap_or_else(|p| p.into_inner());
            (seen.cpu_ns, seen.initial_dcid.clone())
        };
        handshake = Some(cpu_ns);
        let datagrams = dcid.and_then(|d| socket.flights.take(&d));
        check_negotiated(s, &seen, datagrams);
        let (mut driver, send) = ::h3::client::new(h3_quinn::Connection::new(conn.clone()))
            .await
            .map_err(|e| failure("http", format!("HTTP/3 connection: {e}")))?;
        tokio::spawn(async move {
            let _ = std::future::poll_fn(|cx| driver.poll_close(cx)).await;
        });
        *kept = Some(Kept { conn, send });
    }
    let Some(k) = kept.as_mut() else { return Err(failure("connect", "no connection")) };
    let result = exchange(k, s, &mut t).await;
    if let (Ok(()), Some(h)) = (&result, at_handshake) {
        let mut first = s.counters.lock().unwrap_or_else(|p| p.into_inner());
        if first.is_none() {
            *first = Some((h, counters(&k.conn)));
        }
    }
    if result.is_err() || !o.keep_alive {
        if let Some(k) = kept.take() {
            k.conn.close(H3_NO_ERROR.into(), b"done");
        }
    }
    result.map(|()| (t, handshake))
}

/// One GET on a connection: request, response head, body to its end.
async fn exchange(k: &mut Kept, s: &Shared, t: &mut Timeline) -> std::result::Result<(), Failure> {
    let o = &s.opts;
    let uri = format!("https://{}{}", o.target.host, o.target.path);
    let req = http::Request::get(&uri).body(()).map_err(|e| failure("http", format!("request {uri}: {e}")))?;
    t.request_ns = s.ns(Instant::now());
    let http = |e: &dyn std::fmt::Display| failure("http", format!("{uri}: {e}"));
    let mut stream = k.send.send_request(req).await.map_err(|e| http(&e))?;
    stream.finish().await.map_err(|e| http(&e))?;
    let resp = stream.recv_response().await.map_err(|e| http(&e))?;
    t.first_byte_ns = s.ns(Instant::now());
    let limit = o.target.asked_bytes().unwrap_or(o.max_body_bytes);
    let mut body = 0u64;
    while let Some(chunk) = stream.recv_data().await.map_err(|e| http(&e))? {
        body += chunk.remaining() as u64;
        if body > limit {
            return Err(failure("body", format!("{uri}: a body over {limit} bytes")));
        }
    }
    t.last_byte_ns = s.ns(Instant::now());
    if resp.status() != 200 {
        return Err(failure("http", format!("{uri}: status {}", resp.status().as_u16())));
    }
    let length = resp.headers().get("content-length").and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if let Some(n) = length.filter(|&n| n != body) {
        return Err(failure("http", format!("{uri}: {body} body bytes, content-length {n}")));
    }
    Ok(())
}

/// The first handshake's parameters are kept and checked against what was asked (a mismatch
/// ends the run naming both), with the datagrams its first ClientHello took.
fn check_negotiated(s: &Shared, seen: &Arc<Mutex<Seen>>, client_hello_datagrams: Option<u64>) {
    let mut n = s.negotiated.lock().unwrap_or_else(|p| p.into_inner());
    if n.is_some() {
        return;
    }
    let got = seen.lock().unwrap_or_else(|p| p.into_inner()).negotiated(&s.quic.codepoints);
    let wrong = s.opts.expect.mismatches(&got);
    if !wrong.is_empty() {
        s.fatal(format!("{} over HTTP/3 negotiated {}", s.opts.target.addr, wrong.join(", ")));
    }
    *n = Some(got);
    *s.first.lock().unwrap_or_else(|p| p.into_inner()) = Some(seen.clone());
    *s.client_hello_datagrams.lock().unwrap_or_else(|p| p.into_inner()) = client_hello_datagrams;
}

/// A handshake that failed, said plainly: no QUIC answer at all (nothing speaks HTTP/3
/// there — a TCP-only server, HTTP/1.1 or HTTP/2, does not answer), no h3 ALPN, or TLS.
fn handshake_failure(o: &LoadOptions, e: quinn::ConnectionError) -> Failure {
    use quinn::ConnectionError as C;
    match e {
        C::TimedOut => {
            let tcp = std::net::TcpStream::connect_timeout(&o.target.addr, Duration::from_millis(100)).is_ok();
            failure(
                "timeout",
                format!(
                    "no QUIC answer from UDP {} within {:?}: nothing speaks HTTP/3 there{}",
                    o.target.addr,
                    o.timeout,
                    if tcp {
                        format!(
                            " (a TCP server listens on {}: it speaks HTTP/1.1 or HTTP/2, not HTTP/3 — leave out --quic)",
                            o.target.addr
                        )
                    } else {
                        String::new()
                    }
                ),
            )
        }
        C::ConnectionClosed(c) if u64::from(c.error_code) == h3::NO_APPLICATION_PROTOCOL => failure(
            "alpn",
            format!(
                "{} speaks QUIC but not HTTP/3: it refused the ALPN h3 (no_application_protocol){}",
                o.target.addr,
                if c.reason.is_empty() { String::new() } else { format!(": {}", String::from_utf8_lossy(&c.reason)) }
            ),
        ),
        C::ConnectionClosed(c) => failure("tls", format!("handshake with {}: {c}", o.target.addr)),
        C::TransportError(e) => failure("tls", format!("handshake with {}: {e}", o.target.addr)),
        other => failure("io", format!("handshake with {}: {other}", o.target.addr)),
    }
}
