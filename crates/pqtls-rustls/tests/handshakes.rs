//! What must hold for the rustls backend: every group and leaf the catalogue lists for rustls
//! negotiates exactly what was asked; sizes agree with the standards byte for byte; the
//! key-share strategies send what they say; options (HRR, mTLS, resumption, root sent,
//! parent verified) work; and rustls interoperates with the OpenSSL backend both ways.

use pqtls_core::backend::{Backend, EndpointOptions, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::trace::SideSample;
use pqtls_lab::transport::{self, Handshake};
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::path::Path;
use std::sync::OnceLock;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn config(stack: Stack, groups: &[&str], chain: &str, cipher: &str) -> HandshakeConfig {
    let mut c = HandshakeConfig::new(
        stack,
        catalogue::group(groups[0]).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher(cipher).unwrap(),
    );
    c.groups = groups.iter().map(|g| catalogue::group(g).unwrap()).collect();
    c
}

fn rustls(groups: &[&str], chain: &str) -> HandshakeConfig {
    config(Stack::Rustls, groups, chain, "TLS_AES_128_GCM_SHA256")
}

fn prepare(cfg: &HandshakeConfig) -> pqtls_core::Result<Box<dyn Prepared>> {
    let files = pki().files_for(cfg).expect("chain files");
    match cfg.stack {
        Stack::Rustls => RustlsBackend::new().prepare(cfg, &files),
        Stack::Openssl => OpensslBackend::new().prepare(cfg, &files),
        Stack::S2n => panic!("these tests run OpenSSL and rustls; s2n-tls' are crates/pqtls-s2n/tests"),
        Stack::Boringssl => pqtls_boring::BoringBackend::new().prepare(cfg, &files),
    }
}

fn run(cfg: &HandshakeConfig) -> pqtls_core::Result<Handshake> {
    transport::handshake(prepare(cfg)?.as_ref(), &Default::default())
}

fn sent(side: &SideSample, name: &str) -> u64 {
    side.wrote.iter().filter(|(m, _)| m.rfc_name() == name).map(|(_, b)| *b as u64).sum()
}

const LEAVES: &[&str] = &["rsa2048", "p256", "p384", "p521", "ed25519", "mldsa44", "mldsa65", "mldsa87"];

#[test]
fn the_catalogue_says_exactly_what_rustls_provides() {
    let leaves: Vec<&str> =
        catalogue::SIG_ALGS.iter().filter(|s| s.provided_by(Stack::Rustls)).map(|s| s.name).collect();
    let mut expected = LEAVES.to_vec();
    expected.extend(["rsa3072", "rsa4096"]);
    // From liboqs / OpenSSL's libcrypto through crates/pqtls-oqs.
    expected.extend(["falcon512", "mldsa44_ed25519", "slhdsa-sha2-128s", "slhdsa-sha2-128f"]);
    expected.extend(["slhdsa-shake-128s", "slhdsa-shake-128f"]);
    let mut got = leaves.clone();
    got.sort();
    expected.sort();
    assert_eq!(got, expected);
    let groups: Vec<&str> = catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Rustls)).map(|g| g.name).collect();
    assert_eq!(
        groups,
        [
            "secp256r1",
            "secp384r1",
            "secp521r1",
            "x25519",
            "MLKEM512",
            "MLKEM768",
            "MLKEM1024",
            "SecP256r1MLKEM768",
            "X25519MLKEM768",
            "SecP384r1MLKEM1024",
            "frodo640aes",
            "x25519_frodo640aes",
            "x25519_mlkem512",
            "p256_mlkem512"
        ]
    );
    let ciphers: Vec<&str> =
        catalogue::CIPHERS.iter().filter(|c| c.stacks.contains(&Stack::Rustls)).map(|c| c.name).collect();
    assert_eq!(ciphers.len(), 3);
    // What rustls lacks is refused with the stacks that have it.
    for g in ["x448", "ffdhe3072"] {
        let e = prepare(&rustls(&[g], "p256:p256")).err().expect(g).to_string();
        assert!(e.contains("not available on rustls") && e.contains("openssl"), "{e}");
    }
    let e = prepare(&rustls(&["x25519"], "ed448:ed448")).err().unwrap().to_string();
    assert!(e.contains("cannot sign TLS handshakes on rustls") && e.contains("openssl"), "{e}");
    let e = prepare(&config(Stack::Rustls, &["x25519"], "p256:p256", "TLS_AES_128_CCM_SHA256")).err().unwrap();
    assert!(e.to_string().contains("openssl"), "{e}");
}

