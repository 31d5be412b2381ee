//! The runner: measures every scenario of a plan that the sink does not hold yet, through one
//! [`Measurement`], interleaved ([`Schedule`]), and hands each result to the sink as soon as
//! its scenario is complete. Used by
//! `pqtls insitu` (a memory sink) and `pqtls run` (a results store) alike. It reports what it
//! does as [`Event`]s; drawing them (a progress bar, log lines) is the caller's business.

use crate::measurement::{Measurement, Progress, Session};
use pqtls_core::catalogue::Stack;
use pqtls_core::record::{BaselineDelta, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::sink::Sink;
use pqtls_core::{Error, Result};
use std::borrow::Cow;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What the runner tells its caller as it goes.
#[derive(Debug)]
pub enum Event<'a> {
    /// Something the user should read (skipped scenarios, …).
    Notice(String),
    /// Scenario `index` (1-based, in plan order) of `todo` is opened: its contexts are
    /// prepared and warmed up.
    Start { index: usize, todo: usize, scenario: &'a Scenario },
    /// A block of scenario `index` is about to be measured in `round` (1-based, counted over
    /// the run; with an interleaved schedule, blocks of the open scenarios alternate, one of
    /// each per round at most).
    Block { index: usize, todo: usize, scenario: &'a Scenario, round: u64 },
    /// Inside the scenario of the last `Start` or `Block`.
    Progress(&'a Progress),
    /// A scenario's record was stored; `index` counts the records stored by this run.
    Stored { index: usize, todo: usize, record: &'a Record },
    /// The current scenario failed (with `keep_going`).
    Failed { id: &'a str, error: &'a str },
}

/// The scenarios of a plan, walked once per pass: held (a command's few), or made afresh on
/// each walk (an experiment file's matrix, which is never held: a matrix of 100,000 load
/// configurations held 652 MB expanded).
#[derive(Clone, Copy)]
pub enum Scenarios<'a> {
    Held(&'a [Scenario]),
    Made {
        /// How many a walk gives.
        count: usize,
        /// One walk, in measurement order.
        walk: &'a dyn Fn() -> Box<dyn Iterator<Item = Scenario> + 'a>,
    },
}

impl<'a> Scenarios<'a> {
    /// How many a walk gives.
    pub fn count(&self) -> usize {
        match self {
            Scenarios::Held(s) => s.len(),
            Scenarios::Made { count, .. } => *count,
        }
    }

    /// The scenarios in measurement order, borrowed when held, made when not.
    pub fn walk(&self) -> Box<dyn Iterator<Item = Cow<'a, Scenario>> + 'a> {
        match *self {
            Scenarios::Held(s) => Box::new(s.iter().map(Cow::Borrowed)),
            Scenarios::Made { walk, .. } => Box::new(walk().map(Cow::Owned)),
        }
    }
}

impl<'a> From<&'a [Scenario]> for Scenarios<'a> {
    fn from(s: &'a [Scenario]) -> Self {
        Scenarios::Held(s)
    }
}

impl<'a> From<&'a Vec<Scenario>> for Scenarios<'a> {
    fn from(s: &'a Vec<Scenario>) -> Self {
        Scenarios::Held(s)
    }
}

impl<'a, const N: usize> From<&'a [Scenario; N]> for Scenarios<'a> {
    fn from(s: &'a [Scenario; N]) -> Self {
        Scenarios::Held(s)
    }
}

/// The scenarios to measure and how.
pub struct Plan<'a> {
    /// In measurement order (already restricted to a shard, when there is one).
    pub scenarios: Scenarios<'a>,
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
    /// Kept by this run as records marked interrupted (what was measured of the scenarios
    /// still open when the run was interrupted): still to go, measured again on resume.
    pub kept_interrupted: usize,
    /// Held before this run as interrupted records only: measured again by this run.
    pub remeasured_interrupted: usize,
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
            write!(f, "; interrupted with {} to go", self.remaining())?;
            if self.kept_interrupted > 0 {
                write!(
                    f,
                    " ({} of them kept as far as measured, marked `stopped: interrupted`)",
                    self.kept_interrupted
                )?;
            }
            write!(f, ": run the same command again to resume")?;
        }
        Ok(())
    }
}

