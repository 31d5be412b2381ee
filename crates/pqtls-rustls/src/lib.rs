//! The rustls 0.23 backend (crypto from aws-lc-rs).
//!
//! Endpoints are sans-IO `rustls::Connection`s. rustls has no message callback, so tracing
//! works at two levels (see docs/stacks.md):
//! - every call into rustls is a named call: `write_client_hello` (building the client,
//!   which builds the ClientHello and its key shares), `read_tls`, `process_new_packets`,
//!   `write_tls`;
//! - inside calls, the crypto provider is wrapped so that each cryptographic operation is a
//!   timed step: `kx_keygen`, `kx_encapsulate`, `kx_decapsulate`, `sign`,
//!   `verify_cert_chain` (path validation incl. each parent signature), `verify_signature`
//!   (CertificateVerify).
//!
//! - a `Message(m)` marker each time a handshake message enters the transcript hash (the
//!   suite's hash is wrapped), from which [`steps::map`] maps every interval to the
//!   canonical step vocabulary ([`pqtls_core::steps`]).
//!
//! Message sizes come from the records this side wrote ([`wire`]).
//!
//! Key log: the configurations (built once per `Prepared`) carry one `KeyLog` adapter that
//! forwards each secret to the key log in the options of the endpoint whose call is in
//! progress (`provider::SecretLog`), so each endpoint can have its own sink.

mod compress;
mod hooks;
mod kx;
pub mod memory;
mod provider;
pub mod steps;
mod wire;

use hooks::{call, Hooks};
use kx::Component;
use pqtls_core::backend::{
    Anchors, Backend, ChainFiles, ClientTrust, Endpoint, EndpointOptions, Negotiated, PkiFiles, Prepared,
};
use pqtls_core::catalogue::{self, CodepointOverrides, GroupKind, Stack};
use pqtls_core::config::HandshakeConfig;
use pqtls_core::trace::{EventKind, Trace};
use pqtls_core::{Error, Result};
pub use provider::VerifyTally;
use provider::{SecretLog, TicketStore, TimedKey, TimedTicketer, TimedVerifier};
use rustls::client::{ResolvesClientCert, Resumption, WebPkiServerVerifier};
use rustls::crypto::{aws_lc_rs, CryptoProvider, SupportedKxGroup};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::server::{ClientHello, NoServerSessionStorage, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{
    ClientConfig, ClientConnection, Connection, HandshakeKind, RootCertStore, ServerConfig, ServerConnection,
    SignatureScheme,
};
use std::io::{Read, Write};
use std::sync::atomic::Ordering;
use std::sync::Arc;

const STACK: &str = "rustls";

/// The rustls backend.
#[derive(Debug, Default)]
pub struct RustlsBackend;

impl RustlsBackend {
    pub fn new() -> RustlsBackend {
        RustlsBackend
    }
}

/// The certificate key implementations this backend's libraries bring to the PKI
/// (`Pki::with_factory`): Falcon-512 (liboqs) and composite ML-DSA-44+Ed25519.
pub fn key_factories() -> Vec<Arc<dyn pqtls_pki::KeyFactory>> {
    vec![Arc::new(pqtls_oqs::OqsKeys)]
}

fn tls(context: &str) -> impl FnOnce(rustls::Error) -> Error + '_ {
    move |e| Error::tls(STACK, format!("{context}: {e}"))
}

