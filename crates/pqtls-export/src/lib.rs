//! pqtls exporters: every output is a function of saved result records, so a report can be
//! regenerated without measuring again.
//!
//! - [`ResultSet`]: the records (and manifest, raw samples) of one results directory.
//! - [`Exporter`]: one output format over a result set; [`exporters`] lists them all and
//!   [`exporter`] finds one by name (`html`, `markdown`, `csv`, `summary-csv`, `load-csv`,
//!   `transfer-csv`, `json`).
//!   Adding a format is one file implementing the trait and one entry in [`exporters`].
//! - [`analysis`]: everything computed — the capacity and latency model ([`capacity`](mod@capacity)),
//!   rules of thumb ([`rules`]), baseline deltas, which step plays which role ([`roles`]),
//!   factor columns, and [`compare`] (two result sets, per configuration and step, with a
//!   verdict against noise). Exporters only format.
//! - one module per format: [`csv`], [`json`], [`markdown`], [`html`] (self-contained, with
//!   SVG charts drawn by `plotters`).
//! - [`tables`]: every table of a record kind, made once as header and formatted rows, and the
//!   number formats of their cells; the reports and the `pqtls` terminal draw them.
//!
//! The CLI calls:
//!
//! ```no_run
//! use pqtls_export::{compare, exporter, ReportOptions, ResultSet};
//! # fn main() -> pqtls_core::Result<()> {
//! let set = ResultSet::load("results/in-situ".as_ref())?;
//! let opts = ReportOptions::default();
//! let html = exporter("html").expect("an exporter of that name");
//! std::fs::write("report.html", html.render(&set, &opts)?).ok();
//! // What the CLI tells the user besides the file (e.g. record kinds left out).
//! let _notices: Vec<String> = html.notices(&set);
//! let before = ResultSet::load("results/before".as_ref())?;
//! let cmp = compare::compare(&before, &set);
//! print!("{}", cmp.to_terminal(false));
//! # Ok(()) }
//! ```

#![forbid(unsafe_code)]

pub mod analysis;
mod charts;
pub mod csv;
pub mod html;
pub mod json;
pub mod markdown;
pub mod replication;
pub mod tables;

pub use analysis::load::LoadView;
pub use analysis::resident::ResidentView;
pub use analysis::transfer::TransferView;
pub use analysis::{capacity, compare, load, roles, rules, InsituView};

use analysis::warnings::Warning;
use pqtls_core::factor::Kind;
use pqtls_core::record::Record;
use pqtls_core::settings::Settings;
use pqtls_core::Result;
use pqtls_store::{Manifest, SampleLine};
use std::path::{Path, PathBuf};

pub use capacity::{capacity, Capacity, Convention, NetworkModel};

/// The records of one results directory.
#[derive(Clone, Debug)]
pub struct ResultSet {
    /// Where they came from (for titles and sample lookups); `None` when built in memory.
    pub dir: Option<PathBuf>,
    pub manifest: Option<Manifest>,
    /// Records of any kind and either schema (schema-1 lines are upgraded when read).
    pub records: Vec<Record>,
    /// Things worth telling the reader (an incomplete last line ignored, …).
    pub notices: Vec<String>,
    /// Points the run could not measure, with the reason (`failures.ndjson`; those measured
    /// since, which have a record, are left out).
    pub failures: Vec<pqtls_store::Failure>,
    /// A set of several results directories ([`ResultSet::load_all`]): each directory's own
    /// records and failures (also in `records` and `failures`), so that a reader takes a part's
    /// from its directory, not by their shape.
    pub parts: Vec<Part>,
}

/// One results directory of a set of several ([`ResultSet::parts`]).
#[derive(Clone, Debug, Default)]
pub struct Part {
    /// The directory's name.
    pub name: String,
    pub records: Vec<Record>,
    pub failures: Vec<pqtls_store::Failure>,
}

impl ResultSet {
    /// Reads `records.ndjson` (and `manifest.json` when present) of a results directory.
    pub fn load(dir: &Path) -> Result<ResultSet> {
        let (records, mut notices) = pqtls_store::read_records(dir)?;
        let manifest =
            if dir.join(pqtls_store::store::MANIFEST).exists() { Some(pqtls_store::read_manifest(dir)?) } else { None };
        let (mut failures, failure_notices) = pqtls_store::read_failures(dir)?;
        notices.extend(failure_notices);
        failures.retain(|f| !records.iter().any(|r| r.id == f.id));
        Ok(ResultSet { dir: Some(dir.to_path_buf()), manifest, records, notices, failures, parts: Vec::new() })
    }

    /// The records of several results directories under `root` as one set (an assessment's
    /// parts, each a store of its own kind): notices and failures are every directory's; no
    /// manifest; titled by `root`.
    pub fn load_all(root: &Path, dirs: &[PathBuf]) -> Result<ResultSet> {
        let mut set = ResultSet::from_records(Vec::new());
        for dir in dirs {
            let one = ResultSet::load(dir)?;
            let name = dir.file_name().map_or_else(|| dir.display().to_string(), |n| n.to_string_lossy().into_owned());
            set.parts.push(Part { name, records: one.records.clone(), failures: one.failures.clone() });
            set.records.extend(one.records);
            set.notices.extend(one.notices.into_iter().map(|n| format!("{}: {n}", dir.display())));
            set.failures.extend(one.failures);
        }
        set.dir = Some(root.to_path_buf());
        Ok(set)
    }