/// How the runner orders the measurement of a plan's scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Schedule {
    /// One scenario after another, each measured to its end (the order of before issue 12;
    /// kept for comparisons).
    Sequential,
    /// Up to `window` scenarios are open at once (contexts prepared, warmed up); they are
    /// measured in rounds, `block` handshakes each per round, in an order shuffled every
    /// round (from `seed`), until each meets its stopping rule. Drift and neighbours hit all
    /// open scenarios alike, so the ratios between them stay true. `stop` says when the
    /// window's scenarios stop, and how one that met its rule is measured on ([`WindowStop`]).
    Interleaved { block: u64, window: usize, seed: u64, stop: WindowStop },
}

/// When the scenarios of an interleaved window stop (docs/benchmarks-history.md §5.5, §5.6,
/// docs/benchmarks.md §10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WindowStop {
    /// A scenario that met its rule stays open as a **thin drift reference** — one
    /// block every `every` rounds — while others of its window still run; the window closes
    /// (its records are stored, the next `window` scenarios opened) when its last scenario
    /// meets its rule or reaches the cap. Every scenario of a window is sampled over the whole
    /// stretch of machine time its window ran, at `1/every` of the cost of [`WindowStop::Together`]
    /// past its rule; its samples from before its rule weigh more than those after (what that
    /// leaves in a ratio: docs/experiments.md "When a window's scenarios stop"). An interrupted
    /// window is measured again from the start. Applies to sessions measured in blocks
    /// ([`Session::interleaved`]); a whole measurement is stored as soon as it is done.
    Thin { every: u64 },
    /// The default (thin's ratios held less well run after run: docs/benchmarks.md §10.5):
    /// all together, densely: a scenario that met its rule is measured on in every round (up
    /// to the cap) while others of its window still run, so every ratio within a window covers
    /// the same stretch of machine time with the same weight; the cost: every scenario of the
    /// window measures as many handshakes as its slowest one. Otherwise as `Thin`.
    Together,
    /// Each at its own rule: stored at once, its place refilled by the next scenario (the
    /// schedule of before; an early finisher is measured over a shorter, earlier stretch than
    /// its partners, so drift between the stretches lands in their ratios).
    Each,
}

/// Rounds between the blocks of a scenario past its rule with `--stop thin` (docs/benchmarks.md
/// §10: its cost measured, the bias it leaves in a ratio bounded; §10.5: its ratios run after
/// run).
pub const DEFAULT_THIN_EVERY: u64 = 8;

impl Default for WindowStop {
    fn default() -> Self {
        WindowStop::Together
    }
}

impl WindowStop {
    pub fn name(&self) -> &'static str {
        match self {
            WindowStop::Thin { .. } => "thin",
            WindowStop::Together => "together",
            WindowStop::Each => "each",
        }
    }

    /// `thin` (one block every 8 rounds past the rule), `thin:K` (every K rounds, K ≥ 1),
    /// `together` or `each`; an error naming them.
    pub fn parse(s: &str) -> Result<WindowStop> {
        let s = s.to_ascii_lowercase();
        let usage = "use together (default), thin (one block every 8 rounds once a configuration met its rule), \
                     thin:K (every K rounds) or each";
        match s.split_once(':') {
            Some(("thin", k)) => match k.parse::<u64>() {
                Ok(every) if every >= 1 => Ok(WindowStop::Thin { every }),
                _ => Err(Error::Invalid(format!(
                    "window stop '{s}': K in thin:K must be a whole number of rounds ≥ 1, e.g. thin:8; {usage}"
                ))),
            },
            _ => match s.as_str() {
                "thin" => Ok(WindowStop::Thin { every: DEFAULT_THIN_EVERY }),
                "together" => Ok(WindowStop::Together),
                "each" => Ok(WindowStop::Each),
                other => Err(Error::Invalid(format!("unknown window stop '{other}': {usage}"))),
            },
        }
    }

    /// Rounds between the blocks of a scenario that met its rule while its window still runs:
    /// `None` when it leaves the window at once (`each`).
    fn every(&self) -> Option<u64> {
        match *self {
            WindowStop::Thin { every } => Some(every),
            WindowStop::Together => Some(1),
            WindowStop::Each => None,
        }
    }
}

/// Handshakes per block of the interleaved schedule unless asked otherwise: small enough that
/// the machine's bursts of other work (tens of ms here) fall on every configuration of a round
/// alike — ratios of the default experiment held within ±2 % in 90 % of run pairs with blocks
/// of 5, 57 % with blocks of 20 (docs/benchmarks.md §8, docs/benchmarks-history.md §5.8).
pub const DEFAULT_BLOCK: u64 = 5;

