//! Load records (`kind = "load"`, issue 9): what the reports show of them, computed once —
//! connections per second per configuration and thread count, the ratio to the x25519 +
//! Ed25519 baseline, latency percentiles, CPU per handshake under load next to the in-situ
//! figure of the same handshake, errors by kind, terminators, achieved vs target rate, and the
//! per-layer distributions.
//!
//! **Spread of a rate.** One run gives one rate; its spread comes from the rate measured every
//! second of the run (`LoadResult::per_second`, completed requests per second):
//! `pqtls_core::stats::rate::Estimate::of_counts` gives the mean's ~95 % interval, and a
//! ratio's interval combines the two rates' relative half-widths (`Estimate::ratio`). Records
//! without per-second counts (or with fewer than two seconds) give ratios without an interval,
//! and the reports say so.

use super::warnings::{grouped_lines, Warning};
use super::{factor_value, key_without, same_except, InsituView, View};
use crate::ResultSet;
use pqtls_core::factor::FACTORS;
use pqtls_core::load::{Latency, LoadResult};
use pqtls_core::record::Record;
use pqtls_core::stats::rate::Estimate;
use pqtls_core::timeline::LAYER_NAMES;

/// The baseline every load row is compared with: the study's x25519 + Ed25519.
pub const BASELINE_GROUP: &str = "x25519";
pub const BASELINE_LEAF: &str = "ed25519";

/// Achieved and target rate of an open loop may differ by this much before a report warns.
pub const RATE_TOLERANCE: f64 = 0.01;

/// The factors a row's configuration is named by besides the thread count, which the reports
/// show as bars of one group.
const THREADS: &str = "threads";

/// A load record with its result at hand; derefs to the [`LoadResult`].
pub type LoadView<'a> = View<'a, LoadResult>;

impl<'a> LoadView<'a> {
    /// Load generator threads: the scenario's, else the result's.
    pub fn threads(&self) -> u64 {
        self.factor(THREADS).parse().unwrap_or(self.result.threads)
    }

    /// Plain HTTP (`tls = false`: the "no TLS" baseline).
    pub fn is_plain(&self) -> bool {
        is_plain(self.record)
    }

    /// One connection per request (`keep_alive = false`), as the throughput study measured.
    pub fn new_connection_per_request(&self) -> bool {
        self.factor("keep_alive") != "true"
    }

    /// Connections per second: the completed requests per second when each had its own
    /// connection (plain HTTP included), else the TLS handshakes per second.
    pub fn connections_per_s(&self) -> f64 {
        if self.new_connection_per_request() {
            self.result.achieved_rate_per_s
        } else {
            self.result.handshakes_per_s
        }
    }

    /// The configuration without its thread count: `X25519MLKEM768 mldsa65:mldsa65 @100/s`,
    /// `no TLS`.
    pub fn configuration(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        if self.is_plain() {
            parts.push("no TLS".into());
        }
        for f in FACTORS {
            // Plain HTTP has no group or chain, and says "no TLS" first.
            if f.name == THREADS || (self.is_plain() && matches!(f.name, "group" | "chain" | "tls")) {
                continue;
            }
            let v = self.factor(f.name);
            parts.extend(if f.name == "group" { Some(v.to_string()) } else { (f.label)(v) });
        }
        parts.join(" ")
    }

