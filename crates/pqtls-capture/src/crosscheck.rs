//! A load run's capture, cross-checked with the client's own timelines: the capture's
//! transactions as timelines with their client port, matched and compared by
//! [`pqtls_core::crosscheck::cross_check`], with the capture's counters and anomalies.

use crate::analyse::Analysis;
use crate::capture::CaptureStats;
use pqtls_core::crosscheck::{cross_check, CaptureAnomalies, CaptureCheck, Side};
use pqtls_core::timeline::Timeline;

/// The capture's transactions, each with its connection's client port (ns since the
/// capture's first packet).
pub fn capture_timelines(a: &Analysis) -> Vec<Timeline> {
    a.transactions().map(|(c, t)| Timeline { client_port: c.client.map(|x| x.port()), ..t.timeline }).collect()
}

/// The cross-check of `client`'s timelines (their 0 at `client_origin_unix_ns`; the measured
/// window `window_unix_ns` on the wall clock) with the capture `a` (and tcpdump's counters).
pub fn check(
    a: &Analysis,
    stats: Option<&CaptureStats>,
    client: &[Timeline],
    client_origin_unix_ns: u64,
    window_unix_ns: (u64, u64),
) -> CaptureCheck {
    let capture = capture_timelines(a);
    let mut c = cross_check(
        Side { timelines: client, origin_unix_ns: client_origin_unix_ns },
        Side { timelines: &capture, origin_unix_ns: a.origin_unix_ns },
        window_unix_ns,
    );
    let x = &a.anomalies;
    c.anomalies = CaptureAnomalies {
        syn_retransmissions: x.syn_retransmissions,
        syn_ack_retransmissions: x.syn_ack_retransmissions,
        retransmissions: x.retransmissions,
        out_of_order: x.out_of_order,
        resets: x.resets,
        connections_with_gaps: x.connections_with_gaps,
        connections_without_keys: x.connections_without_keys,
        unanswered_requests: x.unanswered_requests,
        dropped_by_kernel: stats.map_or(0, |s| s.dropped_by_kernel),
    };
    c.packets = a.packets;
    c.file_bytes = stats.map_or(0, |s| s.file_bytes);
    for conn in a.connections.iter().filter(|conn| !conn.problems.is_empty()).take(3) {
        c.problems.push(format!(
            "{} → {}: {}",
            conn.client.map_or("?".into(), |x| x.to_string()),
            conn.server.map_or("?".into(), |x| x.to_string()),
            conn.problems.join("; ")
        ));
    }
    c
}
