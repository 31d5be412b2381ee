//! `pqtls netlab` as a process (as root): Ctrl-C during verification and `kill -9` followed by
//! `pqtls netlab clean` leave no namespace behind (and with them no veth, qdisc, iptables
//! rule or emulator thread: all live inside the lab's namespaces or the dead process); bad
//! input is a clear error.

use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.env("RUST_BACKTRACE", "0");
    c
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn root() -> bool {
    let out = Command::new("id").arg("-u").output().map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    let ok = out.unwrap_or(false);
    if !ok {
        eprintln!("skipped: the network lab needs root");
    }
    ok
}

/// Lab namespaces made by process `pid`.
fn namespaces_of(pid: u32) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().unwrap();
    let prefix = format!("pqtls-{pid}-");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .filter(|n| n.starts_with(&prefix))
        .map(str::to_string)
        .collect()
}

/// Starts a verification and waits until its three namespaces exist.
fn start_verify() -> Child {
    let child = bin()
        .args(["netlab", "verify", "--rtt", "50ms", "--bandwidth", "20mbit"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let end = Instant::now() + Duration::from_secs(30);
    while namespaces_of(child.id()).len() < 3 {
        assert!(Instant::now() < end, "the lab did not come up");
        std::thread::sleep(Duration::from_millis(50));
    }
    // Into the measurement (RTT probes): past building.
    std::thread::sleep(Duration::from_millis(700));
    child
}

#[test]
fn ctrl_c_during_verify_tears_the_lab_down() {
    if !root() {
        return;
    }
    let child = start_verify();
    let pid = child.id();
    assert!(Command::new("kill").args(["-INT", &pid.to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "left behind after Ctrl-C");
}

#[test]
fn kill_9_then_clean_leaves_nothing() {
    if !root() {
        return;
    }
    let mut child = start_verify();
    let pid = child.id();
    child.kill().unwrap(); // SIGKILL: no destructor runs
    child.wait().unwrap();
    let left = namespaces_of(pid);
    assert_eq!(left.len(), 3, "a killed run leaves its lab: {left:?}");
    let out = bin().args(["netlab", "clean"]).output().unwrap();
    assert!(out.status.success(), "{}", text(&out));
    for n in &left {
        assert!(text(&out).contains(&format!("removed {n}")), "{}", text(&out));
    }
    assert_eq!(namespaces_of(pid), Vec::<String>::new());
}

#[test]
fn bad_link_values_are_clear_errors() {
    for (args, says) in [
        (&["--rtt", "50"][..], "unit"),
        (&["--rtt=-5ms"][..], "≥ 0"),
        (&["--bandwidth", "100furlongs"][..], "use kbit, mbit or gbit"),
        (&["--loss", "150%"][..], "over 100 %"),
        (&["--rtt", "10ms", "--jitter", "8ms"][..], "jitter 8ms is larger than the one-way delay 5ms"),
        (&["--rtt", "20s"][..], "above the lab's"),
        (&["--initcwnd", "0"][..], "initcwnd"),
    ] {
        let out = bin().args(["netlab", "verify"]).args(args).output().unwrap();
        assert!(!out.status.success(), "{args:?} accepted");
        assert!(text(&out).contains(says), "{args:?}: {}", text(&out));
        assert!(!text(&out).contains("panicked"), "{}", text(&out));
    }
}
