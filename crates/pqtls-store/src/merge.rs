//! `pqtls merge`: joins result directories, records files and `--json` arrays into one
//! results directory (docs/results-store.md, "Shards and merge").

use crate::experiment::hex;
use crate::store::{
    now, read_manifest, read_records_file, read_records_saying, record_line, sample_file_name, to_json_pretty,
    write_atomic, Manifest, Shard, EXPERIMENT_COPY, MANIFEST, QUARANTINE, RECORDS, SAMPLES_DIR, STORE_FORMAT,
};
use pqtls_core::record::Record;
use pqtls_core::{Error, Result};
use sha2::{Digest, Sha256};
use std::fs::{self, File};
use std::path::{Path, PathBuf};

/// What [`merge`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeSummary {
    pub records: usize,
    pub sample_files: usize,
    /// Shards of the set that were not among the inputs (`K/N`).
    pub missing_shards: Vec<String>,
    /// Load records joined from their shards (`pqtls load --shard K/N`): (id, N).
    pub joined_load_shards: Vec<(String, u32)>,
    /// Configurations whose record is marked interrupted, taken as they are (the merged set
    /// is incomplete: `pqtls check` says so).
    pub interrupted: Vec<String>,
    /// With no manifest among the inputs: why none could be made from the records (they
    /// disagree on their settings, or carry none), when so.
    pub no_manifest: Option<String>,
}

/// Joins result directories into `out`, which must not hold results yet:
///
/// - shard directories of a sharded run (or any result directories of one experiment measured
///   with the same settings): the manifests must agree (name, settings, matrix, shard count)
///   and no configuration may appear twice;
/// - the outputs of load generators that drove one endpoint together (`pqtls load --shard
///   K/N`): their records of one id, each a load record with `shard = K/N`, become the one
///   record of the whole run ([`crate::shards::merge_load_shards`]: counts add, latency
///   histograms merge exactly); a missing or duplicated shard is an error.
///
/// An input is a results directory, with or without `manifest.json`, a records file (NDJSON),
/// or a JSON array of records (`pqtls load --json FILE`). With no manifest among the inputs,
/// one is made from the records ([`manifest_from_records`]), so that the output is a store
/// `check`, `report` and `compare` take as any other.
pub fn merge(inputs: &[PathBuf], out: &Path) -> Result<MergeSummary> {
    if inputs.is_empty() {
        return Err(Error::Invalid("merge needs at least one results directory".into()));
    }
    if out.join(RECORDS).exists() || out.join(MANIFEST).exists() {
        return Err(Error::Invalid(format!("{} already holds results; merge into a new directory", out.display())));
    }
    refuse_system_dir(out)?;
    if let Some(other) = foreign_entry(inputs, out) {
        return Err(Error::Invalid(format!(
            "{} holds {} (not a shard of this merge): merge into a new (or empty) directory, or the directory \
             of the shards, e.g. --out results/merged",
            out.display(),
            other
        )));
    }
    let manifests = input_manifests(inputs)?;
    let shards_seen = agree(&manifests)?;
    let (records, mut summary) = gather(inputs)?;
    one_kind(inputs, &records)?;
    write_merged(inputs, out, &manifests, &shards_seen, &records, &mut summary)?;
    Ok(summary)
}

/// Directories of the system a merged store must not be written into (nor anything below
/// `/proc`, `/sys`, `/dev`).
const SYSTEM_DIRS: &[&str] = &[
    "/", "/bin", "/boot", "/dev", "/etc", "/home", "/lib", "/lib64", "/opt", "/proc", "/root", "/run", "/sbin", "/srv",
    "/sys", "/tmp", "/usr", "/var",
];

/// Refuses an output that is the file system's root or a system directory.
fn refuse_system_dir(out: &Path) -> Result<()> {
    let resolved = out.canonicalize().unwrap_or_else(|_| out.to_path_buf());
    let under = ["/proc", "/sys", "/dev"].iter().any(|d| resolved.starts_with(d));
    if SYSTEM_DIRS.iter().any(|d| resolved == Path::new(d)) || under {
        return Err(Error::Invalid(format!(
            "--out {} is a system directory ({}): merge into a directory of its own, e.g. --out results/merged",
            out.display(),
            resolved.display()
        )));
    }
    Ok(())
}

