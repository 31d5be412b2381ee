//! The capture-vs-client cross-check of a load run (`pqtls load --capture`, `measurement =
//! "layers"`): every transaction the client measured is matched to the capture's view of the
//! same transaction, and per layer the distribution of the differences (capture − client) is
//! kept, with what did not match on either side and the capture's anomalies (docs/layers.md).
//! Pure: the capture is read by crates/pqtls-capture, the run by crates/pqtls-net.

use crate::load::{histogram, Latency};
use crate::timeline::{Timeline, LAYER_NAMES};
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// How far apart (after putting both on the wall clock) a client's request and the capture's
/// may be and still be the same transaction, ns. Matching is per client port and in order, so
/// this only has to be smaller than the time between two uses of one port.
pub const MATCH_TOLERANCE_NS: u64 = 50_000_000;

/// The differences of one layer over the matched transactions where it applies on both sides.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LayerDiff {
    /// Matched transactions with this layer on both sides.
    pub n: u64,
    /// Median, 95th percentile and maximum of |capture − client|, ns.
    pub median_abs_ns: u64,
    pub p95_abs_ns: u64,
    pub max_abs_ns: u64,
    /// Median and mean of capture − client (signed: which side sees the layer longer), ns.
    pub median_ns: i64,
    pub mean_ns: f64,
}

/// What the capture showed that a clean loopback run does not have (counted, never hidden).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CaptureAnomalies {
    /// SYNs sent again (a lost SYN or SYN/ACK), and SYN/ACKs sent again.
    pub syn_retransmissions: u64,
    pub syn_ack_retransmissions: u64,
    /// Data segments carrying bytes already seen.
    pub retransmissions: u64,
    pub out_of_order: u64,
    /// Connections ended by a RST.
    pub resets: u64,
    /// Connections with bytes after a gap the capture never filled.
    pub connections_with_gaps: u64,
    /// TLS connections whose secrets are not in the key log.
    pub connections_without_keys: u64,
    /// Requests without a complete response in the capture.
    pub unanswered_requests: u64,
    /// Packets tcpdump reported as dropped by the kernel (the capture misses them).
    pub dropped_by_kernel: u64,
}

/// The capture of a load run and its cross-check with the client's timelines (the `capture`
/// section of a load record, docs/results-schema.md).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct CaptureCheck {
    /// The capture (pcap) and the key log it was read with, as written.
    pub pcap: String,
    pub keylog: String,
    /// Where and what tcpdump captured (`lo`, `tcp port 8443`).
    pub interface: String,
    pub filter: String,
    pub packets: u64,
    pub file_bytes: u64,
    /// Transactions the client measured (completed in the measured window).
    pub client_transactions: u64,
    /// Transactions of the capture matched to one of the client's, or begun inside the measured
    /// window (the warm-up's and the end's are not counted here).
    pub capture_transactions: u64,
    /// Capture transactions outside the measured window (warm-up, `/stats`).
    pub capture_outside_window: u64,
    pub matched: u64,
    /// Client transactions without a capture transaction, and the reverse (inside the window).
    pub unmatched_client: u64,
    pub unmatched_capture: u64,
    /// [`MATCH_TOLERANCE_NS`] as used.
    pub tolerance_ns: u64,
    /// Per layer ([`LAYER_NAMES`] order): the distribution of capture − client.
    pub differences: IndexMap<String, LayerDiff>,
    /// The capture's own layer distributions over the matched transactions (connection layers
    /// over those that opened their connection).
    pub capture_layers: IndexMap<String, Latency>,
    pub anomalies: CaptureAnomalies,
    /// What could not be read or matched (the first few, each named).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub problems: Vec<String>,
}

/// One transaction of either side for matching: its client port and its moments, with the
/// origin of its clock on the wall clock.
#[derive(Clone, Copy, Debug)]
pub struct Side<'a> {
    pub timelines: &'a [Timeline],
    /// Wall-clock (Unix) ns of the timelines' 0.
    pub origin_unix_ns: u64,
}

