//! The round-trip model of one HTTPS transfer on a new TCP connection: how many round trips
//! each layer (TCP connect, TLS handshake, HTTP request → last byte) waits for, and how long it
//! takes, from the flights' sizes, the link (RTT, rate) and the TCP windows — as Linux sends
//! them (docs/netlab.md, "The round-trip model", states the rules so that they can be checked
//! by hand).
//!
//! A pure function: [`FlightModel`] (sizes, windows, link, CPU) in, [`Prediction`] out; no
//! measurement, no root. The transfer measurement stores its inputs with every record and
//! compares the prediction with what the lab measured; `pqtls assess` without root quotes it.
//! The inputs a caller without root needs are the handshake's message sizes per direction (the
//! in-situ measurement's `bytes.messages` suffice: [`FlightModel::flights`]), the request and
//! response sizes, the RTT, the rate, the initial windows and, optionally, the handshake CPU
//! per side.

use crate::link::LinkReport;
use crate::load::{HandshakePhases, LoadResult};
use crate::record::Bytes;
use crate::trace::Side;
use serde::{Deserialize, Serialize};

/// TCP payload bytes per segment on the lab's links (1500 MTU − 20 IPv4 − 20 TCP − 12 timestamps).
pub const LAB_MSS_BYTES: u64 = 1448;
/// IPv4 + TCP headers and the timestamp option, per segment.
pub const SEGMENT_HEADER_BYTES: u64 = 52;
/// Ethernet header + FCS: what `tbf` counts on a veth besides the IP packet.
pub const ETHERNET_BYTES: u64 = 18;
/// Linux's initial congestion window when the route sets none (RFC 6928).
pub const KERNEL_INITCWND: u64 = 10;
/// `tcp_rmem[1]`, the receive buffer a new socket gets: Linux's default, and the lab's.
pub const KERNEL_RCVBUF_BYTES: u64 = 131_072;
/// TLS record header.
const RECORD_HEADER_BYTES: u64 = 5;
/// An encrypted TLS 1.3 record: header, inner content type, AEAD tag.
const ENCRYPTED_RECORD_OVERHEAD_BYTES: u64 = 22;
/// Largest TLS plaintext record.
const MAX_RECORD_BYTES: u64 = 16_384;
/// The MSS Linux counts windows in when it sets `initrwnd` (the advertised MSS, without the
/// timestamp option's 12 bytes).
const ADVERTISED_MSS_BYTES: u64 = LAB_MSS_BYTES + 12;
/// Receive-buffer autotuning (`tcp_rcv_space_adjust`) starts growing the buffer once more than
/// this many segments' bytes were read within one round trip (`rcvq_space.space` =
/// `TCP_INIT_CWND` × MSS).
const AUTOTUNING_SEGMENTS: u64 = 10;

/// What the round-trip model needs: flight sizes, windows, the link and, optionally, the CPU
/// time of the handshake on each side. Stored with every transfer record (its inputs as the
/// lab had them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
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
    /// The NewSessionTicket records the server sends when the handshake completes, just
    /// before the response (TLS bytes; 0 when none or unknown).
    #[serde(default)]
    pub ticket_bytes: u64,
    /// Initial receive windows (segments) of the client's and the server's routes
    /// (`initrwnd`; the lab sets it equal to `initcwnd`); `None`: the route sets none, the
    /// window is the receive buffer's.
    #[serde(default)]
    pub client_initrwnd: Option<u64>,
    #[serde(default)]
    pub server_initrwnd: Option<u64>,
    /// The receive buffer a new socket gets (`tcp_rmem[1]`) on both sides.
    #[serde(default = "kernel_rcvbuf_bytes")]
    pub rcvbuf_bytes: u64,
    /// Mean CPU time of one handshake on each side (0: not known, not counted).
    #[serde(default)]
    pub client_cpu_ns: u64,
    #[serde(default)]
    pub server_cpu_ns: u64,
    /// Where each side's handshake CPU lies on the timeline ([`HandshakePhases`]): the model
    /// then counts the client's ClientHello before the `tls` layer, its completing call and the
    /// server's first flight in `tls`, and the server's completing call (with mutual TLS, its
    /// verification of the client's certificate) in `http`. `None` (not measured: records made
    /// before, in-situ records without steps): the whole of each side's CPU in `tls`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_phases: Option<HandshakePhases>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_phases: Option<HandshakePhases>,
    /// The server answered the first ClientHello with a HelloRetryRequest: one more round
    /// trip (ClientHello → HelloRetryRequest) before the second ClientHello and the flight.
    /// `client_hello_bytes` is then both ClientHellos.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub hello_retry: bool,
}

fn kernel_rcvbuf_bytes() -> u64 {
    KERNEL_RCVBUF_BYTES
}

