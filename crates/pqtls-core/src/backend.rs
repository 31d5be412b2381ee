//! The interface every TLS stack implements. A driver (in-memory, two threads, sockets…)
//! moves bytes between a client and a server [`Endpoint`] and never sees the stack.

use crate::catalogue::Stack;
use crate::config::HandshakeConfig;
use crate::error::Result;
use crate::trace::Trace;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

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
}

/// A TLS stack.
pub trait Backend: Send + Sync {
    fn stack(&self) -> Stack;
    /// The library and version actually linked, e.g. `OpenSSL 3.5.5 27 Jan 2026`.
    fn library_version(&self) -> String;
    /// Builds client and server contexts once per configuration (keys and certificates
    /// loaded, groups and ciphers set); handshakes then create endpoints from them.
    fn prepare(&self, config: &HandshakeConfig, pki: &PkiFiles) -> Result<Box<dyn Prepared>>;
}

/// Contexts ready to make endpoints for one configuration.
pub trait Prepared: Send + Sync {
    /// A fresh client. With resumption, the client offers the ticket saved by the last
    /// completed handshake (see [`Prepared::prime`]).
    fn client(&self, traced: bool) -> Result<Box<dyn Endpoint>>;
    fn server(&self, traced: bool) -> Result<Box<dyn Endpoint>>;
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
}
