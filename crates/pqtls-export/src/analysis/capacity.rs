//! The capacity and latency model (SPEC C3): from a record's measured bytes and CPU time,
//! the new sessions per second a link and a CPU core can carry, the serialisation time of
//! each flight, and the round trips TCP slow start needs to deliver the server's first
//! flight (and, with mutual TLS, the client's certificate flight).
//!
//! Everything here is arithmetic on measured numbers under the assumptions listed by
//! [`NetworkModel::assumptions`]; docs/report.md gives the formulas.

use super::InsituView;
use serde::Serialize;

/// Per-handshake record-layer overhead of one encrypted record: 5-byte header + 1-byte
/// inner content type + 16-byte AEAD tag.
pub const ENCRYPTED_RECORD_OVERHEAD: u64 = 22;
/// Record header of the plaintext ClientHello record.
pub const RECORD_HEADER: u64 = 5;

/// How the bytes of a handshake are counted on a link (`pqtls report --capacity-convention`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Convention {
    /// pqtls' own: 8 bits per byte plus each segment's TCP/IP and Ethernet framing, in each
    /// direction; a link carries the sessions of its bottleneck direction.
    #[default]
    Pqtls,
    /// The IBM in-situ study's (study 000, its data-volume table: 1 Gbps / (928 B × 10 bit) =
    /// 0.11 M sessions/s): 10 bits per TLS byte, no per-segment framing, and the sessions a
    /// link carries from the server→client bytes only.
    Ibm,
}

impl Convention {
    pub const ALL: [Convention; 2] = [Convention::Pqtls, Convention::Ibm];

    /// `pqtls` or `ibm`; anything else is refused naming both.
    pub fn parse(s: &str) -> Result<Convention, String> {
        match s.to_ascii_lowercase().as_str() {
            "pqtls" => Ok(Convention::Pqtls),
            "ibm" => Ok(Convention::Ibm),
            _ => Err(format!(
                "unknown capacity convention '{s}': pqtls (8 bits per byte plus each segment's TCP/IP and Ethernet \
                 framing, both directions; the default) or ibm (study 000's: 10 bits per byte, no framing, \
                 sessions/s from the server→client bytes only)"
            )),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Convention::Pqtls => "pqtls",
            Convention::Ibm => "ibm",
        }
    }

    /// Bits a byte costs on the link.
    pub fn bits_per_byte(self) -> f64 {
        match self {
            Convention::Pqtls => 8.0,
            Convention::Ibm => 10.0,
        }
    }

    /// The sentence a capacity table carries: which convention its numbers follow.
    pub fn sentence(self) -> &'static str {
        match self {
            Convention::Pqtls => {
                "Convention: pqtls (the default) — 8 bits per byte plus each TCP segment's IPv4/TCP headers, options \
                 and Ethernet framing, in each direction; a link carries the sessions of its bottleneck direction."
            }
            Convention::Ibm => {
                "Convention: ibm (--capacity-convention ibm; the IBM in-situ study's, study 000) — 10 bits per TLS \
                 byte, no per-segment framing; the sessions a link carries are counted from the server→client bytes \
                 only (the client→server bytes are shown, not counted)."
            }
        }
    }
}

/// The link and TCP parameters of the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NetworkModel {
    /// TCP maximum segment size: payload bytes per segment (1448 = 1500 MTU − 20 IPv4 − 20 TCP
    /// − 12 timestamp option).
    pub mss: u64,
    /// IPv4 + TCP headers per segment.
    pub ip_tcp_header_bytes: u64,
    /// TCP options per segment (timestamps: 12).
    pub tcp_option_bytes: u64,
    /// Ethernet framing per segment: 14 header + 4 FCS + 8 preamble/SFD + 12 inter-frame gap.
    pub ethernet_framing_bytes: u64,
    /// TCP initial congestion window, in segments.
    pub initcwnd: u64,
    /// Link rates considered, Gbit/s.
    pub bandwidths_gbps: Vec<f64>,
    /// How bytes are counted on the link ([`Convention`]).
    pub convention: Convention,
}

impl Default for NetworkModel {
    fn default() -> Self {
        NetworkModel {
            mss: 1448,
            ip_tcp_header_bytes: 40,
            tcp_option_bytes: 12,
            ethernet_framing_bytes: 38,
            initcwnd: 10,
            bandwidths_gbps: vec![1.0, 10.0, 100.0, 400.0],
            convention: Convention::Pqtls,
        }
    }
}

