//! BoringSSL behind a small C ABI, built as a shared object of its own.
//!
//! BoringSSL and OpenSSL export the same C symbols (`SSL_CTX_new`, `EVP_*`, …), so the two
//! cannot be linked statically into one binary. This crate links BoringSSL (through the
//! `boring` crate) into a `cdylib` whose only exported symbols are the `pqb_*` functions
//! below (rustc's version script makes every other symbol local), so BoringSSL's calls
//! bind inside this object and the pqtls binary never sees its names. pqtls-boring embeds
//! the object and loads it with `dlopen(RTLD_LOCAL)`.
//!
//! Everything measured is decided by the host: this side only sets BoringSSL up as the
//! configuration asks, runs it over memory BIOs and forwards BoringSSL's callbacks (message,
//! info, chain verification, signing, key log) to the host's [`Hooks`], which stamp them.

use boring::error::ErrorStack;
use boring::pkey::{PKey, Private};
use boring::ssl::{
    PrivateKeyMethod, PrivateKeyMethodError, Ssl, SslContext, SslContextBuilder, SslMethod, SslMode, SslRef,
    SslSession, SslSessionCacheMode, SslSignatureAlgorithm, SslVerifyMode, SslVersion,
};
use boring::x509::store::X509StoreBuilder;
use boring::x509::verify::X509VerifyFlags;
use boring::x509::X509;
use boring_sys as ffi;
use foreign_types::ForeignTypeRef;
use serde::Deserialize;
use std::cell::Cell;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

/// The ABI revision; the host refuses an object of another one.
pub const ABI_VERSION: u32 = 2;

/// What the host is told, from inside calls into BoringSSL. `user` is the host's endpoint.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct Hooks {
    pub user: *mut c_void,
    /// A whole handshake message was read (`write` 0) or written (`write` 1).
    pub message: unsafe extern "C" fn(user: *mut c_void, write: c_int, msg: *const u8, len: usize),
    /// The state machine moved on (`SSL_CB_CONNECT_LOOP` / `SSL_CB_ACCEPT_LOOP`).
    pub boundary: unsafe extern "C" fn(user: *mut c_void),
    /// An operation starts (`op`: 1 chain verification, 2 signature) or ends (`op` negated).
    pub op: unsafe extern "C" fn(user: *mut c_void, op: c_int),
    /// A key-log line (`LABEL <client random> <secret>`, hex).
    pub key_log: unsafe extern "C" fn(user: *mut c_void, line: *const c_char, len: usize),
}

pub const OP_VERIFY: c_int = 1;
pub const OP_SIGN: c_int = 2;

/// One configuration, as the host sends it (JSON).
#[derive(Deserialize)]
struct Config {
    /// Client's supported groups (TLS code points), in order; the server supports `server_group` only.
    client_groups: Vec<u16>,
    client_shares: Vec<u16>,
    server_group: u16,
    /// TLS 1.3 signature schemes the client accepts, in order.
    verify_sigalgs: Vec<u16>,
    server: Chain,
    client: Option<Chain>,
    /// PEM files of the client's trust anchors.
    client_anchors: String,
    /// Verify the server's chain (false: accept it as sent).
    verify: bool,
    verify_parent: bool,
    send_root: bool,
    resumption: bool,
    server_name: String,
    /// Time signing through SSL_PRIVATE_KEY_METHOD.
    time_signature: bool,
    /// Chrome's ClientHello habits: GREASE and extension permutation.
    grease: bool,
}

#[derive(Deserialize)]
struct Chain {
    key: String,
    chain: String,
    root: String,
}

thread_local! {
    /// The hooks of the endpoint inside a call into BoringSSL on this thread.
    static CURRENT: Cell<Option<Hooks>> = const { Cell::new(None) };
}

fn with_current(f: impl FnOnce(&Hooks)) {
    if let Some(h) = CURRENT.with(|c| c.get()) {
        f(&h)
    }
}

fn err(context: &str, e: ErrorStack) -> String {
    format!("{context}: {e}")
}

fn read(path: &str) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("reading {path}: {e}"))
}

fn read_key(path: &str) -> Result<PKey<Private>, String> {
    let pem = read(path)?;
    PKey::private_key_from_pem(&pem).or_else(|e| {
        // BoringSSL reads ML-DSA keys in the seed form only (RFC 9881 `seed [0]`); OpenSSL
        // writes the `both` form (seed and expanded key) by default: keep its seed.
        let der = pem_body(&pem)
            .and_then(|der| mldsa_seed_only(&der))
            .ok_or_else(|| err(&format!("parsing the private key {path}"), e))?;
        PKey::private_key_from_der(&der).map_err(|e| err(&format!("parsing the private key {path} (seed form)"), e))
    })
}

/// The DER inside a PEM block.
fn pem_body(pem: &[u8]) -> Option<Vec<u8>> {
    let text = std::str::from_utf8(pem).ok()?;
    let b64: String = text.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
    boring::base64::decode_block(&b64).ok()
}

