//! A results directory as it looks after an upgrade: a schema-1 line written by the previous
//! version next to schema-2 records, one of them with a factor (transport) away from its
//! default. Every exporter renders it; the factor becomes a column without any exporter
//! naming it.

use pqtls_core::config::ConfigDesc;
use pqtls_core::record::{ConfigRecord, Record, SCHEMA_V1};
use pqtls_core::scenario::Scenario;
use pqtls_export::{exporter, exporters, ReportOptions, ResultSet};
use pqtls_testkit::synthetic;

fn scenario(given: &[(&str, &str)]) -> Scenario {
    Scenario::new(given.iter().copied()).unwrap()
}

/// The line the previous version wrote for `sc` (a flat `ConfigRecord` with `"schema":1`).
fn schema_1_line(sc: &Scenario) -> String {
    let r = synthetic::measure(sc, 50).record;
    let res = r.insitu().unwrap().clone();
    let old = ConfigRecord {
        schema: SCHEMA_V1,
        label: r.label.clone(),
        config: ConfigDesc::from(&sc.handshake),
        negotiated: res.negotiated,
        client: res.client,
        server: res.server,
        total_cpu_ns: res.total_cpu_ns,
        bytes: res.bytes,
        loops: res.loops,
        rate: res.rate,
        baseline: None,
        env: r.env,
        measured_at: 0,
    };
    let line = serde_json::to_string(&old).unwrap();
    assert!(line.contains("\"schema\":1") && !line.contains("\"scenario\""), "{line}");
    line
}

fn mixed_set(dir: &std::path::Path) -> (ResultSet, String) {
    let old = scenario(&[("group", "secp256r1"), ("chain", "p256:p256")]);
    let new: Vec<Record> = [
        scenario(&[("group", "x25519"), ("chain", "p256:p256")]),
        scenario(&[("group", "x25519"), ("chain", "p256:p256"), ("transport", "tcp")]),
        scenario(&[("stack", "rustls"), ("group", "X25519MLKEM768"), ("chain", "mldsa65:mldsa65")]),
    ]
    .iter()
    .map(|s| synthetic::measure(s, 50).record)
    .collect();
    let mut text = schema_1_line(&old) + "\n";
    for r in &new {
        text += &serde_json::to_string(r).unwrap();
        text += "\n";
    }
    std::fs::write(dir.join("records.ndjson"), text).unwrap();
    let set = ResultSet::load(dir).unwrap();
    (set, old.label())
}

#[test]
fn a_set_mixing_schema_1_and_schema_2_records_renders_in_every_exporter() {
    let tmp = tempfile::tempdir().unwrap();
    let (set, old_label) = mixed_set(tmp.path());
    assert_eq!(set.records.len(), 4);
    assert!(set.records.iter().all(|r| r.schema == 2), "schema-1 lines are upgraded when read");
    let names: Vec<&str> = exporters().iter().map(|e| e.name()).collect();
    assert_eq!(names, ["html", "markdown", "csv", "summary-csv", "load-csv", "transfer-csv", "resident-csv", "json"]);
    let opts = ReportOptions::default();
    let load_csv = exporter("load-csv").unwrap();
    assert_eq!(load_csv.notices(&set), ["4 insitu records left out: the load-csv export draws load records only"]);
    for e in exporters().iter().filter(|e| !["load-csv", "transfer-csv", "resident-csv"].contains(&e.name())) {
        let out = e.render(&set, &opts).unwrap_or_else(|err| panic!("{}: {err}", e.name()));
        assert!(out.contains(&old_label), "{}: the schema-1 record ({old_label}) is in the output", e.name());
        assert!(out.contains("x25519 p256:p256 over tcp"), "{}: the tcp record is in the output", e.name());
        assert!(e.notices(&set).is_empty(), "{}: only in-situ records, nothing left out", e.name());
        assert!(!e.describe().is_empty());
    }
    assert!(exporter("pdf").is_none());
}

#[test]
fn a_factor_away_from_its_default_is_a_column_in_csv_markdown_and_html() {
    let tmp = tempfile::tempdir().unwrap();
    let (set, _) = mixed_set(tmp.path());
    let opts = ReportOptions::default();
    let render = |name: &str| exporter(name).unwrap().render(&set, &opts).unwrap();

    let csv = render("csv");
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    let col = header.iter().position(|h| *h == "transport").expect("a transport column in the steps CSV");
    let values: Vec<&str> = csv.lines().skip(1).map(|l| l.split(',').nth(col).unwrap()).collect();
    assert!(values.contains(&"tcp") && values.contains(&"memory"), "{values:?}");
    // Factors at their default everywhere are not columns.
    for at_default in ["clock", "cipher", "resumption", "rtt"] {
        assert!(!header.contains(&at_default), "{at_default} is a column: {header:?}");
    }
    let summary = render("summary-csv");
    assert!(summary.lines().next().unwrap().split(',').any(|h| h == "transport"));

    let md = render("markdown");
    assert!(md.contains("| configuration | stack | transport | client p15 |"), "{md}");
    assert!(md.contains("| x25519 p256:p256 over tcp | openssl | tcp |"), "{md}");

    let html = render("html");
    assert!(html.contains("<th>configuration</th><th>stack</th><th>transport</th>"));
    assert!(html.contains("<td>x25519 p256:p256 over tcp</td><td>openssl</td><td>tcp</td>"));
}
