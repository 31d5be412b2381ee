//! A self-contained HTML report: inline CSS, inline SVG charts, a few lines of inline
//! JavaScript (sortable tables); no network resource of any kind.
//!
//! Chart ids (stable, for tests and links): `chart-steps-server`, `chart-steps-client`,
//! `chart-stacks` (when a scenario was measured on more than one stack), `chart-tail-sign`,
//! `chart-bytes-messages`, `chart-bytes-direction`, `chart-capacity`, `chart-baseline`
//! (when deltas exist); for load records ([`LOAD_CHART_IDS`]) `chart-load-rate`,
//! `chart-load-ratio`, `chart-load-layers-p50` and `-p95` (when records have layers); for
//! transfer records ([`TRANSFER_CHART_IDS`]) `chart-transfer-ttlb-<panel>` and
//! `chart-transfer-ttfb-<panel>` per panel, `chart-transfer-diff-ttlb` and `-ttfb`. A set of
//! several kinds gives one report with a part per kind (in-situ, load, transfer); a set of one
//! kind, that kind's part only.

use crate::analysis::capacity::capacity;
use crate::analysis::roles::{across_stacks, step_order};
use crate::analysis::{
    always_labelled, baseline_deltas, factor_columns, factor_value, rules::rules_of_thumb, same_except, Insitu, STACK,
};
use crate::charts::{self, Bar};
use crate::markdown::{message_names, settings_sentence};
use crate::{quantile_keys, us, Exporter, ReportOptions, ResultSet};
use pqtls_core::factor::{Kind, FACTORS};
use pqtls_core::stats::Summary;
use pqtls_core::Result;
use std::fmt::Write;

pub use crate::analysis::roles::signing_step;

/// Ids of the report's charts (`chart-stacks` only when a scenario was measured on several
/// stacks, `chart-baseline` only when there are deltas to show).
pub const CHART_IDS: &[&str] = &[
    "chart-steps-server",
    "chart-steps-client",
    "chart-stacks",
    "chart-tail-sign",
    "chart-bytes-messages",
    "chart-bytes-direction",
    "chart-capacity",
    "chart-baseline",
];

/// Ids of the load records' charts (the layer charts only when records have layers).
pub const LOAD_CHART_IDS: &[&str] =
    &["chart-load-rate", "chart-load-ratio", "chart-load-layers-p50", "chart-load-layers-p95"];

/// Ids of the transfer records' charts: `chart-transfer-ttlb-<panel>` and
/// `chart-transfer-ttfb-<panel>` per panel ([`crate::analysis::transfer::Panel::slug`], e.g.
/// `size-150KiB-initcwnd-10-bw-100mbit`), and the PQ − classical differences (when some point
/// has a classical counterpart).
pub const TRANSFER_CHART_IDS: &[&str] =
    &["chart-transfer-ttlb-", "chart-transfer-ttfb-", "chart-transfer-diff-ttlb", "chart-transfer-diff-ttfb"];

/// At most this many scenarios in the stack comparison.
const MAX_STACK_SCENARIOS: usize = 12;

/// The `html` exporter: [`render`].
pub struct Html;

impl Exporter for Html {
    fn name(&self) -> &'static str {
        "html"
    }
    fn describe(&self) -> &'static str {
        "self-contained HTML report with SVG charts (steps, OpenSSL vs rustls, signing tail, bytes, capacity, baseline)"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Insitu, Kind::Load, Kind::Transfer]
    }
    fn render(&self, set: &ResultSet, opts: &ReportOptions) -> Result<String> {
        render(set, opts)
    }
}

/// The factor the signing tail and the capacity chart draw one line per value of.
const CHAIN: &str = "chain";

/// A record's name in charts: its label, then the values of the column factors the label
/// does not show (e.g. the stack, when the set has several), so no two bars read alike.
fn chart_label(r: &Insitu, cols: &[&pqtls_core::factor::Factor]) -> String {
    let mut s = r.label().to_string();
    for f in cols {
        let v = r.factor(f.name);
        if (f.label)(v).is_none() {
            s += " · ";
            s += v;
        }
    }
    s
}

fn same_chain(a: &Insitu, b: &Insitu) -> bool {
    a.factor(CHAIN) == b.factor(CHAIN)
}

