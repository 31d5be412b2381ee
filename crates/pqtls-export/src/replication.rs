//! The five reference studies' published figures as data (`replications/*.toml`, compiled in),
//! and the replication page: per table and cell, what the study printed, what pqtls measured
//! for the same configuration, the comparison that holds across machines (exact bytes, or the
//! ratio to the study's own baseline cell), a verdict within the band the table states, and
//! the cause of every difference (docs/replication.md).
//!
//! A study file holds facts only: each table's cells exactly as printed (strings, the study's
//! own number format), the configuration each row stands for (pqtls factor words over the
//! study's `defaults`), the caption and where it was read, and whether a cell was printed or
//! read from a chart. What pqtls measures for a row is looked up by scenario id in the records
//! of a run ([`Study::configs`] lists the configurations to run).

use crate::ResultSet;
use indexmap::IndexMap;
use pqtls_core::record::Record;
use pqtls_core::scenario::Scenario;
use pqtls_core::{Error, Result};
use serde::Deserialize;

/// The studies: (name, the file's text), in the order of the reference directory.
pub const STUDIES: &[(&str, &str)] = &[
    ("ibm-in-situ", include_str!("../../../replications/ibm-in-situ.toml")),
    ("pcsi-throughput", include_str!("../../../replications/pcsi-throughput.toml")),
    ("rustls-pq-handshake", include_str!("../../../replications/rustls-pq-handshake.toml")),
    ("layered-latency", include_str!("../../../replications/layered-latency.toml")),
    ("aws-mtls-ttlb", include_str!("../../../replications/aws-mtls-ttlb.toml")),
];

/// One study: where it comes from, how it measured, its tables.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Study {
    /// Its number in the reference directory (`000` … `004`).
    pub id: String,
    pub name: String,
    pub title: String,
    pub authors: String,
    pub published: String,
    /// The file in ../shared/reference/.
    pub source: String,
    pub hardware: String,
    pub software: String,
    pub method: String,
    /// The measurement its tables are replicated with: insitu, load or transfer.
    pub kind: String,
    /// The stack pqtls runs it on.
    pub stack: String,
    /// Factor words every configuration of the study takes unless it says otherwise.
    #[serde(default)]
    pub defaults: String,
    /// How its numbers are written: `en` (1,234.5) or `nl` (1.234,5).
    #[serde(default = "en")]
    pub number_format: String,
    /// Factor words a part of the replication (by measurement kind: `load = "…"`) adds to every
    /// configuration it runs: the study's settings of that measurement (e.g. its response size).
    #[serde(default)]
    pub part_defaults: IndexMap<String, String>,
    #[serde(rename = "table")]
    pub tables: Vec<Table>,
}

fn en() -> String {
    "en".into()
}

/// How a table's cells are compared with pqtls'.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Comparison {
    /// Bytes, and what follows from them by a stated convention: equal or not, by how much.
    Exact,
    /// Times and rates on other hardware: each cell over the table's baseline cell, the study's
    /// and pqtls', within the table's band.
    Ratio,
    /// Figures quoted in the text: each row says how its figure is formed ([`Of`]).
    Text,
    /// A comparison the study makes in graphs its source text does not hold (e.g. study 004's
    /// TLS 1.3 vs mTLS 1.3): no published cell (all empty), pqtls' figures at the same points,
    /// each row against the row it names in `vs` (bytes as a difference, times as a ratio with
    /// the interval from the medians'); shown, not judged.
    Measured,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Table {
    pub id: String,
    pub caption: String,
    /// Where in the source it was read (slide, section, table number).
    #[serde(rename = "where")]
    pub place: String,
    /// `printed`, `chart` when the cells were read off a chart, or `graphs` when the study's
    /// figures are graphs the source text does not hold (a [`Comparison::Measured`] table).
    pub read_from: String,
    pub unit: String,
    pub comparison: Comparison,
    /// The row (label) ratios are taken to ([`Comparison::Ratio`]).
    #[serde(default)]
    pub baseline: Option<String>,
    /// Largest relative difference of a ratio still called agreement (0.25: ±25 %).
    #[serde(default)]
    pub band: Option<f64>,
    /// Text rows whose figure is a gain or loss (between 0.5 and 1.5): largest absolute
    /// difference of the ratio still called agreement (0.02: ±0.02), where a relative band on a
    /// ratio near 1 says nothing; other rows keep `band`.
    #[serde(default)]
    pub band_abs: Option<f64>,
    /// The capacity convention of the table's derived columns (`ibm`: 10 bits per byte,
    /// sessions/s from the server→client bytes only).
    #[serde(default)]
    pub convention: Option<String>,
    pub columns: Vec<String>,
    /// What pqtls measures for each column ([`quantity`]).
    pub quantities: Vec<String>,
    pub rows: Vec<Row>,
}

#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Row {
    pub label: String,
    /// Factor words of the configuration (text rows: none; their `of` names theirs).
    #[serde(default)]
    pub config: Option<String>,
    /// Exactly as printed; "" where the source has no value.
    pub cells: Vec<String>,
    /// A quoted figure as a number (text rows).
    #[serde(default)]
    pub figure: Option<f64>,
    #[serde(default)]
    pub of: Option<Of>,
    /// Why this row differs, or why it cannot be compared.
    #[serde(default)]
    pub cause: Option<String>,
    /// The row (label) this one is set against ([`Comparison::Measured`]).
    #[serde(default)]
    pub vs: Option<String>,
}

/// How a quoted figure is formed from measurements of a quantity.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Of {
    pub q: String,
    /// ratio (a / b), excess ((a − base) / (b − base)), diff (a − b), max (over the study's
    /// rows), value (a), ratio_q (a's q over a's qb), model (the quantity's model value).
    pub op: String,
    #[serde(default)]
    pub a: Option<String>,
    #[serde(default)]
    pub b: Option<String>,
    #[serde(default)]
    pub base: Option<String>,
    #[serde(default)]
    pub qb: Option<String>,
}

/// Every study, parsed.
pub fn studies() -> Result<Vec<Study>> {
    STUDIES.iter().map(|(name, text)| Study::parse(text, name)).collect()
}

/// The study called `name` (or by its number), else an error naming the known ones.
pub fn study(name: &str) -> Result<Study> {
    let all = studies()?;
    let known: Vec<String> = all.iter().map(|s| format!("{} ({})", s.name, s.id)).collect();
    all.into_iter()
        .find(|s| s.name == name || s.id == name)
        .ok_or_else(|| Error::Invalid(format!("unknown study '{name}': the studies are {}", known.join(", "))))
}

/// A cell the study marks as not available (`N/A`, `N/A*`), as opposed to a number, a quote or
/// a gap in its table.
fn not_available(cell: &str) -> bool {
    cell.trim().to_ascii_uppercase().starts_with("N/A")
}

