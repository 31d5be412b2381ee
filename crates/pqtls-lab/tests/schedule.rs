//! The runner's schedule on the mock stack: interleaved blocks of every open scenario, a
//! bounded window, resumable after an interrupt without measuring anything twice, and the
//! noise each record carries.

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::sink::MemorySink;
use pqtls_core::stats::Quantiles;
use pqtls_lab::{Event, Insitu, Plan, RunOptions, Schedule, WindowStop};
use pqtls_testkit::MockBackend;
use std::collections::HashSet;
use std::sync::atomic::Ordering;

fn scenarios() -> Vec<Scenario> {
    ["x25519", "X25519MLKEM768"]
        .iter()
        .flat_map(|g| ["p256:p256", "mldsa65:mldsa65"].map(|c| Scenario::new([("group", *g), ("chain", c)]).unwrap()))
        .collect()
}

/// Runs `scenarios` into `sink` with `schedule`; `stop_after` stored records, the interrupt
/// flag is raised (as Ctrl-C would). Returns the summary and the mock's log (one entry per
/// client endpoint, warm-up included).
fn run(
    scenarios: &[Scenario],
    sink: &mut MemorySink,
    schedule: Schedule,
    stop_after: Option<usize>,
) -> (pqtls_lab::RunSummary, Vec<String>, Vec<String>) {
    let mock = MockBackend::new(Stack::Openssl);
    let log = mock.log.clone();
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(mock)];
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let lab = Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, Default::default()),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    let mut settings = Settings::new(2, 12, None, Quantiles::default()).unwrap();
    // The sink keeps the per-handshake samples (to check the noise against them).
    settings.raw_samples = true;
    let none = |_: &Scenario| None;
    let plan = Plan { scenarios: scenarios.into(), settings: &settings, baseline_of: &none, skipped: &[] };
    let opts = RunOptions::default();
    let flag = opts.interrupt.clone();
    let mut stored = 0;
    let mut blocks = Vec::new();
    let summary = pqtls_lab::run_with(&plan, &lab, sink, &opts, &schedule, &mut |e| {
        if let Event::Block { scenario, .. } = e {
            blocks.push(scenario.handshake.label());
        }
        if matches!(e, Event::Stored { .. }) {
            stored += 1;
            if Some(stored) == stop_after {
                flag.store(true, Ordering::SeqCst);
            }
        }
    })
    .unwrap();
    let log = log.lock().unwrap().clone();
    (summary, log, blocks)
}

/// The log as runs of the same label: (label, handshakes in a row).
fn runs(log: &[String]) -> Vec<(String, usize)> {
    let mut out: Vec<(String, usize)> = Vec::new();
    for l in log {
        match out.last_mut() {
            Some((x, n)) if x == l => *n += 1,
            _ => out.push((l.clone(), 1)),
        }
    }
    out
}