/// Escapes text for HTML content and attribute values.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = r#"
body{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0 auto;max-width:1180px;padding:0 16px 40px;color:#222}
h1{margin-top:24px}h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:36px}
table{border-collapse:collapse;font-size:13px;margin:8px 0}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right}th{background:#f3f3f3;cursor:pointer}
td:first-child,th:first-child{text-align:left}
figure{margin:12px 0}figcaption{font-size:13px;color:#555}
.note{font-size:13px;color:#555}.notice{background:#fff6d6;padding:6px 10px;border-left:4px solid #e0b000}
nav a{margin-right:12px}details{margin:6px 0}code{font-size:12px}
"#;

/// Sortable tables: a click on a header sorts by that column (numbers numerically).
const SCRIPT: &str = r#"
(function () {
  function key(td) {
    var t = td.textContent.replace(/[\s ]/g, '').replace('−', '-');
    var n = parseFloat(t);
    return isNaN(n) ? td.textContent : n;
  }
  document.querySelectorAll('table.sortable th').forEach(function (th, i) {
    th.addEventListener('click', function () {
      var table = th.closest('table'), body = table.tBodies[0];
      var col = Array.prototype.indexOf.call(th.parentNode.children, th);
      var asc = th.dataset.dir !== 'asc';
      th.dataset.dir = asc ? 'asc' : 'desc';
      Array.prototype.slice.call(body.rows).sort(function (a, b) {
        var x = key(a.cells[col]), y = key(b.cells[col]);
        return (x > y ? 1 : x < y ? -1 : 0) * (asc ? 1 : -1);
      }).forEach(function (r) { body.appendChild(r); });
    });
  });
  document.body.dataset.charts = String(document.querySelectorAll('svg.pqtls-chart').length);
})();
"#;

/// Points of a CDF from quantiles: (min, 0), each quantile, (max, 1); x in µs.
fn cdf_from_quantiles(s: &Summary) -> Vec<(f64, f64)> {
    let mut pts = vec![(s.min / 1000.0, 0.0)];
    for (k, v) in &s.quantiles {
        if let Ok(p) = k.trim_start_matches('p').parse::<f64>() {
            pts.push((v / 1000.0, p / 100.0));
        }
    }
    pts.push((s.max / 1000.0, 1.0));
    pts.sort_by(|a, b| a.1.total_cmp(&b.1));
    pts
}

/// Points of an empirical CDF from raw values (ns), at most ~400 points; x in µs.
fn cdf_from_samples(mut v: Vec<f64>) -> Vec<(f64, f64)> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let step = n.div_ceil(400).max(1);
    let mut pts: Vec<(f64, f64)> = (0..n).step_by(step).map(|i| (v[i] / 1000.0, (i + 1) as f64 / n as f64)).collect();
    if let Some(last) = v.last() {
        pts.push((last / 1000.0, 1.0));
    }
    pts
}

/// The configurations drawn in charts: all of them when they fit; otherwise those equal to
/// the first record in every factor except the stack and the factors every label names
/// (the main comparison of a big matrix: stack × group × chain), up to the limit. Returns them and a sentence saying what was left out.
fn charted<'a>(
    recs: &[Insitu<'a>],
    all: &[pqtls_core::record::Record],
    opts: &ReportOptions,
) -> (Vec<Insitu<'a>>, String) {
    let max = opts.max_chart_configs.max(1);
    if recs.len() <= max {
        return (recs.to_vec(), String::new());
    }
    let Some(first) = recs.first() else { return (Vec::new(), String::new()) };
    let free: Vec<&str> = FACTORS.iter().filter(|f| always_labelled(f) || f.name == STACK).map(|f| f.name).collect();
    let main: Vec<Insitu> =
        recs.iter().filter(|r| same_except(r.record, first.record, &free)).take(max).copied().collect();
    let fixed: Vec<String> = factor_columns(all, false)
        .into_iter()
        .filter(|f| !free.contains(&f.name))
        .map(|f| format!("{} = {}", f.name, factor_value(first.record, f.name)))
        .collect();
    let note = format!(
        " (charts show {} of {} configurations: those with {}; the tables list all)",
        main.len(),
        recs.len(),
        if fixed.is_empty() { "the first record's settings".to_string() } else { fixed.join(", ") }
    );
    (main, note)
}

fn step_series(records: &[Insitu], side: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for r in records {
        let s = if side == "server" { &r.server } else { &r.client };
        for k in s.steps.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names.sort_by_key(|k| step_order(k));
    names
}

fn table(out: &mut String, head: &[String], rows: &[Vec<String>]) {
    out.push_str("<table class=\"sortable\"><thead><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", escape(h));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            let _ = write!(out, "<td>{}</td>", escape(c));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
}

fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(out, "<figure>{svg}<figcaption>{}</figcaption></figure>", escape(caption));
}

/// The whole report.
pub fn render(set: &ResultSet, opts: &ReportOptions) -> Result<String> {
    let recs = set.insitu();
    let recs = &recs;
    let cols = factor_columns(&set.records, false);
    let title = format!("pqtls report: {}", set.title());
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{STYLE}</style></head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    if let Some(m) = &set.manifest {
        if !m.description.is_empty() {
            let _ = writeln!(out, "<p>{}</p>", escape(&m.description));
        }
        let _ = writeln!(
            out,
            "<p class=\"note\">Experiment file <code>{}</code> (sha256 {}).</p>",
            escape(&m.experiment_file),
            escape(m.experiment_sha256.get(..16).unwrap_or(""))
        );
    }
    if let Some(s) = set.settings() {
        let _ = writeln!(out, "<p class=\"note\">Settings: {}.</p>", escape(&settings_sentence(s)));
    }
    if let Some(r) = set.records.first() {
        let e = &r.env;
        let libs = e.libraries.iter().map(|(k, v)| format!("{k}: {v}")).collect::<Vec<_>>().join("; ");
        let _ = writeln!(
            out,
            "<p class=\"note\">Measured with pqtls {} ({}), {}; CPU {} ({} CPUs), kernel {}{}{}.</p>",
            escape(&e.tool_version),
            escape(if e.tool_commit.is_empty() { "commit unknown" } else { &e.tool_commit }),
            escape(if libs.is_empty() { "libraries unknown" } else { &libs }),
            escape(&e.cpu_model),
            e.cpus,
            escape(&e.kernel),
            e.governor.as_ref().map_or(String::new(), |g| format!(", governor {}", escape(g))),
            e.smt.as_ref().map_or(String::new(), |g| format!(", SMT {}", escape(g))),
        );
    }
    for n in set.report_notices(&Html) {
        let _ = writeln!(out, "<p class=\"notice\">{}</p>", escape(&n));
    }
    let loads = crate::analysis::load::loads(set);
    let transfers = crate::analysis::transfer::transfers(set);
    if !recs.is_empty() || (loads.is_empty() && transfers.is_empty()) {
        insitu_sections(&mut out, set, recs, &cols, opts)?;
    }
    if !loads.is_empty() {
        load_sections(&mut out, &loads, recs)?;
    }
    if !transfers.is_empty() {
        transfer_sections(&mut out, &transfers)?;
    }
    if !set.failures.is_empty() {
        out.push_str(
            "<section id=\"not-measured\"><h2>Points not measured</h2>\n<p class=\"note\">Points of the run that \
             have no record, with the reason the run gave (e.g. a link the machine cannot emulate faithfully, refused \
             with its measured values).</p>",
        );
        load_table(&mut out, &crate::transfer_tables::failures(&set.failures));
        out.push_str("</section>\n");
    }
    let _ = write!(
        out,
        "<footer class=\"note\"><p>Generated by pqtls-export {} from {} saved records; self-contained (no network resources).</p></footer>\n\
         <script>{SCRIPT}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION"),
        set.records.len()
    );
    Ok(out)
}

fn load_table(out: &mut String, (head, rows): &crate::load_tables::Table) {
    table(out, head, rows);
}

/// The transfer records' sections: TTLB and TTFB against RTT (one chart each per panel), the
/// PQ − classical differences, the percentiles, measured vs predicted rounds, the verified
/// links and the emulator.
fn transfer_sections(out: &mut String, all: &[crate::Transfer]) -> Result<()> {
    use crate::analysis::transfer::{difference, panels, Metric};
    use crate::transfer_tables as t;
    let _ = writeln!(
        out,
        "<nav><a href=\"#transfer-ttlb\">Transfer: TTLB vs RTT</a><a href=\"#transfer-diff\">PQ − classical</a>\
         <a href=\"#transfer-percentiles\">Percentiles</a><a href=\"#transfer-rounds\">Round trips</a>\
         <a href=\"#transfer-links\">Links</a></nav>\n<p>{} transfer records.</p>",
        all.len()
    );
    let panels = panels(all);
    for (metric, section, what) in [
        (Metric::Ttlb, "transfer-ttlb", "time to last byte (connect → last response byte)"),
        (Metric::Ttfb, "transfer-ttfb", "time to first byte (connect → first response byte)"),
    ] {
        let _ = writeln!(out, "<section id=\"{section}\"><h2>Transfer: {} vs RTT</h2>", metric.name());
        for p in &panels {
            let series: Vec<charts::Curve> = p
                .lines
                .iter()
                .map(|l| charts::Curve {
                    name: l.configuration.clone(),
                    points: l.points.iter().filter_map(|(x, r)| t::p50_ms(r, metric).map(|y| (*x, y))).collect(),
                    upper: l.points.iter().filter_map(|(x, r)| t::p95_ms(r, metric).map(|y| (*x, y))).collect(),
                })
                .collect();
            if series.iter().all(|s| s.points.is_empty()) {
                let _ =
                    writeln!(out, "<p class=\"note\">{}: no point with an RTT and transfers.</p>", escape(&p.title));
                continue;
            }
            let svg = charts::lines(
                &format!("chart-transfer-{}-{}", metric.slug(), p.slug),
                &format!("{} vs RTT: {}", metric.name(), p.title),
                "RTT asked, ms",
                &format!("{}, ms", metric.name()),
                &series,
            )?;
            let more = if p.without_rtt > 0 {
                format!(" {} point(s) without an emulated delay are in the tables only.", p.without_rtt)
            } else {
                String::new()
            };
            figure(
                out,
                &svg,
                &format!(
                    "The {what}: median (solid, with markers) and p95 (dashed), one line per handshake \
                     configuration; {}.{more}",
                    p.title
                ),
            );
        }
        out.push_str("</section>\n");
    }
    out.push_str("<section id=\"transfer-diff\"><h2>Transfer: post-quantum − classical</h2>\n");
    let diffs = t::differences(all);
    if diffs.1.is_empty() {
        out.push_str(
            "<p class=\"note\">No post-quantum point has a classical counterpart (x25519 with classical chains, same \
             network, size and windows) in this set.</p>",
        );
    } else {
        for metric in Metric::BOTH {
            let rows: Vec<(String, f64, f64)> = all
                .iter()
                .filter_map(|r| {
                    let d = difference(r, all, metric)?;
                    // Short: the group and chain, mTLS when there was a client chain.
                    let mtls = if r.factor("client_chain") == "none" { "" } else { " mTLS" };
                    let label = format!(
                        "{} {}{mtls} · {} · iw {} · rtt {}",
                        r.factor("group"),
                        r.factor("chain"),
                        r.factor("response_size"),
                        t::initcwnd(r),
                        r.factor("rtt")
                    );
                    // Whiskers: the wider side of the interval.
                    let half = (d.delta_ns - d.low_ns).max(d.high_ns - d.delta_ns);
                    Some((label, d.delta_ns / 1e6, half / 1e6))
                })
                .collect();
            let svg = charts::delta_bars(
                &format!("chart-transfer-diff-{}", metric.slug()),
                &format!("{} median: post-quantum − classical (ms, ~95 % interval)", metric.name()),
                &format!("Δ {} median, ms", metric.name()),
                &rows,
            )?;
            figure(
                out,
                &svg,
                "Whiskers: the wider side of the ~95 % interval of the difference (the table gives both ends).",
            );
        }
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(t::DIFFERENCE_NOTE));
        load_table(out, &diffs);
    }
    out.push_str("</section>\n");
    out.push_str(
        "<section id=\"transfer-percentiles\"><h2>Transfer: TTFB and TTLB percentiles (ms)</h2>\n<p class=\"note\">\
         One new TLS connection per transfer, from connect; HdrHistogram percentiles.</p>",
    );
    load_table(out, &t::percentiles(all));
    out.push_str("</section>\n");
    out.push_str("<section id=\"transfer-rounds\"><h2>Transfer: round trips, measured vs predicted</h2>\n");
    let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(t::ROUNDS_NOTE));
    let rounds = t::rounds(all);
    if rounds.1.is_empty() {
        out.push_str("<p class=\"note\">No record has rounds.</p>");
    } else {
        load_table(out, &rounds);
    }
    out.push_str("</section>\n");
    out.push_str(
        "<section id=\"transfer-links\"><h2>Transfer: the verified links</h2>\n<p class=\"note\">Every link was \
         measured before its transfers (RTT probes, a bulk transfer for the rate, enough packets for a loss \
         interval) and compared with what was asked; the lateness is the delay emulator's during the \
         verification.</p>",
    );
    load_table(out, &t::link_table(all));
    let checks = t::checks(all);
    if !checks.1.is_empty() {
        out.push_str("<details><summary>Every check</summary>");
        load_table(out, &checks);
        out.push_str("</details>");
    }
    out.push_str("<h3>The delay emulator during the transfers</h3>");
    load_table(out, &t::emulator(all));
    out.push_str("</section>\n");
    Ok(())
}

