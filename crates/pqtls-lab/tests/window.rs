//! Stopping a window's scenarios together (docs/benchmarks-history.md §5.5) or keeping the early
//! ones as thin drift references (docs/benchmarks.md §10), on a scripted
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
const CAP_BLOCKS: u64 = 20;

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
        // Where the runner writes how the scenario was scheduled.
        m.record.insitu_mut().unwrap().noise = Some(Default::default());
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
    let plan = Plan { scenarios: sc.into(), settings: &settings, baseline_of: &none, skipped: &[] };
    let opts = RunOptions::default();
    let flag = opts.interrupt.clone();
    let schedule = Schedule::Interleaved { block: BLOCK, window, seed: 3, stop };
    let mut blocks = 0;
    let log = &lab.log;
    let summary = pqtls_lab::run_with(&plan, &lab, sink, &opts, &schedule, &mut |e| match e {
        Event::Block { round, .. } => {
            log.borrow_mut().push(format!("round {round}"));
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
    for stop in [WindowStop::Together, WindowStop::Thin { every: 2 }] {
        kill_and_resume(stop);
    }
}

fn kill_and_resume(stop: WindowStop) {
    let sc = scenarios();
    let rules = [2, 5, 3, 4];
    let mut whole = MemorySink::default();
    let (_, whole_log) = run(&sc, &rules, &mut whole, 2, stop, None);
    // Killed in the second window (window 1: 5 rounds, 10 blocks with together, 8 with thin:2;
    // block 13 is in window 2 either way).
    let mut sink = MemorySink::default();
    let (first, log1) = run(&sc, &rules, &mut sink, 2, stop, Some(13));
    assert!(first.interrupted, "{stop:?}");
    assert_eq!(first.measured, 2, "{stop:?}: the first window closed and was stored");
    let (second, log2) = run(&sc, &rules, &mut sink, 2, stop, None);
    assert_eq!((second.already_done, second.measured, second.interrupted), (2, 2, false), "{stop:?}");
    // The first window's scenarios are not measured again; the interrupted window's are,
    // from the start (those that had met their rule included), as in the uninterrupted run.
    for s in &sc[..2] {
        assert_eq!(blocks_of(&log2, &label(s)), 0, "{stop:?}: {} measured twice", label(s));
    }
    for s in &sc[2..] {
        assert!(blocks_of(&log1, &label(s)) > 0);
        assert_eq!(blocks_of(&log2, &label(s)), blocks_of(&whole_log, &label(s)), "{stop:?}");
    }
    // The same set of records as the uninterrupted run, each once, with the same loops.
    let key = |m: &Measured| {
        let l = &m.record.insitu().unwrap().loops;
        (m.record.id.clone(), l.measured, l.stopped_by.clone(), l.rule_met_at)
    };
    let got: Vec<_> = sink.measured.iter().map(key).collect();
    let want: Vec<_> = whole.measured.iter().map(key).collect();
    assert_eq!(got, want, "{stop:?}");
}

/// The rounds (1-based) in which `l` had a block (the log has `round N` before every block).
fn rounds_of(log: &[String], l: &str) -> Vec<u64> {
    let mut round = 0;
    let mut out = Vec::new();
    for x in log {
        if let Some(n) = x.strip_prefix("round ") {
            round = n.parse().unwrap();
        } else if *x == format!("block {l}") {
            out.push(round);
        }
    }
    out
}

#[test]
fn thin_keeps_an_early_finisher_at_one_block_every_k_rounds_while_the_slow_one_runs_to_the_cap() {
    let sc = scenarios();
    // Rules met after 2, never, 3 and 4 blocks; one block every 4 rounds past the rule.
    let mut sink = MemorySink::default();
    let stop = WindowStop::Thin { every: 4 };
    let (summary, log) = run(&sc, &[2, 99, 3, 4], &mut sink, 4, stop, None);
    assert_eq!(summary.measured, 4);
    let l: Vec<String> = sc.iter().map(label).collect();
    // The slow one has a block in each of the 20 rounds to the cap; the others every round
    // until their rule, then in rounds met + 4, met + 8, … to the window's end.
    assert_eq!(rounds_of(&log, &l[1]), (1..=20).collect::<Vec<_>>());
    assert_eq!(rounds_of(&log, &l[0]), [1, 2, 6, 10, 14, 18]);
    assert_eq!(rounds_of(&log, &l[2]), [1, 2, 3, 7, 11, 15, 19]);
    assert_eq!(rounds_of(&log, &l[3]), [1, 2, 3, 4, 8, 12, 16, 20]);
    // 41 blocks instead of 80 (all four to the cap, `together`); nothing stored before the
    // window closed (after the slow one's last block).
    assert_eq!(log.iter().filter(|x| x.starts_with("block ")).count(), 6 + 20 + 7 + 8);
    let last_block = log.iter().rposition(|x| x.starts_with("block ")).unwrap();
    let first_stored = log.iter().position(|x| x.starts_with("stored ")).unwrap();
    assert!(last_block < first_stored, "{log:?}");
    // Each record says how it stopped and how it was measured on.
    let got: Vec<(String, u64, String, Option<u64>, String, u64)> = sink
        .measured
        .iter()
        .map(|m| {
            let r = m.record.insitu().unwrap();
            let s = r.noise.as_ref().unwrap().schedule.as_ref().unwrap();
            (
                m.record.label.clone(),
                r.loops.measured,
                r.loops.stopped_by.clone(),
                r.loops.rule_met_at,
                s.stop.clone(),
                s.thin_every,
            )
        })
        .collect();
    let want: Vec<(String, u64, String, Option<u64>, String, u64)> = [
        (&l[0], 6, "window", Some(2)),
        (&l[1], 20, "cap", None),
        (&l[2], 7, "window", Some(3)),
        (&l[3], 8, "window", Some(4)),
    ]
    .into_iter()
    .map(|(l, blocks, by, met)| {
        (l.clone(), blocks * BLOCK, by.to_string(), met.map(|m| m * BLOCK), "thin".to_string(), 4)
    })
    .collect();
    assert_eq!(got, want);
    // The early finisher measured far fewer handshakes than the cap its partner ran to.
    assert!(got[0].1 * 3 < got[1].1);
}

#[test]
fn thin_every_round_is_together() {
    let sc = scenarios();
    let (mut a, mut b) = (MemorySink::default(), MemorySink::default());
    let (_, thin) = run(&sc, &[2, 5, 3, 4], &mut a, 4, WindowStop::Thin { every: 1 }, None);
    let (_, together) = run(&sc, &[2, 5, 3, 4], &mut b, 4, WindowStop::Together, None);
    assert_eq!(thin, together);
    let loops = |s: &MemorySink| -> Vec<(u64, String)> {
        s.measured
            .iter()
            .map(|m| m.record.insitu().unwrap().loops.clone())
            .map(|l| (l.measured, l.stopped_by))
            .collect()
    };
    assert_eq!(loops(&a), loops(&b));
}

#[test]
fn window_stops_parse_and_bad_ones_name_what_works() {
    assert_eq!(WindowStop::parse("thin").unwrap(), WindowStop::Thin { every: pqtls_lab::run::DEFAULT_THIN_EVERY });
    assert_eq!(WindowStop::default(), WindowStop::Together);
    assert_eq!(WindowStop::parse("THIN:3").unwrap(), WindowStop::Thin { every: 3 });
    assert_eq!(WindowStop::parse("together").unwrap(), WindowStop::Together);
    assert_eq!(WindowStop::parse("each").unwrap(), WindowStop::Each);
    for bad in ["thin:0", "thin:x", "thin:", "sometimes"] {
        let e = WindowStop::parse(bad).unwrap_err().to_string();
        assert!(e.contains("thin:K") && e.contains("together") && e.contains("each"), "{bad}: {e}");
    }
    let e = Schedule::Interleaved { block: 5, window: 4, seed: 1, stop: WindowStop::Thin { every: 0 } }
        .validate()
        .unwrap_err()
        .to_string();
    assert!(e.contains("thin:8"), "{e}");
}
