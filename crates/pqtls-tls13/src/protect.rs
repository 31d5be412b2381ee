//! TLS 1.3 record protection, just enough to read records whose traffic secrets are known:
//! HKDF-Expand-Label (RFC 8446 §7.1), traffic keys and IVs (§7.3), the per-record nonce and
//! AEAD open (§5.2–5.3), and the next-generation secret of a KeyUpdate (§7.2). Keys are
//! derived and records opened with aws-lc-rs, the crypto crate of the rustls backend.
//!
//! Users: the rustls backend measures the handshake messages it wrote by opening its own
//! records; the capture analyser (pqtls-capture) opens both directions of a captured
//! connection with the secrets of a key log.

use aws_lc_rs::{aead, hkdf};

/// The AEAD and hash of a TLS 1.3 cipher suite.
#[derive(Clone, Copy, Debug)]
pub struct Suite {
    aead: &'static aead::Algorithm,
    hkdf: hkdf::Algorithm,
    key_len: usize,
    hash_len: usize,
    code_point: u16,
}

/// The suites [`Suite::from_code_point`] knows: (code point, IANA name).
pub const SUITES: [(u16, &str); 3] =
    [(0x1301, "TLS_AES_128_GCM_SHA256"), (0x1302, "TLS_AES_256_GCM_SHA384"), (0x1303, "TLS_CHACHA20_POLY1305_SHA256")];

impl Suite {
    /// TLS_AES_128_GCM_SHA256 (0x1301), TLS_AES_256_GCM_SHA384 (0x1302) or
    /// TLS_CHACHA20_POLY1305_SHA256 (0x1303); `None` for any other code point.
    pub fn from_code_point(cp: u16) -> Option<Suite> {
        let (aead, hkdf, key_len, hash_len): (&'static aead::Algorithm, _, _, _) = match cp {
            0x1301 => (&aead::AES_128_GCM, hkdf::HKDF_SHA256, 16, 32),
            0x1302 => (&aead::AES_256_GCM, hkdf::HKDF_SHA384, 32, 48),
            0x1303 => (&aead::CHACHA20_POLY1305, hkdf::HKDF_SHA256, 32, 32),
            _ => return None,
        };
        Some(Suite { aead, hkdf, key_len, hash_len, code_point: cp })
    }

    pub fn code_point(&self) -> u16 {
        self.code_point
    }

    /// The IANA name of the suite.
    pub fn name(&self) -> &'static str {
        SUITES.iter().find(|(cp, _)| *cp == self.code_point).map_or("?", |(_, n)| n)
    }

    /// Length of the suite's hash (and so of its traffic secrets), bytes.
    pub fn hash_len(&self) -> usize {
        self.hash_len
    }
}

struct Len(usize);
impl hkdf::KeyType for Len {
    fn len(&self) -> usize {
        self.0
    }
}

/// HKDF-Expand-Label(secret, label, "", len) (RFC 8446 §7.1); `None` when `len` is out of
/// HKDF's range.
pub fn expand_label(suite: &Suite, secret: &[u8], label: &[u8], len: usize) -> Option<Vec<u8>> {
    expand_label_with(suite.hkdf, secret, label, len)
}

fn expand_label_with(alg: hkdf::Algorithm, secret: &[u8], label: &[u8], len: usize) -> Option<Vec<u8>> {
    let prk = hkdf::Prk::new_less_safe(alg, secret);
    let out_len = u16::try_from(len).ok()?.to_be_bytes();
    let label_len = [u8::try_from(6 + label.len()).ok()?];
    let info: [&[u8]; 5] = [&out_len, &label_len, b"tls13 ", label, &[0]];
    let okm = prk.expand(&info, Len(len)).ok()?;
    let mut out = vec![0; len];
    okm.fill(&mut out).ok()?;
    Some(out)
}

/// The traffic secret after a KeyUpdate: HKDF-Expand-Label(secret, "traffic upd", "", Hash.length)
/// (RFC 8446 §7.2).
pub fn next_traffic_secret(suite: &Suite, secret: &[u8]) -> Option<Vec<u8>> {
    expand_label(suite, secret, b"traffic upd", suite.hash_len)
}

/// One direction's record protection under one traffic secret: opens the records of that
/// direction in order (the sequence number counts the records opened).
pub struct Opener {
    key: aead::LessSafeKey,
    iv: [u8; 12],
    seq: u64,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener").field("seq", &self.seq).finish_non_exhaustive()
    }
}

