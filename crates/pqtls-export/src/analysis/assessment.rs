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

/// A figure of `from` and of a `to`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    pub from: f64,
    pub to: f64,
}

impl Pair {
    pub fn change(&self) -> Option<f64> {
        (self.from > 0.0).then(|| self.to / self.from - 1.0)
    }
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
}

/// A load record against a server pqtls did not start (the endpoint part's), not a throughput
/// or latency part's.
fn is_endpoint(l: &LoadResult) -> bool {
    l.terminator.name == "external"
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

fn pair(from: Option<f64>, to: Option<f64>) -> Option<Pair> {
    Some(Pair { from: from?, to: to? })
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

    fn answer(&self, set: &ResultSet, to: &Config, stack: &str) -> Answer {
        let on = |c: &Config, r: &Record| c.matches(r) && factor_value(r, STACK) == stack;
        let insitu = |c: &Config| set.records.iter().filter(|r| on(c, r)).find_map(InsituView::of);
        let (a, b) = (insitu(&self.from), insitu(to));
        let both = |f: &dyn Fn(&InsituView) -> f64| pair(a.as_ref().map(f), b.as_ref().map(f));
        let loads = |c: &Config, open: bool, terminator: &str| {
            set.records
                .iter()
                .filter(|r| on(c, r))
                .filter_map(View::<LoadResult>::of)
                .filter(|l| l.result.target_rate_per_s.is_some() == open && l.factor("terminator") == terminator)
                .filter(|l| !is_endpoint(l.result))
                .map(|l| (l.result.achieved_rate_per_s, l.result.layers.get("tls").map(|t| t.p50_ns as f64 / 1e3)))
                .next()
        };
        let rate = |terminator: &str| {
            pair(loads(&self.from, false, terminator).map(|l| l.0), loads(to, false, terminator).map(|l| l.0))
        };
        let tls_layer = pair(
            loads(&self.from, true, "pqtls").or(loads(&self.from, true, "nginx")).and_then(|l| l.1),
            loads(to, true, "pqtls").or(loads(to, true, "nginx")).and_then(|l| l.1),
        );
        let transfer = |c: &Config| set.records.iter().filter(|r| on(c, r)).find_map(View::<TransferResult>::of);
        let d = &self.deployment;
        let (ttfb_ms, ttlb_ms, round_trips, removing) = match (&a, &b) {
            (Some(a), Some(b)) => {
                let (ra, ttlb_a_ms) = self.predict(a, d.initcwnd, d.response_bytes);
                let (rb, ttlb_b_ms) = self.predict(b, d.initcwnd, d.response_bytes);
                let removing = (d.initcwnd..=1000).find(|iw| self.predict(b, *iw, d.response_bytes).0 <= ra);
                let measured = match (transfer(&self.from), transfer(to)) {
                    (Some(ta), Some(tb)) => Some((
                        Pair { from: ta.result.ttfb.p50_ns as f64 / 1e6, to: tb.result.ttfb.p50_ns as f64 / 1e6 },
                        Pair { from: ta.result.ttlb.p50_ns as f64 / 1e6, to: tb.result.ttlb.p50_ns as f64 / 1e6 },
                    )),
                    _ => None,
                };
                let (ttfb, ttlb) = match measured {
                    Some((f, l)) => (Some((f, Source::Measured)), Some((l, Source::Measured))),
                    None => {
                        // The first response byte comes with the response head's segment: the
                        // transfer of an empty body.
                        let f = Pair { from: self.predict(a, d.initcwnd, 0).1, to: self.predict(b, d.initcwnd, 0).1 };
                        let l = Pair { from: ttlb_a_ms, to: ttlb_b_ms };
                        (Some((f, Source::Predicted)), Some((l, Source::Predicted)))
                    }
                };
                (ttfb, ttlb, Some(Pair { from: ra as f64, to: rb as f64 }), removing)
            }
            _ => (None, None, None, None),
        };
        Answer {
            to: to.spec.clone(),
            stack: stack.to_string(),
            client_cpu_us: both(&|v| trimmed(&v.client.total_cpu_ns) / 1e3),
            server_cpu_us: both(&|v| trimmed(&v.server.total_cpu_ns) / 1e3),
            client_to_server_bytes: both(&|v| v.bytes.client_to_server as f64),
            server_to_client_bytes: both(&|v| v.bytes.server_to_client as f64),
            round_trips,
            initcwnd_removing_extra: removing,
            serve_connections_per_s: rate("pqtls"),
            nginx_connections_per_s: rate("nginx"),
            tls_layer_p50_us: tls_layer,
            ttfb_ms,
            ttlb_ms,
        }
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
            for f in set.failures.iter().filter(|f| f.kind == "load" && matches_values(c, &f.scenario)) {
                let s = f.scenario.get(STACK).cloned().unwrap_or_default();
                if !stacks.contains(&s) {
                    stacks.push(s);
                }
            }
            for stack in stacks {
                let record = set
                    .records
                    .iter()
                    .filter(|r| c.matches(r) && factor_value(r, STACK) == stack)
                    .filter_map(View::<LoadResult>::of)
                    .find(|l| is_endpoint(l.result));
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
                    None => Err(set
                        .failures
                        .iter()
                        .find(|f| {
                            f.kind == "load"
                                && matches_values(c, &f.scenario)
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
