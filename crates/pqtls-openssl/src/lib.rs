//! The OpenSSL 3.5 backend.
//!
//! Endpoints are `SSL` objects over two memory BIOs (sans-IO: the driver moves the bytes).
//! Tracing uses OpenSSL's own hooks, installed only on traced endpoints:
//! - the *message callback* (`SSL_set_msg_callback`) fires when a handshake message has been
//!   fully read (before it is processed) → [`EventKind::Read`], and after a message has been
//!   built and written to the record layer → [`EventKind::Wrote`], with its exact length;
//! - the *info callback* (`SSL_set_info_callback`) fires on every `SSL_CB_LOOP`, when the
//!   state machine is about to move on (finished processing a message, or about to build
//!   the next one) → [`EventKind::Boundary`].
//!
//! The callbacks reach the endpoint's trace through a thread-local pointer that is set only
//! for the duration of a call into OpenSSL, so both callbacks cost one clock read each.
//! Untraced endpoints (used to measure the tracer's overhead) keep only the message callback,
//! without clock reads, to notice a HelloRetryRequest.
//!
//! Steps are mapped to the canonical vocabulary by [`steps::map`]. Secrets go to the
//! endpoint's key log through `SSL_CTX_set_keylog_callback`, reaching the endpoint the same
//! way (the thread-local pointer of the call in progress); a second pair of contexts with the
//! callback installed is used only for endpoints that have a key log, so that endpoints
//! without one do not pay for OpenSSL formatting the key-log lines.

pub mod build_info;
pub mod memory;
pub mod steps;

pub use build_info::{build_info, BuildInfo};
pub use memory::count_allocations;

