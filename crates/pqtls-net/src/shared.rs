//! What the network measurements share (load, transfer, resident; and nginx/HAProxy through
//! pqtls-peers): third-party terminators ([`Terminators`]), the server's readings over a run
//! ([`server_side`], [`terminator_processes`]), the load result a generator's run makes
//! ([`load_result`]), one-off requests on a blocking stream ([`request_once`]), a `pqtls
//! serve`'s `/stats` ([`fetch_stats`]), and the generator run in the lab's client namespace
//! ([`in_client_namespace`]). No measurement's module is imported here, and none imports
//! another's: what two of them need is here.

use crate::links::netlab_error;
use crate::load::{self, LoadOptions, Target};
use crate::response::{self, ResponseReader};
use crate::serve::StatsSnapshot;
use pqtls_core::backend::{EndpointOptions, PkiFiles, Prepared};
use pqtls_core::load::{
    HandshakePhases, Latency, LoadProgress, LoadResult, LoadRun, LoadShare, PhaseTotals, ServerHeap, ServerSide,
    Terminator, TerminatorProcesses,
};
use pqtls_core::scenario::Scenario;
use pqtls_core::timeline::LAYER_NAMES;
use pqtls_core::{Error, Result};
use pqtls_netlab::{Lab, Side};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A third-party terminator running for one scenario; stopped when dropped.
pub trait RunningTerminator {
    /// Where it listens (TLS).
    fn addr(&self) -> SocketAddr;
    /// Its name and version, for the record.
    fn describe(&self) -> Terminator;
    /// Its processes (master and workers) now, from /proc; `None`: not known.
    fn processes(&self) -> Option<ProcessReading> {
        None
    }
}

/// A third-party terminator's processes at one moment, from /proc.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProcessReading {
    /// Live processes (master and workers).
    pub processes: u32,
    /// Σ user + system CPU they have used so far, ns (in clock ticks of `tick_ns`; a process
    /// that exited no longer counts).
    pub cpu_ns: u64,
    pub tick_ns: u64,
    /// Σ resident set size and Σ proportional set size (shared pages divided among the
    /// processes mapping them), bytes.
    pub rss_bytes: u64,
    pub pss_bytes: u64,
}

/// Starts third-party TLS terminators (nginx, HAProxy) forwarding to a plain backend.
pub trait Terminators: Sync {
    fn start(
        &self,
        name: &str,
        scenario: &Scenario,
        files: &PkiFiles,
        backend: SocketAddr,
    ) -> Result<Box<dyn RunningTerminator>>;
}

/// What the terminator's processes spent from `before` to `after`; per handshake when each
/// request was a connection of its own (`one_per_request`: TLS without keep-alive).
pub fn terminator_processes(
    before: Option<ProcessReading>,
    after: Option<ProcessReading>,
    run: &LoadRun,
    one_per_request: bool,
) -> Option<TerminatorProcesses> {
    let (b, a) = (before?, after?);
    let cpu_ns = a.cpu_ns.saturating_sub(b.cpu_ns);
    let handshakes = one_per_request.then_some(run.all_requests);
    Some(TerminatorProcesses {
        processes: a.processes,
        cpu_ns,
        tick_ns: a.tick_ns,
        handshakes,
        cpu_ns_per_handshake: handshakes.filter(|&n| n > 0).map(|n| cpu_ns as f64 / n as f64),
        rss_bytes_before: b.rss_bytes,
        rss_bytes_after: a.rss_bytes,
        pss_bytes_before: b.pss_bytes,
        pss_bytes_after: a.pss_bytes,
    })
}

/// Runs a load generator (`run`, given where to report its progress) on a thread in the lab's
/// client namespace, its progress reported through `report` on the calling thread.
pub fn in_client_namespace<T: Send>(
    lab: &Lab,
    report: &mut dyn FnMut(&LoadProgress),
    run: impl FnOnce(&mut dyn FnMut(&LoadProgress)) -> T + Send,
) -> Result<T> {
    let latest: Mutex<Option<LoadProgress>> = Mutex::new(None);
    lab.within(
        Side::Client,
        || run(&mut |p| *latest.lock().unwrap_or_else(|e| e.into_inner()) = Some(p.clone())),
        || {
            if let Some(p) = latest.lock().unwrap_or_else(|e| e.into_inner()).take() {
                report(&p);
            }
        },
    )
    .map_err(netlab_error)
}

