//! An emulated network link as results record it: what was asked ([`LinkSpec`]), how the lab
//! built it ([`LabSetup`]), what its verification measured ([`LinkReport`]) and how late the
//! delay emulator released packets ([`EmulatorReport`]). The lab that builds and measures links
//! is crates/pqtls-netlab; these are its data, here so that records and reports can hold them.

use crate::scenario::NetworkSpec;
use crate::units;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The asked-for link, as stored with every result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkSpec {
    pub rtt_ns: Option<u64>,
    pub bits_per_s: Option<u64>,
    pub loss: f64,
    pub jitter_ns: u64,
    pub initcwnd: Option<u64>,
}

impl From<&NetworkSpec> for LinkSpec {
    fn from(n: &NetworkSpec) -> Self {
        LinkSpec {
            rtt_ns: n.rtt_ns,
            bits_per_s: n.bits_per_s,
            loss: n.loss,
            jitter_ns: n.jitter_ns,
            initcwnd: n.initcwnd,
        }
    }
}

impl std::fmt::Display for LinkSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let rtt = self.rtt_ns.map_or("no delay".into(), |r| format!("RTT {}", units::format_duration(r)));
        let rate = self.bits_per_s.map_or("unlimited rate".into(), units::format_bits);
        write!(f, "{rtt}, {rate}, loss {}%", self.loss * 100.0)?;
        if self.jitter_ns > 0 {
            write!(f, ", jitter {}", units::format_duration(self.jitter_ns))?;
        }
        Ok(())
    }
}

/// How the lab was built (recorded with every result).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LabSetup {
    pub namespaces: Vec<String>,
    /// `nfqueue`, `netem` or `none`, and why.
    pub delay_backend: String,
    pub netem_available: bool,
    /// tbf on the router's egress in each direction.
    pub rate_bits_per_s: Option<u64>,
    pub tbf_burst_bytes: Option<u64>,
    pub tbf_limit_bytes: Option<u64>,
    /// iptables `-m statistic --mode random` in the router, each direction.
    pub loss_probability: f64,
    pub congestion_control: String,
    pub client_initcwnd: Option<u64>,
    pub server_initcwnd: Option<u64>,
    /// tcp_rmem / tcp_wmem of the client and server namespaces, as the kernel reads them back.
    pub tcp_rmem: String,
    pub tcp_wmem: String,
    /// Offloads switched off on every lab interface (packets are segments, as on a wire).
    pub offloads_off: Vec<String>,
}

/// How close a measurement must be to what was asked.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerances {
    /// The median RTT may differ from the asked one by this fraction or by
    /// `rtt_absolute_ns`, whichever is larger.
    pub rtt_relative: f64,
    pub rtt_absolute_ns: u64,
    /// The measured rate may differ from the asked one by this fraction.
    pub rate_relative: f64,
    /// The asked loss must lie in the measured loss's confidence interval of this level.
    pub loss_confidence: f64,
}

impl Default for Tolerances {
    fn default() -> Self {
        Tolerances { rtt_relative: 0.02, rtt_absolute_ns: 300_000, rate_relative: 0.03, loss_confidence: 0.95 }
    }
}

