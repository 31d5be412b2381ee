//! Everything the exporters show that is computed rather than copied: the capacity model,
//! rules of thumb, baseline deltas, compare, which step plays which role, which factors
//! are columns, and how records were measured differently. Exporters only format what
//! this module returns.
//!
//! Record kinds: every kind is seen through one [`View`] of its record and result —
//! in-situ records ([`Insitu`]), load records ([`load::Load`], in [`load`]), transfer records
//! ([`transfer::Transfer`], in [`transfer`]); a new kind gets a [`KindResult`] impl, its type
//! alias and functions next to them, and the exporters that draw it list it in
//! [`crate::Exporter::kinds`].

pub mod assessment;
pub mod auth_rules;
pub mod capacity;
pub mod compare;
pub mod load;
pub mod resident;
pub mod roles;
pub mod rules;
pub mod staircase;
pub mod transfer;
pub mod warnings;

use crate::{ReportOptions, ResultSet};
use pqtls_core::factor::{Factor, FACTORS};
use pqtls_core::load::LoadResult;
use pqtls_core::record::{BaselineDelta, InsituResult, Record};
use pqtls_core::transfer::TransferResult;
use pqtls_core::{Error, Result};
use std::ops::Deref;

/// The factor that names the TLS stack: the report compares stacks with each other.
pub const STACK: &str = "stack";

/// A record of one kind with its result at hand — [`Insitu`], [`load::Load`],
/// [`transfer::Transfer`]; derefs to the result. Kind-specific helpers are inherent methods of
/// `View<'a, ThatResult>` next to the kind's analyses.
#[derive(Debug)]
pub struct View<'a, R> {
    pub record: &'a Record,
    pub result: &'a R,
}

/// An in-situ record with its result at hand; derefs to the [`InsituResult`].
pub type InsituView<'a> = View<'a, InsituResult>;

/// The result type of one record kind: how to find it in a [`Record`].
pub trait KindResult {
    /// `record`'s result when the record is of this kind.
    fn of(record: &Record) -> Option<&Self>;
}

impl KindResult for InsituResult {
    fn of(record: &Record) -> Option<&Self> {
        record.insitu()
    }
}

impl KindResult for LoadResult {
    fn of(record: &Record) -> Option<&Self> {
        record.load()
    }
}

impl KindResult for pqtls_core::resident::ResidentResult {
    fn of(record: &Record) -> Option<&Self> {
        record.resident()
    }
}

impl KindResult for TransferResult {
    fn of(record: &Record) -> Option<&Self> {
        record.transfer()
    }
}

impl<'a, R: KindResult> View<'a, R> {
    /// The view of `record` when it is of this kind.
    pub fn of(record: &'a Record) -> Option<View<'a, R>> {
        R::of(record).map(|result| View { record, result })
    }
}

impl<'a, R> View<'a, R> {
    pub fn id(&self) -> &'a str {
        &self.record.id
    }

    pub fn label(&self) -> &'a str {
        &self.record.label
    }

    /// A factor's canonical value; a factor the record predates reads as its default.
    pub fn factor(&self, name: &str) -> &'a str {
        factor_value(self.record, name)
    }
}

// By hand: a derive would ask `R: Clone`/`R: Copy`, and the view holds references only.
impl<R> Clone for View<'_, R> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<R> Copy for View<'_, R> {}

impl<R> Deref for View<'_, R> {
    type Target = R;

    fn deref(&self) -> &R {
        self.result
    }
}

/// A record's value of a factor: the stored canonical value, else the factor's default
/// (records written before the factor existed were measured at it), else "".
pub fn factor_value<'a>(record: &'a Record, name: &str) -> &'a str {
    match record.scenario.get(name) {
        Some(v) => v,
        None => pqtls_core::factor::factor(name).and_then(|f| f.default).unwrap_or(""),
    }
}

/// Whether a record's label names this factor's value whatever it is (group, chain): the
/// label shows the default too, or the factor has none. The other factors appear in labels
/// only away from their default, or never (stack, cipher).
pub fn always_labelled(f: &Factor) -> bool {
    f.default.is_none_or(|d| (f.label)(d).is_some())
}

/// The factors a table shows as columns, in factor-table order: every factor that some
/// record sets away from its default, except the factors every label names
/// ([`always_labelled`]: group, chain), which are columns only `with_labelled` (CSV, where
/// a machine wants them as fields; the human reports show them in the label). A factor at
/// its default everywhere is never a column, unless the label names it and `with_labelled`.
pub fn factor_columns(records: &[Record], with_labelled: bool) -> Vec<&'static Factor> {
    FACTORS
        .iter()
        .filter(|f| {
            if always_labelled(f) {
                with_labelled
            } else {
                let d = f.default.unwrap_or("");
                records.iter().any(|r| factor_value(r, f.name) != d)
            }
        })
        .collect()
}

/// A record's name in a chart or table of `among`: its group and chain, then each factor that
/// varies within `among` (except those in `skip`, e.g. a chart's series) as its label shows it —
/// nothing for a default — and the stack by name when there are several. Factors that do not
/// vary are the chart's caption's to say, not every label's.
pub fn varying_label(record: &Record, among: &[&Record], skip: &[&str]) -> String {
    let plain = factor_value(record, "tls") == "false";
    let mut parts: Vec<String> = Vec::new();
    if plain {
        parts.push("no TLS".into());
    }
    for f in FACTORS {
        if skip.contains(&f.name) || (plain && matches!(f.name, "group" | "chain" | "tls" | "stack")) {
            continue;
        }
        let v = factor_value(record, f.name);
        let varies = among.iter().any(|r| factor_value(r, f.name) != v);
        if f.name == "group" || f.name == "chain" {
            parts.push(v.to_string());
        } else if varies {
            if f.name == STACK {
                parts.push(
                    pqtls_core::catalogue::Stack::parse(v).map_or_else(|_| v.to_string(), |s| s.display_name().into()),
                );
            } else if let Some(l) = (f.label)(v) {
                parts.push(l);
            }
        }
    }
    let text = parts.join(" · ");
    if plain {
        text
    } else {
        // `group chain · …`: the configuration, then what varies.
        text.replacen(" · ", " ", 1)
    }
}