/// A published cell as a number (`None`: empty, N/A or a quote that is no number).
pub fn number(cell: &str, format: &str) -> Option<f64> {
    let t = cell.trim().replace('\'', "");
    let t = if format == "nl" { t.replace('.', "").replace(',', ".") } else { t.replace(',', "") };
    t.parse::<f64>().ok()
}

/// The quantities a column may name, as prefixes (`client_cpu@15`, `message:ClientHello`, …).
const QUANTITIES: &[&str] = &[
    "client_cpu@",
    "server_cpu@",
    "total_cpu@",
    "bytes_c2s",
    "bytes_s2c",
    "certs_sent",
    "ibm_msess@",
    "ibm_transport_us@",
    "message:",
    "conn_per_s@",
    "ttlb_ms@",
    "ttfb_ms@",
    "initcwnd_bytes@",
    "text",
];

const OPS: &[&str] = &["ratio", "excess", "diff", "max", "value", "ratio_q", "model"];

impl Study {
    /// Parses and checks a study file: every row has a cell per column, every column a known
    /// quantity, every configuration is a valid scenario, every ratio table has its baseline.
    pub fn parse(text: &str, name: &str) -> Result<Study> {
        let study: Study =
            toml::from_str(text).map_err(|e| Error::Invalid(format!("replications/{name}.toml: {e}")))?;
        let bad = |what: String| Error::Invalid(format!("replications/{name}.toml: {what}"));
        if study.name != name {
            return Err(bad(format!("its name is '{}', its file says '{name}'", study.name)));
        }
        for t in &study.tables {
            if t.columns.len() != t.quantities.len() {
                return Err(bad(format!(
                    "table {}: {} columns but {} quantities",
                    t.id,
                    t.columns.len(),
                    t.quantities.len()
                )));
            }
            for q in &t.quantities {
                if !QUANTITIES.iter().any(|p| q.starts_with(p)) {
                    return Err(bad(format!("table {}: unknown quantity '{q}'", t.id)));
                }
            }
            if t.comparison == Comparison::Ratio
                && t.baseline.as_ref().is_none_or(|b| !t.rows.iter().any(|r| &r.label == b))
            {
                return Err(bad(format!("table {}: a ratio table needs a baseline row", t.id)));
            }
            for r in &t.rows {
                if r.cells.len() != t.columns.len() {
                    return Err(bad(format!(
                        "table {} row '{}': {} cells for {} columns",
                        t.id,
                        r.label,
                        r.cells.len(),
                        t.columns.len()
                    )));
                }
                if t.comparison != Comparison::Text && r.config.is_none() {
                    return Err(bad(format!("table {} row '{}': no configuration", t.id, r.label)));
                }
                if t.comparison == Comparison::Measured && r.cells.iter().any(|c| !c.is_empty()) {
                    return Err(bad(format!(
                        "table {} row '{}': a measured table has no published cells (leave them \"\")",
                        t.id, r.label
                    )));
                }
                if let Some(v) = &r.vs {
                    if t.comparison != Comparison::Measured || !t.rows.iter().any(|x| &x.label == v) {
                        return Err(bad(format!(
                            "table {} row '{}': vs '{v}' names no row of a measured table",
                            t.id, r.label
                        )));
                    }
                }
                if let Some(of) = &r.of {
                    if !OPS.contains(&of.op.as_str()) {
                        return Err(bad(format!(
                            "row '{}': unknown op '{}' (one of {})",
                            r.label,
                            of.op,
                            OPS.join(", ")
                        )));
                    }
                    if r.figure.is_none() {
                        return Err(bad(format!("row '{}': an `of` without its figure", r.label)));
                    }
                }
            }
        }
        let mut seen: Vec<&str> = Vec::new();
        for (c, _, _) in study.named() {
            if !seen.contains(&c) {
                seen.push(c);
                study.scenario(c).map_err(|e| bad(format!("configuration '{c}': {e}")))?;
            }
        }
        for kind in study.part_defaults.keys() {
            if !["insitu", "load", "transfer"].contains(&kind.as_str()) {
                return Err(bad(format!("part_defaults: unknown part '{kind}' (insitu, load or transfer)")));
            }
        }
        // Every cell's point: its configuration with its part's defaults and its quantity's factors.
        for (c, q, _) in study.named() {
            study.point(c, q).map_err(|e| bad(format!("configuration '{c}' for {q}: {e}")))?;
        }
        Ok(study)
    }

    /// The scenario a configuration stands for: its words over the study's defaults and stack.
    pub fn scenario(&self, config: &str) -> Result<Scenario> {
        self.layered(&[&self.defaults, config])
    }

    /// The scenario of `factor=value` words in layers over the study's stack, a later layer's
    /// word winning over an earlier one's.
    fn layered(&self, layers: &[&str]) -> Result<Scenario> {
        let mut words: IndexMap<&str, &str> = IndexMap::new();
        words.insert("stack", &self.stack);
        for w in layers.iter().flat_map(|l| l.split_whitespace()) {
            let (n, v) = w.split_once('=').ok_or_else(|| Error::Invalid(format!("'{w}' is not factor=value")))?;
            words.insert(n, v);
        }
        Scenario::new(words)
    }

    /// The scenario pqtls runs for a configuration's quantity `q`: the configuration, then the
    /// defaults of the part that measures `q` ([`Study::part_defaults`]), then the factors the
    /// quantity itself names ([`quantity_factors`]: `conn_per_s@8` is a load at 8 threads).
    pub fn point(&self, config: &str, q: &str) -> Result<Scenario> {
        let part = measured_by(q).and_then(|kind| self.part_defaults.get(kind)).map_or("", String::as_str);
        // The configuration's own words win over its part's defaults.
        let base = self.layered(&[&self.defaults, part, config])?;
        let factors = quantity_factors(q);
        if factors.is_empty() {
            return Ok(base);
        }
        base.with(factors.iter().map(|(n, v)| (*n, v.as_str())))
    }

