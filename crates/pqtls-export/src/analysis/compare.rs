//! Two result sets side by side: per configuration (matched by id) and per step, the change
//! of the median with its ~95 % interval (`stats::Delta`) and a verdict. Load records: the
//! change of handshakes/s, requests/s and the latency percentiles; a percentile's ~95 %
//! interval comes from its histogram (order statistics), a rate's from its per-second counts.

use super::load::LoadView;
use super::transfer::TransferView;
use super::{measured_differently, InsituView};
use crate::tables::{pct, rate, us};
use crate::ResultSet;
use pqtls_core::record::BaselineDelta;
use pqtls_core::stats::{Delta, Summary};
use pqtls_core::{Error, Result};
use serde::Serialize;
use std::fmt::Write;

/// Whether a change is more than noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    WithinNoise,
}

impl Verdict {
    pub fn of(d: &Delta) -> Verdict {
        if !d.significant() {
            Verdict::WithinNoise
        } else if d.delta < 0.0 {
            Verdict::Faster
        } else {
            Verdict::Slower
        }
    }

    /// Instruction counts: a change is one when it is significant *and* beyond `threshold`
    /// (relative): counts repeat, so a significant change can be a few instructions that no
    /// one gates on.
    pub fn beyond(d: &Delta, threshold: f64) -> Verdict {
        if !d.significant() || !(d.relative.abs() > threshold) {
            Verdict::WithinNoise
        } else if d.delta < 0.0 {
            Verdict::Faster
        } else {
            Verdict::Slower
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// The change of one step (or total) of one side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepChange {
    /// `client`, `server` or `both`.
    pub side: String,
    /// A step name, or `total`.
    pub step: String,
    pub before_median_ns: f64,
    pub after_median_ns: f64,
    pub delta: Delta,
    pub verdict: Verdict,
}

/// The changes of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigChange {
    pub id: String,
    pub label: String,
    /// Totals first (both sides, client, server), then every step.
    pub steps: Vec<StepChange>,
}

impl ConfigChange {
    /// The handshake total (client + server).
    pub fn total(&self) -> Option<&StepChange> {
        self.steps.first()
    }
}

/// The change of one measure of a load record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MetricChange {
    /// `handshakes/s`, `requests/s`, `latency p50`, … `latency max`.
    pub metric: String,
    /// `per_s` or `ns`.
    pub unit: String,
    pub before: f64,
    pub after: f64,
    /// after / before − 1 (NaN when before is 0; JSON null).
    pub relative: f64,
    /// ~95 % intervals of the two values, when known: a latency percentile's from its
    /// histogram (the values at the ranks n·q ± 1.96·√(n·q·(1−q))); a rate's from its
    /// per-second counts (1.96 standard errors of the mean); the maximum has none.
    pub before_interval: Option<[f64; 2]>,
    pub after_interval: Option<[f64; 2]>,
    /// `None` when no interval is known. For latencies lower is faster, for rates higher.
    pub verdict: Option<Verdict>,
}

/// The changes of one load configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoadChange {
    pub id: String,
    pub label: String,
    pub metrics: Vec<MetricChange>,
}

/// The changes of one transfer point (e.g. the same study on two machines).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TransferChange {
    pub id: String,
    pub label: String,
    /// TTFB p50, TTLB p50 / p95 / p99, with intervals from their histograms.
    pub metrics: Vec<MetricChange>,
    /// After / before of the TTLB median with its ~95 % interval `[ratio, low, high]` (the two
    /// medians' order-statistic intervals combined, as for PQ − classical differences);
    /// `None` without histograms.
    pub ttlb_p50_ratio: Option<[f64; 3]>,
}

/// The comparison of two result sets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub before: String,
    pub after: String,
    pub configs: Vec<ConfigChange>,
    /// Load records present in both sets.
    pub loads: Vec<LoadChange>,
    /// Transfer records present in both sets.
    pub transfers: Vec<TransferChange>,
    /// (id, label) of configurations measured in one set only.
    pub only_before: Vec<(String, String)>,
    pub only_after: Vec<(String, String)>,
    /// Differences in how the two sets were measured (settings, machine, library versions),
    /// and records not compared: a change may come from them rather than from the code.
    pub notes: Vec<String>,
}

