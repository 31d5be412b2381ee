//! The one implementation of composed key exchanges for the rustls backend: every group that
//! the catalogue describes as ECDH (X25519, P-256/384/521), ML-KEM (aws-lc-rs), FrodoKEM-640-AES
//! (liboqs), or a hybrid of two of them — FrodoKEM and the OQS hybrids with the OQS code points,
//! MLKEM512, secp521r1 and SecP384r1MLKEM1024 with IANA's.
//!
//! Every component — Diffie-Hellman included — is seen as a KEM with a fixed public-key and
//! ciphertext length (for ECDH the "ciphertext" is the server's ephemeral public key), and a
//! group is the catalogue's ordered list of components: the key shares are the components'
//! shares concatenated in that order, and so is the shared secret.

use aws_lc_rs::{agreement, kem};
use pqtls_core::catalogue::{self, GroupKind};
use pqtls_core::Error;
use rustls::crypto::{ActiveKeyExchange, CompletedKeyExchange, SharedSecret, SupportedKxGroup};
use rustls::ffdhe_groups::FfdheGroup;
use rustls::{Error as TlsError, NamedGroup, PeerMisbehaved};
use std::fmt;
use std::sync::{Mutex, OnceLock};

const INVALID_KEY_SHARE: TlsError = TlsError::PeerMisbehaved(PeerMisbehaved::InvalidKeyShare);

/// One component of a group, seen as a KEM.
trait Component: Send + Sync {
    /// Bytes of this component's client share (public key).
    fn public_key_len(&self) -> usize;
    /// Bytes of this component's server share (ciphertext, or ephemeral public key).
    fn ciphertext_len(&self) -> usize;
    /// Client side: a fresh key pair.
    fn keygen(&self) -> Result<(Vec<u8>, Box<dyn Decapsulator>), TlsError>;
    /// Server side: encapsulates to the client's share, returning (server share, secret).
    fn encapsulate(&self, public_key: &[u8]) -> Result<(Vec<u8>, Vec<u8>), TlsError>;
    fn name(&self) -> &'static str;
}

/// The client's secret half of one component.
trait Decapsulator: Send + Sync {
    fn decapsulate(self: Box<Self>, ciphertext: &[u8]) -> Result<Vec<u8>, TlsError>;
}

// ---------------------------------------------------------------- ECDH (aws-lc-rs)

struct Ecdh {
    alg: &'static agreement::Algorithm,
    /// Bytes of a public key on the wire (X25519: 32; NIST curves: uncompressed point).
    share_len: usize,
    name: &'static str,
}

struct EcdhSecret {
    alg: &'static agreement::Algorithm,
    key: agreement::PrivateKey,
}

fn agree(alg: &'static agreement::Algorithm, key: &agreement::PrivateKey, peer: &[u8]) -> Result<Vec<u8>, TlsError> {
    let peer = agreement::UnparsedPublicKey::new(alg, peer);
    agreement::agree(key, peer, INVALID_KEY_SHARE, |secret| Ok(secret.to_vec()))
}

impl Ecdh {
    fn generate(&self) -> Result<(Vec<u8>, agreement::PrivateKey), TlsError> {
        let key = agreement::PrivateKey::generate(self.alg)
            .map_err(|_| TlsError::General(format!("{} key generation failed", self.name)))?;
        let public =
            key.compute_public_key().map_err(|_| TlsError::General(format!("{} public key failed", self.name)))?;
        Ok((public.as_ref().to_vec(), key))
    }
}

impl Component for Ecdh {
    fn public_key_len(&self) -> usize {
        self.share_len
    }
    fn ciphertext_len(&self) -> usize {
        self.share_len
    }
    fn keygen(&self) -> Result<(Vec<u8>, Box<dyn Decapsulator>), TlsError> {
        let (public, key) = self.generate()?;
        Ok((public, Box::new(EcdhSecret { alg: self.alg, key })))
    }
    fn encapsulate(&self, public_key: &[u8]) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        if public_key.len() != self.share_len {
            return Err(INVALID_KEY_SHARE);
        }
        let (public, key) = self.generate()?;
        let secret = agree(self.alg, &key, public_key)?;
        Ok((public, secret))
    }
    fn name(&self) -> &'static str {
        self.name
    }
}

