//! What must hold for the s2n-tls backend: every group and leaf the catalogue lists for s2n-tls
//! negotiates exactly what was asked, with the security policy that expresses it; sizes agree
//! with the catalogue byte for byte; what no policy expresses is refused saying why; options
//! (HelloRetryRequest, mTLS, resumption, root sent, key log) work; steps add up; and every
//! client stack × server stack among OpenSSL, rustls and s2n-tls interoperates.

use pqtls_core::backend::{Backend, EndpointOptions, MemoryKeyLog, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::trace::SideSample;
use pqtls_lab::transport::{self, Handshake};
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use pqtls_s2n::S2nBackend;
use std::path::Path;
use std::sync::{Arc, OnceLock};

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn config(stack: Stack, groups: &[&str], chain: &str) -> HandshakeConfig {
    let mut c = HandshakeConfig::new(
        stack,
        catalogue::group(groups[0]).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    c.groups = groups.iter().map(|g| catalogue::group(g).unwrap()).collect();
    c
}

fn s2n(groups: &[&str], chain: &str) -> HandshakeConfig {
    config(Stack::S2n, groups, chain)
}

fn prepare(cfg: &HandshakeConfig) -> pqtls_core::Result<Box<dyn Prepared>> {
    let files = pki().files_for(cfg).expect("chain files");
    match cfg.stack {
        Stack::S2n => S2nBackend::new().prepare(cfg, &files),
        Stack::Rustls => RustlsBackend::new().prepare(cfg, &files),
        Stack::Openssl => OpensslBackend::new().prepare(cfg, &files),
        Stack::Boringssl => {
            panic!("these tests pair s2n-tls with OpenSSL and rustls; BoringSSL's are crates/pqtls-boring/tests")
        }
    }
}

fn run(cfg: &HandshakeConfig) -> pqtls_core::Result<Handshake> {
    transport::handshake(prepare(cfg)?.as_ref(), &Default::default())
}

fn sent(side: &SideSample, name: &str) -> u64 {
    side.wrote.iter().filter(|(m, _)| m.rfc_name() == name).map(|(_, b)| *b as u64).sum()
}

fn steps_add_up(h: &Handshake) {
    for side in [&h.client, &h.server] {
        assert_eq!(side.steps.values().sum::<u64>(), side.total_cpu_ns);
        assert_eq!(side.substeps.values().sum::<u64>(), side.total_cpu_ns);
    }
}

const LEAVES: &[&str] = &["rsa2048", "p256", "p384", "p521", "mldsa44", "mldsa65", "mldsa87"];

/// The key shares an s2n-tls client sends alone with TLS_AES_128_GCM_SHA256, with the chains
/// its policies sign (a lone secp384r1 or MLKEM1024 share: only policies with AES-256 alone;
/// a lone X25519MLKEM768 share with ML-DSA: pqtls' composed policy).
fn one_share_expressible(group: &str, leaf: &str) -> bool {
    let mldsa = leaf.starts_with("mldsa");
    match group {
        "x25519" | "X25519MLKEM768" => true,
        "secp256r1" => !mldsa,
        _ => false,
    }
}

#[test]
fn the_catalogue_says_exactly_what_s2n_provides() {
    let groups: Vec<&str> = catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::S2n)).map(|g| g.name).collect();
    assert_eq!(
        groups,
        [
            "secp256r1",
            "secp384r1",
            "secp521r1",
            "x25519",
            "MLKEM1024",
            "SecP256r1MLKEM768",
            "X25519MLKEM768",
            "SecP384r1MLKEM1024"
        ]
    );
    let mut leaves: Vec<&str> =
        catalogue::SIG_ALGS.iter().filter(|s| s.provided_by(Stack::S2n)).map(|s| s.name).collect();
    leaves.sort();
    let mut expected = LEAVES.to_vec();
    expected.extend(["rsa3072", "rsa4096"]);
    expected.sort();
    assert_eq!(leaves, expected);
    let ciphers: Vec<&str> =
        catalogue::CIPHERS.iter().filter(|c| c.stacks.contains(&Stack::S2n)).map(|c| c.name).collect();
    assert_eq!(ciphers, ["TLS_AES_128_GCM_SHA256", "TLS_AES_256_GCM_SHA384", "TLS_CHACHA20_POLY1305_SHA256"]);
}

