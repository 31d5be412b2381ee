//! The measurement runner: warm-up, measured loops (fixed or adaptive), checks of what was
//! negotiated, and the summary record.

use crate::drive::{self, Handshake};
use crate::transport::{self, Transport, TransportKind, TransportOptions};
use pqtls_core::backend::{Backend, PkiFiles, Prepared};
use pqtls_core::config::{ConfigDesc, HandshakeConfig};
use pqtls_core::record::{BaselineDelta, Bytes, ConfigRecord, Env, Loops, Rate, SideSummary, SCHEMA_VERSION};
use pqtls_core::stats::{precise_enough, Quantiles, Summary};
use pqtls_core::trace::{Clock, SideSample};
use pqtls_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

pub use pqtls_core::config::Mode;

/// Measurement settings.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub warmup: u64,
    /// Fixed number of measured handshakes, or the cap in adaptive mode.
    pub loops: u64,
    /// Adaptive mode: stop when every step's median is known to this relative precision.
    pub precision: Option<f64>,
    /// Adaptive mode: never stop before this many handshakes.
    pub min_loops: u64,
    pub quantiles: Quantiles,
    pub mode: Mode,
    pub clock: Clock,
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            warmup: 100,
            loops: 1000,
            precision: None,
            min_loops: 200,
            quantiles: Quantiles::default(),
            mode: Mode::Memory,
            clock: Clock::default(),
        }
    }
}

impl Settings {
    pub fn validate(&self) -> Result<()> {
        if self.loops == 0 {
            return Err(Error::Invalid("loops must be at least 1 (e.g. --loops 1000)".into()));
        }
        if let Some(p) = self.precision {
            if !(p > 0.0 && p < 1.0) {
                return Err(Error::Invalid(format!("precision {p} must be between 0 and 1 (e.g. --precision 1%)")));
            }
        }
        Ok(())
    }
}

/// Progress of one configuration, reported to the caller as it goes.
#[derive(Clone, Debug)]
pub struct Progress {
    pub phase: &'static str,
    pub done: u64,
    pub target: u64,
    /// Adaptive mode: the step furthest from the target and its current relative half-width.
    pub worst: Option<(String, f64)>,
    /// What the transport said since the last report and not before (which CPUs the
    /// threads run on, why they could not be pinned…): for the reader, once.
    pub notes: Vec<String>,
}

pub use pqtls_core::record::Measured;

/// Handshakes measured between precision checks.
const BATCH: u64 = 100;