/// How two sets are compared.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CompareOptions {
    /// Instruction-count records: the relative change below which a step is unchanged
    /// ([`Verdict::beyond`]); time records are judged by their intervals alone.
    pub count_threshold: f64,
}

/// The default threshold of instruction counts: 0.5 %.
pub const COUNT_THRESHOLD: f64 = 0.005;

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions { count_threshold: COUNT_THRESHOLD }
    }
}

fn change(
    side: &str,
    step: &str,
    after: Option<&Summary>,
    before: Option<&Summary>,
    delta: &Delta,
    threshold: Option<f64>,
) -> StepChange {
    StepChange {
        side: side.into(),
        step: step.into(),
        before_median_ns: before.map_or(0.0, |s| s.median),
        after_median_ns: after.map_or(0.0, |s| s.median),
        verdict: threshold.map_or_else(|| Verdict::of(delta), |t| Verdict::beyond(delta, t)),
        delta: delta.clone(),
    }
}

/// The changes of one configuration, from the per-step deltas ([`BaselineDelta::between`],
/// the one place deltas are computed) of `after` against `before`.
fn config_change(after: InsituView, before: InsituView, opts: &CompareOptions) -> ConfigChange {
    let median = Delta::between;
    let t = (after.unit == pqtls_core::trace::CostUnit::Instructions).then_some(opts.count_threshold);
    let d = BaselineDelta::between(after.result, before.result, before.id(), before.label());
    let mut steps = vec![
        // Medians, as every row of a comparison shows (baseline deltas compare trimmed totals).
        change(
            "both",
            "total",
            Some(&after.total_cpu_ns),
            Some(&before.total_cpu_ns),
            &median(&after.total_cpu_ns, &before.total_cpu_ns),
            t,
        ),
        change(
            "client",
            "total",
            Some(&after.client.total_cpu_ns),
            Some(&before.client.total_cpu_ns),
            &median(&after.client.total_cpu_ns, &before.client.total_cpu_ns),
            t,
        ),
        change(
            "server",
            "total",
            Some(&after.server.total_cpu_ns),
            Some(&before.server.total_cpu_ns),
            &median(&after.server.total_cpu_ns, &before.server.total_cpu_ns),
            t,
        ),
    ];
    for (side, deltas, a, b) in
        [("client", &d.client, &after.client, &before.client), ("server", &d.server, &after.server, &before.server)]
    {
        for (n, delta) in deltas {
            steps.push(change(side, n, a.steps.get(n), b.steps.get(n), delta, t));
        }
    }
    ConfigChange { id: after.id().to_string(), label: after.label().to_string(), steps }
}

/// The ~95 % interval of quantile `q` of a recorded distribution (core's estimator).
fn quantile_interval(l: &pqtls_core::load::Latency, q: f64) -> Option<[f64; 2]> {
    l.quantile_interval(q).map(|i| [i.low_ns, i.high_ns])
}

fn metric(
    name: &str,
    unit: &str,
    before: f64,
    after: f64,
    intervals: Option<([f64; 2], [f64; 2])>,
    lower_is_faster: bool,
) -> MetricChange {
    let verdict = intervals.map(|(b, a)| {
        if a[1] < b[0] {
            if lower_is_faster {
                Verdict::Faster
            } else {
                Verdict::Slower
            }
        } else if a[0] > b[1] {
            if lower_is_faster {
                Verdict::Slower
            } else {
                Verdict::Faster
            }
        } else {
            Verdict::WithinNoise
        }
    });
    MetricChange {
        metric: name.into(),
        unit: unit.into(),
        before,
        after,
        relative: if before > 0.0 { after / before - 1.0 } else { f64::NAN },
        before_interval: intervals.map(|(b, _)| b),
        after_interval: intervals.map(|(_, a)| a),
        verdict,
    }
}