    /// Every configuration the study names with the quantity it stands for, in order: each
    /// table cell of a row with a configuration (with the cell as published), then each
    /// configuration a quoted figure is computed from (no cell of its own).
    fn named(&self) -> impl Iterator<Item = (&str, &str, Option<&str>)> + '_ {
        self.tables.iter().flat_map(|t| {
            t.rows.iter().flat_map(move |r| {
                let cells = r.config.iter().flat_map(move |c| {
                    t.quantities
                        .iter()
                        .zip(&r.cells)
                        .map(move |(q, cell)| (c.as_str(), q.as_str(), Some(cell.as_str())))
                });
                let of = r.of.iter().flat_map(|o| {
                    [&o.a, &o.b, &o.base].into_iter().flatten().map(move |c| (c.as_str(), o.q.as_str(), None))
                });
                cells.chain(of)
            })
        })
    }

    /// The configurations pqtls runs for this study with the measurement of `kind` (distinct
    /// scenarios, in order): those whose quantities that measurement gives, each as
    /// [`Study::point`] makes it (a load's `conn_per_s@1|4|8`: one scenario per thread count).
    pub fn configs(&self, kind: &str) -> Vec<Scenario> {
        let mut out: Vec<Scenario> = Vec::new();
        for (c, q, cell) in self.named() {
            // A cell the study marks as not available (`N/A*`): nothing to compare with, so no
            // point is run for it (a quote that names it still does).
            if measured_by(q) != Some(kind) || cell.is_some_and(not_available) {
                continue;
            }
            if let Ok(s) = self.point(c, q) {
                if !out.iter().any(|x| x.id() == s.id()) {
                    out.push(s);
                }
            }
        }
        out
    }

    /// Cells of every table (published cells, text rows included): what the coverage test counts.
    pub fn cells(&self) -> usize {
        self.tables.iter().map(|t| t.rows.len() * t.columns.len()).sum()
    }

    /// The study's own number for a configuration's quantity, from any of its tables.
    fn published(&self, config: &str, q: &str) -> Option<f64> {
        let id = self.scenario(config).ok()?.id();
        for t in &self.tables {
            let Some(col) = t.quantities.iter().position(|x| x == q) else { continue };
            for r in &t.rows {
                let same = r.config.as_deref().and_then(|c| self.scenario(c).ok()).is_some_and(|s| s.id() == id);
                if same {
                    if let Some(v) = number(&r.cells[col], &self.number_format) {
                        return Some(v);
                    }
                }
            }
        }
        None
    }

    /// The largest published value of a quantity over the study's rows.
    fn published_max(&self, q: &str) -> Option<f64> {
        let mut best: Option<f64> = None;
        for t in &self.tables {
            let Some(col) = t.quantities.iter().position(|x| x == q) else { continue };
            for r in &t.rows {
                if let Some(v) = number(&r.cells[col], &self.number_format) {
                    best = Some(best.map_or(v, |b: f64| b.max(v)));
                }
            }
        }
        best
    }
}

/// Which measurement gives a quantity (`None`: a model or the text itself).
pub fn measured_by(q: &str) -> Option<&'static str> {
    if q.starts_with("conn_per_s@") {
        Some("load")
    } else if q.starts_with("ttlb_ms@") || q.starts_with("ttfb_ms@") {
        Some("transfer")
    } else if q == "text" || q.starts_with("initcwnd_bytes@") {
        None
    } else {
        Some("insitu")
    }
}

/// The factors a quantity names beyond its row's configuration: `conn_per_s@N` is measured
/// with N load threads (the study's client threads, each one connection at a time);
/// `ttlb_ms@SIZE` and `ttfb_ms@SIZE` over transfers of a SIZE response (`50KB`: 50,000 B).
pub fn quantity_factors(q: &str) -> Vec<(&'static str, String)> {
    if let Some(threads) = q.strip_prefix("conn_per_s@") {
        return vec![("threads", threads.to_string())];
    }
    match transfer_size(q) {
        Some(size) => vec![("response_size", size.to_string())],
        None => Vec::new(),
    }
}

/// The response size a transfer quantity names (`ttlb_ms@150KB`: `150KB`).
fn transfer_size(q: &str) -> Option<&str> {
    q.strip_prefix("ttlb_ms@").or_else(|| q.strip_prefix("ttfb_ms@"))
}

/// TCP payload per segment (1500 MTU − 20 IPv4 − 20 TCP − 12 timestamps): the initial window's
/// bytes are this many per segment.
const MSS_BYTES: f64 = 1448.0;

/// pqtls' value of quantity `q` in a record: CPU in µs, bytes in B, the IBM convention's
/// session rate in M/s and transport latency in µs; from a load record, connections per second
/// (completed requests per measured second: one TLS connection each, keep-alive off).
///
/// From a transfer record, the median time to the last byte (`ttlb_ms@…`: connect → the
/// response's last byte) or to the first (`ttfb_ms@…`), in ms.
pub fn quantity(record: &Record, q: &str) -> Option<f64> {
    if q.starts_with("conn_per_s@") {
        let load = record.load()?;
        return (record.factor("keep_alive") != "true" && load.requests > 0).then_some(load.achieved_rate_per_s);
    }
    if transfer_size(q).is_some() {
        let t = record.transfer()?;
        let p = if q.starts_with("ttlb_ms@") { &t.ttlb } else { &t.ttfb };
        return (p.count > 0).then(|| p.p50_ns as f64 / 1e6);
    }
    let r = record.insitu()?;
    let at = q.split_once('@').map(|(_, v)| v);
    let quantile = |summary: &pqtls_core::stats::Summary| -> Option<f64> {
        summary.quantiles.get(&format!("p{}", at?)).map(|ns| ns / 1000.0)
    };
    let gbps = || at.and_then(|g| g.parse::<f64>().ok());
    let b = &r.bytes;
    match q {
        _ if q.starts_with("client_cpu@") => quantile(&r.client.total_cpu_ns),
        _ if q.starts_with("server_cpu@") => quantile(&r.server.total_cpu_ns),
        _ if q.starts_with("total_cpu@") => quantile(&r.total_cpu_ns),
        "bytes_c2s" => Some(b.client_to_server as f64),
        "bytes_s2c" => Some(b.server_to_client as f64),
        "certs_sent" => {
            let n = record.factor("chain").split(':').count() as f64;
            Some(if record.factor("send_root") == "true" { n } else { n - 1.0 })
        }
        _ if q.starts_with("ibm_msess@") => Some(ibm_sessions_per_s(b.server_to_client, gbps()?) / 1e6),
        _ if q.starts_with("ibm_transport_us@") => {
            Some(ibm_transport_s(b.client_to_server + b.server_to_client, gbps()?) * 1e6)
        }
        _ if q.starts_with("message:") => b.messages.get(&q["message:".len()..]).map(|&v| v as f64),
        _ => None,
    }
}

/// The 95 % interval of pqtls' median of a CPU quantity (`…_cpu@50`), in µs.
pub fn interval(record: &Record, q: &str) -> Option<(f64, f64)> {
    let r = record.insitu()?;
    let summary = match q {
        "client_cpu@50" => &r.client.total_cpu_ns,
        "server_cpu@50" => &r.server.total_cpu_ns,
        "total_cpu@50" => &r.total_cpu_ns,
        _ => return None,
    };
    Some((summary.median_ci[0] / 1000.0, summary.median_ci[1] / 1000.0))
}

/// The lines the page gives the configurations its time cap stopped (`loops.stopped_by =
/// "time cap"`): how many handshakes each reached and the interval of its total's median —
/// empty when none was.
pub fn time_capped(set: &ResultSet) -> Vec<String> {
    let capped: Vec<String> =
        set.records.iter().filter_map(|r| capped_reach(r).map(|reach| format!("{} — {reach}", r.label))).collect();
    if capped.is_empty() {
        return Vec::new();
    }
    let cap = set.records.iter().find_map(|r| r.settings.as_ref()?.max_time_s());
    vec![format!(
        "**Stopped by their time cap{}** ({} of {} configurations; their rule — every step's and the total's median within ±2 % — unmet, \
         their figures carry the wider intervals): {}",
        cap.map_or(String::new(), |c| format!(" of {}", seconds(c))),
        capped.len(),
        set.records.len(),
        capped.join("; ")
    )]
}

