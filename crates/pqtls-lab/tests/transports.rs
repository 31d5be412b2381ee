//! What must hold over every transport: on both stacks, socketpair and TCP negotiate exactly
//! what was asked and carry the same bytes per message and per direction as memory; per
//! side, the steps add up to the totals. Loopback only; no timing is asserted.

use pqtls_core::backend::{Backend, EndpointOptions, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::trace::{HsType, SideSample};
use pqtls_lab::transport::{self, Handshake, TransportKind, TransportOptions, Wait};
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::collections::BTreeMap;
use std::path::Path;
use std::sync::{Arc, OnceLock};

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn config(stack: Stack, group: &str, chain: &str) -> HandshakeConfig {
    HandshakeConfig::named(stack, group, chain, "TLS_AES_128_GCM_SHA256").unwrap()
}

fn prepare(cfg: &HandshakeConfig) -> Arc<dyn Prepared> {
    let files = pki().files_for(cfg).expect("chain files");
    let backend: Box<dyn Backend> = match cfg.stack {
        Stack::Openssl => Box::new(OpensslBackend::new()),
        Stack::Rustls => Box::new(RustlsBackend::new()),
        Stack::S2n => panic!("these tests run OpenSSL and rustls; s2n-tls' are crates/pqtls-s2n/tests"),
        Stack::Boringssl => Box::new(pqtls_boring::BoringBackend::new()),
    };
    Arc::from(backend.prepare(cfg, &files).unwrap_or_else(|e| panic!("{} on {}: {e}", cfg.label(), cfg.stack)))
}

/// Bytes per message type one side wrote, CertificateVerify aside: an ECDSA signature is DER
/// and its length varies by a byte or two from one handshake to the next.
fn messages(side: &SideSample) -> BTreeMap<String, u64> {
    let mut m = BTreeMap::new();
    for (t, b) in &side.wrote {
        if *t != HsType::CertificateVerify {
            *m.entry(t.rfc_name().to_string()).or_insert(0) += *b as u64;
        }
    }
    m
}

fn certificate_verify(side: &SideSample) -> u64 {
    side.wrote.iter().filter(|(t, _)| *t == HsType::CertificateVerify).map(|(_, b)| *b as u64).sum()
}

fn assert_steps_add_up(h: &Handshake, what: &str) {
    for (name, side) in [("client", &h.client), ("server", &h.server)] {
        assert!(side.total_cpu_ns > 0, "{what}: {name} total is 0");
        assert_eq!(side.steps.values().sum::<u64>(), side.total_cpu_ns, "{what}: {name} steps do not add up");
    }
    assert!(h.events > 0, "{what}: no events recorded");
}

/// The same bytes as over memory: every message but CertificateVerify exactly, the
/// CertificateVerify exactly for fixed-size signatures and, for ECDSA (DER), within the
/// signature's possible lengths, and per direction the same count once the CertificateVerify
/// difference is taken out.
fn assert_same_bytes(h: &Handshake, reference: &Handshake, cfg: &HandshakeConfig, what: &str) {
    assert_eq!(messages(&h.client), messages(&reference.client), "{what}: client messages");
    assert_eq!(messages(&h.server), messages(&reference.server), "{what}: server messages");
    let (cv, cv_ref) = (certificate_verify(&h.server), certificate_verify(&reference.server));
    assert!(cv > 0, "{what}: no CertificateVerify");
    let leaf = &cfg.chain.leaf;
    if leaf.variable_signature {
        // 4 (header) + 2 (scheme) + 2 (length) + a DER signature of at most `signature_bytes`;
        // each of its two INTEGERs is a byte shorter per leading zero byte (chance 1/256 each),
        // so two handshakes can differ by 3 bytes and more; 8 bytes shorter is a 2^-32 event.
        let max = 8 + leaf.signature_bytes as u64;
        for n in [cv, cv_ref] {
            assert!((max - 8..=max).contains(&n), "{what}: CertificateVerify {n}, expected {}..={max}", max - 8);
        }
    } else {
        assert_eq!(cv, cv_ref, "{what}: CertificateVerify");
    }
    assert_eq!(h.client_to_server, reference.client_to_server, "{what}: client → server");
    assert_eq!(h.server_to_client.records, reference.server_to_client.records, "{what}: server → client records");
    assert_eq!(
        h.server_to_client.bytes as i64 - cv as i64,
        reference.server_to_client.bytes as i64 - cv_ref as i64,
        "{what}: server → client bytes"
    );
}

#[test]
fn socketpair_and_tcp_carry_what_memory_carries_on_both_stacks() {
    const N: u64 = 4;
    for stack in [Stack::Openssl, Stack::Rustls] {
        for (group, chain) in [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")] {
            let cfg = config(stack, group, chain);
            let prepared = prepare(&cfg);
            let reference = transport::handshake(prepared.as_ref(), &EndpointOptions::default()).unwrap();
            cfg.check(&reference.negotiated, false).unwrap();
            for kind in TransportKind::ALL {
                for wait in [Wait::Spin, Wait::Sleep] {
                    if kind == TransportKind::Memory && wait == Wait::Sleep {
                        continue;
                    }
                    let what = format!("{stack} {} over {kind} ({wait})", cfg.label());
                    let options = TransportOptions { wait, ..TransportOptions::default() };
                    let mut t = transport::build(kind, &options);
                    assert_eq!(t.kind(), kind);
                    let batch = t
                        .run(prepared.clone(), N, &EndpointOptions::default(), &|| false)
                        .unwrap_or_else(|e| panic!("{what}: {e}"));
                    assert_eq!(batch.handshakes.len() as u64, N, "{what}");
                    if kind.threaded() {
                        assert!(
                            batch.notes.iter().any(|n| n.contains("CPU")),
                            "{what}: the notes do not say where the threads ran: {:?}",
                            batch.notes
                        );
                    } else {
                        assert!(batch.notes.is_empty(), "{what}: {:?}", batch.notes);
                    }
                    for h in &batch.handshakes {
                        cfg.check(&h.negotiated, false).unwrap_or_else(|e| panic!("{what}: {e}"));
                        assert_steps_add_up(h, &what);
                        assert_same_bytes(h, &reference, &cfg, &what);
                    }
                }
            }
        }
    }
}

#[test]
fn stop_is_polled_between_handshakes_on_every_transport() {
    let cfg = config(Stack::Openssl, "x25519", "p256:p256");
    let prepared = prepare(&cfg);
    for kind in TransportKind::ALL {
        let mut t = transport::build(kind, &TransportOptions::default());
        let calls = std::cell::Cell::new(0);
        let stop = || {
            calls.set(calls.get() + 1);
            calls.get() >= 2
        };
        let batch = t.run(prepared.clone(), 50, &EndpointOptions::default(), &stop).unwrap();
        assert_eq!(batch.handshakes.len(), 2, "{kind}");
        // The transport keeps working after a stopped run.
        assert_eq!(
            t.run(prepared.clone(), 1, &EndpointOptions::default(), &|| false).unwrap().handshakes.len(),
            1,
            "{kind}"
        );
    }
}

#[test]
fn resumed_handshakes_work_over_tcp() {
    let mut cfg = config(Stack::Rustls, "X25519MLKEM768", "mldsa65:mldsa65");
    cfg.resumption = true;
    let prepared = prepare(&cfg);
    let first =
        transport::handshake(prepared.as_ref(), &EndpointOptions { traced: false, ..Default::default() }).unwrap();
    cfg.check(&first.negotiated, false).unwrap();
    let batch = transport::build(TransportKind::Tcp, &TransportOptions::default())
        .run(prepared, 3, &EndpointOptions::default(), &|| false)
        .unwrap();
    for h in &batch.handshakes {
        cfg.check(&h.negotiated, true).unwrap();
        assert_eq!(certificate_verify(&h.server), 0);
        assert_steps_add_up(h, "resumed over tcp");
    }
}

#[test]
fn the_runner_measures_over_the_socketpair_with_steps_that_add_up() {
    use pqtls_core::scenario::Scenario;
    use pqtls_core::settings::Settings;
    use pqtls_lab::Measurement;
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(RustlsBackend::new())];
    let files = |cfg: &HandshakeConfig| pki().files_for(cfg);
    let lab = pqtls_lab::Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, pqtls_lab::env::collect("test", "test", Default::default())),
        transport: TransportOptions::default(),
        counter: None,
        quic: None,
    };
    let sc = Scenario::new([("stack", "rustls"), ("transport", "socketpair")]).unwrap();
    let s = Settings::new(3, 20, None, Default::default()).unwrap();
    let mut notes = Vec::new();
    let m = lab
        .measure(&sc, &s, &std::sync::atomic::AtomicBool::new(false), &mut |p| notes.extend(p.notes.iter().cloned()))
        .unwrap();
    assert_eq!(m.samples.len(), 20);
    for (c, sv) in &m.samples {
        assert_eq!(c.steps.values().sum::<u64>(), c.total_cpu_ns);
        assert_eq!(sv.steps.values().sum::<u64>(), sv.total_cpu_ns);
    }
    // Each note comes once, however many batches repeat it, and the record keeps it.
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(notes[0].contains("CPU"), "{notes:?}");
    assert_eq!(m.record.insitu().unwrap().loops.notes, notes);
    assert_eq!(m.record.insitu().unwrap().loops.mode, "socketpair");
}

#[test]
fn a_cross_check_runs_over_any_list_of_transports() {
    let cfg = config(Stack::Openssl, "X25519MLKEM768", "mldsa65:mldsa65");
    let kinds = [TransportKind::Tcp, TransportKind::Memory, TransportKind::Socketpair];
    let check = pqtls_lab::insitu::transport_cross_check(
        prepare(&cfg),
        &kinds,
        &TransportOptions::default(),
        2,
        3,
        Default::default(),
    )
    .unwrap();
    assert_eq!(check.samples.iter().map(|(k, _)| *k).collect::<Vec<_>>(), kinds);
    for (k, v) in &check.samples {
        assert_eq!(v.len(), 6, "{k}");
        let steps: Vec<_> = v[0].0.steps.keys().collect();
        assert_eq!(steps, check.samples[1].1[0].0.steps.keys().collect::<Vec<_>>(), "{k}: client steps differ");
    }
    assert!(!check.notes.is_empty());
    let e = pqtls_lab::insitu::transport_cross_check(
        prepare(&cfg),
        &[],
        &TransportOptions::default(),
        1,
        1,
        Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("memory,socketpair,tcp"), "{e}");
}
