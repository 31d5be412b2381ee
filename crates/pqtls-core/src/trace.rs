//! Trace events and the attribution rule.
//!
//! A backend records, on each side, a sequence of [`Event`]s stamped with the calling
//! thread's CPU clock (`CLOCK_THREAD_CPUTIME_ID`) and the monotonic wall clock. The
//! attribution rule ([`attribute`]) turns one side's events into named steps:
//!
//! 1. CPU time is counted only inside *calls* into the TLS stack (`CallStart` … `CallEnd`);
//!    everything the driver does between calls (moving bytes) is not the stack's cost.
//! 2. Each interval between two consecutive events belongs to the step *opened* by the
//!    earlier event:
//!    - `CallStart { name: None }` and `Boundary` (the stack's state machine moves on, e.g.
//!      OpenSSL's `SSL_CB_LOOP`) open a *pending* step, named by the next message event:
//!      `read_<m>` if it is `Read(m)` (receiving and decrypting `m`), `write_<m>` if it is
//!      `Wrote(m)` (building, signing and encrypting `m`), `io` if the call ends first;
//!    - `CallStart { name: Some(s) }` opens `s` (for stacks without message hooks);
//!    - `Read(m)` (message `m` fully received) opens `process_<m>`: parsing and acting on it
//!      (for a ServerHello: decapsulation and key schedule; for a Certificate: chain
//!      parsing and path validation);
//!    - `Wrote(m)` records the message's size and opens `write_<m>` unless a step other than a
//!      pending one is open, so post-write work (e.g. deriving keys after a ServerHello) stays
//!      with the message that caused it;
//!    - `OpStart(op)` opens the step `op` (a timed crypto operation) until `OpEnd`, after
//!      which the enclosing step resumes.
//!    - `Message(m)` (rustls: `m` entered the transcript) only splits the interval: the
//!      open step goes on.
//! 3. Steps with the same name are summed. By construction the steps of a side add up to
//!    that side's total CPU time inside calls.
//!
//! These are the *stack steps*. [`attribute`] then maps every interval to a canonical step
//! ([`crate::steps`]) with the stack's pure [`StepMap`] (carried by the [`Trace`]): a
//! sample's `steps` are canonical and `substeps` keep the stack steps under their parent
//! (`<canonical>/<stack step>`); both add up to the side's total.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Handshake message types and their names are the wire codec's (one definition for every
/// crate that reads TLS).
pub use pqtls_tls13::wire::{CompressedHeader, HsType, HRR_RANDOM};

/// Which end of the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Side {
    Client,
    Server,
}

impl Side {
    pub fn name(self) -> &'static str {
        match self {
            Side::Client => "client",
            Side::Server => "server",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventKind {
    CallStart {
        name: Option<&'static str>,
    },
    CallEnd,
    Boundary,
    Read(HsType),
    Wrote(HsType),
    OpStart(&'static str),
    OpEnd,
    /// Message `m` entered this side's handshake transcript (stacks without a message
    /// callback: rustls' transcript hash). A marker for the canonical step mapping: it
    /// splits an interval but does not change the stack step.
    Message(HsType),
}

/// One event; `bytes` is the message length including its 4-byte header for `Read`/`Wrote`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    pub kind: EventKind,
    pub cpu_ns: u64,
    pub wall_ns: u64,
    pub bytes: u32,
}

impl Event {
    /// An event inside a call that read the thread CPU clock (a call's start and end always
    /// do): under `Clock::Split` an anchor ([`ANCHOR_WALL_NS`]); under `Clock::Cpu`, every one.
    pub fn reads_cpu_inside_call(&self) -> bool {
        self.cpu_ns != NOT_READ && !matches!(self.kind, EventKind::CallStart { .. } | EventKind::CallEnd)
    }
}

#[allow(unsafe_code)] // FFI edge: the clock system call.
fn clock(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes into the timespec we own; both clock ids exist on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// CPU time of the calling thread, in ns.
pub fn thread_cpu_ns() -> u64 {
    clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Monotonic wall clock, in ns.
pub fn wall_ns() -> u64 {
    clock(libc::CLOCK_MONOTONIC)
}

/// How events inside a call are stamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Clock {
    /// Every call into the stack is bracketed by the thread CPU clock; events inside a call
    /// read only the monotonic clock (vDSO, tens of ns) — and the thread CPU clock too once
    /// [`ANCHOR_WALL_NS`] of wall time has passed since its last reading, so a long call is
    /// cut into *segments* whose CPU time is read. A segment's CPU time is split among its
    /// intervals in proportion to their wall time. Exact when the thread ran the whole
    /// segment (checked per segment: see `SideSample::unscheduled_ns`).
    #[default]
    Split = 0,
    /// Every event reads the thread CPU clock too (a system call: ~0.5 µs each on some VMs).
    Cpu = 1,
    /// Every event reads an [`InstructionCounter`] instead of a clock: the steps are
    /// instructions retired by the calling thread, which repeat where time does not
    /// (docs/instructions.md).
    Instructions = 2,
}

impl Clock {
    pub fn name(self) -> &'static str {
        match self {
            Clock::Split => "split",
            Clock::Cpu => "cpu",
            Clock::Instructions => "instructions",
        }
    }

    pub fn parse(s: &str) -> crate::Result<Clock> {
        match s.to_ascii_lowercase().as_str() {
            "split" => Ok(Clock::Split),
            "cpu" => Ok(Clock::Cpu),
            "instructions" => Ok(Clock::Instructions),
            _ => Err(crate::Error::unknown("clock", s, ["split", "cpu", "instructions"])),
        }
    }

    /// What a side's step and total figures are in under this clock.
    pub fn unit(self) -> CostUnit {
        match self {
            Clock::Instructions => CostUnit::Instructions,
            Clock::Split | Clock::Cpu => CostUnit::Ns,
        }
    }
}

/// The unit of an in-situ record's step and total figures (its fields keep their `_cpu_ns`
/// names: under `clock = "instructions"` they hold instruction counts, and `unit` says so).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CostUnit {
    /// CPU nanoseconds (the thread CPU clock).
    #[default]
    Ns,
    /// Instructions retired.
    Instructions,
}

impl CostUnit {
    pub fn name(self) -> &'static str {
        match self {
            CostUnit::Ns => "ns",
            CostUnit::Instructions => "instructions",
        }
    }

