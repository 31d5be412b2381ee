//! The in-situ measurement of one scenario (warm-up, measured loops — fixed or adaptive —,
//! checks of what was negotiated, the summary record) and the tracer's own overhead and the
//! transports' cross-check. The runner that goes over many scenarios is [`crate::run`].

use crate::env::LoadSnapshot;
use crate::measurement::{Measurement, Progress, Session};
use crate::stacks::Stacks;
use crate::transport::{self, Handshake, Transport, TransportKind, TransportOptions};
use pqtls_core::backend::{AllocationCoverage, EndpointOptions, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::memory::{self, MemoryResult, SideMemorySummary};
use pqtls_core::quic::QuicHandshaker;
use pqtls_core::record::{Bytes, InsituResult, Loops, Noise, Outcome, Rate, Record, SideSummary};
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::stats::{precise_enough, Quantiles, Summary};
use pqtls_core::trace::{self, Clock, InstructionCounter, SideSample};
use pqtls_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub use pqtls_core::record::Measured;

/// Handshakes measured between precision checks.
const BATCH: u64 = 100;

/// Under `clock = "instructions"`: handshakes between precision checks (a handshake takes about
/// a second under callgrind, and counts settle within a few).
const COUNT_BATCH: u64 = 5;

/// The in-situ measurement: per-step CPU time and bytes of complete handshakes, over the
/// scenario's transport.
pub struct Insitu<'a> {
    pub stacks: Stacks<'a>,
    /// CPUs, waiting and timeouts of the two-thread transports.
    pub transport: TransportOptions,
    /// What `clock = "instructions"` reads (the command makes it: `perf_event_open` or
    /// callgrind, `pqtls-count`); `None` refuses such scenarios.
    pub counter: Option<Arc<dyn InstructionCounter>>,
    /// What `transport = "quic"` runs (`pqtls_quic::insitu::Driver`; the command gives it);
    /// `None` refuses such scenarios.
    pub quic: Option<Arc<dyn QuicHandshaker>>,
}

impl Measurement for Insitu<'_> {
    fn kind(&self) -> Kind {
        Kind::Insitu
    }

    fn stacks(&self) -> Vec<Stack> {
        self.stacks.stacks()
    }

    /// The whole scenario at once: a session run block after block until its stopping rule.
    fn measure(
        &self,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Measured> {
        let mut session = self.start(scenario, settings, interrupt, progress)?;
        while !session.done() && !interrupt.load(Ordering::Relaxed) {
            session.block(u64::MAX, interrupt, progress)?;
        }
        session.finish(interrupt.load(Ordering::Relaxed))
    }

    fn start<'s>(
        &'s self,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Box<dyn Session + 's>> {
        Ok(Box::new(InsituSession::start(self, scenario, settings, interrupt, progress)?))
    }
}

/// One scenario's in-situ measurement, block by block: contexts prepared and warmed up at
/// the start, handshakes measured in blocks, the record made at the end.
pub struct InsituSession<'s> {
    lab: &'s Insitu<'s>,
    scenario: Scenario,
    settings: Settings,
    opts: EndpointOptions,
    prepared: Arc<dyn Prepared>,
    transport: Box<dyn Transport>,
    seen_notes: Vec<String>,
    samples: Vec<(SideSample, SideSample)>,
    last: Option<Handshake>,
    s2c_range: [u64; 2],
    /// Wall time of the measured handshakes, s.
    wall_s: f64,
    /// Wall time of all this configuration's handshakes — warm-up, re-warms, measured — s:
    /// what its time cap (`Settings::max_time_ms`) counts.
    spent_s: f64,
    /// Handshakes of the warm-up run (fewer than the settings' when the time cap cut it short).
    warmed: u64,
    /// Samples when precision was last checked.
    checked_at: u64,
    stopped: Option<&'static str>,
    /// Handshakes measured when the precision was reached (adaptive mode).
    rule_met_at: Option<u64>,
    blocks: u64,
    /// Handshakes run unmeasured by [`Session::rewarm`].
    rewarmed: u64,
    before: LoadSnapshot,
    /// What the memory counting sees on this stack (`None`: memory not counted).
    memory: Option<AllocationCoverage>,
}

