//! Record framing (RFC 8446 §5.1–5.2): the 5-byte header (content type, legacy version,
//! 16-bit length), whole records of a byte slice, what stopped a split (a header or record cut
//! short, bytes that are not TLS), and record boundaries followed across writes.

use std::fmt;

/// Bytes of a record header: content type, legacy_record_version (2), length (2).
pub const HEADER_LEN: usize = 5;
/// The largest TLSCiphertext.length (RFC 8446 §5.2): 2^14 + 256.
pub const MAX_CIPHERTEXT_LEN: usize = (1 << 14) + 256;
/// The largest TLSPlaintext.length (RFC 8446 §5.1): 2^14.
pub const MAX_PLAINTEXT_LEN: usize = 1 << 14;

/// ContentType change_cipher_spec (20): the compatibility record of RFC 8446 §D.4.
pub const CHANGE_CIPHER_SPEC: u8 = 20;
/// ContentType alert (21).
pub const ALERT: u8 = 21;
/// ContentType handshake (22).
pub const HANDSHAKE: u8 = 22;
/// ContentType application_data (23): also the outer type of every protected record.
pub const APPLICATION_DATA: u8 = 23;
/// ContentType heartbeat (24, RFC 6520): the last type a TLS record header can carry.
pub const HEARTBEAT: u8 = 24;

/// A record header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    pub content_type: u8,
    /// legacy_record_version (0x0303, or 0x0301 in a first ClientHello).
    pub version: [u8; 2],
    /// Bytes of the record's payload (after the header).
    pub len: usize,
}

impl Header {
    /// The header at the start of `bytes`; `None` when fewer than [`HEADER_LEN`] bytes.
    pub fn parse(bytes: &[u8]) -> Option<Header> {
        let h = bytes.get(..HEADER_LEN)?;
        Some(Header { content_type: h[0], version: [h[1], h[2]], len: u16::from_be_bytes([h[3], h[4]]) as usize })
    }

    /// Whether the header can be TLS: a content type from change_cipher_spec to heartbeat,
    /// a version 3.x, a length within [`MAX_CIPHERTEXT_LEN`].
    pub fn is_tls(&self) -> bool {
        (CHANGE_CIPHER_SPEC..=HEARTBEAT).contains(&self.content_type)
            && self.version[0] == 3
            && self.len <= MAX_CIPHERTEXT_LEN
    }
}

/// Whether a stream starts like TLS: a handshake record of version 3.x (its length unread).
pub fn looks_like_tls(data: &[u8]) -> bool {
    data.len() >= 3 && data[0] == HANDSHAKE && data[1] == 3
}

/// One whole record of a byte slice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// Where the record starts in the slice split.
    pub offset: usize,
    pub header: Header,
    /// The whole record, header included.
    pub bytes: &'a [u8],
}

impl<'a> Record<'a> {
    pub fn content_type(&self) -> u8 {
        self.header.content_type
    }

    /// The header's 5 bytes (a protected record's additional data).
    pub fn header_bytes(&self) -> &'a [u8] {
        &self.bytes[..HEADER_LEN]
    }

    /// The payload after the header.
    pub fn payload(&self) -> &'a [u8] {
        &self.bytes[HEADER_LEN..]
    }

    /// Offset just past the record.
    pub fn end(&self) -> usize {
        self.offset + self.bytes.len()
    }
}

/// What stopped a split before the end of its slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The slice ends inside a record header: `have` (1–4) of its bytes.
    PartialHeader { offset: usize, have: usize },
    /// A header that is not TLS ([`Header::is_tls`]; checked splits only).
    NotTls { offset: usize, header: [u8; HEADER_LEN] },
    /// The slice ends inside a record: `have` of its `need` bytes (header included).
    PartialRecord { offset: usize, have: usize, need: usize },
}

impl Stop {
    /// Whether the split stopped only because the slice ended (more bytes may complete it).
    pub fn is_partial(&self) -> bool {
        !matches!(self, Stop::NotTls { .. })
    }
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::PartialHeader { have, .. } => write!(f, "{have} bytes of a record header at the end of the stream"),
            Stop::NotTls { offset, header } => write!(f, "offset {offset}: not a TLS record (bytes {header:02x?})"),
            Stop::PartialRecord { offset, have, need } => {
                write!(f, "the last record (offset {offset}) is cut short: {have} of {need} bytes")
            }
        }
    }
}

