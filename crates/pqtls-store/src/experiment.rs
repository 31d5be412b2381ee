//! Experiment files: a TOML matrix of factors, exclusions, extra points and measurement
//! settings, validated as a whole before anything runs (every problem reported with
//! `file:line:column` and what would work), then expanded into handshake configurations in
//! a deterministic order.
//!
//! The format is documented in `docs/experiments.md`.

use pqtls_core::factor::{self, Kind, FACTORS};
use pqtls_core::scenario::Scenario;
pub use pqtls_core::settings::Settings;
use pqtls_core::stats::{self, Quantiles};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fmt;
use std::ops::Range;
use std::path::{Path, PathBuf};
use toml::de::{DeTable, DeValue};
use toml::Spanned;

const SETTINGS: &[&str] = &[
    "warmup",
    "loops",
    "precision",
    "max_loops",
    "min_loops",
    "max_time",
    "quantiles",
    "raw_samples",
    "memory",
    "mode",
    "transport",
    "clock",
    "duration",
    "warmup_time",
    "requests",
    "timeout",
    "held",
    "settle",
];
/// The measurements that read a setting (`None`: a factor's value for the whole matrix, which
/// its factor's `used_by` checks like any factor).
fn setting_kinds(name: &str) -> Option<&'static [Kind]> {
    match name {
        "warmup" | "loops" | "precision" | "max_loops" | "min_loops" | "max_time" | "quantiles" | "raw_samples" => {
            Some(&[Kind::Insitu])
        }
        "memory" => Some(&[Kind::Insitu, Kind::Load, Kind::Layers]),
        "duration" | "warmup_time" | "timeout" | "requests" => Some(&[Kind::Load, Kind::Layers, Kind::Transfer]),
        "held" | "settle" => Some(&[Kind::Resident]),
        _ => None,
    }
}

/// Settings that are factor values for the whole matrix (unless `[matrix]` varies them):
/// `mode` is the former name of `transport`.
const FACTOR_SETTINGS: &[&str] = &["mode", "transport", "clock"];
const TOP_LEVEL: &[&str] =
    &["name", "description", "measurement", "skip_unsupported", "settings", "matrix", "exclude", "extra", "baseline"];

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
    /// Factor → canonical value.
    pub factors: Vec<(String, String)>,
}

impl BaselineRule {
    /// The id of `scenario`'s baseline, or `None` when no rule is set.
    pub fn baseline_of(&self, scenario: &Scenario) -> Option<String> {
        if self.factors.is_empty() {
            return None;
        }
        let changes = self.factors.iter().map(|(f, v)| (f.as_str(), v.as_str()));
        scenario.with(changes).ok().map(|s| s.id())
    }
}

/// Factor name → canonical values, in the file's order: one `[matrix]`, `[[exclude]]` or
/// `[[extra]]` table.
pub type FactorLists = Vec<(String, Vec<String>)>;

/// The matrix as the file writes it, before expansion (what [`Experiment::to_toml`] writes).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Matrix {
    /// `[matrix]`: the factors varied (every other factor takes its default).
    pub factors: FactorLists,
    /// Factor values given in `[settings]` for the whole matrix (`transport = "tcp"`, `clock`;
    /// `mode` is read as `transport`).
    pub fixed: Vec<(String, String)>,
    /// `[[exclude]]` tables: the points matching one are left out.
    pub exclude: Vec<FactorLists>,
    /// `[[extra]]` tables: points added after the matrix's.
    pub extra: Vec<FactorLists>,
}

/// A parsed, validated and expanded experiment.
#[derive(Clone, Debug)]
pub struct Experiment {
    /// Results go to `results/<name>/`.
    pub name: String,
    pub description: String,
    /// What is measured (`measurement = "insitu"`, the default).
    pub kind: Kind,
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
    /// The matrix as written (the scenarios are its expansion; [`Experiment::with_clock`]
    /// stamps the scenarios, not the matrix).
    pub matrix: Matrix,
    /// How the scenarios are made again on each walk: counted and checked once by the parser,
    /// never held (a matrix of 100,000 load configurations held 652 MB expanded).
    expansion: Expansion,
}

