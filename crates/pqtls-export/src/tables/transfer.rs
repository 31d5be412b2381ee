//! The transfer tables (the numbers come from [`crate::analysis::transfer`]; times in ms):
//! the one `pqtls transfer` prints ([`summary`], [`notes`]), which the Markdown report shows
//! too, and the reports' percentiles, differences, round trips, links and emulator.

use super::{
    load::{client_hello_on_the_wire, result_notes},
    ms, Table,
};
use crate::analysis::transfer::{
    difference, handshake_rounds, links, rounds_cell, rounds_disagree, tcp_of, Difference, Metric, TransferView,
    ROUND_LAYERS,
};
use pqtls_core::link::show;

/// One row per point, as `pqtls transfer` prints it: stack, configuration (the record's
/// label), the verified link (median RTT, rate on the wire), the transfers, TTFB and TTLB
/// percentiles (ms), and the round trips measured / predicted of TLS, HTTP and the whole
/// transfer. Numbers from the fourth column on.
pub fn summary(all: &[TransferView]) -> Table {
    let row = |t: &TransferView| {
        let link = format!(
            "{} ms, {}",
            ms(t.link.rtt.median_ns as f64),
            t.link.rate.as_ref().map_or("unlimited".into(), |m| format!("{:.1} Mbit/s", m.wire_bits_per_s / 1e6))
        );
        let mut row = vec![t.factor("stack").to_string(), t.label().to_string(), link, t.ttlb.count.to_string()];
        for p in [&t.ttfb, &t.ttlb] {
            row.extend([p.p50_ns, p.p75_ns, p.p95_ns, p.p99_ns].map(|v| ms(v as f64)));
        }
        for layer in ["tls", "http", "total"] {
            row.push(t.rounds_of(layer).map_or("–".into(), |k| format!("{:.2}/{:.2}", k.measured, k.expected())));
        }
        row
    };
    let head = [
        "stack",
        "configuration",
        "link (verified RTT, rate)",
        "n",
        "TTFB p50",
        "p75",
        "p95",
        "p99",
        "TTLB p50",
        "p75",
        "p95",
        "p99 ms",
        "rounds tls",
        "http",
        "total (measured/predicted)",
    ];
    (head.map(String::from).to_vec(), all.iter().map(row).collect())
}

/// What `pqtls transfer` says under its table: each point's notes and errors by kind, and the
/// delay emulator's packets and lateness when it was ours (NFQUEUE).
pub fn notes(all: &[TransferView]) -> Vec<String> {
    let mut out = Vec::new();
    for t in all {
        out.extend(result_notes(t.label(), &t.load));
        let e = &t.emulator;
        if e.kind == "nfqueue" {
            out.push(format!(
                "{}: emulator {} packets, lateness p50 {} p99 {} µs",
                t.label(),
                e.packets,
                e.lateness.p50_ns / 1000,
                e.lateness.p99_ns / 1000
            ));
        }
    }
    out
}

/// The initial windows of a point: `10`, or `10/40` (client/server) when they differ.
pub(crate) fn initcwnd(t: &TransferView) -> String {
    let (c, s) = t.initcwnd();
    let show = |x: Option<u64>| x.map_or("default".to_string(), |v| v.to_string());
    if c == s {
        show(c)
    } else {
        format!("{}/{}", show(c), show(s))
    }
}

/// The point's place in the matrix besides its configuration: size, initcwnd, RTT.
fn point_cells(t: &TransferView) -> Vec<String> {
    vec![t.factor("response_size").to_string(), initcwnd(t), t.factor("rtt").to_string()]
}

