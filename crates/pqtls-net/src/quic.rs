//! HTTP/3 for `pqtls serve --quic` and the load measurement's `http = "3"` scenarios: the
//! QUIC server and load generator of pqtls-quic, answering with this crate's routes (the same
//! `GET /<size>` and `/stats` as over TCP: [`crate::http::route`]) and counted in the same
//! [`StatsSnapshot`].

use crate::http::{self, Route};
use crate::serve::StatsSnapshot;
use pqtls_core::backend::{KeyLog, PkiFiles};
use pqtls_core::config::HandshakeConfig;
use pqtls_core::Result;
use pqtls_quic::serve::{Answer, CountersSnapshot, Routes, ServeOptions, Server};
use pqtls_quic::tuning::Tuning;
use std::net::SocketAddr;
use std::sync::Arc;

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

/// Starts `pqtls serve --quic` for one configuration (rustls only) on UDP `listen`.
pub fn serve(listen: SocketAddr, workers: usize, cfg: &HandshakeConfig, files: &PkiFiles) -> Result<Server> {
    serve_tuned(listen, workers, cfg, files, Tuning::default(), None)
}

/// [`serve`] with quinn's settings (the network lab's QUIC transfers: initial window, MTU,
/// tokens) and, with `key_log`, the TLS secrets of every connection written there.
pub fn serve_tuned(
    listen: SocketAddr,
    workers: usize,
    cfg: &HandshakeConfig,
    files: &PkiFiles,
    tuning: Tuning,
    key_log: Option<Arc<dyn KeyLog>>,
) -> Result<Server> {
    let (_, tls) = pqtls_quic::h3::configs(cfg, files, key_log)?;
    Server::start(ServeOptions {
        listen,
        workers,
        tls,
        routes: Arc::new(ServeRoutes),
        codepoints: cfg.codepoints.clone(),
        tuning,
    })
}

/// The HTTP/3 generator's options for what the TCP generator's `opts` ask (target, shape,
/// timing; the summary reads `opts` as the run's), with the QUIC client's TLS configuration,
/// what the handshakes must negotiate and quinn's settings.
pub(crate) fn load_options(
    opts: &crate::load::LoadOptions,
    cfg: &HandshakeConfig,
    files: &PkiFiles,
    tls: Arc<pqtls_quic::QuicClientConfig>,
    want: crate::load::Expect,
    tuning: Tuning,
) -> pqtls_quic::load::LoadOptions {
    pqtls_quic::load::LoadOptions {
        addr: opts.target.addr,
        authority: opts.target.host.clone(),
        path: opts.target.path.clone(),
        server_name: files.trust.server_name.clone(),
        tls,
        codepoints: cfg.codepoints.clone(),
        threads: opts.threads,
        connections: opts.connections,
        rate_per_s: opts.rate_per_s,
        keep_alive: opts.keep_alive,
        warmup: opts.warmup,
        duration: opts.duration,
        requests: opts.requests,
        timeout: opts.timeout,
        max_body_bytes: opts.max_body_bytes,
        expect: Arc::new(move |n| want.mismatches(n)),
        timelines: opts.timelines,
        tuning,
        // One store for the run: each connection offers a token the one before it received.
        tokens: tuning.token_store(),
        stalls: opts.stalls.clone(),
    }
}
