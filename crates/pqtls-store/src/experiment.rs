//! Experiment files: a TOML matrix of factors, exclusions, extra points and measurement
//! settings, validated as a whole before anything runs (every problem reported with
//! `file:line:column` and what would work), then expanded into handshake configurations in
//! a deterministic order.
//!
//! The format is documented in `docs/experiments.md`.

use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::stats::{self, Quantiles};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// The factors of a matrix, in the order they vary in the expansion (the first is the
/// outermost loop).
pub const FACTORS: &[&str] = &[
    "stack",
    "group",
    "chain",
    "cipher",
    "send_root",
    "verify_parent",
    "key_shares",
    "share_x25519",
    "client_chain",
    "resumption",
];

/// Other spellings accepted for factor names.
const FACTOR_ALIASES: &[(&str, &str)] = &[
    ("stacks", "stack"),
    ("groups", "group"),
    ("chains", "chain"),
    ("ciphers", "cipher"),
    ("root_sent", "send_root"),
    ("parent_verified", "verify_parent"),
    ("shares", "key_shares"),
    ("mtls", "client_chain"),
    ("client_chains", "client_chain"),
    ("resumed", "resumption"),
];

const SETTINGS: &[&str] =
    &["warmup", "loops", "precision", "max_loops", "min_loops", "quantiles", "mode", "raw_samples"];
const TOP_LEVEL: &[&str] =
    &["name", "description", "skip_unsupported", "settings", "matrix", "exclude", "extra", "baseline"];

pub use pqtls_core::config::Mode;

/// Measurement settings: everything that changes what a number means. A results directory
/// holds records measured with one set of settings only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    /// Handshakes run and discarded before measuring.
    pub warmup: u64,
    /// Fixed number of measured handshakes; `None` in adaptive mode.
    pub loops: Option<u64>,
    /// Adaptive mode: stop once every step's median is known to this relative precision.
    pub precision: Option<f64>,
    /// Adaptive mode: at least this many handshakes.
    pub min_loops: u64,
    /// Adaptive mode: at most this many handshakes.
    pub max_loops: u64,
    pub quantiles: Quantiles,
    pub mode: Mode,
    /// Keep every handshake's per-step times in `samples/`.
    pub raw_samples: bool,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            warmup: 100,
            loops: Some(1000),
            precision: None,
            min_loops: 100,
            max_loops: 1000,
            quantiles: Quantiles::default(),
            mode: Mode::Memory,
            raw_samples: false,
        }
    }
}

impl Settings {
    /// Differences against `other` (`setting: old → new`), empty when equal.
    pub fn changes_from(&self, old: &Settings) -> Vec<String> {
        let mut v = Vec::new();
        let mut cmp = |name: &str, a: String, b: String| {
            if a != b {
                v.push(format!("{name}: {a} → {b}"));
            }
        };
        let opt = |x: Option<u64>| x.map_or("none".to_string(), |x| x.to_string());
        let pct = |x: Option<f64>| x.map_or("none".to_string(), |x| format!("{}%", x * 100.0));
        cmp("warmup", old.warmup.to_string(), self.warmup.to_string());
        cmp("loops", opt(old.loops), opt(self.loops));
        cmp("precision", pct(old.precision), pct(self.precision));
        cmp("min_loops", old.min_loops.to_string(), self.min_loops.to_string());
        cmp("max_loops", old.max_loops.to_string(), self.max_loops.to_string());
        let qs = |q: &Quantiles| q.0.iter().map(|x| Quantiles::key(*x)).collect::<Vec<_>>().join(",");
        cmp("quantiles", qs(&old.quantiles), qs(&self.quantiles));
        cmp("mode", old.mode.name().into(), self.mode.name().into());
        cmp("raw_samples", old.raw_samples.to_string(), self.raw_samples.to_string());
        v
    }
}

/// A configuration left out because its stack cannot do it (`skip_unsupported = true`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Skipped {
    pub id: String,
    pub reason: String,
}

/// Which configuration is the baseline of another: the same configuration with the listed
/// factors set to these values (e.g. `group = "x25519"`, `chain = "p256:p256"`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BaselineRule {
    /// Factor → canonical value (as in [`factor_value`]).
    pub factors: Vec<(String, String)>,
}

