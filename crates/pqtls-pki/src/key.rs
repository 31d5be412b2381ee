//! Keys that can sign certificates: the [`CertKey`] trait, the [`KeyFactory`] hook that makes
//! them, and the OpenSSL 3.5 implementation ([`OpenSslKeys`]).

use foreign_types::{ForeignType, ForeignTypeRef};
use openssl::bn::{BigNum, BigNumContext};
use openssl::ec::{EcGroup, EcKey, EcPoint};
use openssl::hash::MessageDigest;
use openssl::md::{Md, MdRef};
use openssl::md_ctx::MdCtx;
use openssl::nid::Nid;
use openssl::pkey::{Id, PKey, Private};
use openssl::pkey_ctx::PkeyCtxRef;
use openssl::rsa::Rsa;
use pqtls_core::catalogue::SigAlg;
use pqtls_core::{Error, Result};
use std::ffi::{c_char, c_int, c_void, CString};
use std::ptr;

/// A private key able to sign X.509 certificates, whatever library holds it.
///
/// The certificate builder only needs these four operations, so a key from another library
/// (liboqs for Falcon, a composite implementation…) plugs in by implementing this trait and
/// a [`KeyFactory`] that makes it. [`crate::cert::spki_der`],
/// [`crate::cert::algorithm_identifier_der`] and [`crate::cert::pkcs8_pem`] encode raw key
/// bytes under any OID, so such a key needs no DER code of its own.
pub trait CertKey {
    /// The DER `SubjectPublicKeyInfo` of the public key.
    fn spki_der(&self) -> Result<Vec<u8>>;
    /// The DER `AlgorithmIdentifier` of the signatures this key makes (used in the
    /// certificates it signs, both in `TBSCertificate.signature` and `signatureAlgorithm`).
    fn signature_algorithm_der(&self) -> Result<Vec<u8>>;
    /// Signs `tbs` (the DER `TBSCertificate`), returning the raw signature value that goes
    /// into the certificate's BIT STRING.
    fn sign(&self, tbs: &[u8]) -> Result<Vec<u8>>;
    /// The private key as PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`).
    fn private_key_pem(&self) -> Result<String>;
}

/// Makes keys for some signature algorithms.
pub trait KeyFactory: Send + Sync {
    /// Identifies the implementation in the cache manifest (e.g. `openssl`, `liboqs-0.12`):
    /// changing it regenerates the chains made with it.
    fn id(&self) -> String;
    /// Whether this factory makes keys for `alg`.
    fn supports(&self, alg: &SigAlg) -> bool;
    /// Makes the key for `alg` from a 32-byte seed. Implementations should derive the key
    /// from `seed` when the algorithm allows it, so that a PKI seed reproduces the same keys.
    fn key(&self, alg: &SigAlg, seed: &[u8; 32]) -> Result<Box<dyn CertKey>>;
}

fn ossl(what: &str) -> impl FnOnce(openssl::error::ErrorStack) -> Error + '_ {
    move |e| Error::Other(format!("OpenSSL: {what}: {e}"))
}

/// How OpenSSL makes and uses one algorithm.
#[derive(Clone, Copy, Debug)]
enum Kind {
    Rsa {
        bits: u32,
    },
    Ec {
        curve: Nid,
        scalar_bytes: usize,
        digest: Digest,
    },
    Ed25519,
    Ed448,
    /// ML-DSA (FIPS 204): OpenSSL name, OID arc under 2.16.840.1.101.3.4.3.
    MlDsa {
        name: &'static str,
        arc: u32,
    },
    /// SLH-DSA (FIPS 205): OpenSSL name, security parameter n, OID arc.
    SlhDsa {
        name: &'static str,
        n: usize,
        arc: u32,
    },
}

#[derive(Clone, Copy, Debug)]
enum Digest {
    Sha256,
    Sha384,
    Sha512,
}

impl Digest {
    fn md(self) -> &'static MdRef {
        match self {
            Digest::Sha256 => Md::sha256(),
            Digest::Sha384 => Md::sha384(),
            Digest::Sha512 => Md::sha512(),
        }
    }
}

