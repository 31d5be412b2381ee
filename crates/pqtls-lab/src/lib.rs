//! The measurement machinery: [`Stacks`], the context every measurement starts from (the TLS
//! stacks, the PKI, the environment); the [`Measurement`] trait and the one runner
//! ([`run`]) that goes over a plan's scenarios, whatever their measurement, and the run policy
//! of each kind ([`RunPolicy`]: sequential, keep going, link order); the transports
//! that drive handshakes between two endpoints (memory, socketpair, TCP); and the in-situ
//! measurement ([`Insitu`]). The measurements over real sockets — load, layers
//! (`pqtls_net::measure`) and transfer (`pqtls_net::transfer`) — implement the same trait.

#![forbid(unsafe_code)]

pub mod env;
pub mod estimate;
pub mod insitu;
pub mod keylog;
pub mod measurement;
pub mod policy;
pub mod run;
pub mod stacks;
pub mod transport;

pub use insitu::{Insitu, Measured};
pub use measurement::{Measurement, Progress, Session};
pub use policy::RunPolicy;
pub use run::{run, run_with, Event, Plan, RunOptions, RunSummary, Scenarios, Schedule, WindowStop};
pub use stacks::{PkiFn, Stacks};
pub use transport::{Batch, Transport, TransportKind, TransportOptions};
