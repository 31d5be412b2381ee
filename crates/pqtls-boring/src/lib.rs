//! The BoringSSL backend.
//!
//! BoringSSL runs inside its own shared object ([`engine`]), so it sits beside OpenSSL in
//! one pqtls binary. Endpoints are `SSL` objects over two memory BIOs (sans-IO: the driver
//! moves the bytes). Tracing uses BoringSSL's hooks, forwarded by the engine:
//! - the *message callback* (`SSL_set_msg_callback`) fires when a handshake message has been
//!   fully read (before it is processed) → [`EventKind::Read`], and after a message has been
//!   built → [`EventKind::Wrote`], with its exact length;
//! - the *info callback* fires on every `SSL_CB_CONNECT_LOOP` / `SSL_CB_ACCEPT_LOOP`, when
//!   the state machine moves on → [`EventKind::Boundary`];
//! - the leaf key signs through `SSL_PRIVATE_KEY_METHOD` → the operation `sign`;
//! - chain verification runs in a verify callback around `X509_verify_cert` → the operation
//!   `verify_cert_chain` (and the verification CPU of endpoints that ask for it).
//!
//! Steps are mapped to the canonical vocabulary by [`steps::map`]. Secrets reach the
//! endpoint's key log through `SSL_CTX_set_keylog_callback`; a second pair of contexts with
//! the callback installed is used only for endpoints that have a key log, as on OpenSSL.
//!
//! BoringSSL fixes its TLS 1.3 cipher suites (no API chooses them); it negotiates
//! TLS_AES_128_GCM_SHA256 where AES hardware exists, which is the only suite the catalogue
//! lists for it, and every handshake checks it.

// Why the endpoint below resembles crates/pqtls-openssl/src/lib.rs (two memory BIOs, a
// drive/take/receive loop, callbacks into a `Trace`) and is not shared with it: every line that
// looks alike calls a different library through a different door. OpenSSL's endpoint calls
// openssl-sys' symbols, linked statically into the binary; this one calls the engine's `pqb_*`
// C ABI, behind which BoringSSL's same-named functions live in their own object. A common
// endpoint would have to be generic over those calls (a trait of ~12 functions, each side's
// memory BIOs and error queue behind it), which moves the code without removing it; the BIO
// handling itself is inside the engine here (engine/src/lib.rs), in Rust over the `boring`
// crate, and cannot be shared with openssl-sys code at all (one binary must never call one
// library's function on the other's object). What is stack-neutral — the trace, the steps'
// arithmetic, the transports — already lives in pqtls-core and pqtls-lab.
pub mod engine;
pub mod steps;

use engine::{EndpointC, Engine, Hooks, PreparedC};
use pqtls_core::backend::{
    AllocationCoverage, Anchors, Backend, Endpoint, EndpointOptions, KeyLog, Negotiated, PkiFiles, Prepared,
};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ClientProfile, HandshakeConfig};
use pqtls_core::trace::{EventKind, HsType, Side, Trace};
use pqtls_core::{Error, Result};
use serde::Serialize;
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;

const STACK: &str = "boringssl";

/// TLS 1.3 signature schemes a BoringSSL peer accepts (its defaults, then ML-DSA and
/// Ed25519, which it verifies but does not offer by default); the configured leaf's scheme
/// goes first.
const VERIFY_SIGALGS: &[u16] =
    &[0x0403, 0x0804, 0x0401, 0x0503, 0x0805, 0x0501, 0x0806, 0x0601, 0x0807, 0x0904, 0x0905, 0x0906];

/// The BoringSSL backend. The engine is loaded on first use ([`Engine::get`]). The
/// configuration's [`ClientProfile`] says whether its clients send Chrome's ClientHello.
#[derive(Debug, Default)]
pub struct BoringBackend;

impl BoringBackend {
    pub fn new() -> BoringBackend {
        BoringBackend
    }

    fn engine(&self) -> Result<&'static Engine> {
        Engine::get().map_err(|e| Error::tls(STACK, format!("the BoringSSL engine could not be loaded: {e}")))
    }
}

