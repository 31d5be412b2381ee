//! The algorithm catalogue: every key-exchange group, signature algorithm and cipher suite
//! pqtls knows, as data. Sizes are the standards' sizes; tests compare the bytes measured on
//! the wire against them.
//!
//! Which TLS stack *provides* an algorithm is also data here (`stacks`), and each backend's
//! test suite checks that what the backend really negotiates matches it.

use crate::error::{Error, Result};
use serde::Serialize;
use std::fmt;

/// A TLS implementation that pqtls can drive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Stack {
    Openssl,
    Rustls,
    /// s2n-tls (AWS) over AWS-LC: crates/pqtls-s2n.
    S2n,
    /// BoringSSL (Chrome's and Cloudflare's), in its own shared object (crates/pqtls-boring).
    Boringssl,
}

impl Stack {
    pub const ALL: [Stack; 4] = [Stack::Openssl, Stack::Rustls, Stack::S2n, Stack::Boringssl];

    pub fn name(self) -> &'static str {
        match self {
            Stack::Openssl => "openssl",
            Stack::Rustls => "rustls",
            Stack::S2n => "s2n",
            Stack::Boringssl => "boringssl",
        }
    }

    /// The name a reader knows it by (`OpenSSL`, `rustls`), for reports.
    pub fn display_name(self) -> &'static str {
        match self {
            Stack::Openssl => "OpenSSL",
            Stack::Rustls => "rustls",
            Stack::S2n => "s2n-tls",
            Stack::Boringssl => "BoringSSL",
        }
    }

    pub fn parse(s: &str) -> Result<Stack> {
        match s.trim().to_ascii_lowercase().as_str() {
            "openssl" | "ossl" => Ok(Stack::Openssl),
            "rustls" => Ok(Stack::Rustls),
            "s2n" | "s2n-tls" | "s2ntls" => Ok(Stack::S2n),
            "boringssl" | "boring" => Ok(Stack::Boringssl),
            other => Err(Error::unknown("stack", other, Stack::ALL.iter().map(|s| s.name()))),
        }
    }
}

impl fmt::Display for Stack {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

const OPENSSL: &[Stack] = &[Stack::Openssl];
const BOTH: &[Stack] = &[Stack::Openssl, Stack::Rustls];
/// Every stack.
const EVERY: &[Stack] = &Stack::ALL;
/// OpenSSL, rustls and BoringSSL.
const NOT_S2N: &[Stack] = &[Stack::Openssl, Stack::Rustls, Stack::Boringssl];
/// The rustls backend only (liboqs algorithms through crates/pqtls-oqs).
const RUSTLS: &[Stack] = &[Stack::Rustls];
/// OpenSSL, rustls and s2n-tls (s2n-tls: what its TLS 1.3 security policies offer,
/// crates/pqtls-s2n/src/policy.rs).
const NOT_BORINGSSL: &[Stack] = &[Stack::Openssl, Stack::Rustls, Stack::S2n];
/// Not provided by any backend yet (kept in the catalogue: names, code points and sizes).
const NONE: &[Stack] = &[];

/// Certificate compression (RFC 8879): the algorithm a server (and, with mutual TLS, a
/// client) compresses its Certificate message with, the `cert_compression` factor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CertCompression {
    /// No compression: the extension is not offered, a plain Certificate goes on the wire.
    None,
    Zlib,
    Brotli,
    Zstd,
}

impl CertCompression {
    pub const ALL: [CertCompression; 4] =
        [CertCompression::None, CertCompression::Zlib, CertCompression::Brotli, CertCompression::Zstd];

    pub fn name(self) -> &'static str {
        match self {
            CertCompression::None => "none",
            CertCompression::Zlib => "zlib",
            CertCompression::Brotli => "brotli",
            CertCompression::Zstd => "zstd",
        }
    }

    /// The CertificateCompressionAlgorithm code point (RFC 8879 §7.3); 0 for none.
    pub fn code_point(self) -> u16 {
        match self {
            CertCompression::None => 0,
            CertCompression::Zlib => 1,
            CertCompression::Brotli => 2,
            CertCompression::Zstd => 3,
        }
    }

    /// The algorithm of a code point (`None` for one RFC 8879 does not define).
    pub fn from_code_point(cp: u16) -> Option<CertCompression> {
        CertCompression::ALL.into_iter().find(|c| c.code_point() == cp && cp != 0)
    }

    /// The stacks that compress and decompress certificates with it in this build: OpenSSL
    /// (3.5 built with enable-{zlib,brotli,zstd}-dynamic, scripts/openssl.sh) and rustls (its
    /// brotli and zlib features; zstd through the `zstd` crate, crates/pqtls-rustls). s2n-tls
    /// has no certificate compression; BoringSSL's needs the application's own codecs
    /// (SSL_CTX_add_cert_compression_alg), not wired here.
    pub fn stacks(self) -> &'static [Stack] {
        match self {
            CertCompression::None => EVERY,
            _ => BOTH,
        }
    }

    pub fn parse(s: &str) -> Result<CertCompression> {
        let t = s.trim().to_ascii_lowercase();
        let t = match t.as_str() {
            "" | "off" | "false" | "no" => "none",
            "deflate" => "zlib",
            "br" => "brotli",
            "zstandard" => "zstd",
            other => other,
        };
        CertCompression::ALL
            .into_iter()
            .find(|c| c.name() == t)
            .ok_or_else(|| Error::unknown("certificate compression", s.trim(), CertCompression::ALL.map(|c| c.name())))
    }
}