/// Measures one configuration. `interrupt` is polled between handshakes: when set, what was
/// measured so far is summarised (`loops.stopped = "interrupted"`), or an error is
/// returned when nothing was.
pub fn measure(
    backend: &dyn Backend,
    cfg: &HandshakeConfig,
    pki: &PkiFiles,
    settings: &Settings,
    env: &Env,
    interrupt: &AtomicBool,
    progress: &mut dyn FnMut(&Progress),
) -> Result<Measured> {
    settings.validate()?;
    cfg.validate()?;
    pqtls_core::trace::set_default_clock(settings.clock);
    let prepared: Arc<dyn Prepared> = Arc::from(backend.prepare(cfg, pki)?);
    let stop = || interrupt.load(Ordering::Relaxed);
    let check = |h: &Handshake| cfg.check(&h.negotiated, cfg.resumption);

    if cfg.resumption {
        // A first full handshake gives the client its ticket.
        let h = drive::handshake(prepared.as_ref(), false)?;
        cfg.check(&h.negotiated, false)?;
    }
    let mut transport = transport::build(settings.mode.into(), &TransportOptions::default());
    let mut seen_notes = Vec::new();
    // Warm-up: same transport as the measurement, results dropped (but checked).
    let mut warm = 0;
    while warm < settings.warmup && !stop() {
        let n = (settings.warmup - warm).min(BATCH);
        let (batch, notes) = run_batch(transport.as_mut(), prepared.clone(), n, &mut seen_notes, &stop)?;
        for h in batch {
            check(&h)?;
        }
        warm += n;
        progress(&Progress { phase: "warm-up", done: warm, target: settings.warmup, worst: None, notes });
    }

    let mut samples: Vec<(SideSample, SideSample)> = Vec::new();
    let mut last: Option<Handshake> = None;
    let mut s2c_range = [u64::MAX, 0];
    let mut wall = 0.0;
    let stopped;
    loop {
        if stop() {
            stopped = "interrupted";
            break;
        }
        let n = (settings.loops - samples.len() as u64).min(BATCH);
        let t0 = Instant::now();
        let (batch, notes) = run_batch(transport.as_mut(), prepared.clone(), n, &mut seen_notes, &stop)?;
        wall += t0.elapsed().as_secs_f64();
        for h in batch {
            check(&h)?;
            s2c_range[0] = s2c_range[0].min(h.server_to_client.bytes);
            s2c_range[1] = s2c_range[1].max(h.server_to_client.bytes);
            samples.push((h.client.clone(), h.server.clone()));
            last = Some(h);
        }
        let done = samples.len() as u64;
        let worst = match settings.precision {
            Some(p) if done >= settings.min_loops.min(settings.loops) => {
                precision_gap(&samples, p, &settings.quantiles)
            }
            Some(_) => Some(("(minimum loops)".to_string(), f64::NAN)),
            None => None,
        };
        progress(&Progress { phase: "measuring", done, target: settings.loops, worst: worst.clone(), notes });
        if settings.precision.is_some() && worst.is_none() {
            stopped = "precision reached";
            break;
        }
        if done >= settings.loops {
            stopped = if settings.precision.is_some() { "loop cap reached" } else { "fixed" };
            break;
        }
    }
    let Some(last) = last else {
        return Err(Error::Other("interrupted before any handshake was measured".into()));
    };
    let record = summarise(cfg, settings, env, &samples, &last, s2c_range, wall, stopped);
    Ok(Measured { record, samples })
}

/// One batch of traced handshakes over `transport`, and the notes it gave that were not
/// seen before (`seen` keeps them all).
fn run_batch(
    transport: &mut dyn Transport,
    prepared: Arc<dyn Prepared>,
    n: u64,
    seen: &mut Vec<String>,
    stop: &dyn Fn() -> bool,
) -> Result<(Vec<Handshake>, Vec<String>)> {
    let batch = transport.run(prepared, n, true, stop)?;
    let fresh: Vec<String> = batch.notes.into_iter().filter(|n| !seen.contains(n)).collect();
    seen.extend(fresh.iter().cloned());
    Ok((batch.handshakes, fresh))
}

/// The step furthest from the precision target, or None when all are within it.
fn precision_gap(samples: &[(SideSample, SideSample)], precision: f64, qs: &Quantiles) -> Option<(String, f64)> {
    for (side, pick) in [("client", 0usize), ("server", 1usize)] {
        let sides: Vec<&SideSample> = samples.iter().map(|s| if pick == 0 { &s.0 } else { &s.1 }).collect();
        let summary = SideSummary::of(&sides, qs);
        let steps = summary.steps.iter().map(|(k, v)| (k.as_str(), v));
        if let Err((step, rel)) = precise_enough(steps, summary.total_cpu_ns.median, precision) {
            return Some((format!("{side} {step}"), rel));
        }
    }
    None
}

#[allow(clippy::too_many_arguments)]
fn summarise(
    cfg: &HandshakeConfig,
    settings: &Settings,
    env: &Env,
    samples: &[(SideSample, SideSample)],
    last: &Handshake,
    s2c_range: [u64; 2],
    wall: f64,
    stopped: &str,
) -> ConfigRecord {
    let qs = &settings.quantiles;
    let clients: Vec<&SideSample> = samples.iter().map(|s| &s.0).collect();
    let servers: Vec<&SideSample> = samples.iter().map(|s| &s.1).collect();
    let totals: Vec<u64> = samples.iter().map(|(c, s)| c.total_cpu_ns + s.total_cpu_ns).collect();
    let mut bytes = Bytes::from_sides(&last.client, &last.server, last.client_to_server, last.server_to_client);
    bytes.server_to_client_range = s2c_range;
    let n = samples.len() as u64;
    ConfigRecord {
        schema: SCHEMA_VERSION,
        label: cfg.label(),
        config: ConfigDesc::from(cfg),
        negotiated: last.negotiated.clone(),
        client: SideSummary::of(&clients, qs),
        server: SideSummary::of(&servers, qs),
        total_cpu_ns: Summary::of(&totals, qs),
        bytes,
        loops: Loops {
            warmup: settings.warmup,
            measured: n,
            max: settings.loops,
            precision: settings.precision,
            stopped: stopped.to_string(),
            mode: settings.mode.name().to_string(),
            quantiles: qs.clone(),
            clock: settings.clock.name().to_string(),
            disturbed: samples.iter().filter(|(c, s)| disturbed(c) || disturbed(s)).count() as u64,
        },
        rate: Rate { handshakes_per_s: if wall > 0.0 { n as f64 / wall } else { 0.0 }, wall_s: wall },
        baseline: None,
        env: env.clone(),
        measured_at: std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_secs())
            .unwrap_or(0),
    }
}