/// One DER element: (tag, whole element, contents, rest).
fn tlv(d: &[u8]) -> Option<(u8, &[u8], &[u8], &[u8])> {
    let (&tag, rest) = d.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 3 || rest.len() < n {
            return None;
        }
        (rest[..n].iter().fold(0usize, |a, b| a << 8 | *b as usize), &rest[n..])
    };
    if rest.len() < len {
        return None;
    }
    let header = d.len() - rest.len();
    Some((tag, &d[..header + len], &rest[..len], &rest[len..]))
}

fn der(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = contents.len();
    match n {
        0..=0x7f => out.push(n as u8),
        0x80..=0xff => out.extend([0x81, n as u8]),
        _ => out.extend([0x82, (n >> 8) as u8, n as u8]),
    }
    out.extend_from_slice(contents);
    out
}

/// PKCS#8 of an ML-DSA key in the `both` form (`SEQUENCE { seed, expandedKey }`) rewritten
/// in the seed form (`[0] seed`); `None` for anything else.
fn mldsa_seed_only(pkcs8: &[u8]) -> Option<Vec<u8>> {
    let (0x30, _, body, _) = tlv(pkcs8)? else { return None };
    let (0x02, version, _, rest) = tlv(body)? else { return None };
    let (0x30, algorithm, _, rest) = tlv(rest)? else { return None };
    let (0x04, _, key, _) = tlv(rest)? else { return None };
    let (0x30, _, both, _) = tlv(key)? else { return None };
    let (0x04, _, seed, _) = tlv(both)? else { return None };
    if seed.len() != 32 {
        return None;
    }
    let mut inner = version.to_vec();
    inner.extend_from_slice(algorithm);
    inner.extend(der(0x04, &der(0x80, seed)));
    Some(der(0x30, &inner))
}

fn read_cert(path: &str) -> Result<X509, String> {
    X509::from_pem(&read(path)?).map_err(|e| err(&format!("parsing the certificate {path}"), e))
}

/// Signs with the leaf key through SSL_PRIVATE_KEY_METHOD, so the signature is timed alone.
struct TimedKey {
    key: PKey<Private>,
}

impl PrivateKeyMethod for TimedKey {
    fn sign(
        &self,
        ssl: &mut SslRef,
        input: &[u8],
        alg: SslSignatureAlgorithm,
        output: &mut [u8],
    ) -> Result<usize, PrivateKeyMethodError> {
        let _ = ssl;
        with_current(|h| unsafe { (h.op)(h.user, OP_SIGN) });
        let r = sign(&self.key, input, alg, output);
        with_current(|h| unsafe { (h.op)(h.user, -OP_SIGN) });
        r.ok_or(PrivateKeyMethodError::FAILURE)
    }

    fn decrypt(&self, _: &mut SslRef, _: &[u8], _: &mut [u8]) -> Result<usize, PrivateKeyMethodError> {
        Err(PrivateKeyMethodError::FAILURE)
    }

    fn complete(&self, _: &mut SslRef, _: &mut [u8]) -> Result<usize, PrivateKeyMethodError> {
        Err(PrivateKeyMethodError::FAILURE)
    }
}

/// What BoringSSL's own signing does for `alg`: its digest (none for Ed25519 and ML-DSA),
/// PSS padding with a digest-length salt for the `rsa_pss_*` schemes.
fn sign(key: &PKey<Private>, input: &[u8], alg: SslSignatureAlgorithm, output: &mut [u8]) -> Option<usize> {
    // The scheme's code point (the type does not give it out): one of BoringSSL's schemes.
    let alg = SCHEMES.iter().copied().find(|c| SslSignatureAlgorithm::from(*c) == alg)?;
    // SAFETY: plain calls on a context we create and free here; `key` is a valid EVP_PKEY;
    // EVP_DigestSign writes at most `len` bytes into `output` (len = output.len()).
    unsafe {
        let md = ffi::SSL_get_signature_algorithm_digest(alg);
        let ctx = ffi::EVP_MD_CTX_new();
        if ctx.is_null() {
            return None;
        }
        let mut pctx: *mut ffi::EVP_PKEY_CTX = ptr::null_mut();
        let mut ok = ffi::EVP_DigestSignInit(ctx, &mut pctx, md, ptr::null_mut(), key.as_ptr()) == 1;
        if ok && ffi::SSL_is_signature_algorithm_rsa_pss(alg) == 1 {
            ok = ffi::EVP_PKEY_CTX_set_rsa_padding(pctx, ffi::RSA_PKCS1_PSS_PADDING as c_int) == 1
                && ffi::EVP_PKEY_CTX_set_rsa_pss_saltlen(pctx, -1) == 1;
        }
        let mut len = output.len();
        ok = ok && ffi::EVP_DigestSign(ctx, output.as_mut_ptr(), &mut len, input.as_ptr(), input.len()) == 1;
        ffi::EVP_MD_CTX_free(ctx);
        ok.then_some(len)
    }
}

