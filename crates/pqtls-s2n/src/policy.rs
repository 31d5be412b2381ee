//! s2n-tls security policies as pqtls configuration.
//!
//! s2n-tls takes its groups, signature schemes and cipher suites from a *named* security policy
//! (`s2n_config_set_cipher_preferences`); it has no API to build one. Its client offers every
//! TLS 1.3 group of the policy (the KEM groups first, then the curves) and sends a key share
//! for the first KEM group and for the first curve — no more, no fewer. So a pqtls
//! configuration is mapped onto the named policy that sends **exactly** its key shares, offers
//! **all** its groups, and signs / verifies its chain's schemes; the fewest extra groups win.
//! A configuration no policy expresses is refused, naming the closest policy and why.
//!
//! One configuration no named policy expresses — a lone X25519MLKEM768 key share with ML-DSA
//! chains — gets a policy composed from s2n-tls' own preference lists (`composed`;
//! csrc/policy.c): the groups, curves and suites of `test_pq_only` with the signature schemes
//! of s2n-tls' ML-DSA policies. Clients only: servers keep s2n-tls' named policies.
//!
//! The table below is what the linked s2n-tls (0.3.47, `lib/tls/s2n_security_policies.c`,
//! `s2n_kem_preferences.c`, `s2n_ecc_preferences.c`) defines for these policies; every
//! client handshake checks it on the wire (the ClientHello's supported_groups and key_share:
//! `crate::check_client_hello`), so a table out of date with the library fails loudly.
//! Cipher suites are not in the table: the client's ClientHello must offer the requested
//! suite, and the negotiated one is checked after every handshake.

use pqtls_core::catalogue::Group;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::{Error, Result};

/// One s2n-tls named security policy, as far as TLS 1.3 goes.
#[derive(Debug, PartialEq, Eq)]
pub struct Policy {
    /// The name s2n-tls knows it by.
    pub name: &'static str,
    /// The TLS 1.3 groups its client offers, in order (catalogue names).
    pub groups: &'static [&'static str],
    /// The groups its client sends key shares for.
    pub shares: &'static [&'static str],
    /// The ML-DSA parameter sets it signs and verifies with.
    pub mldsa: &'static [&'static str],
    /// It has ECDSA and RSA-PSS signature schemes.
    pub classical_sigs: bool,
    /// Its TLS 1.3 cipher suites.
    pub ciphers: &'static [&'static str],
    /// Not one of s2n-tls' named policies but pqtls' composition of its preference lists
    /// (csrc/policy.c), set on a configuration after `named` (the policy it starts from).
    pub composed: Option<&'static str>,
}

impl Policy {
    /// The named s2n-tls policy a configuration is built with (for a composed policy, the one
    /// it starts from).
    pub fn named(&self) -> &'static str {
        self.composed.unwrap_or(self.name)
    }
}

/// The TLS 1.3 suites of most policies (`S2N_TLS13_CLOUDFRONT_CIPHER_SUITES_20200716` and the
/// test policies).
const SUITES: &[&str] = &["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"];
/// The CNSA-style policies' one suite (`cipher_suites_20250211`).
const AES256: &[&str] = &["TLS_AES_256_GCM_SHA384"];

const P256: &str = "secp256r1";
const P384: &str = "secp384r1";
const P521: &str = "secp521r1";
const X25519: &str = "x25519";
const X_MLKEM: &str = "X25519MLKEM768";
const P256_MLKEM: &str = "SecP256r1MLKEM768";
const P384_MLKEM: &str = "SecP384r1MLKEM1024";
const MLKEM1024: &str = "MLKEM1024";

/// ML-DSA parameter sets of a policy's signature schemes.
const MLDSA_ALL: &[&str] = &["mldsa44", "mldsa65", "mldsa87"];