/// The load records' sections: connections/s per configuration and thread count, the ratio to
/// the baseline, latency, CPU per handshake under load and in situ, errors, layers.
fn load_sections(out: &mut String, loads: &[crate::Load], insitu: &[Insitu]) -> Result<()> {
    use crate::analysis::load::{rate_groups, ratio, stacked_layers};
    use crate::load_tables as t;
    let _ = writeln!(
        out,
        "<nav><a href=\"#load-rate\">Load: connections/s</a><a href=\"#load-latency\">Latency</a>\
         <a href=\"#load-cpu\">CPU under load</a><a href=\"#load-errors\">Errors</a><a href=\"#load-layers\">Layers</a></nav>\n\
         <p>{} load records.</p>",
        loads.len()
    );
    out.push_str("<section id=\"load-rate\"><h2>Load: connections per second</h2>\n");
    let (groups, threads) = rate_groups(loads);
    let series: Vec<String> = threads.iter().map(|t| format!("{t} thread{}", if *t == 1 { "" } else { "s" })).collect();
    let index = |t: u64| threads.iter().position(|x| *x == t).unwrap_or(0);
    // A bar's value and the half-width of its interval, when known.
    type Value<'v> = &'v dyn Fn(&crate::Load) -> Option<(f64, Option<f64>)>;
    let bars = |f: Value| -> Vec<charts::BarGroup> {
        groups
            .iter()
            .map(|g| charts::BarGroup {
                label: g.configuration.clone(),
                bars: g.rows.iter().filter_map(|(th, r)| f(r).map(|(v, h)| (index(*th), v, h))).collect(),
            })
            .collect()
    };
    let svg = charts::grouped_bars(
        "chart-load-rate",
        "Connections per second by configuration and client threads",
        "connections/s (one request per connection; requests/s with keep-alive)",
        &bars(&|r| Some((r.connections_per_s(), None))),
        &series,
        None,
    )?;
    figure(out, &svg, "Each group is one configuration, one bar per number of load generator threads.");
    let svg = charts::grouped_bars(
        "chart-load-ratio",
        "Connections per second relative to x25519 + Ed25519",
        "× the baseline's connections/s (1 = as fast)",
        &bars(&|r| ratio(r, loads).map(|q| (q.ratio, q.half_width))),
        &series,
        Some(1.0),
    )?;
    figure(out, &svg, t::SPREAD_NOTE);
    load_table(out, &t::rates_by_threads(loads));
    load_table(out, &t::runs(loads));
    let sizes = t::sizes(loads);
    if !sizes.1.is_empty() {
        let _ = write!(out, "<h3>Handshake message sizes (bytes)</h3><p>One handshake of each run, read from its bytes with its secrets.</p>");
        load_table(out, &sizes);
    }
    out.push_str("</section>\n");
    out.push_str(
        "<section id=\"load-latency\"><h2>Load: latency (µs)</h2>\n<p class=\"note\">From the scheduled time (open \
         loop) or the connection's start to the last byte; HdrHistogram percentiles.</p>",
    );
    load_table(out, &t::latency(loads));
    out.push_str("</section>\n");
    out.push_str(
        "<section id=\"load-cpu\"><h2>Load: CPU per handshake (µs, mean)</h2>\n<p class=\"note\">Inside the TLS \
         stack's calls under load, next to the in-situ mean of the same handshake when this set holds it; the server \
         side when pqtls served.</p>",
    );
    load_table(out, &t::cpu(loads, insitu));
    out.push_str("</section>\n");
    out.push_str("<section id=\"load-errors\"><h2>Load: errors</h2>\n");
    let errors = t::errors(loads);
    if errors.1.is_empty() {
        out.push_str("<p class=\"note\">No errors.</p>");
    } else {
        load_table(out, &errors);
    }
    out.push_str("</section>\n");
    out.push_str("<section id=\"load-layers\"><h2>Load: layers</h2>\n");
    // By response size, then stack, terminator and group: the study's figure 3.
    let layered = crate::layers_tables::layered(loads);
    if layered.is_empty() {
        out.push_str("<p class=\"note\">No record has per-layer distributions (pqtls load --layers).</p>");
    } else {
        let names: Vec<String> = stacked_layers().iter().map(|n| n.to_string()).collect();
        for (q, pick) in [("p50", 0usize), ("p95", 1usize)] {
            let bars: Vec<Bar> = layered
                .iter()
                .map(|r| Bar {
                    label: t::layer_label(r),
                    segments: names
                        .iter()
                        .filter_map(|n| {
                            r.layers.get(n).map(|l| (n.clone(), [l.p50_ns, l.p95_ns][pick] as f64 / 1000.0))
                        })
                        .collect(),
                })
                .collect();
            let svg = charts::stacked_bars(
                &format!("chart-load-layers-{q}"),
                &format!("Time per layer at {q} (µs)"),
                &format!("µs ({q} of each layer)"),
                &bars,
                &names,
            )?;
            figure(
                out,
                &svg,
                &format!(
                    "Each layer's own {q}, stacked per configuration, response size and threads: TCP connect, the \
                     gap to the ClientHello, the TLS handshake, the gap to the request, HTTP to the last byte. \
                     Percentiles of layers do not add up to the latency's."
                ),
            );
        }
        load_table(out, &t::layers(loads));
        layered_tables(out, loads);
    }
    out.push_str("</section>\n");
    Ok(())
}