    /// A set made of records in memory (tests, or records from elsewhere).
    pub fn from_records(records: Vec<Record>) -> ResultSet {
        ResultSet { dir: None, manifest: None, records, notices: Vec::new(), failures: Vec::new(), parts: Vec::new() }
    }

    /// A set made of parts in memory, as [`ResultSet::load_all`] reads them from directories.
    pub fn from_parts(parts: Vec<(&str, Vec<Record>)>) -> ResultSet {
        let mut set = ResultSet::from_records(parts.iter().flat_map(|(_, r)| r.iter().cloned()).collect());
        set.parts =
            parts.into_iter().map(|(n, records)| Part { name: n.to_string(), records, failures: Vec::new() }).collect();
        set
    }

    /// The records of the part `name` (none when the set has no such part).
    pub fn part(&self, name: &str) -> &[Record] {
        self.parts.iter().find(|p| p.name == name).map_or(&[], |p| p.records.as_slice())
    }

    /// The failures of the part `name` (none when the set has no such part).
    pub fn part_failures(&self, name: &str) -> &[pqtls_store::Failure] {
        self.parts.iter().find(|p| p.name == name).map_or(&[], |p| p.failures.as_slice())
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
    pub fn find(&self, id_or_label: &str) -> Option<&Record> {
        self.records
            .iter()
            .find(|r| r.id == id_or_label)
            .or_else(|| self.records.iter().find(|r| r.label == id_or_label))
    }

    /// The in-situ records, in order.
    pub fn insitu(&self) -> Vec<InsituView<'_>> {
        self.records.iter().filter_map(InsituView::of).collect()
    }

    /// The measurement settings: the manifest's, else the first record's.
    pub fn settings(&self) -> Option<&Settings> {
        self.manifest.as_ref().map(|m| &m.settings).or_else(|| self.records.iter().find_map(|r| r.settings.as_ref()))
    }

    /// The record kinds in the set, in [`Kind::ALL`]'s order.
    pub fn kinds(&self) -> Vec<Kind> {
        Kind::ALL.into_iter().filter(|k| self.records.iter().any(|r| r.kind() == *k)).collect()
    }

    /// A notice per record kind in the set that `exporter` does not draw (`drawn`).
    pub fn kinds_not_drawn(&self, exporter: &str, drawn: &[Kind]) -> Vec<String> {
        Kind::ALL
            .iter()
            .filter(|k| !drawn.contains(k))
            .filter_map(|k| {
                let n = self.records.iter().filter(|r| r.kind() == *k).count();
                (n > 0).then(|| {
                    format!(
                        "{n} {} record{} left out: the {exporter} export draws {} records only",
                        k.name(),
                        if n == 1 { "" } else { "s" },
                        drawn.iter().map(|k| k.name()).collect::<Vec<_>>().join(" and ")
                    )
                })
            })
            .collect()
    }

    /// What a report over this set should say before its numbers: the set's notices, the
    /// record kinds the exporter leaves out, and how its records were measured differently.
    /// The warnings of in-situ records measured under interference or less precisely than
    /// asked ([`pqtls_core::record::InsituResult::warnings`]), alike ones grouped into one line
    /// naming their configurations ([`analysis::warnings`]); at most 20 lines, then a count.
    pub fn noise_warnings(&self) -> Vec<String> {
        let warnings: Vec<Warning> = self
            .records
            .iter()
            .filter_map(|r| Some((r, r.insitu()?)))
            .flat_map(|(r, i)| {
                let subject = format!("{} ({})", r.label, r.factor("stack"));
                i.warnings().into_iter().map(move |text| Warning { subject: subject.clone(), text })
            })
            .collect();
        let groups = analysis::warnings::group(&warnings);
        let mut out: Vec<String> = groups.iter().take(20).map(|g| g.line()).collect();
        let shown: Vec<&str> = groups.iter().take(20).flat_map(|g| g.subjects()).collect();
        let mut more: Vec<&str> = groups.iter().skip(20).flat_map(|g| g.subjects()).collect();
        more.retain(|s| !shown.contains(s));
        more.sort_unstable();
        more.dedup();
        if !more.is_empty() {
            out.push(format!(
                "Warning: {} more records were measured under interference or less precisely than asked",
                more.len()
            ));
        }
        out
    }

