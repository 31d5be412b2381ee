//! Signature algorithms for certificates and CertificateVerify: Falcon-512 (liboqs), the
//! composite ML-DSA-44 + Ed25519 (OpenSSL 3.5 for both halves) and pure SLH-DSA (OpenSSL 3.5).

use openssl::hash::MessageDigest;
use openssl::md_ctx::MdCtx;
use openssl::pkey::{Id, PKey, Private, Public};
use pqtls_core::catalogue::{self, CodepointOverrides};
use pqtls_core::{Error, Result};
use rustls::pki_types::{AlgorithmIdentifier, InvalidSignature, SignatureVerificationAlgorithm};
use rustls::sign::{Signer, SigningKey};
use rustls::{SignatureAlgorithm, SignatureScheme};
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

/// Falcon-512 (unpadded) OID of the OQS provider (`falcon512`; `falconpadded512` is .16).
pub const FALCON512_OID: &str = "1.3.9999.3.11";
/// id-MLDSA44-Ed25519-SHA512 of draft-ietf-lamps-pq-composite-sigs (-13; unchanged through -19).
pub const MLDSA44_ED25519_OID: &str = "1.3.6.1.5.5.7.6.39";
/// id-ml-dsa-44 (FIPS 204, NIST CSOR).
const MLDSA44_OID: &str = "2.16.840.1.101.3.4.3.17";

/// falcon512 SignatureScheme (OQS code point).
pub const FALCON512_SCHEME: u16 = 0xFED7;
/// mldsa44_ed25519 SignatureScheme of draft-reddy-tls-composite-mldsa (0x090A; 0x0907 is
/// mldsa44_ecdsa_secp256r1_sha256 there).
pub const MLDSA44_ED25519_SCHEME: u16 = 0x090A;

/// Composite signature domain separation (draft-ietf-lamps-pq-composite-sigs, section 3).
const COMPOSITE_PREFIX: &[u8] = b"CompositeAlgorithmSignatures2025";
const COMPOSITE_LABEL: &[u8] = b"COMPSIG-MLDSA44-Ed25519-SHA512";

const MLDSA44_PK: usize = 1312;
const MLDSA44_SIG: usize = 2420;
const ED25519_PK: usize = 32;
const ED25519_SIG: usize = 64;
const FALCON512_PK: usize = 897;
const FALCON512_SK: usize = 1281;

fn ossl(what: &str) -> impl FnOnce(openssl::error::ErrorStack) -> Error + '_ {
    move |e| Error::Other(format!("OpenSSL: {what}: {e}"))
}

// ---------------------------------------------------------------- algorithms

/// The signature algorithms of this crate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Alg {
    Falcon512,
    MlDsa44Ed25519,
    /// Pure SLH-DSA (FIPS 205), OpenSSL name and OID arc under 2.16.840.1.101.3.4.3.
    SlhDsa {
        name: &'static str,
        arc: u8,
    },
}

const ALGS: [(&str, Alg, u16); 6] = [
    ("falcon512", Alg::Falcon512, FALCON512_SCHEME),
    ("mldsa44_ed25519", Alg::MlDsa44Ed25519, MLDSA44_ED25519_SCHEME),
    ("slhdsa-sha2-128s", Alg::SlhDsa { name: "SLH-DSA-SHA2-128s", arc: 20 }, 0x0911),
    ("slhdsa-sha2-128f", Alg::SlhDsa { name: "SLH-DSA-SHA2-128f", arc: 21 }, 0x0912),
    ("slhdsa-shake-128s", Alg::SlhDsa { name: "SLH-DSA-SHAKE-128s", arc: 26 }, 0x0917),
    ("slhdsa-shake-128f", Alg::SlhDsa { name: "SLH-DSA-SHAKE-128f", arc: 27 }, 0x0918),
];

fn lookup(name: &str) -> Option<(Alg, u16)> {
    ALGS.iter().find(|(n, ..)| *n == name).map(|(_, a, c)| (*a, *c))
}

/// Names (catalogue) of the signature algorithms this crate signs and verifies in TLS.
pub fn tls_algorithms() -> Vec<&'static str> {
    ALGS.iter().map(|(n, ..)| *n).collect()
}

/// The TLS SignatureScheme code point this crate uses for `alg_name`.
pub fn scheme_code_point(alg_name: &str) -> Option<u16> {
    lookup(alg_name).map(|(_, c)| c)
}

