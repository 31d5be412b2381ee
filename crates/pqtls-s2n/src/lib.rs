//! The s2n-tls backend (AWS; s2n-tls 0.3 over AWS-LC, whose prefixed symbols link beside
//! OpenSSL).
//!
//! Endpoints are s2n connections whose send and receive callbacks move bytes through memory
//! buffers (sans-IO: the driver moves them). Tracing (docs/attribution.md, "s2n-tls mapping"):
//! - every call into s2n-tls is a named call: `negotiate` (`s2n_negotiate`), `recv_ticket`
//!   (`s2n_recv` reading a NewSessionTicket after the handshake), `app_write`, `app_read`,
//!   `close`;
//! - inside calls, s2n-tls' per-message timing checkpoint (`s2n_config_set_timing_checkpoint_cb`,
//!   fired when the handler of a handshake message — building it, or parsing and acting on
//!   it — has finished) puts a `Message(m)` marker in the trace; so do the client's session
//!   ticket callback (a ticket processed) and the server's send callback after the handshake (a
//!   ticket written). [`steps::map`] gives each interval the step of the marker that ends it.
//!
//! Message sizes come from the records this side wrote, decrypted with this side's traffic
//! secrets, which s2n-tls hands over through its key-log callback (`s2n_config_set_key_log_cb`;
//! its secret callback fires only on QUIC connections); the same callback feeds the key log,
//! and marks the key schedule in the trace (the handshake secrets after the ServerHello, the
//! application secrets after the server's Finished), so that the shared secret and the key
//! derivation that s2n-tls runs right after a message's handler count for that message. The
//! callback formats a key-log line (hex) for each secret, inside s2n-tls' calls: it is installed
//! only on the configurations of traced endpoints and endpoints with a key log (untraced ones,
//! which measure the tracer's overhead, use a second pair of configurations without it).
//!
//! Groups, signature schemes and ciphers come from a named security policy ([`policy`]); the
//! client's ClientHello is checked against the configuration on the wire, and what was
//! negotiated is read back after the handshake.

pub mod policy;
pub mod steps;

use pqtls_core::backend::{
    Anchors, Backend, ClientTrust, Endpoint, EndpointOptions, KeyLog, Negotiated, PkiFiles, Prepared,
};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::HandshakeConfig;
use pqtls_core::trace::{EventKind, HsType, Side, Trace};
use pqtls_core::{Error, Result};
use pqtls_tls13::wire::{self as tls_wire, Records, HANDSHAKE};
use pqtls_tls13::{Suite, WireScan};
use s2n_tls::callbacks::{SessionTicket, SessionTicketCallback, VerifyHostNameCallback};
use s2n_tls::config::{Builder, Config};
use s2n_tls::connection::Connection;
use s2n_tls::enums::ClientAuthType;
use s2n_tls::error::Fallible;
use s2n_tls::events::{EventSubscriber, HandshakeEvent, TimingCheckpoint};
use s2n_tls::security::Policy;
use s2n_tls_sys as sys;
use std::cell::Cell;
use std::os::raw::{c_int, c_void};
use std::ptr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

const STACK: &str = "s2n";

/// The s2n-tls backend.
#[derive(Debug, Default)]
pub struct S2nBackend {
    /// AWS-LC's allocator hooks are installed (see [`S2nBackend::with_aws_lc_counted`]).
    aws_lc_counted: bool,
}

impl S2nBackend {
    pub fn new() -> S2nBackend {
        S2nBackend::default()
    }

    /// A backend that can count its allocations: `installed` says whether AWS-LC's allocator
    /// hooks (`CRYPTO_set_mem_functions`) were installed before its first allocation — once per
    /// process, for the one aws-lc-sys that rustls and s2n-tls share
    /// (`pqtls_rustls::memory::count_allocations`, first thing in `main`).
    pub fn with_aws_lc_counted(installed: bool) -> S2nBackend {
        S2nBackend { aws_lc_counted: installed }
    }
}

fn s2n(context: &str) -> impl FnOnce(s2n_tls::error::Error) -> Error + '_ {
    move |e| Error::tls(STACK, format!("{context}: {e}"))
}

/// The s2n-tls and aws-lc-sys versions linked, from the workspace's Cargo.lock (build.rs).
pub fn library_version() -> String {
    format!("s2n-tls {} (aws-lc-sys {})", env!("PQTLS_S2N_TLS_VERSION"), env!("PQTLS_AWS_LC_SYS_VERSION"))
}

impl Backend for S2nBackend {
    fn stack(&self) -> Stack {
        Stack::S2n
    }

    fn library_version(&self) -> String {
        library_version()
    }

