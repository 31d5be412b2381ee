//! `pqtls transfer`: the transfer measurement from flags (crates/pqtls-net/src/transfer.rs):
//! TTFB and TTLB of TLS or mutual-TLS transfers over emulated links in the network lab, for a
//! matrix of links × windows × sizes × configurations. Goes through the same factor table,
//! runner and records as `pqtls run`.

use crate::context::{self, measurement_for, Ending, OwnedStacks, Setup};
use crate::factors::Factors;
use crate::{flags, table};
use anyhow::{bail, Result};
use pqtls_core::factor::Kind;
use pqtls_core::record::Record;
use pqtls_lab::Plan;
use std::path::PathBuf;
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

pub fn run(args: TransferArgs) -> Result<Ending> {
    if !args.factors.given.contains_key("rtt") {
        bail!("give the link's RTT, e.g. --rtt 50ms (and --bandwidth 100mbit, --loss, --jitter, --initcwnd)");
    }
    let mut scenarios = args.factors.scenarios(Kind::Transfer)?;
    if pqtls_lab::RunPolicy::of(Kind::Transfer, &scenarios).by_link {
        pqtls_net::links::plan_links(&mut scenarios)?;
    }
    if args.repeat == 0 {
        bail!("--repeat 0: give at least 1 transfer per point, e.g. --repeat 100");
    }
    let settings = flags::load_settings(&args.duration, &args.warmup, &args.timeout, Some(args.repeat))?;
    let rtt_tolerance_ns = flags::rtt_tolerance_ns(&args.rtt_tolerance)?;
    let terminal = crate::output::terminal(&[("--json", args.json.as_deref())], args.quiet)?;
    crate::output::not_stdout("--keylog", args.keylog.as_deref(), "the key log is written as it goes and", "run.keys")?;
    context::can_measure(Kind::Transfer, &scenarios)?;
    let owned = OwnedStacks::open(&args.factors.pki)?;
    owned.check(&scenarios)?;
    let key_log_file = args.keylog.as_deref().map(context::key_log_file).transpose()?;
    let mut setup = Setup::default();
    setup.transfer.lab.congestion_control = args.congestion_control.clone();
    setup.transfer.verify.tolerances.rtt_absolute_ns = rtt_tolerance_ns;
    setup.transfer.key_log = key_log_file.clone().map(|k| k as Arc<dyn pqtls_core::backend::KeyLog>);
    let measurement = measurement_for(Kind::Transfer, owned.stacks(), setup)?;
    let json = crate::output::create(args.json.as_deref())?;
    let plan = Plan { scenarios: (&scenarios).into(), settings: &settings, baseline_of: &|_| None, skipped: &[] };
    let ran = context::run(&plan, &measurement, &pqtls_lab::Schedule::default(), false, true)?;
    context::write_records(&ran, json, terminal, &table)?;
    crate::output::key_log_written(key_log_file.as_deref())?;
    if let Some(ending) = context::interrupted(&ran, scenarios.len(), "points") {
        return Ok(ending);
    }
    let failed = &ran.summary.failed;
    if !failed.is_empty() {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_FAILED,
            message: format!(
                "{} of {} points not measured ({} on refused links); the others are above",
                failed.len(),
                scenarios.len(),
                failed.iter().filter(|(_, e)| e.contains("refused")).count()
            ),
        }
        .into());
    }
    Ok(Ending::Complete)
}

/// The transfer records as a terminal table (export's, [`pqtls_export::tables::transfer`]):
/// the verified link, TTFB and TTLB percentiles, round trips measured vs predicted; the notes
/// under it.
pub fn table(records: &[Record]) -> String {
    use pqtls_export::tables::transfer as t;
    let transfers: Vec<pqtls_export::TransferView> =
        records.iter().filter_map(pqtls_export::TransferView::of).collect();
    format!("{}\n{}", table::draw(&t::summary(&transfers), 3), table::notes(&t::notes(&transfers)))
}
