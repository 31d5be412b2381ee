//! pqtls over real sockets: [`serve`], the HTTPS/1.1 server (`pqtls serve`) on either stack;
//! [`load`], the load generator (`pqtls load`); and the measurements built on them — [`measure`]
//! (load, and layers: load with a packet capture) and [`transfer`] (TTFB/TTLB over the network
//! lab) — which implement the lab's `Measurement` and run in its one runner.

#![forbid(unsafe_code)]

pub mod carrier;
pub mod http;
pub mod links;
pub mod load;
pub mod measure;
pub mod resident;
pub mod response;
pub mod serve;
pub mod shared;
pub mod transfer;

pub use serve::{ErrorCount, ServeOptions, Server, StatsSnapshot};
