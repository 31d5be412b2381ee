//! BoringSSL against the other stacks, in process over the Endpoint interface: each client ×
//! each server, for every group and leaf both provide (full handshakes), then mutual TLS and
//! resumption across stacks; with s2n-tls, every shared group and leaf full, resumed and
//! mutual, both ways (the four-stack matrix: the pairs without BoringSSL are
//! crates/pqtls-s2n/tests and the OpenSSL × rustls suites).

use pqtls_boring::BoringBackend;
use pqtls_core::backend::{Backend, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_lab::transport;
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::path::Path;
use std::sync::OnceLock;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn backend(stack: Stack) -> Box<dyn Backend> {
    match stack {
        Stack::Openssl => Box::new(OpensslBackend::new()),
        Stack::Rustls => Box::new(RustlsBackend::new()),
        Stack::Boringssl => Box::new(BoringBackend::new()),
        Stack::S2n => Box::new(pqtls_s2n::S2nBackend::new()),
    }
}

fn config(stack: Stack, group: &str, chain: &str) -> HandshakeConfig {
    HandshakeConfig::new(
        stack,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    )
}

fn prepare(cfg: &HandshakeConfig) -> Box<dyn Prepared> {
    backend(cfg.stack).prepare(cfg, &pki().files_for(cfg).unwrap()).unwrap()
}

/// One handshake from `client`'s client to `server`'s server; returns the client's view.
fn handshake(client: &dyn Prepared, server: &dyn Prepared, who: &str) -> pqtls_core::backend::Negotiated {
    let mut c = client.client(&Default::default()).unwrap();
    let mut s = server.server(&Default::default()).unwrap();
    transport::in_memory(c.as_mut(), s.as_mut()).unwrap_or_else(|e| panic!("{who}: {e}"));
    for ep in [&mut c, &mut s] {
        ep.finish().unwrap();
    }
    c.negotiated().unwrap()
}

#[test]
fn every_shared_group_and_leaf_both_ways_with_openssl_and_rustls() {
    let mut n = 0;
    for other in [Stack::Openssl, Stack::Rustls] {
        let both = |s: &[Stack]| s.contains(&Stack::Boringssl) && s.contains(&other);
        for g in catalogue::GROUPS.iter().filter(|g| both(g.stacks)) {
            for leaf in catalogue::SIG_ALGS.iter().filter(|s| both(s.tls_stacks)) {
                let chain = format!("{0}:{0}", leaf.name);
                let b = prepare(&config(Stack::Boringssl, g.name, &chain));
                let o = prepare(&config(other, g.name, &chain));
                for (client, server, who) in
                    [(&b, &o, format!("boringssl→{other}")), (&o, &b, format!("{other}→boringssl"))]
                {
                    let neg = handshake(client.as_ref(), server.as_ref(), &format!("{who} {} {chain}", g.name));
                    assert_eq!(neg.group, g.name, "{who}");
                    assert_eq!(neg.sigalg, leaf.scheme, "{who} {chain}");
                    assert_eq!(neg.cipher, "TLS_AES_128_GCM_SHA256", "{who}");
                    n += 1;
                }
            }
        }
    }
    // 6 groups × 10 leaves × 2 directions × 2 stacks.
    assert_eq!(n, 240);
}

#[test]
fn mutual_tls_and_resumption_across_stacks() {
    for other in [Stack::Openssl, Stack::Rustls] {
        // Client leaves BoringSSL does not verify by default (P-521, Ed25519, ML-DSA): its
        // server asks for what the client's leaf signs with.
        for client_chain in ["p256:p256", "p521:p521", "ed25519:ed25519", "mldsa44:mldsa44"] {
            let with_client = |stack| {
                let mut cfg = config(stack, "X25519MLKEM768", "mldsa65:mldsa65");
                cfg.client_chain = Some(ChainSpec::parse(client_chain).unwrap());
                prepare(&cfg)
            };
            let (b, o) = (with_client(Stack::Boringssl), with_client(other));
            for (client, server, who) in [(&b, &o, "boringssl client"), (&o, &b, "boringssl server")] {
                let neg = handshake(client.as_ref(), server.as_ref(), &format!("mTLS {client_chain} {who} / {other}"));
                assert_eq!(neg.sigalg, "mldsa65", "{who} / {other}");
            }
        }
        let resumable = |stack| {
            let mut cfg = config(stack, "X25519MLKEM768", "p256:p256");
            cfg.resumption = true;
            prepare(&cfg)
        };
        let (b, o) = (resumable(Stack::Boringssl), resumable(other));
        for (client, server, who) in [(&b, &o, "boringssl client"), (&o, &b, "boringssl server")] {
            let first = handshake(client.as_ref(), server.as_ref(), &format!("first {who} / {other}"));
            assert!(!first.resumed);
            let second = handshake(client.as_ref(), server.as_ref(), &format!("resumed {who} / {other}"));
            assert!(second.resumed, "{who} / {other}: the second handshake resumes");
            assert_eq!(second.group, "X25519MLKEM768");
        }
    }
}

/// BoringSSL × s2n-tls, each client with each server, for every group and leaf both have: a
/// full handshake, a resumed one, and mutual TLS (the same chain both ways). An s2n-tls client
/// sends its named policy's key shares: where no policy sends the lone share asked for, the
/// hybrid gets the x25519 share those policies send with it (Chrome's pair), and what no policy
/// sends at all is left out, counted.
#[test]
fn every_shared_group_and_leaf_full_resumed_and_mutual_with_s2n_both_ways() {
    let both = |s: &[Stack]| s.contains(&Stack::Boringssl) && s.contains(&Stack::S2n);
    let (mut n, mut not_expressible) = (0, Vec::new());
    for g in catalogue::GROUPS.iter().filter(|g| both(g.stacks)) {
        for leaf in catalogue::SIG_ALGS.iter().filter(|s| both(s.tls_stacks)) {
            let chain = format!("{0}:{0}", leaf.name);
            for (client, server) in [(Stack::Boringssl, Stack::S2n), (Stack::S2n, Stack::Boringssl)] {
                let who = format!("{client}→{server} {} {chain}", g.name);
                let (mut ccfg, mut scfg) = (config(client, g.name, &chain), config(server, g.name, &chain));
                if client == Stack::S2n && pqtls_s2n::policy::client(&ccfg).is_err() {
                    if g.name != "X25519MLKEM768" {
                        not_expressible.push(who);
                        continue;
                    }
                    for cfg in [&mut ccfg, &mut scfg] {
                        cfg.groups.push(catalogue::group("x25519").unwrap());
                        cfg.key_shares = cfg.groups.clone();
                    }
                    if pqtls_s2n::policy::client(&ccfg).is_err() {
                        not_expressible.push(who);
                        continue;
                    }
                }
                for cfg in [&mut ccfg, &mut scfg] {
                    cfg.resumption = true;
                }
                let (c, s) = (prepare(&ccfg), prepare(&scfg));
                let full = handshake(c.as_ref(), s.as_ref(), &who);
                assert_eq!((full.group.as_str(), full.resumed), (g.name, false), "{who}");
                assert_eq!(full.sigalg, leaf.scheme, "{who}");
                let resumed = handshake(c.as_ref(), s.as_ref(), &format!("resumed {who}"));
                assert_eq!((resumed.group.as_str(), resumed.resumed), (g.name, true), "{who}");
                for cfg in [&mut ccfg, &mut scfg] {
                    cfg.resumption = false;
                    cfg.client_chain = Some(ChainSpec::parse(&chain).unwrap());
                }
                let mutual = handshake(prepare(&ccfg).as_ref(), prepare(&scfg).as_ref(), &format!("mTLS {who}"));
                assert_eq!(mutual.sigalg, leaf.scheme, "mTLS {who}");
                n += 3;
            }
        }
    }
    eprintln!("{n} handshakes; no s2n-tls policy sends: {not_expressible:?}");
    // Every shared group and leaf from the BoringSSL client; from the s2n-tls client, at least
    // x25519 and the hybrid with every leaf.
    let shared =
        |l: &dyn Fn(&catalogue::Group) -> bool| catalogue::GROUPS.iter().filter(|g| both(g.stacks) && l(g)).count();
    let leaves = catalogue::SIG_ALGS.iter().filter(|s| both(s.tls_stacks)).count();
    assert!(n >= 3 * leaves * (shared(&|_| true) + 2), "{n} handshakes");
}