/// Every TLS 1.3 signature scheme BoringSSL signs with (ssl.h `SSL_SIGN_*`).
const SCHEMES: &[u16] =
    &[0x0401, 0x0501, 0x0601, 0x0403, 0x0503, 0x0603, 0x0804, 0x0805, 0x0806, 0x0807, 0x0904, 0x0905, 0x0906];

fn load_chain(b: &mut SslContextBuilder, c: &Chain, send_root: bool, timed: bool) -> Result<(), String> {
    b.set_certificate_chain_file(&c.chain).map_err(|e| err(&format!("loading the chain {}", c.chain), e))?;
    let key = read_key(&c.key)?;
    if timed {
        b.set_private_key_method(TimedKey { key });
    } else {
        b.set_private_key(&key).map_err(|e| err("loading the leaf private key", e))?;
        b.check_private_key().map_err(|e| err("the leaf key does not match its certificate", e))?;
    }
    if send_root {
        b.add_extra_chain_cert(read_cert(&c.root)?).map_err(|e| err("adding the root to the chain", e))?;
    }
    b.set_mode(SslMode::NO_AUTO_CHAIN);
    Ok(())
}

fn trust(b: &mut SslContextBuilder, anchors: Vec<X509>, verify_parent: bool) -> Result<(), String> {
    let mut store = X509StoreBuilder::new().map_err(|e| err("creating a certificate store", e))?;
    for cert in anchors {
        store.add_cert(cert).map_err(|e| err("adding a trust anchor", e))?;
    }
    if verify_parent {
        store.set_flags(X509VerifyFlags::CHECK_SS_SIGNATURE);
    }
    b.set_cert_store(store.build());
    Ok(())
}

fn base(method: SslMethod, groups: &[u16]) -> Result<SslContextBuilder, String> {
    let mut b = SslContextBuilder::new(method).map_err(|e| err("creating a context", e))?;
    b.set_min_proto_version(Some(SslVersion::TLS1_3)).map_err(|e| err("setting TLS 1.3", e))?;
    b.set_max_proto_version(Some(SslVersion::TLS1_3)).map_err(|e| err("setting TLS 1.3", e))?;
    // SAFETY: the context is valid; BoringSSL copies the list.
    if unsafe { ffi::SSL_CTX_set1_group_ids(b.as_ptr(), groups.as_ptr(), groups.len()) } != 1 {
        return Err(format!("BoringSSL rejected the groups {groups:04x?}: {}", ErrorStack::get()));
    }
    // SAFETY: the callbacks are plain functions valid for the program's life.
    unsafe {
        ffi::SSL_CTX_set_info_callback(b.as_ptr(), Some(on_info));
    }
    Ok(b)
}

/// TLS 1.3 client states that go on processing the ServerHello the version-negotiating state
/// already read (its message callback fired there): they continue that message's step.
const CONTINUING_STATES: &[&[u8]] =
    &[b"TLS 1.3 client read_hello_retry_request", b"TLS 1.3 client read_server_hello"];

unsafe extern "C" fn on_info(ssl: *const ffi::SSL, where_: c_int, _ret: c_int) {
    if where_ & ffi::SSL_CB_LOOP as c_int != 0 {
        // SAFETY: BoringSSL passes the SSL in the callback; the state string is static.
        let state = unsafe { CStr::from_ptr(ffi::SSL_state_string_long(ssl)) };
        if CONTINUING_STATES.contains(&state.to_bytes()) {
            return;
        }
        with_current(|h| unsafe { (h.boundary)(h.user) });
    }
}

unsafe extern "C" fn on_message(
    write_p: c_int,
    _version: c_int,
    content_type: c_int,
    buf: *const c_void,
    len: usize,
    _ssl: *mut ffi::SSL,
    _arg: *mut c_void,
) {
    if content_type != ffi::SSL3_RT_HANDSHAKE as c_int || buf.is_null() || len == 0 {
        return;
    }
    with_current(|h| unsafe { (h.message)(h.user, write_p, buf as *const u8, len) });
}

/// BoringSSL's chain verification (`X509_verify_cert`), reported as an operation.
unsafe extern "C" fn on_verify_chain(ctx: *mut ffi::X509_STORE_CTX, _arg: *mut c_void) -> c_int {
    with_current(|h| unsafe { (h.op)(h.user, OP_VERIFY) });
    // SAFETY: BoringSSL passes the store context it set up for this verification.
    let ok = unsafe { ffi::X509_verify_cert(ctx) };
    with_current(|h| unsafe { (h.op)(h.user, -OP_VERIFY) });
    ok
}

unsafe extern "C" fn accept_chain(_ctx: *mut ffi::X509_STORE_CTX, _arg: *mut c_void) -> c_int {
    1
}

fn on_key_log(_ssl: &SslRef, line: &str) {
    with_current(|h| unsafe { (h.key_log)(h.user, line.as_ptr() as *const c_char, line.len()) });
}

