//! `pqtls replicate STUDY`: a reference study's published tables next to pqtls' own figures,
//! one page per study (docs/replication.md).
//!
//! The study's figures are data (replications/*.toml, compiled in: `pqtls_export::replication`).
//! The configurations its tables and quoted figures name are written as an experiment file in
//! the replication's directory and run by `pqtls run` (this program, as a child), so a
//! replication resumes as every run does; the page is made from the records it left.

use crate::context::Ending;
use anyhow::{bail, Context, Result};
use pqtls_core::factor::{self, Kind};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::stats::Quantiles;
use pqtls_core::units;
use pqtls_export::replication::{self, Missing, Study};
use pqtls_export::ResultSet;
use pqtls_store::experiment::{BaselineRule, Experiment, FactorLists, Matrix};
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct ReplicateArgs {
    /// The study, by name or number (`pqtls replicate --list` names them).
    #[arg(required_unless_present = "list")]
    pub study: Option<String>,
    /// List the studies: number, name, title, configurations run, published cells.
    #[arg(long, conflicts_with = "study")]
    pub list: bool,
    /// About how long the measurements may take; more gives tighter intervals.
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

/// The shortest run of one configuration: 100 warm-up and 200 measured handshakes (the least
/// the precision rule accepts) of the slowest configuration the studies name, with its PKI.
const MIN_S_PER_CONFIG: f64 = 5.0;

/// The share of the budget the configurations' handshakes get, split evenly into their time
/// caps (`max_time`); the rest is for what is not a handshake: the chains' keys and
/// certificates (SLH-DSA's take seconds), the contexts, the child process, the page.
const HANDSHAKE_SHARE: f64 = 0.8;

/// A loop cap the time cap reaches first: more handshakes per second than this VM runs any
/// configuration in memory mode (a debug build: ~340/s for an ML-DSA chain on a quiet
/// machine); it bounds the samples kept in memory.
const MAX_HANDSHAKES_PER_S: f64 = 1000.0;

/// The part of a replication this version runs: in situ.
const PART: &str = "insitu";

/// What this version does not run, by measurement kind, and why (each row that needs it says so).
fn not_run() -> Vec<(&'static str, String)> {
    vec![
        (
            "load",
            "the load part (connections/s through a terminator at 1/4/8 threads) is not run by `pqtls replicate` yet: \
             experiments/throughput-22.toml runs these configurations; this 2-core VM cannot run 8 client threads \
             and a server without them sharing cores"
                .into(),
        ),
        (
            "transfer",
            "the transfer part (TTLB in the network lab) is not run by `pqtls replicate` yet: experiments/mtls-ttlb.toml"
                .into(),
        ),
    ]
}

pub fn run(args: ReplicateArgs) -> Result<Ending> {
    if args.list {
        return list().map(|()| Ending::Complete);
    }
    let name = args.study.as_deref().unwrap_or_default();
    let study = replication::study(name)?;
    let budget_s = units::duration_ns(&args.budget).context("--budget")? as f64 / 1e9;
    let configs = study.configs(PART);
    if !args.page_only && !configs.is_empty() && budget_s < MIN_S_PER_CONFIG {
        bail!(
            "--budget {}: one configuration needs at least {MIN_S_PER_CONFIG:.0}s (100 warm-up and 200 measured \
             handshakes); study {} runs {} configurations, at least {} (e.g. --budget {})",
            args.budget,
            study.name,
            configs.len(),
            as_budget(MIN_S_PER_CONFIG * configs.len() as f64),
            as_budget(MIN_S_PER_CONFIG * configs.len() as f64 * 2.0)
        );
    }
    let dir = args.results.join(format!("replicate-{}", study.name));
    if args.fresh && dir.exists() {
        let aside = dir.with_extension(format!("old-{}", std::process::id()));
        std::fs::rename(&dir, &aside).with_context(|| format!("moving {} aside", dir.display()))?;
        crate::progress::line(&format!("earlier results moved to {}", aside.display()));
    }
    let parts = dir.join("parts");
    std::fs::create_dir_all(&parts).with_context(|| format!("creating {}", parts.display()))?;
    let started = Instant::now();
    let mut interrupted = false;
    let mut failed = None;
    let mut how = vec![format!(
        "**pqtls**: `pqtls replicate {} --budget {}` (version {}, commit {}); results in `{}`",
        study.name,
        args.budget,
        crate::VERSION,
        crate::COMMIT,
        dir.display()
    )];
    if args.page_only {
        how.push(
            "**Measured**: nothing by this invocation (`--page-only`): the page is made from the records stored".into(),
        );
    } else if configs.is_empty() {
        how.push("**Measured**: nothing — no table of this study is one pqtls measures in situ; the page shows each figure and why".into());
    } else {
        let settings = settings(budget_s, configs.len());
        how.push(format!(
            "**Measured**: {} configurations in situ on {} (memory transport), {} warm-up handshakes, then until the \
             median's 95 % interval is within ±{:.0} % ({} handshakes at least), each within its time cap of {} \
             ({:.0} % of the budget shared out; the warm-up takes at most half of it) — a configuration the cap stops \
             first (ML-DSA signing's rejection sampling keeps its interval wide, SLH-DSA signs slowly) is listed \
             below with the handshakes and the interval it reached; interleaved in windows of 16, a configuration \
             that met its rule staying on as a thin drift reference (`pqtls run --stop thin`)",
            configs.len(),
            study.stack,
            settings.warmup,
            settings.precision.unwrap_or(0.0) * 100.0,
            settings.min_loops,
            human(settings.max_time_s().unwrap_or(0.0)),
            HANDSHAKE_SHARE * 100.0
        ));
        let file = parts.join(format!("{PART}.toml"));
        let experiment = experiment(&study, &configs, settings)?;
        std::fs::write(&file, experiment.to_toml()).with_context(|| format!("writing {}", file.display()))?;
        crate::progress::line(&format!(
            "replication of study {} ({}) in {}: {} configurations within about {}",
            study.id,
            study.name,
            dir.display(),
            configs.len(),
            args.budget
        ));
        let exe = std::env::current_exe().context("finding this program to run the measurements")?;
        let mut cmd = std::process::Command::new(exe);
        // `thin`: a configuration that meets its precision stays in its window as a drift
        // reference (a block every 8 rounds) instead of running on to the cap with the window's
        // ML-DSA ones, whose spread is their signing's own (docs/experiments.md, --stop).
        cmd.arg("run").arg(&file).arg("--results").arg(&dir).arg("--pki").arg(&args.pki).arg("--keep-going");
        cmd.args(["--stop", "thin"]);
        if args.no_progress {
            cmd.arg("--no-progress");
        }
        crate::progress::line(&format!(
            "pqtls run {} --results {} --keep-going --stop thin",
            file.display(),
            dir.display()
        ));
        let status = run_child(&mut cmd)?;
        match status.code() {
            Some(0) => {}
            Some(crate::context::EXIT_INTERRUPTED) => interrupted = true,
            // Configurations failed: the others are stored, and a run resumes them.
            Some(c) if c == crate::context::EXIT_FAILED => {
                failed = Some((
                    crate::context::EXIT_FAILED,
                    format!(
                        "the in-situ part ended with exit {c}; its failures are in {}; the page shows the others, \
                         and the same command measures the failed ones again",
                        dir.join(PART).display()
                    ),
                ))
            }
            // Refused before measuring (e.g. a store begun with another --budget: its settings
            // differ); its error above says what would work — the same command would not.
            Some(c) => {
                failed = Some((
                    1,
                    format!(
                        "the in-situ part ended with exit {c} (its error is above); the page shows what the store \
                         already holds"
                    ),
                ))
            }
            None => {
                failed = Some((
                    crate::context::EXIT_FAILED,
                    format!("the in-situ part was killed ({status}); the same command resumes"),
                ))
            }
        }
    }
    let elapsed = started.elapsed();
    // No part directory: nothing was measured (a study without in-situ tables, or a run
    // interrupted before its first record); every row then says why it has no pqtls figure.
    let set = if dir.join(PART).exists() {
        ResultSet::load(&dir.join(PART)).with_context(|| format!("reading {}", dir.join(PART).display()))?
    } else {
        ResultSet::from_records(Vec::new())
    };
    if let Some(r) = set.records.first() {
        how.push(format!(
            "**This machine**: {} ({} CPUs), {} build; {}",
            r.env.cpu_model,
            r.env.cpus,
            r.env.profile,
            r.env.libraries.get(&study.stack).cloned().unwrap_or_default()
        ));
    }
    how.extend(replication::time_capped(&set));
    how.push(format!(
        "**Run time**: {} for this invocation ({} records in the store){}",
        human(elapsed.as_secs_f64()),
        set.records.len(),
        if interrupted { "; interrupted: running the same command resumes" } else { "" }
    ));
    let kinds = not_run();
    let tables = replication::compare(&study, &set, &Missing { kinds_not_run: &kinds });
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
    if let Some((code, message)) = failed {
        return Err(crate::context::Exit { code, message }.into());
    }
    Ok(Ending::Complete)
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

fn list() -> Result<()> {
    let mut out = String::from("study  name                  configurations  cells  title\n");
    for s in replication::studies()? {
        out.push_str(&format!(
            "{:<6} {:<21} {:>14}  {:>5}  {}\n",
            s.id,
            s.name,
            s.configs(PART).len(),
            s.cells(),
            s.title
        ));
    }
    out.push_str(
        "(configurations: those pqtls runs in situ for the study; cells: every published cell and quoted figure)\n",
    );
    crate::output::print(&out)?;
    Ok(())
}

/// In-situ settings for `n` configurations within `budget_s`: the quantiles the studies report,
/// ±2 % on the median, each configuration within its share of the budget's time.
fn settings(budget_s: f64, n: usize) -> Settings {
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

/// The experiment of the study's configurations: the first as `[matrix]`, each other an
/// `[[extra]]` (an extra takes the matrix's value of a factor it leaves out), so every point
/// writes every factor that any of them sets away from its default.
fn experiment(study: &Study, configs: &[Scenario], settings: Settings) -> Result<Experiment> {
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
    let description =
        format!("pqtls replicate {}: the configurations of study {}'s tables, in situ", study.name, study.id);
    let experiment = Experiment::new(PART, &description, Kind::Insitu, settings, matrix, BaselineRule::default())?;
    let planned = experiment.configurations();
    if planned != configs.len() {
        bail!(
            "the replication's experiment plans {planned} configurations for the study's {}: a bug, please report it",
            configs.len()
        );
    }
    Ok(experiment)
}

/// Runs the part as a supervised child and passes an interrupt on to it (it stops as after
/// Ctrl-C, keeping what it measured).
fn run_child(cmd: &mut std::process::Command) -> Result<std::process::ExitStatus> {
    let interrupted = crate::context::interrupt_flag();
    let mut part = pqtls_peers::process::Supervised::spawn(cmd, "the in-situ part")?;
    loop {
        if let Some(status) = part.try_wait()? {
            return Ok(status);
        }
        if interrupted.load(Ordering::SeqCst) {
            let stopped = part.stop(Duration::from_secs(120))?;
            return stopped.status.context("the in-situ part stopped, but its exit status could not be read");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}