/// The server's side of a run from its counters before and after it (`terminates`: it
/// terminated TLS, so its handshakes count).
pub fn server_side(b: &StatsSnapshot, a: &StatsSnapshot, terminates: bool) -> ServerSide {
    let handshakes = a.handshakes.saturating_sub(b.handshakes);
    let cpu = a.handshake_cpu_ns_total.saturating_sub(b.handshake_cpu_ns_total);
    let mut errors = a.errors.clone();
    for e in &mut errors {
        if let Some(old) = b.errors.iter().find(|x| x.kind == e.kind) {
            e.count = e.count.saturating_sub(old.count);
        }
    }
    errors.retain(|e| e.count > 0);
    let requests = a.requests.saturating_sub(b.requests);
    ServerSide {
        handshakes: if terminates { handshakes } else { 0 },
        requests,
        handshake_cpu_ns_mean: if handshakes > 0 { cpu as f64 / handshakes as f64 } else { 0.0 },
        process_cpu_ns_per_handshake: None,
        phases: match (a.phase_cpu_ns, b.phase_cpu_ns) {
            // A server that does not measure them (older, or over QUIC) reports zeros.
            (after, _) if after == PhaseTotals::default() => None,
            (after, before) => HandshakePhases::mean(
                PhaseTotals {
                    first_flight_cpu_ns: after.first_flight_cpu_ns.saturating_sub(before.first_flight_cpu_ns),
                    completion_cpu_ns: after.completion_cpu_ns.saturating_sub(before.completion_cpu_ns),
                },
                handshakes,
            ),
        },
        heap: server_heap(b, a, if handshakes > 0 { handshakes } else { requests }),
        errors,
    }
}

/// The server's heap per connection between two snapshots (its workers' counters).
fn server_heap(b: &StatsSnapshot, a: &StatsSnapshot, connections: u64) -> Option<ServerHeap> {
    let (before, after) = (b.workers_heap.as_ref()?, a.workers_heap.as_ref()?);
    if connections == 0 {
        return None;
    }
    let n = connections as f64;
    let d = |x: u64, y: u64| y.saturating_sub(x) as f64 / n;
    Some(ServerHeap {
        connections,
        allocations_per_connection: d(before.allocations, after.allocations),
        allocated_bytes_per_connection: d(before.allocated_bytes, after.allocated_bytes),
        retained_bytes_per_connection: (after.live_bytes - before.live_bytes) as f64 / n,
    })
}

