//! pqtls lab: drivers that run handshakes between any two endpoints, the in-situ measurement
//! and the one runner that goes over scenarios, whatever their measurement (load and layers
//! are in `pqtls_net::measure`, transfer in `pqtls_net::transfer`).

#![forbid(unsafe_code)]

pub mod drive;
pub mod env;
pub mod insitu;
pub mod keylog;
pub mod measurement;
pub mod run;
pub mod transport;

pub use insitu::{Insitu, Measured};
pub use measurement::{Measurement, Progress, Session};
pub use run::{run, run_with, Event, Plan, RunOptions, RunSummary, Schedule, WindowStop};
pub use transport::{Batch, Transport, TransportKind, TransportOptions};
