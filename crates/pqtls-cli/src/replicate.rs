//! `pqtls replicate STUDY`: a reference study's published tables next to pqtls' own figures,
//! one page per study (docs/replication.md).
//!
//! The study's figures are data (replications/*.toml, compiled in: `pqtls_export::replication`).
//! The configurations its tables and quoted figures name are run in parts, one per measurement
//! kind (in situ; load, one point per client-thread count; transfer, in the network lab, which
//! needs root — without it the part is not run and its cells say why): each part is written as an
//! experiment file (`parts/<kind>.toml`) in the replication's directory and run by `pqtls run`
//! (this program, as a child) into its own store (`<kind>/`), within its share of the budget, so
//! a replication resumes as every run does; the page is made from the records they left.

use crate::context::Ending;
use anyhow::{bail, Context, Result};
use pqtls_core::factor::{self, Kind};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::{LoadSettings, Settings};
use pqtls_core::stats::Quantiles;
use pqtls_core::units;
use pqtls_export::replication::{self, Missing, Study};
use pqtls_export::ResultSet;
use pqtls_store::experiment::{BaselineRule, Experiment, FactorLists, Matrix};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct ReplicateArgs {
    /// The study, by name or number (`pqtls replicate --list` names them).
    #[arg(required_unless_present = "list")]
    pub study: Option<String>,
    /// List the studies: number, name, title, configurations run, published cells.
    #[arg(long, conflicts_with = "study")]
    pub list: bool,
    /// About how long the measurements may take, shared between the study's parts (in situ,
    /// load, transfer) in proportion to their least times; more gives tighter intervals and longer
    /// load and transfer windows.
    #[arg(long, default_value = "10m")]
    pub budget: String,
    /// Root of the results: the replication goes to <results>/replicate-<study>/, so running
    /// it again resumes it.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Move this study's earlier results aside and start again.
    #[arg(long)]
    pub fresh: bool,
    /// Also write the HTML page here (it is always written as report.html in the results).
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Also write the Markdown page here (always written as report.md in the results).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// One line per configuration instead of progress bars (batch logs).
    #[arg(long)]
    pub no_progress: bool,
    /// Write the page from what is stored, measuring nothing (an interrupted run stays
    /// resumable).
    #[arg(long)]
    pub page_only: bool,
    /// Directory of the PKI cache.
    #[arg(long, default_value_os_t = crate::context::default_pki_dir())]
    pub pki: PathBuf,
}

/// The shortest run of one configuration in situ: 100 warm-up and 200 measured handshakes (the
/// least the precision rule accepts) of the slowest configuration the studies name, with its PKI.
const MIN_S_PER_CONFIG: f64 = 5.0;

/// The share of the in-situ part's budget the configurations' handshakes get, split evenly into
/// their time caps (`max_time`); the rest is for what is not a handshake: the chains' keys and
/// certificates (SLH-DSA's take seconds), the contexts, the child process, the page.
const HANDSHAKE_SHARE: f64 = 0.8;

/// A loop cap the time cap reaches first: more handshakes per second than this VM runs any
/// configuration in memory mode (a debug build: ~340/s for an ML-DSA chain on a quiet
/// machine); it bounds the samples kept in memory.
const MAX_HANDSHAKES_PER_S: f64 = 1000.0;

/// What a load point costs beyond its warm-up and measured time: starting its server
/// (`pqtls serve`) and client threads, stopping them (~0.3 s on this VM; the PKI is cached).
const LOAD_OVERHEAD_S: f64 = 0.5;

/// The shortest load point: 0.5 s of warm-up, 1 s measured, its overhead.
const MIN_S_PER_LOAD_POINT: f64 = 0.5 + 1.0 + LOAD_OVERHEAD_S;

/// A load transaction not done after this long is a `timeout` error: SLH-DSA-SHA2-128s signs
/// in ~0.1–0.5 s, and with 8 clients queued on the server, the last waits seconds.
const LOAD_TIMEOUT_MS: u64 = 30_000;

