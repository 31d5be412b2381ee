//! Transfer records (issue 11) in the reports, on synthetic records: the charts and sections
//! exist with their ids, the numbers of a small case equal hand-computed ones, a set of
//! in-situ, load and transfer records gives one report, empty and degenerate records do not break any
//! exporter, and points the run could not measure are listed with their reason.

use pqtls_core::load::{histogram, Latency};
use pqtls_core::record::{Outcome, Record};
use pqtls_core::transfer::Percentiles;
use pqtls_export::{compare, exporter, exporters, ReportOptions, ResultSet};
use pqtls_store::{append_failure, Failure};
use pqtls_testkit::synthetic::transfer::{empty, study, study_scenario, transfer};

/// Tops of HdrHistogram buckets (8 192 ns wide at 10 ms): stored exactly.
const A_NS: u64 = 10_002_431;
const B_NS: u64 = 12_001_279;

/// `r` with every TTLB at `ttlb_ns` and every TTFB at `ttfb_ns` (100 transfers).
fn fixed(mut r: Record, ttlb_ns: u64, ttfb_ns: u64) -> Record {
    let Outcome::Transfer(t) = &mut r.result else { panic!("a transfer record") };
    let one = |v: u64| {
        let mut h = histogram();
        h.record_n(v, 100).unwrap();
        Latency::of(&h)
    };
    t.load.latency = one(ttlb_ns);
    t.load.ttfb = one(ttfb_ns);
    t.ttlb = Percentiles::of(&t.load.latency);
    t.ttfb = Percentiles::of(&t.load.ttfb);
    r
}

fn small_case() -> Vec<Record> {
    let classical = transfer(&study_scenario("x25519", "p256:p256", "p256:p256", "10ms", "10", "50KiB"));
    let pq = transfer(&study_scenario("MLKEM768", "mldsa65:mldsa65", "mldsa65:mldsa65", "10ms", "10", "50KiB"));
    vec![fixed(classical, A_NS, A_NS), fixed(pq, B_NS, A_NS)]
}

#[test]
fn the_study_report_has_every_chart_and_section() {
    let set = ResultSet::from_records(study());
    let html = exporter("html").unwrap().render(&set, &ReportOptions::default()).unwrap();
    for size in ["0", "50KiB", "150KiB"] {
        for iw in ["10", "40"] {
            for m in ["ttlb", "ttfb"] {
                let id = format!("chart-transfer-{m}-size-{size}-initcwnd-{iw}-bw-100mbit");
                assert!(html.contains(&format!("<svg id=\"{id}\" class=\"pqtls-chart\"")), "{id}");
            }
        }
    }
    for id in ["chart-transfer-diff-ttlb", "chart-transfer-diff-ttfb"] {
        assert!(html.contains(&format!("<svg id=\"{id}\" class=\"pqtls-chart\"")), "{id}");
    }
    for s in
        ["transfer-ttlb", "transfer-ttfb", "transfer-diff", "transfer-percentiles", "transfer-rounds", "transfer-links"]
    {
        assert!(html.contains(&format!("<section id=\"{s}\">")), "{s}");
    }
    // The quirk of the synthetic records (responses of 4 rounds or more take one more) is
    // flagged.
    assert!(html.contains(" ⚠</td>"), "a flagged rounds cell");
    assert!(html.contains("took more or less time than the round-trip model predicts"));
    // One link per RTT, each accepted, with both windows seen on it.
    assert_eq!(html.matches("<td>accepted</td>").count(), 3);
    assert!(html.contains("<td>10, 40</td>"));
    assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
    assert!(exporter("html").unwrap().notices(&set).is_empty(), "transfer records are drawn");
    let md = exporter("markdown").unwrap().render(&set, &ReportOptions::default()).unwrap();
    for h in [
        "## Transfer: TTFB and TTLB (ms)",
        "## Transfer: post-quantum − classical",
        "## Transfer: round trips, measured vs predicted",
        "## Transfer: the verified links",
    ] {
        assert!(md.contains(h), "{h}");
    }
    let csv = exporter("transfer-csv").unwrap().render(&set, &ReportOptions::default()).unwrap();
    assert_eq!(csv.lines().count(), 55, "a header and 54 rows");
}

