//! The QUIC carrier: HTTP/3 — quinn's server of pqtls-quic (`pqtls serve --quic`) answering
//! with this crate's routes (the same `GET /<size>` and `/stats` as over TCP:
//! [`crate::http::route`]) and counted in the same [`StatsSnapshot`], and the HTTP/3 load
//! generator ([`super::quic_load`]).

use super::{Carrier, LoadOptions, OwnServer, ServeWith, Wire};
use crate::http::{self, Route};
use crate::serve::StatsSnapshot;
use pqtls_core::backend::{KeyLog, PkiFiles, Prepared};
use pqtls_core::catalogue::{CodepointOverrides, Stack};
use pqtls_core::config::HandshakeConfig;
use pqtls_core::load::{LoadProgress, LoadRun};
use pqtls_core::{Error, Result};
use pqtls_quic::serve::{Answer, CountersSnapshot, Routes, ServeOptions, Server};
use pqtls_quic::tuning::Tuning;
use pqtls_quic::QuicClientConfig;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

pub struct Quic;

/// What a scenario's QUIC server is made of besides its prepared contexts
/// ([`ServeWith::tls`], the same as over TCP): its handshake, quinn's settings, and where its
/// TLS secrets go.
pub struct QuicServing<'a> {
    pub cfg: &'a HandshakeConfig,
    pub tuning: Tuning,
    pub key_log: Option<Arc<dyn KeyLog>>,
}

/// The HTTP/3 generator's client: quinn's TLS configuration (ALPN h3), the name the server's
/// certificate must have, the run's code points (to name what was negotiated), quinn's
/// settings, and the run's store of address-validation tokens (`Tuning::address_tokens`: one
/// store for the run — each connection offers a token one before it received —, and for runs
/// before it that primed it; `None`: every connection a first contact).
#[derive(Clone)]
pub struct QuicClient {
    pub tls: Arc<QuicClientConfig>,
    pub server_name: String,
    pub codepoints: CodepointOverrides,
    pub tuning: Tuning,
    pub tokens: Option<Arc<dyn quinn::TokenStore>>,
}

impl QuicClient {
    /// The client of `cfg` with the configuration `tls`, checking the name `files` trust.
    pub fn new(cfg: &HandshakeConfig, files: &PkiFiles, tls: Arc<QuicClientConfig>, tuning: Tuning) -> QuicClient {
        QuicClient {
            tls,
            server_name: files.trust.server_name.clone(),
            codepoints: cfg.codepoints.clone(),
            tuning,
            tokens: tuning.token_store(),
        }
    }
}

impl Carrier for Quic {
    fn wire(&self) -> Wire {
        Wire::Quic
    }

    /// (quinn carries rustls: the stack is always rustls.)
    fn describe(&self, library: &str, _: Stack) -> String {
        format!("pqtls serve --quic {library} (rustls; quinn + h3)")
    }

    fn serve(&self, with: ServeWith<'_>) -> Result<Box<dyn OwnServer>> {
        let (Some(q), Some(tls)) = (with.quic, with.tls) else {
            return Err(Error::Invalid("a QUIC server needs its handshake configuration and prepared contexts".into()));
        };
        Ok(Box::new(QuicServer(serve_tuned(with.listen, with.workers, q.cfg, tls.as_ref(), q.tuning, q.key_log)?)))
    }

    fn run(
        &self,
        opts: &LoadOptions,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&LoadProgress),
    ) -> Result<LoadRun> {
        super::quic_load::run(opts, interrupt, progress)
    }
}

/// `pqtls serve --quic`, its counters read as `pqtls serve`'s.
pub struct QuicServer(pub Server);

impl OwnServer for QuicServer {
    fn addr(&self) -> SocketAddr {
        self.0.addr()
    }

    fn stats(&self) -> StatsSnapshot {
        stats(&self.0.counters())
    }

    fn stop(self: Box<Self>) -> Result<StatsSnapshot> {
        Ok(stats(&self.0.stop()))
    }
}

/// The routes of `pqtls serve`, over HTTP/3.
struct ServeRoutes;

impl Routes for ServeRoutes {
    fn answer(&self, method: &str, path: &str, counters: &CountersSnapshot) -> Answer {
        let req = http::Request { method: method.to_string(), path: path.to_string(), keep_alive: true };
        match http::route(&req) {
            Route::Bytes(n) => Answer::Bytes(n),
            Route::Stats => match serde_json::to_vec(&stats(counters)) {
                Ok(body) => Answer::Body { status: 200, body },
                Err(e) => Answer::Body { status: 500, body: format!("{e}\n").into_bytes() },
            },
            Route::Error(status, why) => Answer::Body { status, body: format!("{why}\n").into_bytes() },
        }
    }
}

/// The QUIC server's counters as `pqtls serve`'s (what QUIC has no notion of stays 0).
pub fn stats(c: &CountersSnapshot) -> StatsSnapshot {
    StatsSnapshot {
        connections: c.connections,
        address_validated: c.address_validated,
        handshakes: c.handshakes,
        requests: c.requests,
        response_bytes: c.response_bytes,
        response_bytes_asked: c.response_bytes_asked,
        handshake_cpu_ns_total: c.handshake_cpu_ns_total,
        handshake_cpu_ns_mean: if c.handshakes > 0 {
            c.handshake_cpu_ns_total as f64 / c.handshakes as f64
        } else {
            0.0
        },
        errors: c.errors.clone(),
        negotiated_groups: c.groups.clone(),
        ..StatsSnapshot::default()
    }
}

/// Starts `pqtls serve --quic` for one configuration (rustls only) on UDP `listen`, from the
/// contexts `Stacks::prepare` made for it, with quinn's settings (the network lab's QUIC
/// transfers: initial window, MTU, tokens) and, with `key_log`, the TLS secrets of every
/// connection written there.
pub fn serve_tuned(
    listen: SocketAddr,
    workers: usize,
    cfg: &HandshakeConfig,
    prepared: &dyn Prepared,
    tuning: Tuning,
    key_log: Option<Arc<dyn KeyLog>>,
) -> Result<Server> {
    let tls = pqtls_quic::h3::configs(cfg, prepared, key_log)?.server;
    Server::start(ServeOptions {
        listen,
        workers,
        tls,
        routes: Arc::new(ServeRoutes),
        codepoints: cfg.codepoints.clone(),
        tuning,
    })
}
