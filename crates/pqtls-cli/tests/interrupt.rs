//! Ctrl-C (and SIGTERM, taken alike) as a user meets it: an interleaved `insitu` or `run` keeps every open
//! configuration's handshakes so far as records marked `stopped: interrupted` and exits 130;
//! `pqtls check` calls such a store incomplete (exit 3); the next `pqtls run` measures them
//! again and the reader sees each configuration once, complete. And the documented load-shard
//! workflow (`load --shard K/N --json`, `merge`, `check`) ends in a sound store.

mod common;
use common::{collect_stderr, ok, pqtls, text, Serve};

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `pqtls args`, waits until its stderr says `marker` (within 120 s), lets it measure for
/// `then` more, sends SIGINT and returns its exit code and stderr.
fn interrupted(args: &[&str], pki: &Path, marker: &str, then: Duration) -> (Option<i32>, String) {
    signalled(args, pki, marker, then, libc::SIGINT, &[])
}

/// As [`interrupted`], with `signal` (SIGINT, SIGTERM) instead of SIGINT, sent again after each
/// of `again` (the copies a process group gets, or a person's second Ctrl-C).
fn signalled(
    args: &[&str],
    pki: &Path,
    marker: &str,
    then: Duration,
    signal: i32,
    again: &[Duration],
) -> (Option<i32>, String) {
    let mut child: Child = Command::new(env!("CARGO_BIN_EXE_pqtls"))
        .args(args)
        .env("PQTLS_PKI_DIR", pki)
        .env("RUST_BACKTRACE", "0")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (err, reader) = collect_stderr(&mut child);
    let t0 = Instant::now();
    while !err.lock().unwrap().contains(marker) {
        if t0.elapsed() > Duration::from_secs(120) || child.try_wait().unwrap().is_some() {
            let _ = child.kill();
            let _ = child.wait();
            panic!("no '{marker}' within 120 s: {}", err.lock().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(then);
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, signal) };
    for gap in again {
        std::thread::sleep(*gap);
        // SAFETY: as above (the child may have ended: then the signal reaches nobody, or a
        // zombie, and is harmless).
        unsafe { libc::kill(child.id() as i32, signal) };
    }
    let t1 = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if t1.elapsed() > Duration::from_secs(60) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("still running 60 s after signal {signal}: {}", err.lock().unwrap());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    reader.join().unwrap();
    let err = err.lock().unwrap().clone();
    assert!(!err.contains("panicked"), "{err}");
    (status.code(), err)
}

/// RSA-4096 leaves: milliseconds of signing per handshake, so that a window of two cannot
/// finish its loops within the second before the interrupt, whatever the machine.
const SLOW_CHAIN: &str = "rsa4096:rsa4096";

/// An interleaved `insitu` of two configurations on [`SLOW_CHAIN`] that runs far longer than any
/// test waits, its records to `json`.
fn slow_interleaved_insitu(json: &Path) -> Vec<String> {
    let args = ["insitu", "--stack", "openssl", "--group", "x25519,secp256r1", "--chain", SLOW_CHAIN];
    let more = ["--warmup", "2", "--loops", "100000", "--quiet", "--json", json.to_str().unwrap()];
    args.iter().chain(&more).map(|s| s.to_string()).collect()
}

#[test]
fn insitu_interrupted_in_an_interleaved_run_writes_records_marked_interrupted() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, json) = (dir.path().join("pki"), dir.path().join("r.json"));
    ok(&pqtls(&["pki", "--chain", SLOW_CHAIN], &pki));
    let args = slow_interleaved_insitu(&json);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    // The second configuration's start line: both are open, their blocks alternate.
    let (code, err) = interrupted(&args, &pki, "[2/2]", Duration::from_millis(1500));
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("kept as far as measured"), "{err}");
    let records: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(!records.is_empty(), "{err}");
    for r in &records {
        let loops = &r["result"]["loops"];
        assert_eq!(loops["stopped"], "interrupted", "{r}");
        let n = loops["measured"].as_u64().unwrap();
        assert!(n > 0 && n < 100_000, "{n}");
        assert_eq!(r["result"]["total_cpu_ns"]["n"].as_u64(), Some(n), "its statistics cover its {n} handshakes");
    }
}

