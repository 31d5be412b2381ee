//! The result record of one configuration (schema documented in docs/results-schema.md)
//! and the raw per-handshake sample.

use crate::backend::Negotiated;
use crate::config::ConfigDesc;
use crate::factor::Kind;
use crate::settings::Settings;
use crate::stats::{Delta, Quantiles, Summary};
use crate::trace::{CostUnit, RecordCount, SideSample};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Version of the record schema; bumped on incompatible changes. Version 1 (one in-situ
/// `ConfigRecord` per line) is still read: see [`ConfigRecord::upgrade`].
pub const SCHEMA_VERSION: u32 = 2;
/// The first schema: flat in-situ records.
pub const SCHEMA_V1: u32 = 1;

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
    /// Handshakes run unmeasured first (fewer than the settings' `warmup` when the time cap,
    /// `settings.max_time_ms`, cut the warm-up short at half of it).
    pub warmup: u64,
    /// Handshakes measured.
    pub measured: u64,
    /// The loop cap (or the fixed count).
    pub max: u64,
    /// Relative precision target of adaptive mode.
    pub precision: Option<f64>,
    /// Why measuring stopped: `fixed`, `precision reached`, `loop cap reached`, `time cap reached`
    /// (`settings.max_time_ms`), `interrupted`.
    pub stopped: String,
    /// `memory` (one thread) or `threads` (two pinned threads over a socketpair).
    pub mode: String,
    pub quantiles: Quantiles,
    /// How steps were timed: `split` (thread CPU clock at each call's ends and at anchors,
    /// split by wall time in between) or `cpu` (thread CPU clock at every event). See
    /// docs/attribution.md.
    #[serde(default)]
    pub clock: String,
    /// Under `split`: the anchors' spacing (an event this long after the call's last CPU-clock
    /// reading reads it too). Absent with `cpu`, and in records made before the anchors,
    /// whose `split` read the CPU clock at calls' ends only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub anchor_ns: Option<u64>,
    /// Measured handshakes in which a side was descheduled inside a call for more than
    /// 2 µs + 2 % of the call (their per-step split is less certain; totals are exact).
    #[serde(default)]
    pub disturbed: u64,
    /// What the transport or the runner had to say about how the loops ran (e.g. threads
    /// that could not be pinned).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Which rule ended the measurement among the scenario's window (docs/benchmarks-history.md
    /// §5.5): `own rule` (its stopping rule — fixed count or precision — was the last of the
    /// window to be met, or it was measured alone), `window` (it met its rule earlier and was
    /// measured on until its window closed, so that its partners' ratios to it cover the same
    /// stretch of time), `cap` (the loop cap, its rule unmet), `time cap` (its time cap,
    /// `settings.max_time_ms`, its rule unmet). Empty in records of before.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stopped_by: String,
    /// Adaptive mode: handshakes measured when its own precision was first reached (fewer
    /// than `measured` when the window kept it going).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rule_met_at: Option<u64>,
    /// Under `clock = "instructions"`: what counted them. Absent under the clocks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counter: Option<Counting>,
}

/// How instructions were counted (`clock = "instructions"`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counting {
    /// `callgrind` (valgrind's, on machines without hardware counters) or `perf` (the CPU's
    /// instructions-retired counter read per thread through `perf_event_open`).
    pub source: String,
    /// The counter's version, e.g. `valgrind-3.19.0`, or the kernel's for `perf`.
    pub version: String,
    /// What the counts include and leave out (e.g. under valgrind the CPU features it exposes).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
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
    /// Totals over `all` samples, steps over those of them `steps_from` keeps (the
    /// undisturbed ones under the split clock: docs/attribution.md). When it keeps none, the
    /// steps are summarised over all samples rather than left empty.
    pub fn of_filtered(all: &[&SideSample], steps_from: &dyn Fn(&SideSample) -> bool, qs: &Quantiles) -> SideSummary {
        let kept: Vec<&SideSample> = all.iter().copied().filter(|s| steps_from(s)).collect();
        if kept.len() == all.len() || kept.is_empty() {
            return SideSummary::of(all, qs);
        }
        let totals = SideSummary::of(all, qs);
        let steps = SideSummary::of(&kept, qs);
        SideSummary { steps: steps.steps, substeps: steps.substeps, ..totals }
    }

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
    /// Records of the last handshake whose handshake messages could not be measured (a stack
    /// that only sees ciphertext and could not decrypt them): when not 0, `messages` lacks
    /// them — reported, never silently dropped.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unmeasured_records: u64,
    /// Certificates sent compressed (RFC 8879), by their key in `messages`
    /// (`CompressedCertificate`, `ClientCompressedCertificate`): the algorithm, the bytes on
    /// the wire and the Certificate message they stand for. Absent without compression.
    #[serde(default, skip_serializing_if = "IndexMap::is_empty")]
    pub compressed_certificates: IndexMap<String, CompressedSizes>,
}

