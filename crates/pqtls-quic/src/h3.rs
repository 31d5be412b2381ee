//! HTTP/3's ground: the rustls backend's configurations (the same provider, groups, signature
//! schemes, chain and mTLS as every other pqtls handshake, prepared by `Stacks::prepare`)
//! with ALPN `h3`, carried by quinn; UDP sockets bound with errors that say what to do; and
//! what each side saw of a handshake.
//!
//! quinn hides the rustls connection, so what was negotiated is read from the handshake
//! itself: each side's QUIC crypto session is wrapped ([`Observed`]) and the TLS messages it
//! reads and writes (the CRYPTO data, in order) are reassembled with the tls13 codec — the
//! ServerHello names the group and cipher suite (and a HelloRetryRequest shows), the server's
//! CertificateVerify the signature scheme, and every message's size is counted. The same
//! wrapper reads the thread CPU clock around each call into rustls (starting the session,
//! reading and writing handshake data) until the handshake completes: the TLS CPU of a
//! handshake, as the TCP path's "CPU inside the stack's calls".

use crate::session::{SessionWatch, Watch, Watched};
use pqtls_core::backend::{KeyLog, Negotiated, Prepared};
use pqtls_core::catalogue::{self, CodepointOverrides, Stack};
use pqtls_core::config::HandshakeConfig;
use pqtls_core::wire::{self, HsType};
use pqtls_core::{Error, Result};
pub use pqtls_rustls::VerifyTally;
use quinn::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

/// The ALPN of HTTP/3 (RFC 9114 §3.1).
pub const ALPN_H3: &[u8] = b"h3";

/// The TLS alert a server sends when no ALPN protocol is shared (RFC 7301 §3.2), as the QUIC
/// CRYPTO_ERROR code it becomes (0x100 + alert, RFC 9001 §4.8).
pub const NO_APPLICATION_PROTOCOL: u64 = 0x100 + 120;

/// HTTP/3 runs on the rustls stack only: the OpenSSL stack is refused, saying why.
pub fn require_rustls(stack: Stack) -> Result<()> {
    match stack {
        Stack::Rustls => Ok(()),
        other => Err(Error::Unsupported(format!(
            "HTTP/3 over QUIC runs on the rustls stack only (quinn carries rustls; the {other} stack's own QUIC API \
             is not wired into pqtls yet): give --stack rustls (stack = \"rustls\")"
        ))),
    }
}

/// HTTP/3's TLS: the rustls contexts a scenario was prepared with (by `Stacks::prepare`, as
/// every other path: trust, chain, mTLS, resumption from one place), with ALPN `h3`, wrapped
/// for quinn.
pub struct H3Configs {
    pub client: Arc<QuicClientConfig>,
    pub server: Arc<QuicServerConfig>,
    /// The client's chain verifications (quinn drives rustls outside pqtls' traced calls: the
    /// verifier counts them itself): what the load generator reports as its verification CPU.
    pub verifications: Arc<VerifyTally>,
}

/// [`H3Configs`] of `prepared`, the contexts of `cfg`; with `key_log`, both sides write their
/// TLS secrets there (NSS key log lines: Wireshark decrypts QUIC with them). A configuration
/// on another stack is refused, saying why ([`require_rustls`]).
pub fn configs(cfg: &HandshakeConfig, prepared: &dyn Prepared, key_log: Option<Arc<dyn KeyLog>>) -> Result<H3Configs> {
    require_rustls(cfg.stack)?;
    let prepared = pqtls_rustls::configs(prepared).ok_or_else(|| {
        Error::Invalid(format!("{}: contexts not prepared by the rustls backend given to HTTP/3", cfg.stack))
    })?;
    let mut client = (*prepared.client).clone();
    let mut server = (*prepared.server).clone();
    client.alpn_protocols = vec![ALPN_H3.to_vec()];
    server.alpn_protocols = vec![ALPN_H3.to_vec()];
    if let Some(k) = key_log {
        client.key_log = Arc::new(Secrets(k.clone()));
        server.key_log = Arc::new(Secrets(k));
    }
    // QUIC has no 0-RTT here (no tickets are kept between connections unless asked): rustls
    // refuses a QUIC server whose max_early_data_size is neither 0 nor u32::MAX.
    server.max_early_data_size = 0;
    let quic = |e: &dyn std::fmt::Display| {
        Error::Unsupported(format!(
            "{} over QUIC: {e} (QUIC needs a TLS 1.3 suite with QUIC keys, and the client TLS_AES_128_GCM_SHA256 for \
             its Initial packets)",
            cfg.cipher.name
        ))
    };
    let client = QuicClientConfig::try_from(client).map_err(|e| quic(&e))?;
    let server = QuicServerConfig::try_from(server).map_err(|e| quic(&e))?;
    Ok(H3Configs { client: Arc::new(client), server: Arc::new(server), verifications: prepared.verifications })
}