#[test]
fn every_expressible_group_and_leaf_negotiates_exactly_what_was_asked() {
    let mut n = 0;
    for g in catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::S2n)) {
        for leaf in LEAVES {
            let cfg = s2n(&[g.name], &format!("{leaf}:{leaf}"));
            match run(&cfg) {
                Ok(h) => {
                    assert!(one_share_expressible(g.name, leaf), "{} should have been refused", cfg.label());
                    cfg.check(&h.negotiated, false).unwrap_or_else(|e| panic!("{e}"));
                    assert_eq!(h.negotiated.sigalg, catalogue::sig_alg(leaf).unwrap().scheme);
                    assert_eq!(h.negotiated.version, "TLSv1.3");
                    assert!(!h.negotiated.hrr && !h.negotiated.resumed);
                    steps_add_up(&h);
                    // Exact sizes: the ServerHello's share, the CertificateVerify's signature.
                    let base = run(&s2n(&["x25519"], "p256:p256")).unwrap();
                    assert_eq!(
                        sent(&h.server, "ServerHello") - sent(&base.server, "ServerHello"),
                        g.server_share_bytes() as u64 - 32,
                        "{}",
                        cfg.label()
                    );
                    let sig = catalogue::sig_alg(leaf).unwrap();
                    if !sig.variable_signature {
                        assert_eq!(sent(&h.server, "CertificateVerify"), 4 + 4 + sig.signature_bytes as u64);
                    }
                    n += 1;
                }
                Err(e) => {
                    assert!(!one_share_expressible(g.name, leaf), "{}: {e}", cfg.label());
                    let e = e.to_string();
                    assert!(e.contains("no s2n-tls security policy") && e.contains("openssl"), "{e}");
                }
            }
        }
    }
    assert_eq!(n, 7 + 4 + 7, "configurations measured");
    // Pure ML-KEM-1024 with ML-DSA-87, and a lone P-384 share: with AES-256 (CNSA 2.0 policies).
    for (group, leaf) in [("MLKEM1024", "mldsa87"), ("secp384r1", "p384")] {
        let mut cfg = s2n(&[group], &format!("{leaf}:{leaf}"));
        cfg.cipher = catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap();
        let h = run(&cfg).unwrap_or_else(|e| panic!("{}: {e}", cfg.label()));
        cfg.check(&h.negotiated, false).unwrap();
        let g = catalogue::group(group).unwrap();
        let base = run(&s2n(&["x25519"], "p256:p256")).unwrap();
        let share = sent(&h.server, "ServerHello") - sent(&base.server, "ServerHello");
        assert_eq!(share, g.server_share_bytes() as u64 - 32, "{group}");
    }
    for c in catalogue::CIPHERS.iter().filter(|c| c.stacks.contains(&Stack::S2n)) {
        let mut cfg = s2n(&["x25519"], "p256:p256");
        cfg.cipher = c;
        // s2n-tls' client offers its policy's suites; an OpenSSL server that has only the one
        // asked for picks it.
        let client = prepare(&cfg).unwrap();
        let server = prepare(&HandshakeConfig { stack: Stack::Openssl, ..cfg.clone() }).unwrap();
        let mut cl = client.client(&Default::default()).unwrap();
        let mut sv = server.server(&Default::default()).unwrap();
        transport::in_memory(cl.as_mut(), sv.as_mut()).unwrap_or_else(|e| panic!("{}: {e}", c.name));
        assert_eq!(cl.negotiated().unwrap().cipher, c.name);
    }
}

#[test]
fn key_shares_as_asked_or_refused() {
    // Two shares: the hybrid and x25519 (Chrome's), with ML-DSA.
    let mut two = s2n(&["X25519MLKEM768", "x25519"], "mldsa65:mldsa65");
    two.key_shares = two.groups.clone();
    let h = run(&two).unwrap();
    two.check(&h.negotiated, false).unwrap();
    let one = run(&s2n(&["X25519MLKEM768"], "p256:p256")).unwrap();
    let shares = |cfg: &HandshakeConfig| {
        let mut c = prepare(cfg).unwrap().client(&EndpointOptions::traced(false)).unwrap();
        c.drive().unwrap();
        let mut out = Vec::new();
        c.take_output(&mut out).unwrap();
        let msgs = pqtls_core::wire::handshake_messages(&out);
        pqtls_core::wire::client_key_shares(&msgs[0].1).unwrap()
    };
    assert_eq!(shares(&two), vec![(0x11EC, 1216), (0x001D, 32)]);
    assert_eq!(shares(&s2n(&["X25519MLKEM768"], "p256:p256")), vec![(0x11EC, 1216)]);
    // The lone hybrid share with ML-DSA (the composed policy): ML-DSA offered, one share.
    let lone = s2n(&["X25519MLKEM768"], "mldsa65:mldsa65");
    assert_eq!(shares(&lone), vec![(0x11EC, 1216)]);
    let h = run(&lone).unwrap();
    lone.check(&h.negotiated, false).unwrap();
    assert_eq!(sent(&h.server, "CertificateVerify"), 4 + 4 + 3309);
    assert!(sent(&h.client, "ClientHello") > sent(&one.client, "ClientHello"));
    // Forced HelloRetryRequest: only an x25519 share, the server picks the hybrid.
    let mut hrr = s2n(&["X25519MLKEM768", "x25519"], "p256:p256");
    hrr.key_shares = vec![catalogue::group("x25519").unwrap()];
    match run(&hrr) {
        Ok(h) => {
            hrr.check(&h.negotiated, false).unwrap();
            assert!(h.negotiated.hrr);
        }
        Err(e) => assert!(e.to_string().contains("no s2n-tls security policy"), "{e}"),
    }
    // No policy sends a lone SecP256r1MLKEM768 share.
    let p = prepare(&s2n(&["SecP256r1MLKEM768"], "p256:p256")).unwrap();
    let e = p.client(&Default::default()).err().unwrap().to_string();
    assert!(e.contains("key shares") && e.contains("openssl"), "{e}");
    // What s2n-tls lacks is refused with the stacks that have it.
    let e = prepare(&s2n(&["MLKEM768"], "p256:p256")).err().unwrap().to_string();
    assert!(e.contains("MLKEM768") && e.contains("openssl") && e.contains("rustls"), "{e}");
    let e = prepare(&s2n(&["x25519"], "ed25519:ed25519")).err().unwrap().to_string();
    assert!(e.contains("ed25519") && e.contains("openssl"), "{e}");
}

