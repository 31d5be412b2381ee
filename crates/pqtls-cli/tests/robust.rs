//! Issue 13 as properties of the `pqtls` binary: simultaneous runs of one experiment, a reader
//! that goes away, `pqtls check`, exit codes, and a corpus of bad inputs — each answered by a
//! clear error naming what is wrong, never a panic, never silently accepted.

mod common;
use common::{pqtls, record_ids, text};

use std::collections::HashSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.env("RUST_BACKTRACE", "0");
    c
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
        let got = record_ids(&results.join("race/records.ndjson"));
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
    assert_eq!(record_ids(&results.join("head/records.ndjson")).len(), 4);
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
    assert_eq!(record_ids(&records).len(), 4);

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
        (
            vec!["report", p, "--initcwnd", "0"],
            "'--initcwnd <INITCWND>': 0 is out of range: give a whole number from 1 to 1000",
        ),
        (
            vec!["report", p, "--mss", "99999999"],
            "--mss <MSS>': 99999999 is out of range: give a whole number from 1 to 65535",
        ),
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

/// Issue 39, item 2: an output that is also an input is refused before anything is written
/// (the store, the capture and its key log survive), and two outputs naming one file too.
#[test]
fn an_output_that_is_an_input_is_refused_and_the_input_survives() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let store = dir.join("results/small");
    std::fs::create_dir_all(&store).unwrap();
    let records = store.join("records.ndjson");
    // What the store holds is not read: the refusal comes first.
    let line = "{\"schema\": 2}\n".to_string();
    std::fs::write(&records, &line).unwrap();
    let run = |args: &[&str]| bin().args(args).current_dir(dir).env("PQTLS_PKI_DIR", dir.join("pki")).output().unwrap();
    for out in [
        run(&["report", "results/small", "--json", "results/small/records.ndjson"]),
        run(&["report", "results/small", "--json", "results/small/../small/records.ndjson"]),
        run(&["compare", "results/small", "results/small", "--markdown", "results/small/records.ndjson"]),
    ] {
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("would destroy it"), "{}", text(&out));
        assert_eq!(std::fs::read_to_string(&records).unwrap(), line, "the store is untouched");
    }
    let pcap = dir.join("cap.pcap");
    let keys = dir.join("cap.keys");
    std::fs::write(&pcap, "not a capture, but the user's").unwrap();
    std::fs::write(&keys, "CLIENT_RANDOM x y").unwrap();
    for (flag, file) in [("--json", "cap.pcap"), ("--csv", "cap.keys")] {
        let out = run(&["layers", "cap.pcap", "--keylog", "cap.keys", flag, file]);
        assert_eq!(out.status.code(), Some(1), "{}", text(&out));
        assert!(text(&out).contains("would destroy it"), "{}", text(&out));
    }
    assert_eq!(std::fs::read_to_string(&pcap).unwrap(), "not a capture, but the user's");
    assert_eq!(std::fs::read_to_string(&keys).unwrap(), "CLIENT_RANDOM x y");
    let out = run(&["report", "results/small", "--json", "out.json", "--markdown", "./out.json"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("--markdown and --json both name out.json"), "{}", text(&out));
}

/// Issue 39, item 7: an experiment or store file that is a FIFO, a device or far too large is
/// refused with its kind or size — no hang, no allocation of its whole size.
#[test]
fn files_of_the_wrong_kind_or_size_are_refused_not_read() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let pki = dir.join("pki");
    let fifo = dir.join("exp.toml");
    assert!(Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    let sparse = dir.join("big.toml");
    std::fs::File::create(&sparse).unwrap().set_len(2 << 30).unwrap();
    for (file, says) in [("exp.toml", "is a FIFO"), ("/dev/zero", "is a device"), ("big.toml", "bytes, more than the")]
    {
        let out = bounded(&["run", file], dir, &pki);
        assert_eq!(out.status.code(), Some(1), "{file}: {}", text(&out));
        assert!(text(&out).contains(says), "{file}: {}", text(&out));
    }
    // A store whose records file is a FIFO: report and check say so instead of blocking.
    let store = dir.join("results/s");
    std::fs::create_dir_all(&store).unwrap();
    assert!(Command::new("mkfifo").arg(store.join("records.ndjson")).status().unwrap().success());
    for args in [&["report", "results/s", "--json", "-"][..], &["check", "results/s"][..]] {
        let cmd = args[0];
        let out = bounded(args, dir, &pki);
        assert_ne!(out.status.code(), Some(0), "{cmd}: {}", text(&out));
        assert!(text(&out).contains("is a FIFO"), "{cmd}: {}", text(&out));
    }
}

