//! `clock = "instructions"`: which counter counts ([`CounterChoice`]), and re-executing pqtls
//! under valgrind's callgrind when the machine has no hardware counter — the user runs one
//! command, the process runs itself again as `valgrind --tool=callgrind … pqtls <same
//! arguments>` and passes on its exit code. docs/instructions.md explains the method.

use crate::context::Ending;
use anyhow::{bail, Context, Result};
use pqtls_core::trace::{Clock, InstructionCounter};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Command;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// Where the re-executed process finds callgrind's dumps (set by the parent, read by the child).
const DUMP_DIR_VAR: &str = "PQTLS_CALLGRIND_DIR";
/// valgrind's version, as the parent read it (`valgrind --version`).
const VERSION_VAR: &str = "PQTLS_VALGRIND_VERSION";

/// `--counter`: what counts instructions under `--clock instructions`.
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CounterChoice {
    /// The CPU's counter where the machine has one, else callgrind.
    #[default]
    Auto,
    /// The CPU's instructions-retired counter (perf_event_open); an error where there is none.
    Perf,
    /// valgrind's callgrind (pqtls re-executes itself under it).
    Callgrind,
}

/// `--counter` as a flag group, for the commands that measure in situ.
#[derive(clap::Args, Clone, Default)]
pub struct CounterArgs {
    /// What counts instructions for --clock instructions: auto (the CPU's counter where there
    /// is one, else valgrind's callgrind, under which pqtls re-executes itself), perf or
    /// callgrind.
    #[arg(long, value_enum, default_value_t = CounterChoice::Auto)]
    pub counter: CounterChoice,
}

/// How a command that was asked for instruction counts goes on.
pub enum Counting {
    /// No scenario counts instructions.
    NotAsked,
    /// Counting in this process.
    Here(Arc<dyn InstructionCounter>),
    /// The command ran again under valgrind, which ended so: nothing more to do here.
    ReExecuted(Ending),
}

/// The counter for `scenarios`, or the command re-executed under callgrind.
pub fn counting<'a>(scenarios: impl Into<pqtls_lab::Scenarios<'a>>, choice: CounterChoice) -> Result<Counting> {
    let scenarios = scenarios.into();
    if !scenarios.walk().any(|s| s.clock == Clock::Instructions) {
        return Ok(Counting::NotAsked);
    }
    let on_valgrind = pqtls_count::valgrind::running_on_valgrind() > 0;
    if let Some(dir) = std::env::var_os(DUMP_DIR_VAR).filter(|_| on_valgrind) {
        let version = std::env::var(VERSION_VAR).unwrap_or_default();
        return Ok(Counting::Here(Arc::new(pqtls_count::Callgrind::new(&PathBuf::from(dir), &version)?)));
    }
    if on_valgrind {
        bail!(
            "pqtls runs under valgrind already, but not as it starts itself: run it without valgrind and it \
             re-executes itself under callgrind with the options it needs (--counter callgrind)"
        );
    }
    let valgrind = || {
        if !pqtls_lab::policy::counts_only(scenarios) {
            bail!(
                "this run mixes clock = instructions with time: without a hardware counter instructions are counted \
                 under valgrind, where time means nothing — measure them apart (e.g. pqtls run FILE, then pqtls run \
                 FILE --clock instructions, and pqtls report results/NAME --with results/NAME-instructions)"
            );
        }
        re_execute()
    };
    match choice {
        CounterChoice::Perf => Ok(Counting::Here(Arc::new(pqtls_count::Perf::open()?))),
        CounterChoice::Auto => match pqtls_count::Perf::open() {
            Ok(p) => Ok(Counting::Here(Arc::new(p))),
            Err(_) => valgrind(),
        },
        CounterChoice::Callgrind => valgrind(),
    }
}