/// The changes of one load configuration: rates (intervals from per-second counts), then latency
/// percentiles (intervals from their histograms; none for the maximum).
fn load_change(after: LoadView, before: LoadView) -> LoadChange {
    // A rate's interval from its per-second counts (handshakes too when each request had its
    // own connection).
    let around = |x: f64, rel: Option<f64>| rel.map(|r| [x * (1.0 - r), x * (1.0 + r)]);
    let requests_rel =
        |l: &LoadView| pqtls_core::stats::rate::Estimate::of_counts(&l.per_second)?.relative_half_width();
    let handshakes = around(before.handshakes_per_s, super::load::rate_relative_half_width(&before))
        .zip(around(after.handshakes_per_s, super::load::rate_relative_half_width(&after)));
    let requests = around(before.achieved_rate_per_s, requests_rel(&before))
        .zip(around(after.achieved_rate_per_s, requests_rel(&after)));
    let mut metrics = vec![
        metric("handshakes/s", "per_s", before.handshakes_per_s, after.handshakes_per_s, handshakes, false),
        metric("requests/s", "per_s", before.achieved_rate_per_s, after.achieved_rate_per_s, requests, false),
    ];
    let (b, a) = (&before.latency, &after.latency);
    for (name, q, bv, av) in [
        ("latency p50", 0.5, b.p50_ns, a.p50_ns),
        ("latency p90", 0.9, b.p90_ns, a.p90_ns),
        ("latency p99", 0.99, b.p99_ns, a.p99_ns),
        ("latency p99.9", 0.999, b.p999_ns, a.p999_ns),
    ] {
        let intervals = quantile_interval(b, q).zip(quantile_interval(a, q));
        metrics.push(metric(name, "ns", bv as f64, av as f64, intervals, true));
    }
    metrics.push(metric("latency max", "ns", b.max_ns as f64, a.max_ns as f64, None, true));
    LoadChange { id: after.id().to_string(), label: after.label().to_string(), metrics }
}

/// The changes of one transfer point: TTFB and TTLB percentiles, and the ratio of the TTLB
/// medians with its interval.
fn transfer_change(after: TransferView, before: TransferView) -> TransferChange {
    let mut metrics = Vec::new();
    for (name, q, b, a) in [
        ("TTFB p50", 0.5, &before.load.ttfb, &after.load.ttfb),
        ("TTLB p50", 0.5, &before.load.latency, &after.load.latency),
        ("TTLB p95", 0.95, &before.load.latency, &after.load.latency),
        ("TTLB p99", 0.99, &before.load.latency, &after.load.latency),
    ] {
        let value = |l: &pqtls_core::load::Latency| {
            l.histogram().ok().filter(|h| !h.is_empty()).map_or(0.0, |h| h.value_at_quantile(q) as f64)
        };
        let intervals = quantile_interval(b, q).zip(quantile_interval(a, q));
        metrics.push(metric(name, "ns", value(b), value(a), intervals, true));
    }
    let ttlb_p50_ratio = after
        .load
        .latency
        .quantile_interval(0.5)
        .zip(before.load.latency.quantile_interval(0.5))
        .map(|(a, b)| a.difference(&b))
        .filter(|x| x.ratio.is_finite())
        .map(|x| [x.ratio, x.ratio_low, x.ratio_high]);
    TransferChange { id: after.id().to_string(), label: after.label().to_string(), metrics, ttlb_p50_ratio }
}

/// Compares `after` against `before`, configuration by configuration (matched by id; in
/// `before`'s order, then what only `after` has). In-situ records are compared step by step,
/// load records by rates and latency percentiles; a pair of records of different kinds is
/// listed in `notes` as not compared. Differences in how matched records were measured
/// (settings, libraries, machine) are in `notes` too.
pub fn compare(before: &ResultSet, after: &ResultSet) -> Comparison {
    compare_with(before, after, &CompareOptions::default())
}