/// A side was descheduled inside its calls for more than 2 µs + 2 % of their wall time.
fn disturbed(s: &SideSample) -> bool {
    s.unscheduled_ns > 2_000 + s.total_wall_ns / 50
}

/// Fills each record's `baseline` field with its per-step deltas against `base`.
pub fn apply_baseline(records: &mut [ConfigRecord], base: &ConfigRecord) {
    for r in records.iter_mut() {
        r.baseline = Some(BaselineDelta::between(r, base));
    }
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
    /// Cost of stamping one event inside a call with the clock policy in use, ns.
    pub stamp_ns: f64,
    /// extra_events × stamp_ns / untraced CPU: the overhead computed from its parts, free
    /// of the run-to-run noise that the direct comparison carries.
    pub computed_overhead: f64,
}

/// Cost of stamping one event inside a call (the wall clock, plus the thread CPU clock
/// with `Clock::Cpu`), measured over many reads.
pub fn stamp_cost_ns(clock: Clock) -> f64 {
    const N: u32 = 200_000;
    let t0 = Instant::now();
    let mut acc = 0u64;
    for _ in 0..N {
        let cpu = if clock == Clock::Cpu { pqtls_core::trace::thread_cpu_ns() } else { 0 };
        acc = acc.wrapping_add(cpu ^ pqtls_core::trace::wall_ns());
    }
    std::hint::black_box(acc);
    t0.elapsed().as_nanos() as f64 / N as f64
}

pub fn tracer_overhead(prepared: Arc<dyn Prepared>, blocks: u64, block: u64) -> Result<Overhead> {
    let mut cpu = [Vec::new(), Vec::new()];
    let mut wall = [0.0f64; 2];
    let mut events = [0usize; 2];
    for b in 0..blocks * 2 {
        let traced = b % 2 == 0;
        let t0 = Instant::now();
        for _ in 0..block {
            let h = drive::handshake(prepared.as_ref(), traced)?;
            cpu[traced as usize].push(h.client.total_cpu_ns + h.server.total_cpu_ns);
            events[traced as usize] += h.events;
        }
        wall[traced as usize] += t0.elapsed().as_secs_f64();
    }
    let qs = Quantiles::default();
    let untraced = Summary::of(&cpu[0], &qs).median;
    let traced = Summary::of(&cpu[1], &qs).median;
    let n = blocks * block;
    let (tr, un) = (n as f64 / wall[1], n as f64 / wall[0]);
    let extra_events = (events[1] as f64 - events[0] as f64) / n as f64;
    let stamp_ns = stamp_cost_ns(pqtls_core::trace::default_clock());
    Ok(Overhead {
        extra_events,
        stamp_ns,
        computed_overhead: extra_events * stamp_ns / untraced,
        handshakes_per_mode: n,
        traced_cpu_ns: traced,
        untraced_cpu_ns: untraced,
        cpu_overhead: (traced - untraced) / untraced,
        traced_per_s: tr,
        untraced_per_s: un,
        rate_overhead: 1.0 - tr / un,
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
) -> Result<CrossCheck> {
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
            let (batch, _) = run_batch(t.as_mut(), prepared.clone(), block, &mut out.notes, &never)?;
            dest.extend(batch.into_iter().map(|h| (h.client, h.server)));
        }
    }
    Ok(out)
}