    /// The client's stack, `–` for plain HTTP.
    pub fn stack(&self) -> &'a str {
        if self.is_plain() {
            "–"
        } else {
            self.factor("stack")
        }
    }

    /// Who terminated TLS, with its version when known.
    pub fn terminator(&self) -> String {
        let t = &self.result.terminator;
        let mut s = match (t.name.as_str(), t.version.as_str()) {
            ("", "") => "?".to_string(),
            (n, "") => n.to_string(),
            // `HAProxy 3.0.11 (OpenSSL 3.5.1)` names itself.
            (n, v) if v.to_ascii_lowercase().contains(&n.to_ascii_lowercase()) => crate::tables::short_version(v),
            (n, v) => format!("{n} ({})", crate::tables::short_version(v)),
        };
        if let Some(b) = &t.backend {
            s += &format!(" → {b}");
        }
        s
    }

    /// Achieved / target − 1 of an open loop.
    pub fn rate_miss(&self) -> Option<f64> {
        let t = self.result.target_rate_per_s.filter(|t| *t > 0.0)?;
        Some(self.result.achieved_rate_per_s / t - 1.0)
    }

    /// Errors of every kind, the client's and the server's.
    pub fn error_count(&self) -> u64 {
        self.result.errors.iter().map(|e| e.count).sum::<u64>()
            + self.result.server.as_ref().map_or(0, |s| s.errors.iter().map(|e| e.count).sum())
    }
}

/// What a set of load records answers first. An open loop offers every configuration the same
/// rate, so connections/s is the target's and the question is latency (by layer when measured);
/// a closed loop goes as fast as it can, so the question is the rate. Reports order their load
/// sections by it, leading with the answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Question {
    /// Every record is an open loop: latency and layers first, the rates (achieved vs target) after.
    Latency,
    /// Some record is a closed loop: connections per second first.
    Rate,
}

/// The question a set of load records answers ([`Question`]).
pub fn question(all: &[LoadView]) -> Question {
    if !all.is_empty() && all.iter().all(|r| r.result.target_rate_per_s.is_some()) {
        Question::Latency
    } else {
        Question::Rate
    }
}

/// A part of a report's load sections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Part {
    Rates,
    Latency,
    Cpu,
    Errors,
    Layers,
}

impl Part {
    /// The HTML section's id.
    pub fn id(self) -> &'static str {
        match self {
            Part::Rates => "load-rate",
            Part::Latency => "load-latency",
            Part::Cpu => "load-cpu",
            Part::Errors => "load-errors",
            Part::Layers => "load-layers",
        }
    }

    /// Its name in a table of contents.
    pub fn name(self) -> &'static str {
        match self {
            Part::Rates => "connections/s",
            Part::Latency => "latency",
            Part::Cpu => "CPU under load",
            Part::Errors => "errors",
            Part::Layers => "layers",
        }
    }
}

impl Question {
    /// The load sections in the order that answers it.
    pub fn parts(self) -> [Part; 5] {
        match self {
            Question::Rate => [Part::Rates, Part::Latency, Part::Cpu, Part::Errors, Part::Layers],
            Question::Latency => [Part::Layers, Part::Latency, Part::Cpu, Part::Rates, Part::Errors],
        }
    }

    /// What the report says of the records before their sections.
    pub fn lead(self) -> &'static str {
        match self {
            Question::Rate => "",
            Question::Latency => {
                " Every one is an open loop held at its target rate, so what they answer is latency, by layer \
                 when measured: those sections come first."
            }
        }
    }
}

/// Whether a record measured plain HTTP (`tls = false`).
pub fn is_plain(r: &Record) -> bool {
    factor_value(r, "tls") == "false"
}

/// The load records of a set, in order.
pub fn loads(set: &ResultSet) -> Vec<LoadView<'_>> {
    set.records.iter().filter_map(LoadView::of).collect()
}

/// A rate relative to the baseline's.
#[derive(Clone, Debug, PartialEq)]
pub struct Ratio {
    pub baseline_id: String,
    /// This row's connections/s over the baseline's.
    pub ratio: f64,
    /// Half-width of its ~95 % interval, when both rates' spreads are known (per-second counts
    /// of a run with one connection per request).
    pub half_width: Option<f64>,
}

/// The factors a row may differ in from its baseline: the handshake's group and chain, the
/// stack and terminator (rows the balancer's OpenSSL cannot serve run on rustls behind pqtls
/// serve), and TLS itself (the "no TLS" row).
const BASELINE_FREE: &[&str] = &["group", "chain", "stack", "terminator", "tls"];