impl NetworkModel {
    /// Bytes added to every segment on the wire.
    pub fn per_segment_overhead(&self) -> u64 {
        self.ip_tcp_header_bytes + self.tcp_option_bytes + self.ethernet_framing_bytes
    }

    /// Segments needed for `payload` bytes written at once: ⌈payload / MSS⌉.
    pub fn segments(&self, payload: u64) -> u64 {
        if self.mss == 0 {
            return 0;
        }
        payload.div_ceil(self.mss)
    }

    /// Bytes on the wire for a flight of `payload` TLS bytes (under the IBM convention, the
    /// TLS bytes themselves: its 10 bits per byte stand for the framing).
    pub fn wire_bytes(&self, payload: u64) -> u64 {
        match self.convention {
            Convention::Pqtls => payload + self.segments(payload) * self.per_segment_overhead(),
            Convention::Ibm => payload,
        }
    }

    /// Sessions per second a link of `gbps` carries for `wire_bytes` per session in one
    /// direction.
    pub fn sessions_per_s(&self, wire_bytes: u64, gbps: f64) -> f64 {
        if wire_bytes == 0 {
            return f64::INFINITY;
        }
        gbps * 1e9 / self.convention.bits_per_byte() / wire_bytes as f64
    }

    /// Round trips to deliver `segments` segments from a fresh connection in slow start:
    /// the window starts at `initcwnd` and doubles every round trip, so after r round trips
    /// initcwnd·(2^r − 1) segments are out. 0 segments need 0 round trips.
    pub fn round_trips(&self, segments: u64) -> u32 {
        let mut sent = 0u64;
        let mut cwnd = self.initcwnd.max(1);
        let mut rtts = 0;
        while sent < segments {
            sent = sent.saturating_add(cwnd);
            cwnd = cwnd.saturating_mul(2);
            rtts += 1;
        }
        rtts
    }

    /// Time to put `wire_bytes` on a link of `gbps`, µs.
    pub fn serialisation_us(&self, wire_bytes: u64, gbps: f64) -> f64 {
        if gbps <= 0.0 {
            return f64::INFINITY;
        }
        wire_bytes as f64 * self.convention.bits_per_byte() / (gbps * 1e9) * 1e6
    }

    /// The assumptions, as sentences for reports.
    pub fn assumptions(&self) -> Vec<String> {
        let mut out = match self.convention {
            Convention::Pqtls => self.pqtls_assumptions(),
            Convention::Ibm => vec![
                "The IBM in-situ study's convention (study 000's data-volume table; --capacity-convention ibm): every \
                 TLS byte costs 10 bits on the link and no per-segment header is added; link capacity = link rate / \
                 (server→client bytes × 10 bit) — the client→server bytes are not counted; a flight's time = its bytes \
                 × 10 bit / link rate. CPU capacity = 1 s / median CPU time of one side, per core."
                    .into(),
                format!(
                    "Segments and round trips as in pqtls' model: ⌈bytes / MSS {}⌉ segments; round trips of a flight = \
                     smallest r with initcwnd·(2^r − 1) ≥ segments (initial window {} segments, no loss).",
                    self.mss, self.initcwnd
                ),
            ],
        };
        out.insert(0, self.convention.sentence().to_string());
        out
    }

    fn pqtls_assumptions(&self) -> Vec<String> {
        vec![
            format!(
                "TCP over IPv4 on Ethernet, MSS {} B: every segment carries {} B of IPv4+TCP headers, {} B of TCP \
                 options (timestamps) and {} B of Ethernet framing (14 header + 4 FCS + 8 preamble + 12 inter-frame \
                 gap), {} B per segment in all.",
                self.mss,
                self.ip_tcp_header_bytes,
                self.tcp_option_bytes,
                self.ethernet_framing_bytes,
                self.per_segment_overhead()
            ),
            "Each flight is written at once and cut into ⌈bytes / MSS⌉ segments; the TCP handshake (SYN, SYN/ACK), \
             pure ACKs and connection teardown are not counted."
                .into(),
            "Flights are derived from the measured record-layer bytes: client flight 1 = ClientHello + 5 B record \
             header; client flight 2 = the rest of the client's bytes; server first flight = the server's bytes \
             minus the NewSessionTicket messages (their record overhead, ≤ 22 B per ticket, stays in the first \
             flight)."
                .into(),
            "Link capacity = link rate / wire bytes per handshake, per direction; the handshake rate a link carries \
             is the smaller of the two (the bottleneck direction). CPU capacity = 1 s / median CPU time of one side, \
             per core."
                .into(),
            format!(
                "Round trips of a flight = smallest r with initcwnd·(2^r − 1) ≥ segments (slow start from an \
                 initial window of {} segments, no loss); extra round trips = r − 1.",
                self.initcwnd
            ),
        ]
    }
}