impl fmt::Display for CertCompression {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// How a group's key shares are built.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum GroupKind {
    /// Diffie-Hellman style: both sides send a public key of the same size.
    Classical { share_bytes: usize },
    /// A KEM: the client sends the encapsulation key, the server the ciphertext.
    Kem { encapsulation_key_bytes: usize, ciphertext_bytes: usize },
    /// Concatenation of two groups' shares (draft-ietf-tls-hybrid-design).
    Hybrid {
        /// Canonical names of the two components, in wire order.
        first: &'static str,
        second: &'static str,
    },
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Group {
    /// Canonical name: the IANA name (OpenSSL uses the same), or the OQS name.
    pub name: &'static str,
    /// Other spellings accepted on the command line (compared case-insensitively,
    /// ignoring `-` and `_`).
    pub aliases: &'static [&'static str],
    pub code_point: u16,
    /// False for the OQS project's private-use code points.
    pub iana: bool,
    pub kind: GroupKind,
    /// Post-quantum (or hybrid with a post-quantum part).
    pub post_quantum: bool,
    /// TLS stacks that can negotiate it (with this build of pqtls).
    pub stacks: &'static [Stack],
    /// NIST security category / classical security level, for display.
    pub level: u8,
}

impl Group {
    /// Bytes of the key_exchange field the client sends in its KeyShareEntry.
    pub fn client_share_bytes(&self) -> usize {
        match self.kind {
            GroupKind::Classical { share_bytes } => share_bytes,
            GroupKind::Kem { encapsulation_key_bytes, .. } => encapsulation_key_bytes,
            GroupKind::Hybrid { first, second } => {
                group_by_name(first).client_share_bytes() + group_by_name(second).client_share_bytes()
            }
        }
    }

    /// Bytes of the key_exchange field the server sends in its KeyShareEntry.
    pub fn server_share_bytes(&self) -> usize {
        match self.kind {
            GroupKind::Classical { share_bytes } => share_bytes,
            GroupKind::Kem { ciphertext_bytes, .. } => ciphertext_bytes,
            GroupKind::Hybrid { first, second } => {
                group_by_name(first).server_share_bytes() + group_by_name(second).server_share_bytes()
            }
        }
    }

    /// Hybrid components, if any.
    pub fn components(&self) -> Option<(&'static Group, &'static Group)> {
        match self.kind {
            GroupKind::Hybrid { first, second } => Some((group_by_name(first), group_by_name(second))),
            _ => None,
        }
    }

    pub fn provided_by(&self, stack: Stack) -> bool {
        self.stacks.contains(&stack)
    }
}

/// The key algorithm of a certificate (what `--chain` names), with the TLS SignatureScheme
/// that a leaf of this algorithm signs CertificateVerify with.
#[derive(Clone, Copy, Debug, Serialize)]
pub struct SigAlg {
    /// Canonical short name used in chain specs (`mldsa65`, `p256`, `rsa2048`).
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    /// The TLS 1.3 SignatureScheme name used in CertificateVerify.
    pub scheme: &'static str,
    /// SignatureScheme code point, if one is assigned (composites: draft value, see `note`).
    pub code_point: u16,
    pub iana: bool,
    /// Public key bytes as carried in SubjectPublicKeyInfo's BIT STRING.
    pub public_key_bytes: usize,
    /// Signature bytes; for variable-length signatures the maximum.
    pub signature_bytes: usize,
    /// Signature length varies (ECDSA DER, Falcon).
    pub variable_signature: bool,
    pub post_quantum: bool,
    /// Stacks that can sign / verify CertificateVerify with it in TLS.
    pub tls_stacks: &'static [Stack],
    /// Can pqtls make certificates with it (always true today; kept as data for `list`).
    pub certificates: bool,
    pub note: &'static str,
}

impl SigAlg {
    pub fn provided_by(&self, stack: Stack) -> bool {
        self.tls_stacks.contains(&stack)
    }
}

#[derive(Clone, Copy, Debug, Serialize)]
pub struct Cipher {
    pub name: &'static str,
    pub aliases: &'static [&'static str],
    pub code_point: u16,
    pub stacks: &'static [Stack],
}

