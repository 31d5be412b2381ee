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
        let mut records: Vec<_> =
            s.configs("insitu").iter().map(|sc| pqtls_testkit::synthetic::measure(sc, 200).record).collect();
        records.extend(s.configs("load").iter().map(|sc| pqtls_testkit::synthetic::load::load(sc, false)));
        records.extend(s.configs("transfer").iter().map(pqtls_testkit::synthetic::transfer::transfer));
        if name == "ibm-in-situ" {
            assert!(records.len() >= 25, "{} configurations", records.len());
        }
        let set = ResultSet::from_records(records);
        let tables = replication::compare(&s, &set, &Missing { kinds_not_run: &[] });
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
            // The TTLB graphs' levels: every cell has pqtls' median from the transfer record of
            // its row at its column's response size, each row in ms over the row it names.
            let t = tables.iter().find(|t| t.id == "ttlb").unwrap();
            assert_eq!(t.lines.len(), 8 * 3);
            for l in &t.lines {
                assert!(l.pqtls.parse::<f64>().is_ok_and(|v| v > 100.0), "50 ms RTT, several round trips: {l:?}");
                assert_eq!(l.verdict, Verdict::Shown, "{l:?}");
                assert!(l.comparison.contains(" transfers"), "{l:?}");
                if l.row != "TLS 1.3, classical, initcwnd 10" {
                    assert!(l.comparison.contains(" ms (×") && l.comparison.contains(" over '"), "{l:?}");
                }
            }
            let big = t.lines.iter().find(|l| l.row == "mTLS 1.3, PQ, initcwnd 10" && l.column.contains("150 KB"));
            let small =
                t.lines.iter().find(|l| l.row == "mTLS 1.3, PQ, initcwnd 10" && l.column.contains("TTLB p50, 50"));
            let ms = |l: Option<&replication::Line>| l.unwrap().pqtls.parse::<f64>().unwrap();
            assert!(ms(big) > ms(small), "150 KB takes longer than 50 KB");
            // The text's "~ 3.2 ms overhead (mTLS)": pqtls' PQ − classical mTLS at the large
            // window, in ms, shown beside the quote (a graph's figure on another network).
            let text = tables.iter().find(|t| t.id == "text").unwrap();
            let quote = text.lines.iter().find(|l| l.row.starts_with("~ 3.2 ms overhead")).unwrap();
            assert_eq!(quote.verdict, Verdict::Shown, "{quote:?}");
            assert!(quote.pqtls.parse::<f64>().is_ok() && quote.comparison.contains("quoted 3.20"), "{quote:?}");
            for level in ["50KB", "150KB"] {
                let l = text.lines.iter().find(|l| l.published == level).unwrap();
                assert!(l.cause.contains("table ttlb"), "{l:?}");
            }
        }
        if name == "pcsi-throughput" {
            // Every cell of Table 3 has pqtls' figure from the load record at its thread count:
            // a ratio to the baseline row's, judged, or shown where the study prints no number —
            // but for the row the study marks N/A*, which is not run and says why.
            let t3 = tables.iter().find(|t| t.id == "table-3").unwrap();
            assert_eq!(t3.lines.len(), 24 * 3);
            for l in &t3.lines {
                if l.published == "N/A*" {
                    assert_eq!((l.pqtls.as_str(), l.verdict), ("—", Verdict::NotMeasured), "{l:?}");
                    assert!(l.cause.contains("not available for config in OpenSSL"), "{l:?}");
                    continue;
                }
                assert!(l.pqtls.parse::<f64>().is_ok_and(|v| v > 0.0), "{l:?}");
                assert_ne!(l.verdict, Verdict::NotMeasured, "{l:?}");
                let is_base = l.row == "2 x25519 ed25519";
                let unprinted = l.published.starts_with("N/A") || l.published.starts_with("(no value");
                assert!(is_base || unprinted || l.comparison.starts_with('×'), "{l:?}");
                if l.verdict == Verdict::Differs {
                    assert!(l.cause.contains("pqtls serve") && l.cause.contains("client thread"), "{l:?}");
                }
            }
            // The quoted rates' ratios too (every text row on conn_per_s@N is measured).
            let text = tables.iter().find(|t| t.id == "text").unwrap();
            let quoted: Vec<_> = s.tables.iter().find(|t| t.id == "text").unwrap().rows.iter().collect();
            for (r, l) in quoted.iter().zip(&text.lines) {
                if r.of.as_ref().is_some_and(|o| o.q.starts_with("conn_per_s@")) {
                    assert!(matches!(l.verdict, Verdict::Agrees | Verdict::Differs), "{l:?}");
                    assert!(l.comparison.contains("pqtls "), "{l:?}");
                }
            }
        }
    }
}

