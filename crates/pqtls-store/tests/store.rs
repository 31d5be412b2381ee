//! The store and the runner: resume after an interruption or a torn write, nothing measured
//! twice, nothing lost; settings changes refused; shards and merge.

use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::record::ConfigRecord;
use pqtls_store::{
    merge, read_records, read_samples, run, synthetic, Experiment, Progress, RunOptions, Shard, Store, StoreOptions,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const EXP: &str = r#"
name = "t"
[settings]
warmup = 1
loops = 30
raw_samples = true
[matrix]
group = ["x25519", "X25519MLKEM768", "MLKEM768"]
chain = ["p256:p256", "mldsa65:mldsa65"]
[baseline]
group = "x25519"
"#;

fn exp(text: &str) -> Experiment {
    Experiment::parse(text, Path::new("t.toml")).unwrap()
}

fn opts() -> RunOptions {
    RunOptions { progress: Progress::Hidden, ..RunOptions::default() }
}

/// Records by id. The `baseline` field depends on whether the baseline was already stored
/// when a record was measured (not so across shards), so it is left out of comparisons.
fn by_id(records: Vec<ConfigRecord>) -> BTreeMap<String, ConfigRecord> {
    records
        .into_iter()
        .map(|mut r| {
            r.baseline = None;
            (r.config.id.clone(), r)
        })
        .collect()
}

fn same(a: Vec<ConfigRecord>, b: Vec<ConfigRecord>) {
    let (a, b) = (by_id(a), by_id(b));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    assert!(a == b, "records differ");
}

/// Runs to completion; returns the closure calls (ids).
fn run_all(e: &Experiment, dir: &Path, o: &RunOptions) -> Vec<String> {
    let mut store = Store::open(dir, e, &StoreOptions { shard: o.shard, ..Default::default() }).unwrap();
    let mut calls = Vec::new();
    let s = run(e, &mut store, o, &mut |c: &HandshakeConfig, _| {
        calls.push(c.id());
        Ok(synthetic::measure(c, 30))
    })
    .unwrap();
    assert!(!s.interrupted);
    calls
}

#[test]
fn interrupted_run_resumes_without_measuring_twice_or_losing_anything() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let reference = tmp.path().join("reference");
    let calls = run_all(&e, &reference, &opts());
    assert_eq!(calls.len(), 6);

    let dir = tmp.path().join("interrupted");
    let o = opts();
    let flag = o.interrupt.clone();
    let mut calls = Vec::new();
    {
        let mut store = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
        let s = run(&e, &mut store, &o, &mut |c: &HandshakeConfig, _| {
            calls.push(c.id());
            if calls.len() == 3 {
                // Ctrl-C while the third configuration is measured: the closure finishes it.
                flag.store(true, Ordering::SeqCst);
            }
            Ok(synthetic::measure(c, 30))
        })
        .unwrap();
        assert!(s.interrupted);
        assert_eq!(s.measured, 3);
        assert_eq!(s.remaining(), 3);
    }
    // Resume.
    let o = opts();
    let mut store = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
    let s = run(&e, &mut store, &o, &mut |c: &HandshakeConfig, _| {
        calls.push(c.id());
        Ok(synthetic::measure(c, 30))
    })
    .unwrap();
    assert_eq!((s.already_done, s.measured, s.interrupted), (3, 3, false));
    let mut sorted = calls.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), calls.len(), "a configuration was measured twice: {calls:?}");
    assert_eq!(calls.len(), 6);
    let (got, notices) = read_records(&dir).unwrap();
    assert!(notices.is_empty());
    same(got, read_records(&reference).unwrap().0);
    // Raw samples kept, and the baseline delta filled from the stored x25519 record.
    let id = e.configs().unwrap()[2].id();
    assert_eq!(read_samples(&dir, &id).unwrap().unwrap().len(), 30);
    let rec = read_records(&dir).unwrap().0.into_iter().find(|r| r.config.id == id).unwrap();
    assert!(rec.config.group == "X25519MLKEM768" && rec.baseline.is_some());
}

#[test]
fn interrupt_during_a_measurement_keeps_nothing_of_it() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let o = opts();
    let flag = o.interrupt.clone();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let mut n = 0;
    let s = run(&e, &mut store, &o, &mut |c: &HandshakeConfig, _| {
        n += 1;
        if n == 2 {
            flag.store(true, Ordering::SeqCst);
            return Err(pqtls_core::Error::Other("interrupted".into()));
        }
        Ok(synthetic::measure(c, 10))
    })
    .unwrap();
    assert!(s.interrupted && s.measured == 1);
    assert_eq!(store.records().unwrap().len(), 1);
}