fn oid(alg: Alg) -> String {
    match alg {
        Alg::Falcon512 => FALCON512_OID.to_string(),
        Alg::MlDsa44Ed25519 => MLDSA44_ED25519_OID.to_string(),
        Alg::SlhDsa { arc, .. } => format!("2.16.840.1.101.3.4.3.{arc}"),
    }
}

// ---------------------------------------------------------------- liboqs Falcon-512

fn falcon() -> Result<&'static oqs::sig::Sig> {
    static SIG: OnceLock<Option<oqs::sig::Sig>> = OnceLock::new();
    SIG.get_or_init(|| {
        oqs::init();
        oqs::sig::Sig::new(oqs::sig::Algorithm::Falcon512).ok()
    })
    .as_ref()
    .ok_or_else(|| Error::Unsupported("this liboqs build has no Falcon-512".into()))
}

fn falcon_sign(secret_key: &[u8], message: &[u8]) -> Result<Vec<u8>> {
    let sig = falcon()?;
    let sk = sig
        .secret_key_from_bytes(secret_key)
        .ok_or_else(|| Error::Invalid(format!("Falcon-512 secret key of {} bytes", secret_key.len())))?;
    Ok(sig.sign(message, sk).map_err(|e| Error::Other(format!("liboqs Falcon-512 sign: {e}")))?.into_vec())
}

fn falcon_verify(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    let Ok(sig) = falcon() else { return false };
    match (sig.public_key_from_bytes(public_key), sig.signature_from_bytes(signature)) {
        (Some(pk), Some(s)) => sig.verify(message, s, pk).is_ok(),
        _ => false,
    }
}

// ---------------------------------------------------------------- OpenSSL helpers

/// One-shot message signing with no digest (EdDSA, ML-DSA, SLH-DSA), with an optional
/// context string.
fn openssl_sign(key: &PKey<Private>, message: &[u8], context: Option<&[u8]>) -> Result<Vec<u8>> {
    let mut ctx = MdCtx::new().map_err(ossl("EVP_MD_CTX"))?;
    let pctx = ctx.digest_sign_init(None, key).map_err(ossl("sign init"))?;
    if let Some(c) = context {
        pqtls_pki::key::set_octet_param(pctx, c"context-string", c)?;
    }
    let mut sig = Vec::new();
    ctx.digest_sign_to_vec(message, &mut sig).map_err(ossl("sign"))?;
    Ok(sig)
}

fn openssl_verify(key: &PKey<Public>, message: &[u8], signature: &[u8], context: Option<&[u8]>) -> bool {
    let run = || -> Result<bool> {
        let mut ctx = MdCtx::new().map_err(ossl("EVP_MD_CTX"))?;
        let pctx = ctx.digest_verify_init(None, key).map_err(ossl("verify init"))?;
        if let Some(c) = context {
            pqtls_pki::key::set_octet_param(pctx, c"context-string", c)?;
        }
        Ok(ctx.digest_verify(message, signature).unwrap_or(false))
    };
    let ok = run().unwrap_or(false);
    // Leave no error behind in this thread's OpenSSL error queue.
    let _ = openssl::error::ErrorStack::get();
    ok
}

fn public_from_raw(oid: &str, raw: &[u8]) -> Option<PKey<Public>> {
    let spki = pqtls_pki::cert::spki_der(oid, raw).ok()?;
    PKey::public_key_from_der(&spki).ok()
}

// ---------------------------------------------------------------- composite

/// The composite message representative M' = Prefix || Label || len(ctx) || ctx || SHA-512(M),
/// with an empty context.
fn composite_message(message: &[u8]) -> Result<Vec<u8>> {
    let digest = openssl::hash::hash(MessageDigest::sha512(), message).map_err(ossl("SHA-512"))?;
    let mut m = Vec::with_capacity(COMPOSITE_PREFIX.len() + COMPOSITE_LABEL.len() + 1 + digest.len());
    m.extend_from_slice(COMPOSITE_PREFIX);
    m.extend_from_slice(COMPOSITE_LABEL);
    m.push(0);
    m.extend_from_slice(&digest);
    Ok(m)
}

/// An ML-DSA-44 + Ed25519 composite private key: ML-DSA-44 seed xi (32) || Ed25519 key (32),
/// the draft's private key encoding.
struct Composite {
    mldsa: PKey<Private>,
    ed25519: PKey<Private>,
    raw: Vec<u8>,
}