/// An entry of `out` that is neither one of the inputs nor what a sharded run keeps next to them
/// (`shard-*` directories, a batch job's `slurm-*` directory, the lock): merging shards into
/// the directory that holds them is how a sharded run ends (`pqtls merge DIR/shard-* --out
/// DIR`); anything else there is the user's, and a merge must not mix into it.
fn foreign_entry(inputs: &[PathBuf], out: &Path) -> Option<String> {
    let inputs: Vec<PathBuf> = inputs.iter().filter_map(|p| p.canonicalize().ok()).collect();
    for entry in fs::read_dir(out).ok()?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let ours = name.starts_with("shard-") || name.starts_with("slurm-") || name == crate::store::LOCK;
        let input = entry.path().canonicalize().is_ok_and(|p| inputs.contains(&p));
        if !ours && !input {
            return Some(name);
        }
    }
    None
}

/// Refuses inputs whose records are of different kinds (an in-situ store and a load `--json`):
/// one store holds one experiment's measurement.
fn one_kind(inputs: &[PathBuf], records: &[(usize, Record)]) -> Result<()> {
    let Some((first_input, first)) = records.first() else { return Ok(()) };
    if let Some((i, r)) = records.iter().find(|(_, r)| r.kind() != first.kind()) {
        return Err(Error::Invalid(format!(
            "cannot merge {} records ({}) with {} records ({}): a results directory holds one experiment's \
             measurement; merge each kind on its own",
            first.kind().name(),
            inputs[*first_input].display(),
            r.kind().name(),
            inputs[*i].display()
        )));
    }
    Ok(())
}

/// The manifests of the inputs that are results directories with one (or with no records
/// file: its missing manifest is then the error).
fn input_manifests(inputs: &[PathBuf]) -> Result<Vec<(&PathBuf, Manifest)>> {
    let mut manifests = Vec::new();
    for d in inputs {
        if !d.exists() {
            return Err(Error::Invalid(format!(
                "{} does not exist; give results directories (or records files) to merge",
                d.display()
            )));
        }
        if d.is_dir() && (d.join(MANIFEST).exists() || !d.join(RECORDS).exists()) {
            manifests.push((d, read_manifest(d)?));
        }
    }
    Ok(manifests)
}

/// Checks that the manifests agree (name, settings, shard count, matrix; each shard once);
/// returns the shard indices seen.
fn agree(manifests: &[(&PathBuf, Manifest)]) -> Result<Vec<usize>> {
    let mut shards_seen = Vec::new();
    if let Some((first_dir, first)) = manifests.first() {
        for (d, m) in manifests {
            let differs = |what: &str, a: String, b: String| {
                Error::Invalid(format!(
                    "cannot merge {} and {}: their {what} differ ({a} vs {b})",
                    first_dir.display(),
                    d.display()
                ))
            };
            if m.name != first.name {
                return Err(differs("experiment names", first.name.clone(), m.name.clone()));
            }
            let changes = m.settings.changes_from(&first.settings);
            if !changes.is_empty() {
                return Err(differs("measurement settings", "…".into(), changes.join("; ")));
            }
            match (first.shard, m.shard) {
                (Some(a), Some(b)) => {
                    if a.count != b.count {
                        return Err(differs("shard counts", a.to_string(), b.to_string()));
                    }
                    if first.matrix_sha256 != m.matrix_sha256 {
                        return Err(differs(
                            "experiment matrices",
                            first.matrix_sha256.chars().take(12).collect(),
                            m.matrix_sha256.chars().take(12).collect(),
                        ));
                    }
                    if shards_seen.contains(&b.index) {
                        return Err(Error::Invalid(format!("shard {b} is given twice ({})", d.display())));
                    }
                    shards_seen.push(b.index);
                }
                (None, None) => {}
                (a, b) => {
                    let kind = |s: Option<Shard>| s.map_or("a whole run".to_string(), |s| format!("shard {s}"));
                    return Err(differs("kinds", kind(a), kind(b)));
                }
            }
        }
    }
    Ok(shards_seen)
}

