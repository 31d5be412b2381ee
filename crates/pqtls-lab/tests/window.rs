//! Stopping a window's scenarios together (docs/benchmarks-history.md §5.5), on a scripted
//! measurement whose sessions meet their stopping rule after a set number of blocks and log
//! every call the runner makes: deterministic, no timing involved.

use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::record::Measured;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::sink::MemorySink;
use pqtls_core::Result;
use pqtls_lab::{Event, Measurement, Plan, Progress, RunOptions, RunSummary, Schedule, Session, WindowStop};
use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};

/// Handshakes per block and the cap, in blocks.
const BLOCK: u64 = 10;
const CAP_BLOCKS: u64 = 8;

/// Sessions meet their rule after `rule_at[label]` blocks (never, when above the cap).
struct Scripted {
    rule_at: HashMap<String, u64>,
    /// `start <label>` and `block <label>`, in call order.
    log: RefCell<Vec<String>>,
}

struct ScriptedSession<'s> {
    lab: &'s Scripted,
    scenario: Scenario,
    rule_at: u64,
    blocks: u64,
    met_at: Option<u64>,
}

impl Measurement for Scripted {
    fn kind(&self) -> Kind {
        Kind::Insitu
    }

    fn stacks(&self) -> Vec<Stack> {
        vec![Stack::Openssl]
    }

    fn measure(&self, _: &Scenario, _: &Settings, _: &AtomicBool, _: &mut dyn FnMut(&Progress)) -> Result<Measured> {
        unreachable!("the runner starts sessions")
    }

    fn start<'s>(
        &'s self,
        scenario: &Scenario,
        _: &Settings,
        _: &AtomicBool,
        _: &mut dyn FnMut(&Progress),
    ) -> Result<Box<dyn Session + 's>> {
        let label = scenario.handshake.label();
        self.log.borrow_mut().push(format!("start {label}"));
        Ok(Box::new(ScriptedSession {
            lab: self,
            scenario: scenario.clone(),
            rule_at: self.rule_at[&label],
            blocks: 0,
            met_at: None,
        }))
    }
}

impl Session for ScriptedSession<'_> {
    fn block(&mut self, _n: u64, _: &AtomicBool, _: &mut dyn FnMut(&Progress)) -> Result<()> {
        assert!(!self.exhausted(), "a block past the cap");
        self.lab.log.borrow_mut().push(format!("block {}", self.scenario.handshake.label()));
        self.blocks += 1;
        if self.blocks == self.rule_at {
            self.met_at = Some(self.blocks * BLOCK);
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.met_at.is_some() || self.exhausted()
    }

    fn exhausted(&self) -> bool {
        self.blocks >= CAP_BLOCKS
    }

    fn interleaved(&self) -> bool {
        true
    }

    fn blocks(&self) -> u64 {
        self.blocks
    }

    fn finish(self: Box<Self>, _interrupted: bool) -> Result<Measured> {
        let mut m = pqtls_testkit::synthetic::measure(&self.scenario, (self.blocks * BLOCK) as usize);
        let loops = &mut m.record.insitu_mut().unwrap().loops;
        loops.precision = Some(0.02);
        loops.rule_met_at = self.met_at;
        (loops.stopped, loops.stopped_by) = match self.met_at {
            Some(_) => ("precision reached".into(), "own rule".into()),
            None => ("loop cap reached".into(), "cap".into()),
        };
        Ok(m)
    }
}

fn scenarios() -> Vec<Scenario> {
    ["x25519", "X25519MLKEM768"]
        .iter()
        .flat_map(|g| ["p256:p256", "mldsa65:mldsa65"].map(|c| Scenario::new([("group", *g), ("chain", c)]).unwrap()))
        .collect()
}

fn label(s: &Scenario) -> String {
    s.handshake.label()
}

