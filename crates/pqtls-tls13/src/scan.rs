//! Handshake message sizes from the records one side wrote, for stacks without a message
//! callback that reports sizes (rustls, s2n-tls).
//!
//! A stack may coalesce a flight's encrypted handshake messages into as few records as it
//! can, so record lengths alone do not give message sizes. Instead:
//! - plaintext handshake records (ClientHello, ServerHello, HelloRetryRequest) are parsed and
//!   messages reassembled across records ([`crate::wire`]);
//! - encrypted records are decrypted with this side's own traffic secrets, which the stack
//!   hands to the endpoint (rustls: its `KeyLog` interface; s2n-tls: its secret callback):
//!   the handshake traffic secret first, then the first application traffic secret (for
//!   NewSessionTicket). Keys and IVs are derived as in RFC 8446 §7.3, records opened with an
//!   [`Opener`], and the handshake messages inside measured exactly.
//!
//! Backends run it after the call into the stack that produced the bytes, outside the timed
//! calls, and only on traced endpoints.

use crate::wire::{CompressedHeader, HsType, Reassembler, Records, APPLICATION_DATA, HANDSHAKE};
use crate::{Opener, Suite};

#[derive(Default)]
pub struct WireScan {
    /// Bytes of a record not yet whole.
    pending: Vec<u8>,
    handshake: Reassembler,
    /// Complete messages written: (type, bytes incl. the 4-byte header).
    pub msgs: Vec<(HsType, u32)>,
    /// The header of each CompressedCertificate among `msgs`, in order (RFC 8879).
    pub compressed: Vec<CompressedHeader>,
    /// This side's traffic secrets, in the order rustls derived them.
    pub secrets: Vec<Vec<u8>>,
    suite: Option<Suite>,
    opener: Option<Opener>,
    /// Index in `secrets` of the secret `opener` uses.
    secret_index: usize,
    /// Encrypted records that could not be opened (reported as an error by nobody: the
    /// sizes of their messages are simply missing).
    pub unreadable: u32,
}

impl WireScan {
    pub fn new(suite: Option<Suite>) -> WireScan {
        WireScan { suite, ..WireScan::default() }
    }

    fn handshake_bytes(&mut self, payload: &[u8]) {
        for m in self.handshake.push(payload) {
            self.msgs.push((m.kind(), m.len() as u32));
            self.compressed.extend(m.compressed_certificate());
        }
    }

    fn encrypted(&mut self, header: &[u8], payload: &[u8]) {
        let Some(suite) = self.suite else {
            self.unreadable += 1;
            return;
        };
        // Try the current secret, then each later one (rustls moves from the handshake to the
        // application traffic secret after this side's Finished).
        loop {
            if self.opener.is_none() {
                match self.secrets.get(self.secret_index).and_then(|s| Opener::new(&suite, s)) {
                    Some(o) => self.opener = Some(o),
                    None => {
                        self.unreadable += 1;
                        return;
                    }
                }
            }
            if let Some((ty, plain)) = self.opener.as_mut().and_then(|o| o.open(header, payload)) {
                if ty == HANDSHAKE {
                    self.handshake_bytes(&plain);
                }
                return;
            }
            self.opener = None;
            self.secret_index += 1;
        }
    }

    pub fn feed(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        let pending = std::mem::take(&mut self.pending);
        let mut records = Records::new(&pending);
        for r in records.by_ref() {
            match r.content_type() {
                HANDSHAKE => self.handshake_bytes(r.payload()),
                APPLICATION_DATA => self.encrypted(r.header_bytes(), r.payload()),
                _ => {}
            }
        }
        self.pending = pending[records.consumed()..].to_vec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::encode_records as rec;

    #[test]
    fn plaintext_messages_span_records() {
        let mut msg = vec![1, 0, 0, 6];
        msg.extend_from_slice(&[9; 6]);
        let mut stream = rec(22, &msg[..3]);
        stream.extend(rec(22, &msg[3..]));
        stream.extend(rec(20, &[1]));
        let mut w = WireScan::new(None);
        for c in stream.chunks(7) {
            w.feed(c);
        }
        assert_eq!(w.msgs, vec![(HsType::ClientHello, 10)]);
    }

    /// A CompressedCertificate (msg_type 25) is named and its header read: the algorithm and
    /// the length of the Certificate body it stands for.
    #[test]
    fn compressed_certificates_are_recognised() {
        // brotli (2), 0x001234 bytes once decompressed, 3 compressed bytes.
        let body = [0, 2, 0, 0x12, 0x34, 0, 0, 3, 7, 7, 7];
        let mut msg = vec![25, 0, 0, body.len() as u8];
        msg.extend_from_slice(&body);
        let mut w = WireScan::new(None);
        w.feed(&rec(22, &msg));
        assert_eq!(w.msgs, vec![(HsType::CompressedCertificate, msg.len() as u32)]);
        assert_eq!(w.compressed, vec![CompressedHeader { algorithm: 2, uncompressed_length: 0x1234 }]);
        assert_eq!(HsType::CompressedCertificate.rfc_name(), "CompressedCertificate");
        assert_eq!(HsType::from_slug("compressed_certificate"), Some(HsType::CompressedCertificate));
    }
}
