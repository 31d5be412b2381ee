//! What the two generators share around their event loops: the run's state every thread or
//! task steers by ([`RunState`]: stop, abort, counts, the budget of a fixed count, the fatal
//! reason, the first handshake's parameters, the stall screen's counts) and what a thread, slot
//! or run measured ([`Tally`]: one set of HdrHistograms, counts and timelines).

use hdrhistogram::Histogram;
use pqtls_core::backend::Negotiated;
use pqtls_core::link::StallCounters;
use pqtls_core::load::{add_errors, histogram, ErrorCount, LoadProgress};
use pqtls_core::timeline::{Timeline, LAYER_NAMES};
use pqtls_core::{Error, Result};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The run's state, shared by its threads (TCP) or tasks (QUIC).
pub struct RunState {
    /// No new transactions; those in flight finish (within the timeout).
    pub stop: AtomicBool,
    /// End now: what is in flight is abandoned (unfinished). Ctrl-C, a fatal error, the server gone.
    pub abort: AtomicBool,
    /// Measured transactions completed, and errors, so far (progress).
    pub completed: AtomicU64,
    pub errors: AtomicU64,
    /// Requests still allowed (closed loop with a fixed count).
    pub budget: Option<AtomicU64>,
    /// Requests completed by anyone, warm-up included (a run that never succeeds stops early).
    pub successes: AtomicU64,
    /// Set once: the reason the run must end with an error.
    fatal: Mutex<Option<String>>,
    /// The first handshake's parameters.
    pub negotiated: Mutex<Option<Negotiated>>,
    /// What the stall screen did ([`super::LoadOptions::stalls`]).
    pub stalls: StallCounters,
    /// How much later the measured stretch ends than its `duration` says, ns: in a run of a
    /// fixed count, the time of the transactions the stall screen discarded and of the pauses
    /// after them ([`RunState::extend_window`]).
    extended_ns: AtomicU64,
}

impl RunState {
    /// A run of `requests` measured requests at most (`None`: until its duration ends).
    pub fn new(requests: Option<u64>) -> RunState {
        RunState {
            stop: AtomicBool::new(false),
            abort: AtomicBool::new(false),
            completed: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            budget: requests.map(AtomicU64::new),
            successes: AtomicU64::new(0),
            fatal: Mutex::new(None),
            negotiated: Mutex::new(None),
            stalls: StallCounters::default(),
            extended_ns: AtomicU64::new(0),
        }
    }

    /// The end of the measured stretch, `measure_to` as the run's `duration` set it, moved
    /// later by [`RunState::extend_window`].
    pub fn window_end(&self, measure_to: Instant) -> Instant {
        measure_to + Duration::from_nanos(self.extended_ns.load(Ordering::SeqCst))
    }

    /// A transaction the stall screen discarded, which took `spent` with the pause after it:
    /// in a run of a fixed count (`requests`), the measured stretch ends that much later — the
    /// time was not spent measuring, and the count is what the run was asked for (a 4-transfer
    /// point is not cut short by its re-measurements; the screen's `most_again` bounds them). A
    /// run bound by its duration keeps its end and just has one transaction less.
    pub fn extend_window(&self, spent: Duration) {
        if self.budget.is_some() {
            self.extended_ns.fetch_add(spent.as_nanos().min(u128::from(u64::MAX)) as u64, Ordering::SeqCst);
        }
    }

    /// Ends the run with an error (the first reason given is kept).
    pub fn fatal(&self, why: String) {
        let mut f = self.fatal.lock().unwrap_or_else(|p| p.into_inner());
        if f.is_none() {
            *f = Some(why);
        }
        self.halt();
    }

    /// No new transactions, and those in flight abandoned.
    pub fn halt(&self) {
        self.stop.store(true, Ordering::SeqCst);
        self.abort.store(true, Ordering::SeqCst);
    }

