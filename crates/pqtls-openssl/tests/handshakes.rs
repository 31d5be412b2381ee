//! What must hold for the OpenSSL backend: every group × chain × cipher negotiates exactly
//! what was asked; sizes agree with the standards byte for byte; verification fails with
//! the wrong root; options (HRR, mTLS, resumption, root sent, parent verified) do what
//! they say; per-step times add up.

use pqtls_core::backend::{Backend, EndpointOptions, PkiFiles};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_lab::transport::{self, Handshake};
use pqtls_openssl::OpensslBackend;
use pqtls_pki::{Pki, Role};
use std::path::Path;
use std::sync::OnceLock;

/// One PKI for all tests, cached in Cargo's temporary directory for integration tests
/// (kept between runs: chains are generated once).
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn config(group: &str, chain: &str, cipher: &str) -> HandshakeConfig {
    HandshakeConfig::new(
        Stack::Openssl,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher(cipher).unwrap(),
    )
}

fn run(cfg: &HandshakeConfig) -> pqtls_core::Result<Handshake> {
    let files = pki().files_for(cfg).expect("chain files");
    run_with(cfg, &files)
}

fn run_with(cfg: &HandshakeConfig, files: &PkiFiles) -> pqtls_core::Result<Handshake> {
    let prepared = OpensslBackend::new().prepare(cfg, files)?;
    transport::handshake(prepared.as_ref(), &Default::default())
}

/// Bytes of the message `name` that this side sent (0 when it sent none).
fn sent(side: &pqtls_core::trace::SideSample, name: &str) -> u64 {
    side.wrote.iter().filter(|(m, _)| m.rfc_name() == name).map(|(_, b)| *b as u64).sum()
}

const TLS_LEAVES: &[&str] = &["rsa2048", "p256", "p384", "p521", "ed25519", "ed448", "mldsa44", "mldsa65", "mldsa87"];

