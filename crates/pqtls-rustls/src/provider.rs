//! Timing wrappers around the signing key, the server-certificate verifier, and a session
//! store that keeps only the newest ticket (and never a key-exchange hint, which would
//! change the client's key shares from one handshake to the next).

use crate::hooks::{op, with_current};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{ClientSessionStore, Tls12ClientSessionValue, Tls13ClientSessionValue, WebPkiServerVerifier};
use rustls::crypto::WebPkiSupportedAlgorithms;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::sign::{Signer, SigningKey};
use rustls::{DigitallySignedStruct, Error as TlsError, NamedGroup, SignatureAlgorithm, SignatureScheme};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
    /// The schemes offered in signature_algorithms: the configured leaf's only.
    pub schemes: Vec<SignatureScheme>,
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
        op("verify_cert_chain", || {
            let v = self.inner.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)?;
            if let Some(root) = &self.verify_root {
                verify_self_signature(root, &self.algs)?;
            }
            Ok(v)
        })
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

/// Minimal DER walk: (tag, content, rest).
fn der(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return None;
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    Some((tag, &rest[..len], &rest[len..]))
}

/// Verifies the signature of a self-signed certificate with its own public key.
fn verify_self_signature(cert: &CertificateDer<'_>, algs: &WebPkiSupportedAlgorithms) -> Result<(), TlsError> {
    let bad = || TlsError::General("the root certificate is malformed".into());
    let (_, body, _) = der(cert.as_ref()).ok_or_else(bad)?;
    // tbsCertificate, kept with its header: it is what was signed.
    let (_, _, rest) = der(body).ok_or_else(bad)?;
    let tbs = &body[..body.len() - rest.len()];
    let (_, sig_alg, rest) = der(rest).ok_or_else(bad)?;
    let (_, sig_bits, _) = der(rest).ok_or_else(bad)?;
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
/// the current call, so that it can measure the encrypted messages it wrote. Traced
/// endpoints only; only this side's handshake and first application secrets are kept.
#[derive(Debug)]
pub(crate) struct SecretLog;

impl rustls::KeyLog for SecretLog {
    fn log(&self, label: &str, _client_random: &[u8], secret: &[u8]) {
        with_current(|h| {
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
