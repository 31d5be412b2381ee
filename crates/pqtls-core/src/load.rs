//! The load measurement's result (`kind = "load"`): connections and requests per second
//! through a real server, latency distributions kept as HdrHistograms (so that shards merge
//! exactly), CPU per handshake on each side, errors by kind. docs/results-schema.md.

use crate::backend::Negotiated;
use crate::record::Bytes;
use crate::stats::QuantileInterval;
use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Significant decimal digits of every latency histogram (0.1 % resolution).
pub const HISTOGRAM_DIGITS: u8 = 3;

/// A new latency histogram in ns (1 ns … auto-resized, [`HISTOGRAM_DIGITS`]).
pub fn histogram() -> Histogram<u64> {
    let mut h = Histogram::new(HISTOGRAM_DIGITS).expect("3 significant digits is a valid HdrHistogram precision");
    h.auto(true);
    h
}

/// A latency distribution: its percentiles for readers, and the whole HdrHistogram (V2,
/// deflate, base64) so that distributions of shards or repeats merge exactly.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Latency {
    pub count: u64,
    pub min_ns: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
    /// The HdrHistogram, V2 deflate encoding, base64.
    pub histogram: String,
}

impl Latency {
    /// Summarises a histogram of ns values.
    pub fn of(h: &Histogram<u64>) -> Latency {
        let mut bytes = Vec::new();
        // Serializing into a Vec cannot fail for a valid histogram; an empty string is read back
        // as "no histogram" by `histogram()`, never as numbers.
        let encoded = match V2DeflateSerializer::new().serialize(h, &mut bytes) {
            Ok(_) => base64::engine::general_purpose::STANDARD.encode(&bytes),
            Err(_) => String::new(),
        };
        if h.is_empty() {
            return Latency { histogram: encoded, ..Latency::default() };
        }
        Latency {
            count: h.len(),
            min_ns: h.min(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.50),
            p90_ns: h.value_at_quantile(0.90),
            p95_ns: h.value_at_quantile(0.95),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
            histogram: encoded,
        }
    }

    /// The histogram back, for merging.
    pub fn histogram(&self) -> Result<Histogram<u64>, String> {
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(self.histogram.as_bytes())
            .map_err(|e| format!("latency histogram is not base64: {e}"))?;
        let mut h: Histogram<u64> = Deserializer::new()
            .deserialize(&mut bytes.as_slice())
            .map_err(|e| format!("latency histogram does not decode: {e:?}"))?;
        h.auto(true);
        Ok(h)
    }

    /// Quantile `q` with its ~95 % interval ([`QuantileInterval::of`]); `None` without a
    /// readable, non-empty histogram.
    pub fn quantile_interval(&self, q: f64) -> Option<QuantileInterval> {
        QuantileInterval::of(&self.histogram().ok()?, q)
    }

    /// The exact distribution of `a` and `b` together (not an average of percentiles).
    pub fn merge(a: &Latency, b: &Latency) -> Result<Latency, String> {
        let mut h = a.histogram()?;
        h.add(b.histogram()?).map_err(|e| format!("merging latency histograms: {e:?}"))?;
        Ok(Latency::of(&h))
    }
}

/// Errors of one kind: how many, and the last one's message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorCount {
    /// `connect`, `tls`, `negotiation`, `http`, `io`, `timeout`, `body` (a response body over
    /// the limit), `queue` (open loop: due requests not sent, the queue of waiting ones full), …
    /// Records of older runs have the kinds they had; readers take any string.
    pub kind: String,
    pub count: u64,
    pub last: String,
}

/// Adds one error to a list of counts by kind.
pub fn count_error(errors: &mut Vec<ErrorCount>, kind: &str, message: String) {
    match errors.iter_mut().find(|x| x.kind == kind) {
        Some(x) => {
            x.count += 1;
            x.last = message;
        }
        None => errors.push(ErrorCount { kind: kind.to_string(), count: 1, last: message }),
    }
}

