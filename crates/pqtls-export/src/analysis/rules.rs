//! Rules of thumb derived from the records: each compares two configurations that differ in
//! one factor only, and names both.
//!
//! - Groups: every group against the reference group (x25519 when measured), with the
//!   reference chain (p256:p256 when measured) and every other factor equal: the added
//!   handshake CPU (client + server, median) with its uncertainty.
//! - Chains: every chain against the reference chain, with the reference group: the factor
//!   on server CPU at the median and at the highest quantile, and the factor on the sessions
//!   per second a 10 Gbit/s link carries, and how the signing step changes (found by its
//!   role, [`super::roles`], in either step vocabulary).
//!
//! "Every other factor equal" is decided over the whole factor table, so a factor added to
//! it is taken into account without a change here.

use super::capacity::{capacity, NetworkModel};
use super::roles::signing_step;
use super::{key_without, InsituView};
use crate::tables::{pct, us};
use pqtls_core::stats::Delta;
use serde::Serialize;

/// One generated sentence and the records it came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rule {
    pub text: String,
    /// Ids of the records compared: (the configuration, its reference).
    pub ids: (String, String),
}

/// The factors a rule varies.
const GROUP: &str = "group";
const CHAIN: &str = "chain";

fn pick<'a>(records: &[InsituView<'a>], factor: &str, preferred: &str) -> Option<&'a str> {
    records.iter().find(|r| r.factor(factor) == preferred).or_else(|| records.first()).map(|r| r.factor(factor))
}

/// Highest quantile key of a summary (e.g. `p99`).
fn top_quantile(r: &InsituView) -> Option<(String, f64)> {
    let (k, v) = r.server.total_cpu_ns.quantiles.iter().next_back()?;
    Some((k.clone(), *v))
}

/// "; signing (step) goes from a to b µs" when both records have a signing step.
fn signing(r: &InsituView, base: &InsituView) -> String {
    let median = |x: &InsituView| {
        let step = signing_step(x)?;
        Some((step.clone(), x.server.steps.get(&step)?.median))
    };
    match (median(r), median(base)) {
        (Some((step, a)), Some((_, b))) => format!("; signing ({step}) takes {} µs vs {} µs", us(a), us(b)),
        _ => String::new(),
    }
}

