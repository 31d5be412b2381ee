//! The results store: one directory per experiment (or shard), append-only.
//!
//! ```text
//! results/<name>/                 (or results/<name>/shard-K-of-N/)
//!   manifest.json                 settings, experiment hash, shard, environment
//!   experiment.toml               copy of the experiment file last run into it
//!   records.ndjson                one Record per line (schema 2; schema-1 lines are read too), appended + fsync'd per record
//!   samples/<sha256(id)[..16]>.ndjson   raw per-handshake samples (raw_samples = true)
//! ```
//!
//! A record line is written only after its samples file is complete and synced, so a record
//! present means its configuration is done. A torn or invalid last line (crash mid-write, or
//! a line edited by hand) is moved to `records.quarantine.ndjson` when the store is opened for
//! writing — never deleted — and that configuration is measured again.
//!
//! A record marked interrupted (`Record::is_interrupted`: a run stopped by Ctrl-C kept what
//! its open scenarios had measured) does not make its configuration done: the next run
//! measures it again and appends the new record, which **supersedes** it. The file stays
//! append-only; readers take the last record of an id, and accept a second record of an id
//! only after interrupted ones (`I* C?` per id, in file order).
//!
//! Each line the store writes names its experiment (`"experiment": "<name>"`, right after
//! `schema`), so a record copied in from another experiment is refused by name; lines without
//! the field (schema 1, or written before it existed) are read as before. Each record also
//! carries its measurement settings, so a changed `[settings]` block is refused even when
//! `manifest.json` was lost.
//!
//! Checking a store is [`crate::check`], joining stores [`crate::merge`].

pub use crate::check::{check, CheckReport};
use crate::experiment::{hex, Experiment};
pub use crate::merge::{manifest_from_records, merge, MergeSummary};
use pqtls_core::record::{Env, RawSample, Record};
use pqtls_core::settings::Settings;
use pqtls_core::trace::SideSample;
use pqtls_core::{Error, Result};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::HashSet;
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub const MANIFEST: &str = "manifest.json";
pub const RECORDS: &str = "records.ndjson";
pub const SAMPLES_DIR: &str = "samples";
pub const EXPERIMENT_COPY: &str = "experiment.toml";
/// Where invalid last lines go (appended, with the time they were moved) instead of being deleted.
pub const QUARANTINE: &str = "records.quarantine.ndjson";
pub(crate) const LOCK: &str = ".lock";
/// Version of the directory layout / manifest.
pub const STORE_FORMAT: u32 = 1;

/// A deterministic slice of an experiment: configuration number `i` (0-based, in
/// [`Experiment::configs`] order) belongs to shard `index` when `i % count == index - 1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 1-based (`K` of `K/N`).
    pub index: usize,
    pub count: usize,
}