impl Opener {
    /// The opener of `secret`'s key and IV; `None` when the secret does not fit the suite's
    /// key derivation.
    pub fn new(suite: &Suite, secret: &[u8]) -> Option<Opener> {
        let key = expand_label(suite, secret, b"key", suite.key_len)?;
        let iv: [u8; 12] = expand_label(suite, secret, b"iv", 12)?.try_into().ok()?;
        let key = aead::LessSafeKey::new(aead::UnboundKey::new(suite.aead, &key).ok()?);
        Some(Opener { key, iv, seq: 0 })
    }

    /// Records opened so far (the next record's sequence number).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// Opens one record (`header`: its 5 bytes, the additional data; `payload`: the
    /// ciphertext and tag). Returns (inner content type, plaintext without padding), or
    /// `None` when the record does not authenticate under this key and sequence number (the
    /// sequence number then stays where it was).
    pub fn open(&mut self, header: &[u8], payload: &[u8]) -> Option<(u8, Vec<u8>)> {
        let mut nonce = self.iv;
        for (n, s) in nonce[4..].iter_mut().zip(self.seq.to_be_bytes()) {
            *n ^= s;
        }
        let mut buf = payload.to_vec();
        let plain = self
            .key
            .open_in_place(aead::Nonce::assume_unique_for_key(nonce), aead::Aad::from(header), &mut buf)
            .ok()?;
        self.seq += 1;
        let end = plain.iter().rposition(|b| *b != 0)?;
        Some((plain[end], plain[..end].to_vec()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
    }

    #[test]
    fn rfc8448_server_handshake_key_and_iv() {
        // RFC 8448 §3 (simple 1-RTT handshake): server handshake traffic secret → key, iv.
        let suite = Suite::from_code_point(0x1301).unwrap();
        let secret = hex("b67b7d690cc16c4e75e54213cb2d37b4e9c912bcded9105d42befd59d391ad38");
        assert_eq!(expand_label(&suite, &secret, b"key", 16).unwrap(), hex("3fce516009c21727d0f2e4e86ee403bc"));
        assert_eq!(expand_label(&suite, &secret, b"iv", 12).unwrap(), hex("5d313eb2671276ee13000b30"));
        assert_eq!((suite.name(), suite.hash_len()), ("TLS_AES_128_GCM_SHA256", 32));
        assert!(Suite::from_code_point(0x1304).is_none());
    }

    /// Seals records as a peer would (key and IV from the same secret, nonce = IV xor seq)
    /// and opens them in order; a record out of order does not open and costs no sequence number.
    #[test]
    fn records_sealed_in_order_open_in_order() {
        for cp in [0x1301, 0x1302, 0x1303] {
            let suite = Suite::from_code_point(cp).unwrap();
            let secret = vec![7u8; suite.hash_len()];
            let key = expand_label(&suite, &secret, b"key", suite.key_len).unwrap();
            let iv = expand_label(&suite, &secret, b"iv", 12).unwrap();
            let sealer = aead::LessSafeKey::new(aead::UnboundKey::new(suite.aead, &key).unwrap());
            let seal = |seq: u64, inner: &[u8]| {
                let mut nonce: [u8; 12] = iv.clone().try_into().unwrap();
                for (n, s) in nonce[4..].iter_mut().zip(seq.to_be_bytes()) {
                    *n ^= s;
                }
                let len = (inner.len() + suite.aead.tag_len()) as u16;
                let header = [23, 3, 3, (len >> 8) as u8, len as u8];
                let mut buf = inner.to_vec();
                sealer
                    .seal_in_place_append_tag(
                        aead::Nonce::assume_unique_for_key(nonce),
                        aead::Aad::from(header),
                        &mut buf,
                    )
                    .unwrap();
                let mut rec = header.to_vec();
                rec.extend(buf);
                rec
            };
            let r0 = seal(0, b"hello\x16\0\0");
            let r1 = seal(1, b"world\x17");
            let mut o = Opener::new(&suite, &secret).unwrap();
            assert!(o.open(&r1[..5], &r1[5..]).is_none(), "{}", suite.name());
            assert_eq!(o.seq(), 0);
            assert_eq!(o.open(&r0[..5], &r0[5..]), Some((0x16, b"hello".to_vec())));
            assert_eq!(o.open(&r1[..5], &r1[5..]), Some((0x17, b"world".to_vec())));
            let next = next_traffic_secret(&suite, &secret).unwrap();
            assert_eq!(next.len(), suite.hash_len());
            assert_ne!(next, secret);
        }
    }
}
