//! Resident records (memory per idle connection) in the reports, on synthetic records: every
//! exporter draws them, the per-connection figures and connections per GiB equal the hand-made
//! ones, the rules of thumb compare each chain with P-256 on the same terminator and stack, and
//! CSV has one row per record and count held.

use pqtls_core::resident::GIB_BYTES;
use pqtls_export::{exporter, exporters, ReportOptions, ResidentView, ResultSet};
use pqtls_testkit::synthetic::resident::{heap_per_connection_bytes, resident, scenario, study, HELD};

#[test]
fn per_connection_figures_are_the_made_up_ones() {
    let sc = scenario("openssl", "pqtls", "X25519MLKEM768", "mldsa65:mldsa65", false);
    let r = resident(&sc);
    let v = ResidentView::of(&r).unwrap();
    let p = v.per_connection().unwrap();
    let per = heap_per_connection_bytes(&sc) as f64;
    assert_eq!(p.connections, HELD[1]);
    assert_eq!(p.heap_bytes, Some(per));
    assert_eq!(p.heap_allocations, Some(5.0));
    assert_eq!(p.per_gib(), Some(GIB_BYTES / per));
    // nginx: no heap, the PSS per connection is the figure.
    let n = resident(&scenario("openssl", "nginx", "x25519", "p256:p256", false));
    let pn = ResidentView::of(&n).unwrap().per_connection().unwrap().clone();
    assert_eq!((pn.heap_bytes, pn.source()), (None, "pss"));
}

#[test]
fn rules_of_thumb_compare_each_chain_with_p256_on_the_same_terminator() {
    let records = study();
    let views: Vec<ResidentView> = records.iter().filter_map(ResidentView::of).collect();
    let rules = pqtls_export::analysis::resident::chain_rules(&views);
    // 3 terminators × 2 (full, resumed) × 2 chains against p256.
    assert_eq!(rules.len(), 12);
    let r = rules
        .iter()
        .find(|r| r.terminator == "nginx" && r.chain == "mldsa65:mldsa65" && !r.resumed)
        .expect("nginx ML-DSA-65");
    let base = heap_per_connection_bytes(&scenario("openssl", "nginx", "x25519", "p256:p256", false)) as f64;
    let mine =
        heap_per_connection_bytes(&scenario("openssl", "nginx", "X25519MLKEM768", "mldsa65:mldsa65", false)) as f64;
    // PSS = 2 × the made-up heap.
    assert_eq!(r.added_bytes(), 2.0 * (mine - base));
    assert!(r.sentence().starts_with("on nginx, a mldsa65:mldsa65 chain (X25519MLKEM768) adds"), "{}", r.sentence());
}

#[test]
fn every_exporter_draws_resident_records() {
    let set = ResultSet::from_records(study());
    for e in exporters() {
        let out = e.render(&set, &ReportOptions::default()).unwrap();
        if e.kinds().contains(&pqtls_core::factor::Kind::Resident) {
            assert!(!out.is_empty(), "{}", e.name());
        }
    }
    let md = exporter("markdown").unwrap().render(&set, &ReportOptions::default()).unwrap();
    assert!(md.contains("## Resident: memory per idle connection"), "{md}");
    assert!(md.contains("### Rules of thumb per chain") && md.contains("pqtls serve (rustls)"), "{md}");
    let html = exporter("html").unwrap().render(&set, &ReportOptions::default()).unwrap();
    assert!(html.contains("<section id=\"resident\">"));
    let csv = exporter("resident-csv").unwrap().render(&set, &ReportOptions::default()).unwrap();
    // A header, then one row per record and count held.
    assert_eq!(csv.lines().count(), 1 + study().len() * HELD.len());
    assert!(csv.lines().next().unwrap().contains("connections_per_gib"));
}

#[test]
fn the_capacity_model_gains_connections_per_gib_from_resident_records_of_the_same_configuration() {
    use pqtls_core::scenario::Scenario;
    let insitu = |stack: &str, group: &str, chain: &str| {
        let sc = Scenario::new([("stack", stack), ("group", group), ("chain", chain)]).unwrap();
        pqtls_testkit::synthetic::measure(&sc, 5).record
    };
    let mut records = vec![
        insitu("rustls", "X25519MLKEM768", "mldsa65:mldsa65"),
        // No resident record holds this one: its cells say so.
        insitu("rustls", "MLKEM512", "mldsa44:mldsa44"),
    ];
    let md = exporter("markdown").unwrap().render(&ResultSet::from_records(records.clone()), &ReportOptions::default());
    assert!(!md.unwrap().contains("idle conns per GiB"), "no resident records: no column");
    records.extend(study());
    let set = ResultSet::from_records(records);
    let per =
        heap_per_connection_bytes(&scenario("rustls", "pqtls", "X25519MLKEM768", "mldsa65:mldsa65", false)) as f64;
    let md = exporter("markdown").unwrap().render(&set, &ReportOptions::default()).unwrap();
    let capacity = &md[md.find("## Capacity").expect("capacity section")..];
    // The table is split for a Markdown viewer (its parts each start with the configuration):
    // the resident columns are in the last part.
    let head =
        capacity.split("\n## ").next().unwrap().lines().filter(|l| l.starts_with("| configuration")).last().unwrap();
    assert!(head.ends_with("| idle KiB/conn (pqtls serve heap) | idle conns per GiB |"), "{head}");
    let section = capacity.split("\n## ").next().unwrap();
    let row =
        |label: &str| section.lines().filter(|l| l.starts_with(&format!("| {label}"))).last().unwrap().to_string();
    let pq = row("X25519MLKEM768");
    let cells: Vec<&str> = pq.trim_matches('|').split('|').map(str::trim).collect();
    // The full handshake's record (resumption false), not the resumed one: half the bytes.
    assert_eq!(cells[cells.len() - 2], format!("{:.1}", per / 1024.0), "{pq}");
    assert_eq!(cells[cells.len() - 1], pqtls_export::tables::rate(GIB_BYTES / per), "{pq}");
    let other = row("MLKEM512");
    assert!(other.ends_with("| – | – |"), "{other}");
    let html = exporter("html").unwrap().render(&set, &ReportOptions::default()).unwrap();
    assert!(html.contains("idle conns per GiB"));
}
