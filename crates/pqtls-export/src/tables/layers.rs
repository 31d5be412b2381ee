//! The layers' tables (issue 10): the percentile profile of each layer, the TLS layer's
//! change against x25519 with a bootstrap interval, and the capture-vs-client differences of
//! `measurement = "layers"` records — in the reports and, the profile and the differences,
//! under `pqtls load --layers` — with the line on each run's capture ([`capture_line`]); and
//! the layers of a packet capture that `pqtls layers` prints ([`capture_layers`]).

use super::{ms, signed_us, us, Table};
use crate::analysis::load::{baseline_of, stacked_layers, LoadView};
use indexmap::IndexMap;
use pqtls_core::crosscheck::CaptureCheck;
use pqtls_core::load::Latency;
use pqtls_core::stats::{self, MedianChange};
use pqtls_core::timeline::LAYER_NAMES;

/// Records with layers, in the order of the layered study's figures: by response size, then
/// stack, terminator and group.
pub(crate) fn layered<'a>(all: &[LoadView<'a>]) -> Vec<LoadView<'a>> {
    let mut v: Vec<LoadView> = all.iter().filter(|r| !r.layers.is_empty()).copied().collect();
    let size = |r: &LoadView| pqtls_core::units::bytes(r.factor("response_size")).unwrap_or(0);
    v.sort_by(|a, b| {
        (size(a), a.factor("stack"), a.factor("terminator"), a.factor("group")).cmp(&(
            size(b),
            b.factor("stack"),
            b.factor("terminator"),
            b.factor("group"),
        ))
    });
    v
}

/// Per record and layer: p50, p90, p95, p99, p99.9 (µs) — the percentile profile.
pub fn profile(all: &[LoadView]) -> Table {
    let head = ["configuration", "layer", "n", "p50", "p90", "p95", "p99", "p99.9", "max"].map(String::from).to_vec();
    let mut rows = Vec::new();
    for r in layered(all) {
        for n in stacked_layers() {
            let Some(l) = r.layers.get(n) else { continue };
            rows.push(vec![
                r.configuration(),
                n.to_string(),
                l.count.to_string(),
                us(l.p50_ns as f64),
                us(l.p90_ns as f64),
                us(l.p95_ns as f64),
                us(l.p99_ns as f64),
                us(l.p999_ns as f64),
                us(l.max_ns as f64),
            ]);
        }
    }
    (head, rows)
}

/// Bootstrap resamples of each median.
const RESAMPLES: usize = 400;

/// The change of the TLS layer's median of `a` against `b` (ns), with core's percentile
/// bootstrap: both rows' transactions (from their HdrHistograms) resampled [`RESAMPLES`] times,
/// from a seed made of their counts (the same report for the same records).
pub(crate) fn median_change(a: &Latency, b: &Latency) -> Option<MedianChange> {
    let values = |l: &Latency| l.histogram().ok().map(|h| stats::histogram::recorded_values(&h));
    let (va, vb) = (values(a)?, values(b)?);
    let seed = 0x9e37_79b9_7f4a_7c15 ^ (va.len() as u64) << 20 ^ vb.len() as u64;
    stats::bootstrap::median_change(&va, &vb, RESAMPLES, seed)
}

/// The TLS layer's median against the x25519 row with the same other factors (same stack and
/// terminator first), µs, with its bootstrap interval.
pub(crate) fn tls_change(all: &[LoadView]) -> Table {
    let head = ["configuration", "terminated by", "TLS p50", "x25519 TLS p50", "change", "~95 % interval", "change %"]
        .map(String::from)
        .to_vec();
    let mut rows = Vec::new();
    for r in layered(all) {
        let Some(base) = baseline_of(&r, all) else { continue };
        if base.id() == r.id() {
            continue;
        }
        let (Some(a), Some(b)) = (r.layers.get("tls"), base.layers.get("tls")) else { continue };
        let Some(MedianChange { delta_ns: d, low_ns: lo, high_ns: hi }) = median_change(a, b) else { continue };
        rows.push(vec![
            r.configuration(),
            r.terminator.name.clone(),
            us(a.p50_ns as f64),
            us(b.p50_ns as f64),
            signed_us(d),
            format!("[{}, {}]", us(lo), us(hi)),
            if b.p50_ns > 0 { format!("{:+.0} %", 100.0 * d / b.p50_ns as f64) } else { "–".into() },
        ]);
    }
    (head, rows)
}

/// Per record with a capture and layer: the distribution of capture − client (µs), and the
/// matching and anomalies once per record.
pub fn capture_differences(all: &[LoadView]) -> Table {
    let head = [
        "configuration",
        "layer",
        "n",
        "client p50",
        "capture p50",
        "median |Δ|",
        "p95 |Δ|",
        "max |Δ|",
        "median Δ",
        "matched / client",
        "unmatched in capture",
        "anomalies",
    ]
    .map(String::from)
    .to_vec();
    let mut rows = Vec::new();
    for r in layered(all) {
        let Some(c) = r.capture.as_deref() else { continue };
        let anomalies = anomalies(c).iter().map(|(n, short, _)| format!("{n} {short}")).collect::<Vec<_>>().join(", ");
        // In layer order (a stored record's maps may come back sorted by name).
        let named = LAYER_NAMES.iter().filter_map(|n| c.differences.get(*n).map(|d| (n.to_string(), d)));
        for (i, (name, d)) in named.enumerate() {
            let first = i == 0;
            rows.push(vec![
                r.configuration(),
                name.clone(),
                d.n.to_string(),
                r.layers.get(&name).map_or("–".into(), |l| us(l.p50_ns as f64)),
                c.capture_layers.get(&name).map_or("–".into(), |l| us(l.p50_ns as f64)),
                us(d.median_abs_ns as f64),
                us(d.p95_abs_ns as f64),
                us(d.max_abs_ns as f64),
                us(d.median_ns as f64),
                if first { format!("{} / {}", c.matched, c.client_transactions) } else { String::new() },
                if first { c.unmatched_capture.to_string() } else { String::new() },
                if first {
                    if anomalies.is_empty() {
                        "none".into()
                    } else {
                        anomalies.clone()
                    }
                } else {
                    String::new()
                },
            ]);
        }
    }
    (head, rows)
}

