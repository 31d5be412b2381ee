//! `pqtls load` and `pqtls run` of a load experiment as a user meets them: records of kind
//! `load` with what was negotiated, a server per configuration or a URL, a `pqtls serve` in
//! another process whose counters come into the record, timelines, and bad input that says
//! what would work. Loopback only; every run is bounded by its duration or request count.

use std::path::Path;
use std::process::{Command, Output, Stdio};

mod common;
use common::{ok, pqtls_in as pqtls, Serve};

/// Refused (any non-zero exit) with an error naming every hint.
fn fails_with(o: &Output, hints: &[&str]) {
    common::fails_with(o, None, hints)
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

#[test]
fn load_measures_a_server_per_configuration_and_records_what_was_negotiated() {
    let dir = tempfile::tempdir().unwrap();
    let out = ok(&pqtls(
        &[
            "load",
            "--stack",
            "openssl,rustls",
            "--group",
            "X25519MLKEM768",
            "--chain",
            "mldsa44:mldsa44",
            "--response-size",
            "1KiB",
            "--requests",
            "25",
            "--warmup-time",
            "0s",
            "--layers",
            "--json",
            "r.json",
            "--timelines",
            "t.ndjson",
        ],
        dir.path(),
    ));
    assert!(out.contains("conns/s") && out.contains("tls_to_http"), "{out}");
    let recs = records(&dir.path().join("r.json"));
    assert_eq!(recs.len(), 2);
    for r in &recs {
        assert_eq!(r["kind"], "load");
        let res = &r["result"];
        assert_eq!(res["requests"], 25);
        assert_eq!(res["handshakes"], 25, "one handshake per request");
        assert_eq!(res["negotiated"]["group"].as_str().unwrap().to_ascii_lowercase(), "x25519mlkem768");
        assert_eq!(res["terminator"]["name"], "pqtls");
        assert_eq!(res["server"]["handshakes"], 25, "the server's counters come into the record");
        assert_eq!(res["latency"]["count"], 25);
        assert_eq!(res["stopped"], "requests");
        assert!(res["bytes"]["messages"]["ClientHello"].as_u64().unwrap() > 1000, "an X25519MLKEM768 share: {res}");
        assert!(res["bytes"]["messages"]["CertificateVerify"].as_u64().unwrap() > 2420, "an ML-DSA-44 signature");
    }
    let lines = std::fs::read_to_string(dir.path().join("t.ndjson")).unwrap();
    assert_eq!(lines.lines().count(), 50, "one timeline per measured transaction");
    assert!(lines.lines().all(|l| l.contains("\"connect_start_ns\"") && l.contains("\"last_byte_ns\"")));
}

#[test]
fn load_drives_a_url_and_reads_a_pqtls_serve_counters() {
    let dir = tempfile::tempdir().unwrap();
    let s = Serve::start_in(&["--stack", "rustls", "--group", "x25519", "--chain", "ed25519:ed25519"], dir.path());
    let url = s.url("4KiB");
    let client = ["load", &url, "--stack", "openssl", "--group", "x25519", "--chain", "ed25519:ed25519"];
    let run = ["--keep-alive", "--connections", "2", "--requests", "30", "--warmup-time", "0s", "--json", "r.json"];
    ok(&pqtls(&[&client[..], &run, &["--quiet"]].concat(), dir.path()));
    let r = &records(&dir.path().join("r.json"))[0];
    assert_eq!(r["scenario"]["response_size"], "4KiB", "the URL's path is the response size");
    assert_eq!(r["result"]["terminator"]["name"], "external");
    assert_eq!(r["result"]["requests"], 30);
    assert_eq!(r["result"]["server"]["handshakes"], 2, "keep-alive: one handshake per connection");
    // Asking for a group the server does not have is an error naming both.
    let o = pqtls(
        &["load", &url, "--group", "X25519MLKEM768+x25519", "--chain", "ed25519:ed25519", "--requests", "5", "--quiet"],
        dir.path(),
    );
    fails_with(&o, &["negotiated group", "asked: X25519MLKEM768"]);
}

#[test]
fn a_load_experiment_runs_into_a_store() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("l.toml"),
        r#"name = "l"
measurement = "load"
[settings]
duration = "1s"
warmup_time = "0s"
requests = 15
[matrix]
group = ["x25519"]
chain = "ed25519:ed25519"
threads = ["1", "2"]
tls = [true, false]
"#,
    )
    .unwrap();
    ok(&pqtls(&["run", "l.toml", "--no-progress"], dir.path()));
    let text = std::fs::read_to_string(dir.path().join("results/l/records.ndjson")).unwrap();
    let recs: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), 4);
    for r in &recs {
        assert_eq!(r["kind"], "load");
        let plain = r["scenario"]["tls"] == "false";
        assert_eq!(r["result"]["handshakes"], if plain { 0 } else { 15 });
        assert_eq!(r["result"]["requests"], 15);
    }
    // Resumed: nothing measured twice.
    let o = pqtls(&["run", "l.toml", "--no-progress"], dir.path());
    ok(&o);
    assert_eq!(std::fs::read_to_string(dir.path().join("results/l/records.ndjson")).unwrap(), text);
}

