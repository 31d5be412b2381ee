//! Records marked interrupted in a results store: kept (append-only), not counted as done,
//! measured again by the next run and superseded by its record; readers take the last record
//! of an id, `check` calls such a store incomplete (not unsound). And `merge` of load shards
//! from `--json` files writes the manifest a store needs.

use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::record::{Measured, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_lab::{Measurement, Plan, Progress, RunOptions, RunSummary};
use pqtls_store::{check, merge, read_records, Experiment, Store, StoreOptions};
use pqtls_testkit::synthetic;
use std::cell::RefCell;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

const LOAD: &str = r#"
name = "l"
measurement = "load"
[settings]
duration = "2s"
warmup_time = "0s"
[matrix]
group = ["x25519", "X25519MLKEM768", "MLKEM768"]
chain = "ed25519:ed25519"
"#;

type MeasureFn<'a> = dyn FnMut(&Scenario, &Settings, &AtomicBool) -> Record + 'a;

/// The load measurement's contract without sockets: one whole measurement per scenario (the
/// default session), which returns what it has, marked interrupted, when Ctrl-C came during
/// its duration.
struct WholeLoad<'a, 'f> {
    f: RefCell<&'a mut MeasureFn<'f>>,
}

impl Measurement for WholeLoad<'_, '_> {
    fn kind(&self) -> Kind {
        Kind::Load
    }
    fn stacks(&self) -> Vec<Stack> {
        Stack::ALL.to_vec()
    }
    fn measure(
        &self,
        s: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        _: &mut dyn FnMut(&Progress),
    ) -> pqtls_core::Result<Measured> {
        Ok(Measured { record: (self.f.borrow_mut())(s, settings, interrupt), samples: Vec::new() })
    }
}

/// A synthetic load record of `sc` measured with `settings`: whole, or cut at about half its
/// duration (as `pqtls_net::measure::Load` returns it on Ctrl-C).
fn load_record(sc: &Scenario, settings: &Settings, cut: bool) -> Record {
    let mut r = synthetic::load::load(sc, false);
    r.settings = Some(settings.clone());
    if cut {
        if let pqtls_core::record::Outcome::Load(l) = &mut r.result {
            l.stopped = "interrupted".into();
            l.requests /= 2;
            l.duration_ns = 990_000_000;
        }
    }
    r
}

fn run(e: &Experiment, dir: &Path, interrupt_at: Option<usize>, calls: &mut Vec<String>) -> RunSummary {
    let mut store = Store::open(dir, e, &StoreOptions::default()).unwrap();
    let flag = Arc::new(AtomicBool::new(false));
    let mut f = |s: &Scenario, settings: &Settings, _: &AtomicBool| {
        calls.push(s.id());
        // Ctrl-C during this scenario's duration.
        let cut = Some(calls.len()) == interrupt_at;
        if cut {
            flag.store(true, Ordering::SeqCst);
        }
        load_record(s, settings, cut)
    };
    let m = WholeLoad { f: RefCell::new(&mut f) };
    let scenarios = e.scenarios().to_vec();
    let none = |_: &Scenario| None;
    let plan = Plan { scenarios: (&scenarios).into(), settings: &e.settings, baseline_of: &none, skipped: &[] };
    let opts = RunOptions { interrupt: flag.clone(), keep_going: false };
    pqtls_lab::run_with(&plan, &m, &mut store, &opts, &pqtls_lab::Schedule::Sequential, &mut |_| {}).unwrap()
}

#[test]
fn a_load_scenario_cut_by_ctrl_c_is_kept_marked_and_measured_again_on_resume() {
    let e = Experiment::parse(LOAD, Path::new("l.toml")).unwrap();
    let ids: Vec<String> = e.scenarios().iter().map(|s| s.id()).collect();
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("l");
    let mut calls = Vec::new();
    let first = run(&e, &dir, Some(2), &mut calls);
    assert!(first.interrupted);
    assert_eq!((first.measured, first.kept_interrupted), (1, 1));
    assert_eq!(calls, ids[..2]);

    // Stored, but not done: the reader shows it with a notice, `check` calls the store
    // incomplete (sound), and a store opened on it does not count it.
    let (records, notices) = read_records(&dir).unwrap();
    assert_eq!(records.len(), 2);
    assert!(records[1].is_interrupted() && records[1].load().unwrap().duration_ns == 990_000_000);
    assert!(notices.iter().any(|n| n.contains("incomplete: 1 configuration(s) interrupted") && n.contains(&ids[1])));
    let c = check(&dir).unwrap();
    assert!(c.is_sound() && !c.is_complete(), "{c:?}");
    assert_eq!(c.interrupted, [ids[1].clone()]);
    {
        let store = Store::open(&dir, &e, &StoreOptions::default()).unwrap();
        assert!(store.contains(&ids[0]) && !store.contains(&ids[1]));
        assert_eq!((store.len(), store.interrupted()), (2, 1));
    }

    // Resume: the interrupted one is measured again (with the one never started), nothing else.
    calls.clear();
    let second = run(&e, &dir, None, &mut calls);
    assert_eq!(calls, ids[1..]);
    assert_eq!((second.already_done, second.remeasured_interrupted, second.measured), (1, 1, 2));
    // Append-only: the interrupted line is still in the file, superseded by the new one.
    let text = std::fs::read_to_string(dir.join("records.ndjson")).unwrap();
    assert_eq!(text.lines().count(), 4);
    assert_eq!(text.lines().filter(|l| l.contains(&format!("\"id\":\"{}\"", ids[1]))).count(), 2);
    // The reader sees each id once, complete.
    let (records, notices) = read_records(&dir).unwrap();
    assert!(notices.is_empty(), "{notices:?}");
    assert_eq!(records.iter().map(|r| r.id.clone()).collect::<Vec<_>>(), ids);
    assert!(records.iter().all(|r| !r.is_interrupted() && r.load().unwrap().stopped == "duration"));
    let c = check(&dir).unwrap();
    assert!(c.is_complete(), "{c:?}");
    assert_eq!(c.records, 3);
    assert!(c.notes.iter().any(|n| n.contains("1 interrupted record(s) superseded")), "{:?}", c.notes);
    // A third run finds everything done.
    calls.clear();
    let third = run(&e, &dir, None, &mut calls);
    assert!(calls.is_empty());
    assert_eq!((third.already_done, third.measured), (3, 0));
}

/// The one pattern of an id the reader takes twice: interrupted records, then at most one
/// record of any kind. Anything after a complete record is a second record, refused by line.
#[test]
fn only_interrupted_records_are_superseded() {
    let e = Experiment::parse(LOAD, Path::new("l.toml")).unwrap();
    let sc = e.scenarios()[0].clone();
    let line = |cut: bool| {
        String::from_utf8(pqtls_store::record_line(&load_record(&sc, &e.settings, cut), "l").unwrap()).unwrap() + "\n"
    };
    let tmp = tempfile::tempdir().unwrap();
    let write = |name: &str, lines: &[bool]| {
        let d = tmp.path().join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("records.ndjson"), lines.iter().map(|&c| line(c)).collect::<String>()).unwrap();
        d
    };
    // Interrupted twice, then complete: one complete record.
    let d = write("iic", &[true, true, false]);
    let (rs, _) = read_records(&d).unwrap();
    assert_eq!(rs.len(), 1);
    assert!(!rs[0].is_interrupted());
    // Interrupted twice: the last one, still interrupted.
    let d = write("ii", &[true, true]);
    let (rs, notices) = read_records(&d).unwrap();
    assert!(rs.len() == 1 && rs[0].is_interrupted());
    assert!(notices.iter().any(|n| n.contains("incomplete")), "{notices:?}");
    // Complete, then anything: refused naming line 2.
    for (name, lines) in [("ci", [false, true]), ("cc", [false, false])] {
        let d = write(name, &lines);
        let err = read_records(&d).unwrap_err().to_string();
        assert!(err.contains("records.ndjson:2: a second record for"), "{err}");
        let c = check(&d).unwrap();
        assert!(!c.is_sound());
    }
}

