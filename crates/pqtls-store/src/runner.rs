//! The runner: measures every configuration of an experiment that the store does not hold
//! yet, through a closure supplied by the caller, and appends each result as soon as it is
//! measured.

use crate::experiment::{Experiment, Settings};
use crate::store::{Shard, Store};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::record::{BaselineDelta, ConfigRecord};
use pqtls_core::trace::SideSample;
use pqtls_core::{Error, Result};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use pqtls_core::record::Measured;

/// How progress is shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Progress {
    /// An indicatif bar on stderr (configurations done/total, ETA, current label).
    #[default]
    Bar,
    /// One line per configuration on stderr (`[3/12] label: 412 µs median, ETA 0:01:10`),
    /// for batch logs where a bar is not drawn.
    Lines,
    /// Nothing (tests).
    Hidden,
}

/// Options of one run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Measure only this slice of the configurations.
    pub shard: Option<Shard>,
    /// Stacks this build has; configurations on other stacks are skipped with a notice.
    pub available_stacks: Vec<Stack>,
    /// Set (e.g. by a Ctrl-C handler) to stop after the configuration being measured; the
    /// closure may watch it too and return early with an error, which is then not reported.
    pub interrupt: Arc<AtomicBool>,
    pub progress: Progress,
    /// On a measurement error, note it and go on with the next configuration instead of
    /// stopping the run. Failed configurations are not stored and are retried next time.
    pub keep_going: bool,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            shard: None,
            available_stacks: Stack::ALL.to_vec(),
            interrupt: Arc::new(AtomicBool::new(false)),
            progress: Progress::Bar,
            keep_going: false,
        }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default)]