/// Processes named `what` (their `comm`: the program itself, not a `pqtls load --via what`
/// that mentions it), to check nothing is left behind.
/// The tests that count the machine's nginx/HAProxy processes run one at a time (the test
/// harness runs a file's tests in parallel: one test's terminator would be the other's leak).
fn terminators_counted_alone() -> std::sync::MutexGuard<'static, ()> {
    static ALONE: std::sync::Mutex<()> = std::sync::Mutex::new(());
    ALONE.lock().unwrap_or_else(|p| p.into_inner())
}

fn processes(what: &str) -> usize {
    std::fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| std::fs::read_to_string(e.ok()?.path().join("comm")).ok())
        .filter(|c| c.trim_end() == what)
        .count()
}

#[test]
fn load_goes_through_nginx_and_haproxy_and_leaves_no_process() {
    let _alone = terminators_counted_alone();
    let root = common::root_from("trixie-root.sh", "the Debian trixie root");
    let dir = tempfile::tempdir().unwrap();
    let before = (processes("nginx"), processes("haproxy"));
    let out = ok(&pqtls(
        &[
            "load",
            "--via",
            "nginx,haproxy",
            "--group",
            "X25519MLKEM768",
            "--chain",
            "mldsa44:mldsa44",
            "--cipher",
            "TLS_AES_256_GCM_SHA384",
            "--response-size",
            "1KiB",
            "--requests",
            "20",
            "--warmup-time",
            "0s",
            "--json",
            "r.json",
        ],
        dir.path(),
    ));
    assert!(out.contains("nginx") && out.contains("haproxy"), "{out}");
    let recs = records(&dir.path().join("r.json"));
    assert_eq!(recs.len(), 2);
    for r in &recs {
        let res = &r["result"];
        assert_eq!(res["requests"], 20);
        assert_eq!(res["handshakes"], 20);
        assert_eq!(res["negotiated"]["group"].as_str().unwrap().to_ascii_lowercase(), "x25519mlkem768");
        assert!(res["terminator"]["version"].as_str().unwrap().contains("OpenSSL 3."), "{res}");
        assert!(res["terminator"]["backend"].as_str().unwrap().contains("pqtls serve --plain"));
        assert_eq!(res["server"]["requests"], 20, "the plain backend served every request");
        // The terminator's own cost, from /proc: one connection per request (no keep-alive,
        // no warm-up), its CPU divided by them, its memory before and after.
        let p = &res["terminator_processes"];
        assert_eq!(p["handshakes"], 20, "{p}");
        let cpu = p["cpu_ns"].as_u64().unwrap();
        assert_eq!(p["cpu_ns_per_handshake"].as_f64().unwrap(), cpu as f64 / 20.0, "{p}");
        assert!(p["pss_bytes_after"].as_u64().unwrap() > 0 && p["rss_bytes_after"].as_u64().unwrap() > 0, "{p}");
    }
    assert_eq!((processes("nginx"), processes("haproxy")), before, "no terminator left behind");
    let _ = root;
}