/// A key-exchange group: post-quantum when it is a KEM or a hybrid (which has a KEM part).
const fn group_entry(
    name: &'static str,
    aliases: &'static [&'static str],
    code_point: u16,
    iana: bool,
    kind: GroupKind,
    level: u8,
    stacks: &'static [Stack],
) -> Group {
    let post_quantum = !matches!(kind, GroupKind::Classical { .. });
    Group { name, aliases, code_point, iana, kind, post_quantum, stacks, level }
}

macro_rules! classical {
    ($name:expr, [$($alias:expr),*], $cp:expr, $share:expr, $level:expr, $stacks:expr) => {
        group_entry($name, &[$($alias),*], $cp, true, GroupKind::Classical { share_bytes: $share }, $level, $stacks)
    };
}

macro_rules! kem {
    ($name:expr, [$($alias:expr),*], $cp:expr, $iana:expr, $ek:expr, $ct:expr, $level:expr, $stacks:expr) => {
        group_entry(
            $name,
            &[$($alias),*],
            $cp,
            $iana,
            GroupKind::Kem { encapsulation_key_bytes: $ek, ciphertext_bytes: $ct },
            $level,
            $stacks,
        )
    };
}

macro_rules! hybrid {
    ($name:expr, [$($alias:expr),*], $cp:expr, $iana:expr, $first:expr, $second:expr, $level:expr, $stacks:expr) => {
        group_entry(
            $name,
            &[$($alias),*],
            $cp,
            $iana,
            GroupKind::Hybrid { first: $first, second: $second },
            $level,
            $stacks,
        )
    };
}

// Catalogue entries are unique by name: identity is the name.
macro_rules! eq_by_name {
    ($($t:ty),*) => {$(
        impl PartialEq for $t {
            fn eq(&self, other: &Self) -> bool {
                self.name == other.name
            }
        }
        impl Eq for $t {}
    )*};
}
eq_by_name!(Group, SigAlg, Cipher);

/// Every key-exchange group. Hybrids list their components in wire order (shares and shared
/// secret): X25519MLKEM768 and x25519_mlkem512 put ML-KEM first (the FIPS-approved part first
/// when the classical one is not: draft-kwiatkowski-tls-ecdhe-mlkem, oqs-provider), while
/// SecP256r1MLKEM768, SecP384r1MLKEM1024, p256_mlkem512 and x25519_frodo640aes put ECDH first.
pub static GROUPS: &[Group] = &[
    classical!("secp256r1", ["p256", "P-256", "prime256v1", "nistp256"], 0x0017, 65, 1, EVERY),
    classical!("secp384r1", ["p384", "P-384", "nistp384"], 0x0018, 97, 3, EVERY),
    classical!("secp521r1", ["p521", "P-521", "nistp521"], 0x0019, 133, 5, EVERY),
    classical!("x25519", ["X25519", "curve25519"], 0x001D, 32, 1, EVERY),
    classical!("x448", ["X448", "curve448"], 0x001E, 56, 3, OPENSSL),
    classical!("ffdhe2048", [], 0x0100, 256, 1, OPENSSL),
    classical!("ffdhe3072", [], 0x0101, 384, 1, OPENSSL),
    classical!("ffdhe4096", [], 0x0102, 512, 1, OPENSSL),
    classical!("ffdhe6144", [], 0x0103, 768, 3, OPENSSL),
    classical!("ffdhe8192", [], 0x0104, 1024, 5, OPENSSL),
    kem!("MLKEM512", ["mlkem512", "ML-KEM-512"], 0x0200, true, 800, 768, 1, BOTH),
    kem!("MLKEM768", ["mlkem768", "ML-KEM-768"], 0x0201, true, 1184, 1088, 3, BOTH),
    kem!("MLKEM1024", ["mlkem1024", "ML-KEM-1024"], 0x0202, true, 1568, 1568, 5, EVERY),
    hybrid!("SecP256r1MLKEM768", ["p256_mlkem768"], 0x11EB, true, "secp256r1", "MLKEM768", 3, NOT_BORINGSSL),
    hybrid!("X25519MLKEM768", ["x25519_mlkem768"], 0x11EC, true, "MLKEM768", "x25519", 3, EVERY),
    hybrid!("SecP384r1MLKEM1024", ["p384_mlkem1024"], 0x11ED, true, "secp384r1", "MLKEM1024", 5, NOT_BORINGSSL),
    // OQS code points of oqs-provider 0.9.0 – 0.11.0 (ALGORITHMS.md there; docs/oqs.md).
    kem!("frodo640aes", ["FrodoKEM-640-AES", "frodokem640aes"], 0xFE00, false, 9616, 9720, 1, RUSTLS),
    hybrid!("x25519_frodo640aes", [], 0xFE02, false, "x25519", "frodo640aes", 1, RUSTLS),
    // oqs-provider puts ML-KEM first in x25519_mlkem512 (its "reverse_share" rule: the
    // FIPS-approved part first when the classical one is not), P-256 first in p256_mlkem512.
    hybrid!("x25519_mlkem512", ["X25519MLKEM512"], 0x2FB6, false, "MLKEM512", "x25519", 1, &[Stack::Rustls]),
    hybrid!("p256_mlkem512", ["SecP256r1MLKEM512"], 0x2F4B, false, "secp256r1", "MLKEM512", 1, &[Stack::Rustls]),
];