    fn counted_allocations(&self) -> Result<pqtls_core::backend::AllocationCoverage> {
        if !self.aws_lc_counted {
            return Err(Error::Unsupported(
                "AWS-LC's allocations are not being counted on s2n-tls: its allocator hooks were not installed before \
                 its first allocation (pqtls_rustls::memory::count_allocations, first thing in main)"
                    .into(),
            ));
        }
        Ok(pqtls_core::backend::AllocationCoverage {
            // The s2n-tls crate's default `init` feature sets s2n's memory callbacks
            // (`s2n_mem_set_callbacks`) to the Rust global allocator: pqtls' counting one.
            counted: "s2n-tls' own allocations (s2n_mem callbacks, which the s2n-tls crate routes to the Rust global \
                      allocator: pqtls' counting allocator, requested bytes); AWS-LC OPENSSL_malloc/realloc/free \
                      (CRYPTO_set_mem_functions hooks of the aws-lc-sys rustls and s2n-tls share, requested bytes)"
                .into(),
            not_counted: "glibc's own internal allocations".into(),
        })
    }

    fn prepare(&self, cfg: &HandshakeConfig, pki: &PkiFiles) -> Result<Box<dyn Prepared>> {
        if cfg.stack != Stack::S2n {
            return Err(Error::Invalid(format!("configuration for {} given to the s2n-tls backend", cfg.stack)));
        }
        cfg.validate()?;
        if !cfg.codepoints.is_empty() {
            return Err(Error::Unsupported(
                "s2n-tls negotiates its groups and signatures at their IANA code points only; moved code points \
                 (--codepoints) work on: rustls"
                    .into(),
            ));
        }
        if cfg.verify_parent {
            return Err(Error::Unsupported(
                "s2n-tls does not verify a trust anchor's own signature (verify_parent); stacks that do: openssl, rustls"
                    .into(),
            ));
        }
        let server_policy = policy::server(cfg)?;
        // A configuration whose client no policy expresses still makes servers (for clients of
        // other stacks); its clients are refused with the reason.
        let client_policy = policy::client(cfg);
        let tickets = Arc::new(TicketSlot::default());
        let ticket_key = if cfg.resumption { Some(ticket_key()?) } else { None };
        let configs = |logging| -> Result<Configs> {
            Ok(Configs {
                server: server_config(cfg, pki, server_policy, ticket_key.as_ref(), logging)?,
                client: match &client_policy {
                    Ok(p) => Ok(client_config(cfg, pki, p, &tickets, logging)?),
                    Err(e) => Err(e.to_string()),
                },
            })
        };
        Ok(Box::new(S2nPrepared {
            plain: configs(false)?,
            logging: configs(true)?,
            tickets,
            resumption: cfg.resumption,
            server_name: pki.trust.server_name.clone(),
            suite: Suite::from_code_point(cfg.cipher.code_point),
            expect: Offer {
                groups: cfg.groups.iter().map(|g| g.code_point).collect(),
                shares: cfg.shares().iter().map(|g| g.code_point).collect(),
                cipher: cfg.cipher.code_point,
                policy: client_policy.as_ref().map(|p| p.name).unwrap_or_default(),
            },
        }))
    }
}

fn read(path: &std::path::Path) -> Result<Vec<u8>> {
    std::fs::read(path).map_err(|e| Error::io(format!("reading {}", path.display()), e))
}

/// A PEM chain (leaf first) with the root appended when it is sent too.
fn chain_pem(files: &pqtls_core::backend::ChainFiles, send_root: bool) -> Result<Vec<u8>> {
    let mut pem = read(&files.chain)?;
    if send_root {
        if !pem.ends_with(b"\n") {
            pem.push(b'\n');
        }
        pem.extend(read(&files.root)?);
    }
    Ok(pem)
}

/// What every configuration shares: the policy, the timing checkpoints, no system trust; with
/// `logging`, the key-log callback.
fn base(policy: &policy::Policy, logging: bool) -> Result<Builder> {
    let mut b = Config::builder();
    let p = Policy::from_version(policy.named()).map_err(s2n("naming the security policy"))?;
    b.set_security_policy(&p).map_err(|e| {
        Error::tls(STACK, format!("the linked s2n-tls has no security policy {} ({e})", policy.named()))
    })?;
    b.with_system_certs(false).map_err(s2n("leaving out the system's trust store"))?;
    b.set_event_subscriber(Checkpoints).map_err(s2n("subscribing to the timing checkpoints"))?;
    if logging {
        // SAFETY: the callback reaches the endpoint through CURRENT; its context is null and
        // never read.
        unsafe { b.set_key_log_callback(Some(on_key_log), ptr::null_mut()) }
            .map_err(s2n("installing the key-log callback"))?;
    }
    Ok(b)
}

