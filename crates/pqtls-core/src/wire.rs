//! Just enough TLS 1.3 wire parsing to check sizes against the standards: the key shares
//! of a ClientHello or ServerHello (plaintext messages), and the records of a flight.

/// A handshake message from a plaintext record stream: (type, body) of each message in
/// the handshake records at the start of `stream`, stopping at the first non-handshake record.
pub fn handshake_messages(stream: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut payload = Vec::new();
    let mut rest = stream;
    while rest.len() >= 5 && rest[0] == 22 {
        let len = u16::from_be_bytes([rest[3], rest[4]]) as usize;
        if rest.len() < 5 + len {
            break;
        }
        payload.extend_from_slice(&rest[5..5 + len]);
        rest = &rest[5 + len..];
    }
    let mut out = Vec::new();
    let mut p = &payload[..];
    while p.len() >= 4 {
        let len = u32::from_be_bytes([0, p[1], p[2], p[3]]) as usize;
        if p.len() < 4 + len {
            break;
        }
        out.push((p[0], p[4..4 + len].to_vec()));
        p = &p[4 + len..];
    }
    out
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (a, b) = self.0.split_at(n);
        self.0 = b;
        Some(a)
    }
    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| b[0] as usize)
    }
    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| u16::from_be_bytes([b[0], b[1]]) as usize)
    }
    fn vec8(&mut self) -> Option<&'a [u8]> {
        let n = self.u8()?;
        self.take(n)
    }
    fn vec16(&mut self) -> Option<&'a [u8]> {
        let n = self.u16()?;
        self.take(n)
    }
}

/// Extensions (type, data) of a ClientHello (`client = true`) or ServerHello body.
pub fn hello_extensions(body: &[u8], client: bool) -> Option<Vec<(u16, Vec<u8>)>> {
    let mut r = Reader(body);
    r.take(2 + 32)?; // legacy_version, random
    r.vec8()?; // legacy_session_id
    if client {
        r.vec16()?; // cipher_suites
        r.vec8()?; // legacy_compression_methods
    } else {
        r.take(2 + 1)?; // cipher_suite, legacy_compression_method
    }
    let mut exts = Reader(r.vec16()?);
    let mut out = Vec::new();
    while !exts.0.is_empty() {
        let t = exts.u16()? as u16;
        out.push((t, exts.vec16()?.to_vec()));
    }
    Some(out)
}

const KEY_SHARE: u16 = 51;

/// The key shares of a ClientHello body: (group code point, key exchange bytes).
pub fn client_key_shares(body: &[u8]) -> Option<Vec<(u16, usize)>> {
    let ext = hello_extensions(body, true)?.into_iter().find(|(t, _)| *t == KEY_SHARE)?.1;
    let mut outer = Reader(&ext);
    let mut r = Reader(outer.vec16()?);
    let mut out = Vec::new();
    while !r.0.is_empty() {
        let g = r.u16()? as u16;
        out.push((g, r.vec16()?.len()));
    }
    Some(out)
}

/// The key share of a ServerHello body: (group, key exchange bytes); for a
/// HelloRetryRequest, the selected group and 0.
pub fn server_key_share(body: &[u8]) -> Option<(u16, usize)> {
    let ext = hello_extensions(body, false)?.into_iter().find(|(t, _)| *t == KEY_SHARE)?.1;
    let mut r = Reader(&ext);
    let g = r.u16()? as u16;
    if r.0.is_empty() {
        return Some((g, 0));
    }
    Some((g, r.vec16()?.len()))
}