/// Every certificate key algorithm.
pub static SIG_ALGS: &[SigAlg] = &[
    SigAlg {
        note: "certificates signed with RSA-PSS (rsa_pss_rsae_sha256) in TLS; X.509 signatures PKCS#1 v1.5",
        ..classical_sig("rsa2048", &["RSA2k", "rsa-2048", "rsa"], "rsa_pss_rsae_sha256", 0x0804, 270, 256, false)
    },
    classical_sig("rsa3072", &["RSA3k", "rsa-3072"], "rsa_pss_rsae_sha256", 0x0804, 398, 384, false),
    classical_sig("rsa4096", &["RSA4k", "rsa-4096"], "rsa_pss_rsae_sha256", 0x0804, 526, 512, false),
    classical_sig(
        "p256",
        &["secp256r1", "P-256", "prime256v1", "ecdsa-p256"],
        "ecdsa_secp256r1_sha256",
        0x0403,
        65,
        72,
        true,
    ),
    classical_sig("p384", &["secp384r1", "P-384", "ecdsa-p384"], "ecdsa_secp384r1_sha384", 0x0503, 97, 104, true),
    classical_sig("p521", &["secp521r1", "P-521", "ecdsa-p521"], "ecdsa_secp521r1_sha512", 0x0603, 133, 139, true),
    // s2n-tls has no Ed25519 signature scheme.
    SigAlg { tls_stacks: NOT_S2N, ..classical_sig("ed25519", &["Ed25519"], "ed25519", 0x0807, 32, 64, false) },
    SigAlg { tls_stacks: OPENSSL, ..classical_sig("ed448", &["Ed448"], "ed448", 0x0808, 57, 114, false) },
    mldsa("mldsa44", &["ML-DSA-44", "mldsa-44"], 0x0904, 1312, 2420),
    mldsa("mldsa65", &["ML-DSA-65", "mldsa-65"], 0x0905, 1952, 3309),
    mldsa("mldsa87", &["ML-DSA-87", "mldsa-87"], 0x0906, 2592, 4627),
    slhdsa("slhdsa-sha2-128s", &["SLH-DSA-SHA2-128s"], 0x0911, 32, 7856, RUSTLS),
    slhdsa("slhdsa-sha2-128f", &["SLH-DSA-SHA2-128f"], 0x0912, 32, 17088, RUSTLS),
    slhdsa("slhdsa-sha2-192s", &["SLH-DSA-SHA2-192s"], 0x0913, 48, 16224, NONE),
    slhdsa("slhdsa-sha2-192f", &["SLH-DSA-SHA2-192f"], 0x0914, 48, 35664, NONE),
    slhdsa("slhdsa-sha2-256s", &["SLH-DSA-SHA2-256s"], 0x0915, 64, 29792, NONE),
    slhdsa("slhdsa-sha2-256f", &["SLH-DSA-SHA2-256f"], 0x0916, 64, 49856, NONE),
    slhdsa("slhdsa-shake-128s", &["SLH-DSA-SHAKE-128s"], 0x0917, 32, 7856, RUSTLS),
    slhdsa("slhdsa-shake-128f", &["SLH-DSA-SHAKE-128f"], 0x0918, 32, 17088, RUSTLS),
    slhdsa("slhdsa-shake-192s", &["SLH-DSA-SHAKE-192s"], 0x0919, 48, 16224, NONE),
    slhdsa("slhdsa-shake-192f", &["SLH-DSA-SHAKE-192f"], 0x091A, 48, 35664, NONE),
    slhdsa("slhdsa-shake-256s", &["SLH-DSA-SHAKE-256s"], 0x091B, 64, 29792, NONE),
    slhdsa("slhdsa-shake-256f", &["SLH-DSA-SHAKE-256f"], 0x091C, 64, 49856, NONE),
    SigAlg {
        name: "falcon512",
        aliases: &["Falcon-512", "falcon-512"],
        scheme: "falcon512",
        code_point: 0xFED7,
        iana: false,
        public_key_bytes: 897,
        signature_bytes: 752,
        variable_signature: true,
        post_quantum: true,
        tls_stacks: RUSTLS,
        certificates: true,
        note: "OQS code point and OID 1.3.9999.3.11; liboqs (rustls backend)",
    },
    SigAlg {
        name: "mldsa44_ed25519",
        aliases: &["mldsa44-ed25519", "MLDSA44-Ed25519"],
        scheme: "mldsa44_ed25519",
        code_point: 0x090A,
        iana: false,
        public_key_bytes: 1312 + 32,
        signature_bytes: 2420 + 64,
        variable_signature: false,
        post_quantum: true,
        tls_stacks: RUSTLS,
        certificates: true,
        note: "composite ML-DSA-44 + Ed25519 (draft-ietf-lamps-pq-composite-sigs-13, OID 1.3.6.1.5.5.7.6.39); TLS code point 0x090A from draft-reddy-tls-composite-mldsa, not final (rustls backend)",
    },
];