/// The scenarios of an experiment, made one at a time on each walk ([`Experiment::each_scenario`]).
#[derive(Clone, Debug, Default)]
struct Expansion {
    /// Every factor's values in factor-table order (the matrix's lists, the `[settings]` values
    /// and the defaults).
    lists: FactorLists,
    exclude: Vec<FactorLists>,
    extra: Vec<FactorLists>,
    /// Positions, among the points not excluded, of those that give no scenario: a repeated id
    /// or a configuration skipped as unsupported. Ascending.
    dropped: Vec<usize>,
    /// The scenarios a walk gives.
    count: usize,
    /// Stamped on every scenario (`pqtls run --clock`).
    clock: Option<pqtls_core::trace::Clock>,
    /// [`Experiment::matrix_sha256`], taken on the walk that checked the scenarios.
    ids_sha256: String,
    /// [`Experiment::matrix_sha256_before_transport_quic`], taken on the same walk.
    ids_sha256_before_transport_quic: Option<String>,
}

/// Where a point of the walk comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Origin {
    Matrix,
    /// A point of the matrix that an `[[exclude]]` table leaves out.
    Excluded,
    /// The `[[extra]]` table of this index.
    Extra(usize),
}

impl Expansion {
    /// Every point in order: the matrix's (the excluded ones marked), then each extra table's.
    fn walk(&self) -> impl Iterator<Item = (Point, Origin)> + '_ {
        let matrix = factor::points(&self.lists).map(move |p| {
            let out = self.exclude.iter().any(|ex| matches_lists(&p, ex));
            (p, if out { Origin::Excluded } else { Origin::Matrix })
        });
        let extras = self
            .extra
            .iter()
            .enumerate()
            .flat_map(move |(k, ex)| extra_points(&self.lists, ex).into_iter().map(move |p| (p, Origin::Extra(k))));
        matrix.chain(extras)
    }

    /// The scenarios, in order: the points not excluded less the dropped ones, stamped with
    /// the clock. Each was made and checked when the file was parsed.
    fn scenarios(&self) -> impl Iterator<Item = Scenario> + '_ {
        self.walk()
            .filter(|(_, origin)| *origin != Origin::Excluded)
            .enumerate()
            .filter(|(i, _)| self.dropped.binary_search(i).is_err())
            .filter_map(|(_, (point, _))| Scenario::from_canonical(&point.into_iter().collect()).ok())
            .filter_map(|s| match self.clock {
                Some(c) => s.with([("clock", c.name())]).ok(),
                None => Some(s),
            })
    }
}

impl Experiment {
    /// Reads and validates an experiment file (of at most [`factor::MAX_CONFIGURATIONS`]).
    pub fn load(path: &Path) -> Result<Experiment, Diagnostics> {
        Experiment::load_capped(path, factor::MAX_CONFIGURATIONS)
    }

    /// [`Experiment::load`] of a matrix of at most `max_configurations` (`pqtls run
    /// --max-configurations`).
    pub fn load_capped(path: &Path, max_configurations: u128) -> Result<Experiment, Diagnostics> {
        let read = crate::input::read_text(path, "the experiment file", crate::input::EXPERIMENT_LIMIT_BYTES);
        let failed = |message: String| Diagnostics {
            file: path.display().to_string(),
            items: vec![Diagnostic { line: 0, column: 0, message }],
        };
        let text = match read {
            Ok(Some(t)) => t,
            Ok(None) => return Err(failed("cannot read the experiment file: No such file or directory".into())),
            Err(e) => return Err(failed(e.to_string())),
        };
        Experiment::parse_capped(&text, path, max_configurations)
    }

    /// Parses and validates an experiment from its text; `path` names it in errors and gives
    /// the default name (the file stem).
    pub fn parse(text: &str, path: &Path) -> Result<Experiment, Diagnostics> {
        Experiment::parse_capped(text, path, factor::MAX_CONFIGURATIONS)
    }