/// [`compare`] with options (the threshold of instruction counts).
pub fn compare_with(before: &ResultSet, after: &ResultSet, opts: &CompareOptions) -> Comparison {
    let mut configs = Vec::new();
    let mut loads = Vec::new();
    let mut transfers = Vec::new();
    let mut only_before = Vec::new();
    let mut notes = Vec::new();
    let mut note = |n: String| {
        if !notes.contains(&n) {
            notes.push(n);
        }
    };
    if let (Some(a), Some(b)) = (before.settings(), after.settings()) {
        let changes = b.changes_from(a);
        if !changes.is_empty() {
            note(format!("measurement settings differ: {}", changes.join("; ")));
        }
    }
    for b in &before.records {
        match after.records.iter().find(|a| a.id == b.id) {
            Some(a) => {
                for n in measured_differently(b, a) {
                    note(n);
                }
                match (InsituView::of(a), InsituView::of(b), LoadView::of(a), LoadView::of(b)) {
                    (Some(a), Some(b), _, _) => configs.push(config_change(a, b, opts)),
                    (_, _, Some(a), Some(b)) => loads.push(load_change(a, b)),
                    _ if a.transfer().is_some() && b.transfer().is_some() => {
                        if let (Some(a), Some(b)) = (TransferView::of(a), TransferView::of(b)) {
                            transfers.push(transfer_change(a, b));
                        }
                    }
                    _ => note(format!(
                        "{} not compared: a {} record before and a {} record after",
                        b.id,
                        b.kind().name(),
                        a.kind().name()
                    )),
                }
            }
            None => only_before.push((b.id.clone(), b.label.clone())),
        }
    }
    let only_after = after
        .records
        .iter()
        .filter(|a| !before.records.iter().any(|b| b.id == a.id))
        .map(|a| (a.id.clone(), a.label.clone()))
        .collect();
    Comparison {
        before: before.title(),
        after: after.title(),
        configs,
        loads,
        transfers,
        only_before,
        only_after,
        notes,
    }
}

fn fmt_metric(m: &MetricChange) -> [String; 4] {
    let v = |x: f64| if m.unit == "ns" { us(x) } else { rate(x) };
    let unit = if m.unit == "ns" { " µs" } else { "" };
    let interval = |i: Option<[f64; 2]>| i.map_or(String::new(), |[lo, hi]| format!(" [{}–{}]", v(lo), v(hi)));
    [
        format!("{}{} → {}{}{unit}", v(m.before), interval(m.before_interval), v(m.after), interval(m.after_interval)),
        pct(m.relative),
        m.verdict.map_or("no interval".to_string(), |x| x.name().to_string()),
        String::new(),
    ]
}

fn fmt_change(c: &StepChange) -> (String, String, String, String) {
    let rel = pct(c.delta.relative);
    (
        format!("{} → {}", us(c.before_median_ns), us(c.after_median_ns)),
        format!(
            "{}{} ± {}",
            if c.delta.delta >= 0.0 { "+" } else { "−" },
            us(c.delta.delta.abs()),
            us(c.delta.half_width)
        ),
        rel,
        c.verdict.name().to_string(),
    )
}

