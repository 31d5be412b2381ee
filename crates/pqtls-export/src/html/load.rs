//! The load records' part of the HTML report: connections/s, latency, CPU under load, errors,
//! layers.

use super::{figure, table};
use crate::analysis::load::{question, rate_groups, ratio, stacked_layers, LoadView, Part, Question};
use crate::analysis::{varying_label, InsituView};
use crate::charts::{self, Bar};
use crate::tables::load as t;
use pqtls_core::Result;
use std::fmt::Write;

/// The load records' sections, led by the question they answer ([`Question`]): a closed loop's
/// connections/s first, then latency, CPU under load, errors and layers; an open loop's layers
/// and latency first, then CPU, the rates (achieved vs target, without charts of bars that all
/// stand at the target), errors.
pub(super) fn sections(out: &mut String, loads: &[LoadView], insitu: &[InsituView]) -> Result<()> {
    let question = question(loads);
    out.push_str("<nav>");
    for (i, part) in question.parts().into_iter().enumerate() {
        let _ = write!(out, "<a href=\"#{}\">{}{}</a>", part.id(), if i == 0 { "Load: " } else { "" }, part.name());
    }
    let _ = writeln!(out, "</nav>\n<p>{} load records.{}</p>", loads.len(), question.lead());
    for part in question.parts() {
        match part {
            Part::Rates => rates(out, loads, question)?,
            Part::Latency => latency(out, loads),
            Part::Cpu => cpu(out, loads, insitu),
            Part::Errors => errors(out, loads),
            Part::Layers => layers(out, loads)?,
        }
    }
    Ok(())
}

fn latency(out: &mut String, loads: &[LoadView]) {
    out.push_str(
        "<section id=\"load-latency\"><h2>Load: latency (µs)</h2>\n<p class=\"note\">From the scheduled time (open \
         loop) or the connection's start to the last byte; HdrHistogram percentiles.</p>",
    );
    table(out, &t::latency(loads));
    out.push_str("</section>\n");
}

fn cpu(out: &mut String, loads: &[LoadView], insitu: &[InsituView]) {
    out.push_str(
        "<section id=\"load-cpu\"><h2>Load: CPU per handshake (µs, mean)</h2>\n<p class=\"note\">Inside the TLS \
         stack's calls under load, next to the in-situ mean of the same handshake when this set holds it; the server \
         side when pqtls served.</p>",
    );
    table(out, &t::cpu(loads, insitu));
    out.push_str("</section>\n");
}

fn errors(out: &mut String, loads: &[LoadView]) {
    out.push_str("<section id=\"load-errors\"><h2>Load: errors</h2>\n");
    let errors = t::errors(loads);
    if errors.1.is_empty() {
        out.push_str("<p class=\"note\">No errors.</p>");
    } else {
        table(out, &errors);
    }
    out.push_str("</section>\n");
}

/// Connections per second: by configuration and thread count, relative to the baseline, the
/// runs and the handshake message sizes.
fn rates(out: &mut String, loads: &[LoadView], question: Question) -> Result<()> {
    out.push_str("<section id=\"load-rate\"><h2>Load: connections per second</h2>\n");
    if question == Question::Latency {
        out.push_str(
            "<p class=\"note\">Open loops: every configuration was offered its target rate, so connections/s is \
             the target's unless a row says otherwise (achieved vs target below; a miss is warned about above).</p>",
        );
        table(out, &t::rates_by_threads(loads));
        table(out, &t::runs(loads));
        sizes(out, loads);
        out.push_str("</section>\n");
        return Ok(());
    }
    let (groups, threads) = rate_groups(loads);
    let series: Vec<String> = threads.iter().map(|t| format!("{t} thread{}", if *t == 1 { "" } else { "s" })).collect();
    let index = |t: u64| threads.iter().position(|x| *x == t).unwrap_or(0);
    // A bar's value and the half-width of its interval, when known.
    type Value<'v> = &'v dyn Fn(&LoadView) -> Option<(f64, Option<f64>)>;
    let among: Vec<&pqtls_core::record::Record> = loads.iter().map(|r| r.record).collect();
    let bars = |f: Value| -> Vec<charts::BarGroup> {
        groups
            .iter()
            .map(|g| charts::BarGroup {
                label: g
                    .rows
                    .first()
                    .map_or_else(|| g.configuration.clone(), |(_, r)| varying_label(r.record, &among, &["threads"])),
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
    // The ratios to x25519 + Ed25519 (the throughput study's baseline): only when some row has
    // that baseline to compare with; no empty chart.
    if loads.iter().any(|r| ratio(r, loads).is_some()) {
        let svg = charts::grouped_bars(
            "chart-load-ratio",
            "Connections per second relative to x25519 + Ed25519",
            "× the baseline's connections/s (1 = as fast)",
            &bars(&|r| ratio(r, loads).map(|q| (q.ratio, q.half_width))),
            &series,
            Some(1.0),
        )?;
        figure(out, &svg, t::SPREAD_NOTE);
    }
    table(out, &t::rates_by_threads(loads));
    table(out, &t::runs(loads));
    sizes(out, loads);
    out.push_str("</section>\n");
    Ok(())
}

fn sizes(out: &mut String, loads: &[LoadView]) {
    let sizes = t::sizes(loads);
    if !sizes.1.is_empty() {
        let _ = write!(out, "<h3>Handshake message sizes (bytes)</h3><p>One handshake of each run, read from its bytes with its secrets.</p>");
        table(out, &sizes);
    }
}

/// The layers: each layer's p50 and p95 stacked per configuration, and the layered study's
/// tables.
fn layers(out: &mut String, loads: &[LoadView]) -> Result<()> {
    out.push_str("<section id=\"load-layers\"><h2>Load: layers</h2>\n");
    // By response size, then stack, terminator and group: the study's figure 3.
    let layered = crate::tables::layers::layered(loads);
    if layered.is_empty() {
        out.push_str("<p class=\"note\">No record has per-layer distributions (pqtls load --layers).</p>");
    } else {
        let names: Vec<String> = stacked_layers().iter().map(|n| n.to_string()).collect();
        let among: Vec<&pqtls_core::record::Record> = layered.iter().map(|r| r.record).collect();
        for (q, pick) in [("p50", 0usize), ("p95", 1usize)] {
            let bars: Vec<Bar> = layered
                .iter()
                .map(|r| Bar {
                    label: varying_label(r.record, &among, &[]),
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
        table(out, &t::layers(loads));
        layered_tables(out, loads);
    }
    out.push_str("</section>\n");
    Ok(())
}

/// The layered study's tables: percentile profile, TLS change vs x25519, capture vs client.
fn layered_tables(out: &mut String, loads: &[LoadView]) {
    use crate::tables::layers as l;
    out.push_str("<h3>Percentile profile of each layer (µs)</h3>\n");
    table(out, &l::profile(loads));
    let change = l::tls_change(loads);
    if !change.1.is_empty() {
        let _ = writeln!(out, "<h3>The TLS layer vs x25519 (µs)</h3>\n<p class=\"note\">{}</p>", l::TLS_CHANGE_NOTE);
        table(out, &change);
    }
    let diffs = l::capture_differences(loads);
    if !diffs.1.is_empty() {
        let _ = writeln!(out, "<h3>Capture vs client (µs)</h3>\n<p class=\"note\">{}</p>", l::CAPTURE_NOTE);
        table(out, &diffs);
    }
}
