//! The round-trip model of one HTTP/3 transfer on a new QUIC connection (quinn): how many round
//! trips the handshake (first Initial → handshake done at the client) and the request (request
//! → last byte) wait for, and how long they take — [`crate::roundtrip::FlightModel`]'s sibling
//! for QUIC, with the same [`Prediction`] and the same measured-rounds arithmetic. There is no
//! TCP connect: the ClientHello leaves in the first datagram.
//!
//! What differs from TCP (docs/quic.md, "In the network lab", states the rules):
//! - the client's first flight is Initial datagrams of at least 1,200 bytes each (RFC 9000
//!   §14.1), as many as the ClientHello needs at quinn's `initial_mtu` (1,200 by default);
//! - before the client's address is validated the server may send at most **three times** the
//!   bytes it received (RFC 9000 §8.1). quinn starts a datagram while any budget is left
//!   (`anti_amplification_blocked(k × mtu + 1)`), so the first round carries
//!   ⌊(3 × received − 1) / mtu⌋ + 1 datagrams at most. The client's answer (its ACKs, in a
//!   Handshake packet) validates the address: later rounds are only window-limited;
//! - the congestion window is in bytes, quinn's Cubic from `initial_window` (12,000 bytes by
//!   default: RFC 9002's min(10 × 1,200, max(2 × 1,200, 14,720)) on quinn's base datagram of
//!   1,200 — not TCP's 10 × 1,448). Slow start grows it by the bytes acknowledged, but only
//!   while the sender is congestion-blocked when the acknowledgements arrive (quinn's
//!   `app_limited`: a flight that ended, or waits on the amplification budget, does not grow it).
//!
//! A pure function, as the TCP model: [`QuicFlightModel`] in, [`Prediction`] out.

use crate::record::Bytes;
use crate::roundtrip::{FlightRounds, LayerPrediction, Prediction, Rounds, ETHERNET_BYTES};
use serde::{Deserialize, Serialize};

/// The smallest UDP payload of a datagram carrying a client Initial (RFC 9000 §14.1), and
/// quinn's default `initial_mtu`.
pub const MIN_INITIAL_DATAGRAM_BYTES: u64 = 1200;
/// quinn-proto 0.11's initial congestion window (Cubic and NewReno alike):
/// `14720.clamp(2 × 1200, 10 × 1200)` (`congestion/cubic.rs`).
pub const QUINN_INITIAL_WINDOW_BYTES: u64 = 12_000;
/// A server may send this many times the bytes it received before it validated the client's
/// address (RFC 9000 §8.1).
pub const AMPLIFICATION_FACTOR: u64 = 3;
/// One long-header packet's bytes besides its CRYPTO data: first byte 1, version 4, two
/// connection ids with their lengths (quinn's are 8 bytes) 18, token length 1, length 2,
/// packet number up to 4, AEAD tag 16, CRYPTO frame header 4 (an estimate: ±5 bytes).
pub const LONG_PACKET_OVERHEAD_BYTES: u64 = 50;
/// One short-header (1-RTT) packet's bytes besides its stream data: first byte 1, connection
/// id 8, packet number up to 4, AEAD tag 16, STREAM frame header 6 (an estimate).
pub const SHORT_PACKET_OVERHEAD_BYTES: u64 = 35;
/// IPv4 + UDP headers of a datagram.
pub const UDP_HEADER_BYTES: u64 = 28;
/// quinn's path MTU discovery (`MtuDiscoveryConfig::default()`): the binary search's upper
/// bound and the smallest step it takes.
pub const QUINN_MTU_UPPER_BOUND_BYTES: u64 = 1452;
pub const QUINN_MTU_MINIMUM_CHANGE_BYTES: u64 = 20;

/// quinn's pacer (`connection/pacing.rs`): a burst of up to the window's share of 2 ms, at least
/// 10 and at most 256 datagrams, leaves at once; the rest at 1.25 × window per RTT.
const PACING_BURST_INTERVAL_NS: u64 = 2_000_000;
const PACING_MIN_BURST_DATAGRAMS: u64 = 10;
const PACING_MAX_BURST_DATAGRAMS: u64 = 256;

