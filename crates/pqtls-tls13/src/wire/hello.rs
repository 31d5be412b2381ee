//! Readers of what pqtls takes from a ClientHello, ServerHello or EncryptedExtensions body (RFC 8446 §4.1.2–4.1.3,
//! §4.2.8): the random, the chosen cipher suite, the extensions, the key shares.

/// The key_share extension's type.
pub const KEY_SHARE: u16 = 51;

/// A cursor over a body: fixed fields and length-prefixed vectors (RFC 8446 §3.4), `None`
/// past the end.
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
    /// Items read one after the other by `item` until nothing is left; `None` when one does
    /// not read whole.
    fn all<T>(mut self, mut item: impl FnMut(&mut Reader<'a>) -> Option<T>) -> Option<Vec<T>> {
        let mut out = Vec::new();
        while !self.0.is_empty() {
            out.push(item(&mut self)?);
        }
        Some(out)
    }
    /// legacy_version and random: the random.
    fn random(&mut self) -> Option<&'a [u8]> {
        self.take(2)?;
        self.take(32)
    }
}

/// The random of a ClientHello or ServerHello body (a HelloRetryRequest's is [`super::HRR_RANDOM`]).
pub fn hello_random(body: &[u8]) -> Option<[u8; 32]> {
    Reader(body).random()?.try_into().ok()
}

/// The cipher suite a ServerHello (or HelloRetryRequest) body chose.
pub fn server_hello_suite(body: &[u8]) -> Option<u16> {
    let mut r = Reader(body);
    r.random()?;
    r.vec8()?; // legacy_session_id_echo
    r.u16().map(|s| s as u16)
}

/// Extensions (type, data) of a ClientHello (`client = true`) or ServerHello body.
pub fn hello_extensions(body: &[u8], client: bool) -> Option<Vec<(u16, Vec<u8>)>> {
    let mut r = Reader(body);
    r.random()?;
    r.vec8()?; // legacy_session_id
    if client {
        r.vec16()?; // cipher_suites
        r.vec8()?; // legacy_compression_methods
    } else {
        r.take(2 + 1)?; // cipher_suite, legacy_compression_method
    }
    Reader(r.vec16()?).all(|e| Some((e.u16()? as u16, e.vec16()?.to_vec())))
}

/// Extensions (type, data) of an EncryptedExtensions body (RFC 8446 §4.3.1).
pub fn encrypted_extensions(body: &[u8]) -> Option<Vec<(u16, Vec<u8>)>> {
    let mut r = Reader(body);
    let exts = r.vec16()?;
    Reader(exts).all(|e| Some((e.u16()? as u16, e.vec16()?.to_vec())))
}

/// The key shares of a ClientHello body: (group code point, key exchange bytes).
pub fn client_key_shares(body: &[u8]) -> Option<Vec<(u16, usize)>> {
    let ext = hello_extensions(body, true)?.into_iter().find(|(t, _)| *t == KEY_SHARE)?.1;
    Reader(Reader(&ext).vec16()?).all(|e| Some((e.u16()? as u16, e.vec16()?.len())))
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
