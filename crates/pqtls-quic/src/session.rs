//! quinn's rustls crypto sessions, watched: every method forwards to the session quinn made,
//! and each call that moves handshake data (CRYPTO frames) is shown to the session's
//! [`SessionWatch`]. In situ copies what each side writes (`insitu`); HTTP/3 also times the
//! calls and reads the messages (`h3::Observed`).
//!
//! Both sides' transport parameters go to rustls without quinn's random reserved ("GREASE",
//! RFC 9000 §18.1) parameter and in quinn's fixed order ([`without_grease`]): handshake sizes
//! are then exact, and nginx 1.26 can read them.

use pqtls_core::trace::thread_cpu_ns;
use quinn_proto::crypto::rustls::{QuicClientConfig, QuicServerConfig};
use quinn_proto::crypto::{self, ExportKeyingMaterialError, KeyPair, Keys, PacketKey, Session, UnsupportedVersion};
use quinn_proto::transport_parameters::TransportParameters;
use quinn_proto::{ConnectError, ConnectionId, Side, TransportError};
use std::any::Any;
use std::sync::Arc;

/// What watches one session.
pub trait SessionWatch: Send + Sync + 'static {
    /// Read the thread CPU clock around each call (two system calls a call: not for in situ,
    /// whose tracer times the calls itself); otherwise `cpu_ns` is 0.
    const TIMED: bool;

    /// One call into the session: the handshake data it read and wrote, its CPU, and whether
    /// the session is still handshaking after it. Starting the session (the client's builds
    /// its ClientHello) is a call that moves no data.
    fn call(&mut self, cpu_ns: u64, read: Option<&[u8]>, wrote: &[u8], handshaking: bool);

    /// The destination connection ID the session's Initial keys are made for (quinn asks when
    /// the connection starts, and again after a Retry).
    fn initial_keys_for(&self, _dst_cid: &[u8]) {}
}

/// What a configuration gives each session it starts: its watcher.
pub trait Watch: Send + Sync + 'static {
    type Session: SessionWatch;
    fn session(&self, is_client: bool) -> Self::Session;
}

/// A QUIC crypto configuration (`QuicClientConfig` or `QuicServerConfig`) whose sessions are
/// watched by what `watch` makes.
pub struct Watched<C, W> {
    pub inner: Arc<C>,
    pub watch: W,
}

/// Runs `f`, with its thread CPU when `timed`.
fn timed<R>(timed: bool, f: impl FnOnce() -> R) -> (R, u64) {
    if !timed {
        return (f(), 0);
    }
    let t0 = thread_cpu_ns();
    let r = f();
    (r, thread_cpu_ns().saturating_sub(t0))
}

impl<W: Watch> crypto::ClientConfig for Watched<QuicClientConfig, W> {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &TransportParameters,
    ) -> std::result::Result<Box<dyn Session>, ConnectError> {
        // Builds the ClientHello and its key shares.
        let params = without_grease(params, Side::Server);
        let (inner, cpu) = timed(W::Session::TIMED, || self.inner.clone().start_session(version, server_name, &params));
        let inner = inner?;
        let mut watch = self.watch.session(true);
        watch.call(cpu, None, &[], inner.is_handshaking());
        Ok(Box::new(WatchedSession { inner, watch }))
    }
}

impl<W: Watch> crypto::ServerConfig for Watched<QuicServerConfig, W> {
    fn initial_keys(&self, version: u32, dst_cid: &ConnectionId) -> std::result::Result<Keys, UnsupportedVersion> {
        self.inner.initial_keys(version, dst_cid)
    }

    fn retry_tag(&self, version: u32, orig_dst_cid: &ConnectionId, packet: &[u8]) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(self: Arc<Self>, version: u32, params: &TransportParameters) -> Box<dyn Session> {
        let params = without_grease(params, Side::Client);
        let (inner, cpu) = timed(W::Session::TIMED, || self.inner.clone().start_session(version, &params));
        let mut watch = self.watch.session(false);
        watch.call(cpu, None, &[], inner.is_handshaking());
        Box::new(WatchedSession { inner, watch })
    }
}

/// `params` less quinn's reserved ("GREASE") parameter, in quinn's fixed order: written and read
/// back by quinn, which skips parameters it does not know (`reader` is the side that will read
/// them, whose checks quinn applies).
///
/// Why: quinn adds to every handshake a reserved parameter of random id (31·N + 27, up to 2^62)
/// and random length (0–15 bytes) and shuffles the order. nginx 1.26 matches parameter ids as
/// 16 bits (`ngx_quic_parse_transport_param` takes a `uint16_t`), so about 13 in 65,536 of those
/// ids land on a parameter it knows, and it closes the connection: measured through
/// `pqtls load --quic --via nginx`, 16 of 98,460 connections failed (11
/// TRANSPORT_PARAMETER_ERROR "failed to process transport parameters", the others resets and
/// timeouts). Without it, every ClientHello and EncryptedExtensions of one configuration has the
/// same size. quinn reads back whatever it wrote; were it ever not to, `params` go as they are.
pub(crate) fn without_grease(params: &TransportParameters, reader: Side) -> TransportParameters {
    let mut bytes = Vec::new();
    params.write(&mut bytes);
    TransportParameters::read(reader, &mut bytes.as_slice()).unwrap_or(*params)
}

struct WatchedSession<S> {
    inner: Box<dyn Session>,
    watch: S,
}

impl<S: SessionWatch> Session for WatchedSession<S> {
    fn initial_keys(&self, dst_cid: &ConnectionId, side: Side) -> Keys {
        self.watch.initial_keys_for(dst_cid);
        self.inner.initial_keys(dst_cid, side)
    }

    fn handshake_data(&self) -> Option<Box<dyn Any>> {
        self.inner.handshake_data()
    }

    fn peer_identity(&self) -> Option<Box<dyn Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn crypto::HeaderKey>, Box<dyn PacketKey>)> {
        self.inner.early_crypto()
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> std::result::Result<bool, TransportError> {
        let (r, cpu) = timed(S::TIMED, || self.inner.read_handshake(buf));
        self.watch.call(cpu, Some(buf), &[], self.inner.is_handshaking());
        r
    }

    fn transport_parameters(&self) -> std::result::Result<Option<TransportParameters>, TransportError> {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        let before = buf.len();
        let (keys, cpu) = timed(S::TIMED, || self.inner.write_handshake(buf));
        self.watch.call(cpu, None, &buf[before..], self.inner.is_handshaking());
        keys
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner.next_1rtt_keys()
    }

    fn is_valid_retry(&self, orig_dst_cid: &ConnectionId, header: &[u8], payload: &[u8]) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> std::result::Result<(), ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}