/// Every input's records, with the index of the input each came from (`usize::MAX`: joined
/// from load shards); every record that cannot be taken is reported, all at once.
fn gather(inputs: &[PathBuf]) -> Result<(Vec<(usize, Record)>, MergeSummary)> {
    // Every record that cannot be taken is reported, all at once, before anything is written.
    let mut records: Vec<(usize, Record)> = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    // Load shards by id, in the order their id was first seen: (input, record).
    let mut load_shards: Vec<(String, Vec<(usize, Record)>)> = Vec::new();
    let mut problems = Vec::new();
    for (i, d) in inputs.iter().enumerate() {
        let read = if d.is_dir() {
            read_records_saying(d, false)
        } else if starts_with_bracket(d) {
            read_records_array(d).map(|rs| (rs, Vec::new()))
        } else {
            read_records_file(d, None).map(|f| {
                let notices =
                    f.bad.map(|t| format!("{}:{}: ignored an invalid last line: {}", d.display(), t.line, t.reason));
                (f.records, notices.into_iter().collect())
            })
        };
        let (rs, notices) = match read {
            Ok(x) => x,
            Err(e) => {
                problems.push(format!("{}: {e}", d.display()));
                continue;
            }
        };
        for n in notices {
            problems.push(format!(
                "{n} — that record would be lost by merging: resume the shard first (pqtls run … --shard K/N \
                 moves the line to {QUARANTINE} and measures it again)"
            ));
        }
        for r in rs {
            if crate::shards::is_load_shard(&r) {
                match load_shards.iter_mut().find(|(id, _)| *id == r.id) {
                    Some((_, v)) => v.push((i, r)),
                    None => load_shards.push((r.id.clone(), vec![(i, r)])),
                }
                continue;
            }
            if let Some(j) = seen.get(&r.id) {
                problems.push(format!(
                    "{} is measured more than once (in {} and {}): remove one copy",
                    r.id,
                    inputs[*j].display(),
                    d.display()
                ));
            } else {
                seen.insert(r.id.clone(), i);
                records.push((i, r));
            }
        }
    }
    let mut summary = MergeSummary::default();
    for (id, parts) in load_shards {
        if let Some(j) = seen.get(&id) {
            problems.push(format!(
                "{id} is both a whole record (in {}) and load shards (in {}): merge the shards of one run",
                inputs[*j].display(),
                inputs[parts[0].0].display()
            ));
            continue;
        }
        let named: Vec<(String, Record)> =
            parts.into_iter().map(|(i, r)| (inputs[i].display().to_string(), r)).collect();
        match crate::shards::merge_load_shards(&named) {
            Ok(r) => {
                let n = named.len() as u32;
                summary.joined_load_shards.push((id.clone(), n));
                seen.insert(id, usize::MAX);
                records.push((usize::MAX, r));
            }
            Err(e) => problems.push(e),
        }
    }
    if !problems.is_empty() {
        return Err(Error::Invalid(format!(
            "nothing merged: {} record(s) or shard(s) could not be taken:\n  {}",
            problems.len(),
            problems.join("\n  ")
        )));
    }
    Ok((records, summary))
}

/// Writes the merged records (with their sample files), the experiment copy and the manifest
/// (the first input's, or one made from the records).
fn write_merged(
    inputs: &[PathBuf],
    out: &Path,
    manifests: &[(&PathBuf, Manifest)],
    shards_seen: &[usize],
    records: &[(usize, Record)],
    summary: &mut MergeSummary,
) -> Result<()> {
    fs::create_dir_all(out.join(SAMPLES_DIR)).map_err(|e| Error::io(format!("creating {}", out.display()), e))?;
    let made = if manifests.is_empty() {
        manifest_from_records(&records.iter().map(|(_, r)| r).collect::<Vec<_>>(), inputs, out)
            .map_err(|why| summary.no_manifest = Some(why))
            .ok()
    } else {
        None
    };
    summary.interrupted = records.iter().filter(|(_, r)| r.is_interrupted()).map(|(_, r)| r.id.clone()).collect();
    let experiment = manifests.first().map(|(_, m)| &m.name).or(made.as_ref().map(|m| &m.name)).cloned();
    let mut buf = Vec::new();
    for (i, r) in records {
        match &experiment {
            Some(name) => buf.extend_from_slice(&record_line(r, name)?),
            None => buf.extend_from_slice(
                &serde_json::to_vec(r).map_err(|e| Error::Other(format!("encoding record {}: {e}", r.id)))?,
            ),
        }
        buf.push(b'\n');
        let Some(input) = inputs.get(*i).filter(|d| d.is_dir()) else { continue };
        let name = sample_file_name(&r.id);
        let src = input.join(SAMPLES_DIR).join(&name);
        if src.exists() {
            fs::copy(&src, out.join(SAMPLES_DIR).join(&name))
                .map_err(|e| Error::io(format!("copying {}", src.display()), e))?;
            summary.sample_files += 1;
        }
    }
    write_atomic(&out.join(RECORDS), &buf)?;
    summary.records = records.len();
    let Some((first_dir, first)) = manifests.first() else {
        if let Some(m) = made {
            write_atomic(&out.join(MANIFEST), &to_json_pretty(&m)?)?;
        }
        return Ok(());
    };
    if let Some(n) = first.shard.map(|s| s.count) {
        summary.missing_shards = (1..=n).filter(|k| !shards_seen.contains(k)).map(|k| format!("{k}/{n}")).collect();
    }
    let copy = first_dir.join(EXPERIMENT_COPY);
    if copy.exists() {
        fs::copy(&copy, out.join(EXPERIMENT_COPY)).map_err(|e| Error::io(format!("copying {}", copy.display()), e))?;
    }
    let mut m = first.clone();
    m.shard = None;
    m.configs = manifests.iter().map(|(_, m)| m.configs).sum();
    m.updated_at = now();
    m.merged_from = inputs.iter().map(|d| d.display().to_string()).collect();
    write_atomic(&out.join(MANIFEST), &to_json_pretty(&m)?)?;
    Ok(())
}

