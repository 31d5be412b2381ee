//! The in-situ matrix (2420 configurations): every format renders, and charts stay readable
//! (the group × chain combinations only) while the tables list everything.

use pqtls_export::{csv, html, markdown, ReportOptions, ResultSet};
use pqtls_store::Experiment;
use pqtls_testkit::synthetic;
use std::path::Path;
use std::time::Instant;

#[test]
fn in_situ_matrix_report_renders_with_charts_limited_to_group_by_chain() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments/in-situ.toml");
    let exp = Experiment::load(&path).unwrap();
    let records: Vec<_> = exp.scenarios().iter().map(|c| synthetic::measure(c, 20).record).collect();
    assert_eq!(records.len(), 2420);
    let set = ResultSet::from_records(records);
    let opts = ReportOptions::default();
    let t = Instant::now();
    let page = html::render(&set, &opts).unwrap();
    let md = markdown::render(&set, &opts).unwrap();
    let steps = csv::steps(&set).unwrap();
    let summary = csv::summary(&set, &opts.model).unwrap();
    eprintln!("rendered 2420 records in {:.2} s; HTML {} KB", t.elapsed().as_secs_f64(), page.len() / 1024);
    assert!(page.contains("charts show 121 of 2420 configurations"), "caption of the limited charts");
    if let Ok(keep) = std::env::var("PQTLS_KEEP_REPORT") {
        let _ = std::fs::write(Path::new(&keep).join("in-situ.html"), &page);
    }
    assert_eq!(summary.lines().count(), 2421);
    assert!(steps.lines().count() > 2420 * 10);
    assert!(md.matches("\n| ").count() > 3 * 2420);
    // Rules of thumb: 10 other groups and 10 other chains against x25519 / p256:p256.
    assert_eq!(md.matches(" adds ").count() + md.matches(" saves ").count(), 10);
    assert_eq!(md.matches(" chain multiplies server CPU by ").count(), 10);
}