/// The client's groups in rustls order (rustls sends a share for the first one only, plus
/// the classical half of a hybrid when that half's group is also listed), and how the
/// hybrid's classical half is sent.
fn client_groups(cfg: &HandshakeConfig) -> Result<Vec<&'static dyn SupportedKxGroup>> {
    let shares = cfg.shares();
    let component = match shares.as_slice() {
        [_] => Component::Hidden,
        [hybrid, classical]
            if matches!(hybrid.kind, GroupKind::Hybrid { .. })
                && hybrid.components().is_some_and(|(a, b)| a == *classical || b == *classical) =>
        {
            if cfg.share_x25519 {
                Component::Shared
            } else {
                Component::Independent
            }
        }
        _ => {
            return Err(Error::Unsupported(format!(
                "rustls sends one key share, or a hybrid share plus its classical half (e.g. --key-shares X25519MLKEM768,x25519); key shares {} cannot be sent by rustls, use --stack openssl",
                shares.iter().map(|g| g.name).collect::<Vec<_>>().join(",")
            )))
        }
    };
    let mut order: Vec<&'static catalogue::Group> = vec![shares[0]];
    order.extend(cfg.groups.iter().copied().filter(|g| *g != shares[0]));
    order
        .into_iter()
        .enumerate()
        .map(|(i, g)| {
            let inner = kx::implementation(g, &cfg.codepoints)?;
            let component = if i == 0 { component } else { Component::Hidden };
            Ok(kx::timed(inner, component))
        })
        .collect()
}

fn provider(cfg: &HandshakeConfig, groups: Vec<&'static dyn SupportedKxGroup>) -> Result<Arc<CryptoProvider>> {
    let suite = provider::transcript_suite(cfg.cipher.code_point).ok_or_else(|| {
        Error::Unsupported(format!(
            "cipher suite {} is not available on rustls; stacks that have it: openssl",
            cfg.cipher.name
        ))
    })?;
    Ok(Arc::new(CryptoProvider {
        cipher_suites: vec![suite],
        kx_groups: groups,
        // aws-lc-rs' algorithms plus Falcon-512, SLH-DSA and composite ML-DSA-44+Ed25519.
        signature_verification_algorithms: pqtls_oqs::webpki_algorithms(&cfg.codepoints),
        ..aws_lc_rs::default_provider()
    }))
}

fn read_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>> {
    CertificateDer::pem_file_iter(path)
        .and_then(|it| it.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::Other(format!("reading certificates from {}: {e}", path.display())))
}

fn certified_key(
    files: &ChainFiles,
    leaf: &catalogue::SigAlg,
    send_root: bool,
    provider: &CryptoProvider,
    scheme: u16,
) -> Result<Arc<CertifiedKey>> {
    let mut certs = read_certs(&files.chain)?;
    if send_root {
        certs.extend(read_certs(&files.root)?);
    }
    let key = PrivateKeyDer::from_pem_file(&files.leaf_key)
        .map_err(|e| Error::Other(format!("reading the private key {}: {e}", files.leaf_key.display())))?;
    let key = if pqtls_oqs::sig::tls_algorithms().contains(&leaf.name) {
        pqtls_oqs::signing_key(leaf.name, key.secret_der(), scheme)?
    } else {
        provider.key_provider.load_private_key(key).map_err(tls("loading the leaf private key"))?
    };
    Ok(Arc::new(CertifiedKey::new(certs, Arc::new(TimedKey { key, scheme: SignatureScheme::from(scheme) }))))
}

fn roots(root: &std::path::Path) -> Result<(RootCertStore, CertificateDer<'static>)> {
    let der = read_certs(root)?
        .into_iter()
        .next()
        .ok_or_else(|| Error::Invalid(format!("{} holds no certificate", root.display())))?;
    let mut store = RootCertStore::empty();
    store.add(der.clone()).map_err(tls("adding the root"))?;
    Ok((store, der))
}

#[derive(Debug)]
struct FixedCert(Arc<CertifiedKey>);

impl ResolvesServerCert for FixedCert {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }
}

impl ResolvesClientCert for FixedCert {
    fn resolve(&self, _hints: &[&[u8]], _schemes: &[rustls::SignatureScheme]) -> Option<Arc<CertifiedKey>> {
        Some(self.0.clone())
    }

    fn has_certs(&self) -> bool {
        true
    }
}

impl Backend for RustlsBackend {
    fn stack(&self) -> Stack {
        Stack::Rustls
    }

    fn library_version(&self) -> String {
        library_version()
    }

    fn counted_allocations(&self) -> Result<pqtls_core::backend::AllocationCoverage> {
        memory::coverage()
    }

