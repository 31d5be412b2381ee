//! Heap accounting: what a handshake allocates, per side and per step.
//!
//! Every allocation a TLS stack makes is counted on the thread that makes it, in thread-local
//! counters (so the two sides of a two-thread transport are told apart by their threads, and
//! the sides of the in-memory transport — one thread, taking turns — by their calls: only the
//! counters' changes *inside* a side's calls are that side's). Three doors lead to them:
//!
//! - Rust code (rustls, pqtls' glue around OpenSSL): [`CountingAllocator`], the binary's
//!   `#[global_allocator]` (`pqtls-cli`'s `main.rs`; a test binary declares its own);
//! - C libraries with allocator hooks (`CRYPTO_set_mem_functions`: OpenSSL, aws-lc): the
//!   `extern "C"` functions [`c_malloc`], [`c_realloc`], [`c_free`], which each backend crate
//!   installs before its library's first allocation (`pqtls_openssl::count_allocations`,
//!   `pqtls_rustls::count_allocations`);
//! - nothing else: liboqs (FrodoKEM, Falcon, SLH-DSA, composites on rustls) calls `malloc`
//!   directly and is not counted, nor are glibc's own internal allocations.
//!
//! A trace asked to count memory ([`crate::trace::Trace::with_memory`]) reads the counters at
//! every event ([`stamp`]); [`attribute`] gives each interval's change to the step the
//! interval belongs to, exactly as CPU time is attributed, so a side's steps add up to its
//! totals.
//!
//! **Global state.** [`COUNTING`] is the one switch the allocator reads: a global allocator is
//! process-wide by nature and takes no context, so the switch cannot travel with a value.
//! Counting is off unless a command turns it on ([`start_counting`]); while off, the
//! allocator only forwards (one relaxed load per allocation). A server's heap as a whole
//! (`pqtls serve --memory`, for the resident measurement) is the other global: [`TOTALS`],
//! process-wide sums kept only after [`start_process_totals`] — its worker threads free blocks
//! other threads allocated, and threads that ended take their thread-locals with them, so the
//! process's live heap cannot be summed from thread-local counters.

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Whether allocations are counted (see the module's note on global state).
static COUNTING: AtomicBool = AtomicBool::new(false);

/// Process-wide sums of every counted allocation, kept when `on` (see the module's note).
struct Totals {
    on: AtomicBool,
    allocations: AtomicU64,
    frees: AtomicU64,
    allocated_bytes: AtomicU64,
    freed_bytes: AtomicU64,
}

static TOTALS: Totals = Totals {
    on: AtomicBool::new(false),
    allocations: AtomicU64::new(0),
    frees: AtomicU64::new(0),
    allocated_bytes: AtomicU64::new(0),
    freed_bytes: AtomicU64::new(0),
};

/// Turns counting on and keeps process-wide totals from now on ([`process_totals`]): for a
/// process whose whole heap is measured (`pqtls serve --memory`). Each allocation then costs
/// two atomic additions more.
pub fn start_process_totals() {
    TOTALS.on.store(true, Ordering::SeqCst);
    start_counting();
}

/// The process's heap since [`start_process_totals`]: (allocations, frees, bytes allocated,
/// bytes freed) counted on every thread; `None` when totals are not kept. Blocks allocated
/// before the start and freed after count as frees: compare two readings, not one with zero.
pub fn process_totals() -> Option<crate::resident::HeapReading> {
    if !TOTALS.on.load(Ordering::SeqCst) || !counting() {
        return None;
    }
    let r = |a: &AtomicU64| a.load(Ordering::SeqCst);
    Some(crate::resident::HeapReading::of(
        r(&TOTALS.allocations),
        r(&TOTALS.frees),
        r(&TOTALS.allocated_bytes),
        r(&TOTALS.freed_bytes),
    ))
}

/// Turns counting on for the whole process.
pub fn start_counting() {
    COUNTING.store(true, Ordering::SeqCst);
}

/// Turns counting off (the counters keep their values).
pub fn stop_counting() {
    COUNTING.store(false, Ordering::SeqCst);
}

pub fn counting() -> bool {
    COUNTING.load(Ordering::Relaxed)
}

/// One thread's counters since it started (monotonic except `peak_live_bytes`).
struct Counters {
    allocations: Cell<u64>,
    frees: Cell<u64>,
    allocated_bytes: Cell<u64>,
    freed_bytes: Cell<u64>,
    /// Highest `allocated − freed` since the last [`stamp`].
    peak_live_bytes: Cell<i64>,
}

thread_local! {
    // A const initializer and no destructor: reading it never allocates (the allocator itself
    // reads it) and it stays readable while the thread exits.
    static COUNTERS: Counters = const {
        Counters {
            allocations: Cell::new(0),
            frees: Cell::new(0),
            allocated_bytes: Cell::new(0),
            freed_bytes: Cell::new(0),
            peak_live_bytes: Cell::new(0),
        }
    };
}

fn live(c: &Counters) -> i64 {
    c.allocated_bytes.get().wrapping_sub(c.freed_bytes.get()) as i64
}

/// Counts an allocation of `bytes` on this thread (when counting is on).
#[inline]
pub fn on_alloc(bytes: usize) {
    if !counting() {
        return;
    }
    if TOTALS.on.load(Ordering::Relaxed) {
        TOTALS.allocations.fetch_add(1, Ordering::Relaxed);
        TOTALS.allocated_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
    let _ = COUNTERS.try_with(|c| {
        c.allocations.set(c.allocations.get() + 1);
        c.allocated_bytes.set(c.allocated_bytes.get() + bytes as u64);
        let now = live(c);
        if now > c.peak_live_bytes.get() {
            c.peak_live_bytes.set(now);
        }
    });
}

/// Counts a free of `bytes` on this thread (when counting is on).
#[inline]
pub fn on_free(bytes: usize) {
    if !counting() {
        return;
    }
    if TOTALS.on.load(Ordering::Relaxed) {
        TOTALS.frees.fetch_add(1, Ordering::Relaxed);
        TOTALS.freed_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
    let _ = COUNTERS.try_with(|c| {
        c.frees.set(c.frees.get() + 1);
        c.freed_bytes.set(c.freed_bytes.get() + bytes as u64);
    });
}

/// This thread's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MemStamp {
    pub allocations: u64,
    pub frees: u64,
    pub allocated_bytes: u64,
    pub freed_bytes: u64,
    /// The highest live heap (`allocated − freed`, this thread) since the previous stamp,
    /// that stamp's own level included.
    pub peak_live_bytes: i64,
}

impl MemStamp {
    /// This thread's live heap at the stamp: allocated − freed since it started (negative
    /// when it freed more than it allocated: blocks other threads allocated).
    pub fn live_bytes(&self) -> i64 {
        self.allocated_bytes.wrapping_sub(self.freed_bytes) as i64
    }

    /// What happened between `earlier` and `self`.
    pub fn since(&self, earlier: &MemStamp) -> StepMemory {
        StepMemory {
            allocations: self.allocations - earlier.allocations,
            frees: self.frees - earlier.frees,
            allocated_bytes: self.allocated_bytes - earlier.allocated_bytes,
            freed_bytes: self.freed_bytes - earlier.freed_bytes,
        }
    }
}

/// Reads this thread's counters and starts a new peak from the current level. Never
/// allocates.
pub fn stamp() -> MemStamp {
    COUNTERS
        .try_with(|c| {
            let s = MemStamp {
                allocations: c.allocations.get(),
                frees: c.frees.get(),
                allocated_bytes: c.allocated_bytes.get(),
                freed_bytes: c.freed_bytes.get(),
                peak_live_bytes: c.peak_live_bytes.get().max(live(c)),
            };
            c.peak_live_bytes.set(live(c));
            s
        })
        .unwrap_or_default()
}

/// Allocations and frees of one step (or one side, or one interval).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StepMemory {
    pub allocations: u64,
    pub frees: u64,
    pub allocated_bytes: u64,
    pub freed_bytes: u64,
}

impl StepMemory {
    pub fn add(&mut self, o: &StepMemory) {
        self.allocations += o.allocations;
        self.frees += o.frees;
        self.allocated_bytes += o.allocated_bytes;
        self.freed_bytes += o.freed_bytes;
    }

    /// Bytes still held: allocated − freed (negative: the step freed older blocks).
    pub fn net_bytes(&self) -> i64 {
        self.allocated_bytes as i64 - self.freed_bytes as i64
    }
}

/// One side's heap use during one handshake, inside its calls into the stack.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SideMemory {
    /// Per canonical step (the CPU steps' names), in the order steps first happened; they add
    /// up to `total`.
    pub steps: IndexMap<String, StepMemory>,
    pub total: StepMemory,
    /// The highest heap the side's calls held above its level when the handshake began (the
    /// side's running Σ allocated − freed inside its calls, at its highest point, the peak
    /// inside each interval included).
    pub peak_live_bytes: i64,
}

