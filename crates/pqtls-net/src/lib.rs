//! pqtls over real sockets. The [`carrier`] is how a scenario's bytes cross the network — pqtls'
//! own server started for it and the load generator's connections — once for TCP + TLS
//! ([`serve`], the HTTPS/1.1 server `pqtls serve` on either stack; [`load`], the mio load
//! generator) and once for QUIC (HTTP/3 over quinn). The measurements have one path each over
//! it — [`measure`] (load, and layers: load with a packet capture), [`transfer`] (TTFB/TTLB over
//! the network lab) and [`resident`] (memory per idle connection) — sharing [`shared`], never
//! each other's modules; they implement the lab's `Measurement` and run in its one runner.

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