    fn prepare(&self, cfg: &HandshakeConfig, pki: &PkiFiles) -> Result<Box<dyn Prepared>> {
        let verifications = Arc::new(VerifyTally::default());
        let (client, server, tickets) = build_configs(cfg, pki, verifications.clone())?;
        Ok(Box::new(RustlsPrepared {
            client: Arc::new(client),
            server: Arc::new(server),
            tickets,
            verifications,
            resumption: cfg.resumption,
            suite: wire::Suite::from_code_point(cfg.cipher.code_point),
            codepoints: cfg.codepoints.clone(),
            server_name: ServerName::try_from(pki.trust.server_name.clone()).map_err(|e| {
                Error::Invalid(format!(
                    "server name {:?}: {e}; give a DNS name or an IP address",
                    pki.trust.server_name
                ))
            })?,
        }))
    }
}

/// The client's verifier of the server's chain: webpki's, over the PKI's root or a bundle's
/// anchors, timed; with `verify = false`, the chain accepted as sent.
fn server_verifier(
    cfg: &HandshakeConfig,
    trust: &ClientTrust,
    pki_root: &std::path::Path,
    cp: &Arc<CryptoProvider>,
) -> Result<TimedVerifier> {
    let (store, verify_root) = match &trust.anchors {
        Anchors::Pki => {
            let (store, root_der) = roots(pki_root)?;
            (store, cfg.verify_parent.then_some(root_der))
        }
        Anchors::Bundle { file, named } => {
            let mut store = RootCertStore::empty();
            let (added, _) = store.add_parsable_certificates(read_certs(file)?);
            if added == 0 {
                return Err(Error::Invalid(format!(
                    "{named} ({}) holds no usable CA certificate; give a PEM bundle of CA certificates \
                     (-----BEGIN CERTIFICATE-----)",
                    file.display()
                )));
            }
            (store, None)
        }
    };
    let inner = WebPkiServerVerifier::builder_with_provider(Arc::new(store), cp.clone())
        .build()
        .map_err(|e| Error::tls(STACK, format!("server verifier: {e}")))?;
    // Our chain is signed with the configured leaf's scheme; a server whose chain we did not
    // make is offered every scheme the provider verifies, as a browser would.
    let schemes = match trust.anchors {
        Anchors::Pki => vec![SignatureScheme::from(cfg.codepoints.sig_code_point(cfg.chain.leaf))],
        Anchors::Bundle { .. } => rustls::client::danger::ServerCertVerifier::supported_verify_schemes(inner.as_ref()),
    };
    Ok(TimedVerifier {
        inner,
        algs: cp.signature_verification_algorithms,
        verify_root,
        schemes,
        verify: trust.verify,
        tally: None,
    })
}

