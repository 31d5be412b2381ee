//! The store and the runner: resume after an interruption or a torn write, nothing measured
//! twice, nothing lost; settings changes refused; shards and merge.

use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::record::{Measured, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_lab::{Measurement, Plan, Progress, RunOptions, RunSummary};
use pqtls_store::{merge, read_records, read_samples, Experiment, Shard, Store, StoreOptions};
use pqtls_testkit::synthetic;
use std::cell::RefCell;
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

/// How a test runs: a shard, the stacks "built in", the interrupt flag.
#[derive(Clone)]
struct Opts {
    shard: Option<Shard>,
    stacks: Vec<Stack>,
    interrupt: Arc<AtomicBool>,
}

fn opts() -> Opts {
    Opts { shard: None, stacks: Stack::ALL.to_vec(), interrupt: Arc::new(AtomicBool::new(false)) }
}

type MeasureFn<'a> = dyn FnMut(&Scenario, &Settings) -> pqtls_core::Result<Measured> + 'a;

/// A measurement made of a closure (the runner's contract, without a TLS stack).
struct Closure<'a, 'f> {
    f: RefCell<&'a mut MeasureFn<'f>>,
    stacks: Vec<Stack>,
}

impl Measurement for Closure<'_, '_> {
    fn kind(&self) -> Kind {
        Kind::Insitu
    }
    fn stacks(&self) -> Vec<Stack> {
        self.stacks.clone()
    }
    fn measure(
        &self,
        s: &Scenario,
        settings: &Settings,
        _: &AtomicBool,
        _: &mut dyn FnMut(&Progress),
    ) -> pqtls_core::Result<Measured> {
        (self.f.borrow_mut())(s, settings)
    }
}

/// The runner over an experiment (of a shard) into a store, as `pqtls run` wires it; notices
/// are collected.
fn run(
    e: &Experiment,
    store: &mut Store,
    o: &Opts,
    f: &mut MeasureFn,
) -> pqtls_core::Result<(RunSummary, Vec<String>)> {
    let scenarios: Vec<Scenario> = e
        .scenarios()
        .iter()
        .enumerate()
        .filter(|(i, _)| o.shard.is_none_or(|s| s.selects(*i)))
        .map(|(_, s)| s.clone())
        .collect();
    let baseline_of = |s: &Scenario| e.baseline.baseline_of(s);
    let plan = Plan { scenarios: (&scenarios).into(), settings: &e.settings, baseline_of: &baseline_of, skipped: &[] };
    let m = Closure { f: RefCell::new(f), stacks: o.stacks.clone() };
    let ro = RunOptions { interrupt: o.interrupt.clone(), keep_going: false };
    let mut notices = Vec::new();
    let s = pqtls_lab::run(&plan, &m, store, &ro, &mut |ev| {
        if let pqtls_lab::Event::Notice(n) = ev {
            notices.push(n)
        }
    })?;
    Ok((s, notices))
}

fn baseline(r: &Record) -> Option<&pqtls_core::record::BaselineDelta> {
    r.insitu().and_then(|i| i.baseline.as_ref())
}

/// Records by id. The `baseline` field depends on whether the baseline was already stored
/// when a record was measured (not so across shards), so it is left out of comparisons.
fn by_id(records: Vec<Record>) -> BTreeMap<String, Record> {
    records
        .into_iter()
        .map(|mut r| {
            if let Some(i) = r.insitu_mut() {
                i.baseline = None;
            }
            (r.id.clone(), r)
        })
        .collect()
}

fn same(a: Vec<Record>, b: Vec<Record>) {
    let (a, b) = (by_id(a), by_id(b));
    assert_eq!(a.keys().collect::<Vec<_>>(), b.keys().collect::<Vec<_>>());
    assert!(a == b, "records differ");
}

/// Runs to completion; returns the closure calls (ids).
fn run_all(e: &Experiment, dir: &Path, o: &Opts) -> Vec<String> {
    let mut store = Store::open(dir, e, &StoreOptions { shard: o.shard, ..Default::default() }).unwrap();
    let mut calls = Vec::new();
    let s = run(e, &mut store, o, &mut |c: &Scenario, _| {
        calls.push(c.id());
        Ok(synthetic::measure(c, 30))
    })
    .unwrap()
    .0;
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
        let s = run(&e, &mut store, &o, &mut |c: &Scenario, _| {
            calls.push(c.id());
            if calls.len() == 3 {
                // Ctrl-C while the third configuration is measured: the closure finishes it.
                flag.store(true, Ordering::SeqCst);
            }
            Ok(synthetic::measure(c, 30))
        })
        .unwrap()
        .0;
        assert!(s.interrupted);
        assert_eq!(s.measured, 3);
        assert_eq!(s.remaining(), 3);
    }
    // Resume.
    let o = opts();
    let mut store = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
    let s = run(&e, &mut store, &o, &mut |c: &Scenario, _| {
        calls.push(c.id());
        Ok(synthetic::measure(c, 30))
    })
    .unwrap()
    .0;
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
    let id = e.scenarios().to_vec()[2].id();
    assert_eq!(read_samples(&dir, &id).unwrap().unwrap().len(), 30);
    let rec = read_records(&dir).unwrap().0.into_iter().find(|r| r.id == id).unwrap();
    assert!(rec.factor("group") == "X25519MLKEM768" && baseline(&rec).is_some());
}