use foreign_types::ForeignTypeRef;
use openssl::error::ErrorStack;
use openssl::pkey::PKey;
use openssl::ssl::{
    Ssl, SslContext, SslContextBuilder, SslMethod, SslMode, SslOptions, SslSession, SslSessionCacheMode, SslVerifyMode,
    SslVersion,
};
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::X509VerifyFlags;
use openssl::x509::{X509VerifyResult, X509};
use pqtls_core::backend::{
    Anchors, Backend, ChainFiles, ClientTrust, Endpoint, EndpointOptions, KeyLog, Negotiated, PkiFiles, Prepared,
};
use pqtls_core::catalogue::{self, CertCompression, Stack};
use pqtls_core::config::{HandshakeConfig, HelloPadding};
use pqtls_core::trace::{EventKind, HsType, Side, Trace};
use pqtls_core::{Error, Result};
use std::cell::Cell;
use std::ffi::CStr;
use std::os::raw::{c_char, c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Declarations openssl-sys lacks (they link against the OpenSSL 3.5+ build linked).
mod ffi_extra {
    use std::os::raw::{c_int, c_void};
    pub type MsgCallback = Option<
        unsafe extern "C" fn(
            write_p: c_int,
            version: c_int,
            content_type: c_int,
            buf: *const c_void,
            len: usize,
            ssl: *mut openssl_sys::SSL,
            arg: *mut c_void,
        ),
    >;
    pub type InfoCallback = Option<unsafe extern "C" fn(ssl: *const openssl_sys::SSL, where_: c_int, ret: c_int)>;
    pub type CertVerifyCallback =
        Option<unsafe extern "C" fn(ctx: *mut openssl_sys::X509_STORE_CTX, arg: *mut c_void) -> c_int>;
    extern "C" {
        pub fn SSL_CTX_set_cert_verify_callback(
            ctx: *mut openssl_sys::SSL_CTX,
            cb: CertVerifyCallback,
            arg: *mut c_void,
        );
        pub fn SSL_set_msg_callback(ssl: *mut openssl_sys::SSL, cb: MsgCallback);
        pub fn SSL_set_info_callback(ssl: *mut openssl_sys::SSL, cb: InfoCallback);
        /// RFC 8879 (OpenSSL 3.2+): the algorithms this side offers to receive, and may
        /// send, in order; `len` 0 clears them (no compress_certificate extension is sent).
        pub fn SSL_CTX_set1_cert_comp_preference(ctx: *mut openssl_sys::SSL_CTX, algs: *mut c_int, len: usize)
            -> c_int;
        /// Compresses the context's certificate chains ahead (`alg`: one algorithm of the
        /// preference list); OpenSSL sends a CompressedCertificate only for a chain compressed
        /// so. Returns 0 when nothing was compressed (or the result was not smaller).
        pub fn SSL_CTX_compress_certs(ctx: *mut openssl_sys::SSL_CTX, alg: c_int) -> c_int;
        /// The context's current chain compressed with `alg` by OpenSSL's codec: its length
        /// (0: failed), `*data` (freed with OPENSSL_free) and the Certificate body's length.
        pub fn SSL_CTX_get1_compressed_cert(
            ctx: *mut openssl_sys::SSL_CTX,
            alg: c_int,
            data: *mut *mut u8,
            orig_len: *mut usize,
        ) -> usize;
        /// Sets the compressed form of the context's current chain (copied).
        pub fn SSL_CTX_set1_compressed_cert(
            ctx: *mut openssl_sys::SSL_CTX,
            alg: c_int,
            comp_data: *mut u8,
            comp_length: usize,
            orig_length: usize,
        ) -> c_int;
    }
    pub const SSL_CB_LOOP: c_int = 0x01;
    pub const SSL3_RT_HANDSHAKE: c_int = 22;
    pub const SSL_CTRL_GET_PEER_SIGNATURE_NAME: c_int = 141;
    pub const BIO_CTRL_PENDING: c_int = 10;
    pub const SSL_CTRL_GET_TLSEXT_TICKET_KEYS: c_int = 58;
    pub const SSL_CTRL_SET_TLSEXT_TICKET_KEYS: c_int = 59;
    /// Key name (16) + HMAC secret (32) + AES key (32), OpenSSL 3.
    pub const TICKET_KEYS_BYTES: usize = 80;
}

const STACK: &str = "openssl";

/// The OpenSSL 3.5 backend.
#[derive(Debug)]
pub struct OpensslBackend {
    /// With certificate compression, chains are compressed ahead (`SSL_CTX_compress_certs`),
    /// without which OpenSSL sends them uncompressed although it offers the extension.
    precompress: bool,
}

impl Default for OpensslBackend {
    fn default() -> Self {
        OpensslBackend::new()
    }
}

impl OpensslBackend {
    pub fn new() -> OpensslBackend {
        OpensslBackend { precompress: true }
    }

    /// OpenSSL configured as an application that sets the compression preference but never
    /// calls `SSL_CTX_compress_certs`: it advertises certificate compression and sends its
    /// chain uncompressed. What pqtls must catch as "not negotiated as requested" — its
    /// tests use it to show the check fires; measurements use [`OpensslBackend::new`].
    pub fn without_precompression() -> OpensslBackend {
        OpensslBackend { precompress: false }
    }
}

/// Certificate compression on a context: the preference list of `cfg` (only its algorithm;
/// empty, so no extension, without compression), and, on a server (`compress_chain`), its
/// chain compressed ahead — OpenSSL's server sends a CompressedCertificate only for a chain
/// compressed so (its client compresses its own chain in each handshake, with mutual TLS).
///
/// `SSL_CTX_compress_certs` compresses only the chains of the built-in key types (its loop
/// stops at `SSL_PKEY_NUM`; ML-DSA, a provider's key type, is stored after them — OpenSSL
/// 3.5.5): for the others the chain is compressed with OpenSSL's own codec through
/// `SSL_CTX_get1_compressed_cert` and set with `SSL_CTX_set1_compressed_cert`, as an
/// application must. A compressed chain not smaller than the chain is refused, as OpenSSL does.
fn cert_compression(b: &mut SslContextBuilder, cfg: &HandshakeConfig, compress_chain: bool) -> Result<()> {
    let alg = cfg.cert_compression;
    let mut algs = [alg.code_point() as c_int];
    let len = if alg == CertCompression::None { 0 } else { 1 };
    // SAFETY: the context is valid and being built; OpenSSL reads `len` ints of `algs`
    // (none when 0) and copies them.
    let ok = unsafe { ffi_extra::SSL_CTX_set1_cert_comp_preference(b.as_ptr(), algs.as_mut_ptr(), len) };
    if ok != 1 {
        return Err(Error::Unsupported(format!(
            "OpenSSL cannot compress certificates with {alg}: this OpenSSL was built without it, or its library              (libz.so, libbrotlienc.so + libbrotlidec.so, libzstd.so) could not be loaded — scripts/setup.sh              installs zlib1g-dev, libbrotli-dev and libzstd-dev, scripts/openssl.sh builds OpenSSL with              enable-{{zlib,brotli,zstd}}-dynamic"
        )));
    }
    if !compress_chain || alg == CertCompression::None {
        return Ok(());
    }
    let code = alg.code_point() as c_int;
    // SAFETY: as above; the chain was loaded into the context before.
    if unsafe { ffi_extra::SSL_CTX_compress_certs(b.as_ptr(), code) } > 0 {
        return Ok(());
    }
    let mut data: *mut u8 = ptr::null_mut();
    let mut orig_len = 0usize;
    // SAFETY: the context is valid; OpenSSL allocates `data` (ours to free) on success.
    let len = unsafe { ffi_extra::SSL_CTX_get1_compressed_cert(b.as_ptr(), code, &mut data, &mut orig_len) };
    let set = len > 0 && len < orig_len && {
        // SAFETY: `data` holds `len` bytes; OpenSSL copies them.
        unsafe { ffi_extra::SSL_CTX_set1_compressed_cert(b.as_ptr(), code, data, len, orig_len) == 1 }
    };
    if !data.is_null() {
        // SAFETY: allocated by OpenSSL for us, freed once.
        unsafe { openssl_sys::OPENSSL_free(data as *mut c_void) };
    }
    if set {
        return Ok(());
    }
    let errors = ErrorStack::get();
    let why = if len == 0 {
        format!(
            "OpenSSL's {alg} codec failed on it{}",
            if errors.errors().is_empty() { String::new() } else { format!(": {errors}") }
        )
    } else {
        format!(
            "compressed it is {len} bytes, not smaller than its {orig_len} bytes, and OpenSSL sends a compressed \
             chain only when it is"
        )
    };
    Err(Error::Unsupported(format!(
        "OpenSSL does not compress the server chain {} with {alg}: {why}; it would send it uncompressed. Stacks that \
         compress it: rustls (or another algorithm)",
        cfg.chain
    )))
}

fn ossl(context: &str) -> impl FnOnce(ErrorStack) -> Error + '_ {
    move |e| Error::tls(STACK, format!("{context}: {e}"))
}