/// Direction of a flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    ClientToServer,
    ServerToClient,
}

impl Direction {
    pub fn name(self) -> &'static str {
        match self {
            Direction::ClientToServer => "client→server",
            Direction::ServerToClient => "server→client",
        }
    }
}

/// One flight of one handshake.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Flight {
    pub name: &'static str,
    pub direction: Direction,
    pub tls_bytes: u64,
    pub segments: u64,
    pub wire_bytes: u64,
    pub round_trips: u32,
    /// (Gbit/s, µs) for each modelled link rate.
    pub serialisation_us: Vec<(f64, f64)>,
}

/// Sessions per second at one link rate.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LinkRate {
    pub gbps: f64,
    pub client_to_server: f64,
    pub server_to_client: f64,
    /// The smaller of the two.
    pub sessions_per_s: f64,
}

/// The model applied to one record.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Capacity {
    pub id: String,
    pub label: String,
    pub client_to_server_wire_bytes: u64,
    pub server_to_client_wire_bytes: u64,
    pub bottleneck: Direction,
    pub links: Vec<LinkRate>,
    /// New handshakes per second one core can do on the server / client side (median CPU).
    pub server_sessions_per_core: f64,
    pub client_sessions_per_core: f64,
    pub flights: Vec<Flight>,
    /// Round trips of the server's first flight (1 when it fits in the initial window).
    pub server_first_flight_round_trips: u32,
    /// Round trips of the client's certificate flight, with mutual TLS.
    pub client_certificate_flight_round_trips: Option<u32>,
}

impl Capacity {
    /// Sessions per second at `gbps`, if that rate is modelled.
    pub fn sessions_at(&self, gbps: f64) -> Option<f64> {
        self.links.iter().find(|l| (l.gbps - gbps).abs() < 1e-9).map(|l| l.sessions_per_s)
    }
}

fn msg(record: &InsituView, name: &str) -> u64 {
    record.bytes.messages.get(name).copied().unwrap_or(0)
}

/// Whether the client authenticated with a certificate: the client sent a Certificate, or
/// the scenario has a client chain.
fn mutual_tls(record: &InsituView) -> bool {
    msg(record, "ClientCertificate") > 0 || !matches!(record.factor("client_chain"), "" | "none")
}

