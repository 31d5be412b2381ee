//! The in-situ records' part of the HTML report: rules of thumb, CPU per step, the stacks side
//! by side, quantiles, the signing tail, bytes, capacity, the baseline.

use super::{escape, figure, table, MAX_STACK_SCENARIOS};
use crate::analysis::capacity::capacity;
use crate::analysis::roles::{across_stacks, signing_step, step_order};
use crate::analysis::{
    always_labelled, baseline_deltas, factor_columns, factor_value, rules::rules_of_thumb, same_except, InsituView,
    STACK,
};
use crate::charts::{self, Bar};
use crate::tables::insitu::message_names;
use crate::tables::insitu::{self as tables, Substeps};
use crate::tables::{pct, us};
use crate::{ReportOptions, ResultSet};
use pqtls_core::factor::{Factor, FACTORS};
use pqtls_core::stats::Summary;
use pqtls_core::Result;
use std::fmt::Write;

/// The factor the signing tail and the capacity chart draw one line per value of.
const CHAIN: &str = "chain";

/// What every in-situ section reads.
struct Part<'s, 'a> {
    set: &'s ResultSet,
    recs: &'s [InsituView<'a>],
    /// The configurations drawn in charts ([`charted`]), and what captions say of the others.
    shown: Vec<InsituView<'a>>,
    cut: String,
    cols: Vec<&'static Factor>,
    opts: &'s ReportOptions,
}

