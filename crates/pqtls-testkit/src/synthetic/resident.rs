//! Made-up resident records (memory per idle connection): a terminator per row, readings at 0
//! and at the held counts, the heap for `pqtls serve` only. Invented numbers with a known
//! shape: every connection adds [`heap_per_connection_bytes`] of heap and twice that of RSS
//! (the PSS is the RSS: one process).

use super::{negotiated_as_asked, synthetic_record};
use pqtls_core::load::Terminator;
use pqtls_core::record::{Outcome, Record};
use pqtls_core::resident::{HeapReading, PerConnection, ResidentReading, ResidentResult};
use pqtls_core::scenario::Scenario;

/// The counts held by every synthetic record.
pub const HELD: [u64; 2] = [1000, 10_000];

/// The heap one idle connection of `sc` keeps: 16 KiB, plus 1 KiB per KiB of the chain's
/// signature and public key sizes, plus 4 KiB on OpenSSL; halved when resumed (no chain).
pub fn heap_per_connection_bytes(sc: &Scenario) -> u64 {
    let h = &sc.handshake;
    let chain = (h.chain.leaf.signature_bytes + h.chain.leaf.public_key_bytes) as u64;
    let stack = if h.stack.name() == "openssl" { 4096 } else { 0 };
    let full = 16_384 + chain + stack;
    if h.resumption {
        full / 2
    } else {
        full
    }
}

/// The scenario of one row: `terminator` holding connections of group × chain.
pub fn scenario(stack: &str, terminator: &str, group: &str, chain: &str, resumption: bool) -> Scenario {
    let r = if resumption { "true" } else { "false" };
    Scenario::new([("stack", stack), ("terminator", terminator), ("group", group), ("chain", chain), ("resumption", r)])
        .expect("a valid resident scenario")
}

/// The resident record of `sc`: readings at 0 and at [`HELD`].
pub fn resident(sc: &Scenario) -> Record {
    let per = heap_per_connection_bytes(sc);
    let own = sc.load.terminator == "pqtls";
    let at = |n: u64| ResidentReading {
        connections: n,
        open_connections: own.then_some(n),
        heap: own.then(|| HeapReading::of(50_000 + 5 * n, 40_000, 9_000_000 + per * n, 1_000_000)),
        processes: if sc.load.terminator == "nginx" { 2 } else { 1 },
        rss_bytes: (20 << 20) + 2 * per * n,
        pss_bytes: (20 << 20) + 2 * per * n,
    };
    let readings: Vec<ResidentReading> = std::iter::once(0).chain(HELD).map(at).collect();
    let per_connection = readings.iter().skip(1).map(|r| PerConnection::between(&readings[0], r)).collect();
    let mut negotiated = negotiated_as_asked(&sc.handshake);
    negotiated.resumed = sc.handshake.resumption;
    let result = ResidentResult {
        terminator: Terminator { name: sc.load.terminator.clone(), version: "synthetic".into(), backend: None },
        negotiated,
        path: "/0B".into(),
        resumed_connections: if sc.handshake.resumption { HELD[1] } else { 0 },
        readings,
        per_connection,
        open_after_close: own.then_some(0),
        opening_ns: 20_000_000_000,
        counted: if own { "synthetic".into() } else { String::new() },
        not_counted: String::new(),
        stopped: "complete".into(),
        notes: Vec::new(),
    };
    synthetic_record(sc, Outcome::Resident(Box::new(result)))
}

/// The study: pqtls serve on both stacks and nginx, three configurations, full and resumed.
pub fn study() -> Vec<Record> {
    let mut out = Vec::new();
    for (stack, terminator) in [("openssl", "pqtls"), ("rustls", "pqtls"), ("openssl", "nginx")] {
        for (group, chain) in
            [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65"), ("MLKEM1024", "mldsa87:mldsa87")]
        {
            for resumption in [false, true] {
                out.push(resident(&scenario(stack, terminator, group, chain, resumption)));
            }
        }
    }
    out
}
