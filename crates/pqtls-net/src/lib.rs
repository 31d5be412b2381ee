//! pqtls over real sockets: [`serve`], the HTTPS/1.1 server (`pqtls serve`) on either stack, and
//! [`load`], the load generator (`pqtls load`); the layered latency and the network lab build on
//! them.

#![forbid(unsafe_code)]

pub mod http;
pub mod load;
pub mod measure;
pub mod response;
pub mod serve;
pub mod transfer;

pub use serve::{ErrorCount, ServeOptions, Server, StatsSnapshot};
