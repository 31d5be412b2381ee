//! Timing wrappers around the signing key, the server-certificate verifier and the
//! ticketer; the transcript hash that marks each handshake message; a session store that
//! keeps only the newest ticket (and never a key-exchange hint, which would change the
//! client's key shares from one handshake to the next); the key log.

use crate::hooks::{op, with_current};
use pqtls_core::trace::EventKind;
use pqtls_pki::cert::read_tlv;
use pqtls_tls13::wire::{messages, HsType};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue, WebPkiServerVerifier};
use rustls::crypto::hash::{Context, Hash, HashAlgorithm, Output};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ProducesTickets;
use rustls::sign::{Signer, SigningKey};
use rustls::{
    CipherSuiteCommon, DigitallySignedStruct, Error as TlsError, NamedGroup, SignatureAlgorithm, SignatureScheme,
    SupportedCipherSuite, Tls13CipherSuite,
};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// A signing key whose signatures are timed as the `sign` operation.
#[derive(Debug)]
pub(crate) struct TimedKey {
    pub key: Arc<dyn SigningKey>,
    /// The one scheme this key signs with (the catalogue's scheme of the leaf algorithm),
    /// so that what is negotiated is what was asked (rustls would prefer e.g. RSA-PSS-SHA512).
    pub scheme: SignatureScheme,
}

impl SigningKey for TimedKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        if !offered.contains(&self.scheme) {
            return None;
        }
        self.key.choose_scheme(&[self.scheme]).map(|s| Box::new(TimedSigner(s)) as Box<dyn Signer>)
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        self.key.algorithm()
    }
}

#[derive(Debug)]
struct TimedSigner(Box<dyn Signer>);

impl Signer for TimedSigner {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>, TlsError> {
        op("sign", || self.0.sign(message))
    }

    fn scheme(&self) -> SignatureScheme {
        self.0.scheme()
    }
}

/// webpki's verifier, timed, recording the peer's signature scheme, and (with
/// `verify_parent`) also checking the trust anchor's own signature, which webpki does not.
#[derive(Debug)]
pub(crate) struct TimedVerifier {
    pub inner: Arc<WebPkiServerVerifier>,
    pub algs: WebPkiSupportedAlgorithms,
    /// DER of the root whose self-signature is verified on every handshake.
    pub verify_root: Option<CertificateDer<'static>>,
    /// The schemes offered in signature_algorithms: the configured leaf's only (with pqtls'
    /// PKI), or every one the provider verifies.
    pub schemes: Vec<SignatureScheme>,
    /// Verify the chain (false: `verify = false`, accepted as sent; the CertificateVerify
    /// signature is still checked).
    pub verify: bool,
    /// Where verifications made outside the backend's traced calls are counted (QUIC: quinn
    /// drives rustls itself; [`crate::Configs::verifications`]).
    pub tally: Option<Arc<VerifyTally>>,
}

/// The chain verifications of a configuration's connections, counted by the verifier itself:
/// their thread CPU summed and how many (for transports that drive rustls outside the
/// backend's traced calls).
#[derive(Debug, Default)]
pub struct VerifyTally {
    pub cpu_ns: AtomicU64,
    pub verifications: AtomicU64,
}

impl VerifyTally {
    /// (CPU ns, verifications) so far.
    pub fn read(&self) -> (u64, u64) {
        (self.cpu_ns.load(Ordering::Relaxed), self.verifications.load(Ordering::Relaxed))
    }
}

impl ServerCertVerifier for TimedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        if !self.verify {
            return Ok(ServerCertVerified::assertion());
        }
        let (mut start, mut traced) = (None, false);
        with_current(|h| {
            traced = true;
            start = h.trace.verification_start();
        });
        // Inside an endpoint's call the trace times it; the tally counts the verifications of
        // connections driven from outside (QUIC: quinn drives rustls), so that reading the
        // clock for it never adds to a traced step.
        let tallied_from = self.tally.as_ref().filter(|_| !traced).map(|_| pqtls_core::trace::thread_cpu_ns());
        let v = op("verify_cert_chain", || {
            let v = self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
            if let Some(root) = &self.verify_root {
                verify_self_signature(root, &self.algs)?;
            }
            Ok(v)
        });
        with_current(|h| h.trace.verification_end(start));
        if let (Some(tally), Some(t0)) = (&self.tally, tallied_from) {
            tally.cpu_ns.fetch_add(pqtls_core::trace::thread_cpu_ns().saturating_sub(t0), Ordering::Relaxed);
            tally.verifications.fetch_add(1, Ordering::Relaxed);
        }
        v
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        with_current(|h| h.peer_scheme = Some(u16::from(dss.scheme)));
        op("verify_signature", || self.inner.verify_tls13_signature(message, cert, dss))
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.schemes.clone()
    }
}