fn build_configs(
    cfg: &HandshakeConfig,
    pki: &PkiFiles,
    tally: Arc<VerifyTally>,
) -> Result<(ClientConfig, ServerConfig, Arc<TicketStore>)> {
    if cfg.stack != Stack::Rustls {
        return Err(Error::Invalid(format!("configuration for {} given to the rustls backend", cfg.stack)));
    }
    cfg.validate()?;
    let v13: &[&rustls::SupportedProtocolVersion] = &[&rustls::version::TLS13];

    // Server: supports exactly the group that must be negotiated.
    let server_group = kx::implementation(cfg.expected_group(), &cfg.codepoints)?;
    let server_group = kx::timed(server_group, Component::Hidden);
    let sp = provider(cfg, vec![server_group])?;
    let server_key =
        certified_key(&pki.server, cfg.chain.leaf, cfg.send_root, &sp, cfg.codepoints.sig_code_point(cfg.chain.leaf))?;
    let builder = ServerConfig::builder_with_provider(sp.clone())
        .with_protocol_versions(v13)
        .map_err(tls("server configuration"))?;
    let builder = match (&cfg.client_chain, &pki.client) {
        (Some(_), Some(client)) => {
            let (store, _) = roots(&client.root)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(store), sp.clone())
                .build()
                .map_err(|e| Error::tls(STACK, format!("client verifier: {e}")))?;
            builder.with_client_cert_verifier(verifier)
        }
        (Some(_), None) => return Err(Error::Invalid("mutual TLS needs a client chain".into())),
        _ => builder.with_no_client_auth(),
    };
    let mut server = builder.with_cert_resolver(Arc::new(FixedCert(server_key)));
    // Certificate compression: only the requested algorithm, both ways (none: none, though
    // rustls' features would otherwise offer brotli and zlib by default).
    server.cert_compressors = compress::compressors(cfg.cert_compression);
    server.cert_decompressors = compress::decompressors(cfg.cert_compression);
    if cfg.resumption {
        server.ticketer = Arc::new(TimedTicketer(aws_lc_rs::Ticketer::new().map_err(tls("creating the ticketer"))?));
        server.send_tls13_tickets = 1;
    } else {
        server.send_tls13_tickets = 0;
        server.session_storage = Arc::new(NoServerSessionStorage {});
    }
    server.key_log = Arc::new(SecretLog);

    // Client: all the groups, the shares first.
    let cp = provider(cfg, client_groups(cfg)?)?;
    let verifier = TimedVerifier { tally: Some(tally), ..server_verifier(cfg, &pki.trust, &pki.server.root, &cp)? };
    let builder = ClientConfig::builder_with_provider(cp.clone())
        .with_protocol_versions(v13)
        .map_err(tls("client configuration"))?
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(verifier));
    let mut client = match (&cfg.client_chain, &pki.client) {
        (Some(chain), Some(files)) => {
            let key = certified_key(files, chain.leaf, cfg.send_root, &cp, cfg.codepoints.sig_code_point(chain.leaf))?;
            builder.with_client_cert_resolver(Arc::new(FixedCert(key)))
        }
        _ => builder.with_no_client_auth(),
    };
    client.cert_compressors = compress::compressors(cfg.cert_compression);
    client.cert_decompressors = compress::decompressors(cfg.cert_compression);
    let tickets = Arc::new(TicketStore::default());
    client.key_log = Arc::new(SecretLog);
    client.resumption = if cfg.resumption { Resumption::store(tickets.clone()) } else { Resumption::disabled() };
    Ok((client, server, tickets))
}

struct RustlsPrepared {
    client: Arc<ClientConfig>,
    server: Arc<ServerConfig>,
    tickets: Arc<TicketStore>,
    /// The client's chain verifications made outside traced calls (QUIC's).
    verifications: Arc<VerifyTally>,
    resumption: bool,
    suite: Option<wire::Suite>,
    codepoints: CodepointOverrides,
    /// The name the client checks in the server's certificate (and sends as SNI).
    server_name: ServerName<'static>,
}

impl Prepared for RustlsPrepared {
    fn client(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        let mut hooks = Box::new(Hooks::new(opts, true));
        let name = self.server_name.clone();
        let before = self.tickets.received.load(Ordering::Acquire);
        // Building the connection builds the ClientHello, key shares included.
        let conn = call(&mut hooks, "write_client_hello", || ClientConnection::new(self.client.clone(), name))
            .map_err(tls("creating a client"))?;
        Ok(Box::new(RustlsEndpoint::new(
            Connection::Client(conn),
            hooks,
            self.suite,
            self.resumption.then(|| (self.tickets.clone(), before)),
            self.codepoints.clone(),
        )))
    }

