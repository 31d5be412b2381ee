//! OpenSSL's allocations, counted through its allocator hooks (`CRYPTO_set_mem_functions`)
//! by [`pqtls_core::memory`]'s C door.

use pqtls_core::backend::AllocationCoverage;
use pqtls_core::memory::{c_free, c_malloc, c_realloc};
use pqtls_core::{Error, Result};
use std::os::raw::{c_char, c_int, c_void};

type MallocFn = unsafe extern "C" fn(usize, *const c_char, c_int) -> *mut c_void;
type ReallocFn = unsafe extern "C" fn(*mut c_void, usize, *const c_char, c_int) -> *mut c_void;
type FreeFn = unsafe extern "C" fn(*mut c_void, *const c_char, c_int);

extern "C" {
    fn CRYPTO_set_mem_functions(m: Option<MallocFn>, r: Option<ReallocFn>, f: Option<FreeFn>) -> c_int;
    fn CRYPTO_get_mem_functions(m: *mut Option<MallocFn>, r: *mut Option<ReallocFn>, f: *mut Option<FreeFn>);
}

/// Routes OpenSSL's `CRYPTO_malloc/realloc/free` through the counting hooks. OpenSSL takes
/// them only before its first allocation (after it, blocks it already holds would be freed by
/// a `free` that did not make them), so this must run before anything else touches OpenSSL:
/// `pqtls`' `main` calls it first. Calling it again once installed is harmless.
pub fn count_allocations() -> Result<()> {
    if allocations_counted() {
        return Ok(());
    }
    // SAFETY: the three functions have OpenSSL's CRYPTO_*_fn signatures and work as a set
    // (a block from c_malloc/c_realloc carries its size for c_free); OpenSSL refuses them
    // (returns 0) once it has allocated, so no block it holds can reach c_free.
    let ok = unsafe { CRYPTO_set_mem_functions(Some(c_malloc), Some(c_realloc), Some(c_free)) };
    if ok == 1 {
        Ok(())
    } else {
        Err(Error::Unsupported(
            "OpenSSL has already allocated memory, so its allocations can no longer be counted \
             (CRYPTO_set_mem_functions refuses hooks after the first allocation): the counter must be installed \
             before anything uses OpenSSL — pqtls installs it first thing in main; in a program of your own call \
             pqtls_openssl::count_allocations() before any other OpenSSL call"
                .into(),
        ))
    }
}

/// Whether OpenSSL's allocator is the counting one.
pub fn allocations_counted() -> bool {
    let (mut m, mut r, mut f): (Option<MallocFn>, Option<ReallocFn>, Option<FreeFn>) = (None, None, None);
    // SAFETY: CRYPTO_get_mem_functions writes the three current function pointers into the
    // locations we own.
    unsafe { CRYPTO_get_mem_functions(&mut m, &mut r, &mut f) };
    m.map(|m| m as usize) == Some(c_malloc as MallocFn as usize)
        && f.map(|f| f as usize) == Some(c_free as FreeFn as usize)
}

/// What an OpenSSL memory measurement counts, or why it cannot.
pub fn coverage() -> Result<AllocationCoverage> {
    if !allocations_counted() {
        return Err(Error::Unsupported(
            "OpenSSL's allocations are not being counted: its allocator hooks were not installed before its first \
             allocation (pqtls_openssl::count_allocations)"
                .into(),
        ));
    }
    Ok(AllocationCoverage {
        counted: "OpenSSL CRYPTO_malloc/realloc/free (CRYPTO_set_mem_functions hooks, requested bytes); pqtls' Rust \
                  glue (counting global allocator)"
            .into(),
        not_counted: "glibc's own internal allocations; OpenSSL's secure heap (not enabled in pqtls)".into(),
    })
}
