//! A self-contained HTML report: inline CSS, inline SVG charts, a few lines of inline
//! JavaScript (sortable tables); no network resource of any kind.
//!
//! Chart ids (stable, for tests and links): `chart-steps-server`, `chart-steps-client`,
//! `chart-stacks` (when a scenario was measured on more than one stack), `chart-tail-sign`,
//! `chart-bytes-messages`, `chart-bytes-direction`, `chart-capacity`, `chart-baseline`
//! (when deltas exist); for load records ([`LOAD_CHART_IDS`]) `chart-load-rate`,
//! `chart-load-ratio` (when some record is a closed loop: open loops all stand at their target),
//! `chart-load-layers-p50` and `-p95` (when records have layers); for
//! transfer records ([`TRANSFER_CHART_IDS`]) `chart-transfer-ttlb-<panel>` and
//! `chart-transfer-ttfb-<panel>` per panel, `chart-transfer-diff-ttlb` and `-ttfb`. A set of
//! several kinds gives one report with a part per kind (in-situ, load, transfer); a set of one
//! kind, that kind's part only.

mod insitu;
mod load;
mod resident;
mod transfer;

use crate::analysis::factor_columns;
use crate::charts::Bar;
use crate::markdown::settings_sentence;
use crate::{Exporter, ReportOptions, ResultSet};
use pqtls_core::factor::Kind;
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