/// The newest session the client received, and how many it received.
#[derive(Default)]
struct TicketSlot {
    session: Mutex<Option<SslSession>>,
    received: AtomicU64,
}

struct Contexts {
    client: SslContext,
    server: SslContext,
}

/// The signature schemes a context accepts from its peer (and offers in signature_algorithms
/// or a CertificateRequest).
fn verify_algorithms(ctx: &mut SslContextBuilder, sigalgs: &[u16]) -> Result<(), String> {
    // SAFETY: the context is valid; BoringSSL copies the list.
    if unsafe { ffi::SSL_CTX_set_verify_algorithm_prefs(ctx.as_ptr(), sigalgs.as_ptr(), sigalgs.len()) } != 1 {
        return Err(format!("BoringSSL rejected the signature schemes {sigalgs:04x?}"));
    }
    Ok(())
}

fn contexts(cfg: &Config, tickets: &Arc<TicketSlot>, key_log: bool) -> Result<Contexts, String> {
    let mut s = base(SslMethod::tls(), &[cfg.server_group])?;
    load_chain(&mut s, &cfg.server, cfg.send_root, cfg.time_signature)?;
    // SAFETY: the context is valid.
    unsafe { ffi::SSL_CTX_set_num_tickets(s.as_ptr(), usize::from(cfg.resumption)) };
    if !cfg.resumption {
        s.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    if let Some(client) = &cfg.client {
        trust(&mut s, vec![read_cert(&client.root)?], cfg.verify_parent)?;
        s.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
        // SAFETY: the context is valid; the callback is a plain function.
        unsafe { ffi::SSL_CTX_set_cert_verify_callback(s.as_ptr(), Some(on_verify_chain), ptr::null_mut()) };
        // The CertificateRequest offers what the client's leaf signs with: BoringSSL's default
        // list has neither ECDSA P-521 nor Ed25519 nor ML-DSA, and a client signing with one of
        // those anyway (s2n-tls does) is refused with WRONG_SIGNATURE_TYPE.
        verify_algorithms(&mut s, &cfg.verify_sigalgs)?;
    }
    if key_log {
        s.set_keylog_callback(on_key_log);
    }
    let server = s.build();

    let mut c = base(SslMethod::tls(), &cfg.client_groups)?;
    let anchors = X509::stack_from_pem(&read(&cfg.client_anchors)?).map_err(|e| err("parsing the trust anchors", e))?;
    if anchors.is_empty() {
        return Err(format!("{} holds no certificate", cfg.client_anchors));
    }
    trust(&mut c, anchors, cfg.verify_parent)?;
    c.set_verify(SslVerifyMode::PEER);
    let verify: unsafe extern "C" fn(*mut ffi::X509_STORE_CTX, *mut c_void) -> c_int =
        if cfg.verify { on_verify_chain } else { accept_chain };
    // SAFETY: the context is valid; the callback is a plain function.
    unsafe { ffi::SSL_CTX_set_cert_verify_callback(c.as_ptr(), Some(verify), ptr::null_mut()) };
    verify_algorithms(&mut c, &cfg.verify_sigalgs)?;
    if let Some(client) = &cfg.client {
        load_chain(&mut c, client, cfg.send_root, cfg.time_signature)?;
    }
    if cfg.resumption {
        c.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        let slot = tickets.clone();
        c.set_new_session_callback(move |_, session| {
            if let Ok(mut s) = slot.session.lock() {
                *s = Some(session);
            }
            slot.received.fetch_add(1, Ordering::Release);
        });
    } else {
        c.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    if cfg.grease {
        c.set_grease_enabled(true);
        c.set_permute_extensions(true);
    }
    if key_log {
        c.set_keylog_callback(on_key_log);
    }
    Ok(Contexts { client: c.build(), server })
}

/// Contexts of one configuration: without and with the key-log callback.
pub struct Prepared {
    cfg: Config,
    plain: Contexts,
    logging: Contexts,
    tickets: Arc<TicketSlot>,
}

fn prepare(json: &[u8]) -> Result<Prepared, String> {
    let cfg: Config = serde_json::from_slice(json).map_err(|e| format!("configuration: {e}"))?;
    let tickets = Arc::new(TicketSlot::default());
    let plain = contexts(&cfg, &tickets, false)?;
    let logging = contexts(&cfg, &tickets, true)?;
    // A ticket issued by one server context must resume on the other.
    let mut keys = [0u8; 48];
    // SAFETY: both contexts are valid; the calls read or write exactly 48 bytes of `keys`.
    let ok = unsafe {
        ffi::SSL_CTX_get_tlsext_ticket_keys(plain.server.as_ptr(), keys.as_mut_ptr() as *mut c_void, keys.len()) == 1
            && ffi::SSL_CTX_set_tlsext_ticket_keys(logging.server.as_ptr(), keys.as_ptr() as *const c_void, keys.len())
                == 1
    };
    keys.fill(0);
    if !ok {
        return Err("sharing the session-ticket keys between contexts failed".into());
    }
    Ok(Prepared { cfg, plain, logging, tickets })
}

pub struct Endpoint {
    ssl: Ssl,
    rbio: *mut ffi::BIO,
    wbio: *mut ffi::BIO,
    hooks: Hooks,
    done: bool,
    peer_closed: bool,
    /// Server with tickets: BoringSSL queues its NewSessionTicket until the server writes, so
    /// the handshake's end flushes it (a zero-byte write, as BoringSSL documents).
    flush_tickets: bool,
    /// Client with resumption: the ticket slot and its count when this endpoint started.
    wait_ticket: Option<(Arc<TicketSlot>, u64)>,
    error: String,
}

fn endpoint(p: &Prepared, server: bool, key_log: bool, hooks: Hooks) -> Result<Endpoint, String> {
    let ctx = if key_log { &p.logging } else { &p.plain };
    let mut wait_ticket = None;
    let mut ssl = Ssl::new(if server { &ctx.server } else { &ctx.client }).map_err(|e| err("creating an SSL", e))?;
    if server {
        // SAFETY: the SSL is valid and not started.
        unsafe { ffi::SSL_set_accept_state(ssl.as_ptr()) };
    } else {
        let name = &p.cfg.server_name;
        match name.parse::<std::net::IpAddr>() {
            Ok(ip) => ssl.param_mut().set_ip(ip).map_err(|e| err("setting the expected IP address", e))?,
            Err(_) => {
                ssl.set_hostname(name).map_err(|e| err("setting SNI", e))?;
                ssl.param_mut().set_host(name).map_err(|e| err("setting the expected host name", e))?;
            }
        }
        // SAFETY: the SSL is valid and not started; BoringSSL copies the list.
        if unsafe {
            ffi::SSL_set1_client_key_shares(ssl.as_ptr(), p.cfg.client_shares.as_ptr(), p.cfg.client_shares.len())
        } != 1
        {
            return Err(format!("BoringSSL rejected the key shares {:04x?}", p.cfg.client_shares));
        }
        if p.cfg.resumption {
            let session = p.tickets.session.lock().ok().and_then(|s| s.clone());
            if let Some(session) = session {
                // SAFETY: the session comes from a context of this configuration.
                unsafe { ssl.set_session(&session) }.map_err(|e| err("offering the session ticket", e))?;
            }
            wait_ticket = Some((p.tickets.clone(), p.tickets.received.load(Ordering::Acquire)));
        }
        // SAFETY: the SSL is valid and not started.
        unsafe { ffi::SSL_set_connect_state(ssl.as_ptr()) };
    }
    // SAFETY: BIO_new(BIO_s_mem()) returns a fresh BIO or null; SSL_set_bio takes both.
    unsafe {
        let rbio = ffi::BIO_new(ffi::BIO_s_mem());
        let wbio = ffi::BIO_new(ffi::BIO_s_mem());
        if rbio.is_null() || wbio.is_null() {
            return Err("BIO_new failed (out of memory)".into());
        }
        ffi::SSL_set_bio(ssl.as_ptr(), rbio, wbio);
        ffi::SSL_set_msg_callback(ssl.as_ptr(), Some(on_message));
        Ok(Endpoint {
            ssl,
            rbio,
            wbio,
            hooks,
            done: false,
            peer_closed: false,
            flush_tickets: server && p.cfg.resumption,
            wait_ticket,
            error: String::new(),
        })
    }
}

impl Endpoint {
    /// Runs `f` with this endpoint's hooks reachable from BoringSSL's callbacks.
    fn call<R>(&mut self, f: impl FnOnce(&mut Self) -> R) -> R {
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(None));
            }
        }
        CURRENT.with(|c| c.set(Some(self.hooks)));
        let _clear = Clear;
        f(self)
    }

    fn fail(&mut self, what: &str, ret: c_int) -> c_int {
        // SAFETY: ssl is valid; these only read its state.
        let code = unsafe { ffi::SSL_get_error(self.ssl.as_ptr(), ret) };
        let verify = self.ssl.verify_result();
        let stack = ErrorStack::get();
        self.error = if let Err(v) = verify {
            format!("verify:{} ({what} failed, SSL_get_error {code})", v.error_string())
        } else if stack.errors().is_empty() {
            format!("{what} failed (SSL_get_error {code})")
        } else {
            format!("{what} failed (SSL_get_error {code}): {stack}")
        };
        -1
    }

    fn ticket_pending(&self) -> bool {
        self.wait_ticket.as_ref().is_some_and(|(slot, before)| slot.received.load(Ordering::Acquire) <= *before)
    }

    fn drive(&mut self) -> c_int {
        let ssl = self.ssl.as_ptr();
        if !self.done {
            // SAFETY: ssl is valid with both BIOs set.
            let r = unsafe { ffi::SSL_do_handshake(ssl) };
            if r == 1 {
                self.done = true;
                if self.flush_tickets {
                    // SAFETY: a zero-byte write reads nothing.
                    let w = unsafe { ffi::SSL_write(ssl, [0u8; 1].as_ptr() as *const c_void, 0) };
                    if w < 0 {
                        return self.fail("sending the session ticket", w);
                    }
                }
            } else if !want_more(unsafe { ffi::SSL_get_error(ssl, r) }) {
                return self.fail("handshake", r);
            }
        }
        if self.done && self.ticket_pending() {
            let mut byte = 0u8;
            // SAFETY: reads at most one byte into `byte`.
            let r = unsafe { ffi::SSL_read(ssl, &mut byte as *mut u8 as *mut c_void, 1) };
            if r > 0 {
                self.error = "unexpected application data during the handshake".into();
                return -1;
            }
            if !want_more(unsafe { ffi::SSL_get_error(ssl, r) }) {
                return self.fail("reading the session ticket", r);
            }
        }
        c_int::from(self.done && !self.ticket_pending())
    }
}

