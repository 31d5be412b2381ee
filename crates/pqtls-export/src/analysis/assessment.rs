//! The answer of an assessment (`pqtls assess`, docs/assess.md): what moving from one
//! configuration to others costs, per stack, from the records of every kind in one set — in
//! situ (CPU per side, bytes each way), throughput through `pqtls serve` (and nginx), latency
//! at a moderate rate, TTFB/TTLB over the user's link (measured in the network lab, or the
//! round-trip model's prediction when it could not run, labelled as such) — and the deployment
//! the user described. The reports put it first ([`crate::ReportOptions::assessment`]).

use super::{factor_value, InsituView, View, STACK};
use crate::ResultSet;
use pqtls_core::load::{HandshakePhases, LoadResult};
use pqtls_core::record::Record;
use pqtls_core::roundtrip::{FlightModel, KERNEL_RCVBUF_BYTES, LAB_MSS_BYTES};
use pqtls_core::trace::Side;
use pqtls_core::transfer::TransferResult;
use serde::{Deserialize, Serialize};

/// A configuration of the assessment: the factor values (canonical) its records carry, and
/// how the user wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Config {
    pub spec: String,
    pub factors: Vec<(String, String)>,
}

impl Config {
    /// Whether `record` measured this configuration (on any stack).
    pub fn matches(&self, record: &Record) -> bool {
        self.factors.iter().all(|(f, v)| factor_value(record, f) == v)
    }
}

/// What the user told about their deployment.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deployment {
    pub rtt_ns: u64,
    /// `None`: not limited.
    pub bits_per_s: Option<u64>,
    /// The response body.
    pub response_bytes: u64,
    /// The HTTP response head and the GET request, as pqtls serve and its client send them.
    pub response_head_bytes: u64,
    pub request_bytes: u64,
    /// The servers' (and clients') initial congestion window, segments.
    pub initcwnd: u64,
}

/// An assessment: from, to, the deployment, whether the network lab measured it, and the
/// command that reproduces each part.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    pub from: Config,
    pub to: Vec<Config>,
    pub deployment: Deployment,
    /// The commands that made the records: (part, command).
    pub commands: Vec<(String, String)>,
    /// Parts that did not run, with why (e.g. the network lab without root).
    pub not_run: Vec<(String, String)>,
    /// The parts' results directories, relative to the assessment's.
    pub parts: Vec<String>,
    /// The user's own server (`--url`), loaded from the client side; `None`: not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub endpoint: Option<Endpoint>,
    /// Per `to`, the two configurations between `from` and it that split its cost into the
    /// key exchange's and the certificates' (or why there is no split). Empty in assessments
    /// saved before the split existed.
    #[serde(default)]
    pub splits: Vec<Split>,
}

/// The factors of a configuration that make its key exchange; the certificates are
/// [`CERTIFICATE_FACTORS`]. Every other factor is neither: a `to` that also changes one of those
/// puts that change in the split's rest.
pub const KEY_EXCHANGE_FACTORS: &[&str] = &["group", "key_shares"];
pub const CERTIFICATE_FACTORS: &[&str] = &["chain", "client_chain"];

/// How one `to`'s cost splits: the configuration with only the key exchange moved to the
/// target's (`from`'s certificates), and the one with only the certificates moved (`from`'s key
/// exchange) — or why the split is meaningless (from and to share the key exchange or the
/// certificates: then all of the change is the other's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Split {
    /// The `to` as the user wrote it.
    pub to: String,
    pub key_exchange: Option<Config>,
    pub certificates: Option<Config>,
    /// Why there is no split (`None` when there is one).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub why_not: Option<String>,
    /// Factors `to` changes that are neither the key exchange nor the certificates (their
    /// change is in the rest).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub others: Vec<String>,
}

impl Config {
    /// The value of factor `name` in this configuration (its default when it does not set it).
    pub fn value(&self, name: &str) -> String {
        self.factors
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_else(|| pqtls_core::factor::factor(name).and_then(|f| f.default).unwrap_or("").to_string())
    }

