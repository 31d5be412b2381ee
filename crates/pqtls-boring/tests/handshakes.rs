//! What must hold for the BoringSSL backend: every group × chain it offers negotiates exactly
//! what was asked; sizes agree with the standards byte for byte; verification fails with the
//! wrong root; options (HRR, mTLS, resumption, root sent) do what they say; per-step times
//! add up; bad input names what would work.

use pqtls_boring::BoringBackend;
use pqtls_core::backend::{Backend, EndpointOptions, MemoryKeyLog, PkiFiles};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_lab::transport::{self, Handshake};
use pqtls_pki::{Pki, Role};
use std::path::Path;
use std::sync::{Arc, OnceLock};

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn config(group: &str, chain: &str) -> HandshakeConfig {
    HandshakeConfig::new(
        Stack::Boringssl,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    )
}

fn run(cfg: &HandshakeConfig) -> pqtls_core::Result<Handshake> {
    let files = pki().files_for(cfg).expect("chain files");
    run_with(cfg, &files)
}

fn run_with(cfg: &HandshakeConfig, files: &PkiFiles) -> pqtls_core::Result<Handshake> {
    let prepared = BoringBackend::new().prepare(cfg, files)?;
    transport::handshake(prepared.as_ref(), &Default::default())
}

fn sent(side: &pqtls_core::trace::SideSample, name: &str) -> u64 {
    side.wrote.iter().filter(|(m, _)| m.rfc_name() == name).map(|(_, b)| *b as u64).sum()
}

#[test]
fn every_group_and_chain_negotiates_exactly_what_was_asked() {
    let groups: Vec<_> = catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Boringssl)).collect();
    let leaves: Vec<_> = catalogue::SIG_ALGS.iter().filter(|s| s.provided_by(Stack::Boringssl)).collect();
    assert_eq!(groups.len(), 6, "{groups:?}");
    let mut n = 0;
    for g in &groups {
        for leaf in &leaves {
            let cfg = config(g.name, &format!("{0}:{0}", leaf.name));
            let h = run(&cfg).unwrap_or_else(|e| panic!("{}: {e}", cfg.label()));
            cfg.check(&h.negotiated, false).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(h.negotiated.version, "TLSv1.3");
            n += 1;
        }
    }
    for chain in ["rsa2048:rsa4096", "p256:p521", "mldsa44:mldsa87", "mldsa65:mldsa65:mldsa87"] {
        let mut cfg = config("X25519MLKEM768", chain);
        cfg.verify_parent = true;
        let h = run(&cfg).unwrap_or_else(|e| panic!("{chain}: {e}"));
        cfg.check(&h.negotiated, false).unwrap();
        n += 1;
    }
    eprintln!("{n} configurations negotiated as asked");
}

#[test]
fn wrong_root_fails_verification_with_a_clear_error() {
    let cfg = config("x25519", "p256:p256");
    let mut files = pki().files_for(&cfg).unwrap();
    let other = pki().clone().with_seed(7).chain(&cfg.chain, Role::Server).unwrap();
    files.server.root = other.root;
    let e = run_with(&cfg, &files).unwrap_err().to_string();
    assert!(e.contains("certificate verification failed") && e.contains("boringssl"), "{e}");
}

/// The plaintext first flights: the key shares in the ClientHello and the ServerHello.
fn hello_shares(cfg: &HandshakeConfig) -> (Vec<(u16, usize)>, (u16, usize)) {
    use pqtls_core::wire::{client_key_shares, handshake_messages, server_key_share};
    let prepared = BoringBackend::new().prepare(cfg, &pki().files_for(cfg).unwrap()).unwrap();
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
    for g in catalogue::GROUPS.iter().filter(|g| g.provided_by(Stack::Boringssl)) {
        let (client, server) = hello_shares(&config(g.name, "p256:p256"));
        assert_eq!(client, vec![(g.code_point, g.client_share_bytes())], "{} client share", g.name);
        assert_eq!(server, (g.code_point, g.server_share_bytes()), "{} server share", g.name);
    }
    let x = catalogue::group("x25519").unwrap();
    let h = catalogue::group("X25519MLKEM768").unwrap();
    let mut base = config("x25519", "p256:p256");
    base.groups.push(h);
    let mut hybrid = config("X25519MLKEM768", "p256:p256");
    hybrid.groups.push(x);
    let (base, hybrid) = (run(&base).unwrap(), run(&hybrid).unwrap());
    assert_eq!(sent(&hybrid.client, "ClientHello") - sent(&base.client, "ClientHello"), 1184);
    assert_eq!(sent(&hybrid.server, "ServerHello") - sent(&base.server, "ServerHello"), 1088);
    for leaf in ["ed25519", "mldsa44", "mldsa65", "mldsa87", "rsa2048"] {
        let alg = catalogue::sig_alg(leaf).unwrap();
        let h = run(&config("x25519", &format!("{leaf}:{leaf}"))).unwrap();
        assert_eq!(sent(&h.server, "CertificateVerify"), 8 + alg.signature_bytes as u64, "{leaf}");
    }
}