#[test]
fn torn_last_line_is_cut_and_that_configuration_measured_again() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let reference = tmp.path().join("reference");
    run_all(&e, &reference, &opts());

    let dir = tmp.path().join("torn");
    let configs = e.configs().unwrap();
    {
        let mut store = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
        for c in &configs[..3] {
            let m = synthetic::measure(c, 30);
            store.append(&m.record, &m.samples).unwrap();
        }
    }
    // A crash in the middle of writing the fourth record.
    let line = serde_json::to_string(&synthetic::measure(&configs[3], 30).record).unwrap();
    let mut f = std::fs::OpenOptions::new().append(true).open(dir.join("records.ndjson")).unwrap();
    f.write_all(&line.as_bytes()[..line.len() / 2]).unwrap();
    drop(f);
    // Readers ignore it without touching the file.
    let (rs, notices) = read_records(&dir).unwrap();
    assert_eq!(rs.len(), 3);
    assert!(notices[0].contains("incomplete last line"), "{notices:?}");

    let mut store = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
    assert!(store.notices[0].contains("removed an incomplete last line"), "{:?}", store.notices);
    let mut calls = Vec::new();
    run(&e, &mut store, &opts(), &mut |c: &HandshakeConfig, _| {
        calls.push(c.id());
        Ok(synthetic::measure(c, 30))
    })
    .unwrap();
    assert_eq!(calls, configs[3..].iter().map(|c| c.id()).collect::<Vec<_>>());
    same(read_records(&dir).unwrap().0, read_records(&reference).unwrap().0);
}

#[test]
fn damaged_middle_line_is_an_error_naming_it() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    std::fs::write(tmp.path().join("records.ndjson"), "{not json}\n{\"also\": 1}\n").unwrap();
    let err = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("records.ndjson:1: not a result record"), "{err}");
}

#[test]
fn changed_settings_are_refused_with_what_changed_and_fresh_moves_results_aside() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    run_all(&e, &dir, &opts());
    let changed = exp(&EXP.replace("loops = 30", "loops = 50"));
    let err = Store::open(&dir, &changed, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("loops: 30 → 50") && err.contains("--fresh") && err.contains("name"), "{err}");
    // Factor changes are fine: the new configurations are added.
    let more = exp(&EXP.replace("\"MLKEM768\"]", "\"MLKEM768\", \"MLKEM1024\"]"));
    let calls = run_all(&more, &dir, &opts());
    assert_eq!(calls.len(), 2);
    // --fresh keeps the old results next to the new directory.
    let store = Store::open(&dir, &changed, &StoreOptions { fresh: true, ..Default::default() }).unwrap();
    assert!(store.is_empty());
    assert!(store.notices[0].contains("moved to"), "{:?}", store.notices);
    let aside = std::fs::read_dir(tmp.path())
        .unwrap()
        .filter(|d| d.as_ref().unwrap().file_name().to_string_lossy().starts_with("t.replaced-"))
        .count();
    assert_eq!(aside, 1);
}

#[test]
fn a_second_writer_is_refused() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let a = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    // The same process opening it again: refused (the lock is held).
    let err = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("another pqtls run (pid") && err.contains("remove"), "{err}");
    drop(a);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap().trim().to_string();
    // A live process on this host (pid 1 always exists).
    std::fs::write(tmp.path().join(".lock"), format!("{host} 1\n")).unwrap();
    let err = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("another pqtls run (pid 1)"), "{err}");
    // Another host: cannot be checked from here, respected.
    std::fs::write(tmp.path().join(".lock"), "node-b 4242\n").unwrap();
    let err = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("pid 4242 on host node-b"), "{err}");
    // A stale lock of a dead process, or of our own pid that we do not hold (a restarted
    // container gets the same pid): taken over.
    std::fs::write(tmp.path().join(".lock"), format!("{host} {}\n", u32::MAX - 1)).unwrap();
    drop(Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap());
    std::fs::write(tmp.path().join(".lock"), format!("{host} {}\n", std::process::id())).unwrap();
    drop(Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap());
    assert!(!tmp.path().join(".lock").exists());
}