/// The configuration the engine builds its contexts from (engine/src/lib.rs `Config`).
#[derive(Serialize)]
struct EngineConfig {
    client_groups: Vec<u16>,
    client_shares: Vec<u16>,
    server_group: u16,
    verify_sigalgs: Vec<u16>,
    server: EngineChain,
    client: Option<EngineChain>,
    client_anchors: String,
    verify: bool,
    verify_parent: bool,
    send_root: bool,
    resumption: bool,
    server_name: String,
    time_signature: bool,
    grease: bool,
}

#[derive(Serialize)]
struct EngineChain {
    key: String,
    chain: String,
    root: String,
}

fn chain(files: &pqtls_core::backend::ChainFiles) -> EngineChain {
    let s = |p: &std::path::Path| p.to_string_lossy().into_owned();
    EngineChain { key: s(&files.leaf_key), chain: s(&files.chain), root: s(&files.root) }
}

impl Backend for BoringBackend {
    fn stack(&self) -> Stack {
        Stack::Boringssl
    }

    fn library_version(&self) -> String {
        match self.engine() {
            Ok(e) => e.version(),
            Err(e) => format!("BoringSSL (not loaded: {e})"),
        }
    }

    /// BoringSSL's every OPENSSL_malloc/realloc/free goes through the engine's
    /// `OPENSSL_memory_alloc`/`_free`/`_get_size` (the allocator hooks BoringSSL offers: weak
    /// symbols the engine defines), which report to pqtls' counters.
    fn counted_allocations(&self) -> Result<AllocationCoverage> {
        self.engine()?;
        Ok(AllocationCoverage {
            counted: "BoringSSL OPENSSL_malloc/realloc/free (its OPENSSL_memory_alloc/free/get_size hooks, defined in \
                      pqtls' engine; requested bytes); pqtls' Rust glue (counting global allocator)"
                .into(),
            not_counted: "the engine's own Rust glue around BoringSSL (the boring crate's wrappers, the configuration \
                          read at prepare time: the engine's allocator is its own); glibc's internal allocations"
                .into(),
        })
    }

    fn prepare(&self, cfg: &HandshakeConfig, pki: &PkiFiles) -> Result<Box<dyn Prepared>> {
        if cfg.stack != Stack::Boringssl {
            return Err(Error::Invalid(format!("configuration for {} given to the BoringSSL backend", cfg.stack)));
        }
        cfg.validate()?;
        let engine = self.engine()?;
        let client = match (&cfg.client_chain, &pki.client) {
            (Some(_), Some(c)) => Some(chain(c)),
            (Some(_), None) => return Err(Error::Invalid("mutual TLS needs a client chain".into())),
            (None, _) => None,
        };
        let client_anchors = match &pki.trust.anchors {
            Anchors::Pki => pki.server.root.to_string_lossy().into_owned(),
            Anchors::Bundle { file, .. } => file.to_string_lossy().into_owned(),
        };
        let mut verify_sigalgs = vec![cfg.chain.leaf.code_point];
        if let Some(c) = &cfg.client_chain {
            verify_sigalgs.push(c.leaf.code_point);
        }
        verify_sigalgs.extend(VERIFY_SIGALGS.iter().copied());
        let mut seen = std::collections::HashSet::new();
        verify_sigalgs.retain(|s| seen.insert(*s));
        let ec = EngineConfig {
            client_groups: cfg.groups.iter().map(|g| g.code_point).collect(),
            client_shares: cfg.shares().iter().map(|g| g.code_point).collect(),
            server_group: cfg.expected_group().code_point,
            verify_sigalgs,
            server: chain(&pki.server),
            client,
            client_anchors,
            verify: pki.trust.verify,
            verify_parent: cfg.verify_parent,
            send_root: cfg.send_root,
            resumption: cfg.resumption,
            server_name: pki.trust.server_name.clone(),
            time_signature: true,
            grease: cfg.client_profile == ClientProfile::Chrome,
        };
        let json =
            serde_json::to_vec(&ec).map_err(|e| Error::tls(STACK, format!("encoding the configuration: {e}")))?;
        // SAFETY: the engine reads `json` (len bytes) and writes at most `cap` bytes of error.
        let raw = engine::with_error(|err, cap, len| unsafe {
            (engine.api.prepare)(json.as_ptr(), json.len(), err, cap, len)
        })
        .map_err(|e| Error::tls(STACK, e))?;
        Ok(Box::new(SharedPrepared(Arc::new(BoringPrepared { engine, raw, cipher: cfg.cipher.code_point }))))
    }
}