impl Default for FlightModel {
    /// Linux's defaults on the lab's MSS, empty flights, no link.
    fn default() -> FlightModel {
        FlightModel {
            mss_bytes: LAB_MSS_BYTES,
            client_initcwnd: KERNEL_INITCWND,
            server_initcwnd: KERNEL_INITCWND,
            client_hello_bytes: 0,
            server_flight_bytes: 0,
            client_flight_bytes: 0,
            response_bytes: 0,
            rtt_ns: 0,
            bits_per_s: None,
            ticket_bytes: 0,
            client_initrwnd: None,
            server_initrwnd: None,
            rcvbuf_bytes: KERNEL_RCVBUF_BYTES,
            client_cpu_ns: 0,
            server_cpu_ns: 0,
            client_phases: None,
            server_phases: None,
            hello_retry: false,
        }
    }
}

/// The model's answer for one layer.
#[derive(Clone, Debug, PartialEq)]
pub struct LayerPrediction {
    /// `tcp`, `tls`, `http` or `total` (connect → last byte).
    pub layer: &'static str,
    /// Round trips the layer waits for: each is one RTT on the critical path.
    pub round_trips: u32,
    /// The layer's predicted duration: its round trips, the serialisation on its critical
    /// path at the link's rate, and the handshake CPU it includes.
    pub time_ns: u64,
    /// The TCP payload bytes of the layer (what the measured rounds' serialisation removes).
    pub bytes: u64,
    /// (time − serialisation of `bytes`) / RTT: the same arithmetic as the measured rounds
    /// ([`FlightModel::rounds`]), so that the two compare directly.
    pub rounds: f64,
}

/// How one flight left its sender: segments per round trip.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FlightRounds {
    /// `client hello`, `server flight`, `client flight`, `response`.
    pub flight: &'static str,
    pub segments_per_round: Vec<u64>,
    /// The sender's congestion window after the flight was acknowledged (segments).
    pub cwnd_after: u64,
}

/// The model's answer: per layer, and how each flight was sent.
#[derive(Clone, Debug, PartialEq)]
pub struct Prediction {
    pub layers: Vec<LayerPrediction>,
    pub flights: Vec<FlightRounds>,
}

impl Prediction {
    pub fn layer(&self, name: &str) -> Option<&LayerPrediction> {
        self.layers.iter().find(|l| l.layer == name)
    }
}

/// Round trips of one layer: measured (from the client's timestamps) and predicted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Rounds {
    /// `tcp`, `tls`, `http` or `total` (connect → last byte).
    pub layer: String,
    /// (median layer time − serialisation of the layer's bytes at the link's rate) / RTT.
    pub measured: f64,
    /// The round trips the model counts for the layer (an integer: RTTs on the critical path).
    pub predicted: u32,
    /// The model's predicted time as rounds, the same arithmetic as `measured`: (predicted
    /// time − serialisation of the layer's bytes) / RTT. `None` in records made before the
    /// model predicted times.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_rounds: Option<f64>,
    /// The model's predicted duration of the layer (ns).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub predicted_ns: Option<u64>,
}

impl Rounds {
    /// What the measured rounds are compared with: the predicted time as rounds, or (older
    /// records) the integer count.
    pub fn expected(&self) -> f64 {
        self.predicted_rounds.unwrap_or(self.predicted as f64)
    }

    /// Measured − expected, in rounds.
    pub fn error(&self) -> f64 {
        self.measured - self.expected()
    }
}

/// Round trips to deliver `segments` segments in slow start from a window of `cwnd`, every
/// round filling the window: after r round trips cwnd·(2^r − 1) segments are out. 0 segments
/// need 0 round trips. (The full model, [`FlightModel::predict`], also applies Linux's rule
/// that only a window-limited flight grows the window, and the receive window.)
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

/// A TCP sender's congestion window (segments), slow start without loss, as Linux grows it
/// (`tcp_slow_start` gated by `tcp_is_cwnd_limited`).
struct Sender {
    cwnd: u64,
}

/// A receiver's advertised window (segments) as the sender sees it: `rcv_ssthresh` grown by
/// two segments per segment received (`tcp_grow_window`), capped by the receive buffer's
/// window until autotuning (`tcp_rcv_space_adjust`) raises the buffer.
struct Receiver {
    window: u64,
    /// The window the initial buffer allows (`window_clamp`): half of `rcvbuf`, in whole MSS.
    clamp: u64,
    autotuned: bool,
    /// Bytes read since autotuning's measurement (re)started; `None` before the first data.
    read_since_bytes: Option<u64>,
    /// Autotuning needs more than this many bytes read within one round trip.
    autotuning_bytes: u64,
}

impl Receiver {
    fn new(initrwnd: Option<u64>, rcvbuf_bytes: u64, mss_bytes: u64) -> Receiver {
        let mss = mss_bytes.max(1);
        // tcp_select_initial_window: the buffer's space (half of it: the default scaling
        // ratio) rounded down to whole advertised MSS; initrwnd (× advertised MSS) below it.
        let space = rcvbuf_bytes / 2 / ADVERTISED_MSS_BYTES * ADVERTISED_MSS_BYTES;
        let initial = initrwnd.map_or(space, |w| w.saturating_mul(ADVERTISED_MSS_BYTES).min(space));
        Receiver {
            window: initial / mss,
            clamp: space / mss,
            autotuned: false,
            read_since_bytes: None,
            autotuning_bytes: AUTOTUNING_SEGMENTS * mss,
        }
    }