/// One CompressedCertificate's sizes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CompressedSizes {
    /// `zlib`, `brotli`, `zstd` (or `0x….` for a code point RFC 8879 does not define).
    pub algorithm: String,
    /// The CompressedCertificate message on the wire, its 4-byte header included (as in
    /// `messages`).
    pub wire_bytes: u64,
    /// The Certificate message it decompresses to, header included: the message's
    /// uncompressed_length + 4 — what `messages.Certificate` holds in an uncompressed run.
    pub uncompressed_bytes: u64,
}

/// A message's key in [`Bytes::messages`]: its RFC name, prefixed `Client` for the messages
/// the client sends that the server sends too (`ClientCertificate`, `ClientFinished`, …).
pub fn message_key(by_client: bool, m: crate::trace::HsType) -> String {
    let name = m.rfc_name();
    if by_client && name != "ClientHello" {
        format!("Client{name}")
    } else {
        name
    }
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl Bytes {
    /// Builds the message table from what each side wrote.
    pub fn from_sides(client: &SideSample, server: &SideSample, c2s: RecordCount, s2c: RecordCount) -> Bytes {
        let mut messages = IndexMap::new();
        let mut compressed_certificates = IndexMap::new();
        for (side, sample) in [("client", client), ("server", server)] {
            let mut headers = sample.compressed.iter();
            for (m, b) in &sample.wrote {
                let key = message_key(side == "client", *m);
                *messages.entry(key.clone()).or_insert(0) += *b as u64;
                if *m == crate::trace::HsType::CompressedCertificate {
                    if let Some(h) = headers.next() {
                        let algorithm = crate::catalogue::CertCompression::from_code_point(h.algorithm)
                            .map_or_else(|| format!("0x{:04x}", h.algorithm), |c| c.name().to_string());
                        compressed_certificates.insert(
                            key,
                            CompressedSizes {
                                algorithm,
                                wire_bytes: *b as u64,
                                uncompressed_bytes: h.uncompressed_length as u64 + 4,
                            },
                        );
                    }
                }
            }
        }
        Bytes {
            client_to_server: c2s.bytes,
            server_to_client: s2c.bytes,
            records_client_to_server: c2s.records,
            records_server_to_client: s2c.records,
            messages,
            server_to_client_range: [s2c.bytes, s2c.bytes],
            unmeasured_records: client.unmeasured_records as u64 + server.unmeasured_records as u64,
            compressed_certificates,
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

/// One result: what was measured (`scenario`), how (`settings`, `env`) and what came out
/// (`result`, whose type is told by `kind`). Serialized as one JSON object per line:
/// `{"schema":2,"id":…,"label":…,"kind":"insitu","scenario":{…},"settings":{…},"env":{…},
/// "measured_at":…,"result":{…}}` (docs/results-schema.md).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub schema: u32,
    /// The scenario's id ([`crate::scenario::Scenario::id`]).
    pub id: String,
    /// Short human label.
    pub label: String,
    /// Every factor's canonical value, in factor-table order.
    pub scenario: IndexMap<String, String>,
    /// The measurement settings (also guarded per results directory).
    #[serde(default)]
    pub settings: Option<Settings>,
    pub env: Env,
    /// Seconds since the Unix epoch when the record was written.
    pub measured_at: u64,
    #[serde(flatten)]
    pub result: Outcome,
}

/// The `stopped` value of a record whose run was interrupted ([`Record::is_interrupted`]).
pub const INTERRUPTED: &str = "interrupted";

/// A measurement's typed result. `layers` is a reserved kind
/// ([`Kind`]): a record of a kind this version does not know is refused with a clear error.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", content = "result", rename_all = "snake_case")]
pub enum Outcome {
    Insitu(Box<InsituResult>),
    Load(Box<crate::load::LoadResult>),
    Transfer(Box<crate::transfer::TransferResult>),
    Resident(Box<crate::resident::ResidentResult>),
}

impl Outcome {
    pub fn kind(&self) -> Kind {
        match self {
            Outcome::Insitu(_) => Kind::Insitu,
            Outcome::Load(_) => Kind::Load,
            Outcome::Transfer(_) => Kind::Transfer,
            Outcome::Resident(_) => Kind::Resident,
        }
    }
}

impl Record {
    /// A record of `scenario` measured now with `settings` on `env` (the one place a
    /// measurement's record is made).
    pub fn measured(
        scenario: &crate::scenario::Scenario,
        settings: &crate::settings::Settings,
        env: &Env,
        result: Outcome,
    ) -> Record {
        Record {
            schema: SCHEMA_VERSION,
            id: scenario.id(),
            label: scenario.label(),
            scenario: scenario.values().clone(),
            settings: Some(settings.clone()),
            env: env.clone(),
            measured_at: std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs()),
            result,
        }
    }

    pub fn kind(&self) -> Kind {
        self.result.kind()
    }

    /// The in-situ result, when this is one.
    pub fn insitu(&self) -> Option<&InsituResult> {
        match &self.result {
            Outcome::Insitu(r) => Some(r),
            _ => None,
        }
    }

    /// The load result, when this is one.
    pub fn load(&self) -> Option<&crate::load::LoadResult> {
        match &self.result {
            Outcome::Load(r) => Some(r),
            _ => None,
        }
    }

    /// The transfer result, when this is one.
    pub fn transfer(&self) -> Option<&crate::transfer::TransferResult> {
        match &self.result {
            Outcome::Transfer(r) => Some(r),
            _ => None,
        }
    }

    /// The resident result, when this is one.
    pub fn resident(&self) -> Option<&crate::resident::ResidentResult> {
        match &self.result {
            Outcome::Resident(r) => Some(r),
            _ => None,
        }
    }

    pub fn insitu_mut(&mut self) -> Option<&mut InsituResult> {
        match &mut self.result {
            Outcome::Insitu(r) => Some(r),
            _ => None,
        }
    }

    /// The run was stopped (Ctrl-C) before this record's measurement was complete: it holds
    /// what was measured so far (`loops.stopped`, a load's or a transfer's `stopped` is
    /// [`INTERRUPTED`]). The store keeps it, but does not count its configuration as done:
    /// `pqtls run` measures it again and the new record supersedes it (docs/results-store.md).
    pub fn is_interrupted(&self) -> bool {
        match &self.result {
            Outcome::Insitu(r) => r.loops.stopped == INTERRUPTED,
            Outcome::Load(r) => r.stopped == INTERRUPTED,
            Outcome::Transfer(r) => r.load.stopped == INTERRUPTED,
            Outcome::Resident(r) => r.stopped == INTERRUPTED,
        }
    }

    /// Marks the record [`Record::is_interrupted`] (the runner does, for every scenario still
    /// open when a run is interrupted, even one whose own rule was met: its window's partners
    /// were not). An in-situ record loses its `stopped_by`: no rule ended it.
    pub fn mark_interrupted(&mut self) {
        match &mut self.result {
            Outcome::Insitu(r) => {
                r.loops.stopped = INTERRUPTED.into();
                r.loops.stopped_by.clear();
            }
            Outcome::Load(r) => r.stopped = INTERRUPTED.into(),
            Outcome::Transfer(r) => r.load.stopped = INTERRUPTED.into(),
            Outcome::Resident(r) => r.stopped = INTERRUPTED.into(),
        }
    }

    /// A factor's canonical value ("" when the record predates the factor).
    pub fn factor(&self, name: &str) -> &str {
        self.scenario.get(name).map_or("", String::as_str)
    }

    /// Reads one line of a results file, of either schema; a future schema or an unknown kind
    /// is an error that says so.
    pub fn from_json_line(line: &str) -> std::result::Result<Record, String> {
        let v: serde_json::Value = serde_json::from_str(line).map_err(|e| format!("not JSON: {e}"))?;
        Record::from_json_value(v)
    }

    /// [`Record::from_json_line`] of a line already parsed as JSON (for readers that also look
    /// at fields of their own, such as the store's `experiment`).
    pub fn from_json_value(v: serde_json::Value) -> std::result::Result<Record, String> {
        if !v.is_object() {
            return Err("not a JSON object".into());
        }
        let schema = v.get("schema").and_then(|s| s.as_u64()).ok_or("no \"schema\" number")?;
        // Compared as u64: a huge number must not wrap onto a known schema.
        match schema {
            s if s == SCHEMA_V1 as u64 => serde_json::from_value::<ConfigRecord>(v)
                .map(ConfigRecord::upgrade)
                .map_err(|e| format!("not a schema-1 record: {e}")),
            s if s == SCHEMA_VERSION as u64 => {
                let mut v = v;
                upgrade_http_factor(&mut v);
                if let Some(k) = v.get("kind").and_then(|k| k.as_str()) {
                    // A kind without a result type here (the `layers` measurement writes `load`
                    // records with a capture section).
                    if Kind::parse(k).is_ok_and(|k| k == Kind::Layers) {
                        return Err(format!("a '{k}' record, which this version of pqtls cannot read yet"));
                    }
                }
                serde_json::from_value::<Record>(v).map_err(|e| format!("not a schema-2 record: {e}"))
            }
            n => Err(format!(
                "schema {n} (this version of pqtls reads schemas {SCHEMA_V1} and {SCHEMA_VERSION}; a newer pqtls wrote it)"
            )),
        }
    }
}

/// A schema-2 record written before the load's `http` factor folded into `transport` (issue
/// 33): `http = "3"` becomes `transport = "quic"` and `http = "1.1"` goes (the default), and the
/// id and label are made again from the scenario — `…|http=3` becomes `…|transport=quic|…`,
/// "HTTP/3" becomes "over quic" — so old and new records of one configuration compare, merge
/// and resume as one. Other records are left as they are. Public for tests that read records as
/// JSON themselves.
pub fn upgrade_http_factor(v: &mut serde_json::Value) {
    let Some(scenario) = v.get_mut("scenario").and_then(|s| s.as_object_mut()) else { return };
    let Some(http) = scenario.remove("http") else { return };
    if http.as_str() == Some("3") {
        scenario.insert("transport".into(), "quic".into());
    }
    let given: IndexMap<String, String> =
        scenario.iter().filter_map(|(k, v)| v.as_str().map(|s| (k.clone(), s.to_string()))).collect();
    // A name the catalogue no longer has: the id and label stay as stored.
    if let Ok(sc) = crate::scenario::Scenario::from_canonical(&given) {
        v["id"] = sc.id().into();
        v["label"] = sc.label().into();
    }
}

/// The in-situ measurement's result: per-side per-step CPU, bytes, loops.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct InsituResult {
    pub negotiated: Negotiated,
    pub client: SideSummary,
    pub server: SideSummary,
    /// Client + server CPU per handshake.
    pub total_cpu_ns: Summary,
    /// The unit of every CPU figure of this record — the sides' totals and steps, the
    /// handshake's total and the baseline's deltas: `ns`, or `instructions` under
    /// `clock = "instructions"` (fields keep their `_cpu_ns` names). Absent: `ns`.
    #[serde(default, skip_serializing_if = "CostUnit::is_ns")]
    pub unit: CostUnit,
    pub bytes: Bytes,
    pub loops: Loops,
    pub rate: Rate,
    /// Per-step differences against the baseline configuration, when one was given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineDelta>,
    /// What disturbed the measurement (records written before issue 12 have none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub noise: Option<Noise>,
    /// Heap allocations per side and step, when the run counted them (`--memory`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::memory::MemoryResult>,
    /// Over `transport = "quic"`: datagrams, packets per type, CRYPTO bytes, the server's
    /// anti-amplification budget and the rounds (absent over the byte-stream transports).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::quic::QuicWire>,
}

/// How a scenario was scheduled among the others of its run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Schedule {
    /// `interleaved` (rounds of blocks over the open scenarios, shuffled each round) or
    /// `sequential` (one scenario after another).
    pub mode: String,
    /// Handshakes per block (interleaved).
    pub block: u64,
    /// At most this many scenarios were open (prepared and interleaved) at once.
    pub window: usize,
    /// Seed of the per-round shuffles.
    pub seed: u64,
    /// Blocks this scenario was measured in.
    pub blocks: u64,
    /// Handshakes run unmeasured at the start of its blocks that followed another scenario's
    /// (one per such block: the caches then hold this configuration's code and data again).
    /// 0 in records of before.
    #[serde(default)]
    pub rewarm_handshakes: u64,
    /// When a window's scenarios stop (interleaved): `thin` (one that met its rule is measured
    /// on with one block every `thin_every` rounds until its window's last meets its rule;
    /// records stored when the window closes), `together` (the same, a block every round) or
    /// `each` (each stops at its own rule and its place is refilled). Empty in records of
    /// before.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub stop: String,
    /// With `stop = "thin"`: rounds between the blocks of a scenario past its rule. 0 (absent)
    /// otherwise.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub thin_every: u64,
}

