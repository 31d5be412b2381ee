//! The delay emulator: holds every packet the router forwards (NFQUEUE) and releases it at
//! its due time, in order.
//!
//! * Due time: arrival + one-way delay + a jitter drawn uniformly from [−jitter, +jitter], but
//!   never before the due time of the previous packet of the same direction — packets leave
//!   in the order they came (jitter stretches gaps, it never reorders; under jitter the mean
//!   delay is therefore slightly above the asked one when packets come closer together than
//!   the jitter).
//! * Arrival: the kernel's receive timestamp of the packet when it has one (the emulator keeps
//!   a socket with SO_TIMESTAMPNS open so that the kernel stamps packets), else the time the
//!   emulator read it. The thread waits in one `ppoll` for "a packet came" or "the next one
//!   is due", whichever is first.
//! * The thread is pinned to one CPU, runs SCHED_FIFO with a 1 ns timer slack, and measures
//!   its lateness (release − due) into a histogram for every packet.
//! * Late releases are also kept in time order (release time, worst lateness of the batch;
//!   those above [`LATE_FLOOR_NS`], for [`LATE_KEPT_NS`]): a measurement asks what the packets
//!   under each of its transactions went through ([`Emulator::late_log`], a
//!   [`pqtls_core::link::LatenessLog`]).

use crate::error::{Error, Result};
use crate::netns::{self, NsThread};
use crate::nfqueue::{NfQueue, Packet};
use hdrhistogram::Histogram;
use nix::time::{clock_gettime, ClockId};
pub use pqtls_core::link::{EmulatorReport, LatenessLog, LatenessSummary};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// Netfilter queue number the router's rule sends packets to (queues are per namespace).
pub const QUEUE_NUM: u16 = 0;
/// Packets the kernel may hold for the emulator at once (the default, 1024, is less than the
/// packets in flight of a 100 Mbit/s × 150 ms link).
pub const QUEUE_MAX_PACKETS: u32 = 65_536;
/// SCHED_FIFO priority of the emulator thread.
pub const RT_PRIORITY: i32 = 50;
/// Releases later than this are kept in the late log (the smallest budget a link's tolerances
/// give is 150 µs: half of ±0.3 ms).
pub const LATE_FLOOR_NS: u64 = 20_000;
/// How long the late log keeps a release (longer than any transaction a measurement screens).
pub const LATE_KEPT_NS: u64 = 300_000_000_000;
/// The most releases the late log keeps (the oldest go first: 16 MiB).
pub const LATE_KEPT_MAX: usize = 1 << 20;

#[derive(Clone, Debug)]
pub struct DelayConfig {
    pub one_way_delay_ns: u64,
    pub jitter_ns: u64,
    /// Seed of the jitter draws (the same seed gives the same sequence of draws).
    pub seed: u64,
    /// CPU to pin the thread to; `None`: not pinned.
    pub cpu: Option<usize>,
}

/// Counters the emulator thread shares with the lab.
struct Shared {
    lateness: Histogram<u64>,
    packets: u64,
    kernel_stamped: u64,
    scheduling: String,
    timer_slack_ns: Option<u64>,
    /// The thread's id (for its CPU time in /proc).
    tid: Option<i32>,
    /// Its CPU time and the monotonic clock at the last reset (start, or [`Emulator::reset`]).
    cpu_at_reset_ns: u64,
    wall_at_reset_ns: u64,
    /// Late releases in time order: (release, the batch's worst lateness), monotonic ns.
    late: VecDeque<(u64, u64)>,
}

impl Shared {
    fn new() -> Result<Shared> {
        Ok(Shared {
            lateness: Histogram::new_with_max(3_600_000_000_000, 3)
                .map_err(|e| Error::Invalid(format!("lateness histogram: {e}")))?,
            packets: 0,
            kernel_stamped: 0,
            scheduling: String::new(),
            timer_slack_ns: None,
            tid: None,
            cpu_at_reset_ns: 0,
            wall_at_reset_ns: now_ns(ClockId::CLOCK_MONOTONIC),
            late: VecDeque::new(),
        })
    }

