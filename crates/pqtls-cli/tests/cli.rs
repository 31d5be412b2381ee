//! The `pqtls` command as a user meets it: outputs, machine-readable records, errors that say
//! what would work, and Ctrl-C that keeps what was measured.

mod common;
use common::{ok, pqtls};

/// Refused with exit 1 and an error naming every hint.
fn fails_with(o: &Output, hints: &[&str]) {
    common::fails_with(o, Some(1), hints)
}

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Fails cleanly (exit 1, `error:` line, no panic) and says `hints`.
#[test]
fn version_and_list_show_the_library_and_the_catalogue() {
    let pki = tempfile::tempdir().unwrap();
    let v = ok(&pqtls(&["--version"], pki.path()));
    assert!(v.contains("OpenSSL 3.5"), "{v}");
    let l = ok(&pqtls(&["list"], pki.path()));
    for needle in
        ["X25519MLKEM768", "0x11EC", "1216 B", "mldsa65", "0x0905", "slhdsa-sha2-128f", "TLS_AES_128_CCM_8_SHA256"]
    {
        assert!(l.contains(needle), "list lacks {needle}");
    }
    let j: serde_json::Value = serde_json::from_str(&ok(&pqtls(&["list", "--json", "-"], pki.path()))).unwrap();
    let slh = j["signature_algorithms"].as_array().unwrap().iter().find(|s| s["name"] == "slhdsa-sha2-128f").unwrap();
    assert!(
        !slh["tls_stacks"].as_array().unwrap().iter().any(|s| s == "openssl"),
        "SLH-DSA is not signed in TLS by OpenSSL"
    );
}

#[test]
fn bad_input_gets_clear_errors() {
    let pki = tempfile::tempdir().unwrap();
    let p = pki.path();
    fails_with(&pqtls(&["insitu", "--group", "kyber768"], p), &["unknown group 'kyber768'", "X25519MLKEM768"]);
    fails_with(&pqtls(&["insitu", "--chain", "p256:nope"], p), &["unknown signature algorithm 'nope'", "mldsa65"]);
    fails_with(
        &pqtls(&["insitu", "--chain", "slhdsa-sha2-128f:slhdsa-sha2-128f"], p),
        &["cannot sign TLS", "stacks that sign with it in TLS: rustls"],
    );
    fails_with(&pqtls(&["insitu", "--cipher", "TLS_NULL"], p), &["unknown cipher suite", "TLS_AES_256_GCM_SHA384"]);
    fails_with(&pqtls(&["insitu", "--loops", "0"], p), &["loops must be at least 1"]);
    fails_with(&pqtls(&["insitu", "--precision", "0%"], p), &["precision"]);
    fails_with(&pqtls(&["insitu", "--mode", "fast"], p), &["unknown transport 'fast'", "socketpair", "tcp"]);
    fails_with(&pqtls(&["insitu", "--rtt", "50ms"], p), &["rtt = 50ms is not measurable by the insitu measurement"]);
    fails_with(&pqtls(&["insitu", "--rtt", "50"], p), &["unit", "50ms"]);
    fails_with(&pqtls(&["insitu", "--group", "x25519,x25519"], p), &["--group lists x25519 twice"]);
    fails_with(&pqtls(&["insitu", "--key-shares", "x25519+x25519"], p), &["names x25519 twice"]);
    // Outputs are checked before anything is measured.
    fails_with(&pqtls(&["insitu", "--json", "/nonexistent/x.json"], p), &["cannot write /nonexistent/x.json"]);
    fails_with(&pqtls(&["insitu", "--quantiles", "15,x"], p), &["quantile 'x'"]);
    fails_with(&pqtls(&["insitu", "--baseline", "x25519"], p), &["group:leaf:root"]);
    fails_with(&pqtls(&["insitu", "--key-shares", "x25519", "--share-x25519"], p), &["rustls"]);
    fails_with(&pqtls(&["pki", "--chain", "a:b:c:d"], p), &["leaf:root"]);
    fails_with(&pqtls(&["report", "/nonexistent/results"], p), &["/nonexistent/results"]);
    // `run` has insitu's schedule flags, checked before anything is opened or measured.
    for cmd in ["insitu", "run"] {
        let mut args = vec![cmd];
        if cmd == "run" {
            args.push("/nonexistent/e.toml");
        }
        fails_with(
            &pqtls(&[&args[..], &["--schedule", "random"]].concat(), p),
            &["'random'", "interleaved or sequential"],
        );
        fails_with(&pqtls(&[&args[..], &["--block", "0"]].concat(), p), &["at least 1 handshake"]);
    }
}

