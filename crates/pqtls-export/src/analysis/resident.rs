//! Resident records (`kind = "resident"`, docs/memory.md): what the reports show of them,
//! computed once — memory per idle connection per configuration (heap for `pqtls serve`, PSS
//! for nginx and HAProxy), connections per GiB, and the rule of thumb per chain: what a chain
//! adds per idle connection against the baseline chain on the same terminator and stack.
//!
//! The capacity model ([`super::capacity`]) is computed from in-situ records; when a result set
//! also holds resident records of the same configurations (`pqtls report DIR --with
//! RESIDENT_DIR`), its table gains connections per GiB beside sessions/s from them
//! ([`idle_memory`]).

use super::View;
use pqtls_core::resident::{PerConnection, ResidentResult};

/// A resident record with its result at hand; derefs to the [`ResidentResult`].
pub type ResidentView<'a> = View<'a, ResidentResult>;

/// The chain a rule of thumb compares others with (classical, the smallest).
pub const BASELINE_CHAIN: &str = "p256:p256";

impl<'a> ResidentView<'a> {
    /// Who terminated: `pqtls` (pqtls serve), `nginx`, `haproxy`.
    pub fn terminator(&self) -> &'a str {
        &self.result.terminator.name
    }

    /// The figure at the most connections held.
    pub fn per_connection(&self) -> Option<&'a PerConnection> {
        self.result.largest()
    }
}

/// One rule of thumb: on one terminator and stack, with or without resumption, what `chain`
/// (and its group) adds per idle connection against [`BASELINE_CHAIN`].
#[derive(Clone, Debug, PartialEq)]
pub struct ChainRule {
    pub terminator: String,
    pub stack: String,
    pub resumed: bool,
    pub chain: String,
    pub group: String,
    pub baseline_group: String,
    /// Bytes per connection: the chain's and the baseline's (heap for pqtls serve, PSS otherwise).
    pub bytes: f64,
    pub baseline_bytes: f64,
    /// `heap` or `pss`.
    pub source: &'static str,
}

impl ChainRule {
    pub fn added_bytes(&self) -> f64 {
        self.bytes - self.baseline_bytes
    }

    /// In words: "on nginx (openssl), an ML-DSA-65 chain (X25519MLKEM768) adds 12.3 KiB per idle
    /// connection (heap) against p256:p256 (x25519): 30.1 vs 17.8 KiB".
    pub fn sentence(&self) -> String {
        let on =
            if self.terminator == "pqtls" { format!("pqtls serve ({})", self.stack) } else { self.terminator.clone() };
        let kib = |b: f64| b / 1024.0;
        let d = self.added_bytes();
        format!(
            "on {on}{}, a {} chain ({}) {} {:.1} KiB per idle connection ({}) against {} ({}): {:.1} vs {:.1} KiB",
            if self.resumed { ", resumed connections" } else { "" },
            self.chain,
            self.group,
            if d >= 0.0 { "adds" } else { "saves" },
            kib(d.abs()),
            self.source,
            BASELINE_CHAIN,
            self.baseline_group,
            kib(self.bytes),
            kib(self.baseline_bytes)
        )
    }
}

/// Rules of thumb per chain: each record whose chain is not the baseline, against the record
/// of the baseline chain with the same terminator, stack and resumption (and the same figure:
/// both heap or both PSS).
pub fn chain_rules(all: &[ResidentView]) -> Vec<ChainRule> {
    let key = |v: &ResidentView| {
        (v.terminator().to_string(), v.factor("stack").to_string(), v.factor("resumption") == "true")
    };
    let mut out = Vec::new();
    for v in all.iter().filter(|v| v.factor("chain") != BASELINE_CHAIN) {
        let Some(p) = v.per_connection() else { continue };
        let base = all.iter().find(|b| b.factor("chain") == BASELINE_CHAIN && key(b) == key(v));
        let Some((b, bp)) = base.and_then(|b| b.per_connection().map(|bp| (b, bp))) else { continue };
        if p.source() != bp.source() {
            continue;
        }
        let (terminator, stack, resumed) = key(v);
        out.push(ChainRule {
            terminator,
            stack,
            resumed,
            chain: v.factor("chain").to_string(),
            group: v.factor("group").to_string(),
            baseline_group: b.factor("group").to_string(),
            bytes: p.bytes(),
            baseline_bytes: bp.bytes(),
            source: p.source(),
        });
    }
    out
}

/// The factors an in-situ record and a resident record must share to be the same
/// configuration (the resident one held by pqtls serve of that stack).
const SAME_CONFIGURATION: [&str; 5] = ["stack", "group", "chain", "client_chain", "resumption"];

/// What pqtls serve keeps per idle connection for the configuration of an in-situ record,
/// from a resident record of the same configuration in the same result set (`pqtls report
/// DIR --with RESIDENT_DIR`): the capacity model's connections per GiB.
pub fn idle_memory<'a>(record: &super::InsituView, residents: &[ResidentView<'a>]) -> Option<&'a PerConnection> {
    residents
        .iter()
        .filter(|v| v.terminator() == "pqtls")
        .find(|v| SAME_CONFIGURATION.iter().all(|f| v.factor(f) == record.factor(f)))
        .and_then(|v| v.per_connection())
}
