//! `pqtls check`: verifies a results directory without changing it (docs/results-store.md).

use crate::store::{
    read_manifest, read_records_file, read_samples, sample_file_name, RecordsFile, LOCK, MANIFEST, QUARANTINE, RECORDS,
    SAMPLES_DIR,
};
use pqtls_core::{Error, Result};
use std::fs::{self, OpenOptions};
use std::path::{Path, PathBuf};

/// What [`check`] found in a results directory.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Valid records.
    pub records: usize,
    /// What is wrong (the store is not sound when this is not empty).
    pub problems: Vec<String>,
    /// What is worth knowing but harmless (quarantined lines, orphaned sample files, a run in progress).
    pub notes: Vec<String>,
    /// Configurations whose last record is marked interrupted (measured partly): the store
    /// is sound but incomplete, and `pqtls run` measures them again.
    pub interrupted: Vec<String>,
}

impl CheckReport {
    pub fn is_sound(&self) -> bool {
        self.problems.is_empty()
    }

    /// Sound, and no configuration's last record is an interrupted one.
    pub fn is_complete(&self) -> bool {
        self.is_sound() && self.interrupted.is_empty()
    }
}

/// What is impossible in one record: an id that is not its scenario's (the record was edited, or
/// written for another scenario), and negative times or rates.
pub(crate) fn record_problems(r: &pqtls_core::record::Record) -> Vec<String> {
    let mut out = Vec::new();
    match pqtls_core::scenario::Scenario::new(r.scenario.iter().map(|(k, v)| (k.as_str(), v.as_str()))) {
        Ok(sc) if sc.id() != r.id => {
            out.push(format!("its id is not its scenario's ({}): the record was edited or misfiled", sc.id()))
        }
        // A scenario this version cannot build (a factor it does not know) is not proof of anything.
        _ => {}
    }
    let negative = |what: &str, v: f64, out: &mut Vec<String>| {
        if v < 0.0 || v.is_nan() {
            out.push(format!("{what} is {v}: a time or a rate cannot be negative"));
        }
    };
    if let Some(i) = r.insitu() {
        let summaries = [
            ("total CPU", &i.total_cpu_ns),
            ("client CPU", &i.client.total_cpu_ns),
            ("server CPU", &i.server.total_cpu_ns),
        ];
        for (what, s) in summaries {
            for (stat, v) in [("min", s.min), ("median", s.median), ("mean", s.mean)] {
                negative(&format!("{what} {stat}"), v, &mut out);
            }
        }
        for (side, steps) in [("client", &i.client.steps), ("server", &i.server.steps)] {
            for (step, s) in steps {
                negative(&format!("{side} {step} median"), s.median, &mut out);
            }
        }
    }
    if let Some(l) = r.load() {
        negative("the achieved rate", l.achieved_rate_per_s, &mut out);
        negative("the client's CPU per handshake", l.client_handshake_cpu_ns_mean, &mut out);
    }
    out
}

