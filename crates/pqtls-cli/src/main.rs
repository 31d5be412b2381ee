//! `pqtls`: what post-quantum TLS 1.3 costs. See `pqtls help` and the README.

#![deny(unsafe_code)]

mod assess;
mod batch;
mod context;
mod count;
mod experiments;
mod factors;
mod flags;
mod insitu;
mod layers;
mod list;
mod load;
mod netlab;
mod output;
mod progress;
mod replicate;
mod resident;
mod serve;
mod table;
mod transfer;

use anyhow::Result;
use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub const COMMIT: &str = env!("PQTLS_COMMIT");
fn long_version() -> &'static str {
    let libs: Vec<String> =
        context::all_backends().iter().map(|b| format!("{}: {}", b.stack(), b.library_version())).collect();
    Box::leak(format!("{VERSION} (commit {COMMIT})\n{}", libs.join("\n")).into_boxed_str())
}

#[derive(Parser)]
#[command(name = "pqtls", about = "What post-quantum TLS 1.3 costs: a handshake laboratory", long_version = long_version(), version = VERSION)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// What moving from one configuration to others costs, across every study, on one page:
    /// CPU per handshake, bytes, round trips, connections/s, latency, TTFB/TTLB (docs/assess.md).
    Assess(Box<assess::AssessArgs>),
    /// Every group, signature algorithm and cipher suite, per stack, with code points and sizes.
    List(list::ListArgs),
    /// Generate (or reuse) certificate chains.
    Pki(PkiArgs),
    /// A reference study's published tables next to pqtls' own figures, one page per study:
    /// published | pqtls | comparison | verdict, and the cause of every difference
    /// (`pqtls replicate --list`; docs/replication.md).
    Replicate(Box<replicate::ReplicateArgs>),
    /// In-situ handshake profile: per-step CPU time and bytes, for any group × chain × cipher.
    Insitu(Box<insitu::InsituArgs>),
    /// Measure the tracer's own overhead: traced vs untraced handshakes, interleaved.
    Overhead(insitu::OverheadArgs),
    /// The same handshakes over several transports (memory, socketpair, tcp), interleaved: do they agree?
    CrossCheck(insitu::CrossCheckArgs),
    /// Show one handshake's trace events and the step each interval is attributed to.
    Trace(insitu::TraceArgs),
    /// Run an experiment file: a matrix of configurations, results appended as measured, resumable.
    Run(flags::RunArgs),
    /// Reports from saved results: HTML with charts, Markdown, CSV, JSON.
    Report(experiments::ReportArgs),
    /// What changed between two result sets, per configuration and step, beyond noise or not.
    Compare(experiments::CompareArgs),
    /// Run an experiment on a batch system: `pqtls batch slurm FILE --shards N` submits a job
    /// array (one shard per task), waits, then merges, checks and reports (docs/batch.md).
    Batch(batch::BatchArgs),
    /// Join the shard directories of a sharded run.
    Merge(experiments::MergeArgs),
    /// Verify results directories: every record readable, of this experiment, once, with the
    /// manifest's settings; no torn or invalid line. Exit 0 when sound, 4 when not.
    Check(experiments::CheckArgs),
    /// An HTTPS/1.1 server on either stack (GET /<size>, /stats), or plain HTTP with --plain.
    Serve(Box<serve::ServeArgs>),
    /// Load a server: connections and requests per second, latency percentiles, CPU per
    /// handshake; closed loop, or open loop at --rate without coordinated omission.
    Load(Box<load::LoadArgs>),
    /// TTFB and TTLB of TLS / mutual-TLS transfers over emulated links (the network lab, as
    /// root): percentiles per point, round trips measured vs predicted, the verified link.
    Transfer(Box<transfer::TransferArgs>),
    /// Memory a terminator keeps per idle connection: pqtls serve (its heap counted), nginx,
    /// HAProxy, read with 0 and with N connections held open after one response each.
    Resident(Box<resident::ResidentArgs>),
    /// The network lab: emulated links in namespaces (verify one, clean up after killed runs).
    Netlab(netlab::NetlabArgs),
    /// The layers of every transaction in a packet capture (TCP, TCP→TLS, TLS, TLS→HTTP, HTTP),
    /// from the packets and the TLS key log.
    Layers(layers::LayersArgs),
}

#[derive(clap::Args)]
struct PkiArgs {
    /// Chains, comma-separated: leaf:root or leaf:intermediate:root (e.g. mldsa65:mldsa87).
    #[arg(long, required = true, value_delimiter = ',')]
    chain: Vec<String>,
    /// Directory of the PKI cache.
    #[arg(long, default_value_os_t = crate::context::default_pki_dir())]
    out: PathBuf,
    /// Client chains (for mutual TLS) instead of server chains.
    #[arg(long)]
    client: bool,
    /// Seed: the same seed gives the same keys where the algorithm allows.
    #[arg(long, default_value_t = 0, allow_negative_numbers = true, value_parser = flags::count(0, u64::MAX, "7"))]
    seed: u64,
}