fn kind(name: &str) -> Option<Kind> {
    let slh = |name, n, arc| Some(Kind::SlhDsa { name, n, arc });
    match name {
        "rsa2048" => Some(Kind::Rsa { bits: 2048 }),
        "rsa3072" => Some(Kind::Rsa { bits: 3072 }),
        "rsa4096" => Some(Kind::Rsa { bits: 4096 }),
        "p256" => Some(Kind::Ec { curve: Nid::X9_62_PRIME256V1, scalar_bytes: 32, digest: Digest::Sha256 }),
        "p384" => Some(Kind::Ec { curve: Nid::SECP384R1, scalar_bytes: 48, digest: Digest::Sha384 }),
        "p521" => Some(Kind::Ec { curve: Nid::SECP521R1, scalar_bytes: 66, digest: Digest::Sha512 }),
        "ed25519" => Some(Kind::Ed25519),
        "ed448" => Some(Kind::Ed448),
        "mldsa44" => Some(Kind::MlDsa { name: "ML-DSA-44", arc: 17 }),
        "mldsa65" => Some(Kind::MlDsa { name: "ML-DSA-65", arc: 18 }),
        "mldsa87" => Some(Kind::MlDsa { name: "ML-DSA-87", arc: 19 }),
        "slhdsa-sha2-128s" => slh("SLH-DSA-SHA2-128s", 16, 20),
        "slhdsa-sha2-128f" => slh("SLH-DSA-SHA2-128f", 16, 21),
        "slhdsa-sha2-192s" => slh("SLH-DSA-SHA2-192s", 24, 22),
        "slhdsa-sha2-192f" => slh("SLH-DSA-SHA2-192f", 24, 23),
        "slhdsa-sha2-256s" => slh("SLH-DSA-SHA2-256s", 32, 24),
        "slhdsa-sha2-256f" => slh("SLH-DSA-SHA2-256f", 32, 25),
        "slhdsa-shake-128s" => slh("SLH-DSA-SHAKE-128s", 16, 26),
        "slhdsa-shake-128f" => slh("SLH-DSA-SHAKE-128f", 16, 27),
        "slhdsa-shake-192s" => slh("SLH-DSA-SHAKE-192s", 24, 28),
        "slhdsa-shake-192f" => slh("SLH-DSA-SHAKE-192f", 24, 29),
        "slhdsa-shake-256s" => slh("SLH-DSA-SHAKE-256s", 32, 30),
        "slhdsa-shake-256f" => slh("SLH-DSA-SHAKE-256f", 32, 31),
        _ => None,
    }
}

/// Names of the algorithms the built-in OpenSSL factory makes keys for.
pub fn openssl_algorithms() -> Vec<&'static str> {
    pqtls_core::catalogue::SIG_ALGS.iter().map(|a| a.name).filter(|n| kind(n).is_some()).collect()
}

/// Expands a 32-byte key seed into `len` bytes for one purpose (SHAKE-256): the one seed
/// expansion of the PKI, also used by key factories from other libraries.
pub fn expand(seed: &[u8], purpose: &str, len: usize) -> Result<Vec<u8>> {
    let mut input = Vec::with_capacity(seed.len() + purpose.len() + 16);
    input.extend_from_slice(b"pqtls-pki expand\0");
    input.extend_from_slice(purpose.as_bytes());
    input.push(0);
    input.extend_from_slice(seed);
    let mut out = vec![0u8; len];
    openssl::hash::hash_xof(MessageDigest::shake_256(), &input, &mut out).map_err(ossl("SHAKE-256"))?;
    Ok(out)
}

/// The built-in factory: every algorithm OpenSSL 3.5 can put in a certificate (RSA, ECDSA,
/// EdDSA, ML-DSA, SLH-DSA).
#[derive(Clone, Copy, Debug, Default)]
pub struct OpenSslKeys;

impl KeyFactory for OpenSslKeys {
    fn id(&self) -> String {
        "openssl".to_string()
    }