    /// [`Experiment::parse`] of a matrix of at most `max_configurations`, counted before it is
    /// expanded.
    pub fn parse_capped(text: &str, path: &Path, max_configurations: u128) -> Result<Experiment, Diagnostics> {
        let mut p = Parser { text, diags: Vec::new(), max_configurations };
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

    /// An experiment made in code (`pqtls assess` makes its parts so): validated and expanded
    /// by parsing the text [`Experiment::to_toml`] writes for it, so it is what its file reads
    /// as. Its path is `<name>.toml`.
    pub fn new(
        name: &str,
        description: &str,
        kind: Kind,
        settings: Settings,
        matrix: Matrix,
        baseline: BaselineRule,
    ) -> Result<Experiment, Diagnostics> {
        let draft = Experiment {
            name: name.to_string(),
            description: description.to_string(),
            kind,
            path: PathBuf::new(),
            source: String::new(),
            settings,
            skip_unsupported: false,
            skipped: Vec::new(),
            excluded: 0,
            baseline,
            matrix,
            expansion: Expansion::default(),
        };
        Experiment::parse(&draft.to_toml(), Path::new(&format!("{name}.toml")))
    }

    /// The experiment as an experiment file (docs/experiments.md): parsing the text gives this
    /// experiment back (its path and source aside). Settings at their default are left out.
    pub fn to_toml(&self) -> String {
        use toml::{Table, Value};
        let strings = |values: &[String]| Value::Array(values.iter().map(|v| Value::String(v.clone())).collect());
        let lists =
            |lists: &FactorLists| -> Table { lists.iter().map(|(f, vals)| (f.clone(), strings(vals))).collect() };
        let mut doc = Table::new();
        doc.insert("name".into(), Value::String(self.name.clone()));
        if !self.description.is_empty() {
            doc.insert("description".into(), Value::String(self.description.clone()));
        }
        doc.insert("measurement".into(), Value::String(self.kind.name().into()));
        if self.skip_unsupported {
            doc.insert("skip_unsupported".into(), Value::Boolean(true));
        }
        let mut settings = settings_table(&self.settings);
        for (f, v) in &self.matrix.fixed {
            settings.insert(f.clone(), Value::String(v.clone()));
        }
        if !settings.is_empty() {
            doc.insert("settings".into(), Value::Table(settings));
        }
        doc.insert("matrix".into(), Value::Table(lists(&self.matrix.factors)));
        for (key, tables) in [("exclude", &self.matrix.exclude), ("extra", &self.matrix.extra)] {
            if !tables.is_empty() {
                doc.insert(key.into(), Value::Array(tables.iter().map(|t| Value::Table(lists(t))).collect()));
            }
        }
        if !self.baseline.factors.is_empty() {
            let rule = self.baseline.factors.iter().map(|(f, v)| (f.clone(), Value::String(v.clone()))).collect();
            doc.insert("baseline".into(), Value::Table(rule));
        }
        doc.to_string()
    }

    /// The scenarios to measure, in a deterministic order: the matrix (first factor
    /// outermost, values in file order) minus exclusions, then the extra points in file
    /// order; duplicates (by id) kept once. Made one at a time on each call: a run walks them,
    /// it never holds them.
    pub fn each_scenario(&self) -> impl Iterator<Item = Scenario> + '_ {
        self.expansion.scenarios()
    }

    /// How many scenarios [`Experiment::each_scenario`] gives.
    pub fn configurations(&self) -> usize {
        self.expansion.count
    }

    /// [`Experiment::each_scenario`] collected: for the experiments made in code (`assess`'s
    /// parts) and tests; a run walks them instead.
    pub fn scenarios(&self) -> Vec<Scenario> {
        self.each_scenario().collect()
    }

    /// The experiment with every scenario stamped by `clock` (`pqtls run FILE --clock
    /// instructions`): its results go to `<name>-<clock>`, beside the time-based ones, and
    /// under `instructions` its settings become [`Settings::for_counts`]. In-situ experiments
    /// only (the clock is the in-situ measurement's).
    pub fn with_clock(mut self, clock: pqtls_core::trace::Clock) -> pqtls_core::Result<Experiment> {
        if self.kind != Kind::Insitu {
            return Err(pqtls_core::Error::Unsupported(format!(
                "--clock applies to in-situ experiments; {} measures {}",
                self.name,
                self.kind.name()
            )));
        }
        // Every scenario takes the stamp (checked once here; the walks then stamp them alike).
        let mut ids = Sha256::new();
        for s in self.each_scenario() {
            ids_add(&mut ids, &s.with([("clock", clock.name())])?.id());
        }
        self.expansion.clock = Some(clock);
        self.expansion.ids_sha256 = hex(&ids.finalize());
        self.name = format!("{}-{}", self.name, clock.name());
        if clock == pqtls_core::trace::Clock::Instructions {
            self.settings = self.settings.for_counts();
        }
        Ok(self)
    }

    /// SHA-256 of the file's text, hex.
    pub fn source_sha256(&self) -> String {
        hex(&Sha256::digest(self.source.as_bytes()))
    }

    /// SHA-256 over the expanded configuration ids: equal when the matrix is the same.
    pub fn matrix_sha256(&self) -> String {
        self.expansion.ids_sha256.clone()
    }

    /// The matrix digest a load experiment over QUIC had before `http = "3"` folded into
    /// `transport = "quic"` (its ids spelled the old way,
    /// [`pqtls_core::scenario::Scenario::load_id_before_transport_quic`]): a shard begun then
    /// is resumed by this version. `None` when no id changed.
    pub fn matrix_sha256_before_transport_quic(&self) -> Option<String> {
        self.expansion.ids_sha256_before_transport_quic.clone()
    }
}

