//! The five studies' published figures (replications/*.toml): they parse, every table and cell
//! is there, the byte cells agree with the catalogue's sizes where they should (or carry their
//! cause), and a replication over synthetic records produces its page with every cell on it.

use pqtls_core::catalogue::{group, sig_alg};
use pqtls_export::replication::{self, number, Comparison, Missing, Study, Verdict};
use pqtls_export::ResultSet;

fn study(name: &str) -> Study {
    replication::study(name).unwrap()
}

/// The published number of `column` in `row` of table `table`.
fn cell(s: &Study, table: &str, row: &str, column: &str) -> f64 {
    let t = s.tables.iter().find(|t| t.id == table).unwrap_or_else(|| panic!("table {table}"));
    let c = t.columns.iter().position(|c| c == column).unwrap_or_else(|| panic!("column {column}"));
    let r = t.rows.iter().find(|r| r.label == row).unwrap_or_else(|| panic!("row {row}"));
    number(&r.cells[c], &s.number_format).unwrap_or_else(|| panic!("{table}/{row}/{column}: '{}'", r.cells[c]))
}

#[test]
fn every_study_parses_with_every_table_and_cell() {
    let all = replication::studies().unwrap();
    let names: Vec<&str> = all.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ibm-in-situ", "pcsi-throughput", "rustls-pq-handshake", "layered-latency", "aws-mtls-ttlb"]);
    let ids: Vec<&str> = all.iter().map(|s| s.id.as_str()).collect();
    assert_eq!(ids, ["000", "001", "002", "003", "004"], "one file per study of ../shared/reference");
    // The numbered tables of each study, by id, with their rows × columns as printed.
    let expected: &[(&str, &[(&str, usize, usize)])] = &[
        (
            "ibm-in-situ",
            &[("latency-parent-not-verified", 7, 9), ("latency-parent-verified", 7, 9), ("data-volume", 13, 11)],
        ),
        ("pcsi-throughput", &[("table-3", 24, 3), ("table-4", 6, 4), ("table-5", 8, 4)]),
    ];
    for (name, tables) in expected {
        let s = all.iter().find(|s| s.name == *name).unwrap();
        for (id, rows, cols) in *tables {
            let t = s.tables.iter().find(|t| t.id == *id).unwrap_or_else(|| panic!("{name}: table {id}"));
            assert_eq!((t.rows.len(), t.columns.len()), (*rows, *cols), "{name}/{id}");
        }
    }
    // Every study quotes figures in its text: each has its text table.
    for s in &all {
        assert!(s.tables.iter().any(|t| t.comparison == Comparison::Text), "{}: its text figures", s.name);
        for t in &s.tables {
            assert!(!t.rows.is_empty(), "{}/{}: no empty table", s.name, t.id);
            for r in &t.rows {
                for (c, v) in t.columns.iter().zip(&r.cells) {
                    // A measured table has no published cell (its figures are graphs the source
                    // text does not hold); elsewhere the only empty cell is a value the source
                    // text lacks (study 001, Table 3).
                    if t.comparison == Comparison::Measured {
                        assert!(v.is_empty(), "{}/{}: a measured table prints nothing", s.name, t.id);
                    } else if v.is_empty() {
                        assert_eq!(
                            (s.name.as_str(), t.id.as_str(), c.as_str()),
                            ("pcsi-throughput", "table-3", "msg/sec 4 threads")
                        );
                    } else if t.comparison != Comparison::Text && !v.starts_with("N/A") {
                        assert!(
                            number(v, &s.number_format).is_some(),
                            "{}/{}/{}/{c}: '{v}' is no number",
                            s.name,
                            t.id,
                            r.label
                        );
                    }
                }
            }
        }
    }
    let ibm = study("ibm-in-situ");
    assert_eq!(
        ibm.tables
            .iter()
            .filter(|t| t.comparison != Comparison::Text)
            .map(|t| t.rows.len() * t.columns.len())
            .sum::<usize>(),
        63 + 63 + 143
    );
    assert_eq!(number("1.194", "nl"), Some(1194.0));
    assert_eq!(number("54,8", "nl"), Some(54.8));
    assert_eq!(number("1'000", "en"), None.or(Some(1000.0)));
    assert!(replication::study("nope").unwrap_err().to_string().contains("ibm-in-situ (000)"));
    assert_eq!(replication::study("002").unwrap().name, "rustls-pq-handshake");
}