/// The baseline of a load row: a TLS load record of x25519 with an Ed25519 leaf, equal in every
/// other factor except [`BASELINE_FREE`]; one on the same stack and terminator first.
pub fn baseline_of<'a>(r: &LoadView, all: &[LoadView<'a>]) -> Option<LoadView<'a>> {
    let is_base = |b: &LoadView| {
        !b.is_plain()
            && b.factor("group") == BASELINE_GROUP
            && b.factor("chain").split(':').next() == Some(BASELINE_LEAF)
            && same_except(r.record, b.record, BASELINE_FREE)
    };
    let candidates: Vec<LoadView> = all.iter().filter(|b| is_base(b)).copied().collect();
    let score = |b: &LoadView| {
        (b.factor("stack") == r.factor("stack")) as u8 + (b.factor("terminator") == r.factor("terminator")) as u8
    };
    let best = candidates.iter().map(score).max()?;
    candidates.into_iter().find(|b| score(b) == best)
}

/// The relative half-width of a row's connections/s (from its per-second counts, when each
/// request had its own connection: then the counts are connections too).
pub fn rate_relative_half_width(r: &LoadView) -> Option<f64> {
    if !r.new_connection_per_request() {
        return None;
    }
    Estimate::of_counts(&r.per_second)?.relative_half_width()
}

/// This row's rate relative to its baseline's ([`baseline_of`]), with its interval when both
/// rates' spreads are known.
pub fn ratio(r: &LoadView, all: &[LoadView]) -> Option<Ratio> {
    let b = baseline_of(r, all)?;
    let base = b.connections_per_s();
    if base <= 0.0 {
        return None;
    }
    let ratio = r.connections_per_s() / base;
    // The baseline against itself is exactly 1.
    let half_width = (b.id() != r.id())
        .then(|| rate_relative_half_width(r))
        .flatten()
        .zip(rate_relative_half_width(&b))
        .and_then(|(x, y)| Estimate { mean: 1.0, half_width: x }.ratio(Estimate { mean: 1.0, half_width: y }))
        .map(|e| ratio * e.half_width);
    Some(Ratio { baseline_id: b.id().to_string(), ratio, half_width })
}

/// One bar group of the rate chart: a configuration and its rows by thread count.
#[derive(Clone, Debug)]
pub struct RateGroup<'a> {
    pub configuration: String,
    /// (threads, row), by thread count.
    pub rows: Vec<(u64, LoadView<'a>)>,
}

/// The load rows grouped by configuration (every factor but the thread count), in the order
/// configurations first appear; the thread counts of all groups, sorted.
pub fn rate_groups<'a>(all: &[LoadView<'a>]) -> (Vec<RateGroup<'a>>, Vec<u64>) {
    let mut groups: Vec<(Vec<&str>, RateGroup)> = Vec::new();
    let mut threads: Vec<u64> = Vec::new();
    for r in all {
        let key = key_without(r.record, &[THREADS]);
        let t = r.threads();
        if !threads.contains(&t) {
            threads.push(t);
        }
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.rows.push((t, *r)),
            None => groups.push((key, RateGroup { configuration: r.configuration(), rows: vec![(t, *r)] })),
        }
    }
    threads.sort_unstable();
    let mut out: Vec<RateGroup> = groups.into_iter().map(|(_, g)| g).collect();
    for g in &mut out {
        g.rows.sort_by_key(|(t, _)| *t);
    }
    (out, threads)
}

/// The factors of the handshake itself: the ones an in-situ record shares with a load
/// record (not how the in-situ loop moved bytes or timed steps).
fn handshake_factors() -> Vec<&'static str> {
    FACTORS.iter().filter(|f| f.class == pqtls_core::factor::Class::Handshake).map(|f| f.name).collect()
}

/// The in-situ record of the same handshake as a load row (equal in every handshake factor),
/// in memory when there are several.
pub fn insitu_of<'a>(r: &LoadView, insitu: &[InsituView<'a>]) -> Option<InsituView<'a>> {
    if r.is_plain() {
        return None;
    }
    let names = handshake_factors();
    let same = |i: &InsituView| names.iter().all(|n| i.factor(n) == r.factor(n));
    let mut matching = insitu.iter().filter(|i| same(i));
    let first = matching.clone().next().copied();
    matching.find(|i| i.factor("transport") == "memory").copied().or(first)
}