#[test]
fn forced_hello_retry_request_and_two_shares() {
    let x = catalogue::group("x25519").unwrap();
    let mut cfg = config("X25519MLKEM768", "p256:p256");
    cfg.groups.push(x);
    cfg.key_shares = vec![x];
    assert!(cfg.expects_hrr());
    let h = run(&cfg).unwrap();
    assert!(h.negotiated.hrr);
    cfg.check(&h.negotiated, false).unwrap();
    assert!(sent(&h.server, "HelloRetryRequest") > 0);
    let mut two = config("X25519MLKEM768", "p256:p256");
    two.groups.push(x);
    two.key_shares = vec![two.groups[0], x];
    let h2 = run(&two).unwrap();
    assert!(!h2.negotiated.hrr);
    two.check(&h2.negotiated, false).unwrap();
    assert_eq!(hello_shares(&two).0, vec![(0x11EC, 1216), (0x001D, 32)]);
}

#[test]
fn mutual_tls_resumption_root_sending_and_key_log() {
    let mut cfg = config("X25519MLKEM768", "p256:p256");
    cfg.client_chain = Some(ChainSpec::parse("rsa2048:rsa2048").unwrap());
    let h = run(&cfg).unwrap();
    cfg.check(&h.negotiated, false).unwrap();
    assert_eq!(sent(&h.client, "CertificateVerify"), 8 + 256);
    assert!(h.server.steps.contains_key("client_certificate"), "{:?}", h.server.steps.keys());
    assert!(h.server.substeps.contains_key("client_certificate/verify_cert_chain"), "{:?}", h.server.substeps);
    assert!(h.client.substeps.contains_key("client_certificate_verify/sign"), "{:?}", h.client.substeps);

    let mut plain = config("x25519", "p256:p256");
    let without = run(&plain).unwrap();
    plain.send_root = true;
    let with = run(&plain).unwrap();
    let root_der = {
        let f = pki().files_for(&plain).unwrap();
        openssl::x509::X509::from_pem(&std::fs::read(f.server.root).unwrap()).unwrap().to_der().unwrap().len() as u64
    };
    assert_eq!(sent(&with.server, "Certificate") - sent(&without.server, "Certificate"), 3 + root_der + 2);

    let mut resumed = config("X25519MLKEM768", "p256:p256");
    resumed.resumption = true;
    let prepared = BoringBackend::new().prepare(&resumed, &pki().files_for(&resumed).unwrap()).unwrap();
    let first = transport::handshake(prepared.as_ref(), &Default::default()).unwrap();
    assert!(!first.negotiated.resumed);
    let second = transport::handshake(prepared.as_ref(), &Default::default()).unwrap();
    assert!(second.negotiated.resumed);
    resumed.check(&second.negotiated, true).unwrap();
    assert_eq!(sent(&second.server, "Certificate"), 0);

    // Key log: both sides log the same TLS 1.3 secrets for one connection.
    let prepared = BoringBackend::new().prepare(&plain, &pki().files_for(&plain).unwrap()).unwrap();
    let (cl, sl) = (Arc::new(MemoryKeyLog::new()), Arc::new(MemoryKeyLog::new()));
    let (mut c, mut s) = (
        prepared.client(&EndpointOptions { key_log: Some(cl.clone()), ..Default::default() }).unwrap(),
        prepared.server(&EndpointOptions { key_log: Some(sl.clone()), ..Default::default() }).unwrap(),
    );
    let (mut buf_c, mut buf_s) = (Vec::new(), Vec::new());
    for _ in 0..8 {
        let dc = c.drive().unwrap();
        c.take_output(&mut buf_c).unwrap();
        s.receive(&buf_c).unwrap();
        buf_c.clear();
        let ds = s.drive().unwrap();
        s.take_output(&mut buf_s).unwrap();
        c.receive(&buf_s).unwrap();
        buf_s.clear();
        if dc && ds {
            break;
        }
    }
    for label in [
        "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
        "SERVER_HANDSHAKE_TRAFFIC_SECRET",
        "CLIENT_TRAFFIC_SECRET_0",
        "SERVER_TRAFFIC_SECRET_0",
    ] {
        let (a, b) = (cl.get(label).expect(label), sl.get(label).expect(label));
        assert_eq!(a, b, "{label}");
        assert_eq!(a.client_random.len(), 32);
    }
}