    /// `self` with the factors in `names` taken from `other`; its spec written as the user
    /// would (`group:chain word=value …`, defaults left out).
    pub fn with_from(&self, other: &Config, names: &[&str]) -> Config {
        let mut factors: Vec<(String, String)> = Vec::new();
        let mut seen: Vec<&str> = Vec::new();
        for (n, _) in self.factors.iter().chain(&other.factors) {
            if seen.contains(&n.as_str()) {
                continue;
            }
            seen.push(n);
            let v = if names.contains(&n.as_str()) { other.value(n) } else { self.value(n) };
            factors.push((n.clone(), v));
        }
        let default = |n: &str, v: &str| pqtls_core::factor::factor(n).and_then(|f| f.default) == Some(v);
        // Keep group and chain always; other factors only away from their default.
        factors.retain(|(n, v)| matches!(n.as_str(), "group" | "chain") || !default(n, v));
        let find = |n: &str| factors.iter().find(|(f, _)| f == n).map(|(_, v)| v.clone()).unwrap_or_default();
        let mut spec = format!("{}:{}", find("group"), find("chain"));
        for (n, v) in factors.iter().filter(|(n, _)| !matches!(n.as_str(), "group" | "chain")) {
            spec += &format!(" {n}={v}");
        }
        Config { spec, factors }
    }
}

impl Split {
    /// The split of `from → to`: meaningful when they differ both in the key exchange and in
    /// the certificates.
    pub fn of(from: &Config, to: &Config) -> Split {
        let differs = |names: &[&str]| names.iter().any(|n| from.value(n) != to.value(n));
        let mut names: Vec<&str> = Vec::new();
        for (n, _) in from.factors.iter().chain(&to.factors) {
            if !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
        let others: Vec<String> = names
            .iter()
            // The stack is a column of the answer, not a change.
            .filter(|n| !KEY_EXCHANGE_FACTORS.contains(n) && !CERTIFICATE_FACTORS.contains(n) && **n != "stack")
            .filter(|n| from.value(n) != to.value(n))
            .map(|n| n.to_string())
            .collect();
        let why_not = match (differs(KEY_EXCHANGE_FACTORS), differs(CERTIFICATE_FACTORS)) {
            (true, true) => None,
            (false, _) => Some(format!(
                "{} and {} share the key exchange ({}): all of the change is the certificates' (and the other factors')",
                from.spec,
                to.spec,
                from.value("group")
            )),
            (true, false) => Some(format!(
                "{} and {} share the certificates ({}): all of the change is the key exchange's (and the other \
                 factors')",
                from.spec,
                to.spec,
                from.value("chain")
            )),
        };
        let (key_exchange, certificates) = if why_not.is_none() {
            (Some(from.with_from(to, KEY_EXCHANGE_FACTORS)), Some(from.with_from(to, CERTIFICATE_FACTORS)))
        } else {
            (None, None)
        };
        Split { to: to.spec.clone(), key_exchange, certificates, why_not, others }
    }
}

/// The user's server of an assessment (`pqtls assess --url`): whatever chain it sends, checked
/// against what the client trusted.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    pub url: String,
    /// What the client trusted (`--ca FILE`, `system (…)`), as the records say it.
    pub trust: String,
    /// The part whose records these are (its results directory).
    pub part: String,
}

/// One configuration on one stack against the user's server: its figures, or why there are none.
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointRow {
    /// The configuration as the user wrote it.
    pub config: String,
    pub stack: String,
    pub outcome: Result<EndpointFigures, EndpointRefusal>,
}

/// What the client measured against the user's server (closed loop, a new connection per request).
#[derive(Clone, Debug, PartialEq)]
pub struct EndpointFigures {
    pub negotiated_group: String,
    pub negotiated_sigalg: String,
    /// Mean client CPU per handshake, verification included, and the verification alone, µs.
    pub client_cpu_us: f64,
    pub verify_cpu_us: Option<f64>,
    /// One handshake's bytes each way, when the load generator could read them.
    pub client_to_server_bytes: Option<u64>,
    pub server_to_client_bytes: Option<u64>,
    pub connections_per_s: f64,
    pub handshakes: u64,
}

/// Why a configuration has no figures against the user's server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EndpointRefusal {
    /// The server chose another group than the one offered (it does not have it, or prefers another).
    FellBack(String),
    /// The handshake or the requests failed (e.g. the server does not accept the group).
    Refused(String),
    /// No record and no failure: the part did not run (yet).
    NotMeasured,
}

/// The file in an assessment's directory that holds its question (`pqtls report DIR` reads it).
pub const FILE: &str = "assessment.json";

impl Assessment {
    /// Writes the question next to its parts.
    pub fn save(&self, dir: &std::path::Path) -> pqtls_core::Result<()> {
        let text = serde_json::to_string_pretty(self).map_err(|e| pqtls_core::Error::Other(e.to_string()))?;
        std::fs::write(dir.join(FILE), text)
            .map_err(|e| pqtls_core::Error::Other(format!("writing {}: {e}", dir.join(FILE).display())))
    }