impl Default for Schedule {
    fn default() -> Self {
        Schedule::Interleaved { block: DEFAULT_BLOCK, window: 16, seed: 0x5eed_0f12, stop: WindowStop::default() }
    }
}

impl Schedule {
    pub fn name(&self) -> &'static str {
        match self {
            Schedule::Sequential => "sequential",
            Schedule::Interleaved { .. } => "interleaved",
        }
    }

    /// Checks the parameters (a clear error for a zero block or window).
    pub fn validate(&self) -> Result<()> {
        match *self {
            Schedule::Interleaved { block: 0, .. } => Err(Error::Invalid(format!(
                "an interleaved schedule needs blocks of at least 1 handshake, e.g. {DEFAULT_BLOCK} (the default)"
            ))),
            Schedule::Interleaved { window: 0, .. } => Err(Error::Invalid(
                "an interleaved schedule needs a window of at least 1 open scenario, e.g. 16".into(),
            )),
            Schedule::Interleaved { stop: WindowStop::Thin { every: 0 }, .. } => Err(Error::Invalid(
                "a thin window stop needs a block every K ≥ 1 rounds, e.g. thin:8 (the default)".into(),
            )),
            _ => Ok(()),
        }
    }

    fn record(&self, blocks: u64, rewarm_handshakes: u64) -> pqtls_core::record::Schedule {
        match *self {
            Schedule::Sequential => pqtls_core::record::Schedule {
                mode: self.name().into(),
                block: 0,
                window: 1,
                seed: 0,
                blocks,
                rewarm_handshakes,
                stop: String::new(),
                thin_every: 0,
            },
            Schedule::Interleaved { block, window, seed, stop } => pqtls_core::record::Schedule {
                mode: self.name().into(),
                block,
                window,
                seed,
                blocks,
                rewarm_handshakes,
                stop: stop.name().into(),
                thin_every: match stop {
                    WindowStop::Thin { every } => every,
                    _ => 0,
                },
            },
        }
    }
}

/// splitmix64: a small, well-known generator for the per-round shuffles (the order only has
/// to be unpredictable to the machine's other work, and reproducible from the seed).
struct Shuffler(u64);

impl Shuffler {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    fn shuffle<T>(&mut self, v: &mut [T]) {
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
    }
}

/// [`run_with`] with the default (interleaved) [`Schedule`].
pub fn run(
    plan: &Plan,
    measurement: &dyn Measurement,
    sink: &mut dyn Sink,
    opts: &RunOptions,
    events: &mut dyn FnMut(Event),
) -> Result<RunSummary> {
    run_with(plan, measurement, sink, opts, &Schedule::default(), events)
}

/// An open scenario: its place in the plan, its session and the round in which it met its
/// stopping rule.
struct Open<'p, 's> {
    index: usize,
    scenario: Cow<'p, Scenario>,
    session: Box<dyn Session + 's>,
    met_round: Option<u64>,
}