#[test]
fn insitu_writes_the_documented_records() {
    let dir = tempfile::tempdir().unwrap();
    let (json, csv, nd) = (dir.path().join("r.json"), dir.path().join("r.csv"), dir.path().join("s.ndjson"));
    let out = ok(&pqtls(
        &[
            "insitu",
            "--group",
            "x25519,X25519MLKEM768",
            "--chain",
            "p256:p256",
            "--warmup",
            "5",
            "--loops",
            "40",
            "--quantiles",
            "15,50,99",
            "--baseline",
            "x25519:p256:p256",
            "--json",
            json.to_str().unwrap(),
            "--csv",
            csv.to_str().unwrap(),
            "--ndjson",
            nd.to_str().unwrap(),
        ],
        &dir.path().join("pki"),
    ));
    assert!(out.contains("server_hello") && out.contains("Δp50 vs baseline"), "{out}");
    let records: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 2);
    let (rec, r) = (&records[1], &records[1]["result"]);
    assert_eq!(rec["schema"], 2);
    assert_eq!(rec["kind"], "insitu");
    for key in ["stack", "group", "chain", "cipher", "transport", "clock"] {
        assert!(rec["scenario"][key].is_string(), "record's scenario lacks {key}");
    }
    for key in ["id", "label", "env", "settings"] {
        assert!(!rec[key].is_null(), "record lacks {key}");
    }
    for key in ["loops", "bytes", "client", "server", "negotiated"] {
        assert!(!r[key].is_null(), "record's result lacks {key}");
    }
    assert_eq!(r["negotiated"]["group"], "X25519MLKEM768");
    assert_eq!(r["negotiated"]["sigalg"], "ecdsa_secp256r1_sha256");
    assert_eq!(r["negotiated"]["cipher"], "TLS_AES_128_GCM_SHA256");
    for side in ["client", "server"] {
        let s = &r[side];
        assert!(s["total_cpu_ns"]["quantiles"]["p50"].as_f64().unwrap() > 0.0);
        let steps = s["steps"].as_object().unwrap();
        assert!(steps.len() >= 5);
        for (_, st) in steps {
            for q in ["p15", "p50", "p99"] {
                assert!(st["quantiles"][q].is_number());
            }
            assert!(st["mean"].is_number() && st["median_ci"].is_array());
        }
    }
    assert!(r["bytes"]["client_to_server"].as_u64().unwrap() > 1216);
    assert!(r["bytes"]["messages"]["ServerHello"].as_u64().unwrap() > 1120);
    assert!(rec["env"]["libraries"]["openssl"].as_str().unwrap().contains("3.5"));
    assert!(
        !rec["env"]["cpu_model"].as_str().unwrap().is_empty() && !rec["env"]["kernel"].as_str().unwrap().is_empty()
    );
    assert_eq!(r["loops"]["measured"], 40);
    assert!(r["baseline"]["total"]["delta"].is_number());
    let csv = std::fs::read_to_string(&csv).unwrap();
    assert!(csv.lines().count() > 20 && csv.contains(",server_hello,"));
    let lines = std::fs::read_to_string(&nd).unwrap();
    assert_eq!(lines.lines().count(), 80);
    let first: serde_json::Value = serde_json::from_str(lines.lines().next().unwrap()).unwrap();
    assert!(first["client"]["steps"]["client_hello"].is_number());
    assert!(first["client"]["substeps"]["client_hello/write_client_hello"].is_number());
}

#[test]
fn adaptive_mode_says_why_it_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    ok(&pqtls(
        &[
            "insitu",
            "--precision",
            "5%",
            "--loops",
            "3000",
            "--warmup",
            "20",
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ],
        &dir.path().join("pki"),
    ));
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let stopped = r[0]["result"]["loops"]["stopped"].as_str().unwrap().to_string();
    assert!(stopped == "precision reached" || stopped == "loop cap reached", "{stopped}");
}