#[test]
fn every_group_leaf_and_cipher_negotiates_exactly_what_was_asked() {
    let mut n = 0;
    for g in catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Rustls)) {
        for leaf in LEAVES {
            let cfg = rustls(&[g.name], &format!("{leaf}:{leaf}"));
            let h = run(&cfg).unwrap_or_else(|e| panic!("{}: {e}", cfg.label()));
            cfg.check(&h.negotiated, false).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(h.negotiated.sigalg, catalogue::sig_alg(leaf).unwrap().scheme);
            assert!(!h.negotiated.hrr && !h.negotiated.resumed);
            // Key shares on the wire, byte for byte.
            let ch = sent(&h.client, "ClientHello");
            let sh = sent(&h.server, "ServerHello");
            assert!(ch > 0 && sh > 0, "{}", cfg.label());
            n += 1;
        }
    }
    for c in catalogue::CIPHERS.iter().filter(|c| c.stacks.contains(&Stack::Rustls)) {
        let cfg = config(Stack::Rustls, &["X25519MLKEM768"], "mldsa65:mldsa65", c.name);
        let h = run(&cfg).unwrap();
        cfg.check(&h.negotiated, false).unwrap();
        assert_eq!(h.negotiated.cipher, c.name);
        n += 1;
    }
    assert_eq!(n, 14 * 8 + 3);
}

#[test]
fn share_sizes_are_exact() {
    let ch = |g: &str| {
        let h = run(&rustls(&[g], "p256:p256")).unwrap();
        (sent(&h.client, "ClientHello"), sent(&h.server, "ServerHello"))
    };
    let (ch_x, sh_x) = ch("x25519");
    for g in catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Rustls)) {
        let (c, s) = ch(g.name);
        assert_eq!(c - ch_x, g.client_share_bytes() as u64 - 32, "{} ClientHello", g.name);
        assert_eq!(s - sh_x, g.server_share_bytes() as u64 - 32, "{} ServerHello", g.name);
    }
}

#[test]
fn certificate_sizes_and_signatures_are_exact() {
    // An ML-DSA-65 leaf signs with a 3309-byte signature: CertificateVerify = 4 + 2 + 2 + 3309.
    let h = run(&rustls(&["x25519"], "mldsa65:mldsa65")).unwrap();
    assert_eq!(sent(&h.server, "CertificateVerify"), 4 + 4 + 3309);
    let h44 = run(&rustls(&["x25519"], "mldsa44:mldsa44")).unwrap();
    assert_eq!(sent(&h44.server, "CertificateVerify"), 4 + 4 + 2420);
    let h87 = run(&rustls(&["x25519"], "mldsa87:mldsa87")).unwrap();
    assert_eq!(sent(&h87.server, "CertificateVerify"), 4 + 4 + 4627);
    let e = run(&rustls(&["x25519"], "ed25519:ed25519")).unwrap();
    assert_eq!(sent(&e.server, "CertificateVerify"), 4 + 4 + 64);
    // The Certificate message is the chain file's DER plus framing: same as OpenSSL's.
    for chain in ["p256:p256", "mldsa65:mldsa65", "mldsa44:mldsa87", "rsa2048:rsa4096"] {
        let r = run(&rustls(&["x25519"], chain)).unwrap();
        let o = run(&config(Stack::Openssl, &["x25519"], chain, "TLS_AES_128_GCM_SHA256")).unwrap();
        assert_eq!(sent(&r.server, "Certificate"), sent(&o.server, "Certificate"), "{chain}");
        if !ChainSpec::parse(chain).unwrap().leaf.variable_signature {
            assert_eq!(sent(&r.server, "CertificateVerify"), sent(&o.server, "CertificateVerify"), "{chain}");
        }
        assert_eq!(sent(&r.server, "ServerHello"), sent(&o.server, "ServerHello"), "{chain}");
        // Sending the root adds its DER, a 3-byte length and 2 bytes of (empty) extensions.
        let mut with_root = rustls(&["x25519"], chain);
        with_root.send_root = true;
        let wr = run(&with_root).unwrap();
        let root_len = std::fs::metadata(pki().files_for(&with_root).unwrap().server.root).map(|m| m.len()).unwrap();
        assert!(sent(&wr.server, "Certificate") > sent(&r.server, "Certificate"), "{chain}");
        assert!(sent(&wr.server, "Certificate") - sent(&r.server, "Certificate") < root_len, "{chain}: DER < PEM");
    }
}