/// The load result (a load record's, a transfer record's `load`) from a generator's run.
pub fn load_result(
    opts: &LoadOptions,
    run: &LoadRun,
    terminator: Terminator,
    server: Option<ServerSide>,
    shard: Option<LoadShare>,
) -> LoadResult {
    let secs = run.duration_ns as f64 / 1e9;
    let per_s = |n: u64| if secs > 0.0 { n as f64 / secs } else { 0.0 };
    let mut notes = Vec::new();
    // The load threads' busy fraction (warm-up included): near 100 %, the generator itself may
    // be what limits the rate.
    let wall_ns = (opts.warmup + opts.duration).as_nanos() as f64 * opts.threads as f64;
    let busy = run.thread_cpu_ns as f64 / wall_ns;
    if opts.rate_per_s.is_none() && busy > 0.9 {
        notes.push(format!(
            "the load threads were busy {:.0} % of the time: the load generator may be the bottleneck (add --threads, or CPUs)",
            busy * 100.0
        ));
    }
    if run.stopped == "server gone" {
        notes.push(format!(
            "the server went away: connections refused for {} s after its last response; the run ended there, and \
             the rates are over the {:.1} s it answered",
            load::GONE_AFTER.as_secs(),
            secs
        ));
    }
    if let Some(e) = run.errors.iter().find(|e| e.kind == "queue") {
        notes.push(format!(
            "{} due requests were not sent: the open loop's queue was full (at most {} waiting in all); the server or \
             the generator cannot keep this rate",
            e.count,
            load::MAX_QUEUED
        ));
    }
    if let Some(Err(why)) = &run.messages {
        notes.push(format!("handshake message sizes not measured: {why}"));
    }
    if let Some(line) = run.stalls.as_ref().and_then(|s| s.summary()) {
        notes.push(line);
    }
    if let Some(target) = opts.rate_per_s {
        let achieved = per_s(run.requests);
        if (achieved - target).abs() > 0.01 * target {
            notes.push(format!("achieved {achieved:.1} requests/s of the {target}/s asked (off by more than 1 %)"));
        }
    }
    LoadResult {
        url: opts.target.url(),
        negotiated: run.negotiated.clone().unwrap_or_default(),
        terminator,
        loop_mode: if opts.rate_per_s.is_some() { "open" } else { "closed" }.into(),
        target_rate_per_s: opts.rate_per_s,
        achieved_rate_per_s: per_s(run.requests),
        duration_ns: run.duration_ns,
        requests: run.requests,
        handshakes: run.handshakes,
        handshakes_per_s: per_s(run.handshakes),
        unfinished: run.unfinished,
        latency: Latency::of(&run.latency),
        ttfb: Latency::of(&run.ttfb),
        client_handshake_cpu_ns_mean: if run.handshakes > 0 {
            run.handshake_cpu_ns as f64 / run.handshakes as f64
        } else {
            0.0
        },
        client_verify_cpu_ns_mean: match run.verification_cpu_ns {
            Some(ns) if run.handshakes > 0 => Some(ns as f64 / run.handshakes as f64),
            _ => None,
        },
        client_phases: match run.phase_cpu_ns {
            p if p == PhaseTotals::default() => None,
            p => HandshakePhases::mean(p, run.handshakes),
        },
        client_process_cpu_ns_per_request: if run.all_requests > 0 {
            run.thread_cpu_ns as f64 / run.all_requests as f64
        } else {
            0.0
        },
        server,
        client_hello_segments: run.client_hello_segments,
        client_hello_datagrams: run.client_hello_datagrams,
        bytes: match &run.messages {
            Some(Ok(messages)) => Some(pqtls_core::record::Bytes {
                client_to_server: run.handshake_bytes.0,
                server_to_client: run.handshake_bytes.1,
                messages: messages.clone(),
                server_to_client_range: [run.handshake_bytes.1, run.handshake_bytes.1],
                ..Default::default()
            }),
            _ => None,
        },
        per_second: run.per_second.clone(),
        errors: run.errors.clone(),
        layers: LAYER_NAMES.iter().zip(&run.layers).map(|(n, h)| (n.to_string(), Latency::of(h))).collect(),
        capture: None,
        terminator_processes: None,
        link: None,
        emulator: None,
        shard,
        stopped: run.stopped.clone(),
        threads: opts.threads as u64,
        connections: opts.connections as u64,
        notes,
        trust: None,
        stalls: run.stalls.clone(),
    }
}

/// `GET /stats` of a `pqtls serve` (one short connection; 2 s at most in all, its body at most
/// [`STATS_MAX_BYTES`]: a server that trickles or streams endlessly is given up on).
pub fn fetch_stats(target: &Target, tls: Option<&Arc<dyn Prepared>>) -> Result<StatsSnapshot> {
    let timeout = Duration::from_secs(2);
    let deadline = std::time::Instant::now() + timeout;
    let mut s = TcpStream::connect_timeout(&target.addr, timeout).map_err(|e| Error::io("connecting for /stats", e))?;
    let req = crate::http::get("/stats", &target.host, false);
    let mut reader = ResponseReader::new(STATS_MAX_BYTES).keeping_body();
    let (status, _) = request_once(&mut s, tls, &req, &mut reader, deadline, "/stats")?;
    if status != 200 {
        return Err(Error::Other(format!("/stats answered {status}")));
    }
    serde_json::from_slice(reader.body()).map_err(|e| Error::Other(format!("/stats is not pqtls serve's: {e}")))
}