/// The group list in OpenSSL 3.5 syntax: a `*` marks the groups that get a key share.
fn client_groups(cfg: &HandshakeConfig) -> String {
    let shares = cfg.shares();
    cfg.groups
        .iter()
        .map(|g| if shares.contains(g) { format!("*{}", g.name) } else { g.name.to_string() })
        .collect::<Vec<_>>()
        .join(":")
}

/// Loads the leaf, then every other certificate of the chain file (and the root when sent) as
/// the context's extra chain certificates, in order. Not `set_certificate_chain_file`: it keeps
/// the intermediates as the leaf's own chain, and OpenSSL sends the extra chain certificates
/// only when that chain is empty — so a root added to a leaf:intermediate:root chain was
/// silently not sent (found by `pqtls replicate aws-mtls-ttlb`, issue 35).
fn load_chain(b: &mut SslContextBuilder, files: &ChainFiles, send_root: bool) -> Result<()> {
    let pem = std::fs::read(&files.chain).map_err(|e| Error::io(format!("reading {}", files.chain.display()), e))?;
    let mut certs = X509::stack_from_pem(&pem).map_err(ossl("parsing the certificate chain"))?.into_iter();
    let leaf = certs.next().ok_or_else(|| Error::tls(STACK, format!("{}: no certificate", files.chain.display())))?;
    b.set_certificate(&leaf).map_err(ossl("loading the leaf certificate"))?;
    for cert in certs {
        b.add_extra_chain_cert(cert).map_err(ossl("adding an intermediate to the chain"))?;
    }
    let key =
        std::fs::read(&files.leaf_key).map_err(|e| Error::io(format!("reading {}", files.leaf_key.display()), e))?;
    let key = PKey::private_key_from_pem(&key).map_err(ossl("parsing the leaf private key"))?;
    b.set_private_key(&key).map_err(ossl("loading the leaf private key"))?;
    b.check_private_key().map_err(ossl("the leaf key does not match its certificate"))?;
    if send_root {
        b.add_extra_chain_cert(read_cert(&files.root)?).map_err(ossl("adding the root to the chain"))?;
    }
    // Send exactly the configured chain: never complete it from the trust store.
    b.set_mode(SslMode::NO_AUTO_CHAIN);
    Ok(())
}

fn read_cert(path: &std::path::Path) -> Result<X509> {
    let pem = std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))?;
    X509::from_pem(&pem).map_err(ossl("parsing a certificate"))
}

/// Trust `root`; with `verify_parent`, also check the root's own signature.
fn trust(b: &mut SslContextBuilder, root: &std::path::Path, verify_parent: bool) -> Result<()> {
    trust_all(b, vec![read_cert(root)?], verify_parent)
}

/// Trust every certificate of `anchors`; with `verify_parent`, also check a root's own signature.
fn trust_all(b: &mut SslContextBuilder, anchors: Vec<X509>, verify_parent: bool) -> Result<()> {
    let mut store = X509StoreBuilder::new().map_err(ossl("creating a certificate store"))?;
    for cert in anchors {
        store.add_cert(cert).map_err(ossl("adding a trust anchor"))?;
    }
    if verify_parent {
        store.set_flags(X509VerifyFlags::CHECK_SS_SIGNATURE).map_err(ossl("setting CHECK_SS_SIGNATURE"))?;
    }
    b.set_cert_store(store.build());
    Ok(())
}

fn base_context(method: SslMethod, cfg: &HandshakeConfig, groups: &str) -> Result<SslContextBuilder> {
    let mut b = SslContextBuilder::new(method).map_err(ossl("creating a context"))?;
    b.set_min_proto_version(Some(SslVersion::TLS1_3)).map_err(ossl("setting TLS 1.3"))?;
    b.set_max_proto_version(Some(SslVersion::TLS1_3)).map_err(ossl("setting TLS 1.3"))?;
    b.set_ciphersuites(cfg.cipher.name).map_err(ossl("setting the cipher suite"))?;
    if cfg.cipher.name == "TLS_AES_128_CCM_8_SHA256" {
        // OpenSSL 3.5 allows the 64-bit-tag CCM_8 suite only at security level 0.
        b.set_security_level(0);
    }
    b.set_groups_list(groups)
        .map_err(|e| Error::tls(STACK, format!("OpenSSL rejected the group list '{groups}': {e}")))?;
    Ok(b)
}

impl Backend for OpensslBackend {
    fn stack(&self) -> Stack {
        Stack::Openssl
    }

    fn library_version(&self) -> String {
        build_info().identity()
    }

    fn counted_allocations(&self) -> Result<pqtls_core::backend::AllocationCoverage> {
        memory::coverage()
    }

