//! The per-endpoint state that provider callbacks write into, reached through a thread-local
//! pointer that is set only while the endpoint is inside a call into rustls.

use pqtls_core::backend::{EndpointOptions, KeyLog};
use pqtls_core::trace::{EventKind, Side, Trace};
use std::cell::Cell;
use std::ptr;
use std::sync::Arc;

/// What the crypto-provider wrappers record for one endpoint.
pub(crate) struct Hooks {
    pub trace: Trace,
    /// The signature scheme of the peer's CertificateVerify (TLS code point).
    pub peer_scheme: Option<u16>,
    /// Key-exchange `start()` calls on this side (a client starts twice after a HelloRetryRequest).
    pub kx_starts: u32,
    /// This side's traffic secrets (handshake, then application), from rustls' key log.
    pub secrets: Vec<Vec<u8>>,
    pub is_client: bool,
    /// Where this endpoint's secrets go besides `secrets` (the options' key log).
    pub key_log: Option<Arc<dyn KeyLog>>,
    /// The RFC 8879 code point the peer's chain was decompressed with (`None`: not compressed,
    /// or no chain received).
    pub peer_cert_compression: Option<u16>,
}

impl Hooks {
    pub fn new(opts: &EndpointOptions, is_client: bool) -> Hooks {
        let side = if is_client { Side::Client } else { Side::Server };
        Hooks {
            trace: Trace::new(opts.traced, opts.clock)
                .with_steps(side, crate::steps::map)
                .with_counter(opts.counter.clone())
                .with_memory(opts.memory)
                .with_verification_timed(opts.verification_timed),
            peer_scheme: None,
            kx_starts: 0,
            secrets: Vec::new(),
            is_client,
            key_log: opts.key_log.clone(),
            peer_cert_compression: None,
        }
    }
}

thread_local! {
    static CURRENT: Cell<*mut Hooks> = const { Cell::new(ptr::null_mut()) };
}

/// Runs `f` inside a traced call named `name`, with `hooks` reachable from provider
/// callbacks for the duration of the call.
pub(crate) fn call<R>(hooks: &mut Hooks, name: &'static str, f: impl FnOnce() -> R) -> R {
    /// Restores the previous pointer even if `f` unwinds, so it never outlives the call.
    struct Restore(*mut Hooks);
    impl Drop for Restore {
        fn drop(&mut self) {
            CURRENT.with(|c| c.set(self.0));
        }
    }
    hooks.trace.push(EventKind::CallStart { name: Some(name) }, 0);
    let r = {
        let _restore = Restore(CURRENT.with(|c| c.replace(hooks as *mut Hooks)));
        f()
    };
    hooks.trace.push(EventKind::CallEnd, 0);
    r
}

/// Gives `f` the hooks of the endpoint currently inside a call on this thread, if any.
pub(crate) fn with_current(f: impl FnOnce(&mut Hooks)) {
    CURRENT.with(|c| {
        let p = c.get();
        if !p.is_null() {
            // SAFETY: CURRENT points to the Hooks of the endpoint whose call is on this
            // thread's stack (set by `call`, restored before `call` returns); rustls invokes
            // the provider callbacks synchronously inside that call, and the endpoint does not
            // touch its hooks while rustls runs.
            f(unsafe { &mut *p })
        }
    })
}

/// Times one crypto operation as `OpStart(op)` … `OpEnd` in the current endpoint's trace.
#[inline]
pub(crate) fn op<R>(name: &'static str, f: impl FnOnce() -> R) -> R {
    with_current(|h| h.trace.push(EventKind::OpStart(name), 0));
    let r = f();
    with_current(|h| h.trace.push(EventKind::OpEnd, 0));
    r
}
