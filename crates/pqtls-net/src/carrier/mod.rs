//! The carrier: how a scenario's bytes cross the network, as a value. A [`Carrier`] starts
//! pqtls' own server for a scenario and runs the load generator's connections and requests;
//! it is implemented once for TCP + TLS (HTTPS/1.1: the mio server of [`crate::serve`] and
//! the generator of [`crate::load`]) and once for QUIC (HTTP/3: quinn's server of
//! `pqtls_quic::serve` with this crate's routes, and the generator of [`quic_load`]). The load,
//! transfer and resident measurements each have one path over it: one [`LoadOptions`], one
//! open-loop [`Timetable`], one [`LoadRun`] (histograms, timelines) whatever the wire; only the
//! generators' event loops are the wire's own.

pub mod quic;
pub(crate) mod quic_load;
pub(crate) mod tally;
pub mod tcp;

use crate::load::Target;
use crate::serve::StatsSnapshot;
use pqtls_core::backend::{EndpointOptions, Negotiated, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::link::StallScreen;
use pqtls_core::load::{LoadProgress, LoadRun};
use pqtls_core::transport::TransportKind;
use pqtls_core::Result;
use std::net::SocketAddr;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The two wires: TCP + TLS (HTTPS/1.1) and QUIC (HTTP/3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Wire {
    Tcp,
    Quic,
}

impl Wire {
    /// The wire of a scenario's transport (`quic`; every other transport is TCP's).
    pub fn of(transport: TransportKind) -> Wire {
        match transport {
            TransportKind::Quic => Wire::Quic,
            _ => Wire::Tcp,
        }
    }

    /// Its carrier.
    pub fn carrier(self) -> &'static dyn Carrier {
        match self {
            Wire::Tcp => &tcp::Tcp,
            Wire::Quic => &quic::Quic,
        }
    }
}

/// What pqtls' own server for a scenario is started with. The TCP carrier serves the
/// stack's prepared contexts (`tls`; `None`: plain HTTP) with the endpoints' options; the
/// QUIC carrier serves the scenario's rustls configuration made from `files`.
pub struct ServeWith<'a> {
    pub listen: SocketAddr,
    pub workers: usize,
    pub tls: Option<Arc<dyn Prepared>>,
    pub endpoint: EndpointOptions,
    pub keep_alive: bool,
    pub quic: Option<quic::QuicServing<'a>>,
}

/// pqtls' own server, running (stopped when dropped).
pub trait OwnServer: Send {
    /// Where it listens (TCP or UDP).
    fn addr(&self) -> SocketAddr;
    /// Its counters now, as `pqtls serve`'s `/stats` (what a wire has no notion of stays 0).
    fn stats(&self) -> StatsSnapshot;
    /// Stops it; its counters at the end.
    fn stop(self: Box<Self>) -> Result<StatsSnapshot>;
}

/// How a scenario's bytes cross the network.
pub trait Carrier: Sync {
    fn wire(&self) -> Wire;
    /// pqtls' own server on this wire, for the record: `library` is the stack's version.
    fn describe(&self, library: &str, stack: Stack) -> String;
    /// Starts pqtls' own server (`pqtls serve`, or `pqtls serve --quic`).
    fn serve(&self, with: ServeWith<'_>) -> Result<Box<dyn OwnServer>>;
    /// Runs the load generator: its connections and requests, to [`LoadRun`].
    fn run(
        &self,
        opts: &LoadOptions,
        interrupt: &AtomicBool,
        progress: &mut dyn FnMut(&LoadProgress),
    ) -> Result<LoadRun>;
}

/// Runs the load generator of `opts`' wire.
pub fn run(opts: &LoadOptions, interrupt: &AtomicBool, progress: &mut dyn FnMut(&LoadProgress)) -> Result<LoadRun> {
    opts.client.wire().carrier().run(opts, interrupt, progress)
}

/// The generator's client, per wire.
#[derive(Clone)]
pub enum Client {
    /// HTTPS/1.1 over TCP: the stack's client contexts (`None`: plain HTTP/1.1, an `http://`
    /// target) and its endpoints' options.
    Tcp { tls: Option<Arc<dyn Prepared>>, endpoint: EndpointOptions },
    /// HTTP/3 over QUIC: quinn's client.
    Quic(quic::QuicClient),
}

impl Client {
    pub fn wire(&self) -> Wire {
        match self {
            Client::Tcp { .. } => Wire::Tcp,
            Client::Quic(_) => Wire::Quic,
        }
    }
}

/// What the handshakes must negotiate (names as [`Negotiated`] reports them; `None`: any).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Expect {
    pub group: Option<String>,
    pub cipher: Option<String>,
    pub sigalg: Option<String>,
    /// How the server's chain must arrive (RFC 8879: `zlib`, `brotli`, `zstd`); checked on
    /// full handshakes only (a resumed one carries no certificate).
    pub cert_compression: Option<String>,
}

