//! The transfer measurement's result (`kind = "transfer"`, SPEC C6): TLS (or mutual-TLS)
//! transfers over an emulated link, one new connection per transfer, with TTFB and TTLB
//! percentiles, the verified link, the delay emulator's lateness during the transfers, and
//! the round trips each layer took next to what TCP slow start predicts.
//!
//! The round-trip model is arithmetic on the measured flight sizes ([`FlightModel::predict`]);
//! docs/netlab.md states it with its assumptions.

use crate::link::{EmulatorReport, LinkReport};
use crate::load::{Latency, LoadResult};
use crate::record::Bytes;
use serde::{Deserialize, Serialize};

/// TCP payload bytes per segment on the lab's links (1500 MTU − 20 IPv4 − 20 TCP − 12 timestamps).
pub const LAB_MSS_BYTES: u64 = 1448;
/// IPv4 + TCP headers and the timestamp option, per segment.
pub const SEGMENT_HEADER_BYTES: u64 = 52;
/// Ethernet header + FCS: what `tbf` counts on a veth besides the IP packet.
pub const ETHERNET_BYTES: u64 = 18;
/// TLS record header.
const RECORD_HEADER_BYTES: u64 = 5;
/// An encrypted TLS 1.3 record: header, inner content type, AEAD tag.
const ENCRYPTED_RECORD_OVERHEAD_BYTES: u64 = 22;
/// Largest TLS plaintext record.
const MAX_RECORD_BYTES: u64 = 16_384;

/// Percentiles of one distribution (ns), read from its histogram.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50_ns: u64,
    pub p75_ns: u64,
    pub p95_ns: u64,
    pub p99_ns: u64,
}

impl Percentiles {
    /// From a stored latency (its histogram; the summary's fields when it has none).
    pub fn of(l: &Latency) -> Percentiles {
        match l.histogram() {
            Ok(h) if !h.is_empty() => Percentiles {
                count: h.len(),
                p50_ns: h.value_at_quantile(0.50),
                p75_ns: h.value_at_quantile(0.75),
                p95_ns: h.value_at_quantile(0.95),
                p99_ns: h.value_at_quantile(0.99),
            },
            _ => Percentiles { count: l.count, p50_ns: l.p50_ns, p75_ns: 0, p95_ns: l.p95_ns, p99_ns: l.p99_ns },
        }
    }
}

/// What the round-trip model needs: flight sizes (measured), windows and the link (asked and
/// verified).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FlightModel {
    pub mss_bytes: u64,
    /// Initial congestion windows (segments) of the client's and the server's routes.
    pub client_initcwnd: u64,
    pub server_initcwnd: u64,
    /// The ClientHello flight, TLS bytes (records included).
    pub client_hello_bytes: u64,
    /// The server's first flight, ServerHello … Finished, TLS bytes (records included).
    pub server_flight_bytes: u64,
    /// The client's second flight: its certificate and CertificateVerify (mutual TLS),
    /// Finished and the HTTP request, TLS bytes.
    pub client_flight_bytes: u64,
    /// The HTTP response (head + body) as TLS bytes.
    pub response_bytes: u64,
    /// The verified link: median RTT and rate (`None`: unlimited).
    pub rtt_ns: u64,
    pub bits_per_s: Option<u64>,
}

/// Round trips of one layer: measured (from the client's timestamps) and predicted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    /// `tcp`, `tls`, `http` or `total` (connect → last byte).
    pub layer: String,
    /// (median layer time − serialisation of the layer's bytes at the link's rate) / RTT.
    pub measured: f64,
    /// What slow start from the initial windows predicts.
    pub predicted: u32,
}

/// The transfer measurement's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TransferResult {
    /// The transfers as a load run (one connection at a time, a new TLS connection per
    /// transfer): `load.latency` is TTLB (connect → last byte), `load.ttfb` is TTFB (connect →
    /// first response byte); with layers, message sizes, negotiation, errors.
    pub load: LoadResult,
    pub ttfb: Percentiles,
    pub ttlb: Percentiles,
    /// The link as verified before the transfers (scenarios on the same link share one
    /// verification).
    pub link: LinkReport,
    /// The delay emulator during this scenario's transfers only.
    pub emulator: EmulatorReport,
    pub model: FlightModel,
    pub rounds: Vec<Rounds>,
}

/// Round trips to deliver `segments` segments in slow start from a window of `cwnd`: after r
/// round trips cwnd·(2^r − 1) segments are out. 0 segments need 0 round trips.
pub fn slow_start_round_trips(segments: u64, cwnd: u64) -> u32 {
    let (mut sent, mut window, mut rtts) = (0u64, cwnd.max(1), 0u32);
    while sent < segments {
        sent = sent.saturating_add(window);
        window = window.saturating_mul(2);
        rtts += 1;
    }
    rtts
}

/// TLS bytes of `plaintext` handshake bytes sent encrypted (records of at most 16 KiB).
fn encrypted(plaintext: u64) -> u64 {
    if plaintext == 0 {
        return 0;
    }
    plaintext + plaintext.div_ceil(MAX_RECORD_BYTES) * ENCRYPTED_RECORD_OVERHEAD_BYTES
}