/// A random session-ticket key, shared by the server's two configurations (a ticket issued by
/// one resumes on the other).
fn ticket_key() -> Result<[u8; 32]> {
    let mut key = [0u8; 32];
    getrandom(&mut key)?;
    Ok(key)
}

fn server_config(
    cfg: &HandshakeConfig,
    pki: &PkiFiles,
    policy: &policy::Policy,
    ticket_key: Option<&[u8; 32]>,
    logging: bool,
) -> Result<Config> {
    let mut b = base(policy, logging)?;
    b.load_pem(&chain_pem(&pki.server, cfg.send_root)?, &read(&pki.server.leaf_key)?)
        .map_err(s2n("loading the server chain and key"))?;
    if let Some(key) = ticket_key {
        b.enable_session_tickets(true).map_err(s2n("enabling session tickets"))?;
        // Valid from a minute ago: s2n-tls encrypts only with a key already in use.
        let since = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
        b.add_session_ticket_key(b"pqtls-ticket-key", key, since).map_err(s2n("adding the session-ticket key"))?;
    } else {
        b.enable_session_tickets(false).map_err(s2n("disabling session tickets"))?;
    }
    if cfg.client_chain.is_some() {
        let client = pki.client.as_ref().ok_or_else(|| Error::Invalid("mutual TLS needs a client chain".into()))?;
        b.set_client_auth_type(ClientAuthType::Required).map_err(s2n("requiring a client certificate"))?;
        b.trust_pem(&read(&client.root)?).map_err(s2n("trusting the client root"))?;
        // The client's chain is verified up to the root; its name is not checked (as on the
        // other stacks: a client certificate names no host).
        b.set_verify_host_callback(AnyClientName).map_err(s2n("accepting any client name"))?;
    }
    finish(b, policy, "building the server configuration")
}

fn client_config(
    cfg: &HandshakeConfig,
    pki: &PkiFiles,
    policy: &policy::Policy,
    tickets: &Arc<TicketSlot>,
    logging: bool,
) -> Result<Config> {
    let mut b = base(policy, logging)?;
    client_trust(&mut b, &pki.trust, &pki.server.root)?;
    if let (Some(_), Some(client)) = (&cfg.client_chain, &pki.client) {
        b.set_client_auth_type(ClientAuthType::Required).map_err(s2n("sending a client certificate"))?;
        b.load_pem(&chain_pem(client, cfg.send_root)?, &read(&client.leaf_key)?)
            .map_err(s2n("loading the client chain and key"))?;
    }
    if cfg.resumption {
        b.set_session_ticket_callback(TicketSink(tickets.clone())).map_err(s2n("receiving session tickets"))?;
    } else {
        b.enable_session_tickets(false).map_err(s2n("disabling session tickets"))?;
    }
    finish(b, policy, "building the client configuration")
}

/// The configuration `b` builds, with `policy` set on it when it is a composed one.
fn finish(b: Builder, policy: &policy::Policy, what: &str) -> Result<Config> {
    let config = b.build().map_err(s2n(what))?;
    if policy.composed.is_some() {
        set_composed_policy(&config, policy.name)?;
    }
    Ok(config)
}

extern "C" {
    /// csrc/policy.c: sets the composed policy "pqtls-pq-only-mldsa" (validated by s2n-tls).
    fn pqtls_s2n_config_set_pq_only_mldsa(config: *mut sys::s2n_config) -> c_int;
}

/// Sets the composed policy `name` (csrc/policy.c) on `config`, before any connection uses it.
fn set_composed_policy(config: &Config, name: &str) -> Result<()> {
    // s2n-tls' `Config` is a newtype over the `s2n_config` pointer; equal sizes put that one
    // field at offset 0 (its `unstable_as_ptr` exists only for builds against an external
    // libs2n).
    const _: () = assert!(std::mem::size_of::<Config>() == std::mem::size_of::<ptr::NonNull<sys::s2n_config>>());
    // SAFETY: reads the pointer `config` holds (see above), without taking a reference count;
    // `config` outlives its use here.
    let raw = unsafe { std::mem::transmute_copy::<Config, ptr::NonNull<sys::s2n_config>>(config) };
    let set = match name {
        "pqtls-pq-only-mldsa" => pqtls_s2n_config_set_pq_only_mldsa,
        other => return Err(Error::Invalid(format!("no composed s2n-tls policy {other}"))),
    };
    // SAFETY: `raw` is a live s2n_config that no connection uses yet; the policy is a static
    // constant of csrc/policy.c.
    let status = unsafe { set(raw.as_ptr()) };
    status.into_result().map(|_| ()).map_err(s2n("setting the composed security policy"))
}

