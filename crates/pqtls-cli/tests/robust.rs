//! Issue 13 as properties of the `pqtls` binary: simultaneous runs of one experiment, a reader
//! that goes away, `pqtls check`, exit codes, and a corpus of bad inputs — each answered by a
//! clear error naming what is wrong, never a panic, never silently accepted.

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.env("RUST_BACKTRACE", "0");
    c
}

fn pqtls(args: &[&str], pki: &Path) -> Output {
    bin().args(args).env("PQTLS_PKI_DIR", pki).output().expect("pqtls runs")
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// A small experiment: 4 configurations of a few hundred handshakes (a second or two).
fn small_experiment(dir: &Path, name: &str) -> PathBuf {
    let exp = dir.join(format!("{name}.toml"));
    std::fs::write(
        &exp,
        format!(
            "name = \"{name}\"\n[settings]\nwarmup = 5\nloops = 200\n[matrix]\nstack = [\"openssl\"]\n\
             group = [\"x25519\", \"secp256r1\", \"MLKEM512\", \"X25519MLKEM768\"]\nchain = [\"p256:p256\"]\n"
        ),
    )
    .unwrap();
    exp
}

fn ids(records: &Path) -> Vec<String> {
    std::fs::read_to_string(records)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string())
        .collect()
}

/// N simultaneous `pqtls run` processes of one experiment on one store, repeated: exactly one
/// measures, the others are refused naming the holder, and the store holds each id once.
#[test]
fn simultaneous_run_processes_exactly_one_measures() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let exp = small_experiment(dir.path(), "race");
    // The PKI made once, so the race is about the store.
    assert!(pqtls(&["pki", "--chain", "p256:p256"], &pki).status.success());
    let results = dir.path().join("results");
    const N: usize = 5;
    for round in 0..2 {
        let _ = std::fs::remove_dir_all(&results);
        let children: Vec<_> = (0..N)
            .map(|_| {
                bin()
                    .args(["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--no-progress"])
                    .env("PQTLS_PKI_DIR", &pki)
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<Output> = children.into_iter().map(|c| c.wait_with_output().unwrap()).collect();
        let mut measuring = 0;
        for o in &outs {
            let t = text(o);
            assert!(!t.contains("panicked"), "{t}");
            if o.status.success() {
                if t.contains("4 measured") {
                    measuring += 1;
                } else {
                    // Started after the winner ended: nothing left to do.
                    assert!(t.contains("4 already stored, 0 measured"), "round {round}: {t}");
                }
            } else {
                assert_eq!(o.status.code(), Some(1), "{t}");
                assert!(t.contains("is being written by another pqtls run ("), "round {round}: {t}");
            }
        }
        assert_eq!(measuring, 1, "round {round}: {:?}", outs.iter().map(text).collect::<Vec<_>>());
        let got = ids(&results.join("race/records.ndjson"));
        assert_eq!(got.len(), 4, "{got:?}");
        assert_eq!(got.iter().collect::<HashSet<_>>().len(), 4, "an id twice: {got:?}");
        let check = pqtls(&["check", results.join("race").to_str().unwrap()], &pki);
        assert!(check.status.success(), "{}", text(&check));
    }
}

/// `pqtls run … 2>&1 | head -1`: the reader goes away after one line; the run neither dies of
/// SIGPIPE nor panics — it completes, exit 0, with a sound store.
#[test]
fn a_reader_that_goes_away_does_not_stop_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let exp = small_experiment(dir.path(), "head");
    let results = dir.path().join("results");
    let mut child = bin()
        .args(["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--no-progress"])
        .env("PQTLS_PKI_DIR", &pki)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = String::new();
    BufReader::new(child.stderr.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("head: results in"), "{first}");
    // The reader (and the pipe's only read end) is gone now.
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0), "{status:?}");
    assert_eq!(ids(&results.join("head/records.ndjson")).len(), 4);
    let check = pqtls(&["check", results.join("head").to_str().unwrap()], &pki);
    assert!(check.status.success(), "{}", text(&check));
    assert!(text(&check).contains("sound, 4 records"), "{}", text(&check));
}

