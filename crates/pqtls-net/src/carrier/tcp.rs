//! The TCP + TLS carrier: HTTPS/1.1 (or plain HTTP/1.1) — `pqtls serve`'s mio server
//! ([`crate::serve`]) and the mio load generator ([`crate::load`]).

use super::{Carrier, LoadOptions, OwnServer, ServeWith, Wire};
use crate::serve::{ServeOptions, Server, StatsSnapshot};
use pqtls_core::catalogue::Stack;
use pqtls_core::load::{LoadProgress, LoadRun};
use pqtls_core::Result;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;

pub struct Tcp;

impl Carrier for Tcp {
    fn wire(&self) -> Wire {
        Wire::Tcp
    }

    fn describe(&self, library: &str, stack: Stack) -> String {
        format!("pqtls serve {library} ({stack})")
    }

    fn serve(&self, with: ServeWith<'_>) -> Result<Box<dyn OwnServer>> {
        let ServeWith { listen, workers, tls, endpoint, keep_alive, .. } = with;
        Ok(Box::new(Server::start(ServeOptions { listen, threads: workers, tls, endpoint, keep_alive })?))
    }

    fn run(
        &self,
        opts: &LoadOptions,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&LoadProgress),
    ) -> Result<LoadRun> {
        crate::load::run(opts, interrupt, progress)
    }
}

impl OwnServer for Server {
    fn addr(&self) -> SocketAddr {
        Server::addr(self)
    }

    fn stats(&self) -> StatsSnapshot {
        Server::stats(self)
    }

    fn stop(self: Box<Self>) -> Result<StatsSnapshot> {
        Server::stop(*self)
    }
}