#[test]
fn steps_add_up_over_every_transport() {
    use pqtls_core::scenario::Scenario;
    use pqtls_core::settings::Settings;
    use pqtls_lab::Measurement;
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(BoringBackend::new())];
    let files = |cfg: &pqtls_core::config::HandshakeConfig| pki().files_for(cfg);
    let lab = pqtls_lab::Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, pqtls_lab::env::collect("test", "test", Default::default())),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    for mode in ["memory", "socketpair", "tcp"] {
        let sc = Scenario::new([
            ("stack", "boringssl"),
            ("group", "X25519MLKEM768"),
            ("chain", "p256:p256"),
            ("transport", mode),
        ])
        .unwrap();
        let s = Settings::new(5, 40, None, Default::default()).unwrap();
        let m = lab.measure(&sc, &s, &std::sync::atomic::AtomicBool::new(false), &mut |_| {}).unwrap();
        assert_eq!(m.samples.len(), 40);
        for (c, sv) in &m.samples {
            assert_eq!(c.steps.values().sum::<u64>(), c.total_cpu_ns);
            assert_eq!(sv.steps.values().sum::<u64>(), sv.total_cpu_ns);
            assert_eq!(c.substeps.values().sum::<u64>(), c.total_cpu_ns);
            assert_eq!(sv.substeps.values().sum::<u64>(), sv.total_cpu_ns);
        }
        let r = m.record.insitu().unwrap();
        for step in ["client_hello", "server_hello", "certificate", "certificate_verify", "finished"] {
            assert!(
                r.client.steps.contains_key(step),
                "{mode}: client step {step} missing: {:?}",
                r.client.steps.keys()
            );
        }
        for step in ["certificate/verify_cert_chain", "server_hello/process_server_hello"] {
            assert!(r.client.substeps.contains_key(step), "{mode}: client sub-step {step} missing");
        }
        for step in ["client_hello/read_client_hello", "certificate_verify/sign", "client_finished"] {
            assert!(
                r.server.substeps.contains_key(step) || r.server.steps.contains_key(step),
                "{mode}: server step {step} missing: {:?}",
                r.server.substeps.keys()
            );
        }
        assert_eq!(r.negotiated.group, "X25519MLKEM768");
        // CertificateVerify: 8 bytes of framing and a DER ECDSA signature of 70 to 72 bytes.
        let cv = r.bytes.messages["CertificateVerify"];
        assert!((8 + 70..=8 + 72).contains(&cv), "{mode}: CertificateVerify of {cv} bytes");
    }
}

#[test]
fn unsupported_inputs_name_the_stacks_that_have_them() {
    let cfg = config("x25519", "ed448:ed448");
    let e = cfg.validate().unwrap_err().to_string();
    assert!(e.contains("openssl") && !e.contains("boringssl,"), "{e}");
    let mut c = config("x25519", "p256:p256");
    c.groups = vec![catalogue::group("SecP256r1MLKEM768").unwrap()];
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("not available on boringssl") && e.contains("openssl, rustls"), "{e}");
    let mut c = config("x25519", "p256:p256");
    c.cipher = catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap();
    let e = c.validate().unwrap_err().to_string();
    assert!(e.contains("not available on boringssl") && e.contains("openssl, rustls"), "{e}");
}

/// GREASE code points: 0x0A0A, 0x1A1A, …, 0xFAFA (RFC 8701 §2).
fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

/// The first ClientHello body a client of `cfg` sends.
fn client_hello(cfg: &HandshakeConfig) -> Vec<u8> {
    let prepared = BoringBackend::new().prepare(cfg, &pki().files_for(cfg).unwrap()).unwrap();
    let mut c = prepared.client(&EndpointOptions::traced(false)).unwrap();
    let mut flight = Vec::new();
    c.drive().unwrap();
    c.take_output(&mut flight).unwrap();
    let msgs = pqtls_tls13::wire::handshake_messages(&flight);
    assert_eq!(msgs[0].0, 1, "a ClientHello first");
    msgs[0].1.clone()
}