/// What disturbed one scenario's measurement: the evidence behind the report's warnings.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Noise {
    /// Measured handshakes whose client (server) was descheduled inside its calls for more
    /// than 2 µs + 2 % of their wall time (docs/attribution.md).
    pub disturbed_client: u64,
    pub disturbed_server: u64,
    /// Of those, the sides whose gaps could not be placed in one step: left out of the
    /// per-step statistics (their totals are kept).
    #[serde(default)]
    pub excluded_client: u64,
    #[serde(default)]
    pub excluded_server: u64,
    /// Σ over measured handshakes and both sides of wall − CPU time inside calls, ns.
    pub unscheduled_ns: u64,
    /// Σ of the sides' CPU time inside calls, ns (to put `unscheduled_ns` in proportion).
    pub cpu_ns: u64,
    /// 1-minute load average when the scenario started and when it finished (`/proc/loadavg`).
    pub loadavg_before: Option<f64>,
    pub loadavg_after: Option<f64>,
    /// Share of the machine's CPU time stolen by the hypervisor while the scenario was open
    /// (`/proc/stat`), and busy with anything else than idle/iowait/steal.
    pub steal_fraction: Option<f64>,
    pub busy_fraction: Option<f64>,
    /// Of the busy share, what went to other processes than pqtls (`/proc/stat` minus
    /// `/proc/self/stat`) while the scenario was open. Absent in records of before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub others_fraction: Option<f64>,
    /// CPUs the machine has (to judge a load average).
    pub cpus: usize,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule: Option<Schedule>,
}