/// Verifies a results directory without changing it: the manifest reads; every line of
/// `records.ndjson` is a record of a schema this version reads, of this experiment, once per
/// id, with no torn or invalid last line; every record's settings are the manifest's; every
/// samples file reads and belongs to a record. A directory holding only shards is checked
/// shard by shard.
pub fn check(dir: &Path) -> Result<CheckReport> {
    if !dir.is_dir() {
        return Err(Error::Invalid(format!(
            "{} is not a directory (give a results directory, e.g. results/<experiment>)",
            dir.display()
        )));
    }
    let mut report = CheckReport::default();
    if !dir.join(RECORDS).exists() && !dir.join(MANIFEST).exists() {
        let mut shards: Vec<PathBuf> = fs::read_dir(dir)
            .map_err(|e| Error::io(format!("reading {}", dir.display()), e))?
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("shard-"))
            .map(|e| e.path())
            .collect();
        shards.sort();
        if shards.is_empty() {
            return Err(Error::Invalid(format!(
                "{} has neither {MANIFEST} nor {RECORDS}: not a pqtls results directory",
                dir.display()
            )));
        }
        for shard in shards {
            let r = check(&shard)?;
            report.records += r.records;
            report.problems.extend(r.problems);
            report.notes.extend(r.notes);
            report.interrupted.extend(r.interrupted);
        }
        return Ok(report);
    }
    let manifest = match read_manifest(dir) {
        Ok(m) => Some(m),
        Err(e) => {
            report.problems.push(format!("{e} (the settings guard then rests on the records' own settings)"));
            None
        }
    };
    let rpath = dir.join(RECORDS);
    let records = match read_records_file(&rpath, manifest.as_ref().map(|m| m.name.as_str())) {
        Ok(RecordsFile { records, bad, superseded }) => {
            if superseded > 0 {
                report.notes.push(format!(
                    "{}: {superseded} interrupted record(s) superseded by a later record of their configuration \
                     (kept: the file is append-only; readers take the last)",
                    rpath.display()
                ));
            }
            if let Some(b) = bad {
                report.problems.push(format!(
                    "{}:{}: {} ({} bytes: {}); `pqtls run` moves it to {QUARANTINE} and measures that configuration again",
                    rpath.display(),
                    b.line,
                    if b.complete { "an invalid last line" } else { "an incomplete last line" },
                    b.dropped_bytes,
                    b.reason
                ));
            }
            records
        }
        Err(e) => {
            report.problems.push(e.to_string());
            Vec::new()
        }
    };
    if let Some(m) = &manifest {
        for (i, r) in records.iter().enumerate() {
            if let Some(set) = &r.settings {
                let changes = m.settings.changes_from(set);
                if !changes.is_empty() {
                    report.problems.push(format!(
                        "{}: record {} ({}) was measured with other settings than the manifest's: {}",
                        rpath.display(),
                        i + 1,
                        r.id,
                        changes.join("; ")
                    ));
                }
            }
        }
    }
    if let Some(m) = &manifest {
        if m.format > crate::store::STORE_FORMAT {
            report.problems.push(format!(
                "{}: store format {} is newer than this pqtls reads ({}): check and read it with the pqtls that \
                 wrote it",
                dir.join(MANIFEST).display(),
                m.format,
                crate::store::STORE_FORMAT
            ));
        }
    }
    for (i, r) in records.iter().enumerate() {
        let at = format!("{}: record {} ({})", rpath.display(), i + 1, r.id);
        report.problems.extend(record_problems(r).into_iter().map(|p| format!("{at}: {p}")));
        let raw = r.settings.as_ref().or(manifest.as_ref().map(|m| &m.settings)).is_some_and(|s| s.raw_samples);
        let kept = raw && r.kind() == pqtls_core::factor::Kind::Insitu && !r.is_interrupted();
        if kept && !dir.join(SAMPLES_DIR).join(sample_file_name(&r.id)).exists() {
            report.problems.push(format!(
                "{at}: its raw samples were kept (raw_samples) but {} is missing",
                dir.join(SAMPLES_DIR).join(sample_file_name(&r.id)).display()
            ));
        }
    }
    report.records = records.len();
    report.interrupted = records.iter().filter(|r| r.is_interrupted()).map(|r| r.id.clone()).collect();
    let names: std::collections::HashMap<String, &str> =
        records.iter().map(|r| (sample_file_name(&r.id), r.id.as_str())).collect();
    if let Ok(entries) = fs::read_dir(dir.join(SAMPLES_DIR)) {
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path()).collect();
        files.sort();
        for f in files {
            let name = f.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
            if name.ends_with(".tmp") {
                report.notes.push(format!("{}: a samples file an interrupted write left (harmless)", f.display()));
                continue;
            }
            let Some(id) = names.get(&name) else {
                report.notes.push(format!(
                    "{}: samples without a record (a run stopped between the two; measured again on resume)",
                    f.display()
                ));
                continue;
            };
            if let Err(e) = read_samples(dir, id) {
                report.problems.push(e.to_string());
            }
        }
    }
    let q = dir.join(QUARANTINE);
    if let Ok(text) = fs::read(&q) {
        let n = text.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
        report.notes.push(format!("{}: {n} quarantined line(s), kept for inspection", q.display()));
    }
    if let Ok(f) = OpenOptions::new().read(true).open(dir.join(LOCK)) {
        if let Err(fs::TryLockError::WouldBlock) = f.try_lock_shared() {
            report.notes.push(format!("{}: a pqtls run is writing it now", dir.display()));
        }
    }
    Ok(report)
}
