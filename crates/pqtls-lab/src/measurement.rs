//! A measurement: runs one scenario and returns a typed result (a record and its samples).
//! In situ ([`crate::insitu::Insitu`]), load and layers (`pqtls_net::measure::Load`) and
//! transfer (`pqtls_net::transfer::Transfer`) implement this trait, each taking a
//! [`crate::Stacks`]; the one runner ([`crate::run`]) runs them all.

use pqtls_core::catalogue::Stack;
use pqtls_core::factor::Kind;
use pqtls_core::record::Measured;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::Result;
use std::sync::atomic::AtomicBool;

/// Progress inside one scenario, as the measurement goes.
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

/// One scenario being measured, block by block, so that a runner can interleave many
/// (docs/architecture.md). Made by [`Measurement::start`] (contexts prepared, warm-up done).
pub trait Session {
    /// Measures up to `n` more units (handshakes, …), never past the cap. A block ends early
    /// when the stopping rule is met inside it; once [`Session::done`], further blocks go on
    /// measuring up to the cap (a runner that stops a window's scenarios together keeps the
    /// early ones going). `interrupt` is polled as it goes.
    fn block(&mut self, n: u64, interrupt: &AtomicBool, progress: &mut dyn FnMut(&Progress)) -> Result<()>;
    /// The stopping rule is met (loop count, precision, cap): no more blocks are needed.
    fn done(&self) -> bool;
    /// No more units can be measured (the cap is reached). The default: [`Session::done`]
    /// (a session that cannot be extended past its rule).
    fn exhausted(&self) -> bool {
        self.done()
    }
    /// Other scenarios' blocks ran since this one's last: runs a few units unmeasured, so that
    /// the next block's first measured one does not find the caches holding another
    /// configuration's code and data. The default: nothing (a session measured in one block).
    fn rewarm(&mut self, _interrupt: &AtomicBool) -> Result<()> {
        Ok(())
    }
    /// Units run by [`Session::rewarm`] so far.
    fn rewarmed(&self) -> u64 {
        0
    }
    /// Blocks measured so far.
    fn blocks(&self) -> u64;
    /// Measured in blocks that a runner can interleave and extend. The default `false` (a
    /// whole measurement in one block): such a session is stored as soon as it is done, a
    /// window's `together` rule does not hold it back.
    fn interleaved(&self) -> bool {
        false
    }
    /// The result. `interrupted`: the run stopped before `done()` (the record says so), or an
    /// error when nothing was measured.
    fn finish(self: Box<Self>, interrupted: bool) -> Result<Measured>;
}

pub trait Measurement {
    /// The kind of record it produces.
    fn kind(&self) -> Kind;
    /// The TLS stacks it can run (scenarios on others are skipped with a notice).
    fn stacks(&self) -> Vec<Stack>;
    /// Measures one scenario. `interrupt` is polled as it goes: when set, the measurement
    /// returns what it has (marked interrupted) or an error when it has nothing.
    fn measure(
        &self,
        scenario: &Scenario,
        settings: &Settings,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&Progress),
    ) -> Result<Measured>;

    /// Starts measuring one scenario in blocks (prepare, warm-up). The default runs the
    /// whole of [`Measurement::measure`] as the session's one block: such a measurement is
    /// run, but not interleaved, by the runner; the in-situ one overrides it.
    fn start<'s>(
        &'s self,
        scenario: &Scenario,
        settings: &Settings,
        _interrupt: &AtomicBool,
        _progress: &mut dyn FnMut(&Progress),
    ) -> Result<Box<dyn Session + 's>> {
        Ok(Box::new(Whole { measurement: self, scenario: scenario.clone(), settings: settings.clone(), out: None }))
    }
}

/// [`Measurement::start`]'s default session: the whole measurement in one block.
struct Whole<'s, M: Measurement + ?Sized> {
    measurement: &'s M,
    scenario: Scenario,
    settings: Settings,
    out: Option<Measured>,
}

impl<M: Measurement + ?Sized> Session for Whole<'_, M> {
    fn block(&mut self, _n: u64, interrupt: &AtomicBool, progress: &mut dyn FnMut(&Progress)) -> Result<()> {
        if self.out.is_none() {
            self.out = Some(self.measurement.measure(&self.scenario, &self.settings, interrupt, progress)?);
        }
        Ok(())
    }

    fn done(&self) -> bool {
        self.out.is_some()
    }

    fn blocks(&self) -> u64 {
        self.out.is_some() as u64
    }

    fn finish(self: Box<Self>, _interrupted: bool) -> Result<Measured> {
        self.out.ok_or_else(|| pqtls_core::Error::Other("interrupted before anything was measured".into()))
    }
}
