//! `--via nginx|haproxy` for the load measurement: [`Via`] implements
//! `pqtls_net::shared::Terminators` (the interface the measurement starts third-party
//! terminators through), and [`Running`] its `RunningTerminator`.

use crate::terminator::{Forward, HowToRun, Running, Terminator};
use pqtls_core::backend::PkiFiles;
use pqtls_core::scenario::Scenario;
use pqtls_core::Result;
use pqtls_net::shared::{RunningTerminator, Terminators};
use std::net::SocketAddr;
use std::path::PathBuf;

/// Where `pqtls load --via` finds nginx and HAProxy, and how it runs them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Via {
    /// `--nginx PATH`, else the trixie root.
    pub nginx: HowToRun,
    /// `--haproxy PATH`, else the trixie root.
    pub haproxy: HowToRun,
    /// nginx worker processes / HAProxy threads (1 by default).
    pub workers: usize,
    /// Keep-alive to the backend (true by default: see [`Forward::backend_keep_alive`]).
    pub backend_keep_alive: bool,
    /// Configure them to hold this many idle connections (the resident measurement); `None`:
    /// their load configuration.
    pub hold_connections: Option<usize>,
}

impl Via {
    /// Both from the Debian trixie root at `root` (e.g. [`crate::DEFAULT_ROOT`], or the path
    /// scripts/trixie-root.sh prints), one worker, keep-alive to the backend.
    pub fn root(root: impl Into<PathBuf>) -> Via {
        let root = root.into();
        Via {
            nginx: HowToRun::Root(root.clone()),
            haproxy: HowToRun::Root(root),
            workers: 1,
            backend_keep_alive: true,
            hold_connections: None,
        }
    }
}

impl Terminators for Via {
    /// Starts `name` (`nginx` or `haproxy`) for the scenario's handshake, with the server
    /// chain of `files`, listening on a free port of the backend's address (UDP, for HTTP/3,
    /// when the scenario has `http = "3"`), forwarding to it.
    fn start(
        &self,
        name: &str,
        scenario: &Scenario,
        files: &PkiFiles,
        backend: SocketAddr,
    ) -> Result<Box<dyn RunningTerminator>> {
        let kind = Terminator::parse(name)?;
        let how = match kind {
            Terminator::Nginx => &self.nginx,
            Terminator::Haproxy => &self.haproxy,
        };
        let mut site = Forward::for_handshake(SocketAddr::new(backend.ip(), 0), &scenario.handshake, &files.server)?;
        site.workers = self.workers;
        site.backend_keep_alive = self.backend_keep_alive;
        site.hold_connections = self.hold_connections;
        site.quic = scenario.transport == pqtls_core::transport::TransportKind::Quic;
        Ok(Box::new(kind.start(how, &site, backend)?))
    }
}

impl RunningTerminator for Running {
    fn addr(&self) -> SocketAddr {
        Running::addr(self)
    }

    fn describe(&self) -> pqtls_core::load::Terminator {
        self.record()
    }

    fn processes(&self) -> Option<pqtls_net::shared::ProcessReading> {
        let (rss_bytes, pss_bytes) = self.memory();
        Some(pqtls_net::shared::ProcessReading {
            processes: Running::processes(self).len() as u32,
            cpu_ns: self.cpu_ns(),
            tick_ns: crate::process::ns_per_tick(),
            rss_bytes,
            pss_bytes,
        })
    }
}
