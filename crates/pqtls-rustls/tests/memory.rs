//! Heap accounting on rustls + aws-lc (pqtls_core::memory): rustls through the counting global
//! allocator, aws-lc through its hooks installed before its first allocation; every
//! handshake's allocations counted per side and step, adding up, balanced once dropped.

use pqtls_core::backend::{Backend, EndpointOptions, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::memory::{self, SideMemory, StepMemory};
use pqtls_lab::transport;
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::path::Path;
use std::sync::{Arc, OnceLock};

#[global_allocator]
static ALLOCATOR: memory::CountingAllocator = memory::CountingAllocator;

/// The hooks first (before the PKI or anything else touches aws-lc), then the PKI.
fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        // SAFETY: the first use of aws-lc in this process: every test reaches aws-lc only
        // through this PKI, made after the hooks.
        #[allow(unsafe_code)]
        unsafe { pqtls_rustls::memory::count_allocations() }.expect("aws-lc takes the hooks");
        memory::start_counting();
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn prepared(group: &str, chain: &str, resumption: bool) -> Arc<dyn Prepared> {
    let mut cfg = HandshakeConfig::named(Stack::Rustls, group, chain, "TLS_AES_128_GCM_SHA256").unwrap();
    cfg.resumption = resumption;
    let files = pki().files_for(&cfg).expect("chain files");
    Arc::from(RustlsBackend::new().prepare(&cfg, &files).expect("prepare"))
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
            assert!(m.steps.keys().all(|k| s.steps.contains_key(k)), "{group} {side}");
            assert!(m.peak_live_bytes > 0, "{group} {side}");
        }
    }
    assert!(RustlsBackend::new().counted_allocations().unwrap().not_counted.contains("liboqs"));
}

/// Everything a handshake allocates — endpoints made, handshake, endpoints dropped — is freed
/// on the thread (the in-memory transport runs both sides on it), with and without
/// resumption (the client's saved ticket is replaced by one of the same size).
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
        assert!(d.allocations > 50, "{d:?}");
        assert_eq!(d.allocated_bytes, d.freed_bytes, "resumption {resumption}: {d:?} ({} bytes kept)", d.net_bytes());
        assert_eq!(d.allocations, d.frees, "resumption {resumption}: {d:?}");
    }
}
