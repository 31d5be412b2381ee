//! Key-exchange groups: rustls' aws-lc-rs groups plus MLKEM512 and secp521r1 built here from
//! aws-lc-rs primitives, each wrapped so that key generation, encapsulation and
//! decapsulation are timed, and so that the client's key-share strategy can be chosen.

use crate::hooks::{op, with_current};
use aws_lc_rs::{agreement, kem};
use rustls::crypto::aws_lc_rs::kx_group;
use rustls::crypto::{ActiveKeyExchange, CompletedKeyExchange, SharedSecret, SupportedKxGroup};
use rustls::ffdhe_groups::FfdheGroup;
use rustls::{Error as TlsError, NamedGroup, PeerMisbehaved};

const INVALID_KEY_SHARE: TlsError = TlsError::PeerMisbehaved(PeerMisbehaved::InvalidKeyShare);

/// What a hybrid group's client key share brings along in the ClientHello.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Component {
    /// Nothing: one key share.
    Hidden,
    /// rustls' optimisation: the classical half of the hybrid share is also sent as the
    /// classical group's share (one X25519 key behind both).
    Shared,
    /// A second, independently generated classical share.
    Independent,
}

/// A group timed and with a chosen key-share strategy.
#[derive(Debug)]
pub(crate) struct Timed {
    pub inner: &'static dyn SupportedKxGroup,
    pub component: Component,
}

/// The groups this backend provides, by TLS code point.
pub(crate) fn lookup(code_point: u16) -> Option<&'static dyn SupportedKxGroup> {
    let all: [&'static dyn SupportedKxGroup; 10] = [
        kx_group::X25519,
        kx_group::SECP256R1,
        kx_group::SECP384R1,
        kx_group::X25519MLKEM768,
        kx_group::SECP256R1MLKEM768,
        kx_group::MLKEM768,
        kx_group::MLKEM1024,
        MLKEM512,
        SECP521R1,
        SECP384R1MLKEM1024,
    ];
    all.into_iter().find(|g| u16::from(g.name()) == code_point).or_else(|| pqtls_oqs::kx_group(code_point))
}

impl SupportedKxGroup for Timed {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, TlsError> {
        with_current(|h| h.kx_starts += 1);
        op("kx_keygen", || {
            let inner = self.inner.start()?;
            let independent = match (self.component, inner.hybrid_component()) {
                (Component::Independent, Some((g, _))) => {
                    let classical =
                        lookup(u16::from(g)).ok_or_else(|| TlsError::General(format!("no classical group {g:?}")))?;
                    Some(classical.start()?)
                }
                _ => None,
            };
            Ok(Box::new(TimedActive { inner, component: self.component, independent }) as Box<dyn ActiveKeyExchange>)
        })
    }

    fn start_and_complete(&self, peer_pub_key: &[u8]) -> Result<CompletedKeyExchange, TlsError> {
        op("kx_encapsulate", || self.inner.start_and_complete(peer_pub_key))
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        self.inner.ffdhe_group()
    }

    fn name(&self) -> NamedGroup {
        self.inner.name()
    }

    fn fips(&self) -> bool {
        self.inner.fips()
    }
}

struct TimedActive {
    inner: Box<dyn ActiveKeyExchange>,
    component: Component,
    independent: Option<Box<dyn ActiveKeyExchange>>,
}

impl ActiveKeyExchange for TimedActive {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, TlsError> {
        op("kx_decapsulate", || self.inner.complete(peer_pub_key))
    }

    fn hybrid_component(&self) -> Option<(NamedGroup, &[u8])> {
        match self.component {
            Component::Hidden => None,
            Component::Shared => self.inner.hybrid_component(),
            Component::Independent => self.independent.as_ref().map(|k| (k.group(), k.pub_key())),
        }
    }

