//! Ctrl-C during an interleaved run on the mock stack: every open scenario's handshakes so
//! far are kept as a record marked interrupted (none for a scenario that measured nothing),
//! and the next run measures those scenarios again, the new records superseding them.

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::sink::{MemorySink, Sink};
use pqtls_core::stats::Quantiles;
use pqtls_lab::{Event, Insitu, Plan, RunOptions, RunSummary, Schedule, WindowStop};
use pqtls_testkit::MockBackend;
use std::sync::atomic::Ordering;

const LOOPS: u64 = 12;
const BLOCK: u64 = 3;

fn scenarios() -> Vec<Scenario> {
    ["x25519", "X25519MLKEM768"]
        .iter()
        .flat_map(|g| ["p256:p256", "mldsa65:mldsa65"].map(|c| Scenario::new([("group", *g), ("chain", c)]).unwrap()))
        .collect()
}

/// Runs `sc` into `sink`; the interrupt flag is raised at the `interrupt_at`-th block event
/// (as Ctrl-C would be: that block then measures nothing, the session polls the flag).
fn run(sc: &[Scenario], sink: &mut MemorySink, stop: WindowStop, interrupt_at: Option<usize>) -> RunSummary {
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(MockBackend::new(Stack::Openssl))];
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let lab = Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, Default::default()),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    let settings = Settings::new(2, LOOPS, None, Quantiles::default()).unwrap();
    let none = |_: &Scenario| None;
    let plan = Plan { scenarios: sc.into(), settings: &settings, baseline_of: &none, skipped: &[] };
    let opts = RunOptions::default();
    let flag = opts.interrupt.clone();
    let schedule = Schedule::Interleaved { block: BLOCK, window: 4, seed: 5, stop };
    let mut blocks = 0;
    pqtls_lab::run_with(&plan, &lab, sink, &opts, &schedule, &mut |e| {
        if let Event::Block { .. } = e {
            blocks += 1;
            if Some(blocks) == interrupt_at {
                flag.store(true, Ordering::SeqCst);
            }
        }
    })
    .unwrap()
}

#[test]
fn an_interrupted_window_keeps_what_each_open_scenario_measured_and_resume_measures_them_again() {
    for stop in [WindowStop::Together, WindowStop::Each] {
        let sc = scenarios();
        let mut sink = MemorySink::default();
        // Blocks 1 and 2 of the first round run; the other two scenarios measured nothing.
        let first = run(&sc, &mut sink, stop, Some(3));
        assert!(first.interrupted);
        assert_eq!((first.measured, first.kept_interrupted), (0, 2), "{stop:?}");
        assert_eq!(sink.measured.len(), 2, "a scenario with nothing measured gives no record");
        for m in &sink.measured {
            let l = &m.record.insitu().unwrap().loops;
            assert!(m.record.is_interrupted());
            assert_eq!((l.stopped.as_str(), l.measured, l.stopped_by.as_str()), ("interrupted", BLOCK, ""));
            assert_eq!(m.samples.len(), 0, "raw samples were not asked for");
            // Not done: the sink does not count it.
            assert!(!sink.contains(&m.record.id));
        }
        assert_eq!(first.remaining(), 4);
        assert!(first.to_string().contains("2 of them kept as far as measured"), "{first}");

        let second = run(&sc, &mut sink, stop, None);
        assert!(!second.interrupted);
        assert_eq!((second.already_done, second.remeasured_interrupted, second.measured), (0, 2, 4));
        // Each id once, complete, measured from the start.
        let mut ids: Vec<&str> = sink.measured.iter().map(|m| m.record.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), 4);
        assert_eq!(sink.measured.len(), 4);
        for m in &sink.measured {
            assert!(!m.record.is_interrupted());
            assert_eq!(m.record.insitu().unwrap().loops.measured, LOOPS);
            assert!(sink.contains(&m.record.id));
        }
    }
}

#[test]
fn a_window_interrupted_after_some_met_their_rule_keeps_them_all_marked_interrupted() {
    // Fixed loops of 12 in blocks of 3: every scenario meets its rule in round 4. Interrupted
    // in round 4 after two blocks: two have met their rule, two have not; with `together` none
    // is complete (their ratios would not cover the same stretch of time).
    let sc = scenarios();
    let mut sink = MemorySink::default();
    let first = run(&sc, &mut sink, WindowStop::Together, Some(15));
    assert_eq!((first.measured, first.kept_interrupted), (0, 4));
    let mut measured: Vec<u64> = sink.measured.iter().map(|m| m.record.insitu().unwrap().loops.measured).collect();
    measured.sort();
    assert_eq!(measured, [9, 9, 12, 12]);
    assert!(sink.measured.iter().all(|m| m.record.is_interrupted()));
    let second = run(&sc, &mut sink, WindowStop::Together, None);
    assert_eq!((second.remeasured_interrupted, second.measured), (4, 4));
    assert!(sink
        .measured
        .iter()
        .all(|m| !m.record.is_interrupted() && m.record.insitu().unwrap().loops.measured == 12));
}