/// SHA-256 over configuration ids, one per line: a matrix's digest (the manifest's
/// `matrix_sha256`).
pub fn ids_sha256(ids: impl IntoIterator<Item = String>) -> String {
    let mut h = Sha256::new();
    for id in ids {
        ids_add(&mut h, &id);
    }
    hex(&h.finalize())
}

/// One id into a matrix digest ([`ids_sha256`]).
fn ids_add(h: &mut Sha256, id: &str) {
    h.update(id.as_bytes());
    h.update(b"\n");
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

/// A factor value as written in TOML.
#[derive(Clone, Debug)]
enum FactorLit {
    Str(String),
    Bool(bool),
}

/// ` (did you mean 'loops'?)` when a known name is close to `given`.
fn did_you_mean<S: ToString>(given: &str, known: impl IntoIterator<Item = S>) -> String {
    let known: Vec<String> = known.into_iter().map(|k| k.to_string()).collect();
    pqtls_core::error::suggestion(given, &known).map_or(String::new(), |s| format!(" (did you mean '{s}'?)"))
}

/// Canonical value of a factor from its written form (through the factor table); the error
/// lists what would work.
fn canonical(factor: &str, v: &FactorLit) -> Result<String, String> {
    let f = factor::factor(factor).ok_or_else(|| format!("unknown factor '{factor}'"))?;
    let text = match v {
        FactorLit::Bool(b) if f.boolean => b.to_string(),
        FactorLit::Bool(b) => return Err(format!("{factor} takes a string, not {b}")),
        FactorLit::Str(s) => s.clone(),
    };
    (f.canonical)(&text).map_err(|e| e.to_string())
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
    /// The most configurations the matrix may describe.
    max_configurations: u128,
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
        self.top_level_keys(doc);
        let name = self.name(doc, path);
        let description = doc.get("description").and_then(|v| self.string(v, "description")).unwrap_or_default();
        let skip_unsupported =
            doc.get("skip_unsupported").and_then(|v| self.bool(v, "skip_unsupported")).unwrap_or(false);
        let (settings, factor_defaults) = match doc.get("settings") {
            Some(v) => self.settings(v),
            None => (Settings::default(), Vec::new()),
        };
        let kind = self.kind(doc);
        self.settings_apply(doc, kind);

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
        let baseline = self.baseline(doc);
        if !self.diags.is_empty() {
            return None;
        }

        let written = |tables: &[(String, Values)]| -> FactorLists {
            tables.iter().map(|(f, vals)| (f.clone(), vals.iter().map(|(v, _)| v.clone()).collect())).collect()
        };
        let matrix = Matrix {
            factors: written(&factors),
            fixed: factor_defaults.iter().map(|(f, v, _)| (f.clone(), v.clone())).collect(),
            exclude: excludes.iter().map(|(t, _)| written(t)).collect(),
            extra: extras.iter().map(|(t, _)| written(t)).collect(),
        };

        // Expansion.
        let lists = factor_lists(&factors, &factor_defaults, &matrix_span);
        // Counted before anything is expanded: the matrix's product and every extra table's.
        let named =
            |l: &[(String, Values)]| -> Vec<(String, usize)> { l.iter().map(|(f, v)| (f.clone(), v.len())).collect() };
        let count = |l: &[(String, usize)]| {
            factor::count_points(&l.iter().map(|(f, n)| (f.as_str(), vec![(); *n])).collect::<Vec<_>>())
        };
        let (mut n, how) = count(&named(&lists));
        for (ex, _) in &extras {
            n = n.saturating_add(count(&named(ex)).0);
        }
        if let Some(why) = factor::too_many_configurations(n, &how, self.max_configurations) {
            self.err(matrix_span, why);
            return None;
        }
        let mut expansion = Expansion {
            lists: written(&lists),
            exclude: matrix.exclude.clone(),
            extra: matrix.extra.clone(),
            ..Expansion::default()
        };
        let spans: Vec<Range<usize>> = extras.iter().map(|(_, span)| span.clone()).collect();
        let (excluded, skipped) = self.check_scenarios(&mut expansion, &matrix_span, &spans, kind, skip_unsupported);
        if !self.diags.is_empty() {
            return None;
        }
        if expansion.count == 0 {
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
            kind,
            path: path.to_path_buf(),
            source: self.text.to_string(),
            settings,
            skip_unsupported,
            skipped,
            excluded,
            baseline,
            matrix,
            expansion,
        })
    }

    /// An error for each top-level key the format does not have.
    fn top_level_keys(&mut self, doc: &DeTable) {
        for (k, _) in doc.iter() {
            if !TOP_LEVEL.contains(&k.get_ref().as_ref()) {
                let msg = format!(
                    "unknown key '{}'{}; the top level takes: {}{}",
                    k.get_ref(),
                    did_you_mean(k.get_ref(), TOP_LEVEL.iter().copied()),
                    TOP_LEVEL.join(", "),
                    if canonical_factor(k.get_ref()).is_some() { " (factors go in [matrix])" } else { "" }
                );
                self.err(k.span(), msg);
            }
        }
    }

    /// `name` (by default the file's stem), which must be a directory name.
    fn name(&mut self, doc: &DeTable, path: &Path) -> String {
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
        name
    }

    /// Refuses a setting the experiment's measurement does not read (`loops` in a load
    /// experiment, `duration` in an in-situ one): accepted, it would be ignored.
    fn settings_apply(&mut self, doc: &DeTable, kind: Kind) {
        let Some(t) = doc.get("settings").and_then(|v| v.get_ref().as_table()) else { return };
        for (k, _) in t.iter() {
            let Some(kinds) = setting_kinds(k.get_ref()) else { continue };
            if !kinds.contains(&kind) {
                let names: Vec<&str> = kinds.iter().map(|k| k.name()).collect();
                let theirs: Vec<&str> = SETTINGS
                    .iter()
                    .copied()
                    .filter(|s| setting_kinds(s).is_some_and(|ks| ks.contains(&kind)))
                    .collect();
                self.err(
                    k.span(),
                    format!(
                        "'{}' is a setting of the {} measurement; this experiment measures {} (measurement = \"{}\"), \
                         which would ignore it: remove it{}",
                        k.get_ref(),
                        names.join(" and "),
                        kind.name(),
                        kind.name(),
                        if theirs.is_empty() {
                            String::new()
                        } else {
                            format!(" ({} takes: {})", kind.name(), theirs.join(", "))
                        }
                    ),
                );
            }
        }
    }

    /// `measurement` (in-situ by default).
    fn kind(&mut self, doc: &DeTable) -> Kind {
        match doc.get("measurement") {
            Some(v) => match self.string(v, "measurement").map(|m| Kind::parse(&m)) {
                Some(Ok(k)) => k,
                Some(Err(e)) => {
                    self.err(v.span(), e.to_string());
                    Kind::Insitu
                }
                None => Kind::Insitu,
            },
            None => Kind::Insitu,
        }
    }

    /// `[baseline]`: one value per factor named.
    fn baseline(&mut self, doc: &DeTable) -> BaselineRule {
        let Some(v) = doc.get("baseline") else { return BaselineRule::default() };
        let Some(t) = self.table(v, "baseline") else { return BaselineRule::default() };
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

    /// Walks the expansion once, making every scenario: those the measurement cannot run are
    /// skipped (`skip_unsupported`) or reported, one diagnostic per distinct reason; a repeated
    /// id is kept once. Fills in what the expansion drops and how many it gives; returns how
    /// many points the `[[exclude]]` tables left out, and the skipped configurations.
    fn check_scenarios(
        &mut self,
        expansion: &mut Expansion,
        matrix_span: &Range<usize>,
        extra_spans: &[Range<usize>],
        kind: Kind,
        skip_unsupported: bool,
    ) -> (usize, Vec<Skipped>) {
        // The ids seen so far: the one thing a walk holds per configuration, while it lasts.
        let mut seen = HashSet::new();
        let mut skipped = Vec::new();
        let (mut excluded, mut count, mut dropped) = (0, 0, Vec::new());
        // Unsupported combinations: one diagnostic per distinct reason, with a count.
        let mut unsupported: Vec<(String, Range<usize>, String, usize)> = Vec::new();
        // The matrix's digests ([`Experiment::matrix_sha256`]), taken on the way.
        let (mut ids, mut ids_before_quic, mut ids_changed) = (Sha256::new(), Sha256::new(), false);
        let mut i = 0;
        for (point, origin) in expansion.walk() {
            let span = match origin {
                Origin::Excluded => {
                    excluded += 1;
                    continue;
                }
                Origin::Matrix => matrix_span.clone(),
                Origin::Extra(k) => extra_spans[k].clone(),
            };
            let at = i;
            i += 1;
            let cfg = match Scenario::from_canonical(&point.into_iter().collect()) {
                Ok(c) => c,
                Err(e) => {
                    self.err(span, e.to_string());
                    continue;
                }
            };
            let id = cfg.id();
            if seen.contains(&id) {
                dropped.push(at);
                continue;
            }
            if let Err(e) = cfg.validate_for(kind) {
                let reason = e.to_string();
                dropped.push(at);
                if skip_unsupported {
                    skipped.push(Skipped { id: id.clone(), reason });
                } else if let Some(u) = unsupported.iter_mut().find(|u| u.0 == reason) {
                    u.3 += 1;
                } else {
                    unsupported.push((reason, span, id.clone(), 1));
                }
                seen.insert(id);
                continue;
            }
            ids_add(&mut ids, &id);
            if kind == Kind::Load {
                let before = cfg.load_id_before_transport_quic();
                ids_changed |= before.is_some();
                ids_add(&mut ids_before_quic, before.as_deref().unwrap_or(&id));
            }
            seen.insert(id);
            count += 1;
        }
        for (reason, span, id, n) in unsupported {
            let more = if n > 1 { format!(" (and {} more configurations)", n - 1) } else { String::new() };
            self.err(
                span,
                format!("configuration {id}{more}: {reason}; exclude it with an [[exclude]] table, or set skip_unsupported = true to skip such combinations and list them"),
            );
        }
        expansion.dropped = dropped;
        expansion.count = count;
        expansion.ids_sha256 = hex(&ids.finalize());
        expansion.ids_sha256_before_transport_quic = ids_changed.then(|| hex(&ids_before_quic.finalize()));
        (excluded, skipped)
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
                    self.err(
                        item.span(),
                        format!("[[{what}]] names no factor; known factors: {}", factor::names().join(", ")),
                    );
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
                    format!(
                        "unknown factor '{}'{} in {what}; known factors: {}",
                        k.get_ref(),
                        did_you_mean(k.get_ref(), factor::names()),
                        factor::names().join(", ")
                    ),
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

    /// The settings, and the factor values given there for the whole matrix.
    fn settings(&mut self, v: &Spanned<DeValue>) -> (Settings, Vec<(String, String, Range<usize>)>) {
        let mut s = Settings::default();
        let Some(t) = self.table(v, "settings") else { return (s, Vec::new()) };
        for (k, _) in t.iter() {
            if !SETTINGS.contains(&k.get_ref().as_ref()) {
                self.err(
                    k.span(),
                    format!(
                        "unknown setting '{}'{}; [settings] takes: {}",
                        k.get_ref(),
                        did_you_mean(k.get_ref(), SETTINGS.iter().copied()),
                        SETTINGS.join(", ")
                    ),
                );
            }
        }
        if let Some(x) = t.get("warmup") {
            s.warmup = self.uint(x, "warmup").unwrap_or(s.warmup);
        }
        self.load_settings(t, &mut s);
        self.loops(v, t, &mut s);
        if let Some(x) = t.get("quantiles") {
            if let Some(q) = self.quantiles(x) {
                s.quantiles = q;
            }
        }
        let factor_defaults = self.factor_defaults(t);
        if let Some(x) = t.get("raw_samples") {
            s.raw_samples = self.bool(x, "raw_samples").unwrap_or(false);
        }
        if let Some(x) = t.get("memory") {
            s.memory = self.bool(x, "memory").unwrap_or(false);
        }
        self.resident_settings(t, &mut s);
        (s, factor_defaults)
    }

    /// The resident measurement's counts of idle connections (`held = [1000, 10000]`) and the
    /// wait before each reading (`settle = "500ms"`).
    fn resident_settings(&mut self, t: &DeTable, s: &mut Settings) {
        if let Some(x) = t.get("held") {
            match x.get_ref() {
                DeValue::Array(items) => {
                    let counts: Vec<u64> = items.iter().filter_map(|i| self.uint(i, "held")).collect();
                    if counts.len() == items.len() {
                        match pqtls_core::settings::ResidentSettings::held_from(&counts) {
                            Ok(h) => s.resident.held = h,
                            Err(e) => self.err(x.span(), e.to_string()),
                        }
                    }
                }
                _ => self.err(x.span(), "held: give a list of connection counts, e.g. held = [1000, 10000]"),
            }
        }
        if let Some(x) = t.get("settle") {
            if let Some(text) = self.string(x, "settle") {
                match pqtls_core::units::duration_ns(&text) {
                    Ok(ns) => s.resident.settle_ms = ns / 1_000_000,
                    Err(e) => self.err(x.span(), format!("settle: {e}; give e.g. \"500ms\"")),
                }
            }
        }
    }

    /// The load measurement's times (strings with a unit: "10s", "500ms") and request count.
    fn load_settings(&mut self, t: &DeTable, s: &mut Settings) {
        for (key, field) in [
            ("duration", &mut s.load.duration_ms),
            ("warmup_time", &mut s.load.warmup_ms),
            ("timeout", &mut s.load.timeout_ms),
        ] {
            if let Some(x) = t.get(key) {
                if let Some(text) = self.string(x, key) {
                    match pqtls_core::units::duration_ns(&text) {
                        Ok(ns) if key != "warmup_time" && ns < 1_000_000 => {
                            self.err(x.span(), format!("{key} = \"{text}\" is under 1 ms; give e.g. \"10s\""))
                        }
                        Ok(ns) => *field = ns / 1_000_000,
                        Err(e) => self.err(x.span(), format!("{key}: {e}; give e.g. \"10s\"")),
                    }
                }
            }
        }
        if let Some(x) = t.get("requests") {
            s.load.requests = self.uint(x, "requests");
            if s.load.requests == Some(0) {
                self.err(x.span(), "requests must be at least 1");
            }
        }
    }

    /// How many handshakes: a fixed `loops`, or a `precision` to reach between `min_loops` and
    /// `max_loops` (not both).
    fn loops(&mut self, v: &Spanned<DeValue>, t: &DeTable, s: &mut Settings) {
        let loops = t.get("loops").and_then(|x| self.uint(x, "loops"));
        let precision = t.get("precision").and_then(|x| self.precision(x));
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
        // The time cap per configuration: a duration with its unit.
        if let Some(x) = t.get("max_time") {
            match x.get_ref() {
                DeValue::String(text) => match pqtls_core::units::duration_ns(text) {
                    Ok(ns) if ns < 1_000_000 => self.err(
                        x.span(),
                        format!(
                            "max_time = \"{text}\" is under 1 ms; give the most time one configuration may take, e.g. \"20s\""
                        ),
                    ),
                    Ok(ns) => s.max_time_ms = Some(ns / 1_000_000),
                    Err(e) => self.err(x.span(), format!("max_time: {e}; give e.g. \"20s\"")),
                },
                other => self.err(
                    x.span(),
                    format!("max_time must be a string, a duration with its unit (e.g. \"20s\"), not a {}", other.type_str()),
                ),
            }
        }
    }

    /// `precision = "2%"` (or 0.02).
    fn precision(&mut self, x: &Spanned<DeValue>) -> Option<f64> {
        match x.get_ref() {
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
        }
    }

    /// `quantiles = [15, 50, 99]` (or "15,50,99").
    fn quantiles(&mut self, x: &Spanned<DeValue>) -> Option<Quantiles> {
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
                self.err(x.span(), format!("quantiles must be a list like [15, 50, 99], not a {}", other.type_str()));
                return None;
            }
        };
        if text.is_empty() {
            return None;
        }
        match Quantiles::parse(&text) {
            Ok(q) => Some(q),
            Err(e) => {
                self.err(x.span(), e.to_string());
                None
            }
        }
    }

    /// Factor values given in `[settings]` for the whole matrix (`transport = "tcp"`, …).
    fn factor_defaults(&mut self, t: &DeTable) -> Vec<(String, String, Range<usize>)> {
        let mut out: Vec<(String, String, Range<usize>)> = Vec::new();
        for name in FACTOR_SETTINGS {
            if let Some(x) = t.get(*name) {
                if let Some(text) = self.string(x, name) {
                    match factor::canonical(name, &text) {
                        Ok(c) => {
                            let f = factor::factor(name).map_or(*name, |f| f.name);
                            if out.iter().any(|(n, _, _)| n == f) {
                                self.err(x.span(), format!("{f} is given twice in [settings] (mode is its old name)"));
                            }
                            out.push((f.to_string(), c, x.span()));
                        }
                        Err(e) => self.err(x.span(), e.to_string()),
                    }
                }
            }
        }
        out
    }
}

