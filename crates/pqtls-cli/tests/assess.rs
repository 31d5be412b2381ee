//! `pqtls assess` end to end (issue 25): bad questions, an assessment predicted by the model
//! (its answer, its page and the numbers it takes from the records), an interrupted one that
//! resumes, and — as root — the network lab's measured transfers, the page opened in headless
//! Chromium.

mod common;

use common::{fails_with, ok, pqtls_cmd, pqtls_in, text};
use pqtls_core::record::Record;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One assessment at a time: two would disturb each other's link verification and timing.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    ONE_AT_A_TIME.lock().unwrap_or_else(|e| e.into_inner())
}

#[test]
fn bad_questions_get_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let assess = |args: &[&str]| {
        let mut all = vec!["assess"];
        all.extend(args);
        pqtls_in(&all, dir)
    };
    fails_with(
        &assess(&["--from", "x25519:p256:p256", "--to", "x25519:p256:p256"]),
        Some(1),
        &["--to 'x25519:p256:p256' is the configuration of --from"],
    );
    fails_with(&assess(&["--to", "X25519MLKEM76:mldsa65:mldsa65"]), Some(1), &["did you mean 'X25519MLKEM768'?"]);
    fails_with(&assess(&["--to", "X25519MLKEM768"]), Some(1), &["must start with group:leaf:root"]);
    fails_with(
        &assess(&["--to", "X25519MLKEM768:mldsa65:mldsa65 rtt=50ms"]),
        Some(1),
        &["'rtt' describes the deployment", "--rtt"],
    );
    fails_with(&assess(&["--to", "X25519MLKEM768:mldsa65:mldsa65 mtls"]), Some(1), &["'mtls' is not factor=value"]);
    fails_with(&assess(&["--budget", "10s"]), Some(1), &["at least 30s"]);
    fails_with(&assess(&["--rtt", "fast"]), Some(1), &["--rtt"]);
    fails_with(
        &assess(&["--to", "X25519MLKEM768:mldsa65:mldsa65", "--to", "X25519MLKEM768:mldsa65:mldsa65"]),
        Some(1),
        &["given twice"],
    );
    // Your endpoint: an https:// URL that answers, checked before anything is measured.
    fails_with(
        &assess(&["--url", "http://127.0.0.1:8080/"]),
        Some(1),
        &["--url http://127.0.0.1:8080/: not an https:// URL"],
    );
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    fails_with(
        &assess(&["--url", &format!("https://{closed}/")]),
        Some(1),
        &[&format!("cannot connect to {closed}"), "Nothing was measured"],
    );
    fails_with(&assess(&["--ca", "ca.pem"]), Some(1), &["--ca and --servername are for your endpoint", "--url"]);
    assert!(!dir.join("results").exists(), "nothing is measured for a bad question");
}

