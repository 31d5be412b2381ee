//! Issue 20 ("everywhere"), the command's output: a reader that goes away never panics the
//! command nor loses a result file; `-` is standard output for every output flag; long
//! durations and out-of-range ports get what they deserve. Every child is bounded in time.

mod common;
use common::text;

use std::io::Read;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn bin(pki: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.env("RUST_BACKTRACE", "0").env("PQTLS_PKI_DIR", pki);
    c
}

/// Waits for `child` at most `limit` (killed, and the test failed, beyond it).
fn wait_bounded(mut child: Child, limit: Duration) -> Output {
    let t0 = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let o = child.wait_with_output().unwrap();
            panic!("still running after {limit:?} (killed): {}", text(&o));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Starts `cmd` with a stdout whose reader is gone at once (`pqtls … | true`); stderr is
/// captured, or closed too with `close_stderr` (`2>&1 | true`).
fn spawn_with_closed_stdout(cmd: &mut Command, close_stderr: bool) -> Child {
    let mut child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    drop(child.stdout.take());
    if close_stderr {
        drop(child.stderr.take());
    }
    child
}

fn records(path: &Path) -> Vec<serde_json::Value> {
    let bytes = std::fs::read(path).unwrap();
    assert!(!bytes.is_empty(), "{} is empty: the measurement was lost", path.display());
    serde_json::from_slice::<Vec<serde_json::Value>>(&bytes).unwrap()
}

/// `pqtls insitu … | true` (and `2>&1 | true`): exit 0, the `--json` file complete. It died
/// of SIGPIPE (141) with the file at 0 bytes.
#[test]
fn insitu_into_a_closed_pipe_keeps_its_results() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    for close_stderr in [false, true] {
        let json = dir.path().join(format!("r-{close_stderr}.json"));
        let child = spawn_with_closed_stdout(
            bin(&pki)
                .args(["insitu", "--group", "x25519", "--chain", "p256:p256", "--warmup", "2", "--loops", "20"])
                .arg("--json")
                .arg(&json),
            close_stderr,
        );
        let o = wait_bounded(child, Duration::from_secs(120));
        assert_eq!(o.status.code(), Some(0), "stderr closed: {close_stderr}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{}", text(&o));
        assert_eq!(records(&json).len(), 1);
    }
}

/// `pqtls load … | true`: exit 0 and the `--json` and `--timelines` files written (it panicked
/// "failed printing to stdout", exit 101, with the file at 0 bytes). `--duration 2h` is a
/// normal duration (it was refused as over an hour); `--requests` ends this one early.
#[test]
fn load_into_a_closed_pipe_keeps_its_results_and_takes_long_durations() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let (json, timelines) = (dir.path().join("load.json"), dir.path().join("t.ndjson"));
    let child = spawn_with_closed_stdout(
        bin(&pki)
            .args(["load", "--group", "x25519", "--chain", "p256:p256", "--duration", "2h", "--requests", "20"])
            .args(["--warmup-time", "100ms", "--json"])
            .arg(&json)
            .arg("--timelines")
            .arg(&timelines),
        false,
    );
    let o = wait_bounded(child, Duration::from_secs(120));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
    let r = records(&json);
    assert_eq!(r.len(), 1);
    assert_eq!(r[0]["settings"]["load"]["duration_ms"], 7_200_000, "{}", r[0]["settings"]);
    let n = r[0]["result"]["requests"].as_u64().unwrap();
    assert!(n >= 20, "{}", r[0]["result"]);
    assert_eq!(std::fs::read_to_string(&timelines).unwrap().lines().count() as u64, n);
}