/// One asked-vs-measured comparison.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Check {
    /// `rtt`, `rate`, `loss client→server`, `loss server→client`.
    pub what: String,
    /// Base units: ns, bit/s, fraction.
    pub asked: f64,
    pub measured: f64,
    /// The interval `asked` or `measured` had to fall in (see `rule`).
    pub accepted_low: f64,
    pub accepted_high: f64,
    pub rule: String,
    pub ok: bool,
    /// When not ok: what would work.
    pub hint: Option<String>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RttMeasurement {
    pub probes_sent: u64,
    pub probes_received: u64,
    pub median_ns: u64,
    pub p5_ns: u64,
    pub p95_ns: u64,
    pub min_ns: u64,
    pub max_ns: u64,
    pub mean_ns: f64,
    pub stdev_ns: f64,
    /// Probes that came back after a later-sent one (the emulator never reorders: 0).
    pub reordered: u64,
    /// The goodput of a bulk flow that ran through the link while the probes were sent
    /// (`pqtls netlab verify --flow`); `None`: the probes ran alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrent_flow_bits_per_s: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RateMeasurement {
    /// Bytes the rate limiter sent towards the client per second × 8 (frames with their
    /// Ethernet/IP/TCP headers: what tbf's rate counts).
    pub wire_bits_per_s: f64,
    /// TCP payload the client received per second × 8.
    pub goodput_bits_per_s: f64,
    pub window_ns: u64,
    /// The sender's congestion control, as its socket reports it.
    pub congestion_control: String,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossDirection {
    pub sent: u64,
    pub received: u64,
    pub fraction: f64,
    /// Wilson score interval of the loss at the tolerances' confidence.
    pub interval: [f64; 2],
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LossMeasurement {
    pub client_to_server: LossDirection,
    pub server_to_client: LossDirection,
    /// Packets the rate limiters dropped (queue full) while loss was measured: these count
    /// as loss too, and should be 0.
    pub rate_limiter_drops: u64,
}

/// A link's verification: asked vs measured, how it was built, the emulator's lateness, and
/// the verdict. Stored with every result measured on the link.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LinkReport {
    pub asked: LinkSpec,
    pub setup: LabSetup,
    pub tolerances: Tolerances,
    pub rtt: RttMeasurement,
    pub rate: Option<RateMeasurement>,
    pub loss: LossMeasurement,
    pub emulator: EmulatorReport,
    pub checks: Vec<Check>,
    pub accepted: bool,
    pub duration_ns: u64,
    /// Share of the machine's CPU time the hypervisor took while the link was verified (the
    /// `steal` of /proc/stat; `None`: not known, e.g. older records). Time taken from outside
    /// the machine: the emulator and the probes wait for it.
    #[serde(default)]
    pub cpu_steal: Option<f64>,
    /// Why earlier verifications of this link in the same run refused it: each was disturbed
    /// from outside the machine ([`LinkReport::disturbed`]), so the link was verified again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub earlier_refusals: Vec<String>,
}

/// Hypervisor steal at or above this share of the CPU during a verification marks a refusal as
/// disturbed from outside the machine.
pub const DISTURBING_STEAL: f64 = 0.01;

impl LinkReport {
    /// A refusal during which the machine was disturbed from outside — the hypervisor took at
    /// least [`DISTURBING_STEAL`] of the CPU, or the delay emulator saw host stalls
    /// ([`LinkReport::stalled`]) — so the link may verify when it is not.
    pub fn disturbed(&self) -> bool {
        !self.accepted && (self.cpu_steal.is_some_and(|s| s >= DISTURBING_STEAL) || self.stalled())
    }

    /// The delay emulator released some packets later than the lateness budget while it kept
    /// up with most ([`lateness_budget_ns`]; its median within the budget): moments the
    /// machine did not run it — on a virtual machine, the host taking the vCPU away, which the
    /// guest's steal counter does not always show (docs/bench/stalls/).
    pub fn stalled(&self) -> bool {
        let Some(rtt) = self.asked.rtt_ns.filter(|&r| r > 0) else { return false };
        let budget = lateness_budget_ns(rtt, &self.tolerances);
        let l = &self.emulator.lateness;
        self.emulator.kind == "nfqueue" && l.max_ns > budget && l.p50_ns <= budget
    }

    /// Why the link was refused (empty when accepted): each failed check with its hint.
    pub fn refusal(&self) -> String {
        let failed: Vec<String> = self
            .checks
            .iter()
            .filter(|c| !c.ok)
            .map(|c| {
                let mut s = format!(
                    "{} asked {} measured {} (accepted {})",
                    c.what,
                    show(&c.what, c.asked),
                    show(&c.what, c.measured),
                    c.rule
                );
                if let Some(h) = &c.hint {
                    s.push_str(&format!(": {h}"));
                }
                s
            })
            .collect();
        let mut why = failed.join("; ");
        if self.accepted {
            return why;
        }
        if self.cpu_steal.is_some_and(|s| s >= DISTURBING_STEAL) {
            why.push_str(&format!(
                " (during the verification the hypervisor took {:.1} % of this machine's CPU time — steal: a \
                 disturbance from outside the machine)",
                self.cpu_steal.unwrap_or(0.0) * 100.0
            ));
        }
        if self.stalled() {
            why.push_str(&format!(
                " (during the verification the delay emulator saw host stalls: packets released up to {} late, \
                 moments the machine did not run it)",
                ms(self.emulator.lateness.max_ns)
            ));
        }
        why
    }
}

/// A value of a check in its usual unit.
pub fn show(what: &str, v: f64) -> String {
    if what == "rtt" || what.starts_with("delay") {
        format!("{:.3} ms", v / 1e6)
    } else if what == "rate" {
        format!("{:.2} Mbit/s", v / 1e6)
    } else {
        format!("{:.3}%", v * 100.0)
    }
}

/// Percentiles of a histogram in nanoseconds.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct LatenessSummary {
    pub packets: u64,
    pub mean_ns: f64,
    pub p50_ns: u64,
    pub p90_ns: u64,
    pub p99_ns: u64,
    pub p999_ns: u64,
    pub max_ns: u64,
}