/// `pqtls check` says what is wrong with a store, with exit code 4; `report` and `run` refuse
/// the same store by line.
#[test]
fn check_finds_what_is_wrong_with_a_store() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let exp = small_experiment(dir.path(), "chk");
    let results = dir.path().join("results");
    let run = |extra: &[&str]| {
        let mut a = vec!["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--no-progress"];
        a.extend_from_slice(extra);
        pqtls(&a, &pki)
    };
    assert!(run(&[]).status.success());
    let store = results.join("chk");
    let records = store.join("records.ndjson");
    let good = std::fs::read_to_string(&records).unwrap();

    // A future schema.
    let mut v: serde_json::Value = serde_json::from_str(good.lines().next().unwrap()).unwrap();
    v["schema"] = 99.into();
    std::fs::write(&records, format!("{v}\n{good}")).unwrap();
    let o = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(o.status.code(), Some(4), "{}", text(&o));
    assert!(text(&o).contains("records.ndjson:1: schema 99"), "{}", text(&o));
    for o in [run(&[]), pqtls(&["report", store.to_str().unwrap(), "--json", "/dev/null"], &pki)] {
        assert_eq!(o.status.code(), Some(1), "{}", text(&o));
        assert!(text(&o).contains("schema 99"), "{}", text(&o));
    }
    // A failed command removes only outputs it made itself: never a device it was given.
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata("/dev/null").unwrap().file_type().is_char_device());

    // A duplicate id.
    std::fs::write(&records, format!("{good}{}\n", good.lines().next().unwrap())).unwrap();
    let o = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(o.status.code(), Some(4));
    assert!(text(&o).contains("records.ndjson:5: a second record for"), "{}", text(&o));
    assert_eq!(run(&[]).status.code(), Some(1));

    // A complete but invalid last line: `run` quarantines it and measures what is missing.
    let mut lines: Vec<&str> = good.lines().collect();
    lines.pop();
    std::fs::write(&records, format!("{}\n{{\"foo\":1}}\n", lines.join("\n"))).unwrap();
    let o = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert_eq!(o.status.code(), Some(4));
    assert!(text(&o).contains("records.ndjson:4: an invalid last line"), "{}", text(&o));
    let o = run(&[]);
    assert!(o.status.success(), "{}", text(&o));
    assert!(text(&o).contains("moved an invalid last line") && text(&o).contains("3 already stored, 1 measured"));
    assert_eq!(std::fs::read_to_string(store.join("records.quarantine.ndjson")).unwrap(), "{\"foo\":1}\n");
    let o = pqtls(&["check", store.to_str().unwrap()], &pki);
    assert!(o.status.success() && text(&o).contains("1 quarantined line"), "{}", text(&o));

    // Manifest lost, settings changed: still refused (the records carry their settings).
    std::fs::remove_file(store.join("manifest.json")).unwrap();
    let changed = std::fs::read_to_string(&exp).unwrap().replace("loops = 200", "loops = 300");
    std::fs::write(&exp, changed).unwrap();
    let o = run(&[]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("other settings") && text(&o).contains("loops: 200 → 300"), "{}", text(&o));
    assert_eq!(ids(&records).len(), 4);

    let o = pqtls(&["check", dir.path().join("nothing").to_str().unwrap()], &pki);
    assert_eq!(o.status.code(), Some(1));
    assert!(text(&o).contains("nothing is not a directory"), "{}", text(&o));
}

