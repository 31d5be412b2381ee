//! The transfer records' part of the HTML report: TTLB and TTFB against RTT, PQ − classical,
//! percentiles, round trips, the verified links.

use super::{escape, figure, table};
use crate::analysis::transfer::{difference, handshake_rounds, panels, tcp_of, Metric, TransferView};
use crate::charts;
use crate::tables::transfer as t;
use pqtls_core::Result;
use std::fmt::Write;

/// The transfer records' sections: TTLB and TTFB against RTT (one chart each per panel), the
/// PQ − classical differences, the percentiles, measured vs predicted rounds, the verified
/// links and the emulator.
pub(super) fn sections(out: &mut String, all: &[TransferView]) -> Result<()> {
    let _ = writeln!(
        out,
        "<nav><a href=\"#transfer-ttlb\">Transfer: TTLB vs RTT</a><a href=\"#transfer-diff\">PQ − classical</a>\
         <a href=\"#transfer-percentiles\">Percentiles</a><a href=\"#transfer-rounds\">Round trips</a>\
         <a href=\"#transfer-links\">Links</a></nav>\n<p>{} transfer records.</p>",
        all.len()
    );
    against_rtt(out, all)?;
    differences(out, all)?;
    out.push_str(
        "<section id=\"transfer-percentiles\"><h2>Transfer: TTFB and TTLB percentiles (ms)</h2>\n<p class=\"note\">\
         One new TLS connection per transfer, from connect; HdrHistogram percentiles.</p>",
    );
    table(out, &t::percentiles(all));
    out.push_str("</section>\n");
    let versus = t::tcp_vs_quic(all);
    if !versus.1.is_empty() {
        out.push_str("<section id=\"transfer-quic\"><h2>Transfer: TCP + TLS vs QUIC</h2>\n");
        tcp_vs_quic_charts(out, all)?;
        let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(t::TCP_VS_QUIC_NOTE));
        table(out, &versus);
        out.push_str("</section>\n");
    }
    out.push_str("<section id=\"transfer-rounds\"><h2>Transfer: round trips, measured vs predicted</h2>\n");
    let _ = writeln!(out, "<p class=\"note\">{}</p>", escape(t::ROUNDS_NOTE));
    let rounds = t::rounds(all);
    if rounds.1.is_empty() {
        out.push_str("<p class=\"note\">No record has rounds.</p>");
    } else {
        table(out, &rounds);
    }
    out.push_str("</section>\n");
    out.push_str(
        "<section id=\"transfer-links\"><h2>Transfer: the verified links</h2>\n<p class=\"note\">Every link was \
         measured before its transfers (RTT probes, a bulk transfer for the rate, enough packets for a loss \
         interval) and compared with what was asked; the lateness is the delay emulator's during the \
         verification.</p>",
    );
    table(out, &t::link_table(all));
    let checks = t::checks(all);
    if !checks.1.is_empty() {
        out.push_str("<details><summary>Every check</summary>");
        table(out, &checks);
        out.push_str("</details>");
    }
    out.push_str("<h3>The delay emulator during the transfers</h3>");
    table(out, &t::emulator(all));
    out.push_str("</section>\n");
    Ok(())
}

/// TTLB and TTFB against the RTT: one chart each per panel.
fn against_rtt(out: &mut String, all: &[TransferView]) -> Result<()> {
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
    Ok(())
}

/// TCP vs QUIC per point that has both: the handshake's measured round trips and the median
/// TTFB, one group per point, a bar per transport.
fn tcp_vs_quic_charts(out: &mut String, all: &[TransferView]) -> Result<()> {
    let pairs: Vec<(TransferView, TransferView)> = all.iter().filter_map(|q| Some((tcp_of(q, all)?, *q))).collect();
    let series = vec!["TCP + TLS".to_string(), "QUIC".to_string()];
    let groups = |value: &dyn Fn(&TransferView) -> Option<f64>| -> Vec<charts::BarGroup> {
        pairs
            .iter()
            .map(|(tcp, quic)| charts::BarGroup {
                label: format!("{} · {} · rtt {}", tcp.configuration(), tcp.factor("response_size"), tcp.factor("rtt")),
                bars: [tcp, quic].iter().enumerate().filter_map(|(i, t)| Some((i, value(t)?, None))).collect(),
            })
            .collect()
    };
    let svg = charts::grouped_bars(
        "chart-transfer-quic-rounds",
        "Handshake round trips, measured: TCP (connect + TLS) vs QUIC",
        "round trips (median time − serialisation) / RTT",
        &groups(&|t| handshake_rounds(t).map(|(measured, _)| measured)),
        &series,
        None,
    )?;
    figure(out, &svg, "QUIC's handshake carries the ClientHello in its first datagram; a chain over 3 × the client's Initial bytes waits for the client's answer.");
    let svg = charts::grouped_bars(
        "chart-transfer-quic-ttfb",
        "TTFB median: TCP + TLS vs QUIC (ms)",
        "TTFB p50, ms",
        &groups(&|t| t::p50_ms(t, Metric::Ttfb)),
        &series,
        None,
    )?;
    figure(out, &svg, "Connect (TCP) or first Initial (QUIC) → first response byte.");
    Ok(())
}

/// The PQ − classical differences of the medians: a chart per metric and the table.
fn differences(out: &mut String, all: &[TransferView]) -> Result<()> {
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
        table(out, &diffs);
    }
    out.push_str("</section>\n");
    Ok(())
}