/// Issue 39: `--shard K/N` with more shards than configurations is refused, naming how many
/// there are (it measured nothing and said nothing before).
#[test]
fn more_shards_than_configurations_are_refused() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = small_experiment(tmp.path(), "shards");
    for shard in ["5/1000000000", "5/5"] {
        let out = bounded(&["run", exp.to_str().unwrap(), "--shard", shard], tmp.path(), &tmp.path().join("pki"));
        assert_eq!(out.status.code(), Some(1), "{shard}: {}", text(&out));
        assert!(text(&out).contains("has 4 configuration(s), so at most 4 shards"), "{shard}: {}", text(&out));
    }
    assert!(!tmp.path().join("results").exists(), "nothing measured, no store made");
    // Loops beyond a billion per configuration are a typo, not a plan.
    let out = bounded(&["insitu", "--loops", "9223372036854775807"], tmp.path(), &tmp.path().join("pki"));
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(text(&out).contains("at most 1000000000"), "{}", text(&out));
}

/// A matrix above the run's cap (`--max-configurations`) is refused naming the flag and the
/// count that would take it; within it, the run first says what it asks for (from its
/// settings), before the first measurement.
#[test]
fn the_cap_on_a_matrix_is_the_runs_and_the_work_is_said_before_it_starts() {
    let tmp = tempfile::tempdir().unwrap();
    let exp = small_experiment(tmp.path(), "capped");
    let pki = tmp.path().join("pki");
    let out = bounded(&["run", exp.to_str().unwrap(), "--max-configurations", "3"], tmp.path(), &pki);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    for want in ["describes 4 configurations (4 group)", "more than the 3", "pqtls run --max-configurations 4"] {
        assert!(text(&out).contains(want), "{want}: {}", text(&out));
    }
    assert!(!tmp.path().join("results").exists(), "nothing measured, no store made");
    let out = bounded(&["run", exp.to_str().unwrap(), "--max-configurations", "4", "--no-progress"], tmp.path(), &pki);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let said = text(&out);
    let work = said
        .find("4 configurations to measure: 820 handshakes (5 warm-up + 200 measured handshakes each)")
        .unwrap_or_else(|| panic!("the work is said: {said}"));
    assert!(work < said.find("[1/4]").expect("a configuration measured"), "said before the first: {said}");
}