    pub fn is_ns(&self) -> bool {
        *self == CostUnit::Ns
    }
}

/// Counts the instructions the calling thread retires, for [`Clock::Instructions`]: a
/// hardware counter read per thread (`perf_event_open`) or valgrind's callgrind, whose counts
/// are dumped at each reading and resolved afterwards. Made by the command that runs the
/// measurement (it may have to re-execute the process under valgrind); a trace holds it.
pub trait InstructionCounter: Send + Sync + std::fmt::Debug {
    /// A reading for the calling thread: the count itself, or a token that
    /// [`InstructionCounter::resolve`] turns into one.
    fn read(&self) -> u64;
    /// Turns one thread's readings, in the order they were taken, into counts of that thread's
    /// instructions since a fixed point (differences between them are what is attributed).
    /// A reading that cannot be resolved becomes 0 and sets [`InstructionCounter::error`].
    fn resolve(&self, readings: &mut [u64]);
    /// How the counts are obtained, for the record.
    fn counting(&self) -> crate::record::Counting;
    /// The first reading or resolution that failed (the counts since are not to be used).
    fn error(&self) -> Option<String>;
}

/// `cpu_ns` of an event whose CPU clock was not read (inside a call, `Clock::Split`).
pub const NOT_READ: u64 = u64::MAX;

/// Under `Clock::Split`, an event inside a call reads the thread CPU clock too when this much
/// wall time has passed since the call's last reading of it: an *anchor*. A preemption's
/// gap is then placed among the intervals of one segment (between two anchors), never taken
/// from a step of another segment, and a segment's intervals other than its last total less
/// than this — bounding what a second preemption in one segment can misplace. Cost: at most
/// one CPU-clock read (~0.5 µs on our VMs) per 50 µs of a call, ≤ 1 %; 5–6 per handshake of
/// the default experiment's configurations (docs/attribution.md, docs/benchmarks.md §1).
pub const ANCHOR_WALL_NS: u64 = 50_000;

/// Maps one side's intervals (stack steps) to canonical step names, one per interval: a
/// pure function each stack provides (see [`crate::steps`]).
pub type StepMap = fn(side: Side, events: &[Event], intervals: &[Interval]) -> Vec<&'static str>;

/// One side's events during one handshake. When not detailed (untraced runs, used to
/// measure the tracer's overhead), only `CallStart`/`CallEnd` are stamped, so totals stay
/// available.
#[derive(Debug)]
pub struct Trace {
    pub events: Vec<Event>,
    pub detailed: bool,
    pub clock: Clock,
    /// Which end this trace is of.
    pub side: Side,
    /// The stack's canonical step mapping; `None`: steps are the stack's own.
    pub step_map: Option<StepMap>,
    /// Encrypted handshake records this side wrote whose messages could not be measured
    /// (see [`SideSample::unmeasured_records`]).
    pub unmeasured_records: u32,
    /// What every event reads under [`Clock::Instructions`].
    pub counter: Option<std::sync::Arc<dyn InstructionCounter>>,
    /// Wall time of the open call's last thread-CPU-clock reading (`Clock::Split` anchors);
    /// `u64::MAX` between calls, where events (e.g. a message measured after the call that
    /// wrote it) read no clock but the wall clock.
    last_cpu_read_wall_ns: u64,
    /// The thread's heap counters read at each event, when memory is counted
    /// ([`Trace::with_memory`], [`crate::memory`]).
    pub memory: Option<Vec<crate::memory::MemStamp>>,
    /// Thread CPU ns spent verifying the peer's certificate chain since the last
    /// [`Trace::clear`], when timed ([`Trace::with_verification_timed`]; `None`: not timed).
    pub verification_cpu_ns: Option<u64>,
    /// The header of each CompressedCertificate this side wrote (RFC 8879), in order: what
    /// it decompresses to (the backends read it from the message they report as `Wrote`).
    pub compressed: Vec<CompressedHeader>,
}

impl Trace {
    /// A trace with an explicit clock policy; steps are the stack's own until
    /// [`Trace::with_steps`] gives the stack's canonical mapping.
    pub fn new(detailed: bool, clock: Clock) -> Trace {
        Trace {
            events: Vec::with_capacity(64),
            detailed,
            clock,
            side: Side::Client,
            step_map: None,
            unmeasured_records: 0,
            counter: None,
            last_cpu_read_wall_ns: u64::MAX,
            memory: None,
            verification_cpu_ns: None,
            compressed: Vec::new(),
        }
    }