    fn supports(&self, alg: &SigAlg) -> bool {
        kind(alg.name).is_some()
    }

    fn key(&self, alg: &SigAlg, seed: &[u8; 32]) -> Result<Box<dyn CertKey>> {
        match kind(alg.name) {
            Some(kind) => Ok(Box::new(OpenSslKey::generate(kind, seed)?)),
            None => Err(Error::Unsupported(format!(
                "OpenSSL cannot make '{}' keys; it makes {}",
                alg.name,
                openssl_algorithms().join(", ")
            ))),
        }
    }
}

/// A key held by OpenSSL.
pub struct OpenSslKey {
    pkey: PKey<Private>,
    kind: Kind,
}

impl OpenSslKey {
    fn generate(kind: Kind, seed: &[u8; 32]) -> Result<OpenSslKey> {
        let pkey = match kind {
            // RSA key generation cannot be driven by a seed through the public API: the key is
            // random, and reproducibility comes from the cache.
            Kind::Rsa { bits } => {
                let rsa = Rsa::generate(bits).map_err(ossl("RSA key generation"))?;
                PKey::from_rsa(rsa).map_err(ossl("RSA key"))?
            }
            Kind::Ec { curve, scalar_bytes, .. } => {
                let group = EcGroup::from_curve_name(curve).map_err(ossl("EC group"))?;
                let mut ctx = BigNumContext::new().map_err(ossl("BN_CTX"))?;
                let mut order = BigNum::new().map_err(ossl("BN"))?;
                group.order(&mut order, &mut ctx).map_err(ossl("EC order"))?;
                // 128 extra bits make the bias of the reduction negligible; d = 1 + (x mod (n-1)).
                let wide = expand(seed, "ec-scalar", scalar_bytes + 16)?;
                let x = BigNum::from_slice(&wide).map_err(ossl("BN"))?;
                let one = BigNum::from_u32(1).map_err(ossl("BN"))?;
                let mut n1 = BigNum::new().map_err(ossl("BN"))?;
                n1.checked_sub(&order, &one).map_err(ossl("BN"))?;
                let mut r = BigNum::new().map_err(ossl("BN"))?;
                r.nnmod(&x, &n1, &mut ctx).map_err(ossl("BN"))?;
                let mut d = BigNum::new().map_err(ossl("BN"))?;
                d.checked_add(&r, &one).map_err(ossl("BN"))?;
                let mut q = EcPoint::new(&group).map_err(ossl("EC point"))?;
                q.mul_generator2(&group, &d, &mut ctx).map_err(ossl("EC point"))?;
                let ec = EcKey::from_private_components(&group, &d, &q).map_err(ossl("EC key"))?;
                ec.check_key().map_err(ossl("EC key check"))?;
                PKey::from_ec_key(ec).map_err(ossl("EC key"))?
            }
            Kind::Ed25519 => PKey::private_key_from_raw_bytes(&expand(seed, "ed25519", 32)?, Id::ED25519)
                .map_err(ossl("Ed25519 key"))?,
            Kind::Ed448 => {
                PKey::private_key_from_raw_bytes(&expand(seed, "ed448", 57)?, Id::ED448).map_err(ossl("Ed448 key"))?
            }
            // FIPS 204 key generation seed xi (32 bytes).
            Kind::MlDsa { name, .. } => keygen_with_seed(name, &expand(seed, "ml-dsa-xi", 32)?)?,
            // FIPS 205: SK.seed || SK.prf || PK.seed, 3n bytes.
            Kind::SlhDsa { name, n, .. } => keygen_with_seed(name, &expand(seed, "slh-dsa", 3 * n)?)?,
        };
        Ok(OpenSslKey { pkey, kind })
    }

    /// The OpenSSL key.
    pub fn pkey(&self) -> &PKey<Private> {
        &self.pkey
    }
}

impl CertKey for OpenSslKey {
    fn spki_der(&self) -> Result<Vec<u8>> {
        self.pkey.public_key_to_der().map_err(ossl("SubjectPublicKeyInfo"))
    }

