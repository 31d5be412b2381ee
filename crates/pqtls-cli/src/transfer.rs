//! `pqtls transfer`: the transfer measurement from flags (crates/pqtls-net/src/transfer.rs):
//! TTFB and TTLB of TLS or mutual-TLS transfers over emulated links in the network lab, for a
//! matrix of links × windows × sizes × configurations. Goes through the same factor table,
//! runner and records as `pqtls run`.

use crate::factors::Factors;
use crate::progress::{Style, View};
use crate::{backends, insitu, table};
use anyhow::{bail, Context, Result};
use pqtls_core::factor::Kind;
use pqtls_core::record::Record;
use pqtls_core::scenario::Scenario;
use pqtls_core::sink::MemorySink;
use pqtls_lab::{Plan, RunOptions};
use pqtls_net::transfer::Transfer;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct TransferArgs {
    #[command(flatten)]
    pub factors: Factors,
    /// Measured transfers per point (each on a new TLS connection). A point stops at
    /// --repeat transfers or after --duration, whichever comes first.
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = crate::flags::count(0, u64::MAX, "100"))]
    pub repeat: u64,
    /// Longest measured time per point (e.g. 30s): bounds the slow points (long RTTs, large
    /// transfers) when --repeat would take longer.
    #[arg(long, default_value = "60s", allow_hyphen_values = true)]
    pub duration: String,
    /// Unmeasured transfers first, for this long (e.g. 300ms; 0s: none).
    #[arg(long = "warmup-time", default_value = "300ms", allow_hyphen_values = true)]
    pub warmup: String,
    /// A transfer not complete after this long is an error of kind `timeout`.
    #[arg(long, default_value = "30s", allow_hyphen_values = true)]
    pub timeout: String,
    /// TCP congestion control of every connection in the lab.
    #[arg(long, default_value = "cubic")]
    pub congestion_control: String,
    /// The link's verification accepts a median RTT this far from the asked one (or 2 % of it,
    /// whichever is larger), and emulator lateness p99 up to half of it. Loosen it on a busy
    /// machine rather than measure on a link that was not verified; it is recorded with the
    /// link (`link.tolerances`).
    #[arg(long, default_value = "0.3ms", allow_hyphen_values = true)]
    pub rtt_tolerance: String,
    /// Append every connection's TLS secrets (client and server) to FILE (SSLKEYLOGFILE format).
    #[arg(long)]
    pub keylog: Option<PathBuf>,
    /// Write the records (JSON array) to FILE (`-`: standard output, without the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No terminal table.
    #[arg(long)]
    pub quiet: bool,
}

/// The link of a scenario, as an order key: points on one link are measured together, so the
/// lab is built and verified once per link (the matrix order is kept within a link).
pub fn link_order(scenarios: &mut [Scenario]) {
    let key = |s: &Scenario| {
        let n = &s.network;
        (n.rtt_ns, n.bits_per_s, (n.loss * 1e9) as u64, n.jitter_ns)
    };
    let mut firsts: Vec<(Option<u64>, Option<u64>, u64, u64)> = Vec::new();
    for s in scenarios.iter() {
        if !firsts.contains(&key(s)) {
            firsts.push(key(s));
        }
    }
    scenarios.sort_by_key(|s| firsts.iter().position(|k| *k == key(s)));
}

/// Refuses links the lab cannot build (absurd RTT, rate, loss, jitter) before anything runs,
/// naming the point and what would work.
pub fn validate_links(scenarios: &[Scenario]) -> Result<()> {
    for s in scenarios {
        let spec = pqtls_core::link::LinkSpec::from(&s.network);
        pqtls_netlab::topology::validate(&spec).map_err(|e| anyhow::anyhow!("{}: {e}", s.label()))?;
        for w in [s.network.client_initcwnd, s.network.server_initcwnd] {
            if w == Some(0) {
                bail!("{}: initcwnd 0 would never send; e.g. 10 (the kernel's default)", s.label());
            }
        }
    }
    Ok(())
}

/// `--rtt-tolerance` of `pqtls transfer` and `pqtls run`, in ns, or an error naming it.
pub fn rtt_tolerance_ns(text: &str) -> Result<u64> {
    let ns = pqtls_core::units::duration_ns(text).with_context(|| format!("--rtt-tolerance {text}: e.g. 0.3ms"))?;
    if ns > 1_000_000_000 {
        bail!("--rtt-tolerance {text} is over 1s: a link that loose is not verified at all; e.g. 0.3ms or 2ms");
    }
    Ok(ns)
}

/// The lab needs root: a clear error before anything is built.
pub fn require_root() -> Result<()> {
    pqtls_netlab::topology::require_root().map_err(|e| anyhow::anyhow!("{e}"))
}

