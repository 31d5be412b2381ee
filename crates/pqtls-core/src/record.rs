//! The result record of one configuration (schema documented in docs/results-schema.md)
//! and the raw per-handshake sample.

use crate::backend::Negotiated;
use crate::config::ConfigDesc;
use crate::stats::{Delta, Quantiles, Summary};
use crate::trace::{RecordCount, SideSample};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Version of the record schema; bumped on incompatible changes.
pub const SCHEMA_VERSION: u32 = 1;

/// How a result was obtained: software, machine, settings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Env {
    pub tool_version: String,
    pub tool_commit: String,
    /// Library per stack, e.g. {"openssl": "OpenSSL 3.5.5 …", "rustls": "rustls 0.23.x / aws-lc-rs …"}.
    pub libraries: IndexMap<String, String>,
    pub cpu_model: String,
    pub cpus: usize,
    pub kernel: String,
    pub hostname: String,
    /// cpufreq governor of CPU 0, when readable.
    pub governor: Option<String>,
    /// SMT (hyper-threading) state, when readable.
    pub smt: Option<String>,
    pub rustc: String,
    pub profile: String,
}

/// Measurement settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Loops {
    pub warmup: u64,
    /// Handshakes measured.
    pub measured: u64,
    /// The loop cap (or the fixed count).
    pub max: u64,
    /// Relative precision target of adaptive mode.
    pub precision: Option<f64>,
    /// Why measuring stopped: `fixed`, `precision reached`, `loop cap reached`, `interrupted`.
    pub stopped: String,
    /// `memory` (one thread) or `threads` (two pinned threads over a socketpair).
    pub mode: String,
    pub quantiles: Quantiles,
    /// How steps were timed: `split` (thread CPU clock per call, split by wall time inside
    /// it) or `cpu` (thread CPU clock at every event). See docs/attribution.md.
    #[serde(default)]
    pub clock: String,
    /// Measured handshakes in which a side was descheduled inside a call for more than
    /// 2 µs + 2 % of the call (their per-step split is less certain; totals are exact).
    #[serde(default)]
    pub disturbed: u64,
}

/// Summaries of one side.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SideSummary {
    pub total_cpu_ns: Summary,
    pub total_wall_ns: Summary,
    pub steps: IndexMap<String, Summary>,
    /// Stack steps under their canonical parent, `<canonical>/<stack step>`.
    #[serde(default)]
    pub substeps: IndexMap<String, Summary>,
}

impl SideSummary {
    pub fn of(samples: &[&SideSample], qs: &Quantiles) -> SideSummary {
        let mut names: Vec<&str> = Vec::new();
        for s in samples {
            for k in s.steps.keys() {
                if !names.contains(&k.as_str()) {
                    names.push(k);
                }
            }
        }
        let mut subs: Vec<&str> = Vec::new();
        for s in samples {
            for k in s.substeps.keys() {
                if !subs.contains(&k.as_str()) {
                    subs.push(k);
                }
            }
        }
        let col = |f: &dyn Fn(&SideSample) -> u64| samples.iter().map(|s| f(s)).collect::<Vec<u64>>();
        SideSummary {
            total_cpu_ns: Summary::of(&col(&|s| s.total_cpu_ns), qs),
            total_wall_ns: Summary::of(&col(&|s| s.total_wall_ns), qs),
            steps: names
                .iter()
                .map(|n| (n.to_string(), Summary::of(&col(&|s| s.steps.get(*n).copied().unwrap_or(0)), qs)))
                .collect(),
            substeps: subs
                .iter()
                .map(|n| (n.to_string(), Summary::of(&col(&|s| s.substeps.get(*n).copied().unwrap_or(0)), qs)))
                .collect(),
        }
    }
}

