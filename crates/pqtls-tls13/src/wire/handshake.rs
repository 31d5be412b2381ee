//! Handshake messages (RFC 8446 §4): the 4-byte header (type, 24-bit length), the whole
//! messages of a byte slice, reassembly of a handshake stream whose messages are split
//! across records or share one, and the message types with their names.

use super::record::{Records, HANDSHAKE};

/// Bytes of a handshake message header: msg_type, length (3).
pub const MESSAGE_HEADER_LEN: usize = 4;

/// SHA-256("HelloRetryRequest"): the ServerHello.random of a HelloRetryRequest (RFC 8446 §4.1.3).
pub const HRR_RANDOM: [u8; 32] = [
    0xCF, 0x21, 0xAD, 0x74, 0xE5, 0x9A, 0x61, 0x11, 0xBE, 0x1D, 0x8C, 0x02, 0x1E, 0x65, 0xB8, 0x91, 0xC2, 0xA2, 0x11,
    0x16, 0x7A, 0xBB, 0x8C, 0x5E, 0x07, 0x9E, 0x09, 0xE2, 0xC8, 0xA8, 0x33, 0x9C,
];

/// TLS 1.3 handshake message types (RFC 8446 §4), plus HelloRetryRequest, which is a
/// ServerHello on the wire and told apart by its random.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum HsType {
    ClientHello,
    ServerHello,
    HelloRetryRequest,
    NewSessionTicket,
    EndOfEarlyData,
    EncryptedExtensions,
    Certificate,
    CertificateRequest,
    CertificateVerify,
    Finished,
    KeyUpdate,
    /// RFC 8879: a Certificate sent compressed (msg_type 25).
    CompressedCertificate,
    Other(u8),
}

/// Every named type with its snake-case name.
const NAMED: [(HsType, &str); 12] = [
    (HsType::ClientHello, "client_hello"),
    (HsType::ServerHello, "server_hello"),
    (HsType::HelloRetryRequest, "hello_retry_request"),
    (HsType::NewSessionTicket, "new_session_ticket"),
    (HsType::EndOfEarlyData, "end_of_early_data"),
    (HsType::EncryptedExtensions, "encrypted_extensions"),
    (HsType::Certificate, "certificate"),
    (HsType::CertificateRequest, "certificate_request"),
    (HsType::CertificateVerify, "certificate_verify"),
    (HsType::Finished, "finished"),
    (HsType::KeyUpdate, "key_update"),
    (HsType::CompressedCertificate, "compressed_certificate"),
];

impl HsType {
    /// The type of msg_type `t` (a ServerHello for 2: only the random tells a
    /// HelloRetryRequest, see [`HsType::classify`]).
    pub fn from_code(t: u8) -> HsType {
        match t {
            1 => HsType::ClientHello,
            2 => HsType::ServerHello,
            4 => HsType::NewSessionTicket,
            5 => HsType::EndOfEarlyData,
            8 => HsType::EncryptedExtensions,
            11 => HsType::Certificate,
            13 => HsType::CertificateRequest,
            15 => HsType::CertificateVerify,
            20 => HsType::Finished,
            24 => HsType::KeyUpdate,
            25 => HsType::CompressedCertificate,
            t => HsType::Other(t),
        }
    }

    /// Classifies a complete handshake message (4-byte header + body).
    pub fn classify(msg: &[u8]) -> HsType {
        match msg.first() {
            None => HsType::Other(0),
            Some(2) if msg.len() >= 38 && msg[6..38] == HRR_RANDOM => HsType::HelloRetryRequest,
            Some(&t) => HsType::from_code(t),
        }
    }

    /// The message's name in snake case, used in step names (`write_server_hello`).
    pub fn slug(self) -> String {
        match self {
            HsType::Other(t) => format!("message_{t}"),
            named => NAMED.iter().find(|n| n.0 == named).map_or_else(String::new, |n| n.1.to_string()),
        }
    }

    /// The message named by [`HsType::slug`], if it is one.
    pub fn from_slug(slug: &str) -> Option<HsType> {
        if let Some(n) = NAMED.iter().find(|n| n.1 == slug) {
            return Some(n.0);
        }
        slug.strip_prefix("message_").and_then(|t| t.parse().ok()).map(HsType::Other)
    }

    /// The RFC name (`ServerHello`), used for message sizes.
    pub fn rfc_name(self) -> String {
        match self {
            HsType::Other(t) => format!("Message{t}"),
            other => format!("{other:?}"),
        }
    }
}

