//! The interface every TLS stack implements. A driver (in-memory, two threads, sockets…)
//! moves bytes between a client and a server [`Endpoint`] and never sees the stack.

use crate::catalogue::Stack;
use crate::config::HandshakeConfig;
use crate::error::Result;
use crate::trace::{Clock, InstructionCounter, Trace};
use serde::{Deserialize, Serialize};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

/// Files of one certificate chain, as written by the PKI (PEM).
#[derive(Clone, Debug)]
pub struct ChainFiles {
    /// Leaf private key (PKCS#8).
    pub leaf_key: PathBuf,
    /// Leaf certificate first, then intermediates, *without* the root.
    pub chain: PathBuf,
    /// The root certificate (the trust anchor).
    pub root: PathBuf,
}

/// The certificates a configuration needs.
#[derive(Clone, Debug)]
pub struct PkiFiles {
    pub server: ChainFiles,
    pub client: Option<ChainFiles>,
    /// What the client trusts for the server's chain (default: `server.root`, as `localhost`).
    pub trust: ClientTrust,
}

/// The name pqtls' PKI issues server certificates for, which the client checks by default.
pub const PKI_SERVER_NAME: &str = "localhost";

/// Where the client's trust anchors come from.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Anchors {
    /// The root of the chain pqtls made for the configuration ([`PkiFiles::server`]'s `root`).
    #[default]
    Pki,
    /// Every certificate of a PEM bundle: `--ca FILE`, or the system's bundle (`--ca system`).
    Bundle {
        file: PathBuf,
        /// How the user named it, for records and errors (`--ca ca.pem`, `system`).
        named: String,
    },
}

/// What the client of a configuration trusts, and the name it checks in the server's
/// certificate (and sends as SNI unless it is an IP address).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClientTrust {
    pub anchors: Anchors,
    /// Verify the server's chain (false: accept it as sent, as h2load does; the server's
    /// CertificateVerify signature is still checked with the leaf's key).
    pub verify: bool,
    pub server_name: String,
}

impl Default for ClientTrust {
    fn default() -> Self {
        ClientTrust { anchors: Anchors::Pki, verify: true, server_name: PKI_SERVER_NAME.to_string() }
    }
}

impl ClientTrust {
    /// What a record says about it: `pqtls PKI root`, `--ca ca.pem`, `system (/etc/…)`,
    /// `none (verify = false)`, with the name checked.
    pub fn describe(&self) -> String {
        if !self.verify {
            return "none (verify = false: the chain is not verified)".into();
        }
        let anchors = match &self.anchors {
            Anchors::Pki => "pqtls PKI root".to_string(),
            Anchors::Bundle { named, .. } => named.clone(),
        };
        format!("{anchors}, name {}", self.server_name)
    }
}

/// What a handshake ended up with, read back from the stack after it completed.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Negotiated {
    pub group: String,
    pub sigalg: String,
    pub cipher: String,
    /// A HelloRetryRequest happened.
    pub hrr: bool,
    /// The session was resumed from a ticket.
    pub resumed: bool,
    pub version: String,
    /// How the server's certificate chain arrived (RFC 8879): `none` (a plain Certificate)
    /// or the algorithm of the CompressedCertificate; absent when no certificate was received
    /// (a resumed handshake) or the stack does not report it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cert_compression: Option<String>,
}

/// A TLS stack.
pub trait Backend: Send + Sync {
    fn stack(&self) -> Stack;
    /// The library and version actually linked, e.g. `OpenSSL 3.5.5 27 Jan 2026`.
    fn library_version(&self) -> String;
    /// Builds client and server contexts once per configuration (keys and certificates
    /// loaded, groups and ciphers set); handshakes then create endpoints from them.
    fn prepare(&self, config: &HandshakeConfig, pki: &PkiFiles) -> Result<Box<dyn Prepared>>;
    /// Whose allocations a memory-counting handshake of this stack sees, and whose it does
    /// not ([`crate::memory`]); an error when its library's allocator hooks are not installed.
    fn counted_allocations(&self) -> Result<AllocationCoverage> {
        Err(crate::Error::Unsupported(format!("the {} stack cannot count its allocations", self.stack())))
    }
}

/// Which allocations a memory measurement of a stack counts, in words for the record.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct AllocationCoverage {
    /// e.g. `Rust global allocator (rustls, pqtls); aws-lc CRYPTO_set_mem_functions`.
    pub counted: String,
    /// e.g. `liboqs (malloc directly: FrodoKEM, Falcon, SLH-DSA, composites)`.
    pub not_counted: String,
}

/// Receives the TLS secrets an endpoint derives (the `SSLKEYLOGFILE` interface): `label`
/// is the NSS key-log label (`CLIENT_HANDSHAKE_TRAFFIC_SECRET`, `SERVER_TRAFFIC_SECRET_0`,
/// …), `client_random` the connection's ClientHello.random. Called from inside calls into
/// the stack, on the endpoint's thread; implementations must be cheap or buffer.
pub trait KeyLog: Send + Sync {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]);
}

/// One logged secret.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoggedSecret {
    pub label: String,
    pub client_random: Vec<u8>,
    pub secret: Vec<u8>,
}