/// Verifies the signature of a self-signed certificate with its own public key.
fn verify_self_signature(cert: &CertificateDer<'_>, algs: &WebPkiSupportedAlgorithms) -> Result<(), TlsError> {
    let bad = || TlsError::General("the root certificate is malformed".into());
    let (_, body, _) = read_tlv(cert.as_ref()).ok_or_else(bad)?;
    // tbsCertificate, kept with its header: it is what was signed.
    let (_, _, rest) = read_tlv(body).ok_or_else(bad)?;
    let tbs = &body[..body.len() - rest.len()];
    let (_, sig_alg, rest) = read_tlv(rest).ok_or_else(bad)?;
    let (_, sig_bits, _) = read_tlv(rest).ok_or_else(bad)?;
    let signature = sig_bits.get(1..).ok_or_else(bad)?;
    let ee = webpki::EndEntityCert::try_from(cert).map_err(|e| TlsError::General(format!("root: {e}")))?;
    let mut last = TlsError::General("no verification algorithm for the root's signature algorithm".into());
    for alg in algs.all.iter().filter(|a| a.signature_alg_id().as_ref() == sig_alg) {
        match ee.verify_signature(*alg, tbs, signature) {
            Ok(()) => return Ok(()),
            Err(e) => last = TlsError::General(format!("the root's self-signature does not verify: {e}")),
        }
    }
    Err(last)
}

/// Keeps the newest TLS 1.3 ticket; counts tickets received; stores no key-exchange hint.
#[derive(Debug, Default)]
pub(crate) struct TicketStore {
    ticket: Mutex<Option<Tls13ClientSessionValue>>,
    pub received: AtomicU64,
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, _server_name: ServerName<'static>, _group: NamedGroup) {}

    fn kx_hint(&self, _server_name: &ServerName<'_>) -> Option<NamedGroup> {
        None
    }

    fn set_tls12_session(&self, _server_name: ServerName<'static>, _value: Tls12ClientSessionValue) {}

    fn tls12_session(&self, _server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        None
    }

    fn remove_tls12_session(&self, _server_name: &ServerName<'static>) {}

    fn insert_tls13_ticket(&self, _server_name: ServerName<'static>, value: Tls13ClientSessionValue) {
        with_current(|h| h.trace.push(EventKind::Message(HsType::NewSessionTicket), 0));
        if let Ok(mut t) = self.ticket.lock() {
            *t = Some(value);
        }
        self.received.fetch_add(1, Ordering::Release);
    }

    fn take_tls13_ticket(&self, _server_name: &ServerName<'static>) -> Option<Tls13ClientSessionValue> {
        self.ticket.lock().ok().and_then(|mut t| t.take())
    }
}

/// Receives rustls' traffic secrets (the `SSLKEYLOGFILE` interface) for the endpoint inside
/// the current call: they go to the endpoint's own key log when its options gave one, and
/// (traced endpoints; this side's handshake and first application secrets only) to the
/// endpoint itself, to measure the encrypted messages it wrote. rustls configurations are
/// built once per `Prepared`, so this one adapter in both configurations routes each
/// secret to the endpoint whose call is in progress.
#[derive(Debug)]
pub(crate) struct SecretLog;

impl rustls::KeyLog for SecretLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        with_current(|h| {
            if let Some(log) = &h.key_log {
                log.log(label, client_random, secret);
            }
            let mine = if h.is_client { label.starts_with("CLIENT_") } else { label.starts_with("SERVER_") };
            if h.trace.detailed
                && mine
                && (label.ends_with("_HANDSHAKE_TRAFFIC_SECRET") || label.ends_with("_TRAFFIC_SECRET_0"))
            {
                h.secrets.push(secret.to_vec());
            }
        });
    }
}

/// Times the server's ticket encryption (`encrypt_ticket`, marking the NewSessionTicket) and
/// decryption (`decrypt_ticket`, when a client resumes).
#[derive(Debug)]
pub(crate) struct TimedTicketer(pub Arc<dyn ProducesTickets>);

impl ProducesTickets for TimedTicketer {
    fn enabled(&self) -> bool {
        self.0.enabled()
    }

    fn lifetime(&self) -> u32 {
        self.0.lifetime()
    }

    fn encrypt(&self, plain: &[u8]) -> Option<Vec<u8>> {
        with_current(|h| h.trace.push(EventKind::Message(HsType::NewSessionTicket), 0));
        op("encrypt_ticket", || self.0.encrypt(plain))
    }

    fn decrypt(&self, cipher: &[u8]) -> Option<Vec<u8>> {
        op("decrypt_ticket", || self.0.decrypt(cipher))
    }
}