    fn complete_hybrid_component(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, TlsError> {
        op("kx_decapsulate", || match (self.component, self.independent) {
            (Component::Independent, Some(k)) => k.complete(peer_pub_key),
            (Component::Shared, _) => self.inner.complete_hybrid_component(peer_pub_key),
            _ => Err(TlsError::General("no second key share was sent".into())),
        })
    }

    fn pub_key(&self) -> &[u8] {
        self.inner.pub_key()
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        self.inner.ffdhe_group()
    }

    fn group(&self) -> NamedGroup {
        self.inner.group()
    }
}

/// ML-KEM-512 (FIPS 203) as a TLS group (code point 0x0200), from aws-lc-rs.
pub(crate) static MLKEM512: &dyn SupportedKxGroup = &MlKem { alg: &kem::ML_KEM_512, group: NamedGroup::MLKEM512 };

#[derive(Debug)]
struct MlKem {
    alg: &'static kem::Algorithm<kem::AlgorithmId>,
    group: NamedGroup,
}

impl SupportedKxGroup for MlKem {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, TlsError> {
        let decaps = kem::DecapsulationKey::generate(self.alg)
            .map_err(|_| TlsError::General("ML-KEM key generation failed".into()))?;
        let ek = decaps
            .encapsulation_key()
            .and_then(|k| k.key_bytes().map(|b| b.as_ref().to_vec()))
            .map_err(|_| TlsError::General("ML-KEM encapsulation key export failed".into()))?;
        Ok(Box::new(MlKemActive { decaps, ek, group: self.group }))
    }

    fn start_and_complete(&self, client_share: &[u8]) -> Result<CompletedKeyExchange, TlsError> {
        let ek = kem::EncapsulationKey::new(self.alg, client_share).map_err(|_| INVALID_KEY_SHARE)?;
        let (ct, ss) = ek.encapsulate().map_err(|_| INVALID_KEY_SHARE)?;
        Ok(CompletedKeyExchange {
            group: self.group,
            pub_key: ct.as_ref().to_vec(),
            secret: SharedSecret::from(ss.as_ref()),
        })
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        None
    }

    fn name(&self) -> NamedGroup {
        self.group
    }
}

struct MlKemActive {
    decaps: kem::DecapsulationKey<kem::AlgorithmId>,
    ek: Vec<u8>,
    group: NamedGroup,
}

impl ActiveKeyExchange for MlKemActive {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, TlsError> {
        let ss = self.decaps.decapsulate(peer_pub_key.into()).map_err(|_| INVALID_KEY_SHARE)?;
        Ok(SharedSecret::from(ss.as_ref()))
    }

    fn pub_key(&self) -> &[u8] {
        &self.ek
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        None
    }

    fn group(&self) -> NamedGroup {
        self.group
    }
}

/// ECDHE over P-521 (secp521r1, 0x0019), from aws-lc-rs' agreement module.
pub(crate) static SECP521R1: &dyn SupportedKxGroup = &Ecdh { alg: &agreement::ECDH_P521, group: NamedGroup::secp521r1 };

#[derive(Debug)]
struct Ecdh {
    alg: &'static agreement::Algorithm,
    group: NamedGroup,
}

impl SupportedKxGroup for Ecdh {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, TlsError> {
        let key = agreement::PrivateKey::generate(self.alg)
            .map_err(|_| TlsError::General("ECDH key generation failed".into()))?;
        let public =
            key.compute_public_key().map_err(|_| TlsError::General("ECDH public key failed".into()))?.as_ref().to_vec();
        Ok(Box::new(EcdhActive { key, public, alg: self.alg, group: self.group }))
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        None
    }

    fn name(&self) -> NamedGroup {
        self.group
    }
}

struct EcdhActive {
    key: agreement::PrivateKey,
    public: Vec<u8>,
    alg: &'static agreement::Algorithm,
    group: NamedGroup,
}

impl ActiveKeyExchange for EcdhActive {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, TlsError> {
        let peer = agreement::UnparsedPublicKey::new(self.alg, peer_pub_key);
        agreement::agree(&self.key, peer, INVALID_KEY_SHARE, |s| Ok(SharedSecret::from(s)))
    }

    fn pub_key(&self) -> &[u8] {
        &self.public
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        None
    }