    fn note_late(&mut self, release_ns: u64, lateness_ns: u64) {
        if lateness_ns <= LATE_FLOOR_NS {
            return;
        }
        while self.late.front().is_some_and(|&(t, _)| t + LATE_KEPT_NS < release_ns) || self.late.len() >= LATE_KEPT_MAX
        {
            self.late.pop_front();
        }
        self.late.push_back((release_ns, lateness_ns));
    }

    fn worst_between(&self, from_ns: u64, to_ns: u64) -> u64 {
        let start = self.late.partition_point(|&(t, _)| t < from_ns);
        self.late.range(start..).take_while(|&&(t, _)| t <= to_ns).map(|&(_, l)| l).max().unwrap_or(0)
    }
}

/// The emulator's late releases, shared with the measurements that screen their transactions.
struct LateLog(Arc<Mutex<Shared>>);

impl LatenessLog for LateLog {
    fn worst_ns(&self, from_ns: u64, to_ns: u64) -> u64 {
        self.0.lock().map(|s| s.worst_between(from_ns, to_ns)).unwrap_or(u64::MAX)
    }
}

/// CPU time of thread `tid` of this process so far (`/proc/self/task/TID/schedstat`, first
/// field: ns on CPU).
fn thread_cpu_ns(tid: i32) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/self/task/{tid}/schedstat")).ok()?;
    text.split_whitespace().next()?.parse().ok()
}

/// The running emulator (its thread in the router namespace).
pub struct Emulator {
    cfg: DelayConfig,
    router_ns: String,
    stop: Arc<AtomicBool>,
    shared: Arc<Mutex<Shared>>,
    thread: Option<NsThread<Result<()>>>,
}

fn now_ns(clock: ClockId) -> u64 {
    // CLOCK_MONOTONIC and CLOCK_REALTIME cannot fail on Linux; a zero would only make one
    // packet's due time early.
    clock_gettime(clock).map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64).unwrap_or(0)
}

/// Real-time scheduling and a minimal timer slack for the calling thread; what it got.
fn make_realtime(cpu: Option<usize>) -> (String, Option<u64>, Option<String>) {
    let mut problems = Vec::new();
    if let Some(cpu) = cpu {
        let mut set = nix::sched::CpuSet::new();
        if let Err(e) = set.set(cpu).and_then(|()| nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), &set)) {
            problems.push(format!("cannot pin to CPU {cpu}: {e}"));
        }
    }
    let param = libc::sched_param { sched_priority: RT_PRIORITY };
    // SAFETY: sched_setscheduler reads `param`, a valid sched_param that outlives the call;
    // pid 0 is the calling thread.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    let scheduling = if rc == 0 {
        format!("SCHED_FIFO {RT_PRIORITY}")
    } else {
        let e = std::io::Error::last_os_error();
        problems.push(format!("cannot use SCHED_FIFO: {e}"));
        format!("SCHED_OTHER (SCHED_FIFO refused: {e})")
    };
    let slack = match nix::sys::prctl::set_timerslack(1) {
        Ok(()) => Some(1),
        Err(e) => {
            problems.push(format!("cannot set the timer slack: {e}"));
            nix::sys::prctl::get_timerslack().ok().map(|s| s as u64)
        }
    };
    (scheduling, slack, (!problems.is_empty()).then(|| problems.join("; ")))
}

/// The kernel's counters of queue 0 in the calling thread's namespace:
/// (queue_dropped, user_dropped).
fn queue_counters() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/thread-self/net/netfilter/nfnetlink_queue").ok()?;
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 7 && f[0] == QUEUE_NUM.to_string() {
            return Some((f[5].parse().ok()?, f[6].parse().ok()?));
        }
    }
    None
}

/// Keeps the kernel stamping received packets (a socket asking for SO_TIMESTAMPNS turns the
/// stamps on for the whole kernel while it is open).
fn timestamp_socket() -> Option<std::os::fd::OwnedFd> {
    use nix::sys::socket::{setsockopt, socket, sockopt, AddressFamily, SockFlag, SockType};
    let fd = socket(AddressFamily::Inet, SockType::Datagram, SockFlag::SOCK_CLOEXEC, None).ok()?;
    setsockopt(&fd, sockopt::ReceiveTimestampns, &true).ok()?;
    Some(fd)
}

