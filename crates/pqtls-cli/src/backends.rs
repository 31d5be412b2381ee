//! The TLS stacks this build has.

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::{Error, Result};

pub fn all() -> Vec<Box<dyn Backend>> {
    vec![Box::new(pqtls_openssl::OpensslBackend::new()), Box::new(pqtls_rustls::RustlsBackend::new())]
}

pub fn get(stack: Stack) -> Result<Box<dyn Backend>> {
    all().into_iter().find(|b| b.stack() == stack).ok_or_else(|| {
        Error::Unsupported(format!(
            "this build has no {stack} backend; stacks built in: {}",
            all().iter().map(|b| b.stack().name()).collect::<Vec<_>>().join(", ")
        ))
    })
}