#[test]
fn every_group_chain_and_cipher_negotiates_exactly_what_was_asked() {
    let groups: Vec<_> = catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Openssl)).collect();
    let ciphers: Vec<_> = catalogue::CIPHERS.iter().filter(|c| c.stacks.contains(&Stack::Openssl)).collect();
    assert!(groups.len() >= 16 && ciphers.len() == 5);
    let mut n = 0;
    for g in &groups {
        for leaf in TLS_LEAVES {
            for c in &ciphers {
                let cfg = config(g.name, &format!("{leaf}:{leaf}"), c.name);
                let h = run(&cfg).unwrap_or_else(|e| panic!("{}: {e}", cfg.label()));
                cfg.check(&h.negotiated, false).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
    }
    // Chains whose parent is another algorithm, an intermediate, or SLH-DSA (certificates only).
    for chain in [
        "rsa2048:rsa4096",
        "p256:p521",
        "mldsa44:mldsa87",
        "mldsa65:mldsa87",
        "p256:slhdsa-sha2-128f",
        "mldsa65:mldsa65:mldsa87",
    ] {
        let mut cfg = config("X25519MLKEM768", chain, "TLS_AES_256_GCM_SHA384");
        cfg.verify_parent = true;
        let h = run(&cfg).unwrap_or_else(|e| panic!("{chain}: {e}"));
        cfg.check(&h.negotiated, false).unwrap();
        n += 1;
    }
    eprintln!("{n} configurations negotiated as asked");
}

#[test]
fn wrong_root_fails_verification_with_a_clear_error() {
    let cfg = config("x25519", "mldsa65:mldsa65", "TLS_AES_128_GCM_SHA256");
    let mut files = pki().files_for(&cfg).unwrap();
    let other = pki().clone().with_seed(7).chain(&cfg.chain, Role::Server).unwrap();
    files.server.root = other.root;
    let e = run_with(&cfg, &files).unwrap_err().to_string();
    assert!(e.contains("certificate verification failed"), "{e}");
}

#[test]
fn a_root_with_a_bad_self_signature_fails_only_when_the_parent_is_verified() {
    let mut cfg = config("x25519", "p256:p256", "TLS_AES_128_GCM_SHA256");
    let mut files = pki().files_for(&cfg).unwrap();
    let pem = std::fs::read(&files.server.root).unwrap();
    let mut der = openssl::x509::X509::from_pem(&pem).unwrap().to_der().unwrap();
    // The signature is the last field: corrupt its last byte (inside the ECDSA integer s).
    let last = der.len() - 1;
    der[last] ^= 0x01;
    let bad = openssl::x509::X509::from_der(&der).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let bad_path = dir.path().join("bad-root.pem");
    std::fs::write(&bad_path, bad.to_pem().unwrap()).unwrap();
    files.server.root = bad_path;
    run_with(&cfg, &files).expect("a trust anchor's own signature is not checked by default");
    cfg.verify_parent = true;
    let e = run_with(&cfg, &files).unwrap_err().to_string();
    assert!(e.contains("certificate verification failed"), "{e}");
}

/// The plaintext first flights: the key shares in the ClientHello and the ServerHello.
fn hello_shares(cfg: &HandshakeConfig) -> (Vec<(u16, usize)>, (u16, usize)) {
    use pqtls_core::wire::{client_key_shares, handshake_messages, server_key_share};
    let prepared = OpensslBackend::new().prepare(cfg, &pki().files_for(cfg).unwrap()).unwrap();
    let (mut c, mut s) = (
        prepared.client(&EndpointOptions::traced(false)).unwrap(),
        prepared.server(&EndpointOptions::traced(false)).unwrap(),
    );
    let (mut ch, mut sh) = (Vec::new(), Vec::new());
    c.drive().unwrap();
    c.take_output(&mut ch).unwrap();
    s.receive(&ch).unwrap();
    s.drive().unwrap();
    s.take_output(&mut sh).unwrap();
    let ch = handshake_messages(&ch);
    let sh = handshake_messages(&sh);
    assert_eq!((ch[0].0, sh[0].0), (1, 2), "ClientHello and ServerHello first");
    (
        client_key_shares(&ch[0].1).expect("key_share in ClientHello"),
        server_key_share(&sh[0].1).expect("key_share in ServerHello"),
    )
}

#[test]
fn key_share_and_signature_sizes_match_the_standards() {
    for g in catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Openssl)) {
        let (client, server) = hello_shares(&config(g.name, "p256:p256", "TLS_AES_128_GCM_SHA256"));
        assert_eq!(client, vec![(g.code_point, g.client_share_bytes())], "{} client share", g.name);
        assert_eq!(server, (g.code_point, g.server_share_bytes()), "{} server share", g.name);
    }
    // Whole messages: with the hybrid, the ClientHello is 1184 B and the ServerHello 1088 B
    // larger. Both clients list the same two groups (in opposite order): OpenSSL omits the
    // 8-byte ec_point_formats extension when no elliptic-curve group is listed at all, which
    // would otherwise blur the comparison.
    let x = catalogue::group("x25519").unwrap();
    let h = catalogue::group("X25519MLKEM768").unwrap();
    let mut base = config("x25519", "p256:p256", "TLS_AES_128_GCM_SHA256");
    base.groups.push(h);
    let mut hybrid = config("X25519MLKEM768", "p256:p256", "TLS_AES_128_GCM_SHA256");
    hybrid.groups.push(x);
    let (base, hybrid) = (run(&base).unwrap(), run(&hybrid).unwrap());
    assert_eq!(sent(&hybrid.client, "ClientHello") - sent(&base.client, "ClientHello"), 1184);
    assert_eq!(sent(&hybrid.server, "ServerHello") - sent(&base.server, "ServerHello"), 1088);
    // CertificateVerify = 4 (header) + 2 (scheme) + 2 (length) + signature, for fixed-size signatures.
    for leaf in ["ed25519", "ed448", "mldsa44", "mldsa65", "mldsa87", "rsa2048"] {
        let alg = catalogue::sig_alg(leaf).unwrap();
        let h = run(&config("x25519", &format!("{leaf}:{leaf}"), "TLS_AES_128_GCM_SHA256")).unwrap();
        assert_eq!(sent(&h.server, "CertificateVerify"), 8 + alg.signature_bytes as u64, "{leaf}");
    }
}

