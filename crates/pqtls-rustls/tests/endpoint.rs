//! The Endpoint interface on both stacks and across them: the canonical step vocabulary,
//! key logs, application data and close, the linked library version.

use pqtls_core::backend::{Backend, Endpoint, EndpointOptions, KeyLog, MemoryKeyLog, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::trace::SideSample;
use pqtls_lab::transport;
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::{Arc, OnceLock};

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
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
    let files = pki().files_for(cfg).expect("chain files");
    match cfg.stack {
        Stack::Rustls => RustlsBackend::new().prepare(cfg, &files),
        Stack::Openssl => OpensslBackend::new().prepare(cfg, &files),
        Stack::S2n => panic!("these tests run OpenSSL and rustls; s2n-tls' are crates/pqtls-s2n/tests"),
        Stack::Boringssl => pqtls_boring::BoringBackend::new().prepare(cfg, &files),
    }
    .unwrap_or_else(|e| panic!("{}: {e}", cfg.label()))
}

fn on(stack: Stack, cfg: &HandshakeConfig) -> HandshakeConfig {
    let mut c = cfg.clone();
    c.stack = stack;
    c
}

/// Steps add up to the total; each parent's sub-steps add up to at most the parent.
fn check_sums(side: &SideSample, what: &str) {
    assert_eq!(side.steps.values().sum::<u64>(), side.total_cpu_ns, "{what}: steps {:?}", side.steps);
    for (parent, ns) in &side.steps {
        assert!(pqtls_core::steps::ALL.contains(&parent.as_str()), "{what}: {parent} is not canonical");
        let subs: u64 =
            side.substeps.iter().filter(|(k, _)| k.split('/').next() == Some(parent.as_str())).map(|(_, v)| v).sum();
        assert!(subs <= *ns, "{what}: sub-steps of {parent} add up to {subs} > {ns}");
    }
    for k in side.substeps.keys() {
        let parent = k.split('/').next().unwrap();
        assert!(side.steps.contains_key(parent), "{what}: sub-step {k} without its parent");
    }
}

fn names(side: &SideSample) -> BTreeSet<String> {
    side.steps.keys().cloned().collect()
}

#[test]
fn both_stacks_report_the_same_canonical_steps() {
    use pqtls_core::steps::*;
    let mut mtls = config(Stack::Openssl, "x25519", "p256:p256");
    mtls.client_chain = Some(ChainSpec::parse("p256:p256").unwrap());
    let mut resumed = config(Stack::Openssl, "x25519", "p256:p256");
    resumed.resumption = true;
    let mut hrr = config(Stack::Openssl, "X25519MLKEM768", "p256:p256");
    hrr.groups.push(catalogue::group("x25519").unwrap());
    hrr.key_shares = vec![catalogue::group("x25519").unwrap()];
    let cases = [
        ("x25519 p256", config(Stack::Openssl, "x25519", "p256:p256")),
        ("hybrid mldsa65", config(Stack::Openssl, "X25519MLKEM768", "mldsa65:mldsa65")),
        ("mtls", mtls),
        ("resumption", resumed),
        ("hello retry request", hrr),
    ];
    for (what, cfg) in cases {
        let mut per_stack = Vec::new();
        for stack in [Stack::Openssl, Stack::Rustls] {
            let p = prepare(&on(stack, &cfg));
            // Both clock policies give the same steps, adding up.
            let cpu = EndpointOptions { clock: pqtls_core::trace::Clock::Cpu, ..Default::default() };
            let h = transport::handshake(p.as_ref(), &cpu).unwrap();
            check_sums(&h.client, &format!("{what} {stack} client, cpu clock"));
            check_sums(&h.server, &format!("{what} {stack} server, cpu clock"));
            let mut h = transport::handshake(p.as_ref(), &EndpointOptions::default()).unwrap();
            if cfg.resumption {
                h = transport::handshake(p.as_ref(), &EndpointOptions::default()).unwrap();
                assert!(h.negotiated.resumed, "{what} {stack}");
            }
            check_sums(&h.client, &format!("{what} {stack} client"));
            check_sums(&h.server, &format!("{what} {stack} server"));
            assert_eq!(h.client.unmeasured_records + h.server.unmeasured_records, 0, "{what} {stack}");
            per_stack.push((stack, names(&h.client), names(&h.server), h));
        }
        let (o, r) = (&per_stack[0], &per_stack[1]);
        assert_eq!(o.1, r.1, "{what}: client steps, openssl vs rustls\n{:?}\n{:?}", o.3.client, r.3.client);
        assert_eq!(o.2, r.2, "{what}: server steps, openssl vs rustls\n{:?}\n{:?}", o.3.server, r.3.server);
        // What the protocol says each side does.
        let client: BTreeSet<String> = o.1.clone();
        let mut expect_client = vec![CLIENT_HELLO, SERVER_HELLO, ENCRYPTED_EXTENSIONS, FINISHED];
        let mut expect_server = vec![CLIENT_HELLO, SERVER_HELLO, ENCRYPTED_EXTENSIONS, FINISHED, CLIENT_FINISHED];
        if !cfg.resumption {
            expect_client.extend([CERTIFICATE, CERTIFICATE_VERIFY]);
            expect_server.extend([CERTIFICATE, CERTIFICATE_VERIFY]);
        } else {
            expect_client.push(NEW_SESSION_TICKET);
            expect_server.push(NEW_SESSION_TICKET);
        }
        if cfg.expects_hrr() {
            expect_client.push(HELLO_RETRY_REQUEST);
            expect_server.push(HELLO_RETRY_REQUEST);
        }
        if cfg.client_chain.is_some() {
            expect_client.extend([CERTIFICATE_REQUEST, CLIENT_CERTIFICATE, CLIENT_CERTIFICATE_VERIFY]);
            expect_server.extend([CERTIFICATE_REQUEST, CLIENT_CERTIFICATE, CLIENT_CERTIFICATE_VERIFY]);
        }
        let set = |v: Vec<&str>| v.into_iter().map(String::from).collect::<BTreeSet<String>>();
        assert_eq!(client, set(expect_client), "{what}: client");
        assert_eq!(o.2, set(expect_server), "{what}: server");
    }
}