/// Rules of thumb for a set of in-situ records, at most `limit`.
pub fn rules_of_thumb(records: &[InsituView], model: &NetworkModel, limit: usize) -> Vec<Rule> {
    let mut out = Vec::new();
    let Some(ref_group) = pick(records, GROUP, "x25519") else { return out };
    let Some(ref_chain) = pick(records, CHAIN, "p256:p256") else { return out };
    let link_gbps = 10.0;
    // Reference contexts: per stack, the first record with the reference group and chain
    // and one key share.
    let mut contexts: Vec<&InsituView> = Vec::new();
    for r in records {
        if r.factor(GROUP) == ref_group
            && r.factor(CHAIN) == ref_chain
            && !r.factor("key_shares").contains(',')
            && !contexts.iter().any(|c| c.factor(super::STACK) == r.factor(super::STACK))
        {
            contexts.push(r);
        }
    }
    for ctx in &contexts {
        let stack = if contexts.len() > 1 { format!(" on {}", ctx.factor(super::STACK)) } else { String::new() };
        // Groups.
        let gkey = key_without(ctx.record, &[GROUP]);
        for r in records.iter().filter(|r| r.factor(GROUP) != ref_group && key_without(r.record, &[GROUP]) == gkey) {
            let d = Delta::between(&r.total_cpu_ns, &ctx.total_cpu_ns);
            let verb = if d.delta >= 0.0 { "adds" } else { "saves" };
            let noise = if d.significant() { "" } else { ", within noise" };
            out.push(Rule {
                text: format!(
                    "{} {verb} {} ± {} µs ({}{noise}) of handshake CPU (client + server, median) vs {ref_group} \
                     with the {ref_chain} chain{stack} [{} vs {}]",
                    r.factor(GROUP),
                    us(d.delta.abs()),
                    us(d.half_width),
                    pct(d.relative),
                    r.label(),
                    ctx.label()
                ),
                ids: (r.id().to_string(), ctx.id().to_string()),
            });
        }
        // Chains.
        let ckey = key_without(ctx.record, &[CHAIN]);
        let at_link = NetworkModel { bandwidths_gbps: vec![link_gbps], ..model.clone() };
        let base_cap = capacity(**ctx, &at_link).sessions_at(link_gbps);
        for r in records.iter().filter(|r| r.factor(CHAIN) != ref_chain && key_without(r.record, &[CHAIN]) == ckey) {
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
            let med = ratio(r.server.total_cpu_ns.median, ctx.server.total_cpu_ns.median);
            let (qk, q) = top_quantile(r).unwrap_or(("p50".into(), r.server.total_cpu_ns.median));
            let q_base = ctx.server.total_cpu_ns.quantiles.get(&qk).copied().unwrap_or(ctx.server.total_cpu_ns.median);
            let tail = ratio(q, q_base);
            let cap = capacity(*r, &at_link);
            let link = match (base_cap, cap.sessions_at(link_gbps)) {
                (Some(a), Some(b)) if b > 0.0 && a.is_finite() && b.is_finite() => {
                    let f = a / b;
                    if f >= 1.0 {
                        format!("; cuts the sessions/s a {link_gbps} Gbit/s link carries by {f:.2}×")
                    } else {
                        format!("; raises the sessions/s a {link_gbps} Gbit/s link carries by {:.2}×", 1.0 / f)
                    }
                }
                _ => String::new(),
            };
            out.push(Rule {
                text: format!(
                    "a {} chain multiplies server CPU by {med:.2}× at the median and {tail:.2}× at {qk} vs {ref_chain} \
                     (with {ref_group}{stack}){link}{} [{} vs {}]",
                    r.factor(CHAIN),
                    signing(r, ctx),
                    r.label(),
                    ctx.label()
                ),
                ids: (r.id().to_string(), ctx.id().to_string()),
            });
        }
    }
    out.truncate(limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::record::Record;
    use pqtls_core::scenario::Scenario;

    fn rec(group: &str, chain: &str) -> Record {
        let sc = Scenario::new([("group", group), ("chain", chain)]).unwrap();
        pqtls_testkit::synthetic::measure(&sc, 200).record
    }

    #[test]
    fn rules_name_their_sources_and_use_the_right_pairs() {
        let records = [
            rec("x25519", "p256:p256"),
            rec("X25519MLKEM768", "p256:p256"),
            rec("x25519", "mldsa65:mldsa65"),
            rec("X25519MLKEM768", "mldsa65:mldsa65"),
        ];
        let records: Vec<InsituView> = records.iter().map(|r| InsituView::of(r).unwrap()).collect();
        let rules = rules_of_thumb(&records, &NetworkModel::default(), 10);
        assert_eq!(rules.len(), 2, "{rules:#?}");
        let g = &rules[0];
        assert!(g.text.starts_with("X25519MLKEM768 adds "), "{}", g.text);
        assert!(g.text.contains("vs x25519 with the p256:p256 chain [X25519MLKEM768 p256:p256 vs x25519 p256:p256]"));
        assert_eq!(g.ids.1, records[0].id());
        let d = records[1].total_cpu_ns.median - records[0].total_cpu_ns.median;
        assert!(g.text.contains(&us(d)), "{} {d}", g.text);
        let c = &rules[1];
        assert!(c.text.starts_with("a mldsa65:mldsa65 chain multiplies server CPU by "), "{}", c.text);
        assert!(c.text.contains("at p99") && c.text.contains("cuts the sessions/s a 10 Gbit/s link carries by"));
        let f = records[2].server.total_cpu_ns.median / records[0].server.total_cpu_ns.median;
        assert!(c.text.contains(&format!("{f:.2}×")), "{}", c.text);
        assert_eq!(c.ids, (records[2].id().to_string(), records[0].id().to_string()));
        // The signing step is found by its role: write_certificate_verify in these records.
        let (a, b) = (
            records[2].server.steps["write_certificate_verify"].median,
            records[0].server.steps["write_certificate_verify"].median,
        );
        assert!(
            c.text.contains(&format!("; signing (write_certificate_verify) takes {} µs vs {} µs [", us(a), us(b))),
            "{}",
            c.text
        );
    }
}
