//! `pqtls load` through the network lab (as root, in namespaces it makes itself): the load
//! generator in the client namespace, pqtls serve — and nginx where the trixie root is — in the
//! server namespace, over a verified link that is in the record; a link the machine cannot
//! carry, a URL, no RTT and no root are clear refusals; nothing of the lab is left. Every run
//! is bounded in time.

mod lab;

use lab::{bin, namespaces_of, one_lab_at_a_time, root, run_bounded, text};
use std::process::{Command, Output};
use std::time::Duration;

/// Loose: these tests check what the lab does, not how quiet this machine is (as transfer.rs).
const LOOSE: &str = "5ms";
const RTT_NS: u64 = 20_000_000;

/// Runs `pqtls args…` to its end (at most `limit`).
fn run(args: &[&str], limit: Duration) -> (u32, Output) {
    let mut cmd = bin();
    cmd.args(args);
    run_bounded(cmd, limit)
}

#[test]
fn a_load_through_the_lab_records_its_link_and_takes_three_round_trips_per_new_connection() {
    let _s = one_lab_at_a_time();
    if !root() {
        return;
    }
    let trixie = std::path::Path::new("/var/cache/pqtls/trixie/usr/sbin/nginx").exists();
    if !trixie {
        eprintln!("NOTICE: nginx through the lab not tested: no trixie root (scripts/trixie-root.sh)");
    }
    let terminators = if trixie { "pqtls,nginx" } else { "pqtls" };
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let pki = dir.path().join("pki");
    let args = [
        "load",
        "--rtt",
        "20ms",
        "--bandwidth",
        "20mbit",
        "--rtt-tolerance",
        LOOSE,
        "--group",
        "x25519",
        "--chain",
        "ed25519:ed25519",
        "--terminator",
        terminators,
        "--requests",
        "10",
        "--warmup-time",
        "0s",
        "--quiet",
        "--pki",
        pki.to_str().unwrap(),
        "--json",
        json.to_str().unwrap(),
    ];
    let (pid, out) = run(&args, Duration::from_secs(120));
    assert!(out.status.success(), "{}", text(&out));
    let records: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(records.len(), if trixie { 2 } else { 1 }, "{}", text(&out));
    for r in &records {
        let x = &r["result"];
        assert!(r["id"].as_str().unwrap().ends_with("|rtt=20ms|bw=20mbit"), "the id names the link: {}", r["id"]);
        // The verified link and the emulator during the run are in the record.
        assert_eq!(x["link"]["accepted"], true, "{r}");
        assert_eq!(x["link"]["asked"]["rtt_ns"], RTT_NS);
        assert_eq!(x["emulator"]["kind"], "nfqueue");
        assert!(x["emulator"]["packets"].as_u64().unwrap() > 0, "{r}");
        // Requests counted = completed, each a new TLS connection.
        assert_eq!(x["requests"], 10, "{r}");
        assert_eq!(x["handshakes"], 10, "{r}");
        assert_eq!(x["latency"]["count"], 10);
        assert!(x["errors"].as_array().unwrap().is_empty(), "{r}");
        // The server listened in the lab's server namespace, not on loopback.
        assert!(!x["url"].as_str().unwrap().contains("127.0.0.1"), "{}", x["url"]);
        // A physical bound, not the machine's speed: TCP's handshake, TLS 1.3's full handshake
        // and the request each take a round trip of the emulated link (the emulator only
        // delays; 1 % for clock granularity).
        let min_ns = x["latency"]["min_ns"].as_u64().unwrap();
        assert!(min_ns >= 3 * RTT_NS * 99 / 100, "{min_ns} ns < 3 × RTT: {r}");
    }
    if trixie {
        let nginx = &records[1]["result"];
        assert_eq!(nginx["terminator"]["name"], "nginx");
        assert!(nginx["terminator_processes"]["processes"].as_u64().unwrap() >= 1, "{nginx}");
    }
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left");
}

#[test]
fn refusals_name_what_would_work() {
    let _s = one_lab_at_a_time();
    if !root() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let base = ["load", "--group", "x25519", "--chain", "ed25519:ed25519", "--requests", "3", "--warmup-time", "0s"];
    let pki_args = ["--pki", pki.to_str().unwrap()];
    // A link the machine cannot carry: the verification refuses it with what it measured; the
    // run exits 3 naming it, and leaves nothing.
    let (pid, out) =
        run(&[&base[..], &pki_args, &["--rtt", "20ms", "--bandwidth", "5gbit"]].concat(), Duration::from_secs(90));
    let t = text(&out);
    assert_eq!(out.status.code(), Some(3), "{t}");
    assert!(t.contains("refused link RTT 20ms, 5gbit") && t.contains("measured"), "{t}");
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left");
    // Not root: says what is needed and what works without it; builds nothing.
    let out = Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_pqtls")])
        .args(base)
        .args(["--rtt", "20ms", "--pki", "/nonexistent-pki"])
        .output()
        .unwrap();
    let t = text(&out);
    assert_eq!(out.status.code(), Some(1), "{t}");
    assert!(t.contains("needs root") && t.contains("leave them out to load over loopback"), "{t}");
}