#[test]
fn the_crypto_is_a_sub_step_of_its_message() {
    let p = prepare(&config(Stack::Rustls, "X25519MLKEM768", "mldsa65:mldsa65"));
    let h = transport::handshake(p.as_ref(), &EndpointOptions::default()).unwrap();
    for k in [
        "client_hello/write_client_hello",
        "client_hello/kx_keygen",
        "server_hello/kx_decapsulate",
        "certificate/verify_cert_chain",
        "certificate_verify/verify_signature",
    ] {
        assert!(h.client.substeps.get(k).is_some_and(|ns| *ns > 0), "rustls client {k}: {:?}", h.client.substeps);
    }
    for k in ["server_hello/kx_encapsulate", "certificate_verify/sign", "client_hello/process_new_packets"] {
        assert!(h.server.substeps.get(k).is_some_and(|ns| *ns > 0), "rustls server {k}: {:?}", h.server.substeps);
    }
    let p = prepare(&config(Stack::Openssl, "X25519MLKEM768", "mldsa65:mldsa65"));
    let h = transport::handshake(p.as_ref(), &EndpointOptions::default()).unwrap();
    for k in ["client_hello/write_client_hello", "server_hello/process_server_hello", "certificate/process_certificate"]
    {
        assert!(h.client.substeps.contains_key(k), "openssl client {k}: {:?}", h.client.substeps);
    }
    for k in ["server_hello/write_server_hello", "certificate_verify/write_certificate_verify"] {
        assert!(h.server.substeps.contains_key(k), "openssl server {k}: {:?}", h.server.substeps);
    }
}

/// Moves what `from` wrote to `to`; returns the bytes moved.
fn pass(from: &mut dyn Endpoint, to: &mut dyn Endpoint) -> Vec<u8> {
    let mut buf = Vec::new();
    from.take_output(&mut buf).unwrap();
    if !buf.is_empty() {
        to.receive(&buf).unwrap();
    }
    buf
}

const LABELS: [&str; 4] = [
    "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
    "SERVER_HANDSHAKE_TRAFFIC_SECRET",
    "CLIENT_TRAFFIC_SECRET_0",
    "SERVER_TRAFFIC_SECRET_0",
];