fn want_more(code: c_int) -> bool {
    code == ffi::SSL_ERROR_WANT_READ as c_int || code == ffi::SSL_ERROR_WANT_WRITE as c_int
}

/// Copies `s` into the host's buffer (truncated to `cap`); returns its full length.
unsafe fn put(s: &[u8], buf: *mut u8, cap: usize) -> usize {
    if !buf.is_null() {
        // SAFETY: the host passes a buffer of `cap` writable bytes.
        unsafe { ptr::copy_nonoverlapping(s.as_ptr(), buf, s.len().min(cap)) };
    }
    s.len()
}

// BoringSSL's allocator. BoringSSL calls `OPENSSL_memory_alloc`, `OPENSSL_memory_free` and
// `OPENSSL_memory_get_size` for every OPENSSL_malloc/realloc/free when they are defined (weak
// symbols in its crypto/mem.cc, resolved here at link time): every block it makes goes
// through them, from the first, so their layout never changes under a block. Each block
// carries its size in a prefix; the host's counters (`pqb_count_allocations`) are told of
// every allocation and free, on the thread that makes it.

/// The block prefix holding the requested size (16 bytes keeps malloc's alignment).
const PREFIX_BYTES: usize = 16;

/// The host's `fn(bytes)` counters, as addresses (0: none installed). Process-wide on purpose:
/// BoringSSL's hooks take no user pointer, and the object is loaded once per process.
static ON_ALLOC: AtomicUsize = AtomicUsize::new(0);
static ON_FREE: AtomicUsize = AtomicUsize::new(0);