    /// Everything a report says before its numbers, each once: the set's notices, the kinds
    /// the exporter leaves out, the records' warnings (grouped), and how the records were
    /// measured differently — except in an assessment, whose parts differ on purpose.
    pub(crate) fn report_notices(&self, exporter: &dyn Exporter, opts: &ReportOptions) -> Vec<String> {
        let mut out = self.notices.clone();
        out.extend(exporter.notices(self));
        out.extend(analysis::incomplete_message_sizes(&self.insitu()));
        out.extend(self.noise_warnings());
        out.extend(analysis::load::load_warnings(&analysis::load::loads(self)));
        out.extend(analysis::transfer::transfer_warnings(&analysis::transfer::transfers(self)));
        if !self.failures.is_empty() {
            out.push(format!(
                "{} point(s) of this run were not measured (see \"Points not measured\" for why)",
                self.failures.len()
            ));
        }
        if opts.assessment.is_none() {
            out.extend(
                analysis::set_measured_differently(&self.records)
                    .into_iter()
                    .map(|n| format!("records of this set were measured differently — {n}")),
            );
        }
        let mut once: Vec<String> = Vec::new();
        for n in out {
            if !once.contains(&n) {
                once.push(n);
            }
        }
        once
    }
}

/// The parts of a report over records of more than one kind, in the report's order: the HTML
/// section each starts at and what it answers (empty for a set of one kind, whose report is
/// that kind's part only).
pub(crate) fn contents(set: &ResultSet) -> Vec<(&'static str, String)> {
    let insitu = set.insitu();
    let (timed, counted) = analysis::by_unit(&insitu);
    let loads = analysis::load::loads(set);
    let transfers = analysis::transfer::transfers(set);
    let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    let mut parts = Vec::new();
    if !timed.is_empty() {
        parts.push((
            "rules",
            format!("In situ: CPU time and bytes per step ({})", plural(timed.len(), "configuration")),
        ));
    }
    if !counted.is_empty() {
        parts.push(("counts", format!("Instruction counts per step ({})", plural(counted.len(), "configuration"))));
    }
    if !loads.is_empty() {
        let question = analysis::load::question(&loads);
        let what = match question {
            analysis::load::Question::Rate => "connections per second",
            analysis::load::Question::Latency => "latency by layer at a fixed rate",
        };
        parts.push((question.parts()[0].id(), format!("Load: {what} ({})", plural(loads.len(), "record"))));
    }
    if !transfers.is_empty() {
        parts.push((
            "transfer-ttlb",
            format!("Transfer: TTFB/TTLB and round trips over emulated links ({})", plural(transfers.len(), "point")),
        ));
    }
    let resident = set.records.iter().filter(|r| r.kind() == Kind::Resident).count();
    if resident > 0 {
        parts.push(("resident", format!("Resident: memory per idle connection ({})", plural(resident, "record"))));
    }
    if parts.len() < 2 {
        parts.clear();
    }
    parts
}

/// One output format over a result set.
pub trait Exporter: Sync {
    /// The name the CLI selects it by (`html`, `markdown`, `csv`, `summary-csv`, `load-csv`,
    /// `json`).
    fn name(&self) -> &'static str;
    /// One line: what it writes.
    fn describe(&self) -> &'static str;
    /// The record kinds it draws; records of other kinds are left out with a notice.
    fn kinds(&self) -> &'static [Kind];
    /// The whole output.
    fn render(&self, set: &ResultSet, opts: &ReportOptions) -> Result<String>;
    /// What the caller should tell the user about this set and this export (e.g. record kinds
    /// it leaves out). Human reports also print them inside the output; CSV cannot.
    fn notices(&self, set: &ResultSet) -> Vec<String> {
        set.kinds_not_drawn(self.name(), self.kinds())
    }
}

static EXPORTERS: &[&dyn Exporter] = &[
    &html::Html,
    &markdown::Markdown,
    &csv::StepsCsv,
    &csv::SummaryCsv,
    &csv::LoadCsv,
    &csv::TransferCsv,
    &csv::ResidentCsv,
    &json::Json,
];

/// Every exporter.
pub fn exporters() -> &'static [&'static dyn Exporter] {
    EXPORTERS
}

/// The exporter of a name.
pub fn exporter(name: &str) -> Option<&'static dyn Exporter> {
    EXPORTERS.iter().copied().find(|e| e.name() == name)
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
    /// `pqtls assess`: the question the report answers first (from, to, the deployment).
    pub assessment: Option<analysis::assessment::Assessment>,
}

impl Default for ReportOptions {
    fn default() -> Self {
        ReportOptions { model: NetworkModel::default(), baseline: None, max_chart_configs: 150, assessment: None }
    }
}

pub use analysis::baseline_deltas;

/// The quantile keys present in a set of records (e.g. `p15`, `p50`, `p99`), in order.
pub(crate) fn quantile_keys(records: &[InsituView]) -> Vec<String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exporters_by_name_and_kinds_left_out_are_told() {
        for name in ["html", "markdown", "csv", "summary-csv", "json"] {
            assert_eq!(exporter(name).map(|e| e.name()), Some(name));
        }
        let set = csv::tests::sample_set();
        let n = set.kinds_not_drawn("future", &[Kind::Load]);
        assert_eq!(n, vec!["3 insitu records left out: the future export draws load records only".to_string()]);
        assert!(set.kinds_not_drawn("html", &[Kind::Insitu]).is_empty());
    }
}