/// The manifest of a merge whose inputs had none (`pqtls load --json` files, records files):
/// named after the output directory, with the records' settings (which must all be the same),
/// the first record's environment, the hash of their ids as the matrix's, and the inputs as
/// `merged_from`. An error says why it cannot be made.
pub fn manifest_from_records(
    records: &[&Record],
    inputs: &[PathBuf],
    out: &Path,
) -> std::result::Result<Manifest, String> {
    let Some(first) = records.first() else { return Err("there are no records".into()) };
    let no_settings = |r: &Record| format!("the record of {} carries no settings (schema 1)", r.id);
    let settings = first.settings.as_ref().ok_or_else(|| no_settings(first))?;
    for r in &records[1..] {
        let changes = r.settings.as_ref().ok_or_else(|| no_settings(r))?.changes_from(settings);
        if !changes.is_empty() {
            return Err(format!(
                "the records of {} and {} were measured with different settings ({})",
                first.id,
                r.id,
                changes.join("; ")
            ));
        }
    }
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "merged".into());
    let mut ids = Sha256::new();
    for r in records {
        ids.update(r.id.as_bytes());
        ids.update(b"\n");
    }
    let t = now();
    Ok(Manifest {
        format: STORE_FORMAT,
        name,
        description: format!("merged from {} input(s) without a manifest", inputs.len()),
        experiment_file: String::new(),
        experiment_sha256: String::new(),
        matrix_sha256: hex(&ids.finalize()),
        configs: records.len(),
        settings: settings.clone(),
        shard: None,
        env: Some(first.env.clone()),
        created_at: t,
        updated_at: t,
        merged_from: inputs.iter().map(|d| d.display().to_string()).collect(),
    })
}

/// Whether a file holds a JSON array (what `pqtls load --json FILE` writes) rather than NDJSON.
fn starts_with_bracket(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 256];
    // Only a regular file is opened (a FIFO would block): the reader then names the others.
    if !fs::metadata(path).is_ok_and(|m| m.is_file()) {
        return false;
    }
    let n = File::open(path).and_then(|mut f| f.read(&mut head)).unwrap_or(0);
    head[..n].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'[')
}

/// The records of a JSON array file (`pqtls load --json FILE`), each checked as a stored line
/// is (schema, kind).
fn read_records_array(path: &Path) -> Result<Vec<Record>> {
    let text = crate::input::read_text(path, "the records file", crate::input::RECORDS_LIMIT_BYTES)?
        .ok_or_else(|| Error::Invalid(format!("{} does not exist", path.display())))?;
    let values: Vec<serde_json::Value> = serde_json::from_str(&text)
        .map_err(|e| Error::Invalid(format!("{}: not a JSON array of records: {e}", path.display())))?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| {
            Record::from_json_value(v).map_err(|e| Error::Invalid(format!("{}: record {}: {e}", path.display(), i + 1)))
        })
        .collect()
}