/// What a configuration stopped by its time cap reached: handshakes, the total's median and
/// its 95 % interval (`None`: not stopped by its time cap).
fn capped_reach(record: &Record) -> Option<String> {
    let x = record.insitu().filter(|x| x.loops.stopped_by == "time cap")?;
    let t = &x.total_cpu_ns;
    let half = t.median_half_width() / t.median.max(f64::MIN_POSITIVE);
    Some(format!(
        "{} handshakes measured ({} warm-up), total CPU median {} µs, 95 % interval {}–{} µs (±{:.1} %)",
        x.loops.measured,
        x.loops.warmup,
        fmt(t.median / 1000.0),
        fmt(t.median_ci[0] / 1000.0),
        fmt(t.median_ci[1] / 1000.0),
        half * 100.0
    ))
}

/// `4.5 s`, `12 s`.
fn seconds(s: f64) -> String {
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s:.1} s")
    }
}

/// The IBM study's capacity convention: sessions per second a link of `gbps` carries when every
/// byte costs 10 bits and only the server→client bytes count (study 000, its data-volume
/// table: 1 Gbps / (928 B × 10 bit) = 0.11 M). pqtls' own model (`capacity`) counts 8 bits per
/// byte plus the TCP/IP and Ethernet framing of each segment, in both directions.
pub fn ibm_sessions_per_s(server_to_client_bytes: u64, gbps: f64) -> f64 {
    ibm().sessions_per_s(server_to_client_bytes, gbps)
}

/// The IBM convention's transport latency (seconds, no flight time): both directions' bytes at
/// 10 bits each (study 000: (256 + 928) B × 10 bit / 1 Gbps = 11.84 µs).
pub fn ibm_transport_s(bytes: u64, gbps: f64) -> f64 {
    ibm().serialisation_us(bytes, gbps) / 1e6
}

/// The capacity model under the IBM convention (`pqtls report --capacity-convention ibm`).
fn ibm() -> crate::NetworkModel {
    crate::NetworkModel { convention: crate::Convention::Ibm, ..crate::NetworkModel::default() }
}

/// Rounds as the study printed a cell (its number of decimals).
fn as_printed(v: f64, cell: &str) -> String {
    let decimals = cell.trim().rsplit_once(['.', ',']).map_or(0, |(_, d)| d.len());
    format!("{v:.decimals$}")
}

/// One compared cell of the page.
#[derive(Clone, Debug)]
pub struct Line {
    pub row: String,
    pub column: String,
    pub published: String,
    pub pqtls: String,
    pub comparison: String,
    pub verdict: Verdict,
    pub cause: String,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Equal bytes, or a ratio within the band.
    Agrees,
    /// Differs: the line says why.
    Differs,
    /// Shown, not judged (an absolute time on other hardware, a level, a setting).
    Shown,
    /// Not measured here: the line says why.
    NotMeasured,
}

impl Verdict {
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Agrees => "agrees",
            Verdict::Differs => "differs",
            Verdict::Shown => "shown, not judged",
            Verdict::NotMeasured => "not measured",
        }
    }
}

/// A table of the page.
#[derive(Clone, Debug)]
pub struct PageTable {
    pub id: String,
    pub caption: String,
    pub source: String,
    pub rule: String,
    pub lines: Vec<Line>,
}

/// Why pqtls has no record for a configuration of a run that did not measure it.
pub struct Missing<'a> {
    /// Per measurement kind not run by this replication: why (e.g. the load part).
    pub kinds_not_run: &'a [(&'a str, String)],
}

/// What differs between the study's byte counts and pqtls' on every row (study 000): read
/// from the study's method and pqtls' byte accounting (docs/replication.md).
const IBM_BYTES_CAUSE_C2S: &str = "pqtls counts record-layer bytes (5-byte headers, AEAD tags, the \
    6-byte ChangeCipherSpec) and its client sends SNI 'localhost' (18 B); the study does not say how \
    it counted, and its c→s differs by 2 B between chains of one group (a client message cannot depend \
    on the server's chain in a server-authenticated handshake), so part of the constant is its \
    client's own ClientHello (docs/replication.md §bytes)";
const IBM_BYTES_CAUSE_S2C: &str = "the certificates' contents (names, extensions) are not the study's: \
    one certificate sent, its server→client is 68 B more than pqtls' on every row; two sent, 14 B — so \
    the difference is per certificate (its leaf +68 B, its root −54 B), not per handshake \
    (docs/replication.md §bytes)";