pub struct RunSummary {
    /// Configurations of the experiment (of this shard).
    pub total: usize,
    /// Already stored before this run (resumed).
    pub already_done: usize,
    /// Measured and stored by this run.
    pub measured: usize,
    /// Left out because this build lacks their stack: (stack, configurations).
    pub skipped_stacks: Vec<(Stack, usize)>,
    /// Left out by `skip_unsupported` at validation (see [`Experiment::skipped`]).
    pub skipped_unsupported: usize,
    /// Configurations whose measurement failed (with `keep_going`): (id, error).
    pub failed: Vec<(String, String)>,
    /// The interrupt flag stopped the run before the end.
    pub interrupted: bool,
    pub elapsed: Duration,
    /// Things the user should read (store notices, skipped stacks).
    pub notices: Vec<String>,
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

/// The measurement: one configuration and the settings to measure it with.
pub type MeasureFn<'a> = dyn FnMut(&HandshakeConfig, &Settings) -> Result<Measured> + 'a;

/// Measures every configuration of `exp` (of `opts.shard`) that `store` does not hold yet,
/// in [`Experiment::configs`] order, appending each record as soon as it is measured.
///
/// - A record whose id differs from the configuration asked for is an error.
/// - When the experiment has a `[baseline]` rule and the baseline's record is stored, the
///   record's `baseline` field is filled (if the closure left it empty).
/// - Raw samples are stored only when `exp.settings.raw_samples` is set.
/// - When `opts.interrupt` is set the run stops before the next configuration and returns
///   `Ok` with `interrupted = true`; everything stored so far stays.
pub fn run(exp: &Experiment, store: &mut Store, opts: &RunOptions, measure: &mut MeasureFn) -> Result<RunSummary> {
    let start = Instant::now();
    let mut summary =
        RunSummary { skipped_unsupported: exp.skipped.len(), notices: store.notices.clone(), ..RunSummary::default() };
    let all = exp.configs()?;
    let mut todo: Vec<&HandshakeConfig> = Vec::new();
    for (i, c) in all.iter().enumerate() {
        if opts.shard.is_some_and(|s| !s.selects(i)) {
            continue;
        }
        summary.total += 1;
        if store.contains(&c.id()) {
            summary.already_done += 1;
        } else if !opts.available_stacks.contains(&c.stack) {
            match summary.skipped_stacks.iter_mut().find(|(s, _)| *s == c.stack) {
                Some(e) => e.1 += 1,
                None => summary.skipped_stacks.push((c.stack, 1)),
            }
        } else {
            todo.push(c);
        }
    }
    for (s, n) in &summary.skipped_stacks {
        summary.notices.push(format!("skipping {n} configurations on {s}: this build of pqtls has no {s} backend"));
    }
    if summary.skipped_unsupported > 0 {
        let mut text =
            format!("{} unsupported combinations skipped (skip_unsupported = true):", summary.skipped_unsupported);
        for s in exp.skipped.iter().take(10) {
            text += &format!("\n  {}: {}", s.id, s.reason);
        }
        if exp.skipped.len() > 10 {
            text += &format!("\n  … and {} more", exp.skipped.len() - 10);
        }
        summary.notices.push(text);
    }

    let bar = match opts.progress {
        Progress::Bar => ProgressBar::new(todo.len() as u64),
        Progress::Lines | Progress::Hidden => {
            ProgressBar::with_draw_target(Some(todo.len() as u64), ProgressDrawTarget::hidden())
        }
    };
    if let Ok(style) =
        ProgressStyle::with_template("{prefix} [{elapsed_precise}] {wide_bar} {pos}/{len} configs, ETA {eta} {msg}")
    {
        bar.set_style(style);
    }
    bar.set_prefix(exp.name.clone());

    // Records a baseline rule may refer to.
    let with_baselines = !exp.baseline.factors.is_empty();
    let mut stored: HashMap<String, ConfigRecord> = if with_baselines {
        store.records()?.into_iter().map(|r| (r.config.id.clone(), r)).collect()
    } else {
        HashMap::new()
    };
    for cfg in todo {
        if opts.interrupt.load(Ordering::SeqCst) {
            summary.interrupted = true;
            break;
        }
        let id = cfg.id();
        bar.set_message(cfg.label());
        let result = measure(cfg, &exp.settings);
        if opts.interrupt.load(Ordering::SeqCst)
            && result.as_ref().map_or(true, |m| m.record.loops.stopped == "interrupted")
        {
            // Cut short: keep nothing of this configuration, measure it again next time.
            summary.interrupted = true;
            break;
        }
        let mut m = match result {
            Ok(m) => m,
            Err(e) if opts.keep_going => {
                bar.println(format!("{id}: {e}"));
                summary.failed.push((id, e.to_string()));
                bar.inc(1);
                continue;
            }
            Err(e) => {
                bar.abandon();
                return Err(e.context(format!("measuring {id}")));
            }
        };
        if m.record.config.id != id {
            bar.abandon();
            return Err(Error::Other(format!(
                "the measurement of {id} returned a record for {}; nothing was stored for it",
                m.record.config.id
            )));
        }
        if m.record.baseline.is_none() {
            if let Some(base) = exp.baseline.baseline_of(cfg).filter(|b| *b != id).and_then(|b| stored.get(&b)) {
                m.record.baseline = Some(BaselineDelta::between(&m.record, base));
            }
        }
        let samples: &[(SideSample, SideSample)] = if exp.settings.raw_samples { &m.samples } else { &[] };
        let total_ns = m.record.total_cpu_ns.median;
        store.append(&m.record, samples)?;
        if with_baselines {
            stored.insert(id, m.record);
        }
        summary.measured += 1;
        bar.inc(1);
        if opts.progress == Progress::Lines {
            let done = bar.position();
            let left = bar.length().unwrap_or(done).saturating_sub(done);
            let per = start.elapsed().as_secs_f64() / done.max(1) as f64;
            let eta = (per * left as f64) as u64;
            eprintln!(
                "[{done}/{}] {}: {:.0} µs median handshake CPU, ETA {}:{:02}:{:02}",
                bar.length().unwrap_or(done),
                cfg.label(),
                total_ns / 1000.0,
                eta / 3600,
                eta / 60 % 60,
                eta % 60
            );
        }
    }
    if summary.interrupted {
        bar.abandon_with_message("interrupted; run again to resume");
    } else {
        bar.finish_with_message("done");
    }
    summary.elapsed = start.elapsed();
    Ok(summary)
}
