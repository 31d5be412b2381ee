//! The runner: measures every scenario of a plan that the sink does not hold yet, through one
//! [`Measurement`], and hands each result to the sink as soon as it is measured. Used by
//! `pqtls insitu` (a memory sink) and `pqtls run` (a results store) alike. It reports what it
//! does as [`Event`]s; drawing them (a progress bar, log lines) is the caller's business.

use crate::measurement::{Measurement, Progress};
use pqtls_core::catalogue::Stack;
use pqtls_core::record::{BaselineDelta, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::sink::Sink;
use pqtls_core::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the runner tells its caller as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// Something the user should read (skipped scenarios, …).
    Notice(String),
    /// Scenario `index` (1-based) of `todo` starts.
    Start { index: usize, todo: usize, scenario: &'a Scenario },
    /// Inside the current scenario.
    Progress(&'a Progress),
    /// The current scenario's record was stored.
    Stored { index: usize, todo: usize, record: &'a Record },
    /// The current scenario failed (with `keep_going`).
    Failed { id: &'a str, error: &'a str },
}

/// The scenarios to measure and how.
pub struct Plan<'a> {
    /// In measurement order (already restricted to a shard, when there is one).
    pub scenarios: &'a [Scenario],
    pub settings: &'a Settings,
    /// The id of a scenario's baseline, if it has one: its record gets per-step deltas
    /// against the baseline's record once that is stored.
    pub baseline_of: &'a dyn Fn(&Scenario) -> Option<String>,
    /// Scenarios left out before the run (e.g. `skip_unsupported`): id and reason.
    pub skipped: &'a [(String, String)],
}

/// Options of one run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Set (e.g. by a Ctrl-C handler) to stop after the configuration being measured; the
    /// closure may watch it too and return early with an error, which is then not reported.
    pub interrupt: Arc<AtomicBool>,
    /// On a measurement error, note it and go on with the next configuration instead of
    /// stopping the run. Failed configurations are not stored and are retried next time.
    pub keep_going: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions { interrupt: Arc::new(AtomicBool::new(false)), keep_going: false }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// Scenarios of the plan.
    pub total: usize,
    /// Already stored before this run (resumed).
    pub already_done: usize,
    /// Measured and stored by this run.
    pub measured: usize,
    /// Left out because this build lacks their stack: (stack, configurations).
    pub skipped_stacks: Vec<(Stack, usize)>,
    /// Left out before the run ([`Plan::skipped`]).
    pub skipped_unsupported: usize,
    /// Configurations whose measurement failed (with `keep_going`): (id, error).
    pub failed: Vec<(String, String)>,
    /// The interrupt flag stopped the run before the end.
    pub interrupted: bool,
    pub elapsed: Duration,
}

impl RunSummary {
    /// Configurations still to measure.
    pub fn remaining(&self) -> usize {
        let skipped: usize = self.skipped_stacks.iter().map(|(_, n)| n).sum();
        self.total.saturating_sub(self.already_done + self.measured + skipped)
    }
}

impl std::fmt::Display for RunSummary {
    /// One line for the end of a run, e.g. `12 configurations: 3 already stored, 9 measured
    /// in 81.2 s`, plus what was skipped, failed or interrupted.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} configurations: {} already stored, {} measured in {:.1} s",
            self.total,
            self.already_done,
            self.measured,
            self.elapsed.as_secs_f64()
        )?;
        let skipped: usize = self.skipped_stacks.iter().map(|(_, n)| n).sum();
        if skipped > 0 {
            write!(f, ", {skipped} skipped (stack not in this build)")?;
        }
        if !self.failed.is_empty() {
            write!(f, ", {} failed (retried on the next run)", self.failed.len())?;
        }
        if self.interrupted {
            write!(f, "; interrupted with {} to go: run the same command again to resume", self.remaining())?;
        }
        Ok(())
    }
}