/// Measures every scenario of `plan` that `sink` does not hold yet, following `schedule`,
/// handing each record to the sink as soon as it is complete: its scenario's (with
/// [`WindowStop::Each`] and the sequential schedule), its window's (with
/// [`WindowStop::Thin`] and [`WindowStop::Together`], the default).
///
/// - A record whose id differs from the scenario asked for is an error.
/// - A scenario whose baseline's record is held gets the per-step deltas against it: the
///   baselines are measured (and stored) before the scenarios that refer to them.
/// - Each record says which rule stopped it (`loops.stopped_by`: own rule, window, cap; with
///   `window`, its own rule was met at `loops.rule_met_at` handshakes and its record's
///   `noise.schedule` says how it was measured on: `stop` = `thin` with `thin_every` rounds
///   between its blocks, or `together`, every round).
/// - A block that follows another scenario's handshakes begins with a re-warm
///   ([`Session::rewarm`]); one that follows the same scenario's does not.
/// - When `opts.interrupt` is set the run stops: each scenario still open is finished with
///   what it measured so far and handed to the sink as a record marked interrupted
///   ([`Record::mark_interrupted`]; with `Thin` and `Together` those of the open window that had
///   met their rule too: their partners had not); a scenario with nothing measured gives no record. It
///   returns `Ok` with `interrupted = true`; everything stored so far stays. The sink does not
///   count an interrupted record as done ([`Sink::contains`]): the next run measures its
///   scenario again from the start, and the new record supersedes it.
pub fn run_with(
    plan: &Plan,
    measurement: &dyn Measurement,
    sink: &mut dyn Sink,
    opts: &RunOptions,
    schedule: &Schedule,
    events: &mut dyn FnMut(Event),
) -> Result<RunSummary> {
    schedule.validate()?;
    let start = Instant::now();
    let mut summary = RunSummary { skipped_unsupported: plan.skipped.len(), ..RunSummary::default() };
    // Records held (complete or interrupted), the last of each id.
    let held = sink.records()?;
    let triaged = triage(plan, measurement, sink, &held, &mut summary);
    announce(plan, &summary, events);
    // `hold`: rounds between the blocks of a scenario that met its rule while its window runs
    // on (`None`: it is stored at once and its place refilled).
    let (block, window, seed, hold) = match *schedule {
        Schedule::Sequential => (u64::MAX, 1, 0, None),
        Schedule::Interleaved { block, window, seed, stop } => (block, window, seed, stop.every()),
    };
    // Windows are held until their last scenario meets its rule (thin, together).
    let together = hold.is_some();
    let mut run = Runner {
        plan,
        opts,
        schedule,
        sink,
        // The complete records a scenario still to measure takes as its baseline (only those:
        // a long run does not hold every record it stored).
        stored: held
            .into_iter()
            .filter(|r| !r.is_interrupted() && triaged.bases.contains(&r.id))
            .map(|r| (r.id.clone(), r))
            .collect(),
        bases: &triaged.bases,
        todo: triaged.count,
        summary,
        last_block: None,
    };
    let mut rng = Shuffler(seed);
    let mut next = triaged.walk(plan).enumerate();
    let mut open: Vec<Open> = Vec::new();
    let mut round = 0u64;
    loop {
        // Fill the window: as places free up (each), or once the last window closed.
        if (!together || open.is_empty()) && !run.fill(measurement, &mut next, &mut open, window, events)? {
            break;
        }
        if open.is_empty() {
            break;
        }
        // One round: a block of each open scenario (that can still measure), in a fresh order.
        round += 1;
        rng.shuffle(&mut open);
        if !run.round(&mut open, round, block, hold, events)? {
            break;
        }
        if together && open.iter().all(|o| o.session.done() || o.session.exhausted()) {
            // The window closes (complete even if the interrupt came during its last round):
            // its records, in plan order, baselines of the window first (so that their
            // partners get their deltas).
            by_baselines_first(run.bases, &mut open);
            for o in open.drain(..) {
                run.store(o, round, false, events)?;
            }
        }
    }
    if run.summary.interrupted {
        // What the open scenarios measured is kept, marked interrupted.
        by_baselines_first(run.bases, &mut open);
        for o in open.drain(..) {
            run.store(o, round, true, events)?;
        }
    }
    run.summary.elapsed = start.elapsed();
    Ok(run.summary)
}

/// Which of a plan's scenarios this run measures, found by one walk of the plan.
struct Triaged {
    /// Per scenario of the plan (in its order): measured by this run.
    todo: Vec<bool>,
    /// How many are.
    count: usize,
    /// The ids of the baselines of those measured (other than themselves).
    bases: HashSet<String>,
}

impl Triaged {
    /// The scenarios to measure, in order, made again by walking the plan: those that are
    /// another's baseline first (each group in plan order), so that a baseline's record is
    /// stored before those that refer to it and each gets its deltas — whatever the window or
    /// schedule.
    fn walk<'w, 'p: 'w>(&'w self, plan: &'w Plan<'p>) -> impl Iterator<Item = Cow<'p, Scenario>> + 'w {
        let pass = move |bases_pass: bool| {
            plan.scenarios
                .walk()
                .enumerate()
                // (No id is made when the run has no baselines.)
                .filter(move |(i, s)| {
                    self.todo[*i] && (!self.bases.is_empty() && self.bases.contains(&s.id())) == bases_pass
                })
                .map(|(_, s)| s)
        };
        // A second walk only when some are baselines.
        let bases: Box<dyn Iterator<Item = Cow<'p, Scenario>> + 'w> =
            if self.bases.is_empty() { Box::new(std::iter::empty()) } else { Box::new(pass(true)) };
        bases.chain(pass(false))
    }
}