/// One side's memory per step: `stamps[k]` was read at event `k`; each interval `(end, step)`
/// (inside a call, from event `end − 1` to event `end`) gives its change to `step`.
pub fn attribute<'a>(stamps: &[MemStamp], intervals: impl IntoIterator<Item = (usize, &'a str)>) -> SideMemory {
    let mut out = SideMemory::default();
    let mut held: i64 = 0;
    for (end, step) in intervals {
        let (Some(before), Some(after)) = (stamps.get(end.wrapping_sub(1)), stamps.get(end)) else {
            continue;
        };
        let d = after.since(before);
        out.peak_live_bytes = out.peak_live_bytes.max(held + (after.peak_live_bytes - before.live_bytes()));
        held += d.net_bytes();
        out.peak_live_bytes = out.peak_live_bytes.max(held);
        out.steps.entry(step.to_string()).or_default().add(&d);
        out.total.add(&d);
    }
    out
}

/// Mean allocations and bytes per handshake (means, so that a side's steps add up to its
/// total exactly as they do in every handshake).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MeanMemory {
    pub allocations: f64,
    pub frees: f64,
    pub allocated_bytes: f64,
    pub freed_bytes: f64,
}

impl MeanMemory {
    fn of<'a>(items: impl Iterator<Item = &'a StepMemory>, n: usize) -> MeanMemory {
        let mut sum = StepMemory::default();
        items.for_each(|s| sum.add(s));
        let n = n.max(1) as f64;
        MeanMemory {
            allocations: sum.allocations as f64 / n,
            frees: sum.frees as f64 / n,
            allocated_bytes: sum.allocated_bytes as f64 / n,
            freed_bytes: sum.freed_bytes as f64 / n,
        }
    }
}