/// One request on a connected blocking stream — over TLS (the handshake first, with a client of
/// `tls`) or plain — read into `reader` until the response is complete, all before `deadline`
/// (errors name `what`, e.g. `/stats`). Returns the response's status and the TLS client, still
/// open (its connection may be kept: nothing is closed here).
pub fn request_once(
    s: &mut TcpStream,
    tls: Option<&Arc<dyn Prepared>>,
    req: &[u8],
    reader: &mut ResponseReader,
    deadline: std::time::Instant,
    what: &str,
) -> Result<(u16, Option<Box<dyn pqtls_core::backend::Endpoint>>)> {
    let timeout = deadline.saturating_duration_since(std::time::Instant::now());
    let _ = s.set_write_timeout(Some(timeout.max(Duration::from_millis(1))));
    let mut buf = [0u8; 16 * 1024];
    let io = |e| Error::io(format!("reading {what}"), e);
    let bad = |e: response::ResponseError| Error::Other(format!("{what}: {}", e.message));
    let late = || Error::Other(format!("{what} not answered within {timeout:?}"));
    // Reads with what is left of the time: `None` at the end of the stream.
    let read = |s: &mut TcpStream, buf: &mut [u8]| -> Result<Option<usize>> {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(late());
        }
        let _ = s.set_read_timeout(Some(left));
        match s.read(buf) {
            Ok(0) => Ok(None),
            Ok(n) => Ok(Some(n)),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => Err(late()),
            Err(e) => Err(io(e)),
        }
    };
    let (done, endpoint) = match tls {
        Some(p) => {
            let mut ep = p.client(&EndpointOptions::traced(false))?;
            let _ = s.set_read_timeout(Some(timeout.max(Duration::from_millis(1))));
            pqtls_lab::transport::over_stream(ep.as_mut(), s, true)?;
            let mut out = Vec::new();
            ep.write_app(req)?;
            ep.take_output(&mut out)?;
            s.write_all(&out).map_err(io)?;
            let done = loop {
                let Some(n) = read(s, &mut buf)? else {
                    break reader.eof().map_err(bad)?;
                };
                ep.receive(&buf[..n])?;
                let mut plain = Vec::new();
                ep.read_app(&mut plain)?;
                if let p @ response::Progress::Done { .. } = reader.feed(&plain).map_err(bad)? {
                    break p;
                }
            };
            (done, Some(ep))
        }
        None => {
            s.write_all(req).map_err(io)?;
            let done = loop {
                let Some(n) = read(s, &mut buf)? else {
                    break reader.eof().map_err(bad)?;
                };
                if let p @ response::Progress::Done { .. } = reader.feed(&buf[..n]).map_err(bad)? {
                    break p;
                }
            };
            (done, None)
        }
    };
    match done {
        response::Progress::Done { status, .. } => Ok((status, endpoint)),
        response::Progress::More => Err(Error::Other(format!("{what}: the response ended incomplete"))),
    }
}

/// The largest `/stats` body read (pqtls serve's is a few KiB).
pub const STATS_MAX_BYTES: u64 = 1 << 20;

/// Starts `pqtls serve` for a scenario in a process of its own, counting its heap (`pqtls
/// serve --memory`), able to hold `connections` idle connections (cap, timeouts): implemented
/// where the `pqtls` executable is known (pqtls-peers' `ServeChild`, found by the CLI); the
/// resident measurement takes it (`ResidentSetup::serve`).
pub trait ResidentServers: Sync {
    fn serve(
        &self,
        scenario: &pqtls_core::scenario::Scenario,
        connections: u64,
    ) -> pqtls_core::Result<Box<dyn RunningTerminator>>;
}
