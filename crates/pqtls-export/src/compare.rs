//! Two result sets side by side: per configuration (matched by id) and per step, the change
//! of the median with its ~95 % interval (`stats::Delta`) and a verdict.

use crate::{us, ResultSet};
use pqtls_core::record::{ConfigRecord, SideSummary};
use pqtls_core::stats::{Delta, Summary};
use pqtls_core::{Error, Result};
use serde::Serialize;
use std::fmt::Write;

/// Whether a change is more than noise.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Faster,
    Slower,
    WithinNoise,
}

impl Verdict {
    pub fn of(d: &Delta) -> Verdict {
        if !d.significant() {
            Verdict::WithinNoise
        } else if d.delta < 0.0 {
            Verdict::Faster
        } else {
            Verdict::Slower
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Verdict::Faster => "faster",
            Verdict::Slower => "slower",
            Verdict::WithinNoise => "within noise",
        }
    }
}

/// The change of one step (or total) of one side.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct StepChange {
    /// `client`, `server` or `both`.
    pub side: String,
    /// A step name, or `total`.
    pub step: String,
    pub before_median_ns: f64,
    pub after_median_ns: f64,
    pub delta: Delta,
    pub verdict: Verdict,
}

/// The changes of one configuration.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ConfigChange {
    pub id: String,
    pub label: String,
    /// Totals first (both sides, client, server), then every step.
    pub steps: Vec<StepChange>,
}

impl ConfigChange {
    /// The handshake total (client + server).
    pub fn total(&self) -> Option<&StepChange> {
        self.steps.first()
    }
}

/// The comparison of two result sets.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Comparison {
    pub before: String,
    pub after: String,
    pub configs: Vec<ConfigChange>,
    /// (id, label) of configurations measured in one set only.
    pub only_before: Vec<(String, String)>,
    pub only_after: Vec<(String, String)>,
    /// Differences in how the two sets were measured (settings, machine, libraries): a
    /// change may come from them rather than from the code.
    pub notes: Vec<String>,
}

fn change(side: &str, step: &str, after: &Summary, before: &Summary) -> StepChange {
    let delta = Delta::between(after, before);
    StepChange {
        side: side.into(),
        step: step.into(),
        before_median_ns: before.median,
        after_median_ns: after.median,
        verdict: Verdict::of(&delta),
        delta,
    }
}

fn side_changes(out: &mut Vec<StepChange>, side: &str, after: &SideSummary, before: &SideSummary) {
    let zero = Summary::default();
    let mut names: Vec<&String> = before.steps.keys().collect();
    names.extend(after.steps.keys().filter(|k| !before.steps.contains_key(*k)));
    for n in names {
        out.push(change(side, n, after.steps.get(n).unwrap_or(&zero), before.steps.get(n).unwrap_or(&zero)));
    }
}

fn config_change(after: &ConfigRecord, before: &ConfigRecord) -> ConfigChange {
    let mut steps = vec![
        change("both", "total", &after.total_cpu_ns, &before.total_cpu_ns),
        change("client", "total", &after.client.total_cpu_ns, &before.client.total_cpu_ns),
        change("server", "total", &after.server.total_cpu_ns, &before.server.total_cpu_ns),
    ];
    side_changes(&mut steps, "client", &after.client, &before.client);
    side_changes(&mut steps, "server", &after.server, &before.server);
    ConfigChange { id: after.config.id.clone(), label: after.label.clone(), steps }
}

/// Compares `after` against `before`, configuration by configuration (in `before`'s order,
/// then what only `after` has).
pub fn compare(before: &ResultSet, after: &ResultSet) -> Comparison {
    let mut configs = Vec::new();
    let mut only_before = Vec::new();
    for b in &before.records {
        match after.records.iter().find(|a| a.config.id == b.config.id) {
            Some(a) => configs.push(config_change(a, b)),
            None => only_before.push((b.config.id.clone(), b.label.clone())),
        }
    }
    let only_after = after
        .records
        .iter()
        .filter(|a| !before.records.iter().any(|b| b.config.id == a.config.id))
        .map(|a| (a.config.id.clone(), a.label.clone()))
        .collect();
    Comparison {
        before: before.title(),
        after: after.title(),
        configs,
        only_before,
        only_after,
        notes: notes(before, after),
    }
}