/// A server's check of the client certificate's name: any (s2n-tls' default compares it to the
/// server name).
struct AnyClientName;

impl VerifyHostNameCallback for AnyClientName {
    fn verify_host_name(&self, _host_name: &str) -> bool {
        true
    }
}

/// The client's trust anchors; with `verify = false`, the chain accepted as sent.
fn client_trust(b: &mut Builder, t: &ClientTrust, pki_root: &std::path::Path) -> Result<()> {
    if !t.verify {
        // SAFETY: disabling verification is what `verify = false` asks for (h2load's
        // behaviour); the CertificateVerify signature is still checked with the leaf's key.
        unsafe { b.disable_x509_verification() }.map_err(s2n("disabling chain verification"))?;
        return Ok(());
    }
    match &t.anchors {
        Anchors::Pki => {
            b.trust_pem(&read(pki_root)?).map_err(s2n("trusting the PKI root"))?;
        }
        Anchors::Bundle { file, named } => {
            let pem = std::fs::read(file).map_err(|e| Error::io(format!("reading {named} ({})", file.display()), e))?;
            if !pem.windows(27).any(|w| w == b"-----BEGIN CERTIFICATE-----") {
                return Err(Error::Invalid(format!(
                    "{named} ({}) holds no certificate; give a PEM bundle of CA certificates (-----BEGIN CERTIFICATE-----)",
                    file.display()
                )));
            }
            b.trust_pem(&pem).map_err(s2n("trusting the CA bundle"))?;
        }
    }
    Ok(())
}

fn getrandom(buf: &mut [u8]) -> Result<()> {
    use std::io::Read;
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(buf))
        .map_err(|e| Error::io("reading /dev/urandom for the session-ticket key", e))
}

/// The newest session ticket the client received, and how many were received so far.
#[derive(Default)]
struct TicketSlot {
    ticket: Mutex<Option<Vec<u8>>>,
    received: AtomicU64,
}

/// The client's session-ticket callback: keeps the ticket and marks the trace.
struct TicketSink(Arc<TicketSlot>);

impl SessionTicketCallback for TicketSink {
    fn on_session_ticket(&self, _conn: &mut Connection, ticket: &SessionTicket) {
        let Ok(len) = ticket.len() else { return };
        let mut data = vec![0u8; len];
        if ticket.data(&mut data).is_err() {
            return;
        }
        if let Ok(mut slot) = self.0.ticket.lock() {
            *slot = Some(data);
        }
        self.0.received.fetch_add(1, Ordering::Release);
        with_current(|h| h.mark(HsType::NewSessionTicket));
    }
}

/// What the client must offer on the wire (code points), from the configuration.
#[derive(Clone, Debug)]
struct Offer {
    groups: Vec<u16>,
    shares: Vec<u16>,
    cipher: u16,
    policy: &'static str,
}

/// Client and server configurations of one configuration (the client's: why no policy
/// expresses it, when none does).
struct Configs {
    client: std::result::Result<Config, String>,
    server: Config,
}

struct S2nPrepared {
    /// For untraced endpoints without a key log, and for the others.
    plain: Configs,
    logging: Configs,
    tickets: Arc<TicketSlot>,
    resumption: bool,
    server_name: String,
    suite: Option<Suite>,
    expect: Offer,
}

impl S2nPrepared {
    fn configs(&self, opts: &EndpointOptions) -> &Configs {
        if opts.traced || opts.key_log.is_some() {
            &self.logging
        } else {
            &self.plain
        }
    }
}

impl Prepared for S2nPrepared {
    fn client(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        let mut conn = Connection::new_client();
        let config = self.configs(opts).client.clone().map_err(Error::Unsupported)?;
        conn.set_config(config).map_err(s2n("setting the client configuration"))?;
        if self.server_name.parse::<std::net::IpAddr>().is_err() {
            conn.set_server_name(&self.server_name).map_err(s2n("setting the server name"))?;
        }
        let before = self.tickets.received.load(Ordering::Acquire);
        if self.resumption {
            let ticket = self.tickets.ticket.lock().ok().and_then(|t| t.clone());
            if let Some(t) = ticket {
                conn.set_session_ticket(&t).map_err(s2n("offering the session ticket"))?;
            }
        }
        S2nEndpoint::new(
            conn,
            opts,
            Side::Client,
            self.suite,
            self.resumption.then(|| (self.tickets.clone(), before)),
            Some(self.expect.clone()),
        )
    }