/// Study 000's data-volume table: the differences between groups of one chain are the
/// catalogue's key-share differences (client: the client shares, 8 B less when leaving an
/// elliptic-curve group, whose ClientHello carries 8 B more — pqtls' does the same; server:
/// the server shares, exact for ML-DSA chains, ±2 B with P-256's variable-size signature).
#[test]
fn ibm_byte_cells_agree_with_the_catalogue() {
    let s = study("ibm-in-situ");
    let t = "data-volume";
    let c2s = |row: &str| cell(&s, t, row, "Client -> Server");
    let s2c = |row: &str| cell(&s, t, row, "Server -> Client");
    let share = |g: &str| group(g).unwrap().client_share_bytes() as f64;
    let x = c2s("x25519 P-256:P-256 (1)");
    for g in ["MLKEM512", "MLKEM768", "X25519MLKEM768", "MLKEM1024"] {
        assert_eq!(c2s(&format!("{g} P-256:P-256 (1)")) - x, share(g) - share("x25519") - 8.0, "{g}");
    }
    let server = |g: &str| group(g).unwrap().server_share_bytes() as f64;
    assert_eq!(
        s2c("X25519MLKEM768 MLDSA65:MLDSA65 (1)") - s2c("MLKEM768 MLDSA65:MLDSA65 (1)"),
        server("X25519MLKEM768") - server("MLKEM768")
    );
    for g in ["MLKEM512", "MLKEM768", "X25519MLKEM768", "MLKEM1024"] {
        let d = s2c(&format!("{g} P-256:P-256 (1)")) - s2c("x25519 P-256:P-256 (1)");
        assert!((d - (server(g) - server("x25519"))).abs() <= 2.0, "{g}: {d}");
    }
    // The capacity columns follow from the bytes by the study's convention, as printed.
    for r in &s.tables.iter().find(|x| x.id == t).unwrap().rows {
        let b = s2c(&r.label) as u64;
        let printed = cell(&s, t, &r.label, "10 Gbps [Msess/s]");
        let ours = replication::ibm_sessions_per_s(b, 10.0) / 1e6;
        assert!((ours - printed).abs() <= 0.005 + 1e-9, "{}: {ours} vs {printed}", r.label);
        let us = replication::ibm_transport_s(c2s(&r.label) as u64 + b, 1.0) * 1e6;
        assert!((us - cell(&s, t, &r.label, "1 Gbps [us]")).abs() <= 0.005 + 1e-9, "{}: {us}", r.label);
    }
}

/// Study 001's message sizes: ServerHello = 90 B + the server's share, CertificateVerify = 8 B
/// + the signature (fixed-size ones), ClientHello = 394 B + the client's share except where
/// its client padded to 512 B (x25519: 426 B unpadded).
#[test]
fn pcsi_message_cells_agree_with_the_catalogue() {
    let s = study("pcsi-throughput");
    for (row, g) in [
        ("mlkem512 ED25519", "MLKEM512"),
        ("frodo640aes ED25519", "frodo640aes"),
        ("x25519_mlkem512 ED25519", "x25519_mlkem512"),
        ("x25519_frodo640aes ED25519", "x25519_frodo640aes"),
    ] {
        let g = group(g).unwrap();
        assert_eq!(cell(&s, "table-4", row, "Server hello"), 90.0 + g.server_share_bytes() as f64, "{row}");
        assert_eq!(cell(&s, "table-4", row, "Client hello"), 394.0 + g.client_share_bytes() as f64, "{row}");
    }
    assert_eq!(cell(&s, "table-4", "x25519 ED25519", "Server hello"), 90.0 + 32.0);
    assert_eq!(cell(&s, "table-4", "x25519 ED25519", "Client hello"), 512.0, "padded: 394 + 32 = 426 unpadded");
    for (row, alg) in [
        ("x25519 ED25519", "ed25519"),
        ("x25519 mldsa44", "mldsa44"),
        ("x25519 sphincssha2 128ssimple", "slhdsa-sha2-128s"),
        ("x25519 sphincssha2 128fsimple", "slhdsa-sha2-128f"),
        ("x25519 sphincsshake 128fsimple", "slhdsa-shake-128f"),
    ] {
        assert_eq!(
            cell(&s, "table-5", row, "CERT verify"),
            8.0 + sig_alg(alg).unwrap().signature_bytes as f64,
            "{row}"
        );
    }
}