/// One whole handshake message, header included.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Message<'a> {
    bytes: &'a [u8],
}

impl<'a> Message<'a> {
    /// The msg_type byte.
    pub fn code(&self) -> u8 {
        self.bytes[0]
    }

    /// The message's type (a HelloRetryRequest told apart by its random).
    pub fn kind(&self) -> HsType {
        HsType::classify(self.bytes)
    }

    /// The whole message: header and body.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The body after the 4-byte header.
    pub fn body(&self) -> &'a [u8] {
        &self.bytes[MESSAGE_HEADER_LEN..]
    }

    /// Bytes of the whole message, header included.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never: a message has at least its header.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    /// A CompressedCertificate's header (RFC 8879 §4): the algorithm and the length of the
    /// Certificate body it decompresses to; `None` for another message or one cut short.
    pub fn compressed_certificate(&self) -> Option<CompressedHeader> {
        let b = self.body();
        if self.code() != 25 || b.len() < 5 {
            return None;
        }
        Some(CompressedHeader {
            algorithm: u16::from_be_bytes([b[0], b[1]]),
            uncompressed_length: u32::from_be_bytes([0, b[2], b[3], b[4]]),
        })
    }
}

/// What a CompressedCertificate says of itself (RFC 8879 §4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompressedHeader {
    /// CertificateCompressionAlgorithm: 1 zlib, 2 brotli, 3 zstd.
    pub algorithm: u16,
    /// Bytes of the Certificate message's body once decompressed (its 4-byte header not counted).
    pub uncompressed_length: u32,
}

/// The whole handshake messages at the start of a slice of handshake bytes (an iterator);
/// [`Messages::rest`] is what follows them: nothing, or the start of a message cut short.
#[derive(Clone, Debug)]
pub struct Messages<'a> {
    rest: &'a [u8],
}

/// The whole handshake messages at the start of `data`.
pub fn messages(data: &[u8]) -> Messages<'_> {
    Messages { rest: data }
}

impl<'a> Messages<'a> {
    /// The bytes after the messages given so far.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for Messages<'a> {
    type Item = Message<'a>;

    fn next(&mut self) -> Option<Message<'a>> {
        let h = self.rest.get(..MESSAGE_HEADER_LEN)?;
        let need = MESSAGE_HEADER_LEN + u32::from_be_bytes([0, h[1], h[2], h[3]]) as usize;
        let bytes = self.rest.get(..need)?;
        self.rest = &self.rest[need..];
        Some(Message { bytes })
    }
}

/// The length of the whole messages at the start of `data`.
fn whole_len(data: &[u8]) -> usize {
    let mut m = messages(data);
    m.by_ref().for_each(drop);
    data.len() - m.rest().len()
}

/// Reassembles a handshake stream given in pieces (the payloads of its records, in order):
/// a message may be split across records, and a record may hold several.
#[derive(Clone, Debug, Default)]
pub struct Reassembler {
    buf: Vec<u8>,
    /// Bytes at the start of `buf` already given as whole messages.
    given: usize,
}

impl Reassembler {
    /// Adds the next piece; returns the messages it completes.
    pub fn push(&mut self, bytes: &[u8]) -> Messages<'_> {
        self.buf.drain(..self.given);
        self.buf.extend_from_slice(bytes);
        self.given = whole_len(&self.buf);
        messages(&self.buf[..self.given])
    }

    /// Bytes of a message begun but not complete.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.given
    }
}

/// The handshake messages of a plaintext record stream: (type code, body) of each whole
/// message in the handshake records at the start of `stream`, stopping at the first record
/// that is not a handshake record or is not whole.
pub fn handshake_messages(stream: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut hs = Reassembler::default();
    let mut out = Vec::new();
    for r in Records::new(stream).take_while(|r| r.content_type() == HANDSHAKE) {
        out.extend(hs.push(r.payload()).map(|m| (m.code(), m.body().to_vec())));
    }
    out
}

/// A handshake message of type `code` with `body`; `None` when the body does not fit the
/// 24-bit length.
pub fn encode_message(code: u8, body: &[u8]) -> Option<Vec<u8>> {
    let len = u32::try_from(body.len()).ok().filter(|l| *l < 1 << 24)?;
    let mut out = Vec::with_capacity(MESSAGE_HEADER_LEN + body.len());
    out.push(code);
    out.extend_from_slice(&len.to_be_bytes()[1..]);
    out.extend_from_slice(body);
    Some(out)
}
