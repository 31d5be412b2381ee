//! How a kind's scenarios are run, whatever the front door (`pqtls run` and the per-kind
//! commands alike): the run policy that overrides what a command or a file asks for where a
//! measurement needs it.
//!
//! - Through the network lab (transfers, loads with network factors): one scenario after
//!   another, grouped by link (`pqtls_net::links::plan_links`: each lab is built and verified
//!   once), and a refused link fails its points, not the run (the others are measured; the exit
//!   code says not everything was).
//! - Resident memory: one terminator at a time, or their memories would mix.
//! - Instruction counts: not interleaved — counts do not drift with the machine's speed, so
//!   interleaving buys them nothing, and each configuration stops at its own rule.

use crate::run::{Scenarios, Schedule};
use pqtls_core::factor::Kind;
use pqtls_core::trace::Clock;

/// What a kind's scenarios need from the runner ([`RunPolicy::of`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunPolicy {
    /// One scenario after another ([`Schedule::Sequential`]), whatever schedule was asked for.
    pub sequential: bool,
    /// A failed scenario is noted and the run goes on, whatever was asked for.
    pub keep_going: bool,
    /// The scenarios go through the network lab: put them in link order before planning
    /// (`pqtls_net::links::plan_links`).
    pub by_link: bool,
}

impl RunPolicy {
    /// The policy for measuring `scenarios` with the measurement of `kind`.
    pub fn of<'a>(kind: Kind, scenarios: impl Into<Scenarios<'a>>) -> RunPolicy {
        let scenarios = scenarios.into();
        let through_lab =
            kind == Kind::Transfer || (kind == Kind::Load && scenarios.walk().any(|s| s.network.emulated()));
        RunPolicy {
            sequential: through_lab || kind == Kind::Resident || counts_only(scenarios),
            keep_going: through_lab,
            by_link: through_lab,
        }
    }

    /// The schedule to run: `asked` (read only when the policy leaves the choice), or
    /// [`Schedule::Sequential`].
    pub fn schedule<E>(&self, asked: impl FnOnce() -> Result<Schedule, E>) -> Result<Schedule, E> {
        if self.sequential {
            Ok(Schedule::Sequential)
        } else {
            asked()
        }
    }

    /// Whether a failed scenario stops the run: it does not when asked so or by the policy.
    pub fn keep_going(&self, asked: bool) -> bool {
        asked || self.keep_going
    }
}

/// Whether every scenario counts instructions (`clock = "instructions"`).
pub fn counts_only<'a>(scenarios: impl Into<Scenarios<'a>>) -> bool {
    let scenarios = scenarios.into();
    scenarios.count() > 0 && scenarios.walk().all(|s| s.clock == Clock::Instructions)
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::scenario::Scenario;

    fn scenario(values: &[(&str, &str)]) -> Scenario {
        Scenario::new(values.iter().copied()).unwrap()
    }

    #[test]
    fn the_network_lab_and_resident_memory_run_one_scenario_at_a_time() {
        let plain = scenario(&[("group", "x25519")]);
        let linked = scenario(&[("group", "x25519"), ("rtt", "10ms")]);
        let asked = || Ok::<_, ()>(Schedule::default());
        let lab = RunPolicy { sequential: true, keep_going: true, by_link: true };
        assert_eq!(RunPolicy::of(Kind::Transfer, std::slice::from_ref(&linked)), lab);
        assert_eq!(RunPolicy::of(Kind::Load, &[plain.clone(), linked]), lab);
        let load = RunPolicy::of(Kind::Load, std::slice::from_ref(&plain));
        assert_eq!(load, RunPolicy { sequential: false, keep_going: false, by_link: false });
        assert_eq!(load.schedule(asked), Ok(Schedule::default()));
        assert!(!load.keep_going(false) && load.keep_going(true) && lab.keep_going(false));
        let resident = RunPolicy::of(Kind::Resident, std::slice::from_ref(&plain));
        assert_eq!(resident, RunPolicy { sequential: true, keep_going: false, by_link: false });
        assert_eq!(resident.schedule(asked), Ok(Schedule::Sequential));
        // The asked schedule is not even read when the policy decides.
        assert_eq!(resident.schedule(|| Err("not read")), Ok(Schedule::Sequential));
    }

    #[test]
    fn instruction_counts_are_not_interleaved_unless_mixed_with_time() {
        let counted = scenario(&[("group", "x25519"), ("clock", "instructions")]);
        let timed = scenario(&[("group", "x25519")]);
        assert!(RunPolicy::of(Kind::Insitu, std::slice::from_ref(&counted)).sequential);
        assert!(!RunPolicy::of(Kind::Insitu, &[counted, timed.clone()]).sequential);
        assert!(!RunPolicy::of(Kind::Insitu, &[timed]).sequential);
        assert!(!counts_only(Scenarios::Held(&[])));
    }
}