#[test]
fn key_share_strategies() {
    // One share: only the hybrid.
    let one = rustls(&["X25519MLKEM768", "x25519"], "p256:p256");
    let h1 = run(&one).unwrap();
    one.check(&h1.negotiated, false).unwrap();
    // Two independent shares: hybrid + a second X25519 key.
    let mut two = one.clone();
    two.key_shares = two.groups.clone();
    let h2 = run(&two).unwrap();
    two.check(&h2.negotiated, false).unwrap();
    // Shared X25519 half: the x25519 share repeats the hybrid's X25519 public key.
    let mut shared = two.clone();
    shared.share_x25519 = true;
    let h3 = run(&shared).unwrap();
    shared.check(&h3.negotiated, false).unwrap();
    let (c1, c2, c3) =
        (sent(&h1.client, "ClientHello"), sent(&h2.client, "ClientHello"), sent(&h3.client, "ClientHello"));
    // A second share costs its entry (2 + 2 + 32 bytes); both strategies put the same bytes
    // on the wire, the shared one saves the key generation (one X25519 keygen fewer).
    assert_eq!(c2 - c1, 36);
    assert_eq!(c3, c2);
    // The key_share extension, as sent.
    let shares = |cfg: &HandshakeConfig| {
        let mut c = prepare(cfg).unwrap().client(&EndpointOptions::traced(false)).unwrap();
        let mut out = Vec::new();
        c.take_output(&mut out).unwrap();
        let msgs = pqtls_core::wire::handshake_messages(&out);
        pqtls_core::wire::client_key_shares(&msgs[0].1).unwrap()
    };
    assert_eq!(shares(&one), vec![(0x11EC, 1216)]);
    assert_eq!(shares(&two), vec![(0x11EC, 1216), (0x001D, 32)]);
    assert_eq!(shares(&shared), vec![(0x11EC, 1216), (0x001D, 32)]);
    let keygens = |s: &SideSample| s.substeps.get("client_hello/kx_keygen").copied().unwrap_or(0);
    assert!(keygens(&h2.client) > 0 && keygens(&h3.client) > 0);
    // Forced HelloRetryRequest: only an x25519 share, the server wants the hybrid.
    let mut hrr = one.clone();
    hrr.key_shares = vec![catalogue::group("x25519").unwrap()];
    let h4 = run(&hrr).unwrap();
    hrr.check(&h4.negotiated, false).unwrap();
    assert!(h4.negotiated.hrr);
    assert_eq!(sent(&h4.server, "HelloRetryRequest") > 0, true);
    assert_eq!(h4.client.wrote.iter().filter(|(m, _)| m.rfc_name() == "ClientHello").count(), 2);
    // Other combinations are refused with what would work.
    let mut bad = rustls(&["x25519", "secp256r1"], "p256:p256");
    bad.key_shares = bad.groups.clone();
    let e = prepare(&bad).err().unwrap().to_string();
    assert!(e.contains("openssl"), "{e}");
}