    /// Times the peer's chain verification with the thread CPU clock (two readings per
    /// handshake, whether the trace is detailed or not): [`Trace::verification_cpu_ns`].
    pub fn with_verification_timed(mut self, on: bool) -> Trace {
        self.verification_cpu_ns = on.then_some(0);
        self
    }

    /// The start of a chain verification: the thread CPU clock when it is timed.
    #[inline]
    pub fn verification_start(&self) -> Option<u64> {
        self.verification_cpu_ns.map(|_| thread_cpu_ns())
    }

    /// The end of the chain verification that started at `start` ([`Trace::verification_start`]).
    #[inline]
    pub fn verification_end(&mut self, start: Option<u64>) {
        if let (Some(total), Some(start)) = (self.verification_cpu_ns.as_mut(), start) {
            *total += thread_cpu_ns().saturating_sub(start);
        }
    }

    /// The counter every event reads under [`Clock::Instructions`] (the endpoint options').
    pub fn with_counter(mut self, counter: Option<std::sync::Arc<dyn InstructionCounter>>) -> Trace {
        self.counter = counter;
        self
    }

    /// The call boundaries' reading: the thread CPU clock, or the instruction counter.
    #[inline]
    fn cost(&self) -> u64 {
        match (&self.counter, self.clock) {
            (Some(c), Clock::Instructions) => c.read(),
            _ => thread_cpu_ns(),
        }
    }

    /// Reads the thread's heap counters at every event too ([`crate::memory`]). Room for
    /// [`MEMORY_EVENTS`] events is made now, so that recording events inside calls does not
    /// allocate (and count) — unless a handshake has more.
    pub fn with_memory(mut self, on: bool) -> Trace {
        if on {
            self.events.reserve(MEMORY_EVENTS);
            self.memory = Some(Vec::with_capacity(MEMORY_EVENTS));
        }
        self
    }

    pub fn with_steps(mut self, side: Side, map: StepMap) -> Trace {
        self.side = side;
        self.step_map = Some(map);
        self
    }

    #[inline]
    pub fn push(&mut self, kind: EventKind, bytes: u32) {
        let boundary_of_call = matches!(kind, EventKind::CallStart { .. } | EventKind::CallEnd);
        if !self.detailed && !boundary_of_call {
            return;
        }
        // Order matters: a call starts with the CPU clock and ends with it, so the call's
        // CPU interval encloses its wall interval's reads.
        let (cpu_ns, wall_ns) = match kind {
            EventKind::CallStart { .. } => {
                let c = self.cost();
                let w = wall_ns();
                self.last_cpu_read_wall_ns = w;
                (c, w)
            }
            EventKind::CallEnd => {
                let w = wall_ns();
                self.last_cpu_read_wall_ns = u64::MAX;
                (self.cost(), w)
            }
            // Between calls nothing is attributed: a count there would only cost a callgrind dump.
            _ if self.clock == Clock::Instructions && self.last_cpu_read_wall_ns == u64::MAX => (NOT_READ, wall_ns()),
            _ if self.clock != Clock::Split => (self.cost(), wall_ns()),
            _ => {
                let w = wall_ns();
                if w.saturating_sub(self.last_cpu_read_wall_ns) >= ANCHOR_WALL_NS {
                    self.last_cpu_read_wall_ns = w;
                    (thread_cpu_ns(), w)
                } else {
                    (NOT_READ, w)
                }
            }
        };
        self.events.push(Event { kind, cpu_ns, wall_ns, bytes });
        if let Some(m) = &mut self.memory {
            m.push(crate::memory::stamp());
        }
    }

    /// CPU inside the stack's calls recorded from event `from` on (a call's end reading minus
    /// its start reading; under [`Clock::Instructions`], unresolved readings): what the calls
    /// made since a mark (`events.len()` then) cost — e.g. one flight's share of a handshake.
    pub fn calls_cpu_ns_since(&self, from: usize) -> u64 {
        let mut start = None;
        let mut total = 0;
        for e in self.events.get(from..).unwrap_or(&[]) {
            match e.kind {
                EventKind::CallStart { .. } => start = Some(e.cpu_ns),
                EventKind::CallEnd => total += start.take().map_or(0, |s| e.cpu_ns.saturating_sub(s)),
                _ => {}
            }
        }
        total
    }

    pub fn clear(&mut self) {
        self.events.clear();
        self.compressed.clear();
        self.unmeasured_records = 0;
        if let Some(v) = &mut self.verification_cpu_ns {
            *v = 0;
        }
        self.last_cpu_read_wall_ns = u64::MAX;
        if let Some(m) = &mut self.memory {
            m.clear();
        }
    }
}

/// Events a memory-counting trace makes room for up front (a handshake has about 20–120 per
/// side).
pub const MEMORY_EVENTS: usize = 1024;

