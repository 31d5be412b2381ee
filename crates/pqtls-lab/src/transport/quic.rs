//! The QUIC transport: both endpoints in the calling thread, as [`super::memory`], but the
//! handshake carried by QUIC datagrams (quinn-proto, sans-IO, on a virtual clock) instead of
//! TLS records. The driver lives in `pqtls-quic` (rustls only) and reaches this crate through
//! [`QuicHandshaker`], which the command gives to the in-situ measurement (`Insitu::quic`).

use super::{Batch, Transport, TransportKind};
use pqtls_core::backend::{EndpointOptions, Prepared};
use pqtls_core::quic::QuicHandshaker;
use pqtls_core::{Error, Result};
use std::sync::Arc;

/// The QUIC transport, with the driver it runs (`None`: the command gave none, and a run says so).
#[derive(Clone, Default)]
pub struct Quic {
    pub driver: Option<Arc<dyn QuicHandshaker>>,
}

impl Transport for Quic {
    fn kind(&self) -> TransportKind {
        TransportKind::Quic
    }

    fn run(
        &mut self,
        prepared: Arc<dyn Prepared>,
        handshakes: u64,
        opts: &EndpointOptions,
        stop: &dyn Fn() -> bool,
    ) -> Result<Batch> {
        let driver = self.driver.as_ref().ok_or_else(|| {
            Error::Unsupported(
                "transport = quic needs the QUIC driver (pqtls-quic), which this command did not give the \
                 measurement; the pqtls binary's insitu and run commands give it"
                    .into(),
            )
        })?;
        super::memory::one_by_one(handshakes, stop, || driver.handshake(prepared.as_ref(), opts))
    }
}