/// valgrind's version (`valgrind-3.19.0`), or what to do when it is not there.
fn valgrind_version() -> Result<String> {
    let out = Command::new("valgrind").arg("--version").output().map_err(|e| {
        anyhow::anyhow!(
            "counting instructions on a machine without a hardware counter needs valgrind, which cannot be run \
             ({e}): scripts/setup.sh installs it (apt-get install valgrind)"
        )
    })?;
    if !out.status.success() {
        bail!("`valgrind --version` failed ({}): is valgrind installed correctly?", out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// The command line of the re-executed process: callgrind counting nothing until the first
/// reading (`--instr-atstart=no`: set-up runs several times faster), dumps per thread, no
/// per-line costs (only each dump's summary is read).
fn valgrind_command(dir: &std::path::Path, exe: PathBuf, args: Vec<OsString>) -> Command {
    let mut cmd = Command::new("valgrind");
    cmd.args([
        "--tool=callgrind",
        "--quiet",
        "--separate-threads=yes",
        "--instr-atstart=no",
        "--dump-line=no",
        "--dump-instr=no",
        "--compress-strings=no",
    ]);
    cmd.arg(format!("--callgrind-out-file={}/cg.%p", dir.display()));
    // valgrind's own messages go to a file, shown when the run fails.
    cmd.arg(format!("--log-file={}/valgrind.log", dir.display()));
    cmd.arg(exe).args(args);
    cmd
}

/// Runs this command again under callgrind and waits for it; Ctrl-C reaches both processes
/// (one process group): the child finishes what it measured, the parent waits for it.
fn re_execute() -> Result<Counting> {
    let version = valgrind_version()?;
    let dir =
        tempfile::Builder::new().prefix("pqtls-callgrind-").tempdir().context("creating callgrind's dump directory")?;
    let exe = std::env::current_exe().context("finding this program to run it under valgrind")?;
    let args: Vec<OsString> = std::env::args_os().skip(1).collect();
    crate::progress::line(&format!(
        "no hardware instruction counter here: running again under {version}'s callgrind (instructions, not time; \
         about 50–100× slower per handshake)"
    ));
    // The parent only waits: its Ctrl-C handler keeps it alive while the child stops cleanly.
    let interrupted = crate::context::interrupt_flag();
    let status = valgrind_command(dir.path(), exe, args)
        .env(DUMP_DIR_VAR, dir.path())
        .env(VERSION_VAR, &version)
        .status()
        .context("starting valgrind")?;
    if !status.success() {
        let log = std::fs::read_to_string(dir.path().join("valgrind.log")).unwrap_or_default();
        let log: Vec<&str> = log.lines().filter(|l| !l.contains("Using source line as position")).collect();
        if !log.is_empty() {
            crate::progress::line(&format!("valgrind said:\n{}", log.join("\n")));
        }
    }
    Ok(Counting::ReExecuted(match status.code() {
        Some(0) => Ending::Complete,
        Some(code) if code == crate::context::EXIT_INTERRUPTED || interrupted.load(Ordering::SeqCst) => {
            Ending::Interrupted
        }
        Some(code) => Ending::Exited(code),
        None => bail!("pqtls under valgrind was killed by a signal ({status})"),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::scenario::Scenario;

    #[test]
    fn only_scenarios_that_count_instructions_ask_for_a_counter() {
        let s = Scenario::new([("group", "x25519")]).unwrap();
        assert!(matches!(counting(&[s], CounterChoice::Callgrind).unwrap(), Counting::NotAsked));
    }

    #[test]
    fn the_valgrind_command_counts_per_thread_from_the_first_reading() {
        let cmd = valgrind_command(std::path::Path::new("/tmp/d"), PathBuf::from("/bin/pqtls"), vec!["insitu".into()]);
        let args: Vec<String> = cmd.get_args().map(|a| a.to_string_lossy().into_owned()).collect();
        for want in
            ["--tool=callgrind", "--separate-threads=yes", "--instr-atstart=no", "--callgrind-out-file=/tmp/d/cg.%p"]
        {
            assert!(args.iter().any(|a| a == want), "{want} missing from {args:?}");
        }
        assert_eq!(&args[args.len() - 2..], ["/bin/pqtls", "insitu"]);
    }
}