impl Noise {
    /// Handshake sides disturbed, as a fraction of all measured sides.
    pub fn disturbed_fraction(&self, measured: u64) -> f64 {
        if measured == 0 {
            0.0
        } else {
            (self.disturbed_client + self.disturbed_server) as f64 / (2 * measured) as f64
        }
    }
}

/// Share of the machine's CPU time taken by other processes above which a record warns
/// (10 %: a fifth of a core on our 2-vCPU machines).
const OTHERS_WARNING: f64 = 0.10;

impl InsituResult {
    /// Warnings for the reader, hyperfine style: the measurement ran under interference, or
    /// its confidence intervals are wider than asked. Empty when nothing calls for one.
    pub fn warnings(&self) -> Vec<String> {
        let mut out = Vec::new();
        // Instructions retired do not change with what else runs: no interference warnings.
        if let Some(n) = self.noise.as_ref().filter(|_| self.unit == CostUnit::Ns) {
            let f = n.disturbed_fraction(self.loops.measured);
            if f > 0.05 {
                out.push(format!(
                    "measured under interference: {:.0} % of handshake sides were descheduled inside the stack \
                     ({} client, {} server sides left out of the step statistics)",
                    f * 100.0,
                    n.excluded_client,
                    n.excluded_server
                ));
            }
            if n.cpu_ns > 0 && n.unscheduled_ns as f64 > 0.05 * n.cpu_ns as f64 {
                out.push(format!(
                    "the threads were off the CPU for {:.0} % of their time inside the stack",
                    100.0 * n.unscheduled_ns as f64 / n.cpu_ns as f64
                ));
            }
            let cpus = n.cpus.max(1) as f64;
            match n.others_fraction {
                // Measured while the scenario was open: the warning says what ran beside it.
                Some(others) if others > OTHERS_WARNING => out.push(format!(
                    "other processes used {:.0} % of the machine's CPU time while it was measured",
                    others * 100.0
                )),
                Some(_) => {}
                // Records of before: the load average (which trails by a minute).
                None => {
                    if let Some(load) = [n.loadavg_before, n.loadavg_after].into_iter().flatten().reduce(f64::max) {
                        if load > 0.5 * cpus + 0.5 {
                            out.push(format!("load average {load:.2} on {} CPUs: other work was running", n.cpus));
                        }
                    }
                }
            }
            if let Some(s) = n.steal_fraction.filter(|s| *s > 0.02) {
                out.push(format!("the hypervisor stole {:.0} % of the CPU time", s * 100.0));
            }
        }
        let gaps = self.medians_near_a_gap();
        if !gaps.is_empty() {
            out.push(format!(
                "samples in separate modes: the median of {} lies next to a gap between them and may move to the \
                 other mode in another run — compare trimmed means (the stopping rule used them there)",
                gaps.join(", ")
            ));
        }
        if self.loops.stopped == "loop cap reached" {
            if let Some(p) = self.loops.precision {
                out.push(format!(
                    "confidence intervals wider than the ±{:.1} % asked: the loop cap ({}) was reached first — \
                     the figures carry their wider intervals; allow more handshakes (--max-loops, or a larger \
                     --budget for pqtls assess) for narrower ones",
                    p * 100.0,
                    self.loops.max
                ));
            }
        }
        if self.loops.stopped == "time cap reached" {
            out.push(format!(
                "stopped by its time cap after {} handshakes ({} warm-up): the total's median is known to ±{:.1} %{} \
                 — the figures carry their intervals; allow more time (max_time, or a larger --budget) for narrower ones",
                self.loops.measured,
                self.loops.warmup,
                self.total_cpu_ns.median_half_width() / self.total_cpu_ns.median.max(f64::MIN_POSITIVE) * 100.0,
                self.loops.precision.map_or(String::new(), |p| format!(" (±{:.1} % asked)", p * 100.0))
            ));
        }
        out
    }
}