#[test]
fn interrupt_during_a_measurement_keeps_nothing_of_it() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let o = opts();
    let flag = o.interrupt.clone();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let mut n = 0;
    let s = run(&e, &mut store, &o, &mut |c: &Scenario, _| {
        n += 1;
        if n == 2 {
            flag.store(true, Ordering::SeqCst);
            return Err(pqtls_core::Error::Other("interrupted".into()));
        }
        Ok(synthetic::measure(c, 10))
    })
    .unwrap()
    .0;
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
    let configs = e.scenarios().to_vec();
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
    assert!(notices[0].contains("incomplete last line") && notices[0].contains(":4:"), "{notices:?}");

    let mut store = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
    assert!(store.notices[0].contains("moved an incomplete last line"), "{:?}", store.notices);
    let mut calls = Vec::new();
    run(&e, &mut store, &opts(), &mut |c: &Scenario, _| {
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
fn a_second_writer_is_refused_and_a_dead_one_leaves_no_stale_lock() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let a = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    // Opened again while held (the OS lock is per open file): refused, naming the holder.
    let err = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap_err().to_string();
    let me = format!(" {})", std::process::id());
    assert!(err.contains("another pqtls run (host and pid:") && err.contains(&me), "{err}");
    drop(a);
    // Whatever a dead process left in the file does not matter: the lock went with it.
    std::fs::write(tmp.path().join(".lock"), "node-b 4242\n").unwrap();
    drop(Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap());
}

/// Issue 39: a `.lock` planted as a symbolic link (a shared results directory, a run as root) is
/// refused and its target left as it was; so is a lock that is not a regular file.
#[test]
fn a_lock_that_is_a_symlink_or_not_a_file_is_refused_and_nothing_is_written_through_it() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("precious");
    std::fs::write(&target, "keep me\n").unwrap();
    let dir = tmp.path().join("store");
    std::fs::create_dir_all(&dir).unwrap();
    std::os::unix::fs::symlink(&target, dir.join(".lock")).unwrap();
    let err = Store::open(&dir, &e, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains(".lock is a symbolic link") && err.contains("remove it"), "{err}");
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me\n", "the target was written through the lock");
    std::fs::remove_file(dir.join(".lock")).unwrap();
    std::fs::create_dir(dir.join(".lock")).unwrap();
    let err = Store::open(&dir, &e, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains(".lock") && (err.contains("not a regular file") || err.contains("opening")), "{err}");
}