impl<'s> InsituSession<'s> {
    /// Checks the settings and the scenario, prepares the contexts, gives a resumption
    /// scenario its ticket and runs the warm-up (over the scenario's transport, checked,
    /// results dropped).
    pub fn start(
        lab: &'s Insitu<'s>,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<InsituSession<'s>> {
        settings.validate()?;
        scenario.validate_for(Kind::Insitu)?;
        let before = LoadSnapshot::now();
        let cfg = &scenario.handshake;
        let counter = match (scenario.clock, &lab.counter) {
            (Clock::Instructions, None) => {
                return Err(Error::Unsupported(format!(
                    "{}: clock = \"instructions\" needs an instruction counter, which this command did not make \
                     (pqtls insitu --clock instructions and pqtls run FILE --clock instructions make one)",
                    scenario.label()
                )))
            }
            (Clock::Instructions, Some(c)) => Some(c.clone()),
            _ => None,
        };
        // Heap allocations too (`Settings::memory`): the process's counting is turned on and
        // the record gets a `memory` section.
        let memory = if settings.memory { Some(memory_coverage(lab, scenario)?) } else { None };
        let opts = EndpointOptions {
            traced: true,
            clock: scenario.clock,
            counter,
            memory: settings.memory,
            ..EndpointOptions::default()
        };
        let (prepared, _) = lab.stacks.prepare(scenario)?;
        let stop = || interrupt.load(Ordering::Relaxed);
        let mut transport = transport::build_with(scenario.transport, &lab.transport, lab.quic.clone());
        if cfg.resumption {
            // A first full handshake gives the client its ticket (over QUIC, a QUIC one: rustls
            // keeps a QUIC ticket's transport parameters with it).
            let untraced = EndpointOptions { traced: false, ..opts.clone() };
            let h = if scenario.transport == TransportKind::Quic {
                transport.run(prepared.clone(), 1, &untraced, &|| false)?.handshakes.pop().ok_or_else(|| {
                    Error::Other("the QUIC transport ran no handshake for the resumption ticket".into())
                })?
            } else {
                transport::handshake(prepared.as_ref(), &untraced)?
            };
            cfg.check(&h.negotiated, false)?;
        }
        let mut seen_notes = Vec::new();
        let mut warm = 0;
        let mut warm_s = 0.0;
        // Under a time cap the warm-up takes at most half of it.
        let warm_cap_s = settings.max_time_s().map(|t| t / 2.0);
        while warm < settings.warmup && !stop() {
            let pace = (warm > 0).then(|| warm_s / warm as f64);
            let n = within_time((settings.warmup - warm).min(BATCH), warm_cap_s, warm_s, pace);
            if n == 0 {
                break;
            }
            let t0 = Instant::now();
            let (batch, notes) = run_batch(transport.as_mut(), prepared.clone(), n, &opts, &mut seen_notes, &stop)?;
            warm_s += t0.elapsed().as_secs_f64();
            for h in &batch {
                negotiated_as_asked(cfg, h)?;
            }
            warm += n;
            progress(&Progress { phase: "warm-up", done: warm, target: settings.warmup, worst: None, notes });
        }
        Ok(InsituSession {
            lab,
            scenario: scenario.clone(),
            settings: settings.clone(),
            opts,
            prepared,
            transport,
            seen_notes,
            samples: Vec::new(),
            last: None,
            s2c_range: [u64::MAX, 0],
            wall_s: 0.0,
            spent_s: warm_s,
            warmed: warm,
            checked_at: 0,
            stopped: None,
            rule_met_at: None,
            blocks: 0,
            rewarmed: 0,
            before,
            memory,
        })
    }
}

