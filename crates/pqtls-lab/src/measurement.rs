//! A measurement: runs one scenario and returns a typed result (a record and its samples).
//! In-situ now ([`crate::insitu::Insitu`]); load, layers and transfer are the next ones —
//! each a new implementation of this trait, run by the same [`crate::run`].

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
}
