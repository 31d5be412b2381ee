//! pqtls lab: transports that run handshakes between any two endpoints (memory, socketpair,
//! TCP loopback), and the runner that turns many handshakes into a result record.

pub mod drive;
pub mod env;
pub mod runner;
pub mod transport;

pub use runner::{measure, Measured, Mode, Progress, Settings};
pub use transport::{Batch, Transport, TransportKind, TransportOptions};
