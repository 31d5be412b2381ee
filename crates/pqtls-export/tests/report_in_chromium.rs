//! End to end: an experiment run into a results directory through the real pipeline (the
//! in-situ measurement over the mock stack of pqtls-testkit: drivers, attribution, statistics),
//! a report regenerated from the saved results, opened in headless Chromium:
//! it must load with no console error, draw every chart, and give a screenshot.
//!
//! Chromium is installed when missing (scripts/ensure-chromium.sh, `apt-get install -y
//! chromium`); when it cannot be installed this test FAILS with the script's message.

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::scenario::Scenario;
use pqtls_export::{csv, html, json, markdown, ReportOptions, ResultSet};
use pqtls_lab::run::{run, Plan, RunOptions};
use pqtls_lab::Insitu;
use pqtls_store::{Experiment, Store, StoreOptions};
use pqtls_testkit::MockBackend;
use std::path::{Path, PathBuf};
use std::process::Command;

const CHARTS: &[&str] = html::CHART_IDS;

fn chromium() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ensure-chromium.sh");
    let out =
        Command::new("bash").arg(&script).output().unwrap_or_else(|e| panic!("cannot run {}: {e}", script.display()));
    assert!(
        out.status.success(),
        "headless Chromium is required for this test and could not be provided:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

fn results(dir: &Path) -> ResultSet {
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/default.toml")).unwrap();
    let exp = Experiment::parse(&text, Path::new("default.toml")).unwrap();
    let mut store = Store::open(dir, &exp, &StoreOptions::default()).unwrap();
    let baseline_of = |s: &Scenario| exp.baseline.baseline_of(s);
    let scenarios = exp.scenarios();
    let plan =
        Plan { scenarios: (&scenarios).into(), settings: &exp.settings, baseline_of: &baseline_of, skipped: &[] };
    let backends: Vec<Box<dyn Backend>> =
        vec![Box::new(MockBackend::new(Stack::Openssl)), Box::new(MockBackend::new(Stack::Rustls))];
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let lab = Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, Default::default()),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    let s = run(&plan, &lab, &mut store, &RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!(s.measured, 12);
    ResultSet::load(dir).unwrap()
}

fn chromium_cmd(browser: &Path, profile: &Path) -> Command {
    let mut c = Command::new(browser);
    c.args([
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-extensions",
        "--disable-background-networking",
        "--hide-scrollbars",
    ])
    .arg(format!("--user-data-dir={}", profile.display()));
    c
}

/// Console output as Chromium logs it to stderr (`…:INFO:CONSOLE:1] "message", source: …`).
fn console_lines(log: &str) -> Vec<String> {
    log.lines().filter(|l| l.contains(":CONSOLE") || l.contains("Uncaught")).map(str::to_string).collect()
}

/// Console output of a page, via the same command line the report test uses.
fn console_of(browser: &Path, page: &str, tmp: &Path) -> Vec<String> {
    let file = tmp.join("probe.html");
    std::fs::write(&file, page).unwrap();
    let out = chromium_cmd(browser, &tmp.join("probe-profile"))
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom"])
        .arg(format!("file://{}", file.display()))
        .output()
        .expect("running chromium");
    console_lines(&String::from_utf8_lossy(&out.stderr))
}

#[test]
fn html_report_opens_in_headless_chromium_with_its_charts_and_no_console_errors() {
    let browser = chromium();
    let tmp = tempfile::tempdir().unwrap();
    // The console check must be able to fail: a page with a script error is caught.
    let caught = console_of(&browser, "<html><body><script>notDefined();</script></body></html>", tmp.path());
    assert!(caught.iter().any(|l| l.contains("notDefined")), "console errors are not visible in chromium's log");
    let set = results(&tmp.path().join("results/default"));
    assert_eq!(set.records.len(), 12);
    assert!(set.samples(&set.records[0].id).is_some(), "raw samples were kept");

    // Every format regenerates from the saved results.
    let opts = ReportOptions::default();
    let page = html::render(&set, &opts).unwrap();
    assert!(!markdown::render(&set, &opts).unwrap().is_empty());
    assert!(!csv::steps(&set).unwrap().is_empty() && !csv::summary(&set, &opts.model).unwrap().is_empty());
    assert!(json::render(&set).unwrap().starts_with('['));
    // Raw samples feed the tail chart.
    let n = set.samples(&set.records[0].id).unwrap().len();
    assert!(page.contains(&format!("{n} raw samples")), "the signing CDF should come from raw samples");
    for needle in ["src=\"http", "href=\"http", "<link ", "@import", "url(http"] {
        assert!(!page.contains(needle), "the report must be self-contained: found {needle}");
    }
    let report = tmp.path().join("report.html");
    std::fs::write(&report, &page).unwrap();
    let url = format!("file://{}", report.display());

    // The DOM after scripts ran, and the console (logged to stderr).
    let profile = tmp.path().join("profile");
    let out = chromium_cmd(&browser, &profile)
        .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(&url)
        .output()
        .expect("running chromium");
    let dom = String::from_utf8_lossy(&out.stdout);
    let log = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "chromium failed: {log}");
    let console = console_lines(&log);
    assert!(console.is_empty(), "console messages (the report logs none):\n{}", console.join("\n"));
    for id in CHARTS {
        assert!(dom.contains(&format!("<svg id=\"{id}\"")), "chart {id} missing from the DOM");
    }
    // The inline script ran and counted the charts.
    assert!(dom.contains(&format!("data-charts=\"{}\"", CHARTS.len())), "inline script did not run or miscounted");
    assert!(dom.matches("<rect").count() > 100 && dom.contains("<polyline"), "charts have no drawing");

    // A screenshot of the page.
    let shot = tmp.path().join("report.png");
    let out = chromium_cmd(&browser, &profile)
        .arg(format!("--screenshot={}", shot.display()))
        .args(["--window-size=1280,6000"])
        .arg(&url)
        .output()
        .expect("running chromium");
    assert!(out.status.success(), "chromium screenshot failed: {}", String::from_utf8_lossy(&out.stderr));
    let png = std::fs::read(&shot).expect("screenshot written");
    assert!(png.len() > 20_000 && png.starts_with(b"\x89PNG"), "screenshot is {} bytes", png.len());
    if let Ok(keep) = std::env::var("PQTLS_KEEP_REPORT") {
        let _ = std::fs::copy(&report, Path::new(&keep).join("report.html"));
        let _ = std::fs::copy(&shot, Path::new(&keep).join("report.png"));
    }
}

