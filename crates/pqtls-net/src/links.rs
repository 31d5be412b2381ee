//! The network lab's links as the measurements over it use them (transfer, and load with
//! network factors): one lab at a time, built and verified once per link (RTT, rate, loss,
//! jitter) and kept across consecutive scenarios on it (initial windows are changed on the
//! routes in place); a link that fails its verification is refused: the scenario fails with the
//! measured values and what would work, and later scenarios on the same link fail with the
//! same report without building it again.

use pqtls_core::link::{lateness_budget_ns, LinkSpec, StallScreen};
use pqtls_core::scenario::{NetworkSpec, Scenario};
use pqtls_core::{Error, Result};
use pqtls_lab::measurement::Progress;
use pqtls_netlab::{Lab, LabOptions, LinkReport, VerifyOptions};
use std::sync::atomic::AtomicBool;
use std::sync::Mutex;

/// The link of a scenario without its windows: what a lab is built (and verified) for.
#[derive(Clone, Debug, PartialEq)]
pub struct LinkKey {
    rtt_ns: Option<u64>,
    bits_per_s: Option<u64>,
    loss_ppb: u64,
    jitter_ns: u64,
}

impl LinkKey {
    fn of(n: &NetworkSpec) -> LinkKey {
        LinkKey {
            rtt_ns: n.rtt_ns,
            bits_per_s: n.bits_per_s,
            loss_ppb: (n.loss * 1e9).round() as u64,
            jitter_ns: n.jitter_ns,
        }
    }

    /// Whether `s` runs over this link.
    pub fn holds(&self, s: &Scenario) -> bool {
        LinkKey::of(&s.network) == *self
    }
}

/// The lab of the current link, and the links refused so far (with why).
#[derive(Default)]
struct LabState {
    current: Option<(LinkKey, Lab, LinkReport)>,
    refused: Vec<(LinkKey, String)>,
    /// Links built and verified by this measurement so far.
    verifications: u64,
}

/// Puts a transfer experiment's points in the order they are measured in — grouped by link,
/// so that each lab is built and verified once (the matrix order is kept within a link) —
/// and refuses links the lab cannot build (absurd RTT, rate, loss, jitter, an initcwnd of 0)
/// before anything runs, naming the point and what would work.
pub fn plan_links(scenarios: &mut [Scenario]) -> Result<()> {
    let order = link_order(scenarios.iter())?;
    scenarios.sort_by_key(|s| order.iter().position(|link| link.holds(s)));
    Ok(())
}

/// The links of `scenarios` in the order of their first point, each once, the points checked
/// as [`plan_links`] checks them: the order of a matrix that is walked rather than held
/// (`pqtls run` walks it once per link).
pub fn link_order<S: std::borrow::Borrow<Scenario>>(scenarios: impl IntoIterator<Item = S>) -> Result<Vec<LinkKey>> {
    let mut firsts: Vec<LinkKey> = Vec::new();
    for s in scenarios {
        let s = s.borrow();
        let key = LinkKey::of(&s.network);
        if !firsts.contains(&key) {
            firsts.push(key);
        }
        let spec = LinkSpec::from(&s.network);
        pqtls_netlab::topology::validate(&spec).map_err(|e| Error::Invalid(format!("{}: {e}", s.label())))?;
        if [s.network.client_initcwnd, s.network.server_initcwnd].contains(&Some(0)) {
            return Err(Error::Invalid(format!(
                "{}: initcwnd 0 would never send; e.g. 10 (the kernel's default)",
                s.label()
            )));
        }
    }
    Ok(firsts)
}

/// Links refused so far: (link, why), for the run's summary.
pub type Refusals = Vec<(String, String)>;

/// The links of one measurement: how labs are built and verified, the current one, the
/// refused ones. Dropping it tears the current lab down.
pub struct Links {
    /// Congestion control, delay backend, emulator CPU (the windows come from each scenario).
    lab: LabOptions,
    verify: VerifyOptions,
    state: Mutex<LabState>,
}

