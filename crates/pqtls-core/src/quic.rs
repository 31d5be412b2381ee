//! In situ over QUIC (issue 22): what one in-memory QUIC handshake gives back besides the
//! per-step CPU of each side — datagrams, QUIC packets per type and the bytes they carry per
//! direction, the TLS handshake data (CRYPTO frames) inside them, the server's
//! anti-amplification budget (RFC 9000 §8.1) and the rounds the exchange took — and the door
//! through which the in-situ measurement reaches the QUIC driver (`pqtls-quic`), which the
//! command supplies.

use crate::backend::{EndpointOptions, Prepared};
use crate::error::Result;
use crate::transport::Handshake;
use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// QUIC packet types as the record names them.
pub const INITIAL: &str = "Initial";
pub const ZERO_RTT: &str = "0-RTT";
pub const HANDSHAKE: &str = "Handshake";
pub const RETRY: &str = "Retry";
/// Short-header (1-RTT) packets.
pub const ONE_RTT: &str = "1-RTT";
/// Every packet type, in the order reports show them.
pub const PACKET_TYPES: [&str; 5] = [INITIAL, ZERO_RTT, HANDSHAKE, RETRY, ONE_RTT];

/// One direction of a QUIC handshake on the wire.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicDirection {
    /// UDP datagrams (their payloads: the QUIC bytes; UDP/IP headers not counted).
    pub datagrams: u64,
    /// Sum of the datagrams' payload sizes.
    pub datagram_bytes: u64,
    /// Each datagram's payload size, in the order sent.
    pub datagram_sizes_bytes: Vec<u64>,
    /// QUIC packets per type (coalesced packets counted one by one).
    pub packets: IndexMap<String, u64>,
    /// Bytes per packet type (header, payload and AEAD tag of each packet); they add up to
    /// `datagram_bytes`.
    pub packet_bytes: IndexMap<String, u64>,
    /// TLS handshake bytes this side's stack wrote (the CRYPTO frames' data, once each).
    pub crypto_bytes: u64,
    /// Of those, the `quic_transport_parameters` extension (type 57, its 4-byte header
    /// included) this side sent: in the ClientHello (client) or EncryptedExtensions (server).
    #[serde(default)]
    pub transport_parameters_bytes: u64,
    /// `datagram_bytes − crypto_bytes`: not handshake data — QUIC packet headers, AEAD tags,
    /// CRYPTO/ACK/PADDING/HANDSHAKE_DONE/NEW_CONNECTION_ID… frames.
    pub not_handshake_data_bytes: u64,
    /// Datagrams sent in each flight (one flight: what this side sent in answer to one
    /// delivery of the peer's datagrams; the client's first flight answers nothing).
    pub flights: Vec<u64>,
}

/// The server's anti-amplification budget (RFC 9000 §8.1): until the client's address is
/// validated (here: the server receives a Handshake packet from it; no Retry, no token), the
/// server may send at most three times the bytes it received.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Amplification {
    /// Datagram bytes the server received before the client's address was validated.
    pub received_before_validation_bytes: u64,
    /// Datagram bytes the server sent before then.
    pub sent_before_validation_bytes: u64,
    /// 3 × `received_before_validation_bytes`.
    pub limit_bytes: u64,
    /// The server had sent its budget's worth and waited for the client before sending the
    /// rest of its first flight (its Handshake data did not fit).
    pub limited: bool,
    /// Client flights the server received before its handshake flight was all sent (1: it
    /// never waited; 2: one extra round trip for the budget).
    pub client_flights_to_send_all: u64,
}

/// What a QUIC in-situ record adds (`InsituResult::quic`): the last measured handshake's
/// wire view.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct QuicWire {
    /// The QUIC version (RFC 9000: 1).
    pub version: u32,
    pub client_to_server: QuicDirection,
    pub server_to_client: QuicDirection,
    pub amplification: Amplification,
    /// Client→server flights delivered until both sides were done (the ping-pong exchanges
    /// of the in-memory run; TCP+TLS 1.3 in memory takes 2).
    pub rounds: u64,
    /// Times the virtual clock moved to a timer because both sides waited (pacing, a probe
    /// timeout); 0 when the datagrams alone carried the handshake.
    #[serde(default)]
    pub timers_fired: u64,
}

/// Runs handshakes over QUIC in memory from a prepared configuration (`pqtls-quic`'s driver;
/// the command gives it to the in-situ measurement).
pub trait QuicHandshaker: Send + Sync {
    /// One handshake between a fresh client and a fresh server connection (its `quic` section
    /// filled); an error names what cannot run over QUIC (e.g. a stack other than rustls).
    fn handshake(&self, prepared: &dyn Prepared, opts: &EndpointOptions) -> Result<Handshake>;
}
