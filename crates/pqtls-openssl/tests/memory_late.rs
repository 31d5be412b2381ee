//! OpenSSL's allocations cannot be counted once it has allocated: installing the hooks late is
//! a clear error, never wrong numbers (a process of its own: here OpenSSL allocates first).

use pqtls_core::backend::Backend;

#[test]
fn installing_the_counter_after_openssl_allocated_is_refused_with_the_reason() {
    // Anything that makes OpenSSL allocate: a context.
    let ctx = openssl::ssl::SslContext::builder(openssl::ssl::SslMethod::tls()).expect("context");
    drop(ctx);
    let e = pqtls_openssl::count_allocations().expect_err("OpenSSL must refuse hooks after it allocated");
    let text = e.to_string();
    assert!(text.contains("already allocated") && text.contains("count_allocations"), "{text}");
    // And a memory measurement on it says why it cannot run.
    let e = pqtls_openssl::OpensslBackend::new().counted_allocations().expect_err("not counted");
    assert!(e.to_string().contains("not being counted"), "{e}");
}
