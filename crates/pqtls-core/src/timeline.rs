//! The moments of one transaction (TCP connect, TLS handshake, HTTP request and response) and
//! the layers between them. Both the load generator (from its own clock reads at the socket and
//! TLS calls) and the capture analyser (`pqtls layers`, from packet timestamps) produce
//! [`Timeline`]s; [`Timeline::layers`] is the one definition of the split (docs/layers.md).

use serde::{Deserialize, Serialize};

/// Moments of one transaction, in ns since a common origin (the run's start on the monotonic
/// clock, or the capture's first packet). A transaction on a kept-alive connection has no
/// connect or handshake moments.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Timeline {
    /// The connection's client (local) port, when kept: what matches a client's transaction
    /// to a capture's (`pqtls load --capture`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_port: Option<u16>,
    /// Open loop: when the request was due by the timetable (latency counts from here).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scheduled_ns: Option<u64>,
    /// `connect()` called (the SYN leaves) — from a capture: the SYN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_start_ns: Option<u64>,
    /// The non-blocking connect completed (≈ SYN/ACK received) — from a capture: the SYN/ACK.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connected_ns: Option<u64>,
    /// The ClientHello's first write — from a capture: its first segment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_hello_ns: Option<u64>,
    /// The client's Finished written (the client considers the handshake complete).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handshake_done_ns: Option<u64>,
    /// The HTTP request's first write.
    pub request_ns: u64,
    /// The first byte of the response read (decrypted, for TLS) — from a capture: the first
    /// segment of the first application-data record from the server.
    pub first_byte_ns: u64,
    /// The last byte of the response read.
    pub last_byte_ns: u64,
}

/// The time of one transaction in each layer, ns. With a kept-alive connection the
/// connection layers are 0 (there was no connect nor handshake).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Layers {
    /// connect → connected (SYN → SYN/ACK).
    pub tcp_ns: u64,
    /// connected → ClientHello.
    pub tcp_to_tls_ns: u64,
    /// ClientHello → client Finished.
    pub tls_ns: u64,
    /// client Finished → request.
    pub tls_to_http_ns: u64,
    /// request → first response byte.
    pub http_first_byte_ns: u64,
    /// request → last response byte.
    pub http_ns: u64,
}

/// The names of the layers, in [`Layers`] order (report columns, CSV headers).
pub const LAYER_NAMES: [&str; 6] = ["tcp", "tcp_to_tls", "tls", "tls_to_http", "http_first_byte", "http"];

impl Layers {
    /// The layers as (name, ns), in [`LAYER_NAMES`] order.
    pub fn named(&self) -> [(&'static str, u64); 6] {
        [
            (LAYER_NAMES[0], self.tcp_ns),
            (LAYER_NAMES[1], self.tcp_to_tls_ns),
            (LAYER_NAMES[2], self.tls_ns),
            (LAYER_NAMES[3], self.tls_to_http_ns),
            (LAYER_NAMES[4], self.http_first_byte_ns),
            (LAYER_NAMES[5], self.http_ns),
        ]
    }
}

impl Timeline {
    /// Latency of the transaction: from when it was due (open loop) or started (connect, or
    /// the request on a kept-alive connection) to the last byte.
    pub fn latency_ns(&self) -> u64 {
        let start = self.scheduled_ns.or(self.connect_start_ns).unwrap_or(self.request_ns);
        self.last_byte_ns.saturating_sub(start)
    }

    /// The span [`Timeline::latency_ns`] measures: its start and the last byte, ns from the
    /// run's origin.
    pub fn span_ns(&self) -> (u64, u64) {
        (self.scheduled_ns.or(self.connect_start_ns).unwrap_or(self.request_ns), self.last_byte_ns)
    }

    /// Time to first byte, from the same start as [`Timeline::latency_ns`].
    pub fn ttfb_ns(&self) -> u64 {
        let start = self.scheduled_ns.or(self.connect_start_ns).unwrap_or(self.request_ns);
        self.first_byte_ns.saturating_sub(start)
    }

    /// The layer split; `Err` names the moment that is missing or out of order (a
    /// timeline that does not describe one transaction is never split silently).
    pub fn layers(&self) -> Result<Layers, String> {
        let gap = |a: u64, b: u64, what: &str| {
            b.checked_sub(a).ok_or_else(|| format!("{what}: the later moment ({b} ns) precedes the earlier ({a} ns)"))
        };
        let (tcp, tcp_tls, tls, tls_http) =
            match (self.connect_start_ns, self.connected_ns, self.client_hello_ns, self.handshake_done_ns) {
                (None, None, None, None) => (0, 0, 0, 0),
                (Some(c), Some(d), Some(h), Some(f)) => (
                    gap(c, d, "tcp")?,
                    gap(d, h, "tcp_to_tls")?,
                    gap(h, f, "tls")?,
                    gap(f, self.request_ns, "tls_to_http")?,
                ),
                (Some(c), Some(d), None, None) => (gap(c, d, "tcp")?, 0, 0, gap(d, self.request_ns, "tcp_to_http")?),
                _ => return Err(format!("an incomplete connection timeline: {self:?}")),
            };
        Ok(Layers {
            tcp_ns: tcp,
            tcp_to_tls_ns: tcp_tls,
            tls_ns: tls,
            tls_to_http_ns: tls_http,
            http_first_byte_ns: gap(self.request_ns, self.first_byte_ns, "http_first_byte")?,
            http_ns: gap(self.request_ns, self.last_byte_ns, "http")?,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layers_add_up_and_refuse_disorder() {
        let t = Timeline {
            client_port: None,
            scheduled_ns: Some(5),
            connect_start_ns: Some(10),
            connected_ns: Some(20),
            client_hello_ns: Some(21),
            handshake_done_ns: Some(61),
            request_ns: 62,
            first_byte_ns: 70,
            last_byte_ns: 90,
        };
        let l = t.layers().unwrap();
        assert_eq!((l.tcp_ns, l.tcp_to_tls_ns, l.tls_ns, l.tls_to_http_ns, l.http_ns), (10, 1, 40, 1, 28));
        assert_eq!(l.tcp_ns + l.tcp_to_tls_ns + l.tls_ns + l.tls_to_http_ns + l.http_ns, 90 - 10);
        assert_eq!((t.latency_ns(), t.ttfb_ns()), (85, 65));
        let kept = Timeline { request_ns: 100, first_byte_ns: 110, last_byte_ns: 130, ..Timeline::default() };
        assert_eq!(kept.layers().unwrap().http_ns, 30);
        assert_eq!(kept.latency_ns(), 30);
        assert!(Timeline { first_byte_ns: 5, request_ns: 10, last_byte_ns: 20, ..t }.layers().is_err());
        assert!(Timeline { client_hello_ns: None, ..t }.layers().is_err());
    }
}