fn pairs() -> Vec<(Stack, Stack)> {
    vec![
        (Stack::Openssl, Stack::Openssl),
        (Stack::Rustls, Stack::Rustls),
        (Stack::Rustls, Stack::Openssl),
        (Stack::Openssl, Stack::Rustls),
    ]
}

#[test]
fn key_logs_get_the_same_secrets_on_both_sides_and_across_stacks() {
    for (cs, ss) in pairs() {
        let cfg = config(Stack::Openssl, "X25519MLKEM768", "mldsa65:mldsa65");
        let (pc, ps) = (prepare(&on(cs, &cfg)), prepare(&on(ss, &cfg)));
        let (lc, ls) = (Arc::new(MemoryKeyLog::new()), Arc::new(MemoryKeyLog::new()));
        let opts = |log: &Arc<MemoryKeyLog>| EndpointOptions {
            key_log: Some(log.clone() as Arc<dyn KeyLog>),
            ..EndpointOptions::default()
        };
        let mut c = pc.client(&opts(&lc)).unwrap();
        let mut s = ps.server(&opts(&ls)).unwrap();
        c.drive().unwrap();
        let hello = pass(c.as_mut(), s.as_mut());
        // ClientHello.random: record header (5), message header (4), legacy_version (2).
        let random = hello[11..43].to_vec();
        let mut done = (false, false);
        for _ in 0..8 {
            done.1 = s.drive().unwrap();
            pass(s.as_mut(), c.as_mut());
            done.0 = c.drive().unwrap();
            pass(c.as_mut(), s.as_mut());
        }
        assert!(done.0 && done.1, "{cs}→{ss}: handshake incomplete");
        for label in LABELS {
            let a = lc.get(label).unwrap_or_else(|| panic!("{cs}→{ss}: client has no {label}: {:?}", lc.secrets()));
            let b = ls.get(label).unwrap_or_else(|| panic!("{cs}→{ss}: server has no {label}"));
            assert_eq!(a.client_random, random, "{cs}→{ss} {label}: client random");
            assert_eq!(b.client_random, random, "{cs}→{ss} {label}: client random (server)");
            assert_eq!(a.secret, b.secret, "{cs}→{ss} {label}: secrets differ");
            assert_eq!(a.secret.len(), 32, "{cs}→{ss} {label}: SHA-256 suite");
        }
        // Endpoints without a key log log nothing anywhere.
        let mut c2 = pc.client(&EndpointOptions::default()).unwrap();
        let mut s2 = ps.server(&EndpointOptions::default()).unwrap();
        transport::in_memory(c2.as_mut(), s2.as_mut()).unwrap();
        assert_eq!(lc.secrets().len() + ls.secrets().len(), 2 * LABELS.len() + extra(&lc) + extra(&ls));
    }
}

#[test]
fn resumption_works_whether_or_not_endpoints_log_keys() {
    for stack in [Stack::Openssl, Stack::Rustls] {
        let mut cfg = config(stack, "x25519", "p256:p256");
        cfg.resumption = true;
        let p = prepare(&cfg);
        let logged =
            EndpointOptions { key_log: Some(Arc::new(MemoryKeyLog::new()) as Arc<dyn KeyLog>), ..Default::default() };
        let plain = EndpointOptions::default();
        let first = transport::handshake(p.as_ref(), &plain).unwrap();
        assert!(!first.negotiated.resumed);
        for (i, opts) in [&logged, &plain, &logged].into_iter().enumerate() {
            let h = transport::handshake(p.as_ref(), opts).unwrap();
            assert!(h.negotiated.resumed, "{stack}: handshake {} not resumed", i + 2);
        }
    }
}