/// A classical certificate key algorithm: an IANA code point, TLS on the three stacks.
/// `variable_signature`: the signatures are DER (ECDSA), of `sig` bytes at most.
const fn classical_sig(
    name: &'static str,
    aliases: &'static [&'static str],
    scheme: &'static str,
    cp: u16,
    pk: usize,
    sig: usize,
    variable_signature: bool,
) -> SigAlg {
    SigAlg {
        name,
        aliases,
        scheme,
        code_point: cp,
        iana: true,
        public_key_bytes: pk,
        signature_bytes: sig,
        variable_signature,
        post_quantum: false,
        tls_stacks: EVERY,
        certificates: true,
        note: "",
    }
}

const fn mldsa(name: &'static str, aliases: &'static [&'static str], cp: u16, pk: usize, sig: usize) -> SigAlg {
    SigAlg {
        name,
        aliases,
        scheme: name,
        code_point: cp,
        iana: true,
        public_key_bytes: pk,
        signature_bytes: sig,
        variable_signature: false,
        post_quantum: true,
        tls_stacks: EVERY,
        certificates: true,
        note: "FIPS 204",
    }
}

/// SLH-DSA is not OQS's SPHINCS+: say so wherever the algorithm is shown.
pub const SLHDSA_NOTE: &str = "FIPS 205 SLH-DSA (pure), IETF draft TLS code point, NIST OID; NOT the OQS SPHINCS+ \
     of oqs-provider (e.g. sphincssha2128ssimple, 0xFEB6) that reference studies used: other keys, \
     signatures and code points; OpenSSL 3.5 has certificates but no TLS signature scheme";

/// Where a code point that IANA did not assign comes from: `OQS` (the OQS project's
/// private-use range, as oqs-provider 0.9–0.11 uses it) or `draft` (an IETF draft's value).
pub fn code_point_source(code_point: u16, iana: bool) -> &'static str {
    match (iana, code_point) {
        (true, _) => "IANA",
        (false, 0x2F00..=0x2FFF) | (false, 0xFE00..=0xFEFF) => "OQS",
        (false, _) => "draft",
    }
}

const fn slhdsa(
    name: &'static str,
    aliases: &'static [&'static str],
    cp: u16,
    pk: usize,
    sig: usize,
    tls_stacks: &'static [Stack],
) -> SigAlg {
    SigAlg {
        name,
        aliases,
        scheme: name,
        code_point: cp,
        iana: false,
        public_key_bytes: pk,
        signature_bytes: sig,
        variable_signature: false,
        post_quantum: true,
        // OpenSSL 3.5 makes SLH-DSA certificates but does not sign TLS handshakes with it; the
        // rustls backend signs with the 128-bit variants (OpenSSL's libcrypto via pqtls-oqs).
        tls_stacks,
        certificates: true,
        note: SLHDSA_NOTE,
    }
}

pub static CIPHERS: &[Cipher] = &[
    Cipher {
        name: "TLS_AES_128_GCM_SHA256",
        aliases: &["aes128gcm", "AES-128-GCM", "aes128"],
        code_point: 0x1301,
        stacks: EVERY,
    },
    Cipher {
        name: "TLS_AES_256_GCM_SHA384",
        aliases: &["aes256gcm", "AES-256-GCM", "aes256"],
        code_point: 0x1302,
        stacks: NOT_BORINGSSL,
    },
    Cipher {
        name: "TLS_CHACHA20_POLY1305_SHA256",
        aliases: &["chacha20", "chacha20poly1305", "CHACHA20-POLY1305"],
        code_point: 0x1303,
        stacks: NOT_BORINGSSL,
    },
    Cipher {
        name: "TLS_AES_128_CCM_SHA256",
        aliases: &["aes128ccm", "AES-128-CCM"],
        code_point: 0x1304,
        stacks: OPENSSL,
    },
    Cipher {
        name: "TLS_AES_128_CCM_8_SHA256",
        aliases: &["aes128ccm8", "AES-128-CCM-8"],
        code_point: 0x1305,
        stacks: OPENSSL,
    },
];