/// rustls' key log interface to pqtls' ([`KeyLog`]). QUIC sessions are driven by quinn, outside
/// pqtls' traced calls, so the secrets go straight to the run's key log.
struct Secrets(Arc<dyn KeyLog>);

impl std::fmt::Debug for Secrets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secrets (the run's key log)")
    }
}

impl rustls::KeyLog for Secrets {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        self.0.log(label, client_random, secret);
    }
}

/// A UDP socket bound to `addr`; a port another program holds is an error that says so.
pub fn bind_udp(addr: SocketAddr) -> Result<std::net::UdpSocket> {
    std::net::UdpSocket::bind(addr).map_err(|e| match e.kind() {
        std::io::ErrorKind::AddrInUse => Error::Invalid(format!(
            "UDP {addr} is in use by another program (a QUIC or other UDP server listens there); stop it or pick \
             another port (e.g. --listen 127.0.0.1:0 for a free one)"
        )),
        _ => Error::io(format!("binding UDP {addr}"), e),
    })
}

/// The TLS messages of one handshake, as one side saw them, and the TLS CPU it spent.
#[derive(Clone, Debug, Default)]
pub struct Seen {
    /// In order: (sent by the client, message type, bytes with its 4-byte header).
    pub messages: Vec<(bool, HsType, u64)>,
    /// The ServerHello's group and suite code points and the server's CertificateVerify's
    /// signature scheme; whether a HelloRetryRequest came first.
    pub group: Option<u16>,
    pub suite: Option<u16>,
    pub scheme: Option<u16>,
    pub hrr: bool,
    /// Thread CPU inside this side's calls into rustls until the handshake completed, ns.
    pub cpu_ns: u64,
    pub done: bool,
    /// The client's initial destination connection ID (its first Initial packets'): what its
    /// first flight is known by on the wire ([`crate::flights`]).
    pub initial_dcid: Option<Vec<u8>>,
    /// How the server's chain arrived: `None` before it did; `Some(None)` as a Certificate,
    /// `Some(Some(cp))` as a CompressedCertificate of algorithm `cp` (RFC 8879 §4).
    pub server_chain: Option<Option<u16>>,
}