/// Ids of the load records' charts (the rate charts only when some record is a closed loop,
/// the layer charts only when records have layers).
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
        &[Kind::Insitu, Kind::Load, Kind::Transfer, Kind::Resident]
    }
    fn render(&self, set: &ResultSet, opts: &ReportOptions) -> Result<String> {
        render(set, opts)
    }
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
h1{margin:16px 0 6px;font-size:26px}h2{border-bottom:1px solid #ccc;padding-bottom:4px;margin-top:36px}
table{border-collapse:collapse;font-size:13px;margin:8px 0;max-width:100%}
th,td{border:1px solid #ddd;padding:3px 6px;text-align:right;overflow-wrap:anywhere}th{background:#f3f3f3;cursor:pointer}
#answer .question{margin:4px 0;color:#444;font-size:14px}#answer .sentences p{margin:4px 0;font-size:15px}
.answer-grid{display:flex;flex-wrap:wrap;gap:8px 16px;align-items:flex-start}.answer-grid>div{flex:1 1 480px;min-width:0}
#answer table{font-size:12.5px;margin:6px 0}#answer th,#answer td{overflow-wrap:normal}#answer td+td{white-space:nowrap}
#answer .note{margin:2px 0}
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

/// A sortable table: its header and rows.
fn table(out: &mut String, (head, rows): &crate::tables::Table) {
    out.push_str("<table class=\"sortable\"><thead><tr>");
    for h in head {
        let _ = write!(out, "<th>{}</th>", escape(h).replace('\n', "<br>"));
    }
    out.push_str("</tr></thead><tbody>");
    for r in rows {
        out.push_str("<tr>");
        for c in r {
            // A line break inside a cell (e.g. a figure and its share) is kept.
            let _ = write!(out, "<td>{}</td>", escape(c).replace('\n', "<br>"));
        }
        out.push_str("</tr>");
    }
    out.push_str("</tbody></table>\n");
}

fn figure(out: &mut String, svg: &str, caption: &str) {
    let _ = writeln!(out, "<figure>{svg}<figcaption>{}</figcaption></figure>", escape(caption));
}

/// An assessment's answer, first (the first screen): the question, the sentences, the answer
/// table and the split side by side, what the predicted figures rest on; then the split's
/// chart, the user's endpoint, the commands.
fn assessment(out: &mut String, set: &ResultSet, a: &crate::analysis::assessment::Assessment) -> Result<()> {
    use crate::tables::assessment as t;
    let answers = a.answers(set);
    let stacks: Vec<String> = set
        .records
        .first()
        .map(|r| r.env.libraries.values().map(|v| crate::tables::short_version(v)).collect())
        .unwrap_or_default();
    let _ = writeln!(
        out,
        "<section id=\"answer\"><p class=\"question\">Your link: {}; initcwnd {}. {}Every figure: from → to \
         (change ± its ~95 % interval).</p>",
        escape(&t::link(a)),
        a.deployment.initcwnd,
        if stacks.is_empty() { String::new() } else { format!("Stacks: {}. ", escape(&stacks.join(", "))) },
    );
    out.push_str("<div class=\"sentences\">");
    for line in t::headline(a, &answers) {
        let _ = write!(out, "<p>{}</p>", escape(&line));
    }
    out.push_str("</div>\n<div class=\"answer-grid\"><div>");
    table(out, &t::answers(a, &answers));
    out.push_str("</div>");
    if let Some(split) = t::split(a, &answers) {
        out.push_str("<div>");
        table(out, &split);
        out.push_str(
            "<p class=\"note\">The split: the key exchange's change is that of the configuration with only the \
             group moved to the target's, the certificates' that of the one with only the chain moved; the rest is \
             their interaction (and any other factor the target changes). Under each change, its share of the whole.</p>\
             </div>",
        );
    }
    out.push_str("</div>\n");
    for line in t::no_split(&answers) {
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(&line));
    }
    // A part that failed is a warning next to the figures it leaves out; a part not run by
    // design (no root, no nginx) is a note saying what the figures rest on.
    for (part, why) in &a.not_run {
        let class = if part.starts_with("part ") { "notice" } else { "note" };
        let _ = writeln!(out, "<p class=\"{class}\">Not run: {} — {}</p>", escape(part), escape(why));
    }
    out.push_str("</section>\n");
    let helps = t::what_would_help(a, &answers);
    if !helps.is_empty() {
        out.push_str("<section id=\"helps\"><h2>What would help</h2>");
        for line in &helps {
            let _ = write!(out, "<p class=\"note\">{}</p>", escape(line));
        }
        out.push_str("</section>\n");
    }
    let shares = t::split_shares(a, &answers);
    if !shares.is_empty() {
        let bars: Vec<Bar> = shares
            .iter()
            .map(|(label, v)| Bar {
                label: label.clone(),
                segments: ["key exchange", "certificates", "rest"]
                    .iter()
                    .zip(v)
                    .map(|(n, x)| (n.to_string(), *x))
                    .collect(),
            })
            .collect();
        let series: Vec<String> = ["key exchange", "certificates", "rest"].map(String::from).to_vec();
        let svg = crate::charts::diverging_bars(
            "chart-split",
            "Where the change comes from: share of each change, %",
            "% of the change from → to",
            &bars,
            &series,
        )?;
        out.push_str("<section id=\"split\">");
        figure(
            out,
            &svg,
            "Each bar is one change (a figure on one stack) split into the key exchange's share, the \
             certificates' and the rest; a share below 0 pulls the other way. Changes under a tenth of the \
             starting value, or within their interval, are in the table only.",
        );
        out.push_str("</section>\n");
    }
    if let Some(note) = t::endpoint_note(a) {
        let _ = writeln!(out, "<h2 id=\"endpoint\">Your endpoint</h2>\n<p class=\"note\">{}</p>", escape(&note));
        table(out, &t::endpoint(&a.endpoint_rows(set)));
    }
    out.push_str("<details><summary>The commands that made these records (each reproduces its part)</summary><ul>");
    for (part, command) in &a.commands {
        let _ = write!(out, "<li>{}: <code>{}</code></li>", escape(part), escape(command));
    }
    out.push_str("</ul></details>\n");
    Ok(())
}

/// The environment, once: the tool, every library's whole version and build line, the CPU and
/// kernel (of the first record; `pqtls check` tells when records differ).
fn environment(out: &mut String, set: &ResultSet) {
    let Some(r) = set.records.first() else { return };
    let e = &r.env;
    out.push_str("<section id=\"environment\"><h2>Environment</h2><ul class=\"note\">");
    let _ = write!(
        out,
        "<li>pqtls {} ({})</li>",
        escape(&e.tool_version),
        escape(if e.tool_commit.is_empty() { "commit unknown" } else { &e.tool_commit })
    );
    for (k, v) in &e.libraries {
        let _ = write!(out, "<li>{}: <code>{}</code></li>", escape(k), escape(v));
    }
    let _ = write!(
        out,
        "<li>CPU {} ({} CPUs), kernel {}{}{}</li></ul></section>\n",
        escape(&e.cpu_model),
        e.cpus,
        escape(&e.kernel),
        e.governor.as_ref().map_or(String::new(), |g| format!(", governor {}", escape(g))),
        e.smt.as_ref().map_or(String::new(), |g| format!(", SMT {}", escape(g))),
    );
}

/// The whole report.
pub fn render(set: &ResultSet, opts: &ReportOptions) -> Result<String> {
    let recs = set.insitu();
    let recs = &recs;
    let insitu_records: Vec<pqtls_core::record::Record> =
        set.records.iter().filter(|r| r.kind() == Kind::Insitu).cloned().collect();
    let cols = factor_columns(&insitu_records, false);
    let title = match &opts.assessment {
        Some(a) => format!(
            "From {} to {}: what it costs",
            a.from.spec,
            a.to.iter().map(|c| c.spec.as_str()).collect::<Vec<_>>().join(", ")
        ),
        None => format!("pqtls report: {}", set.title()),
    };
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\">\
         <title>{}</title><style>{STYLE}</style></head>\n<body>\n<h1>{}</h1>\n",
        escape(&title),
        escape(&title)
    );
    if let Some(a) = &opts.assessment {
        assessment(&mut out, set, a)?;
        out.push_str("<h2 id=\"evidence\">The evidence</h2>\n");
    }
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
        let _ = writeln!(out, "<p class=\"note\">Settings: {}.</p>", escape(&settings_sentence(s, &set.kinds())));
    }
    if let Some(r) = set.records.first() {
        let libs: Vec<String> = r.env.libraries.values().map(|v| crate::tables::short_version(v)).collect();
        let _ = writeln!(
            out,
            "<p class=\"note\">Measured with pqtls {}{} (<a href=\"#environment\">environment</a>).</p>",
            escape(&r.env.tool_version),
            escape(&if libs.is_empty() { String::new() } else { format!(" on {}", libs.join(", ")) }),
        );
    }
    let notices = set.report_notices(&Html, opts);
    if !notices.is_empty() {
        out.push_str("<section id=\"warnings\">\n");
        for n in notices {
            let _ = writeln!(out, "<p class=\"notice\">{}</p>", escape(&n));
        }
        out.push_str("</section>\n");
    }
    let contents = crate::contents(set);
    if !contents.is_empty() {
        out.push_str("<nav id=\"contents\"><p>This report has records of several kinds, a part each:</p><ul>");
        for (id, what) in &contents {
            let _ = write!(out, "<li><a href=\"#{id}\">{}</a></li>", escape(what));
        }
        out.push_str("</ul></nav>\n");
    }
    let loads = crate::analysis::load::loads(set);
    let transfers = crate::analysis::transfer::transfers(set);
    let residents: Vec<crate::ResidentView> = set.records.iter().filter_map(crate::ResidentView::of).collect();
    let (timed, counted) = crate::analysis::by_unit(recs);
    if !timed.is_empty() || (counted.is_empty() && loads.is_empty() && transfers.is_empty() && residents.is_empty()) {
        insitu::sections(&mut out, set, &timed, &cols, opts, false)?;
    }
    if !counted.is_empty() {
        insitu::counted_sections(&mut out, set, &timed, &counted, &cols, opts)?;
    }
    if !loads.is_empty() {
        load::sections(&mut out, &loads, recs)?;
    }
    if !transfers.is_empty() {
        transfer::sections(&mut out, &transfers)?;
    }
    if !residents.is_empty() {
        resident::sections(&mut out, &residents);
    }
    if !set.failures.is_empty() {
        out.push_str(
            "<section id=\"not-measured\"><h2>Points not measured</h2>\n<p class=\"note\">Points of the run that \
             have no record, with the reason the run gave (e.g. a link the machine cannot emulate faithfully, refused \
             with its measured values).</p>",
        );
        table(&mut out, &crate::tables::failures(&set.failures));
        out.push_str("</section>\n");
    }
    environment(&mut out, set);
    let _ = write!(
        out,
        "<footer class=\"note\"><p>Generated by pqtls-export {} from {} saved records; self-contained (no network resources).</p></footer>\n\
         <script>{SCRIPT}</script>\n</body></html>\n",
        env!("CARGO_PKG_VERSION"),
        set.records.len()
    );
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::InsituView;
    use crate::csv::tests::{record, sample_set};
    use pqtls_core::stats::Summary;

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
        assert_eq!(signing_step(&InsituView::of(&rec).unwrap()).as_deref(), Some("write_certificate_verify"));
        rec.insitu_mut().unwrap().server.steps.insert("sign".into(), Summary::default());
        assert_eq!(signing_step(&InsituView::of(&rec).unwrap()).as_deref(), Some("sign"));
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