impl Decapsulator for EcdhSecret {
    fn decapsulate(self: Box<Self>, ciphertext: &[u8]) -> Result<Vec<u8>, TlsError> {
        agree(self.alg, &self.key, ciphertext)
    }
}

static X25519: Ecdh = Ecdh { alg: &agreement::X25519, share_len: 32, name: "X25519" };
static P256: Ecdh = Ecdh { alg: &agreement::ECDH_P256, share_len: 65, name: "P-256" };
static P384: Ecdh = Ecdh { alg: &agreement::ECDH_P384, share_len: 97, name: "P-384" };
static P521: Ecdh = Ecdh { alg: &agreement::ECDH_P521, share_len: 133, name: "P-521" };

// ---------------------------------------------------------------- ML-KEM (aws-lc-rs)

struct MlKem {
    alg: &'static kem::Algorithm<kem::AlgorithmId>,
    public_key_len: usize,
    ciphertext_len: usize,
    name: &'static str,
}

struct MlKemSecret(kem::DecapsulationKey<kem::AlgorithmId>);

impl Component for MlKem {
    fn public_key_len(&self) -> usize {
        self.public_key_len
    }
    fn ciphertext_len(&self) -> usize {
        self.ciphertext_len
    }
    fn keygen(&self) -> Result<(Vec<u8>, Box<dyn Decapsulator>), TlsError> {
        let dk = kem::DecapsulationKey::generate(self.alg)
            .map_err(|_| TlsError::General(format!("{} key generation failed", self.name)))?;
        let ek = dk
            .encapsulation_key()
            .and_then(|k| k.key_bytes().map(|b| b.as_ref().to_vec()))
            .map_err(|_| TlsError::General(format!("{} encapsulation key export failed", self.name)))?;
        Ok((ek, Box::new(MlKemSecret(dk))))
    }
    fn encapsulate(&self, public_key: &[u8]) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        let ek = kem::EncapsulationKey::new(self.alg, public_key).map_err(|_| INVALID_KEY_SHARE)?;
        let (ct, ss) = ek.encapsulate().map_err(|_| INVALID_KEY_SHARE)?;
        Ok((ct.as_ref().to_vec(), ss.as_ref().to_vec()))
    }
    fn name(&self) -> &'static str {
        self.name
    }
}

impl Decapsulator for MlKemSecret {
    fn decapsulate(self: Box<Self>, ciphertext: &[u8]) -> Result<Vec<u8>, TlsError> {
        let ss = self.0.decapsulate(ciphertext.into()).map_err(|_| INVALID_KEY_SHARE)?;
        Ok(ss.as_ref().to_vec())
    }
}

static MLKEM512: MlKem = MlKem { alg: &kem::ML_KEM_512, public_key_len: 800, ciphertext_len: 768, name: "ML-KEM-512" };
static MLKEM768: MlKem =
    MlKem { alg: &kem::ML_KEM_768, public_key_len: 1184, ciphertext_len: 1088, name: "ML-KEM-768" };
static MLKEM1024: MlKem =
    MlKem { alg: &kem::ML_KEM_1024, public_key_len: 1568, ciphertext_len: 1568, name: "ML-KEM-1024" };

// ---------------------------------------------------------------- liboqs KEMs

/// A KEM from liboqs.
struct Oqs {
    alg: oqs::kem::Algorithm,
    public_key_len: usize,
    ciphertext_len: usize,
    name: &'static str,
    kem: OnceLock<Option<oqs::kem::Kem>>,
}

impl Oqs {
    fn kem(&self) -> Result<&oqs::kem::Kem, TlsError> {
        self.kem
            .get_or_init(|| {
                oqs::init();
                oqs::kem::Kem::new(self.alg).ok()
            })
            .as_ref()
            .ok_or_else(|| TlsError::General(format!("liboqs has no {}", self.name)))
    }
}

struct OqsSecret {
    kem: &'static Oqs,
    secret_key: oqs::kem::SecretKey,
}