/// Issue 39: `--fresh` takes the lock before it moves anything: a store another run is writing is
/// refused by name and stays where it is.
#[test]
fn fresh_does_not_get_around_a_live_writer() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("t");
    let writer = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
    let err = Store::open(&dir, &e, &StoreOptions { fresh: true, ..Default::default() }).unwrap_err().to_string();
    assert!(err.contains("being written by another pqtls run"), "{err}");
    let aside = std::fs::read_dir(tmp.path()).unwrap().filter(|d| d.as_ref().unwrap().file_name() != "t").count();
    assert_eq!(aside, 0, "nothing moved aside under a live writer");
    drop(writer);
    drop(Store::open(&dir, &e, &StoreOptions { fresh: true, ..Default::default() }).unwrap());
}

#[test]
fn simultaneous_writers_exactly_one_wins() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    for _ in 0..20 {
        let barrier = std::sync::Barrier::new(6);
        // Every contender has tried before the winner lets go (a sleep would not be enough for
        // a thread descheduled on a busy machine).
        let tried = std::sync::Barrier::new(6);
        let wins = std::sync::atomic::AtomicUsize::new(0);
        std::thread::scope(|s| {
            for _ in 0..6 {
                s.spawn(|| {
                    barrier.wait();
                    let store = Store::open(tmp.path(), &e, &StoreOptions::default());
                    if store.is_ok() {
                        wins.fetch_add(1, Ordering::SeqCst);
                    }
                    tried.wait();
                    drop(store);
                });
            }
        });
        assert_eq!(wins.load(Ordering::SeqCst), 1);
    }
}

#[test]
fn missing_stacks_are_skipped_with_a_notice() {
    let e = exp(&EXP.replace("[matrix]", "[matrix]\nstack = [\"openssl\", \"rustls\"]"));
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let o = Opts { stacks: vec![Stack::Openssl], ..opts() };
    let (s, notices) = run(&e, &mut store, &o, &mut |c: &Scenario, _| Ok(synthetic::measure(c, 5))).unwrap();
    assert_eq!((s.total, s.measured), (12, 6));
    assert_eq!(s.skipped_stacks, vec![(Stack::Rustls, 6)]);
    assert!(notices.iter().any(|n| n.contains("no rustls backend")), "{notices:?}");
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
        all_calls.extend(run_all(&e, &dir, &Opts { shard: Some(shard), ..opts() }));
        dirs.push(dir);
    }
    all_calls.sort();
    let mut want: Vec<String> = e.scenarios().to_vec().iter().map(|c| c.id()).collect();
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
    let other = e.scenarios().to_vec()[5].clone();
    let err = run(&e, &mut store, &opts(), &mut |_c: &Scenario, _| Ok(synthetic::measure(&other, 5))).unwrap_err();
    assert!(err.to_string().contains("returned a record for"), "{err}");
    let _ = Arc::new(AtomicBool::new(false));
}

#[test]
fn records_with_undefined_relative_deltas_read_back_and_non_finite_numbers_are_refused() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let configs = e.scenarios().to_vec();
    let base = synthetic::measure(&configs[0], 20).record;
    let mut m = synthetic::measure(&configs[2], 20);
    // A step the baseline does not have: its relative change is undefined (NaN → JSON null).
    let r = m.record.insitu_mut().unwrap();
    r.server.steps.insert("hello_retry".into(), r.server.total_cpu_ns.clone());
    let d = pqtls_core::record::BaselineDelta::of_records(&m.record, &base);
    m.record.insitu_mut().unwrap().baseline = d;
    assert!(baseline(&m.record).unwrap().server["hello_retry"].relative.is_nan());
    store.append(&m.record, &[]).unwrap();
    let back = store.records().unwrap();
    assert!(baseline(&back[0]).unwrap().server["hello_retry"].relative.is_nan());

    let mut bad = synthetic::measure(&configs[1], 20).record;
    bad.insitu_mut().unwrap().rate.handshakes_per_s = f64::INFINITY;
    let err = store.append(&bad, &[]).unwrap_err().to_string();
    assert!(err.contains("would not be readable back") && err.contains("Nothing was stored"), "{err}");
    assert_eq!(store.records().unwrap().len(), 1);
    assert!(!store.contains(&configs[1].id()));
}

