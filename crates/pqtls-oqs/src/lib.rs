//! Algorithms that neither OpenSSL 3.5 nor rustls/aws-lc-rs ships in TLS, for the rustls
//! backend and the PKI (see docs/oqs.md).

pub mod kx;

pub use kx::{kx_group, FRODO640AES, P256_MLKEM512, X25519_FRODO640AES, X25519_MLKEM512};
pub mod sig;

pub use sig::{signing_key, verification_algorithms, webpki_algorithms, OqsKeys};