    /// The assessment whose directory `dir` is, when it is one.
    pub fn read(dir: &std::path::Path) -> pqtls_core::Result<Option<Assessment>> {
        let path = dir.join(FILE);
        match std::fs::read_to_string(&path) {
            Ok(text) => serde_json::from_str(&text)
                .map(Some)
                .map_err(|e| pqtls_core::Error::Invalid(format!("{} is not an assessment: {e}", path.display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(pqtls_core::Error::Other(format!("reading {}: {e}", path.display()))),
        }
    }

    /// Its parts' results directories that exist under `dir`.
    pub fn part_dirs(&self, dir: &std::path::Path) -> Vec<std::path::PathBuf> {
        self.parts.iter().map(|p| dir.join(p)).filter(|d| d.is_dir()).collect()
    }
}

/// A figure of `from` and of a `to`, each with the half-width of its ~95 % interval when the
/// records give one (`None`: counted, not estimated — bytes — or predicted by the model).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    pub from: f64,
    pub to: f64,
    pub half_widths: Option<(f64, f64)>,
}

impl Pair {
    pub fn exact(from: f64, to: f64) -> Pair {
        Pair { from, to, half_widths: None }
    }

    pub fn change(&self) -> Option<f64> {
        (self.from > 0.0).then(|| self.to / self.from - 1.0)
    }

    /// The half-width of the relative change's ~95 % interval (relative errors in quadrature).
    pub fn change_half_width(&self) -> Option<f64> {
        let (hf, ht) = self.half_widths?;
        let est = |mean, half_width| pqtls_core::stats::rate::Estimate { mean, half_width };
        est(self.to, ht).ratio(est(self.from, hf)).map(|e| e.half_width)
    }

    /// `to − from` with the half-width of its interval (independent runs: in quadrature).
    pub fn delta(&self) -> Estimate {
        Estimate { value: self.to - self.from, half_width: self.half_widths.map(|(a, b)| a.hypot(b)) }
    }
}

/// A value with the half-width of its ~95 % interval (`None`: exact, or predicted).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub value: f64,
    pub half_width: Option<f64>,
}

/// What the split measures, in the answer's order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    ServerCpu,
    ClientCpu,
    ClientToServerBytes,
    ServerToClientBytes,
    RoundTrips,
    Ttlb,
}

impl Metric {
    pub const ALL: [Metric; 6] = [
        Metric::ServerCpu,
        Metric::ClientCpu,
        Metric::ClientToServerBytes,
        Metric::ServerToClientBytes,
        Metric::RoundTrips,
        Metric::Ttlb,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Metric::ServerCpu => "server CPU, µs",
            Metric::ClientCpu => "client CPU, µs",
            Metric::ClientToServerBytes => "bytes client → server",
            Metric::ServerToClientBytes => "bytes server → client",
            Metric::RoundTrips => "round trips",
            Metric::Ttlb => "TTLB, ms",
        }
    }
}

/// One metric's change `from → to` on one stack, split: the key exchange's share (`kx-only −
/// from`), the certificates' (`certs-only − from`), and the rest (`to − kx-only − certs-only +
/// from`: the two changes' interaction, and any other factor `to` changes).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SplitRow {
    pub metric: Metric,
    /// The change of `from` when it is not 0, for shares: `from`'s value.
    pub from: f64,
    pub total: Estimate,
    pub key_exchange: Estimate,
    pub certificates: Estimate,
    pub rest: Estimate,
    /// Predicted by the round-trip model (not measured).
    pub predicted: bool,
}

/// Where a time over the user's link comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// Transfers over a verified emulated link (the network lab).
    Measured,
    /// The round-trip model from the in-situ message sizes.
    Predicted,
}

