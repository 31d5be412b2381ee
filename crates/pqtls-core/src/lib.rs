//! pqtls core: what the lab measures and how it is summarised, independent of any TLS stack.
//!
//! - [`catalogue`]: every group, signature algorithm and cipher suite, as data.
//! - [`config`]: one handshake configuration (stack × group × key shares × chain × cipher × …).
//! - [`trace`]: timestamped events emitted by a backend during a handshake, and the
//!   attribution rule that turns them into named per-step CPU times.
//! - [`memory`]: heap allocations counted per thread and attributed to the same steps.
//! - [`backend`]: the interface every TLS stack implements.
//! - [`stats`]: quantiles, confidence interval of the median, adaptive stopping, deltas.
//! - [`factor`]: the factor table — every factor defined once; [`scenario`]: a typed point
//!   of a matrix built from it; [`settings`]: how long and how precisely to measure.
//! - [`record`]: the result record `{schema, id, kind, scenario, settings, env, result}` (the
//!   documented JSON schema), and the schema-1 reader.
//! - [`load`]: the load measurement's result (HdrHistogram latencies, rates, errors);
//!   [`timeline`]: the moments of one transaction and its layers (TCP, TLS, HTTP);
//!   [`crosscheck`]: a load run's transactions matched to its capture's, per-layer differences.
//! - [`transport`]: how the bytes travel (memory, socketpair, TCP loopback), as a value.
//! - [`wire`]: the TLS wire codec (records, handshake messages, hello readers), which is
//!   pqtls-tls13's, without its record protection.

#![deny(unsafe_code)]

pub mod backend;
pub mod catalogue;
pub mod config;
pub mod crosscheck;
pub mod error;
pub mod factor;
pub mod link;
pub mod load;
pub mod memory;
pub mod quic;
pub mod record;
pub mod resident;
pub mod roundtrip;
pub mod roundtrip_quic;
pub mod scenario;
pub mod settings;
pub mod sink;
pub mod stats;
pub mod steps;
pub mod timeline;
pub mod trace;
pub mod transfer;
pub mod transport;
pub mod units;

pub use pqtls_tls13::wire;

pub use error::{Error, Result};