/// `[settings]` as the parser reads it, for what differs from the defaults (the loop keys as
/// the parser combines them: `loops` sets `min_loops` and `max_loops` too; `precision` clears
/// `loops`).
fn settings_table(s: &Settings) -> toml::Table {
    use toml::Value;
    let d = Settings::default();
    let int = |n: u64| Value::Integer(n as i64);
    // Whole seconds as seconds ("10s"), else milliseconds.
    let ms = |ms: u64| {
        Value::String(if ms > 0 && ms.is_multiple_of(1000) { format!("{}s", ms / 1000) } else { format!("{ms}ms") })
    };
    let mut t = toml::Table::new();
    if s.warmup != d.warmup {
        t.insert("warmup".into(), int(s.warmup));
    }
    match (s.precision, s.loops) {
        (Some(p), _) => {
            t.insert("precision".into(), Value::Float(p));
            t.insert("min_loops".into(), int(s.min_loops));
            t.insert("max_loops".into(), int(s.max_loops));
        }
        (None, Some(n)) if s.loops != d.loops => {
            t.insert("loops".into(), int(n));
        }
        (None, _) => {
            for (key, value, default) in
                [("min_loops", s.min_loops, d.min_loops), ("max_loops", s.max_loops, d.max_loops)]
            {
                if value != default {
                    t.insert(key.into(), int(value));
                }
            }
        }
    }
    if let Some(cap) = s.max_time_ms {
        t.insert("max_time".into(), ms(cap));
    }
    if s.quantiles != d.quantiles {
        // Percent, as the parser rounds them (to 1e-9 %): whole ones as integers.
        let percents = s.quantiles.0.iter().map(|q| {
            let p = (q * 1e11).round() / 1e9;
            if p.fract() == 0.0 {
                Value::Integer(p as i64)
            } else {
                Value::Float(p)
            }
        });
        t.insert("quantiles".into(), Value::Array(percents.collect()));
    }
    for (key, on) in [("raw_samples", s.raw_samples), ("memory", s.memory)] {
        if on {
            t.insert(key.into(), Value::Boolean(true));
        }
    }
    let (l, dl) = (&s.load, &d.load);
    for (key, value, default) in [
        ("duration", l.duration_ms, dl.duration_ms),
        ("warmup_time", l.warmup_ms, dl.warmup_ms),
        ("timeout", l.timeout_ms, dl.timeout_ms),
    ] {
        if value != default {
            t.insert(key.into(), ms(value));
        }
    }
    if let Some(n) = l.requests {
        t.insert("requests".into(), int(n));
    }
    if s.resident.held != d.resident.held {
        t.insert("held".into(), Value::Array(s.resident.held.iter().map(|&n| int(n)).collect()));
    }
    if s.resident.settle_ms != d.resident.settle_ms {
        t.insert("settle".into(), ms(s.resident.settle_ms));
    }
    t
}

