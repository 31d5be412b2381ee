//! Algorithms that neither OpenSSL 3.5 nor rustls/aws-lc-rs ships in TLS, for the rustls
//! backend and the PKI (see docs/oqs.md).

pub mod kx;

pub use kx::{composable, group};
pub mod sig;

pub use sig::{signing_key, verification_algorithms, webpki_algorithms, OqsKeys};