#[test]
fn resumption_mtls_root_and_parent() {
    let mut cfg = rustls(&["X25519MLKEM768"], "mldsa65:mldsa65");
    cfg.resumption = true;
    let p = prepare(&cfg).unwrap();
    let full = transport::handshake(p.as_ref(), &Default::default()).unwrap();
    assert!(!full.negotiated.resumed, "{:?} {:?}", full.server.wrote, full.client.wrote);
    assert!(sent(&full.server, "NewSessionTicket") > 0);
    let again = transport::handshake(p.as_ref(), &Default::default()).unwrap();
    cfg.check(&again.negotiated, true).unwrap();
    assert!(again.negotiated.resumed);
    assert_eq!(sent(&again.server, "Certificate"), 0);
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
    let mut m = rustls(&["x25519"], "p256:p256");
    m.client_chain = Some(ChainSpec::parse("mldsa44:mldsa44").unwrap());
    let h = run(&m).unwrap();
    m.check(&h.negotiated, false).unwrap();
    assert!(sent(&h.client, "Certificate") > 1312 && sent(&h.client, "CertificateVerify") == 4 + 4 + 2420);
    // Parent verified: the root's self-signature is checked as well (one more verification).
    let mut v = rustls(&["x25519"], "mldsa44:mldsa87");
    v.verify_parent = true;
    let h = run(&v).unwrap();
    v.check(&h.negotiated, false).unwrap();
}

#[test]
fn a_wrong_root_fails_verification() {
    let cfg = rustls(&["x25519"], "p256:p256");
    let mut files = pki().files_for(&cfg).unwrap();
    files.server.root = pki().files_for(&rustls(&["x25519"], "p384:p384")).unwrap().server.root;
    let p = RustlsBackend::new().prepare(&cfg, &files).unwrap();
    let e = transport::handshake(p.as_ref(), &Default::default()).unwrap_err().to_string();
    assert!(e.contains("rustls") && e.to_lowercase().contains("cert"), "{e}");
}

#[test]
fn steps_add_up_and_name_the_crypto() {
    let h = run(&rustls(&["X25519MLKEM768"], "mldsa65:mldsa65")).unwrap();
    for (side, ops) in [
        (
            &h.client,
            &[
                "client_hello/write_client_hello",
                "client_hello/kx_keygen",
                "server_hello/kx_decapsulate",
                "certificate/verify_cert_chain",
                "certificate_verify/verify_signature",
            ][..],
        ),
        (
            &h.server,
            &["server_hello/kx_encapsulate", "certificate_verify/sign", "client_hello/process_new_packets"][..],
        ),
    ] {
        for op in ops {
            assert!(side.substeps.get(*op).is_some_and(|ns| *ns > 0), "{op} missing: {:?}", side.substeps);
        }
        assert_eq!(side.steps.values().sum::<u64>(), side.total_cpu_ns);
        assert_eq!(side.substeps.values().sum::<u64>(), side.total_cpu_ns);
    }
}

/// rustls client ↔ OpenSSL server and the reverse, for every group and leaf both provide.
#[test]
fn interop_with_the_openssl_backend_both_ways() {
    let mut n = 0;
    for g in catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Rustls) && g.provided_by(Stack::Openssl)) {
        for leaf in LEAVES {
            let chain = format!("{leaf}:{leaf}");
            let r = prepare(&rustls(&[g.name], &chain)).unwrap();
            let o = prepare(&config(Stack::Openssl, &[g.name], &chain, "TLS_AES_128_GCM_SHA256")).unwrap();
            for (client, server, who) in [(&r, &o, "rustls→openssl"), (&o, &r, "openssl→rustls")] {
                let mut c = client.client(&Default::default()).unwrap();
                let mut s = server.server(&Default::default()).unwrap();
                transport::in_memory(c.as_mut(), s.as_mut())
                    .unwrap_or_else(|e| panic!("{who} {} {chain}: {e}", g.name));
                let neg = c.negotiated().unwrap();
                assert_eq!(neg.group, g.name, "{who}");
                assert_eq!(neg.sigalg, catalogue::sig_alg(leaf).unwrap().scheme, "{who}");
                n += 1;
            }
        }
    }
    assert_eq!(n, 2 * 10 * 8);
}