impl Session for InsituSession<'_> {
    fn block(&mut self, n: u64, interrupt: &AtomicBool, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
        let stop = || interrupt.load(Ordering::Relaxed);
        let cap = self.settings.cap();
        let cfg = &self.scenario.handshake;
        let mut left = n;
        self.blocks += 1;
        // Past its rule (a window keeps it going): on to the cap; else until the rule is met.
        let extending = self.stopped.is_some();
        while left > 0 && (extending || self.stopped.is_none()) && (self.samples.len() as u64) < cap && !stop() {
            let batch = if self.scenario.clock == Clock::Instructions { COUNT_BATCH } else { BATCH };
            let k = (cap - self.samples.len() as u64).min(batch).min(left);
            // Under a time cap: no further than the time left at the pace measured so far
            // (the first measured handshake runs whatever the warm-up left).
            let measured = self.samples.len() as u64;
            let pace = (measured > 0).then(|| self.wall_s / measured as f64);
            let k = match within_time(k, self.settings.max_time_s(), self.spent_s, pace) {
                0 if measured > 0 => {
                    self.stopped = self.stopped.or(Some("time cap reached"));
                    break;
                }
                0 => 1,
                k => k,
            };
            left -= k;
            let t0 = Instant::now();
            let (batch, notes) =
                run_batch(self.transport.as_mut(), self.prepared.clone(), k, &self.opts, &mut self.seen_notes, &stop)?;
            let took_s = t0.elapsed().as_secs_f64();
            self.wall_s += took_s;
            self.spent_s += took_s;
            for h in batch {
                negotiated_as_asked(cfg, &h)?;
                self.s2c_range[0] = self.s2c_range[0].min(h.server_to_client.bytes);
                self.s2c_range[1] = self.s2c_range[1].max(h.server_to_client.bytes);
                self.samples.push((h.client.clone(), h.server.clone()));
                self.last = Some(h);
            }
            let done = self.samples.len() as u64;
            // The precision test sorts every step's samples: every BATCH handshakes at most.
            // Counts come slowly (a handshake takes ~1 s under callgrind) and settle fast:
            // checked after every block.
            let counts = self.scenario.clock == Clock::Instructions;
            let check_due = done >= cap || done - self.checked_at >= BATCH || counts;
            let worst = match self.settings.precision {
                _ if extending => None,
                Some(p) if done >= self.settings.min_loops.min(cap) && check_due => {
                    self.checked_at = done;
                    let w = precision_gap(&self.samples, p, &self.settings.quantiles, self.scenario.clock);
                    if w.is_none() {
                        self.stopped = Some("precision reached");
                        self.rule_met_at = Some(done);
                    }
                    w
                }
                Some(_) => Some(("(minimum loops)".to_string(), f64::NAN)),
                None => None,
            };
            if self.stopped.is_none() && done >= cap {
                self.stopped = Some(if self.settings.precision.is_some() { "loop cap reached" } else { "fixed" });
            }
            if self.stopped.is_none() && self.time_spent() {
                self.stopped = Some("time cap reached");
            }
            progress(&Progress { phase: "measuring", done, target: cap, worst, notes });
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.stopped.is_some()
    }

    fn exhausted(&self) -> bool {
        self.samples.len() as u64 >= self.settings.cap() || self.time_spent()
    }

    fn interleaved(&self) -> bool {
        true
    }

    fn blocks(&self) -> u64 {
        self.blocks
    }

    /// One handshake, checked and dropped: enough to bring this configuration's code, keys
    /// and contexts back into the caches (without it, blocks of 1 and 5 measured 7–21 % and
    /// 2–9 % more CPU than blocks of 20: docs/benchmarks-history.md §5.8).
    fn rewarm(&mut self, interrupt: &AtomicBool) -> Result<()> {
        const REWARM_HANDSHAKES: u64 = 1;
        if self.scenario.clock == Clock::Instructions {
            // Instructions retired do not depend on what the caches hold.
            return Ok(());
        }
        let stop = || interrupt.load(Ordering::Relaxed);
        let t0 = Instant::now();
        let (batch, _) = run_batch(
            self.transport.as_mut(),
            self.prepared.clone(),
            REWARM_HANDSHAKES,
            &self.opts,
            &mut self.seen_notes,
            &stop,
        )?;
        for h in &batch {
            negotiated_as_asked(&self.scenario.handshake, h)?;
        }
        self.spent_s += t0.elapsed().as_secs_f64();
        self.rewarmed += batch.len() as u64;
        Ok(())
    }

    fn rewarmed(&self) -> u64 {
        self.rewarmed
    }

    fn finish(self: Box<Self>, interrupted: bool) -> Result<Measured> {
        let mut me = *self;
        let stopped = match me.stopped {
            Some(s) => s,
            None if interrupted => "interrupted",
            None => return Err(Error::Other("the session was finished before its stopping rule was met".into())),
        };
        let Some(last) = me.last.take() else {
            return Err(Error::Other("interrupted before any handshake was measured".into()));
        };
        let samples = std::mem::take(&mut me.samples);
        let unmeasured = samples.iter().filter(|(c, s)| c.unmeasured_records + s.unmeasured_records > 0).count();
        if unmeasured > 0 {
            me.seen_notes.push(format!(
                "{unmeasured} of {} handshakes had records whose handshake messages could not be measured; their \
                 message sizes are missing from the table",
                samples.len()
            ));
        }
        let after = LoadSnapshot::now();
        let counter = me.opts.counter.as_ref().map(|c| c.counting());
        let mut result = summarise(
            &me.scenario,
            &me.settings,
            &samples,
            &last,
            me.s2c_range,
            me.wall_s,
            stopped,
            std::mem::take(&mut me.seen_notes),
        );
        // The warm-up run (the time cap may have cut it short).
        result.loops.warmup = me.warmed;
        if result.bytes.unmeasured_records == 0 {
            me.scenario.handshake.check_auth_bytes(&result.bytes.messages)?;
        }
        result.loops.rule_met_at = me.rule_met_at;
        result.loops.counter = counter;
        if let Some(coverage) = me.memory.take() {
            result.memory = Some(memory_summary(&samples, coverage)?);
        }
        let (steal, busy) = me.before.fractions_until(&after);
        result.noise = Some(Noise {
            disturbed_client: samples.iter().filter(|(c, _)| trace::disturbed(c)).count() as u64,
            disturbed_server: samples.iter().filter(|(_, s)| trace::disturbed(s)).count() as u64,
            excluded_client: samples.iter().filter(|(c, _)| !trace::steps_trusted(me.scenario.clock, c)).count() as u64,
            excluded_server: samples.iter().filter(|(_, s)| !trace::steps_trusted(me.scenario.clock, s)).count() as u64,
            unscheduled_ns: samples.iter().map(|(c, s)| c.unscheduled_ns + s.unscheduled_ns).sum(),
            cpu_ns: samples.iter().map(|(c, s)| c.total_cpu_ns + s.total_cpu_ns).sum(),
            loadavg_before: me.before.loadavg,
            loadavg_after: after.loadavg,
            steal_fraction: steal,
            busy_fraction: busy,
            others_fraction: me.before.others_until(&after),
            cpus: me.lab.stacks.env.cpus.max(std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)),
            schedule: None,
        });
        let scenario = &me.scenario;
        let record = Record::measured(scenario, &me.settings, &me.lab.stacks.env, Outcome::Insitu(Box::new(result)));
        Ok(Measured { record, samples })
    }
}