impl Composite {
    fn from_raw(raw: &[u8]) -> Result<Composite> {
        if raw.len() != 64 {
            return Err(Error::Invalid(format!(
                "composite ML-DSA-44+Ed25519 private key of {} bytes, not 64",
                raw.len()
            )));
        }
        let (xi, ed) = raw.split_at(32);
        // PKCS#8 with the seed-only ML-DSA private key: [0] IMPLICIT OCTET STRING (32 bytes).
        let mut der = vec![0x30, 0x34, 0x02, 0x01, 0x00, 0x30, 0x0b, 0x06, 0x09];
        der.extend_from_slice(&[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, 0x11]);
        der.extend_from_slice(&[0x04, 0x22, 0x80, 0x20]);
        der.extend_from_slice(xi);
        let mldsa = PKey::private_key_from_der(&der).map_err(ossl("ML-DSA-44 key from seed"))?;
        let ed25519 = PKey::private_key_from_raw_bytes(ed, Id::ED25519).map_err(ossl("Ed25519 key"))?;
        Ok(Composite { mldsa, ed25519, raw: raw.to_vec() })
    }

    fn public_key(&self) -> Result<Vec<u8>> {
        let spki = self.mldsa.public_key_to_der().map_err(ossl("ML-DSA-44 public key"))?;
        if spki.len() < MLDSA44_PK {
            return Err(Error::Other("short ML-DSA-44 SubjectPublicKeyInfo".into()));
        }
        let mut pk = spki[spki.len() - MLDSA44_PK..].to_vec();
        pk.extend(self.ed25519.raw_public_key().map_err(ossl("Ed25519 public key"))?);
        Ok(pk)
    }

    fn sign(&self, message: &[u8]) -> Result<Vec<u8>> {
        let m = composite_message(message)?;
        let mut sig = openssl_sign(&self.mldsa, &m, Some(COMPOSITE_LABEL))?;
        sig.extend(openssl_sign(&self.ed25519, &m, None)?);
        Ok(sig)
    }
}

fn composite_verify(public_key: &[u8], message: &[u8], signature: &[u8]) -> bool {
    if public_key.len() != MLDSA44_PK + ED25519_PK || signature.len() != MLDSA44_SIG + ED25519_SIG {
        return false;
    }
    let (mldsa_pk, ed_pk) = public_key.split_at(MLDSA44_PK);
    let (mldsa_sig, ed_sig) = signature.split_at(MLDSA44_SIG);
    let (Some(mldsa), Ok(ed)) =
        (public_from_raw(MLDSA44_OID, mldsa_pk), PKey::public_key_from_raw_bytes(ed_pk, Id::ED25519))
    else {
        return false;
    };
    let Ok(m) = composite_message(message) else { return false };
    openssl_verify(&mldsa, &m, mldsa_sig, Some(COMPOSITE_LABEL)) && openssl_verify(&ed, &m, ed_sig, None)
}

// ---------------------------------------------------------------- private keys

/// A private key of one of this crate's algorithms.
enum Key {
    /// liboqs Falcon-512: secret key (1281) and public key (897).
    Falcon {
        sk: Vec<u8>,
        pk: Vec<u8>,
    },
    Composite(Composite),
    SlhDsa(PKey<Private>),
}

impl Key {
    fn sign(&self, message: &[u8]) -> Result<Vec<u8>> {
        match self {
            Key::Falcon { sk, .. } => falcon_sign(sk, message),
            Key::Composite(c) => c.sign(message),
            Key::SlhDsa(k) => openssl_sign(k, message, None),
        }
    }
}

fn oid_der_contents(dotted: &str) -> Result<Vec<u8>> {
    // algorithm_identifier_der gives SEQUENCE { OID }: 30 L 06 L' <contents>.
    let der = pqtls_pki::cert::algorithm_identifier_der(dotted)?;
    der.get(4..).map(<[u8]>::to_vec).ok_or_else(|| Error::Invalid(format!("OID '{dotted}'")))
}