    /// A round of `segments` (`bytes`) arrives: autotuning's check at its first read (a
    /// round trip after the last one), then the window grows by two segments per segment.
    fn receive(&mut self, segments: u64, bytes: u64) {
        match self.read_since_bytes {
            Some(read) if read > self.autotuning_bytes => self.autotuned = true,
            _ => self.read_since_bytes = Some(0),
        }
        if let Some(read) = self.read_since_bytes.as_mut() {
            *read += bytes;
        }
        let cap = if self.autotuned { u64::MAX } else { self.clamp };
        self.window = self.window.saturating_add(2 * segments).min(cap.max(self.window));
    }
}

impl Sender {
    /// Sends a flight of `bytes` (`mss_bytes` per segment) to `to`; returns the segments of
    /// each round trip and the bytes of the last round. Each round sends what the congestion
    /// window and the receiver's window allow; when its acknowledgements arrive the window
    /// grows by the segments acknowledged if the flight has filled the window (in this round
    /// or an earlier one: Linux keeps counting a window-limited flight as such until it is
    /// acknowledged), and otherwise only while it is below twice the segments in flight.
    fn send(&mut self, bytes: u64, mss_bytes: u64, to: &mut Receiver) -> (Vec<u64>, u64) {
        let mss = mss_bytes.max(1);
        let mut remaining = bytes.div_ceil(mss);
        let (mut rounds, mut filled, mut sent) = (Vec::new(), false, 0u64);
        let mut last_bytes = 0;
        while remaining > 0 {
            let n = remaining.min(self.cwnd).min(to.window.max(1));
            filled |= n >= self.cwnd;
            if filled {
                self.cwnd += n;
            } else if self.cwnd < 2 * n {
                self.cwnd = (self.cwnd + n).min(2 * n);
            }
            last_bytes = (bytes - sent).min(n.saturating_mul(mss));
            to.receive(n, last_bytes);
            sent += last_bytes;
            remaining -= n;
            rounds.push(n);
        }
        (rounds, last_bytes)
    }
}

impl FlightModel {
    /// Flight sizes from a handshake's message sizes, plus the request and the response (as
    /// HTTP bytes: head + body): (ClientHello, server flight, client flight, response), TLS
    /// bytes. The in-situ measurement's `bytes.messages` suffice.
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

    /// A side's [`HandshakePhases`] from its in-situ steps (`step(name)`: its mean CPU, 0 when
    /// absent) and the handshake's message sizes, for a model without a lab. A message is
    /// processed once its last byte is in; only those whose last byte comes in the last
    /// segment of the peer's flight (the client's: followed by `request_bytes`) are processed
    /// after the flight is in, on the path — the others (e.g. a post-quantum Certificate, the
    /// chain validated) while the rest arrives, as the lab measures it. The client's first
    /// flight is its `client_hello` step, its completion those messages' steps and the writing
    /// of its own certificate flight; the server's first flight is every step up to its
    /// Finished, its completion those messages' steps and its tickets.
    pub fn phases_of_steps(
        side: Side,
        bytes: &Bytes,
        request_bytes: u64,
        step: impl Fn(&str) -> f64,
    ) -> HandshakePhases {
        use crate::steps::*;
        let sum = |names: &[&str]| names.iter().map(|n| step(n)).sum::<f64>();
        // The peer's flight: (message, the step that reads it, size), in order.
        let reads: &[(&str, &str)] = match side {
            Side::Client => &[
                ("ServerHello", SERVER_HELLO),
                ("EncryptedExtensions", ENCRYPTED_EXTENSIONS),
                ("CertificateRequest", CERTIFICATE_REQUEST),
                ("Certificate", CERTIFICATE),
                ("CompressedCertificate", CERTIFICATE),
                ("CertificateVerify", CERTIFICATE_VERIFY),
                ("Finished", FINISHED),
            ],
            Side::Server => &[
                ("ClientCertificate", CLIENT_CERTIFICATE),
                ("ClientCompressedCertificate", CLIENT_CERTIFICATE),
                ("ClientCertificateVerify", CLIENT_CERTIFICATE_VERIFY),
                ("ClientFinished", CLIENT_FINISHED),
            ],
        };
        let size = |name: &str| bytes.messages.get(name).copied().unwrap_or(0);
        let trailer = if side == Side::Server { request_bytes } else { 0 };
        let flight: u64 = reads.iter().map(|(m, _)| size(m)).sum::<u64>() + trailer;
        let last_segment_from = flight.saturating_sub(LAB_MSS_BYTES);
        let mut end = 0;
        let mut after_flight = 0.0;
        for (m, read) in reads {
            end += size(m);
            if size(m) > 0 && end > last_segment_from {
                after_flight += step(read);
            }
        }
        match side {
            Side::Client => HandshakePhases {
                first_flight_cpu_ns_mean: step(CLIENT_HELLO),
                completion_cpu_ns_mean: after_flight + sum(&[CLIENT_CERTIFICATE, CLIENT_CERTIFICATE_VERIFY]),
            },
            Side::Server => HandshakePhases {
                first_flight_cpu_ns_mean: sum(&[
                    CLIENT_HELLO,
                    HELLO_RETRY_REQUEST,
                    SERVER_HELLO,
                    ENCRYPTED_EXTENSIONS,
                    CERTIFICATE_REQUEST,
                    CERTIFICATE,
                    CERTIFICATE_VERIFY,
                    FINISHED,
                ]),
                completion_cpu_ns_mean: after_flight + step(NEW_SESSION_TICKET),
            },
        }
    }

