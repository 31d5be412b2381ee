//! The TLS stacks this build has.

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::{Error, Result};
use std::sync::Arc;

pub fn all() -> Vec<Box<dyn Backend>> {
    vec![Box::new(pqtls_openssl::OpensslBackend::new()), Box::new(pqtls_rustls::RustlsBackend::new())]
}

/// The certificate key implementations of the libraries this build has (OpenSSL's are the
/// PKI's own): every place that opens a PKI gets them through [`open_pki`].
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

/// Opens the PKI cache at `dir` with [`key_factories`].
pub fn open_pki(dir: impl Into<std::path::PathBuf>) -> Result<pqtls_pki::Pki> {
    Ok(pqtls_pki::Pki::open(dir)?.with_factories(key_factories()))
}

pub fn get(stack: Stack) -> Result<Box<dyn Backend>> {
    all().into_iter().find(|b| b.stack() == stack).ok_or_else(|| {
        Error::Unsupported(format!(
            "this build has no {stack} backend; stacks built in: {}",
            all().iter().map(|b| b.stack().name()).collect::<Vec<_>>().join(", ")
        ))
    })
}