#[test]
fn forced_hello_retry_request_is_reported() {
    let mut cfg = config("X25519MLKEM768", "p256:p256", "TLS_AES_128_GCM_SHA256");
    cfg.groups.push(catalogue::group("x25519").unwrap());
    cfg.key_shares = vec![catalogue::group("x25519").unwrap()];
    assert!(cfg.expects_hrr());
    let h = run(&cfg).unwrap();
    assert!(h.negotiated.hrr);
    cfg.check(&h.negotiated, false).unwrap();
    assert!(sent(&h.server, "HelloRetryRequest") > 0);
    // Two independent shares: no HRR, and the ClientHello carries both, at their sizes.
    let x = catalogue::group("x25519").unwrap();
    let mut two = config("X25519MLKEM768", "p256:p256", "TLS_AES_128_GCM_SHA256");
    two.groups.push(x);
    two.key_shares = vec![two.groups[0], x];
    let h2 = run(&two).unwrap();
    assert!(!h2.negotiated.hrr);
    two.check(&h2.negotiated, false).unwrap();
    assert_eq!(hello_shares(&two).0, vec![(0x11EC, 1216), (0x001D, 32)]);
    // Against one share with the same supported groups, the second share costs exactly its
    // entry: group (2) + length (2) + 32 bytes.
    let mut one = two.clone();
    one.key_shares = vec![one.groups[0]];
    let h1 = run(&one).unwrap();
    assert_eq!(sent(&h2.client, "ClientHello") - sent(&h1.client, "ClientHello"), 36);
}

#[test]
fn mutual_tls_resumption_and_root_sending() {
    let mut cfg = config("X25519MLKEM768", "mldsa65:mldsa65", "TLS_AES_128_GCM_SHA256");
    cfg.client_chain = Some(ChainSpec::parse("mldsa44:mldsa44").unwrap());
    let h = run(&cfg).unwrap();
    cfg.check(&h.negotiated, false).unwrap();
    assert_eq!(sent(&h.server, "CertificateVerify"), 8 + 3309);
    assert_eq!(sent(&h.client, "CertificateVerify"), 8 + 2420);

    let mut plain = config("x25519", "p256:p256", "TLS_AES_128_GCM_SHA256");
    let without = run(&plain).unwrap();
    plain.send_root = true;
    let with = run(&plain).unwrap();
    let root_der = {
        let f = pki().files_for(&plain).unwrap();
        openssl::x509::X509::from_pem(&std::fs::read(f.server.root).unwrap()).unwrap().to_der().unwrap().len() as u64
    };
    // Each certificate entry: 3-byte length + DER + 2-byte (empty) extensions.
    assert_eq!(sent(&with.server, "Certificate") - sent(&without.server, "Certificate"), 3 + root_der + 2);
    // With an intermediate too: the root follows it (it was silently left out before issue 35).
    let mut three = config("x25519", "p256:p256:p256", "TLS_AES_128_GCM_SHA256");
    let without = run(&three).unwrap();
    three.send_root = true;
    let with = run(&three).unwrap();
    let root_der = {
        let f = pki().files_for(&three).unwrap();
        openssl::x509::X509::from_pem(&std::fs::read(f.server.root).unwrap()).unwrap().to_der().unwrap().len() as u64
    };
    assert_eq!(sent(&with.server, "Certificate") - sent(&without.server, "Certificate"), 3 + root_der + 2);

    let mut resumed = config("x25519", "p256:p256", "TLS_AES_128_GCM_SHA256");
    resumed.resumption = true;
    let prepared = OpensslBackend::new().prepare(&resumed, &pki().files_for(&resumed).unwrap()).unwrap();
    let first = transport::handshake(prepared.as_ref(), &Default::default()).unwrap();
    assert!(!first.negotiated.resumed);
    let second = transport::handshake(prepared.as_ref(), &Default::default()).unwrap();
    assert!(second.negotiated.resumed);
    resumed.check(&second.negotiated, true).unwrap();
    assert_eq!(sent(&second.server, "Certificate"), 0);
}