impl Component for &'static Oqs {
    fn public_key_len(&self) -> usize {
        self.public_key_len
    }
    fn ciphertext_len(&self) -> usize {
        self.ciphertext_len
    }
    fn keygen(&self) -> Result<(Vec<u8>, Box<dyn Decapsulator>), TlsError> {
        let (pk, sk) =
            self.kem()?.keypair().map_err(|e| TlsError::General(format!("{} key generation: {e}", self.name)))?;
        Ok((pk.into_vec(), Box::new(OqsSecret { kem: self, secret_key: sk })))
    }
    fn encapsulate(&self, public_key: &[u8]) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        let kem = self.kem()?;
        let pk = kem.public_key_from_bytes(public_key).ok_or(INVALID_KEY_SHARE)?;
        let (ct, ss) = kem.encapsulate(pk).map_err(|_| INVALID_KEY_SHARE)?;
        Ok((ct.into_vec(), ss.into_vec()))
    }
    fn name(&self) -> &'static str {
        self.name
    }
}

impl Decapsulator for OqsSecret {
    fn decapsulate(self: Box<Self>, ciphertext: &[u8]) -> Result<Vec<u8>, TlsError> {
        let kem = self.kem.kem()?;
        let ct = kem.ciphertext_from_bytes(ciphertext).ok_or(INVALID_KEY_SHARE)?;
        let ss = kem.decapsulate(&self.secret_key, ct).map_err(|_| INVALID_KEY_SHARE)?;
        Ok(ss.into_vec())
    }
}

static FRODO640AES_KEM: Oqs = Oqs {
    alg: oqs::kem::Algorithm::FrodoKem640Aes,
    public_key_len: 9616,
    ciphertext_len: 9720,
    name: "FrodoKEM-640-AES",
    kem: OnceLock::new(),
};
static FRODO640AES_PART: &Oqs = &FRODO640AES_KEM;

// ---------------------------------------------------------------- groups

/// The implementation of one catalogue group (canonical name) that is not a hybrid.
fn component(name: &str) -> Result<&'static dyn Component, Error> {
    Ok(match name {
        "x25519" => &X25519,
        "secp256r1" => &P256,
        "secp384r1" => &P384,
        "secp521r1" => &P521,
        "MLKEM512" => &MLKEM512,
        "MLKEM768" => &MLKEM768,
        "MLKEM1024" => &MLKEM1024,
        "frodo640aes" => &FRODO640AES_PART,
        other => {
            return Err(Error::Unsupported(format!(
                "pqtls-oqs has no implementation of the key exchange '{other}'; it composes {}",
                COMPONENTS.join(", ")
            )))
        }
    })
}

/// The catalogue groups [`component`] implements.
const COMPONENTS: [&str; 8] =
    ["x25519", "secp256r1", "secp384r1", "secp521r1", "MLKEM512", "MLKEM768", "MLKEM1024", "frodo640aes"];

/// A TLS group made of one or more components, in wire order.
pub struct Group {
    name: NamedGroup,
    label: &'static str,
    parts: Vec<&'static dyn Component>,
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = self.parts.iter().map(|p| p.name()).collect();
        f.debug_struct("Group").field("name", &self.label).field("parts", &parts).finish()
    }
}

impl Group {
    /// The group described by the catalogue entry `g` (its parts and their wire order), with
    /// TLS code point `code_point`. Key shares are the parts' shares concatenated in wire
    /// order, and so is the shared secret (draft-ietf-tls-hybrid-design; which part comes
    /// first is the catalogue's: oqs-provider's x25519_mlkem512 puts ML-KEM first).
    fn describe(g: &'static catalogue::Group, code_point: u16) -> Result<Group, Error> {
        let parts = match g.kind {
            GroupKind::Hybrid { first, second } => vec![component(first)?, component(second)?],
            GroupKind::Classical { .. } | GroupKind::Kem { .. } => vec![component(g.name)?],
        };
        let group = Group { name: NamedGroup::from(code_point), label: g.name, parts };
        if (group.client_share_len(), group.server_share_len()) != (g.client_share_bytes(), g.server_share_bytes()) {
            return Err(Error::Other(format!(
                "{}: the implementation's shares ({}/{} bytes) differ from the catalogue's ({}/{})",
                g.name,
                group.client_share_len(),
                group.server_share_len(),
                g.client_share_bytes(),
                g.server_share_bytes()
            )));
        }
        Ok(group)
    }