/// The per-step result of one side of one handshake.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SideSample {
    /// CPU ns per canonical step ([`crate::steps`]), in the order steps first happened.
    pub steps: IndexMap<String, u64>,
    /// CPU ns per stack step under its canonical parent, keyed `<canonical>/<stack step>`
    /// (e.g. `certificate_verify/sign`); the sub-steps of a parent add up to it.
    #[serde(default)]
    pub substeps: IndexMap<String, u64>,
    /// CPU ns inside calls into the stack (= sum of steps).
    pub total_cpu_ns: u64,
    /// Wall ns inside calls into the stack.
    pub total_wall_ns: u64,
    /// Σ over calls of (wall − CPU) time: how long the thread was not running inside calls
    /// (preempted). Near 0 in an undisturbed in-memory handshake.
    #[serde(default)]
    pub unscheduled_ns: u64,
    /// The part of `unscheduled_ns` the split clock could not place in one interval (see
    /// [`disturbed`]): calls whose gap fits in more than one of their intervals. 0 with
    /// `Clock::Cpu`.
    #[serde(default)]
    pub unlocated_ns: u64,
    /// Events inside calls that read the thread CPU clock: every one under `Clock::Cpu`, the
    /// anchors ([`ANCHOR_WALL_NS`]) under `Clock::Split` — what the tracer's overhead counts.
    #[serde(default)]
    pub cpu_reads: u32,
    /// Encrypted handshake records this side wrote that could not be decrypted to measure
    /// the messages inside (rustls; each holds at least one message whose size is missing
    /// from `wrote`). 0 when every message was measured.
    #[serde(default)]
    pub unmeasured_records: u32,
    /// Messages written by this side: (type, bytes incl. 4-byte header).
    #[serde(skip)]
    pub wrote: Vec<(HsType, u32)>,
    /// The headers of the CompressedCertificates among `wrote`, in order.
    #[serde(skip)]
    pub compressed: Vec<CompressedHeader>,
    /// Heap allocations per step, when memory was counted ([`crate::memory`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<crate::memory::SideMemory>,
}

/// The disturbance rule: a side was descheduled inside its calls for more than 2 µs + 2 %
/// of their wall time (`unscheduled_ns`). Its total CPU time is exact either way (the thread
/// CPU clock brackets every call). See docs/attribution.md.
pub fn disturbed(s: &SideSample) -> bool {
    s.unscheduled_ns > threshold_ns(s.total_wall_ns)
}

/// Whether a side's steps go into the per-step statistics under `clock`:
/// - `Clock::Cpu`: always — every interval is measured with the CPU clock itself, so a gap
///   is charged to no step; `Clock::Instructions` likewise (a preemption retires nothing);
/// - `Clock::Split`: the call's CPU time is shared among its steps by wall time, and a
///   preempted step's wall time includes the gap. The attribution takes each call's gap out
///   of the one interval that can hold it (the only one at least as long as the gap: that
///   step absorbs it, the others keep their time); a side is left out of the step statistics
///   only when gaps above the threshold could not be placed so (`unlocated_ns`).
pub fn steps_trusted(clock: Clock, s: &SideSample) -> bool {
    clock != Clock::Split || s.unlocated_ns <= threshold_ns(s.total_wall_ns)
}

/// One attributed interval: the CPU (and wall) time between event `end - 1` and event `end`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Interval {
    pub end: usize,
    pub step: String,
    pub cpu_ns: u64,
    pub wall_ns: u64,
}

/// One side's sample: the attribution rule applied to its events, its intervals mapped to
/// the stack's canonical steps (sub-steps keep the stack's own names).
///
/// Under [`Clock::Instructions`] the readings are first resolved into counts by the trace's
/// counter, and the sample's "CPU" figures are instructions: it has no unscheduled time
/// (wall time minus an instruction count means nothing; a preemption retires nothing).
pub fn attribute(trace: &Trace) -> SideSample {
    let counted;
    let events = match (&trace.counter, trace.clock) {
        (Some(counter), Clock::Instructions) => {
            // Events between calls read nothing (NOT_READ): only the others are resolved.
            let mut readings: Vec<u64> = trace.events.iter().map(|e| e.cpu_ns).filter(|&c| c != NOT_READ).collect();
            counter.resolve(&mut readings);
            let mut counts = readings.into_iter();
            counted = trace
                .events
                .iter()
                .map(|e| Event {
                    cpu_ns: if e.cpu_ns == NOT_READ { NOT_READ } else { counts.next().unwrap_or(0) },
                    ..*e
                })
                .collect::<Vec<_>>();
            &counted[..]
        }
        _ => &trace.events[..],
    };
    let (mut out, intervals) = attribute_intervals(events);
    if trace.clock == Clock::Instructions {
        out.unscheduled_ns = 0;
        out.unlocated_ns = 0;
    }
    out.unmeasured_records = trace.unmeasured_records;
    out.compressed = trace.compressed.clone();
    match trace.step_map {
        None => {
            out.memory = trace
                .memory
                .as_ref()
                .map(|m| crate::memory::attribute(m, intervals.iter().map(|iv| (iv.end, iv.step.as_str()))));
            for iv in intervals {
                *out.steps.entry(iv.step).or_insert(0) += iv.cpu_ns;
            }
        }
        Some(map) => {
            let names = map(trace.side, events, &intervals);
            debug_assert_eq!(names.len(), intervals.len());
            out.memory = trace
                .memory
                .as_ref()
                .map(|m| crate::memory::attribute(m, intervals.iter().map(|iv| iv.end).zip(names.iter().copied())));
            for (iv, canonical) in intervals.into_iter().zip(names) {
                *out.steps.entry(canonical.to_string()).or_insert(0) += iv.cpu_ns;
                *out.substeps.entry(format!("{canonical}/{}", iv.step)).or_insert(0) += iv.cpu_ns;
            }
        }
    }
    out
}