fn fmt(v: f64) -> String {
    let a = v.abs();
    if v.fract() == 0.0 && a < 1e15 {
        format!("{v:.0}")
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else if a >= 1.0 {
        format!("{v:.2}")
    } else {
        format!("{v:.3}")
    }
}

/// The study's figures next to pqtls' records: one [`PageTable`] per table, every row and cell.
pub fn compare(study: &Study, set: &ResultSet, missing: &Missing) -> Vec<PageTable> {
    let records = Records::new(study, set);
    let record = |config: &str, q: &str| records.get(config, q);
    let why_missing = |q: &str| -> String {
        match measured_by(q) {
            Some(kind) => missing.kinds_not_run.iter().find(|(k, _)| *k == kind).map_or_else(
                || "no record of this configuration in the run (interrupted? run again: it resumes)".to_string(),
                |(_, why)| why.clone(),
            ),
            None => "a model or a level, not a measurement".into(),
        }
    };
    let mut out = Vec::new();
    for t in &study.tables {
        let mut lines = Vec::new();
        let band = t.band.unwrap_or(0.30);
        let rule = match t.comparison {
            Comparison::Exact => format!(
                "exact: pqtls' bytes against the study's{}; a difference carries its cause",
                if t.convention.as_deref() == Some("ibm") {
                    "; the session-rate and transport-latency columns apply the study's own convention (10 bits per byte; sessions/s from the server→client bytes only, latency from both directions) to pqtls' measured bytes, so they differ only where the bytes do"
                } else {
                    ""
                }
            ),
            Comparison::Ratio => format!(
                "ratio to the study's baseline row '{}' (each side's own), agreement within ±{:.0} % of the study's ratio",
                t.baseline.clone().unwrap_or_default(),
                band * 100.0
            ),
            Comparison::Measured if t.quantities.iter().any(|q| transfer_size(q).is_some()) => "the study shows this comparison in graphs its source text does not hold: pqtls' medians at the same points, each row against the one it names (the difference in ms and the ratio; each cell also gives its number of transfers); shown, not judged".into(),
            Comparison::Measured => "the study shows this comparison in graphs its source text does not hold: pqtls' figures at the same points, each row against the one it names (bytes: the difference; times: the ratio, with the interval from the medians' 95 % intervals); shown, not judged".into(),
            Comparison::Text => format!(
                "each quoted figure as the same ratio (or difference) of pqtls' measurements (with the 95 % interval from the medians' where it has one), and of the study's own tables where they hold it; agreement within {} of the quote; differences in µs on other hardware are shown, not judged",
                match t.band_abs {
                    Some(abs) => format!("±{abs} for gains and losses (figures 0.5–1.5), ±{:.0} % for the others", band * 100.0),
                    None => format!("±{:.0} %", band * 100.0),
                }
            ),
        };
        let base_row = t.baseline.as_ref().and_then(|b| t.rows.iter().find(|r| &r.label == b));
        for r in &t.rows {
            if t.comparison == Comparison::Text {
                lines.push(text_line(study, r, &records, &why_missing, (band, t.band_abs)));
                continue;
            }
            if t.comparison == Comparison::Measured {
                let vs = r.vs.as_ref().and_then(|v| t.rows.iter().find(|x| &x.label == v));
                lines.extend(measured_lines(t, r, vs, &records, &why_missing));
                continue;
            }
            let config = r.config.as_deref().unwrap_or_default();
            for (i, col) in t.columns.iter().enumerate() {
                let cell = &r.cells[i];
                let q = &t.quantities[i];
                let rec = record(config, q);
                let mut line = Line {
                    row: r.label.clone(),
                    column: col.clone(),
                    published: if cell.is_empty() { "(no value in the source text)".into() } else { cell.clone() },
                    pqtls: String::new(),
                    comparison: String::new(),
                    verdict: Verdict::NotMeasured,
                    cause: String::new(),
                };
                let mine = rec.and_then(|x| quantity(x, q));
                let Some(mine) = mine else {
                    line.pqtls = "—".into();
                    line.cause =
                        r.cause.clone().or_else(|| records.failure(config, q)).unwrap_or_else(|| why_missing(q));
                    if not_available(cell) && r.cause.is_none() {
                        line.cause = format!(
                            "the study reports no figure here ({cell}: see its notes); with nothing to compare, \
                             pqtls runs no point for this cell"
                        );
                    }
                    lines.push(line);
                    continue;
                };
                let published = number(cell, &study.number_format);
                match t.comparison {
                    Comparison::Exact => {
                        let shown = if q.starts_with("ibm_") { as_printed(mine, cell) } else { fmt(mine) };
                        line.pqtls = shown.clone();
                        match published {
                            Some(p) if (number(&shown, "en").unwrap_or(mine) - p).abs() < 1e-9 => {
                                line.comparison = "equal".into();
                                line.verdict = Verdict::Agrees;
                            }
                            Some(p) => {
                                let d = number(&shown, "en").unwrap_or(mine) - p;
                                let unit = if q.starts_with("bytes_") || q.starts_with("message:") { " B" } else { "" };
                                line.comparison = format!("{}{}{unit}", if d > 0.0 { "+" } else { "" }, fmt(d));
                                line.verdict = Verdict::Differs;
                                line.cause = r.cause.clone().unwrap_or_else(|| exact_cause(study, t, r, q));
                            }
                            None => {
                                line.comparison = "the study has no number here".into();
                                line.verdict = Verdict::Shown;
                            }
                        }
                    }
                    Comparison::Ratio | Comparison::Text | Comparison::Measured => {
                        let unit_scale = if t.unit == "ms" { 1000.0 } else { 1.0 };
                        line.pqtls = fmt(mine / unit_scale);
                        let base = base_row.and_then(|b| {
                            let theirs = number(&b.cells[i], &study.number_format)?;
                            let ours = record(b.config.as_deref()?, q).and_then(|x| quantity(x, q))?;
                            Some((theirs, ours))
                        });
                        let is_base = t.baseline.as_deref() == Some(r.label.as_str());
                        match (published, base) {
                            _ if is_base => {
                                line.comparison = "the baseline row (×1 on both sides)".into();
                                line.verdict = Verdict::Shown;
                            }
                            // The study prints no number here (N/A, a gap in its table):
                            // pqtls' figure is shown, nothing to judge it by.
                            (None, _) => {
                                line.comparison = "the study has no number here".into();
                                line.verdict = Verdict::Shown;
                                line.cause = r.cause.clone().unwrap_or_default();
                            }
                            (Some(p), Some((pb, ob))) if pb > 0.0 && ob > 0.0 => {
                                let theirs = p / pb;
                                let ours = mine / ob;
                                line.comparison = format!("×{} vs ×{}", fmt(theirs), fmt(ours));
                                let base_rec = base_row.and_then(|b| record(b.config.as_deref()?, q));
                                let stacks = stacks_differ(rec, base_rec);
                                if let Some(s) = &stacks {
                                    line.comparison.push_str(&format!(" ({s})"));
                                }
                                if (ours / theirs - 1.0).abs() <= band {
                                    line.verdict = Verdict::Agrees;
                                } else {
                                    line.verdict = Verdict::Differs;
                                    line.cause = r.cause.clone().unwrap_or_else(|| {
                                        let mut why = ratio_cause(study, q);
                                        if let Some(tails) =
                                            base_row.and_then(|b| baseline_tails(study, t, b, &records, q))
                                        {
                                            why.push_str(&tails);
                                        }
                                        if let Some(s) = &stacks {
                                            why.push_str(&format!("; {s}: {STACK_GAP}"));
                                        }
                                        why
                                    });
                                }
                            }
                            _ => {
                                line.comparison = "no baseline to form the ratio".into();
                                line.verdict = Verdict::NotMeasured;
                                line.cause = "the baseline row has no number, or was not measured".into();
                            }
                        }
                    }
                }
                // A load point's errors (timeouts, resets): its rate counts completed requests only.
                if let Some(errors) = rec.and_then(|r| r.load()).map(|l| &l.errors).filter(|e| !e.is_empty()) {
                    let each: Vec<String> = errors.iter().map(|e| format!("{} {}", e.count, e.kind)).collect();
                    line.comparison.push_str(&format!(" · errors: {} (not counted in the rate)", each.join(", ")));
                }
                // A time in a configuration its time cap stopped: the handshakes and interval reached.
                if q.contains("_cpu@") {
                    if let Some(x) = rec.and_then(|r| r.insitu()).filter(|x| x.loops.stopped_by == "time cap") {
                        let t = &x.total_cpu_ns;
                        line.comparison.push_str(&format!(
                            " · stopped by its time cap after {} handshakes (total's median ±{:.1} %)",
                            x.loops.measured,
                            t.median_half_width() / t.median.max(f64::MIN_POSITIVE) * 100.0
                        ));
                    }
                }
                lines.push(line);
            }
        }
        out.push(PageTable {
            id: t.id.clone(),
            caption: t.caption.clone(),
            source: format!(
                "{}, {} ({}; unit {})",
                study.source,
                t.place,
                match t.read_from.as_str() {
                    "printed" => "cells as printed",
                    "graphs" => "the study's figures are graphs its source text does not hold: pqtls' only",
                    _ => "cells read from a chart",
                },
                t.unit
            ),
            rule,
            lines,
        });
    }
    out
}

/// The lines of a row of a [`Comparison::Measured`] table: pqtls' figure per column, set
/// against the `vs` row's.
fn measured_lines(
    t: &Table,
    r: &Row,
    vs: Option<&Row>,
    records: &Records,
    why_missing: &dyn Fn(&str) -> String,
) -> Vec<Line> {
    let mut out = Vec::new();
    for (col, q) in t.columns.iter().zip(&t.quantities) {
        let rec = r.config.as_deref().and_then(|c| records.get(c, q));
        let other = vs.and_then(|v| v.config.as_deref()).and_then(|c| records.get(c, q));
        let mut line = Line {
            row: r.label.clone(),
            column: col.clone(),
            published: "(a graph, not in the source text)".into(),
            pqtls: "—".into(),
            comparison: String::new(),
            verdict: Verdict::Shown,
            cause: r.cause.clone().unwrap_or_default(),
        };
        let Some(mine) = rec.and_then(|x| quantity(x, q)) else {
            line.verdict = Verdict::NotMeasured;
            line.cause = r.config.as_deref().and_then(|c| records.failure(c, q)).unwrap_or_else(|| why_missing(q));
            out.push(line);
            continue;
        };
        let cpu = q.contains("_cpu@");
        let ms = transfer_size(q).is_some();
        line.pqtls = fmt(mine);
        line.comparison = match (vs, other.and_then(|x| quantity(x, q))) {
            (Some(v), Some(theirs)) if cpu && theirs > 0.0 => {
                let range = rec.and_then(|a| interval(a, q)).zip(other.and_then(|b| interval(b, q)));
                format!(
                    "×{} over '{}'{}",
                    fmt(mine / theirs),
                    v.label,
                    range.map_or(String::new(), |(a, b)| format!(" ({}–{})", fmt(a.0 / b.1), fmt(a.1 / b.0)))
                )
            }
            // Times over a network: the difference (what a connection waits longer) and the ratio.
            (Some(v), Some(theirs)) if ms && theirs > 0.0 => {
                let d = mine - theirs;
                format!("{}{} ms (×{}) over '{}'", if d >= 0.0 { "+" } else { "" }, fmt(d), fmt(mine / theirs), v.label)
            }
            (Some(v), Some(theirs)) => {
                let d = mine - theirs;
                format!("{}{} B over '{}'", if d >= 0.0 { "+" } else { "" }, fmt(d), v.label)
            }
            (Some(v), None) => format!("'{}' not measured", v.label),
            (None, _) => "the reference of its comparisons".into(),
        };
        // A transfer point's count, and its errors (not in its percentiles).
        if let Some(t) = rec.and_then(|x| x.transfer()).filter(|_| ms) {
            let p = if q.starts_with("ttlb_ms@") { &t.ttlb } else { &t.ttfb };
            line.comparison.push_str(&format!(" · {} transfers", p.count));
            if !t.load.errors.is_empty() {
                let each: Vec<String> = t.load.errors.iter().map(|e| format!("{} {}", e.count, e.kind)).collect();
                line.comparison.push_str(&format!(" · errors: {} (not in the median)", each.join(", ")));
            }
        }
        out.push(line);
    }
    out
}

fn exact_cause(study: &Study, t: &Table, r: &Row, q: &str) -> String {
    let classical_leaf = |r: &Row| {
        let chain = r.config.as_deref().and_then(|c| c.split_whitespace().find_map(|w| w.strip_prefix("chain=")));
        chain.and_then(|c| c.split(':').next()).is_some_and(|leaf| ["ed25519", "rsa4096", "p256"].contains(&leaf))
    };
    match (study.name.as_str(), q) {
        ("ibm-in-situ", "bytes_c2s") => IBM_BYTES_CAUSE_C2S.into(),
        ("ibm-in-situ", "bytes_s2c") => IBM_BYTES_CAUSE_S2C.into(),
        ("ibm-in-situ", q) if q.starts_with("ibm_") => {
            "follows from the byte difference (same convention applied to pqtls' bytes)".into()
        }
        ("pcsi-throughput", "message:ClientHello") => "the study's client (OpenSSL 3.2.3 with the OQS provider 0.8.1 behind cURL/JMeter) offers longer lists: its ClientHello is 239 B more than pqtls' rustls client's and 208 B more than pqtls' OpenSSL client's (FFDHE-3072: 778 B against 570; ML-KEM-512: 1,194 against 986) where it exceeds 512 B; and cURL sets SSL_OP_ALL, which holds SSL_OP_TLSEXT_PADDING, so OpenSSL pads a hello of 256–511 B to 512 B (RFC 7685's F5 workaround) and leaves others alone: the study's x25519 hellos (~430 B unpadded) were sent as 512 B. pqtls pads the same way (client_hello_padding = 512, OpenSSL only: docs/stacks.md), but on none of these rows would it pad: pqtls' x25519 hello is 187 B (rustls) or 226 B (OpenSSL, measured with the padding on: unchanged), below the 256 B from which RFC 7685 pads, and the others exceed 512 B — so every row runs unpadded, and what remains is the study's longer lists".into(),
        ("pcsi-throughput", "message:Certificate") if classical_leaf(r) => "chain construction: the study's certificates are not printed; pqtls sends one certificate, its leaf (`CN=localhost`, SAN, EKU) signed by the root".into(),
        ("pcsi-throughput", "message:Certificate") => "chain construction: the study's certificates carry the PQ public key under a classical signature ('no PQC signature itself'), as pqtls' leaf under an Ed25519 root does here; the study's carry 3,141–3,144 B more on its ML-DSA, Falcon and SLH-DSA rows (3,159 B on the composite's, a later draft's encoding here) — a certificate or extensions its text does not describe — so the differences between its rows — the public keys' — agree within 3 B (ML-DSA-44 over SLH-DSA: study +1,287, pqtls +1,284; Falcon-512: +868, +865; the composite over ML-DSA-44: +46, +31, a later draft's encoding)".into(),
        ("pcsi-throughput", "message:CertificateVerify") => "Falcon-512 signatures vary in length (≤ 752 B); the composite ML-DSA-44+Ed25519 encoding is a later draft in pqtls (draft-ietf-lamps-pq-composite-sigs-13) than the OQS provider 0.8.1's".into(),
        ("pcsi-throughput", "message:ServerHello") => "the ServerHello carries the group's server share; pqtls' is the catalogue's".into(),
        _ => format!("table {}: not the study's build (see the method above)", t.id),
    }
}

fn ratio_cause(study: &Study, q: &str) -> String {
    if let Some(threads) = q.strip_prefix("conn_per_s@") {
        return format!(
            "through pqtls serve ({}, one server process) on this 2-core VM's loopback, not the study's HAProxy \
             (OpenSSL 3.2.3 with the OQS provider); {threads} client thread{} and the server share 2 cores; the \
             study's rates (tens of connections per second a thread) are set by its client and network, where a \
             handshake's CPU barely shows, while on loopback pqtls' are bound by CPU, where it shows in full",
            study.stack,
            if threads == "1" { "" } else { "s" }
        );
    }
    let mut why = format!(
        "other hardware and build (the study's: above; here a 2-core VM shared with other work, the {} stack)",
        study.stack
    );
    if q.ends_with("@99") || q.ends_with("@15") {
        why.push_str("; a tail quantile: ML-DSA signing's rejection sampling and this VM's preemption set it");
    }
    why
}

/// Why a row may run on another stack than its baseline: the study's pqtls stack lacks its
/// group or chain (rustls has no finite-field group: study 001's ffdhe3072 row runs on OpenSSL).
const STACK_GAP: &str = "the row runs on another stack than its baseline (the study's pqtls stack lacks its group or \
    chain), so the ratio holds the stacks' difference too";

/// `openssl over rustls` when two records were measured on different stacks (`None`: the same,
/// or one missing).
fn stacks_differ(a: Option<&Record>, b: Option<&Record>) -> Option<String> {
    let (a, b) = (a?.factor("stack"), b?.factor("stack"));
    (a != b).then(|| format!("{a} over {b}"))
}

/// For a p99 cell: the baseline row's own p99 over its p50, the study's and pqtls' — a
/// classical tail widened by this VM's preemption shrinks every tail ratio taken to it.
fn baseline_tails(study: &Study, t: &Table, base: &Row, records: &Records, q: &str) -> Option<String> {
    let median_q = q.strip_suffix("@99").map(|side| format!("{side}@50"))?;
    let i99 = t.quantities.iter().position(|x| x == q)?;
    let i50 = t.quantities.iter().position(|x| *x == median_q)?;
    let theirs = number(&base.cells[i99], &study.number_format)? / number(&base.cells[i50], &study.number_format)?;
    let rec = records.get(base.config.as_deref()?, q)?;
    let ours = quantity(rec, q)? / quantity(rec, &median_q)?;
    Some(format!(
        "; the baseline's own p99 is {}× its median here, {}× in the study: a wider classical tail on this VM shrinks every p99 ratio taken to it",
        fmt(ours),
        fmt(theirs)
    ))
}

/// A run's records by scenario id, looked up by a study's configuration words and the quantity
/// wanted of them ([`Study::point`]: `conn_per_s@8` finds the load record at 8 threads).
struct Records<'a> {
    study: &'a Study,
    by_id: IndexMap<String, &'a Record>,
    /// The points the run could not measure, with its error (`failures.ndjson`).
    failed: IndexMap<String, &'a str>,
}