/// One side's heap use over the handshakes of a record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SideMemorySummary {
    /// Handshakes summarised (every measured one: counts are not disturbed by preemption).
    pub handshakes: u64,
    /// Per canonical step, the mean per handshake (a step absent from a handshake counts 0 in
    /// it); the steps add up to `total`.
    pub steps: IndexMap<String, MeanMemory>,
    pub total: MeanMemory,
    /// Allocations per handshake, fewest and most.
    pub allocations_min: u64,
    pub allocations_max: u64,
    /// Peak live heap of the side's calls above its level at the handshake's start
    /// ([`SideMemory::peak_live_bytes`]): median and highest over the handshakes.
    pub peak_live_bytes_median: i64,
    pub peak_live_bytes_max: i64,
}

impl SideMemorySummary {
    pub fn of(sides: &[&SideMemory]) -> SideMemorySummary {
        let n = sides.len();
        let mut steps: IndexMap<String, Vec<&StepMemory>> = IndexMap::new();
        for s in sides {
            for (name, m) in &s.steps {
                steps.entry(name.clone()).or_default().push(m);
            }
        }
        let mut peaks: Vec<i64> = sides.iter().map(|s| s.peak_live_bytes).collect();
        peaks.sort_unstable();
        SideMemorySummary {
            handshakes: n as u64,
            steps: steps.into_iter().map(|(k, v)| (k, MeanMemory::of(v.into_iter(), n))).collect(),
            total: MeanMemory::of(sides.iter().map(|s| &s.total), n),
            allocations_min: sides.iter().map(|s| s.total.allocations).min().unwrap_or(0),
            allocations_max: sides.iter().map(|s| s.total.allocations).max().unwrap_or(0),
            peak_live_bytes_median: peaks.get(n / 2).copied().unwrap_or(0),
            peak_live_bytes_max: peaks.last().copied().unwrap_or(0),
        }
    }
}