/// Issue 39 item 3: a matrix is walked, never held. A run of 100,000 load configurations (the
/// 1.6 KB file that held 1.24 GB expanded, then 652 MB held once) says its work before the first
/// measurement with its peak memory under 150 MB — the configurations are made one at a time on
/// each walk — and Ctrl-C then ends it as any run.
#[test]
fn a_matrix_of_100000_configurations_is_walked_not_held() {
    let tmp = tempfile::tempdir().unwrap();
    let ten = |f: &dyn Fn(usize) -> String| (1..=10).map(|i| format!("\"{}\"", f(i))).collect::<Vec<_>>().join(", ");
    let file = tmp.path().join("big.toml");
    std::fs::write(
        &file,
        format!(
            "name = \"big\"\nmeasurement = \"load\"\n[settings]\nduration = \"1s\"\nwarmup_time = \"0s\"\n[matrix]\n\
             stack = [\"openssl\"]\ngroup = [\"x25519\", \"secp256r1\", \"secp384r1\", \"secp521r1\", \"X25519MLKEM768\", \
             \"MLKEM512\", \"MLKEM768\", \"MLKEM1024\", \"SecP256r1MLKEM768\", \"x448\"]\nchain = [\"p256\"]\n\
             connections = [{}]\nresponse_size = [{}]\nthreads = [{}]\nrate = [{}]\n",
            ten(&|i| i.to_string()),
            ten(&|i| format!("{i}KiB")),
            ten(&|i| i.to_string()),
            ten(&|i| format!("{i}/s")),
        ),
    )
    .unwrap();
    let mut child = bin()
        .args(["run", file.to_str().unwrap(), "--no-progress"])
        .current_dir(tmp.path())
        .env("PQTLS_PKI_DIR", tmp.path().join("pki"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Until the work is said (bounded: a hang fails the test).
    let mut said = String::new();
    let t0 = std::time::Instant::now();
    while !said.contains("configurations to measure") {
        match rx.recv_timeout(std::time::Duration::from_secs(1)) {
            Ok(line) => said += &format!("{line}\n"),
            Err(_) if t0.elapsed() > std::time::Duration::from_secs(240) => {
                let _ = child.kill();
                panic!("no work line in 240 s: {said}");
            }
            Err(_) => {
                if child.try_wait().unwrap().is_some() {
                    panic!("ended before measuring: {said}");
                }
            }
        }
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let peak_kib: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmHWM");
    // SAFETY: signalling our own child, which is still running (not yet waited for).
    unsafe { libc::kill(pid as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    assert!(said.contains("100000 configurations to measure"), "{said}");
    assert!(peak_kib < 150 * 1024, "peak memory {peak_kib} KiB before the first measurement: {said}");
    assert_ne!(out.status.code(), Some(0), "interrupted: not a complete run");
}

/// Runs `pqtls args` in `cwd`, at most 60 s (killed and failed beyond: a hang).
fn bounded(args: &[&str], cwd: &Path, pki: &Path) -> Output {
    let mut child = bin()
        .args(args)
        .current_dir(cwd)
        .env("PQTLS_PKI_DIR", pki)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = std::time::Instant::now();
    while child.try_wait().unwrap().is_none() {
        if t0.elapsed() > std::time::Duration::from_secs(60) {
            let _ = child.kill();
            panic!("{args:?} hangs: {}", text(&child.wait_with_output().unwrap()));
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    child.wait_with_output().unwrap()
}

/// Issue 20's hostile command lines across commands: each one is refused (exit 1, or 2 for
/// what the argument parser refuses) with an error naming the flag or value and what would
/// work — no panic, no hang, nothing accepted, nothing measured, no file named `-`.
#[test]
fn hostile_command_lines_get_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let p = dir.path().to_str().unwrap();
    let exp = small_experiment(dir.path(), "hostile");
    let exp = exp.to_str().unwrap();
    let none = format!("{p}/no/such/dir/x.csv");
    #[rustfmt::skip]
    let cases: Vec<(Vec<&str>, i32, Vec<&str>)> = vec![
        // Named in the issue.
        (vec!["overhead", "--blocks", "0"], 2, vec!["'--blocks <BLOCKS>'", "0 is out of range", "from 1 to 1000000"]),
        (vec!["load", "--rate", "-1/s"], 1, vec!["--rate -1/s", "must be positive, e.g. 100/s"]),
        (vec!["serve", "--listen", "127.0.0.1:70000"], 2, vec!["--listen", "port 70000 is out of range 0–65535"]),
        (vec!["load", "https://127.0.0.1:70000/"], 1, vec!["https://127.0.0.1:70000/", "port 70000 is out of range 1–65535"]),
        (vec!["load", "--duration", "8d"], 1, vec!["--duration 8d", "over 7 days"]),
        (vec!["insitu", "--json", "-", "--ndjson", "-"], 1, vec!["--json and --ndjson", "at most one output"]),
        // overhead, cross-check, trace
        (vec!["overhead", "--block", "0"], 2, vec!["'--block <BLOCK>'", "from 1 to 1000000, e.g. 100"]),
        (vec!["overhead", "--blocks", "-3"], 2, vec!["'--blocks <BLOCKS>'", "negative", "e.g. 20"]),
        (vec!["overhead", "--blocks", "1e3"], 2, vec!["'--blocks <BLOCKS>'", "not a whole number"]),
        (vec!["cross-check", "--blocks", "0"], 2, vec!["'--blocks <BLOCKS>'", "from 1 to 1000000"]),
        (vec!["trace", "--warmup", "-1"], 2, vec!["'--warmup <WARMUP>'", "negative"]),
        // insitu
        (vec!["insitu", "--window", "-1"], 2, vec!["'--window <WINDOW>'", "negative", "e.g. 16"]),
        (vec!["insitu", "--seed", "-7"], 2, vec!["'--seed <SEED>'", "negative"]),
        (vec!["insitu", "--loops", "1e3"], 2, vec!["'--loops <LOOPS>'", "not a whole number", "e.g. 1000"]),
        (vec!["insitu", "--precision", "-1%"], 1, vec!["-1%"]),
        (vec!["insitu", "--quantiles", "-5,50"], 1, vec!["-5"]),
        (vec!["insitu", "--rate", "100/s"], 1, vec!["rate = 100/s is not measurable by the insitu measurement"]),
        (vec!["insitu", "--csv", "-", "--json", "-"], 1, vec!["--json and --csv", "--csv out.csv"]),
        // load
        (vec!["load", "--duration", "-5s"], 1, vec!["--duration -5s", "≥ 0"]),
        (vec!["load", "--duration", "0"], 1, vec!["--duration 0", "give at least 1ms"]),
        (vec!["load", "--timeout", "0s"], 1, vec!["--timeout 0s", "give at least 1ms"]),
        (vec!["load", "--warmup-time", "-1s"], 1, vec!["--warmup-time -1s", "≥ 0"]),
        (vec!["load", "--requests", "0"], 1, vec!["--requests 0", "give at least 1"]),
        // The clock is in situ's (issue 33): a load would accept and ignore it.
        (vec!["load", "--clock", "cpu"], 1, vec!["clock = cpu is not measurable by the load measurement", "applies to: insitu"]),
        (vec!["load", "--requests", "-5"], 2, vec!["'--requests <REQUESTS>'", "negative"]),
        (vec!["load", "--workers", "0"], 2, vec!["'--workers <WORKERS>'", "from 1 to 256"]),
        (vec!["load", "--threads", "-4"], 1, vec!["--threads -4", "whole number from 1 to 1024"]),
        (vec!["load", "--connections", "0"], 1, vec!["--connections 0", "whole number from 1"]),
        (vec!["load", "--response-size", "-1KiB"], 1, vec!["--response-size -1KiB", "≥ 0"]),
        (vec!["load", "--size", "2048GiB"], 1, vec!["2048GiB", "over 1 TiB"]),
        (vec!["load", "--rate", "0/s"], 1, vec!["--rate 0/s", "or max"]),
        (vec!["load", "--rate", "--duration"], 1, vec!["'--duration' is a flag, not a value", "e.g. 100/s"]),
        (vec!["load", "--shard", "3/2"], 1, vec!["--shard 3/2", "K/N with 1 ≤ K ≤ N"]),
        (vec!["load", "--shard", "-1/4"], 1, vec!["--shard -1/4", "K/N"]),
        (vec!["load", "ftp://127.0.0.1/"], 1, vec!["ftp://127.0.0.1/", "https:// or http://"]),
        (vec!["load", "https://127.0.0.1:abc/"], 1, vec!["port 'abc' is not a number", "https://127.0.0.1:8443/1KiB"]),
        (vec!["load", "https://127.0.0.1:0/"], 1, vec!["port 0 is out of range 1–65535"]),
        (vec!["load", "https://127.0.0.1:8443/", "--terminator", "pqtls"], 1, vec!["--terminator starts a server"]),
        (vec!["load", "https://10.1.2.3:8443/", "--capture", "x.pcap"], 1, vec!["not a loopback address"]),
        (vec!["load", "--keylog", "-"], 1, vec!["--keylog -", "give a path, e.g. --keylog run.keys"]),
        (vec!["load", "--json", "-", "--timelines", "-"], 1, vec!["--json and --timelines", "at most one output"]),
        // serve
        (vec!["serve", "--listen", "localhost:8443"], 2, vec!["'localhost' is not an IP address", "127.0.0.1:8443"]),
        (vec!["serve", "--listen", "127.0.0.1:-1"], 2, vec!["port '-1' is not a number"]),
        (vec!["serve", "--listen", "127.0.0.1"], 2, vec!["an IP address and a port"]),
        (vec!["serve", "--workers", "0"], 2, vec!["'--workers <WORKERS>'", "from 1 to 256"]),
        (vec!["serve", "--duration", "0"], 1, vec!["--duration 0", "e.g. --duration 30s"]),
        (vec!["serve", "--duration", "1fortnight"], 1, vec!["--duration", "unit 'fortnight'", "min, h or d"]),
        (vec!["serve", "--duration", "-2h"], 1, vec!["--duration", "≥ 0"]),
        (vec!["serve", "--group", "x25519,MLKEM768"], 1, vec!["--group takes one value here"]),
        (vec!["serve", "--keylog", "-"], 1, vec!["--keylog -", "give a path"]),
        // transfer (each refused before it needs root)
        (vec!["transfer"], 1, vec!["give the link's RTT, e.g. --rtt 50ms"]),
        (vec!["transfer", "--rtt", "-50ms"], 1, vec!["--rtt -50ms", "≥ 0"]),
        (vec!["transfer", "--rtt", "50ms", "--repeat", "0"], 1, vec!["--repeat 0", "e.g. --repeat 100"]),
        (vec!["transfer", "--rtt", "50ms", "--repeat", "-1"], 2, vec!["'--repeat <REPEAT>'", "negative"]),
        (vec!["transfer", "--rtt", "50ms", "--rtt-tolerance", "2h"], 1, vec!["--rtt-tolerance 2h", "over 1s"]),
        (vec!["transfer", "--rtt", "50ms", "--loss", "150%"], 1, vec!["150%", "over 100 %"]),
        (vec!["transfer", "--rtt", "50ms", "--bandwidth", "-100mbit"], 1, vec!["--bandwidth -100mbit", "≥ 0"]),
        (vec!["transfer", "--rtt", "10ms", "--jitter", "8ms"], 1, vec!["jitter 8ms is larger than the one-way delay 5ms"]),
        (vec!["transfer", "--rtt", "50ms", "--json", "-", "--keylog", "-"], 1, vec!["--keylog -", "give a path"]),
        // run, report, compare, merge, check
        (vec!["run", exp, "--window", "-2"], 2, vec!["'--window <WINDOW>'", "negative"]),
        (vec!["run", exp, "--rtt-tolerance", "-1ms"], 1, vec!["--rtt-tolerance -1ms", "≥ 0"]),
        (vec!["run", exp, "--shard", "1/0"], 1, vec!["K/N"]),
        (vec!["run", exp, "--results", "-"], 1, vec!["--results -", "give a path, e.g. --results results"]),
        (vec!["report", p, "--summary-csv", &none], 1, vec!["cannot write", &none]),
        (vec!["report", p, "--html", "-", "--json", "-"], 1, vec!["--html and --json", "at most one output"]),
        (vec!["report", p, "--initcwnd", "-10"], 2, vec!["'--initcwnd <INITCWND>'", "negative", "e.g. 10"]),
        (vec!["compare", "/nonexistent/a"], 2, vec!["<AFTER>"]),
        (vec!["compare", "/nonexistent/a", "/nonexistent/b", "--markdown", "-", "--json", "-"], 1, vec!["--markdown and --json"]),
        (vec!["merge"], 2, vec!["<SHARDS>"]),
        (vec!["merge", "/nonexistent/s", "--out", "-"], 1, vec!["--out -", "give a path"]),
        (vec!["check"], 2, vec!["<DIRS>"]),
        // layers
        (vec!["layers", "/nonexistent/x.pcap"], 1, vec!["/nonexistent/x.pcap"]),
        (vec!["layers", "/nonexistent/x.pcap", "--json"], 2, vec!["--json <FILE>", "a value is required"]),
        (vec!["layers", "/nonexistent/x.pcap", "--json", "-", "--csv", "-"], 1, vec!["--json and --csv"]),
        // netlab (each refused before a namespace is made)
        (vec!["netlab", "verify", "--probes", "0"], 2, vec!["'--probes <PROBES>'", "from 10 to 100000"]),
        (vec!["netlab", "verify", "--rtt", "-5ms"], 1, vec!["--rtt", "≥ 0"]),
        (vec!["netlab", "verify", "--flow", "-1mbit"], 1, vec!["--flow", "≥ 0"]),
        (vec!["netlab", "verify", "--initcwnd", "-1"], 1, vec!["--initcwnd", "whole number from 1 to 1000"]),
        (vec!["netlab", "verify", "--json"], 2, vec!["--json <FILE>", "a value is required"]),
        // pki, list
        (vec!["pki", "--chain", "p256:"], 1, vec!["unknown signature algorithm ''", "known: rsa2048"]),
        (vec!["pki", "--seed", "-1", "--chain", "p256:p256"], 2, vec!["'--seed <SEED>'", "negative"]),
        (vec!["pki", "--chain", "p256:p256", "--out", "-"], 1, vec!["--out -", "give a path"]),
        (vec!["list", "--json"], 2, vec!["--json <FILE>", "a value is required"]),
    ];
    let cwd = tempfile::tempdir().unwrap();
    let mut tried = 0;
    for (args, code, hints) in &cases {
        let o = bounded(args, cwd.path(), &pki);
        let t = text(&o);
        assert_eq!(o.status.code(), Some(*code), "{args:?}: {t}");
        assert!(t.contains("error") && !t.contains("panicked"), "{args:?}: {t}");
        for h in hints {
            assert!(t.contains(h), "{args:?}: expected '{h}' in: {t}");
        }
        assert!(!t.contains("server_hello") && !t.contains("conns/s"), "{args:?} measured before failing: {t}");
        tried += 1;
    }
    assert!(std::fs::read_dir(cwd.path()).unwrap().next().is_none(), "a command left a file behind");
    assert!(tried >= 80, "{tried}");
}

/// `report --baseline` on a load store (issue 39): the baseline of per-step deltas is an in-situ
/// record, so a load record, or a baseline the store does not hold, is refused naming what
/// would work, and nothing is written.
#[test]
fn report_baseline_on_a_load_store_is_refused_not_ignored() {
    let tmp = tempfile::tempdir().unwrap();
    let store = tmp.path().join("load-small");
    std::fs::create_dir_all(&store).unwrap();
    let fixture = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/unchanged-net/expected-load");
    for f in ["records.ndjson", "manifest.json"] {
        std::fs::copy(fixture.join(f), store.join(f)).unwrap();
    }
    let id = record_ids(&store.join("records.ndjson"))[0].clone();
    let page = tmp.path().join("page.md");
    let pki = tmp.path().join("pki");
    for (baseline, says) in [(id.as_str(), "a load record"), ("no-such-configuration", "is not among the 9 records")] {
        let args = ["report", store.to_str().unwrap(), "--baseline", baseline, "--markdown", page.to_str().unwrap()];
        let o = pqtls(&args, &pki);
        assert!(!o.status.success() && text(&o).contains(says) && text(&o).contains("--baseline"), "{}", text(&o));
        assert!(!page.exists(), "nothing written");
    }
}