    /// The NewSessionTicket records of a handshake's message sizes (TLS bytes; 0 without).
    pub fn tickets(bytes: &Bytes) -> u64 {
        encrypted(bytes.messages.get("NewSessionTicket").copied().unwrap_or(0))
    }

    /// This model with the inputs a transfer's load result and link report give, where it has
    /// none: the tickets (from the message sizes), the routes' `initrwnd` (the lab sets it
    /// equal to `initcwnd`), the receive buffer (`tcp_rmem[1]` as the lab read it back) and the
    /// mean handshake CPU per side. The transfer measurement makes its model so, and records
    /// stored before the model had these inputs are completed the same way.
    pub fn completed(&self, load: &LoadResult, link: &LinkReport) -> FlightModel {
        let mut m = self.clone();
        if m.ticket_bytes == 0 {
            m.ticket_bytes = load.bytes.as_ref().map_or(0, FlightModel::tickets);
        }
        m.client_initrwnd = m.client_initrwnd.or(link.setup.client_initcwnd);
        m.server_initrwnd = m.server_initrwnd.or(link.setup.server_initcwnd);
        if let Some(rcvbuf) = link.setup.tcp_rmem.split_whitespace().nth(1).and_then(|v| v.parse().ok()) {
            m.rcvbuf_bytes = rcvbuf;
        }
        if m.client_cpu_ns == 0 {
            m.client_cpu_ns = load.client_handshake_cpu_ns_mean.round() as u64;
        }
        if m.server_cpu_ns == 0 {
            m.server_cpu_ns = load.server.as_ref().map_or(0, |s| s.handshake_cpu_ns_mean.round() as u64);
        }
        m.client_phases = m.client_phases.or(load.client_phases);
        m.server_phases = m.server_phases.or(load.server.as_ref().and_then(|s| s.phases));
        m
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

    /// Time from a flight's first segment leaving to its last byte arriving: one way, plus one
    /// RTT per further round (each starts when the first acknowledgement of the previous one
    /// is back, one segment's serialisation after it started), plus the last round's own
    /// serialisation (the link carries a round back to back; earlier rounds' serialisation
    /// overlaps the next round's wait).
    fn flight_ns(&self, rounds: &[u64], last_bytes: u64) -> f64 {
        let rtt = self.rtt_ns as f64;
        let further = rounds.len().saturating_sub(1) as f64;
        rtt / 2.0 + further * (rtt + self.serialisation_ns(self.mss_bytes)) + self.serialisation_ns(last_bytes)
    }

    /// Predicted round trips and times per layer (docs/netlab.md, "The round-trip model"):
    /// - `tcp`: SYN → SYN/ACK, one round trip;
    /// - `tls` (ClientHello → client Finished): the ClientHello one way, the server's CPU up to
    ///   its first flight, its flight from its initial window (a round trip per further
    ///   round), the client's CPU of the call that read its end and wrote the client's flight;
    /// - `http` (request → last byte): the client's second flight (mTLS certificate flight,
    ///   Finished, request) from the client's window as the ClientHello left it, the server's
    ///   CPU completing the handshake (with mutual TLS, verifying the client's certificate),
    ///   then the tickets and the response from the server's window as its first flight left
    ///   it, to the client's receive window: `client rounds + response rounds − 1` round trips
    ///   (a one-way trip each way);
    /// - `total`: their sum and the client's CPU building its ClientHello (`tcp_to_tls`).
    ///
    /// Without the phases ([`FlightModel::client_phases`]), each side's whole CPU is in `tls`.
    /// The rest of a side's CPU (e.g. the client validating the server's chain while the
    /// flight's last round is on its way) overlaps the wait and is on no layer's path.
    pub fn predict(&self) -> Prediction {
        let mss = self.mss_bytes.max(1);
        let mut client = Sender { cwnd: self.client_initcwnd.max(1) };
        let mut server = Sender { cwnd: self.server_initcwnd.max(1) };
        let mut at_client = Receiver::new(self.client_initrwnd, self.rcvbuf_bytes, mss);
        let mut at_server = Receiver::new(self.server_initrwnd, self.rcvbuf_bytes, mss);

        let (hello, hello_last) = client.send(self.client_hello_bytes, mss, &mut at_server);
        let hello_cwnd = client.cwnd;
        let (first, first_last) = server.send(self.server_flight_bytes, mss, &mut at_client);
        let first_cwnd = server.cwnd;
        let (second, second_last) = client.send(self.client_flight_bytes, mss, &mut at_server);
        let second_cwnd = client.cwnd;
        let (response, response_last) = server.send(self.ticket_bytes + self.response_bytes, mss, &mut at_client);

        let rtt = self.rtt_ns as f64;
        let tcp_ns = rtt;
        let (client_hello_cpu_ns, client_tls_cpu_ns) = match self.client_phases {
            Some(p) => (p.first_flight_cpu_ns_mean, p.completion_cpu_ns_mean),
            None => (0.0, self.client_cpu_ns as f64),
        };
        let (server_tls_cpu_ns, server_http_cpu_ns) = match self.server_phases {
            Some(p) => (p.first_flight_cpu_ns_mean, p.completion_cpu_ns_mean),
            None => (self.server_cpu_ns as f64, 0.0),
        };
        let tls_ns = self.flight_ns(&hello, hello_last)
            + server_tls_cpu_ns
            + self.flight_ns(&first, first_last)
            + client_tls_cpu_ns;
        let http_ns =
            self.flight_ns(&second, second_last) + server_http_cpu_ns + self.flight_ns(&response, response_last);
        // A HelloRetryRequest: one round trip more before the flight.
        let retry = self.hello_retry as u32;
        let tls_ns = tls_ns + retry as f64 * rtt;
        let count = |r: &[u64]| r.len().max(1) as u32;
        let tls_rounds = count(&first) + retry;
        let http_rounds = count(&second) + count(&response) - 1;
        let layer = |layer: &'static str, round_trips: u32, time_ns: f64, bytes: u64| {
            LayerPrediction::new(layer, round_trips, time_ns, bytes, self.rtt_ns, |b| self.serialisation_ns(b))
        };
        let all_bytes =
            self.client_hello_bytes + self.server_flight_bytes + self.client_flight_bytes + self.response_bytes;
        Prediction {
            layers: vec![
                layer("tcp", 1, tcp_ns, 0),
                layer("tls", tls_rounds, tls_ns, self.server_flight_bytes),
                layer("http", http_rounds, http_ns, self.client_flight_bytes + self.response_bytes),
                layer(
                    "total",
                    1 + tls_rounds + http_rounds,
                    tcp_ns + client_hello_cpu_ns + tls_ns + http_ns,
                    all_bytes,
                ),
            ],
            flights: vec![
                FlightRounds { flight: "client hello", segments_per_round: hello, cwnd_after: hello_cwnd },
                FlightRounds { flight: "server flight", segments_per_round: first, cwnd_after: first_cwnd },
                FlightRounds { flight: "client flight", segments_per_round: second, cwnd_after: second_cwnd },
                FlightRounds { flight: "response", segments_per_round: response, cwnd_after: server.cwnd },
            ],
        }
    }