/// Runs `sc` with rules met after `rule_at` blocks (in plan order); the interrupt is raised
/// at the `interrupt_at`-th block. Returns the summary and the log of calls and stores
/// (`start <label>`, `block <label>`, `stored <label>`), in the order they happened.
fn run(
    sc: &[Scenario],
    rule_at: &[u64],
    sink: &mut MemorySink,
    window: usize,
    stop: WindowStop,
    interrupt_at: Option<usize>,
) -> (RunSummary, Vec<String>) {
    let lab = Scripted {
        rule_at: sc.iter().map(label).zip(rule_at.iter().copied()).collect(),
        log: RefCell::new(Vec::new()),
    };
    let settings = Settings::new(0, BLOCK * CAP_BLOCKS, Some(0.02), Default::default()).unwrap();
    let none = |_: &Scenario| None;
    let plan = Plan { scenarios: sc, settings: &settings, baseline_of: &none, skipped: &[] };
    let opts = RunOptions::default();
    let flag = opts.interrupt.clone();
    let schedule = Schedule::Interleaved { block: BLOCK, window, seed: 3, stop };
    let mut blocks = 0;
    let log = &lab.log;
    let summary = pqtls_lab::run_with(&plan, &lab, sink, &opts, &schedule, &mut |e| match e {
        Event::Block { .. } => {
            blocks += 1;
            if Some(blocks) == interrupt_at {
                flag.store(true, Ordering::SeqCst);
            }
        }
        Event::Stored { record, .. } => log.borrow_mut().push(format!("stored {}", record.label)),
        _ => {}
    })
    .unwrap();
    let log = lab.log.borrow().clone();
    (summary, log)
}

fn blocks_of(log: &[String], l: &str) -> usize {
    log.iter().filter(|x| **x == format!("block {l}")).count()
}