/// The memory section of an in-situ record: heap allocations per side and step, and what was
/// counted.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryResult {
    /// Whose allocations were counted, and how.
    pub counted: String,
    /// Whose were not (so absent from every figure).
    pub not_counted: String,
    pub client: SideMemorySummary,
    pub server: SideMemorySummary,
}

/// The Rust side's door: forwards to the system allocator and counts on the calling thread.
/// A binary makes it its allocator with
/// `#[global_allocator] static ALLOC: pqtls_core::memory::CountingAllocator = pqtls_core::memory::CountingAllocator;`.
pub struct CountingAllocator;

#[allow(unsafe_code)] // The allocator edge: GlobalAlloc is an unsafe trait.
                      // SAFETY: every method forwards to `System` with the caller's arguments unchanged and returns
                      // its result; counting touches only thread-local cells and never allocates.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract for `alloc` is passed on unchanged.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            on_alloc(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            on_alloc(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        on_free(layout.size());
        // SAFETY: `ptr` was allocated by `System` with `layout` (every block here is).
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: as `dealloc`; `new_size` is the caller's, checked by its contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            on_free(layout.size());
            on_alloc(new_size);
        }
        p
    }
}

/// Whether this process's Rust allocations are counted: counting is on and the global
/// allocator is [`CountingAllocator`] (probed with one allocation).
pub fn rust_allocations_counted() -> bool {
    if !counting() {
        return false;
    }
    let before = stamp();
    let probe = std::hint::black_box(Box::new(0u64));
    let after = stamp();
    drop(probe);
    after.allocations > before.allocations
}

/// Bytes in front of every block the C hooks hand out, holding its size (`free` is not told
/// it). 16 keeps malloc's alignment.
const HEADER: usize = 16;