/// The liboqs algorithms through the backend: negotiated as asked, sizes byte for byte.
#[test]
fn liboqs_groups_and_signatures_negotiate_with_exact_sizes() {
    for (group, client_share, server_share) in
        [("frodo640aes", 9616, 9720), ("x25519_frodo640aes", 32 + 9616, 32 + 9720), ("x25519_mlkem512", 832, 800)]
    {
        let base = run(&rustls(&["x25519"], "ed25519:ed25519")).unwrap();
        let cfg = rustls(&[group], "ed25519:ed25519");
        let h = run(&cfg).unwrap_or_else(|e| panic!("{group}: {e}"));
        cfg.check(&h.negotiated, false).unwrap();
        assert_eq!(sent(&h.client, "ClientHello") - sent(&base.client, "ClientHello"), client_share - 32, "{group}");
        assert_eq!(sent(&h.server, "ServerHello") - sent(&base.server, "ServerHello"), server_share - 32, "{group}");
    }
    for (leaf, sig) in [("falcon512", None), ("mldsa44_ed25519", Some(2420 + 64)), ("slhdsa-sha2-128f", Some(17088))] {
        let cfg = rustls(&["x25519"], &format!("{leaf}:{leaf}"));
        let h = run(&cfg).unwrap_or_else(|e| panic!("{leaf}: {e}"));
        cfg.check(&h.negotiated, false).unwrap();
        let cv = sent(&h.server, "CertificateVerify");
        match sig {
            Some(n) => assert_eq!(cv, 8 + n, "{leaf}"),
            None => assert!(cv > 8 && cv <= 8 + 752, "{leaf}: Falcon-512 signatures are at most 752 B, got {}", cv - 8),
        }
    }
}

/// Certificate compression (RFC 8879) on every chain type × algorithm: the server's chain goes
/// as a CompressedCertificate of the algorithm asked, standing for exactly the Certificate an
/// uncompressed run sends; the client reports how it arrived (negotiated = requested) and its
/// decompression is timed as `certificate/cert_decompress`. rustls sends it compressed even
/// when that is not smaller (its keys and signatures do not compress): the sizes say so.
#[test]
fn certificate_compression_sends_a_compressed_certificate_on_every_chain() {
    use pqtls_core::catalogue::CertCompression;
    let chains = [
        "p256:p256",
        "rsa2048:rsa2048",
        "mldsa44:mldsa44",
        "mldsa65:mldsa65",
        "mldsa87:mldsa87",
        "slhdsa-sha2-128f:slhdsa-sha2-128f",
        "falcon512:falcon512",
        "mldsa65:mldsa65:mldsa87",
    ];
    for chain in chains {
        let plain = rustls(&["x25519"], chain);
        let p = run(&plain).unwrap();
        assert_eq!(p.negotiated.cert_compression.as_deref(), Some("none"), "{chain}");
        let certificate = sent(&p.server, "Certificate");
        for alg in [CertCompression::Zlib, CertCompression::Brotli, CertCompression::Zstd] {
            let cfg = HandshakeConfig { cert_compression: alg, ..plain.clone() };
            let h = run(&cfg).unwrap_or_else(|e| panic!("{chain} {alg}: {e}"));
            cfg.check(&h.negotiated, false).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(sent(&h.server, "Certificate"), 0, "{chain} {alg}");
            let wire = sent(&h.server, "CompressedCertificate");
            assert!(wire > 0, "{chain} {alg}");
            let header = h.server.compressed.first().unwrap_or_else(|| panic!("{chain} {alg}: no header"));
            assert_eq!(header.algorithm, alg.code_point());
            assert_eq!(header.uncompressed_length as u64 + 4, certificate, "{chain} {alg}");
            assert!(h.client.substeps.contains_key("certificate/cert_decompress"), "{:?}", h.client.substeps);
            eprintln!("rustls {chain} {alg}: Certificate {certificate} → CompressedCertificate {wire}");
        }
    }
}