#[test]
fn blocks_of_every_scenario_alternate_in_a_seeded_order() {
    let sc = scenarios();
    let schedule = Schedule::Interleaved { block: 3, window: 8, seed: 7, stop: WindowStop::Together };
    let mut sink = MemorySink::default();
    let (summary, log, blocks) = run(&sc, &mut sink, schedule, None);
    assert_eq!(summary.measured, 4);
    assert_eq!(blocks.len(), 16, "{blocks:?}");
    // Warm-up (2 per scenario, when opened, in plan order) then 12 measured handshakes each in
    // blocks of 3, each block that follows another scenario's handshakes starting with one
    // unmeasured handshake (re-warm); a block that follows its own scenario's does not.
    let mut last = sc[3].handshake.label();
    let mut rewarms: std::collections::HashMap<String, u64> = Default::default();
    let mut expected = Vec::new();
    for l in &blocks {
        let rewarm = *l != last;
        *rewarms.entry(l.clone()).or_default() += rewarm as u64;
        expected.extend(std::iter::repeat_n(l.clone(), rewarm as usize + 3));
        last = l.clone();
    }
    let rewarm_total: u64 = rewarms.values().sum();
    assert!((12..=16).contains(&rewarm_total), "{rewarms:?}");
    assert_eq!(log.len() as u64, 4 * (2 + 12) + rewarm_total);
    // The mock's log is the blocks' handshakes, in the order the runner announced them.
    assert_eq!(&log[4 * 2..], &expected[..]);
    // Every round holds one block of every scenario: 4 rounds of 4 different labels.
    for round in blocks.chunks(4) {
        let labels: HashSet<&String> = round.iter().collect();
        assert_eq!(labels.len(), 4, "{round:?}");
    }
    // Shuffled: not every round in the same order (seed 7).
    let orders: HashSet<&[String]> = blocks.chunks(4).collect();
    assert!(orders.len() > 1, "{blocks:?}");
    // The same seed gives the same schedule; the record says how it was scheduled.
    let (_, again, _) = run(&sc, &mut MemorySink::default(), schedule, None);
    assert_eq!(again, log);
    for m in &sink.measured {
        let s = m.record.insitu().unwrap().noise.as_ref().unwrap().schedule.clone().unwrap();
        let l = sc.iter().find(|s| s.id() == m.record.id).unwrap().handshake.label();
        assert_eq!(
            (s.mode.as_str(), s.block, s.window, s.seed, s.blocks, s.rewarm_handshakes, s.stop.as_str(), s.thin_every),
            ("interleaved", 3, 8, 7, 4, rewarms[&l], "together", 0)
        );
        // The re-warm handshakes are not measured.
        assert_eq!(m.record.insitu().unwrap().loops.measured, 12);
    }
}

#[test]
fn the_window_bounds_how_many_scenarios_are_open_at_once() {
    let sc = scenarios();
    let mut sink = MemorySink::default();
    let (summary, log, _) =
        run(&sc, &mut sink, Schedule::Interleaved { block: 4, window: 2, seed: 1, stop: WindowStop::Each }, None);
    assert_eq!(summary.measured, 4);
    // Each label's handshakes (warm-up and measured) lie within a span where at most two
    // labels were ever active.
    let first = |l: &String| log.iter().position(|x| x == l).unwrap();
    let last = |l: &String| log.iter().rposition(|x| x == l).unwrap();
    for i in 0..log.len() {
        let active = sc.iter().map(|s| s.handshake.label()).filter(|l| first(l) <= i && i <= last(l)).count();
        assert!(active <= 2, "{active} open at handshake {i}");
    }
}

#[test]
fn sequential_measures_one_scenario_after_another() {
    let sc = scenarios();
    let (_, log, _) = run(&sc, &mut MemorySink::default(), Schedule::Sequential, None);
    let blocks = runs(&log);
    assert_eq!(blocks.len(), 4, "{blocks:?}");
    // Warm-up and measured handshakes; no re-warm: nothing ran in between.
    assert!(blocks.iter().all(|(_, n)| *n == 14));
}

#[test]
fn an_interrupted_run_resumes_without_measuring_anything_twice() {
    // Each: the run stops after the record that raised the interrupt; together: after the
    // rest of that record's window (3), which closed with it.
    for (stop, kept_first) in [(WindowStop::Each, 1), (WindowStop::Together, 3)] {
        resumes_without_measuring_anything_twice(stop, kept_first);
    }
}

