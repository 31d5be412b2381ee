//! Every report, read the way a user reads it: rendered by headless Chromium (Debian's
//! `chromium`, installed by `scripts/setup.sh` for the tests) at 1280 px, then checked on the
//! rendered page — not on the HTML text — by a probe script that runs in the page:
//!
//! - nothing is wider than the viewport (`scrollWidth`);
//! - an assessment's answer (`#answer`: the question, the sentences, the answer table and the
//!   split) ends within the first 800 px;
//! - every chart draws at least one data mark (a coloured bar, line or point that is not a
//!   legend box);
//! - no chart or table label names a factor at its default value when no record of the page
//!   sets that factor otherwise;
//! - no warning appears twice, and the default assessment, where nothing went wrong, has none.
//!
//! The records are synthetic (pqtls-testkit): the layout is what is tested, not the numbers.

use pqtls_core::factor::{Kind, FACTORS};
use pqtls_core::record::Record;
use pqtls_core::scenario::Scenario;
use pqtls_export::analysis::assessment::{part, Assessment, Config, Deployment, Split};
use pqtls_export::{ReportOptions, ResultSet};
use pqtls_testkit::synthetic;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Headless Chromium (installed when missing by this crate's script; its failure is this test's).
fn chromium() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/ensure-chromium.sh");
    let out = Command::new("bash").arg(&script).output().unwrap();
    assert!(out.status.success(), "headless Chromium could not be provided:\n{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// Runs in the rendered page and writes what it finds as JSON into `#pqtls-probe`.
const PROBE: &str = r#"
<script>
(function () {
  var vw = window.innerWidth;
  var out = {viewport: vw, scrollWidth: document.documentElement.scrollWidth, wide: [], charts: [], labels: [], notices: []};
  document.querySelectorAll('body *').forEach(function (el) {
    if (el.closest('svg') && el.tagName.toLowerCase() !== 'svg') return;
    var r = el.getBoundingClientRect();
    if (r.width > 0 && r.right > vw + 0.5 && out.wide.length < 10)
      out.wide.push(el.tagName + (el.id ? '#' + el.id : '') + ' ' + Math.round(r.right) + ' ' + (el.textContent || '').slice(0, 60));
  });
  var answer = document.getElementById('answer');
  if (answer) {
    var a = answer.getBoundingClientRect();
    out.answer = {bottom: a.bottom + window.scrollY, right: a.right};
  }
  function colour(v) {
    if (!v || v === 'none') return false;
    var m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(v.trim());
    if (!m) return false;
    return !(m[1] === m[2] && m[2] === m[3]);
  }
  document.querySelectorAll('svg.pqtls-chart').forEach(function (svg) {
    var marks = 0;
    svg.querySelectorAll('rect,circle,polyline,path,line').forEach(function (el) {
      var b = el.getBBox();
      if (b.width === 0 && b.height === 0) return;
      if (el.tagName === 'rect' && Math.round(b.width) === 12 && Math.round(b.height) === 12) return; // a legend box
      if (colour(el.getAttribute('fill')) || colour(el.getAttribute('stroke'))) marks++;
    });
    var texts = [];
    svg.querySelectorAll('text').forEach(function (t) { texts.push(t.textContent.trim()); });
    out.charts.push({id: svg.id, marks: marks, labels: texts});
  });
  document.querySelectorAll('table').forEach(function (t) {
    t.querySelectorAll('th').forEach(function (th) { out.labels.push(th.textContent.trim()); });
    t.querySelectorAll('tbody tr').forEach(function (tr) { if (tr.cells[0]) out.labels.push(tr.cells[0].textContent.trim()); });
  });
  document.querySelectorAll('.notice').forEach(function (n) { out.notices.push(n.textContent.trim()); });
  var pre = document.createElement('pre');
  pre.id = 'pqtls-probe';
  pre.textContent = JSON.stringify(out);
  document.body.appendChild(pre);
})();
</script>
"#;

/// What the probe found in `html` rendered at 1280 px.
fn probe(browser: &Path, dir: &Path, name: &str, html: &str) -> Value {
    let page = dir.join(format!("{name}.html"));
    std::fs::write(&page, html.replace("</body>", &format!("{PROBE}</body>"))).unwrap();
    let out = Command::new(browser)
        .args(["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--no-first-run"])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(["--window-size=1280,800", "--virtual-time-budget=5000", "--dump-dom"])
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    let dom = String::from_utf8_lossy(&out.stdout);
    let json =
        dom.split("<pre id=\"pqtls-probe\">").nth(1).and_then(|s| s.split("</pre>").next()).unwrap_or_else(|| {
            panic!("{name}: the probe did not run; chromium said:\n{}", String::from_utf8_lossy(&out.stderr))
        });
    let json = json.replace("&quot;", "\"").replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&");
    serde_json::from_str(&json).unwrap_or_else(|e| panic!("{name}: probe output {json}: {e}"))
}

/// The pieces a label must not carry: each factor's default, when no record sets it otherwise
/// (as the old labels did: `x25519 p256:p256 · openssl · 1 · max · 0 · none`), and its
/// `name=default` spelling.
fn forbidden(records: &[Record]) -> Vec<String> {
    let mut out = Vec::new();
    for f in FACTORS {
        let Some(d) = f.default else { continue };
        if d.is_empty() || records.iter().any(|r| pqtls_export::analysis::factor_value(r, f.name) != d) {
            continue;
        }
        out.push(format!("{}={d}", f.name));
        out.push(format!("· {d} ·"));
        out.push(format!("· {d}\u{0}"));
    }
    out
}

/// Checks every rule on one rendered page.
fn check(name: &str, found: &Value, records: &[Record], want_charts: bool) {
    let vw = found["viewport"].as_f64().unwrap();
    assert_eq!(vw, 1280.0, "{name}: the window is 1280 px wide");
    assert!(
        found["scrollWidth"].as_f64().unwrap() <= vw,
        "{name}: the page is {} px wide at a {vw} px viewport; too wide: {}",
        found["scrollWidth"],
        found["wide"]
    );
    assert!(found["wide"].as_array().unwrap().is_empty(), "{name}: elements past the right edge: {}", found["wide"]);
    let charts = found["charts"].as_array().unwrap();
    if want_charts {
        assert!(!charts.is_empty(), "{name}: no chart at all");
    }
    for c in charts {
        assert!(c["marks"].as_u64().unwrap() >= 1, "{name}: chart {} draws no data", c["id"]);
    }
    // Tables against every record of the page; each chart against the records of its kind.
    let kind_of = |id: &str| {
        let id = id.trim_start_matches("count-");
        if id.starts_with("chart-load-") {
            Some(Kind::Load)
        } else if id.starts_with("chart-transfer-") {
            Some(Kind::Transfer)
        } else if id == "chart-split" {
            None
        } else {
            Some(Kind::Insitu)
        }
    };
    let mut checks: Vec<(String, Vec<String>, &Value)> = vec![("a table".into(), forbidden(records), &found["labels"])];
    for c in charts {
        let id = c["id"].as_str().unwrap();
        let Some(kind) = kind_of(id) else { continue };
        let mine: Vec<Record> = records.iter().filter(|r| r.kind() == kind).cloned().collect();
        checks.push((id.to_string(), forbidden(&mine), &c["labels"]));
    }
    for (what, bad, labels) in &checks {
        for label in labels.as_array().unwrap() {
            let text = format!("{}\u{0}", label.as_str().unwrap());
            for b in bad {
                assert!(
                    !text.contains(b.as_str()),
                    "{name}: {what}'s label {label} names a factor at its default ({b:?})"
                );
            }
        }
    }
    let notices: Vec<&str> = found["notices"].as_array().unwrap().iter().map(|n| n.as_str().unwrap()).collect();
    for (i, n) in notices.iter().enumerate() {
        assert!(!notices[..i].contains(n), "{name}: warning twice: {n}");
    }
}

/// An in-situ record with heap counts per step (as `--memory` writes them): a made-up number of
/// allocations per CPU step, more for larger chains.
fn with_memory(mut record: Record) -> Record {
    use pqtls_core::memory::{MemoryResult, SideMemory, SideMemorySummary, StepMemory};
    let weight = if record.factor("chain").starts_with("mldsa") { 6 } else { 1 };
    let r = record.insitu_mut().unwrap();
    let side = |steps: Vec<String>| {
        let mut m = SideMemory::default();
        for (i, s) in steps.into_iter().enumerate() {
            let step = StepMemory {
                allocations: 3 + i as u64,
                frees: 2 + i as u64,
                allocated_bytes: 900 * weight * (i as u64 + 1),
                freed_bytes: 700 * weight * (i as u64 + 1),
            };
            m.total.add(&step);
            m.steps.insert(s, step);
        }
        m.peak_live_bytes = 4000 * weight as i64;
        SideMemorySummary::of(&[&m, &m])
    };
    r.memory = Some(MemoryResult {
        counted: "the Rust allocator (synthetic)".into(),
        not_counted: "nothing".into(),
        client: side(r.client.steps.keys().cloned().collect()),
        server: side(r.server.steps.keys().cloned().collect()),
    });
    record
}

fn scenario(pairs: &[(&str, &str)]) -> Scenario {
    Scenario::new(pairs.iter().copied()).unwrap()
}

fn config(group: &str, chain: &str) -> Config {
    Config {
        spec: format!("{group}:{chain}"),
        factors: vec![("group".into(), group.into()), ("chain".into(), chain.into())],
    }
}

/// The default question's records on the four stacks the default assessment measures (every
/// stack of the build): in situ for from, to and the split's two middles; throughput (closed
/// loop) and latency (open loop, 50/s) for from and to.
fn default_assessment() -> (ResultSet, Assessment) {
    let from = config("x25519", "p256:p256");
    let to = config("X25519MLKEM768", "mldsa65:mldsa65");
    let split = Split::of(&from, &to);
    let middles = [split.key_exchange.clone().unwrap(), split.certificates.clone().unwrap()];
    let (mut insitu, mut throughput, mut latency) = (Vec::new(), Vec::new(), Vec::new());
    for stack in ["openssl", "rustls", "s2n", "boringssl"] {
        for c in [&from, &to, &middles[0], &middles[1]] {
            let mut pairs: Vec<(&str, &str)> = c.factors.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            pairs.push(("stack", stack));
            insitu.push(synthetic::measure(&scenario(&pairs), 400).record);
        }
        for c in [&from, &to] {
            let mut pairs: Vec<(&str, &str)> = c.factors.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
            pairs.extend([("stack", stack), ("response_size", "1KiB")]);
            throughput.push(synthetic::load::load(&scenario(&pairs), false));
            pairs.extend([("rate", "50/s"), ("connections", "4")]);
            latency.push(synthetic::load::load(&scenario(&pairs), true));
        }
    }
    let assessment = Assessment {
        from,
        to: vec![to],
        deployment: Deployment {
            rtt_ns: 50_000_000,
            bits_per_s: Some(100_000_000),
            response_bytes: 51_200,
            response_head_bytes: 116,
            request_bytes: 78,
            initcwnd: 10,
        },
        commands: vec![("insitu".into(), "pqtls run parts/insitu.toml".into())],
        not_run: Vec::new(),
        parts: [part::INSITU, part::THROUGHPUT, part::LATENCY].map(String::from).to_vec(),
        endpoint: None,
        splits: vec![split],
    };
    let set =
        ResultSet::from_parts(vec![(part::INSITU, insitu), (part::THROUGHPUT, throughput), (part::LATENCY, latency)]);
    (set, assessment)
}

#[test]
fn the_default_assessment_answers_on_its_first_screen_and_every_report_reads_cleanly() {
    let browser = chromium();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path();

    // The default assessment: the answer first, whole, within 800 px; no warning.
    let (set, assessment) = default_assessment();
    let opts = ReportOptions { assessment: Some(assessment), ..ReportOptions::default() };
    let html = pqtls_export::html::render(&set, &opts).unwrap();
    let found = probe(&browser, dir, "assessment", &html);
    check("assessment", &found, &set.records, true);
    let answer = &found["answer"];
    assert!(answer.is_object(), "the page has its answer block");
    assert!(
        answer["bottom"].as_f64().unwrap() <= 800.0,
        "the answer ends at {} px, past the first 800",
        answer["bottom"]
    );
    assert!(
        ["OpenSSL", "rustls", "s2n-tls", "BoringSSL"]
            .iter()
            .all(|s| html.contains(&format!("<th>{s}<br>key exchange, certificates, rest</th>"))),
        "the split per stack (four: a column each, the three parts in its cells)"
    );
    assert!(found["charts"].as_array().unwrap().iter().any(|c| c["id"] == "chart-split"), "the split's chart");
    let notices = found["notices"].as_array().unwrap();
    assert!(notices.is_empty(), "nothing went wrong, yet the page warns: {notices:?}");

    // A report of every record kind, alone and together.
    let insitu: Vec<Record> = ["openssl", "rustls"]
        .iter()
        .flat_map(|stack| {
            [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65"), ("MLKEM768", "mldsa44:mldsa44")].map(
                |(g, c)| synthetic::measure(&scenario(&[("stack", stack), ("group", g), ("chain", c)]), 300).record,
            )
        })
        .collect();
    let counts: Vec<Record> = [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")]
        .map(|(g, c)| {
            synthetic::measure(&scenario(&[("group", g), ("chain", c), ("clock", "instructions")]), 200).record
        })
        .to_vec();
    let layers: Vec<Record> = [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")]
        .iter()
        .flat_map(|(g, c)| {
            ["openssl", "rustls"].map(|s| {
                synthetic::load::load(&scenario(&[("stack", s), ("group", g), ("chain", c), ("rate", "100/s")]), true)
            })
        })
        .collect();
    let memory: Vec<Record> = [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")]
        .map(|(g, c)| with_memory(synthetic::measure(&scenario(&[("group", g), ("chain", c)]), 200).record))
        .to_vec();
    let quic: Vec<Record> = [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")]
        .iter()
        .flat_map(|(g, c)| {
            ["tcp", "quic"].map(|t| {
                synthetic::transfer::transfer(&scenario(&[
                    ("group", g),
                    ("chain", c),
                    ("transport", t),
                    ("rtt", "50ms"),
                    ("response_size", "50KiB"),
                ]))
            })
        })
        .collect();
    let kinds: Vec<(&str, Vec<Record>)> = vec![
        ("memory", memory),
        ("quic", quic),
        ("insitu", insitu.clone()),
        ("counts", counts),
        ("load", synthetic::load::study()),
        ("layers", layers),
        ("transfer", synthetic::transfer::study()),
        ("resident", synthetic::resident::study()),
        ("mixed", [insitu, synthetic::transfer::study()].concat()),
    ];
    for (name, records) in kinds {
        let set = ResultSet::from_records(records);
        let html = pqtls_export::html::render(&set, &ReportOptions::default()).unwrap();
        let found = probe(&browser, dir, name, &html);
        check(name, &found, &set.records, name != "resident");
    }
}

/// Issue 35: each study's replication page (`pqtls replicate STUDY`), made from synthetic records
/// of every configuration the study names, read in Chromium at 1280 px: nothing wider than the
/// viewport, every chart with a data mark, no label naming a default that does not vary, no
/// warning twice, and every table of the study under its heading (report_in_chromium.rs checks
/// the same pages for console messages, captions and every line).
#[test]
fn every_replication_page_reads_cleanly() {
    use pqtls_export::replication::{self, Missing};
    let browser = chromium();
    let tmp = tempfile::tempdir().unwrap();
    for name in replication::STUDIES.iter().map(|s| s.0) {
        let study = replication::study(name).unwrap();
        let mut records: Vec<Record> =
            study.configs("insitu").iter().map(|sc| synthetic::measure(sc, 200).record).collect();
        records.extend(study.configs("load").iter().map(|sc| synthetic::load::load(sc, false)));
        records.extend(study.configs("transfer").iter().map(synthetic::transfer::transfer));
        let set = ResultSet::from_records(records.clone());
        let tables = replication::compare(&study, &set, &Missing { kinds_not_run: &[] });
        let html = replication::html(&study, &tables, &replication::time_capped(&set));
        for t in &study.tables {
            assert!(html.contains(&format!("<h2>{}</h2>", t.id)), "{name}: table {} has its heading", t.id);
        }
        let found = probe(&browser, tmp.path(), name, &html);
        check(&format!("replication {name}"), &found, &records, false);
    }
}