impl Links {
    pub fn new(lab: LabOptions, verify: VerifyOptions) -> Links {
        Links { lab, verify, state: Mutex::new(LabState::default()) }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LabState> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The links refused so far, each with the verification's reason.
    pub fn refusals(&self) -> Refusals {
        self.state()
            .refused
            .iter()
            .map(|(k, why)| {
                let spec = LinkSpec {
                    rtt_ns: k.rtt_ns,
                    bits_per_s: k.bits_per_s,
                    loss: k.loss_ppb as f64 / 1e9,
                    jitter_ns: k.jitter_ns,
                    initcwnd: None,
                };
                (spec.to_string(), why.clone())
            })
            .collect()
    }

    /// Links built and verified so far.
    pub fn verifications(&self) -> u64 {
        self.state().verifications
    }

    /// The stall screen of a run on `lab`: its transactions' packets may be late by the
    /// verification's lateness budget (half the RTT tolerance). `most_again`: late transactions
    /// are measured again, at most that many (a closed loop); `None`: counted (an open loop).
    /// `None` without an emulator of ours (netem: its lateness is not seen).
    pub(crate) fn stall_screen(&self, lab: &Lab, most_again: Option<u64>) -> Option<StallScreen> {
        let rtt_ns = lab.spec().rtt_ns.filter(|&r| r > 0)?;
        Some(StallScreen {
            log: lab.late_log()?,
            budget_ns: lateness_budget_ns(rtt_ns, &self.verify.tolerances),
            most_again,
        })
    }

    /// Tears the current lab down, reporting what could not be removed.
    pub fn close(&self) -> Result<()> {
        match self.state().current.take() {
            Some((_, lab, _)) => lab.down().map_err(netlab_error),
            None => Ok(()),
        }
    }

    /// Runs `f` with the lab of `network` up and verified (built, or the current one when the
    /// link is the same), the scenario's windows on its routes, and its link report; `f` gets
    /// `progress` back. The lab is held (no other scenario changes it) until `f` returns.
    pub fn with_lab<T>(
        &self,
        network: &NetworkSpec,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
        f: impl FnOnce(&Lab, LinkReport, &mut dyn FnMut(&Progress)) -> Result<T>,
    ) -> Result<T> {
        let mut state = self.state();
        let link = self.lab_for(&mut state, network, interrupt, progress)?;
        let lab = &state.current.as_ref().expect("lab_for keeps it").1;
        f(lab, link, progress)
    }

    /// Makes sure the lab of `network` is up and verified (reusing the current one when the
    /// link is the same), with the scenario's windows on its routes; returns its report.
    fn lab_for(
        &self,
        state: &mut LabState,
        network: &NetworkSpec,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<LinkReport> {
        let key = LinkKey::of(network);
        if let Some((_, why)) = state.refused.iter().find(|(k, _)| *k == key) {
            return Err(Error::Unsupported(format!(
                "the link {} was refused by its verification earlier in this run: {why}",
                LinkSpec::from(network)
            )));
        }
        if state.current.as_ref().is_some_and(|(k, _, _)| *k != key) {
            // Another link: the old lab goes first (one lab at a time, never two emulators).
            if let Some((_, old, _)) = state.current.take() {
                old.down().map_err(netlab_error)?;
            }
        }
        if state.current.is_none() {
            let options = LabOptions {
                client_initcwnd: network.client_window(),
                server_initcwnd: network.server_window(),
                ..self.lab.clone()
            };
            progress(&Progress { phase: "building the link", done: 0, target: 1, worst: None, notes: Vec::new() });
            let lab = Lab::up(network, &options).map_err(netlab_error)?;
            progress(&Progress {
                phase: "verifying the link",
                done: 0,
                target: 1,
                worst: None,
                notes: vec![format!("verifying {}", lab.spec())],
            });
            let mut earlier = Vec::new();
            let report = loop {
                state.verifications += 1;
                let report = lab.verify(&self.verify, interrupt).map_err(netlab_error)?;
                if !verify_again(&report, earlier.len() + 1) {
                    break report;
                }
                // Disturbed from outside the machine (hypervisor steal): again, after a pause.
                let why = report.refusal();
                progress(&Progress {
                    phase: "verifying the link",
                    done: 0,
                    target: 1,
                    worst: None,
                    notes: vec![format!(
                        "{} refused while the machine was disturbed ({why}); verifying it again",
                        lab.spec()
                    )],
                });
                earlier.push(why);
                pqtls_netlab::verify::sleep_watching(DISTURBED_PAUSE, interrupt).map_err(netlab_error)?;
            };
            if !report.accepted {
                let mut why = report.refusal();
                if !earlier.is_empty() {
                    why = format!("{why} (verified {} times, each refused)", earlier.len() + 1);
                }
                drop(lab);
                state.refused.push((key, why.clone()));
                return Err(Error::Unsupported(format!(
                    "the link {} was refused by its verification: {why}",
                    LinkSpec::from(network)
                )));
            }
            let report = LinkReport { earlier_refusals: earlier, ..report };
            state.current = Some((key, lab, report));
        }
        let (_, lab, report) = state.current.as_mut().expect("set above");
        lab.set_initcwnd(network.client_window(), network.server_window()).map_err(netlab_error)?;
        let mut report = report.clone();
        report.setup = lab.setup().clone();
        report.asked.initcwnd = network.initcwnd;
        Ok(report)
    }
}

/// A closed loop of `requests` transactions may measure again this many of them at most
/// (a run bound by its duration only: as many as its duration allows).
pub(crate) fn most_again(requests: Option<u64>) -> u64 {
    requests.map_or(u64::MAX, |n| n.max(10))
}

/// Verifications of one link at most, when each refusal was disturbed from outside the machine.
pub const VERIFY_ATTEMPTS: usize = 3;
/// The pause before verifying a disturbed link again.
const DISTURBED_PAUSE: std::time::Duration = std::time::Duration::from_secs(2);

/// Whether a link's `attempt`-th verification (from 1) is followed by another: it was refused
/// while the hypervisor took CPU time from the machine ([`LinkReport::disturbed`]), and
/// attempts remain. A link refused on a quiet machine is refused at once.
fn verify_again(report: &LinkReport, attempt: usize) -> bool {
    report.disturbed() && attempt < VERIFY_ATTEMPTS
}

/// The lab's errors as the core's (the message is kept whole).
pub(crate) fn netlab_error(e: pqtls_netlab::Error) -> Error {
    match e {
        pqtls_netlab::Error::Interrupted => Error::Other("interrupted".into()),
        pqtls_netlab::Error::Privilege(m) => Error::Unsupported(m),
        pqtls_netlab::Error::Invalid(m) => Error::Invalid(m),
        e => Error::Other(e.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_refusal_disturbed_by_steal_is_verified_again_and_at_most_three_times() {
        let report = |accepted: bool, steal: Option<f64>| LinkReport {
            accepted,
            cpu_steal: steal,
            ..pqtls_testkit::synthetic::transfer::link_report(&pqtls_testkit::synthetic::transfer::study_scenario(
                "x25519",
                "p256:p256",
                "none",
                "50ms",
                "10",
                "0",
            ))
        };
        // Refused with 4 % steal: again, twice more at most.
        assert!(verify_again(&report(false, Some(0.04)), 1));
        assert!(verify_again(&report(false, Some(0.04)), 2));
        assert!(!verify_again(&report(false, Some(0.04)), 3));
        // Refused on a quiet machine, or steal unknown: refused at once. Accepted: done.
        assert!(!verify_again(&report(false, Some(0.002)), 1));
        assert!(!verify_again(&report(false, None), 1));
        assert!(!verify_again(&report(true, Some(0.04)), 1));
        // The refusal says what disturbed it.
        let why = report(false, Some(0.04)).refusal();
        assert!(why.contains("hypervisor took 4.0 %") && why.contains("steal"), "{why}");
        assert!(!report(false, Some(0.002)).refusal().contains("hypervisor"));
    }

    #[test]
    fn the_link_key_ignores_the_windows() {
        let n = |iw: Option<u64>| NetworkSpec {
            rtt_ns: Some(50_000_000),
            bits_per_s: Some(100_000_000),
            loss: 0.005,
            jitter_ns: 0,
            initcwnd: iw,
            client_initcwnd: None,
            server_initcwnd: iw,
        };
        assert_eq!(LinkKey::of(&n(Some(10))), LinkKey::of(&n(Some(40))));
        let mut other = n(None);
        other.loss = 0.0;
        assert_ne!(LinkKey::of(&n(None)), LinkKey::of(&other));
    }
}