/// The probes quinn's path MTU discovery sends from `initial_mtu`, in order, on a path that
/// carries them all (the lab's 1,500-byte links do): its binary search (`next_mtu_to_probe`),
/// then the upper bound itself when the search stops short of it. From 1,200: 1,326, 1,389,
/// 1,420, 1,452.
pub fn quinn_mtu_probes(initial_mtu: u64) -> Vec<u64> {
    let (mut lower, upper) = (initial_mtu, QUINN_MTU_UPPER_BOUND_BYTES.max(initial_mtu));
    let mut probes = Vec::new();
    loop {
        let next = (lower + upper) / 2;
        let probe = if next - lower >= QUINN_MTU_MINIMUM_CHANGE_BYTES {
            next
        } else if upper - lower >= QUINN_MTU_MINIMUM_CHANGE_BYTES {
            upper
        } else {
            return probes;
        };
        probes.push(probe);
        lower = probe;
    }
}

/// What the QUIC round-trip model needs: the handshake's TLS message bytes, the HTTP/3
/// request and response, the datagram size, the congestion controllers' initial windows, the
/// link and, optionally, the handshake CPU per side. Stored with every QUIC transfer record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuicFlightModel {
    /// UDP payload of a full datagram: quinn's `initial_mtu` (1,200 by default). Path MTU
    /// discovery may raise it once the handshake is done; windows are in bytes, so the
    /// response's round trips barely change.
    pub datagram_bytes: u64,
    /// The congestion controllers' initial windows (bytes) of the client and the server.
    pub client_initial_window_bytes: u64,
    pub server_initial_window_bytes: u64,
    /// TLS handshake bytes (CRYPTO data, no TLS records over QUIC): the ClientHello; the
    /// server's flight (ServerHello … Finished); the client's second flight (Finished, and
    /// its Certificate and CertificateVerify under mutual TLS).
    pub client_hello_bytes: u64,
    pub server_flight_bytes: u64,
    pub client_flight_bytes: u64,
    /// HTTP/3 bytes of the request and of the response (frames and body; with the server's
    /// NewSessionTicket, which leaves just before it).
    pub request_bytes: u64,
    pub response_bytes: u64,
    /// The verified link: median RTT and rate (`None`: unlimited).
    pub rtt_ns: u64,
    pub bits_per_s: Option<u64>,
    /// Mean CPU time of one handshake on each side (0: not known, not counted).
    #[serde(default)]
    pub client_cpu_ns: u64,
    #[serde(default)]
    pub server_cpu_ns: u64,
    /// The server's path MTU probes once its handshake is confirmed, one per round trip (one
    /// in flight at a time), each taking its bytes of the congestion window in a round of the
    /// response ([`quinn_mtu_probes`]; empty: no discovery).
    #[serde(default)]
    pub mtu_probes_bytes: Vec<u64>,
    /// The client offered a valid address-validation token (`quic_token`): its address is
    /// valid from its first packet, and the server's first round is held by its window only.
    #[serde(default)]
    pub address_validated: bool,
    /// The server answered the first ClientHello with a HelloRetryRequest: one more round trip,
    /// and the two ClientHellos' Initial datagrams count toward the 3× budget
    /// (`client_hello_bytes` is both; each went in datagrams of its own: one more than their sum
    /// would fill, [`QuicFlightModel::client_initial`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hello_retry: bool,
}

impl Default for QuicFlightModel {
    /// quinn's defaults, empty flights, no link.
    fn default() -> QuicFlightModel {
        QuicFlightModel {
            datagram_bytes: MIN_INITIAL_DATAGRAM_BYTES,
            client_initial_window_bytes: QUINN_INITIAL_WINDOW_BYTES,
            server_initial_window_bytes: QUINN_INITIAL_WINDOW_BYTES,
            client_hello_bytes: 0,
            server_flight_bytes: 0,
            client_flight_bytes: 0,
            request_bytes: 0,
            response_bytes: 0,
            rtt_ns: 0,
            bits_per_s: None,
            client_cpu_ns: 0,
            server_cpu_ns: 0,
            mtu_probes_bytes: quinn_mtu_probes(MIN_INITIAL_DATAGRAM_BYTES),
            address_validated: false,
            hello_retry: false,
        }
    }
}

/// A QUIC sender's congestion window (bytes), slow start without loss, as quinn grows it; and
/// the window its last round was sent from (what paces that round).
struct Sender {
    window_bytes: u64,
    last_round_window_bytes: u64,
}

impl Sender {
    fn new(window_bytes: u64) -> Sender {
        Sender { window_bytes, last_round_window_bytes: window_bytes }
    }
}