#[test]
fn missing_stacks_are_skipped_with_a_notice() {
    let e = exp(&EXP.replace("[matrix]", "[matrix]\nstack = [\"openssl\", \"rustls\"]"));
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let o = RunOptions { available_stacks: vec![Stack::Openssl], progress: Progress::Lines, ..opts() };
    let s = run(&e, &mut store, &o, &mut |c: &HandshakeConfig, _| Ok(synthetic::measure(c, 5))).unwrap();
    assert_eq!((s.total, s.measured), (12, 6));
    assert_eq!(s.skipped_stacks, vec![(Stack::Rustls, 6)]);
    assert!(s.notices.iter().any(|n| n.contains("no rustls backend")), "{:?}", s.notices);
}

#[test]
fn shards_cover_the_matrix_once_and_merge_into_the_full_set() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let reference = tmp.path().join("reference");
    run_all(&e, &reference, &opts());
    let mut dirs = Vec::new();
    let mut all_calls = Vec::new();
    for k in 1..=4 {
        let shard = Shard::parse(&format!("{k}/4")).unwrap();
        let dir = Store::dir_for(tmp.path(), &e, Some(shard));
        assert!(dir.ends_with(format!("t/shard-{k}-of-4")));
        all_calls.extend(run_all(&e, &dir, &RunOptions { shard: Some(shard), ..opts() }));
        dirs.push(dir);
    }
    all_calls.sort();
    let mut want: Vec<String> = e.configs().unwrap().iter().map(|c| c.id()).collect();
    want.sort();
    assert_eq!(all_calls, want);

    let out = tmp.path().join("merged");
    let m = merge(&dirs[..3], &out).unwrap();
    assert_eq!(m.missing_shards, vec!["4/4".to_string()]);
    let out = tmp.path().join("merged-all");
    let m = merge(&dirs, &out).unwrap();
    assert!(m.missing_shards.is_empty());
    assert_eq!(m.sample_files, 6);
    same(read_records(&out).unwrap().0, read_records(&reference).unwrap().0);
    assert!(read_samples(&out, &want[0]).unwrap().is_some());

    let err = merge(&[dirs[0].clone(), dirs[0].clone()], &tmp.path().join("x")).unwrap_err().to_string();
    assert!(err.contains("given twice"), "{err}");
    let err = merge(&[reference.clone(), out.clone()], &tmp.path().join("y")).unwrap_err().to_string();
    assert!(err.contains("measured more than once"), "{err}");
    let err = merge(&dirs, &out).unwrap_err().to_string();
    assert!(err.contains("already holds results"), "{err}");
    assert!(Shard::parse("5/4").unwrap_err().to_string().contains("K/N"));
}

#[test]
fn a_record_for_another_configuration_is_refused() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let other = e.configs().unwrap()[5].clone();
    let err =
        run(&e, &mut store, &opts(), &mut |_c: &HandshakeConfig, _| Ok(synthetic::measure(&other, 5))).unwrap_err();
    assert!(err.to_string().contains("returned a record for"), "{err}");
    let _ = Arc::new(AtomicBool::new(false));
}

#[test]
fn records_with_undefined_relative_deltas_read_back_and_non_finite_numbers_are_refused() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let configs = e.configs().unwrap();
    let base = synthetic::measure(&configs[0], 20).record;
    let mut m = synthetic::measure(&configs[2], 20);
    // A step the baseline does not have: its relative change is undefined (NaN → JSON null).
    m.record.server.steps.insert("hello_retry".into(), m.record.server.total_cpu_ns.clone());
    m.record.baseline = Some(pqtls_core::record::BaselineDelta::between(&m.record, &base));
    assert!(m.record.baseline.as_ref().unwrap().server["hello_retry"].relative.is_nan());
    store.append(&m.record, &[]).unwrap();
    let back = store.records().unwrap();
    assert!(back[0].baseline.as_ref().unwrap().server["hello_retry"].relative.is_nan());

    let mut bad = synthetic::measure(&configs[1], 20).record;
    bad.rate.handshakes_per_s = f64::INFINITY;
    let err = store.append(&bad, &[]).unwrap_err().to_string();
    assert!(err.contains("would not be readable back") && err.contains("Nothing was stored"), "{err}");
    assert_eq!(store.records().unwrap().len(), 1);
    assert!(!store.contains(&configs[1].id()));
}
