//! What every command that measures starts from, in one place: the TLS stacks this build has
//! and the PKI ([`OwnedStacks`], which lends the lab's [`Stacks`]), the environment every record
//! carries, Ctrl-C, how a command ended and the exit codes, the measurement of a record kind
//! ([`measurement_for`], for `pqtls run` and the per-kind commands alike) and the one way a
//! command runs its plan ([`run`]). The command modules use it and never each other.

use crate::progress::{Style, View};
use anyhow::{bail, Context as _, Result};
use pqtls_core::backend::Backend;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::factor::Kind;
use pqtls_core::record::{Env, Measured};
use pqtls_core::scenario::Scenario;
use pqtls_core::sink::MemorySink;
use pqtls_core::transport::TransportOptions;
use pqtls_lab::{Insitu, Measurement, Plan, RunOptions, RunPolicy, RunSummary, Schedule, Stacks};
use pqtls_net::measure::{Load, LoadSetup};
use pqtls_net::resident::{Resident, ResidentSetup};
use pqtls_net::transfer::{Refusals, Transfer, TransferSetup};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

// The exit codes besides 0 and 1, every command's, in one place.
/// Exit code of a run stopped by Ctrl-C (what shells use for SIGINT): not everything asked
/// for was measured, and what was is kept.
pub const EXIT_INTERRUPTED: i32 = 130;
/// Exit code of a run that ended but could not measure some configurations (`--keep-going`, or
/// a failure that stopped it): the store is sound and a new run retries them.
pub const EXIT_FAILED: i32 = 3;
/// Exit code of `pqtls check` on a results directory that is not sound.
pub const EXIT_UNSOUND: i32 = 4;
/// Exit code of `pqtls netlab verify` when the link was built and measured but refused.
pub const EXIT_REFUSED: i32 = 5;
/// Exit code of `pqtls compare --fail-on-slower` when something got slower.
pub const EXIT_SLOWER: i32 = 5;

/// An error after which the exit code is not the generic 1.
#[derive(Debug)]
pub struct Exit {
    pub code: i32,
    pub message: String,
}

impl std::fmt::Display for Exit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Exit {}

/// How a command ended, for its exit status (errors have their own, [`Exit`]).
pub enum Ending {
    /// Everything asked for was done.
    Complete,
    /// Ctrl-C: what was measured is kept (exit 130).
    Interrupted,
    /// The command ran again (under valgrind: `crate::count`) and that process exited so.
    Exited(i32),
}

/// The TLS stacks this build has (the one place they are made).
pub fn all_backends() -> Vec<Box<dyn Backend>> {
    vec![
        Box::new(pqtls_openssl::OpensslBackend::new()),
        Box::new(pqtls_rustls::RustlsBackend::new()),
        // s2n-tls links the same aws-lc-sys as rustls: its hooks, installed once, count both.
        Box::new(pqtls_s2n::S2nBackend::with_aws_lc_counted(pqtls_rustls::memory::coverage().is_ok())),
        Box::new(pqtls_boring::BoringBackend::new()),
    ]
}

/// The certificate key implementations of the libraries this build has (OpenSSL's are the
/// PKI's own): every place that opens a PKI gets them through [`pki`].
pub fn key_factories() -> Vec<Arc<dyn pqtls_pki::KeyFactory>> {
    pqtls_rustls::key_factories()
}

/// The PKI directory when `--pki`/`--out` is not given: `$PQTLS_PKI_DIR`, or `./pki`.
pub fn default_pki_dir() -> PathBuf {
    match std::env::var_os("PQTLS_PKI_DIR") {
        Some(d) if !d.is_empty() => PathBuf::from(d),
        _ => pqtls_pki::Pki::default_dir(),
    }
}

/// How the resident measurement starts `pqtls serve`: this executable, as a child, serving
/// from the PKI cache in `pki`.
pub fn serve_child(pki: &Path) -> Result<pqtls_peers::ServeChild> {
    let program = std::env::current_exe().context("finding the pqtls executable to start pqtls serve")?;
    Ok(pqtls_peers::ServeChild::new(program, pki))
}

/// The PKI cache in `dir`, with [`key_factories`].
pub fn pki(dir: &Path) -> Result<pqtls_pki::Pki> {
    Ok(pqtls_pki::Pki::open(dir)?.with_factories(key_factories()))
}