/// Adds counts by kind (of another thread, shard or run) to a list of counts by kind; the
/// last message of each kind is the added one's.
pub fn add_errors(into: &mut Vec<ErrorCount>, from: &[ErrorCount]) {
    for e in from {
        match into.iter_mut().find(|x| x.kind == e.kind) {
            Some(x) => {
                x.count += e.count;
                x.last = e.last.clone();
            }
            None => into.push(e.clone()),
        }
    }
}

/// The checks every load generator makes of its shape: 1 to `max_threads` threads, 1 to 100,000
/// connections per thread, a positive rate, a duration above 0, at least one request.
pub fn check_shape(
    threads: usize,
    max_threads: usize,
    connections: usize,
    rate_per_s: Option<f64>,
    duration: std::time::Duration,
    requests: Option<u64>,
) -> crate::Result<()> {
    use crate::Error;
    if threads == 0 || threads > max_threads {
        return Err(Error::Invalid(format!("{threads} load threads: give 1 to {max_threads} (e.g. --threads 4)")));
    }
    if connections == 0 || connections > 100_000 {
        return Err(Error::Invalid(format!(
            "{connections} connections per thread: give 1 to 100000 (e.g. --connections 4)"
        )));
    }
    if let Some(r) = rate_per_s {
        if !(r.is_finite() && r > 0.0) {
            return Err(Error::Invalid(format!("rate {r}/s: give a positive rate, e.g. --rate 100/s")));
        }
    }
    if duration.is_zero() {
        return Err(Error::Invalid("a duration of 0: give e.g. --duration 10s".into()));
    }
    if requests == Some(0) {
        return Err(Error::Invalid("--requests 0: give at least 1".into()));
    }
    Ok(())
}

/// Who terminated TLS.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Terminator {
    /// `pqtls` (pqtls serve), `nginx`, `haproxy`, or `external` (a server pqtls did not start).
    pub name: String,
    /// Its version and TLS library, when known (`nginx/1.26.3 (OpenSSL 3.5.1)`).
    pub version: String,
    /// The backend behind it, when it forwards (`pqtls serve --plain`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<String>,
}

/// The server's side of a load run, from `pqtls serve`'s counters (before/after difference).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerSide {
    pub handshakes: u64,
    pub requests: u64,
    /// Server CPU inside the TLS stack's calls per handshake (thread CPU clock), ns.
    pub handshake_cpu_ns_mean: f64,
    /// Server process CPU (user + system) over the run per handshake, when known, ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process_cpu_ns_per_handshake: Option<f64>,
    /// Where the server's handshake CPU lies on a connection's timeline; absent for servers
    /// that do not report it and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phases: Option<HandshakePhases>,
    /// With `--memory` (`memory = true`): the server's heap traffic per connection over the
    /// run; absent otherwise and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<ServerHeap>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub errors: Vec<ErrorCount>,
}

/// Where one side's handshake CPU lies on a new connection's timeline (means per handshake,
/// ns): what the round-trip model puts on each layer's critical path
/// ([`crate::roundtrip::FlightModel::predict`]; docs/netlab.md, "The round-trip model"). The
/// rest of the side's handshake CPU ran while the peer's flight was still arriving.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HandshakePhases {
    /// Client: building the ClientHello (before it is written: layer `tcp_to_tls`). Server:
    /// up to writing its first flight, ServerHello … Finished (layer `tls`).
    pub first_flight_cpu_ns_mean: f64,
    /// The stack call that completed the handshake. Client: reading the end of the server's
    /// flight and writing its own (the end of layer `tls`). Server: reading the client's
    /// flight — with mutual TLS its certificate verified — and writing its tickets (layer
    /// `http`, before the response).
    pub completion_cpu_ns_mean: f64,
}

impl HandshakePhases {
    /// From totals over `handshakes` handshakes (`None` without any).
    pub fn mean(totals: PhaseTotals, handshakes: u64) -> Option<HandshakePhases> {
        (handshakes > 0).then(|| HandshakePhases {
            first_flight_cpu_ns_mean: totals.first_flight_cpu_ns as f64 / handshakes as f64,
            completion_cpu_ns_mean: totals.completion_cpu_ns as f64 / handshakes as f64,
        })
    }
}