/// CPU per handshake of one row under load and in situ (means, ns).
#[derive(Clone, Debug, PartialEq)]
pub struct CpuUnderLoad {
    pub client_load_ns: f64,
    pub client_insitu_ns: Option<f64>,
    /// `None` when the server was not pqtls' own (no counters).
    pub server_load_ns: Option<f64>,
    pub server_insitu_ns: Option<f64>,
    /// The in-situ record compared with.
    pub insitu_id: Option<String>,
}

/// [`CpuUnderLoad`] of a row.
pub fn cpu_under_load(r: &LoadView, insitu: &[InsituView]) -> CpuUnderLoad {
    let i = insitu_of(r, insitu);
    CpuUnderLoad {
        client_load_ns: r.client_handshake_cpu_ns_mean,
        client_insitu_ns: i.map(|i| i.client.total_cpu_ns.mean),
        server_load_ns: r.server.as_ref().map(|s| s.handshake_cpu_ns_mean),
        server_insitu_ns: i.map(|i| i.server.total_cpu_ns.mean),
        insitu_id: i.map(|i| i.id().to_string()),
    }
}

/// Latency percentiles a table shows: (column, value).
pub fn percentiles(l: &Latency) -> [(&'static str, u64); 5] {
    [("p50", l.p50_ns), ("p90", l.p90_ns), ("p99", l.p99_ns), ("p99.9", l.p999_ns), ("max", l.max_ns)]
}

/// The layers a stacked bar is made of, in order: everything from connect to the last byte
/// (`http_first_byte` is part of `http`, so it is not stacked).
pub fn stacked_layers() -> Vec<&'static str> {
    LAYER_NAMES.iter().copied().filter(|n| *n != "http_first_byte").collect()
}