/// Makes sure the PKI cache in `dir` holds every chain of `configs` (server chains, and client
/// chains for mutual TLS), generating the missing ones in parallel (one thread per CPU) before
/// a sweep's first handshake. Returns lines for the user: what was generated, and each chain
/// that could not be (its configurations fail with the same error when measured).
pub fn prepare_chains<'c>(dir: &Path, configs: impl IntoIterator<Item = &'c HandshakeConfig>) -> Result<Vec<String>> {
    let mut wanted = Vec::new();
    for cfg in configs {
        wanted.push((cfg.chain, pqtls_pki::Role::Server));
        if let Some(c) = cfg.client_chain {
            wanted.push((c, pqtls_pki::Role::Client));
        }
    }
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    let t0 = std::time::Instant::now();
    let done = pki(dir)?.prepare(&wanted, threads);
    let mut lines = Vec::new();
    if done.generated > 0 {
        lines.push(format!(
            "PKI: generated {} of the {} certificate chains in {:.1} s ({} threads; cached in {})",
            done.generated,
            done.chains,
            t0.elapsed().as_secs_f64(),
            done.threads,
            dir.display()
        ));
    }
    for (spec, role, e) in &done.failed {
        lines.push(format!("note: PKI: the {role} chain {spec} cannot be made: {e}"));
    }
    Ok(lines)
}

/// Tool, commit and library versions, CPU, kernel: what every record says about how it was
/// obtained.
pub fn environment(backends: &[Box<dyn Backend>]) -> Env {
    let libs = backends.iter().map(|b| (b.stack().name().to_string(), b.library_version())).collect();
    pqtls_lab::env::collect(crate::VERSION, crate::COMMIT, libs)
}

/// What the lab's [`Stacks`] borrows — the stacks, the PKI, the environment — owned by the
/// command for as long as it measures.
pub struct OwnedStacks {
    backends: Vec<Box<dyn Backend>>,
    pki: Box<pqtls_lab::PkiFn<'static>>,
    env: Env,
}

impl OwnedStacks {
    /// Every stack this build has, with the PKI cache in `pki_dir`.
    pub fn open(pki_dir: &Path) -> Result<OwnedStacks> {
        let pki = pki(pki_dir)?;
        let backends = all_backends();
        let env = environment(&backends);
        Ok(OwnedStacks { backends, pki: Box::new(move |cfg| pki.files_for(cfg)), env })
    }

    /// The measurement context the lab's measurements take.
    pub fn stacks(&self) -> Stacks<'_> {
        Stacks::new(&self.backends, &*self.pki, self.env.clone())
    }

    pub fn env(&self) -> &Env {
        &self.env
    }

    /// An error naming the stacks built in when a scenario asks for another (before anything
    /// is measured).
    pub fn check(&self, scenarios: &[Scenario]) -> Result<()> {
        let stacks = self.stacks();
        for s in scenarios {
            stacks.backend(s.handshake.stack)?;
        }
        Ok(())
    }
}

/// Ctrl-C (SIGINT) and SIGTERM (what `kill`, Slurm's `scancel` and `scontrol requeue`, and
/// Kubernetes send) set a flag that the runner polls between handshakes: the run stops at the
/// next safe point, keeps what was measured, removes its namespaces and processes and exits
/// with [`EXIT_INTERRUPTED`]. A second signal exits at once. (ctrlc's `termination`
/// feature also takes SIGHUP; SIGHUP keeps the disposition it had, see [`keeping_sighup`].)
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let mut first: Option<std::time::Instant> = None;
    let _ = keeping_sighup(|| {
        ctrlc::set_handler(move || {
            let now = std::time::Instant::now();
            match first {
                None => {
                    first = Some(now);
                    f.store(true, Ordering::SeqCst);
                    crate::progress::line(
                        "\ninterrupted (Ctrl-C or SIGTERM): finishing the current handshake and keeping what was \
                         measured (interrupt again to quit now)",
                    );
                }
                // The same interrupt again: `timeout`, `scancel` and `kubectl delete` signal the
                // process and then its whole group, so one request arrives twice at once.
                Some(t) if now.duration_since(t) < SAME_INTERRUPT => {}
                Some(_) => {
                    crate::progress::line("\ninterrupted twice: exiting now");
                    std::process::exit(EXIT_INTERRUPTED);
                }
            }
        })
    });
    flag
}