impl Shard {
    /// Parses `K/N` (1 ≤ K ≤ N).
    pub fn parse(s: &str) -> Result<Shard> {
        let bad = || Error::Invalid(format!("shard '{s}' must be K/N with 1 ≤ K ≤ N, e.g. --shard 3/8"));
        let (k, n) = s.split_once('/').ok_or_else(bad)?;
        let index: usize = k.trim().parse().map_err(|_| bad())?;
        let count: usize = n.trim().parse().map_err(|_| bad())?;
        if index == 0 || count == 0 || index > count {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    pub fn selects(&self, config_index: usize) -> bool {
        config_index % self.count == self.index - 1
    }

    /// `shard-K-of-N`.
    pub fn dir_name(&self) -> String {
        format!("shard-{}-of-{}", self.index, self.count)
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `manifest.json`: how the records of a directory were obtained.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    pub format: u32,
    pub name: String,
    pub description: String,
    /// Path of the experiment file as given on the last run.
    pub experiment_file: String,
    /// SHA-256 of the experiment file's text on the last run.
    pub experiment_sha256: String,
    /// SHA-256 over the expanded configuration ids on the last run.
    pub matrix_sha256: String,
    /// Configurations the experiment (this shard) had on the last run.
    pub configs: usize,
    pub settings: Settings,
    pub shard: Option<Shard>,
    /// Environment of the first run (every record carries its own too).
    pub env: Option<Env>,
    pub created_at: u64,
    pub updated_at: u64,
    /// Shard directories this one was merged from.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
}

/// How to open a store for a run.
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    /// Move existing results aside (`<dir>.replaced-<unix time>`) and start empty.
    pub fresh: bool,
    pub shard: Option<Shard>,
    /// Environment written to a new manifest.
    pub env: Option<Env>,
}

/// An experiment's results directory, open for appending.
#[derive(Debug)]
pub struct Store {
    dir: PathBuf,
    manifest: Manifest,
    records: File,
    /// Configurations with a complete record.
    ids: HashSet<String>,
    /// Configurations whose last record is marked interrupted (measured again by a run).
    interrupted: HashSet<String>,
    /// What happened on open that the user should know (torn line removed, results moved
    /// aside, …).
    pub notices: Vec<String>,
    _lock: Lock,
}

impl Store {
    /// The directory of an experiment's results: `<root>/<name>` or
    /// `<root>/<name>/shard-K-of-N`.
    pub fn dir_for(root: &Path, exp: &Experiment, shard: Option<Shard>) -> PathBuf {
        let d = root.join(&exp.name);
        match shard {
            Some(s) => d.join(s.dir_name()),
            None => d,
        }
    }

    /// Opens (creating if needed) the results directory `dir` for `exp`. Refuses when the
    /// measurement settings differ from the ones the directory was measured with.
    pub fn open(dir: &Path, exp: &Experiment, opts: &StoreOptions) -> Result<Store> {
        let mut notices = Vec::new();
        if opts.fresh && dir.join(MANIFEST).exists() {
            // The store's lock first: a run writing it now is refused by name, and nothing moves
            // under it (the lock moves aside with the old results, held until they are there).
            let held = Lock::take(dir)?;
            let aside = PathBuf::from(format!("{}.replaced-{}", dir.display(), now()));
            fs::rename(dir, &aside).map_err(|e| Error::io(format!("moving {} aside", dir.display()), e))?;
            drop(held);
            notices.push(format!("--fresh: previous results moved to {}", aside.display()));
        }
        fs::create_dir_all(dir.join(SAMPLES_DIR)).map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let lock = Lock::take(dir)?;
        let mpath = dir.join(MANIFEST);
        let rpath = dir.join(RECORDS);
        // Records first: a foreign record, a duplicate or records measured with other settings
        // (the guard that holds even without a manifest) refuse the store before anything is
        // written to it.
        let RecordsFile { records, bad: bad_tail, .. } = read_records_file(&rpath, Some(&exp.name))?;
        for (i, r) in records.iter().enumerate() {
            let Some(old) = &r.settings else { continue };
            let changes = exp.settings.changes_from(old);
            if !changes.is_empty() {
                return Err(Error::Invalid(format!(
                    "{}: the record of {} (record {}) was measured with other settings ({}); numbers measured \
                     differently must not be mixed. Run with --fresh to move the old results aside and start again, \
                     give the experiment a different `name`, or restore the old settings to resume",
                    rpath.display(),
                    r.id,
                    i + 1,
                    changes.join("; ")
                )));
            }
        }
        // A record `check` would call impossible (an id that is not its scenario's, a negative
        // time) refuses the store too: a run must not resume on top of it, counting it as done.
        for (i, r) in records.iter().enumerate() {
            if let Some(problem) = crate::check::record_problems(r).into_iter().next() {
                return Err(Error::Invalid(format!(
                    "{}: record {} ({}): {problem}; `pqtls check {}` lists every problem. Restore the record, or run \
                     with --fresh to move the results aside and start again",
                    rpath.display(),
                    i + 1,
                    r.id,
                    dir.display()
                )));
            }
        }
        let configs = exp.configurations();
        let manifest = if mpath.exists() {
            let mut m = read_manifest(dir)?;
            let changes = exp.settings.changes_from(&m.settings);
            if !changes.is_empty() {
                return Err(Error::Invalid(format!(
                    "{} holds results measured with other settings ({}); numbers measured differently must not be mixed. \
                     Run with --fresh to move the old results aside and start again, give the experiment a different \
                     `name`, or restore the old settings to resume",
                    dir.display(),
                    changes.join("; ")
                )));
            }
            if m.shard != opts.shard {
                let show = |s: Option<Shard>| s.map_or("no shard".to_string(), |s| format!("shard {s}"));
                return Err(Error::Invalid(format!(
                    "{} holds {} but this run is {}; use the matching --shard or another directory",
                    dir.display(),
                    show(m.shard),
                    show(opts.shard)
                )));
            }
            let same_matrix = m.matrix_sha256 == exp.matrix_sha256()
                || exp.matrix_sha256_before_transport_quic().is_some_and(|old| old == m.matrix_sha256);
            if m.shard.is_some() && !same_matrix {
                return Err(Error::Invalid(format!(
                    "{}: the experiment's configurations changed since this shard was started; shards are slices of one \
                     fixed list, so a changed matrix would move configurations between shards. Restore the experiment \
                     file, or run the changed one with --fresh or under another name",
                    dir.display()
                )));
            }
            m.experiment_file = exp.path.display().to_string();
            m.experiment_sha256 = exp.source_sha256();
            m.matrix_sha256 = exp.matrix_sha256();
            m.description = exp.description.clone();
            m.configs = configs;
            m.updated_at = now();
            m
        } else {
            let t = now();
            Manifest {
                format: STORE_FORMAT,
                name: exp.name.clone(),
                description: exp.description.clone(),
                experiment_file: exp.path.display().to_string(),
                experiment_sha256: exp.source_sha256(),
                matrix_sha256: exp.matrix_sha256(),
                configs,
                settings: exp.settings.clone(),
                shard: opts.shard,
                env: opts.env.clone(),
                created_at: t,
                updated_at: t,
                merged_from: Vec::new(),
            }
        };
        write_atomic(&mpath, &to_json_pretty(&manifest)?)?;
        write_atomic(&dir.join(EXPERIMENT_COPY), exp.source.as_bytes())?;

        if let Some(bad) = bad_tail {
            notices.push(quarantine(dir, &bad)?);
        }
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&rpath)
            .map_err(|e| Error::io(format!("opening {}", rpath.display()), e))?;
        sync_dir(dir);
        let ids = records.iter().filter(|r| !r.is_interrupted()).map(|r| r.id.clone()).collect();
        let interrupted = records.iter().filter(|r| r.is_interrupted()).map(|r| r.id.clone()).collect();
        Ok(Store { dir: dir.to_path_buf(), manifest, records: file, ids, interrupted, notices, _lock: lock })
    }

    /// The experiment this store holds (the `experiment` field of every line it writes).
    pub fn experiment(&self) -> &str {
        &self.manifest.name
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }

    /// True when a complete record for this configuration id is stored (one marked
    /// interrupted does not count: its configuration is measured again).
    pub fn contains(&self, id: &str) -> bool {
        self.ids.contains(id)
    }

    /// Configurations whose last record is marked interrupted.
    pub fn interrupted(&self) -> usize {
        self.interrupted.len()
    }

    /// Number of configurations with a record (complete or interrupted).
    pub fn len(&self) -> usize {
        self.ids.len() + self.interrupted.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Appends one record (and its raw samples, `(client, server)` per handshake, when
    /// given): samples first, then the record line, each synced to disk before returning. A
    /// record of an id held only as interrupted supersedes it; an interrupted record's samples
    /// are not kept (the file name is the id's, and its configuration is measured again).
    pub fn append(&mut self, record: &Record, samples: &[(SideSample, SideSample)]) -> Result<()> {
        let id = &record.id;
        if self.ids.contains(id) {
            return Err(Error::Invalid(format!("{}: a record for {id} is already stored", self.dir.display())));
        }
        if !samples.is_empty() && !record.is_interrupted() {
            let path = self.dir.join(SAMPLES_DIR).join(sample_file_name(id));
            let mut buf = Vec::new();
            for (i, (client, server)) in samples.iter().enumerate() {
                let line = RawSample { id, i: i as u64, client, server };
                serde_json::to_writer(&mut buf, &line).map_err(|e| Error::Other(format!("encoding a sample: {e}")))?;
                buf.push(b'\n');
            }
            write_atomic(&path, &buf)?;
        }
        let mut line = record_line(record, &self.manifest.name)?;
        // JSON has no NaN or infinity (serde_json writes null): a record that would not read
        // back must not be stored, or the next run would take it for a damaged line.
        if let Err(e) = Record::from_json_line(&String::from_utf8_lossy(&line)) {
            return Err(Error::Invalid(format!(
                "the record of {id} would not be readable back ({e}); a measurement produced a number JSON cannot \
                 hold (NaN or infinity). Nothing was stored for it"
            )));
        }
        line.push(b'\n');
        let ctx = || format!("appending to {}", self.dir.join(RECORDS).display());
        self.records.write_all(&line).map_err(|e| Error::io(ctx(), e))?;
        self.records.flush().map_err(|e| Error::io(ctx(), e))?;
        self.records.sync_data().map_err(|e| Error::io(ctx(), e))?;
        if record.is_interrupted() {
            self.interrupted.insert(id.clone());
        } else {
            self.interrupted.remove(id);
            self.ids.insert(id.clone());
        }
        Ok(())
    }

    /// Every record stored, the last of each id (a superseded interrupted one left out), in
    /// file order.
    pub fn records(&self) -> Result<Vec<Record>> {
        Ok(read_records_file(&self.dir.join(RECORDS), Some(&self.manifest.name))?.records)
    }
}

impl pqtls_core::sink::Sink for Store {
    fn contains(&self, id: &str) -> bool {
        Store::contains(self, id)
    }

    fn append(&mut self, m: &pqtls_core::record::Measured, keep_samples: bool) -> Result<()> {
        Store::append(self, &m.record, if keep_samples { &m.samples } else { &[] })
    }

    fn records(&self) -> Result<Vec<Record>> {
        Store::records(self)
    }
}

/// One line of `records.ndjson`: the record's JSON with `"experiment":"<name>"` right after
/// `schema` (so that a line copied into another experiment's store is recognised), no newline.
pub fn record_line(record: &Record, experiment: &str) -> Result<Vec<u8>> {
    let id = &record.id;
    let json = serde_json::to_vec(record).map_err(|e| Error::Other(format!("encoding record {id}: {e}")))?;
    let name = serde_json::to_vec(experiment).map_err(|e| Error::Other(format!("encoding a name: {e}")))?;
    // `{"schema":2,…`: the first comma ends the schema number.
    let Some(comma) = json.iter().position(|&b| b == b',') else {
        return Err(Error::Other(format!("encoding record {id}: no fields")));
    };
    let mut line = Vec::with_capacity(json.len() + name.len() + 16);
    line.extend_from_slice(&json[..=comma]);
    line.extend_from_slice(b"\"experiment\":");
    line.extend_from_slice(&name);
    line.push(b',');
    line.extend_from_slice(&json[comma + 1..]);
    Ok(line)
}

/// Moves the bad last line of `records.ndjson` to the quarantine file (appended and synced
/// first, then cut from the records), and says so.
fn quarantine(dir: &Path, bad: &BadTail) -> Result<String> {
    let rpath = dir.join(RECORDS);
    let qpath = dir.join(QUARANTINE);
    let data = fs::read(&rpath).map_err(|e| Error::io(format!("reading {}", rpath.display()), e))?;
    let tail = &data[bad.keep_bytes as usize..];
    let mut q = OpenOptions::new()
        .create(true)
        .append(true)
        .open(&qpath)
        .map_err(|e| Error::io(format!("opening {}", qpath.display()), e))?;
    let mut moved = tail.to_vec();
    if moved.last() != Some(&b'\n') {
        moved.push(b'\n');
    }
    let ctx = || format!("writing {}", qpath.display());
    q.write_all(&moved).map_err(|e| Error::io(ctx(), e))?;
    q.sync_all().map_err(|e| Error::io(ctx(), e))?;
    let f = OpenOptions::new()
        .write(true)
        .open(&rpath)
        .map_err(|e| Error::io(format!("opening {}", rpath.display()), e))?;
    f.set_len(bad.keep_bytes).map_err(|e| Error::io(format!("truncating {}", rpath.display()), e))?;
    f.sync_all().map_err(|e| Error::io(format!("syncing {}", rpath.display()), e))?;
    sync_dir(dir);
    Ok(format!(
        "{}:{}: moved {} ({} bytes: {}) to {}; that configuration will be measured again",
        rpath.display(),
        bad.line,
        if bad.complete { "an invalid last line" } else { "an incomplete last line, from an interrupted write," },
        bad.dropped_bytes,
        bad.reason,
        qpath.display()
    ))
}

/// File name of a configuration's raw samples: `<first 16 hex digits of sha256(id)>.ndjson`.
pub fn sample_file_name(id: &str) -> String {
    format!("{}.ndjson", &hex(&Sha256::digest(id.as_bytes()))[..16])
}

/// One line of a samples file.
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct SampleLine {
    pub id: String,
    pub i: u64,
    pub client: SideSample,
    pub server: SideSample,
}

/// Reads the manifest of a results directory.
pub fn read_manifest(dir: &Path) -> Result<Manifest> {
    let p = dir.join(MANIFEST);
    let text = crate::input::read_text(&p, "the manifest", crate::input::SMALL_LIMIT_BYTES)?.ok_or_else(|| {
        Error::Invalid(format!("{} does not exist (is {} a pqtls results directory?)", p.display(), dir.display()))
    })?;
    serde_json::from_str(&text).map_err(|e| Error::Invalid(format!("{}: not a valid manifest: {e}", p.display())))
}

/// Records of a results directory, read-only, in the experiment's order (the matrix order
/// of the directory's copy of the experiment file, [`in_experiment_order`]) — not the order
/// they were stored in, which an interleaved run shuffles. A torn last line is ignored (and
/// reported in the returned notices), never modified. Of an id, the last record is returned
/// (an interrupted one it superseded is left out); configurations whose last record is
/// marked interrupted are named in a notice (`incomplete: …`).
pub fn read_records(dir: &Path) -> Result<(Vec<Record>, Vec<String>)> {
    read_records_saying(dir, true)
}

/// [`read_records`]; `say_interrupted`: with the notice naming interrupted configurations.
pub(crate) fn read_records_saying(dir: &Path, say_interrupted: bool) -> Result<(Vec<Record>, Vec<String>)> {
    let p = dir.join(RECORDS);
    if !p.exists() {
        let shards: Vec<String> = fs::read_dir(dir)
            .map(|rd| {
                rd.filter_map(|e| e.ok())
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with("shard-"))
                    .collect()
            })
            .unwrap_or_default();
        if !shards.is_empty() {
            return Err(Error::Invalid(format!(
                "{} holds shards ({}) but no merged records: join them first, e.g. pqtls merge {}/shard-* --out {}",
                dir.display(),
                shards.join(", "),
                dir.display(),
                dir.display()
            )));
        }
        return Err(Error::Invalid(format!(
            "{} has no {RECORDS}: not a pqtls results directory, or nothing measured yet",
            dir.display()
        )));
    }
    let name = read_manifest(dir).ok().map(|m| m.name);
    let RecordsFile { mut records, bad, .. } = read_records_file(&p, name.as_deref())?;
    let mut notices: Vec<String> = bad
        .map(|t| {
            format!(
                "{}:{}: ignored {} ({} bytes: {}); `pqtls run` moves it to {QUARANTINE} and measures that configuration again",
                p.display(),
                t.line,
                if t.complete { "an invalid last line" } else { "an incomplete last line" },
                t.dropped_bytes,
                t.reason
            )
        })
        .into_iter()
        .collect();
    if say_interrupted {
        notices.extend(interrupted_notice(&records));
    }
    notices.extend(in_experiment_order(dir, &mut records));
    Ok((records, notices))
}

/// What readers say about configurations whose last record is marked interrupted (their
/// numbers cover part of a measurement), or nothing.
fn interrupted_notice(records: &[Record]) -> Option<String> {
    let cut: Vec<&str> = records.iter().filter(|r| r.is_interrupted()).map(|r| r.id.as_str()).collect();
    if cut.is_empty() {
        return None;
    }
    Some(format!(
        "incomplete: {} configuration(s) interrupted (records marked `stopped: interrupted`, measured partly: {}{}); \
         `pqtls run` measures them again",
        cut.len(),
        cut.iter().take(5).copied().collect::<Vec<_>>().join(", "),
        if cut.len() > 5 { ", …" } else { "" }
    ))
}

/// Sorts a results directory's records in the order of its experiment copy's scenarios
/// ([`pqtls_core::record::in_plan_order`]). Without a copy they stay in stored order; with a
/// copy that no longer expands (edited by hand, or a factor this version does not know) too,
/// and the returned notice says so.
pub fn in_experiment_order(dir: &Path, records: &mut [Record]) -> Option<String> {
    let copy = dir.join(EXPERIMENT_COPY);
    let text = crate::input::read_text(&copy, "the experiment copy", crate::input::EXPERIMENT_LIMIT_BYTES).ok()??;
    match Experiment::parse(&text, &copy) {
        Ok(exp) => {
            let ids: Vec<String> = exp.each_scenario().map(|s| s.id()).collect();
            pqtls_core::record::in_plan_order(records, &ids, |r| &r.id);
            None
        }
        Err(d) => Some(format!(
            "records are listed in the order they were stored, not the experiment's: its copy {} does not expand \
             ({})",
            copy.display(),
            d.items.first().map_or_else(String::new, |i| i.message.clone())
        )),
    }
}

/// Raw samples of one configuration, if they were kept.
pub fn read_samples(dir: &Path, id: &str) -> Result<Option<Vec<SampleLine>>> {
    let p = dir.join(SAMPLES_DIR).join(sample_file_name(id));
    let Some(text) = crate::input::read_text(&p, "the raw samples", crate::input::RECORDS_LIMIT_BYTES)? else {
        return Ok(None);
    };
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let s: SampleLine = serde_json::from_str(line)
            .map_err(|e| Error::Invalid(format!("{}:{}: not a sample line: {e}", p.display(), n + 1)))?;
        if s.id == id {
            out.push(s);
        }
    }
    Ok(Some(out))
}

/// The last line of a records file when it is not a valid record: torn (no newline: a crash
/// mid-write) or complete but not a record (e.g. edited by hand).
#[derive(Debug)]
pub(crate) struct BadTail {
    keep_bytes: u64,
    pub(crate) dropped_bytes: u64,
    pub(crate) line: usize,
    pub(crate) complete: bool,
    pub(crate) reason: String,
}

/// A records file as read: the last record of each id, in file order.
#[derive(Debug, Default)]
pub(crate) struct RecordsFile {
    pub(crate) records: Vec<Record>,
    /// Interrupted records superseded by a later record of their id.
    pub(crate) superseded: usize,
    /// The last line, when it is not a valid record.
    pub(crate) bad: Option<BadTail>,
}

/// Parses a records file. The last line may be torn or invalid: it is returned apart, not as a
/// record. Any other bad line is an error naming it, and so is, on any line, a record of a
/// future schema or unknown kind, a record of another experiment than `experiment` (when
/// given), or a second record of an id whose earlier record is not marked interrupted. A
/// record after interrupted ones of its id supersedes them: the last record of each id is
/// returned, at the place of its line.
pub(crate) fn read_records_file(path: &Path, experiment: Option<&str>) -> Result<RecordsFile> {
    let Some(data) = crate::input::read_bounded(path, "the records file", crate::input::RECORDS_LIMIT_BYTES)? else {
        return Ok(RecordsFile::default());
    };
    // In file order; a superseded record's place is emptied.
    let mut records: Vec<Option<Record>> = Vec::new();
    let mut seen: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut superseded = 0;
    let done = |records: Vec<Option<Record>>, superseded: usize, bad: Option<BadTail>| RecordsFile {
        records: records.into_iter().flatten().collect(),
        superseded,
        bad,
    };
    let mut pos = 0usize;
    let mut line_no = 0usize;
    while pos < data.len() {
        line_no += 1;
        let end = data[pos..].iter().position(|&b| b == b'\n').map(|i| pos + i);
        let line = &data[pos..end.unwrap_or(data.len())];
        // Last line: nothing but whitespace after it.
        let is_last = end.is_none_or(|e| data[e + 1..].iter().all(|b| b.is_ascii_whitespace()));
        let bad = |complete: bool, reason: String| BadTail {
            keep_bytes: pos as u64,
            dropped_bytes: (data.len() - pos) as u64,
            line: line_no,
            complete,
            reason,
        };
        if line.iter().all(|b| b.is_ascii_whitespace()) {
            match end {
                Some(end) => {
                    pos = end + 1;
                    continue;
                }
                None => break,
            }
        }
        let parsed = std::str::from_utf8(line)
            .map_err(|e| format!("not UTF-8: {e}"))
            .and_then(|text| serde_json::from_str::<serde_json::Value>(text).map_err(|e| format!("not JSON: {e}")));
        let (value, owner) = match parsed {
            Ok(v) => {
                let owner = v.get("experiment").map(|x| x.as_str().map(str::to_string).ok_or(x.to_string()));
                (Ok(v), owner)
            }
            Err(e) => (Err(e), None),
        };
        let Some(end) = end else {
            // No newline: the write was cut short (even if what is there parses).
            let reason = value.err().unwrap_or_else(|| "no newline at its end".into());
            return Ok(done(records, superseded, Some(bad(false, reason))));
        };
        if let (Some(want), Some(owner)) = (experiment, &owner) {
            let owner = owner.as_ref().map_or_else(|raw| raw.as_str(), |s| s.as_str());
            if owner != want {
                return Err(Error::Invalid(format!(
                    "{}:{line_no}: a record of experiment '{owner}', but this directory holds '{want}'; records of \
                     different experiments must not be mixed. Move that line out of the file",
                    path.display()
                )));
            }
        }
        match value.and_then(Record::from_json_value) {
            Ok(r) => {
                if let Some(&i) = seen.get(&r.id) {
                    if !records[i].as_ref().is_some_and(Record::is_interrupted) {
                        return Err(Error::Invalid(format!(
                            "{}:{line_no}: a second record for {}; a results file holds each scenario once (a \
                             record may only follow records of its id marked interrupted, which it supersedes). \
                             Move one of the two lines out of the file by hand",
                            path.display(),
                            r.id
                        )));
                    }
                    records[i] = None;
                    superseded += 1;
                }
                seen.insert(r.id.clone(), records.len());
                records.push(Some(r));
            }
            Err(e) if e.starts_with("schema ") || e.contains("cannot read yet") => {
                return Err(Error::Invalid(format!("{}:{line_no}: {e}", path.display())))
            }
            Err(e) if is_last => return Ok(done(records, superseded, Some(bad(true, e)))),
            Err(e) => {
                return Err(Error::Invalid(format!(
                    "{}:{line_no}: not a result record ({e}); the file is damaged before its last line: \
                     move that line out of the file by hand (its configuration will then be measured again)",
                    path.display()
                )))
            }
        }
        pos = end + 1;
    }
    Ok(done(records, superseded, None))
}

/// The writer's lock: an OS lock (`flock`) on `.lock`, held for as long as the store is open.
/// The kernel drops it when the process ends however it ends, so there is no stale lock to
/// judge and no race between two runs starting at once: exactly one gets it. The file (left
/// in place: removing it would let a third run lock a different file) names the holder for
/// the error message of the others.
#[derive(Debug)]
struct Lock {
    _file: File,
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .or_else(|_| fs::read_to_string("/etc/hostname"))
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unknown-host".into())
}

impl Lock {
    fn take(dir: &Path) -> Result<Lock> {
        let path = dir.join(LOCK);
        let not_a_lock = |what: &str| {
            Error::Invalid(format!(
                "{} is {what}, not a lock file pqtls made: it is never followed or written through (on a shared \
                 file system that could destroy another file); remove it and run again",
                path.display()
            ))
        };
        // O_NOFOLLOW: a symbolic link planted as `.lock` is refused, its target untouched;
        // O_NONBLOCK: a FIFO does not block the open (it is refused below).
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| match e.raw_os_error() {
                Some(libc::ELOOP) => not_a_lock("a symbolic link"),
                _ => Error::io(format!("opening {}", path.display()), e),
            })?;
        if !file.metadata().map_err(|e| Error::io(format!("reading {}", path.display()), e))?.is_file() {
            return Err(not_a_lock("not a regular file"));
        }
        match file.try_lock() {
            Ok(()) => {}
            Err(fs::TryLockError::WouldBlock) => {
                let who = fs::read_to_string(&path).unwrap_or_default();
                let who = who.trim();
                return Err(Error::Invalid(format!(
                    "{} is being written by another pqtls run ({}); wait for it to end, or use --shard K/N to \
                     run in parallel",
                    dir.display(),
                    if who.is_empty() { "starting up".to_string() } else { format!("host and pid: {who}") }
                )));
            }
            Err(fs::TryLockError::Error(e)) => return Err(Error::io(format!("locking {}", path.display()), e)),
        }
        let me = format!("{} {}\n", hostname(), std::process::id());
        let ctx = || format!("writing {}", path.display());
        file.set_len(0).map_err(|e| Error::io(ctx(), e))?;
        file.write_all(me.as_bytes()).map_err(|e| Error::io(ctx(), e))?;
        Ok(Lock { _file: file })
    }
}

pub(crate) fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

pub(crate) fn to_json_pretty<T: Serialize>(v: &T) -> Result<Vec<u8>> {
    let mut b = serde_json::to_vec_pretty(v).map_err(|e| Error::Other(format!("encoding JSON: {e}")))?;
    b.push(b'\n');
    Ok(b)
}

/// Writes a file completely or not at all: a temporary file, synced, renamed over.
pub(crate) fn write_atomic(path: &Path, data: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    let ctx = || format!("writing {}", path.display());
    let mut f = File::create(&tmp).map_err(|e| Error::io(ctx(), e))?;
    f.write_all(data).map_err(|e| Error::io(ctx(), e))?;
    f.sync_all().map_err(|e| Error::io(ctx(), e))?;
    fs::rename(&tmp, path).map_err(|e| Error::io(ctx(), e))?;
    Ok(())
}

/// Makes new directory entries durable (best effort: not every file system supports it).
fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}
