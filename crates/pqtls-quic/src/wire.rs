//! QUIC datagrams parsed into their packets (RFC 9000 §17), headers only: what the in-situ
//! measurement counts per packet type. A long-header packet says its own length (the Length
//! field; Initial packets carry a token before it), so coalesced packets are found one by one;
//! a short-header (1-RTT) packet runs to the end of the datagram, as does a Retry.

use pqtls_core::quic::{HANDSHAKE, INITIAL, ONE_RTT, RETRY, ZERO_RTT};
use pqtls_core::{Error, Result};

/// One QUIC packet of a datagram: its type (`pqtls_core::quic` names) and its bytes (header,
/// payload and AEAD tag).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub kind: &'static str,
    pub len_bytes: usize,
}

/// A QUIC variable-length integer (RFC 9000 §16) at the start of `b`: its value and length.
pub fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    let bytes = b.get(..len)?;
    let mut v = u64::from(first & 0x3f);
    for &x in &bytes[1..] {
        v = (v << 8) | u64::from(x);
    }
    Some((v, len))
}

/// The packets of one datagram, in order; their lengths add up to the datagram's. An error
/// names the offset and what was malformed.
pub fn packets(datagram: &[u8]) -> Result<Vec<Packet>> {
    let bad = |at: usize, what: &str| {
        Error::Other(format!("QUIC datagram of {} bytes: {what} at offset {at}", datagram.len()))
    };
    let mut out = Vec::new();
    let mut at = 0;
    while at < datagram.len() {
        let rest = &datagram[at..];
        let first = rest[0];
        if first & 0x80 == 0 {
            out.push(Packet { kind: ONE_RTT, len_bytes: rest.len() });
            break;
        }
        // Long header: first byte, version (4), DCID length + DCID, SCID length + SCID.
        let mut i = 5;
        let version = rest.get(1..5).ok_or_else(|| bad(at, "a long header cut short"))?;
        if version == [0, 0, 0, 0] {
            return Err(bad(at, "a Version Negotiation packet (the peers disagree on the QUIC version)"));
        }
        for _ in 0..2 {
            let n = *rest.get(i).ok_or_else(|| bad(at, "a connection ID length missing"))? as usize;
            i += 1 + n;
        }
        let kind = match (first >> 4) & 0x3 {
            0 => INITIAL,
            1 => ZERO_RTT,
            2 => HANDSHAKE,
            _ => RETRY,
        };
        if kind == RETRY {
            out.push(Packet { kind, len_bytes: rest.len() });
            break;
        }
        if kind == INITIAL {
            let (token, n) =
                rest.get(i..).and_then(varint).ok_or_else(|| bad(at, "an Initial token length missing"))?;
            i += n + token as usize;
        }
        let (length, n) = rest.get(i..).and_then(varint).ok_or_else(|| bad(at, "a Length field missing"))?;
        let len = i + n + length as usize;
        if len > rest.len() {
            return Err(bad(at, &format!("a {kind} packet of {len} bytes in the {} left", rest.len())));
        }
        out.push(Packet { kind, len_bytes: len });
        at += len;
    }
    Ok(out)
}

/// The first packet of a datagram when it has a long header (RFC 9000 §17.2): its type
/// (`pqtls_core::quic` names), destination and source connection IDs. `None` for a short-header
/// (1-RTT) datagram, a Version Negotiation packet, or one too short to say.
pub fn long_header(datagram: &[u8]) -> Option<(&'static str, &[u8], &[u8])> {
    let first = *datagram.first()?;
    if first & 0x80 == 0 || datagram.get(1..5)? == [0, 0, 0, 0] {
        return None;
    }
    let dcid_len = *datagram.get(5)? as usize;
    let dcid = datagram.get(6..6 + dcid_len)?;
    let scid_len = *datagram.get(6 + dcid_len)? as usize;
    let scid = datagram.get(7 + dcid_len..7 + dcid_len + scid_len)?;
    let kind = match (first >> 4) & 0x3 {
        0 => INITIAL,
        1 => ZERO_RTT,
        2 => HANDSHAKE,
        _ => RETRY,
    };
    Some((kind, dcid, scid))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_of_each_length() {
        assert_eq!(varint(&[0x25]), Some((37, 1)));
        assert_eq!(varint(&[0x7b, 0xbd]), Some((15293, 2)));
        assert_eq!(varint(&[0x9d, 0x7f, 0x3e, 0x7d]), Some((494878333, 4)));
        assert_eq!(varint(&[0xc2, 0x19, 0x7c, 0x5e, 0xff, 0x14, 0xe8, 0x8c]), Some((151288809941952652, 8)));
        assert_eq!(varint(&[0x40]), None);
    }

    /// An Initial (token of 2 bytes, 20-byte payload) coalesced with a Handshake packet (10-byte
    /// payload) and a short-header packet.
    #[test]
    fn coalesced_packets_are_split_and_add_up() {
        let mut d = vec![0xc0, 0, 0, 0, 1, 4, 1, 2, 3, 4, 0];
        d.extend([2, 9, 9, 20]);
        d.extend([0u8; 20]);
        let initial = d.len();
        d.extend([0xe0, 0, 0, 0, 1, 0, 2, 7, 7, 10]);
        d.extend([0u8; 10]);
        let handshake = d.len() - initial;
        d.extend([0x40, 1, 2, 3, 4, 5]);
        let p = packets(&d).unwrap();
        assert_eq!(
            p,
            vec![
                Packet { kind: INITIAL, len_bytes: initial },
                Packet { kind: HANDSHAKE, len_bytes: handshake },
                Packet { kind: ONE_RTT, len_bytes: 6 }
            ]
        );
        assert_eq!(p.iter().map(|p| p.len_bytes).sum::<usize>(), d.len());
    }

    #[test]
    fn a_long_header_names_its_type_and_connection_ids() {
        let initial = [0xc0, 0, 0, 0, 1, 3, 1, 2, 3, 2, 8, 9, 0, 0x40, 1, 0];
        assert_eq!(long_header(&initial), Some((INITIAL, &[1u8, 2, 3][..], &[8u8, 9][..])));
        let handshake = [0xe0, 0, 0, 0, 1, 1, 7, 0, 0x40, 1, 0];
        assert_eq!(long_header(&handshake), Some((HANDSHAKE, &[7u8][..], &[][..])));
        assert_eq!(long_header(&[0x40, 1, 2, 3]), None, "a short header");
        assert_eq!(long_header(&[0xc0, 0, 0, 0, 0, 1, 1, 1, 2]), None, "version negotiation");
        assert_eq!(long_header(&[0xc0, 0, 0, 0, 1, 9, 1]), None, "cut short");
    }

    #[test]
    fn a_packet_longer_than_its_datagram_is_named() {
        let d = [0xe0, 0, 0, 0, 1, 0, 0, 0x40, 50, 1, 2];
        let e = packets(&d).unwrap_err().to_string();
        assert!(e.contains("Handshake packet of 59 bytes") && e.contains("offset 0"), "{e}");
    }
}