#[test]
fn a_key_log_file_gets_nss_lines_from_both_stacks() {
    let dir = std::env::temp_dir().join(format!("pqtls-endpoint-keylog-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("keys.log");
    let _ = std::fs::remove_file(&path);
    let file = Arc::new(pqtls_lab::keylog::KeyLogFile::open(&path).unwrap());
    let opts = EndpointOptions { key_log: Some(file.clone() as Arc<dyn KeyLog>), ..Default::default() };
    let cfg = config(Stack::Openssl, "x25519", "p256:p256");
    let (o, r) = (prepare(&cfg), prepare(&on(Stack::Rustls, &cfg)));
    let mut c = r.client(&opts).unwrap();
    let mut s = o.server(&opts).unwrap();
    transport::in_memory(c.as_mut(), s.as_mut()).unwrap();
    assert!(file.error().is_none());
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<Vec<&str>> = text.lines().map(|l| l.split(' ').collect()).collect();
    for label in LABELS {
        let both: Vec<&Vec<&str>> = lines.iter().filter(|l| l[0] == label).collect();
        assert_eq!(both.len(), 2, "{label} from the client and the server:\n{text}");
        assert_eq!(both[0][1..], both[1][1..], "{label}: same random and secret");
        assert_eq!((both[0][1].len(), both[0][2].len()), (64, 64), "{label}: hex of 32 bytes each");
    }
    std::fs::remove_dir_all(&dir).unwrap();
}

/// Secrets beyond the four traffic secrets (EXPORTER_SECRET, …).
fn extra(log: &MemoryKeyLog) -> usize {
    log.secrets().iter().filter(|s| !LABELS.contains(&s.label.as_str())).count()
}

#[test]
fn application_data_round_trip_and_close_on_each_stack_and_across() {
    for (cs, ss) in pairs() {
        let cfg = config(Stack::Openssl, "x25519", "p256:p256");
        let (pc, ps) = (prepare(&on(cs, &cfg)), prepare(&on(ss, &cfg)));
        let mut c = pc.client(&EndpointOptions::default()).unwrap();
        let mut s = ps.server(&EndpointOptions::default()).unwrap();
        transport::in_memory(c.as_mut(), s.as_mut()).unwrap();
        let steps_after_handshake = pqtls_core::trace::attribute(c.trace()).steps;

        let request = b"GET /64k HTTP/1.1\r\nHost: localhost\r\n\r\n";
        c.write_app(request).unwrap();
        pass(c.as_mut(), s.as_mut());
        let mut got = Vec::new();
        assert_eq!(s.read_app(&mut got).unwrap(), request.len(), "{cs}→{ss}");
        assert_eq!(got, request, "{cs}→{ss}");

        let body: Vec<u8> = (0..64 * 1024u32).map(|i| (i * 7 + i / 251) as u8).collect();
        s.write_app(&body).unwrap();
        let wire = pass(s.as_mut(), c.as_mut());
        assert!(wire.len() > body.len(), "{cs}→{ss}: records carry the body");
        let mut got = Vec::new();
        c.read_app(&mut got).unwrap();
        assert_eq!(got.len(), body.len(), "{cs}→{ss}");
        assert!(got == body, "{cs}→{ss}: body differs");
        assert!(!c.peer_closed());

        s.close().unwrap();
        pass(s.as_mut(), c.as_mut());
        let mut rest = Vec::new();
        assert_eq!(c.read_app(&mut rest).unwrap(), 0);
        assert!(c.peer_closed(), "{cs}→{ss}: close_notify not seen");
        c.close().unwrap();
        pass(c.as_mut(), s.as_mut());
        s.read_app(&mut rest).unwrap();
        assert!(s.peer_closed(), "{cs}→{ss}: client close_notify not seen");

        // The handshake's steps are unchanged; application work has its own steps.
        let after = pqtls_core::trace::attribute(c.trace()).steps;
        for (k, v) in &steps_after_handshake {
            assert_eq!(after.get(k), Some(v), "{cs}→{ss}: handshake step {k} changed");
        }
        assert!(after.contains_key("app_write") && after.contains_key("app_read"), "{cs}→{ss}: {after:?}");
    }
}

#[test]
fn the_library_version_is_what_cargo_lock_pins() {
    let lock = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.lock")).unwrap();
    let version = |name: &str| {
        let block = lock.split("[[package]]").find(|b| b.lines().any(|l| l.trim() == format!("name = \"{name}\"")));
        let line = block.unwrap().lines().find(|l| l.trim_start().starts_with("version = ")).unwrap();
        line.trim().trim_start_matches("version = ").trim_matches('"').to_string()
    };
    assert_eq!(
        RustlsBackend::new().library_version(),
        format!(
            "rustls {} (aws-lc-rs {}, aws-lc-sys {})",
            version("rustls"),
            version("aws-lc-rs"),
            version("aws-lc-sys")
        )
    );
}