impl<'a> Records<'a> {
    fn new(study: &'a Study, set: &'a ResultSet) -> Records<'a> {
        Records {
            study,
            by_id: set.records.iter().map(|r| (r.id.clone(), r)).collect(),
            failed: set.failures.iter().map(|f| (f.id.clone(), f.error.as_str())).collect(),
        }
    }

    fn get(&self, config: &str, q: &str) -> Option<&'a Record> {
        self.study.point(config, q).ok().and_then(|s| self.by_id.get(&s.id()).copied())
    }

    /// Why the run could not measure a configuration's point, when it tried and failed.
    fn failure(&self, config: &str, q: &str) -> Option<String> {
        let id = self.study.point(config, q).ok()?.id();
        self.failed.get(&id).map(|e| format!("the run could not measure this point: {e}"))
    }
}

/// The line of a quoted figure; `band` relative, `band_abs` absolute for gains and losses.
fn text_line(
    study: &Study,
    r: &Row,
    records: &Records,
    why_missing: &dyn Fn(&str) -> String,
    (band, band_abs): (f64, Option<f64>),
) -> Line {
    let mut line = Line {
        row: r.label.clone(),
        column: "quoted".into(),
        published: r.cells.first().cloned().unwrap_or_default(),
        pqtls: "—".into(),
        comparison: String::new(),
        verdict: Verdict::Shown,
        cause: r.cause.clone().unwrap_or_default(),
    };
    let (Some(of), Some(figure)) = (&r.of, r.figure) else {
        if line.cause.is_empty() {
            line.cause = "a figure read from a chart, a level or an absolute time the study's tables do not hold: shown, not compared".into();
        }
        return line;
    };
    let record = |c: &str, q: &str| records.get(c, q);
    let mine = |c: &Option<String>, q: &str| c.as_deref().and_then(|c| record(c, q)).and_then(|x| quantity(x, q));
    let theirs = |c: &Option<String>| c.as_deref().and_then(|c| study.published(c, &of.q));
    let form = |a: Option<f64>, b: Option<f64>, base: Option<f64>| -> Option<f64> {
        match of.op.as_str() {
            "ratio" => Some(a? / b?),
            "excess" => Some((a? - base?) / (b? - base?)),
            "diff" => Some(a? - b?),
            "value" => a,
            _ => None,
        }
    };
    let (ours, study_tables) = match of.op.as_str() {
        "max" => (None, study.published_max(&of.q)),
        "model" => {
            let segments = of.q.split_once('@').and_then(|(_, n)| n.parse::<f64>().ok());
            (segments.map(|n| n * MSS_BYTES), None)
        }
        "ratio_q" => {
            let qb = of.qb.clone().unwrap_or_default();
            (
                mine(&of.a, &of.q).zip(mine(&of.a, &qb)).map(|(x, y)| x / y),
                theirs(&of.a).zip(of.a.as_deref().and_then(|c| study.published(c, &qb))).map(|(x, y)| x / y),
            )
        }
        _ => (
            form(mine(&of.a, &of.q), mine(&of.b, &of.q), mine(&of.base, &of.q)),
            form(theirs(&of.a), theirs(&of.b), theirs(&of.base)),
        ),
    };
    let ours = if of.op == "max" {
        // The largest of pqtls' values over the study's rows of that quantity.
        let mut best: Option<f64> = None;
        for t in &study.tables {
            if !t.quantities.contains(&of.q) {
                continue;
            }
            for row in &t.rows {
                if let Some(v) = row.config.as_deref().and_then(|c| record(c, &of.q)).and_then(|x| quantity(x, &of.q)) {
                    best = Some(best.map_or(v, |b: f64| b.max(v)));
                }
            }
        }
        best
    } else {
        ours
    };
    let absolute = of.op == "diff" && (of.q.contains("cpu") || transfer_size(&of.q).is_some());
    let stacks = match of.op.as_str() {
        "ratio" | "diff" => stacks_differ(
            of.a.as_deref().and_then(|c| record(c, &of.q)),
            of.b.as_deref().and_then(|c| record(c, &of.q)),
        ),
        _ => None,
    };
    let mut shown = vec![format!("quoted {}", fmt(figure))];
    if let Some(s) = study_tables {
        shown.push(format!("the study's tables {}", fmt(s)));
    }
    // The ratio's interval from the medians' 95 % intervals (a / b: low over high, high over low).
    let range = (of.op == "ratio")
        .then(|| {
            let a = of.a.as_deref().and_then(|c| record(c, &of.q)).and_then(|x| interval(x, &of.q))?;
            let b = of.b.as_deref().and_then(|c| record(c, &of.q)).and_then(|x| interval(x, &of.q))?;
            Some((a.0 / b.1, a.1 / b.0))
        })
        .flatten();
    // The absolute band is for gains and losses of some per cent (figures between 0.5 and 1.5).
    let within = |v: f64| match band_abs {
        Some(abs) if (0.5..=1.5).contains(&figure) => (v - figure).abs() <= abs,
        _ => (v / figure - 1.0).abs() <= band,
    };
    match ours {
        Some(v) => {
            line.pqtls = match range {
                Some((lo, hi)) => format!("{} ({}–{})", fmt(v), fmt(lo), fmt(hi)),
                None => fmt(v),
            };
            shown.push(format!("pqtls {}", line.pqtls));
            if let Some(s) = &stacks {
                shown.push(s.clone());
            }
            if of.op == "model" {
                line.verdict = if (v / figure - 1.0).abs() <= band { Verdict::Agrees } else { Verdict::Differs };
                if line.cause.is_empty() {
                    line.cause = format!(
                        "{} segments of {} B (Linux's MSS with timestamps)",
                        of.q.split('@').nth(1).unwrap_or("?"),
                        MSS_BYTES
                    );
                }
            } else if absolute {
                line.verdict = Verdict::Shown;
                if line.cause.is_empty() {
                    line.cause = "a difference in µs on other hardware: shown, not judged".into();
                }
            } else if within(v) {
                line.verdict = Verdict::Agrees;
            } else {
                line.verdict = Verdict::Differs;
                if line.cause.is_empty() {
                    line.cause = match study_tables {
                        Some(s) if (s / figure - 1.0).abs() > band => format!(
                            "the quote is a round figure: the study's own tables give {} for it; pqtls {}",
                            fmt(s),
                            ratio_cause(study, &of.q)
                        ),
                        _ => ratio_cause(study, &of.q),
                    };
                    if let Some(s) = &stacks {
                        line.cause.push_str(&format!("; {s}: {STACK_GAP}"));
                    }
                }
            }
        }
        None => {
            line.verdict = Verdict::NotMeasured;
            if line.cause.is_empty() {
                let failed = [&of.a, &of.b, &of.base].into_iter().flatten().find_map(|c| records.failure(c, &of.q));
                line.cause = failed.unwrap_or_else(|| why_missing(&of.q));
            }
        }
    }
    line.comparison = shown.join(" · ");
    line
}