/// Negotiated = requested, for every handshake run (warm-up, measured, re-warm): the group,
/// signature, cipher and resumption asked; the client's chain when mutual; the ClientHello's
/// padding.
fn negotiated_as_asked(cfg: &pqtls_core::config::HandshakeConfig, h: &Handshake) -> Result<()> {
    cfg.check(&h.negotiated, cfg.resumption)?;
    cfg.check_client_chain(&h.client, h.negotiated.resumed)?;
    cfg.check_client_hello(&h.client)
}

impl InsituSession<'_> {
    /// The time cap is reached: this configuration's handshakes took `max_time` (or more).
    fn time_spent(&self) -> bool {
        self.settings.max_time_s().is_some_and(|t| self.spent_s >= t)
    }
}

/// How many of the `k` handshakes of the next batch fit in the time cap `limit_s` when
/// `spent_s` is spent, at `pace_s` each (`None`: not known yet, one handshake to learn it):
/// `k` without a cap, 0 when the time is spent, else at least one.
fn within_time(k: u64, limit_s: Option<f64>, spent_s: f64, pace_s: Option<f64>) -> u64 {
    let Some(limit) = limit_s else { return k };
    let left = limit - spent_s;
    if left <= 0.0 {
        return 0;
    }
    match pace_s {
        Some(each) if each > 0.0 => k.min(((left / each).ceil() as u64).max(1)),
        Some(_) => k,
        None => k.min(1),
    }
}