impl LatenessSummary {
    pub fn of(h: &Histogram<u64>) -> LatenessSummary {
        if h.is_empty() {
            return LatenessSummary::default();
        }
        LatenessSummary {
            packets: h.len(),
            mean_ns: h.mean(),
            p50_ns: h.value_at_quantile(0.5),
            p90_ns: h.value_at_quantile(0.9),
            p99_ns: h.value_at_quantile(0.99),
            p999_ns: h.value_at_quantile(0.999),
            max_ns: h.max(),
        }
    }
}

/// What emulated the delay, how it ran, and how late it released packets.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EmulatorReport {
    /// `nfqueue` (ours), `netem`, or `none` (no delay asked).
    pub kind: String,
    pub one_way_delay_ns: u64,
    pub jitter_ns: u64,
    pub cpu: Option<usize>,
    /// `SCHED_FIFO 50`, or what the thread got instead and why.
    pub scheduling: String,
    pub timer_slack_ns: Option<u64>,
    /// Packets released so far.
    pub packets: u64,
    /// Packets whose arrival time came from the kernel's timestamp (the rest: read time).
    pub kernel_stamped: u64,
    /// Release time − due time, per packet.
    pub lateness: LatenessSummary,
    /// Packets the kernel dropped because the emulator's queue was full or it did not read
    /// them in time (`/proc/net/netfilter/nfnetlink_queue`).
    pub queue_dropped: Option<u64>,
    pub user_dropped: Option<u64>,
    /// The emulator thread's CPU time and the wall time over the same span (since it started
    /// or was last reset): its CPU use is their ratio. `None`: not measured (netem, none, or
    /// records from before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thread_cpu_ns: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wall_ns: Option<u64>,
}

impl EmulatorReport {
    pub fn none() -> EmulatorReport {
        EmulatorReport {
            kind: "none".into(),
            one_way_delay_ns: 0,
            jitter_ns: 0,
            cpu: None,
            scheduling: String::new(),
            timer_slack_ns: None,
            packets: 0,
            kernel_stamped: 0,
            lateness: LatenessSummary::default(),
            queue_dropped: None,
            user_dropped: None,
            thread_cpu_ns: None,
            wall_ns: None,
        }
    }

    /// The emulator thread's CPU use over the report's span (CPU time / wall time).
    pub fn cpu_use(&self) -> Option<f64> {
        match (self.thread_cpu_ns, self.wall_ns) {
            (Some(c), Some(w)) if w > 0 => Some(c as f64 / w as f64),
            _ => None,
        }
    }
}

/// The delay emulator's record of late releases, as a measurement asks it about each of its
/// transactions: what the packets under that transaction went through. Times are
/// `CLOCK_MONOTONIC` ns ([`crate::trace::wall_ns`]; `Instant` reads the same clock on Linux).
pub trait LatenessLog: Send + Sync {
    /// The worst lateness of the packets released from `from_ns` to `to_ns` (0: none was late
    /// by more than the log's floor).
    fn worst_ns(&self, from_ns: u64, to_ns: u64) -> u64;
}

/// How a run screens its transactions for host stalls: a transaction whose packets the delay
/// emulator released later than `budget_ns` went through a stall of the machine, not the
/// link asked for. With `most_again`, such a transaction is discarded and measured again (at
/// most that many in the run; one more fails the run); without it (open loop: a timetable
/// cannot be re-run) it is kept and counted.
#[derive(Clone)]
pub struct StallScreen {
    pub log: std::sync::Arc<dyn LatenessLog>,
    pub budget_ns: u64,
    pub most_again: Option<u64>,
}

/// What the screen did to one transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Screened {
    /// Its packets were on time (within the budget), or late and kept (no re-measurement).
    Keep,
    /// Late beyond the budget: discarded, to be measured again after `pause` — a stall rarely
    /// comes alone, and the pause lets an episode pass instead of spending the run's
    /// re-measurements inside it ([`StallCounters::pause`]).
    Again { pause: std::time::Duration },
    /// Late beyond the budget, and the run has measured again as many as it may: why it fails.
    TooMany(String),
}

/// The counters of a run's screen, shared by its threads.
#[derive(Default)]
pub struct StallCounters {
    screened: std::sync::atomic::AtomicU64,
    again: std::sync::atomic::AtomicU64,
    late_kept: std::sync::atomic::AtomicU64,
    /// Transactions measured again since the last one kept.
    in_a_row: std::sync::atomic::AtomicU64,
    worst_again_ns: std::sync::atomic::AtomicU64,
    worst_kept_ns: std::sync::atomic::AtomicU64,
}