impl Expect {
    /// The differences between what was negotiated and what was asked (empty: as asked).
    /// Names are compared without case and `-`/`_` (stacks spell groups differently).
    pub fn mismatches(&self, got: &Negotiated) -> Vec<String> {
        let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], "");
        let mut v = Vec::new();
        for (what, want, have) in [
            ("group", &self.group, &got.group),
            ("cipher suite", &self.cipher, &got.cipher),
            ("signature algorithm", &self.sigalg, &got.sigalg),
        ] {
            if let Some(w) = want {
                if norm(w) != norm(have) {
                    v.push(format!("{what} {have} (asked: {w})"));
                }
            }
        }
        if let Some(w) = self.cert_compression.as_ref().filter(|_| !got.resumed) {
            let have = got.cert_compression.as_deref().unwrap_or("unknown");
            if have != w {
                let how = if have == "none" {
                    "the server's chain uncompressed".to_string()
                } else {
                    format!("certificate compression {have}")
                };
                v.push(format!("{how} (asked: the chain compressed with {w})"));
            }
        }
        v
    }
}

/// The certificate compression a handshake configuration asks for, as [`Expect`] checks it
/// (`None`: none asked, nothing to check).
pub fn compression_asked(h: &pqtls_core::config::HandshakeConfig) -> Option<String> {
    (h.cert_compression != pqtls_core::catalogue::CertCompression::None).then(|| h.cert_compression.name().to_string())
}

/// How to load, whatever the wire.
#[derive(Clone)]
pub struct LoadOptions {
    pub target: Target,
    /// The wire's client: its TLS contexts and connection settings.
    pub client: Client,
    pub threads: usize,
    /// Concurrent connections per thread.
    pub connections: usize,
    /// Open loop at this many requests per second in total; `None`: closed loop.
    pub rate_per_s: Option<f64>,
    /// Several requests per connection (false: one request per TLS connection).
    pub keep_alive: bool,
    /// Run, unmeasured, for this long first.
    pub warmup: Duration,
    /// Measure for this long.
    pub duration: Duration,
    /// Closed loop: stop after this many measured requests (before `duration` if reached).
    pub requests: Option<u64>,
    /// A transaction not complete this long after it started (connect → last byte, whatever
    /// arrives meanwhile) is abandoned (an error of kind `timeout`).
    pub timeout: Duration,
    /// A response body over this many bytes is an error of kind `body` (the URL's size, when
    /// its path names one, is the limit instead: [`Target::asked_bytes`]).
    pub max_body_bytes: u64,
    pub expect: Expect,
    /// What the client trusts for the server's chain ([`pqtls_core::backend::ClientTrust::describe`]),
    /// named in the error when the chain does not verify.
    pub trust: String,
    /// Keep every measured transaction's timeline (for layers).
    pub timelines: bool,
    /// Through the network lab: each measured transaction screened for host stalls (its
    /// packets released late by the delay emulator), and measured again or counted.
    pub stalls: Option<StallScreen>,
}

/// An open loop's timetable for one of `threads` load threads: its `k`-th transaction is due
/// at `origin + (k + index/threads) / rate_per_s` (threads spread evenly over one interval), in
/// whole ns — the same for every wire.
#[derive(Clone, Copy, Debug)]
pub struct Timetable {
    pub origin: Instant,
    /// This thread's share of the rate.
    pub rate_per_s: f64,
    pub index: usize,
    pub threads: usize,
}

impl Timetable {
    fn phase(&self) -> f64 {
        self.index as f64 / self.threads as f64
    }

    /// The `k`-th due time.
    pub fn due_at(&self, k: u64) -> Instant {
        self.origin + Duration::from_nanos(((k as f64 + self.phase()) * 1e9 / self.rate_per_s).round() as u64)
    }

    /// How many transactions are due by `now`: the first `k` with `due_at(k) > now` (from an
    /// estimate, corrected against [`Timetable::due_at`] itself).
    pub fn due_by(&self, now: Instant) -> u64 {
        let elapsed = now.saturating_duration_since(self.origin).as_secs_f64();
        let mut k = (elapsed * self.rate_per_s - self.phase()).floor().max(0.0) as u64;
        while k > 0 && self.due_at(k - 1) > now {
            k -= 1;
        }
        while self.due_at(k) <= now {
            k += 1;
        }
        k
    }

    /// The first `k` in `[a, b)` with `due_at(k) >= t` (`b` if none): due times only grow with `k`.
    pub fn first_due_at_or_after(&self, a: u64, b: u64, t: Instant) -> u64 {
        let (mut lo, mut hi) = (a, b);
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if self.due_at(mid) < t {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        lo
    }
}