/// The matching and the differences (the file names, packet counts and anomalies are the
/// caller's to fill).
pub fn cross_check(client: Side<'_>, capture: Side<'_>, window_unix_ns: (u64, u64)) -> CaptureCheck {
    let unix = |s: &Side<'_>, t: &Timeline| s.origin_unix_ns.saturating_add(t.connect_start_ns.unwrap_or(t.request_ns));
    let request_unix = |s: &Side<'_>, t: &Timeline| s.origin_unix_ns.saturating_add(t.request_ns);
    // Per client port, each side's transactions in time order.
    let mut ports: IndexMap<u16, (Vec<usize>, Vec<usize>)> = IndexMap::new();
    let mut problems = Vec::new();
    let mut unported = 0u64;
    for (i, t) in client.timelines.iter().enumerate() {
        match t.client_port {
            Some(p) => ports.entry(p).or_default().0.push(i),
            None => unported += 1,
        }
    }
    if unported > 0 {
        problems.push(format!("{unported} client transactions have no client port (not matched)"));
    }
    for (i, t) in capture.timelines.iter().enumerate() {
        if let Some(p) = t.client_port {
            ports.entry(p).or_default().1.push(i);
        }
    }
    let mut pairs: Vec<(usize, usize)> = Vec::new();
    let mut matched_capture = vec![false; capture.timelines.len()];
    for (a, b) in ports.values_mut() {
        a.sort_by_key(|&i| request_unix(&client, &client.timelines[i]));
        b.sort_by_key(|&i| request_unix(&capture, &capture.timelines[i]));
        let (mut i, mut j) = (0, 0);
        while i < a.len() && j < b.len() {
            let (ca, cb) =
                (request_unix(&client, &client.timelines[a[i]]), request_unix(&capture, &capture.timelines[b[j]]));
            if ca.abs_diff(cb) <= MATCH_TOLERANCE_NS {
                pairs.push((a[i], b[j]));
                matched_capture[b[j]] = true;
                i += 1;
                j += 1;
            } else if ca < cb {
                i += 1;
            } else {
                j += 1;
            }
        }
    }
    let (from, to) = window_unix_ns;
    let mut inside = 0u64;
    let mut outside = 0u64;
    for (i, t) in capture.timelines.iter().enumerate() {
        let at = unix(&capture, t);
        if matched_capture[i] || (at >= from && at <= to) {
            inside += 1;
        } else {
            outside += 1;
        }
    }
    let mut diffs: Vec<Vec<i64>> = LAYER_NAMES.iter().map(|_| Vec::new()).collect();
    let mut hist: Vec<_> = LAYER_NAMES.iter().map(|_| histogram()).collect();
    for &(a, b) in &pairs {
        let (ct, pt) = (&client.timelines[a], &capture.timelines[b]);
        let (cl, pl) = match (ct.layers(), pt.layers()) {
            (Ok(c), Ok(p)) => (c, p),
            (Err(e), _) | (_, Err(e)) => {
                if problems.len() < 5 {
                    problems.push(format!("port {}: {e}", ct.client_port.unwrap_or(0)));
                }
                continue;
            }
        };
        let opened = ct.connect_start_ns.is_some() && pt.connect_start_ns.is_some();
        let tls = ct.client_hello_ns.is_some() && pt.client_hello_ns.is_some();
        for (k, ((name, c), (_, p))) in cl.named().into_iter().zip(pl.named()).enumerate() {
            let applies = match name {
                "tcp" | "tls_to_http" => opened,
                "tcp_to_tls" | "tls" => opened && tls,
                _ => true,
            };
            if applies {
                diffs[k].push(p as i64 - c as i64);
                let _ = hist[k].record(p);
            }
        }
    }
    let differences = LAYER_NAMES.iter().zip(diffs).map(|(n, d)| (n.to_string(), summarise(d))).collect();
    CaptureCheck {
        client_transactions: client.timelines.len() as u64,
        capture_transactions: inside,
        capture_outside_window: outside,
        matched: pairs.len() as u64,
        unmatched_client: client.timelines.len() as u64 - pairs.len() as u64,
        unmatched_capture: inside - pairs.len() as u64,
        tolerance_ns: MATCH_TOLERANCE_NS,
        differences,
        capture_layers: LAYER_NAMES.iter().zip(&hist).map(|(n, h)| (n.to_string(), Latency::of(h))).collect(),
        problems,
        ..CaptureCheck::default()
    }
}