/// The attribution rule with the stack's own step names (no canonical mapping).
pub fn attribute_stack(events: &[Event]) -> SideSample {
    let (mut out, intervals) = attribute_intervals(events);
    for iv in intervals {
        *out.steps.entry(iv.step).or_insert(0) += iv.cpu_ns;
    }
    out
}

/// The attribution rule, interval by interval: the side's totals (steps left empty) and
/// every interval inside a call with the step it belongs to and its share of CPU time.
pub fn attribute_intervals(events: &[Event]) -> (SideSample, Vec<Interval>) {
    let mut out = SideSample::default();
    let mut all = Vec::new();
    // The open step: None while pending (named by the next message event).
    let mut current: Option<String> = None;
    // Enclosing steps while inside an operation.
    let mut enclosing: Vec<Option<String>> = Vec::new();
    // The intervals of the current call: (end event, step, wall ns, the end event's CPU
    // reading or NOT_READ); a pending interval has an empty name until resolved.
    let mut intervals: Vec<(usize, String, u64, u64)> = Vec::new();
    let mut pending: Vec<usize> = Vec::new();
    let mut start: Option<&Event> = None;
    let mut prev: Option<&Event> = None;

    fn resolve(intervals: &mut [(usize, String, u64, u64)], pending: &mut Vec<usize>, name: &str) {
        for i in pending.drain(..) {
            intervals[i].1 = name.to_string();
        }
    }

    for (idx, ev) in events.iter().enumerate() {
        if let (Some(p), Some(_)) = (prev, start) {
            if ev.reads_cpu_inside_call() {
                out.cpu_reads += 1;
            }
            let wall = ev.wall_ns.saturating_sub(p.wall_ns);
            let cpu = ev.cpu_ns;
            match &current {
                Some(name) => intervals.push((idx, name.clone(), wall, cpu)),
                None => {
                    pending.push(intervals.len());
                    intervals.push((idx, String::new(), wall, cpu));
                }
            }
        }
        match ev.kind {
            EventKind::CallStart { name } => {
                start = Some(ev);
                current = name.map(str::to_string);
                enclosing.clear();
                intervals.clear();
                pending.clear();
            }
            EventKind::CallEnd => {
                resolve(&mut intervals, &mut pending, "io");
                if let Some(s) = start.take() {
                    let call_cpu = ev.cpu_ns.saturating_sub(s.cpu_ns);
                    let call_wall = ev.wall_ns.saturating_sub(s.wall_ns);
                    out.total_cpu_ns += call_cpu;
                    out.total_wall_ns += call_wall;
                    out.unscheduled_ns += call_wall.saturating_sub(call_cpu);
                    let (shares, unlocated) = split_call(&intervals, s.cpu_ns);
                    out.unlocated_ns += unlocated;
                    all.extend(intervals.drain(..).zip(shares).map(|((end, step, wall_ns, _), cpu_ns)| Interval {
                        end,
                        step,
                        cpu_ns,
                        wall_ns,
                    }));
                }
            }
            EventKind::Boundary => {
                if current.is_some() {
                    current = None;
                }
            }
            EventKind::Read(m) => {
                resolve(&mut intervals, &mut pending, &format!("read_{}", m.slug()));
                current = Some(format!("process_{}", m.slug()));
            }
            EventKind::Wrote(m) => {
                if current.is_none() {
                    let name = format!("write_{}", m.slug());
                    resolve(&mut intervals, &mut pending, &name);
                    current = Some(name);
                }
                out.wrote.push((m, ev.bytes));
            }
            EventKind::OpStart(op) => {
                // A pending interval stays pending across the operation.
                enclosing.push(current.take());
                current = Some(op.to_string());
            }
            EventKind::OpEnd => {
                current = enclosing.pop().unwrap_or(None);
            }
            EventKind::Message(_) => {}
        }
        prev = Some(ev);
    }
    (out, all)
}

/// Distributes a call's CPU time over its intervals, segment by segment: a segment ends at
/// every event stamped with the thread CPU clock (every event under `Clock::Cpu`; the call's
/// end and the anchors under `Clock::Split`), so its CPU time is read, not inferred. Inside a
/// segment of several intervals the CPU time is split in proportion to their wall time —
/// after taking the segment's unscheduled time (wall − CPU), when it is above the
/// disturbance threshold, out of the one interval it can have happened in: the only interval
/// whose wall time is at least the gap. When more than one could hold it, the gap is left
/// spread and returned as *unlocated*. The parts add up to each segment's CPU time exactly
/// (the remainder of integer division goes to its largest interval), hence to the call's.
fn split_call(intervals: &[(usize, String, u64, u64)], call_start_cpu: u64) -> (Vec<u64>, u64) {
    let mut parts = Vec::with_capacity(intervals.len());
    let mut unlocated = 0;
    let (mut first, mut segment_start_cpu) = (0, call_start_cpu);
    for (k, iv) in intervals.iter().enumerate() {
        if iv.3 == NOT_READ {
            continue;
        }
        let walls: Vec<u64> = intervals[first..=k].iter().map(|i| i.2).collect();
        let (shares, gap) = split_segment(&walls, iv.3.saturating_sub(segment_start_cpu));
        parts.extend(shares);
        unlocated += gap;
        (first, segment_start_cpu) = (k + 1, iv.3);
    }
    // The call's last interval ends at its CallEnd, which is always stamped; a trace cut
    // short gives its unstamped tail nothing.
    parts.resize(intervals.len(), 0);
    (parts, unlocated)
}