/// Measures every scenario of `plan` that `sink` does not hold yet, in plan order, handing
/// each record to the sink as soon as it is measured.
///
/// - A record whose id differs from the scenario asked for is an error.
/// - A scenario whose baseline's record is held gets the per-step deltas against it.
/// - When `opts.interrupt` is set the run stops, keeps nothing of the scenario cut short and
///   returns `Ok` with `interrupted = true`; everything stored so far stays.
pub fn run(
    plan: &Plan,
    measurement: &dyn Measurement,
    sink: &mut dyn Sink,
    opts: &RunOptions,
    events: &mut dyn FnMut(Event),
) -> Result<RunSummary> {
    let start = Instant::now();
    let mut summary = RunSummary { skipped_unsupported: plan.skipped.len(), ..RunSummary::default() };
    let stacks = measurement.stacks();
    let mut todo: Vec<&Scenario> = Vec::new();
    for s in plan.scenarios {
        summary.total += 1;
        let stack = s.handshake.stack;
        if sink.contains(&s.id()) {
            summary.already_done += 1;
        } else if !stacks.contains(&stack) {
            match summary.skipped_stacks.iter_mut().find(|(x, _)| *x == stack) {
                Some(e) => e.1 += 1,
                None => summary.skipped_stacks.push((stack, 1)),
            }
        } else {
            todo.push(s);
        }
    }
    for (s, n) in &summary.skipped_stacks {
        events(Event::Notice(format!("skipping {n} scenarios on {s}: this build of pqtls has no {s} backend")));
    }
    if !plan.skipped.is_empty() {
        let mut text = format!("{} unsupported combinations skipped (skip_unsupported = true):", plan.skipped.len());
        for (id, reason) in plan.skipped.iter().take(10) {
            text += &format!("\n  {id}: {reason}");
        }
        if plan.skipped.len() > 10 {
            text += &format!("\n  … and {} more", plan.skipped.len() - 10);
        }
        events(Event::Notice(text));
    }

    // Records a baseline may refer to.
    let mut stored: HashMap<String, Record> = sink.records()?.into_iter().map(|r| (r.id.clone(), r)).collect();
    let n = todo.len();
    for (i, scenario) in todo.into_iter().enumerate() {
        if opts.interrupt.load(Ordering::SeqCst) {
            summary.interrupted = true;
            break;
        }
        let id = scenario.id();
        events(Event::Start { index: i + 1, todo: n, scenario });
        let result = measurement
            .measure(scenario, plan.settings, &opts.interrupt, &mut |p: &Progress| events(Event::Progress(p)));
        let cut_short =
            |m: &pqtls_core::record::Measured| m.record.insitu().is_some_and(|r| r.loops.stopped == "interrupted");
        if opts.interrupt.load(Ordering::SeqCst) && result.as_ref().map_or(true, cut_short) {
            // Cut short: keep nothing of this scenario, measure it again next time.
            summary.interrupted = true;
            break;
        }
        let mut m = match result {
            Ok(m) => m,
            Err(e) if opts.keep_going => {
                let text = e.to_string();
                events(Event::Failed { id: &id, error: &text });
                summary.failed.push((id, text));
                continue;
            }
            Err(e) => return Err(e.context(format!("measuring {id}"))),
        };
        if m.record.id != id {
            return Err(Error::Other(format!(
                "the measurement of {id} returned a record for {}; nothing was stored for it",
                m.record.id
            )));
        }
        if let Some(base) = (plan.baseline_of)(scenario).filter(|b| *b != id).and_then(|b| stored.get(&b)) {
            let delta = BaselineDelta::of_records(&m.record, base);
            if let Some(r) = m.record.insitu_mut() {
                r.baseline = r.baseline.take().or(delta);
            }
        }
        sink.append(&m, plan.settings.raw_samples)?;
        summary.measured += 1;
        events(Event::Stored { index: i + 1, todo: n, record: &m.record });
        stored.insert(id, m.record);
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}