/// What a reader must know about load rows before their numbers: open loops that missed their
/// target rate by more than [`RATE_TOLERANCE`], errors, requests left unfinished, rows without
/// a baseline, runs that did not end on their own. One line each; the warnings about single
/// rows grouped where they are alike ([`super::warnings`]).
pub fn load_warnings(all: &[LoadView]) -> Vec<String> {
    let mut each: Vec<Warning> = Vec::new();
    for r in all {
        let t = r.threads();
        let name = format!("{} ({t} thread{}, {})", r.configuration(), if t == 1 { "" } else { "s" }, r.stack());
        let mut warn = |text: String| each.push(Warning { subject: name.clone(), text });
        if let (Some(miss), Some(t)) = (r.rate_miss(), r.target_rate_per_s) {
            if miss.abs() > RATE_TOLERANCE {
                warn(format!(
                    "open loop achieved {:.1}/s of the {:.1}/s asked ({:+.1} %): {}",
                    r.achieved_rate_per_s,
                    t,
                    miss * 100.0,
                    if miss < 0.0 {
                        "the server or the load generator could not keep up; latencies count from the timetable"
                    } else {
                        "more than asked"
                    }
                ));
            }
        }
        let errors = r.error_count();
        if errors > 0 {
            warn(format!("{errors} error(s) (see the errors table)"));
        }
        if r.unfinished > 0 {
            warn(format!("{} request(s) unfinished when the run ended", r.unfinished));
        }
        if r.stopped == "interrupted" {
            warn("interrupted before its duration".into());
        }
        if let Some(s) = r.shard {
            warn(format!("shard {}/{} of a run (merge the shards: pqtls merge)", s.index, s.count));
        }
    }
    // Rows without a baseline to compare with have no ratio chart (it is left out), not a
    // warning: the ratios are the throughput study's question, not every set's.
    grouped_lines(&each)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_testkit::synthetic::load::{study, study_scenario};

    #[test]
    fn rows_group_by_configuration_and_compare_with_x25519_ed25519() {
        let set = ResultSet::from_records(study());
        let all = loads(&set);
        let (groups, threads) = rate_groups(&all);
        assert_eq!(threads, vec![1, 4, 8]);
        assert_eq!(groups.len(), 24);
        assert_eq!(groups[0].configuration, "no TLS 1KiB");
        assert!(groups.iter().all(|g| g.rows.len() == 3));
        let base_id = study_scenario("x25519", "ed25519:ed25519", 4).id();
        let slh = study_scenario("x25519", "slhdsa-sha2-128s:slhdsa-sha2-128s", 4).id();
        let row = all.iter().find(|r| r.id() == slh).unwrap();
        let base = all.iter().find(|r| r.id() == base_id).unwrap();
        let q = ratio(row, &all).unwrap();
        assert_eq!(q.baseline_id, base_id);
        assert_eq!(q.ratio, row.achieved_rate_per_s / base.achieved_rate_per_s);
        let rel = |l: &LoadView| rate_relative_half_width(l).unwrap();
        let want = q.ratio * (rel(row).powi(2) + rel(base).powi(2)).sqrt();
        assert!((q.half_width.unwrap() - want).abs() < 1e-12, "{q:?}");
        let e = Estimate::of_counts(&row.per_second).unwrap();
        assert!((rel(row) - e.half_width / e.mean).abs() < 1e-15);
        // A rustls-only row (behind pqtls serve) finds the OpenSSL baseline (behind HAProxy); the
        // plain row has one too.
        let frodo = all.iter().find(|r| r.id() == study_scenario("frodo640aes", "ed25519:ed25519", 8).id()).unwrap();
        assert_eq!(frodo.factor("stack"), "rustls");
        assert_eq!(ratio(frodo, &all).unwrap().baseline_id, study_scenario("x25519", "ed25519:ed25519", 8).id());
        assert!(ratio(&all[0], &all).unwrap().ratio > 1.0, "no TLS is faster");
        assert_eq!(ratio(base, &all).unwrap().ratio, 1.0);
    }

    #[test]
    fn cpu_under_load_sits_next_to_the_in_situ_figure_of_the_same_handshake() {
        let sc = study_scenario("X25519MLKEM768", "mldsa65:mldsa65", 4);
        let load_rec = pqtls_testkit::synthetic::load::load(&sc, false);
        // The in-situ record of the same handshake (no load factors), and one of another chain.
        let same = sc.with([("threads", "1")]).unwrap();
        let insitu = pqtls_testkit::synthetic::measure(&same, 50).record;
        let other = pqtls_testkit::synthetic::measure(&same.with([("chain", "p256:p256")]).unwrap(), 50).record;
        let set = ResultSet::from_records(vec![other, insitu.clone(), load_rec]);
        let all = loads(&set);
        let c = cpu_under_load(&all[0], &set.insitu());
        assert_eq!(c.insitu_id.as_deref(), Some(insitu.id.as_str()));
        assert_eq!(c.client_insitu_ns, Some(insitu.insitu().unwrap().client.total_cpu_ns.mean));
        assert_eq!(c.client_load_ns, all[0].client_handshake_cpu_ns_mean);
        assert_eq!(c.server_load_ns, None, "terminated by HAProxy: no server counters");
    }

    #[test]
    fn open_loops_that_miss_their_rate_by_more_than_one_percent_are_told() {
        let sc = study_scenario("x25519", "ed25519:ed25519", 1).with([("rate", "100/s")]).unwrap();
        let mut rec = pqtls_testkit::synthetic::load::load(&sc, false);
        assert!(load_warnings(&[LoadView::of(&rec).unwrap()]).iter().all(|w| !w.contains("open loop")));
        if let pqtls_core::record::Outcome::Load(l) = &mut rec.result {
            l.achieved_rate_per_s = 98.5;
        }
        let w = load_warnings(&[LoadView::of(&rec).unwrap()]);
        assert!(w[0].contains("achieved 98.5/s of the 100.0/s asked (-1.5 %)"), "{w:?}");
    }
}