/// A line as the previous release (schema 1) wrote it for this scenario's record.
fn as_schema_1(r: &Record, sc: &Scenario, mode: &str) -> String {
    let i = r.insitu().unwrap();
    let mut loops = i.loops.clone();
    loops.mode = mode.into();
    let old = pqtls_core::record::ConfigRecord {
        schema: 1,
        label: sc.handshake.label(),
        config: pqtls_core::config::ConfigDesc::from(&sc.handshake),
        negotiated: i.negotiated.clone(),
        client: i.client.clone(),
        server: i.server.clone(),
        total_cpu_ns: i.total_cpu_ns.clone(),
        bytes: i.bytes.clone(),
        loops,
        rate: i.rate.clone(),
        baseline: None,
        env: r.env.clone(),
        measured_at: r.measured_at,
    };
    serde_json::to_string(&old).unwrap()
}

#[test]
fn a_schema_1_store_opens_and_resumes_without_measuring_again() {
    for (mode, setting) in [("memory", ""), ("threads", "mode = \"threads\"\n")] {
        let e = exp(&EXP.replace("raw_samples = true\n", &format!("raw_samples = true\n{setting}")));
        let tmp = tempfile::tempdir().unwrap();
        // The previous release's directory: its manifest (settings with a `mode`) and three records.
        drop(Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap());
        let mpath = tmp.path().join("manifest.json");
        let mut manifest: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&mpath).unwrap()).unwrap();
        manifest["settings"]["mode"] = mode.into();
        std::fs::write(&mpath, serde_json::to_vec_pretty(&manifest).unwrap()).unwrap();
        let scenarios = e.scenarios().to_vec();
        let mut lines = String::new();
        for sc in &scenarios[..3] {
            let old = as_schema_1(&synthetic::measure(sc, 10).record, sc, mode);
            assert!(old.contains("\"schema\":1"));
            lines += &old;
            lines.push('\n');
        }
        std::fs::write(tmp.path().join("records.ndjson"), lines).unwrap();

        let (old, notices) = read_records(tmp.path()).unwrap();
        assert!(notices.is_empty());
        let want: Vec<String> = scenarios[..3].iter().map(|s| s.id()).collect();
        assert_eq!(old.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), want, "{mode}");
        let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
        let mut calls = Vec::new();
        let (s, _) = run(&e, &mut store, &opts(), &mut |c: &Scenario, _| {
            calls.push(c.id());
            Ok(synthetic::measure(c, 10))
        })
        .unwrap();
        assert_eq!((s.already_done, s.measured), (3, 3), "{mode}");
        assert_eq!(calls, scenarios[3..].iter().map(|s| s.id()).collect::<Vec<_>>());
        assert_eq!(read_records(tmp.path()).unwrap().0.len(), 6);
    }
}

#[test]
fn records_of_a_future_schema_or_unknown_kind_are_refused_by_name() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let m = synthetic::measure(&e.scenarios()[0], 5);
    let mut v = serde_json::to_value(&m.record).unwrap();
    v["schema"] = 99.into();
    std::fs::write(tmp.path().join("records.ndjson"), format!("{v}\n")).unwrap();
    let err = read_records(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("records.ndjson:1: schema 99") && err.contains("newer pqtls"), "{err}");
    v["schema"] = 2.into();
    // `transfer` records are read now (Outcome::Transfer); `layers` has no record type of its
    // own (the layers measurement writes load records with a capture section).
    v["kind"] = "layers".into();
    std::fs::write(tmp.path().join("records.ndjson"), format!("{v}\n")).unwrap();
    let err = read_records(tmp.path()).unwrap_err().to_string();
    assert!(err.contains("a 'layers' record"), "{err}");
}