    fn signature_algorithm_der(&self) -> Result<Vec<u8>> {
        // DER AlgorithmIdentifier ::= SEQUENCE { OID, parameters }.
        Ok(match self.kind {
            // sha256WithRSAEncryption 1.2.840.113549.1.1.11, parameters NULL.
            Kind::Rsa { .. } => algorithm_identifier(&[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b], true),
            // ecdsa-with-SHA256/384/512 1.2.840.10045.4.3.{2,3,4}, parameters absent.
            Kind::Ec { digest, .. } => {
                let last = match digest {
                    Digest::Sha256 => 2,
                    Digest::Sha384 => 3,
                    Digest::Sha512 => 4,
                };
                algorithm_identifier(&[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, last], false)
            }
            // id-Ed25519 1.3.101.112, id-Ed448 1.3.101.113.
            Kind::Ed25519 => algorithm_identifier(&[0x2b, 0x65, 0x70], false),
            Kind::Ed448 => algorithm_identifier(&[0x2b, 0x65, 0x71], false),
            // id-ml-dsa-* and id-slh-dsa-*: 2.16.840.1.101.3.4.3.<arc>, parameters absent.
            Kind::MlDsa { arc, .. } | Kind::SlhDsa { arc, .. } => {
                algorithm_identifier(&[0x60, 0x86, 0x48, 0x01, 0x65, 0x03, 0x04, 0x03, arc as u8], false)
            }
        })
    }

    fn sign(&self, tbs: &[u8]) -> Result<Vec<u8>> {
        let digest = match self.kind {
            Kind::Rsa { .. } => Some(Md::sha256()),
            Kind::Ec { digest, .. } => Some(digest.md()),
            _ => None,
        };
        let mut ctx = MdCtx::new().map_err(ossl("EVP_MD_CTX"))?;
        let pctx = ctx.digest_sign_init(digest, &self.pkey).map_err(ossl("sign init"))?;
        // Deterministic signatures where the algorithm has the option, so that a seed
        // reproduces the certificates byte for byte (RSA PKCS#1 v1.5 and EdDSA always are).
        match self.kind {
            Kind::Ec { .. } => set_int_param(pctx, c"nonce-type", 1)?,
            Kind::MlDsa { .. } | Kind::SlhDsa { .. } => set_int_param(pctx, c"deterministic", 1)?,
            _ => {}
        }
        let mut sig = Vec::new();
        ctx.digest_sign_to_vec(tbs, &mut sig).map_err(ossl("sign"))?;
        Ok(sig)
    }

    fn private_key_pem(&self) -> Result<String> {
        let pem = self.pkey.private_key_to_pem_pkcs8().map_err(ossl("PKCS#8 encoding"))?;
        String::from_utf8(pem).map_err(|e| Error::Other(format!("PKCS#8 PEM is not UTF-8: {e}")))
    }
}

fn algorithm_identifier(oid: &[u8], null_params: bool) -> Vec<u8> {
    let mut inner = vec![0x06, oid.len() as u8];
    inner.extend_from_slice(oid);
    if null_params {
        inner.extend_from_slice(&[0x05, 0x00]);
    }
    let mut out = vec![0x30, inner.len() as u8];
    out.extend_from_slice(&inner);
    out
}

extern "C" {
    // Part of libcrypto since 3.0; openssl-sys does not declare it.
    fn OSSL_PARAM_construct_int(key: *const c_char, buf: *mut c_int) -> openssl_sys::OSSL_PARAM;
}