/// Ctrl-C during `pqtls run` keeps every complete record; running again measures only the
/// rest, and the result is the full matrix with no configuration twice.
#[test]
fn run_interrupted_by_ctrl_c_resumes_without_losing_or_repeating() {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("small.toml");
    std::fs::write(
        &exp,
        "name = \"small\"\n[settings]\nwarmup = 5\nloops = 300\n[matrix]\nstack = [\"openssl\"]\n\
         group = [\"x25519\", \"secp256r1\", \"MLKEM512\", \"X25519MLKEM768\"]\nchain = [\"p256:p256\", \"ed25519:ed25519\"]\n\
         cipher = [\"TLS_AES_128_GCM_SHA256\"]\n",
    )
    .unwrap();
    let results = dir.path().join("results");
    // Two windows of four (the default --stop thin, like together, stores a window's records
    // when it closes): interrupted in the second, the first window's four are kept.
    let args = ["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--no-progress", "--window", "4"];
    let pki = dir.path().join("pki");
    let records = results.join("small").join("records.ndjson");
    let child = Command::new(env!("CARGO_BIN_EXE_pqtls"))
        .args(args)
        .env("PQTLS_PKI_DIR", &pki)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let t0 = Instant::now();
    while std::fs::read_to_string(&records).map(|s| s.lines().count()).unwrap_or(0) < 2 {
        assert!(t0.elapsed() < Duration::from_secs(120), "no records after 120 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    // SAFETY: signalling our own child process.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    // A batch system must not count an interrupted run as done.
    assert_eq!(out.status.code(), Some(130), "{err}");
    // Complete records; the open window's configurations are kept too, marked interrupted.
    let complete = |text: &str| -> Vec<String> {
        text.lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .filter(|v| v["result"]["loops"]["stopped"] != "interrupted")
            .map(|v| v["id"].as_str().unwrap().to_string())
            .collect()
    };
    let kept = complete(&std::fs::read_to_string(&records).unwrap()).len();
    assert!((2..8).contains(&kept), "interrupted run kept {kept} records:\n{err}");

    let again = pqtls(&args, &pki);
    ok(&again);
    let text = std::fs::read_to_string(&records).unwrap();
    let ids = complete(&text);
    let unique: std::collections::HashSet<_> = ids.iter().collect();
    assert_eq!(ids.len(), 8, "{ids:?}");
    assert_eq!(unique.len(), 8, "a configuration was measured twice: {ids:?}");
    let log = String::from_utf8_lossy(&again.stderr);
    assert!(log.contains(&format!("{kept} already stored")), "{log}");
}

/// The two front doors agree: `insitu` with flags and `run` with the equivalent experiment
/// file give records with the same ids and the same fields (scenario, settings, result keys).
#[test]
fn insitu_flags_and_an_experiment_file_give_the_same_records() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let json = dir.path().join("r.json");
    ok(&pqtls(
        &[
            "insitu",
            "--stack",
            "openssl,rustls",
            "--group",
            "x25519,X25519MLKEM768",
            "--chain",
            "p256:p256",
            "--key-shares",
            "one,X25519MLKEM768+x25519",
            "--clock",
            "cpu",
            "--transport",
            "socketpair",
            "--warmup",
            "2",
            "--loops",
            "5",
            "--json",
            json.to_str().unwrap(),
            "--quiet",
        ],
        &pki,
    ));
    let exp = dir.path().join("same.toml");
    std::fs::write(
        &exp,
        "name = \"same\"\n[settings]\nwarmup = 2\nloops = 5\nclock = \"cpu\"\n[matrix]\nstack = [\"openssl\", \"rustls\"]\n\
         group = [\"x25519\", \"X25519MLKEM768\"]\nchain = [\"p256:p256\"]\ntransport = [\"socketpair\"]\n\
         key_shares = [\"one\", \"X25519MLKEM768,x25519\"]\n",
    )
    .unwrap();
    let results = dir.path().join("results");
    // Blocks of one handshake, and a seed whose shuffles complete the scenarios out of order
    // (each stored as it completes: --stop each; together stores a window in plan order).
    let run = ["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--no-progress"];
    ok(&pqtls(
        &[&run[..], &["--schedule", "interleaved", "--block", "1", "--seed", "3", "--stop", "each"]].concat(),
        &pki,
    ));
    // The report lists them in the experiment's order (stack outermost, then group, …), not
    // in the order stored.
    let report = dir.path().join("report.json");
    ok(&pqtls(&["report", results.join("same").to_str().unwrap(), "--json", report.to_str().unwrap()], &pki));
    let reported: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
    let order = |v: &serde_json::Value| {
        let f = |k: &str| v["scenario"][k].as_str().unwrap_or_default().to_string();
        (f("stack") != "openssl", f("group") != "x25519", f("key_shares") != "one")
    };
    let keys: Vec<_> = reported.iter().map(order).collect();
    assert!(keys.windows(2).all(|w| w[0] < w[1]), "report not in experiment order: {keys:?}");
    let stored: Vec<serde_json::Value> = std::fs::read_to_string(results.join("same/records.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_ne!(stored.iter().map(order).collect::<Vec<_>>(), keys, "stored in order: the test tests nothing");
    assert!(
        stored.iter().all(|r| r["result"]["noise"]["schedule"]["block"] == 1),
        "{:?}",
        stored[0]["result"]["noise"]
    );
    let mut a: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let mut b: Vec<serde_json::Value> = std::fs::read_to_string(results.join("same/records.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    // A store holds records in the order their (interleaved) configurations completed.
    let by_id = |x: &serde_json::Value| x["id"].as_str().unwrap_or_default().to_string();
    a.sort_by_key(by_id);
    b.sort_by_key(by_id);
    let ids = |v: &[serde_json::Value]| v.iter().map(|r| r["id"].as_str().unwrap().to_string()).collect::<Vec<_>>();
    assert_eq!(ids(&a), ids(&b));
    assert_eq!(a.len(), 8);
    assert!(ids(&a).iter().all(|id| id.ends_with("|transport=socketpair|clock=cpu")), "{:?}", ids(&a));
    // The store's lines also name their experiment (`experiment`, which `insitu` has none of).
    let keys = |v: &serde_json::Value| {
        v.as_object().unwrap().keys().filter(|k| *k != "experiment").cloned().collect::<Vec<_>>()
    };
    for (x, y) in a.iter().zip(&b) {
        assert_eq!(keys(x), keys(y));
        assert_eq!(x["scenario"], y["scenario"]);
        assert_eq!(x["settings"], y["settings"]);
        assert_eq!(x["label"], y["label"]);
        assert_eq!(keys(&x["result"]), keys(&y["result"]));
        assert_eq!(x["result"]["loops"]["clock"], "cpu");
        assert_eq!(x["result"]["negotiated"], y["result"]["negotiated"]);
    }
}

/// The PKI gets liboqs' key factory from the CLI itself (no process-wide registry filled as a
/// side effect of building the backends): `pqtls pki` alone makes a Falcon-512 chain, with the
/// private key in oqs-provider's encoding.
#[test]
fn pki_makes_falcon512_chains_on_its_own() {
    let pki = tempfile::tempdir().unwrap();
    let out = ok(&pqtls(&["pki", "--chain", "falcon512:falcon512"], pki.path()));
    assert!(out.contains("falcon512:falcon512"), "{out}");
    let dir = pki.path().join("server-falcon512_falcon512-s0");
    for f in ["leaf.key.pem", "chain.pem", "root.pem", "manifest.json"] {
        assert!(dir.join(f).is_file(), "{f} in {}", dir.display());
    }
    let manifest = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
    assert!(manifest.contains("pqtls-oqs"), "{manifest}");
}

#[test]
fn list_tells_oqs_code_points_and_slhdsa_apart() {
    let pki = tempfile::tempdir().unwrap();
    let out = ok(&pqtls(&["list"], pki.path()));
    assert!(out.contains("0xFE00 (OQS)") && out.contains("0xFE02 (OQS)"), "{out}");
    assert!(out.contains("0xFED7 (OQS)"), "{out}");
    assert!(out.contains("not the OQS SPHINCS+"), "{out}");
}

/// The outputs of two load generators that drove one endpoint (`pqtls load … --shard K/2
/// --out …`) merge into the record of the whole run, which `report` draws; a missing shard is
/// refused by name.
#[test]
fn merge_joins_load_shards_and_report_draws_them() {
    use pqtls_core::load::{histogram, Latency, LoadResult, LoadShare, Terminator};
    use pqtls_core::record::{Env, Outcome, Record, SCHEMA_VERSION};
    use pqtls_core::scenario::Scenario;
    let tmp = tempfile::tempdir().unwrap();
    let sc = Scenario::new([("group", "X25519MLKEM768"), ("chain", "mldsa65:mldsa65"), ("threads", "4")]).unwrap();
    let shard = |k: u32, latencies_us: std::ops::RangeInclusive<u64>| {
        let mut h = histogram();
        for v in latencies_us.clone() {
            h.record(v * 1000).unwrap();
        }
        let n = h.len();
        let result = LoadResult {
            client_hello_segments: None,
            client_hello_datagrams: None,
            url: "https://127.0.0.1:8443/1KiB".into(),
            terminator: Terminator { name: "nginx".into(), version: "nginx/1.26.3".into(), backend: None },
            loop_mode: "closed".into(),
            achieved_rate_per_s: n as f64 / 2.0,
            duration_ns: 2_000_000_000,
            requests: n,
            handshakes: n,
            handshakes_per_s: n as f64 / 2.0,
            latency: Latency::of(&h),
            ttfb: Latency::of(&h),
            client_handshake_cpu_ns_mean: 500_000.0,
            capture: None,
            terminator_processes: None,
            link: None,
            emulator: None,
            shard: Some(LoadShare { index: k, count: 2 }),
            stopped: "duration".into(),
            threads: 4,
            connections: 4,
            ..LoadResult::default()
        };
        let r = Record {
            schema: SCHEMA_VERSION,
            id: sc.id(),
            label: sc.label(),
            scenario: sc.values().clone(),
            settings: None,
            env: Env::default(),
            measured_at: 0,
            result: Outcome::Load(Box::new(result)),
        };
        let f = tmp.path().join(format!("shard-{k}.ndjson"));
        std::fs::write(&f, serde_json::to_string(&r).unwrap() + "\n").unwrap();
        f
    };
    let (a, b) = (shard(1, 100..=199), shard(2, 1000..=1099));
    let (a, b) = (a.to_str().unwrap(), b.to_str().unwrap());
    let p = tmp.path();
    let out = p.join("merged");
    fails_with(&pqtls(&["merge", a, "--out", out.to_str().unwrap()], p), &["shard 2/2 of 2 is missing"]);
    let o = pqtls(&["merge", a, b, "--out", out.to_str().unwrap()], p);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stderr).contains(&format!("joined 2 load shards of {}", sc.id())));
    let (md, csv) = (p.join("r.md"), p.join("r.csv"));
    ok(&pqtls(
        &["report", out.to_str().unwrap(), "--markdown", md.to_str().unwrap(), "--load-csv", csv.to_str().unwrap()],
        p,
    ));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("## Load: connections per second") && md.contains("nginx/1.26.3"), "{md}");
    // 200 requests: 100 at 100–199 µs and 100 at 1000–1099 µs; the merged median is the 100th
    // value (199 µs), not an average of the shards' medians (~650 µs).
    let csv = std::fs::read_to_string(csv).unwrap();
    let (head, row) = (csv.lines().next().unwrap(), csv.lines().nth(1).unwrap());
    let col = |name: &str| head.split(',').position(|h| h == name).unwrap();
    let cells: Vec<&str> = row.split(',').collect();
    assert_eq!(cells[col("requests")], "200");
    assert_eq!(cells[col("threads_total")], "8");
    let p50: u64 = cells[col("latency_p50_ns")].parse().unwrap();
    assert!((199_000..=199_200).contains(&p50), "{p50}");
}

/// `pqtls replicate`: the studies listed; an unknown study and a budget below one
/// configuration refused, naming what would work; a study replicated in situ writes its page
/// (every table, the published cells beside pqtls'), and run again resumes (nothing measured
/// twice); a study with nothing to measure in situ still gets its page, each row saying why.
#[test]
fn replicate_lists_refuses_bad_input_runs_and_resumes() {
    let pki = tempfile::tempdir().unwrap();
    let results = tempfile::tempdir().unwrap();
    let list = ok(&pqtls(&["replicate", "--list"], pki.path()));
    for needle in ["000", "ibm-in-situ", "pcsi-throughput", "rustls-pq-handshake", "layered-latency", "aws-mtls-ttlb"] {
        assert!(list.contains(needle), "--list lacks {needle}:\n{list}");
    }
    let o = pqtls(&["replicate", "nope"], pki.path());
    fails_with(&o, &["unknown study 'nope'", "ibm-in-situ (000)", "aws-mtls-ttlb (004)"]);
    // Study 001 runs two parts: its message sizes in situ, its rates under load (Table 3's 24
    // rows at 1, 4 and 8 threads, but for the row the study marks N/A*).
    let line = list.lines().find(|l| l.contains("pcsi-throughput")).unwrap();
    assert!(line.contains("  83 ") && line.contains("(14 configurations in situ, 69 load points)"), "{line}");
    // Study 004 runs its in-situ part and its transfer part (the TTLB table's 8 rows at 50 KB
    // and 150 KB, in the network lab).
    let line = list.lines().find(|l| l.contains("aws-mtls-ttlb")).unwrap();
    assert!(line.contains("(4 configurations in situ, 16 transfer points)"), "{line}");
    let o = pqtls(&["replicate", "ibm-in-situ", "--budget", "2s"], pki.path());
    // The minimum is said as --budget takes it (135 s: 27 configurations of 5 s).
    fails_with(&o, &["--budget 2s", "27 configurations in situ, one needs at least 5s", "at least 135s"]);
    // Per part, summed: 14 × 5 s in situ + 69 × 2 s under load.
    let o = pqtls(&["replicate", "pcsi-throughput", "--budget", "1m"], pki.path());
    fails_with(&o, &["--budget 1m", "69 load points, one needs at least 2s", "at least 208s"]);
    let root = is_root();
    if root {
        // 4 × 5 s in situ + 16 × 5 s of transfers (as root; without root the transfer part is
        // left out and its minimum with it).
        let o = pqtls(&["replicate", "aws-mtls-ttlb", "--budget", "20s"], pki.path());
        fails_with(&o, &["--budget 20s", "16 transfer points, one needs at least 5s", "at least 100s"]);
    }
    let r = results.path().to_str().unwrap();
    // The transfer part's store is seeded with made-up records of its 16 points (the testkit's,
    // never results): as root, the part resumes them and measures none (no lab run in this test).
    let transfer_store = results.path().join("replicate-aws-mtls-ttlb/transfer");
    std::fs::create_dir_all(&transfer_store).unwrap();
    let study = pqtls_export::replication::study("aws-mtls-ttlb").unwrap();
    let seeded: Vec<String> = study
        .configs("transfer")
        .iter()
        .map(|sc| serde_json::to_string(&pqtls_testkit::synthetic::transfer::transfer(sc)).unwrap())
        .collect();
    assert_eq!(seeded.len(), 16);
    std::fs::write(transfer_store.join("records.ndjson"), seeded.join("\n") + "\n").unwrap();
    let run =
        |study: &str| pqtls(&["replicate", study, "--budget", "100s", "--results", r, "--no-progress"], pki.path());
    let first = run("aws-mtls-ttlb");
    let err = String::from_utf8_lossy(&first.stderr).to_string();
    assert!(first.status.success(), "{err}");
    assert!(err.contains("4 measured"), "{err}");
    if root {
        assert!(err.contains("the transfer part:") && err.contains("16 already stored, 0 measured"), "{err}");
    }
    let page = std::fs::read_to_string(results.path().join("replicate-aws-mtls-ttlb/report.md")).unwrap();
    assert!(page.contains("| PQ certificates | quoted | ~22KB |"), "{page}");
    // The budget is time, shared in proportion to the parts' least times (as root: 20 s of 100
    // in situ, 80 s for the transfers); each configuration within its share (80 % of 20 s over 4).
    let (cap_s, cap_ms) = if root { ("4s", 4000) } else { ("20s", 20_000) };
    assert!(page.contains(&format!("each within its time cap of {cap_s}")), "{page}");
    // The TTLB table: every cell has pqtls' median (here the seeded records'), in ms, each row
    // against the one it names.
    let ttlb = &page[page.find("## ttlb").unwrap()..];
    let ttlb_lines: Vec<&str> = ttlb.lines().filter(|l| l.starts_with("| ") && l.contains("initcwnd")).collect();
    assert_eq!(ttlb_lines.len(), 8 * 3, "{ttlb}");
    for l in &ttlb_lines {
        let cells: Vec<&str> = l.split(" | ").collect();
        assert!(cells[3].parse::<f64>().is_ok(), "{l}");
    }
    let quote = page.lines().find(|l| l.starts_with("| ~ 3.2 ms overhead (mTLS) @100mbps |")).unwrap();
    assert!(quote.contains("quoted 3.20 · pqtls ") && quote.contains("shown, not judged"), "{quote}");
    if root {
        assert!(
            page.contains("**Budget**: 100s shared between the parts")
                && page.contains("transfer 1m20s (16 transfer points)"),
            "{page}"
        );
        assert!(page.contains("**Measured (transfer, 1m20s of the budget)**: 16 transfer points"), "{page}");
    } else {
        assert!(page.contains("**Not run**: the transfer part (16 transfer points)") && page.contains("root"));
    }
    let records =
        std::fs::read_to_string(results.path().join("replicate-aws-mtls-ttlb/insitu/records.ndjson")).unwrap();
    for line in records.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        assert_eq!(r["settings"]["max_time_ms"], cap_ms, "{line}");
        let stopped_by = r["result"]["loops"]["stopped_by"].as_str().unwrap_or_default().to_string();
        assert!(["own rule", "window", "time cap"].contains(&stopped_by.as_str()), "{line}");
    }
    // Plain TLS and mutual TLS at the same points (study 004's abstract): pqtls' figures, each
    // mTLS row against its TLS row.
    assert!(page.contains("## tls-vs-mtls"), "{page}");
    let mtls = page
        .lines()
        .find(|l| l.starts_with("| mTLS 1.3, PQ (the client sends the same chain) | client→server (B)"))
        .unwrap();
    assert!(mtls.contains(" B over 'TLS 1.3, PQ") && mtls.contains("shown, not judged"), "{mtls}");
    let html = std::fs::read_to_string(results.path().join("replicate-aws-mtls-ttlb/report.html")).unwrap();
    assert!(html.contains("<caption>") && html.contains("~22KB"));
    // The capacity table under the IBM study's convention (10 bits per TLS byte, sessions/s
    // from the server→client bytes only), saying so; pqtls' own by default.
    let store = results.path().join("replicate-aws-mtls-ttlb/insitu");
    let report =
        |extra: &[&str]| pqtls(&[&["report", store.to_str().unwrap(), "--markdown", "-"], extra].concat(), pki.path());
    let ours = ok(&report(&[]));
    assert!(ours.contains("Convention: pqtls") && ours.contains("| wire B s→c |"), "{ours}");
    let ibm = ok(&report(&["--capacity-convention", "ibm"]));
    assert!(ibm.contains("Convention: ibm") && ibm.contains("| TLS B (10 bit each) s→c |"), "{ibm}");
    let capacity = &ibm[ibm.find("\n## Capacity\n").unwrap()..];
    let capacity = &capacity[..capacity[1..].find("\n## ").map_or(capacity.len(), |i| i + 1)];
    for line in records.lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        let (label, down) = (r["label"].as_str().unwrap(), r["result"]["bytes"]["server_to_client"].as_u64().unwrap());
        let row = capacity
            .lines()
            .find(|l| l.starts_with(&format!("| {label} | ")))
            .unwrap_or_else(|| panic!("{label}: {capacity}"));
        // 1 Gbit/s over the server→client bytes at 10 bits each, the table's first rate.
        let at_1g = (1e9 / (down as f64 * 10.0)).round() as u64;
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(cells[3], down.to_string(), "{row}");
        assert_eq!(cells[5].replace(' ', ""), at_1g.to_string(), "{row}");
    }
    // Clap refuses it (a usage error: exit 2), naming both conventions.
    common::fails_with(
        &report(&["--capacity-convention", "cisco"]),
        Some(2),
        &["--capacity-convention", "unknown capacity convention 'cisco'", "pqtls", "ibm"],
    );
    let again = run("aws-mtls-ttlb");
    let err = String::from_utf8_lossy(&again.stderr).to_string();
    assert!(again.status.success() && err.contains("4 already stored, 0 measured"), "{err}");
    // Another --budget over the same store: the store refuses it (its settings differ) before
    // anything is measured, naming --fresh; replicate exits 1 and does not promise that the same
    // command resumes.
    let other = pqtls(&["replicate", "aws-mtls-ttlb", "--budget", "150s", "--results", r, "--no-progress"], pki.path());
    let said = String::from_utf8_lossy(&other.stderr).to_string();
    assert_eq!(other.status.code(), Some(1), "{said}");
    assert!(said.contains("measured with other settings") && said.contains("--fresh"), "{said}");
    assert!(said.contains("(its error is above)") && !said.contains("the same command resumes"), "{said}");
    // The page alone, nothing stored: every rate of Table 3 says why it has no figure.
    let page_only = ["replicate", "pcsi-throughput", "--page-only", "--results", r, "--no-progress"];
    ok(&pqtls(&page_only, pki.path()));
    let page = std::fs::read_to_string(results.path().join("replicate-pcsi-throughput/report.md")).unwrap();
    let rate = page.lines().find(|l| l.starts_with("| 2 x25519 ed25519 | msg/sec 1 thread |")).unwrap();
    assert!(rate.contains("not measured") && rate.contains("it resumes"), "{rate}");
    let none = run("layered-latency");
    assert!(none.status.success(), "{}", String::from_utf8_lossy(&none.stderr));
    let page = std::fs::read_to_string(results.path().join("replicate-layered-latency/report.md")).unwrap();
    assert!(page.contains("backend 4 KB") && page.contains("nothing"), "{page}");
}