fn notes(before: &ResultSet, after: &ResultSet) -> Vec<String> {
    let mut notes = Vec::new();
    if let (Some(a), Some(b)) = (&before.manifest, &after.manifest) {
        let changes = b.settings.changes_from(&a.settings);
        if !changes.is_empty() {
            notes.push(format!("measurement settings differ: {}", changes.join("; ")));
        }
    }
    if let (Some(a), Some(b)) = (before.records.first(), after.records.first()) {
        let (a, b) = (&a.env, &b.env);
        let mut diff = |what: &str, x: &str, y: &str| {
            if x != y {
                notes.push(format!("{what} differs: {x} → {y}"));
            }
        };
        diff("CPU model", &a.cpu_model, &b.cpu_model);
        diff("kernel", &a.kernel, &b.kernel);
        diff(
            "pqtls version",
            &format!("{} {}", a.tool_version, a.tool_commit),
            &format!("{} {}", b.tool_version, b.tool_commit),
        );
        for (lib, v) in &b.libraries {
            if let Some(old) = a.libraries.get(lib) {
                diff(&format!("{lib} library"), old, v);
            }
        }
        diff("governor", a.governor.as_deref().unwrap_or("?"), b.governor.as_deref().unwrap_or("?"));
    }
    notes
}

fn fmt_change(c: &StepChange) -> (String, String, String, String) {
    let rel = crate::pct(c.delta.relative);
    (
        format!("{} → {}", us(c.before_median_ns), us(c.after_median_ns)),
        format!(
            "{}{} ± {}",
            if c.delta.delta >= 0.0 { "+" } else { "−" },
            us(c.delta.delta.abs()),
            us(c.delta.half_width)
        ),
        rel,
        c.verdict.name().to_string(),
    )
}

impl Comparison {
    fn rows(&self, all_steps: bool) -> Vec<[String; 7]> {
        let mut rows = Vec::new();
        for c in &self.configs {
            for s in &c.steps {
                let is_total = s.step == "total";
                if !all_steps && !is_total && s.verdict == Verdict::WithinNoise {
                    continue;
                }
                let (m, d, r, v) = fmt_change(s);
                rows.push([c.label.clone(), s.side.clone(), s.step.clone(), m, d, r, v]);
            }
        }
        rows
    }

    /// Counts of (faster, slower, within noise) configurations by their handshake total.
    pub fn tally(&self) -> (usize, usize, usize) {
        let mut t = (0, 0, 0);
        for c in &self.configs {
            match c.total().map(|s| s.verdict) {
                Some(Verdict::Faster) => t.0 += 1,
                Some(Verdict::Slower) => t.1 += 1,
                _ => t.2 += 1,
            }
        }
        t
    }

