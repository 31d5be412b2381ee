//! Key-exchange groups with the OQS code points: FrodoKEM-640-AES (liboqs) alone and with
//! X25519, and the OQS-style hybrids X25519 + ML-KEM-512 and P-256 + ML-KEM-512 (aws-lc-rs).
//!
//! Every component — Diffie-Hellman included — is seen as a KEM with a fixed public-key and
//! ciphertext length (for X25519/P-256 the "ciphertext" is the server's ephemeral public key),
//! and a group is an ordered list of components: the key shares are the components' shares
//! concatenated in that order, and so is the shared secret (OQS provider convention: the
//! classical part first for these OQS hybrids).

use aws_lc_rs::{agreement, kem};
use rustls::crypto::{ActiveKeyExchange, CompletedKeyExchange, SharedSecret, SupportedKxGroup};
use rustls::ffdhe_groups::FfdheGroup;
use rustls::{Error as TlsError, NamedGroup, PeerMisbehaved};
use std::fmt;
use std::sync::OnceLock;

const INVALID_KEY_SHARE: TlsError = TlsError::PeerMisbehaved(PeerMisbehaved::InvalidKeyShare);

fn general(what: &str) -> TlsError {
    TlsError::General(what.to_string())
}

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
        let key = agreement::PrivateKey::generate(self.alg).map_err(|_| general("ECDH key generation failed"))?;
        let public = key.compute_public_key().map_err(|_| general("ECDH public key failed"))?;
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

// ---------------------------------------------------------------- ML-KEM-512 (aws-lc-rs)

struct MlKem512;

struct MlKemSecret(kem::DecapsulationKey<kem::AlgorithmId>);

impl Component for MlKem512 {
    fn public_key_len(&self) -> usize {
        800
    }
    fn ciphertext_len(&self) -> usize {
        768
    }
    fn keygen(&self) -> Result<(Vec<u8>, Box<dyn Decapsulator>), TlsError> {
        let dk = kem::DecapsulationKey::generate(&kem::ML_KEM_512)
            .map_err(|_| general("ML-KEM-512 key generation failed"))?;
        let ek = dk
            .encapsulation_key()
            .and_then(|k| k.key_bytes().map(|b| b.as_ref().to_vec()))
            .map_err(|_| general("ML-KEM-512 encapsulation key export failed"))?;
        Ok((ek, Box::new(MlKemSecret(dk))))
    }
    fn encapsulate(&self, public_key: &[u8]) -> Result<(Vec<u8>, Vec<u8>), TlsError> {
        let ek = kem::EncapsulationKey::new(&kem::ML_KEM_512, public_key).map_err(|_| INVALID_KEY_SHARE)?;
        let (ct, ss) = ek.encapsulate().map_err(|_| INVALID_KEY_SHARE)?;
        Ok((ct.as_ref().to_vec(), ss.as_ref().to_vec()))
    }
    fn name(&self) -> &'static str {
        "ML-KEM-512"
    }
}

impl Decapsulator for MlKemSecret {
    fn decapsulate(self: Box<Self>, ciphertext: &[u8]) -> Result<Vec<u8>, TlsError> {
        let ss = self.0.decapsulate(ciphertext.into()).map_err(|_| INVALID_KEY_SHARE)?;
        Ok(ss.as_ref().to_vec())
    }
}

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

/// A TLS group made of one or more components, in wire order.
pub struct Group {
    name: NamedGroup,
    label: &'static str,
    parts: &'static [&'static dyn Component],
}

impl fmt::Debug for Group {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<&str> = self.parts.iter().map(|p| p.name()).collect();
        f.debug_struct("Group").field("name", &self.label).field("parts", &parts).finish()
    }
}