/// Whether the tests run as root (the network lab needs it).
fn is_root() -> bool {
    Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
}

/// Without root, `pqtls replicate` leaves the transfer part out (the network lab needs root):
/// it says so on the page and on each TTLB cell, its budget goes to the in-situ part, and the
/// replication succeeds. Run as root, the test runs replicate as `nobody` (setpriv); the
/// in-situ store is seeded (the testkit's records), so nothing is measured.
#[test]
fn replicate_without_root_leaves_the_transfer_part_out_and_says_why() {
    use std::os::unix::fs::PermissionsExt;
    if !is_root() {
        eprintln!("as not root, replicate_lists_refuses_bad_input_runs_and_resumes covers this");
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let dir = work.path().join("replicate-aws-mtls-ttlb");
    let study = pqtls_export::replication::study("aws-mtls-ttlb").unwrap();
    std::fs::create_dir_all(dir.join("insitu")).unwrap();
    let records: Vec<String> = study
        .configs("insitu")
        .iter()
        .map(|sc| serde_json::to_string(&pqtls_testkit::synthetic::measure(sc, 200).record).unwrap())
        .collect();
    std::fs::write(dir.join("insitu/records.ndjson"), records.join("\n") + "\n").unwrap();
    for p in [work.path(), &dir, &dir.join("insitu")] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o777)).unwrap();
    }
    std::fs::set_permissions(dir.join("insitu/records.ndjson"), std::fs::Permissions::from_mode(0o666)).unwrap();
    let r = work.path().to_str().unwrap();
    let mut c = Command::new("setpriv");
    c.args(["--reuid=65534", "--regid=65534", "--clear-groups", env!("CARGO_BIN_EXE_pqtls")]);
    c.args(["replicate", "aws-mtls-ttlb", "--budget", "20s", "--results", r, "--no-progress"]);
    c.env("PQTLS_PKI_DIR", work.path().join("pki")).env("RUST_BACKTRACE", "0");
    let out = c.output().unwrap();
    let said = common::text(&out);
    assert!(out.status.success(), "{said}");
    assert!(said.contains("4 already stored, 0 measured") && !said.contains("the transfer part:"), "{said}");
    assert!(!dir.join("transfer").exists(), "{said}");
    let page = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(
        page.contains("**Not run**: the transfer part (16 transfer points)") && page.contains("needs root"),
        "{page}"
    );
    assert!(!page.contains("**Budget**"), "one part run: no split: {page}");
    let cell = page.lines().find(|l| l.starts_with("| mTLS 1.3, PQ, initcwnd 24 | TTLB p50, 50 KB (ms) |")).unwrap();
    assert!(cell.contains("not measured") && cell.contains("as root to measure it"), "{cell}");
}