/// A store with the first `n` configurations of `e` stored (records carrying `e`'s settings,
/// as the lab's measurement writes them).
fn stored(e: &Experiment, dir: &Path, n: usize) {
    let mut store = Store::open(dir, e, &StoreOptions::default()).unwrap();
    for c in &e.scenarios()[..n] {
        let mut m = synthetic::measure(c, 10);
        m.record.settings = Some(e.settings.clone());
        store.append(&m.record, &m.samples).unwrap();
    }
}

fn append_line(dir: &Path, line: &str) {
    let mut f = std::fs::OpenOptions::new().append(true).open(dir.join("records.ndjson")).unwrap();
    f.write_all(line.as_bytes()).unwrap();
}

/// A complete but invalid last line is not deleted: it is moved to the quarantine file, and
/// the configuration it stood for (unknown: it is not a record) leaves the store incomplete, so
/// the run measures everything not stored — really, not only in its message.
#[test]
fn an_invalid_last_line_is_quarantined_and_the_rest_really_measured() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    stored(&e, tmp.path(), 2);
    append_line(tmp.path(), "{\"foo\":1}\n");
    let (rs, notices) = read_records(tmp.path()).unwrap();
    assert_eq!(rs.len(), 2);
    assert!(notices[0].contains(":3: ignored an invalid last line"), "{notices:?}");
    let report = pqtls_store::check(tmp.path()).unwrap();
    assert!(!report.is_sound() && report.problems[0].contains("invalid last line"), "{report:?}");

    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    assert!(
        store.notices[0].contains("moved an invalid last line") && store.notices[0].contains(pqtls_store::QUARANTINE)
    );
    let q = std::fs::read_to_string(tmp.path().join(pqtls_store::QUARANTINE)).unwrap();
    assert_eq!(q, "{\"foo\":1}\n");
    let mut calls = Vec::new();
    let (s, _) = run(&e, &mut store, &opts(), &mut |c: &Scenario, _| {
        calls.push(c.id());
        Ok(synthetic::measure(c, 10))
    })
    .unwrap();
    assert_eq!((s.already_done, s.measured), (2, 4));
    assert_eq!(read_records(tmp.path()).unwrap().0.len(), 6);
    drop(store);
    let report = pqtls_store::check(tmp.path()).unwrap();
    assert!(report.is_sound(), "{report:?}");
    assert!(report.notes.iter().any(|n| n.contains("1 quarantined line")), "{report:?}");
    // A second damaged tail is appended to the quarantine, not written over it.
    append_line(tmp.path(), "{\"schema\":2,\"id\":\"x\"");
    let store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    assert!(store.notices[0].contains("moved an incomplete last line"), "{:?}", store.notices);
    let q = std::fs::read_to_string(tmp.path().join(pqtls_store::QUARANTINE)).unwrap();
    assert_eq!(q.lines().count(), 2, "{q}");
}

/// Every line the store writes names its experiment: a record copied in from another
/// experiment's store is refused by name, by `run`, `report` and `check` alike.
#[test]
fn records_of_another_experiment_are_refused() {
    let e = exp(EXP);
    let other = exp(&EXP.replace("name = \"t\"", "name = \"other\""));
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("t"), tmp.path().join("other"));
    stored(&e, &a, 2);
    stored(&other, &b, 3);
    let text = std::fs::read_to_string(b.join("records.ndjson")).unwrap();
    assert!(text.lines().all(|l| l.starts_with("{\"schema\":2,\"experiment\":\"other\",")), "{text}");
    append_line(&a, &format!("{}\n", text.lines().nth(2).unwrap()));
    let err = Store::open(&a, &e, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("records.ndjson:3: a record of experiment 'other', but this directory holds 't'"), "{err}");
    let err = read_records(&a).unwrap_err().to_string();
    assert!(err.contains("experiment 'other'"), "{err}");
    let report = pqtls_store::check(&a).unwrap();
    assert!(report.problems.iter().any(|p| p.contains("experiment 'other'")), "{report:?}");
}