/// One `to` on one stack, against `from` on the same stack.
#[derive(Clone, Debug)]
pub struct Answer {
    pub to: String,
    pub stack: String,
    /// Mean CPU per handshake (10 %-trimmed), µs.
    pub client_cpu_us: Option<Pair>,
    pub server_cpu_us: Option<Pair>,
    /// Handshake bytes each way (record layer).
    pub client_to_server_bytes: Option<Pair>,
    pub server_to_client_bytes: Option<Pair>,
    /// The server's authentication bytes: its Certificate (or CompressedCertificate) and
    /// CertificateVerify messages, headers included (what `auth_bytes` sets).
    pub auth_bytes: Option<Pair>,
    /// Whether the handshakes of `from` and of `to` took a HelloRetryRequest (in situ).
    pub hello_retry: Option<(bool, bool)>,
    /// Round trips from connect to the last byte at the deployment's RTT and initcwnd
    /// (predicted), and the smallest initcwnd with which `to` needs no more than `from`.
    pub round_trips: Option<Pair>,
    pub initcwnd_removing_extra: Option<u64>,
    /// New connections per second through `pqtls serve` (one worker: per core) on loopback.
    pub serve_connections_per_s: Option<Pair>,
    /// The same through nginx (trixie root), when measured.
    pub nginx_connections_per_s: Option<Pair>,
    /// The TLS layer's median at a moderate rate (open loop), µs.
    pub tls_layer_p50_us: Option<Pair>,
    /// Median TTFB and TTLB over the deployment's link, ms, and where they come from.
    pub ttfb_ms: Option<(Pair, Source)>,
    pub ttlb_ms: Option<(Pair, Source)>,
    /// The change split into the key exchange's, the certificates' and the rest
    /// ([`Split`]); `Err`: why not (the split is meaningless, or not measured yet); `None`: the
    /// assessment has no split for this `to` (saved before splits existed).
    pub split: Option<std::result::Result<Vec<SplitRow>, String>>,
}

/// The parts of an assessment: the results directories under its own, each the store of one
/// experiment `pqtls assess` wrote and ran; the page takes each figure from its part's
/// directory ([`ResultSet::part`]).
pub mod part {
    /// In-situ handshakes: CPU per step and side, bytes.
    pub const INSITU: &str = "insitu";
    /// Closed-loop loads: connections per second through pqtls serve (and nginx).
    pub const THROUGHPUT: &str = "throughput";
    /// Open-loop loads at a moderate rate: the TLS layer's latency.
    pub const LATENCY: &str = "latency";
    /// Transfers over the deployment's link in the network lab.
    pub const TRANSFER: &str = "transfer";
    /// Loads against the user's own server (`--url`).
    pub const ENDPOINT: &str = "endpoint";
}

/// Whether a failure's factor values are those of `c`.
fn matches_values(c: &Config, values: &indexmap::IndexMap<String, String>) -> bool {
    c.factors.iter().all(|(f, v)| {
        values
            .get(f)
            .map(String::as_str)
            .unwrap_or_else(|| pqtls_core::factor::factor(f).and_then(|x| x.default).unwrap_or(""))
            == v
    })
}

fn trimmed(s: &pqtls_core::stats::Summary) -> f64 {
    if s.trimmed_mean > 0.0 {
        s.trimmed_mean
    } else {
        s.median
    }
}

/// A side's phases from an in-situ record's steps and sizes (`None` when it has no steps).
fn phases(side: Side, v: &InsituView, request_bytes: u64) -> Option<HandshakePhases> {
    let s = if side == Side::Client { &v.client } else { &v.server };
    (!s.steps.is_empty())
        .then(|| FlightModel::phases_of_steps(side, &v.bytes, request_bytes, |n| s.steps.get(n).map_or(0.0, trimmed)))
}

/// A figure with the half-width of its interval, when known.
type Estimated = (f64, Option<f64>);

fn estimated_pair(from: Estimated, to: Estimated) -> Pair {
    Pair { from: from.0, to: to.0, half_widths: from.1.zip(to.1) }
}

fn estimated(from: Option<Estimated>, to: Option<Estimated>) -> Option<Pair> {
    Some(estimated_pair(from?, to?))
}

/// A side's mean CPU per handshake (10 %-trimmed), µs, and the half-width of its interval.
/// The server's Certificate (or CompressedCertificate) + CertificateVerify bytes of a record.
fn auth_bytes(v: &InsituView) -> Option<f64> {
    let m = &v.bytes.messages;
    let certificate = m.get("CompressedCertificate").or_else(|| m.get("Certificate"))?;
    Some((certificate + m.get("CertificateVerify")?) as f64)
}

fn cpu_us(v: &InsituView, side: Side) -> Estimated {
    let s = if side == Side::Client { &v.client.total_cpu_ns } else { &v.server.total_cpu_ns };
    let half = (s.trimmed_mean > 0.0 && s.trimmed_mean_half_width() > 0.0).then(|| s.trimmed_mean_half_width() / 1e3);
    (trimmed(s) / 1e3, half)
}

/// The wider side of a stored distribution's median interval, in its unit (ns).
fn median_half_width(l: &pqtls_core::load::Latency) -> Option<f64> {
    let m = l.quantile_interval(0.5)?;
    Some((m.value_ns - m.low_ns).max(m.high_ns - m.value_ns))
}