fn load_key(alg: Alg, pkcs8_der: &[u8]) -> Result<Key> {
    let bad = |what: &str| Error::Invalid(format!("{alg:?} private key: {what}"));
    match alg {
        Alg::SlhDsa { .. } => {
            Ok(Key::SlhDsa(PKey::private_key_from_der(pkcs8_der).map_err(ossl("SLH-DSA PKCS#8 private key"))?))
        }
        Alg::Falcon512 | Alg::MlDsa44Ed25519 => {
            let (oid_bytes, key) =
                pqtls_pki::cert::parse_pkcs8(pkcs8_der).ok_or_else(|| bad("not a PKCS#8 PrivateKeyInfo"))?;
            if oid_bytes != oid_der_contents(&oid(alg))? {
                return Err(bad("PKCS#8 algorithm OID does not match"));
            }
            if alg == Alg::Falcon512 {
                // oqs-provider's encoding: the privateKey OCTET STRING holds a second OCTET
                // STRING with secret key || public key (1281 + 897 bytes).
                let key = match pqtls_pki::cert::read_tlv(key) {
                    Some((0x04, inner, [])) => inner,
                    _ => {
                        return Err(bad("expected OCTET STRING { secret key || public key } (oqs-provider's encoding)"))
                    }
                };
                if key.len() != FALCON512_SK + FALCON512_PK {
                    return Err(bad(&format!(
                        "expected secret key || public key ({} bytes), got {} bytes",
                        FALCON512_SK + FALCON512_PK,
                        key.len()
                    )));
                }
                let (sk, pk) = key.split_at(FALCON512_SK);
                Ok(Key::Falcon { sk: sk.to_vec(), pk: pk.to_vec() })
            } else {
                Ok(Key::Composite(Composite::from_raw(key)?))
            }
        }
    }
}

// ---------------------------------------------------------------- rustls signing

struct OqsSigningKey {
    key: Arc<Key>,
    scheme: SignatureScheme,
}

impl fmt::Debug for OqsSigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OqsSigningKey").field("scheme", &self.scheme).finish()
    }
}

impl SigningKey for OqsSigningKey {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn Signer>> {
        offered
            .contains(&self.scheme)
            .then(|| Box::new(OqsSigner { key: self.key.clone(), scheme: self.scheme }) as Box<dyn Signer>)
    }

    fn algorithm(&self) -> SignatureAlgorithm {
        SignatureAlgorithm::Unknown(u16::from(self.scheme) as u8)
    }
}

struct OqsSigner {
    key: Arc<Key>,
    scheme: SignatureScheme,
}

impl fmt::Debug for OqsSigner {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OqsSigner").field("scheme", &self.scheme).finish()
    }
}

impl Signer for OqsSigner {
    fn sign(&self, message: &[u8]) -> std::result::Result<Vec<u8>, rustls::Error> {
        self.key.sign(message).map_err(|e| rustls::Error::General(e.to_string()))
    }

    fn scheme(&self) -> SignatureScheme {
        self.scheme
    }
}

/// A rustls signing key for a leaf of `alg_name` (`falcon512`, `mldsa44_ed25519`,
/// `slhdsa-{sha2,shake}-128{s,f}`) from its PKCS#8 DER (as written by the PKI, or by
/// oqs-provider for Falcon-512), signing CertificateVerify with SignatureScheme `code_point`
/// (the catalogue's, or the run's override).
pub fn signing_key(alg_name: &str, pkcs8_der: &[u8], code_point: u16) -> Result<Arc<dyn SigningKey>> {
    let (alg, _) = lookup(alg_name).ok_or_else(|| {
        Error::Unsupported(format!("pqtls-oqs cannot sign with '{alg_name}'; it signs {}", tls_algorithms().join(", ")))
    })?;
    let key = load_key(alg, pkcs8_der)?;
    Ok(Arc::new(OqsSigningKey { key: Arc::new(key), scheme: SignatureScheme::from(code_point) }))
}

// ---------------------------------------------------------------- rustls / webpki verification

struct Verifier {
    alg: Alg,
    /// AlgorithmIdentifier contents (OID TLV, parameters absent): same for key and signature.
    id: AlgorithmIdentifier,
}

impl fmt::Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier").field("alg", &self.alg).finish()
    }
}

impl SignatureVerificationAlgorithm for Verifier {
    fn verify_signature(
        &self,
        public_key: &[u8],
        message: &[u8],
        signature: &[u8],
    ) -> std::result::Result<(), InvalidSignature> {
        let ok = match self.alg {
            Alg::Falcon512 => falcon_verify(public_key, message, signature),
            Alg::MlDsa44Ed25519 => composite_verify(public_key, message, signature),
            Alg::SlhDsa { arc, .. } => public_from_raw(&format!("2.16.840.1.101.3.4.3.{arc}"), public_key)
                .is_some_and(|k| openssl_verify(&k, message, signature, None)),
        };
        if ok {
            Ok(())
        } else {
            Err(InvalidSignature)
        }
    }