/// One segment: its CPU time shared by wall time, the gap placed (see [`split_call`]).
fn split_segment(walls: &[u64], cpu_ns: u64) -> (Vec<u64>, u64) {
    let mut weights = walls.to_vec();
    let wall_ns: u64 = walls.iter().sum();
    let mut unlocated = 0;
    let gap = wall_ns.saturating_sub(cpu_ns);
    if weights.len() > 1 && gap > threshold_ns(wall_ns) {
        let mut holders = (0..weights.len()).filter(|&k| weights[k] >= gap);
        match (holders.next(), holders.next()) {
            (Some(k), None) => weights[k] -= gap,
            _ => unlocated = gap,
        }
    }
    let total: u128 = weights.iter().map(|&w| w as u128).sum();
    let mut parts: Vec<u64> =
        weights.iter().map(|&w| (cpu_ns as u128 * w as u128).checked_div(total).unwrap_or(0) as u64).collect();
    let assigned: u64 = parts.iter().sum();
    if let Some(biggest) = (0..parts.len()).max_by_key(|&k| weights[k]) {
        parts[biggest] += cpu_ns.saturating_sub(assigned);
    }
    (parts, unlocated)
}

/// Unscheduled time that counts as a disturbance in calls of `wall_ns`: 2 µs + 2 %.
fn threshold_ns(wall_ns: u64) -> u64 {
    2_000 + wall_ns / 50
}

/// Record-layer accounting of one direction, from the bytes a side sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordCount {
    pub bytes: u64,
    pub records: u64,
}

/// Counts TLS records in a byte stream: incremental, since records can be split across
/// writes (the codec's [`pqtls_tls13::wire::Boundaries`] keeps a partial header between calls).
#[derive(Clone, Debug, Default)]
pub struct RecordCounter {
    pub count: RecordCount,
    boundaries: pqtls_tls13::wire::Boundaries,
}

impl RecordCounter {
    pub fn feed(&mut self, data: &[u8]) {
        self.count.bytes += data.len() as u64;
        let records = &mut self.count.records;
        self.boundaries.feed(data, |_| *records += 1);
    }

    pub fn reset(&mut self) {
        *self = RecordCounter::default();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(kind: EventKind, cpu: u64) -> Event {
        Event { kind, cpu_ns: cpu, wall_ns: cpu * 2, bytes: 10 }
    }

    /// A counter whose readings are tokens (as callgrind's are): token k resolves to k² so
    /// that intervals differ.
    #[derive(Debug, Default)]
    struct Tokens(std::sync::atomic::AtomicU64);

    impl InstructionCounter for Tokens {
        fn read(&self) -> u64 {
            self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst) + 1
        }
        fn resolve(&self, readings: &mut [u64]) {
            for r in readings {
                *r *= *r;
            }
        }
        fn counting(&self) -> crate::record::Counting {
            crate::record::Counting::default()
        }
        fn error(&self) -> Option<String> {
            None
        }
    }

    /// Under `Clock::Instructions` every event inside a call reads the counter, the readings are
    /// resolved before attribution, the steps add up to the total, and an event between calls
    /// reads nothing (under callgrind a reading is a dump).
    #[test]
    fn instructions_are_read_at_every_event_in_a_call_and_resolved() {
        use EventKind::*;
        let counter = std::sync::Arc::new(Tokens::default());
        let mut t = Trace::new(true, Clock::Instructions).with_counter(Some(counter.clone()));
        t.push(CallStart { name: None }, 0); // token 1 → 1
        t.push(Read(HsType::ClientHello), 10); // 2 → 4
        t.push(OpStart("sign"), 0); // 3 → 9
        t.push(OpEnd, 0); // 4 → 16
        t.push(CallEnd, 0); // 5 → 25
        t.push(Wrote(HsType::Finished), 36); // between calls: not read
        assert_eq!(t.events[5].cpu_ns, NOT_READ);
        assert_eq!(counter.0.load(std::sync::atomic::Ordering::SeqCst), 5);
        let s = attribute(&t);
        assert_eq!(s.total_cpu_ns, 24);
        assert_eq!(s.steps.values().sum::<u64>(), 24);
        assert_eq!(s.steps["read_client_hello"], 3);
        assert_eq!(s.steps["sign"], 7);
        assert_eq!(s.steps["process_client_hello"], 5 + 9);
        assert_eq!(s.unscheduled_ns, 0);
        assert!(steps_trusted(Clock::Instructions, &s));
    }