/// Sets an integer parameter (e.g. `deterministic`, `nonce-type`) on a live signing,
/// verification or key-generation context.
pub fn set_int_param<T>(pctx: &PkeyCtxRef<T>, key: &std::ffi::CStr, value: c_int) -> Result<()> {
    let pctx = pctx.as_ptr();
    let mut v = value;
    // SAFETY: `pctx` is a live context owned by the caller's EVP_MD_CTX; the parameter array
    // points at `key` and `v`, which outlive the call, and is terminated by an end marker.
    let rc = unsafe {
        let params = [OSSL_PARAM_construct_int(key.as_ptr(), &mut v), openssl_sys::OSSL_PARAM_construct_end()];
        openssl_sys::EVP_PKEY_CTX_set_params(pctx, params.as_ptr())
    };
    if rc <= 0 {
        return Err(ossl("setting signature parameter")(openssl::error::ErrorStack::get())
            .context(format!("'{}' = {value}", key.to_string_lossy())));
    }
    Ok(())
}

/// Sets an octet-string parameter (e.g. ML-DSA's `context-string`, a keygen `seed`) on a live
/// signing, verification or key-generation context.
pub fn set_octet_param<T>(pctx: &PkeyCtxRef<T>, key: &std::ffi::CStr, value: &[u8]) -> Result<()> {
    let pctx = pctx.as_ptr();
    // SAFETY: `pctx` is a live context owned by the caller; the parameter array borrows `key`
    // and `value` (OpenSSL copies the value during the call and only reads it) and is
    // terminated by an end marker.
    let rc = unsafe {
        let params = [
            openssl_sys::OSSL_PARAM_construct_octet_string(key.as_ptr(), value.as_ptr() as *mut c_void, value.len()),
            openssl_sys::OSSL_PARAM_construct_end(),
        ];
        openssl_sys::EVP_PKEY_CTX_set_params(pctx, params.as_ptr())
    };
    if rc <= 0 {
        return Err(ossl("setting parameter")(openssl::error::ErrorStack::get()).context(format!(
            "'{}' ({} bytes)",
            key.to_string_lossy(),
            value.len()
        )));
    }
    Ok(())
}

/// Generates a key of the named OpenSSL algorithm with the key-generation parameter `seed`
/// (ML-DSA: xi, 32 bytes; SLH-DSA: SK.seed || SK.prf || PK.seed, 3n bytes).
fn keygen_with_seed(name: &str, seed: &[u8]) -> Result<PKey<Private>> {
    struct Ctx(*mut openssl_sys::EVP_PKEY_CTX);
    impl Drop for Ctx {
        fn drop(&mut self) {
            // SAFETY: the pointer came from EVP_PKEY_CTX_new_from_name and is freed once.
            unsafe { openssl_sys::EVP_PKEY_CTX_free(self.0) }
        }
    }
    let fail = |what: &str| Error::Other(format!("OpenSSL: {name} {what}: {}", openssl::error::ErrorStack::get()));
    let cname = CString::new(name).map_err(|_| Error::Invalid(format!("bad algorithm name '{name}'")))?;
    openssl_sys::init();
    // SAFETY: plain libcrypto calls on a context we own; the parameter array borrows `seed`
    // (only read by OpenSSL, which copies it) and is terminated by an end marker.
    unsafe {
        let raw = openssl_sys::EVP_PKEY_CTX_new_from_name(ptr::null_mut(), cname.as_ptr(), ptr::null());
        if raw.is_null() {
            return Err(Error::Unsupported(format!(
                "this OpenSSL ({}) has no {name} key management; OpenSSL 3.5 or later is needed: {}",
                openssl::version::version(),
                openssl::error::ErrorStack::get()
            )));
        }
        let ctx = Ctx(raw);
        if openssl_sys::EVP_PKEY_keygen_init(ctx.0) <= 0 {
            return Err(fail("keygen init"));
        }
        // SAFETY (within the block above): `ctx.0` is live and owned by `ctx` for this borrow.
        set_octet_param(PkeyCtxRef::<()>::from_ptr(ctx.0), c"seed", seed)
            .map_err(|e| e.context(format!("{name} keygen")))?;
        let mut pkey: *mut openssl_sys::EVP_PKEY = ptr::null_mut();
        if openssl_sys::EVP_PKEY_generate(ctx.0, &mut pkey) <= 0 || pkey.is_null() {
            return Err(fail("keygen"));
        }
        Ok(PKey::from_ptr(pkey))
    }
}