/// Bytes on the wire of one handshake (identical across loops of one configuration,
/// except for variable-size signatures, so the last handshake's are reported along with
/// the range of the total).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Bytes {
    pub client_to_server: u64,
    pub server_to_client: u64,
    pub records_client_to_server: u64,
    pub records_server_to_client: u64,
    /// Handshake message (header included) → bytes. Messages the client sends that the
    /// server sends too are prefixed: `ClientCertificate`, `ClientCertificateVerify`,
    /// `ClientFinished`.
    pub messages: IndexMap<String, u64>,
    /// Smallest and largest server→client total seen (signatures of variable size).
    pub server_to_client_range: [u64; 2],
}

impl Bytes {
    /// Builds the message table from what each side wrote.
    pub fn from_sides(client: &SideSample, server: &SideSample, c2s: RecordCount, s2c: RecordCount) -> Bytes {
        let mut messages = IndexMap::new();
        for (side, sample) in [("client", client), ("server", server)] {
            for (m, b) in &sample.wrote {
                let name = m.rfc_name();
                let key = if side == "client" && name != "ClientHello" { format!("Client{name}") } else { name };
                *messages.entry(key).or_insert(0) += *b as u64;
            }
        }
        Bytes {
            client_to_server: c2s.bytes,
            server_to_client: s2c.bytes,
            records_client_to_server: c2s.records,
            records_server_to_client: s2c.records,
            messages,
            server_to_client_range: [s2c.bytes, s2c.bytes],
        }
    }
}

/// Throughput of the handshake loop itself (both sides in one thread in memory mode).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rate {
    /// Complete handshakes per second of wall time over the measured loops.
    pub handshakes_per_s: f64,
    pub wall_s: f64,
}

/// The result of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ConfigRecord {
    pub schema: u32,
    /// Short human label.
    pub label: String,
    #[serde(flatten)]
    pub config: ConfigDesc,
    pub negotiated: Negotiated,
    pub client: SideSummary,
    pub server: SideSummary,
    /// Client + server CPU per handshake.
    pub total_cpu_ns: Summary,
    pub bytes: Bytes,
    pub loops: Loops,
    pub rate: Rate,
    /// Per-step differences against the baseline configuration, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineDelta>,
    pub env: Env,
    /// Seconds since the Unix epoch when the record was written.
    pub measured_at: u64,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BaselineDelta {
    pub id: String,
    pub label: String,
    pub client: IndexMap<String, Delta>,
    pub server: IndexMap<String, Delta>,
    pub client_total: Delta,
    pub server_total: Delta,
    pub total: Delta,
}

impl BaselineDelta {
    /// Step-by-step deltas; a step missing on one side counts as 0 there.
    pub fn between(this: &ConfigRecord, base: &ConfigRecord) -> BaselineDelta {
        fn side(a: &SideSummary, b: &SideSummary) -> IndexMap<String, Delta> {
            let zero = Summary::default();
            let mut names: Vec<&String> = a.steps.keys().collect();
            names.extend(b.steps.keys().filter(|k| !a.steps.contains_key(*k)));
            names
                .into_iter()
                .map(|n| (n.clone(), Delta::between(a.steps.get(n).unwrap_or(&zero), b.steps.get(n).unwrap_or(&zero))))
                .collect()
        }
        BaselineDelta {
            id: base.config.id.clone(),
            label: base.label.clone(),
            client: side(&this.client, &base.client),
            server: side(&this.server, &base.server),
            client_total: Delta::between(&this.client.total_cpu_ns, &base.client.total_cpu_ns),
            server_total: Delta::between(&this.server.total_cpu_ns, &base.server.total_cpu_ns),
            total: Delta::between(&this.total_cpu_ns, &base.total_cpu_ns),
        }
    }
}

/// One handshake's raw measurements (a line of the NDJSON sample file).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RawSample<'a> {
    pub id: &'a str,
    pub i: u64,
    pub client: &'a SideSample,
    pub server: &'a SideSample,
}

/// One measured configuration: its record and the per-handshake `(client, server)` samples
/// (what the lab's runner returns and the results store keeps).
#[derive(Clone, Debug)]
pub struct Measured {
    pub record: ConfigRecord,
    pub samples: Vec<(SideSample, SideSample)>,
}