/// Contexts of one configuration, inside the engine.
struct BoringPrepared {
    engine: &'static Engine,
    raw: *mut PreparedC,
    /// The suite asked for: BoringSSL cannot be told, so every handshake checks it.
    cipher: u16,
}

// SAFETY: the engine's prepared contexts are immutable after creation except for the ticket
// slot, which it guards with a mutex; endpoints are created from any thread.
unsafe impl Send for BoringPrepared {}
// SAFETY: as above.
unsafe impl Sync for BoringPrepared {}

impl Drop for BoringPrepared {
    fn drop(&mut self) {
        // SAFETY: raw came from pqb_prepare; the endpoints made from it hold an Arc of self.
        unsafe { (self.engine.api.prepared_free)(self.raw) };
    }
}

/// Shares a prepared configuration with its endpoints.
struct SharedPrepared(Arc<BoringPrepared>);

impl Prepared for SharedPrepared {
    fn client(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        BoringEndpoint::new(&self.0, Side::Client, opts)
    }

    fn server(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        BoringEndpoint::new(&self.0, Side::Server, opts)
    }
}

/// What the engine's callbacks write into.
struct HostHooks {
    trace: Trace,
    hrr: bool,
    key_log: Option<Arc<dyn KeyLog>>,
    verification_start: Option<u64>,
}

/// Recovers the hooks from the engine's `user` pointer.
///
/// # Safety
/// `user` is the `Box<HostHooks>` of an endpoint whose call into the engine is on this
/// thread's stack (the engine calls back only from inside such a call).
unsafe fn hooks<'a>(user: *mut c_void) -> &'a mut HostHooks {
    // SAFETY: as documented.
    unsafe { &mut *(user as *mut HostHooks) }
}

unsafe extern "C" fn on_message(user: *mut c_void, write: c_int, msg: *const u8, len: usize) {
    // SAFETY: the engine passes the whole message, `len` bytes; `user` per `hooks`.
    let (h, msg) = unsafe { (hooks(user), std::slice::from_raw_parts(msg, len)) };
    let t = HsType::classify(msg);
    h.hrr |= t == HsType::HelloRetryRequest;
    let kind = if write != 0 { EventKind::Wrote(t) } else { EventKind::Read(t) };
    h.trace.push(kind, len as u32);
}

unsafe extern "C" fn on_boundary(user: *mut c_void) {
    // SAFETY: per `hooks`.
    unsafe { hooks(user) }.trace.push(EventKind::Boundary, 0);
}

unsafe extern "C" fn on_op(user: *mut c_void, op: c_int) {
    // SAFETY: per `hooks`.
    let h = unsafe { hooks(user) };
    match op {
        engine::OP_VERIFY => {
            h.trace.push(EventKind::OpStart("verify_cert_chain"), 0);
            h.verification_start = h.trace.verification_start();
        }
        o if o == -engine::OP_VERIFY => {
            h.trace.verification_end(h.verification_start.take());
            h.trace.push(EventKind::OpEnd, 0);
        }
        engine::OP_SIGN => h.trace.push(EventKind::OpStart("sign"), 0),
        _ => h.trace.push(EventKind::OpEnd, 0),
    }
}