#[test]
fn ctrl_c_stops_a_load_through_nginx_and_leaves_no_process() {
    let _alone = terminators_counted_alone();
    let _root = common::root_from("trixie-root.sh", "the Debian trixie root");
    let dir = tempfile::tempdir().unwrap();
    let before = processes("nginx");
    let child = Command::new(env!("CARGO_BIN_EXE_pqtls"))
        .args(["load", "--via", "nginx", "--group", "x25519", "--chain", "ed25519:ed25519", "--duration", "60s"])
        .args(["--warmup-time", "0s"])
        .args(["--json", "r.json", "--quiet"])
        .current_dir(dir.path())
        .env("PQTLS_PKI_DIR", dir.path().join("pki"))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Interrupted once nginx runs and load flows (bounded: 30 s).
    let t0 = std::time::Instant::now();
    while processes("nginx") == before {
        assert!(t0.elapsed() < std::time::Duration::from_secs(30), "nginx did not start");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    std::thread::sleep(std::time::Duration::from_millis(2500));
    // kill(1) sends SIGINT as a terminal's Ctrl-C would.
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(processes("nginx"), before, "nginx left behind");
    let r = &records(&dir.path().join("r.json"))[0];
    assert_eq!(r["result"]["stopped"], "interrupted", "what was measured is kept and says so");
}

#[test]
fn bad_load_input_gets_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let url = format!("https://127.0.0.1:{port}/");
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["load", &url, "--chain", "p256:p256", "--requests", "3"], vec!["is a server listening"]),
        (vec!["load", "ftp://x/"], vec!["https://"]),
        (vec!["load", "--shard", "5/4"], vec!["--shard 5/4", "1 ≤ K ≤ N"]),
        (vec!["load", "--rate", "0/s"], vec!["rate"]),
        (vec!["load", "--duration", "soon"], vec!["--duration soon"]),
        (vec!["load", &url, "--terminator", "nginx"], vec!["--terminator"]),
        (vec!["load", &url, "--rtt", "50ms"], vec!["network factors", "with a URL", "leave out the URL"]),
        (vec!["load", "--bandwidth", "100mbit"], vec!["needs the link's RTT", "--rtt 10ms"]),
        (
            vec!["load", "--rtt", "50ms", "--quic", "--stack", "rustls"],
            vec!["--quic (--transport quic) with network factors"],
        ),
        (vec!["load", "--rtt", "50ms", "--quic"], vec!["rustls stack only", "stack = rustls"]),
        (vec!["load", "--terminator", "apache"], vec!["apache", "haproxy"]),
        (vec!["load", "--connections", "0"], vec!["connections"]),
        // The load runs over tcp or quic (issue 33): in situ's transports are refused, at the
        // default's spelling too (it would be accepted and read as tcp).
        (vec!["load", "--transport", "memory"], vec!["transport memory is in situ's", "tcp", "quic"]),
        (vec!["load", "--transport", "socketpair"], vec!["transport socketpair is in situ's"]),
    ];
    for (args, hints) in cases {
        let o = pqtls(&args, dir.path());
        fails_with(&o, &hints);
    }
}