pub fn run(args: TransferArgs) -> Result<insitu::Outcome> {
    if !args.factors.given.contains_key("rtt") {
        bail!("give the link's RTT, e.g. --rtt 50ms (and --bandwidth 100mbit, --loss, --jitter, --initcwnd)");
    }
    let mut scenarios = args.factors.scenarios(Kind::Transfer)?;
    link_order(&mut scenarios);
    validate_links(&scenarios)?;
    if args.repeat == 0 {
        bail!("--repeat 0: give at least 1 transfer per point, e.g. --repeat 100");
    }
    let settings = crate::load::settings(&args.duration, &args.warmup, &args.timeout, Some(args.repeat))?;
    rtt_tolerance_ns(&args.rtt_tolerance)?;
    let terminal = crate::output::terminal(&[("--json", args.json.as_deref())], args.quiet)?;
    crate::output::not_stdout("--keylog", args.keylog.as_deref(), "the key log is written as it goes and", "run.keys")?;
    require_root()?;
    let backends = backends::all();
    for s in &scenarios {
        backends::check_stack(&backends, s.handshake.stack)?;
    }
    let json = crate::output::create(args.json.as_deref())?;
    let pki = backends::pki(&args.factors.pki)?;
    let files = |cfg: &pqtls_core::config::HandshakeConfig| pki.files_for(cfg);
    let mut measurement = Transfer::new(&backends, &files, insitu::environment(&backends));
    measurement.lab.congestion_control = args.congestion_control.clone();
    measurement.verify.tolerances.rtt_absolute_ns = rtt_tolerance_ns(&args.rtt_tolerance)?;
    let mut key_log_file = None;
    if let Some(p) = &args.keylog {
        let file =
            Arc::new(pqtls_lab::keylog::KeyLogFile::open(p).with_context(|| format!("cannot write {}", p.display()))?);
        measurement.key_log = Some(file.clone() as Arc<dyn pqtls_core::backend::KeyLog>);
        key_log_file = Some(file);
    }
    let plan = Plan { scenarios: &scenarios, settings: &settings, baseline_of: &|_| None, skipped: &[] };
    let mut sink = MemorySink::default();
    let mut view = View::new(Style::Bar);
    let interrupt = insitu::interrupt_flag();
    // A refused link fails its points, not the run: the others are measured.
    let opts = RunOptions { interrupt: interrupt.clone(), keep_going: true };
    let summary =
        pqtls_lab::run_with(&plan, &measurement, &mut sink, &opts, &pqtls_lab::Schedule::Sequential, &mut |e| {
            view.event(e)
        });
    view.finish();
    // The lab goes before anything else is reported (also after Ctrl-C).
    let closed = measurement.close();
    let summary = summary?;
    closed?;
    let records: Vec<Record> = scenarios
        .iter()
        .filter_map(|s| sink.measured.iter().find(|m| m.record.id == s.id()))
        .map(|m| m.record.clone())
        .collect();
    // Results first: a reader of the table that went away loses only the table.
    if let Some(out) = json {
        crate::output::write(out, &serde_json::to_vec_pretty(&records)?)?;
    }
    if !records.is_empty() {
        terminal.print(&table(&records))?;
    }
    crate::output::key_log_written(key_log_file.as_deref())?;
    let refusals = measurement.refusals();
    for (link, why) in &refusals {
        crate::progress::line(&format!("refused link {link}: {why}"));
    }
    if summary.interrupted || interrupt.load(Ordering::SeqCst) {
        crate::progress::line(&format!(
            "interrupted: {} of {} points measured and kept",
            records.len(),
            scenarios.len()
        ));
        return Ok(insitu::Outcome::Interrupted);
    }
    if !summary.failed.is_empty() {
        return Err(crate::Exit {
            code: crate::EXIT_FAILED,
            message: format!(
                "{} of {} points not measured ({} on refused links); the others are above",
                summary.failed.len(),
                scenarios.len(),
                summary.failed.iter().filter(|(_, e)| e.contains("refused")).count()
            ),
        }
        .into());
    }
    Ok(insitu::Outcome::Complete)
}

/// The transfer records as a terminal table (export's, [`pqtls_export::tables::transfer`]):
/// the verified link, TTFB and TTLB percentiles, round trips measured vs predicted; the notes
/// under it.
pub fn table(records: &[Record]) -> String {
    use pqtls_export::tables::transfer as t;
    let transfers: Vec<pqtls_export::Transfer> = records.iter().filter_map(pqtls_export::Transfer::of).collect();
    format!("{}\n{}", table::draw(&t::summary(&transfers), 3), table::notes(&t::notes(&transfers)))
}