    /// Measured vs predicted round trips, from the median time of each layer (ns; `total`:
    /// the median TTLB).
    pub fn rounds(&self, median_ns: impl Fn(&str) -> Option<u64>) -> Vec<Rounds> {
        self.predict().compare(self.rtt_ns, |b| self.serialisation_ns(b), median_ns)
    }
}

impl LayerPrediction {
    /// A layer of `round_trips` taking `time_ns`, its `bytes` serialised by `serialisation_ns`
    /// (the model's own rule: TCP segments or QUIC datagrams), its rounds the measured arithmetic.
    pub(crate) fn new(
        layer: &'static str,
        round_trips: u32,
        time_ns: f64,
        bytes: u64,
        rtt_ns: u64,
        serialisation_ns: impl Fn(u64) -> f64,
    ) -> LayerPrediction {
        LayerPrediction {
            layer,
            round_trips,
            time_ns: time_ns.round() as u64,
            bytes,
            rounds: if rtt_ns == 0 { 0.0 } else { (time_ns - serialisation_ns(bytes)) / rtt_ns as f64 },
        }
    }
}

impl Prediction {
    /// Measured vs predicted round trips, from the median time of each layer (ns; `total`: the
    /// median TTLB): (median − serialisation of the layer's bytes) / RTT, for the TCP and the
    /// QUIC model alike.
    pub(crate) fn compare(
        self,
        rtt_ns: u64,
        serialisation_ns: impl Fn(u64) -> f64,
        median_ns: impl Fn(&str) -> Option<u64>,
    ) -> Vec<Rounds> {
        self.layers
            .into_iter()
            .filter_map(|p| {
                let t = median_ns(p.layer)? as f64;
                let measured =
                    if rtt_ns == 0 { 0.0 } else { ((t - serialisation_ns(p.bytes)) / rtt_ns as f64).max(0.0) };
                Some(Rounds {
                    layer: p.layer.into(),
                    measured,
                    predicted: p.round_trips,
                    predicted_rounds: Some(p.rounds),
                    predicted_ns: Some(p.time_ns),
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u64 = LAB_MSS_BYTES;

    /// A transfer at 50 ms RTT, unlimited rate (times are whole round trips), both routes at
    /// `iw` (initcwnd = initrwnd, as the lab sets them), flights in whole segments.
    fn model(iw: u64, hello: u64, server: u64, client: u64, response: u64) -> FlightModel {
        FlightModel {
            client_initcwnd: iw,
            server_initcwnd: iw,
            client_hello_bytes: hello * MSS,
            server_flight_bytes: server * MSS,
            client_flight_bytes: client * MSS,
            response_bytes: response * MSS,
            rtt_ns: 50_000_000,
            client_initrwnd: Some(iw),
            server_initrwnd: Some(iw),
            ..FlightModel::default()
        }
    }

    fn trips(p: &Prediction) -> Vec<(&'static str, u32)> {
        p.layers.iter().map(|l| (l.layer, l.round_trips)).collect()
    }

    fn rounds_of<'a>(p: &'a Prediction, flight: &str) -> &'a [u64] {
        &p.flights.iter().find(|f| f.flight == flight).unwrap().segments_per_round
    }

    // Sizes of the mTLS study's two configurations, in segments of 1448 bytes: PQ
    // (X25519MLKEM768, ML-DSA-65 leaf + intermediate both sides) ClientHello 2, server flight
    // 12, client flight 11 (certificates, CertificateVerify, Finished, request); classical
    // (x25519, P-256) 1, 2, 2. Responses with the HTTP head and records: 0 → 1, 50 KiB → 36,
    // 150 KiB → 107 segments.

    #[test]
    fn slow_start_by_hand() {
        assert_eq!(slow_start_round_trips(0, 10), 0);
        assert_eq!(slow_start_round_trips(10, 10), 1);
        assert_eq!(slow_start_round_trips(11, 10), 2);
        assert_eq!(slow_start_round_trips(30, 10), 2);
        assert_eq!(slow_start_round_trips(31, 10), 3);
        assert_eq!(slow_start_round_trips(31, 40), 1);
    }

    #[test]
    fn pq_mtls_at_initcwnd_10_waits_a_round_for_the_clients_certificate_flight() {
        let p = model(10, 2, 12, 11, 1).predict();
        // The server flight fills its window of 10: 10 + 2, and grows it by all 12 to 22.
        assert_eq!(rounds_of(&p, "server flight"), [10, 2]);
        assert_eq!(p.flights[1].cwnd_after, 22);
        // Two ClientHello segments do not grow the client's window of 10 (10 ≥ 2 × 2): its
        // 11-segment flight leaves the request for a second round trip.
        assert_eq!(p.flights[0].cwnd_after, 10);
        assert_eq!(rounds_of(&p, "client flight"), [10, 1]);
        assert_eq!(trips(&p), [("tcp", 1), ("tls", 2), ("http", 2), ("total", 5)]);
        // Without rate and CPU the times are whole round trips.
        assert_eq!(p.layer("total").unwrap().time_ns, 250_000_000);
        assert_eq!(p.layer("total").unwrap().rounds, 5.0);
        // At initcwnd 40 every flight fits its first window.
        assert_eq!(trips(&model(40, 2, 12, 11, 1).predict()), [("tcp", 1), ("tls", 1), ("http", 1), ("total", 3)]);
    }

    #[test]
    fn classical_150k_at_initcwnd_40_is_held_by_the_clients_receive_window() {
        let p = model(40, 1, 2, 2, 107).predict();
        // A 2-segment flight leaves the server's window at 40 (40 ≥ 2 × 2: not window-limited).
        assert_eq!(p.flights[1].cwnd_after, 40);
        // The client's window: initrwnd 40, +2 per segment of the server flight = 44, the
        // initial buffer's clamp (131072 / 2 in whole 1460-byte MSS = 64240 bytes = 44
        // segments). The first round reads 2 segments: too few for autotuning, so the
        // response's second round is held to 44; autotuning lifts the clamp after the 40 of
        // its first round.
        assert_eq!(rounds_of(&p, "response"), [40, 44, 23]);
        assert_eq!(trips(&p), [("tcp", 1), ("tls", 1), ("http", 3), ("total", 5)]);
        // The PQ server flight (12 segments, 16.8 KB > 10 segments read in one round trip)
        // lets autotuning lift the clamp during the response's first round: two rounds.
        let pq = model(40, 2, 12, 11, 107).predict();
        assert_eq!(rounds_of(&pq, "response"), [40, 67]);
        assert_eq!(trips(&pq), [("tcp", 1), ("tls", 1), ("http", 2), ("total", 4)]);
    }

    #[test]
    fn a_classical_handshake_at_initcwnd_10_takes_one_round_each() {
        let p = model(10, 1, 2, 2, 1).predict();
        assert_eq!(trips(&p), [("tcp", 1), ("tls", 1), ("http", 1), ("total", 3)]);
        assert_eq!(p.flights.iter().map(|f| f.cwnd_after).collect::<Vec<_>>(), [10, 10, 10, 10]);
    }

    #[test]
    fn a_150k_response_at_initcwnd_10_and_40() {
        // initcwnd 10: the server's window stays 10 after its small flight (not window-limited),
        // then doubles: 10 + 20 + 40 + 37 (the receive window, 44, does not bind).
        let p = model(10, 1, 2, 2, 107).predict();
        assert_eq!(rounds_of(&p, "response"), [10, 20, 40, 37]);
        assert_eq!(trips(&p), [("tcp", 1), ("tls", 1), ("http", 4), ("total", 6)]);
        // PQ at initcwnd 10: the server flight filled its window, which grew to 22: 22 + 44 + 41.
        let pq = model(10, 2, 12, 11, 107).predict();
        assert_eq!(rounds_of(&pq, "response"), [22, 44, 41]);
        assert_eq!(trips(&pq), [("tcp", 1), ("tls", 2), ("http", 4), ("total", 7)]);
        // initcwnd 40: see classical_150k_at_initcwnd_40_is_held_by_the_clients_receive_window.
        assert_eq!(trips(&model(40, 1, 2, 2, 107).predict())[3], ("total", 5));
    }

    #[test]
    fn a_small_flight_grows_the_window_only_below_twice_what_it_sent() {
        // 8 segments from a window of 10: 10 < 16, so it grows, to at most 2 × 8.
        let p = model(10, 1, 8, 1, 1).predict();
        assert_eq!(p.flights[1].cwnd_after, 16);
        // 4 segments from 10: 10 ≥ 8, no growth.
        assert_eq!(model(10, 1, 4, 1, 1).predict().flights[1].cwnd_after, 10);
    }

    #[test]
    fn times_add_serialisation_on_the_critical_path_and_cpu() {
        // 100 Mbit/s: a full segment is 1518 bytes on the wire, 121.44 µs.
        let mut m = model(10, 1, 12, 1, 1);
        m.bits_per_s = Some(100_000_000);
        m.server_cpu_ns = 1_000_000;
        m.client_cpu_ns = 500_000;
        let seg_ns = 1518.0 * 8.0 / 100e6 * 1e9;
        assert!((m.serialisation_ns(MSS) - seg_ns).abs() < 1e-6);
        let tls = m.predict().layer("tls").unwrap().clone();
        // ClientHello one way (+1 segment), server CPU, flight [10, 2]: one way, one RTT and
        // one segment to the second round, its 2 segments; client CPU.
        let expect = 25e6 + seg_ns + 1e6 + (25e6 + 50e6 + seg_ns + 2.0 * seg_ns) + 0.5e6;
        assert_eq!(tls.time_ns, expect.round() as u64);
        assert_eq!(tls.round_trips, 2);
        // Its rounds: the measured arithmetic, (time − serialisation of the flight) / RTT.
        assert!((tls.rounds - (expect - 12.0 * seg_ns) / 50e6).abs() < 1e-9);
    }

    #[test]
    fn phases_put_each_sides_cpu_on_the_layer_whose_path_it_is_on() {
        let mut m = model(10, 1, 12, 1, 1);
        m.server_cpu_ns = 3_000_000;
        m.client_cpu_ns = 2_000_000;
        let times = |p: &Prediction| {
            let t = |l| p.layer(l).unwrap().time_ns as i64;
            (t("tls"), t("http"), t("total"))
        };
        let (tls, http, total) = times(&m.predict());
        // The client: 0.2 ms building its ClientHello, 0.5 ms in the call that completes; the
        // server: 1.8 ms to its first flight, 0.7 ms completing (the rest overlapped arrivals).
        m.client_phases =
            Some(HandshakePhases { first_flight_cpu_ns_mean: 200_000.0, completion_cpu_ns_mean: 500_000.0 });
        m.server_phases =
            Some(HandshakePhases { first_flight_cpu_ns_mean: 1_800_000.0, completion_cpu_ns_mean: 700_000.0 });
        let p = m.predict();
        let t = |l| p.layer(l).unwrap().time_ns as i64;
        assert_eq!(t("tls"), tls - 3_000_000 - 2_000_000 + 1_800_000 + 500_000);
        assert_eq!(t("http"), http + 700_000);
        assert_eq!(t("total"), total - 5_000_000 + 200_000 + 500_000 + 1_800_000 + 700_000);
        assert_eq!(t("total"), t("tcp") + 200_000 + t("tls") + t("http"));
        // The round trips do not move: CPU is time on the path, not a round.
        assert_eq!(
            p.layer("total").unwrap().round_trips,
            model(10, 1, 12, 1, 1).predict().layer("total").unwrap().round_trips
        );
    }

    #[test]
    fn phases_from_steps_count_what_is_read_after_the_flights_last_segment() {
        let sizes = |pairs: &[(&str, u64)]| Bytes {
            messages: pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            ..Bytes::default()
        };
        let step = |n: &str| match n {
            "client_hello" => 100.0,
            "server_hello" => 10.0,
            "certificate" => 1_000.0,
            "certificate_verify" => 300.0,
            "finished" => 20.0,
            "client_certificate" => 5.0,
            "client_certificate_verify" => 700.0,
            "client_finished" => 7.0,
            "new_session_ticket" => 3.0,
            _ => 0.0,
        };
        // Post-quantum sizes: the Certificate (11 KB) is in before the last segment, the
        // CertificateVerify (3.3 KB) ends in it.
        let pq = sizes(&[
            ("ClientHello", 1_300),
            ("ServerHello", 1_200),
            ("Certificate", 11_000),
            ("CertificateVerify", 3_313),
            ("Finished", 36),
            ("ClientCertificate", 11_000),
            ("ClientCertificateVerify", 3_313),
            ("ClientFinished", 36),
        ]);
        let c = FlightModel::phases_of_steps(Side::Client, &pq, 100, step);
        assert_eq!((c.first_flight_cpu_ns_mean, c.completion_cpu_ns_mean), (100.0, 300.0 + 20.0 + 5.0 + 700.0));
        let s = FlightModel::phases_of_steps(Side::Server, &pq, 100, step);
        assert_eq!(s.completion_cpu_ns_mean, 700.0 + 7.0 + 3.0);
        assert_eq!(s.first_flight_cpu_ns_mean, 100.0 + 10.0 + 1_000.0 + 300.0 + 20.0);
        // Classical sizes: each flight is one segment, everything in it is read after it is in.
        let classical = sizes(&[
            ("ClientHello", 300),
            ("ServerHello", 90),
            ("Certificate", 900),
            ("CertificateVerify", 80),
            ("Finished", 36),
            ("ClientCertificate", 900),
            ("ClientCertificateVerify", 80),
            ("ClientFinished", 36),
        ]);
        let c = FlightModel::phases_of_steps(Side::Client, &classical, 100, step);
        assert_eq!(c.completion_cpu_ns_mean, 10.0 + 1_000.0 + 300.0 + 20.0 + 5.0 + 700.0);
        let s = FlightModel::phases_of_steps(Side::Server, &classical, 100, step);
        assert_eq!(s.completion_cpu_ns_mean, 5.0 + 700.0 + 7.0 + 3.0);
    }

    #[test]
    fn measured_rounds_remove_serialisation_and_compare_with_the_predicted_time() {
        let mut m = model(10, 1, 2, 2, 1);
        m.bits_per_s = Some(100_000_000);
        let tls = m.predict().layer("tls").unwrap().time_ns;
        let r = m.rounds(|l| (l == "tls").then_some(tls));
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].predicted, 1);
        assert!(r[0].error().abs() < 1e-6, "{r:?}");
        // Older records: no predicted time, the integer count is what is compared.
        let old =
            Rounds { layer: "tls".into(), measured: 1.2, predicted: 1, predicted_rounds: None, predicted_ns: None };
        assert!((old.error() - 0.2).abs() < 1e-9);
    }

    #[test]
    fn flights_from_message_sizes() {
        let mut b = Bytes::default();
        for (k, v) in [
            ("ClientHello", 1_400),
            ("ServerHello", 1_200),
            ("EncryptedExtensions", 20),
            ("Certificate", 11_000),
            ("CertificateVerify", 3_313),
            ("Finished", 52),
            ("ClientFinished", 52),
            ("NewSessionTicket", 500),
        ] {
            b.messages.insert(k.into(), v);
        }
        let (ch, server, client, response) = FlightModel::flights(&b, 100, 1_000);
        assert_eq!(ch, 1_405);
        // 14 385 plaintext bytes in one record: + 22.
        assert_eq!(server, 1_205 + 14_385 + 22);
        assert_eq!(client, 52 + 22 + 100 + 22);
        assert_eq!(response, 1_022);
        assert_eq!(FlightModel::tickets(&b), 522);
    }

    #[test]
    fn a_hello_retry_request_costs_one_round_trip() {
        let plain = model(10, 1, 4, 1, 1);
        let retry = FlightModel { hello_retry: true, ..plain.clone() };
        let (p, r) = (plain.predict(), retry.predict());
        assert_eq!(r.layer("tls").unwrap().round_trips, p.layer("tls").unwrap().round_trips + 1);
        assert_eq!(r.layer("total").unwrap().round_trips, p.layer("total").unwrap().round_trips + 1);
        assert_eq!(r.layer("tls").unwrap().time_ns, p.layer("tls").unwrap().time_ns + 50_000_000);
    }
}