#[test]
fn resumption_mtls_root_and_key_log() {
    let mut cfg = s2n(&["x25519"], "mldsa65:mldsa65");
    cfg.resumption = true;
    let p = prepare(&cfg).unwrap();
    let full = transport::handshake(p.as_ref(), &Default::default()).unwrap();
    assert!(!full.negotiated.resumed);
    assert!(sent(&full.server, "NewSessionTicket") > 0, "{:?}", full.server.wrote);
    assert!(full.client.steps.contains_key("new_session_ticket"), "{:?}", full.client.steps);
    steps_add_up(&full);
    let again = transport::handshake(p.as_ref(), &Default::default()).unwrap();
    cfg.check(&again.negotiated, true).unwrap();
    assert!(again.negotiated.resumed);
    assert_eq!(sent(&again.server, "Certificate"), 0);
    steps_add_up(&again);
    // Without resumption: no tickets, never resumed.
    let mut off = cfg.clone();
    off.resumption = false;
    let p = prepare(&off).unwrap();
    for _ in 0..2 {
        let h = transport::handshake(p.as_ref(), &Default::default()).unwrap();
        assert!(!h.negotiated.resumed);
        assert_eq!(sent(&h.server, "NewSessionTicket"), 0);
    }
    // Mutual TLS with an ML-DSA client chain.
    let mut m = s2n(&["x25519"], "p256:p256");
    m.client_chain = Some(ChainSpec::parse("mldsa44:mldsa44").unwrap());
    let h = run(&m).unwrap();
    m.check(&h.negotiated, false).unwrap();
    assert_eq!(sent(&h.client, "CertificateVerify"), 4 + 4 + 2420);
    assert!(h.server.steps.contains_key("client_certificate_verify"), "{:?}", h.server.steps);
    assert!(h.client.steps.contains_key("client_certificate_verify"), "{:?}", h.client.steps);
    steps_add_up(&h);
    // The root sent too: a longer Certificate.
    let plain = run(&s2n(&["x25519"], "p256:p256")).unwrap();
    let mut root = s2n(&["x25519"], "p256:p256");
    root.send_root = true;
    let r = run(&root).unwrap();
    assert!(sent(&r.server, "Certificate") > sent(&plain.server, "Certificate"));
    // Parent verification is refused, naming the stacks that do it.
    let mut v = s2n(&["x25519"], "p256:p256");
    v.verify_parent = true;
    assert!(prepare(&v).err().unwrap().to_string().contains("openssl, rustls"));
    // Key log: both sides log the handshake and application secrets of the same connection.
    let p = prepare(&s2n(&["x25519"], "p256:p256")).unwrap();
    let (cl, sl) = (Arc::new(MemoryKeyLog::new()), Arc::new(MemoryKeyLog::new()));
    let mut c = p.client(&EndpointOptions { key_log: Some(cl.clone()), ..EndpointOptions::traced(false) }).unwrap();
    let mut s = p.server(&EndpointOptions { key_log: Some(sl.clone()), ..EndpointOptions::traced(false) }).unwrap();
    transport::in_memory(c.as_mut(), s.as_mut()).unwrap();
    for label in ["CLIENT_HANDSHAKE_TRAFFIC_SECRET", "SERVER_HANDSHAKE_TRAFFIC_SECRET", "CLIENT_TRAFFIC_SECRET_0"] {
        let (a, b) = (cl.get(label).expect(label), sl.get(label).expect(label));
        assert_eq!(a, b);
        assert_eq!(a.client_random.len(), 32);
    }
}

