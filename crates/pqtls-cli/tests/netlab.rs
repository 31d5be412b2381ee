//! `pqtls netlab` as a process (as root): Ctrl-C or SIGTERM during verification and `kill -9` followed by
//! `pqtls netlab clean` leave no namespace behind (and with them no veth, qdisc, iptables
//! rule or emulator thread: all live inside the lab's namespaces or the dead process); bad
//! input is a clear error.

mod lab;

use lab::{bin, namespaces_of, one_lab_at_a_time, root, start_with_lab, text};
use std::process::{Child, Command};
use std::time::Duration;

/// Starts a verification and waits until its three namespaces exist.
fn start_verify() -> Child {
    // Into the measurement (RTT probes): past building.
    start_with_lab(&["netlab", "verify", "--rtt", "50ms", "--bandwidth", "20mbit"], Duration::from_millis(700))
}

/// Sends `signal` (`INT`, `TERM`) to a verification: the lab is torn down, exit 130.
fn signalled_verify_tears_the_lab_down(signal: &str) {
    if !root() {
        return;
    }
    let _one = one_lab_at_a_time();
    let child = start_verify();
    let pid = child.id();
    assert!(Command::new("kill").args([&format!("-{signal}"), &pid.to_string()]).status().unwrap().success());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out));
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "left behind after SIG{signal}");
}

#[test]
fn ctrl_c_during_verify_tears_the_lab_down() {
    signalled_verify_tears_the_lab_down("INT");
}

/// SIGTERM (Slurm, Kubernetes, `kill`) as Ctrl-C.
#[test]
fn sigterm_during_verify_tears_the_lab_down() {
    signalled_verify_tears_the_lab_down("TERM");
}

#[test]
fn kill_9_then_clean_leaves_nothing() {
    if !root() {
        return;
    }
    let _one = one_lab_at_a_time();
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