impl Sender {
    /// Sends `datagrams` datagrams of `size` bytes; `budget_bytes`: what it may send before the
    /// peer's address is validated (the server's first round; `None`: no limit); `probes`:
    /// bytes of the window other packets (MTU probes) take in the first rounds. Returns the
    /// datagrams of each round trip.
    fn send(&mut self, datagrams: u64, size: u64, mut budget_bytes: Option<u64>, probes: &[u64]) -> Vec<u64> {
        let size = size.max(1);
        let (mut remaining, mut rounds) = (datagrams, Vec::new());
        while remaining > 0 {
            let probe = probes.get(rounds.len()).copied().unwrap_or(0);
            self.last_round_window_bytes = self.window_bytes;
            let by_window = (self.window_bytes.saturating_sub(probe) / size).max(1);
            let by_budget = budget_bytes.map_or(u64::MAX, |b| if b == 0 { 0 } else { (b - 1) / size + 1 });
            let n = remaining.min(by_window).min(by_budget).max(1);
            // Still congestion-blocked when the acknowledgements arrive: slow start grows the
            // window by the bytes acknowledged. A flight that ended or waits on the budget is
            // app-limited: no growth.
            if n == by_window && remaining > n {
                self.window_bytes += n * size + probe;
            }
            // The peer's answer to this round carries a Handshake packet: its address is valid.
            budget_bytes = None;
            remaining -= n;
            rounds.push(n);
        }
        rounds
    }
}

impl QuicFlightModel {
    /// Flight sizes from a handshake's message sizes (the keys of `Bytes::messages`, the same
    /// over TCP and QUIC): (ClientHello, server flight, client flight, NewSessionTicket), TLS
    /// message bytes without records.
    pub fn flights(bytes: &Bytes) -> (u64, u64, u64, u64) {
        let m = |name: &str| bytes.messages.get(name).copied().unwrap_or(0);
        let sum = |client: bool| -> u64 {
            bytes
                .messages
                .iter()
                .filter(|(k, _)| k.starts_with("Client") == client)
                .filter(|(k, _)| !["ClientHello", "NewSessionTicket"].contains(&k.as_str()))
                .map(|(_, v)| *v)
                .sum()
        };
        (m("ClientHello"), sum(false), sum(true), m("NewSessionTicket"))
    }

    /// The client's Initial datagrams: (how many, their UDP payload bytes). Every one carries
    /// an Initial packet, so each is at least 1,200 bytes; all but the last are full.
    pub fn client_initial(&self) -> (u64, u64) {
        let d = self.datagram_bytes.max(MIN_INITIAL_DATAGRAM_BYTES);
        let per = d - LONG_PACKET_OVERHEAD_BYTES;
        let n = self.client_hello_bytes.div_ceil(per).max(1);
        let last = self.client_hello_bytes - (n - 1) * per + LONG_PACKET_OVERHEAD_BYTES;
        let (n, bytes) = (n, (n - 1) * d + last.max(MIN_INITIAL_DATAGRAM_BYTES));
        if self.hello_retry {
            // Two ClientHellos, each in Initial datagrams of its own: one datagram more.
            (n + 1, bytes + MIN_INITIAL_DATAGRAM_BYTES)
        } else {
            (n, bytes)
        }
    }

    /// What the server may send before the client's address is validated: 3 × the client's
    /// Initial bytes.
    pub fn amplification_budget_bytes(&self) -> u64 {
        AMPLIFICATION_FACTOR * self.client_initial().1
    }

    /// The limit on the server's first round: the 3× budget, or none once a token validated
    /// the client's address.
    fn first_round_budget_bytes(&self) -> Option<u64> {
        (!self.address_validated).then(|| self.amplification_budget_bytes())
    }

    /// Datagrams of `bytes` of data in packets of `overhead` bytes each (`extra`: further packet
    /// headers coalesced into the flight).
    fn datagrams(&self, bytes: u64, overhead: u64, extra: u64) -> u64 {
        let per = self.datagram_bytes.saturating_sub(overhead).max(1);
        if bytes == 0 {
            return 0;
        }
        (bytes + extra).div_ceil(per)
    }