/// A second interrupt this soon after the first is the same one (a process group's copy): it
/// does not quit at once. A person's second Ctrl-C comes later.
pub const SAME_INTERRUPT: std::time::Duration = std::time::Duration::from_millis(500);

/// Runs `f` (which installs the interrupt handler) and puts SIGHUP's disposition back as it
/// was: a closed terminal ends pqtls as it always did, and `nohup pqtls run …` keeps running.
fn keeping_sighup<T>(f: impl FnOnce() -> T) -> T {
    // SAFETY: FFI edge; sigaction with a null new action only reads SIGHUP's disposition into
    // `old`, a zeroed struct owned here (all-zero is a valid `sigaction`).
    #[allow(unsafe_code)]
    let (read, old) = unsafe {
        let mut old: libc::sigaction = std::mem::zeroed();
        (libc::sigaction(libc::SIGHUP, std::ptr::null(), &mut old) == 0, old)
    };
    let out = f();
    if read {
        // SAFETY: FFI edge; restores the disposition read above (a handler of whoever set it,
        // SIG_DFL or SIG_IGN), with its flags and mask.
        #[allow(unsafe_code)]
        unsafe {
            libc::sigaction(libc::SIGHUP, &old, std::ptr::null_mut())
        };
    }
    out
}

/// What the measurements take besides the stacks: each command fills in what its flags say,
/// `pqtls run` the defaults with its terminators, captures and link tolerance.
#[derive(Default)]
pub struct Setup<'a> {
    /// In situ: CPUs, waiting and timeouts of the two-thread transports.
    pub transport: TransportOptions,
    /// Load and layers: which server, key log, timelines, capture.
    pub load: LoadSetup<'a>,
    /// Transfer: key log, network lab and link verification.
    pub transfer: TransferSetup,
    /// Resident: who starts the terminators, client threads.
    pub resident: ResidentSetup<'a>,
    /// In situ under `clock = "instructions"`: the counter ([`crate::count`]).
    pub counter: Option<std::sync::Arc<dyn pqtls_core::trace::InstructionCounter>>,
}