/// With mutual TLS the client's chain is compressed too (`client_certificate/cert_compress` on
/// the client, `client_certificate/cert_decompress` on the server).
#[test]
fn certificate_compression_compresses_the_client_chain_with_mutual_tls() {
    use pqtls_core::catalogue::CertCompression;
    let mut cfg = rustls(&["X25519MLKEM768"], "mldsa65:mldsa65");
    cfg.client_chain = Some(ChainSpec::parse("p256:p256").unwrap());
    let plain = run(&cfg).unwrap();
    cfg.cert_compression = CertCompression::Zstd;
    let h = run(&cfg).unwrap();
    cfg.check(&h.negotiated, false).unwrap();
    assert_eq!(sent(&h.client, "Certificate"), 0);
    let wire = sent(&h.client, "CompressedCertificate");
    assert!(wire > 0 && wire < sent(&plain.client, "Certificate"), "{wire}");
    assert_eq!(h.client.compressed[0].uncompressed_length as u64 + 4, sent(&plain.client, "Certificate"));
    assert!(h.server.substeps.contains_key("client_certificate/cert_decompress"), "{:?}", h.server.substeps);
}

/// Across stacks each decompresses what the other compressed; and a rustls client that asked
/// for compression from an OpenSSL server that offers it but never compresses its chain
/// ahead sees a plain Certificate: the check names the stack, the chain and what it did.
#[test]
fn certificate_compression_interoperates_and_an_uncompressed_chain_is_an_error() {
    use pqtls_core::catalogue::CertCompression;
    for alg in [CertCompression::Zlib, CertCompression::Brotli, CertCompression::Zstd] {
        let mut r = rustls(&["x25519"], "p256:p256");
        r.cert_compression = alg;
        let o = HandshakeConfig { stack: Stack::Openssl, ..r.clone() };
        let (rp, op) = (prepare(&r).unwrap(), prepare(&o).unwrap());
        for (client, server, cfg, who) in [(&rp, &op, &r, "rustls→openssl"), (&op, &rp, &o, "openssl→rustls")] {
            let mut c = client.client(&Default::default()).unwrap();
            let mut s = server.server(&Default::default()).unwrap();
            transport::in_memory(c.as_mut(), s.as_mut()).unwrap_or_else(|e| panic!("{who} {alg}: {e}"));
            cfg.check(&c.negotiated().unwrap(), false).unwrap_or_else(|e| panic!("{who}: {e}"));
        }
    }
    let mut r = rustls(&["x25519"], "mldsa65:mldsa65");
    r.cert_compression = CertCompression::Brotli;
    let o = HandshakeConfig { stack: Stack::Openssl, ..r.clone() };
    let server = OpensslBackend::without_precompression().prepare(&o, &pki().files_for(&o).unwrap()).unwrap();
    let mut c = prepare(&r).unwrap().client(&Default::default()).unwrap();
    let mut s = server.server(&Default::default()).unwrap();
    transport::in_memory(c.as_mut(), s.as_mut()).unwrap();
    let e = o.check(&c.negotiated().unwrap(), false).unwrap_err().to_string();
    assert!(e.contains("openssl was asked to send the server chain mldsa65:mldsa65 compressed with brotli"), "{e}");
    assert!(e.contains("sent it uncompressed"), "{e}");
}