/// What a transfer point costs beyond its warm-up and measured time: starting its server in the
/// lab's namespace, setting its routes' windows, stopping it (the link is verified once for the
/// points on it: ~0.6 s a point over study 004's 16 on this VM).
const TRANSFER_OVERHEAD_S: f64 = 1.0;

/// A transfer point's warm-up: the first connections (the server's caches, the routes' metrics).
const TRANSFER_WARMUP_S: f64 = 0.5;

/// A transfer point's shortest measured time: at 50 ms RTT a dozen connections of ~0.2–0.3 s.
const MIN_TRANSFER_S: f64 = 3.5;

/// The shortest transfer point: its warm-up, its shortest measured time, its overhead.
const MIN_S_PER_TRANSFER_POINT: f64 = TRANSFER_WARMUP_S + MIN_TRANSFER_S + TRANSFER_OVERHEAD_S;

/// A transfer point stops at this many transfers if its time lasts (a median's interval narrows
/// little beyond; the study's points run one connection at a time).
const TRANSFER_REQUESTS: u64 = 200;

/// A transfer not done after this long is a `timeout` error.
const TRANSFER_TIMEOUT_MS: u64 = 30_000;

/// The measurement kinds a replication runs, each as a part of its own (its experiment file
/// `parts/<kind>.toml`, its store `<kind>/`), in this order.
const PART_KINDS: [Kind; 3] = [Kind::Insitu, Kind::Load, Kind::Transfer];

/// One part of a replication: the configurations one measurement kind runs for the study.
struct Part {
    kind: Kind,
    configs: Vec<Scenario>,
}

impl Part {
    /// The study's parts that have configurations to run, in [`PART_KINDS`]' order.
    fn of(study: &Study) -> Vec<Part> {
        PART_KINDS
            .into_iter()
            .map(|kind| Part { kind, configs: study.configs(kind.name()) })
            .filter(|p| !p.configs.is_empty())
            .collect()
    }