fn normalise(s: &str) -> String {
    s.chars().filter(|c| *c != '-' && *c != '_' && !c.is_whitespace()).flat_map(|c| c.to_lowercase()).collect()
}

/// `a` and `b` spell one name: equal after [`normalise`] (compared without allocating: the
/// experiment parser looks names up once per factor of every configuration of a matrix).
fn same_name(a: &str, b: &str) -> bool {
    if a.is_ascii() && b.is_ascii() {
        let skip = |c: &u8| *c != b'-' && *c != b'_' && !(*c as char).is_whitespace();
        a.bytes()
            .filter(skip)
            .map(|c| c.to_ascii_lowercase())
            .eq(b.bytes().filter(skip).map(|c| c.to_ascii_lowercase()))
    } else {
        normalise(a) == normalise(b)
    }
}

fn matches(name: &str, aliases: &[&str], wanted: &str) -> bool {
    same_name(name, wanted) || aliases.iter().any(|a| same_name(a, wanted))
}

/// Looks up a group by any of its names.
pub fn group(name: &str) -> Result<&'static Group> {
    GROUPS
        .iter()
        .find(|g| matches(g.name, g.aliases, name))
        .ok_or_else(|| Error::unknown("group", name, GROUPS.iter().map(|g| g.name)))
}

/// Looks up a signature / certificate key algorithm by any of its names.
pub fn sig_alg(name: &str) -> Result<&'static SigAlg> {
    SIG_ALGS
        .iter()
        .find(|s| matches(s.name, s.aliases, name) || same_name(s.scheme, name))
        .ok_or_else(|| Error::unknown("signature algorithm", name, SIG_ALGS.iter().map(|s| s.name)))
}

/// Looks up a cipher suite by any of its names.
pub fn cipher(name: &str) -> Result<&'static Cipher> {
    CIPHERS
        .iter()
        .find(|c| matches(c.name, c.aliases, name))
        .ok_or_else(|| Error::unknown("cipher suite", name, CIPHERS.iter().map(|c| c.name)))
}

/// Canonical-name lookup for names that come from this table itself.
fn group_by_name(name: &str) -> &'static Group {
    GROUPS.iter().find(|g| g.name == name).expect("hybrid component names refer to catalogue entries")
}

/// Group by its TLS code point.
pub fn group_by_code_point(cp: u16) -> Option<&'static Group> {
    GROUPS.iter().find(|g| g.code_point == cp)
}

/// Code points moved for one run, in pqtls' own terms: `name=0xNNNN` for the algorithms whose
/// code points are not IANA's (the OQS project's private-use ones and draft values), so that
/// pqtls can talk to a peer built with other code points — the idea of oqs-provider's
/// `OQS_CODEPOINT_<NAME>` environment variables, as an explicit value that a
/// [`crate::config::HandshakeConfig`] carries and every result records.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CodepointOverrides {
    /// (canonical catalogue name, code point), sorted by name, one entry per name.
    moved: Vec<(&'static str, u16)>,
}

/// Something in the catalogue that has a code point.
#[derive(Clone, Copy)]
enum Coded {
    Group(&'static Group),
    Sig(&'static SigAlg),
}

impl Coded {
    fn name(self) -> &'static str {
        match self {
            Coded::Group(g) => g.name,
            Coded::Sig(s) => s.name,
        }
    }
}

impl CodepointOverrides {
    /// No override: the catalogue's code points.
    pub fn none() -> CodepointOverrides {
        CodepointOverrides::default()
    }

    /// Names whose code point can be moved: the groups and signature algorithms without an
    /// IANA code point that pqtls negotiates itself (rustls backend). OpenSSL's own
    /// algorithms keep OpenSSL's code points.
    pub fn movable() -> Vec<&'static str> {
        let groups = GROUPS.iter().filter(|g| !g.iana && g.provided_by(Stack::Rustls)).map(|g| g.name);
        let sigs = SIG_ALGS.iter().filter(|s| !s.iana && s.provided_by(Stack::Rustls)).map(|s| s.name);
        groups.chain(sigs).collect()
    }

    fn find(name: &str) -> Option<Coded> {
        let w = normalise(name);
        GROUPS.iter().find(|g| matches(g.name, g.aliases, name)).map(Coded::Group).or_else(|| {
            SIG_ALGS.iter().find(|s| matches(s.name, s.aliases, name) || normalise(s.scheme) == w).map(Coded::Sig)
        })
    }