fn tell(counter: &AtomicUsize, bytes: usize) {
    let f = counter.load(Ordering::Acquire);
    if f != 0 {
        // SAFETY: a non-zero value was stored by pqb_count_allocations from a function of
        // this signature, which the host keeps for the life of the process.
        let f: extern "C" fn(usize) = unsafe { std::mem::transmute::<usize, extern "C" fn(usize)>(f) };
        f(bytes);
    }
}

/// BoringSSL's allocation hook: `size` bytes after a size prefix.
///
/// # Safety
/// Called by BoringSSL only.
#[no_mangle]
pub unsafe extern "C" fn OPENSSL_memory_alloc(size: usize) -> *mut c_void {
    let Some(total) = size.checked_add(PREFIX_BYTES) else { return ptr::null_mut() };
    // SAFETY: malloc of a non-zero size; the prefix is written inside the block.
    unsafe {
        let block = libc::malloc(total) as *mut u8;
        if block.is_null() {
            return ptr::null_mut();
        }
        (block as *mut usize).write(size);
        tell(&ON_ALLOC, size);
        block.add(PREFIX_BYTES) as *mut c_void
    }
}

/// BoringSSL's free hook: zeroes the block (BoringSSL's contract for it) and frees it.
///
/// # Safety
/// `ptr` came from [`OPENSSL_memory_alloc`] and is not null (BoringSSL's contract).
#[no_mangle]
pub unsafe extern "C" fn OPENSSL_memory_free(ptr: *mut c_void) {
    // SAFETY: ptr is PREFIX_BYTES into a block of ours, whose prefix holds its size.
    unsafe {
        let block = (ptr as *mut u8).sub(PREFIX_BYTES);
        let size = (block as *const usize).read();
        ffi::OPENSSL_cleanse(ptr, size);
        tell(&ON_FREE, size);
        libc::free(block as *mut c_void);
    }
}

/// BoringSSL's size hook (for its realloc).
///
/// # Safety
/// `ptr` came from [`OPENSSL_memory_alloc`].
#[no_mangle]
pub unsafe extern "C" fn OPENSSL_memory_get_size(ptr: *mut c_void) -> usize {
    // SAFETY: as in OPENSSL_memory_free.
    unsafe { ((ptr as *const u8).sub(PREFIX_BYTES) as *const usize).read() }
}