    fn server(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        let mut hooks = Box::new(Hooks::new(opts, false));
        let conn = call(&mut hooks, "new_server", || ServerConnection::new(self.server.clone()))
            .map_err(tls("creating a server"))?;
        Ok(Box::new(RustlsEndpoint::new(Connection::Server(conn), hooks, self.suite, None, self.codepoints.clone())))
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

struct RustlsEndpoint {
    conn: Connection,
    hooks: Box<Hooks>,
    inbox: Vec<u8>,
    scan: wire::WireScan,
    /// Messages of `scan` already reported as `Wrote` events.
    reported: usize,
    /// Client with resumption: the ticket store and its count when this endpoint started.
    wait_ticket: Option<(Arc<TicketStore>, u64)>,
    /// Application data or close_notify was written: records are no longer scanned for
    /// handshake messages.
    app_started: bool,
    /// The peer's close_notify was processed.
    peer_closed: bool,
    /// The run's code points, to name what was negotiated.
    codepoints: CodepointOverrides,
}

impl RustlsEndpoint {
    fn new(
        conn: Connection,
        hooks: Box<Hooks>,
        suite: Option<wire::Suite>,
        wait_ticket: Option<(Arc<TicketStore>, u64)>,
        codepoints: CodepointOverrides,
    ) -> Self {
        let mut conn = conn;
        // The driver drains what is written; application data is never refused for space.
        conn.set_buffer_limit(None);
        RustlsEndpoint {
            conn,
            hooks,
            inbox: Vec::new(),
            scan: wire::WireScan::new(suite),
            reported: 0,
            wait_ticket,
            app_started: false,
            peer_closed: false,
            codepoints,
        }
    }

    fn is_client(&self) -> bool {
        matches!(self.conn, Connection::Client(_))
    }

    fn ticket_pending(&self) -> bool {
        self.wait_ticket.as_ref().is_some_and(|(t, before)| t.received.load(Ordering::Acquire) <= *before)
    }

    /// Reports the messages this side wrote since the last call (after the call that
    /// produced them: the bookkeeping is not charged to the stack). Traced endpoints only.
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
        let reported = self.hooks.trace.compressed.len();
        self.hooks.trace.compressed.extend(self.scan.compressed.iter().skip(reported).copied());
    }
}

impl Endpoint for RustlsEndpoint {
    fn receive(&mut self, data: &[u8]) -> Result<()> {
        self.inbox.extend_from_slice(data);
        Ok(())
    }

    fn drive(&mut self) -> Result<bool> {
        let conn = &mut self.conn;
        let inbox = &mut self.inbox;
        let mut offset = 0;
        loop {
            if offset < inbox.len() {
                let mut rest = &inbox[offset..];
                let n = call(&mut self.hooks, "read_tls", || conn.read_tls(&mut rest))
                    .map_err(|e| Error::io("handing received bytes to rustls", e))?;
                offset += n;
            }
            call(&mut self.hooks, "process_new_packets", || conn.process_new_packets()).map_err(|e| match e {
                rustls::Error::InvalidCertificate(_) if self.hooks.is_client => {
                    Error::Verification { stack: STACK, message: e.to_string() }
                }
                e => Error::tls(STACK, format!("handshake failed: {e}")),
            })?;
            if offset >= inbox.len() {
                break;
            }
        }
        inbox.clear();
        Ok(!self.conn.is_handshaking() && !self.ticket_pending())
    }

    fn take_output(&mut self, out: &mut Vec<u8>) -> Result<()> {
        let start = out.len();
        let conn = &mut self.conn;
        call(&mut self.hooks, "write_tls", || -> std::io::Result<()> {
            while conn.wants_write() {
                conn.write_tls(out)?;
            }
            Ok(())
        })
        .map_err(|e| Error::io("taking bytes from rustls", e))?;
        let new = out[start..].to_vec();
        self.report_writes(&new);
        Ok(())
    }

    fn negotiated(&self) -> Result<Negotiated> {
        let kind = self.conn.handshake_kind();
        let version = match self.conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "TLSv1.3".to_string(),
            Some(v) => format!("{v:?}"),
            None => String::new(),
        };
        let resumed = kind == Some(HandshakeKind::Resumed);
        let received_certificate = !resumed && self.conn.peer_certificates().is_some_and(|c| !c.is_empty());
        Ok(Negotiated {
            cert_compression: cert_arrival(self.hooks.peer_cert_compression, received_certificate),
            ..negotiated_names(
                &self.codepoints,
                self.conn.negotiated_key_exchange_group().map(|g| u16::from(g.name())),
                self.hooks.peer_scheme,
                self.conn.negotiated_cipher_suite().map(|s| u16::from(s.suite())),
                kind == Some(HandshakeKind::FullWithHelloRetryRequest)
                    || (self.is_client() && self.hooks.kx_starts > 1),
                resumed,
                version,
            )
        })
    }

