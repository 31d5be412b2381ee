//! A peer that never answers or closes mid-handshake gives a clear error, not a hang: the
//! two-thread transports give up after their handshake timeout (10 s by default, 300 ms
//! here), and [`over_stream`] after the stream's own read timeout.

use pqtls_core::backend::{Backend, Endpoint, EndpointOptions, Negotiated, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::trace::Trace;
use pqtls_core::{Error, Result};
use pqtls_lab::transport::{self, over_stream, TransportKind, TransportOptions, Wait};
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_millis(300);

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn real() -> Box<dyn Prepared> {
    let cfg = HandshakeConfig::new(
        Stack::Openssl,
        catalogue::group("x25519").unwrap(),
        ChainSpec::parse("p256:p256").unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    OpensslBackend::new().prepare(&cfg, &pki().files_for(&cfg).unwrap()).unwrap()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Fault {
    /// Takes everything, says nothing.
    Silent,
    /// Fails on the first call, which closes its end of the connection.
    Quits,
}

/// A real client against a server that misbehaves.
struct Faulty {
    real: Box<dyn Prepared>,
    fault: Fault,
}

impl Prepared for Faulty {
    fn client(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        self.real.client(opts)
    }
    fn server(&self, opts: &EndpointOptions) -> Result<Box<dyn Endpoint>> {
        Ok(Box::new(FaultyServer { fault: self.fault, trace: Trace::new(opts.traced, opts.clock) }))
    }
}

struct FaultyServer {
    fault: Fault,
    trace: Trace,
}

impl Endpoint for FaultyServer {
    fn receive(&mut self, _data: &[u8]) -> Result<()> {
        Ok(())
    }
    fn drive(&mut self) -> Result<bool> {
        match self.fault {
            Fault::Silent => Ok(false),
            Fault::Quits => Err(Error::tls("test", "the server quits after the ClientHello")),
        }
    }
    fn take_output(&mut self, _out: &mut Vec<u8>) -> Result<()> {
        Ok(())
    }
    fn negotiated(&self) -> Result<Negotiated> {
        Err(Error::Other("nothing negotiated".into()))
    }
    fn trace(&mut self) -> &mut Trace {
        &mut self.trace
    }
    fn write_app(&mut self, _data: &[u8]) -> Result<()> {
        Err(Error::Other("no handshake, no application data".into()))
    }
    fn read_app(&mut self, _out: &mut Vec<u8>) -> Result<usize> {
        Ok(0)
    }
    fn close(&mut self) -> Result<()> {
        Ok(())
    }
    fn peer_closed(&self) -> bool {
        false
    }
}

/// The error of a run against a faulty server (that the call returns at all is the point:
/// no timing is asserted).
fn run(kind: TransportKind, wait: Wait, fault: Fault) -> String {
    let options = TransportOptions { wait, handshake_timeout: TIMEOUT, ..TransportOptions::default() };
    let prepared: Arc<dyn Prepared> = Arc::new(Faulty { real: real(), fault });
    transport::build(kind, &options).run(prepared, 3, &EndpointOptions::default(), &|| false).unwrap_err().to_string()
}

#[test]
fn a_server_that_never_answers_is_an_error_after_the_timeout() {
    for kind in [TransportKind::Socketpair, TransportKind::Tcp] {
        for wait in [Wait::Spin, Wait::Sleep] {
            let e = run(kind, wait, Fault::Silent);
            assert!(e.contains(&format!("{kind} handshake 1 of 3")), "{kind} {wait}: {e}");
            assert!(
                e.contains("gave up waiting for bytes from the server after the handshake timeout of 300ms"),
                "{kind} {wait}: {e}"
            );
            assert!(e.contains("never answers"), "{kind} {wait}: {e}");
        }
    }
    let e = run(TransportKind::Memory, Wait::Spin, Fault::Silent);
    assert!(e.contains("the handshake stalled"), "{e}");
}

#[test]
fn a_server_that_quits_mid_handshake_is_an_error_naming_both_sides() {
    for kind in [TransportKind::Socketpair, TransportKind::Tcp] {
        for wait in [Wait::Spin, Wait::Sleep] {
            let e = run(kind, wait, Fault::Quits);
            assert!(e.contains("the server closed the connection during the handshake"), "{kind} {wait}: {e}");
            assert!(e.contains("the server quits after the ClientHello"), "{kind} {wait}: {e}");
        }
    }
}

/// A peer outside pqtls's control over TCP: it reads the ClientHello, then `then` happens.
fn against_raw_peer(close: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let peer = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().unwrap();
        let mut buf = [0u8; 4096];
        let _ = s.read(&mut buf);
        if !close {
            // Keep the connection open, silent, until the client gives up.
            let _ = s.read(&mut buf);
        }
    });
    let mut tcp = TcpStream::connect(addr).unwrap();
    tcp.set_read_timeout(Some(TIMEOUT)).unwrap();
    let prepared = real();
    let mut client = prepared.client(&EndpointOptions::default()).unwrap();
    let e = over_stream(client.as_mut(), &mut tcp, true).unwrap_err().to_string();
    drop(tcp);
    peer.join().unwrap();
    e
}

#[test]
fn over_a_stream_a_silent_or_closing_peer_is_a_clear_error() {
    let e = against_raw_peer(true);
    assert!(e.contains("the server closed the connection during the handshake"), "{e}");
    let e = against_raw_peer(false);
    assert!(e.contains("waiting for bytes from the server timed out (the stream's own timeout)"), "{e}");
}
