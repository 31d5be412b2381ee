//! pqtls over real sockets. Today: [`serve`], the HTTPS/1.1 server (`pqtls serve`) on either
//! stack; the load generator, the layered latency and the network lab build on it.

#![forbid(unsafe_code)]

pub mod http;
pub mod serve;

pub use serve::{ErrorCount, ServeOptions, Server, StatsSnapshot};