    fn name(&self) -> &'static str {
        self.kind.name()
    }

    /// `the in-situ part`, `the load part`.
    fn what(&self) -> String {
        match self.kind {
            Kind::Insitu => "the in-situ part".into(),
            k => format!("the {} part", k.name()),
        }
    }

    /// `27 configurations in situ`, `72 load points`.
    fn count(&self) -> String {
        match self.kind {
            Kind::Insitu => format!("{} configurations in situ", self.configs.len()),
            k => format!("{} {} points", self.configs.len(), k.name()),
        }
    }

    /// The least time one configuration of the part takes, and why.
    fn min_s_each(&self) -> (f64, &'static str) {
        match self.kind {
            Kind::Load => (MIN_S_PER_LOAD_POINT, "0.5 s warm-up, 1 s measured, its server's start"),
            Kind::Transfer => {
                (MIN_S_PER_TRANSFER_POINT, "0.5 s warm-up, 3.5 s of transfers, its server's start in the lab")
            }
            _ => (MIN_S_PER_CONFIG, "100 warm-up and 200 measured handshakes"),
        }
    }

    fn min_s(&self) -> f64 {
        self.min_s_each().0 * self.configs.len() as f64
    }

    /// The part's settings within its share of the budget.
    fn settings(&self, share_s: f64) -> Settings {
        match self.kind {
            Kind::Load => load_settings(share_s, self.configs.len()),
            Kind::Transfer => transfer_settings(share_s, self.configs.len()),
            _ => insitu_settings(share_s, self.configs.len()),
        }
    }

    /// Whether this process can run the part: a transfer needs the network lab, which needs
    /// root (`Err`: why not, to say on the page).
    fn can_run(&self) -> Result<()> {
        crate::context::can_measure(self.kind, &self.configs)
    }

    /// The page's line on how the part measured.
    fn measured(&self, study: &Study, settings: &Settings, share_s: f64) -> String {
        let share = format!("{} of the budget", human(share_s));
        match self.kind {
            Kind::Transfer => {
                let l = &settings.load;
                let first = self.configs.first();
                let value = |n: &str| first.map_or("?", |s| s.value(n)).to_string();
                format!(
                    "**Measured (transfer, {share})**: {} transfer points in the network lab (as root: network \
                     namespaces joined by an emulated link of {} RTT and {}, the row's initcwnd on the client's and \
                     the server's routes) through `pqtls serve` on {}: one new TLS connection per transfer, one at a \
                     time, the column's response size; {} warm-up, then transfers for {} (at most {}) each, a \
                     transfer's timeout {}; TTLB = connect → the response's last byte, TTFB = connect → its first \
                     byte, medians; the delay emulator, client and server share this VM's 2 cores (a rate of 1 Gbit/s \
                     is beyond its emulator: not run)",
                    self.configs.len(),
                    value("rtt"),
                    value("bandwidth"),
                    study.stack,
                    human_ms(l.warmup_ms),
                    human_ms(l.duration_ms),
                    l.requests.unwrap_or_default(),
                    human_ms(l.timeout_ms)
                )
            }
            Kind::Load => {
                let l = &settings.load;
                let configs = self.configs.iter().map(|s| s.with([("threads", "1")]).map(|s| s.id()));
                let distinct = configs.flatten().collect::<std::collections::BTreeSet<_>>().len();
                let threads: std::collections::BTreeSet<u32> =
                    self.configs.iter().filter_map(|s| s.value("threads").parse().ok()).collect();
                let threads: Vec<String> = threads.iter().map(u32::to_string).collect();
                format!(
                    "**Measured (load, {share})**: {} load points ({distinct} configurations × {} client threads, each \
                     thread one connection at a time) through `pqtls serve` on {} on this machine's loopback — not the \
                     study's HAProxy, whose OpenSSL lacks FrodoKEM, Falcon, SLH-DSA, the OQS hybrids and the composite, \
                     so one terminator keeps the table's ratios comparable; one TLS connection per request (keep-alive \
                     off), {} per response, {} warm-up then {} measured each (a transaction's timeout {}); \
                     connections/s = requests completed per measured second; the client threads and the server share \
                     this VM's 2 cores",
                    self.configs.len(),
                    threads.join("/"),
                    study.stack,
                    self.configs.first().map_or("?", |s| s.value("response_size")),
                    human_ms(l.warmup_ms),
                    human_ms(l.duration_ms),
                    human_ms(l.timeout_ms)
                )
            }
            _ => format!(
                "**Measured (in situ, {share})**: {} configurations in situ on {} (memory transport), {} warm-up \
                 handshakes, then until the median's 95 % interval is within ±{:.0} % ({} handshakes at least), each \
                 within its time cap of {} ({:.0} % of the part's budget shared out; the warm-up takes at most half of \
                 it) — a configuration the cap stops first (ML-DSA signing's rejection sampling keeps its interval \
                 wide, SLH-DSA signs slowly) is listed below with the handshakes and the interval it reached; \
                 interleaved in windows of 16, a configuration that met its rule staying on as a thin drift reference \
                 (`pqtls run --stop thin`)",
                self.configs.len(),
                study.stack,
                settings.warmup,
                settings.precision.unwrap_or(0.0) * 100.0,
                settings.min_loops,
                human(settings.max_time_s().unwrap_or(0.0)),
                HANDSHAKE_SHARE * 100.0
            ),
        }
    }
}

/// How a part's child ended, when not complete.
enum PartEnd {
    Complete,
    Interrupted,
    /// The exit code replicate ends with and what the page's reader is told.
    Failed(i32, String),
}