/// TTFB and TTLB percentiles per point (ms), with the transfers' count.
pub(crate) fn percentiles(all: &[TransferView]) -> Table {
    let mut head: Vec<String> =
        ["configuration", "size", "initcwnd", "RTT", "bandwidth", "loss", "n"].map(String::from).to_vec();
    for m in Metric::BOTH {
        for q in ["p50", "p75", "p95", "p99"] {
            head.push(format!("{} {q}", m.name()));
        }
    }
    head.push("errors".into());
    let rows = all
        .iter()
        .map(|t| {
            let mut row = vec![t.configuration()];
            row.extend(point_cells(t));
            row.push(t.factor("bandwidth").to_string());
            row.push(t.factor("loss").to_string());
            row.push(t.ttlb.count.to_string());
            for m in Metric::BOTH {
                let p = m.percentiles(t);
                if p.count == 0 {
                    row.extend(std::iter::repeat_n("–".to_string(), 4));
                } else {
                    row.extend([p.p50_ns, p.p75_ns, p.p95_ns, p.p99_ns].map(|v| ms(v as f64)));
                }
            }
            row.push(t.error_count().to_string());
            row
        })
        .collect();
    (head, rows)
}

/// `+12.34 [11.90 – 12.80]` (ms).
pub(crate) fn delta_cell(d: &Difference) -> String {
    format!("{}{} [{} – {}]", if d.delta_ns >= 0.0 { "+" } else { "" }, ms(d.delta_ns), ms(d.low_ns), ms(d.high_ns))
}

/// `1.234 [1.201 – 1.270]`.
pub(crate) fn ratio_cell(d: &Difference) -> String {
    if d.ratio.is_finite() {
        format!("{:.3} [{:.3} – {:.3}]", d.ratio, d.ratio_low, d.ratio_high)
    } else {
        "–".into()
    }
}

