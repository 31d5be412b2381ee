//! A mock TLS stack for tests (never for results): `MockBackend` implements the same
//! `Backend` → `Prepared` → `Endpoint` interface as OpenSSL and rustls, and speaks a small,
//! deterministic fake TLS 1.3 handshake — real record and handshake headers, message sizes from
//! the catalogue (key shares, signatures), trace events as a stack with message callbacks
//! emits them, and a fixed amount of busy work per message so that every step has CPU time.
//! The runner, the store and the exporters are then tested on records that went through the
//! whole pipeline (drivers, attribution, statistics) instead of fabricated ones.
//!
//! It also keeps a log of which scenario each endpoint was made for, in order, so tests can
//! see how a runner schedules scenarios. [`synthetic`] makes records of every kind for the
//! exporters' tests; [`tshark`] is Wireshark's reading of a capture, to cross-check ours.

#![forbid(unsafe_code)]

pub mod synthetic;
pub mod tshark;

use pqtls_core::backend::{Backend, Endpoint, EndpointOptions, Negotiated, PkiFiles, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::trace::{EventKind, HsType, Trace};
use pqtls_core::{Error, Result};
use std::sync::{Arc, Mutex};

/// What the mock does beyond a correct handshake.
#[derive(Clone, Debug, Default)]
pub struct Behaviour {
    /// Report this group as negotiated instead of the one asked for (a lying peer).
    pub negotiate_group: Option<String>,
    /// Fail every handshake on the server with this message.
    pub fail: Option<String>,
}

/// A mock stack posing as `stack`.
pub struct MockBackend {
    stack: Stack,
    behaviour: Behaviour,
    /// Labels of the configurations endpoints were made for, in order (client side).
    pub log: Arc<Mutex<Vec<String>>>,
}

impl MockBackend {
    pub fn new(stack: Stack) -> MockBackend {
        MockBackend { stack, behaviour: Behaviour::default(), log: Arc::new(Mutex::new(Vec::new())) }
    }

    pub fn with(mut self, behaviour: Behaviour) -> MockBackend {
        self.behaviour = behaviour;
        self
    }

    /// Certificate paths are not read by the mock: any will do.
    pub fn pki_files() -> PkiFiles {
        let c = pqtls_core::backend::ChainFiles {
            leaf_key: "mock/leaf.key".into(),
            chain: "mock/chain.pem".into(),
            root: "mock/root.pem".into(),
        };
        PkiFiles { server: c.clone(), client: Some(c), trust: Default::default() }
    }
}

impl Backend for MockBackend {
    fn stack(&self) -> Stack {
        self.stack
    }

    fn library_version(&self) -> String {
        "mock 1.0 (pqtls-testkit)".into()
    }

    fn prepare(&self, config: &HandshakeConfig, _pki: &PkiFiles) -> Result<Box<dyn Prepared>> {
        config.validate()?;
        Ok(Box::new(MockPrepared { cfg: config.clone(), behaviour: self.behaviour.clone(), log: self.log.clone() }))
    }
}

struct MockPrepared {
    cfg: HandshakeConfig,
    behaviour: Behaviour,
    log: Arc<Mutex<Vec<String>>>,
}

impl Prepared for MockPrepared {
    fn client(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        if let Ok(mut l) = self.log.lock() {
            l.push(self.cfg.label());
        }
        Ok(Box::new(MockEndpoint::new(true, &self.cfg, &self.behaviour, opts)))
    }

    fn server(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        Ok(Box::new(MockEndpoint::new(false, &self.cfg, &self.behaviour, opts)))
    }
}

/// Sizes (handshake message bodies) of the fake handshake, from the catalogue.
#[derive(Clone, Copy)]
struct Sizes {
    client_hello: usize,
    server_hello: usize,
    certificate: usize,
    certificate_verify: usize,
}

impl Sizes {
    fn of(cfg: &HandshakeConfig) -> Sizes {
        let g = cfg.expected_group();
        let certs: usize = cfg.chain.algs().iter().map(|a| 300 + a.public_key_bytes + a.signature_bytes).sum();
        Sizes {
            client_hello: 200 + g.client_share_bytes(),
            server_hello: 86 + g.server_share_bytes(),
            certificate: 9 + certs,
            certificate_verify: 4 + cfg.chain.leaf.signature_bytes,
        }
    }
}

struct MockEndpoint {
    client: bool,
    sizes: Sizes,
    negotiated: Negotiated,
    fail: Option<String>,
    trace: Trace,
    inbox: Vec<u8>,
    outbox: Vec<u8>,
    /// Messages received so far.
    received: usize,
    done: bool,
    /// Application data received (the mock does not encrypt: content type 23 in the clear).
    app_in: Vec<u8>,
    peer_closed: bool,
}

/// Deterministic busy work standing for a step's cost.
fn work(units: u32) -> u64 {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    for i in 0..units * 200 {
        x = x.rotate_left(5) ^ (x.wrapping_mul(0x100_0000_01B3).wrapping_add(i as u64));
    }
    std::hint::black_box(x)
}

impl MockEndpoint {
    fn new(client: bool, cfg: &HandshakeConfig, b: &Behaviour, opts: &EndpointOptions) -> MockEndpoint {
        let negotiated = Negotiated {
            group: b.negotiate_group.clone().unwrap_or_else(|| cfg.expected_group().name.to_string()),
            sigalg: cfg.chain.leaf.scheme.to_string(),
            cipher: cfg.cipher.name.to_string(),
            hrr: cfg.expects_hrr(),
            resumed: false,
            version: "TLSv1.3".into(),
            cert_compression: None,
        };
        MockEndpoint {
            client,
            sizes: Sizes::of(cfg),
            negotiated,
            fail: if client { None } else { b.fail.clone() },
            trace: Trace::new(opts.traced, opts.clock).with_counter(opts.counter.clone()),
            inbox: Vec::new(),
            outbox: Vec::new(),
            received: 0,
            done: false,
            app_in: Vec::new(),
            peer_closed: false,
        }
    }

    /// Writes one handshake message in its own record, with a trace event and busy work.
    fn write(&mut self, t: HsType, code: u8, body: usize, units: u32) {
        self.trace.push(EventKind::Boundary, 0);
        work(units);
        let len = 4 + body;
        self.outbox.extend_from_slice(&[22, 3, 3]);
        self.outbox.extend_from_slice(&(len as u16).to_be_bytes());
        self.outbox.push(code);
        self.outbox.extend_from_slice(&(body as u32).to_be_bytes()[1..]);
        self.outbox.extend(std::iter::repeat_n(0u8, body));
        self.trace.push(EventKind::Wrote(t), len as u32);
    }

    /// Complete handshake messages in the inbox: (type, length incl. header). Application
    /// data and alerts are taken aside.
    fn read_all(&mut self) -> Vec<(HsType, usize)> {
        let mut out = Vec::new();
        while self.inbox.len() >= 5 {
            let len = u16::from_be_bytes([self.inbox[3], self.inbox[4]]) as usize;
            if self.inbox.len() < 5 + len {
                break;
            }
            let content = self.inbox[0];
            let msg: Vec<u8> = self.inbox.drain(..5 + len).skip(5).collect();
            match content {
                23 => self.app_in.extend_from_slice(&msg),
                21 => self.peer_closed = true,
                _ => out.push((HsType::classify(&msg), len)),
            }
        }
        out
    }

    fn record(&mut self, content: u8, data: &[u8]) {
        for chunk in data.chunks(16384) {
            self.outbox.extend_from_slice(&[content, 3, 3]);
            self.outbox.extend_from_slice(&(chunk.len() as u16).to_be_bytes());
            self.outbox.extend_from_slice(chunk);
        }
    }
}

impl Endpoint for MockEndpoint {
    fn receive(&mut self, data: &[u8]) -> Result<()> {
        self.inbox.extend_from_slice(data);
        Ok(())
    }

    fn drive(&mut self) -> Result<bool> {
        self.trace.push(EventKind::CallStart { name: None }, 0);
        let r = self.step();
        self.trace.push(EventKind::CallEnd, 0);
        r
    }

    fn take_output(&mut self, out: &mut Vec<u8>) -> Result<()> {
        out.append(&mut self.outbox);
        Ok(())
    }

    fn negotiated(&self) -> Result<Negotiated> {
        Ok(self.negotiated.clone())
    }

    fn trace(&mut self) -> &mut Trace {
        &mut self.trace
    }

    fn write_app(&mut self, data: &[u8]) -> Result<()> {
        if !self.done {
            return Err(Error::tls("mock", "application data before the handshake completed"));
        }
        self.record(23, data);
        Ok(())
    }

    fn read_app(&mut self, out: &mut Vec<u8>) -> Result<usize> {
        self.read_all();
        let n = self.app_in.len();
        out.append(&mut self.app_in);
        Ok(n)
    }

    fn close(&mut self) -> Result<()> {
        self.record(21, &[1, 0]);
        Ok(())
    }

    fn peer_closed(&self) -> bool {
        self.peer_closed
    }
}

impl MockEndpoint {
    fn step(&mut self) -> Result<bool> {
        let s = self.sizes;
        for (t, len) in self.read_all() {
            self.trace.push(EventKind::Read(t), len as u32);
            work(20);
            self.received += 1;
        }
        if let Some(e) = &self.fail {
            return Err(Error::tls("mock", e.clone()));
        }
        match (self.client, self.received, self.done) {
            (true, 0, false) if self.outbox.is_empty() && self.trace.events.len() <= 1 => {
                self.write(HsType::ClientHello, 1, s.client_hello, 40);
            }
            (true, 5, false) => {
                self.write(HsType::Finished, 20, 32, 10);
                self.done = true;
            }
            (false, 1, false) => {
                self.write(HsType::ServerHello, 2, s.server_hello, 30);
                self.write(HsType::EncryptedExtensions, 8, 2, 5);
                self.write(HsType::Certificate, 11, s.certificate, 10);
                self.write(HsType::CertificateVerify, 15, s.certificate_verify, 60);
                self.write(HsType::Finished, 20, 32, 10);
            }
            (false, 2, false) => self.done = true,
            _ => {}
        }
        Ok(self.done)
    }
}