/// Installs the host's allocation counters: `on_alloc(bytes)` after every block BoringSSL
/// allocates, `on_free(bytes)` before every block it frees, on the thread that does it. Both
/// must stay valid for the life of the process and must not allocate through BoringSSL.
#[no_mangle]
pub extern "C" fn pqb_count_allocations(on_alloc: extern "C" fn(usize), on_free: extern "C" fn(usize)) {
    ON_ALLOC.store(on_alloc as usize, Ordering::Release);
    ON_FREE.store(on_free as usize, Ordering::Release);
}

/// The ABI revision of this object.
#[no_mangle]
pub extern "C" fn pqb_abi_version() -> u32 {
    ABI_VERSION
}

/// `OpenSSL_version(OPENSSL_VERSION)` of the BoringSSL inside, then ` (API <n>)`.
///
/// # Safety
/// `buf` is null or `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pqb_version(buf: *mut u8, cap: usize) -> usize {
    // SAFETY: OpenSSL_version returns a static string.
    let name = unsafe { CStr::from_ptr(ffi::OpenSSL_version(ffi::OPENSSL_VERSION as c_int)) };
    let s = format!("{} (API {})", name.to_string_lossy(), ffi::BORINGSSL_API_VERSION);
    unsafe { put(s.as_bytes(), buf, cap) }
}

/// Builds the contexts of a configuration (JSON). Null on error, with the message in `err`.
///
/// # Safety
/// `json` is `len` readable bytes; `err` is null or `cap` writable bytes; `err_len` is valid.
#[no_mangle]
pub unsafe extern "C" fn pqb_prepare(
    json: *const u8,
    len: usize,
    err: *mut u8,
    cap: usize,
    err_len: *mut usize,
) -> *mut Prepared {
    // SAFETY: as documented.
    let json = unsafe { std::slice::from_raw_parts(json, len) };
    match prepare(json) {
        Ok(p) => Box::into_raw(Box::new(p)),
        Err(e) => {
            unsafe { *err_len = put(e.as_bytes(), err, cap) };
            ptr::null_mut()
        }
    }
}

/// # Safety
/// `p` comes from `pqb_prepare` and has no endpoint left.
#[no_mangle]
pub unsafe extern "C" fn pqb_prepared_free(p: *mut Prepared) {
    if !p.is_null() {
        drop(unsafe { Box::from_raw(p) });
    }
}

/// A client (`server` 0) or server endpoint. Null on error, with the message in `err`.
///
/// # Safety
/// `p` is live for the endpoint's life; `hooks.user` is valid while the endpoint is.
#[no_mangle]
pub unsafe extern "C" fn pqb_endpoint_new(
    p: *const Prepared,
    server: c_int,
    key_log: c_int,
    hooks: Hooks,
    err: *mut u8,
    cap: usize,
    err_len: *mut usize,
) -> *mut Endpoint {
    match endpoint(unsafe { &*p }, server != 0, key_log != 0, hooks) {
        Ok(e) => Box::into_raw(Box::new(e)),
        Err(e) => {
            unsafe { *err_len = put(e.as_bytes(), err, cap) };
            ptr::null_mut()
        }
    }
}

/// # Safety
/// `e` comes from `pqb_endpoint_new`.
#[no_mangle]
pub unsafe extern "C" fn pqb_endpoint_free(e: *mut Endpoint) {
    if e.is_null() {
        return;
    }
    let e = unsafe { Box::from_raw(e) };
    if e.done {
        // A completed connection is closed cleanly, so its session stays resumable.
        unsafe {
            ffi::SSL_set_shutdown(e.ssl.as_ptr(), (ffi::SSL_SENT_SHUTDOWN | ffi::SSL_RECEIVED_SHUTDOWN) as c_int)
        };
    }
    drop(e);
}

/// The last error of `e` (copied into `buf`); returns its length.
///
/// # Safety
/// `e` is live; `buf` is null or `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pqb_error(e: *const Endpoint, buf: *mut u8, cap: usize) -> usize {
    unsafe { put((*e).error.as_bytes(), buf, cap) }
}

/// Bytes from the peer. 0, or -1 on error.
///
/// # Safety
/// `e` is live; `data` is `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn pqb_receive(e: *mut Endpoint, data: *const u8, len: usize) -> c_int {
    let e = unsafe { &mut *e };
    let mut rest = unsafe { std::slice::from_raw_parts(data, len) };
    while !rest.is_empty() {
        let n = rest.len().min(c_int::MAX as usize);
        // SAFETY: rbio is a live memory BIO; BIO_write copies n bytes.
        let w = unsafe { ffi::BIO_write(e.rbio, rest.as_ptr() as *const c_void, n as c_int) };
        if w <= 0 {
            e.error = "BIO_write to the memory BIO failed".into();
            return -1;
        }
        rest = &rest[w as usize..];
    }
    0
}

