//! `pqtls resident`: the resident measurement from flags (crates/pqtls-net/src/resident.rs):
//! the memory a terminator keeps per idle connection — `pqtls serve` (in a process of its own,
//! its heap counted), nginx or HAProxy — read with 0 and with each `--held` count of idle
//! connections. Goes through the same factor table, runner and records as `pqtls run`.

use crate::context::{self, measurement_for, Ending, OwnedStacks, Setup};
use crate::factors::Factors;
use crate::{flags, table};
use anyhow::{bail, Context, Result};
use pqtls_core::factor::Kind;
use pqtls_core::record::Record;
use pqtls_core::settings::{ResidentSettings, Settings};
use pqtls_lab::Plan;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args)]
pub struct ResidentArgs {
    #[command(flatten)]
    pub factors: Factors,
    /// Idle connections to hold at each reading (besides the reading at 0), ascending; e.g.
    /// 1000,10000.
    #[arg(long, value_delimiter = ',', default_values_t = ResidentSettings::default().held,
          value_parser = crate::flags::count(0, 1_000_000, "1000,10000"))]
    pub held: Vec<u64>,
    /// Wait this long before each reading (e.g. 500ms).
    #[arg(long, default_value = "500ms", allow_hyphen_values = true)]
    pub settle: String,
    /// Client threads opening the connections (1 to 64; connections resumed from a ticket are
    /// opened by one: each takes the ticket the previous one received).
    #[arg(long = "client-threads", default_value_t = 2, value_parser = crate::flags::count_usize(1, 64, "2"))]
    pub client_threads: usize,
    /// A connection's handshake and response, or a reading, not done after this long is an error.
    #[arg(long, default_value = "10s", allow_hyphen_values = true)]
    pub timeout: String,
    /// Write the records (JSON array) to FILE (`-`: standard output, without the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No terminal table.
    #[arg(long)]
    pub quiet: bool,
    #[command(flatten)]
    pub via: flags::ViaArgs,
}

/// `[settings]`-equivalent of the flags.
fn settings(args: &ResidentArgs) -> Result<Settings> {
    let held = ResidentSettings::held_from(&args.held).context("--held")?;
    let settle_ns =
        pqtls_core::units::duration_ns(&args.settle).with_context(|| format!("--settle {}", args.settle))?;
    Ok(Settings { resident: ResidentSettings { held, settle_ms: settle_ns / 1_000_000 }, ..Settings::default() })
}

pub fn run(args: ResidentArgs) -> Result<Ending> {
    let scenarios = args.factors.scenarios(Kind::Resident)?;
    let settings = settings(&args)?;
    let timeout = pqtls_core::units::duration_ns(&args.timeout)
        .map(Duration::from_nanos)
        .with_context(|| format!("--timeout {}", args.timeout))?;
    if timeout.is_zero() {
        bail!("--timeout 0: give a duration above 0, e.g. 10s");
    }
    let most = *settings.resident.held.last().expect("held_from returns at least one");
    // Refused now, before any terminator starts: descriptors and local ports for the most
    // connections (the terminators' processes inherit the raised limit).
    pqtls_net::resident::ensure_fds(most)?;
    pqtls_net::resident::ensure_ports(most)?;
    let terminal = crate::output::terminal(&[("--json", args.json.as_deref())], args.quiet)?;
    let owned = OwnedStacks::open(&args.factors.pki)?;
    owned.check(&scenarios)?;
    let json = crate::output::create(args.json.as_deref())?;
    let mut via = args.via.via();
    via.hold_connections = Some(most as usize);
    let serve = context::serve_child(&args.factors.pki)?;
    let mut setup = Setup::default();
    setup.resident.serve = Some(&serve);
    setup.resident.terminators = Some(&via);
    setup.resident.threads = args.client_threads;
    setup.resident.timeout = timeout;
    let measurement = measurement_for(Kind::Resident, owned.stacks(), setup)?;
    let plan = Plan { scenarios: (&scenarios).into(), settings: &settings, baseline_of: &|_| None, skipped: &[] };
    let ran = context::run(&plan, &measurement, &pqtls_lab::Schedule::default(), true, true)?;
    context::write_records(&ran, json, terminal, &table)?;
    if let Some(ending) = context::interrupted(&ran, scenarios.len(), "configurations") {
        return Ok(ending);
    }
    let failed = &ran.summary.failed;
    if !failed.is_empty() {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_FAILED,
            message: format!(
                "{} of {} configurations not measured:\n  {}",
                failed.len(),
                scenarios.len(),
                failed.iter().map(|(id, e)| format!("{id}: {e}")).collect::<Vec<_>>().join("\n  ")
            ),
        }
        .into());
    }
    Ok(Ending::Complete)
}

/// The resident records as a terminal table (export's, [`pqtls_export::tables::resident`]).
pub fn table(records: &[Record]) -> String {
    use pqtls_export::tables::resident as t;
    let views: Vec<pqtls_export::ResidentView> = records.iter().filter_map(pqtls_export::ResidentView::of).collect();
    let rules = t::rules_of_thumb(&views);
    let mut s = table::draw(&t::summary(&views), 3);
    if !rules.is_empty() {
        s += &format!("\n{}", rules.join("\n"));
    }
    format!("{s}\n{}", table::notes(&t::notes(&views)))
}