fn pki(args: PkiArgs) -> Result<()> {
    output::not_stdout("--out", Some(&args.out), "the PKI cache is a directory and", "pki")?;
    let pki = context::pki(&args.out)?.with_seed(args.seed);
    let role = if args.client { pqtls_pki::Role::Client } else { pqtls_pki::Role::Server };
    let specs =
        args.chain.iter().map(|c| pqtls_core::config::ChainSpec::parse(c)).collect::<pqtls_core::Result<Vec<_>>>()?;
    // The missing ones generated in parallel, one thread per CPU.
    let wanted: Vec<_> = specs.iter().map(|s| (*s, role)).collect();
    let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
    if let Some((_, _, e)) = pki.prepare(&wanted, threads).failed.into_iter().next() {
        return Err(e.into());
    }
    for spec in specs {
        let files = pki.chain(&spec, role)?;
        output::print(&format!(
            "{spec}:\n  leaf key  {}\n  chain     {}\n  root      {}\n",
            files.leaf_key.display(),
            files.chain.display(),
            files.root.display()
        ))?;
    }
    Ok(())
}

/// Rust allocations are counted per thread when a command counts memory (`insitu --memory`);
/// otherwise this allocator only forwards to the system's (see pqtls_core::memory).
#[global_allocator]
static ALLOCATOR: pqtls_core::memory::CountingAllocator = pqtls_core::memory::CountingAllocator;

/// OpenSSL and aws-lc take allocator hooks only before their first allocation, so they are
/// installed before anything else runs (parsing the command line already asks the libraries
/// their versions); they count nothing until a command turns counting on. A library that
/// refused them is named by the measurement that needs them (`Backend::counted_allocations`).
fn install_allocation_hooks() {
    let _ = pqtls_openssl::count_allocations();
    // SAFETY: nothing has run yet that could have called aws-lc (this is main's first
    // statement; Rust runs no code before main and aws-lc's static initializer only reads CPU
    // features), so aws-lc holds no block its new free hook did not make.
    #[allow(unsafe_code)]
    let _ = unsafe { pqtls_rustls::memory::count_allocations() };
}

/// Whether this command line may count allocations: `--memory`, or `pqtls run` of an
/// experiment file whose settings say `memory = true`. Only then are the libraries' hooks
/// installed: they cost OpenSSL ~39,000 instructions per handshake (0.7 %, measured with
/// `--clock instructions`, docs/instructions.md) even while counting is off. A file the check
/// cannot read is left to the command, which reports it (and a measurement that needs the
/// hooks without them is refused by `Backend::counted_allocations`, naming the library).
fn memory_may_be_counted() -> bool {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--memory") {
        return true;
    }
    args.first().is_some_and(|c| c == "run")
        && args
            .iter()
            .skip(1)
            .filter(|a| !a.starts_with('-'))
            .any(|a| pqtls_store::Experiment::load(std::path::Path::new(a)).is_ok_and(|e| e.settings.memory))
}

fn main() -> ExitCode {
    if memory_may_be_counted() {
        install_allocation_hooks();
    }
    let cli = Cli::parse();
    // One rule for every command (output.rs): SIGPIPE is ignored, so a reader that went away
    // (`pqtls insitu … | head -3`, `pqtls serve | true`) is a write error, never the end of
    // the process: results are written before terminal text, terminal text whose reader went
    // away is dropped quietly, a run goes on (its progress lines are dropped, progress::line)
    // and a server keeps serving. (Child processes get the default disposition back: std
    // resets it when it spawns them.)
    // SAFETY: setting the disposition of SIGPIPE before any thread starts.
    #[allow(unsafe_code)] // FFI edge: the signal disposition.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_IGN)
    };
    let done = |r: Result<()>| r.map(|()| context::Ending::Complete);
    let result = match cli.command {
        Command::Assess(a) => assess::run(*a),
        Command::List(a) => done(list::run(a)),
        Command::Pki(a) => done(pki(a)),
        Command::Replicate(a) => replicate::run(*a),
        Command::Insitu(a) => insitu::run(*a),
        Command::Overhead(a) => done(insitu::overhead(a)),
        Command::Trace(a) => done(insitu::trace(a)),
        Command::CrossCheck(a) => done(insitu::cross_check(a)),
        Command::Run(a) => experiments::run(a),
        Command::Report(a) => done(experiments::report(a)),
        Command::Compare(a) => done(experiments::compare(a)),
        Command::Batch(a) => batch::run(a),
        Command::Merge(a) => done(experiments::merge(a)),
        Command::Check(a) => done(experiments::check(a)),
        Command::Serve(a) => serve::run(*a),
        Command::Load(a) => load::run(*a),
        Command::Transfer(a) => transfer::run(*a),
        Command::Resident(a) => resident::run(*a),
        Command::Netlab(a) => netlab::run(a),
        Command::Layers(a) => done(layers::run(a)),
    };
    match result {
        Ok(context::Ending::Complete) => ExitCode::SUCCESS,
        Ok(context::Ending::Interrupted) => ExitCode::from(context::EXIT_INTERRUPTED as u8),
        Ok(context::Ending::Exited(code)) => ExitCode::from(code.clamp(0, 255) as u8),
        Err(e) => {
            progress::line(&format!("error: {e:#}"));
            match e.downcast_ref::<context::Exit>() {
                Some(x) => ExitCode::from(x.code as u8),
                None => ExitCode::FAILURE,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    /// Every subcommand's flags are well formed (clap checks names, e.g. that a command's own
    /// flag does not collide with a factor flag made from the factor table).
    #[test]
    fn the_command_line_is_well_formed() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