pub fn run(args: ReplicateArgs) -> Result<Ending> {
    if args.list {
        return list().map(|()| Ending::Complete);
    }
    let name = args.study.as_deref().unwrap_or_default();
    let study = replication::study(name)?;
    let budget_s = units::duration_ns(&args.budget).context("--budget")? as f64 / 1e9;
    // A part this process cannot run (a transfer without root) is left out, its budget going
    // to the others; its cells say why.
    let mut parts = Part::of(&study);
    let mut not_run: Vec<(&'static str, String)> = Vec::new();
    let mut not_run_lines: Vec<String> = Vec::new();
    if !args.page_only {
        parts.retain(|p| match p.can_run() {
            Ok(()) => true,
            Err(e) => {
                not_run.push((
                    p.name(),
                    format!(
                        "{} was not run: {e} — run `pqtls replicate {}` as root to measure it",
                        p.what(),
                        study.name
                    ),
                ));
                not_run_lines.push(format!(
                    "**Not run**: {} ({}): {e}; its cells say so, and the budget went to the other parts",
                    p.what(),
                    p.count()
                ));
                false
            }
        });
    }
    let min_s: f64 = parts.iter().map(Part::min_s).sum();
    if !args.page_only && !parts.is_empty() && budget_s < min_s {
        let each: Vec<String> = parts
            .iter()
            .map(|p| {
                let (s, why) = p.min_s_each();
                format!("{}, one needs at least {} ({why})", p.count(), as_budget(s))
            })
            .collect();
        bail!(
            "--budget {} is too small: study {} runs {}; at least {} in all (e.g. --budget {})",
            args.budget,
            study.name,
            each.join(", and "),
            as_budget(min_s),
            as_budget(min_s * 2.0)
        );
    }
    let dir = args.results.join(format!("replicate-{}", study.name));
    if args.fresh && dir.exists() {
        let aside = dir.with_extension(format!("old-{}", std::process::id()));
        std::fs::rename(&dir, &aside).with_context(|| format!("moving {} aside", dir.display()))?;
        crate::progress::line(&format!("earlier results moved to {}", aside.display()));
    }
    let files = dir.join("parts");
    std::fs::create_dir_all(&files).with_context(|| format!("creating {}", files.display()))?;
    let started = Instant::now();
    // One flag for the whole replication: the handler is set once per process, so every part's
    // child is stopped by the same Ctrl-C.
    let interrupt = crate::context::interrupt_flag();
    let mut interrupted = false;
    let mut failed: Vec<(i32, String)> = Vec::new();
    let mut how = vec![format!(
        "**pqtls**: `pqtls replicate {} --budget {}` (version {}, commit {}); results in `{}`",
        study.name,
        args.budget,
        crate::VERSION,
        crate::COMMIT,
        dir.display()
    )];
    how.extend(not_run_lines);
    if args.page_only {
        how.push(
            "**Measured**: nothing by this invocation (`--page-only`): the page is made from the records stored".into(),
        );
    } else if parts.is_empty() {
        how.push("**Measured**: nothing — no table of this study is one pqtls measures in situ, under load or in the network lab here; the page shows each figure and why".into());
    } else {
        // The budget is shared in proportion to the parts' least times: every part gets the
        // same multiple of its minimum.
        let shares: Vec<f64> = parts.iter().map(|p| budget_s * p.min_s() / min_s).collect();
        if parts.len() > 1 {
            let split: Vec<String> =
                parts.iter().zip(&shares).map(|(p, s)| format!("{} {} ({})", p.name(), human(*s), p.count())).collect();
            how.push(format!(
                "**Budget**: {} shared between the parts in proportion to their least times: {}",
                args.budget,
                split.join(", ")
            ));
        }
        crate::progress::line(&format!(
            "replication of study {} ({}) in {}: {} within about {}",
            study.id,
            study.name,
            dir.display(),
            parts.iter().map(Part::count).collect::<Vec<_>>().join(" and "),
            args.budget
        ));
        for (part, share_s) in parts.iter().zip(shares) {
            let settings = part.settings(share_s);
            how.push(part.measured(&study, &settings, share_s));
            match run_part(&study, part, settings, &dir, &args, &interrupt)? {
                PartEnd::Complete => {}
                PartEnd::Interrupted => {
                    interrupted = true;
                    break;
                }
                PartEnd::Failed(code, message) => failed.push((code, message)),
            }
        }
    }
    let elapsed = started.elapsed();
    // A part without its directory measured nothing (a study without its tables, or a run
    // interrupted before its first record): every row that needs it then says why.
    let stores: Vec<PathBuf> = PART_KINDS.iter().map(|k| dir.join(k.name())).filter(|store| store.exists()).collect();
    let set = ResultSet::load_all(&dir, &stores).with_context(|| format!("reading the parts in {}", dir.display()))?;
    let insitu = ResultSet::from_records(
        set.parts.iter().filter(|p| p.name == Kind::Insitu.name()).flat_map(|p| p.records.clone()).collect(),
    );
    if let Some(r) = set.records.first() {
        how.push(format!(
            "**This machine**: {} ({} CPUs), {} build; {}",
            r.env.cpu_model,
            r.env.cpus,
            r.env.profile,
            r.env.libraries.get(&study.stack).cloned().unwrap_or_default()
        ));
    }
    how.extend(replication::time_capped(&insitu));
    how.push(format!(
        "**Run time**: {} for this invocation ({} records in the store){}",
        human(elapsed.as_secs_f64()),
        set.records.len(),
        if interrupted { "; interrupted: running the same command resumes" } else { "" }
    ));
    let tables = replication::compare(&study, &set, &Missing { kinds_not_run: &not_run });
    let md = replication::markdown(&study, &tables, &how);
    let html = replication::html(&study, &tables, &how);
    for (text, file, extra) in [(&html, "report.html", &args.html), (&md, "report.md", &args.markdown)] {
        let path = dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        if let Some(p) = extra {
            std::fs::write(p, text).with_context(|| format!("writing {}", p.display()))?;
        }
    }
    let count = |v| tables.iter().flat_map(|t| &t.lines).filter(|l| l.verdict == v).count();
    use replication::Verdict::*;
    crate::progress::line(&format!(
        "study {}: {} cells agree, {} differ (each with its cause), {} shown, {} not measured; {}",
        study.id,
        count(Agrees),
        count(Differs),
        count(Shown),
        count(NotMeasured),
        human(elapsed.as_secs_f64())
    ));
    crate::progress::line(&format!("the page: {} (and report.md)", dir.join("report.html").display()));
    if interrupted {
        return Ok(Ending::Interrupted);
    }
    if let Some((code, _)) = failed.first() {
        let message = failed.iter().map(|(_, m)| m.as_str()).collect::<Vec<_>>().join("; ");
        return Err(crate::context::Exit { code: *code, message }.into());
    }
    Ok(Ending::Complete)
}

/// Writes a part's experiment file and runs it as a `pqtls run` child into `<dir>/<kind>`
/// (a store: run again, it resumes).
fn run_part(
    study: &Study,
    part: &Part,
    settings: Settings,
    dir: &Path,
    args: &ReplicateArgs,
    interrupt: &AtomicBool,
) -> Result<PartEnd> {
    let file = dir.join("parts").join(format!("{}.toml", part.name()));
    let experiment = experiment(study, part, settings)?;
    std::fs::write(&file, experiment.to_toml()).with_context(|| format!("writing {}", file.display()))?;
    let exe = std::env::current_exe().context("finding this program to run the measurements")?;
    let mut cmd = std::process::Command::new(exe);
    cmd.arg("run").arg(&file).arg("--results").arg(dir).arg("--pki").arg(&args.pki).arg("--keep-going");
    let mut shown = format!("pqtls run {} --results {} --keep-going", file.display(), dir.display());
    if part.kind == Kind::Insitu {
        // `thin`: a configuration that meets its precision stays in its window as a drift
        // reference (a block every 8 rounds) instead of running on to the cap with the window's
        // ML-DSA ones, whose spread is their signing's own (docs/experiments.md, --stop).
        cmd.args(["--stop", "thin"]);
        shown.push_str(" --stop thin");
    }
    if args.no_progress {
        cmd.arg("--no-progress");
    }
    crate::progress::line(&format!("{}: {shown}", part.what()));
    let status = run_child(&mut cmd, &part.what(), interrupt)?;
    let what = part.what();
    Ok(match status.code() {
        Some(0) => PartEnd::Complete,
        Some(crate::context::EXIT_INTERRUPTED) => PartEnd::Interrupted,
        // Configurations failed: the others are stored, and a run resumes them.
        Some(c) if c == crate::context::EXIT_FAILED => PartEnd::Failed(
            crate::context::EXIT_FAILED,
            format!(
                "{what} ended with exit {c}; its failures are in {}; the page shows the others, and the same command \
                 measures the failed ones again",
                dir.join(part.name()).display()
            ),
        ),
        // Refused before measuring (e.g. a store begun with another --budget: its settings
        // differ); its error above says what would work — the same command would not.
        Some(c) => PartEnd::Failed(
            1,
            format!("{what} ended with exit {c} (its error is above); the page shows what the store already holds"),
        ),
        None => PartEnd::Failed(
            crate::context::EXIT_FAILED,
            format!("{what} was killed ({status}); the same command resumes"),
        ),
    })
}

/// Seconds as `--budget` reads them: `45s`, `135s`, `2m` (whole minutes).
fn as_budget(s: f64) -> String {
    let s = s.ceil() as u64;
    if s >= 60 && s.is_multiple_of(60) {
        format!("{}m", s / 60)
    } else {
        format!("{s}s")
    }
}

/// Seconds for the reader: `45s`, `2m15s`, `1h5m`.
fn human(s: f64) -> String {
    let s = s.round() as u64;
    match (s / 3600, s % 3600 / 60, s % 60) {
        (0, 0, sec) => format!("{sec}s"),
        (0, m, 0) => format!("{m}m"),
        (0, m, sec) => format!("{m}m{sec}s"),
        (h, m, _) => format!("{h}h{m}m"),
    }
}

/// Milliseconds for the reader: `500 ms`, `2 s`, `2.5 s`.
fn human_ms(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else if ms.is_multiple_of(1000) {
        format!("{} s", ms / 1000)
    } else {
        format!("{:.1} s", ms as f64 / 1000.0)
    }
}

fn list() -> Result<()> {
    let mut out = String::from("study  name                  configurations  cells  title\n");
    for s in replication::studies()? {
        let parts = Part::of(&s);
        let n: usize = parts.iter().map(|p| p.configs.len()).sum();
        out.push_str(&format!("{:<6} {:<21} {:>14}  {:>5}  {}", s.id, s.name, n, s.cells(), s.title));
        if parts.len() > 1 {
            out.push_str(&format!(" ({})", parts.iter().map(Part::count).collect::<Vec<_>>().join(", ")));
        }
        out.push('\n');
    }
    out.push_str(
        "(configurations: those pqtls runs for the study, in situ, under load (one per thread count) and in the network \
         lab (transfer points, as root); cells: every published cell and quoted figure)\n",
    );
    crate::output::print(&out)?;
    Ok(())
}

/// In-situ settings for `n` configurations within `budget_s`: the quantiles the studies report,
/// ±2 % on the median, each configuration within its share of the budget's time.
fn insitu_settings(budget_s: f64, n: usize) -> Settings {
    let each_s = budget_s * HANDSHAKE_SHARE / n as f64;
    let max_loops = ((each_s * MAX_HANDSHAKES_PER_S) as u64).clamp(200, 100_000);
    Settings {
        warmup: 100,
        loops: None,
        precision: Some(0.02),
        min_loops: 200,
        max_loops,
        // Whole seconds from 10 s on, tenths below (a cap is a round figure to read).
        max_time_ms: Some(if each_s >= 10.0 { each_s.floor() * 1000.0 } else { (each_s * 10.0).floor() * 100.0 } as u64),
        quantiles: Quantiles(vec![0.15, 0.50, 0.99]),
        raw_samples: false,
        ..Settings::default()
    }
}

/// Load settings for `n` points within `budget_s`: each point's share less its overhead, 1 s of
/// warm-up (0.5 s when the share is short), the rest measured (in tenths of a second, at most a
/// minute: more budget than that gives no rate the study's ratios need).
fn load_settings(budget_s: f64, n: usize) -> Settings {
    let each_s = budget_s / n as f64 - LOAD_OVERHEAD_S;
    let warmup_s = if each_s >= 3.0 { 1.0 } else { 0.5 };
    timed_points(each_s, warmup_s, 1.0, None, LOAD_TIMEOUT_MS)
}

/// Transfer settings for `n` points within `budget_s`: each point's share less its overhead and
/// warm-up, measured (in tenths of a second, 3.5 s to a minute), stopping early at
/// [`TRANSFER_REQUESTS`] transfers.
fn transfer_settings(budget_s: f64, n: usize) -> Settings {
    let each_s = budget_s / n as f64 - TRANSFER_OVERHEAD_S;
    timed_points(each_s, TRANSFER_WARMUP_S, MIN_TRANSFER_S, Some(TRANSFER_REQUESTS), TRANSFER_TIMEOUT_MS)
}

/// The settings of points measured for a time (load, transfer): `each_s` a point, of which
/// `warmup_s` warm-up and the rest measured, in tenths of a second from `min_s` to a minute.
fn timed_points(each_s: f64, warmup_s: f64, min_s: f64, requests: Option<u64>, timeout_ms: u64) -> Settings {
    let duration_s = ((each_s - warmup_s) * 10.0).floor().clamp(min_s * 10.0, 600.0) / 10.0;
    Settings {
        load: LoadSettings {
            duration_ms: (duration_s * 1000.0) as u64,
            warmup_ms: (warmup_s * 1000.0) as u64,
            requests,
            timeout_ms,
        },
        ..Settings::default()
    }
}

/// The experiment of a part's configurations: the first as `[matrix]`, each other an
/// `[[extra]]` (an extra takes the matrix's value of a factor it leaves out), so every point
/// writes every factor that any of them sets away from its default.
fn experiment(study: &Study, part: &Part, settings: Settings) -> Result<Experiment> {
    let configs = &part.configs;
    let at_default = |n: &str, v: &str| factor::factor(n).and_then(|f| f.default).is_some_and(|d| d == v);
    let mut names: Vec<&str> = vec!["stack", "group", "chain"];
    for sc in configs {
        for (n, v) in sc.values() {
            if !at_default(n, v) && !names.contains(&n.as_str()) {
                names.push(n);
            }
        }
    }
    let point = |sc: &Scenario| -> FactorLists {
        names.iter().map(|n| (n.to_string(), vec![sc.value(n).to_string()])).collect()
    };
    let mut points = configs.iter().map(point);
    let factors = points.next().context("no configuration to run")?;
    let matrix = Matrix { factors, extra: points.collect(), ..Matrix::default() };
    let description = format!(
        "pqtls replicate {}: the configurations of study {}'s tables, {}",
        study.name,
        study.id,
        match part.kind {
            Kind::Insitu => "in situ".to_string(),
            k => format!("{} measurement", k.name()),
        }
    );
    let experiment = Experiment::new(part.name(), &description, part.kind, settings, matrix, BaselineRule::default())?;
    let planned = experiment.configurations();
    if planned != configs.len() {
        bail!(
            "the replication's experiment plans {planned} configurations for the study's {}: a bug, please report it",
            configs.len()
        );
    }
    Ok(experiment)
}

/// Runs a part as a supervised child and passes an interrupt on to it (it stops as after
/// Ctrl-C, keeping what it measured).
fn run_child(
    cmd: &mut std::process::Command,
    what: &str,
    interrupted: &AtomicBool,
) -> Result<std::process::ExitStatus> {
    let mut part = pqtls_peers::process::Supervised::spawn(cmd, what)?;
    loop {
        if let Some(status) = part.try_wait()? {
            return Ok(status);
        }
        if interrupted.load(Ordering::SeqCst) {
            let stopped = part.stop(Duration::from_secs(120))?;
            return stopped.status.with_context(|| format!("{what} stopped, but its exit status could not be read"));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
