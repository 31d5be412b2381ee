//! Key-exchange groups: rustls' own aws-lc-rs groups, and every other group the catalogue
//! describes composed by pqtls-oqs (the one implementation of ECDH/ML-KEM/FrodoKEM
//! compositions: MLKEM512, secp521r1, SecP384r1MLKEM1024, the OQS groups), each wrapped so
//! that key generation, encapsulation and decapsulation are timed, and so that the client's
//! key-share strategy can be chosen.

use crate::hooks::{op, with_current};
use pqtls_core::catalogue::{self, CodepointOverrides, Stack};
use pqtls_core::Error;
use rustls::crypto::aws_lc_rs::kx_group;
use rustls::crypto::{ActiveKeyExchange, CompletedKeyExchange, SharedSecret, SupportedKxGroup};
use rustls::ffdhe_groups::FfdheGroup;
use rustls::{Error as TlsError, NamedGroup};

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

/// The implementation of catalogue group `g` in this run: rustls' own group where rustls has
/// one (IANA code points, which cannot be moved), else pqtls-oqs' composition with the run's
/// code point for it.
pub(crate) fn implementation(
    g: &'static catalogue::Group,
    codepoints: &CodepointOverrides,
) -> pqtls_core::Result<&'static dyn SupportedKxGroup> {
    let native: [&'static dyn SupportedKxGroup; 7] = [
        kx_group::X25519,
        kx_group::SECP256R1,
        kx_group::SECP384R1,
        kx_group::X25519MLKEM768,
        kx_group::SECP256R1MLKEM768,
        kx_group::MLKEM768,
        kx_group::MLKEM1024,
    ];
    if let Some(found) = native.into_iter().find(|n| u16::from(n.name()) == g.code_point) {
        return Ok(found);
    }
    pqtls_oqs::group(g, codepoints.group_code_point(g)).map_err(|e| {
        Error::Unsupported(format!(
            "group {} is not implemented by the rustls backend ({e}); stacks that have it: {}",
            g.name,
            g.stacks.iter().filter(|s| **s != Stack::Rustls).map(|s| s.name()).collect::<Vec<_>>().join(", ")
        ))
    })
}

impl SupportedKxGroup for Timed {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, TlsError> {
        with_current(|h| h.kx_starts += 1);
        op("kx_keygen", || {
            let inner = self.inner.start()?;
            let independent = match (self.component, inner.hybrid_component()) {
                (Component::Independent, Some((g, _))) => {
                    let classical = catalogue::group_by_code_point(u16::from(g))
                        .and_then(|c| implementation(c, &CodepointOverrides::none()).ok())
                        .ok_or_else(|| TlsError::General(format!("no classical group {g:?}")))?;
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
    if let Some(t) = made.iter().find(|t| std::ptr::addr_eq(t.inner, inner) && t.component == component) {
        return *t;
    }
    let t: &'static Timed = Box::leak(Box::new(Timed { inner, component }));
    made.push(t);
    t
}