/// Applies the model to one in-situ record.
pub fn capacity(record: InsituView, model: &NetworkModel) -> Capacity {
    let b = &record.bytes;
    let ch = msg(&record, "ClientHello");
    let client1 = if ch > 0 { (ch + RECORD_HEADER).min(b.client_to_server) } else { b.client_to_server };
    let client2 = b.client_to_server - client1;
    let tickets = msg(&record, "NewSessionTicket").min(b.server_to_client);
    let server1 = b.server_to_client - tickets;
    let mtls = mutual_tls(&record);
    let flight = |name: &'static str, direction: Direction, tls_bytes: u64| {
        let segments = model.segments(tls_bytes);
        let wire_bytes = model.wire_bytes(tls_bytes);
        Flight {
            name,
            direction,
            tls_bytes,
            segments,
            wire_bytes,
            round_trips: model.round_trips(segments),
            serialisation_us: model
                .bandwidths_gbps
                .iter()
                .map(|&g| (g, model.serialisation_us(wire_bytes, g)))
                .collect(),
        }
    };
    let mut flights = vec![
        flight("ClientHello", Direction::ClientToServer, client1),
        flight("server first flight", Direction::ServerToClient, server1),
        flight(if mtls { "client certificate flight" } else { "client Finished" }, Direction::ClientToServer, client2),
    ];
    if tickets > 0 {
        flights.push(flight("NewSessionTicket", Direction::ServerToClient, tickets));
    }
    let c2s: u64 = flights.iter().filter(|f| f.direction == Direction::ClientToServer).map(|f| f.wire_bytes).sum();
    let s2c: u64 = flights.iter().filter(|f| f.direction == Direction::ServerToClient).map(|f| f.wire_bytes).sum();
    let links = model
        .bandwidths_gbps
        .iter()
        .map(|&g| {
            let (a, b) = (model.sessions_per_s(c2s, g), model.sessions_per_s(s2c, g));
            // The IBM convention counts the server→client bytes only.
            let sessions_per_s = if model.convention == Convention::Ibm { b } else { a.min(b) };
            LinkRate { gbps: g, client_to_server: a, server_to_client: b, sessions_per_s }
        })
        .collect();
    let per_core = |ns: f64| if ns > 0.0 { 1e9 / ns } else { f64::INFINITY };
    Capacity {
        id: record.id().to_string(),
        label: record.label().to_string(),
        client_to_server_wire_bytes: c2s,
        server_to_client_wire_bytes: s2c,
        bottleneck: if s2c >= c2s || model.convention == Convention::Ibm {
            Direction::ServerToClient
        } else {
            Direction::ClientToServer
        },
        links,
        server_sessions_per_core: per_core(record.server.total_cpu_ns.median),
        client_sessions_per_core: per_core(record.client.total_cpu_ns.median),
        server_first_flight_round_trips: flights[1].round_trips,
        client_certificate_flight_round_trips: mtls.then_some(flights[2].round_trips),
        flights,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::record::Record;
    use pqtls_core::scenario::Scenario;

    fn record(c2s: u64, s2c: u64, ch: u64, nst: u64, mtls: bool) -> Record {
        let client_chain = if mtls { "mldsa65:mldsa65" } else { "none" };
        let sc = Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("client_chain", client_chain)]).unwrap();
        let mut rec = pqtls_testkit::synthetic::measure(&sc, 5).record;
        let r = rec.insitu_mut().unwrap();
        r.bytes.client_to_server = c2s;
        r.bytes.server_to_client = s2c;
        r.bytes.messages.clear();
        r.bytes.messages.insert("ClientHello".into(), ch);
        r.bytes.messages.insert("NewSessionTicket".into(), nst);
        r.server.total_cpu_ns.median = 250_000.0;
        r.client.total_cpu_ns.median = 400_000.0;
        rec
    }

    #[test]
    fn segments_wire_bytes_and_round_trips_by_hand() {
        let m = NetworkModel::default();
        assert_eq!(m.per_segment_overhead(), 90);
        assert_eq!(m.segments(0), 0);
        assert_eq!(m.segments(1448), 1);
        assert_eq!(m.segments(1449), 2);
        assert_eq!(m.wire_bytes(1449), 1449 + 2 * 90);
        // initcwnd 10: 10 segments in 1 RTT, 11..30 in 2, 31..70 in 3.
        assert_eq!(m.round_trips(0), 0);
        assert_eq!(m.round_trips(10), 1);
        assert_eq!(m.round_trips(11), 2);
        assert_eq!(m.round_trips(30), 2);
        assert_eq!(m.round_trips(31), 3);
        assert_eq!(m.round_trips(70), 3);
        let small = NetworkModel { initcwnd: 4, ..NetworkModel::default() };
        // 4, 8, 16: 12 segments need 2, 13 need 3.
        assert_eq!(small.round_trips(12), 2);
        assert_eq!(small.round_trips(13), 3);
        // 1500 B at 1 Gbit/s: 12 µs.
        assert!((m.serialisation_us(1500, 1.0) - 12.0).abs() < 1e-9);
        assert!((m.serialisation_us(1500, 400.0) - 0.03).abs() < 1e-12);
    }

    #[test]
    fn classical_handshake_capacity_by_hand() {
        // x25519 + P-256 sizes of the reference study: ~256 B up, ~930 B down.
        let r = record(256, 930, 200, 0, false);
        let c = capacity(InsituView::of(&r).unwrap(), &NetworkModel::default());
        // Client: ClientHello flight 205 B (1 segment), Finished flight 51 B (1 segment).
        assert_eq!(c.flights[0].tls_bytes, 205);
        assert_eq!(c.flights[2].tls_bytes, 51);
        assert_eq!(c.client_to_server_wire_bytes, 256 + 2 * 90);
        assert_eq!(c.server_to_client_wire_bytes, 930 + 90);
        assert_eq!(c.bottleneck, Direction::ServerToClient);
        // 10 Gbit/s = 1.25e9 B/s; / 1020 B = 1 225 490.2 sessions/s.
        let s = c.sessions_at(10.0).unwrap();
        assert!((s - 1.25e9 / 1020.0).abs() < 1e-6, "{s}");
        assert!((c.links[0].client_to_server - 1.25e8 / 436.0).abs() < 1e-6);
        assert_eq!(c.server_first_flight_round_trips, 1);
        assert_eq!(c.client_certificate_flight_round_trips, None);
        assert!((c.server_sessions_per_core - 4000.0).abs() < 1e-9);
        assert!((c.client_sessions_per_core - 2500.0).abs() < 1e-9);
        // 1020 B at 1 Gbit/s = 8.16 µs.
        assert!((c.flights[1].serialisation_us[0].1 - 8.16).abs() < 1e-9);
    }

    /// The IBM convention reproduces study 000's own cells from its own bytes: x25519 + P-256,
    /// 256 B up and 928 B down — 0.108 M sessions/s at 1 Gbit/s and 1.08 M at 10 (printed 0.11
    /// and 1.08), where pqtls' convention gives 1.23 M; the down direction is counted even when
    /// the up one is larger.
    #[test]
    fn the_ibm_convention_counts_ten_bits_per_byte_server_to_client_only() {
        let ibm = NetworkModel { convention: Convention::Ibm, ..NetworkModel::default() };
        let r = record(256, 928, 200, 0, false);
        let c = capacity(InsituView::of(&r).unwrap(), &ibm);
        assert_eq!((c.client_to_server_wire_bytes, c.server_to_client_wire_bytes), (256, 928));
        assert!((c.sessions_at(1.0).unwrap() - 1e9 / 9280.0).abs() < 1e-6);
        assert!((c.sessions_at(10.0).unwrap() / 1e6 - 1.0776).abs() < 1e-4);
        let ours = capacity(InsituView::of(&r).unwrap(), &NetworkModel::default());
        assert!((ours.sessions_at(10.0).unwrap() / 1e6 - 1.2275).abs() < 1e-3, "{}", ours.sessions_at(10.0).unwrap());
        // 928 B at 1 Gbit/s, 10 bits each: 9.28 µs.
        assert!((c.flights[1].serialisation_us[0].1 - 9.28).abs() < 1e-9);
        // Client→server larger (mutual TLS): still the server→client bytes that count.
        let up = record(12_000, 928, 200, 0, true);
        let c = capacity(InsituView::of(&up).unwrap(), &ibm);
        assert_eq!(c.bottleneck, Direction::ServerToClient);
        assert!((c.sessions_at(1.0).unwrap() - 1e9 / 9280.0).abs() < 1e-6);
        assert_eq!(Convention::parse("IBM"), Ok(Convention::Ibm));
        let e = Convention::parse("cisco").unwrap_err();
        assert!(e.contains("'cisco'") && e.contains("pqtls") && e.contains("ibm"), "{e}");
        assert!(ibm.assumptions()[0].starts_with("Convention: ibm"));
        assert!(NetworkModel::default().assumptions()[0].starts_with("Convention: pqtls"));
    }

    #[test]
    fn post_quantum_chain_needs_extra_round_trips() {
        // ML-DSA-65 chain, X25519MLKEM768: ~10.4 KB down plus 2 × 250 B tickets; mTLS up.
        let r = record(1400 + 9000, 10_400 + 500, 1216 + 200, 500, true);
        let c = capacity(InsituView::of(&r).unwrap(), &NetworkModel::default());
        assert_eq!(c.flights[1].tls_bytes, 10_400);
        assert_eq!(c.flights[1].segments, 8); // ⌈10400 / 1448⌉
        assert_eq!(c.server_first_flight_round_trips, 1);
        let c4 = capacity(InsituView::of(&r).unwrap(), &NetworkModel { initcwnd: 4, ..NetworkModel::default() });
        assert_eq!(c4.server_first_flight_round_trips, 2); // 4 + 8 ≥ 8
                                                           // Client certificate flight: 10400 − (1416 + 5) = 8979 B = 7 segments.
        assert_eq!(c.flights[2].name, "client certificate flight");
        assert_eq!(c.flights[2].segments, 7);
        assert_eq!(c.client_certificate_flight_round_trips, Some(1));
        assert_eq!(c4.client_certificate_flight_round_trips, Some(2));
        assert_eq!(c.flights[3].tls_bytes, 500);
        assert_eq!(c.server_to_client_wire_bytes, 10_400 + 8 * 90 + 500 + 90);
    }
}
