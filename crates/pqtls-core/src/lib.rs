//! pqtls core: what the lab measures and how it is summarised, independent of any TLS stack.
//!
//! - [`catalogue`]: every group, signature algorithm and cipher suite, as data.
//! - [`config`]: one handshake configuration (stack × group × key shares × chain × cipher × …).
//! - [`trace`]: timestamped events emitted by a backend during a handshake, and the
//!   attribution rule that turns them into named per-step CPU times.
//! - [`backend`]: the interface every TLS stack implements.
//! - [`stats`]: quantiles, confidence interval of the median, adaptive stopping, deltas.
//! - [`record`]: the result record written per configuration (the documented JSON schema).
//! - [`transport`]: how the bytes travel (memory, socketpair, TCP loopback), as a value.

pub mod backend;
pub mod catalogue;
pub mod config;
pub mod error;
pub mod record;
pub mod stats;
pub mod trace;
pub mod transport;
pub mod wire;

pub use error::{Error, Result};