    /// The reason the run ended with an error, if it did.
    pub fn take_fatal(&self) -> Option<String> {
        self.fatal.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// The first handshake's parameters, if one completed.
    pub fn negotiated(&self) -> Option<Negotiated> {
        self.negotiated.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// One turn of the supervisor: Ctrl-C halts the run (`stopped` becomes `interrupted`), and
    /// progress is reported once a second (`last`: when it last was).
    pub fn supervise_turn(
        &self,
        interrupt: &AtomicBool,
        stopped: &mut &'static str,
        [origin, measure_from]: [Instant; 2],
        last: &mut Instant,
        progress: &mut dyn FnMut(&LoadProgress),
    ) {
        if interrupt.load(Ordering::SeqCst) && *stopped != "interrupted" {
            *stopped = "interrupted";
            self.halt();
        }
        let now = Instant::now();
        if now.duration_since(*last) >= Duration::from_secs(1) {
            *last = now;
            progress(&LoadProgress {
                phase: if now < measure_from { "warm-up" } else { "measuring" },
                elapsed: now.duration_since(origin),
                requests: self.completed.load(Ordering::Relaxed),
                errors: self.errors.load(Ordering::Relaxed),
            });
        }
    }
}

/// The most seconds a run counts its requests in (a day).
const MAX_SECONDS: usize = 86_400;

/// What a thread, a slot or a run measured: latency, time to first byte and each layer's time
/// per measured transaction (HdrHistograms), the counts, the errors by kind, the requests
/// completed in each second of the measured stretch, and the timelines kept.
pub struct Tally {
    pub latency: Histogram<u64>,
    pub ttfb: Histogram<u64>,
    pub layers: Vec<Histogram<u64>>,
    pub requests: u64,
    pub handshakes: u64,
    pub handshake_cpu_ns: u64,
    /// Requests completed, warm-up and screened-out ones included.
    pub all_requests: u64,
    pub unfinished: u64,
    pub errors: Vec<ErrorCount>,
    pub per_second: Vec<u64>,
    pub timelines: Vec<Timeline>,
}

impl Tally {
    /// Nothing measured yet, with a count for each second of a run of `duration` (one at least).
    pub fn new(duration: Duration) -> Tally {
        Tally {
            latency: histogram(),
            ttfb: histogram(),
            layers: LAYER_NAMES.iter().map(|_| histogram()).collect(),
            requests: 0,
            handshakes: 0,
            handshake_cpu_ns: 0,
            all_requests: 0,
            unfinished: 0,
            errors: Vec::new(),
            per_second: vec![0; (duration.as_secs_f64().ceil() as usize).max(1)],
            timelines: Vec::new(),
        }
    }

    /// Adds another's: histograms merged, counts and errors added, timelines appended.
    pub fn add(&mut self, o: Tally) -> Result<()> {
        let merge = |a: &mut Histogram<u64>, b: &Histogram<u64>| {
            a.add(b).map_err(|e| Error::Other(format!("merging latency histograms: {e:?}")))
        };
        merge(&mut self.latency, &o.latency)?;
        merge(&mut self.ttfb, &o.ttfb)?;
        for (a, b) in self.layers.iter_mut().zip(&o.layers) {
            merge(a, b)?;
        }
        self.requests += o.requests;
        self.handshakes += o.handshakes;
        self.handshake_cpu_ns += o.handshake_cpu_ns;
        self.all_requests += o.all_requests;
        self.unfinished += o.unfinished;
        add_errors(&mut self.errors, &o.errors);
        if self.per_second.len() < o.per_second.len() {
            self.per_second.resize(o.per_second.len(), 0);
        }
        for (a, b) in self.per_second.iter_mut().zip(&o.per_second) {
            *a += b;
        }
        self.timelines.extend(o.timelines);
        Ok(())
    }

    /// A measured transaction: its times in the histograms, counted in `second` of the
    /// measured stretch, its timeline kept when `keep`.
    pub fn record(&mut self, t: &Timeline, second: usize, keep: bool) {
        self.requests += 1;
        let _ = self.latency.record(t.latency_ns().max(1));
        let _ = self.ttfb.record(t.ttfb_ns().max(1));
        if let Ok(l) = t.layers() {
            for (h, (_, v)) in self.layers.iter_mut().zip(l.named()) {
                let _ = h.record(v.max(1));
            }
        }
        // A run whose window was extended ([`RunState::extend_window`]) counts past `duration`.
        if second >= self.per_second.len() && second < MAX_SECONDS {
            self.per_second.resize(second + 1, 0);
        }
        if let Some(c) = self.per_second.get_mut(second) {
            *c += 1;
        }
        if keep {
            self.timelines.push(*t);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_of_a_fixed_count_measures_longer_by_its_discarded_transactions_a_timed_run_does_not() {
        let end = Instant::now() + Duration::from_secs(5);
        let counted = RunState::new(Some(4));
        counted.extend_window(Duration::from_millis(250));
        counted.extend_window(Duration::from_millis(530));
        assert_eq!(counted.window_end(end), end + Duration::from_millis(780));
        let timed = RunState::new(None);
        timed.extend_window(Duration::from_millis(250));
        assert_eq!(timed.window_end(end), end);
    }

    #[test]
    fn requests_past_the_duration_are_counted_in_their_second() {
        let mut a = Tally::new(Duration::from_secs(2));
        let t = Timeline::default();
        a.record(&t, 3, false);
        assert_eq!(a.per_second, vec![0, 0, 0, 1]);
        let mut b = Tally::new(Duration::from_secs(2));
        b.record(&t, 0, false);
        b.add(a).unwrap();
        assert_eq!(b.per_second, vec![1, 0, 0, 1]);
    }
}
