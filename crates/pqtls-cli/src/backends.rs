//! The TLS stacks this build has, and the PKI opened with the key implementations of the
//! libraries this build links (the one place both are made).

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::{Error, Result};
use std::path::Path;

pub fn all() -> Vec<Box<dyn Backend>> {
    vec![Box::new(pqtls_openssl::OpensslBackend::new()), Box::new(pqtls_rustls::RustlsBackend::new())]
}

/// An error naming the stacks built in when `stack` is not one of them.
pub fn check_stack(backends: &[Box<dyn Backend>], stack: Stack) -> Result<()> {
    if backends.iter().any(|b| b.stack() == stack) {
        return Ok(());
    }
    Err(Error::Unsupported(format!(
        "this build has no {stack} backend; stacks built in: {}",
        backends.iter().map(|b| b.stack().name()).collect::<Vec<_>>().join(", ")
    )))
}

/// The PKI cache in `dir`.
pub fn pki(dir: &Path) -> Result<pqtls_pki::Pki> {
    pqtls_pki::Pki::open(dir)
}