    fn server(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        let mut conn = Connection::new_server();
        conn.set_config(self.configs(opts).server.clone()).map_err(s2n("setting the server configuration"))?;
        S2nEndpoint::new(conn, opts, Side::Server, self.suite, None, None)
    }
}

/// One endpoint's state that s2n-tls' callbacks reach (through [`CURRENT`], set only while the
/// endpoint is inside a call into s2n-tls).
struct Hooks {
    trace: Trace,
    side: Side,
    /// Bytes from the peer not yet read by s2n-tls, from `inbox_read` on.
    inbox: Vec<u8>,
    inbox_read: usize,
    /// Bytes s2n-tls sent, not yet taken by the driver.
    outbox: Vec<u8>,
    /// This side's traffic secrets (handshake, then application), for the message sizes.
    secrets: Vec<Vec<u8>>,
    key_log: Option<Arc<dyn KeyLog>>,
    /// The handshake is complete (after a call that completed it).
    handshake_done: bool,
    /// Server: the client's Finished has been processed, so what it sends now are tickets.
    peer_finished: bool,
}

impl Hooks {
    /// A marker in a traced endpoint's trace.
    fn mark(&mut self, m: HsType) {
        if self.trace.detailed {
            self.trace.push(EventKind::Message(m), 0);
        }
    }
}

/// The marker of a key-schedule step (secrets derived): its interval goes with the message
/// before it ([`steps::map`]). Not a TLS message type (the private-use 0xFE of none).
pub const KEY_SCHEDULE: HsType = HsType::Other(steps::KEY_SCHEDULE_CODE);

/// The body of the first ClientHello in `stream` (plaintext handshake records).
fn client_hello_body(stream: &[u8]) -> Option<Vec<u8>> {
    let mut payload = Vec::new();
    for r in Records::new(stream) {
        if r.content_type() == HANDSHAKE {
            payload.extend_from_slice(r.payload());
        }
    }
    let m = tls_wire::messages(&payload).next()?;
    (m.kind() == HsType::ClientHello).then(|| m.body().to_vec())
}

thread_local! {
    static CURRENT: Cell<*mut Hooks> = const { Cell::new(ptr::null_mut()) };
}

/// Gives `f` the hooks of the endpoint inside a call on this thread, if any.
fn with_current(f: impl FnOnce(&mut Hooks)) {
    CURRENT.with(|c| {
        let p = c.get();
        if !p.is_null() {
            // SAFETY: CURRENT points to the Hooks of the endpoint whose call is on this
            // thread's stack (set by `S2nEndpoint::call`, cleared before it returns); s2n-tls
            // invokes its callbacks synchronously inside that call, and the endpoint does not
            // touch its hooks while s2n-tls runs.
            f(unsafe { &mut *p })
        }
    })
}

/// s2n-tls' receive callback: hands over what the driver received; EAGAIN when there is none.
unsafe extern "C" fn on_recv(_ctx: *mut c_void, buf: *mut u8, len: u32) -> c_int {
    let mut n: c_int = -1;
    with_current(|h| {
        let available = &h.inbox[h.inbox_read..];
        let k = available.len().min(len as usize);
        if k > 0 {
            // SAFETY: s2n-tls gives a buffer of `len` bytes; k <= len.
            unsafe { ptr::copy_nonoverlapping(available.as_ptr(), buf, k) };
            h.inbox_read += k;
            n = k as c_int;
        }
    });
    if n < 0 {
        errno::set_errno(errno::Errno(libc::EAGAIN));
    }
    n
}

/// s2n-tls' send callback: keeps the bytes for the driver; what a server sends after the
/// client's Finished is a NewSessionTicket (marked once written).
unsafe extern "C" fn on_send(_ctx: *mut c_void, buf: *const u8, len: u32) -> c_int {
    let mut n: c_int = -1;
    with_current(|h| {
        // SAFETY: s2n-tls gives `len` readable bytes.
        let data = unsafe { std::slice::from_raw_parts(buf, len as usize) };
        h.outbox.extend_from_slice(data);
        if h.side == Side::Server && h.peer_finished {
            h.mark(HsType::NewSessionTicket);
        }
        n = len as c_int;
    });
    if n < 0 {
        errno::set_errno(errno::Errno(libc::EIO));
    }
    n
}

/// s2n-tls' per-message timing checkpoints: the handler of a handshake message has finished.
struct Checkpoints;

impl EventSubscriber for Checkpoints {
    fn on_handshake_event(&self, _conn: &Connection, _event: &HandshakeEvent) {}

