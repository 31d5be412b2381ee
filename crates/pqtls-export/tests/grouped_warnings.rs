//! Issue 20: a report's first screen says a warning shared by many configurations once, with
//! the configurations it concerns (and the range of its numbers), not once per configuration.

use pqtls_core::record::{Noise, Outcome, Record};
use pqtls_core::scenario::Scenario;
use pqtls_export::{exporter, ReportOptions, ResultSet};
use pqtls_testkit::synthetic;

/// A synthetic in-situ record measured while other processes used `others` of the CPU.
fn busy(given: &[(&str, &str)], others: f64) -> Record {
    let mut r = synthetic::measure(&Scenario::new(given.iter().copied()).unwrap(), 30).record;
    let Outcome::Insitu(i) = &mut r.result else { panic!("an in-situ record") };
    i.noise = Some(Noise { others_fraction: Some(others), cpus: 2, ..Noise::default() });
    r
}

fn configurations() -> Vec<Vec<(&'static str, &'static str)>> {
    ["x25519", "secp256r1", "X25519MLKEM768", "MLKEM768"]
        .iter()
        .flat_map(|g| ["p256:p256", "mldsa65:mldsa65", "ed25519:ed25519"].map(|c| vec![("group", *g), ("chain", c)]))
        .collect()
}

fn warning_lines(text: &str) -> Vec<&str> {
    text.lines().filter(|l| l.contains("Warning:")).collect()
}

#[test]
fn twelve_configurations_measured_alike_give_one_line_naming_all_of_them() {
    let records: Vec<Record> = configurations().iter().map(|g| busy(g, 0.30)).collect();
    let labels: Vec<String> = records.iter().map(|r| r.label.clone()).collect();
    let set = ResultSet::from_records(records);
    let opts = ReportOptions::default();
    // The HTML report escapes the apostrophe.
    for (name, apostrophe) in [("html", "&#39;"), ("markdown", "'")] {
        let out = exporter(name).unwrap().render(&set, &opts).unwrap();
        let lines = warning_lines(&out);
        assert_eq!(lines.len(), 1, "{name}: {lines:#?}");
        let said = format!(
            "Warning: other processes used 30 % of the machine{apostrophe}s CPU time while it was measured — 12 \
             configurations: "
        );
        assert!(lines[0].contains(&said), "{name}: {}", lines[0]);
        for l in &labels {
            assert!(lines[0].contains(&format!("{l} (openssl)")), "{name}: {l} named in {}", lines[0]);
        }
    }
}

#[test]
fn numbers_that_differ_group_as_a_range_and_other_warnings_stay_apart() {
    let c = configurations();
    let mut records = vec![busy(&c[0], 0.30), busy(&c[1], 0.34), busy(&c[2], 0.31)];
    // Another kind of warning: the hypervisor stole CPU time from the fourth.
    let mut stolen = busy(&c[3], 0.02);
    if let Outcome::Insitu(i) = &mut stolen.result {
        i.noise.as_mut().unwrap().steal_fraction = Some(0.05);
    }
    records.push(stolen);
    let names: Vec<String> = records.iter().map(|r| format!("{} (openssl)", r.label)).collect();
    let set = ResultSet::from_records(records);
    let md = exporter("markdown").unwrap().render(&set, &ReportOptions::default()).unwrap();
    assert_eq!(
        warning_lines(&md),
        [
            format!(
                "> Warning: other processes used 30–34 % of the machine's CPU time while it was measured — 3 \
                 configurations: {}, {}, {}",
                names[0], names[1], names[2]
            ),
            format!("> Warning: {}: the hypervisor stole 5 % of the CPU time", names[3]),
        ]
    );
    let html = exporter("html").unwrap().render(&set, &ReportOptions::default()).unwrap();
    let lines = warning_lines(&html);
    assert_eq!(lines.len(), 2, "{lines:#?}");
    assert!(lines[0].starts_with("<p class=\"notice\">Warning: other processes used 30–34 % of the machine"));
    assert!(lines[1].contains("the hypervisor stole 5 % of the CPU time"));
}