/// `--url` of a server whose chain is not the configurations' (a `pqtls serve` of x25519 only,
/// P-256 leaf under a P-384 root), trusted with `--ca` of its root: the page's "your endpoint"
/// block has the classical configuration's figures as its part's record says them, and names
/// the PQ configuration the server refused.
#[test]
fn an_assessment_with_your_endpoint_measures_its_client_side_and_names_what_it_refused() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    let serve = common::Serve::start_in(&["--stack", "openssl", "--group", "x25519", "--chain", "p256:p384"], dir);
    let root = dir.join("pki/server-p256_p384-s0/root.pem");
    let url = serve.url("1KiB");
    let args = [QUICK, &["--url", url.as_str(), "--ca", root.to_str().unwrap()]].concat();
    let out = pqtls_in(&args, dir);
    ok(&out);
    let adir = assessment_dir(&dir.join("results"));
    let endpoint = records(&adir, "endpoint");
    assert_eq!(endpoint.len(), 1, "x25519 measured; X25519MLKEM768 refused by the server: {}", text(&out));
    let r = endpoint[0].load().unwrap();
    assert_eq!(r.terminator.name, "external");
    assert_eq!(r.negotiated.group.to_ascii_lowercase(), "x25519");
    assert!(r.trust.as_deref().unwrap().starts_with(&format!("--ca {}", root.display())), "{:?}", r.trust);
    let verify = r.client_verify_cpu_ns_mean.expect("the chain was verified");
    let bytes = r.bytes.as_ref().expect("one handshake's bytes");
    let row = format!(
        "| x25519:p256:p256 | rustls | {} / {} | {:.0} | {:.0} | {} | {} | {:.1} |",
        r.negotiated.group,
        r.negotiated.sigalg,
        r.client_handshake_cpu_ns_mean / 1e3,
        verify / 1e3,
        bytes.client_to_server,
        bytes.server_to_client,
        r.handshakes_per_s
    );
    let md = std::fs::read_to_string(adir.join("report.md")).unwrap();
    let block = md.find("### Your endpoint").expect("the endpoint's block");
    assert!(md[block..].contains(&row), "{row} in:\n{}", &md[block..]);
    assert!(md[block..].contains("the leaf and root of --from/--to do not apply"), "{md}");
    let refused = md[block..].lines().find(|l| l.starts_with("| X25519MLKEM768:mldsa65:mldsa65 | rustls |")).unwrap();
    assert!(refused.contains("refused:"), "{refused}");
    let html = std::fs::read_to_string(adir.join("report.html")).unwrap();
    assert!(html.contains("<h2 id=\"endpoint\">Your endpoint</h2>"));
    // The page's other parts do not take the endpoint's records for their own.
    assert_eq!(records(&adir, "throughput").len(), 2);
}

