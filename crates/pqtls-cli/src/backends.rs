//! The TLS stacks this build has, and the PKI opened with the key implementations of the
//! libraries this build links (the one place both are made).

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::{Error, Result};
use std::path::Path;
use std::sync::Arc;

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

/// The certificate key implementations of the libraries this build has (OpenSSL's are the
/// PKI's own): every place that opens a PKI gets them through [`pki`].
pub fn key_factories() -> Vec<Arc<dyn pqtls_pki::KeyFactory>> {
    pqtls_rustls::key_factories()
}

/// The PKI directory when `--pki`/`--out` is not given: `$PQTLS_PKI_DIR`, or `./pki`.
pub fn default_pki_dir() -> std::path::PathBuf {
    match std::env::var_os("PQTLS_PKI_DIR") {
        Some(d) if !d.is_empty() => std::path::PathBuf::from(d),
        _ => pqtls_pki::Pki::default_dir(),
    }
}

/// The PKI cache in `dir`, with [`key_factories`].
pub fn pki(dir: &Path) -> Result<pqtls_pki::Pki> {
    Ok(pqtls_pki::Pki::open(dir)?.with_factories(key_factories()))
}
