//! Handshake message sizes from the records this side wrote.
//!
//! rustls has no message callback, so sizes come from the wire:
//! - plaintext handshake records (ClientHello, ServerHello, HelloRetryRequest) are parsed,
//!   messages reassembled across records and measured exactly;
//! - encrypted records cannot be parsed, but rustls encrypts each handshake message on its
//!   own (fragmented into records of at most 2^14 plaintext bytes, never coalesced, never
//!   padded), so a message's size is the sum of its records' plaintext lengths, each record's
//!   plaintext being its length minus the inner content-type byte and the 16-byte AEAD tag.
//!   A record carrying a full 2^14 bytes continues the message. The message types follow
//!   from the protocol's fixed order (the caller names them).

use pqtls_core::trace::HsType;

const MAX_FRAGMENT: usize = 1 << 14;
/// Inner content type byte + AEAD tag (16 bytes for every TLS 1.3 suite rustls offers).
const ENCRYPTION_OVERHEAD: usize = 1 + 16;

#[derive(Debug, Default)]
pub(crate) struct WireScan {
    pending: Vec<u8>,
    plain: Vec<u8>,
    encrypted_len: usize,
    /// Complete plaintext messages: (type, bytes incl. header).
    pub plain_msgs: Vec<(HsType, u32)>,
    /// Complete encrypted messages, in order: bytes incl. the 4-byte header.
    pub encrypted_msgs: Vec<u32>,
}

impl WireScan {
    pub fn feed(&mut self, data: &[u8]) {
        self.pending.extend_from_slice(data);
        let mut used = 0;
        while self.pending.len() - used >= 5 {
            let rec = &self.pending[used..];
            let len = u16::from_be_bytes([rec[3], rec[4]]) as usize;
            if rec.len() < 5 + len {
                break;
            }
            let (ty, payload) = (rec[0], &rec[5..5 + len]);
            match ty {
                22 => {
                    self.plain.extend_from_slice(payload);
                    while self.plain.len() >= 4 {
                        let mlen = u32::from_be_bytes([0, self.plain[1], self.plain[2], self.plain[3]]) as usize;
                        if self.plain.len() < 4 + mlen {
                            break;
                        }
                        let t = HsType::classify(&self.plain[..4 + mlen]);
                        self.plain_msgs.push((t, (4 + mlen) as u32));
                        self.plain.drain(..4 + mlen);
                    }
                }
                23 => {
                    let plain = len.saturating_sub(ENCRYPTION_OVERHEAD);
                    self.encrypted_len += plain;
                    if plain < MAX_FRAGMENT {
                        self.encrypted_msgs.push(self.encrypted_len as u32);
                        self.encrypted_len = 0;
                    }
                }
                _ => {}
            }
            used += 5 + len;
        }
        self.pending.drain(..used);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(ty: u8, payload: &[u8]) -> Vec<u8> {
        let mut v = vec![ty, 3, 3];
        v.extend_from_slice(&(payload.len() as u16).to_be_bytes());
        v.extend_from_slice(payload);
        v
    }

    #[test]
    fn plaintext_messages_span_records_and_encrypted_ones_are_sized() {
        let mut msg = vec![1, 0, 0, 6];
        msg.extend_from_slice(&[9; 6]);
        let mut stream = rec(22, &msg[..3]);
        stream.extend(rec(22, &msg[3..]));
        stream.extend(rec(20, &[1]));
        stream.extend(rec(23, &vec![0; MAX_FRAGMENT + 17]));
        stream.extend(rec(23, &[0; 117]));
        stream.extend(rec(23, &[0; 53]));
        let mut w = WireScan::default();
        for c in stream.chunks(7) {
            w.feed(c);
        }
        assert_eq!(w.plain_msgs, vec![(HsType::ClientHello, 10)]);
        assert_eq!(w.encrypted_msgs, vec![(MAX_FRAGMENT + 100) as u32, 36]);
    }
}