/// [`HandshakePhases`] summed over handshakes, ns.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseTotals {
    #[serde(default)]
    pub first_flight_cpu_ns: u64,
    #[serde(default)]
    pub completion_cpu_ns: u64,
}

impl std::ops::AddAssign for PhaseTotals {
    fn add_assign(&mut self, o: PhaseTotals) {
        self.first_flight_cpu_ns += o.first_flight_cpu_ns;
        self.completion_cpu_ns += o.completion_cpu_ns;
    }
}

/// What pqtls serve's heap did per connection over a load run (docs/memory.md), counted on its
/// worker threads: the server's own, whether the load generator shares its process (`pqtls load
/// --memory`) or not (the URL of a `pqtls serve --memory`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerHeap {
    /// What the figures divide by: the run's handshakes (one connection each), or its requests
    /// when no handshake was made (plain HTTP).
    pub connections: u64,
    pub allocations_per_connection: f64,
    pub allocated_bytes_per_connection: f64,
    /// (allocated − freed) / connections: near 0 when what each connection took was given
    /// back by the end of the run; what connections still open keep, otherwise.
    pub retained_bytes_per_connection: f64,
}

/// What a third-party terminator's processes spent over a load run, from /proc: read before
/// the warm-up and after the measured window (the warm-up's handshakes are in it too).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TerminatorProcesses {
    /// Processes read at the end (the master and its workers).
    pub processes: u32,
    /// Σ user + system CPU of them over the run (warm-up included), ns; exact to one clock
    /// tick (`tick_ns`) per process.
    pub cpu_ns: u64,
    pub tick_ns: u64,
    /// The connections the run opened, warm-up included (= its requests without keep-alive:
    /// one handshake each); `None` with keep-alive, where the count of connections is not
    /// known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshakes: Option<u64>,
    /// `cpu_ns / handshakes`: the terminator's CPU per connection (handshake, request,
    /// forwarding to the backend and back), ns.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_ns_per_handshake: Option<f64>,
    /// Σ RSS and Σ PSS of the processes before the run and after it, bytes.
    pub rss_bytes_before: u64,
    pub rss_bytes_after: u64,
    pub pss_bytes_before: u64,
    pub pss_bytes_after: u64,
}

/// This load generator's share of a load spread over `count` of them (`pqtls load --shard
/// K/N`): 1/`count` of the target rate or connections. (A slice of an experiment's
/// configurations is another thing: `pqtls_store::Shard`.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LoadShare {
    /// 1-based.
    pub index: u32,
    pub count: u32,
}

impl LoadShare {
    /// `K/N` with 1 ≤ K ≤ N, or an error saying so.
    pub fn parse(s: &str) -> crate::Result<LoadShare> {
        let bad = || crate::Error::Invalid(format!("--shard {s}: give K/N with 1 ≤ K ≤ N, e.g. --shard 2/4"));
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (k.trim().parse().map_err(|_| bad())?, n.trim().parse().map_err(|_| bad())?);
        if index == 0 || index > count {
            return Err(bad());
        }
        Ok(LoadShare { index, count })
    }
}