/// The records equal to `first` in every factor except the ones in `free`.
pub fn same_except(a: &Record, b: &Record, free: &[&str]) -> bool {
    FACTORS.iter().filter(|f| !free.contains(&f.name)).all(|f| factor_value(a, f.name) == factor_value(b, f.name))
}

/// The scenario of a record without the listed factors, as a comparable key.
pub fn key_without<'a>(r: &'a Record, free: &[&str]) -> Vec<&'a str> {
    FACTORS.iter().filter(|f| !free.contains(&f.name)).map(|f| factor_value(r, f.name)).collect()
}

/// The per-step deltas a report shows: against the chosen baseline (`opts.baseline`, an id
/// or label; an error naming what would work when it is not in the set), else the records'
/// own `baseline` fields. In-situ records only; pairs of (record, delta).
pub fn baseline_deltas<'a>(set: &'a ResultSet, opts: &ReportOptions) -> Result<Vec<(InsituView<'a>, BaselineDelta)>> {
    let recs = set.insitu();
    match &opts.baseline {
        Some(b) => {
            let base = set.find(b).ok_or_else(|| {
                Error::Invalid(format!(
                    "baseline '{b}' is not among the {} records; give a configuration id or label, e.g. '{}'",
                    set.records.len(),
                    set.records.first().map_or("", |r| r.id.as_str())
                ))
            })?;
            if base.insitu().is_none() {
                return Err(Error::Invalid(format!(
                    "baseline '{b}' is a {} record; a baseline of per-step deltas must be an in-situ record",
                    base.kind().name()
                )));
            }
            Ok(recs
                .into_iter()
                .filter(|r| r.id() != base.id)
                .filter_map(|r| BaselineDelta::of_records(r.record, base).map(|d| (r, d)))
                .collect())
        }
        // Recomputed from the baseline's record when the set holds it (one rule for records of
        // every age: trimmed-mean totals), else as stored.
        None => Ok(recs
            .into_iter()
            .filter_map(|r| {
                let stored = r.baseline.clone()?;
                let fresh = set.find(&stored.id).and_then(|base| BaselineDelta::of_records(r.record, base));
                Some((r, fresh.unwrap_or(stored)))
            })
            .collect()),
    }
}

/// How `b` was measured differently from `a` — settings, machine, software — as sentences
/// (`what differs: a → b`); empty when they were measured alike. A difference in numbers
/// between such records may come from these rather than from the configuration or the code.
pub fn measured_differently(a: &Record, b: &Record) -> Vec<String> {
    let mut notes = Vec::new();
    if let (Some(x), Some(y)) = (&a.settings, &b.settings) {
        let changes = y.changes_from(x);
        if !changes.is_empty() {
            notes.push(format!("measurement settings differ: {}", changes.join("; ")));
        }
    }
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
        diff(&format!("{lib} library"), a.libraries.get(lib).map_or("unknown", String::as_str), v);
    }
    for (lib, v) in &a.libraries {
        if !b.libraries.contains_key(lib) {
            diff(&format!("{lib} library"), v, "unknown");
        }
    }
    diff("governor", a.governor.as_deref().unwrap_or("?"), b.governor.as_deref().unwrap_or("?"));
    notes
}

/// Records whose message sizes are incomplete: the stack could not decrypt some handshake
/// records to measure their messages (`bytes.unmeasured_records`), so `bytes.messages`
/// lacks them; record-layer totals per direction are still exact.
pub fn incomplete_message_sizes(records: &[InsituView]) -> Vec<String> {
    records
        .iter()
        .filter(|r| r.bytes.unmeasured_records > 0)
        .map(|r| {
            format!(
                "{} on {}: {} handshake record(s) could not be decrypted to measure their messages, so its message \
                 sizes are incomplete (the bytes per direction are exact)",
                r.label(),
                r.factor(STACK),
                r.bytes.unmeasured_records
            )
        })
        .collect()
}

/// Differences in how the records of one set were measured (each record against the
/// first), deduplicated: a report says so instead of comparing them silently.
pub fn set_measured_differently(records: &[Record]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // Each record against the first of its kind: records of different kinds (an assessment's
    // parts) are measured differently by nature.
    for r in records {
        let Some(first) = records.iter().find(|f| f.kind() == r.kind()) else { continue };
        for n in measured_differently(first, r) {
            if !out.contains(&n) {
                out.push(n);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_factors_every_label_names_are_group_and_chain() {
        let names: Vec<&str> = FACTORS.iter().filter(|f| always_labelled(f)).map(|f| f.name).collect();
        assert_eq!(names, ["group", "chain"]);
    }
}

/// In-situ records split by unit: (CPU time, instruction counts), each in order. Reports show
/// each apart (the two are never in one table) and relate them where a configuration has both.
pub fn by_unit<'a>(recs: &[InsituView<'a>]) -> (Vec<InsituView<'a>>, Vec<InsituView<'a>>) {
    recs.iter().partition(|r| r.unit == pqtls_core::trace::CostUnit::Ns)
}