impl Seen {
    fn message(&mut self, by_client: bool, m: &wire::Message<'_>) {
        let kind = m.kind();
        self.messages.push((by_client, kind, m.len() as u64));
        match kind {
            HsType::HelloRetryRequest => self.hrr = true,
            HsType::ServerHello => {
                self.group = wire::server_key_share(m.body()).map(|(g, _)| g);
                self.suite = wire::server_hello_suite(m.body());
            }
            HsType::CertificateVerify if !by_client => {
                self.scheme = m.body().get(..2).map(|b| u16::from_be_bytes([b[0], b[1]]));
            }
            HsType::Certificate if !by_client => self.server_chain = Some(None),
            HsType::CompressedCertificate if !by_client => {
                self.server_chain = Some(m.body().get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])));
            }
            _ => {}
        }
    }

    /// What was negotiated, named as the catalogue names it (code points it does not know as
    /// `0x….`).
    pub fn negotiated(&self, codepoints: &CodepointOverrides) -> Negotiated {
        let hex = |cp: u16| format!("0x{cp:04x}");
        Negotiated {
            group: self
                .group
                .map(|cp| codepoints.group_by_code_point(cp).map_or_else(|| hex(cp), |g| g.name.to_string()))
                .unwrap_or_default(),
            sigalg: self
                .scheme
                .map(|cp| codepoints.sig_by_code_point(cp).map_or_else(|| hex(cp), |s| s.scheme.to_string()))
                .unwrap_or_default(),
            cipher: self
                .suite
                .map(|cp| {
                    catalogue::CIPHERS.iter().find(|c| c.code_point == cp).map_or_else(|| hex(cp), |c| c.name.into())
                })
                .unwrap_or_default(),
            hrr: self.hrr,
            resumed: false,
            version: if self.suite.is_some() { "TLSv1.3".into() } else { String::new() },
            // Read from the messages on the wire, as the TCP path's client reports it.
            cert_compression: self.server_chain.map(|chain| match chain {
                None => "none".to_string(),
                Some(cp) => catalogue::CertCompression::from_code_point(cp)
                    .map_or_else(|| format!("0x{cp:04x}"), |c| c.name().to_string()),
            }),
        }
    }

    /// Bytes of the handshake messages per direction: (client → server, server → client).
    pub fn bytes(&self) -> (u64, u64) {
        self.messages.iter().fold((0, 0), |(c, s), &(by_client, _, n)| if by_client { (c + n, s) } else { (c, s + n) })
    }

    /// The message table of a record (`Bytes::messages`: the same keys as over TCP).
    pub fn message_table(&self) -> indexmap::IndexMap<String, u64> {
        let mut t = indexmap::IndexMap::new();
        for &(by_client, kind, n) in &self.messages {
            *t.entry(pqtls_core::record::message_key(by_client, kind)).or_insert(0) += n;
        }
        t
    }
}

/// What is done with a side's [`Seen`] once its handshake completes.
pub type OnDone = Arc<dyn Fn(&Seen) + Send + Sync>;

/// What a QUIC crypto configuration's sessions are seen with ([`Seen`]): the configuration is
/// [`Watched`] by it.
pub struct Observed {
    /// Where the client's session writes (one client configuration per connection); `None`
    /// on the server, which reports through `on_done` only.
    seen: Option<Arc<Mutex<Seen>>>,
    on_done: Option<OnDone>,
}

impl Observed {
    /// A client's: what it sees goes into `seen`.
    pub fn client<C>(inner: Arc<C>, seen: Arc<Mutex<Seen>>) -> Watched<C, Observed> {
        Watched { inner, watch: Observed { seen: Some(seen), on_done: None } }
    }

    /// A server's: each completed handshake is handed to `on_done`.
    pub fn server<C>(inner: Arc<C>, on_done: OnDone) -> Watched<C, Observed> {
        Watched { inner, watch: Observed { seen: None, on_done: Some(on_done) } }
    }
}

impl Watch for Observed {
    type Session = ObservedSession;
    fn session(&self, is_client: bool) -> ObservedSession {
        ObservedSession {
            is_client,
            seen: self.seen.clone().unwrap_or_default(),
            on_done: self.on_done.clone(),
            from_peer: wire::Reassembler::default(),
            from_self: wire::Reassembler::default(),
        }
    }
}

/// One session's observer.
pub struct ObservedSession {
    is_client: bool,
    seen: Arc<Mutex<Seen>>,
    on_done: Option<OnDone>,
    /// The peer's and this side's CRYPTO data, reassembled into messages (a message may span
    /// frames; none spans encryption levels).
    from_peer: wire::Reassembler,
    from_self: wire::Reassembler,
}

impl SessionWatch for ObservedSession {
    const TIMED: bool = true;