/// The load measurement's result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LoadResult {
    /// What the target's URL was (`https://127.0.0.1:8443/1KiB`).
    pub url: String,
    /// What the first handshake negotiated (every later one is checked against the request).
    pub negotiated: Negotiated,
    pub terminator: Terminator,
    /// `closed` (as fast as it goes) or `open` (a timetable at `target_rate_per_s`).
    pub loop_mode: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target_rate_per_s: Option<f64>,
    /// Completed requests per second of the measured duration.
    pub achieved_rate_per_s: f64,
    /// Measured duration (after warm-up), ns.
    pub duration_ns: u64,
    /// Requests completed (a response read to its last byte).
    pub requests: u64,
    /// TLS handshakes completed.
    pub handshakes: u64,
    pub handshakes_per_s: f64,
    /// Requests the timetable had issued but that had not completed when the run ended
    /// (open loop; also counted in the latency as "at least this late").
    #[serde(default)]
    pub unfinished: u64,
    /// Latency per request: from its scheduled time (open loop) or its start (closed loop) to
    /// the last response byte.
    pub latency: Latency,
    /// Time to the first response byte, from the same start.
    pub ttfb: Latency,
    /// Client CPU inside the TLS stack's calls per handshake (thread CPU clock), ns.
    pub client_handshake_cpu_ns_mean: f64,
    /// Client process CPU (user + system, every load thread) per request, ns.
    /// The part of `client_handshake_cpu_ns_mean` spent verifying the server's certificate
    /// chain (thread CPU clock around the stack's verifier), ns per handshake; absent when the
    /// chain was not verified (`verify = false`), on s2n-tls (its validation runs inside its
    /// Certificate handler, with no callback around it: not measurable apart) or in records
    /// made before it was measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_verify_cpu_ns_mean: Option<f64>,
    /// Where the client's handshake CPU lies on a connection's timeline; absent over QUIC and
    /// in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_phases: Option<HandshakePhases>,
    pub client_process_cpu_ns_per_request: f64,
    /// The server's counters, when the server is pqtls' own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<ServerSide>,
    /// Bytes per handshake message and direction of one handshake, when measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<Bytes>,
    /// Completed measured requests in each second of the measured window (the spread of the
    /// rate within the run).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_second: Vec<u64>,
    /// Errors by kind (empty: none).
    #[serde(default)]
    pub errors: Vec<ErrorCount>,
    /// Per-layer distributions (`--layers`), keyed by [`crate::timeline::LAYER_NAMES`].
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub layers: IndexMap<String, Latency>,
    /// The run's packet capture and its per-transaction cross-check with the client's layers
    /// (`pqtls load --capture`, `measurement = "layers"`); absent otherwise (and in older records).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub capture: Option<Box<crate::crosscheck::CaptureCheck>>,
    /// A third-party terminator's processes (master and workers) read from /proc before and
    /// after the run (`--via nginx|haproxy`); absent for pqtls' own server (its counters are in
    /// `server`) and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terminator_processes: Option<TerminatorProcesses>,
    /// The emulated link the load ran over (network factors: the generator in the network
    /// lab's client namespace, the terminator in its server namespace), as verified before the
    /// run; absent on loopback and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<Box<crate::link::LinkReport>>,
    /// TCP: the TCP segments carrying data that the measured handshake's first ClientHello took,
    /// as the client's kernel counted them (`tcpi_data_segs_out` when the server's first bytes
    /// arrived). Absent over QUIC and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hello_segments: Option<u64>,
    /// QUIC: the UDP datagrams that carried the measured handshake's first ClientHello (its
    /// Initial packets, each padded to the initial datagram size): what the client's socket sent
    /// for that connection before the server's first datagram arrived (`pqtls_quic::flights`).
    /// Absent over TCP and in older records.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hello_datagrams: Option<u64>,
    /// The delay emulator during this scenario's run only (with `link`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub emulator: Option<crate::link::EmulatorReport>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<LoadShare>,
    /// Why measuring stopped: `duration`, `requests`, `interrupted`, or `server gone` (its
    /// connections refused mid-run: `duration_ns` ends at its last completed response).
    pub stopped: String,
    /// Load threads, and concurrent connections per thread.
    pub threads: u64,
    pub connections: u64,
    /// What the load generator had to say (e.g. it was the bottleneck).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// What the client trusted for the server's chain and the name it checked (`pqtls PKI
    /// root, name localhost`, `--ca ca.pem, name example.org`, `none (verify = false: …)`);
    /// absent without TLS and in records made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trust: Option<String>,
    /// Through the network lab: what the run's stall screen did (transactions whose packets the
    /// delay emulator released late beyond the budget: measured again, or counted). Absent
    /// elsewhere and in records made before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stalls: Option<crate::link::StallReport>,
}