    /// Parses `name=0xNNNN[,name=0xNNNN…]` (decimal also accepted; empty: no override), e.g.
    /// `frodo640aes=0xFE23,falcon512=0xFED7`. Errors name what is wrong and what would work.
    pub fn parse(text: &str) -> Result<CodepointOverrides> {
        let mut out = CodepointOverrides::default();
        for item in text.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (name, value) = item.split_once('=').ok_or_else(|| {
                Error::Invalid(format!("code point override '{item}' is not name=0xNNNN (e.g. frodo640aes=0xFE00)"))
            })?;
            let (name, value) = (name.trim(), value.trim());
            let coded = Self::find(name)
                .ok_or_else(|| Error::unknown("algorithm for a code point override", name, Self::movable()))?;
            if !Self::movable().contains(&coded.name()) {
                return Err(Error::Unsupported(format!(
                    "the code point of '{}' cannot be moved (IANA-assigned, or negotiated by OpenSSL itself); movable: {}",
                    coded.name(),
                    Self::movable().join(", ")
                )));
            }
            let parsed = match value.strip_prefix("0x").or_else(|| value.strip_prefix("0X")) {
                Some(hex) => u16::from_str_radix(hex, 16),
                None => value.parse::<u16>(),
            };
            let cp = parsed.map_err(|_| {
                Error::Invalid(format!(
                    "code point '{value}' for {} is not a 16-bit number (e.g. 0xFE00)",
                    coded.name()
                ))
            })?;
            if out.moved.iter().any(|(n, _)| *n == coded.name()) {
                return Err(Error::Invalid(format!("code point of {} given twice", coded.name())));
            }
            out.moved.push((coded.name(), cp));
        }
        out.moved.sort();
        out.check_collisions()?;
        Ok(out)
    }

    /// Two algorithms of one kind (groups, or signature schemes) may not share a code point.
    fn check_collisions(&self) -> Result<()> {
        let groups = GROUPS.iter().map(|g| (g.name, self.group_code_point(g)));
        // RSA sizes share rsa_pss_rsae_sha256 on purpose: compare schemes, not key sizes.
        let mut sigs: Vec<(&str, u16)> = Vec::new();
        for s in SIG_ALGS {
            if !sigs.iter().any(|(n, _)| *n == s.scheme) {
                sigs.push((s.scheme, self.sig_code_point(s)));
            }
        }
        for (kind, list) in [("group", groups.collect::<Vec<_>>()), ("signature scheme", sigs)] {
            for (i, (a, cp)) in list.iter().enumerate() {
                if let Some((b, _)) = list[i + 1..].iter().find(|(_, c)| c == cp) {
                    return Err(Error::Invalid(format!(
                        "code point overrides give {kind}s {a} and {b} the same code point 0x{cp:04X}"
                    )));
                }
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.moved.is_empty()
    }

    /// (canonical name, code point) of every override, sorted by name.
    pub fn entries(&self) -> &[(&'static str, u16)] {
        &self.moved
    }

    fn lookup(&self, name: &str) -> Option<u16> {
        self.moved.iter().find(|(n, _)| *n == name).map(|(_, cp)| *cp)
    }

    /// The code point to use for `group` in this run.
    pub fn group_code_point(&self, group: &Group) -> u16 {
        self.lookup(group.name).unwrap_or(group.code_point)
    }

    /// The SignatureScheme code point to use for a leaf of `alg` in this run.
    pub fn sig_code_point(&self, alg: &SigAlg) -> u16 {
        self.lookup(alg.name).unwrap_or(alg.code_point)
    }

    /// The group with code point `cp` in this run.
    pub fn group_by_code_point(&self, cp: u16) -> Option<&'static Group> {
        GROUPS.iter().find(|g| self.group_code_point(g) == cp)
    }

    /// The signature algorithm whose scheme has code point `cp` in this run (the first, for
    /// the RSA sizes that share one scheme).
    pub fn sig_by_code_point(&self, cp: u16) -> Option<&'static SigAlg> {
        SIG_ALGS.iter().find(|s| self.sig_code_point(s) == cp)
    }
}

impl fmt::Display for CodepointOverrides {
    /// `name=0xNNNN,…` (parses back with [`CodepointOverrides::parse`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let items: Vec<String> = self.moved.iter().map(|(n, cp)| format!("{n}=0x{cp:04X}")).collect();
        f.write_str(&items.join(","))
    }
}