unsafe extern "C" fn on_key_log(user: *mut c_void, line: *const c_char, len: usize) {
    // SAFETY: the engine passes `len` bytes of the line; `user` per `hooks`.
    let (h, line) = unsafe { (hooks(user), std::slice::from_raw_parts(line as *const u8, len)) };
    let (Some(log), Ok(line)) = (&h.key_log, std::str::from_utf8(line)) else { return };
    let mut parts = line.split_ascii_whitespace();
    if let (Some(label), Some(random), Some(secret)) = (parts.next(), parts.next(), parts.next()) {
        if let (Some(random), Some(secret)) = (from_hex(random), from_hex(secret)) {
            log.log(label, &random, &secret);
        }
    }
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() & 1 == 1 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

struct BoringEndpoint {
    prepared: Arc<BoringPrepared>,
    raw: *mut EndpointC,
    /// Reached by the engine's callbacks through `Hooks::user` (a stable heap address).
    hooks: Box<HostHooks>,
    done: bool,
}

// SAFETY: the engine endpoint is used only through `&mut self`, from one thread at a time.
unsafe impl Send for BoringEndpoint {}

impl BoringEndpoint {
    fn new(prepared: &Arc<BoringPrepared>, side: Side, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        let mut hooks = Box::new(HostHooks {
            trace: Trace::new(opts.traced, opts.clock)
                .with_steps(side, steps::map)
                .with_counter(opts.counter.clone())
                .with_memory(opts.memory)
                .with_verification_timed(opts.verification_timed),
            hrr: false,
            key_log: opts.key_log.clone(),
            verification_start: None,
        });
        let c_hooks = Hooks {
            user: &mut *hooks as *mut HostHooks as *mut c_void,
            message: on_message,
            boundary: on_boundary,
            op: on_op,
            key_log: on_key_log,
        };
        let api = &prepared.engine.api;
        // SAFETY: prepared.raw is live while `prepared` is (the endpoint holds an Arc); the
        // hooks' `user` is the boxed HostHooks, which lives as long as the endpoint.
        let raw = engine::with_error(|err, cap, len| unsafe {
            (api.endpoint_new)(
                prepared.raw,
                c_int::from(side == Side::Server),
                c_int::from(opts.key_log.is_some()),
                c_hooks,
                err,
                cap,
                len,
            )
        })
        .map_err(|e| Error::tls(STACK, e))?;
        Ok(Box::new(BoringEndpoint { prepared: prepared.clone(), raw, hooks, done: false }))
    }

    fn api(&self) -> &engine::Api {
        &self.prepared.engine.api
    }

    fn error(&self) -> Error {
        let mut buf = vec![0u8; 4096];
        // SAFETY: raw is live; buf has buf.len() writable bytes.
        let n = unsafe { (self.api().error)(self.raw, buf.as_mut_ptr(), buf.len()) };
        let msg = String::from_utf8_lossy(&buf[..n.min(buf.len())]).into_owned();
        match msg.strip_prefix("verify:") {
            Some(m) => Error::Verification { stack: STACK, message: m.to_string() },
            None => Error::tls(STACK, msg),
        }
    }

    /// One traced call into the engine.
    fn call<R>(&mut self, name: Option<&'static str>, f: impl FnOnce(&mut Self) -> R) -> R {
        self.hooks.trace.push(EventKind::CallStart { name }, 0);
        let r = f(self);
        self.hooks.trace.push(EventKind::CallEnd, 0);
        r
    }
}

impl Drop for BoringEndpoint {
    fn drop(&mut self) {
        // SAFETY: raw came from pqb_endpoint_new and is freed once.
        unsafe { (self.api().endpoint_free)(self.raw) };
    }
}

impl Endpoint for BoringEndpoint {
    fn receive(&mut self, data: &[u8]) -> Result<()> {
        // SAFETY: raw is live; the engine copies len bytes of data.
        if unsafe { (self.api().receive)(self.raw, data.as_ptr(), data.len()) } != 0 {
            return Err(self.error());
        }
        Ok(())
    }

    fn drive(&mut self) -> Result<bool> {
        // SAFETY: raw is live; callbacks reach self.hooks only during this call.
        let r = self.call(None, |ep| unsafe { (ep.api().drive)(ep.raw) });
        if r < 0 {
            return Err(self.error());
        }
        if r == 1 && !self.done {
            self.done = true;
            let n = self.negotiated()?;
            let want = catalogue::CIPHERS.iter().find(|c| c.code_point == self.prepared.cipher);
            if want.map(|c| c.name) != Some(n.cipher.as_str()) {
                return Err(Error::tls(
                    STACK,
                    format!(
                        "BoringSSL negotiated {} where {} was asked (it fixes its TLS 1.3 suites)",
                        n.cipher,
                        want.map_or("?", |c| c.name)
                    ),
                ));
            }
        }
        Ok(r == 1)
    }

    fn take_output(&mut self, out: &mut Vec<u8>) -> Result<()> {
        // SAFETY: raw is live.
        let pending = unsafe { (self.api().pending)(self.raw) };
        if pending == 0 {
            return Ok(());
        }
        let start = out.len();
        out.resize(start + pending, 0);
        // SAFETY: the engine writes at most `pending` bytes into the space just added.
        let n = unsafe { (self.api().take)(self.raw, out.as_mut_ptr().add(start), pending) };
        out.truncate(start + n);
        Ok(())
    }

    fn negotiated(&self) -> Result<Negotiated> {
        // SAFETY: raw is live.
        let n = unsafe { (self.api().negotiated)(self.raw) };
        let group =
            catalogue::group_by_code_point(n.group).map_or_else(|| format!("0x{:04x}", n.group), |g| g.name.into());
        let sigalg = if n.peer_sigalg == 0 {
            String::new()
        } else {
            catalogue::SIG_ALGS
                .iter()
                .find(|s| s.code_point == n.peer_sigalg)
                .map_or_else(|| format!("0x{:04x}", n.peer_sigalg), |s| s.scheme.to_string())
        };
        let cipher = catalogue::CIPHERS
            .iter()
            .find(|c| c.code_point == n.cipher)
            .map_or_else(|| format!("0x{:04x}", n.cipher), |c| c.name.to_string());
        Ok(Negotiated {
            group,
            sigalg,
            cipher,
            hrr: self.hooks.hrr || n.hrr != 0,
            resumed: n.resumed != 0,
            version: if n.tls13 != 0 { "TLSv1.3".into() } else { "not TLS 1.3".into() },
            // Certificate compression is not wired for BoringSSL (the factor is refused for it).
            cert_compression: None,
        })
    }

    fn trace(&mut self) -> &mut Trace {
        &mut self.hooks.trace
    }

    fn write_app(&mut self, data: &[u8]) -> Result<()> {
        if !self.done {
            return Err(Error::tls(STACK, "application data can be written only after the handshake"));
        }
        // SAFETY: raw is live; the engine reads len bytes of data.
        let r = self.call(Some(pqtls_core::steps::APP_WRITE), |ep| unsafe {
            (ep.api().write)(ep.raw, data.as_ptr(), data.len())
        });
        if r != 0 {
            return Err(self.error());
        }
        Ok(())
    }

    fn read_app(&mut self, out: &mut Vec<u8>) -> Result<usize> {
        let r = self.call(Some(pqtls_core::steps::APP_READ), |ep| {
            let start = out.len();
            let mut buf = [0u8; 16 * 1024];
            loop {
                // SAFETY: raw is live; the engine writes at most buf.len() bytes.
                let n = unsafe { (ep.api().read)(ep.raw, buf.as_mut_ptr(), buf.len()) };
                if n < 0 {
                    return None;
                }
                if n == 0 {
                    return Some(out.len() - start);
                }
                out.extend_from_slice(&buf[..n as usize]);
            }
        });
        r.ok_or_else(|| self.error())
    }

    fn close(&mut self) -> Result<()> {
        // SAFETY: raw is live.
        let r = self.call(Some(pqtls_core::steps::CLOSE), |ep| unsafe { (ep.api().close)(ep.raw) });
        if r != 0 {
            return Err(self.error());
        }
        Ok(())
    }

    fn peer_closed(&self) -> bool {
        // SAFETY: raw is live.
        unsafe { (self.api().peer_closed)(self.raw) != 0 }
    }
}