/// One batch of handshakes over `transport`, and the notes it gave that were not seen
/// before (`seen` keeps them all).
fn run_batch(
    transport: &mut dyn Transport,
    prepared: Arc<dyn Prepared>,
    n: u64,
    opts: &EndpointOptions,
    seen: &mut Vec<String>,
    stop: &dyn Fn() -> bool,
) -> Result<(Vec<Handshake>, Vec<String>)> {
    let batch = transport.run(prepared, n, opts, stop)?;
    if let Some(e) = opts.counter.as_ref().and_then(|c| c.error()) {
        return Err(Error::Other(format!("counting instructions: {e}")));
    }
    let fresh: Vec<String> = batch.notes.into_iter().filter(|n| !seen.contains(n)).collect();
    seen.extend(fresh.iter().cloned());
    Ok((batch.handshakes, fresh))
}

/// The quantity furthest from the precision target (the handshake's total, a side's total or
/// a step), or None when all are within it.
fn precision_gap(
    samples: &[(SideSample, SideSample)],
    precision: f64,
    qs: &Quantiles,
    clock: Clock,
) -> Option<(String, f64)> {
    // The handshake's total (what reports compare) and each side's total and steps.
    let totals: Vec<u64> = samples.iter().map(|(c, s)| c.total_cpu_ns + s.total_cpu_ns).collect();
    let total = Summary::of(&totals, qs);
    if let Err((_, rel)) = precise_enough([("total", &total)], total.median, precision) {
        return Some(("handshake total".to_string(), rel));
    }
    for (side, pick) in [("client", 0usize), ("server", 1usize)] {
        let sides: Vec<&SideSample> = samples.iter().map(|s| if pick == 0 { &s.0 } else { &s.1 }).collect();
        let summary = SideSummary::of_filtered(&sides, &|s| trace::steps_trusted(clock, s), qs);
        let steps =
            std::iter::once(("total", &summary.total_cpu_ns)).chain(summary.steps.iter().map(|(k, v)| (k.as_str(), v)));
        if let Err((step, rel)) = precise_enough(steps, summary.total_cpu_ns.median, precision) {
            return Some((format!("{side} {step}"), rel));
        }
    }
    None
}