    fn public_key_alg_id(&self) -> AlgorithmIdentifier {
        self.id
    }

    fn signature_alg_id(&self) -> AlgorithmIdentifier {
        self.id
    }
}

const fn nist_sig(arc: u8) -> [u8; 11] {
    [0x06, 0x09, 0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, arc]
}
const SLH_SHA2_128S_ID: [u8; 11] = nist_sig(20);
const SLH_SHA2_128F_ID: [u8; 11] = nist_sig(21);
const SLH_SHAKE_128S_ID: [u8; 11] = nist_sig(26);
const SLH_SHAKE_128F_ID: [u8; 11] = nist_sig(27);
/// 1.3.9999.3.11
const FALCON512_ID: [u8; 7] = [0x06, 0x05, 0x2b, 0xce, 0x0f, 0x03, 0x0b];
/// 1.3.6.1.5.5.7.6.39
const MLDSA44_ED25519_ID: [u8; 10] = [0x06, 0x08, 0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x06, 0x27];

static FALCON512_VERIFY: Verifier =
    Verifier { alg: Alg::Falcon512, id: AlgorithmIdentifier::from_slice(&FALCON512_ID) };
static MLDSA44_ED25519_VERIFY: Verifier =
    Verifier { alg: Alg::MlDsa44Ed25519, id: AlgorithmIdentifier::from_slice(&MLDSA44_ED25519_ID) };
static SLH_SHA2_128S_VERIFY: Verifier = Verifier {
    alg: Alg::SlhDsa { name: "SLH-DSA-SHA2-128s", arc: 20 },
    id: AlgorithmIdentifier::from_slice(&SLH_SHA2_128S_ID),
};
static SLH_SHA2_128F_VERIFY: Verifier = Verifier {
    alg: Alg::SlhDsa { name: "SLH-DSA-SHA2-128f", arc: 21 },
    id: AlgorithmIdentifier::from_slice(&SLH_SHA2_128F_ID),
};
static SLH_SHAKE_128S_VERIFY: Verifier = Verifier {
    alg: Alg::SlhDsa { name: "SLH-DSA-SHAKE-128s", arc: 26 },
    id: AlgorithmIdentifier::from_slice(&SLH_SHAKE_128S_ID),
};
static SLH_SHAKE_128F_VERIFY: Verifier = Verifier {
    alg: Alg::SlhDsa { name: "SLH-DSA-SHAKE-128f", arc: 27 },
    id: AlgorithmIdentifier::from_slice(&SLH_SHAKE_128F_ID),
};