/// `pqtls replicate` runs a study's load part as it runs its in-situ part: its experiment file
/// (`parts/load.toml`: a load measurement, the row's configuration at each thread count), its
/// own store (`load/`), resumed. Kept short: both stores are seeded with made-up records of every
/// point but one (the testkit's, never results), so the run measures one load point for real
/// (x25519 + Ed25519, 1 thread, on loopback) and the page's Table 3 has pqtls' figure in every
/// cell the run holds, a verdict and a cause for each difference.
#[test]
fn replicate_runs_the_load_part_into_its_own_store_and_resumes() {
    let pki = tempfile::tempdir().unwrap();
    let results = tempfile::tempdir().unwrap();
    let study = pqtls_export::replication::study("pcsi-throughput").unwrap();
    let dir = results.path().join("replicate-pcsi-throughput");
    let measured = study.point("group=x25519 chain=ed25519:ed25519", "conn_per_s@1").unwrap();
    seed_replication(&dir, &[measured.id()]);
    let r = results.path().to_str().unwrap();
    let run =
        || pqtls(&["replicate", "pcsi-throughput", "--budget", "4m", "--results", r, "--no-progress"], pki.path());
    let first = run();
    let err = String::from_utf8_lossy(&first.stderr).to_string();
    assert!(first.status.success(), "{err}");
    assert!(err.contains("14 already stored, 0 measured") && err.contains("68 already stored, 1 measured"), "{err}");
    let file = std::fs::read_to_string(dir.join("parts/load.toml")).unwrap();
    assert!(file.contains("measurement = \"load\"") && file.contains("threads"), "{file}");
    let records = std::fs::read_to_string(dir.join("load/records.ndjson")).unwrap();
    let real = records.lines().find(|l| l.contains(&format!("\"id\":\"{}\"", measured.id()))).unwrap();
    let real: serde_json::Value = serde_json::from_str(real).unwrap();
    assert_eq!((real["kind"].as_str(), real["scenario"]["threads"].as_str()), (Some("load"), Some("1")));
    assert_eq!(real["scenario"]["keep_alive"], "false");
    assert!(real["result"]["requests"].as_u64().unwrap() > 0, "{real}");
    // The page: the split of the budget, the load part's settings, Table 3's baseline measured.
    let page = std::fs::read_to_string(dir.join("report.md")).unwrap();
    assert!(page.contains("**Budget**: 4m shared between the parts") && page.contains("69 load points"), "{page}");
    assert!(page.contains("through `pqtls serve` on rustls"), "{page}");
    let t3 = &page[page.find("## table-3").unwrap()..page.find("## table-4").unwrap()];
    let base = t3.lines().find(|l| l.starts_with("| 2 x25519 ed25519 | msg/sec 1 thread |")).unwrap();
    let cells: Vec<&str> = base.split(" | ").collect();
    assert!(cells[3].parse::<f64>().is_ok_and(|v| v > 0.0), "{base}");
    for line in t3.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| row")) {
        let cells: Vec<&str> = line.split(" | ").collect();
        assert!(cells[3] != "—" || line.contains("not measured"), "{line}");
        if line.contains("| differs |") {
            assert!(line.contains("client thread"), "a difference without its cause: {line}");
        }
    }
    // Run again: both parts resume, nothing measured twice.
    let again = run();
    let err = String::from_utf8_lossy(&again.stderr).to_string();
    assert!(again.status.success() && err.contains("69 already stored, 0 measured"), "{err}");
}