#[allow(clippy::too_many_arguments)]
fn summarise(
    scenario: &Scenario,
    settings: &Settings,
    samples: &[(SideSample, SideSample)],
    last: &Handshake,
    s2c_range: [u64; 2],
    wall: f64,
    stopped: &str,
    notes: Vec<String>,
) -> InsituResult {
    let qs = &settings.quantiles;
    let clients: Vec<&SideSample> = samples.iter().map(|s| &s.0).collect();
    let servers: Vec<&SideSample> = samples.iter().map(|s| &s.1).collect();
    let totals: Vec<u64> = samples.iter().map(|(c, s)| c.total_cpu_ns + s.total_cpu_ns).collect();
    let mut bytes = Bytes::from_sides(&last.client, &last.server, last.client_to_server, last.server_to_client);
    bytes.server_to_client_range = s2c_range;
    let n = samples.len() as u64;
    let clock = scenario.clock;
    let trusted = |s: &SideSample| trace::steps_trusted(clock, s);
    InsituResult {
        negotiated: last.negotiated.clone(),
        client: SideSummary::of_filtered(&clients, &trusted, qs),
        server: SideSummary::of_filtered(&servers, &trusted, qs),
        total_cpu_ns: Summary::of(&totals, qs),
        unit: clock.unit(),
        bytes,
        loops: Loops {
            warmup: settings.warmup,
            measured: n,
            max: settings.cap(),
            precision: settings.precision,
            stopped: stopped.to_string(),
            mode: scenario.transport.name().to_string(),
            quantiles: qs.clone(),
            clock: scenario.clock.name().to_string(),
            anchor_ns: (scenario.clock == Clock::Split).then_some(trace::ANCHOR_WALL_NS),
            disturbed: samples.iter().filter(|(c, s)| trace::disturbed(c) || trace::disturbed(s)).count() as u64,
            notes,
            // The runner says `window` when it kept the scenario going past its rule.
            stopped_by: match stopped {
                "loop cap reached" => "cap",
                "time cap reached" => "time cap",
                "interrupted" => "",
                _ => "own rule",
            }
            .to_string(),
            rule_met_at: None,
            counter: None,
        },
        rate: Rate { handshakes_per_s: if wall > 0.0 { n as f64 / wall } else { 0.0 }, wall_s: wall },
        baseline: None,
        noise: None,
        memory: None,
        quic: last.quic.clone(),
    }
}

/// Turns allocation counting on and says what it will see on the scenario's stack; an error
/// when the stack's library hooks or the counting Rust allocator are missing (counts would be
/// wrong, not just incomplete).
fn memory_coverage(lab: &Insitu<'_>, scenario: &Scenario) -> Result<AllocationCoverage> {
    let coverage = lab.stacks.backend(scenario.handshake.stack)?.counted_allocations()?;
    memory::start_counting();
    if !memory::rust_allocations_counted() {
        return Err(Error::Unsupported(
            "Rust allocations are not being counted: this program's global allocator is not \
             pqtls_core::memory::CountingAllocator (the pqtls binary's is)"
                .into(),
        ));
    }
    Ok(coverage)
}

/// The record's memory section: each side's allocations per step over every handshake.
fn memory_summary(samples: &[(SideSample, SideSample)], coverage: AllocationCoverage) -> Result<MemoryResult> {
    let side = |pick: fn(&(SideSample, SideSample)) -> &SideSample| -> Result<SideMemorySummary> {
        let sides = samples
            .iter()
            .map(|s| pick(s).memory.as_ref())
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| Error::Other("a handshake measured with --memory has no memory counts".into()))?;
        Ok(SideMemorySummary::of(&sides))
    };
    Ok(MemoryResult {
        counted: coverage.counted,
        not_counted: coverage.not_counted,
        client: side(|s| &s.0)?,
        server: side(|s| &s.1)?,
    })
}