/// A measurement of one of the kinds: what [`measurement_for`] makes.
pub enum Measuring<'a> {
    Insitu(Insitu<'a>),
    Load(Load<'a>),
    Transfer(Transfer<'a>),
    Resident(Resident<'a>),
}

impl Measuring<'_> {
    /// As the runner takes it.
    pub fn as_dyn(&self) -> &dyn Measurement {
        match self {
            Measuring::Insitu(m) => m,
            Measuring::Load(m) => m,
            Measuring::Transfer(m) => m,
            Measuring::Resident(m) => m,
        }
    }

    /// Releases what the measurement holds across scenarios (the network lab of a transfer or
    /// of a load with network factors: before anything else is reported, also after Ctrl-C);
    /// returns the links it refused.
    pub fn close(&self) -> Result<Refusals> {
        match self {
            Measuring::Transfer(t) => {
                t.close()?;
                Ok(t.refusals())
            }
            Measuring::Load(l) => {
                l.links.close()?;
                Ok(l.links.refusals())
            }
            _ => Ok(Vec::new()),
        }
    }
}

/// Whether this process can measure `kind` at all, before anything is opened or written: a
/// transfer, and a load with network factors, build the network lab, which needs root.
pub fn can_measure<'a>(kind: Kind, scenarios: impl Into<pqtls_lab::Scenarios<'a>>) -> Result<()> {
    if kind == Kind::Transfer {
        pqtls_netlab::topology::require_root().map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if kind == Kind::Load && scenarios.into().walk().any(|s| s.network.emulated()) {
        pqtls_netlab::topology::require_root().map_err(|e| {
            anyhow::anyhow!(
                "network factors (rtt, bandwidth, loss, jitter, initcwnd) carry the load through the network lab: {e}; \
                 or leave them out to load over loopback"
            )
        })?;
    }
    Ok(())
}

/// The measurement that makes records of `kind`, with `setup` — the one place a kind is
/// matched to its measurement. `layers` is the load measurement with a capture (the setup
/// names its files); a transfer needs root.
pub fn measurement_for<'a>(kind: Kind, stacks: Stacks<'a>, setup: Setup<'a>) -> Result<Measuring<'a>> {
    Ok(match kind {
        Kind::Insitu => Measuring::Insitu(Insitu {
            stacks,
            transport: setup.transport,
            counter: setup.counter,
            quic: Some(Arc::new(pqtls_quic::insitu::Driver)),
        }),
        Kind::Load | Kind::Layers => {
            let captures = setup.load.capture.is_some();
            if captures != (kind == Kind::Layers) {
                bail!(
                    "internal: a {} measurement {} a capture",
                    kind.name(),
                    if captures { "without" } else { "needs" }
                );
            }
            // Loads with network factors go through the lab as transfers do (its options).
            let links = pqtls_net::links::Links::new(setup.transfer.lab.clone(), setup.transfer.verify.clone());
            Measuring::Load(Load { stacks, setup: setup.load, links })
        }
        Kind::Transfer => {
            can_measure(kind, pqtls_lab::Scenarios::Held(&[]))?;
            Measuring::Transfer(Transfer::new(stacks, setup.transfer))
        }
        Kind::Resident => Measuring::Resident(Resident { stacks, setup: setup.resident }),
    })
}

/// What a command's run measured: the records with their samples in plan order, and how the
/// run went.
pub struct Ran {
    pub measured: Vec<Measured>,
    pub summary: RunSummary,
    /// Ctrl-C stopped it.
    pub interrupted: bool,
}

/// Runs `plan` with the lab's one runner into memory, with a progress bar. `schedule` and
/// `keep_going` are what the command asks for, and the kind's run policy ([`RunPolicy`]) may
/// overrule them (one at a time through the network lab, for resident memory and for
/// instruction counts; a refused link fails its points, not the run). `keep_going`: a failed
/// configuration is noted and the next one measured (shown as it happens when
/// `show_failures`, else left to the command's own summary).
pub fn run(
    plan: &Plan,
    measurement: &Measuring,
    schedule: &Schedule,
    keep_going: bool,
    show_failures: bool,
) -> Result<Ran> {
    let interrupt = interrupt_flag();
    let mut sink = MemorySink::default();
    let mut view = View::new(Style::Bar);
    let policy = RunPolicy::of(measurement.as_dyn().kind(), plan.scenarios);
    let opts = RunOptions { interrupt: interrupt.clone(), keep_going: policy.keep_going(keep_going) };
    let schedule = policy.schedule(|| anyhow::Ok(*schedule))?;
    let summary = pqtls_lab::run_with(plan, measurement.as_dyn(), &mut sink, &opts, &schedule, &mut |e| {
        if show_failures || !matches!(e, pqtls_lab::Event::Failed { .. }) {
            view.event(e)
        }
    });
    view.finish();
    let closed = measurement.close();
    let summary = summary?;
    for (link, why) in closed? {
        crate::progress::line(&format!("refused link {link}: {why}"));
    }
    let ids: Vec<String> = plan.scenarios.walk().map(|s| s.id()).collect();
    pqtls_core::record::in_plan_order(&mut sink.measured, &ids, |m| &m.record.id);
    let interrupted = summary.interrupted || interrupt.load(Ordering::SeqCst);
    Ok(Ran { measured: sink.measured, summary, interrupted })
}

/// A command's records, written as results first (`--json`: a reader of the table that went
/// away loses only the table), then its terminal table (`table`, when there are records).
pub fn write_records(
    ran: &Ran,
    json: Option<crate::output::Output>,
    terminal: crate::output::Terminal,
    table: &dyn Fn(&[pqtls_core::record::Record]) -> String,
) -> Result<Vec<pqtls_core::record::Record>> {
    let records: Vec<pqtls_core::record::Record> = ran.measured.iter().map(|m| m.record.clone()).collect();
    if let Some(out) = json {
        crate::output::write(out, &serde_json::to_vec_pretty(&records)?)?;
    }
    if !records.is_empty() {
        terminal.print(&table(&records))?;
    }
    Ok(records)
}

/// When Ctrl-C cut the run short: says how many of `total` `things` (points, configurations)
/// were measured and kept, and the ending to return.
pub fn interrupted(ran: &Ran, total: usize, things: &str) -> Option<Ending> {
    ran.interrupted.then(|| {
        crate::progress::line(&format!("interrupted: {} of {total} {things} measured and kept", ran.measured.len()));
        Ending::Interrupted
    })
}

/// A key log file a command was asked for (`--keylog`), created 0600 (its errors name the file).
pub fn key_log_file(path: &Path) -> Result<Arc<pqtls_lab::keylog::KeyLogFile>> {
    Ok(Arc::new(pqtls_lab::keylog::KeyLogFile::open(path)?))
}
