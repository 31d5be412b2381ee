//! Made-up result records with a realistic shape, for unit tests of the store and the
//! exporters. The numbers are invented (deterministic per configuration id): never use
//! them as results.

use pqtls_core::backend::Negotiated;
use pqtls_core::catalogue::GroupKind;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::record::{Bytes, Env, InsituResult, Loops, Measured, Outcome, Rate, Record, SideSummary};
use pqtls_core::scenario::Scenario;
use pqtls_core::stats::{Quantiles, Summary};
use pqtls_core::trace::SideSample;
use sha2::{Digest, Sha256};

pub mod load;
pub mod resident;
pub mod transfer;

/// A deterministic pseudo-random generator (xorshift64*): small, seeded, for tests.
pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

fn sign_ns(alg: &str) -> f64 {
    match alg {
        a if a.starts_with("rsa") => 900_000.0,
        "p256" => 25_000.0,
        "p384" => 150_000.0,
        "p521" => 400_000.0,
        "ed25519" => 20_000.0,
        a if a.starts_with("mldsa") => 120_000.0,
        _ => 200_000.0,
    }
}

fn verify_ns(alg: &str) -> f64 {
    match alg {
        a if a.starts_with("rsa") => 30_000.0,
        "p256" => 60_000.0,
        "p521" => 700_000.0,
        a if a.starts_with("mldsa") => 45_000.0,
        _ => 80_000.0,
    }
}

fn kex_ns(kind: &GroupKind, name: &str) -> f64 {
    match kind {
        GroupKind::Classical { share_bytes } => 20_000.0 + *share_bytes as f64 * 400.0,
        GroupKind::Kem { .. } => 30_000.0,
        GroupKind::Hybrid { .. } if name.starts_with("X25519") => 75_000.0,
        GroupKind::Hybrid { .. } => 120_000.0,
    }
}

/// A synthetic measurement of `cfg`: `n` handshakes, with ML-DSA signing given a long tail
/// (rejection sampling) and sizes from the catalogue.
pub fn measure(sc: &Scenario, n: usize) -> Measured {
    let cfg = &sc.handshake;
    let id = sc.id();
    let seed = Sha256::digest(id.as_bytes());
    let mut rng = Rng(u64::from_le_bytes([seed[0], seed[1], seed[2], seed[3], seed[4], seed[5], seed[6], seed[7]]) | 1);
    let g = cfg.expected_group();
    let kex = kex_ns(&g.kind, g.name);
    let leaf = cfg.chain.leaf.name;
    let mldsa_leaf = leaf.starts_with("mldsa");
    let parents: f64 = cfg.chain.algs().iter().skip(1).map(|a| verify_ns(a.name)).sum::<f64>()
        * if cfg.verify_parent { 1.0 } else { 0.0 };
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        let mut noise = |base: f64| -> u64 { (base * (1.0 + 0.05 * rng.unit() + 0.02 * rng.unit())) as u64 };
        let mut server = SideSample::default();
        server.steps.insert("read_client_hello".into(), noise(4_000.0));
        server.steps.insert("process_client_hello".into(), noise(15_000.0));
        server.steps.insert("write_server_hello".into(), noise(kex * 0.6));
        server.steps.insert("write_encrypted_extensions".into(), noise(3_000.0));
        server.steps.insert("write_certificate".into(), noise(8_000.0));
        server.steps.insert("write_certificate_verify".into(), 0);
        server.steps.insert("write_finished".into(), noise(6_000.0));
        server.steps.insert("process_finished".into(), noise(5_000.0));
        let tail = if mldsa_leaf { 1.0 + (-(1.0 - rng.unit()).ln()) * 0.9 } else { 1.0 };
        let sign = (sign_ns(leaf) * tail * (1.0 + 0.03 * rng.unit())) as u64;
        server.steps.insert("write_certificate_verify".into(), sign);
        let mut noise = |base: f64| -> u64 { (base * (1.0 + 0.05 * rng.unit() + 0.02 * rng.unit())) as u64 };
        let mut client = SideSample::default();
        client.steps.insert("write_client_hello".into(), noise(kex * 0.5 + 20_000.0));
        client.steps.insert("process_server_hello".into(), noise(kex * 0.5 + 15_000.0));
        client.steps.insert("process_encrypted_extensions".into(), noise(2_000.0));
        client.steps.insert("process_certificate".into(), noise(40_000.0 + parents));
        client.steps.insert("process_certificate_verify".into(), noise(verify_ns(leaf)));
        client.steps.insert("process_finished".into(), noise(6_000.0));
        client.steps.insert("write_finished".into(), noise(5_000.0));
        for s in [&mut client, &mut server] {
            s.total_cpu_ns = s.steps.values().sum();
            s.total_wall_ns = s.total_cpu_ns + s.total_cpu_ns / 20;
        }
        samples.push((client, server));
    }
    let record = record_of(sc, &samples);
    Measured { record, samples }
}