impl InsituResult {
    /// The quantities whose median lies next to a gap between modes
    /// ([`Summary::median_near_gap`]): `total`, `client total`, `server certificate_verify`, …
    pub fn medians_near_a_gap(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.total_cpu_ns.median_near_gap {
            out.push("total".to_string());
        }
        for (side, s) in [("client", &self.client), ("server", &self.server)] {
            if s.total_cpu_ns.median_near_gap {
                out.push(format!("{side} total"));
            }
            out.extend(s.steps.iter().filter(|(_, v)| v.median_near_gap).map(|(k, _)| format!("{side} {k}")));
        }
        out
    }
}

/// The result of one configuration as schema 1 wrote it (read, upgraded, never written).
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
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineDelta>,
    pub env: Env,
    pub measured_at: u64,
}

impl ConfigRecord {
    /// The same result as a schema-2 record. Its scenario is rebuilt from the flat fields, and
    /// its id is what the scenario gives today — equal to the stored id for in-memory runs;
    /// runs in the former `threads` mode become `…|transport=socketpair`, as an experiment
    /// with `mode = "threads"` now expands to.
    pub fn upgrade(self) -> Record {
        let c = &self.config;
        let mut scenario = IndexMap::new();
        let explicit_shares = c.id.contains("|shares=");
        let mut put = |k: &str, v: String| {
            scenario.insert(k.to_string(), v);
        };
        put("stack", c.stack.clone());
        put("group", c.groups.join(","));
        put("chain", c.chain.clone());
        put("cipher", c.cipher.clone());
        put("send_root", c.send_root.to_string());
        put("verify_parent", c.verify_parent.to_string());
        put("key_shares", if explicit_shares { c.key_shares.join(",") } else { "one".into() });
        put("share_x25519", c.share_x25519.to_string());
        put("client_chain", c.client_chain.clone().unwrap_or_else(|| "none".into()));
        put("resumption", c.resumption.to_string());
        put("transport", if self.loops.mode == "threads" { "socketpair".into() } else { "memory".into() });
        put("clock", if self.loops.clock.is_empty() { "split".into() } else { self.loops.clock.clone() });
        let (id, label) = match crate::scenario::Scenario::from_canonical(&scenario) {
            Ok(s) => (s.id(), s.label()),
            // A name the catalogue no longer has: keep what was stored.
            Err(_) => (c.id.clone(), self.label.clone()),
        };
        Record {
            schema: SCHEMA_VERSION,
            id,
            label,
            scenario,
            settings: None,
            env: self.env,
            measured_at: self.measured_at,
            result: Outcome::Insitu(Box::new(InsituResult {
                negotiated: self.negotiated,
                client: self.client,
                server: self.server,
                total_cpu_ns: self.total_cpu_ns,
                unit: CostUnit::Ns,
                bytes: self.bytes,
                loops: self.loops,
                rate: self.rate,
                baseline: self.baseline,
                noise: None,
                memory: None,
                quic: None,
            })),
        }
    }
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
    /// Step-by-step deltas of `this` against `base` (the record `base_id`, `base_label`); a
    /// step missing on one side counts as 0 there. Steps compare medians; the totals (the
    /// handshake's, each side's: what ratios between configurations are read from) compare
    /// 10 %-trimmed means ([`Delta::between_trimmed`], docs/benchmarks-history.md §5.6).
    pub fn between(this: &InsituResult, base: &InsituResult, base_id: &str, base_label: &str) -> BaselineDelta {
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
            id: base_id.to_string(),
            label: base_label.to_string(),
            client: side(&this.client, &base.client),
            server: side(&this.server, &base.server),
            client_total: Delta::between_trimmed(&this.client.total_cpu_ns, &base.client.total_cpu_ns),
            server_total: Delta::between_trimmed(&this.server.total_cpu_ns, &base.server.total_cpu_ns),
            total: Delta::between_trimmed(&this.total_cpu_ns, &base.total_cpu_ns),
        }
    }

    /// The delta of record `this` against record `base` (both in-situ; `None` otherwise).
    pub fn of_records(this: &Record, base: &Record) -> Option<BaselineDelta> {
        Some(BaselineDelta::between(this.insitu()?, base.insitu()?, &base.id, &base.label))
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
    pub record: Record,
    pub samples: Vec<(SideSample, SideSample)>,
}