#[test]
fn steps_add_up_and_quantiles_are_ordered_over_every_transport() {
    use pqtls_core::backend::Backend;
    use pqtls_core::scenario::Scenario;
    use pqtls_core::settings::Settings;
    use pqtls_lab::Measurement;
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(OpensslBackend::new())];
    let files = |cfg: &pqtls_core::config::HandshakeConfig| pki().files_for(cfg);
    let lab = pqtls_lab::Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, pqtls_lab::env::collect("test", "test", Default::default())),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    for mode in ["memory", "socketpair", "tcp"] {
        let sc =
            Scenario::new([("group", "X25519MLKEM768"), ("chain", "mldsa65:mldsa65"), ("transport", mode)]).unwrap();
        let s = Settings::new(5, 60, None, Default::default()).unwrap();
        let m = lab.measure(&sc, &s, &std::sync::atomic::AtomicBool::new(false), &mut |_| {}).unwrap();
        assert_eq!(m.samples.len(), 60);
        for (c, sv) in &m.samples {
            assert_eq!(c.steps.values().sum::<u64>(), c.total_cpu_ns);
            assert_eq!(sv.steps.values().sum::<u64>(), sv.total_cpu_ns);
            assert_eq!(c.substeps.values().sum::<u64>(), c.total_cpu_ns);
            assert_eq!(sv.substeps.values().sum::<u64>(), sv.total_cpu_ns);
        }
        let r = m.record.insitu().unwrap();
        for side in [&r.client, &r.server] {
            for s in side.steps.values().chain([&side.total_cpu_ns]) {
                let q: Vec<f64> = s.quantiles.values().copied().collect();
                assert!(s.min <= q[0] && q.windows(2).all(|w| w[0] <= w[1]) && q[q.len() - 1] <= s.max);
                assert!(s.median_ci[0] <= s.median && s.median <= s.median_ci[1]);
            }
        }
        for step in ["client_hello", "server_hello", "certificate", "certificate_verify", "finished"] {
            assert!(
                r.client.steps.contains_key(step),
                "{mode:?}: client step {step} missing: {:?}",
                r.client.steps.keys()
            );
        }
        for step in [
            "client_hello/write_client_hello",
            "server_hello/process_server_hello",
            "certificate/process_certificate",
            "certificate_verify/process_certificate_verify",
        ] {
            assert!(r.client.substeps.contains_key(step), "{mode:?}: client sub-step {step} missing");
        }
        for step in ["client_hello", "server_hello", "certificate_verify", "client_finished"] {
            assert!(r.server.steps.contains_key(step), "{mode:?}: server step {step} missing");
        }
        for step in ["client_hello/read_client_hello", "server_hello/write_server_hello"] {
            assert!(r.server.substeps.contains_key(step), "{mode:?}: server sub-step {step} missing");
        }
        assert_eq!(r.negotiated.group, "X25519MLKEM768");
        assert_eq!(r.bytes.messages["CertificateVerify"], 8 + 3309);
    }
}

#[test]
fn unsupported_and_unknown_inputs_say_what_would_work() {
    let cfg = config("x25519", "slhdsa-sha2-128s:slhdsa-sha2-128s", "TLS_AES_128_GCM_SHA256");
    let e = OpensslBackend::new()
        .prepare(&cfg, &pki().files_for(&config("x25519", "p256:p256", "TLS_AES_128_GCM_SHA256")).unwrap())
        .err()
        .expect("SLH-DSA cannot sign TLS handshakes on OpenSSL 3.5")
        .to_string();
    assert!(e.contains("stacks that sign with it in TLS: rustls") && e.contains("mldsa65"), "{e}");
    let e = catalogue::group("kyber768").unwrap_err().to_string();
    assert!(e.contains("X25519MLKEM768"), "{e}");
    let mut frodo = config("x25519", "p256:p256", "TLS_AES_128_GCM_SHA256");
    frodo.groups = vec![catalogue::group("frodo640aes").unwrap()];
    let e = frodo.validate().unwrap_err().to_string();
    assert!(e.contains("not available on openssl") && e.contains("stacks that have it: rustls"), "{e}");
}

