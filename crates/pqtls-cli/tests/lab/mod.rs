//! Helpers of the tests that run the network lab through the `pqtls` binary (netlab.rs,
//! transfer.rs, transfer_quic.rs, unchanged.rs): the binary, root detection, the lab's namespaces of a
//! process, a run bounded in time, and waiting until a started run's lab is up.

#![allow(dead_code)] // each test file uses its own subset

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.env("RUST_BACKTRACE", "0");
    c
}

pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// Whether this process is root (the lab needs it); says so when not.
pub fn root() -> bool {
    let out = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let ok = out.unwrap_or(false);
    if !ok {
        eprintln!("skipped: the network lab needs root");
    }
    ok
}

pub fn sh(program: &str, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap();
    String::from_utf8_lossy(&o.stdout).to_string()
}

/// Lab namespaces made by process `pid`.
pub fn namespaces_of(pid: u32) -> Vec<String> {
    let prefix = format!("pqtls-{pid}-");
    sh("ip", &["netns", "list"])
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// Spawns `pqtls args…` (stderr piped), waits up to 30 s until its lab's three namespaces
/// exist, then `settle` longer (into the measurement).
pub fn start_with_lab(args: &[&str], settle: Duration) -> Child {
    let mut child = bin().args(args).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while namespaces_of(child.id()).len() < 3 {
        if let Ok(Some(status)) = child.try_wait() {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
            panic!("pqtls {args:?} ended ({status}) before its lab came up:\n{err}");
        }
        if Instant::now() > end {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the lab of pqtls {args:?} did not come up within 30 s:\n{}", text(&out));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(settle);
    child
}

/// Runs `cmd` (a `pqtls` command) to its end with a time bound; past it, stops the run (SIGINT)
/// and fails naming what it printed. Returns its process id and output.
pub fn run_bounded(mut cmd: Command, limit: Duration) -> (u32, Output) {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => (pid, out.unwrap()),
        Err(_) => {
            let _ = Command::new("kill").args(["-INT", &pid.to_string()]).status();
            let out = rx.recv_timeout(Duration::from_secs(20));
            panic!("pqtls did not end within {limit:?}: {:?}", out.map(|o| o.map(|o| text(&o))));
        }
    }
}

/// One lab at a time within a test binary: labs built, signalled and cleaned concurrently make
/// failures that are the tests' own, not pqtls'.
pub fn one_lab_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

/// Whether a lab run failed only because the machine stalled more often than a run may measure
/// again (the host took the CPU away under too many transfers: "host stalls: …"). That is not
/// the program's fault, and a test of a function cannot assert the machine's quiet; it asserts
/// the handling instead — a failed point (exit 3) that says why, no panic, nothing of the lab
/// left — and the caller ends there. Any other failure is the caller's to assert.
pub fn stopped_by_host_stalls(pid: u32, out: &Output) -> bool {
    let t = text(out);
    if out.status.success() || !t.contains("host stalls:") {
        return false;
    }
    assert_eq!(out.status.code(), Some(3), "a point failed for host stalls: exit 3\n{t}");
    assert!(t.contains("measure again") && !t.contains("panicked"), "{t}");
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left after host stalls");
    eprintln!(
        "NOTICE: this machine stalled under more transfers than a run measures again; the handling is checked:\n{t}"
    );
    true
}