impl BaselineRule {
    /// The id of `config`'s baseline, or `None` when no rule is set.
    pub fn baseline_of(&self, config: &HandshakeConfig) -> Option<String> {
        if self.factors.is_empty() {
            return None;
        }
        let mut values: Vec<(String, String)> =
            FACTORS.iter().map(|f| (f.to_string(), factor_value(config, f))).collect();
        for (f, v) in &self.factors {
            if let Some(slot) = values.iter_mut().find(|(n, _)| n == f) {
                slot.1 = v.clone();
            }
        }
        build_config(&values).ok().map(|c| c.id())
    }
}

/// A parsed, validated and expanded experiment.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// Results go to `results/<name>/`.
    pub name: String,
    pub description: String,
    /// The file it came from (as given).
    pub path: PathBuf,
    /// The file's text, copied into the results directory.
    pub source: String,
    pub settings: Settings,
    pub skip_unsupported: bool,
    /// Configurations left out by `skip_unsupported`.
    pub skipped: Vec<Skipped>,
    /// Configurations left out by `[[exclude]]` rules.
    pub excluded: usize,
    pub baseline: BaselineRule,
    configs: Vec<HandshakeConfig>,
}

impl Experiment {
    /// Reads and validates an experiment file.
    pub fn load(path: &Path) -> Result<Experiment, Diagnostics> {
        let text = std::fs::read_to_string(path).map_err(|e| Diagnostics {
            file: path.display().to_string(),
            items: vec![Diagnostic { line: 0, column: 0, message: format!("cannot read the experiment file: {e}") }],
        })?;
        Experiment::parse(&text, path)
    }

    /// Parses and validates an experiment from its text; `path` names it in errors and gives
    /// the default name (the file stem).
    pub fn parse(text: &str, path: &Path) -> Result<Experiment, Diagnostics> {
        let mut p = Parser { text, diags: Vec::new() };
        let exp = p.experiment(path);
        if p.diags.is_empty() {
            if let Some(exp) = exp {
                return Ok(exp);
            }
        }
        let mut items: Vec<Diagnostic> = Vec::new();
        for d in p.diags {
            if !items.contains(&d) {
                items.push(d);
            }
        }
        items.sort_by_key(|d| (d.line, d.column));
        Err(Diagnostics { file: path.display().to_string(), items })
    }

    /// The configurations to measure, in a deterministic order: the matrix (first factor
    /// outermost, values in file order) minus exclusions, then the extra points in file
    /// order; duplicates (by id) kept once.
    pub fn configs(&self) -> pqtls_core::Result<Vec<HandshakeConfig>> {
        Ok(self.configs.clone())
    }

    /// SHA-256 of the file's text, hex.
    pub fn source_sha256(&self) -> String {
        hex(&Sha256::digest(self.source.as_bytes()))
    }

    /// SHA-256 over the expanded configuration ids: equal when the matrix is the same.
    pub fn matrix_sha256(&self) -> String {
        let mut h = Sha256::new();
        for c in &self.configs {
            h.update(c.id().as_bytes());
            h.update(b"\n");
        }
        hex(&h.finalize())
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// One problem in an experiment file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// 1-based; 0 when the problem is not tied to a place (e.g. the file cannot be read).
    pub line: usize,
    pub column: usize,
    pub message: String,
}

/// Every problem found in an experiment file.
#[derive(Clone, Debug)]
pub struct Diagnostics {
    pub file: String,
    pub items: Vec<Diagnostic>,
}

impl fmt::Display for Diagnostics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.items.len();
        writeln!(f, "{}: {n} problem{} in the experiment file", self.file, if n == 1 { "" } else { "s" })?;
        for d in &self.items {
            if d.line == 0 {
                writeln!(f, "{}: {}", self.file, d.message)?;
            } else {
                writeln!(f, "{}:{}:{}: {}", self.file, d.line, d.column, d.message)?;
            }
        }
        Ok(())
    }
}

impl std::error::Error for Diagnostics {}

impl From<Diagnostics> for pqtls_core::Error {
    fn from(d: Diagnostics) -> Self {
        pqtls_core::Error::Invalid(d.to_string().trim_end().to_string())
    }
}

