//! pqtls lab: drivers that run handshakes between any two endpoints, and the runner that
//! turns many handshakes into a result record.

pub mod drive;
pub mod env;
pub mod keylog;
pub mod runner;

pub use runner::{measure, Measured, Mode, Progress, Settings};
