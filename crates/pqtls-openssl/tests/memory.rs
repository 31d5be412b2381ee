//! Heap accounting on OpenSSL (pqtls_core::memory): its allocator hooks installed before its
//! first allocation, every handshake's allocations counted per side and step, adding up, and
//! balanced once the connection is dropped. (Installing them late is refused:
//! tests/memory_late.rs, a process of its own.)

use pqtls_core::backend::{Backend, EndpointOptions, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::memory::{self, SideMemory, StepMemory};
use pqtls_lab::transport;
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use std::path::Path;
use std::sync::{Arc, OnceLock};

#[global_allocator]
static ALLOCATOR: memory::CountingAllocator = memory::CountingAllocator;

/// The hooks first (before the PKI or anything else touches OpenSSL), then the PKI.
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        pqtls_openssl::count_allocations().expect("OpenSSL takes the hooks before its first allocation");
        memory::start_counting();
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki")
    })
}

fn prepared(group: &str, chain: &str, resumption: bool) -> Arc<dyn Prepared> {
    let mut cfg = HandshakeConfig::named(Stack::Openssl, group, chain, "TLS_AES_128_GCM_SHA256").unwrap();
    cfg.resumption = resumption;
    let files = pki().files_for(&cfg).expect("chain files");
    Arc::from(OpensslBackend::new().prepare(&cfg, &files).expect("prepare"))
}

const COUNTED: EndpointOptions = EndpointOptions {
    traced: true,
    clock: pqtls_core::trace::Clock::Split,
    key_log: None,
    counter: None,
    memory: true,
    verification_timed: false,
};

fn sum(m: &SideMemory) -> StepMemory {
    m.steps.values().fold(StepMemory::default(), |mut t, s| {
        t.add(s);
        t
    })
}

#[test]
fn every_handshake_counts_allocations_per_step_that_add_up_to_the_side() {
    for (group, chain) in
        [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65"), ("MLKEM1024", "mldsa87:mldsa87")]
    {
        let p = prepared(group, chain, false);
        let h = transport::handshake(p.as_ref(), &COUNTED).unwrap();
        for (side, s) in [("client", &h.client), ("server", &h.server)] {
            let m = s.memory.as_ref().unwrap_or_else(|| panic!("{group} {side}: no memory counts"));
            assert!(m.total.allocations > 0 && m.total.allocated_bytes > 0, "{group} {side}: {m:?}");
            assert_eq!(sum(m), m.total, "{group} {side}: steps do not add up");
            // The steps are the CPU steps: same names, same order.
            assert!(
                m.steps.keys().all(|k| s.steps.contains_key(k)),
                "{group} {side}: {:?} vs {:?}",
                m.steps.keys(),
                s.steps.keys()
            );
            assert!(m.peak_live_bytes > 0, "{group} {side}");
        }
    }
    // An ML-DSA-65 server's Certificate/CertificateVerify work allocates more than P-256's.
    let classic = transport::handshake(prepared("x25519", "p256:p256", false).as_ref(), &COUNTED).unwrap();
    let pq = transport::handshake(prepared("X25519MLKEM768", "mldsa65:mldsa65", false).as_ref(), &COUNTED).unwrap();
    let bytes = |h: &transport::Handshake| h.server.memory.as_ref().unwrap().total.allocated_bytes;
    assert!(bytes(&pq) > bytes(&classic), "{} vs {}", bytes(&pq), bytes(&classic));
}

#[test]
fn without_memory_asked_a_trace_counts_nothing() {
    let p = prepared("x25519", "p256:p256", false);
    let h = transport::handshake(p.as_ref(), &EndpointOptions::default()).unwrap();
    assert!(h.client.memory.is_none() && h.server.memory.is_none());
}

/// Everything a handshake allocates — endpoints made, handshake, endpoints dropped — is freed
/// on the thread (the in-memory transport runs both sides on it). Two things are allowed to
/// stay, and are named: OpenSSL's once-only caches (filled by the warm-up handshakes), and
/// with resumption the client's saved ticket (replaced by the next one: same size).
#[test]
fn a_handshake_frees_what_it_allocated_once_its_connection_is_dropped() {
    for resumption in [false, true] {
        let p = prepared("X25519MLKEM768", "mldsa65:mldsa65", resumption);
        for _ in 0..3 {
            transport::handshake(p.as_ref(), &COUNTED).unwrap();
        }
        let before = memory::stamp();
        let h = transport::handshake(p.as_ref(), &COUNTED).unwrap();
        drop(h);
        let d = memory::stamp().since(&before);
        assert!(d.allocations > 100, "{d:?}");
        assert_eq!(d.allocated_bytes, d.freed_bytes, "resumption {resumption}: {d:?} ({} bytes kept)", d.net_bytes());
        assert_eq!(d.allocations, d.frees, "resumption {resumption}: {d:?}");
    }
}