/// Issue 39: `timeout` (and `scancel`, `kubectl delete`) signal the process and then its group —
/// two interrupts at once. They count as one: the run ends as after one Ctrl-C, its results
/// whole (before: "interrupted twice", exit at once, a 0-byte --json in 1 of 6 tries).
#[test]
fn one_timeout_is_one_interrupt() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, json) = (dir.path().join("pki"), dir.path().join("r.json"));
    ok(&pqtls(&["pki", "--chain", SLOW_CHAIN], &pki));
    let args = slow_interleaved_insitu(&json);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let (code, err) =
        signalled(&args, &pki, "[2/2]", Duration::from_millis(1500), libc::SIGTERM, &[Duration::from_millis(2)]);
    assert_eq!(code, Some(130), "{err}");
    assert!(!err.contains("interrupted twice"), "one request, two copies: {err}");
    assert!(err.contains("kept as far as measured"), "{err}");
    let records: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert!(!records.is_empty() && records.iter().all(|r| r["result"]["loops"]["stopped"] == "interrupted"), "{err}");
}

/// Lines of a records file, as (id, interrupted).
fn lines(path: &Path) -> Vec<(String, bool)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| {
            let v: serde_json::Value = serde_json::from_str(l).unwrap();
            let stopped = v["result"]["loops"]["stopped"].as_str().or(v["result"]["stopped"].as_str()).unwrap_or("");
            (v["id"].as_str().unwrap().to_string(), stopped == "interrupted")
        })
        .collect()
}

#[test]
fn run_interrupted_mid_window_keeps_the_window_marked_and_resume_measures_it_again() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    ok(&pqtls(&["pki", "--chain", SLOW_CHAIN], &pki));
    let exp = dir.path().join("w.toml");
    std::fs::write(
        &exp,
        format!(
            "name = \"w\"\n[settings]\nwarmup = 2\nloops = 400\n[matrix]\nstack = [\"openssl\"]\n\
             group = [\"x25519\", \"secp256r1\"]\nchain = [\"{SLOW_CHAIN}\"]\n"
        ),
    )
    .unwrap();
    let results = dir.path().join("results");
    let store = results.join("w");
    let args = ["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--window", "2"];
    let (code, err) = interrupted(&args, &pki, "[2/2]", Duration::from_millis(1000));
    assert_eq!(code, Some(130), "{err}");
    // The open window's two configurations, each kept as far as measured.
    let first = lines(&store.join("records.ndjson"));
    assert_eq!(first.len(), 2, "{first:?}\n{err}");
    assert!(first.iter().all(|(_, cut)| *cut), "{first:?}");
    assert!(err.contains("2 of them kept as far as measured"), "{err}");

    // Sound but incomplete: exit 3, saying what a run does about it.
    let c = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(c.status.code(), Some(3), "{}", text(&c));
    assert!(
        text(&c).contains("incomplete: 2 configurations interrupted; `pqtls run` measures them again"),
        "{}",
        text(&c)
    );

    // Resume: both measured again, from the start.
    let again = pqtls(&args, &pki);
    ok(&again);
    let log = String::from_utf8_lossy(&again.stderr);
    assert!(log.contains("2 configurations were interrupted last time"), "{log}");
    assert!(log.contains("0 already stored, 2 measured"), "{log}");
    // Append-only: the interrupted lines stay, each followed by its configuration's record.
    let all = lines(&store.join("records.ndjson"));
    assert_eq!(all.len(), 4, "{all:?}");
    assert_eq!(all[..2], first[..]);
    assert!(all[2..].iter().all(|(_, cut)| !cut));
    // The reader sees each configuration once, complete.
    let json = dir.path().join("all.json");
    ok(&pqtls(&["report", store.to_str().unwrap(), "--json", json.to_str().unwrap()], &pki));
    let records: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(records.len(), 2);
    for r in &records {
        assert_eq!(r["result"]["loops"]["measured"], 400, "{r}");
        assert_ne!(r["result"]["loops"]["stopped"], "interrupted");
    }
    let c = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c));
    let out = text(&c);
    assert!(out.contains("sound, 2 records") && out.contains("2 interrupted record(s) superseded"), "{out}");
}