/// The in-situ records' sections.
pub(super) fn sections(
    out: &mut String,
    set: &ResultSet,
    recs: &[InsituView],
    cols: &[&'static Factor],
    opts: &ReportOptions,
    counts: bool,
) -> Result<()> {
    let (shown, cut) = charted(recs, &set.records, opts);
    let _ = writeln!(
        out,
        "<nav><a href=\"#rules\">Rules of thumb</a><a href=\"#steps\">CPU per step</a><a href=\"#stacks\">Stacks</a><a href=\"#quantiles\">Quantiles</a>\
         <a href=\"#tail\">Signing tail</a><a href=\"#bytes\">Bytes</a><a href=\"#capacity\">Capacity</a><a href=\"#baseline\">Baseline</a></nav>\n\
         <p>{} configurations.</p>",
        recs.len()
    );
    let p = Part { set, recs, shown, cut, cols: cols.to_vec(), opts };
    type Section = fn(&mut String, &Part) -> Result<()>;
    // (section, whether it turns CPU time into sessions per second: rules of thumb and
    // capacity, which counts do not make).
    let all: [(Section, bool); 8] = [
        (rules, true),
        (steps, false),
        (stacks, false),
        (quantiles, false),
        (tail, false),
        (bytes, false),
        (capacity_section, true),
        (baseline, false),
    ];
    for (section, per_second) in all {
        if !(counts && per_second) {
            section(out, &p)?;
        }
    }
    Ok(())
}

/// The in-situ sections of instruction-count records, after the time records' (their
/// element ids prefixed `count-`, so both can be in one page), and time per instruction
/// where a configuration was measured both ways.
pub(super) fn counted_sections(
    out: &mut String,
    set: &ResultSet,
    timed: &[InsituView],
    counted: &[InsituView],
    cols: &[&'static Factor],
    opts: &ReportOptions,
) -> Result<()> {
    out.push_str(
        "<section id=\"counts\"><h2>Instruction counts</h2><p class=\"note\">The same sections in instructions \
         retired (clock = instructions; docs/instructions.md): thousands of instructions where time would be µs.</p>\
         </section>\n",
    );
    let mut part = String::new();
    sections(&mut part, set, counted, cols, opts, true)?;
    let part = crate::tables::in_counts(&part).replace("id=\"", "id=\"count-").replace("href=\"#", "href=\"#count-");
    out.push_str(&part);
    let pairs = crate::tables::insitu::per_instruction(timed, counted);
    if !pairs.1.is_empty() {
        out.push_str(
            "<section id=\"per-instruction\"><h2>Time per instruction</h2><p class=\"note\">Configurations measured \
             both ways: CPU time / instructions (10 %-trimmed means), the cycles per instruction implied at the CPU's \
             clock rate.</p>\n",
        );
        table(out, &pairs);
        out.push_str("</section>\n");
    }
    Ok(())
}

/// A record's name in charts: its label, then the values of the column factors the label
/// does not show (e.g. the stack, when the set has several), so no two bars read alike.
fn chart_label(r: &InsituView, cols: &[&Factor]) -> String {
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

fn same_chain(a: &InsituView, b: &InsituView) -> bool {
    a.factor(CHAIN) == b.factor(CHAIN)
}

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
    recs: &[InsituView<'a>],
    all: &[pqtls_core::record::Record],
    opts: &ReportOptions,
) -> (Vec<InsituView<'a>>, String) {
    let max = opts.max_chart_configs.max(1);
    if recs.len() <= max {
        return (recs.to_vec(), String::new());
    }
    let Some(first) = recs.first() else { return (Vec::new(), String::new()) };
    let free: Vec<&str> = FACTORS.iter().filter(|f| always_labelled(f) || f.name == STACK).map(|f| f.name).collect();
    let main: Vec<InsituView> =
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

fn step_series(records: &[InsituView], side: &str) -> Vec<String> {
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

/// Rules of thumb: sentences comparing two configurations that differ in one factor.
fn rules(out: &mut String, p: &Part) -> Result<()> {
    let (recs, opts) = (p.recs, p.opts);
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
    Ok(())
}

/// CPU per handshake step: one stacked bar per configuration and side.
fn steps(out: &mut String, p: &Part) -> Result<()> {
    let (shown, cols, cut) = (&p.shown[..], &p.cols[..], &p.cut);
    out.push_str("<section id=\"steps\"><h2>CPU time per handshake step</h2>\n");
    for side in ["server", "client"] {
        let series = step_series(shown, side);
        let bars: Vec<Bar> = shown
            .iter()
            .map(|r| {
                let s = if side == "server" { &r.server } else { &r.client };
                Bar {
                    label: chart_label(r, cols),
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
    Ok(())
}

/// The same scenario on each stack, step by step (or by role).
fn stacks(out: &mut String, p: &Part) -> Result<()> {
    let (shown, cols) = (&p.shown[..], &p.cols[..]);
    out.push_str("<section id=\"stacks\"><h2>Stacks side by side</h2>\n");
    match across_stacks(shown, MAX_STACK_SCENARIOS) {
        None => out.push_str("<p class=\"note\">No scenario was measured on more than one stack.</p>"),
        Some(cmp) => {
            let bars: Vec<Bar> = cmp
                .bars
                .iter()
                .map(|b| Bar {
                    label: chart_label(&b.record, cols),
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
    Ok(())
}

/// Quantiles of the handshake CPU time, per configuration and, folded, per step.
fn quantiles(out: &mut String, p: &Part) -> Result<()> {
    let (recs, cols) = (p.recs, &p.cols[..]);
    out.push_str("<section id=\"quantiles\"><h2>Quantiles of handshake CPU time (µs)</h2>\n");
    table(out, &tables::quantiles(recs, cols));
    for r in recs {
        let _ = write!(out, "<details><summary>{} — per step</summary>", escape(r.label()));
        table(out, &tables::steps(r, Substeps::Listed));
        let subs = if r.client.substeps.is_empty() && r.server.substeps.is_empty() {
            ""
        } else {
            " Rows <code>step/…</code> are the stack's own steps inside a canonical step (part of its time)."
        };
        let _ = writeln!(out, "<p class=\"note\"><code>{}</code>{subs}</p></details>", escape(r.id()));
        if let (Some(t), Some(note)) = (tables::memory(r), tables::memory_note(r)) {
            let _ = write!(out, "<details><summary>{} — heap per step</summary>", escape(r.label()));
            table(out, &t);
            let _ = writeln!(out, "<p class=\"note\">{}</p></details>", escape(&note));
        }
    }
    if let Some(t) = tables::quic(recs, cols) {
        out.push_str("<h3>QUIC: datagrams and packets</h3>\n");
        table(out, &t);
    }
    if let Some(t) = tables::tcp_vs_quic(recs) {
        out.push_str("<h3>TCP vs QUIC</h3>\n");
        table(out, &t);
    }
    if let Some(t) = tables::memory_totals(recs, cols) {
        out.push_str("<h3>Heap per handshake</h3>\n");
        table(out, &t);
    }
    out.push_str("</section>\n");
    Ok(())
}

/// The tail of the server's signing step: a CDF per chain, from raw samples when kept.
fn tail(out: &mut String, p: &Part) -> Result<()> {
    let (set, shown) = (p.set, &p.shown[..]);
    out.push_str("<section id=\"tail\"><h2>Tail of the server's CertificateVerify signing</h2>\n");
    let mut picked: Vec<&InsituView> = Vec::new();
    for r in shown {
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
    Ok(())
}

/// Bytes on the wire: per message and per direction.
fn bytes(out: &mut String, p: &Part) -> Result<()> {
    let (recs, shown, cols, cut) = (p.recs, &p.shown[..], &p.cols[..], &p.cut);
    out.push_str("<section id=\"bytes\"><h2>Bytes on the wire</h2>\n");
    let names = message_names(recs);
    let bars: Vec<Bar> = shown
        .iter()
        .map(|r| Bar {
            label: chart_label(r, cols),
            segments: names.iter().filter_map(|n| r.bytes.messages.get(n).map(|b| (n.clone(), *b as f64))).collect(),
        })
        .collect();
    let svg = charts::stacked_bars("chart-bytes-messages", "Handshake message sizes (bytes)", "bytes", &bars, &names)?;
    figure(out, &svg, &format!("Size of every handshake message including its 4-byte header{cut}."));
    let dirs = vec!["client→server".to_string(), "server→client".to_string()];
    let bars: Vec<Bar> = shown
        .iter()
        .map(|r| Bar {
            label: chart_label(r, cols),
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
    table(out, &tables::bytes(recs, cols));
    out.push_str("</section>\n");
    Ok(())
}

/// The capacity and latency model: sessions per second a link carries, and its assumptions.
fn capacity_section(out: &mut String, p: &Part) -> Result<()> {
    let (recs, shown, cols, opts) = (p.recs, &p.shown[..], &p.cols[..], p.opts);
    let m = &opts.model;
    out.push_str("<section id=\"capacity\"><h2>Capacity and latency model</h2>\n");
    // Up to 12 lines: the first charted configuration of each chain, then others.
    let mut lines: Vec<&InsituView> = Vec::new();
    for r in shown {
        if lines.len() < 12 && !lines.iter().any(|l| same_chain(l, r)) {
            lines.push(r);
        }
    }
    for r in shown {
        if lines.len() < 12 && !lines.iter().any(|l| l.id() == r.id()) {
            lines.push(r);
        }
    }
    let series: Vec<(String, Vec<(f64, f64)>)> = lines
        .iter()
        .map(|r| (chart_label(r, cols), capacity(**r, m)))
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
    let residents: Vec<crate::ResidentView> = p.set.records.iter().filter_map(crate::ResidentView::of).collect();
    let _ = write!(out, "<p>{}</p>", escape(m.convention.sentence()));
    table(out, &crate::tables::insitu::capacity(recs, m, &residents));
    out.push_str("<p><b>Assumptions.</b></p><ul>");
    for a in m.assumptions() {
        let _ = write!(out, "<li>{}</li>", escape(&a));
    }
    out.push_str("</ul></section>\n");
    Ok(())
}

/// Deltas against the baseline.
fn baseline(out: &mut String, p: &Part) -> Result<()> {
    let (set, opts, shown, cols) = (p.set, p.opts, &p.shown[..], &p.cols[..]);
    out.push_str("<section id=\"baseline\"><h2>Against the baseline</h2>\n");
    let deltas = baseline_deltas(set, opts)?;
    if deltas.is_empty() {
        out.push_str("<p class=\"note\">No baseline: the records carry none and none was chosen (pqtls report --baseline ID).</p>");
    } else {
        let charted_ids: Vec<&str> = shown.iter().map(|r| r.id()).collect();
        let rows: Vec<(String, f64, f64)> = deltas
            .iter()
            .filter(|(r, _)| charted_ids.contains(&r.id()))
            .map(|(r, d)| (chart_label(r, cols), d.total.delta / 1000.0, d.total.half_width / 1000.0))
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
                    pct(d.total.relative),
                    us(d.client_total.delta),
                    us(d.server_total.delta),
                ]
            })
            .collect();
        table(out, &(head, rows));
    }
    out.push_str("</section>\n");
    Ok(())
}
