//! Transports: move bytes between a client and a server [`Endpoint`] until both are done,
//! all behind one trait, chosen by a [`TransportKind`] value.
//!
//! - [`memory`]: both endpoints in the calling thread, buffers in memory. Nothing but the
//!   two stacks runs, so the per-step CPU times are the stacks' own.
//! - [`socketpair`]: client and server in two threads pinned to two CPUs ([`cpus`] picks
//!   them from the machine's topology), over a UNIX socketpair: same steps, real kernel I/O.
//! - [`tcp`]: the same two threads over a TCP connection on loopback, one connection per
//!   handshake.
//! - [`quic`]: both endpoints in the calling thread, the handshake carried by QUIC datagrams
//!   (the driver, `pqtls-quic`, is given by the command: [`build_with`]).
//!
//! The two-thread transports share one implementation ([`threads`]); each only says how to
//! set up a connected pair of streams ([`threads::Link`]). One endpoint's side of a
//! handshake over any byte stream is [`stream::exchange`], also used against peers that pqtls
//! does not control ([`over_stream`]).

pub mod cpus;
pub mod memory;
pub mod quic;
pub mod socketpair;
pub mod stream;
pub mod tcp;
pub mod threads;

use pqtls_core::backend::{EndpointOptions, Prepared};
use pqtls_core::Result;
use std::sync::Arc;

pub use memory::{handshake, in_memory, Exchange};
pub use pqtls_core::transport::{Handshake, TransportKind, TransportOptions, Wait, DEFAULT_HANDSHAKE_TIMEOUT};
pub use stream::over_stream;

/// What one run of a transport gives back: the handshakes in order, and notes for the
/// person reading the results (which CPUs the threads ran on, why they were not pinned…).
#[derive(Clone, Debug, Default)]
pub struct Batch {
    pub handshakes: Vec<Handshake>,
    pub notes: Vec<String>,
}

/// Moves the bytes of handshakes between a client and a server endpoint.
pub trait Transport: Send {
    fn kind(&self) -> TransportKind;

    /// Runs up to `handshakes` handshakes one after another, each between a fresh client and
    /// a fresh server endpoint from `prepared`; `stop` is polled between handshakes. A
    /// handshake that fails (or a peer that does not answer within the handshake timeout)
    /// ends the run with an error.
    fn run(
        &mut self,
        prepared: Arc<dyn Prepared>,
        handshakes: u64,
        opts: &EndpointOptions,
        stop: &dyn Fn() -> bool,
    ) -> Result<Batch>;
}

/// The transport of the given kind. Nothing is checked here: a two-thread transport reads
/// the CPUs it may use, and checks the ones asked for, on its first run; QUIC without a driver
/// says so on its first run ([`build_with`] gives it one).
pub fn build(kind: TransportKind, options: &TransportOptions) -> Box<dyn Transport> {
    build_with(kind, options, None)
}

/// [`build`], with the QUIC driver `transport = quic` runs.
pub fn build_with(
    kind: TransportKind,
    options: &TransportOptions,
    quic: Option<Arc<dyn pqtls_core::quic::QuicHandshaker>>,
) -> Box<dyn Transport> {
    match kind {
        TransportKind::Quic => Box::new(quic::Quic { driver: quic }),
        TransportKind::Memory => Box::new(memory::Memory),
        TransportKind::Socketpair => Box::new(threads::Threads::<socketpair::Socketpair>::new(options.clone())),
        TransportKind::Tcp => Box::new(threads::Threads::<tcp::TcpLoopback>::new(options.clone())),
    }
}