/// Every bad input found for issue 13, and its siblings: a clear error (exit 1, or 2 for what
/// the argument parser refuses), naming what is wrong — never a panic, never a measurement.
#[test]
fn bad_inputs_get_clear_errors_and_no_work_is_lost() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let p = dir.path().to_str().unwrap();
    let none = format!("{p}/no/such/dir/x.json");
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/in-situ.toml");
    let insitu_toml = shipped.to_str().unwrap();
    let cases: Vec<(Vec<&str>, Vec<&str>)> = vec![
        (vec!["insitu", "--group", "x25520"], vec!["unknown group 'x25520' (did you mean 'x25519'?)"]),
        (vec!["insitu", "--chain", "p265:p256"], vec!["unknown signature algorithm 'p265' (did you mean 'p256'?)"]),
        (vec!["insitu", "--chain", "mldsa66:mldsa65"], vec!["unknown signature algorithm 'mldsa66' (did you mean"]),
        (vec!["insitu", "--stack", "opensll"], vec!["unknown stack 'opensll' (did you mean 'openssl'?)"]),
        (vec!["insitu", "--cipher", "TLS_AES_128_GCM_SHA265"], vec!["did you mean 'TLS_AES_128_GCM_SHA256'?"]),
        (vec!["insitu", "--quantiles", "0.5,1"], vec!["quantiles are percentages"]),
        (vec!["insitu", "--quantiles", "0,50"], vec!["strictly between 0 and 100"]),
        (vec!["insitu", "--quantiles", "50,50"], vec!["listed twice"]),
        (vec!["insitu", "--quantiles", "50,,99"], vec!["empty item"]),
        (vec!["insitu", "--quantiles", "101"], vec!["101"]),
        (vec!["insitu", "--group", "x25519,x25519"], vec!["--group lists x25519 twice"]),
        (vec!["insitu", "--key-shares", "x25519+x25519"], vec!["names x25519 twice"]),
        (vec!["insitu", "--loops", "0"], vec!["loops must be at least 1"]),
        (vec!["insitu", "--precision", "0%"], vec!["precision"]),
        (vec!["insitu", "--precision", "150%"], vec!["precision"]),
        (vec!["insitu", "--json", &none], vec!["cannot write", &none]),
        (vec!["insitu", "--csv", &none], vec!["cannot write", &none]),
        (vec!["insitu", "--ndjson", &none], vec!["cannot write", &none]),
        (vec!["overhead", "--json", &none], vec![&none]),
        (vec!["compare", "/nonexistent/a", "/nonexistent/b", "--json", &none], vec!["cannot write", &none]),
        (vec!["compare", "/nonexistent/a", "/nonexistent/b", "--markdown", &none], vec!["cannot write", &none]),
        (vec!["report", "/nonexistent/results"], vec!["/nonexistent/results"]),
        (vec!["report", p, "--json", &none], vec!["cannot write", &none]),
        (vec!["report", p, "--initcwnd", "0"], vec!["--initcwnd must be 1 to 1000"]),
        (vec!["report", p, "--mss", "99999999"], vec!["--mss 1 to 65535"]),
        (vec!["run", "/nonexistent/exp.toml"], vec!["/nonexistent/exp.toml"]),
        (vec!["run", insitu_toml, "--shard", "0/4"], vec!["K/N"]),
        (vec!["run", insitu_toml, "--shard", "5/4"], vec!["K/N"]),
        (vec!["merge", "/nonexistent/shard-1-of-2", "--out", &none], vec!["/nonexistent/shard-1-of-2"]),
        (vec!["check", "/nonexistent/results"], vec!["/nonexistent/results"]),
        (vec!["pki", "--chain", "a:b:c:d"], vec!["leaf:root"]),
        (vec!["pki", "--chain", "p265:p256"], vec!["did you mean 'p256'?"]),
    ];
    // Clap refuses these itself (exit 2), naming the flag.
    let usage: Vec<(Vec<&str>, &str)> = vec![
        (vec!["insitu", "--loops", "99999999999999999999999"], "--loops"),
        (vec!["insitu", "--warmup", "-1"], "-1"),
        (vec!["merge", "a", "--into", "b"], "--into"),
        (vec!["report", p, "--mss", "-5"], "-5"),
        (vec!["pki", "--chain", "p256:p256", "--seed", "x"], "--seed"),
    ];
    // Run in a directory of their own: a command whose default output is ./report.html must
    // not write into the source tree.
    let cwd = tempfile::tempdir().unwrap();
    let root = cwd.path().to_path_buf();
    let mut tried = 0;
    for (args, hints) in cases {
        let o = bin().args(&args).current_dir(&root).env("PQTLS_PKI_DIR", &pki).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {t}");
        assert!(t.contains("error:") && !t.contains("panicked"), "{args:?}: {t}");
        for h in hints {
            assert!(t.contains(h), "{args:?}: expected '{h}' in: {t}");
        }
        // Refused before measuring: no handshake table, no record.
        assert!(!t.contains("server_hello"), "{args:?} measured before failing: {t}");
        tried += 1;
    }
    for (args, flag) in usage {
        let o = bin().args(&args).current_dir(&root).env("PQTLS_PKI_DIR", &pki).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {t}");
        assert!(t.contains(flag) && !t.contains("panicked"), "{args:?}: {t}");
        tried += 1;
    }
    assert!(tried >= 35, "{tried}");
    // A command that fails after creating its outputs leaves no empty file behind.
    let out = dir.path().join("cmp.json");
    let o = pqtls(&["compare", "/nonexistent/a", "/nonexistent/b", "--json", out.to_str().unwrap()], &pki);
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
    let o = pqtls(&["report", "/nonexistent/results", "--json", out.to_str().unwrap()], &pki);
    assert_eq!(o.status.code(), Some(1));
    assert!(!out.exists());
}

/// `--ndjson /dev/full`: the write fails after measuring, and the error names the path.
#[test]
fn a_full_device_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let o = pqtls(
        &["insitu", "--loops", "3", "--warmup", "1", "--quiet", "--ndjson", "/dev/full"],
        &dir.path().join("pki"),
    );
    assert_eq!(o.status.code(), Some(1), "{}", text(&o));
    assert!(text(&o).contains("/dev/full") && !text(&o).contains("panicked"), "{}", text(&o));
}

/// A command that fails leaves a user's existing output file as it was (outputs are opened
/// before any work, but only truncated when written).
#[test]
fn a_failing_command_leaves_an_existing_output_untouched() {
    let tmp = tempfile::tempdir().unwrap();
    let report = tmp.path().join("report.html");
    std::fs::write(&report, "yesterday's report").unwrap();
    let o = bin()
        .args(["report", "/nonexistent/results", "--html"])
        .arg(&report)
        .env("PQTLS_PKI_DIR", tmp.path().join("pki"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&report).unwrap(), "yesterday's report");
    let json = tmp.path().join("r.json");
    std::fs::write(&json, "keep me").unwrap();
    let o = bin()
        .args(["insitu", "--group", "nope", "--json"])
        .arg(&json)
        .env("PQTLS_PKI_DIR", tmp.path().join("pki"))
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(std::fs::read_to_string(&json).unwrap(), "keep me");
}
