//! pqtls exporters: every output is a function of saved result records, so a report can be
//! regenerated without measuring again.
//!
//! - [`ResultSet`]: the records (and manifest, raw samples) of one results directory.
//! - [`capacity`](mod@capacity): the capacity and latency model (sessions/s per link and per core,
//!   serialisation time, slow-start round trips).
//! - [`rules`]: rules of thumb derived from the records, each naming its sources.
//! - one module per format: [`csv`], [`json`], [`markdown`], [`html`] (self-contained, with
//!   SVG charts drawn by `plotters`).
//! - [`compare`]: two result sets, per configuration and step, with a verdict against noise.
//!
//! The CLI calls:
//!
//! ```no_run
//! use pqtls_export::{ResultSet, ReportOptions, html, markdown, compare};
//! # fn main() -> pqtls_core::Result<()> {
//! let set = ResultSet::load("results/in-situ".as_ref())?;
//! let opts = ReportOptions::default();
//! std::fs::write("report.html", html::render(&set, &opts)?).ok();
//! std::fs::write("report.md", markdown::render(&set, &opts)?).ok();
//! let before = ResultSet::load("results/before".as_ref())?;
//! let cmp = compare::compare(&before, &set);
//! print!("{}", cmp.to_terminal(false));
//! # Ok(()) }
//! ```

pub mod capacity;
mod charts;
pub mod compare;
pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
pub mod rules;

use pqtls_core::record::{BaselineDelta, ConfigRecord};
use pqtls_core::{Error, Result};
use pqtls_store::{Manifest, SampleLine};
use std::path::{Path, PathBuf};

pub use capacity::{capacity, Capacity, NetworkModel};

/// The records of one results directory.
#[derive(Clone, Debug)]
pub struct ResultSet {
    /// Where they came from (for titles and sample lookups); `None` when built in memory.
    pub dir: Option<PathBuf>,
    pub manifest: Option<Manifest>,
    pub records: Vec<ConfigRecord>,
    /// Things worth telling the reader (an incomplete last line ignored, …).
    pub notices: Vec<String>,
}

impl ResultSet {
    /// Reads `records.ndjson` (and `manifest.json` when present) of a results directory.
    pub fn load(dir: &Path) -> Result<ResultSet> {
        let (records, notices) = pqtls_store::read_records(dir)?;
        let manifest =
            if dir.join(pqtls_store::store::MANIFEST).exists() { Some(pqtls_store::read_manifest(dir)?) } else { None };
        Ok(ResultSet { dir: Some(dir.to_path_buf()), manifest, records, notices })
    }

    /// A set made of records in memory (tests, or records from elsewhere).
    pub fn from_records(records: Vec<ConfigRecord>) -> ResultSet {
        ResultSet { dir: None, manifest: None, records, notices: Vec::new() }
    }

    /// A title: the experiment's name, else the directory.
    pub fn title(&self) -> String {
        match (&self.manifest, &self.dir) {
            (Some(m), _) => m.name.clone(),
            (None, Some(d)) => d.display().to_string(),
            (None, None) => "results".into(),
        }
    }

    /// Raw samples of a configuration, when they were kept.
    pub fn samples(&self, id: &str) -> Option<Vec<SampleLine>> {
        let dir = self.dir.as_ref()?;
        pqtls_store::read_samples(dir, id).ok().flatten()
    }

    /// Finds a record by id, or by label when no id matches.
    pub fn find(&self, id_or_label: &str) -> Option<&ConfigRecord> {
        self.records
            .iter()
            .find(|r| r.config.id == id_or_label)
            .or_else(|| self.records.iter().find(|r| r.label == id_or_label))
    }
}

/// Options shared by the report formats.
#[derive(Clone, Debug)]
pub struct ReportOptions {
    pub model: NetworkModel,
    /// Compare every record with this one (id or label) instead of the records' own
    /// `baseline` field.
    pub baseline: Option<String>,
    /// At most this many configurations per chart (tables always list all).
    pub max_chart_configs: usize,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions { model: NetworkModel::default(), baseline: None, max_chart_configs: 150 }
    }
}