/// Progress as the run goes.
#[derive(Clone, Debug)]
pub struct LoadProgress {
    pub phase: &'static str,
    pub elapsed: std::time::Duration,
    pub requests: u64,
    pub errors: u64,
}

/// What a load run measured (the measurement turns it into a record): the load generator's
/// over TCP and over QUIC alike (pqtls-net's carriers).
#[derive(Debug)]
pub struct LoadRun {
    /// Latency per measured request (from its due time, open loop, or its start), ns.
    pub latency: Histogram<u64>,
    pub ttfb: Histogram<u64>,
    /// Per layer ([`crate::timeline::LAYER_NAMES`]), of the measured transactions.
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
    /// The part of it spent verifying the server's certificate chain, ns (`None`: not timed —
    /// the endpoints did not ask, or the chain is not verified).
    pub verification_cpu_ns: Option<u64>,
    /// Its phases ([`HandshakePhases`]), summed over the same handshakes (zero: not measured).
    pub phase_cpu_ns: PhaseTotals,
    /// Completed measured requests in each second of the measured window.
    pub per_second: Vec<u64>,
    pub timelines: Vec<crate::timeline::Timeline>,
    /// The wall clock (Unix ns) at the run's origin, the 0 of the timelines (read next to
    /// the monotonic origin; puts the timelines next to a capture's packets).
    pub origin_unix_ns: u64,
    /// `duration`, `requests`, `interrupted` or `server gone` (then `duration_ns` ends at the
    /// last response the server completed).
    pub stopped: String,
    /// The message sizes of one handshake (thread 0's first), read from its bytes with its
    /// secrets; `Err` says why they could not be.
    pub messages: Option<std::result::Result<indexmap::IndexMap<String, u64>, String>>,
    /// That handshake's bytes per direction: client → server (to its Finished), server → client.
    pub handshake_bytes: (u64, u64),
    /// TCP: the data segments that handshake's first ClientHello took (the socket's
    /// `tcpi_data_segs_out` when the server's first bytes arrived). `None` over QUIC.
    pub client_hello_segments: Option<u64>,
    /// QUIC: the UDP datagrams that handshake's first ClientHello took (the client's first
    /// flight, counted on its socket). `None` over TCP.
    pub client_hello_datagrams: Option<u64>,
    /// What the stall screen did, when the run had one.
    pub stalls: Option<crate::link::StallReport>,
    /// QUIC: quinn's counters of the first connection that completed its transaction, when its
    /// handshake completed and when its response had been read (`None` over TCP).
    pub first_connection: Option<(crate::transfer::QuicCounters, crate::transfer::QuicCounters)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histograms_round_trip_and_merge_exactly() {
        let mut a = histogram();
        let mut b = histogram();
        for v in 1..=1000u64 {
            a.record(v * 1000).unwrap();
        }
        for v in 1..=1000u64 {
            b.record(v * 1_000_000).unwrap();
        }
        let (la, lb) = (Latency::of(&a), Latency::of(&b));
        assert_eq!(la.count, 1000);
        assert_eq!(la.histogram().unwrap().len(), 1000);
        let m = Latency::merge(&la, &lb).unwrap();
        let mut both = a.clone();
        both.add(&b).unwrap();
        assert_eq!(m, Latency::of(&both));
        assert_eq!(m.count, 2000);
        // The merged median is between the two distributions, not an average of medians.
        assert_eq!(m.p50_ns, both.value_at_quantile(0.5));
        assert!(Latency { histogram: "!!".into(), ..la }.histogram().is_err());
        let empty = Latency::of(&histogram());
        assert_eq!((empty.count, empty.histogram().unwrap().len()), (0, 0));
    }

    #[test]
    fn errors_count_by_kind() {
        let mut e = Vec::new();
        count_error(&mut e, "tls", "a".into());
        count_error(&mut e, "io", "b".into());
        count_error(&mut e, "tls", "c".into());
        assert_eq!(e[0], ErrorCount { kind: "tls".into(), count: 2, last: "c".into() });
        assert_eq!(e.len(), 2);
    }
}