/// Records carry their settings: with manifest.json gone, a changed [settings] block is still
/// refused (and nothing is written into the store).
#[test]
fn changed_settings_are_refused_without_a_manifest() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    stored(&e, tmp.path(), 3);
    std::fs::remove_file(tmp.path().join("manifest.json")).unwrap();
    let before = std::fs::read(tmp.path().join("records.ndjson")).unwrap();
    let changed = exp(&EXP.replace("loops = 30", "loops = 50"));
    let err = Store::open(tmp.path(), &changed, &StoreOptions::default()).unwrap_err().to_string();
    assert!(err.contains("other settings") && err.contains("loops: 30 → 50") && err.contains("--fresh"), "{err}");
    assert!(!tmp.path().join("manifest.json").exists());
    assert_eq!(std::fs::read(tmp.path().join("records.ndjson")).unwrap(), before);
    // The same settings resume.
    let store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    assert_eq!(store.len(), 3);
}

/// `merge` names every record it cannot take (torn lines of several shards, duplicates) in one
/// error and writes nothing.
#[test]
fn merge_reports_every_record_it_cannot_take() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let mut dirs = Vec::new();
    for k in 1..=3 {
        let shard = Shard::parse(&format!("{k}/3")).unwrap();
        let dir = Store::dir_for(tmp.path(), &e, Some(shard));
        run_all(&e, &dir, &Opts { shard: Some(shard), ..opts() });
        dirs.push(dir);
    }
    append_line(&dirs[0], "{\"schema\":2,\"id\":");
    append_line(&dirs[2], "{\"foo\":1}\n");
    let out = tmp.path().join("merged");
    let err = merge(&dirs, &out).unwrap_err().to_string();
    assert!(err.contains("2 record(s) or shard(s) could not be taken"), "{err}");
    assert!(err.contains("shard-1-of-3/records.ndjson:3: ignored an incomplete last line"), "{err}");
    assert!(err.contains("shard-3-of-3/records.ndjson:3: ignored an invalid last line"), "{err}");
    assert!(!out.join("records.ndjson").exists());
    // After resuming (quarantine + measure again), the merge is whole and every line names the experiment.
    for (k, d) in dirs.iter().enumerate() {
        let shard = Shard::parse(&format!("{}/3", k + 1)).unwrap();
        run_all(&e, d, &Opts { shard: Some(shard), ..opts() });
    }
    let m = merge(&dirs, &out).unwrap();
    assert_eq!(m.records, 6);
    let text = std::fs::read_to_string(out.join("records.ndjson")).unwrap();
    assert!(text.lines().all(|l| l.contains("\"experiment\":\"t\"")));
    assert!(pqtls_store::check(&out).unwrap().is_sound());
    assert!(pqtls_store::check(tmp.path().join("t").as_path()).unwrap().is_sound());
}