/// The Markdown report with each wide table whole again: the report splits a table wider than
/// `markdown::MAX_COLUMNS` into parts that repeat its first column, one after the other; here
/// consecutive parts with the same first column and rows are joined back, row by row.
fn rejoined(md: &str) -> String {
    let mut blocks: Vec<Vec<String>> = Vec::new();
    let mut current: Vec<String> = Vec::new();
    let mut text: Vec<String> = Vec::new();
    for line in md.lines().chain(std::iter::once("")) {
        if line.starts_with('|') {
            current.push(line.to_string());
            continue;
        }
        if !current.is_empty() {
            let first = |l: &str| l.split('|').nth(1).unwrap_or("").to_string();
            let joins = blocks.last().is_some_and(|b: &Vec<String>| {
                b.len() == current.len() && b.iter().zip(&current).all(|(x, y)| first(x) == first(y))
            }) && text.last().is_some_and(|t| t.is_empty())
                && text.len() == 1;
            if joins {
                let last = blocks.last_mut().unwrap();
                // The parts repeat the row's naming columns: as many as their headers share.
                let cells = |l: &str| l.trim_matches('|').split('|').map(|c| c.to_string()).collect::<Vec<_>>();
                let (h1, h2) = (cells(&last[0]), cells(&current[0]));
                let names = h1.iter().zip(&h2).take_while(|(a, b)| a == b).count();
                for (x, y) in last.iter_mut().zip(&current) {
                    let mut row = cells(x);
                    row.extend(cells(y).into_iter().skip(names));
                    *x = format!("|{}|", row.join("|"));
                }
            } else {
                blocks.push(std::mem::take(&mut current));
            }
            current.clear();
            text.clear();
        }
        text.push(line.to_string());
    }
    blocks.iter().map(|b| b.join("\n")).collect::<Vec<_>>().join("\n\n") + "\n" + md
}

#[test]
fn numbers_of_a_small_case_equal_hand_computed_ones() {
    let set = ResultSet::from_records(small_case());
    let md = rejoined(&exporter("markdown").unwrap().render(&set, &ReportOptions::default()).unwrap());
    // Percentiles: every transfer at 10.002431 ms (classical) or 12.001279 ms (PQ).
    let row = md.lines().find(|l| {
        l.starts_with("| MLKEM768 mldsa65:mldsa65 mtls=mldsa65:mldsa65 | 50KiB | 10 | 10ms | 100mbit | 0% | 100 |")
    });
    let row = row.unwrap_or_else(|| panic!("{md}"));
    assert!(row.contains("| 12.00 | 12.00 | 12.00 | 12.00 | 10.00 | 10.00 | 10.00 | 10.00 | 0 |"), "{row}");
    // The table `pqtls transfer` prints, in the report too: the verified link, TTFB then TTLB,
    // round trips measured / predicted.
    let point =
        md.lines().find(|l| l.starts_with("| openssl | MLKEM768 mldsa65:mldsa65")).unwrap_or_else(|| panic!("{md}"));
    assert!(point.contains("| 10.00 | 10.00 | 10.00 | 10.00 | 12.00 | 12.00 | 12.00 | 12.00 |"), "{point}");
    // Δ TTLB = 12 001 279 − 10 002 431 = 1 998 848 ns with a 0-wide interval (every transfer in
    // one bucket); × = 1.19984; TTFB equal: +0.00, × 1.000.
    let diff = md
        .lines()
        .find(|l| l.starts_with("| MLKEM768") && l.contains("| x25519 p256:p256 mtls=p256:p256 |"))
        .unwrap_or_else(|| panic!("{md}"));
    assert!(
        diff.contains("| 12.00 | 10.00 | +2.00 [2.00 – 2.00] | 1.200 [1.200 – 1.200] | +0.00 [0.00 – 0.00] | 1.000 [1.000 – 1.000] | PQ slower |"),
        "{diff}"
    );
    let csv = exporter("transfer-csv").unwrap().render(&set, &ReportOptions::default()).unwrap();
    let mut rd = csv::Reader::from_reader(csv.as_bytes());
    let h = rd.headers().unwrap().clone();
    let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
    let col = |name: &str| h.iter().position(|c| c == name).unwrap_or_else(|| panic!("no column {name}: {h:?}"));
    assert_eq!(&rows[1][col("ttlb_p50_ns")], B_NS.to_string().as_str());
    assert_eq!(&rows[1][col("ttlb_diff_ns")], "1998848.0");
    assert_eq!(&rows[1][col("ttlb_diff_low_ns")], "1998848.0");
    assert_eq!(&rows[1][col("ttlb_diff_ratio")], "1.1998");
    assert_eq!(&rows[1][col("classical_id")], set.records[0].id.as_str());
    assert_eq!(&rows[0][col("ttlb_diff_ns")], "", "the classical point has no difference");
    assert_eq!((&rows[0][col("route_client_initcwnd")], &rows[0][col("route_server_initcwnd")]), ("10", "10"));
    assert_eq!(&rows[0][col("link_accepted")], "true");
    assert_eq!(&rows[0][col("rtt_asked_ns")], "10000000");
    assert_eq!(&rows[0][col("rate_asked_bits_per_s")], "100000000");
    let t = set.records[0].transfer().unwrap();
    assert_eq!(&rows[0][col("rtt_measured_median_ns")], t.link.rtt.median_ns.to_string().as_str());
    let tls = t.rounds.iter().find(|r| r.layer == "tls").unwrap();
    assert_eq!(&rows[0][col("rounds_tls_measured")], format!("{:.3}", tls.measured).as_str());
    assert_eq!(&rows[0][col("rounds_tls_predicted")], format!("{:.3}", tls.expected()).as_str());
    assert_eq!(&rows[0][col("rounds_tls_round_trips")], tls.predicted.to_string().as_str());
}