    fn on_timing_checkpoint(&self, _conn: &Connection, checkpoint: &TimingCheckpoint) {
        let name = checkpoint.name().as_bytes();
        let client_finished = name == b"CLIENT_FINISHED";
        if let Some(m) = steps::message(name) {
            with_current(|h| {
                h.mark(m);
                h.peer_finished |= client_finished && h.side == Side::Server;
            });
        }
    }
}

/// s2n-tls' key-log callback (`LABEL <client random hex> <secret hex>`): this side's traffic
/// secrets (message sizes), the endpoint's key log, and a key-schedule marker.
unsafe extern "C" fn on_key_log(
    _ctx: *mut c_void,
    _conn: *mut sys::s2n_connection,
    line: *mut u8,
    len: usize,
) -> c_int {
    if line.is_null() {
        return 0;
    }
    // SAFETY: s2n-tls gives `len` readable bytes.
    let line = unsafe { std::slice::from_raw_parts(line, len) };
    let Some((label, random, secret)) = parse_key_log_line(line) else { return 0 };
    with_current(|h| {
        let ours = match h.side {
            Side::Client => label == "CLIENT_HANDSHAKE_TRAFFIC_SECRET" || label == "CLIENT_TRAFFIC_SECRET_0",
            Side::Server => label == "SERVER_HANDSHAKE_TRAFFIC_SECRET" || label == "SERVER_TRAFFIC_SECRET_0",
        };
        if let Some(log) = &h.key_log {
            log.log(label, &random, &secret);
        }
        if ours && h.trace.detailed {
            h.secrets.push(secret);
            h.mark(KEY_SCHEDULE);
        }
    });
    0
}

/// `LABEL <hex> <hex>` → (label, client random, secret).
fn parse_key_log_line(line: &[u8]) -> Option<(&str, Vec<u8>, Vec<u8>)> {
    let line = std::str::from_utf8(line).ok()?;
    let mut parts = line.split_ascii_whitespace();
    let (label, random, secret) = (parts.next()?, parts.next()?, parts.next()?);
    Some((label, from_hex(random)?, from_hex(secret)?))
}

fn from_hex(s: &str) -> Option<Vec<u8>> {
    if s.len() % 2 == 1 {
        return None;
    }
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok()).collect()
}

struct S2nEndpoint {
    conn: Connection,
    hooks: Box<Hooks>,
    scan: WireScan,
    /// Messages of `scan` already reported as `Wrote` events.
    reported: usize,
    /// Client with resumption: the ticket slot and its count when this endpoint started.
    wait_ticket: Option<(Arc<TicketSlot>, u64)>,
    /// Client: what its ClientHello must offer (checked once, on the wire).
    expect: Option<Offer>,
    app_started: bool,
    peer_closed: bool,
}

impl S2nEndpoint {
    fn new(
        mut conn: Connection,
        opts: &EndpointOptions,
        side: Side,
        suite: Option<Suite>,
        wait_ticket: Option<(Arc<TicketSlot>, u64)>,
        expect: Option<Offer>,
    ) -> Result<Box<dyn Endpoint>> {
        // `opts.verification_timed` cannot be honoured: s2n-tls validates the chain inside its
        // Certificate handler with no callback around the validation, so the trace's
        // `verification_cpu_ns` stays `None` — recorded as not measured (a load's
        // `client_verify_cpu_ns_mean` is absent), never as a number.
        conn.set_receive_callback(Some(on_recv)).map_err(s2n("setting the receive callback"))?;
        conn.set_send_callback(Some(on_send)).map_err(s2n("setting the send callback"))?;
        let hooks = Box::new(Hooks {
            trace: Trace::new(opts.traced, opts.clock)
                .with_steps(side, steps::map)
                .with_counter(opts.counter.clone())
                .with_memory(opts.memory),
            side,
            inbox: Vec::new(),
            inbox_read: 0,
            outbox: Vec::new(),
            secrets: Vec::new(),
            key_log: opts.key_log.clone(),
            handshake_done: false,
            peer_finished: false,
        });
        Ok(Box::new(S2nEndpoint {
            conn,
            hooks,
            scan: WireScan::new(suite),
            reported: 0,
            wait_ticket,
            expect,
            app_started: false,
            peer_closed: false,
        }))
    }