/// The `malloc` hook of `CRYPTO_set_mem_functions` (OpenSSL, aws-lc): `malloc(bytes + 16)`,
/// the size in front, counted.
///
/// # Safety
/// A C allocator: the block must be released only by [`c_free`] or [`c_realloc`].
#[allow(unsafe_code)]
pub unsafe extern "C" fn c_malloc(bytes: usize, _file: *const libc::c_char, _line: libc::c_int) -> *mut libc::c_void {
    let Some(total) = bytes.checked_add(HEADER) else { return std::ptr::null_mut() };
    // SAFETY: malloc of a positive size; the result is checked for null before use.
    let base = unsafe { libc::malloc(total) } as *mut u8;
    if base.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: `base` points to at least HEADER bytes, aligned for usize (malloc's alignment).
    unsafe { (base as *mut usize).write(bytes) };
    on_alloc(bytes);
    // SAFETY: HEADER ≤ total, inside the block.
    unsafe { base.add(HEADER) as *mut libc::c_void }
}

/// The `realloc` hook (see [`c_malloc`]); `realloc(p, 0)` frees `p` and returns null.
///
/// # Safety
/// `ptr` is null or a live block from [`c_malloc`] / [`c_realloc`].
#[allow(unsafe_code)]
pub unsafe extern "C" fn c_realloc(
    ptr: *mut libc::c_void,
    bytes: usize,
    file: *const libc::c_char,
    line: libc::c_int,
) -> *mut libc::c_void {
    if ptr.is_null() {
        // SAFETY: a fresh block.
        return unsafe { c_malloc(bytes, file, line) };
    }
    if bytes == 0 {
        // SAFETY: `ptr` is one of ours (the caller's contract).
        unsafe { c_free(ptr, file, line) };
        return std::ptr::null_mut();
    }
    let Some(total) = bytes.checked_add(HEADER) else { return std::ptr::null_mut() };
    // SAFETY: `ptr` came from c_malloc/c_realloc, so its block starts HEADER bytes before it
    // and holds the size there.
    let base = unsafe { (ptr as *mut u8).sub(HEADER) };
    // SAFETY: as above.
    let old = unsafe { (base as *const usize).read() };
    // SAFETY: `base` is the start of a block malloc gave; on failure it is left as it was.
    let grown = unsafe { libc::realloc(base as *mut libc::c_void, total) } as *mut u8;
    if grown.is_null() {
        return std::ptr::null_mut();
    }
    // SAFETY: the new block holds at least HEADER bytes, aligned for usize.
    unsafe { (grown as *mut usize).write(bytes) };
    on_free(old);
    on_alloc(bytes);
    // SAFETY: HEADER ≤ total, inside the block.
    unsafe { grown.add(HEADER) as *mut libc::c_void }
}

/// The `realloc` hook of a library whose own allocator clears every freed block (aws-lc):
/// a new block, the contents copied, the old block cleared and freed — what aws-lc's
/// `OPENSSL_realloc` does without hooks, so that counting does not change its work.
///
/// # Safety
/// As [`c_realloc`].
#[allow(unsafe_code)]
pub unsafe extern "C" fn c_realloc_clearing(
    ptr: *mut libc::c_void,
    bytes: usize,
    file: *const libc::c_char,
    line: libc::c_int,
) -> *mut libc::c_void {
    if ptr.is_null() {
        // SAFETY: a fresh block.
        return unsafe { c_malloc(bytes, file, line) };
    }
    if bytes == 0 {
        // SAFETY: `ptr` is one of ours (the caller's contract).
        unsafe { c_free_clearing(ptr, file, line) };
        return std::ptr::null_mut();
    }
    // SAFETY: a fresh block; checked for null.
    let fresh = unsafe { c_malloc(bytes, file, line) };
    if fresh.is_null() {
        return fresh;
    }
    // SAFETY: `ptr` is ours, so its size is in front of it; both blocks hold at least the
    // bytes copied and do not overlap (one is fresh).
    unsafe {
        let old = ((ptr as *const u8).sub(HEADER) as *const usize).read();
        std::ptr::copy_nonoverlapping(ptr as *const u8, fresh as *mut u8, old.min(bytes));
        c_free_clearing(ptr, file, line);
    }
    fresh
}

/// The `free` hook of a library whose own allocator clears every freed block (aws-lc's
/// `OPENSSL_free` does): the block is zeroed, then freed (see [`c_free`]).
///
/// # Safety
/// As [`c_free`].
#[allow(unsafe_code)]
pub unsafe extern "C" fn c_free_clearing(ptr: *mut libc::c_void, file: *const libc::c_char, line: libc::c_int) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: `ptr` is ours: its size is in front of it and the block holds that many bytes.
    unsafe {
        let size = ((ptr as *const u8).sub(HEADER) as *const usize).read();
        std::ptr::write_bytes(ptr as *mut u8, 0, size);
        // The zeroing must not be dropped as a dead store before `free`.
        std::hint::black_box(ptr);
        c_free(ptr, file, line);
    }
}