    fn trace(&mut self) -> &mut Trace {
        &mut self.hooks.trace
    }

    fn write_app(&mut self, data: &[u8]) -> Result<()> {
        if self.conn.is_handshaking() {
            return Err(Error::tls(STACK, "application data can be written only after the handshake"));
        }
        self.app_started = true;
        let conn = &mut self.conn;
        call(&mut self.hooks, pqtls_core::steps::APP_WRITE, || conn.writer().write_all(data))
            .map_err(|e| Error::io("writing application data to rustls", e))
    }

    fn read_app(&mut self, out: &mut Vec<u8>) -> Result<usize> {
        let start = out.len();
        let conn = &mut self.conn;
        let inbox = &mut self.inbox;
        let mut closed = false;
        call(&mut self.hooks, pqtls_core::steps::APP_READ, || -> Result<()> {
            let mut offset = 0;
            let mut buf = [0u8; 16 * 1024];
            loop {
                let mut n = 0;
                if offset < inbox.len() {
                    let mut rest = &inbox[offset..];
                    n = conn.read_tls(&mut rest).map_err(|e| Error::io("handing received bytes to rustls", e))?;
                    offset += n;
                }
                let state = conn
                    .process_new_packets()
                    .map_err(|e| Error::tls(STACK, format!("reading application data: {e}")))?;
                closed |= state.peer_has_closed();
                // Drain the plaintext so that rustls accepts more records.
                loop {
                    match conn.reader().read(&mut buf) {
                        Ok(0) => break,
                        Ok(k) => out.extend_from_slice(&buf[..k]),
                        Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                        Err(e) => return Err(Error::io("reading application data from rustls", e)),
                    }
                }
                if offset >= inbox.len() || n == 0 {
                    return Ok(());
                }
            }
        })?;
        self.inbox.clear();
        self.peer_closed |= closed;
        Ok(out.len() - start)
    }

    fn close(&mut self) -> Result<()> {
        self.app_started = true;
        let conn = &mut self.conn;
        call(&mut self.hooks, pqtls_core::steps::CLOSE, || conn.send_close_notify());
        Ok(())
    }

    fn peer_closed(&self) -> bool {
        self.peer_closed
    }
}

/// What was negotiated, named from its code points (the run's code points first, then the
/// catalogue's): the one place both the TLS endpoint and the QUIC driver name it.
pub fn negotiated_names(
    codepoints: &CodepointOverrides,
    group: Option<u16>,
    peer_scheme: Option<u16>,
    cipher: Option<u16>,
    hrr: bool,
    resumed: bool,
    version: String,
) -> Negotiated {
    let group = group
        .map(|cp| codepoints.group_by_code_point(cp).map(|g| g.name.to_string()).unwrap_or(format!("0x{cp:04x}")))
        .unwrap_or_default();
    let sigalg = peer_scheme
        .map(|cp| codepoints.sig_by_code_point(cp).map(|s| s.scheme.to_string()).unwrap_or(format!("0x{cp:04x}")))
        .unwrap_or_default();
    let cipher = cipher
        .map(|cp| {
            catalogue::CIPHERS.iter().find(|c| c.code_point == cp).map(|c| c.name.to_string()).unwrap_or_default()
        })
        .unwrap_or_default();
    Negotiated { group, sigalg, cipher, hrr, resumed, version, cert_compression: None }
}

/// How the peer's chain arrived (RFC 8879): the algorithm a decompressor ran with
/// (`peer_compression`, [`compress`]), else `none` when a certificate was received in a full
/// handshake, else not known (`None`).
fn cert_arrival(peer_compression: Option<u16>, received_certificate: bool) -> Option<String> {
    match peer_compression {
        Some(cp) => Some(
            catalogue::CertCompression::from_code_point(cp)
                .map_or_else(|| format!("0x{cp:04x}"), |c| c.name().to_string()),
        ),
        None => received_certificate.then(|| "none".to_string()),
    }
}