/// Seeds study 001's replication stores in `dir` with made-up records (the testkit's, never
/// results) of every in-situ configuration and of every load point but those of `missing`.
fn seed_replication(dir: &std::path::Path, missing: &[String]) {
    use pqtls_testkit::synthetic;
    let study = pqtls_export::replication::study("pcsi-throughput").unwrap();
    let seed = |part: &str, records: Vec<pqtls_core::record::Record>| {
        std::fs::create_dir_all(dir.join(part)).unwrap();
        let lines: Vec<String> = records.iter().map(|r| serde_json::to_string(r).unwrap()).collect();
        std::fs::write(dir.join(part).join("records.ndjson"), lines.join("\n") + "\n").unwrap();
    };
    seed("insitu", study.configs("insitu").iter().map(|sc| synthetic::measure(sc, 200).record).collect());
    let load = study.configs("load");
    assert_eq!(load.len(), 69);
    let kept = load.iter().filter(|sc| !missing.contains(&sc.id()));
    seed("load", kept.map(|sc| synthetic::load::load(sc, false)).collect());
}

/// Ctrl-C during a replication's second part (load) stops its child as during the first: the
/// run ends interrupted (exit 130), keeps what it measured and says the same command resumes.
#[test]
fn replicate_interrupted_in_its_load_part_stops_and_says_it_resumes() {
    use std::io::{BufRead, BufReader};
    let pki = tempfile::tempdir().unwrap();
    let results = tempfile::tempdir().unwrap();
    let study = pqtls_export::replication::study("pcsi-throughput").unwrap();
    let dir = results.path().join("replicate-pcsi-throughput");
    // Eight points left to measure (x25519 + Ed25519 and ML-KEM-512 + Ed25519 at 1/4/8
    // threads, the no-TLS row at 1 and 4): ~20 s of load, interrupted in its first.
    let point = |c: &str, n: &str| study.point(c, &format!("conn_per_s@{n}")).unwrap().id();
    let mut missing = Vec::new();
    for n in ["1", "4", "8"] {
        missing.push(point("group=x25519 chain=ed25519:ed25519", n));
        missing.push(point("group=MLKEM512 chain=ed25519:ed25519", n));
    }
    missing.push(point("tls=false group=x25519 chain=ed25519:ed25519", "1"));
    missing.push(point("tls=false group=x25519 chain=ed25519:ed25519", "4"));
    seed_replication(&dir, &missing);
    let r = results.path().to_str().unwrap();
    let args = ["replicate", "pcsi-throughput", "--budget", "4m", "--results", r, "--no-progress"];
    let mut child = common::pqtls_cmd(&args, pki.path()).stderr(Stdio::piped()).spawn().unwrap();
    let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
    let mut said = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        said.push_str(&line);
        said.push('\n');
        if line.starts_with("[1/8]") {
            break;
        }
    }
    assert!(said.contains("the load part:"), "{said}");
    // SAFETY: kill(2) on our own child's pid, which has not been reaped yet.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    for line in lines {
        said.push_str(&line.unwrap());
        said.push('\n');
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "{said}");
    assert!(said.contains("interrupted with") && said.contains("run the same command again to resume"), "{said}");
    assert!(!said.contains("[8/8]"), "the load part ran on after the interrupt: {said}");
}