/// The tracer's overhead: blocks of traced and untraced handshakes, interleaved so that
/// drift in machine speed hits both alike.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Overhead {
    pub handshakes_per_mode: u64,
    /// Median client+server CPU per handshake (ns), traced and untraced.
    pub traced_cpu_ns: f64,
    pub untraced_cpu_ns: f64,
    /// (traced − untraced) / untraced, from the medians of CPU per handshake.
    pub cpu_overhead: f64,
    /// Handshakes per second of wall time, traced and untraced.
    pub traced_per_s: f64,
    pub untraced_per_s: f64,
    /// 1 − traced_per_s / untraced_per_s.
    pub rate_overhead: f64,
    /// Events per traced handshake (both sides) beyond the untraced ones (call start/end).
    pub extra_events: f64,
    /// Cost of stamping one event inside a call with the monotonic clock, ns.
    pub stamp_ns: f64,
    /// Of those events, per traced handshake (both sides), the ones that also read the thread
    /// CPU clock: all of them with `Clock::Cpu`, the anchors with `Clock::Split`.
    #[serde(default)]
    pub cpu_reads: f64,
    /// Cost of one thread-CPU-clock read, ns.
    #[serde(default)]
    pub cpu_read_ns: f64,
    /// (extra_events × stamp_ns + cpu_reads × cpu_read_ns) / untraced CPU: the overhead
    /// computed from its parts, free of the run-to-run noise that the direct comparison
    /// carries.
    pub computed_overhead: f64,
}

/// Cost of one read of `read`, ns, measured over many reads.
fn read_cost_ns(read: fn() -> u64) -> f64 {
    const N: u32 = 200_000;
    let t0 = Instant::now();
    let mut acc = 0u64;
    for _ in 0..N {
        acc = acc.wrapping_add(read());
    }
    std::hint::black_box(acc);
    t0.elapsed().as_nanos() as f64 / N as f64
}

pub fn tracer_overhead(prepared: Arc<dyn Prepared>, blocks: u64, block: u64, clock: Clock) -> Result<Overhead> {
    let mut cpu = [Vec::new(), Vec::new()];
    let mut wall = [0.0f64; 2];
    let mut events = [0usize; 2];
    let mut cpu_reads = 0u64;
    for b in 0..blocks * 2 {
        let traced = b % 2 == 0;
        let t0 = Instant::now();
        for _ in 0..block {
            let h = transport::handshake(prepared.as_ref(), &EndpointOptions { traced, clock, ..Default::default() })?;
            cpu[traced as usize].push(h.client.total_cpu_ns + h.server.total_cpu_ns);
            events[traced as usize] += h.events;
            if traced {
                cpu_reads += u64::from(h.client.cpu_reads + h.server.cpu_reads);
            }
        }
        wall[traced as usize] += t0.elapsed().as_secs_f64();
    }
    let qs = Quantiles::default();
    let untraced = Summary::of(&cpu[0], &qs).median;
    let traced = Summary::of(&cpu[1], &qs).median;
    let n = blocks * block;
    let (tr, un) = (n as f64 / wall[1], n as f64 / wall[0]);
    let extra_events = (events[1] as f64 - events[0] as f64) / n as f64;
    let stamp_ns = read_cost_ns(pqtls_core::trace::wall_ns);
    let cpu_read_ns = read_cost_ns(pqtls_core::trace::thread_cpu_ns);
    let cpu_reads = cpu_reads as f64 / n as f64;
    Ok(Overhead {
        extra_events,
        stamp_ns,
        cpu_reads,
        cpu_read_ns,
        computed_overhead: (extra_events * stamp_ns + cpu_reads * cpu_read_ns) / untraced,
        handshakes_per_mode: n,
        traced_cpu_ns: traced,
        untraced_cpu_ns: untraced,
        cpu_overhead: (traced - untraced) / untraced,
        traced_per_s: tr,
        untraced_per_s: un,
        rate_overhead: 1.0 - tr / un,
    })
}

/// What counting allocations costs: blocks of memory-counting and plain traced handshakes,
/// interleaved so that drift in machine speed hits both alike.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MemoryOverhead {
    pub handshakes_per_mode: u64,
    /// Median client+server CPU per handshake (ns), counting and not (both traced).
    pub counted_cpu_ns: f64,
    pub uncounted_cpu_ns: f64,
    /// (counted − uncounted) / uncounted, from the medians.
    pub cpu_overhead: f64,
    /// Allocations per handshake (both sides, inside calls), from the counted handshakes.
    pub allocations: f64,
    /// (counted − uncounted) CPU per allocation, ns: what one counted allocation (and its
    /// free) costs, stamps at every event included.
    pub ns_per_allocation: f64,
}