    #[test]
    fn server_first_flight_is_attributed_per_message_and_sums_to_total() {
        use EventKind::*;
        use HsType::*;
        let events = vec![
            ev(CallStart { name: None }, 100),
            ev(Boundary, 105),
            ev(Read(ClientHello), 110),
            ev(Boundary, 150),
            ev(OpStart("kem_encapsulate"), 160),
            ev(OpEnd, 190),
            ev(Wrote(ServerHello), 200),
            ev(Boundary, 230),
            ev(Wrote(Certificate), 260),
            ev(CallEnd, 270),
            // Between calls: not counted.
            ev(CallStart { name: None }, 1000),
            ev(Read(Finished), 1010),
            ev(CallEnd, 1040),
        ];
        let s = attribute_stack(&events);
        assert_eq!(s.steps["read_client_hello"], 10);
        assert_eq!(s.steps["process_client_hello"], 40);
        // 150..160 and 190..200 (pending, named by the Wrote), then post-write work 200..230.
        assert_eq!(s.steps["write_server_hello"], 10 + 10 + 30);
        assert_eq!(s.steps["kem_encapsulate"], 30);
        assert_eq!(s.steps["write_certificate"], 30 + 10);
        assert_eq!(s.steps["read_finished"], 10);
        assert_eq!(s.steps["process_finished"], 30);
        assert_eq!(s.total_cpu_ns, 170 + 40);
        assert_eq!(s.steps.values().sum::<u64>(), s.total_cpu_ns);
        assert_eq!(s.total_wall_ns, 2 * (170 + 40));
        assert_eq!(s.wrote, vec![(ServerHello, 10), (Certificate, 10)]);
        let order: Vec<&str> = s.steps.keys().map(|k| k.as_str()).collect();
        assert_eq!(order[0], "read_client_hello");
    }

    /// One call of a server's first flight — start, ClientHello read, a state boundary,
    /// ServerHello written, end — with each event's (CPU reading or NOT_READ, wall time):
    /// intervals `read_client_hello`, `process_client_hello`, `write_server_hello`, and the
    /// end's `write_server_hello` again.
    fn server_call(stamps: [(u64, u64); 5]) -> Vec<Event> {
        use EventKind::*;
        use HsType::*;
        let kinds = [CallStart { name: None }, Read(ClientHello), Boundary, Wrote(ServerHello), CallEnd];
        kinds
            .into_iter()
            .zip(stamps)
            .map(|(kind, (cpu_ns, wall_ns))| Event { kind, cpu_ns, wall_ns, bytes: 1 })
            .collect()
    }

    #[test]
    fn split_clock_shares_the_call_cpu_by_wall_time_and_adds_up_exactly() {
        // 1 000 ns of wall, but the thread ran only 997 ns of it.
        let events =
            server_call([(1_000, 10_000), (NOT_READ, 10_100), (NOT_READ, 10_400), (NOT_READ, 11_000), (1_997, 11_000)]);
        let s = attribute_stack(&events);
        assert_eq!(s.total_cpu_ns, 997);
        assert_eq!(s.unscheduled_ns, 3);
        assert_eq!(s.steps.values().sum::<u64>(), 997);
        assert_eq!(s.steps["read_client_hello"], 99); // 10 % of 997, rounded down
        assert_eq!(s.steps["process_client_hello"], 299);
        assert_eq!(s.steps["write_server_hello"], 599); // 60 % + the rounding remainder
    }

    /// A preemption of 50 µs inside `process_client_hello` of a call whose steps really took
    /// 100, 300 and 600 ns of CPU.
    fn preempted(clock: Clock) -> Vec<Event> {
        let cpu = |c: u64| if clock == Clock::Cpu { c } else { NOT_READ };
        // process_client_hello: 300 ns of CPU, but 50 µs off the CPU in the middle.
        server_call([
            (1_000, 10_000),
            (cpu(1_100), 10_100),
            (cpu(1_400), 60_400),
            (cpu(2_000), 61_000),
            (2_000, 61_000),
        ])
    }

    #[test]
    fn under_the_split_clock_the_preempted_step_absorbs_the_gap_and_the_others_keep_their_time() {
        let s = attribute_stack(&preempted(Clock::Split));
        assert_eq!(s.total_cpu_ns, 1_000);
        assert_eq!(s.unscheduled_ns, 50_000);
        assert!(disturbed(&s));
        // Only process_client_hello (50.3 µs of wall) can hold a 50 µs gap: it is taken out
        // there, and the call's CPU is split by what is left.
        assert_eq!(s.unlocated_ns, 0);
        assert!(steps_trusted(Clock::Split, &s));
        assert_eq!(
            (s.steps["read_client_hello"], s.steps["process_client_hello"], s.steps["write_server_hello"]),
            (100, 300, 600)
        );
        // Steps still add up to the total.
        assert_eq!(s.steps.values().sum::<u64>(), 1_000);
    }

    #[test]
    fn a_gap_that_fits_in_several_steps_is_unlocated_and_the_side_is_left_out() {
        // Intervals of 10, 30 and 60 µs of wall and a 10 µs gap: the last two could both
        // hold it.
        let events =
            server_call([(0, 0), (NOT_READ, 10_000), (NOT_READ, 40_000), (NOT_READ, 100_000), (90_000, 100_000)]);
        let s = attribute_stack(&events);
        assert_eq!(s.unscheduled_ns, 10_000);
        assert!(disturbed(&s));
        assert_eq!(s.unlocated_ns, 10_000);
        assert!(!steps_trusted(Clock::Split, &s));
        // Spread by wall time, still adding up.
        assert_eq!(s.steps.values().sum::<u64>(), 90_000);
        assert_eq!(s.steps["read_client_hello"], 9_000);
    }