fn canonical_factor(name: &str) -> Option<&'static str> {
    factor::factor(name).map(|f| f.name)
}

fn example(name: &str) -> &'static str {
    factor::factor(name).map_or("group = [\"x25519\"]", |f| f.example)
}

/// Every factor's values in the matrix: its list, or one value (the `[settings]` default
/// given for it, else the factor's own default), in factor-table order.
fn factor_lists(
    factors: &[(String, Values)],
    defaults: &[(String, String, Range<usize>)],
    matrix_span: &Range<usize>,
) -> Vec<(String, Values)> {
    FACTORS
        .iter()
        .map(|f| {
            let vals = factors.iter().find(|(n, _)| n == f.name).map(|(_, v)| v.clone()).unwrap_or_else(|| {
                let given = defaults.iter().find(|(n, _, _)| n == f.name);
                let v = given.map_or(f.default.unwrap_or(""), |(_, v, _)| v.as_str());
                vec![(v.to_string(), matrix_span.clone())]
            });
            (f.name.to_string(), vals)
        })
        .collect()
}

/// The points of one `[[extra]]` table: the product of its lists, unnamed factors taking the
/// matrix's first value.
fn extra_points(lists: &FactorLists, extra: &FactorLists) -> Vec<Point> {
    let base: Vec<(String, String)> = lists.iter().map(|(f, vals)| (f.clone(), vals[0].clone())).collect();
    let mut partial: Vec<Vec<(String, String)>> = vec![base];
    for (f, vals) in extra {
        partial = partial
            .into_iter()
            .flat_map(|p| {
                vals.iter().map(move |v| {
                    let mut p = p.clone();
                    if let Some(slot) = p.iter_mut().find(|(n, _)| n == f) {
                        slot.1 = v.clone();
                    }
                    p
                })
            })
            .collect();
    }
    partial
}

/// Whether `point` matches an `[[exclude]]` table: each factor it names takes one of its values.
fn matches_lists(point: &[(String, String)], rule: &FactorLists) -> bool {
    rule.iter().all(|(f, vals)| point.iter().find(|(n, _)| n == f).is_some_and(|(_, v)| vals.contains(v)))
}

/// 1-based line and column (in characters) of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = text.get(..offset).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}