    /// A plain-text table for the terminal. Without `all_steps`, steps within noise are left
    /// out (the totals are always shown).
    pub fn to_terminal(&self, all_steps: bool) -> String {
        let header = ["configuration", "side", "step", "median µs", "Δ µs (95 %)", "Δ %", "verdict"];
        let rows = self.rows(all_steps);
        let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
        for r in &rows {
            for (w, c) in widths.iter_mut().zip(r) {
                *w = (*w).max(c.chars().count());
            }
        }
        let line = |cells: &[String]| {
            let mut s = String::new();
            for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
                let pad = w - c.chars().count();
                if i == 0 || i == 1 || i == 2 || i == 6 {
                    s += &format!("{c}{}", " ".repeat(pad));
                } else {
                    s += &format!("{}{c}", " ".repeat(pad));
                }
                s += "  ";
            }
            s.trim_end().to_string() + "\n"
        };
        let mut out = format!("compare: {} → {}\n", self.before, self.after);
        out += &line(&header.map(String::from));
        out += &line(&widths.iter().map(|w| "-".repeat(*w)).collect::<Vec<_>>());
        for r in &rows {
            out += &line(r);
        }
        let (f, s, n) = self.tally();
        for note in &self.notes {
            let _ = writeln!(out, "note: {note}");
        }
        let _ = writeln!(
            out,
            "\n{} configurations compared: {f} faster, {s} slower, {n} within noise (handshake CPU, client + server)",
            self.configs.len()
        );
        for (set, list) in [(&self.before, &self.only_before), (&self.after, &self.only_after)] {
            if !list.is_empty() {
                let _ = writeln!(out, "{} only in {set}:", list.len());
                for (id, _) in list {
                    let _ = writeln!(out, "  {id}");
                }
            }
        }
        out
    }

    /// A Markdown table (all steps).
    pub fn to_markdown(&self) -> String {
        let mut out = format!("# Comparison: {} → {}\n\n", self.before, self.after);
        let (f, s, n) = self.tally();
        let _ = writeln!(
            out,
            "{} configurations compared: {f} faster, {s} slower, {n} within noise (handshake CPU, client + server). \
             Δ is the change of the median with its ~95 % interval; a change is more than noise when the interval \
             excludes 0.\n",
            self.configs.len()
        );
        for note in &self.notes {
            let _ = writeln!(out, "> Note: {note}\n");
        }
        out += "| configuration | side | step | median µs | Δ µs (95 %) | Δ % | verdict |\n|---|---|---|---:|---:|---:|---|\n";
        for r in self.rows(true) {
            let _ = writeln!(out, "| {} |", r.iter().map(|c| c.replace('|', "\\|")).collect::<Vec<_>>().join(" | "));
        }
        for (set, list) in [(&self.before, &self.only_before), (&self.after, &self.only_after)] {
            if !list.is_empty() {
                let _ = writeln!(out, "\nOnly in {set}:\n");
                for (id, label) in list {
                    let _ = writeln!(out, "- `{id}` ({label})");
                }
            }
        }
        out
    }

    pub fn to_json(&self) -> Result<String> {
        serde_json::to_string_pretty(self).map_err(|e| Error::Other(format!("encoding the comparison: {e}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::catalogue;
    use pqtls_core::config::{ChainSpec, HandshakeConfig};
    use pqtls_core::stats::Quantiles;

    fn cfg(group: &str) -> HandshakeConfig {
        HandshakeConfig::new(
            catalogue::Stack::Openssl,
            catalogue::group(group).unwrap(),
            ChainSpec::parse("p256:p256").unwrap(),
            catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
        )
    }

    #[test]
    fn verdicts_and_configs_in_one_set_only() {
        let a = pqtls_store::synthetic::measure(&cfg("x25519"), 300).record;
        let b = pqtls_store::synthetic::measure(&cfg("MLKEM768"), 300).record;
        let c = pqtls_store::synthetic::measure(&cfg("secp256r1"), 300).record;
        let mut slower = a.clone();
        // Server signing 30 % slower, everything else identical.
        let qs = Quantiles::default();
        let s = slower.server.steps.get_mut("write_certificate_verify").unwrap();
        let samples: Vec<u64> = (0..300).map(|i| (s.median * 1.3) as u64 + i % 7).collect();
        *s = Summary::of(&samples, &qs);
        let tot: Vec<u64> = (0..300).map(|i| (slower.total_cpu_ns.median + 20_000.0) as u64 + i % 7).collect();
        slower.total_cpu_ns = Summary::of(&tot, &qs);
        slower.env.cpu_model = "other CPU".into();
        let before = ResultSet::from_records(vec![a.clone(), b.clone()]);
        let after = ResultSet::from_records(vec![slower, c.clone()]);
        let cmp = compare(&before, &after);
        assert_eq!(cmp.configs.len(), 1);
        assert_eq!(cmp.only_before, vec![(b.config.id.clone(), b.label.clone())]);
        assert_eq!(cmp.only_after, vec![(c.config.id.clone(), c.label.clone())]);
        let ch = &cmp.configs[0];
        assert_eq!(ch.total().unwrap().verdict, Verdict::Slower);
        let sign = ch.steps.iter().find(|s| s.side == "server" && s.step == "write_certificate_verify").unwrap();
        assert_eq!(sign.verdict, Verdict::Slower);
        assert!((sign.delta.relative - 0.3).abs() < 0.01, "{:?}", sign.delta);
        let same = ch.steps.iter().find(|s| s.side == "client" && s.step == "write_client_hello").unwrap();
        assert_eq!(same.verdict, Verdict::WithinNoise);
        assert_eq!(same.delta.delta, 0.0);
        assert_eq!(cmp.notes, vec!["CPU model differs: synthetic → other CPU".to_string()]);
        let t = cmp.to_terminal(false);
        assert!(t.contains("write_certificate_verify") && !t.contains("write_client_hello"), "{t}");
        assert!(t.contains("1 configurations compared: 0 faster, 1 slower, 0 within noise"), "{t}");
        assert!(t.contains("only in") && t.contains(&b.config.id), "{t}");
        let md = cmp.to_markdown();
        assert!(md.contains("| x25519 p256:p256 | server | write_certificate_verify |"), "{md}");
        let json: serde_json::Value = serde_json::from_str(&cmp.to_json().unwrap()).unwrap();
        assert_eq!(json["configs"][0]["steps"][0]["verdict"], "slower");
    }
}