/// The PQ − classical difference of the medians per non-classical point that has a classical
/// counterpart: TTLB and TTFB, each as a difference (ms) and a ratio with ~95 % intervals.
pub(crate) fn differences(all: &[TransferView]) -> Table {
    let head = [
        "configuration",
        "size",
        "initcwnd",
        "RTT",
        "classical",
        "TTLB p50",
        "classical TTLB p50",
        "Δ TTLB ms [95 %]",
        "TTLB ×",
        "Δ TTFB ms [95 %]",
        "TTFB ×",
        "verdict",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for t in all {
        let Some(d) = difference(t, all, Metric::Ttlb) else { continue };
        let f = difference(t, all, Metric::Ttfb);
        let classical_p50 = all.iter().find(|b| b.id() == d.baseline_id).map_or(0, |b| b.ttlb.p50_ns);
        let mut row = vec![t.configuration()];
        row.extend(point_cells(t));
        row.push(d.baseline_configuration.clone());
        row.push(ms(t.ttlb.p50_ns as f64));
        row.push(ms(classical_p50 as f64));
        row.push(delta_cell(&d));
        row.push(ratio_cell(&d));
        row.push(f.as_ref().map_or("–".into(), delta_cell));
        row.push(f.as_ref().map_or("–".into(), ratio_cell));
        row.push(
            if !d.significant() {
                "within noise"
            } else if d.delta_ns > 0.0 {
                "PQ slower"
            } else {
                "PQ faster"
            }
            .into(),
        );
        rows.push(row);
    }
    (head, rows)
}

pub(crate) const TCP_VS_QUIC_NOTE: &str = "Each QUIC point next to the TCP point with the same configuration, link, \
    size and windows (over QUIC, initcwnd is quinn's initial window: N × 1,200 bytes). Handshake rounds: TCP's connect \
    and TLS layers, QUIC's handshake (first Initial → handshake done), measured / predicted by each transport's model. \
    PQ − classical: the difference of the TTLB medians against the classical point of the same transport \
    (\"–\" for classical points), with its ~95 % interval.";

/// QUIC vs TCP per point that has both: TTFB and TTLB medians and their ratio, the handshake's
/// round trips, and the PQ − classical difference of each transport.
pub(crate) fn tcp_vs_quic(all: &[TransferView]) -> Table {
    let head = [
        "configuration",
        "size",
        "initcwnd",
        "RTT",
        "TTFB p50 TCP",
        "QUIC",
        "QUIC/TCP",
        "TTLB p50 TCP",
        "QUIC",
        "QUIC/TCP",
        "handshake rounds TCP",
        "QUIC",
        "PQ − classical TTLB TCP",
        "QUIC",
    ]
    .map(String::from)
    .to_vec();
    let rounds = |t: &TransferView| handshake_rounds(t).map_or("–".into(), |(m, p)| format!("{m:.2}/{p:.2}"));
    let pq = |t: &TransferView| difference(t, all, Metric::Ttlb).map_or("–".into(), |d| delta_cell(&d));
    let ratio = |q: u64, t: u64| if t > 0 { format!("{:.3}", q as f64 / t as f64) } else { "–".into() };
    let mut rows = Vec::new();
    for q in all {
        let Some(t) = tcp_of(q, all) else { continue };
        let mut row = vec![t.configuration()];
        row.extend(point_cells(&t));
        row.extend([ms(t.ttfb.p50_ns as f64), ms(q.ttfb.p50_ns as f64), ratio(q.ttfb.p50_ns, t.ttfb.p50_ns)]);
        row.extend([ms(t.ttlb.p50_ns as f64), ms(q.ttlb.p50_ns as f64), ratio(q.ttlb.p50_ns, t.ttlb.p50_ns)]);
        row.extend([rounds(&t), rounds(q), pq(&t), pq(q)]);
        rows.push(row);
    }
    (head, rows)
}

/// Measured vs predicted round trips per layer (`measured / predicted (round trips)`, `⚠`
/// beyond [`ROUNDS_TOLERANCE`]), with the flights' sizes the prediction used, what the first
/// ClientHello took on the wire (TCP segments, QUIC datagrams) and the largest difference of
/// the point.
pub(crate) fn rounds(all: &[TransferView]) -> Table {
    let mut head: Vec<String> = ["configuration", "size", "initcwnd", "RTT"].map(String::from).to_vec();
    head.extend(ROUND_LAYERS.iter().map(|l| format!("{l} rounds")));
    head.extend(
        ["server flight B", "client flight B", "ClientHello on the wire", "response B", "max |error|", "disagrees"]
            .map(String::from),
    );
    let rows = all
        .iter()
        .map(|t| (t, t.rounds()))
        .filter(|(_, rounds)| !rounds.is_empty())
        .map(|(t, rounds)| {
            let mut row = vec![t.configuration()];
            row.extend(point_cells(t));
            for l in ROUND_LAYERS {
                row.push(match rounds.iter().find(|r| r.layer == l) {
                    Some(r) => {
                        format!("{}{}", rounds_cell(r), if rounds_disagree(r) { " ⚠" } else { "" })
                    }
                    None => "–".into(),
                });
            }
            row.push(t.model.server_flight_bytes.to_string());
            row.push(t.model.client_flight_bytes.to_string());
            row.push(client_hello_on_the_wire(&t.load));
            row.push(t.model.response_bytes.to_string());
            let worst = rounds.iter().map(|r| r.error().abs()).fold(0.0, f64::max);
            row.push(format!("{worst:.2}"));
            let bad: Vec<&str> = rounds.iter().filter(|r| rounds_disagree(r)).map(|r| r.layer.as_str()).collect();
            row.push(if bad.is_empty() { "–".into() } else { bad.join(", ") });
            row
        })
        .collect();
    (head, rows)
}

/// How rounds are counted.
pub(crate) const ROUNDS_NOTE: &str = "Measured rounds: (median time of the layer − serialisation of its bytes at the \
    link's rate) / the verified median RTT. Predicted: the round-trip model's time of the layer, the same \
    arithmetic (in brackets: the round trips it counts) — Linux's slow start from the routes' initial windows, \
    grown only by window-limited flights, the client's receive window, serialisation on the critical path and \
    the handshake CPU (pqtls_core::roundtrip, docs/netlab.md). ⚠ marks a layer more than a quarter of a round \
    trip from the prediction.";

/// One row per verified link: asked vs measured, verdict, the emulator during verification,
/// and how the lab was built.
pub(crate) fn link_table(all: &[TransferView]) -> Table {
    let head = [
        "link asked",
        "records",
        "initcwnd",
        "RTT measured (p5–p95)",
        "RTT accepted",
        "rate measured",
        "loss c→s [95 %]",
        "loss s→c [95 %]",
        "verdict",
        "lateness p50 / p99 / max µs",
        "delay backend",
        "congestion control",
        "tcp_rmem",
        "tcp_wmem",
        "tbf burst / limit B",
    ]
    .map(String::from)
    .to_vec();
    let rows = links(all)
        .into_iter()
        .map(|(t, n, iws)| {
            let l = &t.link;
            let rtt = if l.rtt.probes_received == 0 {
                "–".to_string()
            } else {
                format!("{} ({} – {}) ms", ms(l.rtt.median_ns as f64), ms(l.rtt.p5_ns as f64), ms(l.rtt.p95_ns as f64))
            };
            let check = |what: &str| l.checks.iter().find(|c| c.what == what);
            let accepted = check("rtt").map_or("–".into(), |c| {
                format!("{} – {} ({})", show("rtt", c.accepted_low), show("rtt", c.accepted_high), c.rule)
            });
            let rate = l.rate.as_ref().map_or("–".into(), |r| format!("{:.2} Mbit/s", r.wire_bits_per_s / 1e6));
            let loss = |d: &pqtls_core::link::LossDirection| {
                if d.sent == 0 {
                    "–".into()
                } else {
                    format!(
                        "{} [{} – {}] of {}",
                        show("loss", d.fraction),
                        show("loss", d.interval[0]),
                        show("loss", d.interval[1]),
                        d.sent
                    )
                }
            };
            let verdict = if l.accepted {
                "accepted".to_string()
            } else if l.checks.is_empty() {
                "not verified".to_string()
            } else {
                format!("refused: {}", l.refusal())
            };
            let e = &l.emulator.lateness;
            let lateness = if e.packets == 0 {
                "–".into()
            } else {
                format!("{:.0} / {:.0} / {:.0}", e.p50_ns as f64 / 1e3, e.p99_ns as f64 / 1e3, e.max_ns as f64 / 1e3)
            };
            let dash = |s: &str| if s.is_empty() { "–".to_string() } else { s.to_string() };
            let tbf = match (l.setup.tbf_burst_bytes, l.setup.tbf_limit_bytes) {
                (None, None) => "–".into(),
                (b, lim) => format!(
                    "{} / {}",
                    b.map_or("–".into(), |x| x.to_string()),
                    lim.map_or("–".into(), |x| x.to_string())
                ),
            };
            vec![
                l.asked.to_string(),
                n.to_string(),
                iws.join(", "),
                rtt,
                accepted,
                rate,
                loss(&l.loss.client_to_server),
                loss(&l.loss.server_to_client),
                verdict,
                lateness,
                dash(&l.setup.delay_backend),
                dash(&l.setup.congestion_control),
                dash(&l.setup.tcp_rmem),
                dash(&l.setup.tcp_wmem),
                tbf,
            ]
        })
        .collect();
    (head, rows)
}

/// Every check of every verified link.
pub(crate) fn checks(all: &[TransferView]) -> Table {
    let head =
        ["link asked", "check", "asked", "measured", "accepted", "rule", "ok", "hint"].map(String::from).to_vec();
    let mut rows = Vec::new();
    for (t, _, _) in links(all) {
        for c in &t.link.checks {
            rows.push(vec![
                t.link.asked.to_string(),
                c.what.clone(),
                show(&c.what, c.asked),
                show(&c.what, c.measured),
                format!("{} – {}", show(&c.what, c.accepted_low), show(&c.what, c.accepted_high)),
                c.rule.clone(),
                if c.ok { "yes" } else { "NO" }.into(),
                c.hint.clone().unwrap_or_default(),
            ]);
        }
    }
    (head, rows)
}

/// The delay emulator during each point's transfers.
pub(crate) fn emulator(all: &[TransferView]) -> Table {
    let head = [
        "configuration",
        "size",
        "initcwnd",
        "RTT",
        "emulator",
        "packets",
        "late p50 µs",
        "late p99 µs",
        "late p99.9 µs",
        "late max µs",
        "queue drops",
    ]
    .map(String::from)
    .to_vec();
    let rows = all
        .iter()
        .map(|t| {
            let e = &t.emulator;
            let us = |v: u64| if e.packets == 0 { "–".to_string() } else { format!("{:.0}", v as f64 / 1e3) };
            let mut row = vec![t.configuration()];
            row.extend(point_cells(t));
            row.extend([
                e.kind.clone(),
                e.packets.to_string(),
                us(e.lateness.p50_ns),
                us(e.lateness.p99_ns),
                us(e.lateness.p999_ns),
                us(e.lateness.max_ns),
                e.queue_dropped.map_or("–".into(), |d| d.to_string()),
            ]);
            row
        })
        .collect();
    (head, rows)
}

/// How the differences' intervals are made.
pub(crate) const DIFFERENCE_NOTE: &str = "Each post-quantum point against the classical point (x25519 with classical \
    chains) with the same network, size and windows. Δ is the difference of the medians; its ~95 % interval combines \
    the order-statistic intervals of the two medians (the histogram's values at quantiles ½ ± 1.96·√(¼/n)) in \
    quadrature; × is the ratio of the medians with the relative intervals combined the same way. \"within noise\": \
    the interval of Δ contains 0.";

/// TTLB / TTFB p50 of a point, ms (for charts).
pub(crate) fn p50_ms(t: &TransferView, m: Metric) -> Option<f64> {
    let p = m.percentiles(t);
    (p.count > 0).then(|| p.p50_ns as f64 / 1e6)
}

/// p95, ms (for charts).
pub(crate) fn p95_ms(t: &TransferView, m: Metric) -> Option<f64> {
    let p = m.percentiles(t);
    (p.count > 0).then(|| p.p95_ns as f64 / 1e6)
}

/// How the staircase tables read (docs/auth-bytes.md §2).
pub(crate) const STAIRCASE_NOTE: &str = "Series of transfer points that differ only in the server's authentication \
bytes (auth_bytes: Certificate + CertificateVerify). A step: the handshake's round trips grow by one. Measured: between \
the largest size that did not pay it and the smallest that did (the handshake's measured rounds, rounded). Model: the \
largest size the round-trip model sends without it, byte by byte, from the series' own inputs. Agrees: the model's \
position within one TCP segment / QUIC datagram of the measured bracket.";

/// One row per step of each staircase series: measured bracket, the model's bytes before the
/// next round trip, and whether they agree within a segment or datagram.
pub(crate) fn staircase_steps(series: &[crate::analysis::staircase::Series]) -> Table {
    let head = [
        "series",
        "step (rounds)",
        "measured: last without",
        "measured: first with",
        "model: bytes before",
        "unit B",
        "agrees",
    ]
    .map(String::from)
    .to_vec();
    let opt = |v: Option<u64>| v.map_or("–".to_string(), |b| b.to_string());
    let rows = series
        .iter()
        .flat_map(|s| {
            s.steps.iter().map(move |st| {
                vec![
                    s.name.clone(),
                    format!("{} → {}", st.rounds - 1, st.rounds),
                    opt(st.measured_below),
                    opt(st.measured_above),
                    opt(st.model_bytes),
                    s.unit_bytes.to_string(),
                    match st.agrees(s.unit_bytes) {
                        Some(true) => "yes".into(),
                        Some(false) => "no ⚠".into(),
                        None => "–".into(),
                    },
                ]
            })
        })
        .collect();
    (head, rows)
}

/// TTFB (p50, ms) and the handshake's rounds (measured / model) per authentication size, one
/// column per series.
pub(crate) fn staircase_points(series: &[crate::analysis::staircase::Series]) -> Table {
    let mut head = vec!["auth bytes".to_string()];
    head.extend(series.iter().map(|s| format!("{}: TTFB ms (rounds)", s.name)));
    let mut sizes: Vec<u64> = series.iter().flat_map(|s| s.points.iter().map(|p| p.auth_bytes)).collect();
    sizes.sort_unstable();
    sizes.dedup();
    let rows = sizes
        .into_iter()
        .map(|b| {
            let mut row = vec![b.to_string()];
            row.extend(series.iter().map(|s| match s.points.iter().find(|p| p.auth_bytes == b) {
                Some(p) => {
                    format!("{:.1} ({:.2}/{})", p.ttfb_p50_ns as f64 / 1e6, p.measured_rounds, p.model_rounds)
                }
                None => "–".into(),
            }));
            row
        })
        .collect();
    (head, rows)
}