#[test]
fn a_wrong_root_fails_verification() {
    let cfg = s2n(&["x25519"], "p256:p256");
    let mut files = pki().files_for(&cfg).unwrap();
    files.server.root = pki().files_for(&s2n(&["x25519"], "p384:p384")).unwrap().server.root;
    let p = S2nBackend::new().prepare(&cfg, &files).unwrap();
    let e = transport::handshake(p.as_ref(), &Default::default()).unwrap_err().to_string();
    assert!(e.contains("s2n") && e.to_lowercase().contains("cert"), "{e}");
}

#[test]
fn steps_name_the_messages_and_application_data_flows() {
    let h = run(&s2n(&["X25519MLKEM768"], "p256:p256")).unwrap();
    for (side, steps) in [
        (&h.client, &["client_hello", "server_hello", "certificate", "certificate_verify", "finished"][..]),
        (&h.server, &["client_hello", "server_hello", "certificate_verify", "finished", "client_finished"][..]),
    ] {
        for step in steps {
            assert!(side.steps.get(*step).is_some_and(|ns| *ns > 0), "{step} missing: {:?}", side.steps);
        }
    }
    steps_add_up(&h);
    // Application data both ways, then close_notify.
    let p = prepare(&s2n(&["x25519"], "p256:p256")).unwrap();
    let mut c = p.client(&Default::default()).unwrap();
    let mut s = p.server(&Default::default()).unwrap();
    transport::in_memory(c.as_mut(), s.as_mut()).unwrap();
    let mut wire = Vec::new();
    c.write_app(b"ping").unwrap();
    c.close().unwrap();
    c.take_output(&mut wire).unwrap();
    s.receive(&wire).unwrap();
    let mut got = Vec::new();
    s.read_app(&mut got).unwrap();
    assert_eq!(got, b"ping");
    assert!(s.peer_closed());
    let sample = pqtls_core::trace::attribute(c.trace());
    assert!(sample.steps.contains_key("app_write") && sample.steps.contains_key("close"));
}

/// Every client stack × server stack among OpenSSL, rustls and s2n-tls, for every group and
/// leaf they share, full and resumed handshakes, and mutual TLS.
#[test]
fn interop_between_the_three_stacks() {
    let stacks = [Stack::Openssl, Stack::Rustls, Stack::S2n];
    let mut n = 0;
    for g in catalogue::GROUPS.iter().filter(|g| stacks.iter().all(|s| g.provided_by(*s))) {
        for leaf in LEAVES {
            let chain = format!("{leaf}:{leaf}");
            for client in stacks {
                for server in stacks {
                    let mut ccfg = config(client, &[g.name], &chain);
                    let mut scfg = config(server, &[g.name], &chain);
                    // An s2n-tls client sends its policy's key shares: give the hybrid the
                    // x25519 share it then sends on every stack, or skip what no policy sends.
                    if client == Stack::S2n && !one_share_expressible(g.name, leaf) {
                        if g.name == "X25519MLKEM768" {
                            ccfg.groups.push(catalogue::group("x25519").unwrap());
                            ccfg.key_shares = ccfg.groups.clone();
                        } else {
                            continue;
                        }
                    }
                    ccfg.resumption = true;
                    scfg.resumption = true;
                    let (cp, sp) = (prepare(&ccfg).unwrap(), prepare(&scfg).unwrap());
                    let who = format!("{client}→{server} {} {chain}", g.name);
                    for resumed in [false, true] {
                        let mut c = cp.client(&Default::default()).unwrap();
                        let mut s = sp.server(&Default::default()).unwrap();
                        transport::in_memory(c.as_mut(), s.as_mut()).unwrap_or_else(|e| panic!("{who}: {e}"));
                        let neg = c.negotiated().unwrap();
                        assert_eq!(neg.group, g.name, "{who}");
                        assert_eq!(neg.resumed, resumed, "{who}");
                        if !resumed {
                            assert_eq!(neg.sigalg, catalogue::sig_alg(leaf).unwrap().scheme, "{who}");
                        }
                        c.finish().unwrap();
                        n += 1;
                    }
                    // Mutual TLS, the same chain both ways.
                    for cfg in [&mut ccfg, &mut scfg] {
                        cfg.resumption = false;
                        cfg.client_chain = Some(ChainSpec::parse(&chain).unwrap());
                    }
                    let (cp, sp) = (prepare(&ccfg).unwrap(), prepare(&scfg).unwrap());
                    let mut c = cp.client(&Default::default()).unwrap();
                    let mut s = sp.server(&Default::default()).unwrap();
                    transport::in_memory(c.as_mut(), s.as_mut()).unwrap_or_else(|e| panic!("{who} mTLS: {e}"));
                    n += 1;
                }
            }
        }
    }
    eprintln!("{n} handshakes");
    assert!(n > 300, "{n} handshakes");
}