    /// The client share length (sum of the components' public keys).
    pub fn client_share_len(&self) -> usize {
        self.parts.iter().map(|p| p.public_key_len()).sum()
    }

    /// The server share length (sum of the components' ciphertexts).
    pub fn server_share_len(&self) -> usize {
        self.parts.iter().map(|p| p.ciphertext_len()).sum()
    }

    /// The catalogue name of the group (`x25519_mlkem512`).
    pub fn label(&self) -> &'static str {
        self.label
    }

    /// Splits `share` into the components' pieces, given each piece's length.
    fn split<'a>(&self, share: &'a [u8], len: impl Fn(&dyn Component) -> usize) -> Result<Vec<&'a [u8]>, TlsError> {
        let total: usize = self.parts.iter().map(|p| len(*p)).sum();
        if share.len() != total {
            return Err(INVALID_KEY_SHARE);
        }
        let mut rest = share;
        let mut out = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            let (head, tail) = rest.split_at(len(*p));
            out.push(head);
            rest = tail;
        }
        Ok(out)
    }
}

impl SupportedKxGroup for Group {
    fn start(&self) -> Result<Box<dyn ActiveKeyExchange>, TlsError> {
        let mut public = Vec::with_capacity(self.client_share_len());
        let mut secrets = Vec::with_capacity(self.parts.len());
        for p in &self.parts {
            let (pk, sk) = p.keygen()?;
            public.extend_from_slice(&pk);
            secrets.push(sk);
        }
        Ok(Box::new(Active { group: self.name, parts: self.parts.clone(), public, secrets }))
    }

    fn start_and_complete(&self, peer_pub_key: &[u8]) -> Result<CompletedKeyExchange, TlsError> {
        let pieces = self.split(peer_pub_key, |p| p.public_key_len())?;
        let mut pub_key = Vec::with_capacity(self.server_share_len());
        let mut secret = Vec::new();
        for (p, piece) in self.parts.iter().zip(pieces) {
            let (ct, ss) = p.encapsulate(piece)?;
            pub_key.extend_from_slice(&ct);
            secret.extend_from_slice(&ss);
        }
        Ok(CompletedKeyExchange { group: self.name, pub_key, secret: SharedSecret::from(secret) })
    }

    fn ffdhe_group(&self) -> Option<FfdheGroup<'static>> {
        None
    }

    fn name(&self) -> NamedGroup {
        self.name
    }
}

struct Active {
    group: NamedGroup,
    parts: Vec<&'static dyn Component>,
    public: Vec<u8>,
    secrets: Vec<Box<dyn Decapsulator>>,
}