/// Finds the plan's scenarios to measure; counts the others in `summary` (held complete, on a
/// stack this build lacks) and those measured again after an interruption.
fn triage(
    plan: &Plan,
    measurement: &dyn Measurement,
    sink: &dyn Sink,
    held: &[Record],
    summary: &mut RunSummary,
) -> Triaged {
    let stacks = measurement.stacks();
    let held: HashSet<&str> = held.iter().map(|r| r.id.as_str()).collect();
    let mut out = Triaged { todo: Vec::with_capacity(plan.scenarios.count()), count: 0, bases: HashSet::new() };
    for s in plan.scenarios.walk() {
        summary.total += 1;
        let stack = s.handshake.stack;
        let id = s.id();
        let todo = if sink.contains(&id) {
            summary.already_done += 1;
            false
        } else if stacks.contains(&stack) && held.contains(id.as_str()) {
            summary.remeasured_interrupted += 1;
            true
        } else if !stacks.contains(&stack) {
            match summary.skipped_stacks.iter_mut().find(|(x, _)| *x == stack) {
                Some(e) => e.1 += 1,
                None => summary.skipped_stacks.push((stack, 1)),
            }
            false
        } else {
            true
        };
        if todo {
            out.count += 1;
            if let Some(b) = (plan.baseline_of)(&s).filter(|b| *b != id) {
                out.bases.insert(b);
            }
        }
        out.todo.push(todo);
    }
    out
}