/// The `free` hook (see [`c_malloc`]).
///
/// # Safety
/// `ptr` is null or a live block from [`c_malloc`] / [`c_realloc`].
#[allow(unsafe_code)]
pub unsafe extern "C" fn c_free(ptr: *mut libc::c_void, _file: *const libc::c_char, _line: libc::c_int) {
    if ptr.is_null() {
        return;
    }
    // SAFETY: `ptr` came from c_malloc/c_realloc: its block starts HEADER bytes before it,
    // holding its size, and is freed once, here.
    unsafe {
        let base = (ptr as *mut u8).sub(HEADER);
        on_free((base as *const usize).read());
        libc::free(base as *mut libc::c_void);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(allocations: u64, allocated: u64, freed: u64, peak: i64) -> MemStamp {
        MemStamp {
            allocations,
            frees: allocations / 2,
            allocated_bytes: allocated,
            freed_bytes: freed,
            peak_live_bytes: peak,
        }
    }

    #[test]
    fn intervals_give_their_changes_to_their_steps_which_add_up_to_the_total() {
        // Events 0..=4 of one call; 2→3 is another side's (not listed), so it is not counted.
        let stamps = [
            at(10, 1_000, 0, 1_000),
            at(12, 1_500, 100, 1_600), // +500 −100, peaked at 1 600 (600 above the level)
            at(13, 1_700, 100, 1_600),
            at(20, 9_000, 9_000, 7_400), // the other side's turn (live 0 now)
            at(21, 9_100, 9_000, 100),
        ];
        let m = attribute(&stamps, [(1, "a"), (2, "b"), (4, "a")]);
        assert_eq!(m.steps["a"].allocations, 2 + 1);
        assert_eq!(m.steps["a"].allocated_bytes, 500 + 100);
        assert_eq!(m.steps["b"].allocated_bytes, 200);
        assert_eq!(m.total.allocated_bytes, 800);
        assert_eq!(m.total.freed_bytes, 100);
        let sum = m.steps.values().fold(StepMemory::default(), |mut t, s| {
            t.add(s);
            t
        });
        assert_eq!(sum, m.total);
        // Held: 400 after the first interval (peak 600 inside it), 600 after the second, 700
        // after the last.
        assert_eq!(m.peak_live_bytes, 700);
    }

    #[test]
    fn a_peak_inside_an_interval_counts_even_when_freed_before_its_end() {
        let stamps = [at(0, 0, 0, 0), at(1, 4_096, 4_096, 4_096)];
        let m = attribute(&stamps, [(1, "x")]);
        assert_eq!(m.total.net_bytes(), 0);
        assert_eq!(m.peak_live_bytes, 4_096);
    }

    #[test]
    fn the_c_hooks_count_what_they_hand_out_and_take_back() {
        start_counting();
        let before = stamp();
        // SAFETY: the hooks' own contract: blocks from c_malloc go back through c_realloc/c_free.
        #[allow(unsafe_code)]
        let after = unsafe {
            let p = c_malloc(100, std::ptr::null(), 0);
            assert!(!p.is_null());
            std::ptr::write_bytes(p as *mut u8, 7, 100);
            let q = c_realloc(p, 300, std::ptr::null(), 0);
            assert_eq!(*(q as *const u8).add(99), 7);
            c_free(q, std::ptr::null(), 0);
            c_free(std::ptr::null_mut(), std::ptr::null(), 0);
            stamp()
        };
        let d = after.since(&before);
        assert_eq!((d.allocations, d.frees, d.allocated_bytes, d.freed_bytes), (2, 2, 400, 400));
        assert!(after.peak_live_bytes - before.live_bytes() >= 300);
        // The clearing pair counts alike and keeps the contents across a realloc.
        let before = stamp();
        // SAFETY: as above.
        #[allow(unsafe_code)]
        let after = unsafe {
            let p = c_malloc(10, std::ptr::null(), 0);
            std::ptr::write_bytes(p as *mut u8, 9, 10);
            let q = c_realloc_clearing(p, 20, std::ptr::null(), 0);
            assert_eq!(*(q as *const u8).add(9), 9);
            c_free_clearing(q, std::ptr::null(), 0);
            stamp()
        };
        let d = after.since(&before);
        assert_eq!((d.allocations, d.frees, d.allocated_bytes, d.freed_bytes), (2, 2, 30, 30));
    }
}