/// The verification algorithms of this crate with their TLS SignatureSchemes in a run with
/// `codepoints`, for `WebPkiSupportedAlgorithms` (both `all`, for certificate signatures, and
/// `mapping`, for CertificateVerify).
pub fn verification_algorithms(
    codepoints: &CodepointOverrides,
) -> Vec<(SignatureScheme, &'static dyn SignatureVerificationAlgorithm)> {
    let all: [(&str, &'static dyn SignatureVerificationAlgorithm); 6] = [
        ("falcon512", &FALCON512_VERIFY),
        ("mldsa44_ed25519", &MLDSA44_ED25519_VERIFY),
        ("slhdsa-sha2-128s", &SLH_SHA2_128S_VERIFY),
        ("slhdsa-sha2-128f", &SLH_SHA2_128F_VERIFY),
        ("slhdsa-shake-128s", &SLH_SHAKE_128S_VERIFY),
        ("slhdsa-shake-128f", &SLH_SHAKE_128F_VERIFY),
    ];
    all.into_iter()
        .map(|(name, v)| {
            let cp = catalogue::sig_alg(name)
                .map(|a| codepoints.sig_code_point(a))
                .ok()
                .or_else(|| scheme_code_point(name))
                .unwrap_or_default();
            (SignatureScheme::from(cp), v)
        })
        .collect()
}

/// rustls' aws-lc-rs verification algorithms (`aws_lc_rs::default_provider()
/// .signature_verification_algorithms`) extended with [`verification_algorithms`]: what a
/// `CryptoProvider` or `WebPkiServerVerifier`/`WebPkiClientVerifier` needs to verify chains and
/// CertificateVerify made with these algorithms, with the run's code points. rustls wants
/// `&'static` tables: each distinct set of code points gets its tables once per process
/// (immutable algorithm tables, not settings).
pub fn webpki_algorithms(codepoints: &CodepointOverrides) -> rustls::crypto::WebPkiSupportedAlgorithms {
    type Mapping = (SignatureScheme, &'static [&'static dyn SignatureVerificationAlgorithm]);
    struct Tables {
        codepoints: CodepointOverrides,
        all: Vec<&'static dyn SignatureVerificationAlgorithm>,
        mapping: Vec<Mapping>,
    }
    static MADE: Mutex<Vec<&'static Tables>> = Mutex::new(Vec::new());
    let mut made = match MADE.lock() {
        Ok(m) => m,
        Err(poisoned) => poisoned.into_inner(),
    };
    let tables = match made.iter().find(|t| t.codepoints == *codepoints) {
        Some(t) => *t,
        None => {
            let base = rustls::crypto::aws_lc_rs::default_provider().signature_verification_algorithms;
            let mut all = base.all.to_vec();
            let mut mapping = base.mapping.to_vec();
            for (scheme, v) in verification_algorithms(codepoints) {
                let single: &'static [&'static dyn SignatureVerificationAlgorithm] = Box::leak(Box::new([v]));
                all.push(v);
                mapping.push((scheme, single));
            }
            let t: &'static Tables = Box::leak(Box::new(Tables { codepoints: codepoints.clone(), all, mapping }));
            made.push(t);
            t
        }
    };
    rustls::crypto::WebPkiSupportedAlgorithms { all: &tables.all, mapping: &tables.mapping }
}

// ---------------------------------------------------------------- PKI keys

/// The PKI key factory for `falcon512` (liboqs) and `mldsa44_ed25519` (OpenSSL halves).
#[derive(Clone, Copy, Debug, Default)]
pub struct OqsKeys;

impl pqtls_pki::KeyFactory for OqsKeys {
    fn id(&self) -> String {
        format!("pqtls-oqs-2 (liboqs {}, {})", oqs_version(), openssl::version::version())
    }

    fn supports(&self, alg: &pqtls_core::catalogue::SigAlg) -> bool {
        matches!(alg.name, "falcon512" | "mldsa44_ed25519")
    }

    fn key(&self, alg: &pqtls_core::catalogue::SigAlg, seed: &[u8; 32]) -> Result<Box<dyn pqtls_pki::CertKey>> {
        match alg.name {
            "falcon512" => {
                // liboqs has no seeded key generation for signatures: the key is random and
                // reproducibility comes from the PKI cache.
                let (pk, sk) =
                    falcon()?.keypair().map_err(|e| Error::Other(format!("liboqs Falcon-512 keygen: {e}")))?;
                Ok(Box::new(OqsCertKey {
                    alg: Alg::Falcon512,
                    key: Key::Falcon { sk: sk.into_vec(), pk: pk.into_vec() },
                }))
            }
            "mldsa44_ed25519" => {
                let mut raw = pqtls_pki::key::expand(seed, "mldsa44-xi", 32)?;
                raw.extend(pqtls_pki::key::expand(seed, "ed25519", 32)?);
                Ok(Box::new(OqsCertKey { alg: Alg::MlDsa44Ed25519, key: Key::Composite(Composite::from_raw(&raw)?) }))
            }
            other => {
                Err(Error::Unsupported(format!("pqtls-oqs makes falcon512 and mldsa44_ed25519 keys, not '{other}'")))
            }
        }
    }
}

fn oqs_version() -> &'static str {
    falcon().map(|s| s.version()).unwrap_or("unavailable")
}

struct OqsCertKey {
    alg: Alg,
    key: Key,
}

impl OqsCertKey {
    fn public_key(&self) -> Result<Vec<u8>> {
        match &self.key {
            Key::Falcon { pk, .. } => Ok(pk.clone()),
            Key::Composite(c) => c.public_key(),
            Key::SlhDsa(k) => k.raw_public_key().map_err(ossl("SLH-DSA public key")),
        }
    }
}

impl pqtls_pki::CertKey for OqsCertKey {
    fn spki_der(&self) -> Result<Vec<u8>> {
        pqtls_pki::cert::spki_der(&oid(self.alg), &self.public_key()?)
    }