#[test]
fn a_window_stops_together_when_its_last_scenario_meets_its_rule() {
    let sc = scenarios();
    // Rules met after 2, 5, 3 and 4 blocks: the window (all four) closes in round 5.
    let mut sink = MemorySink::default();
    let (summary, log) = run(&sc, &[2, 5, 3, 4], &mut sink, 4, WindowStop::Together, None);
    assert_eq!(summary.measured, 4);
    for s in &sc {
        assert_eq!(blocks_of(&log, &label(s)), 5, "{log:?}");
    }
    // Every round holds one block of each scenario.
    let calls: Vec<&String> = log.iter().filter(|x| x.starts_with("block ")).collect();
    for round in calls.chunks(4) {
        assert_eq!(round.iter().collect::<HashSet<_>>().len(), 4, "{round:?}");
    }
    // Records in plan order; which rule stopped each, and when its own rule was met.
    let got: Vec<(String, u64, String, Option<u64>)> = sink
        .measured
        .iter()
        .map(|m| {
            let l = &m.record.insitu().unwrap().loops;
            (m.record.label.clone(), l.measured, l.stopped_by.clone(), l.rule_met_at)
        })
        .collect();
    let want: Vec<(String, u64, String, Option<u64>)> = sc
        .iter()
        .zip([(2, "window"), (5, "own rule"), (3, "window"), (4, "window")])
        .map(|(s, (at, by))| (label(s), 50, by.to_string(), Some(at * BLOCK)))
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_scenario_that_never_meets_its_rule_holds_the_window_to_the_cap() {
    let sc = scenarios();
    let mut sink = MemorySink::default();
    let (_, log) = run(&sc, &[2, 99, 3, 4], &mut sink, 4, WindowStop::Together, None);
    for s in &sc {
        assert_eq!(blocks_of(&log, &label(s)), CAP_BLOCKS as usize);
    }
    let by: Vec<&str> = sink.measured.iter().map(|m| m.record.insitu().unwrap().loops.stopped_by.as_str()).collect();
    assert_eq!(by, ["window", "cap", "window", "window"]);
    assert!(sink.measured.iter().all(|m| m.record.insitu().unwrap().loops.measured == BLOCK * CAP_BLOCKS));
}

#[test]
fn windows_close_one_after_another_and_store_their_records_when_they_close() {
    let sc = scenarios();
    let mut sink = MemorySink::default();
    let lab_log = {
        let (_, log) = run(&sc, &[2, 5, 3, 1], &mut sink, 2, WindowStop::Together, None);
        log
    };
    // Window 1 (plan's first two) runs 5 rounds, window 2 runs 3; the second window's
    // scenarios are started only after the first window's last block.
    let (a, b, c, d) = (label(&sc[0]), label(&sc[1]), label(&sc[2]), label(&sc[3]));
    assert_eq!([&a, &b, &c, &d].map(|l| blocks_of(&lab_log, l)), [5, 5, 3, 3]);
    let last_of_first = lab_log.iter().rposition(|x| *x == format!("block {a}") || *x == format!("block {b}")).unwrap();
    let start_c = lab_log.iter().position(|x| *x == format!("start {c}")).unwrap();
    assert!(start_c > last_of_first, "{lab_log:?}");
    let stored: Vec<&String> = sink.measured.iter().map(|m| &m.record.label).collect();
    assert_eq!(stored, [&a, &b, &c, &d]);
    // Nothing is stored before its window closes: a's record (rule met in round 2) comes
    // after b's last block (round 5), and both before the second window starts.
    let stored_a = lab_log.iter().position(|x| *x == format!("stored {a}")).unwrap();
    let stored_b = lab_log.iter().position(|x| *x == format!("stored {b}")).unwrap();
    assert!(last_of_first < stored_a && stored_b < start_c, "{lab_log:?}");
}

#[test]
fn each_stops_at_its_own_rule_and_refills_the_window() {
    let sc = scenarios();
    let mut sink = MemorySink::default();
    let (_, log) = run(&sc, &[2, 5, 3, 1], &mut sink, 2, WindowStop::Each, None);
    let l: Vec<String> = sc.iter().map(label).collect();
    assert_eq!(l.iter().map(|x| blocks_of(&log, x)).collect::<Vec<_>>(), [2, 5, 3, 1]);
    // The third scenario opens as soon as the first stops (before the second's last block).
    let start_c = log.iter().position(|x| *x == format!("start {}", l[2])).unwrap();
    let last_b = log.iter().rposition(|x| *x == format!("block {}", l[1])).unwrap();
    assert!(start_c < last_b, "{log:?}");
    assert!(sink.measured.iter().all(|m| m.record.insitu().unwrap().loops.stopped_by == "own rule"));
}

#[test]
fn kill_and_resume_gives_the_same_records_none_measured_twice() {
    let sc = scenarios();
    let rules = [2, 5, 3, 4];
    let mut whole = MemorySink::default();
    run(&sc, &rules, &mut whole, 2, WindowStop::Together, None);
    // Killed in the second window (window 1 = 5 rounds × 2 blocks; block 13 is in window 2).
    let mut sink = MemorySink::default();
    let (first, log1) = run(&sc, &rules, &mut sink, 2, WindowStop::Together, Some(13));
    assert!(first.interrupted);
    assert_eq!(first.measured, 2, "the first window closed and was stored");
    let (second, log2) = run(&sc, &rules, &mut sink, 2, WindowStop::Together, None);
    assert_eq!((second.already_done, second.measured, second.interrupted), (2, 2, false));
    // The first window's scenarios are not measured again; the interrupted window's are,
    // from the start (those that had met their rule included).
    for s in &sc[..2] {
        assert_eq!(blocks_of(&log2, &label(s)), 0, "{} measured twice", label(s));
    }
    for s in &sc[2..] {
        assert!(blocks_of(&log1, &label(s)) > 0);
        assert_eq!(blocks_of(&log2, &label(s)), 4);
    }
    // The same set of records as the uninterrupted run, each once, with the same loops.
    let key = |m: &Measured| {
        let l = &m.record.insitu().unwrap().loops;
        (m.record.id.clone(), l.measured, l.stopped_by.clone(), l.rule_met_at)
    };
    let got: Vec<_> = sink.measured.iter().map(key).collect();
    let want: Vec<_> = whole.measured.iter().map(key).collect();
    assert_eq!(got, want);
}
