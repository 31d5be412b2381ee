//! pqtls lab: drivers that run handshakes between any two endpoints, the measurements
//! (in-situ now; load, layers, transfer next) and the one runner that goes over scenarios.

pub mod drive;
pub mod env;
pub mod keylog;
pub mod measurement;
pub mod run;
pub mod runner;

pub use measurement::{Measurement, Progress};
pub use run::{run, Event, Plan, RunOptions, RunSummary};
pub use runner::{Insitu, Measured};