/// The configurations a prepared rustls context holds, for drivers that carry rustls over
/// something other than TLS records (QUIC: `pqtls-quic`). The same provider (timed crypto,
/// transcript markers), groups, chain, mTLS and resumption as the TLS endpoints.
pub struct Configs {
    pub client: Arc<ClientConfig>,
    pub server: Arc<ServerConfig>,
    pub codepoints: CodepointOverrides,
    pub resumption: bool,
    /// The client's chain verifications made outside the backend's traced calls (a driver
    /// such as quinn's), their CPU and number: what the load generator reports over QUIC.
    pub verifications: Arc<VerifyTally>,
}

/// The rustls configurations of `prepared`, or `None` when it was not prepared by this backend.
pub fn configs(prepared: &dyn Prepared) -> Option<Configs> {
    let p = prepared.as_any()?.downcast_ref::<RustlsPrepared>()?;
    Some(Configs {
        client: p.client.clone(),
        server: p.server.clone(),
        codepoints: p.codepoints.clone(),
        resumption: p.resumption,
        verifications: p.verifications.clone(),
    })
}

/// One endpoint's tracing for a driver that calls rustls through another library (QUIC): each
/// call named with the TLS endpoint's call names (`write_client_hello`, `process_new_packets`,
/// `write_tls`) so that [`steps::map`] maps it the same way, and the provider's crypto
/// operations and transcript markers inside it recorded, as for a TLS endpoint of this backend.
pub struct Tracer {
    hooks: Box<Hooks>,
}

impl Tracer {
    pub fn new(opts: &EndpointOptions, is_client: bool) -> Tracer {
        Tracer { hooks: Box::new(Hooks::new(opts, is_client)) }
    }

    /// Runs `f` as one traced call named `name`.
    pub fn call<R>(&mut self, name: &'static str, f: impl FnOnce() -> R) -> R {
        call(&mut self.hooks, name, f)
    }

    pub fn trace(&mut self) -> &mut Trace {
        &mut self.hooks.trace
    }

    /// Records that this side wrote handshake message `m` of `bytes` (header included); call
    /// it outside calls, as the TLS endpoint does after `write_tls`.
    pub fn wrote(&mut self, m: pqtls_core::trace::HsType, bytes: u32) {
        if self.hooks.trace.detailed {
            self.hooks.trace.push(EventKind::Wrote(m), bytes);
        }
    }

    /// The signature scheme of the peer's CertificateVerify (TLS code point).
    pub fn peer_scheme(&self) -> Option<u16> {
        self.hooks.peer_scheme
    }

    /// Records the header of a CompressedCertificate this side wrote (the one just reported
    /// with [`Tracer::wrote`]; `None` for any other message).
    pub fn wrote_compressed(&mut self, header: Option<pqtls_core::trace::CompressedHeader>) {
        if self.hooks.trace.detailed {
            self.hooks.trace.compressed.extend(header);
        }
    }

    /// Key-exchange starts on this side (2 on a client after a HelloRetryRequest).
    pub fn kx_starts(&self) -> u32 {
        self.hooks.kx_starts
    }

    /// How the peer's chain arrived (RFC 8879), as [`Negotiated::cert_compression`] names it;
    /// `received_certificate`: the peer sent a certificate (a full handshake).
    pub fn cert_compression(&self, received_certificate: bool) -> Option<String> {
        cert_arrival(self.hooks.peer_cert_compression, received_certificate)
    }
}

/// The rustls, aws-lc-rs and aws-lc-sys versions linked, from the workspace's Cargo.lock
/// (read by build.rs).
pub fn library_version() -> String {
    format!(
        "rustls {} (aws-lc-rs {}, aws-lc-sys {})",
        env!("PQTLS_RUSTLS_VERSION"),
        env!("PQTLS_AWS_LC_RS_VERSION"),
        env!("PQTLS_AWS_LC_SYS_VERSION")
    )
}