/// What the records of one configuration on one stack say, for the answer and the split.
struct Figures<'s> {
    insitu: Option<InsituView<'s>>,
    /// Connections/s through pqtls serve and nginx (closed loop), µs of the TLS layer's median
    /// at a moderate rate (open loop).
    serve_rate: Option<Estimated>,
    nginx_rate: Option<Estimated>,
    tls_layer_us: Option<Estimated>,
    /// Median TTFB and TTLB over the link (ms), when transferred.
    transfer: Option<(Estimated, Estimated)>,
}

impl SplitRow {
    /// The split of one metric from the values of from, key-exchange-only, certificates-only
    /// and to (each with its half-width when known; the halves combine in quadrature).
    fn of(metric: Metric, v: &[Estimated], predicted: bool) -> SplitRow {
        let [from, kx, certs, to] = [v[0], v[1], v[2], v[3]];
        let est = |value: f64, parts: &[Estimated]| {
            let halves: Option<Vec<f64>> = parts.iter().map(|p| p.1).collect();
            Estimate { value, half_width: halves.map(|h| h.iter().map(|x| x * x).sum::<f64>().sqrt()) }
        };
        SplitRow {
            metric,
            from: from.0,
            total: est(to.0 - from.0, &[to, from]),
            key_exchange: est(kx.0 - from.0, &[kx, from]),
            certificates: est(certs.0 - from.0, &[certs, from]),
            rest: est(to.0 - kx.0 - certs.0 + from.0, &[to, kx, certs, from]),
            predicted,
        }
    }
}