/// Issue 39, item 9: `merge` refuses to write into the file-system root, a system directory or
/// a directory that is not empty, and to mix records of different kinds — before writing.
#[test]
fn merge_refuses_a_system_or_busy_output_and_mixed_kinds() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let dir = Store::dir_for(tmp.path(), &e, None);
    run_all(&e, &dir, &opts());
    for out in ["/", "/usr", "/tmp", "/proc/self"] {
        let err = merge(std::slice::from_ref(&dir), Path::new(out)).unwrap_err().to_string();
        assert!(err.contains("is a system directory"), "{out}: {err}");
    }
    let busy = tmp.path().join("busy");
    std::fs::create_dir(&busy).unwrap();
    std::fs::write(busy.join("notes.txt"), "mine").unwrap();
    let err = merge(std::slice::from_ref(&dir), &busy).unwrap_err().to_string();
    assert!(err.contains("holds notes.txt (not a shard of this merge)"), "{err}");
    assert_eq!(std::fs::read_dir(&busy).unwrap().count(), 1, "nothing written");
    // A load generator's records next to an in-situ store.
    let load = tmp.path().join("load.ndjson");
    let sc = Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("rate", "10/s")]).unwrap();
    let mut line = pqtls_store::record_line(&synthetic::load::load(&sc, false), "t").unwrap();
    if line.last() != Some(&b'\n') {
        line.push(b'\n');
    }
    std::fs::write(&load, line).unwrap();
    let out = tmp.path().join("mixed");
    let err = merge(&[dir.clone(), load], &out).unwrap_err().to_string();
    assert!(err.contains("cannot merge insitu records") && err.contains("with load records"), "{err}");
    assert!(!out.join("records.ndjson").exists());
}