/// A replication page (issue 35) in headless Chromium: every study's page, made from the
/// testkit's synthetic records of its configurations, loads with no console message, gives
/// every table its caption and rows, hides no section, and gives a screenshot.
#[test]
fn replication_pages_open_in_headless_chromium_with_every_table() {
    use pqtls_export::replication::{self, Missing};
    let browser = chromium();
    let tmp = tempfile::tempdir().unwrap();
    for study in replication::studies().unwrap() {
        let insitu = study.configs("insitu").into_iter().map(|sc| pqtls_testkit::synthetic::measure(&sc, 200).record);
        let load = study.configs("load").into_iter().map(|sc| pqtls_testkit::synthetic::load::load(&sc, false));
        let transfer =
            study.configs("transfer").into_iter().map(|sc| pqtls_testkit::synthetic::transfer::transfer(&sc));
        let set = ResultSet::from_records(insitu.chain(load).chain(transfer).collect());
        let tables = replication::compare(&study, &set, &Missing { kinds_not_run: &[] });
        let how = replication::time_capped(&set);
        let page = replication::html(&study, &tables, &how);
        let file = tmp.path().join(format!("{}.html", study.name));
        std::fs::write(&file, &page).unwrap();
        let out = chromium_cmd(&browser, &tmp.path().join(format!("{}-profile", study.name)))
            .args(["--enable-logging=stderr", "--v=0", "--virtual-time-budget=2000", "--dump-dom"])
            .arg(format!("file://{}", file.display()))
            .output()
            .unwrap();
        let (dom, log) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(out.status.success(), "{}: chromium failed: {log}", study.name);
        assert!(console_lines(&log).is_empty(), "{}: console messages:\n{log}", study.name);
        assert_eq!(dom.matches("<caption>").count(), study.tables.len(), "{}: a caption per table", study.name);
        assert_eq!(dom.matches("<section").count(), study.tables.len(), "{}: a section per table", study.name);
        assert!(!dom.contains("<tbody>\n</tbody>"), "{}: an empty table", study.name);
        let rows: usize = tables.iter().map(|t| t.lines.len()).sum();
        assert_eq!(dom.matches("<tr class=").count(), rows, "{}: every line of every table", study.name);
        if study.name == "aws-mtls-ttlb" {
            let shot = tmp.path().join("replication.png");
            let out = chromium_cmd(&browser, &tmp.path().join("shot-profile"))
                .args(["--window-size=1280,800", &format!("--screenshot={}", shot.display())])
                .arg(format!("file://{}", file.display()))
                .output()
                .unwrap();
            assert!(out.status.success(), "chromium screenshot failed: {}", String::from_utf8_lossy(&out.stderr));
            let png = std::fs::read(&shot).expect("screenshot written");
            assert!(png.len() > 10_000 && png.starts_with(b"\x89PNG"), "screenshot is {} bytes", png.len());
        }
    }
}
