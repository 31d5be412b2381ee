//! aws-lc's allocations, counted through its allocator hooks (`CRYPTO_set_mem_functions`) by
//! [`pqtls_core::memory`]'s C door; rustls' own (Rust) allocations go through the binary's
//! counting global allocator.

use pqtls_core::backend::AllocationCoverage;
use pqtls_core::memory::{c_free_clearing, c_malloc, c_realloc_clearing};
use pqtls_core::{Error, Result};
use std::sync::OnceLock;

/// Whether [`count_allocations`] installed the hooks: aws-lc has no getter to ask. Set once,
/// never changed (the hooks cannot be removed).
static INSTALLED: OnceLock<bool> = OnceLock::new();

/// Routes aws-lc's `OPENSSL_malloc/realloc/free` through the counting hooks (the clearing
/// variants: aws-lc's own `OPENSSL_free` zeroes every block it frees, and so do they).
///
/// # Safety
/// Must run before aws-lc allocates anything. Unlike OpenSSL, aws-lc does not refuse hooks
/// installed late: it would then free blocks it made earlier through a `free` that did not
/// make them. Rust runs no code before `main`, and aws-lc's static initializer only reads
/// CPU features, so the first statement of `main` qualifies (`pqtls`' `main` does it).
#[allow(unsafe_code)]
pub unsafe fn count_allocations() -> Result<()> {
    if INSTALLED.get() == Some(&true) {
        return Ok(());
    }
    // SAFETY: the three functions have aws-lc's hook signatures and work as a set; the
    // caller guarantees aws-lc holds no block yet.
    let ok = unsafe {
        aws_lc_sys::CRYPTO_set_mem_functions(Some(c_malloc), Some(c_realloc_clearing), Some(c_free_clearing))
    };
    let installed = ok == 1;
    let _ = INSTALLED.set(installed);
    if installed {
        Ok(())
    } else {
        Err(Error::Unsupported(
            "aws-lc refused the allocation-counting hooks (CRYPTO_set_mem_functions returned 0: other hooks were \
             installed first)"
                .into(),
        ))
    }
}

/// What a rustls memory measurement counts, or why it cannot.
pub fn coverage() -> Result<AllocationCoverage> {
    if INSTALLED.get() != Some(&true) {
        return Err(Error::Unsupported(
            "aws-lc's allocations are not being counted: its allocator hooks were not installed before its first \
             allocation (pqtls_rustls::count_allocations, first thing in main)"
                .into(),
        ));
    }
    Ok(AllocationCoverage {
        counted: "rustls, webpki and pqtls' provider wrappers (counting global allocator, requested bytes); aws-lc \
                  OPENSSL_malloc/realloc/free (CRYPTO_set_mem_functions hooks, requested bytes)"
            .into(),
        not_counted: "liboqs (allocates with malloc directly, no hooks: FrodoKEM, Falcon-512, SLH-DSA, composite \
                      ML-DSA+Ed25519 and liboqs' share of OQS hybrids); glibc's own internal allocations"
            .into(),
    })
}
