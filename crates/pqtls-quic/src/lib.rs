//! pqtls over QUIC (issue 22): the rustls backend's configurations — the same provider, groups,
//! signature schemes and PKI — carried by quinn instead of TCP.

pub mod flights;
pub mod h3;
pub mod insitu;
pub mod serve;
pub mod session;
pub mod tuning;
pub mod wire;

/// The client's QUIC crypto configuration ([`h3::configs`]), as callers name it.
pub use quinn::crypto::rustls::QuicClientConfig;