/// The cipher suites of a ClientHello body (after version, random and session id).
fn offered_suites(body: &[u8]) -> Vec<u16> {
    let at = 2 + 32 + 1 + body[34] as usize;
    let n = u16::from_be_bytes([body[at], body[at + 1]]) as usize;
    body[at + 2..at + 2 + n].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect()
}

/// The `client_profile = chrome` factor reaches the wire: the ClientHello carries GREASE among
/// its suites, extensions, groups and as its first key share, then Chrome's two shares
/// (X25519MLKEM768, x25519), its extensions in an order that changes between connections; the
/// plain profile has none of it. The handshake negotiates what was asked.
#[test]
fn the_chrome_profile_sends_grease_chromes_two_shares_and_permuted_extensions() {
    use pqtls_core::config::ClientProfile;
    use pqtls_core::scenario::Scenario;
    use pqtls_tls13::wire::{client_key_shares, hello_extensions};
    let scenario = |profile: &str| {
        #[rustfmt::skip]
        let s = Scenario::new([("stack", "boringssl"), ("group", "X25519MLKEM768,x25519"),
            ("key_shares", "X25519MLKEM768,x25519"), ("chain", "p256:p256"), ("client_profile", profile)]);
        s.unwrap().handshake
    };
    let chrome = scenario("chrome");
    assert_eq!(chrome.client_profile, ClientProfile::Chrome);
    let orders: Vec<Vec<u16>> = (0..4)
        .map(|_| {
            let ch = client_hello(&chrome);
            assert!(is_grease(offered_suites(&ch)[0]), "a GREASE suite first: {:04x?}", offered_suites(&ch));
            let exts = hello_extensions(&ch, true).unwrap();
            assert!(exts.iter().any(|(t, _)| is_grease(*t)), "a GREASE extension");
            let groups = &exts.iter().find(|(t, _)| *t == 10).expect("supported_groups").1;
            assert!(is_grease(u16::from_be_bytes([groups[2], groups[3]])), "a GREASE group first");
            let shares = client_key_shares(&ch).unwrap();
            assert!(is_grease(shares[0].0), "a GREASE key share first: {shares:04x?}");
            assert_eq!(&shares[1..], &[(0x11EC, 1216), (0x001D, 32)]);
            exts.iter().map(|(t, _)| *t).filter(|t| !is_grease(*t)).collect()
        })
        .collect();
    assert!(orders.iter().any(|o| o != &orders[0]), "the extension order is permuted: {orders:?}");
    let h = run(&chrome).unwrap();
    chrome.check(&h.negotiated, false).unwrap();

    let plain = scenario("plain");
    let orders: Vec<Vec<u16>> = (0..2)
        .map(|_| {
            let ch = client_hello(&plain);
            assert!(!offered_suites(&ch).into_iter().any(is_grease));
            let exts = hello_extensions(&ch, true).unwrap();
            assert!(!exts.iter().any(|(t, _)| is_grease(*t)));
            assert_eq!(client_key_shares(&ch).unwrap(), vec![(0x11EC, 1216), (0x001D, 32)]);
            exts.iter().map(|(t, _)| *t).collect()
        })
        .collect();
    assert_eq!(orders[0], orders[1], "BoringSSL's own order is fixed");
}

/// Chrome's profile is BoringSSL's: the other stacks' backends refuse it, naming boringssl.
#[test]
fn other_stacks_refuse_the_chrome_profile_naming_boringssl() {
    use pqtls_core::config::ClientProfile;
    let backends: [Box<dyn Backend>; 2] =
        [Box::new(pqtls_openssl::OpensslBackend::new()), Box::new(pqtls_rustls::RustlsBackend::new())];
    for backend in backends {
        let mut cfg = config("x25519", "p256:p256");
        cfg.stack = backend.stack();
        cfg.client_profile = ClientProfile::Chrome;
        let e = backend.prepare(&cfg, &pki().files_for(&cfg).unwrap()).err().expect("refused").to_string();
        assert!(e.contains("client profile chrome") && e.contains("stacks that have it: boringssl"), "{e}");
    }
}
