//! Handshake message sizes from the records this side wrote: the shared scanner of
//! [`pqtls_tls13::WireScan`] (rustls hands it its traffic secrets through the `KeyLog`
//! interface).

pub(crate) use pqtls_tls13::{Suite, WireScan};