/// The stacks of the set's in-situ records of `config`, in order of appearance, then those of
/// its other records.
fn stacks(set: &ResultSet, config: &Config) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in set.records.iter().filter(|r| config.matches(r)) {
        let s = factor_value(r, STACK).to_string();
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

impl Assessment {
    /// The round-trip model of one transfer over the deployment's link: the in-situ record's
    /// message sizes and CPU per side, the routes' initcwnd (and initrwnd, as the lab sets
    /// them), a default Linux receive buffer.
    fn model(&self, v: &InsituView, initcwnd: u64, response_bytes: u64) -> FlightModel {
        let bytes = &v.bytes;
        let d = &self.deployment;
        let (client_hello_bytes, server_flight_bytes, client_flight_bytes, response) =
            FlightModel::flights(bytes, d.request_bytes, d.response_head_bytes + response_bytes);
        FlightModel {
            mss_bytes: LAB_MSS_BYTES,
            client_initcwnd: initcwnd,
            server_initcwnd: initcwnd,
            client_hello_bytes,
            server_flight_bytes,
            client_flight_bytes,
            response_bytes: response,
            rtt_ns: d.rtt_ns,
            bits_per_s: d.bits_per_s,
            ticket_bytes: FlightModel::tickets(bytes),
            client_initrwnd: Some(initcwnd),
            server_initrwnd: Some(initcwnd),
            rcvbuf_bytes: KERNEL_RCVBUF_BYTES,
            client_cpu_ns: trimmed(&v.client.total_cpu_ns).round() as u64,
            server_cpu_ns: trimmed(&v.server.total_cpu_ns).round() as u64,
            client_phases: phases(Side::Client, v, d.request_bytes),
            server_phases: phases(Side::Server, v, d.request_bytes),
            hello_retry: false,
        }
    }

    /// Predicted rounds (connect → last byte) and time (ms) of one transfer of `response_bytes`.
    fn predict(&self, v: &InsituView, initcwnd: u64, response_bytes: u64) -> (u32, f64) {
        let prediction = self.model(v, initcwnd, response_bytes).predict();
        prediction.layer("total").map_or((0, 0.0), |t| (t.round_trips, t.time_ns as f64 / 1e6))
    }

    /// The answers: one per `to` and stack both `from` and `to` were measured on.
    pub fn answers(&self, set: &ResultSet) -> Vec<Answer> {
        let mut out = Vec::new();
        for to in &self.to {
            for stack in stacks(set, to) {
                out.push(self.answer(set, to, &stack));
            }
        }
        out
    }

    /// What the records of `config` on `stack` say.
    fn figures<'s>(&self, set: &'s ResultSet, config: &Config, stack: &str) -> Figures<'s> {
        let on = |r: &Record| config.matches(r) && factor_value(r, STACK) == stack;
        let insitu = set.part(part::INSITU).iter().filter(|r| on(r)).find_map(InsituView::of);
        let loads = |part: &str, terminator: &str| {
            set.part(part)
                .iter()
                .filter(|r| on(r))
                .filter_map(View::<LoadResult>::of)
                .find(|l| l.factor("terminator") == terminator)
        };
        let rate = |terminator: &str| {
            loads(part::THROUGHPUT, terminator).map(|l| {
                let rate = l.result.achieved_rate_per_s;
                (rate, super::load::rate_relative_half_width(&l).map(|h| h * rate))
            })
        };
        let tls = loads(part::LATENCY, "pqtls").or_else(|| loads(part::LATENCY, "nginx")).and_then(|l| {
            let layer = l.result.layers.get("tls")?;
            Some((layer.p50_ns as f64 / 1e3, median_half_width(layer).map(|h| h / 1e3)))
        });
        let transfer =
            set.part(part::TRANSFER).iter().filter(|r| on(r)).find_map(View::<TransferResult>::of).map(|t| {
                let ms = |l: &pqtls_core::load::Latency, p50_ns: u64| {
                    (p50_ns as f64 / 1e6, median_half_width(l).map(|h| h / 1e6))
                };
                (ms(&t.result.load.ttfb, t.result.ttfb.p50_ns), ms(&t.result.load.latency, t.result.ttlb.p50_ns))
            });
        Figures { insitu, serve_rate: rate("pqtls"), nginx_rate: rate("nginx"), tls_layer_us: tls, transfer }
    }

    fn answer(&self, set: &ResultSet, to: &Config, stack: &str) -> Answer {
        let (a, b) = (self.figures(set, &self.from, stack), self.figures(set, to, stack));
        let d = &self.deployment;
        let cpu = |side: Side| {
            let f = |x: &Figures| x.insitu.as_ref().map(|v| cpu_us(v, side));
            estimated(f(&a), f(&b))
        };
        let bytes = |up: bool| {
            let f = |x: &Figures| {
                x.insitu.as_ref().map(|v| if up { v.bytes.client_to_server } else { v.bytes.server_to_client } as f64)
            };
            Some(Pair::exact(f(&a)?, f(&b)?))
        };
        let (ttfb_ms, ttlb_ms, round_trips, removing) = match (&a.insitu, &b.insitu) {
            (Some(va), Some(vb)) => {
                let (ra, ttlb_a_ms) = self.predict(va, d.initcwnd, d.response_bytes);
                let (rb, ttlb_b_ms) = self.predict(vb, d.initcwnd, d.response_bytes);
                let removing = (d.initcwnd..=1000).find(|iw| self.predict(vb, *iw, d.response_bytes).0 <= ra);
                let (ttfb, ttlb) = match (a.transfer, b.transfer) {
                    (Some((fa, la)), Some((fb, lb))) => (
                        Some((estimated_pair(fa, fb), Source::Measured)),
                        Some((estimated_pair(la, lb), Source::Measured)),
                    ),
                    _ => {
                        // The first response byte comes with the response head's segment: the
                        // transfer of an empty body.
                        let f = Pair::exact(self.predict(va, d.initcwnd, 0).1, self.predict(vb, d.initcwnd, 0).1);
                        let l = Pair::exact(ttlb_a_ms, ttlb_b_ms);
                        (Some((f, Source::Predicted)), Some((l, Source::Predicted)))
                    }
                };
                (ttfb, ttlb, Some(Pair::exact(ra as f64, rb as f64)), removing)
            }
            _ => (None, None, None, None),
        };
        let split = self.splits.iter().find(|s| s.to == to.spec).map(|s| match (&s.key_exchange, &s.certificates) {
            (Some(kx), Some(certs)) => self.split(set, stack, [&a, &b], [&self.from, kx, certs, to]),
            _ => Err(s.why_not.clone().unwrap_or_default()),
        });
        Answer {
            to: to.spec.clone(),
            stack: stack.to_string(),
            client_cpu_us: cpu(Side::Client),
            server_cpu_us: cpu(Side::Server),
            client_to_server_bytes: bytes(true),
            server_to_client_bytes: bytes(false),
            auth_bytes: a
                .insitu
                .as_ref()
                .and_then(auth_bytes)
                .zip(b.insitu.as_ref().and_then(auth_bytes))
                .map(|(f, t)| Pair::exact(f, t)),
            hello_retry: a.insitu.as_ref().zip(b.insitu.as_ref()).map(|(f, t)| (f.negotiated.hrr, t.negotiated.hrr)),
            round_trips,
            initcwnd_removing_extra: removing,
            serve_connections_per_s: estimated(a.serve_rate, b.serve_rate),
            nginx_connections_per_s: estimated(a.nginx_rate, b.nginx_rate),
            tls_layer_p50_us: estimated(a.tls_layer_us, b.tls_layer_us),
            ttfb_ms,
            ttlb_ms,
            split,
        }
    }

    /// The split of one answer: `ends` are from's and to's figures, `configs` from, the
    /// key-exchange-only and certificates-only configurations, and to. TTLB is measured when all
    /// four were transferred, else predicted for all four; an error says which configuration has
    /// no in-situ record.
    fn split(
        &self,
        set: &ResultSet,
        stack: &str,
        ends: [&Figures; 2],
        configs: [&Config; 4],
    ) -> std::result::Result<Vec<SplitRow>, String> {
        let kx = self.figures(set, configs[1], stack);
        let certs = self.figures(set, configs[2], stack);
        let four = [ends[0], &kx, &certs, ends[1]];
        let mut views = Vec::new();
        for (i, f) in four.iter().enumerate() {
            match &f.insitu {
                Some(v) => views.push(v),
                None => {
                    return Err(format!(
                        "{} on {stack} has no in-situ record (yet): the assessment resumes it",
                        configs[i].spec
                    ))
                }
            }
        }
        let d = &self.deployment;
        let measured_ttlb: Option<Vec<(f64, Option<f64>)>> = four.iter().map(|f| f.transfer.map(|t| t.1)).collect();
        let mut rows = Vec::new();
        for metric in Metric::ALL {
            let (values, predicted): (Vec<(f64, Option<f64>)>, bool) = match metric {
                Metric::ServerCpu => (views.iter().map(|v| cpu_us(v, Side::Server)).collect(), false),
                Metric::ClientCpu => (views.iter().map(|v| cpu_us(v, Side::Client)).collect(), false),
                Metric::ClientToServerBytes => {
                    (views.iter().map(|v| (v.bytes.client_to_server as f64, None)).collect(), false)
                }
                Metric::ServerToClientBytes => {
                    (views.iter().map(|v| (v.bytes.server_to_client as f64, None)).collect(), false)
                }
                Metric::RoundTrips => (
                    views.iter().map(|v| (self.predict(v, d.initcwnd, d.response_bytes).0 as f64, None)).collect(),
                    true,
                ),
                Metric::Ttlb => match &measured_ttlb {
                    Some(m) => (m.clone(), false),
                    None => {
                        (views.iter().map(|v| (self.predict(v, d.initcwnd, d.response_bytes).1, None)).collect(), true)
                    }
                },
            };
            rows.push(SplitRow::of(metric, &values, predicted));
        }
        Ok(rows)
    }
    /// Every configuration on every stack against the user's server (`--url`), from the
    /// endpoint part's records and failures; empty without `--url`.
    pub fn endpoint_rows(&self, set: &ResultSet) -> Vec<EndpointRow> {
        if self.endpoint.is_none() {
            return Vec::new();
        }
        let mut out = Vec::new();
        for c in std::iter::once(&self.from).chain(&self.to) {
            let mut stacks = stacks(set, c);
            let failures = set.part_failures(part::ENDPOINT);
            for f in failures.iter().filter(|f| matches_values(c, &f.scenario)) {
                let s = f.scenario.get(STACK).cloned().unwrap_or_default();
                if !stacks.contains(&s) {
                    stacks.push(s);
                }
            }
            for stack in stacks {
                let record = set
                    .part(part::ENDPOINT)
                    .iter()
                    .filter(|r| c.matches(r) && factor_value(r, STACK) == stack)
                    .find_map(View::<LoadResult>::of);
                let outcome = match record {
                    Some(l) => {
                        let r = l.result;
                        Ok(EndpointFigures {
                            negotiated_group: r.negotiated.group.clone(),
                            negotiated_sigalg: r.negotiated.sigalg.clone(),
                            client_cpu_us: r.client_handshake_cpu_ns_mean / 1e3,
                            verify_cpu_us: r.client_verify_cpu_ns_mean.map(|v| v / 1e3),
                            client_to_server_bytes: r.bytes.as_ref().map(|b| b.client_to_server),
                            server_to_client_bytes: r.bytes.as_ref().map(|b| b.server_to_client),
                            connections_per_s: r.handshakes_per_s,
                            handshakes: r.handshakes,
                        })
                    }
                    None => Err(failures
                        .iter()
                        .find(|f| {
                            matches_values(c, &f.scenario)
                                && f.scenario.get(STACK).map(String::as_str) == Some(stack.as_str())
                        })
                        .map_or(EndpointRefusal::NotMeasured, |f| {
                            if f.error.contains("negotiated group") {
                                EndpointRefusal::FellBack(f.error.clone())
                            } else {
                                EndpointRefusal::Refused(f.error.clone())
                            }
                        })),
                };
                out.push(EndpointRow { config: c.spec.clone(), stack, outcome });
            }
        }
        out
    }

    /// The cheapest `to` by the server's CPU per handshake, and by TTLB, when there are several.
    pub fn cheapest(&self, answers: &[Answer]) -> Vec<String> {
        if self.to.len() < 2 {
            return Vec::new();
        }
        let best = |what: &str, key: &dyn Fn(&Answer) -> Option<f64>| {
            answers
                .iter()
                .filter_map(|a| Some((a, key(a)?)))
                .min_by(|x, y| x.1.total_cmp(&y.1))
                .map(|(a, v)| format!("Cheapest in {what}: {} on {} ({v:.1})", a.to, a.stack))
        };
        [
            best("server CPU per handshake (µs)", &|a| a.server_cpu_us.map(|p| p.to)),
            best("TTLB over your link (ms)", &|a| a.ttlb_ms.map(|p| p.0.to)),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(spec: &str) -> Config {
        let mut words = spec.split_whitespace();
        let (group, chain) = words.next().unwrap().split_once(':').unwrap();
        let mut factors = vec![("group".to_string(), group.to_string()), ("chain".to_string(), chain.to_string())];
        for w in words {
            let (n, v) = w.split_once('=').unwrap();
            factors.push((n.to_string(), v.to_string()));
        }
        Config { spec: spec.to_string(), factors }
    }

    #[test]
    fn a_move_of_both_splits_through_the_two_middles() {
        let s = Split::of(&config("x25519:p256:p256"), &config("X25519MLKEM768:mldsa65:mldsa65"));
        assert_eq!(s.why_not, None);
        assert_eq!(s.key_exchange.unwrap().spec, "X25519MLKEM768:p256:p256");
        assert_eq!(s.certificates.unwrap().spec, "x25519:mldsa65:mldsa65");
        assert!(s.others.is_empty());
        // mTLS is the certificates'; a cipher is neither (its change is in the rest).
        let s = Split::of(
            &config("x25519:p256:p256 client_chain=p256:p256"),
            &config("X25519MLKEM768:mldsa65:mldsa65 client_chain=mldsa65:mldsa65 cipher=TLS_AES_256_GCM_SHA384 stack=rustls"),
        );
        let kx = s.key_exchange.unwrap();
        assert_eq!(kx.spec, "X25519MLKEM768:p256:p256 client_chain=p256:p256");
        assert_eq!(s.certificates.unwrap().spec, "x25519:mldsa65:mldsa65 client_chain=mldsa65:mldsa65");
        assert_eq!(s.others, ["cipher"]);
    }

    #[test]
    fn a_move_of_one_part_has_no_split_and_says_why() {
        let s = Split::of(&config("x25519:p256:p256"), &config("X25519MLKEM768:p256:p256"));
        assert!(s.key_exchange.is_none() && s.certificates.is_none());
        assert!(s.why_not.unwrap().contains("share the certificates (p256:p256)"));
        let s = Split::of(&config("X25519MLKEM768:p256:p256"), &config("X25519MLKEM768:mldsa44:mldsa44"));
        assert!(s.why_not.unwrap().contains("share the key exchange (X25519MLKEM768)"));
    }

    #[test]
    fn the_split_adds_up_and_its_intervals_combine_in_quadrature() {
        let row = SplitRow::of(
            Metric::ServerCpu,
            &[(100.0, Some(3.0)), (130.0, Some(4.0)), (600.0, Some(12.0)), (640.0, Some(12.0))],
            false,
        );
        assert_eq!(row.total.value, 540.0);
        assert_eq!(row.key_exchange.value, 30.0);
        assert_eq!(row.certificates.value, 500.0);
        assert_eq!(row.rest.value, 10.0);
        assert!((row.key_exchange.half_width.unwrap() - 5.0).abs() < 1e-9);
        let all = (9.0f64 + 16.0 + 144.0 + 144.0).sqrt();
        assert!((row.rest.half_width.unwrap() - all).abs() < 1e-9);
        // Counted figures (bytes) have no interval.
        let bytes = SplitRow::of(
            Metric::ClientToServerBytes,
            &[(295.0, None), (1471.0, None), (295.0, None), (1471.0, None)],
            false,
        );
        assert_eq!((bytes.key_exchange.value, bytes.certificates.value, bytes.rest.value), (1176.0, 0.0, 0.0));
        assert_eq!(bytes.rest.half_width, None);
    }
}