/// SIGTERM (Slurm's `scancel` and `scontrol requeue`, Kubernetes) is taken as Ctrl-C: the
/// finished configuration's record is kept, the open one is kept marked interrupted, exit 130;
/// the next run measures only the interrupted one.
#[test]
fn sigterm_stops_a_run_like_ctrl_c_and_resume_skips_the_finished_configuration() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    ok(&pqtls(&["pki", "--chain", SLOW_CHAIN], &pki));
    let exp = dir.path().join("t.toml");
    // The first configuration is quick (ed25519), the second cannot finish its loops within
    // the moment before the signal (RSA-4096 signing).
    std::fs::write(
        &exp,
        format!(
            "name = \"t\"\n[settings]\nwarmup = 2\nloops = 400\n[matrix]\nstack = [\"openssl\"]\ngroup = \"x25519\"\n\
             chain = [\"ed25519:ed25519\", \"{SLOW_CHAIN}\"]\n"
        ),
    )
    .unwrap();
    let results = dir.path().join("results");
    let store = results.join("t");
    let args = ["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--schedule", "sequential"];
    let (code, err) = signalled(&args, &pki, "[2/2]", Duration::from_millis(300), libc::SIGTERM, &[]);
    assert_eq!(code, Some(130), "{err}");
    assert!(err.contains("interrupted (Ctrl-C or SIGTERM)"), "{err}");
    let first = lines(&store.join("records.ndjson"));
    assert_eq!(first.len(), 2, "{first:?}\n{err}");
    assert!(!first[0].1 && first[1].1, "the finished one complete, the open one interrupted: {first:?}");

    let again = pqtls(&args, &pki);
    ok(&again);
    let log = String::from_utf8_lossy(&again.stderr);
    assert!(log.contains("1 already stored, 1 measured"), "{log}");
    let all = lines(&store.join("records.ndjson"));
    assert_eq!(all.len(), 3, "{all:?}");
    assert_eq!(all[2], (first[1].0.clone(), false));
    let c = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c));
}

#[test]
fn a_load_experiment_interrupted_mid_duration_is_measured_again_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let exp = dir.path().join("l.toml");
    std::fs::write(
        &exp,
        "name = \"l\"\nmeasurement = \"load\"\n[settings]\nduration = \"6s\"\nwarmup_time = \"0s\"\n[matrix]\n\
         group = [\"x25519\"]\nchain = \"ed25519:ed25519\"\n",
    )
    .unwrap();
    let results = dir.path().join("results");
    let store = results.join("l");
    let args = ["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap()];
    let (code, err) = interrupted(&args, &pki, "[1/1]", Duration::from_millis(2500));
    assert_eq!(code, Some(130), "{err}");
    let first = lines(&store.join("records.ndjson"));
    assert_eq!(first.len(), 1, "{err}");
    assert!(first[0].1, "the cut scenario is stored marked interrupted: {first:?}");
    let c = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(c.status.code(), Some(3), "{}", text(&c));

    let again = pqtls(&args, &pki);
    ok(&again);
    let log = String::from_utf8_lossy(&again.stderr);
    assert!(log.contains("0 already stored, 1 measured"), "{log}");
    let all = lines(&store.join("records.ndjson"));
    assert_eq!(all.len(), 2);
    assert_eq!(all[1], (first[0].0.clone(), false));
    let c = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c));
}

#[test]
fn load_shard_json_files_merge_into_a_sound_store() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let server = Serve::start_in(&["--stack", "rustls", "--group", "x25519", "--chain", "ed25519:ed25519"], dir.path());
    let url = server.url("1KiB");
    let client = ["load", &url, "--stack", "openssl", "--group", "x25519", "--chain", "ed25519:ed25519"];
    let mut files = Vec::new();
    for k in 1..=2 {
        let f = dir.path().join(format!("shard-{k}.json"));
        let shard = format!("{k}/2");
        let run = ["--connections", "2", "--requests", "20", "--warmup-time", "0s", "--shard", &shard];
        ok(&pqtls(&[&client[..], &run, &["--json", f.to_str().unwrap(), "--quiet"]].concat(), &pki));
        files.push(f);
    }
    let out = dir.path().join("merged");
    let m =
        pqtls(&["merge", files[0].to_str().unwrap(), files[1].to_str().unwrap(), "--out", out.to_str().unwrap()], &pki);
    ok(&m);
    assert!(text(&m).contains("joined 2 load shards"), "{}", text(&m));
    assert!(out.join("manifest.json").exists());
    let c = pqtls(&["check", out.to_str().unwrap()], &pki);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c));
    assert!(text(&c).contains("sound, 1 records"), "{}", text(&c));
    drop(server);
}