impl Group {
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
        for p in self.parts {
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
        for p in self.parts {
            let (pk, sk) = p.keygen()?;
            public.extend_from_slice(&pk);
            secrets.push(sk);
        }
        Ok(Box::new(Active { group: self.name, parts: self.parts, public, secrets }))
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
    parts: &'static [&'static dyn Component],
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

static FRODO640AES_GROUP: Group =
    Group { name: NamedGroup::Unknown(0xFE23), label: "frodo640aes", parts: &[&FRODO640AES_PART as &dyn Component] };
static X25519_FRODO640AES_GROUP: Group = Group {
    name: NamedGroup::Unknown(0xFE25),
    label: "x25519_frodo640aes",
    parts: &[&X25519 as &dyn Component, &FRODO640AES_PART as &dyn Component],
};
static X25519_MLKEM512_GROUP: Group = Group {
    name: NamedGroup::Unknown(0x2FB6),
    label: "x25519_mlkem512",
    parts: &[&X25519 as &dyn Component, &MlKem512 as &dyn Component],
};
static P256_MLKEM512_GROUP: Group = Group {
    name: NamedGroup::Unknown(0x2F4B),
    label: "p256_mlkem512",
    parts: &[&P256 as &dyn Component, &MlKem512 as &dyn Component],
};

/// FrodoKEM-640-AES (liboqs), OQS code point 0xFE23: client share 9616 B, server share 9720 B.
pub static FRODO640AES: &dyn SupportedKxGroup = &FRODO640AES_GROUP;
/// X25519 then FrodoKEM-640-AES, OQS code point 0xFE25: 32+9616 / 32+9720 B.
pub static X25519_FRODO640AES: &dyn SupportedKxGroup = &X25519_FRODO640AES_GROUP;
/// X25519 then ML-KEM-512 (aws-lc-rs), OQS code point 0x2FB6: 32+800 / 32+768 B.
pub static X25519_MLKEM512: &dyn SupportedKxGroup = &X25519_MLKEM512_GROUP;
/// P-256 (uncompressed point) then ML-KEM-512, OQS code point 0x2F4B: 65+800 / 65+768 B.
pub static P256_MLKEM512: &dyn SupportedKxGroup = &P256_MLKEM512_GROUP;

/// Every group of this crate, with its catalogue name.
pub fn all_groups() -> [(&'static str, &'static dyn SupportedKxGroup); 4] {
    [
        ("frodo640aes", FRODO640AES),
        ("x25519_frodo640aes", X25519_FRODO640AES),
        ("x25519_mlkem512", X25519_MLKEM512),
        ("p256_mlkem512", P256_MLKEM512),
    ]
}

/// The group of this crate with TLS code point `code_point`, if any.
pub fn kx_group(code_point: u16) -> Option<&'static dyn SupportedKxGroup> {
    all_groups().into_iter().map(|(_, g)| g).find(|g| u16::from(g.name()) == code_point)
}

/// Client and server share lengths of one of this crate's groups (by code point).
pub fn share_lengths(code_point: u16) -> Option<(usize, usize)> {
    [&FRODO640AES_GROUP, &X25519_FRODO640AES_GROUP, &X25519_MLKEM512_GROUP, &P256_MLKEM512_GROUP]
        .into_iter()
        .find(|g| u16::from(g.name) == code_point)
        .map(|g| (g.client_share_len(), g.server_share_len()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_sides_agree_and_sizes_match() {
        for (name, group) in all_groups() {
            let (client_len, server_len) = share_lengths(u16::from(group.name())).expect("lengths");
            let client = group.start().expect("start");
            assert_eq!(client.pub_key().len(), client_len, "{name}");
            let server = group.start_and_complete(client.pub_key()).expect("encapsulate");
            assert_eq!(server.pub_key.len(), server_len, "{name}");
            let secret = client.complete(&server.pub_key).expect("decapsulate");
            assert_eq!(secret.secret_bytes(), server.secret.secret_bytes(), "{name}");
        }
        assert_eq!(share_lengths(0xFE23), Some((9616, 9720)));
        assert_eq!(share_lengths(0x2FB6), Some((832, 800)));
        assert_eq!(share_lengths(0x2F4B), Some((865, 833)));
    }

    #[test]
    fn hybrid_secret_is_classical_then_kem() {
        // 32-byte X25519 secret followed by the 16-byte FrodoKEM-640 / 32-byte ML-KEM secret.
        let client = X25519_FRODO640AES.start().expect("start");
        let server = X25519_FRODO640AES.start_and_complete(client.pub_key()).expect("encapsulate");
        assert_eq!(server.secret.secret_bytes().len(), 32 + 16);
        let client = X25519_MLKEM512.start().expect("start");
        let server = X25519_MLKEM512.start_and_complete(client.pub_key()).expect("encapsulate");
        assert_eq!(server.secret.secret_bytes().len(), 32 + 32);
    }

    #[test]
    fn bad_shares_are_errors_not_panics() {
        for (name, group) in all_groups() {
            let (client_len, server_len) = share_lengths(u16::from(group.name())).expect("lengths");
            for len in [0, 1, client_len - 1, client_len + 1] {
                assert!(group.start_and_complete(&vec![0u8; len]).is_err(), "{name} client share of {len}");
            }
            for len in [0, server_len - 1, server_len + 1] {
                let client = group.start().expect("start");
                assert!(client.complete(&vec![0u8; len]).is_err(), "{name} server share of {len}");
            }
        }
        assert!(kx_group(0x0017).is_none());
    }
}