/// The whole records at the start of a slice, in order (an iterator). It ends at the end of
/// the slice or at the first record it cannot give whole; [`Records::stop`] then says why
/// and [`Records::consumed`] how many bytes the records given took (where a stream fed in
/// pieces resumes).
#[derive(Clone, Debug)]
pub struct Records<'a> {
    data: &'a [u8],
    at: usize,
    checked: bool,
    stop: Option<Stop>,
}

impl<'a> Records<'a> {
    /// Every record, whatever its header says (the bytes are known to be TLS: a stack's own).
    pub fn new(data: &'a [u8]) -> Records<'a> {
        Records { data, at: 0, checked: false, stop: None }
    }

    /// Stops at the first header that is not TLS ([`Header::is_tls`]), before reading its
    /// length (bytes of unknown origin: a capture).
    pub fn checked(data: &'a [u8]) -> Records<'a> {
        Records { checked: true, ..Records::new(data) }
    }

    /// Bytes of the records given so far.
    pub fn consumed(&self) -> usize {
        self.at
    }

    /// Why the split ended before the end of the slice (once the iterator returned `None`).
    pub fn stop(&self) -> Option<&Stop> {
        self.stop.as_ref()
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Record<'a>;

    fn next(&mut self) -> Option<Record<'a>> {
        let rest = &self.data[self.at..];
        if rest.is_empty() || self.stop.is_some() {
            return None;
        }
        let offset = self.at;
        let Some(header) = Header::parse(rest) else {
            self.stop = Some(Stop::PartialHeader { offset, have: rest.len() });
            return None;
        };
        if self.checked && !header.is_tls() {
            let bytes = rest[..HEADER_LEN].try_into().expect("a parsed header has its 5 bytes");
            self.stop = Some(Stop::NotTls { offset, header: bytes });
            return None;
        }
        let need = HEADER_LEN + header.len;
        if rest.len() < need {
            self.stop = Some(Stop::PartialRecord { offset, have: rest.len(), need });
            return None;
        }
        self.at += need;
        Some(Record { offset, header, bytes: &rest[..need] })
    }
}

/// Record boundaries of a stream that arrives in pieces (a record header can be split
/// across writes), without keeping the payloads: each piece is fed in order, and every
/// header it completes is handed on.
#[derive(Clone, Debug, Default)]
pub struct Boundaries {
    /// Payload bytes of the current record still to come.
    remaining: usize,
    header: [u8; HEADER_LEN],
    /// Bytes of the next header seen so far (< 5).
    have: usize,
}

impl Boundaries {
    /// Follows `data`, calling `on_header` for each record header it completes.
    pub fn feed(&mut self, mut data: &[u8], mut on_header: impl FnMut(Header)) {
        while !data.is_empty() {
            if self.remaining > 0 {
                let n = self.remaining.min(data.len());
                self.remaining -= n;
                data = &data[n..];
                continue;
            }
            let n = (HEADER_LEN - self.have).min(data.len());
            self.header[self.have..self.have + n].copy_from_slice(&data[..n]);
            self.have += n;
            data = &data[n..];
            if let Some(h) = Header::parse(&self.header[..self.have]) {
                self.have = 0;
                self.remaining = h.len;
                on_header(h);
            }
        }
    }
}

/// A stream of records of one content type carrying `payload`, cut into records of at most
/// [`MAX_PLAINTEXT_LEN`] bytes (one empty record for an empty payload), version 3.3.
pub fn encode_records(content_type: u8, payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(payload.len() + HEADER_LEN);
    let mut pieces = payload.chunks(MAX_PLAINTEXT_LEN).peekable();
    if pieces.peek().is_none() {
        out.extend_from_slice(&[content_type, 3, 3, 0, 0]);
    }
    for piece in pieces {
        out.extend_from_slice(&[content_type, 3, 3]);
        out.extend_from_slice(&(piece.len() as u16).to_be_bytes());
        out.extend_from_slice(piece);
    }
    out
}