impl ActiveKeyExchange for Active {
    fn complete(self: Box<Self>, peer_pub_key: &[u8]) -> Result<SharedSecret, TlsError> {
        let total: usize = self.parts.iter().map(|p| p.ciphertext_len()).sum();
        if peer_pub_key.len() != total {
            return Err(INVALID_KEY_SHARE);
        }
        let mut rest = peer_pub_key;
        let mut secret = Vec::new();
        for (p, sk) in self.parts.iter().zip(self.secrets) {
            let (head, tail) = rest.split_at(p.ciphertext_len());
            secret.extend_from_slice(&sk.decapsulate(head)?);
            rest = tail;
        }
        Ok(SharedSecret::from(secret))
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

/// The rustls group for the catalogue entry `g` sent with TLS code point `code_point`
/// (the catalogue's, or a run's override): every composition of ECDH (X25519, P-256/384/521),
/// ML-KEM (aws-lc-rs) and FrodoKEM-640-AES (liboqs) that the catalogue describes.
///
/// rustls wants `&'static` groups, so each distinct (group, code point) is made once and
/// kept for the life of the process: an immutable, pure algorithm object, not configuration.
pub fn group(g: &'static catalogue::Group, code_point: u16) -> Result<&'static dyn SupportedKxGroup, Error> {
    static MADE: Mutex<Vec<&'static Group>> = Mutex::new(Vec::new());
    let mut made = match MADE.lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    if let Some(found) = made.iter().find(|m| m.label == g.name && u16::from(m.name) == code_point) {
        return Ok(*found);
    }
    let made_now: &'static Group = Box::leak(Box::new(Group::describe(g, code_point)?));
    made.push(made_now);
    Ok(made_now)
}

/// The catalogue groups this crate composes for rustls (ECDH and ML-KEM parts from aws-lc-rs,
/// FrodoKEM from liboqs): every group whose parts are in [`COMPONENTS`].
pub fn composable() -> Vec<&'static catalogue::Group> {
    catalogue::GROUPS
        .iter()
        .filter(|g| match g.kind {
            GroupKind::Hybrid { first, second } => COMPONENTS.contains(&first) && COMPONENTS.contains(&second),
            _ => COMPONENTS.contains(&g.name),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all() -> Vec<(&'static catalogue::Group, &'static dyn SupportedKxGroup)> {
        composable().into_iter().map(|g| (g, group(g, g.code_point).expect("group"))).collect()
    }

    #[test]
    fn the_groups_composed_here() {
        let names: Vec<&str> = composable().iter().map(|g| g.name).collect();
        for n in [
            "frodo640aes",
            "x25519_frodo640aes",
            "x25519_mlkem512",
            "p256_mlkem512",
            "MLKEM512",
            "secp521r1",
            "SecP384r1MLKEM1024",
        ] {
            assert!(names.contains(&n), "{n} in {names:?}");
        }
    }

    #[test]
    fn both_sides_agree_and_sizes_match_the_catalogue() {
        for (g, imp) in all() {
            let client = imp.start().expect("start");
            assert_eq!(client.pub_key().len(), g.client_share_bytes(), "{}", g.name);
            let server = imp.start_and_complete(client.pub_key()).expect("encapsulate");
            assert_eq!(server.pub_key.len(), g.server_share_bytes(), "{}", g.name);
            let secret = client.complete(&server.pub_key).expect("decapsulate");
            assert_eq!(secret.secret_bytes(), server.secret.secret_bytes(), "{}", g.name);
            assert_eq!(u16::from(imp.name()), g.code_point, "{}", g.name);
        }
    }

    #[test]
    fn a_code_point_is_part_of_the_group() {
        let frodo = catalogue::group("frodo640aes").unwrap();
        let moved = group(frodo, 0xFE23).unwrap();
        assert_eq!(u16::from(moved.name()), 0xFE23);
        assert_eq!(u16::from(group(frodo, 0xFE00).unwrap().name()), 0xFE00);
        // Made once per (group, code point).
        assert!(std::ptr::eq(
            group(frodo, 0xFE23).unwrap() as *const dyn SupportedKxGroup as *const u8,
            moved as *const dyn SupportedKxGroup as *const u8
        ));
    }

    #[test]
    fn hybrid_secret_is_in_wire_order() {
        // Secrets concatenated in the catalogue's wire order (FrodoKEM-640: 16 bytes, ML-KEM: 32).
        for (name, len) in
            [("x25519_frodo640aes", 32 + 16), ("x25519_mlkem512", 32 + 32), ("SecP384r1MLKEM1024", 48 + 32)]
        {
            let g = catalogue::group(name).unwrap();
            let imp = group(g, g.code_point).unwrap();
            let client = imp.start().expect("start");
            let server = imp.start_and_complete(client.pub_key()).expect("encapsulate");
            assert_eq!(server.secret.secret_bytes().len(), len, "{name}");
        }
    }

    #[test]
    fn groups_nobody_composes_are_errors() {
        for name in ["x448", "ffdhe2048"] {
            let g = catalogue::group(name).unwrap();
            let e = group(g, g.code_point).unwrap_err().to_string();
            assert!(e.contains(name) && e.contains("frodo640aes"), "{e}");
        }
    }

    #[test]
    fn bad_shares_are_errors_not_panics() {
        for (g, imp) in all() {
            let (client_len, server_len) = (g.client_share_bytes(), g.server_share_bytes());
            for len in [0, 1, client_len - 1, client_len + 1] {
                assert!(imp.start_and_complete(&vec![0u8; len]).is_err(), "{} client share of {len}", g.name);
            }
            for len in [0, server_len - 1, server_len + 1] {
                let client = imp.start().expect("start");
                assert!(client.complete(&vec![0u8; len]).is_err(), "{} server share of {len}", g.name);
            }
        }
    }
}