/// `pqtls serve … | true`: the server serves on (it panicked printing its address, exit 101),
/// answers, and stops at --duration with exit 0.
#[test]
fn serve_into_a_closed_pipe_keeps_serving() {
    use std::io::Write;
    let dir = tempfile::tempdir().unwrap();
    let port = common::free_port();
    let child = spawn_with_closed_stdout(
        bin(&dir.path().join("pki"))
            .args(["serve", "--plain", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--duration", "3s"]),
        false,
    );
    // Served after its address could not be printed.
    let t0 = Instant::now();
    let mut conn = loop {
        match std::net::TcpStream::connect(("127.0.0.1", port)) {
            Ok(c) => break c,
            Err(_) if t0.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(20)),
            Err(e) => panic!("the server did not listen on {port}: {e}"),
        }
    };
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    conn.write_all(b"GET /5 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let o = wait_bounded(child, Duration::from_secs(30));
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    assert!(!text(&o).contains("panicked") && text(&o).contains("1 requests"), "{}", text(&o));
}

/// Commands that only print (list, pki, trace) end quietly, exit 0, when their reader went
/// away.
#[test]
fn printing_commands_end_quietly_into_a_closed_pipe() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    for args in [
        vec!["list"],
        vec!["pki", "--chain", "p256:p256"],
        vec!["trace", "--group", "x25519", "--chain", "p256:p256", "--warmup", "1"],
    ] {
        let o = wait_bounded(spawn_with_closed_stdout(bin(&pki).args(&args), false), Duration::from_secs(60));
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", text(&o));
        assert!(!text(&o).contains("panicked"), "{args:?}: {}", text(&o));
    }
}

/// A result written to `-` whose reader went away was not delivered: exit 1 naming standard
/// output (not a panic, not a silent 0).
#[test]
fn a_result_on_a_closed_stdout_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let child = spawn_with_closed_stdout(bin(&dir.path().join("pki")).args(["list", "--json", "-"]), false);
    let o = wait_bounded(child, Duration::from_secs(60));
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("standard output (-) was closed"), "{}", text(&o));
    assert!(!text(&o).contains("panicked"), "{}", text(&o));
}

/// `--json -` is standard output (it made a file named `-`): the records alone on stdout, no
/// table; two outputs on `-` are refused naming both.
#[test]
fn a_dash_is_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let run = |args: &[&str]| {
        let child = bin(&pki).args(args).current_dir(dir.path()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn();
        wait_bounded(child.unwrap(), Duration::from_secs(120))
    };
    let insitu = ["insitu", "--group", "x25519", "--chain", "p256:p256", "--warmup", "2", "--loops", "20"];
    let o = run(&[&insitu[..], &["--json", "-"]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let v: Vec<serde_json::Value> = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v.len(), 1);
    assert!(!dir.path().join("-").exists(), "a file named - was made");

    let csv = dir.path().join("s.csv");
    let o = run(&[&insitu[..], &["--ndjson", "-", "--csv", csv.to_str().unwrap()]].concat());
    assert_eq!(o.status.code(), Some(0), "{}", text(&o));
    let lines: Vec<serde_json::Value> =
        String::from_utf8_lossy(&o.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 20, "one line per measured handshake");
    assert!(std::fs::read_to_string(&csv).unwrap().lines().count() > 1);

    for (args, flags) in [
        (vec!["insitu", "--json", "-", "--csv", "-"], "--json and --csv"),
        (vec!["load", "--json", "-", "--timelines", "-"], "--json and --timelines"),
        (vec!["report", "/nonexistent/r", "--html", "-", "--markdown", "-"], "--html and --markdown"),
        (
            vec!["compare", "/nonexistent/a", "/nonexistent/b", "--json", "-", "--markdown", "-"],
            "--markdown and --json",
        ),
        (vec!["layers", "x.pcap", "--json", "-", "--csv", "-"], "--json and --csv"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(flags) && text(&o).contains("at most one output"), "{args:?}: {}", text(&o));
    }
    for (args, says) in [
        (vec!["load", "--keylog", "-"], "--keylog -: the key log"),
        (vec!["load", "--capture", "-"], "--capture -: the capture"),
        (vec!["merge", "a", "--out", "-"], "--out -: the merged results are a directory"),
        (vec!["run", "x.toml", "--results", "-"], "--results -: the results are directories"),
        (vec!["pki", "--chain", "p256:p256", "--out", "-"], "--out -: the PKI cache is a directory"),
    ] {
        let o = run(&args);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", text(&o));
        assert!(text(&o).contains(says), "{args:?}: {}", text(&o));
    }
    assert!(!dir.path().join("-").exists(), "a file named - was made");
}
