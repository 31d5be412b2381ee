//! Rules of thumb derived from the records: each compares two configurations that differ in
//! one factor only, and names both.
//!
//! - Groups: every group against the reference group (x25519 when measured), with the
//!   reference chain (p256:p256 when measured) and every other factor equal: the added
//!   handshake CPU (client + server, median) with its uncertainty.
//! - Chains: every chain against the reference chain, with the reference group: the factor
//!   on server CPU at the median and at the highest quantile, and the factor on the sessions
//!   per second a 10 Gbit/s link carries.

use crate::capacity::{capacity, NetworkModel};
use crate::us;
use pqtls_core::config::ConfigDesc;
use pqtls_core::record::ConfigRecord;
use pqtls_core::stats::Delta;
use serde::Serialize;

/// One generated sentence and the records it came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Rule {
    pub text: String,
    /// Ids of the records compared: (the configuration, its reference).
    pub ids: (String, String),
}

/// The configuration with the group or the chain blanked out: two records with equal keys
/// differ in that factor only.
fn key_without(c: &ConfigDesc, factor: &str) -> String {
    let mut c = c.clone();
    c.id.clear();
    match factor {
        "group" => {
            c.group.clear();
            c.groups.clear();
            c.key_shares.clear();
        }
        _ => c.chain.clear(),
    }
    serde_json::to_string(&c).unwrap_or_default()
}

fn pick<'a>(records: &'a [ConfigRecord], preferred: &str, get: impl Fn(&ConfigRecord) -> &str) -> Option<&'a str> {
    records.iter().find(|r| get(r) == preferred).or_else(|| records.first()).map(get)
}

/// Highest quantile key of a summary (e.g. `p99`).
fn top_quantile(r: &ConfigRecord) -> Option<(String, f64)> {
    let (k, v) = r.server.total_cpu_ns.quantiles.iter().next_back()?;
    Some((k.clone(), *v))
}

/// Rules of thumb for a set of records, at most `limit`.
pub fn rules_of_thumb(records: &[ConfigRecord], model: &NetworkModel, limit: usize) -> Vec<Rule> {
    let mut out = Vec::new();
    let Some(ref_group) = pick(records, "x25519", |r| r.config.group.as_str()) else { return out };
    let Some(ref_chain) = pick(records, "p256:p256", |r| r.config.chain.as_str()) else { return out };
    let link_gbps = 10.0;
    // Reference contexts: per stack, the first record with the reference group and chain.
    let mut contexts: Vec<&ConfigRecord> = Vec::new();
    for r in records {
        if r.config.group == ref_group
            && r.config.chain == ref_chain
            && r.config.key_shares.len() <= 1
            && !contexts.iter().any(|c| c.config.stack == r.config.stack)
        {
            contexts.push(r);
        }
    }
    for ctx in &contexts {
        let stack = if contexts.len() > 1 { format!(" on {}", ctx.config.stack) } else { String::new() };
        // Groups.
        let gkey = key_without(&ctx.config, "group");
        for r in records.iter().filter(|r| r.config.group != ref_group && key_without(&r.config, "group") == gkey) {
            let d = Delta::between(&r.total_cpu_ns, &ctx.total_cpu_ns);
            let verb = if d.delta >= 0.0 { "adds" } else { "saves" };
            let noise = if d.significant() { "" } else { ", within noise" };
            out.push(Rule {
                text: format!(
                    "{} {verb} {} ± {} µs ({}{noise}) of handshake CPU (client + server, median) vs {ref_group} \
                     with the {ref_chain} chain{stack} [{} vs {}]",
                    r.config.group,
                    us(d.delta.abs()),
                    us(d.half_width),
                    crate::pct(d.relative),
                    r.label,
                    ctx.label
                ),
                ids: (r.config.id.clone(), ctx.config.id.clone()),
            });
        }
        // Chains.
        let ckey = key_without(&ctx.config, "chain");
        let at_link = NetworkModel { bandwidths_gbps: vec![link_gbps], ..model.clone() };
        let base_cap = capacity(ctx, &at_link).sessions_at(link_gbps);
        for r in records.iter().filter(|r| r.config.chain != ref_chain && key_without(&r.config, "chain") == ckey) {
            let ratio = |a: f64, b: f64| if b > 0.0 { a / b } else { f64::NAN };
            let med = ratio(r.server.total_cpu_ns.median, ctx.server.total_cpu_ns.median);
            let (qk, q) = top_quantile(r).unwrap_or(("p50".into(), r.server.total_cpu_ns.median));
            let q_base = ctx.server.total_cpu_ns.quantiles.get(&qk).copied().unwrap_or(ctx.server.total_cpu_ns.median);
            let tail = ratio(q, q_base);
            let cap = capacity(r, &at_link);
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
                     (with {ref_group}{stack}){link} [{} vs {}]",
                    r.config.chain, r.label, ctx.label
                ),
                ids: (r.config.id.clone(), ctx.config.id.clone()),
            });
        }
    }
    out.truncate(limit);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::catalogue;
    use pqtls_core::config::{ChainSpec, HandshakeConfig};

    fn rec(group: &str, chain: &str) -> ConfigRecord {
        let cfg = HandshakeConfig::new(
            catalogue::Stack::Openssl,
            catalogue::group(group).unwrap(),
            ChainSpec::parse(chain).unwrap(),
            catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
        );
        pqtls_store::synthetic::measure(&cfg, 200).record
    }

    #[test]
    fn rules_name_their_sources_and_use_the_right_pairs() {
        let records = vec![
            rec("x25519", "p256:p256"),
            rec("X25519MLKEM768", "p256:p256"),
            rec("x25519", "mldsa65:mldsa65"),
            rec("X25519MLKEM768", "mldsa65:mldsa65"),
        ];
        let rules = rules_of_thumb(&records, &NetworkModel::default(), 10);
        assert_eq!(rules.len(), 2, "{rules:#?}");
        let g = &rules[0];
        assert!(g.text.starts_with("X25519MLKEM768 adds "), "{}", g.text);
        assert!(g.text.contains("vs x25519 with the p256:p256 chain [X25519MLKEM768 p256:p256 vs x25519 p256:p256]"));
        assert_eq!(g.ids.1, records[0].config.id);
        let d = records[1].total_cpu_ns.median - records[0].total_cpu_ns.median;
        assert!(g.text.contains(&us(d)), "{} {d}", g.text);
        let c = &rules[1];
        assert!(c.text.starts_with("a mldsa65:mldsa65 chain multiplies server CPU by "), "{}", c.text);
        assert!(c.text.contains("at p99") && c.text.contains("cuts the sessions/s a 10 Gbit/s link carries by"));
        let f = records[2].server.total_cpu_ns.median / records[0].server.total_cpu_ns.median;
        assert!(c.text.contains(&format!("{f:.2}×")), "{}", c.text);
        assert_eq!(c.ids, (records[2].config.id.clone(), records[0].config.id.clone()));
    }
}