/// The canonical value of one factor of a configuration (what exclusions, baselines and
/// tables compare): names from the catalogue, `true`/`false`, `one`, `none`.
pub fn factor_value(c: &HandshakeConfig, factor: &str) -> String {
    let names = |gs: &[&catalogue::Group]| gs.iter().map(|g| g.name).collect::<Vec<_>>().join(",");
    match factor {
        "stack" => c.stack.name().into(),
        "group" => names(&c.groups),
        "chain" => c.chain.label(),
        "cipher" => c.cipher.name.into(),
        "send_root" => c.send_root.to_string(),
        "verify_parent" => c.verify_parent.to_string(),
        "key_shares" if c.key_shares.is_empty() => "one".into(),
        "key_shares" => names(&c.key_shares),
        "share_x25519" => c.share_x25519.to_string(),
        "client_chain" => c.client_chain.map_or("none".into(), |c| c.label()),
        "resumption" => c.resumption.to_string(),
        _ => String::new(),
    }
}

/// Canonical value of a factor from its written form; the error lists what would work.
fn canonical(factor: &str, v: &FactorLit) -> Result<String, String> {
    let want_str = |v: &FactorLit| match v {
        FactorLit::Str(s) => Ok(s.clone()),
        FactorLit::Bool(b) => Err(format!("{factor} takes a string, not {b}")),
    };
    let want_bool = |v: &FactorLit| match v {
        FactorLit::Bool(b) => Ok(b.to_string()),
        FactorLit::Str(s) => match s.as_str() {
            "yes" | "true" => Ok("true".into()),
            "no" | "false" => Ok("false".into()),
            _ => Err(format!("{factor} takes true or false, not \"{s}\"")),
        },
    };
    let groups = |s: &str| -> Result<String, String> {
        let parts: Vec<&str> = s.split([',', '+']).map(str::trim).filter(|p| !p.is_empty()).collect();
        if parts.is_empty() {
            return Err(format!("{factor} is empty; e.g. \"x25519\" or \"X25519MLKEM768,x25519\""));
        }
        let gs = parts.iter().map(|p| catalogue::group(p).map(|g| g.name)).collect::<Result<Vec<_>, _>>();
        gs.map(|g| g.join(",")).map_err(|e| e.to_string())
    };
    match factor {
        "stack" => Stack::parse(&want_str(v)?).map(|s| s.name().to_string()).map_err(|e| e.to_string()),
        "group" => groups(&want_str(v)?),
        "key_shares" => {
            let s = want_str(v)?;
            if s.trim().eq_ignore_ascii_case("one") || s.trim().is_empty() {
                Ok("one".into())
            } else {
                groups(&s)
            }
        }
        "chain" => ChainSpec::parse(&want_str(v)?).map(|c| c.label()).map_err(|e| e.to_string()),
        "client_chain" => {
            let s = want_str(v)?;
            if s.trim().eq_ignore_ascii_case("none") || s.trim().is_empty() {
                Ok("none".into())
            } else {
                ChainSpec::parse(&s).map(|c| c.label()).map_err(|e| e.to_string())
            }
        }
        "cipher" => catalogue::cipher(&want_str(v)?).map(|c| c.name.to_string()).map_err(|e| e.to_string()),
        "send_root" | "verify_parent" | "share_x25519" | "resumption" => want_bool(v),
        _ => Err(format!("unknown factor '{factor}'")),
    }
}

/// Default value of a factor not named anywhere (None: must be given).
fn default_value(factor: &str) -> Option<&'static str> {
    match factor {
        "stack" => Some("openssl"),
        "cipher" => Some("TLS_AES_128_GCM_SHA256"),
        "send_root" | "verify_parent" | "share_x25519" | "resumption" => Some("false"),
        "key_shares" => Some("one"),
        "client_chain" => Some("none"),
        _ => None,
    }
}

/// Builds a configuration from canonical factor values (all of [`FACTORS`]).
fn build_config(values: &[(String, String)]) -> pqtls_core::Result<HandshakeConfig> {
    let get = |f: &str| values.iter().find(|(n, _)| n == f).map(|(_, v)| v.as_str()).unwrap_or("");
    let groups = |s: &str| s.split(',').map(catalogue::group).collect::<pqtls_core::Result<Vec<_>>>();
    let mut c = HandshakeConfig::new(
        Stack::parse(get("stack"))?,
        catalogue::group(get("group").split(',').next().unwrap_or(""))?,
        ChainSpec::parse(get("chain"))?,
        catalogue::cipher(get("cipher"))?,
    );
    c.groups = groups(get("group"))?;
    c.key_shares = if get("key_shares") == "one" { Vec::new() } else { groups(get("key_shares"))? };
    c.send_root = get("send_root") == "true";
    c.verify_parent = get("verify_parent") == "true";
    c.share_x25519 = get("share_x25519") == "true";
    c.resumption = get("resumption") == "true";
    c.client_chain = match get("client_chain") {
        "none" => None,
        s => Some(ChainSpec::parse(s)?),
    };
    Ok(c)
}