/// Summarises `(client, server)` samples into a record, the way the lab does.
pub fn record_of(sc: &Scenario, samples: &[(SideSample, SideSample)]) -> Record {
    let cfg = &sc.handshake;
    let qs = Quantiles::default();
    let clients: Vec<&SideSample> = samples.iter().map(|s| &s.0).collect();
    let servers: Vec<&SideSample> = samples.iter().map(|s| &s.1).collect();
    let totals: Vec<u64> = samples.iter().map(|(c, s)| c.total_cpu_ns + s.total_cpu_ns).collect();
    let bytes = bytes_of(sc);
    let result = InsituResult {
        negotiated: Negotiated { hrr: cfg.expects_hrr(), resumed: cfg.resumption, ..negotiated_as_asked(cfg) },
        client: SideSummary::of(&clients, &qs),
        server: SideSummary::of(&servers, &qs),
        total_cpu_ns: Summary::of(&totals, &qs),
        unit: sc.clock.unit(),
        bytes,
        loops: Loops {
            warmup: 10,
            measured: samples.len() as u64,
            max: samples.len() as u64,
            precision: None,
            stopped: "fixed".into(),
            mode: sc.transport.name().into(),
            quantiles: qs.clone(),
            clock: sc.clock.name().into(),
            anchor_ns: (sc.clock == pqtls_core::trace::Clock::Split).then_some(pqtls_core::trace::ANCHOR_WALL_NS),
            disturbed: 0,
            notes: Vec::new(),
            stopped_by: "own rule".into(),
            rule_met_at: None,
            counter: (sc.clock == pqtls_core::trace::Clock::Instructions).then(|| pqtls_core::record::Counting {
                source: "callgrind".into(),
                version: "valgrind-3.19.0".into(),
                note: String::new(),
            }),
        },
        rate: Rate { handshakes_per_s: 1000.0, wall_s: samples.len() as f64 / 1000.0 },
        baseline: None,
        noise: None,
        memory: None,
        quic: None,
    };
    synthetic_record(sc, Outcome::Insitu(Box::new(result)))
}

/// The record of `sc` with `result`, as the synthetic tool gives it: tool and CPU model
/// `synthetic`, no settings, measured at 0.
fn synthetic_record(sc: &Scenario, result: Outcome) -> Record {
    Record {
        schema: pqtls_core::record::SCHEMA_VERSION,
        id: sc.id(),
        label: sc.label(),
        scenario: sc.values().clone(),
        settings: None,
        env: Env { tool_version: "synthetic".into(), cpu_model: "synthetic".into(), ..Env::default() },
        measured_at: 0,
        result,
    }
}

/// What a synthetic handshake of `cfg` negotiates: the group, leaf signature scheme and
/// cipher suite asked for, TLS 1.3, without a HelloRetryRequest or resumption.
fn negotiated_as_asked(cfg: &HandshakeConfig) -> Negotiated {
    Negotiated {
        group: cfg.expected_group().name.into(),
        sigalg: cfg.chain.leaf.scheme.into(),
        cipher: cfg.cipher.name.into(),
        hrr: false,
        resumed: false,
        version: "TLSv1.3".into(),
        cert_compression: (cfg.cert_compression != pqtls_core::catalogue::CertCompression::None)
            .then(|| cfg.cert_compression.name().to_string()),
    }
}

/// Bytes of one handshake of `sc`, from the catalogue's sizes (what [`record_of`] stores).
pub fn bytes_of(sc: &Scenario) -> Bytes {
    let cfg = &sc.handshake;
    let g = cfg.expected_group();
    let certs: u64 = cfg
        .chain
        .algs()
        .iter()
        .enumerate()
        .filter(|(i, _)| *i + 1 < cfg.chain.algs().len() || cfg.send_root)
        .map(|(i, a)| {
            let signer = cfg.chain.algs().get(i + 1).copied().unwrap_or(a);
            300 + a.public_key_bytes as u64 + signer.signature_bytes as u64
        })
        .sum();
    let mut messages = indexmap::IndexMap::new();
    messages.insert("ClientHello".to_string(), 250 + g.client_share_bytes() as u64);
    messages.insert("ServerHello".to_string(), 90 + g.server_share_bytes() as u64);
    messages.insert("EncryptedExtensions".to_string(), 10);
    messages.insert("Certificate".to_string(), 13 + certs);
    messages.insert("CertificateVerify".to_string(), 8 + cfg.chain.leaf.signature_bytes as u64);
    messages.insert("Finished".to_string(), 36);
    messages.insert("ClientFinished".to_string(), 36);
    messages.insert("NewSessionTicket".to_string(), 2 * 250);
    let c2s = messages["ClientHello"] + 5 + 6 + messages["ClientFinished"] + 22;
    let s2c = messages["ServerHello"]
        + 5
        + 6
        + messages["EncryptedExtensions"]
        + messages["Certificate"]
        + messages["CertificateVerify"]
        + messages["Finished"]
        + 22
        + messages["NewSessionTicket"]
        + 2 * 22;
    Bytes {
        client_to_server: c2s,
        server_to_client: s2c,
        records_client_to_server: 3,
        records_server_to_client: 5,
        messages,
        server_to_client_range: [s2c, s2c],
        unmeasured_records: 0,
        compressed_certificates: indexmap::IndexMap::new(),
    }
}