/// The candidate policies; among those that fit, the one with the fewest groups, then the
/// first listed (TLS 1.3-only policies first: the others' ClientHello also offers TLS 1.2).
pub static POLICIES: &[Policy] = &[
    Policy {
        name: "20250414",
        groups: &[P384],
        shares: &[P384],
        mldsa: &[],
        classical_sigs: true,
        ciphers: AES256,
        composed: None,
    },
    Policy {
        name: "20260219",
        groups: &[MLKEM1024],
        shares: &[MLKEM1024],
        mldsa: &["mldsa87"],
        classical_sigs: false,
        ciphers: AES256,
        composed: None,
    },
    Policy {
        name: "AWS-CRT-SDK-TLSv1.3",
        groups: &[X25519, P256, P384],
        shares: &[X25519],
        mldsa: &[],
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    Policy {
        name: "AWS-CRT-SDK-TLSv1.3-2023",
        groups: &[P256, X25519, P384],
        shares: &[P256],
        mldsa: &[],
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    Policy {
        name: "20260513",
        groups: &[MLKEM1024, P384],
        shares: &[MLKEM1024, P384],
        mldsa: &[],
        classical_sigs: true,
        ciphers: AES256,
        composed: None,
    },
    Policy {
        name: "test_pq_only",
        groups: &[X_MLKEM, P256_MLKEM, P384_MLKEM, MLKEM1024],
        shares: &[X_MLKEM],
        mldsa: &[],
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    Policy {
        name: "pqtls-pq-only-mldsa",
        groups: &[X_MLKEM, P256_MLKEM, P384_MLKEM, MLKEM1024],
        shares: &[X_MLKEM],
        mldsa: MLDSA_ALL,
        classical_sigs: true,
        ciphers: SUITES,
        composed: Some("test_pq_only"),
    },
    Policy {
        name: "CloudFront-TLS-1-3-2025",
        groups: &[X_MLKEM, P256_MLKEM, X25519, P256, P384],
        shares: &[X_MLKEM, X25519],
        mldsa: &[],
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    Policy {
        name: "CloudFront-Upstream-TLS-1-3-2025-PQ",
        groups: &[X_MLKEM, P256_MLKEM, P384_MLKEM, P256, X25519, P384],
        shares: &[X_MLKEM, P256],
        mldsa: MLDSA_ALL,
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    Policy {
        name: "ELBSecurityPolicy-TLS13-1-3-PQ-2025-09",
        groups: &[X_MLKEM, P256_MLKEM, P384_MLKEM, X25519, P256, P384, P521],
        shares: &[X_MLKEM, X25519],
        mldsa: &[],
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    // Not TLS 1.3-only (their ClientHello offers TLS 1.2 too): the only ones with ML-DSA and
    // an x25519 share, or with P-521.
    Policy {
        name: "test_all_tls13",
        groups: &[X25519, P256, P384, P521],
        shares: &[X25519],
        mldsa: MLDSA_ALL,
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    Policy {
        name: "default_pq",
        groups: &[X_MLKEM, P256_MLKEM, P384_MLKEM, P256, X25519, P384, P521],
        shares: &[X_MLKEM, P256],
        mldsa: MLDSA_ALL,
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
    Policy {
        name: "test_all",
        groups: &[X_MLKEM, P256_MLKEM, P384_MLKEM, MLKEM1024, X25519, P256, P384, P521],
        shares: &[X_MLKEM, X25519],
        mldsa: MLDSA_ALL,
        classical_sigs: true,
        ciphers: SUITES,
        composed: None,
    },
];

/// Whether `p` signs and verifies every signature of `cfg`'s chains (leaf and parents), and
/// has its cipher suite.
fn signs(p: &Policy, cfg: &HandshakeConfig) -> bool {
    p.ciphers.contains(&cfg.cipher.name) && signs_chains(p, cfg)
}

fn signs_chains(p: &Policy, cfg: &HandshakeConfig) -> bool {
    std::iter::once(&cfg.chain).chain(cfg.client_chain.iter()).flat_map(|c| c.algs()).all(|alg| {
        if alg.name.starts_with("mldsa") {
            p.mldsa.contains(&alg.name)
        } else {
            p.classical_sigs
        }
    })
}

fn names(groups: &[&'static Group]) -> Vec<&'static str> {
    groups.iter().map(|g| g.name).collect()
}

fn same_set(a: &[&str], b: &[&str]) -> bool {
    a.len() == b.len() && a.iter().all(|x| b.contains(x))
}

/// The policy of `cfg`'s client: exactly its key shares, all its groups, its signatures.
pub fn client(cfg: &HandshakeConfig) -> Result<&'static Policy> {
    let shares = names(&cfg.shares());
    let groups = names(&cfg.groups);
    let fits = |p: &&Policy| same_set(p.shares, &shares) && groups.iter().all(|g| p.groups.contains(g));
    if let Some(p) = POLICIES.iter().filter(fits).filter(|p| signs(p, cfg)).min_by_key(|p| p.groups.len()) {
        return Ok(p);
    }
    let sent: Vec<String> = POLICIES.iter().map(|p| format!("{} ({})", p.shares.join("+"), p.name)).collect();
    let why = match POLICIES.iter().find(fits) {
        Some(p) => format!(
            "policy {} sends those key shares but does not sign/verify the chain {} (its ML-DSA: {}) or lacks {} \
             (its suites: {})",
            p.name,
            cfg.chain,
            if p.mldsa.is_empty() { "none".to_string() } else { p.mldsa.join(", ") },
            cfg.cipher.name,
            p.ciphers.join(", ")
        ),
        None => format!("the key shares s2n-tls clients send are: {}", sent.join(", ")),
    };
    Err(Error::Unsupported(format!(
        "no s2n-tls security policy makes a client offering {} with key shares {} and chain {}: {why}; \
         s2n-tls sends a key share for its policy's first KEM group and its first curve, no other \
         (e.g. --group X25519MLKEM768+x25519 --key-shares X25519MLKEM768+x25519 with ML-DSA chains); stacks that send any key shares: openssl",
        groups.join(","),
        shares.join(","),
        cfg.chain
    )))
}

/// The policy of `cfg`'s server: it has the group to negotiate and signs/verifies the chains.
/// The server selects the group; it is checked after the handshake (negotiated = requested).
pub fn server(cfg: &HandshakeConfig) -> Result<&'static Policy> {
    let group = cfg.expected_group().name;
    POLICIES
        .iter()
        .filter(|p| p.composed.is_none() && p.groups.contains(&group) && signs(p, cfg))
        .min_by_key(|p| p.groups.len())
        .ok_or_else(|| {
            Error::Unsupported(format!(
                "no s2n-tls security policy has group {group} with the signatures of chain {} and cipher {}; \
                 s2n-tls' TLS 1.3 groups: {}",
                cfg.chain,
                cfg.cipher.name,
                [X25519, P256, P384, P521, X_MLKEM, P256_MLKEM, P384_MLKEM, MLKEM1024].join(", ")
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::catalogue::{self, Stack};
    use pqtls_core::config::ChainSpec;

    fn cfg(group: &str, chain: &str) -> HandshakeConfig {
        HandshakeConfig::new(
            Stack::S2n,
            catalogue::group(group).unwrap(),
            ChainSpec::parse(chain).unwrap(),
            catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
        )
    }

    #[test]
    fn one_share_configurations_map_to_the_policy_with_fewest_extra_groups() {
        assert_eq!(client(&cfg("x25519", "p256:p256")).unwrap().name, "AWS-CRT-SDK-TLSv1.3");
        assert_eq!(client(&cfg("x25519", "mldsa65:mldsa65")).unwrap().name, "test_all_tls13");
        assert_eq!(client(&cfg("secp256r1", "p256:p256")).unwrap().name, "AWS-CRT-SDK-TLSv1.3-2023");
        assert_eq!(client(&cfg("X25519MLKEM768", "p256:p256")).unwrap().name, "test_pq_only");
        let mut pure = cfg("MLKEM1024", "mldsa87:mldsa87");
        assert!(client(&pure).unwrap_err().to_string().contains("TLS_AES_128_GCM_SHA256"));
        pure.cipher = catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap();
        assert_eq!(client(&pure).unwrap().name, "20260219");
        assert_eq!(
            server(&cfg("X25519MLKEM768", "mldsa65:mldsa65")).unwrap().name,
            "CloudFront-Upstream-TLS-1-3-2025-PQ"
        );
    }

    #[test]
    fn a_lone_hybrid_share_with_ml_dsa_gets_the_composed_policy() {
        let p = client(&cfg("X25519MLKEM768", "mldsa65:mldsa65")).unwrap();
        assert_eq!((p.name, p.named()), ("pqtls-pq-only-mldsa", "test_pq_only"));
        // Without ML-DSA the named policy with the same groups is preferred.
        assert_eq!(client(&cfg("X25519MLKEM768", "p256:p256")).unwrap().named(), "test_pq_only");
        assert!(client(&cfg("X25519MLKEM768", "p256:p256")).unwrap().composed.is_none());
    }

    #[test]
    fn what_no_policy_sends_is_refused_saying_why() {
        let mut c = cfg("X25519MLKEM768", "mldsa65:mldsa65");
        c.key_shares = vec![catalogue::group("X25519MLKEM768").unwrap(), catalogue::group("x25519").unwrap()];
        assert_eq!(client(&c).unwrap().name, "test_all");
        c.key_shares = vec![catalogue::group("X25519MLKEM768").unwrap(), catalogue::group("secp256r1").unwrap()];
        assert_eq!(client(&c).unwrap().name, "CloudFront-Upstream-TLS-1-3-2025-PQ");
        let e = client(&cfg("SecP256r1MLKEM768", "p256:p256")).unwrap_err().to_string();
        assert!(e.contains("key shares") && e.contains("--key-shares"), "{e}");
        let e = client(&cfg("MLKEM1024", "mldsa65:mldsa65")).unwrap_err().to_string();
        assert!(e.contains("20260219") && e.contains("mldsa87"), "{e}");
    }
}