#[test]
fn compare_gives_the_ratio_of_ttlb_medians_per_point() {
    let before = ResultSet::from_records(small_case());
    // The same points on a "slower machine": the classical TTLB at B instead of A.
    let mut slower = small_case();
    slower[0] = fixed(slower[0].clone(), B_NS, A_NS);
    let after = ResultSet::from_records(slower);
    let cmp = compare::compare(&before, &after);
    assert_eq!((cmp.transfers.len(), cmp.configs.len(), cmp.loads.len()), (2, 0, 0));
    assert!(cmp.notes.is_empty(), "{:?}", cmp.notes);
    let r = cmp.transfers[0].ttlb_p50_ratio.unwrap();
    assert_eq!(r, [B_NS as f64 / A_NS as f64; 3]);
    assert_eq!(cmp.transfers[1].ttlb_p50_ratio.unwrap(), [1.0; 3]);
    let t = cmp.to_terminal(false);
    assert!(t.contains("transfer records:") && t.contains("TTLB p50 after / before"), "{t}");
    assert!(!t.contains("configurations compared"), "no in-situ table for transfer-only sets: {t}");
    let md = cmp.to_markdown();
    assert!(
        md.contains("## Transfer") && md.contains("| TTLB p50 after / before | 1.200 [1.200–1.200] |  | slower |"),
        "{md}"
    );
    let json: serde_json::Value = serde_json::from_str(&cmp.to_json().unwrap()).unwrap();
    assert_eq!(json["transfers"][1]["metrics"][1]["metric"], "TTLB p50");
}

#[test]
fn one_report_of_insitu_load_and_transfer_records() {
    let sc = study_scenario("x25519", "p256:p256", "p256:p256", "10ms", "10", "0");
    let insitu = pqtls_testkit::synthetic::measure(
        &pqtls_core::scenario::Scenario::new([("group", "x25519"), ("chain", "p256:p256")]).unwrap(),
        50,
    )
    .record;
    let load = pqtls_testkit::synthetic::load::load(
        &pqtls_testkit::synthetic::load::study_scenario("x25519", "ed25519:ed25519", 1),
        true,
    );
    let set = ResultSet::from_records(vec![insitu, load, transfer(&sc)]);
    let opts = ReportOptions::default();
    let html = exporter("html").unwrap().render(&set, &opts).unwrap();
    for s in ["<section id=\"quantiles\">", "<section id=\"load-rate\">", "<section id=\"transfer-ttlb\">"] {
        assert!(html.contains(s), "{s}");
    }
    // The contents say what each part answers and link to where it starts.
    let contents = html.split("<nav id=\"contents\">").nth(1).expect("a contents list").split("</nav>").next().unwrap();
    for (id, what) in
        [("rules", "In situ"), ("load-rate", "Load: connections per second"), ("transfer-ttlb", "Transfer")]
    {
        assert!(contents.contains(&format!("<a href=\"#{id}\">{what}")), "{id}: {contents}");
        assert!(html.contains(&format!("<section id=\"{id}\">")), "{id}");
    }
    let md = exporter("markdown").unwrap().render(&set, &opts).unwrap();
    assert!(
        md.contains("## CPU time per handshake") && md.contains("## Load: latency") && md.contains("## Transfer: TTFB")
    );
    assert!(md.contains(
        "- In situ: CPU time and bytes per step (1 configuration)\n- Load: connections per second (1 record)"
    ));
    // A set of one kind has no contents: the report is that kind's part.
    let one = ResultSet::from_records(vec![transfer(&sc)]);
    assert!(!exporter("html").unwrap().render(&one, &opts).unwrap().contains("id=\"contents\""));
    for e in exporters() {
        e.render(&set, &opts).unwrap_or_else(|err| panic!("{}: {err}", e.name()));
    }
    // The CSVs of one kind say what they leave out.
    let n = exporter("transfer-csv").unwrap().notices(&set);
    assert!(n.iter().any(|x| x.contains("1 insitu record left out")), "{n:?}");
}