/// A plain-text table of load (or transfer) rows for the terminal, under `title`.
fn load_table(title: &str, rows: &[[String; 5]]) -> String {
    let header = ["configuration", "measure", "before → after", "Δ %", "verdict"].map(String::from);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            if i == 2 || i == 3 {
                s += &format!("{pad}{c}  ");
            } else {
                s += &format!("{c}{pad}  ");
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = format!("\n{title}:\n");
    out += &line(&header);
    out += &line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
    for r in rows {
        out += &line(r);
    }
    out
}

impl Comparison {
    fn rows(&self, all_steps: bool) -> Vec<[String; 7]> {
        let mut rows = Vec::new();
        for c in &self.configs {
            for s in &c.steps {
                let is_total = s.step == "total";
                if !all_steps && !is_total && s.verdict == Verdict::WithinNoise {
                    continue;
                }
                let (m, d, r, v) = fmt_change(s);
                rows.push([c.label.clone(), s.side.clone(), s.step.clone(), m, d, r, v]);
            }
        }
        rows
    }

    fn load_rows(&self) -> Vec<[String; 5]> {
        let mut rows = Vec::new();
        for c in &self.loads {
            for m in &c.metrics {
                let [v, r, verdict, _] = fmt_metric(m);
                rows.push([c.label.clone(), m.metric.clone(), v, r, verdict]);
            }
        }
        rows
    }

    fn transfer_rows(&self) -> Vec<[String; 5]> {
        let mut rows = Vec::new();
        for c in &self.transfers {
            for m in &c.metrics {
                let [v, r, verdict, _] = fmt_metric(m);
                rows.push([c.label.clone(), m.metric.clone(), v, r, verdict]);
            }
            if let Some([r, lo, hi]) = c.ttlb_p50_ratio {
                rows.push([
                    c.label.clone(),
                    "TTLB p50 after / before".into(),
                    format!("{r:.3} [{lo:.3}–{hi:.3}]"),
                    String::new(),
                    if lo > 1.0 {
                        "slower"
                    } else if hi < 1.0 {
                        "faster"
                    } else {
                        "within noise"
                    }
                    .into(),
                ]);
            }
        }
        rows
    }

    /// The in-situ steps and totals judged slower: `configuration · side step`, for a CI job
    /// that fails on a regression (`pqtls compare --fail-on-slower`).
    pub fn slower_steps(&self) -> Vec<String> {
        self.configs
            .iter()
            .flat_map(|c| {
                c.steps
                    .iter()
                    .filter(|s| s.verdict == Verdict::Slower)
                    .map(move |s| format!("{} · {} {} {}", c.label, s.side, s.step, pct(s.delta.relative)))
            })
            .collect()
    }

    /// Counts of (faster, slower, within noise or no interval) load configurations by their
    /// median latency.
    pub fn load_tally(&self) -> (usize, usize, usize) {
        let mut t = (0, 0, 0);
        for c in &self.loads {
            match c.metrics.iter().find(|m| m.metric == "latency p50").and_then(|m| m.verdict) {
                Some(Verdict::Faster) => t.0 += 1,
                Some(Verdict::Slower) => t.1 += 1,
                _ => t.2 += 1,
            }
        }
        t
    }

    /// Counts of (faster, slower, within noise) configurations by their handshake total.
    pub fn tally(&self) -> (usize, usize, usize) {
        let mut t = (0, 0, 0);
        for c in &self.configs {
            match c.total().map(|s| s.verdict) {
                Some(Verdict::Faster) => t.0 += 1,
                Some(Verdict::Slower) => t.1 += 1,
                _ => t.2 += 1,
            }
        }
        t
    }

    /// A plain-text table for the terminal. Without `all_steps`, steps within noise are left
    /// out (the totals are always shown).
    pub fn to_terminal(&self, all_steps: bool) -> String {
        let header = ["configuration", "side", "step", "median µs", "Δ µs (95 %)", "Δ %", "verdict"];
        let rows = self.rows(all_steps);
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                let pad = w - c.chars().count();
                if i == 0 || i == 1 || i == 2 || i == 6 {
                    s += &format!("{c}{}", " ".repeat(pad));
                } else {
                    s += &format!("{}{c}", " ".repeat(pad));
                }
                s += "  ";
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = format!("compare: {} → {}\n", self.before, self.after);
        if !self.configs.is_empty() || (self.loads.is_empty() && self.transfers.is_empty()) {
            out += &line(&header.map(String::from));
            out += &line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
            for r in &rows {
                out += &line(r);
            }
        }
        if !self.loads.is_empty() {
            out += &load_table("load records", &self.load_rows());
        }
        if !self.transfers.is_empty() {
            out += &load_table("transfer records", &self.transfer_rows());
        }
        let (f, s, n) = self.tally();
        if !self.notes.is_empty() {
            let _ = writeln!(
                out,
                "\nthe two sets were measured differently; a change may come from this rather than the code:"
            );
        }
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        if !self.configs.is_empty() || (self.loads.is_empty() && self.transfers.is_empty()) {
            let _ = writeln!(
                out,
                "\n{} configurations compared: {f} faster, {s} slower, {n} within noise (handshake CPU, client + server)",
                self.configs.len()
            );
        }
        if !self.loads.is_empty() {
            let (f, s, n) = self.load_tally();
            let _ = writeln!(
                out,
                "{}{} load configurations compared: {f} faster, {s} slower, {n} within noise (median latency)",
                if self.configs.is_empty() { "\n" } else { "" },
                self.loads.len()
            );
        }
        for (set, list) in [(&self.before, &self.only_before), (&self.after, &self.only_after)] {
            if !list.is_empty() {
                let _ = writeln!(out, "{} only in {set}:", list.len());
                for (id, _) in list {
                    let _ = writeln!(out, "  {id}");
                }
            }
        }
        out
    }

    /// A Markdown table (all steps).
    pub fn to_markdown(&self) -> String {
        let mut out = format!("# Comparison: {} → {}\n\n", self.before, self.after);
        let (f, s, n) = self.tally();
        if !self.configs.is_empty() || (self.loads.is_empty() && self.transfers.is_empty()) {
            let _ = writeln!(
                out,
                "{} configurations compared: {f} faster, {s} slower, {n} within noise (handshake CPU, client + server). \
                 Δ is the change of the median with its ~95 % interval; a change is more than noise when the interval \
                 excludes 0.\n",
                self.configs.len()
            );
        }
        for note in &self.notes {
            let _ = writeln!(out, "> Note: {note}\n");
        }
        if !self.configs.is_empty() || (self.loads.is_empty() && self.transfers.is_empty()) {
            out += "| configuration | side | step | median µs | Δ µs (95 %) | Δ % | verdict |\n|---|---|---|---:|---:|---:|---|\n";
            for r in self.rows(true) {
                let _ =
                    writeln!(out, "| {} |", r.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
            }
        }
        if !self.loads.is_empty() {
            let (f, s, n) = self.load_tally();
            let _ = writeln!(
                out,
                "\n## Load\n\n{} load configurations compared: {f} faster, {s} slower, {n} within noise (median \
                 latency). Values in brackets are ~95 % intervals: of latency percentiles from their histograms, of \
                 rates from their per-second counts.\n",
                self.loads.len()
            );
            out += "| configuration | measure | before → after | Δ % | verdict |\n|---|---|---:|---:|---|\n";
            for r in self.load_rows() {
                let _ =
                    writeln!(out, "| {} |", r.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
            }
        }
        if !self.transfers.is_empty() {
            let _ = writeln!(
                out,
                "\n## Transfer\n\n{} transfer points compared. Values in brackets are ~95 % intervals from the \
                 histograms (µs); the TTLB ratio's combines the two medians' intervals.\n",
                self.transfers.len()
            );
            out += "| configuration | measure | before → after | Δ % | verdict |\n|---|---|---:|---:|---|\n";
            for r in self.transfer_rows() {
                let _ =
                    writeln!(out, "| {} |", r.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
            }
        }
        for (set, list) in [(&self.before, &self.only_before), (&self.after, &self.only_after)] {
            if !list.is_empty() {
                let _ = writeln!(out, "\nOnly in {set}:\n");
                for (id, label) in list {
                    let _ = writeln!(out, "- `{id}` ({label})");
                }
            }
        }
        out
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::Other(format!("encoding the comparison: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::scenario::Scenario;
    use pqtls_core::stats::Quantiles;

    fn cfg(group: &str) -> Scenario {
        Scenario::new([("group", group), ("chain", "p256:p256")]).unwrap()
    }

    #[test]
    fn verdicts_and_configs_in_one_set_only() {
        let a = pqtls_testkit::synthetic::measure(&cfg("x25519"), 300).record;
        let b = pqtls_testkit::synthetic::measure(&cfg("MLKEM768"), 300).record;
        let c = pqtls_testkit::synthetic::measure(&cfg("secp256r1"), 300).record;
        let mut slower_record = a.clone();
        let slower = slower_record.insitu_mut().unwrap();
        // Server signing 30 % slower, everything else identical.
        let qs = Quantiles::default();
        let s = slower.server.steps.get_mut("write_certificate_verify").unwrap();
        let samples: Vec<u64> = (0..300).map(|i| (s.median * 1.3) as u64 + i % 7).collect();
        *s = Summary::of(&samples, &qs);
        let tot: Vec<u64> = (0..300).map(|i| (slower.total_cpu_ns.median + 20_000.0) as u64 + i % 7).collect();
        slower.total_cpu_ns = Summary::of(&tot, &qs);
        slower_record.env.cpu_model = "other CPU".into();
        let before = ResultSet::from_records(vec![a.clone(), b.clone()]);
        let after = ResultSet::from_records(vec![slower_record, c.clone()]);
        let cmp = compare(&before, &after);
        assert_eq!(cmp.configs.len(), 1);
        assert_eq!(cmp.only_before, vec![(b.id.clone(), b.label.clone())]);
        assert_eq!(cmp.only_after, vec![(c.id.clone(), c.label.clone())]);
        let ch = &cmp.configs[0];
        assert_eq!(ch.total().unwrap().verdict, Verdict::Slower);
        let sign = ch.steps.iter().find(|s| s.side == "server" && s.step == "write_certificate_verify").unwrap();
        assert_eq!(sign.verdict, Verdict::Slower);
        assert!((sign.delta.relative - 0.3).abs() < 0.01, "{:?}", sign.delta);
        let same = ch.steps.iter().find(|s| s.side == "client" && s.step == "write_client_hello").unwrap();
        assert_eq!(same.verdict, Verdict::WithinNoise);
        assert_eq!(same.delta.delta, 0.0);
        assert_eq!(cmp.notes, vec!["CPU model differs: synthetic → other CPU".to_string()]);
        let t = cmp.to_terminal(false);
        assert!(t.contains("write_certificate_verify") && !t.contains("write_client_hello"), "{t}");
        assert!(t.contains("1 configurations compared: 0 faster, 1 slower, 0 within noise"), "{t}");
        assert!(t.contains("only in") && t.contains(&b.id), "{t}");
        let md = cmp.to_markdown();
        assert!(md.contains("| x25519 p256:p256 | server | write_certificate_verify |"), "{md}");
        let json: serde_json::Value = serde_json::from_str(&cmp.to_json().unwrap()).unwrap();
        assert_eq!(json["configs"][0]["steps"][0]["verdict"], "slower");
    }

    #[test]
    fn sets_measured_with_other_libraries_or_settings_say_so() {
        let mut a = pqtls_testkit::synthetic::measure(&cfg("x25519"), 100).record;
        a.env.libraries.insert("openssl".into(), "OpenSSL 3.5.4".into());
        a.settings = Some(pqtls_core::settings::Settings::default());
        let mut b = a.clone();
        b.env.libraries.insert("openssl".into(), "OpenSSL 3.5.5".into());
        b.env.libraries.insert("rustls".into(), "rustls 0.23.31".into());
        b.settings = Some(pqtls_core::settings::Settings { loops: Some(2000), ..Default::default() });
        let cmp = compare(&ResultSet::from_records(vec![a.clone()]), &ResultSet::from_records(vec![b]));
        assert_eq!(cmp.configs.len(), 1, "still compared, with notes");
        assert!(cmp.notes.contains(&"measurement settings differ: loops: 1000 → 2000".to_string()), "{:?}", cmp.notes);
        assert!(
            cmp.notes.contains(&"openssl library differs: OpenSSL 3.5.4 → OpenSSL 3.5.5".to_string()),
            "{:?}",
            cmp.notes
        );
        assert!(cmp.notes.contains(&"rustls library differs: unknown → rustls 0.23.31".to_string()), "{:?}", cmp.notes);
        let t = cmp.to_terminal(false);
        assert!(t.contains("measured differently") && t.contains("note: openssl library differs"), "{t}");
        assert!(cmp.to_markdown().contains("> Note: measurement settings differ: loops: 1000 → 2000"));
        // Measured alike: no note.
        let same = compare(&ResultSet::from_records(vec![a.clone()]), &ResultSet::from_records(vec![a]));
        assert!(same.notes.is_empty(), "{:?}", same.notes);
    }

    /// Counts judge a change by its size too: significant but within the threshold is
    /// unchanged; beyond it, slower or faster.
    #[test]
    fn count_verdicts_need_a_change_beyond_the_threshold() {
        let d = |delta: f64, relative: f64| Delta { delta, relative, half_width: delta.abs() / 10.0 };
        assert_eq!(Verdict::beyond(&d(3_000.0, 0.003), COUNT_THRESHOLD), Verdict::WithinNoise);
        assert_eq!(Verdict::beyond(&d(8_000.0, 0.008), COUNT_THRESHOLD), Verdict::Slower);
        assert_eq!(Verdict::beyond(&d(-8_000.0, -0.008), COUNT_THRESHOLD), Verdict::Faster);
        // Beyond the threshold but not beyond its interval: unchanged.
        let wide = Delta { delta: 8_000.0, relative: 0.008, half_width: 9_000.0 };
        assert_eq!(Verdict::beyond(&wide, COUNT_THRESHOLD), Verdict::WithinNoise);
    }
}