/// The layered study's tables: percentile profile, TLS change vs x25519, capture vs client.
fn layered_tables(out: &mut String, loads: &[crate::Load]) {
    use crate::layers_tables as l;
    out.push_str("<h3>Percentile profile of each layer (µs)</h3>\n");
    load_table(out, &l::profile(loads));
    let change = l::tls_change(loads);
    if !change.1.is_empty() {
        let _ = writeln!(out, "<h3>The TLS layer vs x25519 (µs)</h3>\n<p class=\"note\">{}</p>", l::TLS_CHANGE_NOTE);
        load_table(out, &change);
    }
    let diffs = l::capture_differences(loads);
    if !diffs.1.is_empty() {
        let _ = writeln!(out, "<h3>Capture vs client (µs)</h3>\n<p class=\"note\">{}</p>", l::CAPTURE_NOTE);
        load_table(out, &diffs);
    }
}

/// The in-situ records' sections.
fn insitu_sections(
    out: &mut String,
    set: &ResultSet,
    recs: &[Insitu],
    cols: &[&pqtls_core::factor::Factor],
    opts: &ReportOptions,
) -> Result<()> {
    let (shown, cut) = charted(recs, &set.records, opts);
    let cols = cols.to_vec();
    let _ = writeln!(
        out,
        "<nav><a href=\"#rules\">Rules of thumb</a><a href=\"#steps\">CPU per step</a><a href=\"#stacks\">Stacks</a><a href=\"#quantiles\">Quantiles</a>\
         <a href=\"#tail\">Signing tail</a><a href=\"#bytes\">Bytes</a><a href=\"#capacity\">Capacity</a><a href=\"#baseline\">Baseline</a></nav>\n\
         <p>{} configurations.</p>",
        recs.len()
    );

    // Rules of thumb.
    out.push_str("<section id=\"rules\"><h2>Rules of thumb</h2>\n");
    let rules = rules_of_thumb(recs, &opts.model, 40);
    if rules.is_empty() {
        out.push_str("<p class=\"note\">No pair of configurations differing in the group or the chain alone.</p>");
    } else {
        out.push_str("<ul>");
        for r in &rules {
            let _ = write!(out, "<li title=\"{} vs {}\">{}</li>", escape(&r.ids.0), escape(&r.ids.1), escape(&r.text));
        }
        out.push_str("</ul><p class=\"note\">Each sentence compares two configurations that differ in that factor only; hover for their ids.</p>");
    }
    out.push_str("</section>\n");

    // Stacked per-step CPU.
    out.push_str("<section id=\"steps\"><h2>CPU time per handshake step</h2>\n");
    for side in ["server", "client"] {
        let series = step_series(&shown, side);
        let bars: Vec<Bar> = shown
            .iter()
            .map(|r| {
                let s = if side == "server" { &r.server } else { &r.client };
                Bar {
                    label: chart_label(r, &cols),
                    segments: {
                        let mut v: Vec<(String, f64)> =
                            s.steps.iter().map(|(k, v)| (k.clone(), v.median / 1000.0)).collect();
                        v.sort_by_key(|(k, _)| step_order(k));
                        v
                    },
                }
            })
            .collect();
        let svg = charts::stacked_bars(
            &format!("chart-steps-{side}"),
            &format!("{side}: CPU per step (median, µs)"),
            "CPU time, µs (median of each step)",
            &bars,
            &series,
        )?;
        figure(
            out,
            &svg,
            &format!(
                "Each bar is one configuration's {side} side: the median CPU time of every handshake step, stacked{cut}. \
                 Medians of steps add up to about the median total."
            ),
        );
    }
    out.push_str("</section>\n");

    // The stacks side by side.
    out.push_str("<section id=\"stacks\"><h2>Stacks side by side</h2>\n");
    match across_stacks(&shown, MAX_STACK_SCENARIOS) {
        None => out.push_str("<p class=\"note\">No scenario was measured on more than one stack.</p>"),
        Some(cmp) => {
            let bars: Vec<Bar> = cmp
                .bars
                .iter()
                .map(|b| Bar {
                    label: chart_label(&b.record, &cols),
                    segments: b.segments.iter().map(|(k, v)| (k.clone(), v / 1000.0)).collect(),
                })
                .collect();
            let svg = charts::stacked_bars(
                "chart-stacks",
                "The same scenario on each stack: CPU per step (median, µs)",
                "CPU time, µs (client steps, then server steps)",
                &bars,
                &cmp.series,
            )?;
            let how = if cmp.by_role {
                "The records do not share a step vocabulary (records written before the canonical step names), so \
                 each side's steps are grouped by role: key share, key exchange, sign, verify chain, verify signature, \
                 other."
            } else {
                "Steps carry the same names on every stack, so they compare directly."
            };
            figure(
                out,
                &svg,
                &format!(
                    "{} scenario(s) measured on more than one stack, one bar per stack: the median CPU time of every \
                     client step, then every server step. {how}",
                    cmp.scenarios
                ),
            );
        }
    }
    out.push_str("</section>\n");

    // Quantile tables.
    let qk = quantile_keys(recs);
    out.push_str("<section id=\"quantiles\"><h2>Quantiles of handshake CPU time (µs)</h2>\n");
    let mut head = vec!["configuration".to_string()];
    head.extend(cols.iter().map(|f| f.name.to_string()));
    for side in ["client", "server", "total"] {
        head.extend(qk.iter().map(|k| format!("{side} {k}")));
    }
    head.push("n".into());
    let rows: Vec<Vec<String>> = recs
        .iter()
        .map(|r| {
            let mut row = vec![r.label().to_string()];
            row.extend(cols.iter().map(|f| r.factor(f.name).to_string()));
            for s in [&r.client.total_cpu_ns, &r.server.total_cpu_ns, &r.total_cpu_ns] {
                row.extend(qk.iter().map(|k| s.quantiles.get(k).map_or("–".into(), |v| us(*v))));
            }
            row.push(r.loops.measured.to_string());
            row
        })
        .collect();
    table(out, &head, &rows);
    for r in recs {
        let _ = write!(out, "<details><summary>{} — per step</summary>", escape(r.label()));
        let mut head = vec!["side".to_string(), "step".into()];
        head.extend(qk.iter().cloned());
        head.extend(["median 95 % CI".into(), "mean".into(), "max".into()]);
        let mut rows = Vec::new();
        for (side, s) in [("client", &r.client), ("server", &r.server)] {
            // Each step, then its sub-steps (`parent/stack step`, part of the parent's time).
            let total = "total".to_string();
            let mut lines: Vec<(&String, &Summary)> = Vec::new();
            for (name, sum) in &s.steps {
                lines.push((name, sum));
                let prefix = format!("{name}/");
                lines.extend(s.substeps.iter().filter(|(k, _)| k.starts_with(&prefix)));
            }
            lines.push((&total, &s.total_cpu_ns));
            for (name, sum) in lines {
                let mut row = vec![side.to_string(), name.clone()];
                row.extend(qk.iter().map(|k| sum.quantiles.get(k).map_or("–".into(), |v| us(*v))));
                row.push(format!("{} – {}", us(sum.median_ci[0]), us(sum.median_ci[1])));
                row.push(us(sum.mean));
                row.push(us(sum.max));
                rows.push(row);
            }
        }
        table(out, &head, &rows);
        let subs = if r.client.substeps.is_empty() && r.server.substeps.is_empty() {
            ""
        } else {
            " Rows <code>step/…</code> are the stack's own steps inside a canonical step (part of its time)."
        };
        let _ = writeln!(out, "<p class=\"note\"><code>{}</code>{subs}</p></details>", escape(r.id()));
    }
    out.push_str("</section>\n");

    // Tail of the signing step.
    out.push_str("<section id=\"tail\"><h2>Tail of the server's CertificateVerify signing</h2>\n");
    let mut picked: Vec<&Insitu> = Vec::new();
    for r in &shown {
        if picked.len() < 10 && !picked.iter().any(|p| same_chain(p, r) && p.factor(STACK) == r.factor(STACK)) {
            picked.push(r);
        }
    }
    let mut series = Vec::new();
    let mut sources = Vec::new();
    for r in picked {
        let Some(step) = signing_step(r) else { continue };
        let raw = set.samples(r.id()).and_then(|lines| {
            let v: Vec<f64> = lines.iter().filter_map(|l| l.server.steps.get(&step).map(|x| *x as f64)).collect();
            (!v.is_empty()).then_some(v)
        });
        let (pts, src) = match raw {
            Some(v) => {
                let n = v.len();
                (cdf_from_samples(v), format!("{n} raw samples"))
            }
            None => match r.server.steps.get(&step) {
                Some(s) => (cdf_from_quantiles(s), "quantiles only".to_string()),
                None => continue,
            },
        };
        sources.push(format!("{} ({step}): {src}", r.label()));
        series.push((format!("{} {}", r.factor(STACK), r.factor(CHAIN)), pts));
    }
    if series.is_empty() {
        out.push_str("<p class=\"note\">No record has a server signing step.</p>");
    } else {
        let svg = charts::cdf("chart-tail-sign", "Server CertificateVerify signing: CDF", "CPU time, µs", &series)?;
        figure(
            out,
            &svg,
            &format!(
                "Distribution of the server's signing step, one line per chain (first configuration of each chain). \
                 ML-DSA signing uses rejection sampling, so its tail is long. Sources: {}. Where only quantiles \
                 were kept, the line joins (min, 0), the quantiles and (max, 1).",
                sources.join("; ")
            ),
        );
    }
    out.push_str("</section>\n");

    // Bytes.
    out.push_str("<section id=\"bytes\"><h2>Bytes on the wire</h2>\n");
    let names = message_names(recs);
    let bars: Vec<Bar> = shown
        .iter()
        .map(|r| Bar {
            label: chart_label(r, &cols),
            segments: names.iter().filter_map(|n| r.bytes.messages.get(n).map(|b| (n.clone(), *b as f64))).collect(),
        })
        .collect();
    let svg = charts::stacked_bars("chart-bytes-messages", "Handshake message sizes (bytes)", "bytes", &bars, &names)?;
    figure(out, &svg, &format!("Size of every handshake message including its 4-byte header{cut}."));
    let dirs = vec!["client→server".to_string(), "server→client".to_string()];
    let bars: Vec<Bar> = shown
        .iter()
        .map(|r| Bar {
            label: chart_label(r, &cols),
            segments: vec![
                (dirs[0].clone(), r.bytes.client_to_server as f64),
                (dirs[1].clone(), r.bytes.server_to_client as f64),
            ],
        })
        .collect();
    let svg = charts::stacked_bars("chart-bytes-direction", "Record-layer bytes per direction", "bytes", &bars, &dirs)?;
    figure(
        out,
        &svg,
        "TLS record-layer bytes sent in each direction for one handshake (TCP/IP overhead not included).",
    );
    let mut head = vec!["configuration".to_string()];
    head.extend(cols.iter().map(|f| f.name.to_string()));
    head.extend(names.iter().cloned());
    head.extend(["client→server".into(), "server→client".into(), "records c→s".into(), "records s→c".into()]);
    let rows: Vec<Vec<String>> = recs
        .iter()
        .map(|r| {
            let mut row = vec![r.label().to_string()];
            row.extend(cols.iter().map(|f| r.factor(f.name).to_string()));
            row.extend(names.iter().map(|n| r.bytes.messages.get(n).map_or("–".into(), |b| b.to_string())));
            row.extend([
                r.bytes.client_to_server.to_string(),
                r.bytes.server_to_client.to_string(),
                r.bytes.records_client_to_server.to_string(),
                r.bytes.records_server_to_client.to_string(),
            ]);
            row
        })
        .collect();
    table(out, &head, &rows);
    out.push_str("</section>\n");

    // Capacity.
    let m = &opts.model;
    out.push_str("<section id=\"capacity\"><h2>Capacity and latency model</h2>\n");
    // Up to 12 lines: the first charted configuration of each chain, then others.
    let mut lines: Vec<&Insitu> = Vec::new();
    for r in &shown {
        if lines.len() < 12 && !lines.iter().any(|l| same_chain(l, r)) {
            lines.push(r);
        }
    }
    for r in &shown {
        if lines.len() < 12 && !lines.iter().any(|l| l.id() == r.id()) {
            lines.push(r);
        }
    }
    let series: Vec<(String, Vec<(f64, f64)>)> = lines
        .iter()
        .map(|r| (chart_label(r, &cols), capacity(**r, m)))
        .map(|(label, c)| (label, c.links.iter().map(|l| (l.gbps, l.sessions_per_s)).collect()))
        .collect();
    let svg = charts::log_lines(
        "chart-capacity",
        "New sessions per second a link carries",
        "link rate, Gbit/s",
        "sessions/s (bottleneck direction)",
        &series,
    )?;
    let more = if recs.len() > series.len() {
        format!(" ({} of {} configurations: one per chain first; the table lists all)", series.len(), recs.len())
    } else {
        String::new()
    };
    figure(out, &svg, &format!("Handshakes per second the link can carry in its bottleneck direction{more}."));
    let (head, rows) = crate::capacity_table(recs, m);
    table(out, &head, &rows);
    out.push_str("<p><b>Assumptions.</b></p><ul>");
    for a in m.assumptions() {
        let _ = write!(out, "<li>{}</li>", escape(&a));
    }
    out.push_str("</ul></section>\n");

    // Baseline.
    out.push_str("<section id=\"baseline\"><h2>Against the baseline</h2>\n");
    let deltas = baseline_deltas(set, opts)?;
    if deltas.is_empty() {
        out.push_str("<p class=\"note\">No baseline: the records carry none and none was chosen (pqtls report --baseline ID).</p>");
    } else {
        let charted_ids: Vec<&str> = shown.iter().map(|r| r.id()).collect();
        let rows: Vec<(String, f64, f64)> = deltas
            .iter()
            .filter(|(r, _)| charted_ids.contains(&r.id()))
            .map(|(r, d)| (chart_label(r, &cols), d.total.delta / 1000.0, d.total.half_width / 1000.0))
            .collect();
        let svg = charts::delta_bars(
            "chart-baseline",
            "Change of handshake CPU vs the baseline (10 %-trimmed mean, µs, ~95 % interval)",
            "Δ CPU time, µs (client + server)",
            &rows,
        )?;
        figure(out, &svg, "Difference of the 10 %-trimmed mean handshake CPU time (client + server) from each configuration's baseline — the trimmed mean, not the median, because ML-DSA signing is multimodal and its median jumps between modes from run to run (docs/benchmarks-history.md §5.6); the whiskers are the ~95 % interval of the difference.");
        let head: Vec<String> =
            ["configuration", "baseline", "Δ total µs", "± µs", "Δ %", "Δ client µs", "Δ server µs"]
                .map(String::from)
                .to_vec();
        let rows: Vec<Vec<String>> = deltas
            .iter()
            .map(|(r, d)| {
                vec![
                    r.label().to_string(),
                    d.label.clone(),
                    us(d.total.delta),
                    us(d.total.half_width),
                    crate::pct(d.total.relative),
                    us(d.client_total.delta),
                    us(d.server_total.delta),
                ]
            })
            .collect();
        table(out, &head, &rows);
    }
    out.push_str("</section>\n");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::csv::tests::{record, sample_set};

    #[test]
    fn report_has_every_chart_and_no_external_resource() {
        let set = sample_set();
        let html =
            render(&set, &ReportOptions { baseline: Some(set.records[0].id.clone()), ..Default::default() }).unwrap();
        for id in CHART_IDS {
            assert!(html.contains(&format!("<svg id=\"{id}\" class=\"pqtls-chart\"")), "{id}");
        }
        assert!(!html.contains("src=\"http") && !html.contains("href=\"http"));
        assert!(html.contains("write_certificate_verify"));
        // Both stacks use the same (schema-1 OpenSSL) names here: compared step by step.
        assert!(html.contains("Steps carry the same names on every stack"), "stack comparison caption");
        assert!(html.contains("server write_certificate_verify"), "stack comparison series");
        assert!(!html.contains("inside a canonical step"), "no sub-steps in these records");
        // Chart labels name the stack, which the configuration label leaves out.
        assert!(html.contains(">\nx25519 p256:p256 · rustls\n<") && html.contains(">\nx25519 p256:p256 · openssl\n<"));
    }

    #[test]
    fn signing_step_prefers_a_timed_sign_operation() {
        let mut rec = sample_set().records.remove(0);
        assert_eq!(signing_step(&Insitu::of(&rec).unwrap()).as_deref(), Some("write_certificate_verify"));
        rec.insitu_mut().unwrap().server.steps.insert("sign".into(), Summary::default());
        assert_eq!(signing_step(&Insitu::of(&rec).unwrap()).as_deref(), Some("sign"));
    }

    #[test]
    fn stacks_of_different_vocabularies_compare_by_role() {
        let openssl = record(&[("group", "x25519"), ("chain", "p256:p256")]);
        let mut rustls = record(&[("stack", "rustls"), ("group", "x25519"), ("chain", "p256:p256")]);
        // A schema-1 rustls record: API calls and timed crypto operations.
        let r = rustls.insitu_mut().unwrap();
        let server_sign = r.server.steps.shift_remove("write_certificate_verify").unwrap();
        r.server.steps.insert("sign".into(), server_sign.clone());
        let html = render(&ResultSet::from_records(vec![openssl, rustls]), &ReportOptions::default()).unwrap();
        assert!(html.contains("<svg id=\"chart-stacks\""));
        assert!(html.contains("grouped by role"), "caption says the steps are grouped by role");
        assert!(html.contains("server sign") && html.contains("client verify chain"), "role series");
    }

    #[test]
    fn a_factor_away_from_its_default_is_a_column() {
        let memory = record(&[("group", "x25519"), ("chain", "p256:p256")]);
        let tcp = record(&[("group", "x25519"), ("chain", "p256:p256"), ("transport", "tcp")]);
        let set = ResultSet::from_records(vec![memory, tcp]);
        let html = render(&set, &ReportOptions::default()).unwrap();
        assert!(html.contains("<th>configuration</th><th>transport</th><th>client p15</th>"), "quantile table");
        assert!(html.contains("<td>x25519 p256:p256 over tcp</td><td>tcp</td>"), "the tcp record's row");
        assert!(!html.contains("<th>stack</th>") && !html.contains("<th>clock</th>"), "factors at their default");
    }
}