/// The deltas the report shows: against the chosen baseline when one is given (an error if
/// it is not in the set), else the records' own `baseline` fields.
pub fn baseline_deltas(set: &ResultSet, opts: &ReportOptions) -> Result<Vec<(usize, BaselineDelta)>> {
    match &opts.baseline {
        Some(b) => {
            let base = set.find(b).ok_or_else(|| {
                Error::Invalid(format!(
                    "baseline '{b}' is not among the {} records; give a configuration id or label, e.g. '{}'",
                    set.records.len(),
                    set.records.first().map_or("", |r| r.config.id.as_str())
                ))
            })?;
            Ok(set
                .records
                .iter()
                .enumerate()
                .filter(|(_, r)| r.config.id != base.config.id)
                .map(|(i, r)| (i, BaselineDelta::between(r, base)))
                .collect())
        }
        None => Ok(set.records.iter().enumerate().filter_map(|(i, r)| r.baseline.clone().map(|d| (i, d))).collect()),
    }
}

/// Nanoseconds as microseconds with a sensible number of digits.
pub(crate) fn us(ns: f64) -> String {
    let u = ns / 1000.0;
    if !u.is_finite() {
        "–".into()
    } else if u.abs() >= 100.0 {
        format!("{u:.0}")
    } else if u.abs() >= 10.0 {
        format!("{u:.1}")
    } else {
        format!("{u:.2}")
    }
}

/// A relative change as a signed percentage, `–` when undefined (baseline 0).
pub(crate) fn pct(relative: f64) -> String {
    if relative.is_finite() {
        format!("{:+.1} %", relative * 100.0)
    } else {
        "–".into()
    }
}

/// A rate with thousands separators (or `∞`).
pub(crate) fn rate(x: f64) -> String {
    if !x.is_finite() {
        return "∞".into();
    }
    let n = x.round() as u64;
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

/// The capacity table, shared by the Markdown and HTML reports: header and one row per
/// record (label first).
pub(crate) fn capacity_table(records: &[ConfigRecord], model: &NetworkModel) -> (Vec<String>, Vec<Vec<String>>) {
    let mut head = vec!["configuration".to_string(), "wire B c→s".into(), "wire B s→c".into(), "bottleneck".into()];
    head.extend(model.bandwidths_gbps.iter().map(|g| format!("sessions/s @ {g} Gbit/s")));
    head.extend(["server sessions/s per core".into(), "client sessions/s per core".into()]);
    head.extend(["1st flight segments".into(), "1st flight RTTs".into(), "client cert RTTs".into()]);
    head.extend(model.bandwidths_gbps.iter().map(|g| format!("1st flight µs @ {g} Gbit/s")));
    let rows = records
        .iter()
        .map(|r| {
            let c = capacity(r, model);
            let mut row = vec![
                c.label.clone(),
                c.client_to_server_wire_bytes.to_string(),
                c.server_to_client_wire_bytes.to_string(),
                c.bottleneck.name().into(),
            ];
            row.extend(c.links.iter().map(|l| rate(l.sessions_per_s)));
            row.push(rate(c.server_sessions_per_core));
            row.push(rate(c.client_sessions_per_core));
            row.push(c.flights[1].segments.to_string());
            row.push(c.server_first_flight_round_trips.to_string());
            row.push(c.client_certificate_flight_round_trips.map_or("–".into(), |x| x.to_string()));
            row.extend(c.flights[1].serialisation_us.iter().map(|(_, t)| format!("{t:.2}")));
            row
        })
        .collect();
    (head, rows)
}

/// The quantile keys present in a set of records (e.g. `p15`, `p50`, `p99`), in order.
pub(crate) fn quantile_keys(records: &[ConfigRecord]) -> Vec<String> {
    let mut keys: Vec<(f64, String)> = Vec::new();
    for r in records {
        for k in r.total_cpu_ns.quantiles.keys() {
            if !keys.iter().any(|(_, x)| x == k) {
                let v = k.trim_start_matches('p').parse::<f64>().unwrap_or(0.0);
                keys.push((v, k.clone()));
            }
        }
    }
    keys.sort_by(|a, b| a.0.total_cmp(&b.0));
    keys.into_iter().map(|(_, k)| k).collect()
}