/// Nearest-rank quantile of sorted values.
fn rank<T: Copy>(sorted: &[T], q: f64) -> T {
    let i = ((q * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[i]
}

fn summarise(mut d: Vec<i64>) -> LayerDiff {
    if d.is_empty() {
        return LayerDiff::default();
    }
    let mean_ns = d.iter().map(|&x| x as f64).sum::<f64>() / d.len() as f64;
    d.sort_unstable();
    let median_ns = rank(&d, 0.5);
    let mut abs: Vec<u64> = d.iter().map(|x| x.unsigned_abs()).collect();
    abs.sort_unstable();
    LayerDiff {
        n: d.len() as u64,
        median_abs_ns: rank(&abs, 0.5),
        p95_abs_ns: rank(&abs, 0.95),
        max_abs_ns: *abs.last().expect("not empty"),
        median_ns,
        mean_ns,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tl(port: u16, start: u64, shift: u64) -> Timeline {
        Timeline {
            client_port: Some(port),
            connect_start_ns: Some(start),
            connected_ns: Some(start + 50_000),
            client_hello_ns: Some(start + 60_000 + shift),
            handshake_done_ns: Some(start + 900_000 + shift),
            request_ns: start + 910_000 + shift,
            first_byte_ns: start + 1_000_000 + shift,
            last_byte_ns: start + 1_100_000 + 2 * shift,
            ..Timeline::default()
        }
    }

    #[test]
    fn transactions_match_by_port_and_time_and_the_differences_are_per_layer() {
        // The client's clock starts 1 s after the capture's on the wall clock.
        let client = vec![tl(40000, 0, 0), tl(40001, 10_000_000, 0), tl(40002, 20_000_000, 0)];
        // The capture: the same three (the second 1 µs later from ClientHello on, its last byte
        // 2 µs later), a warm-up one on the first's port before the window, and one of port 40003
        // inside the window that the client does not have.
        let capture = vec![
            tl(40000, 100_000_000, 0),
            tl(40000, 1_000_000_000, 0),
            tl(40001, 1_010_000_000, 1_000),
            tl(40002, 1_020_000_000, 0),
            tl(40003, 1_025_000_000, 0),
        ];
        let c = cross_check(
            Side { timelines: &client, origin_unix_ns: 2_000_000_000 },
            Side { timelines: &capture, origin_unix_ns: 1_000_000_000 },
            (2_000_000_000, 2_030_000_000),
        );
        assert_eq!((c.matched, c.unmatched_client, c.unmatched_capture), (3, 0, 1));
        assert_eq!((c.client_transactions, c.capture_transactions, c.capture_outside_window), (3, 4, 1));
        let tls = &c.differences["tls"];
        assert_eq!((tls.n, tls.median_abs_ns, tls.max_abs_ns), (3, 0, 0));
        let tcp_to_tls = &c.differences["tcp_to_tls"];
        assert_eq!((tcp_to_tls.n, tcp_to_tls.median_abs_ns, tcp_to_tls.max_abs_ns), (3, 0, 1_000));
        assert_eq!(c.differences["http"].max_abs_ns, 1_000);
        assert_eq!(c.capture_layers["tcp"].count, 3);
        assert!(c.problems.is_empty());
        // Without ports nothing matches, and it says so.
        let bare: Vec<Timeline> = client.iter().map(|t| Timeline { client_port: None, ..*t }).collect();
        let c = cross_check(
            Side { timelines: &bare, origin_unix_ns: 2_000_000_000 },
            Side { timelines: &capture, origin_unix_ns: 1_000_000_000 },
            (2_000_000_000, 2_030_000_000),
        );
        assert_eq!((c.matched, c.unmatched_client), (0, 3));
        assert!(c.problems[0].contains("no client port"), "{:?}", c.problems);
    }

    #[test]
    fn differences_summarise_by_rank() {
        let d = summarise(vec![-3, 1, 2, -10, 5]);
        assert_eq!((d.n, d.median_abs_ns, d.p95_abs_ns, d.max_abs_ns, d.median_ns), (5, 3, 10, 10, 1));
        assert_eq!(summarise(Vec::new()), LayerDiff::default());
    }
}