/// A replication over synthetic records (the testkit's made-up measurements, sizes from the
/// catalogue) of every configuration study 000 names produces its page: every table, every
/// row and cell, each with a verdict and, when it differs or is not measured, a cause.
#[test]
fn a_replication_on_synthetic_records_produces_its_page() {
    for name in ["ibm-in-situ", "rustls-pq-handshake", "pcsi-throughput", "aws-mtls-ttlb", "layered-latency"] {
        let s = study(name);
        let records: Vec<_> =
            s.configs("insitu").iter().map(|sc| pqtls_testkit::synthetic::measure(sc, 200).record).collect();
        if name == "ibm-in-situ" {
            assert!(records.len() >= 25, "{} configurations", records.len());
        }
        let set = ResultSet::from_records(records);
        let not_run = [("load", "the load part is not run in this test".to_string())];
        let tables = replication::compare(&s, &set, &Missing { kinds_not_run: &not_run });
        assert_eq!(tables.len(), s.tables.len());
        for (t, p) in s.tables.iter().zip(&tables) {
            let cells = if t.comparison == Comparison::Text { t.rows.len() } else { t.rows.len() * t.columns.len() };
            assert_eq!(p.lines.len(), cells, "{name}/{}: every cell has its line", t.id);
            for l in &p.lines {
                if matches!(l.verdict, Verdict::Differs | Verdict::NotMeasured) {
                    assert!(
                        !l.cause.is_empty(),
                        "{name}/{}/{}/{}: a difference without its cause",
                        t.id,
                        l.row,
                        l.column
                    );
                }
            }
        }
        let how = vec!["pqtls: synthetic records (test)".to_string()];
        let md = replication::markdown(&s, &tables, &how);
        let html = replication::html(&s, &tables, &how);
        for t in &s.tables {
            assert!(md.contains(&format!("## {}", t.id)) && html.contains(&format!("<h2>{}</h2>", t.id)));
            for r in &t.rows {
                let label = r.label.replace('|', "\\|");
                assert!(md.contains(&label), "{name}: row '{}' on the page", r.label);
            }
        }
        if name == "ibm-in-situ" {
            // Bytes are the catalogue's in the synthetic records: measured, compared, judged.
            let bytes = tables.iter().find(|t| t.id == "data-volume").unwrap();
            assert!(bytes.lines.iter().all(|l| l.verdict != Verdict::NotMeasured), "every byte cell measured");
            let ratio = tables.iter().find(|t| t.id == "latency-parent-verified").unwrap();
            assert!(
                ratio
                    .lines
                    .iter()
                    .all(|l| l.comparison.starts_with('×') || l.comparison.starts_with("the baseline row")),
                "ratios to the baseline row"
            );
            assert_eq!(
                ratio.lines.iter().filter(|l| l.verdict == Verdict::Shown).count(),
                9,
                "the baseline row's 9 cells"
            );
        }
        if name == "aws-mtls-ttlb" {
            // Plain and mutual TLS at the same points: each mTLS row against its TLS row, the
            // bytes a difference, the times a ratio; the client's chain adds to client→server.
            let t = tables.iter().find(|t| t.id == "tls-vs-mtls").unwrap();
            assert!(t.lines.iter().all(|l| l.verdict == Verdict::Shown), "shown, not judged");
            let line = |row: &str, col: &str| {
                t.lines.iter().find(|l| l.row.starts_with(row) && l.column.starts_with(col)).unwrap().clone()
            };
            let c2s = line("mTLS 1.3, PQ (the client", "client→server");
            assert!(c2s.comparison.starts_with('+') && c2s.comparison.contains("B over 'TLS 1.3, PQ"), "{c2s:?}");
            let cpu = line("mTLS 1.3, PQ (the client", "server CPU");
            assert!(cpu.comparison.starts_with('×') && cpu.comparison.contains("over 'TLS 1.3, PQ"), "{cpu:?}");
            assert_eq!(line("TLS 1.3, classical", "client→server").comparison, "the reference of its comparisons");
        }
        if name == "pcsi-throughput" {
            let t3 = tables.iter().find(|t| t.id == "table-3").unwrap();
            assert!(t3.lines.iter().all(|l| l.verdict == Verdict::NotMeasured && l.cause.contains("load part")));
        }
    }
}