    #[test]
    fn two_preemptions_in_one_call_are_placed_each_in_its_own_segment() {
        // Steps of 10, 200, 300 and 5 µs of CPU; 1 ms off the CPU inside the 200 µs step and
        // 3 ms inside the 300 µs one. The events ending the long steps came ≥ 50 µs after the
        // last CPU reading, so they read it (anchors).
        let events =
            server_call([(0, 0), (NOT_READ, 10_000), (210_000, 1_210_000), (510_000, 4_510_000), (515_000, 4_515_000)]);
        let s = attribute_stack(&events);
        assert_eq!((s.total_cpu_ns, s.unscheduled_ns, s.unlocated_ns), (515_000, 4_000_000, 0));
        assert!(disturbed(&s) && steps_trusted(Clock::Split, &s));
        assert_eq!(
            (s.steps["read_client_hello"], s.steps["process_client_hello"], s.steps["write_server_hello"]),
            (10_000, 200_000, 300_000 + 5_000)
        );
        assert_eq!(s.steps.values().sum::<u64>(), s.total_cpu_ns);
        // The rule without anchors (one segment per call) with 250 µs off the CPU in the
        // 200 µs step and 3 ms in the 300 µs one: the summed gap (3.25 ms) fits only in the
        // 3.3 ms interval and was taken out of it — a 300 µs step got 50 µs of weight.
        let unanchored =
            server_call([(0, 0), (NOT_READ, 10_000), (NOT_READ, 460_000), (NOT_READ, 3_760_000), (515_000, 3_765_000)]);
        let old = attribute_stack(&unanchored);
        assert!(steps_trusted(Clock::Split, &old));
        assert!(old.steps["write_server_hello"] < 300_000 / 4, "{:?}", old.steps);
        let mut anchored = unanchored;
        (anchored[2].cpu_ns, anchored[3].cpu_ns) = (210_000, 510_000);
        let new = attribute_stack(&anchored);
        assert_eq!((new.steps["process_client_hello"], new.steps["write_server_hello"]), (200_000, 305_000));
    }

    #[test]
    fn the_split_clock_reads_the_cpu_clock_only_at_anchors_50_us_apart() {
        let mut t = Trace::new(true, Clock::Split);
        let spin = |ns: u64| {
            let t0 = wall_ns();
            while wall_ns() - t0 < ns {}
        };
        t.push(EventKind::CallStart { name: None }, 0);
        for k in 0..40 {
            spin(if k % 10 == 9 { 2 * ANCHOR_WALL_NS } else { 1_000 });
            t.push(EventKind::Boundary, 0);
        }
        t.push(EventKind::CallEnd, 0);
        let stamped: Vec<&Event> = t.events.iter().filter(|e| e.cpu_ns != NOT_READ).collect();
        // Start, end, and at least the four events after a 100 µs spin.
        assert!(stamped.len() >= 6, "{} stamped", stamped.len());
        let mut last = t.events[0].wall_ns;
        for e in &t.events[1..t.events.len() - 1] {
            if e.cpu_ns == NOT_READ {
                assert!(e.wall_ns - last < ANCHOR_WALL_NS);
            } else {
                assert!(e.wall_ns - last >= ANCHOR_WALL_NS);
                last = e.wall_ns;
            }
        }
        let s = attribute_stack(&t.events);
        assert_eq!(s.steps.values().sum::<u64>(), s.total_cpu_ns);
        assert_eq!(s.cpu_reads as usize, stamped.len() - 2);
        // Between calls an event reads no CPU clock, however long after the last reading.
        spin(2 * ANCHOR_WALL_NS);
        t.push(EventKind::Wrote(HsType::Finished), 36);
        assert_eq!(t.events.last().unwrap().cpu_ns, NOT_READ);
    }

    #[test]
    fn under_the_cpu_clock_the_preempted_step_absorbs_nothing_and_the_others_keep_their_time() {
        let s = attribute_stack(&preempted(Clock::Cpu));
        assert!(disturbed(&s));
        assert!(steps_trusted(Clock::Cpu, &s));
        assert_eq!(s.steps["read_client_hello"], 100);
        assert_eq!(s.steps["process_client_hello"], 300);
        assert_eq!(s.steps["write_server_hello"], 600);
        assert_eq!(s.steps.values().sum::<u64>(), s.total_cpu_ns);
    }

    #[test]
    fn calls_without_reads_count_as_io_and_named_calls_use_their_name() {
        use EventKind::*;
        let s = attribute_stack(&[ev(CallStart { name: None }, 0), ev(CallEnd, 7)]);
        assert_eq!(s.steps["io"], 7);
        let s = attribute_stack(&[
            ev(CallStart { name: Some("process_packets") }, 0),
            ev(OpStart("verify"), 5),
            ev(OpEnd, 25),
            ev(CallEnd, 30),
        ]);
        assert_eq!(s.steps["process_packets"], 10);
        assert_eq!(s.steps["verify"], 20);
        assert_eq!(s.total_cpu_ns, 30);
    }

    #[test]
    fn records_are_counted_across_split_writes() {
        let mut rc = RecordCounter::default();
        let rec = |len: u16| {
            let mut v = vec![22, 3, 3];
            v.extend_from_slice(&len.to_be_bytes());
            v.extend(std::iter::repeat_n(0u8, len as usize));
            v
        };
        let mut stream = rec(100);
        stream.extend(rec(3));
        stream.extend(rec(0));
        for chunk in stream.chunks(3) {
            rc.feed(chunk);
        }
        assert_eq!(rc.count, RecordCount { bytes: 5 * 3 + 103, records: 3 });
    }
}