/// A [`KeyLog`] that keeps the secrets in memory, in order (for tests and tools).
#[derive(Debug, Default)]
pub struct MemoryKeyLog {
    secrets: Mutex<Vec<LoggedSecret>>,
}

impl MemoryKeyLog {
    pub fn new() -> MemoryKeyLog {
        MemoryKeyLog::default()
    }

    /// The secrets logged so far.
    pub fn secrets(&self) -> Vec<LoggedSecret> {
        self.secrets.lock().map(|v| v.clone()).unwrap_or_else(|p| p.into_inner().clone())
    }

    /// The secret logged under `label`, if any (the first one).
    pub fn get(&self, label: &str) -> Option<LoggedSecret> {
        self.secrets().into_iter().find(|s| s.label == label)
    }
}

impl KeyLog for MemoryKeyLog {
    fn log(&self, label: &str, client_random: &[u8], secret: &[u8]) {
        let entry =
            LoggedSecret { label: label.to_string(), client_random: client_random.to_vec(), secret: secret.to_vec() };
        match self.secrets.lock() {
            Ok(mut v) => v.push(entry),
            Err(p) => p.into_inner().push(entry),
        }
    }
}

/// How an endpoint is made: tracing, its clock policy, where its secrets go.
#[derive(Clone)]
pub struct EndpointOptions {
    /// Record every event (false: only call boundaries, to measure the tracer's overhead).
    pub traced: bool,
    /// How events inside calls are stamped.
    pub clock: Clock,
    /// Receives this endpoint's TLS secrets. `None` costs nothing on either stack.
    pub key_log: Option<Arc<dyn KeyLog>>,
    /// What every event reads under `Clock::Instructions` (each endpoint's trace holds it).
    pub counter: Option<Arc<dyn InstructionCounter>>,
    /// Read the thread's heap counters at every event ([`crate::memory`]; counting must be on).
    pub memory: bool,
    /// Time the peer's chain verification with the thread CPU clock
    /// ([`Trace::verification_cpu_ns`]; the load generator's verification CPU per connection),
    /// where the stack lets it be timed apart: s2n-tls does not (its trace's figure stays
    /// `None`, recorded as not measured).
    pub verification_timed: bool,
}

impl Default for EndpointOptions {
    fn default() -> Self {
        EndpointOptions {
            traced: true,
            clock: Clock::Split,
            key_log: None,
            counter: None,
            memory: false,
            verification_timed: false,
        }
    }
}

impl EndpointOptions {
    /// Traced or not, with the default clock and no key log.
    pub fn traced(traced: bool) -> EndpointOptions {
        EndpointOptions { traced, ..EndpointOptions::default() }
    }
}

impl std::fmt::Debug for EndpointOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EndpointOptions")
            .field("traced", &self.traced)
            .field("clock", &self.clock)
            .field("key_log", &self.key_log.is_some())
            .field("counter", &self.counter)
            .field("memory", &self.memory)
            .field("verification_timed", &self.verification_timed)
            .finish()
    }
}

/// Contexts ready to make endpoints for one configuration.
pub trait Prepared: Send + Sync {
    /// A fresh client. With resumption, the client offers the ticket saved by the last
    /// completed handshake.
    fn client(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>>;
    fn server(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>>;
    /// The stack's own type, for drivers that need more than byte-stream endpoints from it
    /// (the QUIC driver takes the rustls configurations); `None`: nothing more to offer.
    fn as_any(&self) -> Option<&dyn std::any::Any> {
        None
    }
}

/// One end of one connection, sans-IO: bytes in, bytes out.
pub trait Endpoint: Send {
    /// Bytes from the peer.
    fn receive(&mut self, data: &[u8]) -> Result<()>;
    /// Lets the stack run on what it has received (one traced call). Returns true once
    /// this side considers the handshake complete and has processed everything it was given
    /// (including post-handshake messages such as NewSessionTicket).
    fn drive(&mut self) -> Result<bool>;
    /// Moves the bytes the stack wants to send into `out` (appends).
    fn take_output(&mut self, out: &mut Vec<u8>) -> Result<()>;
    /// What was negotiated (valid after completion).
    fn negotiated(&self) -> Result<Negotiated>;
    /// This side's events since the endpoint was created.
    fn trace(&mut self) -> &mut Trace;
    /// Called by the driver once both sides are complete: a client keeps its ticket for the
    /// next resumed handshake here.
    fn finish(&mut self) -> Result<()> {
        Ok(())
    }
    /// Queues application data (plaintext); its records come out of `take_output`. After
    /// the handshake only; traced as the step `app_write`.
    fn write_app(&mut self, data: &[u8]) -> Result<()>;
    /// Processes what was received so far and appends the application data in it to `out`;
    /// returns the number of bytes appended. Traced as `app_read`.
    fn read_app(&mut self, out: &mut Vec<u8>) -> Result<usize>;
    /// Queues a close_notify alert (it comes out of `take_output`). Traced as `close`.
    fn close(&mut self) -> Result<()>;
    /// The peer's close_notify has been received and processed (by `read_app`).
    fn peer_closed(&self) -> bool;
}