    /// One traced call into s2n-tls: the callbacks reach this endpoint's hooks meanwhile.
    fn call<R>(&mut self, name: &'static str, f: impl FnOnce(&mut Connection) -> R) -> R {
        /// Clears the pointer even if `f` unwinds, so it never outlives the call.
        struct Clear;
        impl Drop for Clear {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(ptr::null_mut()));
            }
        }
        self.hooks.trace.push(EventKind::CallStart { name: Some(name) }, 0);
        let hooks: *mut Hooks = &mut *self.hooks;
        CURRENT.with(|c| c.set(hooks));
        let result = {
            let _clear = Clear;
            f(&mut self.conn)
        };
        self.hooks.trace.push(EventKind::CallEnd, 0);
        result
    }

    fn ticket_pending(&self) -> bool {
        self.wait_ticket.as_ref().is_some_and(|(slot, before)| slot.received.load(Ordering::Acquire) <= *before)
    }

    fn error(&self, what: &str, e: s2n_tls::error::Error) -> Error {
        let msg = format!("{what}: {e}");
        if e.name().contains("CERT") && (e.name().contains("UNTRUSTED") || e.name().contains("INVALID")) {
            return Error::Verification { stack: STACK, message: msg };
        }
        Error::tls(STACK, msg)
    }

    /// Drops what s2n-tls has read from the inbox.
    fn compact_inbox(&mut self) {
        let h = &mut self.hooks;
        h.inbox.drain(..h.inbox_read);
        h.inbox_read = 0;
    }

    /// Reports the messages this side wrote (outside calls: the bookkeeping is not charged to
    /// the stack). Traced endpoints only.
    fn report_writes(&mut self, new: &[u8]) {
        if !self.hooks.trace.detailed || self.app_started {
            return;
        }
        self.scan.secrets.append(&mut self.hooks.secrets);
        self.scan.feed(new);
        self.hooks.trace.unmeasured_records = self.scan.unreadable;
        while self.reported < self.scan.msgs.len() {
            let (t, n) = self.scan.msgs[self.reported];
            self.hooks.trace.push(EventKind::Wrote(t), n);
            self.reported += 1;
        }
    }
}

/// Checks a client's ClientHello against what the configuration asks: exactly its key shares,
/// all its groups, its cipher suite (the policy table in [`policy`] kept true on the wire).
fn check_client_hello(body: &[u8], expect: &Offer) -> Result<()> {
    let exts = tls_wire::hello_extensions(body, true)
        .ok_or_else(|| Error::tls(STACK, "the ClientHello s2n-tls sent could not be parsed"))?;
    let groups: Vec<u16> = exts
        .iter()
        .find(|(t, _)| *t == 10)
        .map(|(_, d)| {
            d.get(2..).unwrap_or_default().chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect()
        })
        .unwrap_or_default();
    let shares: Vec<u16> = tls_wire::client_key_shares(body).unwrap_or_default().into_iter().map(|(g, _)| g).collect();
    let suites = client_hello_suites(body).unwrap_or_default();
    let name = |cp: &u16| {
        catalogue::GROUPS.iter().find(|g| g.code_point == *cp).map_or(format!("0x{cp:04x}"), |g| g.name.to_string())
    };
    let list = |v: &[u16]| v.iter().map(name).collect::<Vec<_>>().join(",");
    let same_shares = shares.len() == expect.shares.len() && shares.iter().all(|s| expect.shares.contains(s));
    if !same_shares || !expect.groups.iter().all(|g| groups.contains(g)) || !suites.contains(&expect.cipher) {
        return Err(Error::Mismatch {
            what: "s2n-tls ClientHello",
            wanted: format!(
                "key shares {}, groups including {}, cipher 0x{:04x}",
                list(&expect.shares),
                list(&expect.groups),
                expect.cipher
            ),
            got: format!(
                "key shares {}, groups {} (policy {}; crates/pqtls-s2n/src/policy.rs is out of date with the linked s2n-tls)",
                list(&shares),
                list(&groups),
                expect.policy
            ),
            context: String::new(),
        });
    }
    Ok(())
}