/// `pqtls load --shard K/N --json FILE` on every generator, then `pqtls merge` of the files:
/// the output is a store (manifest included) that `check` calls sound.
#[test]
fn merged_load_shard_files_make_a_sound_store() {
    let e = Experiment::parse(LOAD, Path::new("l.toml")).unwrap();
    let sc = e.scenarios()[0].clone().with([("rate", "600/s")]).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut inputs = Vec::new();
    for mut r in synthetic::load::shards(&sc, 2) {
        r.settings = Some(e.settings.clone());
        let k = r.load().unwrap().shard.unwrap().index;
        let f = tmp.path().join(format!("shard-{k}.json"));
        std::fs::write(&f, serde_json::to_string_pretty(&vec![r]).unwrap()).unwrap();
        inputs.push(f);
    }
    let out = tmp.path().join("all");
    let s = merge(&inputs, &out).unwrap();
    assert_eq!((s.records, s.joined_load_shards.len(), s.no_manifest.clone()), (1, 1, None));
    let m = pqtls_store::read_manifest(&out).unwrap();
    assert_eq!((m.name.as_str(), m.configs, m.shard), ("all", 1, None));
    assert_eq!(m.settings, e.settings);
    assert_eq!(m.merged_from.len(), 2);
    let c = check(&out).unwrap();
    assert!(c.is_complete(), "{c:?}");
    assert_eq!(c.records, 1);

    // Records that carry no settings (or disagree on them) cannot make a manifest: none is
    // written, and the summary says why.
    let bare: Vec<_> = synthetic::load::shards(&sc, 2)
        .into_iter()
        .enumerate()
        .map(|(k, r)| {
            let f = tmp.path().join(format!("bare-{k}.json"));
            std::fs::write(&f, serde_json::to_string(&vec![r]).unwrap()).unwrap();
            f
        })
        .collect();
    let s = merge(&bare, &tmp.path().join("bare")).unwrap();
    assert!(s.no_manifest.as_deref().is_some_and(|w| w.contains("carries no settings")), "{s:?}");

    // An interrupted shard makes the joined record interrupted: the merged set is incomplete.
    let mut parts = synthetic::load::shards(&sc, 2);
    for r in &mut parts {
        r.settings = Some(e.settings.clone());
    }
    if let pqtls_core::record::Outcome::Load(l) = &mut parts[1].result {
        l.stopped = "interrupted".into();
    }
    let files: Vec<_> = parts
        .iter()
        .enumerate()
        .map(|(k, r)| {
            let f = tmp.path().join(format!("cut-{k}.json"));
            std::fs::write(&f, serde_json::to_string(&vec![r]).unwrap()).unwrap();
            f
        })
        .collect();
    let s = merge(&files, &tmp.path().join("cut")).unwrap();
    assert_eq!(s.interrupted, [sc.id()]);
    let c = check(&tmp.path().join("cut")).unwrap();
    assert!(c.is_sound() && !c.is_complete(), "{c:?}");
}
