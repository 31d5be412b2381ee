//! Load records (issue 9) in every exporter and in compare: the fabricated throughput study
//! (the test kit's `synthetic::load`), alone and mixed with in-situ records.

use pqtls_core::record::{Outcome, Record};
use pqtls_export::html::{CHART_IDS, LOAD_CHART_IDS};
use pqtls_export::{compare, exporter, ReportOptions, ResultSet};
use pqtls_testkit::synthetic;
use pqtls_testkit::synthetic::load::{study, study_scenario};

fn render(name: &str, set: &ResultSet) -> String {
    exporter(name).unwrap().render(set, &ReportOptions::default()).unwrap()
}

fn find<'a>(set: &'a ResultSet, g: &str, c: &str, threads: u64) -> &'a Record {
    let id = study_scenario(g, c, threads).id();
    set.records.iter().find(|r| r.id == id).unwrap()
}

/// The in-situ record of the study's X25519MLKEM768-free row x25519 + ML-DSA-44 (same handshake).
fn insitu_of_mldsa44() -> Record {
    synthetic::measure(&study_scenario("x25519", "mldsa44:mldsa44", 1), 50).record
}

#[test]
fn the_throughput_study_reports_rates_by_thread_count_with_terminators() {
    let set = ResultSet::from_records(study());
    let md = render("markdown", &set);
    assert!(!md.contains("## CPU time per handshake (µs)"), "no in-situ part without in-situ records");
    assert!(md.contains("## Load: connections per second") && md.contains("72 load records."), "{md}");
    // Message sizes once per handshake and terminator (not per thread count), no row for no TLS.
    assert!(md.contains("## Load: handshake message sizes (bytes)"), "{md}");
    let sizes = md.split("## Load: handshake message sizes").nth(1).unwrap().split("\n## ").next().unwrap();
    assert_eq!(sizes.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| handshake")).count(), 23, "{sizes}");
    assert!(md.contains(
        "| configuration | stack | terminated by | 1 thr conn/s | 1 thr × base | 4 thr conn/s | 4 thr × base | 8 thr conn/s | 8 thr × base |"
    ));
    // The baseline row is 1.00 at every thread count; its rates are the records'.
    let base: Vec<String> = [1, 4, 8]
        .iter()
        .map(|t| {
            let l = find(&set, "x25519", "ed25519:ed25519", *t).load().unwrap();
            let n = l.achieved_rate_per_s.round() as u64;
            // Thousands separated by a space, as the reports write rates (the study's are below a million).
            assert!(n < 1_000_000);
            let rate = if n >= 1000 { format!("{} {:03}", n / 1000, n % 1000) } else { n.to_string() };
            format!("{rate} | 1.00")
        })
        .collect();
    let row = format!("| x25519 ed25519:ed25519 1KiB via haproxy | openssl | haproxy | {} |", base.join(" | "));
    assert!(md.contains(&row), "{row}\n{md}");
    // Rows the balancer's OpenSSL cannot serve are served by pqtls (rustls).
    assert!(md.contains("| frodo640aes falcon512:falcon512 1KiB | rustls | pqtls |"), "{md}");
    assert!(md.contains("| no TLS 1KiB | – | pqtls |"), "{md}");
    // Ratios carry the interval of their per-second counts.
    let mlkem = md.lines().find(|l| l.starts_with("| MLKEM512 ed25519:ed25519 1KiB via haproxy |")).unwrap();
    assert!(mlkem.contains(" ± "), "{mlkem}");
    // Errors by kind, latency percentiles, and the spread note.
    assert!(md.contains("## Load: errors") && md.contains("| timeout | 3 | no response within 10 s |"), "{md}");
    assert!(md.contains("| configuration | threads | n | p50 | p90 | p99 | p99.9 | max | TTFB p50 | TTFB p99 |"));
    assert!(md.contains("± is the ~95 % interval from the completed requests of every second"));
    // The table `pqtls load` prints, one row per record.
    let summary = md.split("## Load: per record").nth(1).unwrap().split("\n## ").next().unwrap();
    assert!(summary.contains("| stack | configuration | served by | loop | conns/s | req/s | p50 ms |"), "{summary}");
    // Wider than a Markdown viewer shows: split into parts that each name the row; the first
    // part has a row per record.
    let first_part = summary.split("\n\n").find(|p| p.starts_with("| stack")).unwrap();
    assert_eq!(first_part.lines().filter(|l| l.starts_with("| ") && !l.starts_with("| stack")).count(), 72);
    // One line for the rows with errors (issue 20), naming each of them.
    let errors: Vec<&str> = md.lines().filter(|l| l.contains(" error(s) (see the errors table)")).collect();
    assert_eq!(errors.len(), 1, "{md}");
    assert!(errors[0].starts_with("> Warning: 1–4 error(s) (see the errors table) — 10 configurations: "), "{md}");
    assert!(errors[0].contains("x25519 slhdsa-sha2-128s:slhdsa-sha2-128s 1KiB (8 threads, rustls)"), "{md}");

    let html = render("html", &set);
    for id in &LOAD_CHART_IDS[..2] {
        assert!(html.contains(&format!("<svg id=\"{id}\" class=\"pqtls-chart\"")), "{id}");
    }
    assert!(!html.contains("chart-steps-server") && !html.contains("chart-load-layers-p50"));
    assert!(html.contains("HAProxy 3.0.11 (OpenSSL 3.5.1) → pqtls serve --plain"), "terminator with its version");
    assert!(html.contains("from 72 saved records"));
    assert!(exporter("html").unwrap().notices(&set).is_empty(), "load records are drawn");
}

#[test]
fn a_mixed_store_gives_one_report_with_both_parts_and_cpu_next_to_in_situ() {
    let insitu = insitu_of_mldsa44();
    let mut records = vec![insitu.clone()];
    records.extend(study());
    let set = ResultSet::from_records(records);
    let md = render("markdown", &set);
    assert!(md.contains("## CPU time per handshake (µs)") && md.contains("## Load: connections per second"));
    let i = insitu.insitu().unwrap();
    let l = find(&set, "x25519", "mldsa44:mldsa44", 4).load().unwrap();
    let us = |ns: f64| {
        let u = ns / 1000.0;
        if u >= 100.0 {
            format!("{u:.0}")
        } else if u >= 10.0 {
            format!("{u:.1}")
        } else {
            format!("{u:.2}")
        }
    };
    let row = format!(
        "| x25519 mldsa44:mldsa44 1KiB via haproxy | 4 | {} | {} | – | {} |",
        us(l.client_handshake_cpu_ns_mean),
        us(i.client.total_cpu_ns.mean),
        us(i.server.total_cpu_ns.mean)
    );
    assert!(md.contains(&row), "{row}\n{md}");
    let html = render("html", &set);
    for id in
        CHART_IDS.iter().filter(|id| **id != "chart-stacks" && **id != "chart-baseline").chain(&LOAD_CHART_IDS[..2])
    {
        assert!(html.contains(&format!("<svg id=\"{id}\"")), "{id}");
    }
    let csv = render("load-csv", &set);
    let mut rd = csv::Reader::from_reader(csv.as_bytes());
    let h = rd.headers().unwrap().clone();
    let col = |n: &str| h.iter().position(|c| c == n).unwrap_or_else(|| panic!("no column {n}: {h:?}"));
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    assert_eq!(rows.len(), 72, "one row per load record, the in-situ one left out");
    let row = rows.iter().find(|r| r[0] == *study_scenario("x25519", "mldsa44:mldsa44", 4).id()).unwrap();
    assert_eq!(row[col("latency_p50_ns")], l.latency.p50_ns.to_string());
    assert_eq!(row[col("latency_p999_ns")], l.latency.p999_ns.to_string());
    assert_eq!(row[col("client_handshake_cpu_insitu_ns")], format!("{:.1}", i.client.total_cpu_ns.mean));
    assert_eq!(row[col("insitu_id")], insitu.id);
    assert_eq!(&row[col("terminator")], "haproxy");
    assert_eq!(&row[col("threads")], "4");
    let slh = study_scenario("MLKEM512", "slhdsa-sha2-128s:slhdsa-sha2-128s", 8).id();
    let row = rows.iter().find(|r| r[0] == *slh).unwrap();
    assert_eq!((&row[col("errors")], &row[col("errors_by_kind")]), ("3", "timeout=3"));
    assert_eq!(&row[col("terminator")], "pqtls");
    let base = find(&set, "x25519", "ed25519:ed25519", 8).load().unwrap();
    let me = set.records.iter().find(|r| r.id == slh).unwrap().load().unwrap();
    assert_eq!(row[col("ratio_to_baseline")], format!("{:.4}", me.achieved_rate_per_s / base.achieved_rate_per_s));
    assert_eq!(&rows[0][col("plain_http")], "true");
    assert!(!h.iter().any(|c| c.starts_with("layer_")), "no layers, no layer columns");
    assert_eq!(
        exporter("load-csv").unwrap().notices(&set),
        ["1 insitu record left out: the load-csv export draws load records only"]
    );
}

#[test]
fn layers_are_stacked_at_p50_and_p95_and_open_loops_that_miss_their_rate_are_told() {
    let mut records = Vec::new();
    for size in ["1KiB", "64KiB"] {
        for g in ["x25519", "X25519MLKEM768"] {
            let sc = study_scenario(g, "mldsa65:mldsa65", 1).with([("rate", "100/s"), ("size", size)]).unwrap();
            records.push(synthetic::load::load(&sc, true));
        }
    }
    if let Outcome::Load(l) = &mut records[3].result {
        l.achieved_rate_per_s = 97.0;
    }
    let set = ResultSet::from_records(records);
    let html = render("html", &set);
    // Open loops answer latency: the layers lead, and no chart draws bars that all stand at the
    // target rate (issue 25).
    for id in &LOAD_CHART_IDS[2..] {
        assert!(html.contains(&format!("<svg id=\"{id}\"")), "{id}");
    }
    for id in &LOAD_CHART_IDS[..2] {
        assert!(!html.contains(&format!("<svg id=\"{id}\"")), "{id}");
    }
    let at = |s: &str| html.find(&format!("<section id=\"{s}\">")).unwrap_or_else(|| panic!("no section {s}"));
    assert!(at("load-layers") < at("load-latency") && at("load-latency") < at("load-rate"), "layers, latency, rates");
    assert!(html.contains("every one is an open loop") || html.contains("Every one is an open loop"));
    // A bar's label names what varies among the bars (the size), not what all share (the rate,
    // the terminator, one thread).
    let chart = html.split("<svg id=\"chart-load-layers-p50\"").nth(1).unwrap().split("</svg>").next().unwrap();
    assert!(chart.contains("X25519MLKEM768 mldsa65:mldsa65 · 64KiB\n<"), "layer bar label: {chart}");
    assert!(
        !chart.contains("thr") && !chart.contains("haproxy") && !chart.contains("100/s"),
        "no label of what does not vary"
    );
    let md = render("markdown", &set);
    let at = |s: &str| md.find(s).unwrap_or_else(|| panic!("no {s} in {md}"));
    assert!(at("## Load: layers (µs)") < at("## Load: latency") && at("## Load: latency") < at("## Load: connections"));
    assert!(md.contains("## Load: layers (µs)") && md.contains("| configuration | tcp p50 | tcp p95 |"));
    let warnings: Vec<&str> = md.lines().filter(|l| l.contains("open loop achieved")).collect();
    assert_eq!(warnings.len(), 1, "{md}");
    assert!(warnings[0].contains("97.0/s of the 100.0/s asked (-3.0 %)"), "{}", warnings[0]);
    let csv = render("load-csv", &set);
    let header = csv.lines().next().unwrap();
    assert!(header.ends_with("layer_http_first_byte_p95_ns,layer_http_p50_ns,layer_http_p95_ns"), "{header}");
}

#[test]
fn compare_reads_load_records_rates_and_latency_percentiles() {
    let fast = synthetic::load::load(&study_scenario("x25519", "ed25519:ed25519", 4), false);
    let slow_run = synthetic::load::load(&study_scenario("x25519", "mldsa44:mldsa44", 4), false);
    let mut slower = fast.clone();
    if let (Outcome::Load(a), Some(b)) = (&mut slower.result, slow_run.load()) {
        a.latency = b.latency.clone();
        a.achieved_rate_per_s = b.achieved_rate_per_s;
        a.handshakes_per_s = b.handshakes_per_s;
        a.per_second = b.per_second.clone();
    }
    let before = ResultSet::from_records(vec![fast.clone()]);
    let c = compare::compare(&before, &ResultSet::from_records(vec![slower]));
    assert!(c.configs.is_empty());
    assert_eq!(c.loads.len(), 1);
    let m = &c.loads[0].metrics;
    let names: Vec<&str> = m.iter().map(|x| x.metric.as_str()).collect();
    assert_eq!(
        names,
        ["handshakes/s", "requests/s", "latency p50", "latency p90", "latency p99", "latency p99.9", "latency max"]
    );
    // Rates have intervals from their per-second counts; the maximum has none.
    assert_eq!(m[0].verdict, Some(compare::Verdict::Slower));
    assert!(m[0].after_interval.unwrap()[1] < m[0].before_interval.unwrap()[0]);
    assert_eq!(m[6].verdict, None);
    assert_eq!(m[2].verdict, Some(compare::Verdict::Slower));
    assert_eq!(m[2].after, slow_run.load().unwrap().latency.p50_ns as f64);
    let t = c.to_terminal(false);
    assert!(t.contains("load records:") && t.contains("latency p50") && t.contains("no interval"), "{t}");
    assert!(t.contains("1 load configurations compared: 0 faster, 1 slower, 0 within noise"), "{t}");
    assert!(!t.contains("configurations compared: 0 faster, 0 slower, 0 within noise (handshake CPU"), "{t}");
    assert!(!c.to_markdown().contains("(handshake CPU"), "no in-situ tally without in-situ records");
    assert!(
        c.to_markdown().contains("| x25519 ed25519:ed25519 4 threads 1KiB via haproxy | latency p50 |"),
        "{}",
        c.to_markdown()
    );
    // The same run against itself: within noise; an in-situ record against a load record of one id: a note.
    let same = compare::compare(&before, &before);
    assert_eq!(same.loads[0].metrics[2].verdict, Some(compare::Verdict::WithinNoise));
    let json: serde_json::Value = serde_json::from_str(&same.to_json().unwrap()).unwrap();
    assert_eq!(json["loads"][0]["metrics"][2]["verdict"], "within_noise");
    let mut insitu = insitu_of_mldsa44();
    insitu.id = fast.id.clone();
    let mixed = compare::compare(&before, &ResultSet::from_records(vec![insitu]));
    assert_eq!(mixed.notes, [format!("{} not compared: a load record before and a insitu record after", fast.id)]);
}