/// The page in Markdown: the study, how pqtls ran it, then every table with every cell.
pub fn markdown(study: &Study, tables: &[PageTable], how: &[String]) -> String {
    let mut s = format!("# Replication of study {}: {}\n\n", study.id, study.title);
    s.push_str(&format!(
        "- **Study**: {} — {} (`{}`)\n- **Its hardware**: {}\n- **Its software**: {}\n- **Its method**: {}\n",
        study.authors, study.published, study.source, study.hardware, study.software, study.method
    ));
    for h in how {
        s.push_str(&format!("- {h}\n"));
    }
    let count = |v: Verdict| tables.iter().flat_map(|t| &t.lines).filter(|l| l.verdict == v).count();
    s.push_str(&format!(
        "\n**Cells**: {} agree, {} differ (each with its cause), {} shown not judged, {} not measured (each with why).\n",
        count(Verdict::Agrees),
        count(Verdict::Differs),
        count(Verdict::Shown),
        count(Verdict::NotMeasured)
    ));
    for t in tables {
        s.push_str(&format!("\n## {}\n\n{}\n\nSource: {}.\nComparison: {}.\n\n", t.id, t.caption, t.source, t.rule));
        s.push_str(
            "| row | column | published | pqtls | comparison | verdict | cause |\n|---|---|---:|---:|---|---|---|\n",
        );
        for l in &t.lines {
            s.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} |\n",
                cell(&l.row),
                cell(&l.column),
                cell(&l.published),
                cell(&l.pqtls),
                cell(&l.comparison),
                l.verdict.word(),
                cell(&l.cause)
            ));
        }
    }
    s
}

fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

fn esc(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

/// The page in HTML: self-contained, the same content as [`markdown`], every table labelled.
pub fn html(study: &Study, tables: &[PageTable], how: &[String]) -> String {
    let mut s = format!(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>Replication of study {} — pqtls</title>\n<style>body{{font-family:system-ui,sans-serif;max-width:80rem;margin:1rem auto;padding:0 1rem}}table{{border-collapse:collapse;margin:0.5rem 0 1.5rem}}th,td{{border:1px solid #ccc;padding:0.2rem 0.4rem;vertical-align:top}}td.n{{text-align:right;font-variant-numeric:tabular-nums}}caption{{text-align:left;font-weight:600;padding:0.3rem 0}}.agrees{{background:#e8f5e9}}.differs{{background:#fff3e0}}.not-measured{{background:#eceff1}}</style></head><body>\n<h1>Replication of study {}: {}</h1>\n<ul>\n",
        esc(&study.id),
        esc(&study.id),
        esc(&study.title)
    );
    for (k, v) in [
        ("Study", format!("{} — {} ({})", study.authors, study.published, study.source)),
        ("Its hardware", study.hardware.clone()),
        ("Its software", study.software.clone()),
        ("Its method", study.method.clone()),
    ] {
        s.push_str(&format!("<li><strong>{k}</strong>: {}</li>\n", esc(&v)));
    }
    for h in how {
        s.push_str(&format!("<li>{}</li>\n", esc(h)));
    }
    s.push_str("</ul>\n");
    for t in tables {
        s.push_str(&format!(
            "<section id=\"{}\"><h2>{}</h2>\n<p>Source: {}. Comparison: {}.</p>\n<table><caption>{}</caption>\n<thead><tr><th>row</th><th>column</th><th>published</th><th>pqtls</th><th>comparison</th><th>verdict</th><th>cause</th></tr></thead><tbody>\n",
            esc(&t.id),
            esc(&t.id),
            esc(&t.source),
            esc(&t.rule),
            esc(&t.caption)
        ));
        for l in &t.lines {
            s.push_str(&format!(
                "<tr class=\"{}\"><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
                l.verdict.word().replace([' ', ','], "-").replace("--", "-"),
                esc(&l.row),
                esc(&l.column),
                esc(&l.published),
                esc(&l.pqtls),
                esc(&l.comparison),
                esc(l.verdict.word()),
                esc(&l.cause)
            ));
        }
        s.push_str("</tbody></table></section>\n");
    }
    s.push_str("</body></html>\n");
    s
}