/// Runs the handshake on what was received: 1 complete (ticket included), 0 wants more, -1 error.
///
/// # Safety
/// `e` is live.
#[no_mangle]
pub unsafe extern "C" fn pqb_drive(e: *mut Endpoint) -> c_int {
    unsafe { &mut *e }.call(|e| e.drive())
}

/// Bytes waiting to be sent.
///
/// # Safety
/// `e` is live.
#[no_mangle]
pub unsafe extern "C" fn pqb_pending(e: *const Endpoint) -> usize {
    unsafe { ffi::BIO_pending((*e).wbio) }
}

/// Moves up to `cap` bytes to send into `buf`; returns how many.
///
/// # Safety
/// `e` is live; `buf` is `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pqb_take(e: *mut Endpoint, buf: *mut u8, cap: usize) -> usize {
    let n = cap.min(c_int::MAX as usize) as c_int;
    let r = unsafe { ffi::BIO_read((*e).wbio, buf as *mut c_void, n) };
    r.max(0) as usize
}

/// Writes application data: 0, or -1 on error.
///
/// # Safety
/// `e` is live; `data` is `len` readable bytes.
#[no_mangle]
pub unsafe extern "C" fn pqb_write(e: *mut Endpoint, data: *const u8, len: usize) -> c_int {
    let data = unsafe { std::slice::from_raw_parts(data, len) };
    unsafe { &mut *e }.call(|e| {
        let mut rest = data;
        while !rest.is_empty() {
            let n = rest.len().min(c_int::MAX as usize) as c_int;
            // SAFETY: ssl is valid; SSL_write reads n bytes.
            let r = unsafe { ffi::SSL_write(e.ssl.as_ptr(), rest.as_ptr() as *const c_void, n) };
            if r <= 0 {
                return e.fail("writing application data", r);
            }
            rest = &rest[r as usize..];
        }
        0
    })
}

/// Reads application data into `buf`: bytes read (0: nothing more now), or -1 on error.
/// Sets `closed` once the peer's close_notify has been read.
///
/// # Safety
/// `e` is live; `buf` is `cap` writable bytes.
#[no_mangle]
pub unsafe extern "C" fn pqb_read(e: *mut Endpoint, buf: *mut u8, cap: usize) -> isize {
    unsafe { &mut *e }.call(|e| {
        let n = cap.min(c_int::MAX as usize) as c_int;
        // SAFETY: SSL_read writes at most n bytes into buf.
        let r = unsafe { ffi::SSL_read(e.ssl.as_ptr(), buf as *mut c_void, n) };
        if r > 0 {
            return r as isize;
        }
        let code = unsafe { ffi::SSL_get_error(e.ssl.as_ptr(), r) };
        if code == ffi::SSL_ERROR_ZERO_RETURN as c_int {
            e.peer_closed = true;
            return 0;
        }
        if want_more(code) {
            return 0;
        }
        e.fail("reading application data", r) as isize
    })
}

/// # Safety
/// `e` is live.
#[no_mangle]
pub unsafe extern "C" fn pqb_peer_closed(e: *const Endpoint) -> c_int {
    c_int::from(unsafe { (*e).peer_closed })
}

/// Queues close_notify: 0, or -1 on error.
///
/// # Safety
/// `e` is live.
#[no_mangle]
pub unsafe extern "C" fn pqb_close(e: *mut Endpoint) -> c_int {
    unsafe { &mut *e }.call(|e| {
        let r = unsafe { ffi::SSL_shutdown(e.ssl.as_ptr()) };
        if r < 0 {
            return e.fail("sending close_notify", r);
        }
        0
    })
}

/// What was negotiated.
#[repr(C)]
pub struct NegotiatedRaw {
    pub group: u16,
    /// The peer's CertificateVerify scheme (0: none seen, e.g. on a server without mTLS).
    pub peer_sigalg: u16,
    /// IANA cipher-suite value (low 16 bits of the cipher id).
    pub cipher: u16,
    pub hrr: c_int,
    pub resumed: c_int,
    pub tls13: c_int,
}

/// # Safety
/// `e` is live.
#[no_mangle]
pub unsafe extern "C" fn pqb_negotiated(e: *const Endpoint) -> NegotiatedRaw {
    let ssl = unsafe { (*e).ssl.as_ptr() };
    // SAFETY: ssl is valid; these only read its state.
    unsafe {
        let cipher = ffi::SSL_get_current_cipher(ssl);
        NegotiatedRaw {
            group: ffi::SSL_get_group_id(ssl),
            peer_sigalg: ffi::SSL_get_peer_signature_algorithm(ssl),
            cipher: if cipher.is_null() { 0 } else { ffi::SSL_CIPHER_get_protocol_id(cipher) },
            hrr: ffi::SSL_used_hello_retry_request(ssl),
            resumed: ffi::SSL_session_reused(ssl),
            tls13: c_int::from(ffi::SSL_version(ssl) == ffi::TLS1_3_VERSION as c_int),
        }
    }
}