/// Puts items that carry a scenario id (records, measured results) in the order of a plan's
/// ids — the experiment's (matrix) order, or the order of `insitu`'s flags — whatever order
/// they were measured or stored in (an interleaved run completes scenarios in a shuffled
/// order). Items whose id is not in the plan keep their relative order after the others.
/// Every report, table and exporter lists records through this one rule.
pub fn in_plan_order<T>(items: &mut [T], plan_ids: &[String], id_of: impl Fn(&T) -> &str) {
    let rank: std::collections::HashMap<&str, usize> =
        plan_ids.iter().enumerate().rev().map(|(i, id)| (id.as_str(), i)).collect();
    // Stable: equal ranks (ids outside the plan) keep their order.
    items.sort_by_key(|x| rank.get(id_of(x)).copied().unwrap_or(usize::MAX));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plan_order_sorts_by_the_plan_and_keeps_strangers_in_their_order() {
        let plan: Vec<String> = ["a", "b", "c", "d"].map(String::from).to_vec();
        let mut got = vec!["x", "c", "a", "y", "d", "b"];
        in_plan_order(&mut got, &plan, |s| s);
        assert_eq!(got, ["a", "b", "c", "d", "x", "y"]);
        // An id listed twice in a plan ranks at its first place.
        let plan: Vec<String> = ["b", "a", "b"].map(String::from).to_vec();
        let mut got = vec!["a", "b"];
        in_plan_order(&mut got, &plan, |s| s);
        assert_eq!(got, ["b", "a"]);
    }

    fn result(noise: Option<Noise>) -> InsituResult {
        InsituResult {
            negotiated: Negotiated::default(),
            client: SideSummary::default(),
            server: SideSummary::default(),
            total_cpu_ns: Summary::default(),
            unit: CostUnit::Ns,
            bytes: Bytes::default(),
            loops: Loops {
                warmup: 0,
                measured: 100,
                max: 100,
                precision: None,
                stopped: "fixed".into(),
                mode: "memory".into(),
                quantiles: Quantiles::default(),
                clock: "split".into(),
                anchor_ns: Some(crate::trace::ANCHOR_WALL_NS),
                disturbed: 0,
                notes: Vec::new(),
                stopped_by: String::new(),
                rule_met_at: None,
                counter: None,
            },
            rate: Rate::default(),
            baseline: None,
            noise,
            memory: None,
            quic: None,
        }
    }

    #[test]
    fn a_record_measured_with_interference_says_so() {
        let quiet =
            Noise { cpu_ns: 1_000_000, unscheduled_ns: 1_000, loadavg_before: Some(0.1), cpus: 2, ..Noise::default() };
        assert!(result(Some(quiet.clone())).warnings().is_empty());
        assert!(result(None).warnings().is_empty());
        let busy = Noise { disturbed_client: 30, disturbed_server: 10, ..quiet.clone() };
        let w = result(Some(busy)).warnings();
        assert!(w.len() == 1 && w[0].contains("interference") && w[0].contains("20 %"), "{w:?}");
        let loaded =
            Noise { loadavg_after: Some(2.4), steal_fraction: Some(0.1), unscheduled_ns: 200_000, ..quiet.clone() };
        let w = result(Some(loaded.clone())).warnings();
        assert_eq!(w.len(), 3, "{w:?}");
        assert!(w.iter().any(|x| x.contains("load average 2.40")) && w.iter().any(|x| x.contains("stole 10 %")));
        // What other processes used while it was measured decides, when the record has it: a
        // load average left by a build that just ended does not warn, a neighbour does.
        let after_a_build = Noise { loadavg_before: Some(1.9), others_fraction: Some(0.02), ..quiet };
        assert!(result(Some(after_a_build.clone())).warnings().is_empty());
        let w = result(Some(Noise { others_fraction: Some(0.35), ..after_a_build })).warnings();
        assert!(w.len() == 1 && w[0].contains("other processes used 35 %"), "{w:?}");
        // Adaptive mode that ran out of loops before its precision.
        let mut r = result(None);
        r.loops.precision = Some(0.01);
        r.loops.stopped = "loop cap reached".into();
        assert!(r.warnings()[0].contains("wider than the ±1.0 % asked"));
        // A median next to a gap between modes (ML-DSA signing) is named.
        let mut r = result(None);
        let two_modes: Vec<u64> = (0..1000).map(|i| if i < 450 { 300_000 + i % 7 } else { 600_000 + i % 5 }).collect();
        r.server.steps.insert("certificate_verify".into(), Summary::of(&two_modes, &Quantiles::default()));
        assert_eq!(r.medians_near_a_gap(), ["server certificate_verify"]);
        let w = r.warnings();
        assert!(w.len() == 1 && w[0].contains("server certificate_verify") && w[0].contains("trimmed means"), "{w:?}");
    }

    #[test]
    fn step_statistics_leave_out_untrusted_sides_but_totals_keep_them() {
        let side = |step: u64, unscheduled_ns: u64| SideSample {
            steps: [("a".to_string(), step), ("b".to_string(), 1_000 - step)].into_iter().collect(),
            total_cpu_ns: 1_000,
            total_wall_ns: 1_000 + unscheduled_ns,
            unscheduled_ns,
            ..SideSample::default()
        };
        let quiet = side(300, 0);
        let hit = SideSample { unlocated_ns: 50_000, ..side(900, 50_000) };
        let all = [&quiet, &quiet, &hit];
        let trusted = |s: &SideSample| crate::trace::steps_trusted(crate::trace::Clock::Split, s);
        let s = SideSummary::of_filtered(&all, &trusted, &Quantiles::default());
        assert_eq!(s.total_cpu_ns.n, 3);
        assert_eq!(s.steps["a"].n, 2);
        assert_eq!(s.steps["a"].max, 300.0);
        // Nothing trusted: all samples rather than none.
        let s = SideSummary::of_filtered(&[&hit], &trusted, &Quantiles::default());
        assert_eq!(s.steps["a"].n, 1);
    }
}