#[test]
fn empty_and_degenerate_records_break_no_exporter() {
    let sc = study_scenario("MLKEM768", "mldsa65:mldsa65", "mldsa65:mldsa65", "50ms", "10", "0");
    // No rate limit and no delay: a link without an RTT (not on a chart).
    let unlimited =
        pqtls_core::scenario::Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("response_size", "1KiB")])
            .unwrap();
    let mut no_link = transfer(&unlimited);
    if let Outcome::Transfer(t) = &mut no_link.result {
        t.link.rate = None;
        t.link.checks.clear();
        t.link.loss = Default::default();
        t.link.rtt = Default::default();
    }
    let sets =
        [vec![empty(&sc)], vec![empty(&sc), transfer(&sc)], vec![no_link.clone()], vec![no_link, empty(&unlimited)]];
    let opts = ReportOptions::default();
    for records in sets {
        let set = ResultSet::from_records(records);
        for e in exporters() {
            e.render(&set, &opts).unwrap_or_else(|err| panic!("{}: {err}", e.name()));
        }
        let _ = compare::compare(&set, &set).to_terminal(true);
        let _ = compare::compare(&set, &set).to_markdown();
    }
    let set = ResultSet::from_records(vec![empty(&sc)]);
    let md = exporter("markdown").unwrap().render(&set, &opts).unwrap();
    assert!(md.contains("no transfer completed"), "{md}");
    let html = exporter("html").unwrap().render(&set, &opts).unwrap();
    assert!(html.contains("no point with an RTT and transfers"), "{html}");
}

#[test]
fn points_the_run_could_not_measure_are_listed_with_their_reason() {
    let dir = tempfile::tempdir().unwrap();
    let measured = transfer(&study_scenario("x25519", "p256:p256", "p256:p256", "10ms", "10", "0"));
    std::fs::write(dir.path().join("records.ndjson"), serde_json::to_string(&measured).unwrap() + "\n").unwrap();
    let refused =
        study_scenario("x25519", "p256:p256", "p256:p256", "10ms", "10", "0").with([("bandwidth", "1gbit")]).unwrap();
    let why = "link refused: rate asked 1000.00 Mbit/s measured 312.40 Mbit/s (accepted ±3 %): this machine emulates \
               up to 200 Mbit/s faithfully";
    append_failure(
        dir.path(),
        &Failure {
            id: refused.id(),
            label: refused.label(),
            kind: "transfer".into(),
            scenario: refused.values().clone(),
            error: why.into(),
            at: 0,
        },
    )
    .unwrap();
    // A failure of a point measured since (it has a record) is not listed.
    append_failure(
        dir.path(),
        &Failure {
            id: measured.id.clone(),
            label: measured.label.clone(),
            kind: "transfer".into(),
            scenario: Default::default(),
            error: "an earlier failure".into(),
            at: 0,
        },
    )
    .unwrap();
    let set = ResultSet::load(dir.path()).unwrap();
    assert_eq!(set.failures.len(), 1);
    let html = exporter("html").unwrap().render(&set, &ReportOptions::default()).unwrap();
    assert!(html.contains("<section id=\"not-measured\">"));
    assert!(html.contains(&pqtls_export::html::escape(why)));
    assert!(html.contains("1 point(s) of this run were not measured"));
    assert!(!html.contains("an earlier failure"));
    let md = exporter("markdown").unwrap().render(&set, &ReportOptions::default()).unwrap();
    assert!(md.contains("## Points not measured") && md.contains(&refused.label()), "{md}");
}