#[test]
fn load_memory_counts_pqtls_serve_heap_per_connection() {
    let dir = tempfile::tempdir().unwrap();
    // The server in this process: its workers' threads are counted, not the load generator's.
    let args = ["load", "--stack", "openssl,rustls", "--group", "X25519MLKEM768", "--chain", "mldsa65:mldsa65"];
    let run = ["--requests", "20", "--warmup-time", "0s", "--memory", "--json", "r.json"];
    let out = ok(&pqtls(&[&args[..], &run].concat(), dir.path()));
    assert!(out.contains("pqtls serve's heap (its worker threads)"), "{out}");
    for r in records(&dir.path().join("r.json")) {
        assert_eq!(r["settings"]["memory"], true);
        let heap = &r["result"]["server"]["heap"];
        assert_eq!(heap["connections"], 20, "one connection per request: {heap}");
        let allocations = heap["allocations_per_connection"].as_f64().unwrap();
        let bytes = heap["allocated_bytes_per_connection"].as_f64().unwrap();
        // A handshake with an ML-DSA-65 chain allocates tens of blocks, kilobytes each way.
        assert!(allocations >= 10.0 && bytes >= 10_000.0, "{heap}");
    }
    // A pqtls serve --memory of its own: its /stats carry its workers' heap, without --memory here.
    let s =
        Serve::start_in(&["--stack", "rustls", "--group", "x25519", "--chain", "p256:p256", "--memory"], dir.path());
    let url = s.url("1KiB");
    let client = ["load", &url, "--stack", "rustls", "--group", "x25519", "--chain", "p256:p256"];
    ok(&pqtls(
        &[&client[..], &["--requests", "10", "--warmup-time", "0s", "--quiet", "--json", "u.json"]].concat(),
        dir.path(),
    ));
    let heap = &records(&dir.path().join("u.json"))[0]["result"]["server"]["heap"];
    assert!(heap["allocations_per_connection"].as_f64().unwrap() > 0.0, "{heap}");
    // --memory counts pqtls serve's heap: not an external URL's.
    let o = pqtls(&[&client[..], &["--requests", "3", "--memory", "--quiet"]].concat(), dir.path());
    fails_with(&o, &["--memory counts pqtls serve's heap", "pqtls serve --memory"]);
}

/// A `pqtls serve` whose chain has another root than the one the client's configuration names
/// (P-384 instead of P-256): the client trusts it only when told (`--ca` of its root file), a
/// chain that does not verify is an error naming the trust and what would work, and
/// `--no-verify` measures without verifying (records say verify = false, no verification CPU).
#[test]
fn load_trusts_what_ca_names_and_no_verify_skips_the_chain_on_both_stacks() {
    let dir = tempfile::tempdir().unwrap();
    let s = Serve::start_in(&["--stack", "openssl", "--chain", "p256:p384"], dir.path());
    let url = s.url("1KiB");
    let root = dir.path().join("pki/server-p256_p384-s0/root.pem");
    assert!(root.is_file(), "pqtls serve made its chain in {}", root.display());
    let root = root.to_str().unwrap();
    let client = ["load", url.as_str(), "--chain", "p256:p256", "--requests", "20", "--warmup-time", "0s", "--quiet"];
    for stack in ["openssl", "rustls"] {
        let with = |extra: &[&str]| pqtls(&[&client[..], &["--stack", stack], extra].concat(), dir.path());
        // Not given: the chain is not ours, and the error says whom the client trusted.
        fails_with(
            &with(&[]),
            &["verify error", "certificate verification failed", "the client trusted: pqtls PKI root", "--ca FILE"],
        );
        // The server's root given: verified, by IP address (the leaf's SAN has 127.0.0.1).
        ok(&with(&["--ca", root, "--json", "ca.json"]));
        let r = &records(&dir.path().join("ca.json"))[0];
        assert_eq!(r["scenario"]["verify"], "true", "{stack}");
        assert_eq!(r["result"]["requests"], 20, "{stack}");
        assert_eq!(r["result"]["trust"], format!("--ca {root}, name 127.0.0.1"), "{stack}");
        let verify_ns = r["result"]["client_verify_cpu_ns_mean"].as_f64().expect("verification CPU measured");
        let handshake_ns = r["result"]["client_handshake_cpu_ns_mean"].as_f64().unwrap();
        assert!(verify_ns > 0.0 && verify_ns < handshake_ns, "{stack}: verification is part of the handshake: {r}");
        // A name the certificate is not for fails verification, naming the name checked.
        fails_with(&with(&["--ca", root, "--servername", "example.org"]), &["verify error", "name example.org"]);
        // --no-verify: the untrusted chain accepted as sent, and said so.
        ok(&with(&["--no-verify", "--json", "nv.json"]));
        let r = &records(&dir.path().join("nv.json"))[0];
        assert_eq!(r["scenario"]["verify"], "false", "{stack}");
        assert!(r["label"].as_str().unwrap().ends_with("no verify"), "{r}");
        assert!(r["id"].as_str().unwrap().contains("verify=false"), "another id than the verified run's: {r}");
        assert_eq!(r["result"]["requests"], 20, "{stack}");
        assert!(r["result"]["trust"].as_str().unwrap().starts_with("none (verify = false"), "{r}");
        assert!(r["result"].get("client_verify_cpu_ns_mean").is_none(), "no verification CPU without verifying: {r}");
    }
    // Bad trust input is refused before anything is measured.
    fails_with(
        &pqtls(&[&client[..], &["--ca", "no-such.pem"]].concat(), dir.path()),
        &["--ca no-such.pem: no such file"],
    );
    std::fs::write(dir.path().join("empty.pem"), "not a certificate\n").unwrap();
    fails_with(&pqtls(&[&client[..], &["--ca", "empty.pem"]].concat(), dir.path()), &["empty.pem", "holds no"]);
    fails_with(
        &pqtls(&[&client[..], &["--no-verify", "--verify", "true"]].concat(), dir.path()),
        &["--no-verify and --verify true contradict"],
    );
}