    fn prepare(&self, cfg: &HandshakeConfig, pki: &PkiFiles) -> Result<Box<dyn Prepared>> {
        if cfg.stack != Stack::Openssl {
            return Err(Error::Invalid(format!("configuration for {} given to the OpenSSL backend", cfg.stack)));
        }
        cfg.validate()?;
        let tickets = Arc::new(TicketSlot::default());
        let plain = contexts(cfg, pki, &tickets, false, self.precompress)?;
        let logging = contexts(cfg, pki, &tickets, true, self.precompress)?;
        // A ticket issued by one server context must resume on the other.
        share_ticket_keys(&plain.server, &logging.server)?;
        Ok(Box::new(OpensslPrepared {
            resumption: cfg.resumption,
            plain,
            logging,
            tickets,
            server_name: pki.trust.server_name.clone(),
        }))
    }
}

/// Client and server contexts of one configuration; with `key_log`, both pass their secrets
/// to the key log of the endpoint inside the current call.
fn contexts(
    cfg: &HandshakeConfig,
    pki: &PkiFiles,
    tickets: &Arc<TicketSlot>,
    key_log: bool,
    precompress: bool,
) -> Result<Contexts> {
    // Server: supports exactly the group that must be negotiated.
    let mut s = base_context(SslMethod::tls_server(), cfg, cfg.expected_group().name)?;
    load_chain(&mut s, &pki.server, cfg.send_root)?;
    cert_compression(&mut s, cfg, precompress)?;
    if cfg.resumption {
        s.set_num_tickets(1).map_err(ossl("enabling tickets"))?;
    } else {
        s.set_num_tickets(0).map_err(ossl("disabling tickets"))?;
        s.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    if cfg.client_chain.is_some() {
        let client = pki.client.as_ref().ok_or_else(|| Error::Invalid("mutual TLS needs a client chain".into()))?;
        trust(&mut s, &client.root, cfg.verify_parent)?;
        s.set_verify(SslVerifyMode::PEER | SslVerifyMode::FAIL_IF_NO_PEER_CERT);
    }
    if key_log {
        s.set_keylog_callback(on_key_log);
    }
    let server = s.build();

    // Client: all the groups, in order, with key shares as configured.
    let mut c = base_context(SslMethod::tls_client(), cfg, &client_groups(cfg))?;
    client_trust(&mut c, &pki.trust, &pki.server.root, cfg.verify_parent)?;
    if let (Some(_), Some(client)) = (&cfg.client_chain, &pki.client) {
        load_chain(&mut c, client, cfg.send_root)?;
    }
    cert_compression(&mut c, cfg, false)?;
    hello_padding(&mut c, cfg.client_hello_padding)?;
    if cfg.resumption {
        c.set_session_cache_mode(SslSessionCacheMode::CLIENT);
        let slot = tickets.clone();
        c.set_new_session_callback(move |_, session| slot.store(session));
    } else {
        c.set_session_cache_mode(SslSessionCacheMode::OFF);
    }
    if key_log {
        c.set_keylog_callback(on_key_log);
    }
    Ok(Contexts { client: c.build(), server })
}

/// `client_hello_padding = 512`: OpenSSL's RFC 7685 "F5 workaround" (`SSL_OP_TLSEXT_PADDING`,
/// part of the `SSL_OP_ALL` cURL sets): a ClientHello of 256–511 bytes, header included, gets a
/// padding extension that makes it 512 (OpenSSL counts the PSK extension written after it, so
/// resumed hellos too; a second hello after a HelloRetryRequest is padded on its own). The
/// option is read back: an OpenSSL without it (4.1 made it a no-op) is refused, not ignored.
fn hello_padding(c: &mut SslContextBuilder, padding: HelloPadding) -> Result<()> {
    if padding == HelloPadding::None {
        return Ok(());
    }
    let option = SslOptions::from_bits_retain(openssl_sys::SSL_OP_TLSEXT_PADDING);
    if option.is_empty() || !c.set_options(option).contains(option) {
        return Err(Error::Unsupported(format!(
            "client_hello_padding = {padding}: this OpenSSL ({}) has no SSL_OP_TLSEXT_PADDING (OpenSSL 4.1 made it a \
             no-op); measure with an OpenSSL 3.x, or client_hello_padding = none",
            build_info().identity()
        )));
    }
    Ok(())
}

/// The client's trust anchors and how the server's chain is verified: timed (the
/// verification CPU of endpoints that ask for it), or not at all (`verify = false`).
fn client_trust(
    c: &mut SslContextBuilder,
    t: &ClientTrust,
    pki_root: &std::path::Path,
    verify_parent: bool,
) -> Result<()> {
    match &t.anchors {
        Anchors::Pki => trust(c, pki_root, verify_parent)?,
        Anchors::Bundle { file, named } => {
            let pem = std::fs::read(file).map_err(|e| Error::io(format!("reading {named} ({})", file.display()), e))?;
            let certs = X509::stack_from_pem(&pem).map_err(ossl("parsing the trust anchors"))?;
            if certs.is_empty() {
                return Err(Error::Invalid(format!(
                    "{named} ({}) holds no certificate; give a PEM bundle of CA certificates (-----BEGIN CERTIFICATE-----)",
                    file.display()
                )));
            }
            trust_all(c, certs, verify_parent)?;
        }
    }
    c.set_verify(SslVerifyMode::PEER);
    let callback: ffi_extra::CertVerifyCallback = if t.verify { Some(on_verify_chain) } else { Some(accept_chain) };
    // SAFETY: the context is valid and being built; the callbacks take no argument (null).
    unsafe { ffi_extra::SSL_CTX_set_cert_verify_callback(c.as_ptr(), callback, ptr::null_mut()) };
    Ok(())
}

/// OpenSSL's chain verification (`X509_verify_cert`), timed for the endpoint inside the call.
unsafe extern "C" fn on_verify_chain(ctx: *mut openssl_sys::X509_STORE_CTX, _arg: *mut c_void) -> c_int {
    let mut start = None;
    with_current(|hooks| start = hooks.trace.verification_start());
    // SAFETY: OpenSSL passes the store context it set up for this verification.
    let ok = unsafe { openssl_sys::X509_verify_cert(ctx) };
    with_current(|hooks| hooks.trace.verification_end(start));
    ok
}

/// `verify = false`: the chain is accepted as sent, unverified (the server's CertificateVerify is
/// still checked with its leaf's key).
unsafe extern "C" fn accept_chain(_ctx: *mut openssl_sys::X509_STORE_CTX, _arg: *mut c_void) -> c_int {
    1
}

/// OpenSSL's key-log line (`LABEL <client random hex> <secret hex>`) to the key log of the
/// endpoint inside the current call.
fn on_key_log(_ssl: &openssl::ssl::SslRef, line: &str) {
    with_current(|hooks| {
        if let Some(log) = &hooks.key_log {
            let mut parts = line.split_ascii_whitespace();
            if let (Some(label), Some(random), Some(secret)) = (parts.next(), parts.next(), parts.next()) {
                if let (Some(random), Some(secret)) = (from_hex(random), from_hex(secret)) {
                    log.log(label, &random, &secret);
                }
            }
        }
    });
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() & 1 == 1 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

struct Contexts {
    client: SslContext,
    server: SslContext,
}

/// Gives `to` the session-ticket keys of `from`.
fn share_ticket_keys(from: &SslContext, to: &SslContext) -> Result<()> {
    let mut keys = [0u8; ffi_extra::TICKET_KEYS_BYTES];
    let len = keys.len() as std::os::raw::c_long;
    // SAFETY: both contexts are valid; the GET/SET ticket-keys controls read or write exactly
    // `len` bytes of `keys`, which we own, and fail (return 0) when `len` is not the size
    // OpenSSL expects.
    let ok = unsafe {
        openssl_sys::SSL_CTX_ctrl(
            from.as_ptr(),
            ffi_extra::SSL_CTRL_GET_TLSEXT_TICKET_KEYS,
            len,
            keys.as_mut_ptr() as *mut c_void,
        ) == 1
            && openssl_sys::SSL_CTX_ctrl(
                to.as_ptr(),
                ffi_extra::SSL_CTRL_SET_TLSEXT_TICKET_KEYS,
                len,
                keys.as_mut_ptr() as *mut c_void,
            ) == 1
    };
    keys.fill(0);
    if ok {
        Ok(())
    } else {
        Err(Error::tls(STACK, "sharing the session-ticket keys between contexts failed"))
    }
}

/// The newest session ticket the client received, and how many were received so far.
#[derive(Default)]
struct TicketSlot {
    session: Mutex<Option<SslSession>>,
    received: AtomicU64,
}

impl TicketSlot {
    fn store(&self, s: SslSession) {
        if let Ok(mut slot) = self.session.lock() {
            *slot = Some(s);
        }
        self.received.fetch_add(1, Ordering::Release);
    }
}

struct OpensslPrepared {
    resumption: bool,
    /// The name clients check in the server's certificate (and send as SNI).
    server_name: String,
    /// Contexts for endpoints without a key log, and with one.
    plain: Contexts,
    logging: Contexts,
    tickets: Arc<TicketSlot>,
}

impl OpensslPrepared {
    fn contexts(&self, opts: &EndpointOptions) -> &Contexts {
        if opts.key_log.is_some() {
            &self.logging
        } else {
            &self.plain
        }
    }
}

impl Prepared for OpensslPrepared {
    fn client(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        let mut ssl = Ssl::new(&self.contexts(opts).client).map_err(ossl("creating a client"))?;
        let name = &self.server_name;
        match name.parse::<std::net::IpAddr>() {
            // An address is checked against the certificate's IP addresses, and not sent as SNI.
            Ok(ip) => ssl.param_mut().set_ip(ip).map_err(ossl("setting the expected IP address"))?,
            Err(_) => {
                ssl.set_hostname(name).map_err(ossl("setting SNI"))?;
                ssl.param_mut().set_host(name).map_err(ossl("setting the expected host name"))?;
            }
        }
        if self.resumption {
            let session = self.tickets.session.lock().ok().and_then(|s| s.clone());
            if let Some(session) = session {
                // SAFETY: the session comes from a context with the same settings (same
                // Prepared), which is what SSL_set_session requires.
                unsafe { ssl.set_session(&session) }.map_err(ossl("offering the session ticket"))?;
            }
        }
        ssl.set_connect_state();
        let tickets_before = self.tickets.received.load(Ordering::Acquire);
        let wait_ticket = self.resumption.then(|| (self.tickets.clone(), tickets_before));
        OpensslEndpoint::new(ssl, Side::Client, opts, wait_ticket)
    }

    fn server(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        let mut ssl = Ssl::new(&self.contexts(opts).server).map_err(ossl("creating a server"))?;
        ssl.set_accept_state();
        OpensslEndpoint::new(ssl, Side::Server, opts, None)
    }
}

thread_local! {
    /// The hooks of the endpoint currently inside a call into OpenSSL on this thread.
    static CURRENT: Cell<*mut Hooks> = const { Cell::new(ptr::null_mut()) };
}

/// What the callbacks write into.
struct Hooks {
    trace: Trace,
    hrr: bool,
    key_log: Option<Arc<dyn KeyLog>>,
    /// How the peer's certificate arrived: `Some(0)` a plain Certificate, `Some(alg)` a
    /// CompressedCertificate of that algorithm (RFC 8879 code point); `None`: none received.
    peer_cert_compression: Option<u16>,
}

fn with_current(f: impl FnOnce(&mut Hooks)) {
    CURRENT.with(|c| {
        let p = c.get();
        if !p.is_null() {
            // SAFETY: CURRENT points to the Box<Hooks> of the endpoint whose call is on this
            // thread's stack (set by `OpensslEndpoint::call`, cleared before it returns).
            f(unsafe { &mut *p })
        }
    })
}

unsafe extern "C" fn on_message(
    write_p: c_int,
    _version: c_int,
    content_type: c_int,
    buf: *const c_void,
    len: usize,
    _ssl: *mut openssl_sys::SSL,
    _arg: *mut c_void,
) {
    if content_type != ffi_extra::SSL3_RT_HANDSHAKE || buf.is_null() || len == 0 {
        return;
    }
    // SAFETY: OpenSSL passes a buffer of `len` bytes holding the whole handshake message.
    let msg = unsafe { std::slice::from_raw_parts(buf as *const u8, len) };
    let t = HsType::classify(msg);
    let kind = if write_p != 0 { EventKind::Wrote(t) } else { EventKind::Read(t) };
    let compressed = pqtls_core::wire::messages(msg).next().and_then(|m| m.compressed_certificate());
    with_current(|hooks| {
        hooks.hrr |= t == HsType::HelloRetryRequest;
        match (write_p != 0, t) {
            (false, HsType::Certificate) => hooks.peer_cert_compression = Some(0),
            (false, HsType::CompressedCertificate) => {
                hooks.peer_cert_compression = compressed.map(|h| h.algorithm).or(Some(u16::MAX))
            }
            (true, HsType::CompressedCertificate) if hooks.trace.detailed => hooks.trace.compressed.extend(compressed),
            _ => {}
        }
        hooks.trace.push(kind, len as u32)
    });
}

unsafe extern "C" fn on_info(_ssl: *const openssl_sys::SSL, where_: c_int, _ret: c_int) {
    if where_ & ffi_extra::SSL_CB_LOOP != 0 {
        with_current(|hooks| hooks.trace.push(EventKind::Boundary, 0));
    }
}

struct OpensslEndpoint {
    ssl: Ssl,
    /// Owned by `ssl` (SSL_set_bio); valid while `ssl` lives.
    rbio: *mut openssl_sys::BIO,
    wbio: *mut openssl_sys::BIO,
    hooks: Box<Hooks>,
    handshake_done: bool,
    /// The peer's close_notify was read.
    peer_closed: bool,
    /// Client with resumption: the ticket slot and its count when this endpoint started.
    wait_ticket: Option<(Arc<TicketSlot>, u64)>,
}

// SAFETY: the raw BIO pointers are owned by `ssl` (which is Send) and used only through
// `&mut self`.
unsafe impl Send for OpensslEndpoint {}

impl OpensslEndpoint {
    fn new(
        ssl: Ssl,
        side: Side,
        opts: &EndpointOptions,
        wait_ticket: Option<(Arc<TicketSlot>, u64)>,
    ) -> Result<Box<dyn Endpoint>> {
        let traced = opts.traced;
        // SAFETY: BIO_new(BIO_s_mem()) returns a fresh BIO or null; SSL_set_bio takes
        // ownership of both. The callbacks are plain functions valid for the program's life.
        unsafe {
            let rbio = openssl_sys::BIO_new(openssl_sys::BIO_s_mem());
            let wbio = openssl_sys::BIO_new(openssl_sys::BIO_s_mem());
            if rbio.is_null() || wbio.is_null() {
                return Err(Error::tls(STACK, "BIO_new failed (out of memory)"));
            }
            openssl_sys::SSL_set_bio(ssl.as_ptr(), rbio, wbio);
            ffi_extra::SSL_set_msg_callback(ssl.as_ptr(), Some(on_message));
            if traced {
                ffi_extra::SSL_set_info_callback(ssl.as_ptr(), Some(on_info));
            }
            Ok(Box::new(OpensslEndpoint {
                ssl,
                rbio,
                wbio,
                hooks: Box::new(Hooks {
                    trace: Trace::new(traced, opts.clock)
                        .with_steps(side, steps::map)
                        .with_counter(opts.counter.clone())
                        .with_memory(opts.memory)
                        .with_verification_timed(opts.verification_timed),
                    hrr: false,
                    key_log: opts.key_log.clone(),
                    peer_cert_compression: None,
                }),
                handshake_done: false,
                peer_closed: false,
                wait_ticket,
            }))
        }
    }

    fn error(&self, what: &str, ret: c_int) -> Error {
        // SAFETY: ssl is valid; SSL_get_error only reads its state.
        let code = unsafe { openssl_sys::SSL_get_error(self.ssl.as_ptr(), ret) };
        let stack = ErrorStack::get();
        let mut msg = format!("{what} failed (SSL_get_error {code})");
        let verify = self.ssl.verify_result();
        if verify != X509VerifyResult::OK {
            return Error::Verification { stack: STACK, message: format!("{} ({msg})", verify.error_string()) };
        }
        if !stack.errors().is_empty() {
            msg += &format!(": {stack}");
        }
        Error::tls(STACK, msg)
    }

    fn ticket_pending(&self) -> bool {
        self.wait_ticket.as_ref().is_some_and(|(slot, before)| slot.received.load(Ordering::Acquire) <= *before)
    }
}

fn want_more(code: c_int) -> bool {
    code == openssl_sys::SSL_ERROR_WANT_READ || code == openssl_sys::SSL_ERROR_WANT_WRITE
}

impl Endpoint for OpensslEndpoint {
    fn receive(&mut self, data: &[u8]) -> Result<()> {
        let mut rest = data;
        while !rest.is_empty() {
            let n = rest.len().min(i32::MAX as usize) as c_int;
            // SAFETY: rbio is a live memory BIO; BIO_write copies n bytes from rest.
            let w = unsafe { openssl_sys::BIO_write(self.rbio, rest.as_ptr() as *const c_void, n) };
            if w <= 0 {
                return Err(Error::tls(STACK, "BIO_write to the memory BIO failed"));
            }
            rest = &rest[w as usize..];
        }
        Ok(())
    }

    fn drive(&mut self) -> Result<bool> {
        self.call(None, Self::step)
    }

    fn take_output(&mut self, out: &mut Vec<u8>) -> Result<()> {
        // SAFETY: wbio is a live memory BIO; we read at most `pending` bytes into spare
        // capacity we reserved, then set the length to what was written.
        unsafe {
            let pending = openssl_sys::BIO_ctrl(self.wbio, ffi_extra::BIO_CTRL_PENDING, 0, ptr::null_mut());
            if pending <= 0 {
                return Ok(());
            }
            let pending = pending as usize;
            out.reserve(pending);
            let start = out.len();
            let r = openssl_sys::BIO_read(self.wbio, out.as_mut_ptr().add(start) as *mut c_void, pending as c_int);
            if r < 0 {
                return Err(Error::tls(STACK, "BIO_read from the memory BIO failed"));
            }
            out.set_len(start + r as usize);
        }
        Ok(())
    }

    fn negotiated(&self) -> Result<Negotiated> {
        let ssl = self.ssl.as_ptr();
        // SAFETY: ssl is valid; the returned strings are static or owned by the SSL object
        // and copied before it can change.
        let (group, sigalg) = unsafe {
            let g = openssl_sys::SSL_get0_group_name(ssl);
            let group = if g.is_null() { String::new() } else { CStr::from_ptr(g).to_string_lossy().into_owned() };
            let mut name: *const c_char = ptr::null();
            let sig = if self.ssl.is_server() {
                String::new()
            } else {
                openssl_sys::SSL_ctrl(
                    ssl,
                    ffi_extra::SSL_CTRL_GET_PEER_SIGNATURE_NAME,
                    0,
                    &mut name as *mut *const c_char as *mut c_void,
                );
                if name.is_null() {
                    String::new()
                } else {
                    CStr::from_ptr(name).to_string_lossy().into_owned()
                }
            };
            (group, sig)
        };
        let group = catalogue::group(&group).map(|g| g.name.to_string()).unwrap_or(group);
        let cipher = self.ssl.current_cipher().and_then(|c| c.standard_name()).unwrap_or("").to_string();
        Ok(Negotiated {
            group,
            sigalg,
            cipher,
            hrr: self.hooks.hrr,
            resumed: self.ssl.session_reused(),
            version: self.ssl.version_str().to_string(),
            cert_compression: self.hooks.peer_cert_compression.map(compression_name),
        })
    }

    fn trace(&mut self) -> &mut Trace {
        &mut self.hooks.trace
    }

    fn write_app(&mut self, data: &[u8]) -> Result<()> {
        if !self.handshake_done {
            return Err(Error::tls(STACK, "application data can be written only after the handshake"));
        }
        self.call(Some(pqtls_core::steps::APP_WRITE), |ep| {
            let mut rest = data;
            while !rest.is_empty() {
                let n = rest.len().min(i32::MAX as usize) as c_int;
                // SAFETY: ssl is valid; SSL_write reads n bytes from rest. Memory BIOs grow,
                // so the write is never partial or retried.
                let r = unsafe { openssl_sys::SSL_write(ep.ssl.as_ptr(), rest.as_ptr() as *const c_void, n) };
                if r <= 0 {
                    return Err(ep.error("writing application data", r));
                }
                rest = &rest[r as usize..];
            }
            Ok(())
        })
    }

    fn read_app(&mut self, out: &mut Vec<u8>) -> Result<usize> {
        self.call(Some(pqtls_core::steps::APP_READ), |ep| {
            let start = out.len();
            let mut buf = [0u8; 16 * 1024];
            loop {
                // SAFETY: ssl is valid; SSL_read writes at most buf.len() bytes into buf.
                let r = unsafe {
                    openssl_sys::SSL_read(ep.ssl.as_ptr(), buf.as_mut_ptr() as *mut c_void, buf.len() as c_int)
                };
                if r > 0 {
                    out.extend_from_slice(&buf[..r as usize]);
                    continue;
                }
                // SAFETY: as above.
                let code = unsafe { openssl_sys::SSL_get_error(ep.ssl.as_ptr(), r) };
                if code == openssl_sys::SSL_ERROR_ZERO_RETURN {
                    ep.peer_closed = true;
                    break;
                }
                if want_more(code) {
                    break;
                }
                return Err(ep.error("reading application data", r));
            }
            Ok(out.len() - start)
        })
    }

    fn close(&mut self) -> Result<()> {
        self.call(Some(pqtls_core::steps::CLOSE), |ep| {
            // SAFETY: ssl is valid; SSL_shutdown queues close_notify into the write BIO
            // (0: sent, the peer's not yet received; 1: both; < 0: error).
            let r = unsafe { openssl_sys::SSL_shutdown(ep.ssl.as_ptr()) };
            if r < 0 {
                return Err(ep.error("sending close_notify", r));
            }
            Ok(())
        })
    }

    fn peer_closed(&self) -> bool {
        self.peer_closed
    }
}

impl Drop for OpensslEndpoint {
    fn drop(&mut self) {
        // Mark a completed connection as cleanly closed: otherwise SSL_free treats the
        // session as bad and makes it non-resumable, and the next client could not use its
        // ticket.
        if self.handshake_done {
            // SAFETY: ssl is valid until after this; SSL_set_shutdown only sets flags.
            unsafe {
                openssl_sys::SSL_set_shutdown(
                    self.ssl.as_ptr(),
                    openssl_sys::SSL_SENT_SHUTDOWN | openssl_sys::SSL_RECEIVED_SHUTDOWN,
                )
            };
        }
    }
}

impl OpensslEndpoint {
    /// One traced call into OpenSSL: the callbacks reach this endpoint's hooks meanwhile.
    fn call<R>(&mut self, name: Option<&'static str>, f: impl FnOnce(&mut Self) -> R) -> R {
        /// Clears the pointer even if `f` unwinds, so it never outlives the call.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(ptr::null_mut()));
            }
        }
        let hooks: *mut Hooks = &mut *self.hooks;
        CURRENT.with(|c| c.set(hooks));
        let _clear = Clear;
        self.hooks.trace.push(EventKind::CallStart { name }, 0);
        let result = f(self);
        self.hooks.trace.push(EventKind::CallEnd, 0);
        result
    }
}