/// The cipher suites of a ClientHello body.
fn client_hello_suites(body: &[u8]) -> Option<Vec<u16>> {
    let sid_len = *body.get(34)? as usize;
    let at = 35 + sid_len;
    let len = u16::from_be_bytes([*body.get(at)?, *body.get(at + 1)?]) as usize;
    let suites = body.get(at + 2..at + 2 + len)?;
    Some(suites.chunks_exact(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect())
}

impl Endpoint for S2nEndpoint {
    fn receive(&mut self, data: &[u8]) -> Result<()> {
        self.hooks.inbox.extend_from_slice(data);
        Ok(())
    }

    fn drive(&mut self) -> Result<bool> {
        if !self.hooks.handshake_done {
            let r = self.call("negotiate", |conn| match conn.poll_negotiate() {
                Poll::Ready(Ok(_)) => Ok(true),
                Poll::Pending => Ok(false),
                Poll::Ready(Err(e)) => Err(e),
            });
            self.compact_inbox();
            let done = r.map_err(|e| self.error("handshake", e))?;
            self.hooks.handshake_done = done;
        }
        if self.hooks.handshake_done && self.ticket_pending() && self.hooks.inbox.len() > self.hooks.inbox_read {
            // Post-handshake messages (NewSessionTicket) are processed by s2n_recv.
            let mut byte = [0u8; 1];
            let r = self.call("recv_ticket", |conn| conn.poll_recv(&mut byte));
            self.compact_inbox();
            match r {
                Poll::Ready(Ok(0)) | Poll::Pending => {}
                Poll::Ready(Ok(_)) => {
                    return Err(Error::tls(STACK, "unexpected application data during the handshake"))
                }
                Poll::Ready(Err(e)) => return Err(self.error("reading the session ticket", e)),
            }
        }
        Ok(self.hooks.handshake_done && !self.ticket_pending())
    }

    fn take_output(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let new = std::mem::take(&mut self.hooks.outbox);
        if let Some(expect) = self.expect.take() {
            if let Some(body) = client_hello_body(&new) {
                check_client_hello(&body, &expect)?;
            } else {
                self.expect = Some(expect);
            }
        }
        self.report_writes(&new);
        out.extend_from_slice(&new);
        Ok(())
    }

    fn negotiated(&self) -> Result<Negotiated> {
        let group = self
            .conn
            .selected_key_exchange_group()
            .map(|g| catalogue::group(g).map(|g| g.name.to_string()).unwrap_or_else(|_| g.to_string()))
            .unwrap_or_default();
        let sigalg = if self.hooks.side == Side::Client {
            self.conn.signature_scheme().map(steps::iana_scheme).unwrap_or_default()
        } else {
            String::new()
        };
        let cipher = self
            .conn
            .cipher_suite()
            .map(|c| catalogue::cipher(c).map(|c| c.name.to_string()).unwrap_or_else(|_| c.to_string()))
            .unwrap_or_default();
        let hrr = self.conn.handshake_type().map(|t| t.contains("HELLO_RETRY_REQUEST")).unwrap_or(false);
        let version = match self.conn.actual_protocol_version() {
            Ok(s2n_tls::enums::Version::TLS13) => "TLSv1.3".to_string(),
            Ok(v) => format!("{v:?}"),
            Err(_) => String::new(),
        };
        // s2n-tls has no certificate compression (the factor is refused for it).
        Ok(Negotiated { group, sigalg, cipher, hrr, resumed: self.conn.resumed(), version, cert_compression: None })
    }

    fn trace(&mut self) -> &mut Trace {
        &mut self.hooks.trace
    }

    fn write_app(&mut self, data: &[u8]) -> Result<()> {
        if !self.hooks.handshake_done {
            return Err(Error::tls(STACK, "application data can be written only after the handshake"));
        }
        self.app_started = true;
        let r = self.call(pqtls_core::steps::APP_WRITE, |conn| {
            let mut rest = data;
            while !rest.is_empty() {
                match conn.poll_send(rest) {
                    Poll::Ready(Ok(n)) => rest = &rest[n..],
                    Poll::Ready(Err(e)) => return Err(e),
                    Poll::Pending => continue,
                }
            }
            Ok(())
        });
        r.map_err(|e| self.error("writing application data", e))
    }

    fn read_app(&mut self, out: &mut Vec<u8>) -> Result<usize> {
        let start = out.len();
        let mut closed = false;
        let r = self.call(pqtls_core::steps::APP_READ, |conn| {
            let mut buf = [0u8; 16 * 1024];
            loop {
                match conn.poll_recv(&mut buf) {
                    Poll::Ready(Ok(0)) => {
                        closed = true;
                        return Ok(());
                    }
                    Poll::Ready(Ok(n)) => out.extend_from_slice(&buf[..n]),
                    Poll::Pending => return Ok(()),
                    Poll::Ready(Err(e)) => return Err(e),
                }
            }
        });
        self.compact_inbox();
        r.map_err(|e| self.error("reading application data", e))?;
        self.peer_closed |= closed;
        Ok(out.len() - start)
    }

    fn close(&mut self) -> Result<()> {
        self.app_started = true;
        let r = self.call(pqtls_core::steps::CLOSE, |conn| match conn.poll_shutdown_send() {
            Poll::Ready(Err(e)) => Err(e),
            _ => Ok(()),
        });
        r.map_err(|e| self.error("sending close_notify", e))
    }

    fn peer_closed(&self) -> bool {
        self.peer_closed
    }
}