    /// Accounts for one call into rustls: its CPU (while handshaking), the messages it read or
    /// wrote, and the completion.
    fn call(&mut self, cpu_ns: u64, read: Option<&[u8]>, wrote: &[u8], handshaking: bool) {
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        // The client is done once it has read the server's Finished, before it writes its own:
        // messages are still counted after that, CPU no longer.
        if !seen.done {
            seen.cpu_ns += cpu_ns;
        }
        let by_peer = !self.is_client;
        if let Some(data) = read {
            for m in self.from_peer.push(data) {
                seen.message(by_peer, &m);
            }
        }
        if !wrote.is_empty() {
            for m in self.from_self.push(wrote) {
                seen.message(self.is_client, &m);
            }
        }
        if !seen.done && !handshaking {
            seen.done = true;
            if let Some(f) = &self.on_done {
                f(&seen);
            }
        }
    }

    fn initial_keys_for(&self, dst_cid: &[u8]) {
        if self.is_client {
            let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
            seen.initial_dcid.get_or_insert_with(|| dst_cid.to_vec());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::wire::HRR_RANDOM;

    /// A handshake message: type, 24-bit length, body.
    fn message(t: u8, body: &[u8]) -> Vec<u8> {
        wire::encode_message(t, body).unwrap()
    }

    /// A ServerHello body: version, random, empty session id, suite, no compression, and a
    /// key_share extension with `share` bytes for `group`.
    fn server_hello(random: [u8; 32], suite: u16, group: u16, share: usize) -> Vec<u8> {
        let mut b = vec![3, 3];
        b.extend_from_slice(&random);
        b.push(0);
        b.extend_from_slice(&suite.to_be_bytes());
        b.push(0);
        let mut ks = group.to_be_bytes().to_vec();
        if share > 0 {
            ks.extend_from_slice(&(share as u16).to_be_bytes());
            ks.extend(std::iter::repeat_n(0xab, share));
        }
        let mut ext = wire::KEY_SHARE.to_be_bytes().to_vec();
        ext.extend_from_slice(&(ks.len() as u16).to_be_bytes());
        ext.extend(ks);
        b.extend_from_slice(&(ext.len() as u16).to_be_bytes());
        b.extend(ext);
        b
    }

    #[test]
    fn negotiated_and_sizes_come_from_the_messages_in_pieces() {
        let mut seen = Seen::default();
        let mut peer = wire::Reassembler::default();
        let hrr = message(2, &server_hello(HRR_RANDOM, 0x1301, 0x001d, 0));
        let sh = message(2, &server_hello([7; 32], 0x1301, 0x11ec, 1120));
        let cv = message(15, &[0x09, 0x05, 0, 2, 0xaa, 0xbb]);
        let stream: Vec<u8> = [hrr.clone(), sh.clone(), cv.clone()].concat();
        // Fed in pieces that split messages, as CRYPTO frames may.
        for piece in stream.chunks(7) {
            for m in peer.push(piece) {
                seen.message(false, &m);
            }
        }
        let n = seen.negotiated(&CodepointOverrides::none());
        assert_eq!((n.group.as_str(), n.cipher.as_str(), n.hrr), ("X25519MLKEM768", "TLS_AES_128_GCM_SHA256", true));
        assert_eq!(n.sigalg, catalogue::sig_alg("mldsa65").unwrap().scheme);
        assert_eq!(seen.bytes(), (0, (hrr.len() + sh.len() + cv.len()) as u64));
        let table = seen.message_table();
        assert_eq!(
            (table["HelloRetryRequest"], table["ServerHello"]),
            (hrr.len() as u64, sh.len() as u64),
            "{table:?}"
        );
        assert_eq!(table["CertificateVerify"], cv.len() as u64);
        // The client's own Finished is keyed as over TCP.
        seen.message(true, &wire::messages(&message(20, &[0; 32])).next().unwrap());
        assert_eq!(seen.message_table()["ClientFinished"], 36);
        assert_eq!(seen.bytes().0, 36);
    }
}