impl Serialize for CodepointOverrides {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for CodepointOverrides {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let text = String::deserialize(d)?;
        CodepointOverrides::parse(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spec_sizes() {
        assert_eq!(group("x25519").unwrap().client_share_bytes(), 32);
        assert_eq!(group("P-256").unwrap().client_share_bytes(), 65);
        let h = group("X25519MLKEM768").unwrap();
        assert_eq!((h.client_share_bytes(), h.server_share_bytes()), (1216, 1120));
        assert_eq!(group("x25519_mlkem512").unwrap().client_share_bytes(), 832);
        let f = group("frodo640aes").unwrap();
        assert_eq!((f.client_share_bytes(), f.server_share_bytes()), (9616, 9720));
        for (n, ek, ct) in [("MLKEM512", 800, 768), ("MLKEM768", 1184, 1088), ("MLKEM1024", 1568, 1568)] {
            let g = group(n).unwrap();
            assert_eq!((g.client_share_bytes(), g.server_share_bytes()), (ek, ct), "{n}");
        }
        for (n, pk, sig) in [("ML-DSA-44", 1312, 2420), ("mldsa65", 1952, 3309), ("MLDSA87", 2592, 4627)] {
            let s = sig_alg(n).unwrap();
            assert_eq!((s.public_key_bytes, s.signature_bytes), (pk, sig), "{n}");
        }
        assert_eq!(sig_alg("ed25519").unwrap().signature_bytes, 64);
        assert_eq!(sig_alg("falcon512").unwrap().public_key_bytes, 897);
    }

    #[test]
    fn names_are_unique_and_aliases_resolve() {
        let mut seen = std::collections::HashSet::new();
        for g in GROUPS {
            assert!(seen.insert(normalise(g.name)), "duplicate {}", g.name);
            for a in g.aliases {
                assert_eq!(group(a).unwrap().name, g.name);
            }
            if let Some((a, b)) = g.components() {
                assert!(!matches!(a.kind, GroupKind::Hybrid { .. }) && !matches!(b.kind, GroupKind::Hybrid { .. }));
            }
        }
        for s in SIG_ALGS {
            assert_eq!(sig_alg(s.name).unwrap().name, s.name);
            for a in s.aliases {
                assert_eq!(sig_alg(a).unwrap().name, s.name);
            }
        }
        for c in CIPHERS {
            for a in c.aliases {
                assert_eq!(cipher(a).unwrap().name, c.name);
            }
        }
    }

    #[test]
    fn oqs_code_points_are_oqs_providers() {
        // oqs-provider 0.9.0 – 0.11.0, ALGORITHMS.md (docs/oqs.md).
        for (name, cp) in [
            ("frodo640aes", 0xFE00),
            ("x25519_frodo640aes", 0xFE02),
            ("x25519_mlkem512", 0x2FB6),
            ("p256_mlkem512", 0x2F4B),
        ] {
            assert_eq!(group(name).unwrap().code_point, cp, "{name}");
        }
        assert_eq!(sig_alg("falcon512").unwrap().code_point, 0xFED7);
    }

    #[test]
    fn code_point_overrides() {
        let none = CodepointOverrides::parse("").unwrap();
        assert!(none.is_empty());
        assert_eq!(none.group_code_point(group("frodo640aes").unwrap()), 0xFE00);
        let o =
            CodepointOverrides::parse("FrodoKEM-640-AES=0xFE23, falcon512=65240,x25519_frodo640aes=0XFE25").unwrap();
        assert_eq!(o.to_string(), "falcon512=0xFED8,frodo640aes=0xFE23,x25519_frodo640aes=0xFE25");
        assert_eq!(CodepointOverrides::parse(&o.to_string()).unwrap(), o);
        assert_eq!(o.group_code_point(group("frodo640aes").unwrap()), 0xFE23);
        assert_eq!(o.group_by_code_point(0xFE23).unwrap().name, "frodo640aes");
        assert!(o.group_by_code_point(0xFE00).is_none());
        assert_eq!(o.sig_code_point(sig_alg("falcon512").unwrap()), 0xFED8);
        assert_eq!(o.sig_by_code_point(0xFED8).unwrap().name, "falcon512");
        assert_eq!(o.group_code_point(group("x25519").unwrap()), 0x001D);

        let e = CodepointOverrides::parse("kyber512=0x023A").unwrap_err().to_string();
        assert!(e.contains("kyber512") && e.contains("frodo640aes") && e.contains("falcon512"), "{e}");
        let e = CodepointOverrides::parse("X25519MLKEM768=0x2000").unwrap_err().to_string();
        assert!(e.contains("cannot be moved") && e.contains("x25519_mlkem512"), "{e}");
        let e = CodepointOverrides::parse("frodo640aes").unwrap_err().to_string();
        assert!(e.contains("name=0xNNNN"), "{e}");
        let e = CodepointOverrides::parse("frodo640aes=0x1FFFF").unwrap_err().to_string();
        assert!(e.contains("16-bit"), "{e}");
        let e = CodepointOverrides::parse("frodo640aes=0x001D").unwrap_err().to_string();
        assert!(e.contains("x25519") && e.contains("0x001D"), "{e}");
        assert!(CodepointOverrides::parse("frodo640aes=1,frodo640aes=2").is_err());
    }

    #[test]
    fn unknown_names_list_alternatives() {
        let e = group("x25520").unwrap_err().to_string();
        assert!(e.contains("x25520") && e.contains("X25519MLKEM768"), "{e}");
        let e = cipher("rc4").unwrap_err().to_string();
        assert!(e.contains("TLS_AES_128_GCM_SHA256"), "{e}");
    }
}