fn resumes_without_measuring_anything_twice(stop: WindowStop, kept_first: usize) {
    let sc = scenarios();
    let schedule = Schedule::Interleaved { block: 5, window: 3, seed: 11, stop };
    let mut sink = MemorySink::default();
    let (first, _, _) = run(&sc, &mut sink, schedule, Some(1));
    assert!(first.interrupted);
    assert_eq!(first.measured, kept_first);
    // Complete records; the scenarios still open are kept as far as measured, marked
    // interrupted (measured again below).
    let kept: Vec<String> =
        sink.measured.iter().filter(|m| !m.record.is_interrupted()).map(|m| m.record.id.clone()).collect();
    assert_eq!(kept.len(), kept_first);
    assert_eq!(sink.measured.len() - kept_first, first.kept_interrupted);
    let (second, log, _) = run(&sc, &mut sink, schedule, None);
    assert_eq!((second.already_done, second.measured, second.interrupted), (kept_first, 4 - kept_first, false));
    // The finished scenarios were not measured again.
    for id in &kept {
        let done_label = sc.iter().find(|s| s.id() == *id).unwrap().handshake.label();
        assert!(log.iter().all(|l| *l != done_label), "{done_label} measured twice");
    }
    // Same set of records as one uninterrupted run, each once.
    let ids: Vec<String> = sink.measured.iter().map(|m| m.record.id.clone()).collect();
    let set: HashSet<&String> = ids.iter().collect();
    assert_eq!(set.len(), ids.len());
    let want: HashSet<String> = sc.iter().map(|s| s.id()).collect();
    assert_eq!(set.into_iter().cloned().collect::<HashSet<_>>(), want);
    for m in &sink.measured {
        assert_eq!(m.record.insitu().unwrap().loops.measured, 12);
    }
}

#[test]
fn every_record_carries_its_noise() {
    let sc = scenarios();
    let mut sink = MemorySink::default();
    run(&sc[..1], &mut sink, Schedule::default(), None);
    let r = sink.measured[0].record.insitu().unwrap();
    let n = r.noise.as_ref().unwrap();
    assert!(n.cpu_ns > 0);
    assert!(n.disturbed_client <= 12 && n.disturbed_server <= 12);
    let unscheduled: u64 = sink.measured[0].samples.iter().map(|(c, s)| c.unscheduled_ns + s.unscheduled_ns).sum();
    assert_eq!(n.unscheduled_ns, unscheduled);
}

#[test]
fn a_baseline_listed_last_is_measured_first_and_every_other_record_gets_its_deltas() {
    // The baseline last in the plan, windows of one: without the runner putting baselines
    // first, the records before it would be stored before their baseline, without deltas.
    let mut sc = scenarios();
    sc.reverse();
    let base = sc.last().unwrap().id();
    let mock = MockBackend::new(Stack::Openssl);
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(mock)];
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let lab = Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, Default::default()),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    let settings = Settings::new(2, 12, None, Quantiles::default()).unwrap();
    let baseline_of = |_: &Scenario| Some(base.clone());
    let held = Plan { scenarios: (&sc).into(), settings: &settings, baseline_of: &baseline_of, skipped: &[] };
    // The same scenarios made afresh on each walk (as `pqtls run` walks an experiment's matrix).
    let walk = || -> Box<dyn Iterator<Item = Scenario>> { Box::new(sc.clone().into_iter()) };
    let made = Plan {
        scenarios: pqtls_lab::Scenarios::Made { count: sc.len(), walk: &walk },
        settings: &settings,
        baseline_of: &baseline_of,
        skipped: &[],
    };
    for (plan, schedule) in [
        (&held, Schedule::Sequential),
        (&held, Schedule::Interleaved { block: 3, window: 1, seed: 7, stop: WindowStop::Each }),
        (&made, Schedule::Sequential),
        (&made, Schedule::Interleaved { block: 3, window: 2, seed: 7, stop: WindowStop::Together }),
    ] {
        let mut sink = MemorySink::default();
        let summary =
            pqtls_lab::run_with(plan, &lab, &mut sink, &RunOptions::default(), &schedule, &mut |_| {}).unwrap();
        assert_eq!(summary.measured, 4, "{schedule:?}");
        assert_eq!(sink.measured[0].record.id, base, "{schedule:?}: the baseline is stored first");
        for m in &sink.measured[1..] {
            let delta = &m.record.insitu().unwrap().baseline;
            assert!(delta.is_some(), "{schedule:?}: {} has no deltas against its baseline", m.record.id);
        }
        assert!(sink.measured[0].record.insitu().unwrap().baseline.is_none(), "the baseline has no deltas to itself");
    }
}