struct Held {
    id: u32,
    due_ns: u64,
}

impl Emulator {
    /// Starts the emulator in `router_ns` and returns once it listens on the queue (so that
    /// the NFQUEUE rule, added after, never finds nobody listening: packets would be dropped).
    pub fn start(router_ns: &str, cfg: DelayConfig) -> Result<Emulator> {
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Mutex::new(Shared::new()?));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<()>>();
        let (c, st, sh) = (cfg.clone(), stop.clone(), shared.clone());
        let thread = netns::spawn_in(router_ns, "pqtls-delay", move || {
            let mut queue = match open_queue() {
                Ok(q) => q,
                Err(e) => {
                    let msg = e.to_string();
                    let _ = ready_tx.send(Err(e));
                    return Err(Error::Invalid(msg));
                }
            };
            let (scheduling, slack, _problems) = make_realtime(c.cpu);
            if let Ok(mut s) = sh.lock() {
                s.scheduling = scheduling;
                s.timer_slack_ns = slack;
                let tid = nix::unistd::gettid().as_raw();
                s.tid = Some(tid);
                s.cpu_at_reset_ns = thread_cpu_ns(tid).unwrap_or(0);
                s.wall_at_reset_ns = now_ns(ClockId::CLOCK_MONOTONIC);
            }
            let _stamps = timestamp_socket();
            let _ = ready_tx.send(Ok(()));
            run(&mut queue, &c, &st, &sh)
        })?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Emulator { cfg, router_ns: router_ns.to_string(), stop, shared, thread: Some(thread) }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => {
                let _ = thread.join();
                Err(Error::Invalid("the delay emulator ended before it listened on its queue".into()))
            }
        }
    }

    /// What the emulator did so far.
    pub fn report(&self) -> EmulatorReport {
        let counters = netns::spawn_in(&self.router_ns, "pqtls-nfq-stats", queue_counters)
            .ok()
            .and_then(|t| t.join().ok())
            .flatten();
        let (lateness, packets, kernel_stamped, scheduling, timer_slack_ns, cpu) = match self.shared.lock() {
            Ok(s) => {
                let cpu = s.tid.and_then(thread_cpu_ns).map(|now| {
                    (now.saturating_sub(s.cpu_at_reset_ns), now_ns(ClockId::CLOCK_MONOTONIC) - s.wall_at_reset_ns)
                });
                (
                    LatenessSummary::of(&s.lateness),
                    s.packets,
                    s.kernel_stamped,
                    s.scheduling.clone(),
                    s.timer_slack_ns,
                    cpu,
                )
            }
            Err(_) => (LatenessSummary::default(), 0, 0, "unknown (the emulator thread panicked)".into(), None, None),
        };
        EmulatorReport {
            kind: "nfqueue".into(),
            one_way_delay_ns: self.cfg.one_way_delay_ns,
            jitter_ns: self.cfg.jitter_ns,
            cpu: self.cfg.cpu,
            scheduling,
            timer_slack_ns,
            packets,
            kernel_stamped,
            lateness,
            queue_dropped: counters.map(|c| c.0),
            user_dropped: counters.map(|c| c.1),
            thread_cpu_ns: cpu.map(|c| c.0),
            wall_ns: cpu.map(|c| c.1),
        }
    }

    /// The late releases, for measurements to ask what their transactions' packets went through.
    pub fn late_log(&self) -> Arc<dyn LatenessLog> {
        Arc::new(LateLog(self.shared.clone()))
    }

    /// Forgets the lateness measured so far (e.g. before an experiment, after verification).
    pub fn reset(&self) {
        if let Ok(mut s) = self.shared.lock() {
            s.lateness.reset();
            s.packets = 0;
            s.kernel_stamped = 0;
            s.cpu_at_reset_ns = s.tid.and_then(thread_cpu_ns).unwrap_or(0);
            s.wall_at_reset_ns = now_ns(ClockId::CLOCK_MONOTONIC);
        }
    }

    /// Whether the thread still runs (it ends only when stopped or on an error).
    pub fn is_running(&self) -> bool {
        self.thread.as_ref().is_some_and(|t| !t.is_finished())
    }

    /// Stops the thread (held packets are released at once) and returns its error, if any.
    pub fn stop(&mut self) -> Result<()> {
        self.stop.store(true, Ordering::SeqCst);
        match self.thread.take().map(|t| t.join()) {
            None => Ok(()),
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(Error::Invalid("the delay emulator thread panicked".into())),
        }
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn open_queue() -> Result<NfQueue> {
    NfQueue::open(QUEUE_NUM, QUEUE_MAX_PACKETS)
        .map_err(|e| Error::io("cannot listen on NFQUEUE 0 (needs CAP_NET_ADMIN and the kernel's nfnetlink_queue)", e))
}

/// One FIFO per input interface (= direction), so one direction's jitter never holds back
/// the other's packets.
struct Lines {
    by_indev: Vec<(u32, VecDeque<Held>, u64)>,
}

impl Lines {
    fn line(&mut self, indev: u32) -> &mut (u32, VecDeque<Held>, u64) {
        let i = match self.by_indev.iter().position(|l| l.0 == indev) {
            Some(i) => i,
            None => {
                self.by_indev.push((indev, VecDeque::new(), 0));
                self.by_indev.len() - 1
            }
        };
        &mut self.by_indev[i]
    }

    fn next_due(&self) -> Option<u64> {
        self.by_indev.iter().filter_map(|l| l.1.front().map(|h| h.due_ns)).min()
    }
}

fn run(queue: &mut NfQueue, cfg: &DelayConfig, stop: &AtomicBool, shared: &Mutex<Shared>) -> Result<()> {
    let mut rng = fastrand::Rng::with_seed(cfg.seed);
    let mut lines = Lines { by_indev: Vec::new() };
    let jitter = cfg.jitter_ns.min(i64::MAX as u64) as i64;
    let mut came: Vec<Packet> = Vec::new();
    let mut due_ids: Vec<u32> = Vec::new();
    let mut lateness: Vec<u64> = Vec::new();
    loop {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        // Read every packet that came.
        came.clear();
        queue.read_ready(&mut came).map_err(|e| Error::io("NFQUEUE receive", e))?;
        if !came.is_empty() {
            let read_mono = now_ns(ClockId::CLOCK_MONOTONIC);
            let real = now_ns(ClockId::CLOCK_REALTIME);
            let mut stamped = 0;
            for p in &came {
                // A stamp from the future (the clock stepped) or older than a second is not
                // trusted: the read time is used instead.
                let stamp = p.stamp_realtime_ns.filter(|&t| t <= real && real - t < 1_000_000_000);
                let arrival = match stamp {
                    Some(t) => {
                        stamped += 1;
                        read_mono.saturating_sub(real - t)
                    }
                    None => read_mono,
                };
                let draw = if jitter > 0 { rng.i64(-jitter..=jitter) } else { 0 };
                let delay = (cfg.one_way_delay_ns as i64).saturating_add(draw).max(0) as u64;
                let line = lines.line(p.indev);
                let due_ns = (arrival + delay).max(line.2);
                line.2 = due_ns;
                line.1.push_back(Held { id: p.id, due_ns });
            }
            if let Ok(mut s) = shared.lock() {
                s.kernel_stamped += stamped;
            }
        }
        // Release what is due, in order, in one send.
        let now = now_ns(ClockId::CLOCK_MONOTONIC);
        due_ids.clear();
        lateness.clear();
        for line in lines.by_indev.iter_mut() {
            while line.1.front().is_some_and(|h| h.due_ns <= now) {
                let Some(held) = line.1.pop_front() else { break };
                due_ids.push(held.id);
                lateness.push(now - held.due_ns);
            }
        }
        if !due_ids.is_empty() {
            queue.accept(&due_ids).map_err(|e| Error::io("NFQUEUE verdict", e))?;
            if let Ok(mut s) = shared.lock() {
                for &l in &lateness {
                    let _ = s.lateness.record(l);
                }
                s.packets += due_ids.len() as u64;
                s.note_late(now, lateness.iter().copied().max().unwrap_or(0));
            }
        }
        // Wait for a packet or the next due time (at most 50 ms, to see `stop`).
        let now = now_ns(ClockId::CLOCK_MONOTONIC);
        let wait_ns = lines.next_due().map_or(50_000_000, |d| d.saturating_sub(now).min(50_000_000));
        if wait_ns > 0 {
            let mut fds = [nix::poll::PollFd::new(queue.fd(), nix::poll::PollFlags::POLLIN)];
            let ts = nix::sys::time::TimeSpec::new((wait_ns / 1_000_000_000) as i64, (wait_ns % 1_000_000_000) as i64);
            match nix::poll::ppoll(&mut fds, Some(ts), None) {
                Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                Err(e) => return Err(Error::nix("ppoll on the NFQUEUE socket", e)),
            }
        }
    }
    // Stopping: let every held packet go now rather than leave it to the kernel.
    let rest: Vec<u32> = lines.by_indev.iter_mut().flat_map(|l| l.1.drain(..).map(|h| h.id)).collect();
    let _ = queue.accept(&rest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_late_log_answers_for_a_span_of_time() {
        let mut s = Shared::new().unwrap();
        let ms = 1_000_000;
        // On time (below the floor): not kept.
        s.note_late(1000 * ms, 5_000);
        // A stall of 12 ms at t = 2 s, smaller ones around it.
        s.note_late(1500 * ms, 300_000);
        s.note_late(2000 * ms, 12 * ms);
        s.note_late(2500 * ms, 40_000);
        assert_eq!(s.late.len(), 3);
        assert_eq!(s.worst_between(0, 999 * ms), 0, "nothing late before");
        assert_eq!(s.worst_between(1400 * ms, 1600 * ms), 300_000);
        assert_eq!(s.worst_between(1400 * ms, 2600 * ms), 12 * ms);
        assert_eq!(s.worst_between(2000 * ms, 2000 * ms), 12 * ms, "both ends included");
        assert_eq!(s.worst_between(2001 * ms, 3000 * ms), 40_000);
        assert_eq!(s.worst_between(3000 * ms, 4000 * ms), 0);
        // Releases older than LATE_KEPT_NS go as new ones come.
        s.note_late(2000 * ms + LATE_KEPT_NS + 1, 50_000);
        assert_eq!(s.late.len(), 2);
        assert_eq!(s.worst_between(0, 2000 * ms), 0);
    }

    #[test]
    fn a_transfer_is_judged_by_its_own_packets() {
        use pqtls_core::link::{Screened, StallCounters, StallScreen};
        let sh = Arc::new(Mutex::new(Shared::new().unwrap()));
        let ms = 1_000_000;
        sh.lock().unwrap().note_late(2000 * ms, 7 * ms);
        let screen = StallScreen { log: Arc::new(LateLog(sh.clone())), budget_ns: 250_000, most_again: Some(1) };
        let counters = StallCounters::default();
        assert_eq!(counters.judge(&screen, 1000 * ms, 1900 * ms), Screened::Keep);
        assert_eq!(
            counters.judge(&screen, 1900 * ms, 2100 * ms),
            Screened::Again { pause: std::time::Duration::from_millis(250) },
            "its packet was 7 ms late"
        );
        assert!(
            matches!(counters.judge(&screen, 1950 * ms, 2050 * ms), Screened::TooMany(why) if why.contains("host stalls"))
        );
        let r = counters.report(&screen);
        assert_eq!((r.screened, r.measured_again, r.worst_again_ns), (3, 2, 7 * ms));
        // Discarded in a row: 250 ms before measuring again, doubling to 4 s at most.
        let pauses: Vec<u64> = (1..=7).map(|k| StallCounters::pause(k).as_millis() as u64).collect();
        assert_eq!(pauses, [250, 500, 1000, 2000, 4000, 4000, 4000]);
        // An open loop keeps and counts.
        let open = StallScreen { most_again: None, ..screen };
        let counters = StallCounters::default();
        assert_eq!(counters.judge(&open, 1900 * ms, 2100 * ms), Screened::Keep);
        let r = counters.report(&open);
        assert_eq!((r.late_kept, r.worst_kept_ns), (1, 7 * ms));
        assert!(r.summary().unwrap().contains("1 of 1 transactions went through host stalls up to 7.00 ms"));
    }
}