/// Issue 39: `check` re-derives each record's id from its scenario, refuses negative times,
/// names a missing raw-samples file and a manifest of a newer format.
#[test]
fn check_finds_misfiled_impossible_and_missing_records() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let dir = Store::dir_for(tmp.path(), &e, None);
    run_all(&e, &dir, &opts());
    assert!(pqtls_store::check(&dir).unwrap().is_sound());
    let records = dir.join("records.ndjson");
    let text = std::fs::read_to_string(&records).unwrap();
    let mut lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    // Record 1 claims another scenario's id; record 2 has a negative median.
    let other = lines[1]["id"].clone();
    let first = lines[0]["id"].as_str().unwrap().to_string();
    lines[0]["id"] = other.clone();
    lines[1]["id"] = serde_json::Value::String(first.clone());
    lines[2]["result"]["total_cpu_ns"]["median"] = (-5.0).into();
    let edited: String = lines.iter().map(|l| format!("{l}\n")).collect();
    std::fs::write(&records, edited).unwrap();
    // Record 4's raw samples are gone.
    let samples_of = |id: &str| {
        std::fs::read_dir(dir.join("samples"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .find(|p| p.file_name().unwrap().to_string_lossy() == pqtls_store::store::sample_file_name(id))
            .unwrap()
    };
    std::fs::remove_file(samples_of(lines[3]["id"].as_str().unwrap())).unwrap();
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    manifest["format"] = 999.into();
    std::fs::write(dir.join("manifest.json"), manifest.to_string()).unwrap();
    let report = pqtls_store::check(&dir).unwrap();
    let all = report.problems.join("\n");
    assert!(!report.is_sound());
    assert_eq!(all.matches("its id is not its scenario's").count(), 2, "{all}");
    assert!(all.contains("total CPU median is -5: a time or a rate cannot be negative"), "{all}");
    assert!(all.contains("its raw samples were kept (raw_samples) but"), "{all}");
    assert!(all.contains("store format 999 is newer than this pqtls reads"), "{all}");
}

/// A schema number beyond u32 must not wrap onto schema 2.
#[test]
fn huge_schema_numbers_are_refused() {
    let e = exp(EXP);
    let m = synthetic::measure(&e.scenarios()[0], 5);
    let mut v = serde_json::to_value(&m.record).unwrap();
    v["schema"] = (u32::MAX as u64 + 3).into();
    let err = Record::from_json_line(&v.to_string()).unwrap_err();
    assert!(err.contains("schema 4294967298"), "{err}");
    for bad in ["[]", "null", "2", "{\"schema\":-1}", "{\"schema\":2}", "{\"schema\":\"2\"}"] {
        assert!(Record::from_json_line(bad).is_err(), "{bad}");
    }
}

/// The outputs of N load generators that drove one endpoint (`pqtls load --shard K/N`, one
/// directory or records file each, no manifest) merge into the record of the whole run; a
/// missing shard names itself and nothing is written.
#[test]
fn load_shards_from_several_generators_merge_into_one_record() {
    use pqtls_testkit::synthetic::load::{shards, study_scenario};
    let tmp = tempfile::tempdir().unwrap();
    let sc = study_scenario("x25519", "ed25519:ed25519", 2).with([("rate", "600/s")]).unwrap();
    let parts = shards(&sc, 3);
    let mut inputs = Vec::new();
    for (k, r) in parts.iter().enumerate() {
        let line = format!("{}\n", serde_json::to_string(r).unwrap());
        // A directory, a bare records file and a JSON array (`pqtls load --json FILE`).
        let path = if k == 1 {
            let f = tmp.path().join("pod-2.json");
            std::fs::write(&f, serde_json::to_string_pretty(&vec![r]).unwrap()).unwrap();
            f
        } else if k < 2 {
            let d = tmp.path().join(format!("pod-{}", k + 1));
            std::fs::create_dir_all(&d).unwrap();
            std::fs::write(d.join("records.ndjson"), line).unwrap();
            d
        } else {
            let f = tmp.path().join("pod-3.ndjson");
            std::fs::write(&f, line).unwrap();
            f
        };
        inputs.push(path);
    }
    let out = tmp.path().join("partial");
    let err = merge(&inputs[..2], &out).unwrap_err().to_string();
    assert!(err.contains("shard 3/3 of 3 is missing (have 2)"), "{err}");
    assert!(!out.join("records.ndjson").exists());
    let out = tmp.path().join("merged");
    let m = merge(&inputs, &out).unwrap();
    assert_eq!((m.records, m.joined_load_shards.clone()), (1, vec![(sc.id(), 3)]));
    let (merged, notices) = read_records(&out).unwrap();
    assert!(notices.is_empty());
    let l = merged[0].load().unwrap();
    assert_eq!(l.requests, parts.iter().map(|r| r.load().unwrap().requests).sum::<u64>());
    assert_eq!(l.latency.count, l.requests);
    assert_eq!(l.shard, None);
    let mut all = parts[0].load().unwrap().latency.histogram().unwrap();
    for r in &parts[1..] {
        all.add(r.load().unwrap().latency.histogram().unwrap()).unwrap();
    }
    assert_eq!(l.latency.p50_ns, all.value_at_quantile(0.5));
    assert_eq!(l.latency.p99_ns, all.value_at_quantile(0.99));
    // A shard given twice.
    let err =
        merge(&[inputs[0].clone(), inputs[1].clone(), inputs[1].clone(), inputs[2].clone()], &tmp.path().join("twice"))
            .unwrap_err()
            .to_string();
    assert!(err.contains("shard 2/3 is given twice"), "{err}");
}

/// Records come out of a results directory in the experiment's (matrix) order, whatever order
/// an interleaved run stored them in; without an experiment copy, in the order stored.
#[test]
fn records_are_read_in_the_experiments_order() {
    let e = exp(EXP);
    let tmp = tempfile::tempdir().unwrap();
    let mut store = Store::open(tmp.path(), &e, &StoreOptions::default()).unwrap();
    let mut plan: Vec<String> = e.scenarios().iter().map(|s| s.id()).collect();
    for s in e.scenarios().iter().rev() {
        store.append(&synthetic::measure(s, 5).record, &[]).unwrap();
    }
    let file_order: Vec<String> = std::fs::read_to_string(tmp.path().join("records.ndjson"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string())
        .collect();
    let (got, notices) = read_records(tmp.path()).unwrap();
    assert!(notices.is_empty(), "{notices:?}");
    assert_eq!(got.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), plan);
    plan.reverse();
    assert_eq!(file_order, plan);
    std::fs::remove_file(tmp.path().join(pqtls_store::store::EXPERIMENT_COPY)).unwrap();
    let (got, _) = read_records(tmp.path()).unwrap();
    assert_eq!(got.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), plan);
}