impl OpensslEndpoint {
    fn step(&mut self) -> Result<bool> {
        let ssl = self.ssl.as_ptr();
        if !self.handshake_done {
            // SAFETY: ssl is valid with both BIOs set.
            let r = unsafe { openssl_sys::SSL_do_handshake(ssl) };
            if r == 1 {
                self.handshake_done = true;
            } else {
                // SAFETY: as above.
                let code = unsafe { openssl_sys::SSL_get_error(ssl, r) };
                if !want_more(code) {
                    return Err(self.error("handshake", r));
                }
            }
        }
        if self.handshake_done && self.ticket_pending() {
            // Post-handshake messages (NewSessionTicket) are processed by SSL_read.
            let mut byte = 0u8;
            // SAFETY: reads at most one byte into `byte`.
            let r = unsafe { openssl_sys::SSL_read(ssl, &mut byte as *mut u8 as *mut c_void, 1) };
            if r > 0 {
                return Err(Error::tls(STACK, "unexpected application data during the handshake"));
            }
            // SAFETY: as above.
            let code = unsafe { openssl_sys::SSL_get_error(ssl, r) };
            if !want_more(code) {
                return Err(self.error("reading the session ticket", r));
            }
        }
        Ok(self.handshake_done && !self.ticket_pending())
    }
}

/// The name of a certificate's arrival: `none` (code point 0, a plain Certificate), the
/// algorithm of a CompressedCertificate, or `0x….` for one RFC 8879 does not define.
fn compression_name(cp: u16) -> String {
    match cp {
        0 => "none".into(),
        cp => CertCompression::from_code_point(cp).map_or_else(|| format!("0x{cp:04x}"), |c| c.name().to_string()),
    }
}