    /// Time to put `bytes` of UDP payload (datagrams of `datagram_bytes`) on the link, with
    /// the IP, UDP and Ethernet headers of each datagram.
    pub fn serialisation_ns(&self, bytes: u64) -> f64 {
        match self.bits_per_s {
            Some(r) if r > 0 => {
                let datagrams = bytes.div_ceil(self.datagram_bytes.max(1));
                let wire = bytes + datagrams * (UDP_HEADER_BYTES + ETHERNET_BYTES);
                wire as f64 * 8.0 / r as f64 * 1e9
            }
            _ => 0.0,
        }
    }

    /// A flight's first datagram leaving to its last arriving: one way, one RTT per further
    /// round, the last round's serialisation (as the TCP model's `flight_ns`), and the time
    /// quinn's pacer spreads the last round over beyond its burst.
    fn flight_ns(&self, rounds: &[u64], sender: &Sender) -> f64 {
        let rtt = self.rtt_ns as f64;
        let further = rounds.len().saturating_sub(1) as f64;
        let last = rounds.last().copied().unwrap_or(0) * self.datagram_bytes;
        rtt / 2.0
            + further * (rtt + self.serialisation_ns(self.datagram_bytes))
            + self.serialisation_ns(last)
            + self.pacing_ns(last, sender.last_round_window_bytes)
    }

    /// How long quinn's pacer holds the end of a round of `bytes` sent from a window of
    /// `window_bytes`: what exceeds the burst, at 1.25 × the window per RTT.
    pub fn pacing_ns(&self, bytes: u64, window_bytes: u64) -> f64 {
        let d = self.datagram_bytes.max(1);
        if self.rtt_ns == 0 || window_bytes == 0 {
            return 0.0;
        }
        let burst = (window_bytes * PACING_BURST_INTERVAL_NS / self.rtt_ns)
            .clamp(PACING_MIN_BURST_DATAGRAMS * d, PACING_MAX_BURST_DATAGRAMS * d);
        bytes.saturating_sub(burst) as f64 / (1.25 * window_bytes as f64) * self.rtt_ns as f64
    }