/// The load generator's threads in process `pid` (their names, `pqtls-load-N`).
fn load_threads(pid: u32) -> usize {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    tasks
        .flatten()
        .filter(|t| std::fs::read_to_string(t.path().join("comm")).is_ok_and(|c| c.starts_with("pqtls-load-")))
        .count()
}

/// An open loop paused (SIGSTOP) across the end of its measured stretch and continued: every
/// request due in the stretch is sent late (measured from its due time) or counted — completed,
/// unfinished or an error — none dropped (issue 39). 40/s for 2 s, no warm-up: 80 due. On both
/// wires (before, over TCP, 13 of the 80 were counted and 67 dropped).
#[test]
fn an_open_loop_paused_across_its_end_sends_or_counts_every_due_request() {
    for transport in ["tcp", "quic"] {
        paused_open_loop(transport);
    }
}

fn paused_open_loop(transport: &str) {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "load",
        "--stack",
        "rustls",
        "--group",
        "x25519",
        "--chain",
        "p256:p256",
        "--rate",
        "40/s",
        "--duration",
        "2s",
        "--warmup-time",
        "0s",
        "--timeout",
        "20s",
        "--transport",
        transport,
        "--json",
        "out.json",
    ];
    let mut child = common::pqtls_cmd(&args, &dir.path().join("pki"))
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    let t0 = std::time::Instant::now();
    while load_threads(pid) == 0 {
        assert!(t0.elapsed() < std::time::Duration::from_secs(120), "the generator did not start");
        assert!(child.try_wait().unwrap().is_none(), "pqtls load ended before its generator started");
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    // Into the stretch, then paused past its end (the generator cannot run at all meanwhile).
    std::thread::sleep(std::time::Duration::from_millis(300));
    let signal = |s: &str| assert!(Command::new("kill").args([s, &pid.to_string()]).status().unwrap().success());
    signal("-STOP");
    std::thread::sleep(std::time::Duration::from_secs(3));
    signal("-CONT");
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}");
    let r = &records(&dir.path().join("out.json"))[0]["result"];
    let errors: u64 = r["errors"].as_array().unwrap().iter().map(|e| e["count"].as_u64().unwrap()).sum();
    let counted = r["requests"].as_u64().unwrap() + r["unfinished"].as_u64().unwrap() + errors;
    assert_eq!(counted, 80, "{transport}: every due request sent or counted: {r}");
    // Those due during the pause went late: their latency counts from their due time.
    assert!(r["latency"]["max_ns"].as_u64().unwrap_or(0) >= 1_000_000_000, "{}", r["latency"]);
}