/// [`MemoryOverhead`] of `prepared`: counting is turned on for the counted blocks and off for
/// the others (the allocator hooks forward in both: what `--memory` adds is the counting and
/// the stamps at every event). Counting is left as it was found. The stack's hooks must be
/// installed (`Backend::counted_allocations`), or the counted blocks would count nothing.
pub fn memory_overhead(prepared: Arc<dyn Prepared>, blocks: u64, block: u64, clock: Clock) -> Result<MemoryOverhead> {
    let was = memory::counting();
    let mut cpu = [Vec::new(), Vec::new()];
    let mut allocations = 0u64;
    let mut run = || -> Result<()> {
        for b in 0..blocks * 2 {
            let counted = b % 2 == 0;
            if counted {
                memory::start_counting();
            } else {
                memory::stop_counting();
            }
            let opts = EndpointOptions { traced: true, clock, memory: counted, ..EndpointOptions::default() };
            for _ in 0..block {
                let h = transport::handshake(prepared.as_ref(), &opts)?;
                cpu[counted as usize].push(h.client.total_cpu_ns + h.server.total_cpu_ns);
                if counted {
                    allocations += [&h.client, &h.server]
                        .iter()
                        .filter_map(|s| s.memory.as_ref())
                        .map(|m| m.total.allocations)
                        .sum::<u64>();
                }
            }
        }
        Ok(())
    };
    let result = run();
    if was {
        memory::start_counting();
    } else {
        memory::stop_counting();
    }
    result?;
    let qs = Quantiles::default();
    let uncounted = Summary::of(&cpu[0], &qs).median;
    let counted = Summary::of(&cpu[1], &qs).median;
    let n = blocks * block;
    let allocations = allocations as f64 / n as f64;
    Ok(MemoryOverhead {
        handshakes_per_mode: n,
        counted_cpu_ns: counted,
        uncounted_cpu_ns: uncounted,
        cpu_overhead: (counted - uncounted) / uncounted,
        allocations,
        ns_per_allocation: if allocations > 0.0 { (counted - uncounted) / allocations } else { f64::NAN },
    })
}

/// Samples of the same configuration over several transports.
#[derive(Clone, Debug, Default)]
pub struct CrossCheck {
    /// Per transport, in the order asked: `(client, server)` samples.
    pub samples: Vec<(TransportKind, Vec<(SideSample, SideSample)>)>,
    /// What the transports said (CPUs used, pinning refused…), each note once.
    pub notes: Vec<String>,
}

/// The same configuration measured over each of `kinds`, in interleaved blocks (one block
/// per transport, in turn, `blocks` times) so that drift in machine speed hits all alike.
pub fn transport_cross_check(
    prepared: Arc<dyn Prepared>,
    kinds: &[TransportKind],
    options: &TransportOptions,
    blocks: u64,
    block: u64,
    clock: Clock,
) -> Result<CrossCheck> {
    let opts = EndpointOptions { traced: true, clock, ..Default::default() };
    if kinds.is_empty() {
        return Err(Error::Invalid(format!(
            "a cross-check needs at least one transport, e.g. {}",
            TransportKind::ALL.map(|k| k.name()).join(",")
        )));
    }
    let mut transports: Vec<Box<dyn Transport>> = kinds.iter().map(|&k| transport::build(k, options)).collect();
    let mut out = CrossCheck { samples: kinds.iter().map(|&k| (k, Vec::new())).collect(), notes: Vec::new() };
    let never = || false;
    for _ in 0..blocks {
        for (t, (_, dest)) in transports.iter_mut().zip(out.samples.iter_mut()) {
            let (batch, _) = run_batch(t.as_mut(), prepared.clone(), block, &opts, &mut out.notes, &never)?;
            dest.extend(batch.into_iter().map(|h| (h.client, h.server)));
        }
    }
    Ok(out)
}