/// The notices before a run: scenarios measured again, skipped for their stack or as
/// unsupported.
fn announce(plan: &Plan, summary: &RunSummary, events: &mut dyn FnMut(Event)) {
    if summary.remeasured_interrupted > 0 {
        events(Event::Notice(format!(
            "{} configurations were interrupted last time (kept as far as measured, marked `stopped: interrupted`): \
             measured again from the start",
            summary.remeasured_interrupted
        )));
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
}

/// A run under way: what it measures, where the records go, what it did so far.
struct Runner<'r, 'p> {
    plan: &'r Plan<'p>,
    opts: &'r RunOptions,
    schedule: &'r Schedule,
    sink: &'r mut dyn Sink,
    /// Complete records by id, of the scenarios that are another's baseline.
    stored: HashMap<String, Record>,
    /// The ids of the scenarios that are another's baseline.
    bases: &'r HashSet<String>,
    /// Scenarios this run measures.
    todo: usize,
    summary: RunSummary,
    /// The plan index of the scenario whose handshakes ran last (its warm-up or a block): a
    /// block of another one begins with a re-warm.
    last_block: Option<usize>,
}

impl<'p> Runner<'_, 'p> {
    /// True (and noted) when the interrupt flag is set.
    fn interrupted(&mut self) -> bool {
        let cut = self.opts.interrupt.load(Ordering::SeqCst);
        self.summary.interrupted |= cut;
        cut
    }

    /// Opens scenarios from `next` until the window holds `window` (or none is left); false
    /// when interrupted.
    fn fill<'s>(
        &mut self,
        measurement: &'s dyn Measurement,
        next: &mut impl Iterator<Item = (usize, Cow<'p, Scenario>)>,
        open: &mut Vec<Open<'p, 's>>,
        window: usize,
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        while open.len() < window {
            if self.interrupted() {
                return Ok(false);
            }
            let Some((i, scenario)) = next.next() else { break };
            events(Event::Start { index: i + 1, todo: self.todo, scenario: &scenario });
            // Its warm-up runs now (even if the start fails on the way).
            self.last_block = Some(i + 1);
            let started =
                measurement.start(&scenario, self.plan.settings, &self.opts.interrupt, &mut |p: &Progress| {
                    events(Event::Progress(p))
                });
            match started {
                Ok(session) => open.push(Open { index: i + 1, scenario, session, met_round: None }),
                Err(_) if self.interrupted() => return Ok(false),
                Err(e) => fail(&mut self.summary, self.opts, events, &scenario, e)?,
            }
        }
        Ok(true)
    }

    /// One round: a block of each open scenario that can still measure, in `open`'s order. A
    /// scenario that met its rule is stored at once unless `hold` keeps it for its window; then
    /// it gets a block only every `hold` rounds after the one it met its rule in. False when
    /// interrupted.
    fn round(
        &mut self,
        open: &mut Vec<Open>,
        round: u64,
        block: u64,
        hold: Option<u64>,
        events: &mut dyn FnMut(Event),
    ) -> Result<bool> {
        let interrupt = self.opts.interrupt.clone();
        let mut k = 0;
        while k < open.len() {
            if self.interrupted() {
                return Ok(false);
            }
            let o = &mut open[k];
            let resting = match (o.met_round, hold) {
                (Some(met), Some(every)) if o.session.interleaved() => !(round - met).is_multiple_of(every),
                _ => false,
            };
            if o.session.exhausted() || resting {
                k += 1;
                continue;
            }
            // Another scenario's handshakes ran since this one's last.
            let others = self.last_block != Some(o.index);
            self.last_block = Some(o.index);
            events(Event::Block { index: o.index, todo: self.todo, scenario: &o.scenario, round });
            let r = if others { o.session.rewarm(&interrupt) } else { Ok(()) }
                .and_then(|()| o.session.block(block, &interrupt, &mut |p: &Progress| events(Event::Progress(p))));
            if let Err(e) = r {
                if self.interrupted() {
                    return Ok(false);
                }
                let o = open.remove(k);
                fail(&mut self.summary, self.opts, events, &o.scenario, e)?;
                continue;
            }
            if !o.session.done() {
                k += 1;
                continue;
            }
            o.met_round = o.met_round.or(Some(round));
            if hold.is_some() && o.session.interleaved() {
                k += 1;
                continue;
            }
            // Its rule is met: complete even if the interrupt came during the block.
            let o = open.remove(k);
            self.store(o, round, false, events)?;
        }
        Ok(true)
    }

    /// Finishes `o` and hands its record to the sink, with its baseline delta and schedule.
    /// `cut`: the run was interrupted with `o` open: what it measured is kept, marked so.
    fn store(&mut self, o: Open, round: u64, cut: bool, events: &mut dyn FnMut(Event)) -> Result<()> {
        let (blocks, rewarmed) = (o.session.blocks(), o.session.rewarmed());
        let mut m = match o.session.finish(cut) {
            Ok(m) => m,
            // Nothing measured: no record.
            Err(_) if cut => return Ok(()),
            Err(e) => return fail(&mut self.summary, self.opts, events, &o.scenario, e),
        };
        if cut {
            if m.record.insitu().is_some_and(|r| r.loops.measured == 0) {
                return Ok(());
            }
            m.record.mark_interrupted();
        }
        let id = o.scenario.id();
        if m.record.id != id {
            return Err(Error::Other(format!(
                "the measurement of {id} returned a record for {}; nothing was stored for it",
                m.record.id
            )));
        }
        let base = (self.plan.baseline_of)(&o.scenario).filter(|b| *b != id).and_then(|b| self.stored.get(&b));
        let delta = base.and_then(|base| BaselineDelta::of_records(&m.record, base));
        if let Some(r) = m.record.insitu_mut() {
            r.baseline = r.baseline.take().or(delta);
            if let Some(noise) = r.noise.as_mut() {
                noise.schedule = Some(self.schedule.record(blocks, rewarmed));
            }
            // Met its rule before the window's last round, and measured on.
            if !cut && r.loops.stopped_by == "own rule" && o.met_round.is_some_and(|m| m < round) {
                r.loops.stopped_by = "window".into();
            }
        }
        self.sink.append(&m, self.plan.settings.raw_samples)?;
        if m.record.is_interrupted() {
            // Also a whole measurement (load) that returned what it had when interrupted.
            self.summary.kept_interrupted += 1;
            let n = m.record.insitu().map_or(String::new(), |r| format!(" after {} handshakes", r.loops.measured));
            events(Event::Notice(format!(
                "{} {}: interrupted{n}; kept as far as measured, marked `stopped: interrupted` (a results store \
                 measures it again on the next run)",
                o.scenario.handshake.stack,
                o.scenario.label()
            )));
            return Ok(());
        }
        self.summary.measured += 1;
        events(Event::Stored { index: self.summary.measured, todo: self.todo, record: &m.record });
        if self.bases.contains(&id) {
            self.stored.insert(id, m.record);
        }
        Ok(())
    }
}

/// Open scenarios in plan order, the baselines of others among them first (so that their
/// partners get their deltas).
fn by_baselines_first(bases: &HashSet<String>, open: &mut [Open]) {
    open.sort_by_key(|o| (!bases.contains(&o.scenario.id()), o.index));
}

/// A scenario's measurement failed: noted and skipped with `keep_going`, else the run's error.
fn fail(
    summary: &mut RunSummary,
    opts: &RunOptions,
    events: &mut dyn FnMut(Event),
    scenario: &Scenario,
    e: Error,
) -> Result<()> {
    let id = scenario.id();
    if !opts.keep_going {
        return Err(e.context(format!("measuring {id}")));
    }
    let text = e.to_string();
    events(Event::Failed { id: &id, error: &text });
    summary.failed.push((id, text));
    Ok(())
}