/// The anomalies a capture counted (those that happened), each with a short name for a table
/// cell and a name for a line.
fn anomalies(c: &CaptureCheck) -> Vec<(u64, &'static str, &'static str)> {
    let a = &c.anomalies;
    [
        (a.syn_retransmissions, "SYN retr.", "SYN retransmissions"),
        (a.syn_ack_retransmissions, "SYN/ACK retr.", "SYN/ACK retransmissions"),
        (a.retransmissions, "retr.", "retransmitted segments"),
        (a.out_of_order, "out of order", "out-of-order segments"),
        (a.resets, "RST", "connections reset"),
        (a.connections_with_gaps, "gaps", "connections with gaps"),
        (a.connections_without_keys, "no keys", "connections without keys"),
        (a.unanswered_requests, "unanswered", "unanswered requests"),
        (a.dropped_by_kernel, "dropped", "packets dropped by the kernel"),
    ]
    .into_iter()
    .filter(|(n, _, _)| *n > 0)
    .collect()
}

/// One line on a run's capture: its files, how many client transactions it matched, the
/// anomalies it counted and its problems.
pub fn capture_line(label: &str, c: &CaptureCheck) -> String {
    let anomalies: Vec<String> = anomalies(c).iter().map(|(n, _, what)| format!("{n} {what}")).collect();
    format!(
        "{label}: {} ({} packets, key log {}): {} of {} client transactions matched, {} unmatched in the capture \
         ({} outside the measured window); anomalies: {}{}",
        c.pcap,
        c.packets,
        c.keylog,
        c.matched,
        c.client_transactions,
        c.unmatched_capture,
        c.capture_outside_window,
        if anomalies.is_empty() { "none".to_string() } else { anomalies.join(", ") },
        if c.problems.is_empty() { String::new() } else { format!("; {}", c.problems.join("; ")) }
    )
}

/// The layers of a packet capture, as `pqtls layers` prints them: per layer, in
/// [`LAYER_NAMES`] order, the transactions that have it and their p50, p95, p99 and max (ms);
/// `–` for a layer none has. Numbers from the second column on.
pub fn capture_layers(layers: &IndexMap<String, Latency>) -> Table {
    let head = ["layer", "n", "p50 ms", "p95 ms", "p99 ms", "max ms"].map(String::from).to_vec();
    let rows = LAYER_NAMES
        .iter()
        .map(|name| {
            let mut row = vec![name.to_string()];
            match layers.get(*name).filter(|l| l.count > 0) {
                Some(l) => {
                    row.push(l.count.to_string());
                    row.extend([l.p50_ns, l.p95_ns, l.p99_ns, l.max_ns].map(|v| ms(v as f64)));
                }
                None => row.extend(["0"].into_iter().chain(["–"; 4]).map(String::from)),
            }
            row
        })
        .collect();
    (head, rows)
}

/// What the capture-vs-client table shows.
pub(crate) const CAPTURE_NOTE: &str = "Per transaction, each layer from the capture (packet timestamps, records \
    decrypted with the key log) minus the same layer from the client's clock (its socket and TLS calls), matched by \
    client port and time; µs. The goal on loopback is a median |Δ| ≤ 200 µs per layer. RSTs are counted, not \
    errors: a terminator may reset a closed connection.";

/// How the TLS change's interval is made.
pub(crate) const TLS_CHANGE_NOTE: &str = "The TLS layer (ClientHello → client Finished) median of each row minus \
    the x25519 row's with the same other factors (same stack and terminator first), µs; the interval is a \
    percentile bootstrap (400 resamples of both rows' transactions, from their HdrHistograms), ~95 %.";

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::load::histogram;

    fn latency(values: impl Iterator<Item = u64>) -> Latency {
        let mut h = histogram();
        for v in values {
            h.record(v).unwrap();
        }
        Latency::of(&h)
    }

    #[test]
    fn the_median_change_has_a_bootstrap_interval_around_it() {
        let base = latency((0..1000).map(|i| 1_000_000 + i * 100));
        let same = median_change(&base, &base).unwrap();
        assert_eq!(same.delta_ns, 0.0);
        assert!(same.low_ns <= 0.0 && 0.0 <= same.high_ns, "{same:?}");
        let later = latency((0..1000).map(|i| 1_200_000 + i * 100));
        let MedianChange { delta_ns: d, low_ns: lo, high_ns: hi } = median_change(&later, &base).unwrap();
        // 3 significant digits: 200 µs ± the bucket widths.
        assert!((d - 200_000.0).abs() <= 2_000.0, "{d}");
        assert!(lo <= d && d <= hi && lo > 150_000.0 && hi < 250_000.0, "{lo} {d} {hi}");
        assert!(median_change(&latency(std::iter::empty()), &base).is_none());
    }
}