impl FlightModel {
    /// Flight sizes from a handshake's message sizes, plus the request and the response (as
    /// HTTP bytes: head + body).
    pub fn flights(bytes: &Bytes, request_bytes: u64, response_bytes: u64) -> (u64, u64, u64, u64) {
        let m = |name: &str| bytes.messages.get(name).copied().unwrap_or(0);
        let client_hello = m("ClientHello") + RECORD_HEADER_BYTES;
        let server_encrypted: u64 = bytes
            .messages
            .iter()
            .filter(|(k, _)| !k.starts_with("Client") && *k != "ServerHello" && *k != "NewSessionTicket")
            .map(|(_, v)| *v)
            .sum();
        let server = m("ServerHello") + RECORD_HEADER_BYTES + encrypted(server_encrypted);
        let client_encrypted: u64 = bytes
            .messages
            .iter()
            .filter(|(k, _)| k.starts_with("Client") && *k != "ClientHello")
            .map(|(_, v)| *v)
            .sum();
        let client = encrypted(client_encrypted) + encrypted(request_bytes);
        (client_hello, server, client, encrypted(response_bytes))
    }

    pub fn segments(&self, bytes: u64) -> u64 {
        bytes.div_ceil(self.mss_bytes.max(1))
    }

    /// Time to put `bytes` of TCP payload on the link, with per-segment headers.
    pub fn serialisation_ns(&self, bytes: u64) -> f64 {
        match self.bits_per_s {
            Some(r) if r > 0 => {
                let wire = bytes + self.segments(bytes) * (SEGMENT_HEADER_BYTES + ETHERNET_BYTES);
                wire as f64 * 8.0 / r as f64 * 1e9
            }
            _ => 0.0,
        }
    }

    /// Predicted round trips per layer: `tcp` 1 (SYN → SYN/ACK); `tls` the server's first
    /// flight from its initial window; `http` the client's second flight (from its window
    /// grown by the ClientHello's segments) and the response (from the server's window grown
    /// by its first flight's segments, all acknowledged by then), overlapping in one round;
    /// `total` their sum.
    pub fn predict(&self) -> Vec<(&'static str, u32, u64)> {
        let ch = self.segments(self.client_hello_bytes);
        let server = self.segments(self.server_flight_bytes);
        let tls = slow_start_round_trips(server, self.server_initcwnd).max(1);
        let client = slow_start_round_trips(self.segments(self.client_flight_bytes), self.client_initcwnd + ch).max(1);
        let response = slow_start_round_trips(self.segments(self.response_bytes), self.server_initcwnd + server).max(1);
        let http = client + response - 1;
        vec![
            ("tcp", 1, 0),
            ("tls", tls, self.server_flight_bytes),
            ("http", http, self.client_flight_bytes + self.response_bytes),
            (
                "total",
                1 + tls + http,
                self.client_hello_bytes + self.server_flight_bytes + self.client_flight_bytes + self.response_bytes,
            ),
        ]
    }

    /// Measured vs predicted round trips, from the median time of each layer (ns; `total`:
    /// the median TTLB).
    pub fn rounds(&self, median_ns: impl Fn(&str) -> Option<u64>) -> Vec<Rounds> {
        self.predict()
            .into_iter()
            .filter_map(|(layer, predicted, bytes)| {
                let t = median_ns(layer)? as f64;
                let measured = if self.rtt_ns == 0 {
                    0.0
                } else {
                    ((t - self.serialisation_ns(bytes)) / self.rtt_ns as f64).max(0.0)
                };
                Some(Rounds { layer: layer.into(), measured, predicted })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_start_by_hand() {
        assert_eq!(slow_start_round_trips(0, 10), 0);
        assert_eq!(slow_start_round_trips(10, 10), 1);
        assert_eq!(slow_start_round_trips(11, 10), 2);
        assert_eq!(slow_start_round_trips(30, 10), 2);
        assert_eq!(slow_start_round_trips(31, 10), 3);
        assert_eq!(slow_start_round_trips(31, 40), 1);
    }

    fn model(server_flight: u64, response: u64, iw: u64) -> FlightModel {
        FlightModel {
            mss_bytes: LAB_MSS_BYTES,
            client_initcwnd: iw,
            server_initcwnd: iw,
            client_hello_bytes: 1_200,
            server_flight_bytes: server_flight,
            client_flight_bytes: 200,
            response_bytes: response,
            rtt_ns: 50_000_000,
            bits_per_s: None,
        }
    }

    #[test]
    fn a_large_server_flight_needs_a_second_round_trip_at_initcwnd_10_not_40() {
        // ML-DSA-65 chain: ~17 KB server flight = 12 segments.
        let p10 = model(17_000, 100, 10).predict();
        let p40 = model(17_000, 100, 40).predict();
        assert_eq!(p10[1], ("tls", 2, 17_000));
        assert_eq!(p40[1].1, 1);
        assert_eq!(p10[3].1, 1 + 2 + 1);
        // A small (classical) flight: one round trip either way.
        assert_eq!(model(3_000, 100, 10).predict()[1].1, 1);
    }

    #[test]
    fn the_response_starts_from_the_grown_window() {
        // 150 KiB response = 107 segments; server window 10 + 3 (flight) = 13: 13+26+52+104 → 4.
        let m = model(3_000, 153_600, 10);
        assert_eq!(m.predict()[2].1, 4);
        let m40 = model(3_000, 153_600, 40);
        // 42 + 84 ≥ 107 → 2.
        assert_eq!(m40.predict()[2].1, 2);
    }

    #[test]
    fn measured_rounds_remove_serialisation() {
        let mut m = model(3_000, 0, 10);
        m.bits_per_s = Some(100_000_000);
        let r = m.rounds(|l| (l == "tls").then_some(50_000_000 + m.serialisation_ns(3_000) as u64));
        assert_eq!(r.len(), 1);
        assert!((r[0].measured - 1.0).abs() < 1e-6, "{}", r[0].measured);
    }
}