#[derive(Clone, Debug)]
enum FactorLit {
    Str(String),
    Bool(bool),
}

/// One factor's values, each with its span.
type Values = Vec<(String, Range<usize>)>;
/// Factor → canonical value, for every factor: one point of the matrix.
type Point = Vec<(String, String)>;
/// A table of factor lists (`[[exclude]]`, `[[extra]]`) and where it is.
type FactorTable = (Vec<(String, Values)>, Range<usize>);

struct Parser<'t> {
    text: &'t str,
    diags: Vec<Diagnostic>,
}

impl<'t> Parser<'t> {
    fn err(&mut self, span: Range<usize>, message: impl Into<String>) {
        let (line, column) = line_col(self.text, span.start);
        self.diags.push(Diagnostic { line, column, message: message.into() });
    }

    fn experiment(&mut self, path: &Path) -> Option<Experiment> {
        let doc = match DeTable::parse(self.text) {
            Ok(d) => d,
            Err(e) => {
                let span = e.span().unwrap_or(0..0);
                self.err(span, format!("invalid TOML: {}", e.message().trim()));
                return None;
            }
        };
        let whole = doc.span();
        let doc = doc.get_ref();
        for (k, _) in doc.iter() {
            if !TOP_LEVEL.contains(&k.get_ref().as_ref()) {
                let msg = format!(
                    "unknown key '{}'; the top level takes: {}{}",
                    k.get_ref(),
                    TOP_LEVEL.join(", "),
                    if canonical_factor(k.get_ref()).is_some() { " (factors go in [matrix])" } else { "" }
                );
                self.err(k.span(), msg);
            }
        }
        let name = match doc.get("name") {
            Some(v) => self.string(v, "name").unwrap_or_default(),
            None => path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "experiment".into()),
        };
        if name.is_empty()
            || name.starts_with('.')
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            let span = doc.get("name").map_or(0..0, |v| v.span());
            self.err(span, format!("name '{name}' must be a directory name: letters, digits, '-', '_', '.'"));
        }
        let description = doc.get("description").and_then(|v| self.string(v, "description")).unwrap_or_default();
        let skip_unsupported =
            doc.get("skip_unsupported").and_then(|v| self.bool(v, "skip_unsupported")).unwrap_or(false);
        let settings = match doc.get("settings") {
            Some(v) => self.settings(v),
            None => Settings::default(),
        };

        // The matrix.
        let Some(matrix) = doc.get("matrix") else {
            self.err(
                whole.start..whole.start,
                "no [matrix] table; give at least group and chain lists, e.g. [matrix] group = [\"x25519\"] chain = [\"p256:p256\"]",
            );
            return None;
        };
        let matrix_span = matrix.span();
        let mt = self.table(matrix, "matrix")?;
        let factors = self.factor_table(mt, "[matrix]");
        for f in ["group", "chain"] {
            if !factors.iter().any(|(n, _)| n == f) {
                self.err(matrix_span.clone(), format!("[matrix] has no '{f}' list; e.g. {}", example(f)));
            }
        }

        // Exclusions and extra points.
        let excludes = self.array_of_tables(doc, "exclude");
        let extras = self.array_of_tables(doc, "extra");
        let baseline = match doc.get("baseline") {
            Some(v) => match self.table(v, "baseline") {
                Some(t) => {
                    let f = self.factor_table(t, "[baseline]");
                    let mut rule = BaselineRule::default();
                    for (name, vals) in f {
                        if vals.len() != 1 {
                            self.err(v.span(), format!("[baseline] {name} takes one value"));
                        } else {
                            rule.factors.push((name, vals[0].0.clone()));
                        }
                    }
                    rule
                }
                None => BaselineRule::default(),
            },
            None => BaselineRule::default(),
        };
        if !self.diags.is_empty() {
            return None;
        }

        // Expansion.
        let lists: Vec<(String, Values)> = FACTORS
            .iter()
            .map(|f| {
                let vals = factors
                    .iter()
                    .find(|(n, _)| n == f)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_else(|| vec![(default_value(f).unwrap_or("").to_string(), matrix_span.clone())]);
                (f.to_string(), vals)
            })
            .collect();
        let mut points: Vec<(Point, Range<usize>)> = Vec::new();
        let mut excluded = 0;
        let mut idx = vec![0usize; lists.len()];
        'product: loop {
            let point: Vec<(String, String)> =
                lists.iter().zip(&idx).map(|((f, vals), &i)| (f.clone(), vals[i].0.clone())).collect();
            if excludes.iter().any(|ex| matches_rule(&point, ex)) {
                excluded += 1;
            } else {
                points.push((point, matrix_span.clone()));
            }
            // Odometer: the last factor varies fastest.
            let mut k = lists.len();
            loop {
                if k == 0 {
                    break 'product;
                }
                k -= 1;
                idx[k] += 1;
                if idx[k] < lists[k].1.len() {
                    break;
                }
                idx[k] = 0;
            }
        }
        for (ex, span) in &extras {
            // Unnamed factors take the matrix's first value.
            let base: Vec<(String, String)> = lists.iter().map(|(f, vals)| (f.clone(), vals[0].0.clone())).collect();
            let mut partial: Vec<Vec<(String, String)>> = vec![base];
            for (f, vals) in ex {
                partial = partial
                    .into_iter()
                    .flat_map(|p| {
                        vals.iter().map(move |(v, _)| {
                            let mut p = p.clone();
                            if let Some(slot) = p.iter_mut().find(|(n, _)| n == f) {
                                slot.1 = v.clone();
                            }
                            p
                        })
                    })
                    .collect();
            }
            points.extend(partial.into_iter().map(|p| (p, span.clone())));
        }

        let mut configs = Vec::new();
        let mut seen = HashSet::new();
        let mut skipped = Vec::new();
        // Unsupported combinations: one diagnostic per distinct reason, with a count.
        let mut unsupported: Vec<(String, Range<usize>, String, usize)> = Vec::new();
        for (point, span) in points {
            let cfg = match build_config(&point) {
                Ok(c) => c,
                Err(e) => {
                    self.err(span, e.to_string());
                    continue;
                }
            };
            if !seen.insert(cfg.id()) {
                continue;
            }
            if let Err(e) = cfg.validate() {
                let reason = e.to_string();
                if skip_unsupported {
                    skipped.push(Skipped { id: cfg.id(), reason });
                } else if let Some(u) = unsupported.iter_mut().find(|u| u.0 == reason) {
                    u.3 += 1;
                } else {
                    unsupported.push((reason, span, cfg.id(), 1));
                }
                continue;
            }
            configs.push(cfg);
        }
        for (reason, span, id, n) in unsupported {
            let more = if n > 1 { format!(" (and {} more configurations)", n - 1) } else { String::new() };
            self.err(
                span,
                format!("configuration {id}{more}: {reason}; exclude it with an [[exclude]] table, or set skip_unsupported = true to skip such combinations and list them"),
            );
        }
        if !self.diags.is_empty() {
            return None;
        }
        if configs.is_empty() {
            let why = if !skipped.is_empty() {
                format!("all {} configurations are unsupported and were skipped", skipped.len())
            } else if excluded > 0 {
                format!("all {excluded} configurations are excluded by [[exclude]] rules")
            } else {
                "no configuration".to_string()
            };
            self.err(matrix_span, format!("the matrix is empty: {why}; nothing to measure"));
            return None;
        }
        Some(Experiment {
            name,
            description,
            path: path.to_path_buf(),
            source: self.text.to_string(),
            settings,
            skip_unsupported,
            skipped,
            excluded,
            baseline,
            configs,
        })
    }

    fn string(&mut self, v: &Spanned<DeValue>, what: &str) -> Option<String> {
        match v.get_ref() {
            DeValue::String(s) => Some(s.to_string()),
            other => {
                self.err(v.span(), format!("{what} must be a string, not a {}", other.type_str()));
                None
            }
        }
    }

    fn bool(&mut self, v: &Spanned<DeValue>, what: &str) -> Option<bool> {
        match v.get_ref() {
            DeValue::Boolean(b) => Some(*b),
            other => {
                self.err(v.span(), format!("{what} must be true or false, not a {}", other.type_str()));
                None
            }
        }
    }

    fn uint(&mut self, v: &Spanned<DeValue>, what: &str) -> Option<u64> {
        match v.get_ref() {
            DeValue::Integer(i) => match u64::from_str_radix(&i.as_str().replace('_', ""), i.radix()) {
                Ok(n) => Some(n),
                Err(_) => {
                    self.err(v.span(), format!("{what} must be a non-negative integer"));
                    None
                }
            },
            other => {
                self.err(v.span(), format!("{what} must be an integer, not a {}", other.type_str()));
                None
            }
        }
    }

    fn table<'a, 'i>(&mut self, v: &'a Spanned<DeValue<'i>>, what: &str) -> Option<&'a DeTable<'i>> {
        match v.get_ref() {
            DeValue::Table(t) => Some(t),
            other => {
                self.err(v.span(), format!("{what} must be a table ([{what}]), not a {}", other.type_str()));
                None
            }
        }
    }

    fn array_of_tables(&mut self, doc: &DeTable, what: &str) -> Vec<FactorTable> {
        let Some(v) = doc.get(what) else { return Vec::new() };
        let DeValue::Array(items) = v.get_ref() else {
            self.err(v.span(), format!("{what} must be an array of tables: write [[{what}]] sections"));
            return Vec::new();
        };
        let mut out = Vec::new();
        for item in items.iter() {
            if let Some(t) = self.table(item, what) {
                let f = self.factor_table(t, &format!("[[{what}]]"));
                if f.is_empty() {
                    self.err(item.span(), format!("[[{what}]] names no factor; known factors: {}", FACTORS.join(", ")));
                }
                out.push((f, item.span()));
            }
        }
        out
    }

    /// Factor name → canonical values. Unknown factors and unknown values are diagnosed.
    fn factor_table(&mut self, t: &DeTable, what: &str) -> Vec<(String, Values)> {
        let mut out: Vec<(String, Values)> = Vec::new();
        for (k, v) in t.iter() {
            let Some(factor) = canonical_factor(k.get_ref()) else {
                self.err(
                    k.span(),
                    format!("unknown factor '{}' in {what}; known factors: {}", k.get_ref(), FACTORS.join(", ")),
                );
                continue;
            };
            if out.iter().any(|(n, _)| n == factor) {
                self.err(k.span(), format!("factor '{factor}' given twice in {what} (once under another spelling)"));
                continue;
            }
            let items: Vec<&Spanned<DeValue>> = match v.get_ref() {
                DeValue::Array(a) => a.iter().collect(),
                _ => vec![v],
            };
            if items.is_empty() {
                self.err(v.span(), format!("{factor} in {what} is an empty list; e.g. {}", example(factor)));
                continue;
            }
            let mut vals: Values = Vec::new();
            for item in items {
                let lit = match item.get_ref() {
                    DeValue::String(s) => FactorLit::Str(s.to_string()),
                    DeValue::Boolean(b) => FactorLit::Bool(*b),
                    other => {
                        self.err(
                            item.span(),
                            format!("{factor} values must be strings or booleans, not a {}", other.type_str()),
                        );
                        continue;
                    }
                };
                match canonical(factor, &lit) {
                    Ok(c) => {
                        if vals.iter().any(|(x, _)| *x == c) {
                            self.err(item.span(), format!("{factor} value '{c}' is listed twice"));
                        } else {
                            vals.push((c, item.span()));
                        }
                    }
                    Err(e) => self.err(item.span(), e),
                }
            }
            out.push((factor.to_string(), vals));
        }
        out
    }

    fn settings(&mut self, v: &Spanned<DeValue>) -> Settings {
        let mut s = Settings::default();
        let Some(t) = self.table(v, "settings") else { return s };
        for (k, _) in t.iter() {
            if !SETTINGS.contains(&k.get_ref().as_ref()) {
                self.err(
                    k.span(),
                    format!("unknown setting '{}'; [settings] takes: {}", k.get_ref(), SETTINGS.join(", ")),
                );
            }
        }
        if let Some(x) = t.get("warmup") {
            s.warmup = self.uint(x, "warmup").unwrap_or(s.warmup);
        }
        let loops = t.get("loops").and_then(|x| self.uint(x, "loops"));
        let precision = t.get("precision").and_then(|x| match x.get_ref() {
            DeValue::String(p) => match stats::parse_precision(p) {
                Ok(p) => Some(p),
                Err(e) => {
                    self.err(x.span(), e.to_string());
                    None
                }
            },
            DeValue::Float(f) => match f.as_str().parse::<f64>().map(|f| stats::parse_precision(&f.to_string())) {
                Ok(Ok(p)) => Some(p),
                _ => {
                    self.err(x.span(), "precision must be between 0 and 100 %, e.g. \"1%\" or 0.01");
                    None
                }
            },
            other => {
                self.err(x.span(), format!("precision must be a string like \"2%\", not a {}", other.type_str()));
                None
            }
        });
        if let (Some(_), Some(_), Some(x)) = (loops, precision, t.get("precision")) {
            self.err(x.span(), "give either loops (a fixed count) or precision (adaptive), not both");
        }
        if let Some(x) = t.get("max_loops") {
            s.max_loops = self.uint(x, "max_loops").unwrap_or(s.max_loops);
        }
        if let Some(x) = t.get("min_loops") {
            s.min_loops = self.uint(x, "min_loops").unwrap_or(s.min_loops);
        }
        if precision.is_some() {
            s.loops = None;
            s.precision = precision;
            if s.min_loops > s.max_loops {
                let span = t.get("min_loops").map_or(v.span(), |x| x.span());
                self.err(span, format!("min_loops {} exceeds max_loops {}", s.min_loops, s.max_loops));
            }
        } else if let Some(n) = loops {
            if n == 0 {
                self.err(t.get("loops").map_or(v.span(), |x| x.span()), "loops must be at least 1");
            }
            s.loops = Some(n);
            s.max_loops = n;
            s.min_loops = n;
        }
        if let Some(x) = t.get("quantiles") {
            let text = match x.get_ref() {
                DeValue::Array(a) => a
                    .iter()
                    .map(|q| match q.get_ref() {
                        DeValue::Integer(i) => i.as_str().to_string(),
                        DeValue::Float(f) => f.as_str().to_string(),
                        DeValue::String(s) => s.to_string(),
                        _ => "?".into(),
                    })
                    .collect::<Vec<_>>()
                    .join(","),
                DeValue::String(s) => s.to_string(),
                other => {
                    self.err(
                        x.span(),
                        format!("quantiles must be a list like [15, 50, 99], not a {}", other.type_str()),
                    );
                    String::new()
                }
            };
            if !text.is_empty() {
                match Quantiles::parse(&text) {
                    Ok(q) => s.quantiles = q,
                    Err(e) => self.err(x.span(), e.to_string()),
                }
            }
        }
        if let Some(x) = t.get("mode") {
            if let Some(m) = self.string(x, "mode") {
                match m.as_str() {
                    "memory" => s.mode = Mode::Memory,
                    "threads" => s.mode = Mode::Threads,
                    other => self.err(x.span(), format!("unknown mode '{other}'; known: memory, threads")),
                }
            }
        }
        if let Some(x) = t.get("raw_samples") {
            s.raw_samples = self.bool(x, "raw_samples").unwrap_or(false);
        }
        s
    }
}

fn canonical_factor(name: &str) -> Option<&'static str> {
    FACTORS
        .iter()
        .copied()
        .find(|f| *f == name)
        .or_else(|| FACTOR_ALIASES.iter().find(|(a, _)| *a == name).map(|(_, f)| *f))
}

fn example(factor: &str) -> &'static str {
    match factor {
        "group" => "group = [\"x25519\", \"X25519MLKEM768\"]",
        "chain" => "chain = [\"p256:p256\", \"mldsa65:mldsa65\"]",
        "stack" => "stack = [\"openssl\", \"rustls\"]",
        "cipher" => "cipher = [\"TLS_AES_128_GCM_SHA256\"]",
        "key_shares" => "key_shares = [\"one\", \"X25519MLKEM768,x25519\"]",
        "client_chain" => "client_chain = [\"none\", \"mldsa65:mldsa65\"]",
        _ => "send_root = [false, true]",
    }
}

fn matches_rule(point: &[(String, String)], rule: &FactorTable) -> bool {
    rule.0
        .iter()
        .all(|(f, vals)| point.iter().find(|(n, _)| n == f).is_some_and(|(_, v)| vals.iter().any(|(x, _)| x == v)))
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
