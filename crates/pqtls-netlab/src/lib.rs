//! The network lab: client, router and server in their own network namespaces, joined by
//! two veth pairs, with the link's rate (tbf), loss (iptables `statistic`), delay and jitter
//! (our NFQUEUE emulator, or netem where the kernel has it) set in the router, and every link
//! verified by measurement before use. See docs/netlab.md.
//!
//! ```no_run
//! use pqtls_netlab::{Lab, LabOptions, Side, VerifyOptions};
//! # fn main() -> pqtls_netlab::Result<()> {
//! let network = pqtls_core::scenario::NetworkSpec {
//!     rtt_ns: Some(50_000_000), bits_per_s: Some(100_000_000), loss: 0.0, jitter_ns: 0, initcwnd: Some(10),
//!     client_initcwnd: None, server_initcwnd: None,
//! };
//! let lab = Lab::up(&network, &LabOptions::default())?;
//! let report = lab.verified(&VerifyOptions::default(), &std::sync::atomic::AtomicBool::new(false))?;
//! let server = lab.spawn_in(Side::Server, "server", || { /* bind, serve */ })?;
//! // … a client in Side::Client connects to lab.server_addr() …
//! server.join().ok();
//! # Ok(()) }
//! ```

#![deny(unsafe_code)]

pub mod cmd;
pub mod emulator;
pub mod error;
pub mod netns;
pub mod nfqueue;
pub mod tcpinfo;
pub mod topology;
pub mod verify;

pub use emulator::EmulatorReport;
pub use error::{Error, Result};
pub use netns::NsThread;
pub use topology::{clean, lab_namespaces, require_root, DelayBackend, Lab, LabOptions, LabSetup, LinkSpec, Side};
pub use verify::{Check, LinkReport, Tolerances, VerifyOptions};