/// Issue 39: `kill` (SIGTERM, as Slurm and Kubernetes send it) of the assessment alone stops the
/// part it runs too, cleanly (exit 130, nothing left running); SIGKILL of the assessment leaves no
/// orphan part measuring on alone (the kernel sends it SIGTERM).
#[test]
fn an_assessment_passes_an_interrupt_on_to_its_part_and_leaves_no_orphan() {
    let _one = serial();
    for signal in ["-TERM", "-KILL"] {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path();
        let mut child = pqtls_cmd(QUICK, &dir.join("pki")).current_dir(dir).spawn().unwrap();
        let pid = child.id() as i32;
        let t0 = Instant::now();
        let part = loop {
            if let Some(&p) = children_of(pid).first() {
                break p;
            }
            assert!(t0.elapsed() < Duration::from_secs(60), "no part started within 60 s");
            std::thread::sleep(Duration::from_millis(50));
        };
        // Into the part's measuring (its handler installed).
        std::thread::sleep(Duration::from_millis(1500));
        Command::new("kill").args([signal, &pid.to_string()]).status().unwrap();
        let status = child.wait().unwrap();
        if signal == "-TERM" {
            assert_eq!(status.code(), Some(130), "an interrupted assessment exits 130");
        }
        let t1 = Instant::now();
        while std::path::Path::new(&format!("/proc/{part}")).exists()
            && !std::fs::read_to_string(format!("/proc/{part}/stat")).unwrap_or_default().contains(") Z ")
        {
            // The part stops at its next handshake (milliseconds); unstopped, it measured on for
            // ~17 s more: the bound tells the two apart with room for a busy machine.
            assert!(
                t1.elapsed() < Duration::from_secs(15),
                "the part ({part}) ran on after {signal} of its assessment"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// The records of one part of an assessment.
fn records(dir: &Path, part: &str) -> Vec<Record> {
    let text = std::fs::read_to_string(dir.join(part).join("records.ndjson")).unwrap_or_default();
    text.lines().map(|l| Record::from_json_line(l).unwrap()).collect()
}

/// The one assessment directory under `results`.
fn assessment_dir(results: &Path) -> PathBuf {
    let dirs: Vec<PathBuf> = std::fs::read_dir(results)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("assess-") && p.is_dir())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs[0].clone()
}

const QUICK: &[&str] = &["assess", "--stack", "rustls", "--network", "model", "--budget", "30s", "--no-progress"];

#[test]
fn a_predicted_assessment_answers_first_with_the_records_numbers_and_resumes_after_ctrl_c() {
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // Interrupted once its first part stored records (in that part or the next): what was
    // measured is kept, the exit code says so.
    let mut child = pqtls_cmd(QUICK, &dir.join("pki")).current_dir(dir).spawn().unwrap();
    let results = dir.join("results");
    let t0 = Instant::now();
    loop {
        let measured = std::fs::read_dir(&results)
            .ok()
            .and_then(|mut d| d.next())
            .map(|d| records(&d.unwrap().path(), "insitu").len())
            .unwrap_or(0);
        if measured >= 1 {
            break;
        }
        assert!(t0.elapsed() < Duration::from_secs(120), "no in-situ record within 120 s");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Ctrl-C reaches the whole process group in a terminal: here, both processes.
    let pid = child.id() as i32;
    for p in [pid].into_iter().chain(children_of(pid)) {
        Command::new("kill").args(["-INT", &p.to_string()]).status().unwrap();
    }
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(130), "an interrupted assessment exits 130");
    let adir = assessment_dir(&results);
    let before = records(&adir, "insitu");
    assert!(!before.is_empty());

    // The same question again: it resumes, measuring only what is missing.
    let out = pqtls_in(QUICK, dir);
    let said = ok(&out) + &text(&out);
    assert_eq!(assessment_dir(&results), adir, "the same question goes to the same directory");
    let insitu = records(&adir, "insitu");
    for r in before.iter().filter(|r| !r.is_interrupted()) {
        assert!(insitu.iter().any(|x| x.id == r.id && x.result == r.result), "{} was measured again", r.id);
    }
    assert_eq!(
        insitu.iter().filter(|r| !r.is_interrupted()).count(),
        4,
        "from, to and the split's two middles (key exchange only, certificates only) on rustls"
    );
    for middle in [("X25519MLKEM768", "p256:p256"), ("x25519", "mldsa65:mldsa65")] {
        assert!(
            insitu.iter().any(|r| r.factor("group") == middle.0 && r.factor("chain") == middle.1),
            "the split's middle {middle:?} measured in situ"
        );
    }
    assert_eq!(records(&adir, "throughput").len(), 2);
    assert_eq!(records(&adir, "latency").len(), 2);
    assert!(!adir.join("transfer").exists(), "--network model: no transfer part");
    assert!(said.contains("On rustls the server spends"), "the answer's sentences: {said}");

    // The page: the answer first, predicted times labelled, every kind's part after it.
    let html = std::fs::read_to_string(adir.join("report.html")).unwrap();
    let answer = html.find("<section id=\"answer\">").expect("the answer");
    for s in [
        "<nav id=\"contents\">",
        "<section id=\"rules\">",
        "<section id=\"load-rate\">",
        "<section id=\"load-layers\">",
    ] {
        assert!(html.find(s).is_some_and(|at| at > answer), "{s} after the answer");
    }
    assert!(html.contains("predicted"), "the model's times are labelled");
    assert!(html.contains("Not run: transfers over your link"), "and why");
    // Numbers from the records: the server CPU of from and to (10 %-trimmed means, µs).
    let server = |spec: &str| {
        let group = spec.split(':').next().unwrap();
        let r = insitu.iter().find(|r| r.factor("group") == group && !r.is_interrupted()).unwrap();
        r.insitu().unwrap().server.total_cpu_ns.trimmed_mean / 1e3
    };
    let cell = format!("{:.0} → {:.0}", server("x25519"), server("X25519MLKEM768"));
    assert!(html.contains(&cell), "server CPU cell {cell} in the page");
    let md = std::fs::read_to_string(adir.join("report.md")).unwrap();
    assert!(md.starts_with("# From x25519:p256:p256 to X25519MLKEM768:mldsa65:mldsa65: what it costs"), "{md}");
    assert!(html.contains("<th>key exchange<br>rustls</th>"), "the split into key exchange and certificates");
    assert!(said.contains("the certificates make"), "the split's sentence: {said}");
    assert!(md.contains(&cell));
    // `pqtls report` of the assessment's directory gives the same page.
    let again = dir.join("again.html");
    ok(&pqtls_in(&["report", adir.to_str().unwrap(), "--html", again.to_str().unwrap()], dir));
    assert!(std::fs::read_to_string(&again).unwrap().contains(&cell));
}

/// The direct children of a process (from /proc).
fn children_of(pid: i32) -> Vec<i32> {
    let path = format!("/proc/{pid}/task/{pid}/children");
    std::fs::read_to_string(path).unwrap_or_default().split_whitespace().filter_map(|p| p.parse().ok()).collect()
}

/// Headless Chromium (installed when missing by the export crate's script; its failure is this
/// test's failure).
fn chromium() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../pqtls-export/scripts/ensure-chromium.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(out.status.success(), "headless Chromium could not be provided:\n{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

#[test]
fn as_root_the_transfers_are_measured_and_the_page_opens_in_headless_chromium() {
    let root = Command::new("id").arg("-u").output().is_ok_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        eprintln!("skipped: the network lab needs root (the predicted assessment is tested above)");
        return;
    }
    let _one = serial();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();
    // A loose RTT tolerance (as the transfer tests'): this tests what the assessment does, not
    // how quiet this machine is. It sets the lateness budget of each transfer's packets (2.5 ms):
    // a transfer that went through a longer host stall is measured again.
    let args = ["assess", "--stack", "openssl", "--network", "lab", "--budget", "30s", "--rtt-tolerance", "5ms"];
    let out = pqtls_in(&[&args[..], &["--no-progress"]].concat(), dir);
    let adir = assessment_dir(&dir.join("results"));
    if !out.status.success() && text(&out).contains("host stalls:") {
        // The machine stalled under more transfers than a run measures again: not the program's
        // fault, and not what this test can assert. The handling is: the part fails (exit 3),
        // the page answers with the model's prediction and says why.
        assert_eq!(out.status.code(), Some(3), "{}", text(&out));
        let html = std::fs::read_to_string(adir.join("report.html")).unwrap();
        assert!(html.contains("predicted") && html.contains("host stalls"), "the page says why");
        eprintln!("NOTICE: this machine stalled under too many transfers; the handling is checked:\n{}", text(&out));
        return;
    }
    let said = ok(&out) + &text(&out);
    let transfers = records(&adir, "transfer");
    assert_eq!(transfers.len(), 4, "from, to and the split's middles over the verified link: {said}");
    for t in &transfers {
        let t = t.transfer().unwrap();
        assert!(t.ttlb.p50_ns > 3 * 50_000_000, "connect, handshake and response take ≥ 3 RTTs of 50 ms");
    }
    let html = std::fs::read_to_string(adir.join("report.html")).unwrap();
    let answer = html.split("<section id=\"answer\">").nth(1).unwrap().split("</section>").next().unwrap();
    assert!(!answer.contains("predicted"), "measured, not predicted: {answer}");
    assert!(!answer.contains("Not run: transfers"), "{answer}");
    assert!(html.contains("<section id=\"transfer-ttlb\">"), "the transfers' evidence");
    // TTLB as measured: the records' medians in the answer.
    let ttlb = |group: &str| {
        let r = transfers.iter().find(|r| r.factor("group") == group).unwrap();
        r.transfer().unwrap().ttlb.p50_ns as f64 / 1e6
    };
    let cell = format!("{:.1} → {:.1}", ttlb("x25519"), ttlb("X25519MLKEM768"));
    assert!(answer.contains(&cell), "TTLB {cell} in {answer}");

    // The page in a browser: it loads with its answer and draws its charts, no console error.
    let browser = chromium();
    let out = Command::new(&browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", adir.join("report.html").display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(dom.contains("what it costs</h1>") && dom.contains(&cell), "the answer in the rendered page");
    assert!(dom.contains("data-charts=\""), "the page's script ran");
    let errors: Vec<&str> = log.lines().filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught")).collect();
    assert!(errors.is_empty(), "console: {errors:?}");
}