    fn group(&self) -> NamedGroup {
        self.group
    }
}

/// The timed wrapper of `inner` with `component`, made once per (group, strategy) and
/// shared: rustls wants `&'static` groups, so each distinct wrapper is allocated once for the
/// life of the process (at most 12 groups × 3 strategies).
pub(crate) fn timed(inner: &'static dyn SupportedKxGroup, component: Component) -> &'static dyn SupportedKxGroup {
    use std::sync::Mutex;
    static MADE: Mutex<Vec<&'static Timed>> = Mutex::new(Vec::new());
    let mut made = match MADE.lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(t) = made.iter().find(|t| t.inner.name() == inner.name() && t.component == component) {
        return *t;
    }
    let t: &'static Timed = Box::leak(Box::new(Timed { inner, component }));
    made.push(t);
    t
}

/// Hybrids with the ECDH part first in both shares and shared secret = ECDH secret ‖ ML-KEM
/// secret: SecP384r1MLKEM1024 (0x11ED, draft-ietf-tls-ecdhe-mlkem). The OQS hybrids
/// (x25519_mlkem512, p256_mlkem512, the FrodoKEM ones) come from crates/pqtls-oqs.
pub(crate) static SECP384R1MLKEM1024: &dyn SupportedKxGroup =
    &EcdhMlKem { ecdh: &agreement::ECDH_P384, kem: &kem::ML_KEM_1024, code_point: 0x11ED };

#[derive(Debug)]
struct EcdhMlKem {
    ecdh: &'static agreement::Algorithm,
    kem: &'static kem::Algorithm<kem::AlgorithmId>,
    /// rustls decodes known code points to named variants: compare through `From<u16>`.
    code_point: u16,
}

impl SupportedKxGroup for EcdhMlKem {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, TlsError> {
        let failed = || TlsError::General("hybrid key generation failed".into());
        let key = agreement::PrivateKey::generate(self.ecdh).map_err(|_| failed())?;
        let mut share = key.compute_public_key().map_err(|_| failed())?.as_ref().to_vec();
        let ecdh_len = share.len();
        let decaps = kem::DecapsulationKey::generate(self.kem).map_err(|_| failed())?;
        let ek = decaps.encapsulation_key().and_then(|k| k.key_bytes().map(|b| b.as_ref().to_vec()));
        share.extend_from_slice(&ek.map_err(|_| failed())?);
        Ok(Box::new(EcdhMlKemActive { key, decaps, share, ecdh_len, ecdh: self.ecdh, group: self.name() }))
    }

    fn start_and_complete(&self, client_share: &[u8]) -> Result<CompletedKeyExchange, TlsError> {
        let ecdh_len = ecdh_share_len(self.ecdh);
        if client_share.len() <= ecdh_len {
            return Err(INVALID_KEY_SHARE);
        }
        let (peer_ecdh, peer_ek) = client_share.split_at(ecdh_len);
        let key = agreement::PrivateKey::generate(self.ecdh).map_err(|_| INVALID_KEY_SHARE)?;
        let mut share = key.compute_public_key().map_err(|_| INVALID_KEY_SHARE)?.as_ref().to_vec();
        let mut secret =
            agreement::agree(&key, agreement::UnparsedPublicKey::new(self.ecdh, peer_ecdh), INVALID_KEY_SHARE, |s| {
                Ok(s.to_vec())
            })?;
        let ek = kem::EncapsulationKey::new(self.kem, peer_ek).map_err(|_| INVALID_KEY_SHARE)?;
        let (ct, ss) = ek.encapsulate().map_err(|_| INVALID_KEY_SHARE)?;
        share.extend_from_slice(ct.as_ref());
        secret.extend_from_slice(ss.as_ref());
        Ok(CompletedKeyExchange { group: self.name(), pub_key: share, secret: SharedSecret::from(secret) })
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        None
    }

    fn name(&self) -> NamedGroup {
        NamedGroup::from(self.code_point)
    }
}

fn ecdh_share_len(alg: &'static agreement::Algorithm) -> usize {
    if alg == &agreement::X25519 {
        32
    } else if alg == &agreement::ECDH_P384 {
        97
    } else {
        65
    }
}

struct EcdhMlKemActive {
    key: agreement::PrivateKey,
    decaps: kem::DecapsulationKey<kem::AlgorithmId>,
    share: Vec<u8>,
    ecdh_len: usize,
    ecdh: &'static agreement::Algorithm,
    group: NamedGroup,
}

impl ActiveKeyExchange for EcdhMlKemActive {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, TlsError> {
        if peer_pub_key.len() <= self.ecdh_len {
            return Err(INVALID_KEY_SHARE);
        }
        let (peer_ecdh, ct) = peer_pub_key.split_at(self.ecdh_len);
        let mut secret = agreement::agree(
            &self.key,
            agreement::UnparsedPublicKey::new(self.ecdh, peer_ecdh),
            INVALID_KEY_SHARE,
            |s| Ok(s.to_vec()),
        )?;
        let ss = self.decaps.decapsulate(ct.into()).map_err(|_| INVALID_KEY_SHARE)?;
        secret.extend_from_slice(ss.as_ref());
        Ok(SharedSecret::from(secret))
    }

    fn pub_key(&self) -> &[u8] {
        &self.share
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        None
    }

    fn group(&self) -> NamedGroup {
        self.group
    }
}