/// A load quantity names its thread count: `conn_per_s@N` of a row's configuration is the load
/// point at N threads with the study's load settings (`part_defaults`); an in-situ quantity of
/// the same configuration is its plain scenario; each thread count is a configuration to run.
#[test]
fn a_rate_at_n_threads_is_the_rows_configuration_at_n_threads() {
    let s = study("pcsi-throughput");
    let config = "group=MLKEM512 chain=mldsa44:mldsa44";
    for n in ["1", "4", "8"] {
        let p = s.point(config, &format!("conn_per_s@{n}")).unwrap();
        assert_eq!((p.value("threads"), p.value("response_size"), p.value("keep_alive")), (n, "1KiB", "false"));
        assert_eq!((p.value("group"), p.value("chain")), ("MLKEM512", "mldsa44:mldsa44"));
        assert_eq!(p.value("cipher"), "TLS_AES_256_GCM_SHA384", "the study's defaults still apply");
    }
    assert_eq!(replication::quantity_factors("conn_per_s@8"), vec![("threads", "8".to_string())]);
    assert!(replication::quantity_factors("message:ClientHello").is_empty());
    let insitu = s.point(config, "message:ClientHello").unwrap();
    assert_eq!(insitu.id(), s.scenario(config).unwrap().id(), "in situ: no load settings");
    // The "No HTTPS" row keeps its own tls=false under the load defaults.
    let plain = s.point("tls=false group=x25519 chain=ed25519:ed25519", "conn_per_s@4").unwrap();
    assert_eq!((plain.value("tls"), plain.value("threads")), ("false", "4"));
    // Table 3's 24 rows at 1, 4 and 8 threads (the text's quotes name no other configuration),
    // but for the row the study marks N/A* (SLH-DSA-SHAKE-128s: no point, its cells say why).
    let load = s.configs("load");
    assert_eq!(load.len(), 69);
    assert!(!load.iter().any(|sc| sc.value("chain").starts_with("slhdsa-shake-128s")));
    assert!(load.iter().all(|sc| ["1", "4", "8"].contains(&sc.value("threads"))));
    assert!(s.configs("insitu").iter().all(|sc| sc.value("threads") == "1" && sc.value("response_size") == "0"));
}

/// A transfer time names its response size: `ttlb_ms@150KB` of a row's configuration is the
/// transfer point of a 150,000 B response at the study's network (`part_defaults`: 50 ms,
/// 100 Mbit/s) with the row's window and client chain; both sizes of the 8 rows are the 16
/// transfer points, and the TTFB column and the ~3.2 ms quote add none.
#[test]
fn a_transfer_time_is_the_rows_configuration_at_its_response_size() {
    let s = study("aws-mtls-ttlb");
    assert_eq!(replication::quantity_factors("ttlb_ms@150KB"), vec![("response_size", "150KB".to_string())]);
    assert_eq!(replication::quantity_factors("ttfb_ms@50KB"), vec![("response_size", "50KB".to_string())]);
    assert_eq!(replication::measured_by("ttlb_ms@50KB"), Some("transfer"));
    assert_eq!(replication::measured_by("ttfb_ms@50KB"), Some("transfer"));
    let config = "group=X25519MLKEM768 chain=mldsa65:mldsa87:mldsa87 send_root=true client_chain=mldsa65:mldsa87:mldsa87 initcwnd=24";
    let p = s.point(config, "ttlb_ms@150KB").unwrap();
    assert_eq!(
        (p.value("response_size"), p.value("rtt"), p.value("bandwidth"), p.value("initcwnd")),
        ("150000", "50ms", "100mbit", "24")
    );
    assert_eq!((p.value("client_chain"), p.value("send_root")), ("mldsa65:mldsa87:mldsa87", "true"));
    assert_eq!(s.point(config, "ttfb_ms@50KB").unwrap().id(), s.point(config, "ttlb_ms@50KB").unwrap().id());
    let insitu = s.point(config, "message:Certificate").unwrap();
    assert_eq!((insitu.value("rtt"), insitu.value("response_size")), ("none", "0"), "in situ: no network");
    let transfer = s.configs("transfer");
    assert_eq!(transfer.len(), 16);
    let sizes: std::collections::BTreeSet<&str> = transfer.iter().map(|sc| sc.value("response_size")).collect();
    assert_eq!(sizes.into_iter().collect::<Vec<_>>(), ["150000", "50000"]);
    assert!(transfer.iter().all(|sc| sc.value("rtt") == "50ms" && sc.value("bandwidth") == "100mbit"));
    assert_eq!(s.configs("insitu").len(), 4, "the transfer table adds no in-situ configuration");
}

/// A load point the run could not measure (in `failures.ndjson`) says so on its cell, with the
/// run's error, and the quotes that need it say the same.
#[test]
fn a_failed_load_point_gives_its_cells_the_runs_error() {
    let s = study("pcsi-throughput");
    let failed = s.point("group=x25519 chain=ed25519:ed25519", "conn_per_s@8").unwrap();
    let records: Vec<_> = s
        .configs("load")
        .iter()
        .filter(|sc| sc.id() != failed.id())
        .map(|sc| pqtls_testkit::synthetic::load::load(sc, false))
        .collect();
    let mut set = ResultSet::from_records(records);
    set.failures.push(pqtls_store::Failure {
        id: failed.id(),
        label: failed.label(),
        kind: "load".into(),
        scenario: failed.values().clone(),
        error: "measured nothing: no request completed in the measured 2.9 s".into(),
        at: 0,
    });
    let tables = replication::compare(&s, &set, &Missing { kinds_not_run: &[] });
    let t3 = tables.iter().find(|t| t.id == "table-3").unwrap();
    // The baseline row's cells at 1, 4 and 8 threads (the study heads the third "4 threads").
    let base: Vec<_> = t3.lines.iter().filter(|l| l.row == "2 x25519 ed25519").collect();
    assert!(base[0].pqtls.parse::<f64>().is_ok() && base[1].pqtls.parse::<f64>().is_ok(), "{base:?}");
    assert_eq!(base[2].verdict, Verdict::NotMeasured);
    assert!(base[2].cause.contains("could not measure this point") && base[2].cause.contains("2.9 s"), "{base:?}");
    let text = tables.iter().find(|t| t.id == "text").unwrap();
    let quote = text.lines.iter().find(|l| l.row.starts_with("… 4 times higher at 8 threads")).unwrap();
    assert_eq!(quote.verdict, Verdict::NotMeasured);
    assert!(quote.cause.contains("could not measure this point"), "{quote:?}");
}
