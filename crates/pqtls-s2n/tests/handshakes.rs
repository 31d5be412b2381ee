//! What must hold for the s2n-tls backend: every group and leaf the catalogue lists for s2n-tls
//! negotiates exactly what was asked, with the security policy that expresses it; sizes agree
//! with the catalogue byte for byte; what no policy expresses is refused saying why; options
//! (HelloRetryRequest, mTLS, resumption, root sent, key log) work; steps add up.

use pqtls_core::backend::{Backend, EndpointOptions, MemoryKeyLog, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::trace::SideSample;
use pqtls_lab::transport::{self, Handshake};
use pqtls_pki::Pki;
use pqtls_s2n::S2nBackend;
use std::path::Path;
use std::sync::{Arc, OnceLock};

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn config(groups: &[&str], chain: &str) -> HandshakeConfig {
    let mut c = HandshakeConfig::new(
        Stack::S2n,
        catalogue::group(groups[0]).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    c.groups = groups.iter().map(|g| catalogue::group(g).unwrap()).collect();
    c
}

fn prepare(cfg: &HandshakeConfig) -> pqtls_core::Result<Box<dyn Prepared>> {
    S2nBackend::new().prepare(cfg, &pki().files_for(cfg).expect("chain files"))
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

#[test]
fn x25519_p256_full_handshake() {
    let cfg = config(&["x25519"], "p256:p256");
    let h = run(&cfg).unwrap();
    cfg.check(&h.negotiated, false).unwrap();
    steps_add_up(&h);
    eprintln!("{:?}\n{:?}\n{:?}\n{:?}", h.client.steps, h.server.steps, h.client.wrote, h.server.wrote);
}