/// A suite's hash that marks each handshake message entering the transcript as a
/// `Message(m)` event (rustls has no message callback): `update` is called with whole
/// encoded messages (or the buffered ClientHello). Forked contexts (transcript hashes taken
/// at a point, PSK binders) are silent.
pub(crate) struct TranscriptHash(&'static dyn Hash);

impl Hash for TranscriptHash {
    fn start(&self) -> Box<dyn Context> {
        Box::new(TranscriptContext { inner: self.0.start(), marks: true })
    }

    fn hash(&self, data: &[u8]) -> Output {
        self.0.hash(data)
    }

    fn output_len(&self) -> usize {
        self.0.output_len()
    }

    fn algorithm(&self) -> HashAlgorithm {
        self.0.algorithm()
    }

    fn fips(&self) -> bool {
        self.0.fips()
    }
}

struct TranscriptContext {
    inner: Box<dyn Context>,
    marks: bool,
}

impl Context for TranscriptContext {
    fn fork_finish(&self) -> Output {
        self.inner.fork_finish()
    }

    fn fork(&self) -> Box<dyn Context> {
        Box::new(TranscriptContext { inner: self.inner.fork(), marks: false })
    }

    fn finish(self: Box<Self>) -> Output {
        self.inner.finish()
    }

    fn update(&mut self, data: &[u8]) {
        if self.marks {
            mark_messages(data);
        }
        self.inner.update(data);
    }
}

/// Pushes `Message(m)` for each whole handshake message in `data`; nothing unless `data`
/// is exactly a sequence of whole messages (a PSK binder hashes a truncated ClientHello).
fn mark_messages(data: &[u8]) {
    with_current(|h| {
        if h.trace.detailed {
            for t in whole_messages(data).into_iter().flatten().flatten() {
                h.trace.push(EventKind::Message(t), 0);
            }
        }
    });
}

/// The types of the whole handshake messages `data` consists of (at most 8), or `None`.
fn whole_messages(data: &[u8]) -> Option<[Option<HsType>; 8]> {
    let mut types = [None; 8];
    let mut msgs = messages(data);
    for (n, m) in msgs.by_ref().enumerate() {
        *types.get_mut(n)? = Some(m.kind());
    }
    msgs.rest().is_empty().then_some(types)
}

/// aws-lc-rs' TLS 1.3 suites with [`TranscriptHash`] (built once: rustls needs `'static`
/// suites; an immutable table, like the suites themselves).
fn transcript_suites() -> &'static [(Tls13CipherSuite, u16)] {
    static SUITES: OnceLock<Vec<(Tls13CipherSuite, u16)>> = OnceLock::new();
    SUITES.get_or_init(|| {
        rustls::crypto::aws_lc_rs::ALL_CIPHER_SUITES
            .iter()
            .filter_map(|s| match s {
                SupportedCipherSuite::Tls13(t) => Some(*t),
                _ => None,
            })
            .map(|t| {
                let hash: &'static TranscriptHash = match t.common.hash_provider.algorithm() {
                    HashAlgorithm::SHA384 => sha384(t.common.hash_provider),
                    _ => sha256(t.common.hash_provider),
                };
                let suite = Tls13CipherSuite {
                    common: CipherSuiteCommon {
                        suite: t.common.suite,
                        hash_provider: hash,
                        confidentiality_limit: t.common.confidentiality_limit,
                    },
                    hkdf_provider: t.hkdf_provider,
                    aead_alg: t.aead_alg,
                    quic: t.quic,
                };
                (suite, u16::from(t.common.suite))
            })
            .collect()
    })
}

fn sha256(inner: &'static dyn Hash) -> &'static TranscriptHash {
    static H: OnceLock<TranscriptHash> = OnceLock::new();
    H.get_or_init(|| TranscriptHash(inner))
}

fn sha384(inner: &'static dyn Hash) -> &'static TranscriptHash {
    static H: OnceLock<TranscriptHash> = OnceLock::new();
    H.get_or_init(|| TranscriptHash(inner))
}

/// The TLS 1.3 suite with this code point, its transcript marked.
pub(crate) fn transcript_suite(code_point: u16) -> Option<SupportedCipherSuite> {
    transcript_suites().iter().find(|(_, cp)| *cp == code_point).map(|(s, _)| SupportedCipherSuite::Tls13(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_messages_are_marked() {
        let ch = [1u8, 0, 0, 2, 0xaa, 0xbb];
        let fin = [20u8, 0, 0, 1, 0xcc];
        let two: Vec<u8> = ch.iter().chain(fin.iter()).copied().collect();
        let types = |d: &[u8]| whole_messages(d).map(|t| t.iter().flatten().copied().collect::<Vec<HsType>>());
        assert_eq!(types(&ch), Some(vec![HsType::ClientHello]));
        assert_eq!(types(&two), Some(vec![HsType::ClientHello, HsType::Finished]));
        // A PSK binder hashes a truncated ClientHello: not a message.
        assert_eq!(types(&ch[..5]), None);
        assert_eq!(types(&two[..8]), None);
    }
}