/// Certificate compression (RFC 8879) on every chain type × algorithm: either the server's
/// chain goes as a CompressedCertificate of the algorithm asked, smaller on the wire, standing
/// for exactly the Certificate an uncompressed run sends, the client reporting how it arrived
/// (negotiated = requested) and processing it as the `certificate` step — or, when OpenSSL
/// will not send that chain compressed (compressed, it is not smaller), preparing it is an
/// error naming the chain and why, never a silent uncompressed run. ML-DSA-65 with zstd is one
/// such chain (its keys and signatures do not compress; zstd's frame adds bytes).
#[test]
fn certificate_compression_sends_a_smaller_compressed_certificate_or_refuses() {
    use pqtls_core::catalogue::CertCompression;
    let chains = [
        "p256:p256",
        "rsa2048:rsa2048",
        "mldsa44:mldsa44",
        "mldsa65:mldsa65",
        "mldsa87:mldsa87",
        "p256:slhdsa-sha2-128f",
        "mldsa65:mldsa65:mldsa87",
    ];
    let mut refused = Vec::new();
    for chain in chains {
        let plain = config("x25519", chain, "TLS_AES_128_GCM_SHA256");
        let p = run(&plain).unwrap();
        assert_eq!(p.negotiated.cert_compression.as_deref(), Some("none"), "{chain}");
        let certificate = sent(&p.server, "Certificate");
        for alg in [CertCompression::Zlib, CertCompression::Brotli, CertCompression::Zstd] {
            let cfg = HandshakeConfig { cert_compression: alg, ..plain.clone() };
            let h = match run(&cfg) {
                Ok(h) => h,
                Err(e) => {
                    let e = e.to_string();
                    assert!(
                        e.contains(&format!("OpenSSL does not compress the server chain {chain} with {alg}"))
                            && e.contains("not smaller"),
                        "{e}"
                    );
                    refused.push(format!("{chain} {alg}"));
                    continue;
                }
            };
            cfg.check(&h.negotiated, false).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(sent(&h.server, "Certificate"), 0, "{chain} {alg}");
            let wire = sent(&h.server, "CompressedCertificate");
            assert!(wire > 0 && wire < certificate + 8, "{chain} {alg}: {wire} vs {certificate}");
            let header = h.server.compressed.first().unwrap_or_else(|| panic!("{chain} {alg}: no header"));
            assert_eq!(header.algorithm, alg.code_point());
            assert_eq!(header.uncompressed_length as u64 + 4, certificate, "{chain} {alg}");
            assert!(h.client.steps.contains_key("certificate"), "{:?}", h.client.steps);
            assert!(
                h.client.substeps.keys().any(|k| k == "certificate/process_compressed_certificate"),
                "{:?}",
                h.client.substeps
            );
        }
    }
    assert!(refused.iter().any(|r| r == "mldsa65:mldsa65 zstd"), "{refused:?}");
    eprintln!("OpenSSL refused to send compressed: {refused:?}");
}

/// With mutual TLS the client's chain is compressed too (OpenSSL's client compresses it in
/// the handshake: a `client_certificate` step), and the server reports it.
#[test]
fn certificate_compression_compresses_the_client_chain_with_mutual_tls() {
    use pqtls_core::catalogue::CertCompression;
    let mut cfg = config("X25519MLKEM768", "mldsa65:mldsa65", "TLS_AES_128_GCM_SHA256");
    cfg.client_chain = Some(ChainSpec::parse("p256:p256").unwrap());
    let plain = run(&cfg).unwrap();
    cfg.cert_compression = CertCompression::Brotli;
    let h = run(&cfg).unwrap();
    cfg.check(&h.negotiated, false).unwrap();
    assert_eq!(sent(&h.client, "Certificate"), 0);
    let wire = sent(&h.client, "CompressedCertificate");
    assert!(wire > 0 && wire < sent(&plain.client, "Certificate"), "{wire}");
    assert_eq!(h.client.compressed[0].uncompressed_length as u64 + 4, sent(&plain.client, "Certificate"));
    assert!(
        h.client.substeps.keys().any(|k| k == "client_certificate/write_compressed_certificate"),
        "{:?}",
        h.client.substeps
    );
}

/// An OpenSSL that offers compression but never compresses its chain ahead (no
/// `SSL_CTX_compress_certs`, a common application mistake) sends the chain uncompressed: the
/// check refuses the handshake, naming the stack, the chain and what it did.
#[test]
fn a_chain_sent_uncompressed_when_compression_was_asked_is_an_error() {
    use pqtls_core::catalogue::CertCompression;
    let mut cfg = config("x25519", "mldsa65:mldsa65", "TLS_AES_128_GCM_SHA256");
    cfg.cert_compression = CertCompression::Zlib;
    let files = pki().files_for(&cfg).unwrap();
    let prepared = OpensslBackend::without_precompression().prepare(&cfg, &files).unwrap();
    let h = transport::handshake(prepared.as_ref(), &Default::default()).unwrap();
    assert!(sent(&h.server, "Certificate") > 0 && sent(&h.server, "CompressedCertificate") == 0);
    let e = cfg.check(&h.negotiated, false).unwrap_err().to_string();
    assert!(e.contains("openssl was asked to send the server chain mldsa65:mldsa65 compressed with zlib"), "{e}");
    assert!(e.contains("sent it uncompressed"), "{e}");
}