impl StallCounters {
    /// Screens one measured transaction that spanned `from_ns`..`to_ns` (monotonic ns).
    pub fn judge(&self, screen: &StallScreen, from_ns: u64, to_ns: u64) -> Screened {
        use std::sync::atomic::Ordering::SeqCst;
        let worst = screen.log.worst_ns(from_ns, to_ns);
        self.screened.fetch_add(1, SeqCst);
        if worst <= screen.budget_ns {
            self.worst_kept_ns.fetch_max(worst, SeqCst);
            self.in_a_row.store(0, SeqCst);
            return Screened::Keep;
        }
        let Some(most) = screen.most_again else {
            self.late_kept.fetch_add(1, SeqCst);
            self.worst_kept_ns.fetch_max(worst, SeqCst);
            return Screened::Keep;
        };
        self.worst_again_ns.fetch_max(worst, SeqCst);
        let again = self.again.fetch_add(1, SeqCst) + 1;
        if again > most {
            return Screened::TooMany(format!(
                "host stalls: {again} transactions had packets the delay emulator released late beyond the {} budget \
                 (up to {}), more than the {most} this run may measure again; the machine is too disturbed to \
                 measure this link now (a quieter moment, or a looser --rtt-tolerance, which sets the budget)",
                ms(screen.budget_ns),
                ms(self.worst_again_ns.load(SeqCst)),
            ));
        }
        Screened::Again { pause: Self::pause(self.in_a_row.fetch_add(1, SeqCst) + 1) }
    }

    /// The pause before measuring again after the `in_a_row`-th discarded transaction in a row:
    /// 250 ms, doubling, at most 4 s (ten in a row wait about half a minute in all).
    pub fn pause(in_a_row: u64) -> std::time::Duration {
        std::time::Duration::from_millis(250u64 << in_a_row.saturating_sub(1).min(4))
    }

    /// What the screen did so far.
    pub fn report(&self, screen: &StallScreen) -> StallReport {
        use std::sync::atomic::Ordering::SeqCst;
        StallReport {
            budget_ns: screen.budget_ns,
            screened: self.screened.load(SeqCst),
            measured_again: self.again.load(SeqCst),
            most_again: screen.most_again,
            late_kept: self.late_kept.load(SeqCst),
            worst_again_ns: self.worst_again_ns.load(SeqCst),
            worst_kept_ns: self.worst_kept_ns.load(SeqCst),
        }
    }
}

/// What a run's stall screen did ([`StallScreen`]), stored with its record.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StallReport {
    /// The lateness a transaction's packets may have (half the link's RTT tolerance, as the
    /// verification's delay check).
    pub budget_ns: u64,
    /// Measured transactions screened (kept and measured again).
    pub screened: u64,
    /// Transactions whose packets were later than the budget, discarded and measured again.
    pub measured_again: u64,
    /// The most the run could measure again (`None`: late transactions are kept and counted).
    pub most_again: Option<u64>,
    /// Late transactions kept (open loop: counted, not measured again).
    pub late_kept: u64,
    /// The worst lateness of a discarded transaction's packets, and of a kept one's.
    pub worst_again_ns: u64,
    pub worst_kept_ns: u64,
}

impl StallReport {
    /// One line for notes and pages, `None` when nothing was late beyond the budget.
    pub fn summary(&self) -> Option<String> {
        let kept = self.screened.saturating_sub(self.measured_again);
        if self.measured_again > 0 {
            Some(format!(
                "{} of {} transfers measured again: host stalls up to {} (their packets released later than the {} \
                 budget)",
                self.measured_again,
                kept,
                ms(self.worst_again_ns),
                ms(self.budget_ns)
            ))
        } else if self.late_kept > 0 {
            Some(format!(
                "{} of {} transactions went through host stalls up to {} (packets released later than the {} \
                 budget; kept: an open loop is not measured again)",
                self.late_kept,
                self.screened,
                ms(self.worst_kept_ns),
                ms(self.budget_ns)
            ))
        } else {
            None
        }
    }
}

/// The lateness a transaction's packets may have on a link of `rtt_ns` verified with `t`: half
/// the RTT tolerance (a round trip of two late packets stays within it) — the budget of the
/// verification's delay check and of [`StallScreen`].
pub fn lateness_budget_ns(rtt_ns: u64, t: &Tolerances) -> u64 {
    ((rtt_ns as f64 * t.rtt_relative).max(t.rtt_absolute_ns as f64) / 2.0) as u64
}

/// A lateness as pages print it: milliseconds to 10 µs.
fn ms(ns: u64) -> String {
    format!("{:.2} ms", ns as f64 / 1e6)
}