    /// Predicted round trips and times per layer:
    /// - `tls` (first Initial → handshake done at the client): the client's Initial datagrams
    ///   one way, the server's CPU, its flight — the first round held to the smaller of its
    ///   window and 3 × the client's Initial bytes (its window alone when a token validated the
    ///   client's address), later rounds to its window — and the
    ///   client's CPU;
    /// - `http` (request → last byte): the client's second flight (Finished, mTLS
    ///   certificate flight, the request) from its window, then the tickets and the response
    ///   from the server's window as its flight left it: `client rounds + response rounds − 1`;
    /// - `total`: their sum (no `tcp` layer: QUIC has no connect).
    ///
    /// The flights' rounds are in datagrams; `cwnd_after` is the window in whole datagrams.
    pub fn predict(&self) -> Prediction {
        let d = self.datagram_bytes.max(1);
        let mut client = Sender::new(self.client_initial_window_bytes);
        let mut server = Sender::new(self.server_initial_window_bytes);
        let (hello_datagrams, hello_bytes) = self.client_initial();
        let hello = client.send(hello_datagrams, d, None, &[]);
        let hello_window = client.window_bytes / d;
        let hello_ns = self.flight_ns(&hello, &client);
        // The ServerHello's Initial packet and the Handshake packets share the first datagram.
        let first_datagrams =
            self.datagrams(self.server_flight_bytes, LONG_PACKET_OVERHEAD_BYTES, LONG_PACKET_OVERHEAD_BYTES);
        let first = server.send(first_datagrams, d, self.first_round_budget_bytes(), &[]);
        let first_window = server.window_bytes / d;
        let first_ns = self.flight_ns(&first, &server);
        let second_datagrams = self.datagrams(
            self.client_flight_bytes + self.request_bytes,
            LONG_PACKET_OVERHEAD_BYTES,
            SHORT_PACKET_OVERHEAD_BYTES,
        );
        let second = client.send(second_datagrams.max(1), d, None, &[]);
        let second_window = client.window_bytes / d;
        let second_ns = self.flight_ns(&second, &client);
        let response_datagrams = self.datagrams(self.response_bytes, SHORT_PACKET_OVERHEAD_BYTES, 0).max(1);
        let response = server.send(response_datagrams, d, None, &self.mtu_probes_bytes);

        // A HelloRetryRequest: one round trip more before the flight.
        let retry = self.hello_retry as u32;
        let tls_ns = hello_ns
            + self.server_cpu_ns as f64
            + first_ns
            + self.client_cpu_ns as f64
            + retry as f64 * self.rtt_ns as f64;
        let http_ns = second_ns + self.flight_ns(&response, &server);
        let count = |r: &[u64]| r.len().max(1) as u32;
        let tls_rounds = count(&first) + retry;
        let http_rounds = count(&second) + count(&response) - 1;
        let (tls_bytes, http_bytes) = (first_datagrams * d, (second_datagrams + response_datagrams) * d);
        let layer = |layer: &'static str, round_trips: u32, time_ns: f64, bytes: u64| {
            LayerPrediction::new(layer, round_trips, time_ns, bytes, self.rtt_ns, |b| self.serialisation_ns(b))
        };
        Prediction {
            layers: vec![
                layer("tls", tls_rounds, tls_ns, tls_bytes),
                layer("http", http_rounds, http_ns, http_bytes),
                layer("total", tls_rounds + http_rounds, tls_ns + http_ns, hello_bytes + tls_bytes + http_bytes),
            ],
            flights: vec![
                FlightRounds { flight: "client hello", segments_per_round: hello, cwnd_after: hello_window },
                FlightRounds { flight: "server flight", segments_per_round: first, cwnd_after: first_window },
                FlightRounds { flight: "client flight", segments_per_round: second, cwnd_after: second_window },
                FlightRounds { flight: "response", segments_per_round: response, cwnd_after: server.window_bytes / d },
            ],
        }
    }

    /// Whether the server's first round is held by the 3× budget rather than by its window
    /// (or the flight's end).
    pub fn held_by_amplification(&self) -> bool {
        let p = self.predict();
        let first = &p.flights[1].segments_per_round;
        first.len() > 1 && first[0] < (self.server_initial_window_bytes / self.datagram_bytes.max(1)).max(1)
    }

    /// Measured vs predicted round trips, from the median time of each layer (ns; `total`:
    /// the median TTLB) — the TCP model's arithmetic.
    pub fn rounds(&self, median_ns: impl Fn(&str) -> Option<u64>) -> Vec<Rounds> {
        self.predict().compare(self.rtt_ns, |b| self.serialisation_ns(b), median_ns)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 50 ms RTT, unlimited rate (whole round trips), quinn's defaults; X25519MLKEM768's
    /// ClientHello (~1,500 bytes) or x25519's (~300).
    fn model(client_hello: u64, server_flight: u64, response: u64) -> QuicFlightModel {
        QuicFlightModel {
            client_hello_bytes: client_hello,
            server_flight_bytes: server_flight,
            client_flight_bytes: 36,
            request_bytes: 60,
            response_bytes: response,
            rtt_ns: 50_000_000,
            ..QuicFlightModel::default()
        }
    }

    fn trips(p: &Prediction) -> Vec<(&'static str, u32)> {
        p.layers.iter().map(|l| (l.layer, l.round_trips)).collect()
    }

    fn rounds_of<'a>(p: &'a Prediction, flight: &str) -> &'a [u64] {
        &p.flights.iter().find(|f| f.flight == flight).unwrap().segments_per_round
    }

    #[test]
    fn quinns_window_is_twelve_thousand_bytes() {
        assert_eq!(QUINN_INITIAL_WINDOW_BYTES, 14_720u64.clamp(2 * 1200, 10 * 1200));
    }

    #[test]
    fn the_client_hello_fills_initial_datagrams_of_at_least_1200_bytes() {
        // x25519: one datagram, padded to 1,200; the server may send 3,600 bytes.
        assert_eq!(model(300, 0, 0).client_initial(), (1, 1200));
        assert_eq!(model(300, 0, 0).amplification_budget_bytes(), 3600);
        // X25519MLKEM768: 1,500 bytes need two (1,150 of CRYPTO data each): 7,200 bytes of budget.
        assert_eq!(model(1500, 0, 0).client_initial(), (2, 2400));
        assert_eq!(model(1500, 0, 0).amplification_budget_bytes(), 7200);
        // A larger initial MTU: the second datagram is still padded to 1,200.
        let mut m = model(1500, 0, 0);
        m.datagram_bytes = 1452;
        assert_eq!(m.client_initial(), (2, 1452 + 1200));
    }

    #[test]
    fn x25519_and_p256_take_no_extra_round() {
        // A P-256 chain with an intermediate: ~1,300 bytes, two datagrams of the 3 allowed.
        let p = model(300, 1300, 100).predict();
        assert_eq!(rounds_of(&p, "server flight"), [2]);
        assert_eq!(trips(&p), [("tls", 1), ("http", 1), ("total", 2)]);
        assert_eq!(p.layer("total").unwrap().time_ns, 100_000_000);
        assert!(!model(300, 1300, 100).held_by_amplification());
    }

    #[test]
    fn an_ml_dsa_87_chain_waits_for_the_3x_budget() {
        // ML-DSA-87 leaf + intermediate and CertificateVerify: ~20,000 bytes, 18 datagrams.
        // Round 1: 6 datagrams (7,200 bytes of budget; the window of 10 is not what holds it,
        // and an app-limited round does not grow it); round 2 (address validated): the window
        // of 10, filled with data waiting, grows to 20; round 3: the last 2.
        let m = model(1500, 20_000, 100);
        let p = m.predict();
        assert_eq!(rounds_of(&p, "server flight"), [6, 10, 2]);
        assert_eq!(p.flights[1].cwnd_after, 20);
        assert_eq!(trips(&p), [("tls", 3), ("http", 1), ("total", 4)]);
        assert!(m.held_by_amplification());
        // Without the budget (an address already validated) the window alone: [10, 8].
        let mut server = Sender::new(QUINN_INITIAL_WINDOW_BYTES);
        assert_eq!(server.send(18, 1200, None, &[]), [10, 8]);
    }

    #[test]
    fn a_token_lifts_the_budget_and_leaves_the_window() {
        // ML-DSA-44 leaf, X25519MLKEM768: ~7,600 bytes, 7 datagrams — one more than the 6 the
        // budget allows: 2 rounds on a first contact, 1 with a token (the window holds 10).
        let mut m = model(1500, 7_600, 100);
        assert_eq!(rounds_of(&m.predict(), "server flight"), [6, 1]);
        m.address_validated = true;
        let p = m.predict();
        assert_eq!(rounds_of(&p, "server flight"), [7]);
        assert_eq!(trips(&p), [("tls", 1), ("http", 1), ("total", 2)]);
        assert!(!m.held_by_amplification());
        // ML-DSA-87 + intermediate (18 datagrams): the window alone holds it, [10, 8] — one
        // round fewer than the first contact's [6, 10, 2].
        let mut m = model(1500, 20_000, 100);
        m.address_validated = true;
        assert_eq!(rounds_of(&m.predict(), "server flight"), [10, 8]);
        assert_eq!(trips(&m.predict()), [("tls", 2), ("http", 1), ("total", 3)]);
    }

    #[test]
    fn a_larger_initial_mtu_raises_the_budget() {
        // ML-DSA-44 leaf only, X25519MLKEM768: ~7,600 bytes, 7 datagrams of 1,200 > the 6 allowed.
        let m = model(1500, 7_600, 100);
        assert_eq!(rounds_of(&m.predict(), "server flight"), [6, 1]);
        assert!(m.held_by_amplification());
        // At an initial MTU of 1,452: 2,652 bytes received, 7,956 allowed: 6 datagrams of
        // 1,452, and the flight needs 6.
        let mut big = m.clone();
        big.datagram_bytes = 1452;
        assert_eq!(rounds_of(&big.predict(), "server flight"), [6]);
        assert_eq!(trips(&big.predict())[0], ("tls", 1));
    }

    #[test]
    fn quinns_mtu_search_from_1200() {
        assert_eq!(quinn_mtu_probes(1200), [1326, 1389, 1420, 1452]);
        assert_eq!(quinn_mtu_probes(1452), Vec::<u64>::new());
        assert_eq!(quinn_mtu_probes(1420), [1452]);
        assert_eq!(quinn_mtu_probes(1440), Vec::<u64>::new());
    }

    #[test]
    fn an_mtu_probe_takes_its_bytes_of_the_first_response_round() {
        // 10 KiB: 9 datagrams; the window of 12,000 less the 1,326-byte probe holds 8.
        let p = model(1500, 7_920, 10_293).predict();
        assert_eq!(rounds_of(&p, "response"), [8, 1]);
        assert_eq!(trips(&p)[1], ("http", 2));
        let mut none = model(1500, 7_920, 10_293);
        none.mtu_probes_bytes.clear();
        assert_eq!(rounds_of(&none.predict(), "response"), [9]);
    }

    #[test]
    fn the_initial_window_is_in_bytes_and_grows_only_when_it_held_the_flight() {
        // initcwnd 4 → 4 × 1,200 bytes: a 150 KiB response (≈ 132 datagrams of 1,165 bytes of
        // data) from a window of 4 that the small flight did not grow, each of the first four
        // rounds also carrying an MTU probe (1,326, 1,389, 1,420, 1,452 bytes): 4,800 − 1,326
        // holds 2 datagrams, then 8,526 − 1,389 holds 5, …
        let mut m = model(300, 1300, 150 * 1024);
        m.server_initial_window_bytes = 4 * 1200;
        let p = m.predict();
        assert_eq!(rounds_of(&p, "response"), [2, 5, 12, 25, 52, 36]);
        assert_eq!(trips(&p), [("tls", 1), ("http", 6), ("total", 7)]);
        // quinn's default window, 12,000 bytes: 8, 17, 36, 71.
        assert_eq!(rounds_of(&model(300, 1300, 150 * 1024).predict(), "response"), [8, 17, 36, 71]);
    }

    #[test]
    fn the_pacer_spreads_what_exceeds_its_burst() {
        // At 20 ms a window of 89,335 bytes bursts 10 datagrams (12,000 bytes: more than its
        // 2 ms share); 71 datagrams' last 61 follow at 1.25 × the window per RTT: 0.66 RTT.
        let mut m = model(300, 1300, 0);
        m.rtt_ns = 20_000_000;
        let rounds = (71.0 - 10.0) * 1200.0 / (1.25 * 89_335.0);
        assert!((m.pacing_ns(71 * 1200, 89_335) - rounds * 20e6).abs() < 1.0);
        assert_eq!(m.pacing_ns(10 * 1200, 89_335), 0.0);
        // The 150 KiB response's last round is paced: 4 round trips and 0.66 of one.
        m.response_bytes = 150 * 1024;
        let http = m.predict().layer("http").unwrap().clone();
        assert_eq!(http.round_trips, 4);
        assert!((http.rounds - (4.0 + rounds)).abs() < 1e-6, "{}", http.rounds);
    }

    #[test]
    fn measured_rounds_use_the_datagrams_serialisation() {
        let mut m = model(300, 1300, 100);
        m.bits_per_s = Some(100_000_000);
        // A full datagram on the wire: 1,200 + 28 + 18 bytes, 99.68 µs at 100 Mbit/s.
        assert!((m.serialisation_ns(1200) - 1246.0 * 8.0 / 100e6 * 1e9).abs() < 1e-6);
        let tls = m.predict().layer("tls").unwrap().time_ns;
        let r = m.rounds(|l| (l == "tls").then_some(tls));
        assert_eq!((r.len(), r[0].predicted), (1, 1));
        assert!(r[0].error().abs() < 1e-6, "{r:?}");
    }

    #[test]
    fn flights_from_message_sizes() {
        let mut b = Bytes::default();
        for (k, v) in [
            ("ClientHello", 1_400),
            ("ServerHello", 1_200),
            ("EncryptedExtensions", 90),
            ("Certificate", 11_000),
            ("CertificateVerify", 3_313),
            ("Finished", 52),
            ("ClientFinished", 52),
            ("NewSessionTicket", 200),
        ] {
            b.messages.insert(k.into(), v);
        }
        assert_eq!(QuicFlightModel::flights(&b), (1_400, 1_200 + 90 + 11_000 + 3_313 + 52, 52, 200));
    }

    #[test]
    fn a_hello_retry_request_costs_a_round_and_its_second_client_hello_adds_budget() {
        // x25519 first (one Initial datagram: 3,600 bytes of budget), then X25519MLKEM768 (two):
        // a 7,900-byte flight waits for the client's address in one ClientHello, not after two.
        let plain = model(1_431, 7_900, 100);
        let mut retry = model(247 + 1_431, 7_900, 100);
        retry.hello_retry = true;
        assert_eq!(retry.client_initial().0, 3);
        assert_eq!(rounds_of(&plain.predict(), "server flight").len(), 2);
        assert_eq!(rounds_of(&retry.predict(), "server flight").len(), 1);
        // The HelloRetryRequest's round replaces the amplification's: as many in all.
        assert_eq!(trips(&plain.predict()), trips(&retry.predict()));
    }
}