/// The sizes of the ClientHellos the client wrote, in order (two after a HelloRetryRequest).
fn hellos(h: &Handshake) -> Vec<u64> {
    h.client.wrote.iter().filter(|(m, _)| m.rfc_name() == "ClientHello").map(|(_, b)| *b as u64).collect()
}

/// `client_hello_padding = 512` is OpenSSL's RFC 7685 padding: a hello of 256–511 bytes
/// (header included) becomes exactly 512 — a resumed one too (OpenSSL counts the PSK extension
/// written after the padding), and each hello of a HelloRetryRequest on its own; shorter and
/// longer hellos are left as they are. An unpadded hello in that range is refused by the check.
#[test]
fn client_hello_padding_makes_a_hello_of_256_to_511_bytes_512() {
    use pqtls_core::config::HelloPadding;
    let padded = |mut cfg: HandshakeConfig| {
        cfg.client_hello_padding = HelloPadding::To512;
        cfg
    };
    // secp384r1's 97-byte share: OpenSSL's hello is in the range.
    let plain = config("secp384r1", "ed25519:ed25519", "TLS_AES_128_GCM_SHA256");
    let unpadded = run(&plain).unwrap();
    let [n] = hellos(&unpadded)[..] else { panic!("{:?}", hellos(&unpadded)) };
    assert!((256..512).contains(&n), "{n}");
    let cfg = padded(plain.clone());
    let h = run(&cfg).unwrap();
    cfg.check(&h.negotiated, false).unwrap();
    assert_eq!(hellos(&h), [512]);
    cfg.check_client_hello(&h.client).unwrap();
    assert_eq!(sent(&h.server, "ServerHello"), sent(&unpadded.server, "ServerHello"));
    // Negotiated = requested: an unpadded hello where padding was asked is an error.
    let e = cfg.check_client_hello(&unpadded.client).unwrap_err().to_string();
    assert!(e.contains(&format!("ClientHello size '{n} bytes, unpadded'")) && e.contains("512 bytes or more"), "{e}");
    plain.check_client_hello(&unpadded.client).unwrap();

    // Shorter than 256 (x25519) and 512 or longer (ML-KEM-512): as they are.
    for (group, short) in [("x25519", true), ("MLKEM512", false)] {
        let plain = config(group, "ed25519:ed25519", "TLS_AES_128_GCM_SHA256");
        let n = hellos(&run(&plain).unwrap());
        assert_eq!(n[0] < 256, short, "{group}: {n:?}");
        let cfg = padded(plain);
        let h = run(&cfg).unwrap();
        assert_eq!(hellos(&h), n, "{group}");
        cfg.check_client_hello(&h.client).unwrap();
    }

    // Resumed: the hello with its PSK extension (the ticket and binder) is padded to 512.
    let resumed_hellos = |cfg: &HandshakeConfig| {
        let prepared = OpensslBackend::new().prepare(cfg, &pki().files_for(cfg).unwrap()).unwrap();
        transport::handshake(prepared.as_ref(), &Default::default()).unwrap();
        let second = transport::handshake(prepared.as_ref(), &Default::default()).unwrap();
        assert!(second.negotiated.resumed);
        hellos(&second)
    };
    let mut resumed = config("x25519", "ed25519:ed25519", "TLS_AES_128_GCM_SHA256");
    resumed.resumption = true;
    let [n] = resumed_hellos(&resumed)[..] else { panic!() };
    assert!((256..512).contains(&n), "resumed hello {n}");
    assert_eq!(resumed_hellos(&padded(resumed)), [512]);

    // A HelloRetryRequest: the first hello (a secp384r1 share) is padded, the second (x25519's
    // share, under 256 bytes) is not.
    let mut hrr = config("x25519", "ed25519:ed25519", "TLS_AES_128_GCM_SHA256");
    hrr.groups.push(catalogue::group("secp384r1").unwrap());
    hrr.key_shares = vec![hrr.groups[1]];
    let plain = hellos(&run(&hrr).unwrap());
    assert!((256..512).contains(&plain[0]) && plain[1] < 256, "{plain:?}");
    let cfg = padded(hrr);
    let h = run(&cfg).unwrap();
    cfg.check(&h.negotiated, false).unwrap();
    assert_eq!(hellos(&h), [512, plain[1]]);
}
