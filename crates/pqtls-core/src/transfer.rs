//! The transfer measurement's result (`kind = "transfer"`, SPEC C6): TLS (or mutual-TLS)
//! transfers over an emulated link, one new connection per transfer, with TTFB and TTLB
//! percentiles, the verified link, the delay emulator's lateness during the transfers, and
//! the round trips each layer took next to what TCP slow start predicts.
//!
//! The round-trip model ([`crate::roundtrip`], [`FlightModel::predict`]) takes the measured
//! flight sizes; docs/netlab.md states its rules.

use crate::link::{EmulatorReport, LinkReport};
use crate::load::{Latency, LoadResult};
pub use crate::roundtrip::{
    slow_start_round_trips, FlightModel, Rounds, ETHERNET_BYTES, KERNEL_INITCWND, LAB_MSS_BYTES, SEGMENT_HEADER_BYTES,
};
pub use crate::roundtrip_quic::QuicFlightModel;
use serde::{Deserialize, Serialize};

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
    /// The TCP round-trip model's inputs (over QUIC: the same handshake's flights as TCP would
    /// carry them; the rounds come from `quic.model`).
    pub model: FlightModel,
    pub rounds: Vec<Rounds>,
    /// Over QUIC (`transport = quic`): the QUIC model's inputs and the connection's datagrams
    /// as quinn counted them. Absent over TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<QuicTransfer>,
}

/// What a transfer over QUIC adds: the QUIC round-trip model and quinn's counters of the first
/// measured connection, at the handshake's end and at the connection's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicTransfer {
    pub model: QuicFlightModel,
    /// The client's view when its handshake completed (the server's flight as received).
    pub handshake: QuicCounters,
    /// The client's view when the response had been read to its end.
    pub connection: QuicCounters,
    /// With `quic_token`: the server's count of the run's connections (warm-up included) and
    /// of those whose first packet carried a valid address-validation token. `None`: not asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokens: Option<TokenUse>,
}

/// Address-validation tokens over a run, as the server counted them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUse {
    pub connections: u64,
    pub validated: u64,
}

/// quinn's connection statistics from the client's side (`Connection::stats()`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuicCounters {
    pub client_datagrams: u64,
    pub client_bytes: u64,
    pub server_datagrams: u64,
    pub server_bytes: u64,
    /// Packets the client declared lost, and its congestion events.
    pub lost_packets: u64,
    pub congestion_events: u64,
    /// The client's path MTU and congestion window then, bytes.
    pub mtu_bytes: u64,
    pub cwnd_bytes: u64,
}

impl TransferResult {
    /// The median of a layer (`tcp`, `tls`, `http`; `total`: TTLB), ns.
    pub fn median_ns(&self, layer: &str) -> Option<u64> {
        match layer {
            "total" => Some(self.ttlb.p50_ns),
            l => self.load.layers.get(l).map(|x| Percentiles::of(x).p50_ns),
        }
    }

    /// Measured vs predicted round trips per layer by the current model, from the record's
    /// stored inputs ([`FlightModel::completed`]) and medians: what the reports show, so that
    /// records measured before a change of the model are read with the model of today (their
    /// stored `rounds` are what the model of their day said). None without transfers.
    pub fn rounds_now(&self) -> Vec<Rounds> {
        if self.load.requests == 0 {
            return Vec::new();
        }
        // Records made before the models counted a HelloRetryRequest: their messages say.
        let retry = self.load.bytes.as_ref().is_some_and(|b| b.messages.contains_key("HelloRetryRequest"));
        match &self.quic {
            Some(q) => QuicFlightModel { hello_retry: retry, ..q.model.clone() }.rounds(|l| self.median_ns(l)),
            None => {
                let mut m = self.model.completed(&self.load, &self.link);
                m.hello_retry = retry;
                m.rounds(|l| self.median_ns(l))
            }
        }
    }
}