    fn signature_algorithm_der(&self) -> Result<Vec<u8>> {
        pqtls_pki::cert::algorithm_identifier_der(&oid(self.alg))
    }

    fn sign(&self, tbs: &[u8]) -> Result<Vec<u8>> {
        self.key.sign(tbs)
    }

    fn private_key_pem(&self) -> Result<String> {
        let raw = match &self.key {
            // As oqs-provider writes it (so that `openssl pkey -provider oqsprovider` reads
            // it): OCTET STRING { secret key || public key } inside the privateKey.
            Key::Falcon { sk, pk } => pqtls_pki::cert::tlv(0x04, &[sk.as_slice(), pk.as_slice()].concat()),
            Key::Composite(c) => c.raw.clone(),
            Key::SlhDsa(k) => {
                let pem = k.private_key_to_pem_pkcs8().map_err(ossl("PKCS#8"))?;
                return String::from_utf8(pem).map_err(|e| Error::Other(format!("PKCS#8 PEM: {e}")));
            }
        };
        pqtls_pki::cert::pkcs8_pem(&oid(self.alg), &raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn algorithm_identifiers_match_the_pki_encoding() {
        for (id, dotted) in [
            (&FALCON512_ID[..], FALCON512_OID.to_string()),
            (&MLDSA44_ED25519_ID[..], MLDSA44_ED25519_OID.to_string()),
            (&SLH_SHA2_128S_ID[..], "2.16.840.1.101.3.4.3.20".to_string()),
            (&SLH_SHA2_128F_ID[..], "2.16.840.1.101.3.4.3.21".to_string()),
            (&SLH_SHAKE_128S_ID[..], "2.16.840.1.101.3.4.3.26".to_string()),
            (&SLH_SHAKE_128F_ID[..], "2.16.840.1.101.3.4.3.27".to_string()),
        ] {
            let der = pqtls_pki::cert::algorithm_identifier_der(&dotted).expect("der");
            assert_eq!(&der[2..], id, "{dotted}");
        }
    }

    #[test]
    fn composite_sign_verify_and_tamper() {
        let mut raw = pqtls_pki::key::expand(&[7; 32], "mldsa44-xi", 32).expect("xi");
        raw.extend(pqtls_pki::key::expand(&[7; 32], "ed25519", 32).expect("ed"));
        let c = Composite::from_raw(&raw).expect("key");
        let pk = c.public_key().expect("pk");
        assert_eq!(pk.len(), MLDSA44_PK + ED25519_PK);
        let sig = c.sign(b"hello").expect("sign");
        assert_eq!(sig.len(), MLDSA44_SIG + ED25519_SIG);
        assert!(composite_verify(&pk, b"hello", &sig));
        assert!(!composite_verify(&pk, b"hellO", &sig));
        let mut bad = sig.clone();
        bad[MLDSA44_SIG + 3] ^= 1; // Ed25519 half only
        assert!(!composite_verify(&pk, b"hello", &bad));
        assert!(!composite_verify(&pk, b"hello", &sig[1..]));
        // The same seed gives the same key.
        assert_eq!(Composite::from_raw(&raw).expect("again").public_key().expect("pk"), pk);
    }

    #[test]
    fn falcon_sign_verify_and_tamper() {
        let (pk, sk) = falcon().expect("falcon").keypair().expect("keypair");
        assert_eq!(pk.as_ref().len(), FALCON512_PK);
        let sig = falcon_sign(sk.as_ref(), b"msg").expect("sign");
        assert!(sig.len() <= 752);
        assert!(falcon_verify(pk.as_ref(), b"msg", &sig));
        assert!(!falcon_verify(pk.as_ref(), b"msG", &sig));
        assert!(!falcon_verify(&pk.as_ref()[1..], b"msg", &sig));
    }

    #[test]
    fn bad_private_keys_are_errors() {
        assert!(signing_key("falcon512", b"junk", FALCON512_SCHEME).is_err());
        assert!(signing_key("mldsa44_ed25519", &[0x30, 0x00], MLDSA44_ED25519_SCHEME).is_err());
        assert!(signing_key("slhdsa-sha2-128s", b"", 0x0911).is_err());
        assert!(matches!(signing_key("rsa2048", b"", 0x0804), Err(Error::Unsupported(_))));
    }
}
