//! `pqtls serve` on loopback: both stacks serve and are fetched from by both stacks, negotiate
//! exactly what was asked, answer `GET /<size>` with that many bytes; keep-alive means one
//! handshake per connection, a new connection per request one handshake per request; bad input
//! gets clear errors. Bounded: every socket has a timeout.

use pqtls_core::backend::{Backend, Endpoint, EndpointOptions, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_net::{ServeOptions, Server};
use pqtls_pki::Pki;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-serve"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn config(stack: Stack, group: &str, chain: &str) -> HandshakeConfig {
    let c = HandshakeConfig::new(
        stack,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap(),
    );
    c.validate().unwrap();
    c
}

fn prepare(cfg: &HandshakeConfig) -> Arc<dyn Prepared> {
    let backend: Box<dyn Backend> = match cfg.stack {
        Stack::Openssl => Box::new(pqtls_openssl::OpensslBackend::new()),
        Stack::Rustls => Box::new(pqtls_rustls::RustlsBackend::new()),
    };
    Arc::from(backend.prepare(cfg, &pki().files_for(cfg).unwrap()).unwrap())
}

fn serve(tls: Option<Arc<dyn Prepared>>, threads: usize, keep_alive: bool) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads,
        tls,
        endpoint: EndpointOptions::traced(false),
        keep_alive,
    })
    .unwrap()
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// One connection that sends `paths` as GET requests, one after another, and returns each
/// response's status and body. With TLS, the client endpoint is returned too (what it negotiated).
struct Client {
    stream: TcpStream,
    tls: Option<Box<dyn Endpoint>>,
    plain: Vec<u8>,
}

impl Client {
    fn new(addr: SocketAddr, tls: Option<&Arc<dyn Prepared>>) -> Client {
        let mut stream = connect(addr);
        let tls = tls.map(|p| {
            let mut ep = p.client(&EndpointOptions::traced(false)).unwrap();
            pqtls_lab::drive::over_stream(ep.as_mut(), &mut stream, true).unwrap();
            ep
        });
        Client { stream, tls, plain: Vec::new() }
    }

    fn send(&mut self, data: &[u8]) {
        match self.tls.as_mut() {
            Some(ep) => {
                ep.write_app(data).unwrap();
                let mut out = Vec::new();
                ep.take_output(&mut out).unwrap();
                self.stream.write_all(&out).unwrap();
            }
            None => self.stream.write_all(data).unwrap(),
        }
    }

    /// Reads more plaintext; false at the end of the stream.
    fn more(&mut self) -> bool {
        let mut buf = [0u8; 65536];
        let n = self.stream.read(&mut buf).unwrap();
        if n == 0 {
            return false;
        }
        match self.tls.as_mut() {
            Some(ep) => {
                ep.receive(&buf[..n]).unwrap();
                ep.read_app(&mut self.plain).unwrap();
            }
            None => self.plain.extend_from_slice(&buf[..n]),
        }
        true
    }

    fn response(&mut self) -> (u16, Vec<u8>) {
        loop {
            if let Some(end) = self.plain.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.plain[..end]).to_string();
                let status: u16 = head.split(' ').nth(1).unwrap().parse().unwrap();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .map(|v| v.trim().parse().unwrap())
                    .unwrap();
                while self.plain.len() < end + 4 + len {
                    assert!(self.more(), "the server closed mid-response");
                }
                let body = self.plain[end + 4..end + 4 + len].to_vec();
                self.plain.drain(..end + 4 + len);
                return (status, body);
            }
            assert!(self.more(), "the server closed before answering ({} bytes of plaintext)", self.plain.len());
        }
    }

    fn get(&mut self, path: &str, keep: bool) -> (u16, Vec<u8>) {
        let conn = if keep { "keep-alive" } else { "close" };
        self.send(format!("GET {path} HTTP/1.1\r\nHost: pqtls\r\nConnection: {conn}\r\n\r\n").as_bytes());
        self.response()
    }
}

#[test]
fn both_stacks_serve_both_stacks_exactly_what_was_asked() {
    for server_stack in Stack::ALL {
        for client_stack in Stack::ALL {
            for (group, chain) in [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")] {
                let scfg = config(server_stack, group, chain);
                let ccfg = config(client_stack, group, chain);
                let server = serve(Some(prepare(&scfg)), 2, true);
                let cprep = prepare(&ccfg);
                let mut c = Client::new(server.addr(), Some(&cprep));
                let neg = c.tls.as_ref().unwrap().negotiated().unwrap();
                ccfg.check(&neg, false).unwrap_or_else(|e| panic!("{server_stack} ← {client_stack}: {e}"));
                let (status, body) = c.get("/1KiB", true);
                assert_eq!((status, body.len()), (200, 1024));
                let (status, body) = c.get("/64KiB", false);
                assert_eq!((status, body.len()), (200, 65536), "{server_stack} ← {client_stack} {group}");
                drop(c);
                let stats = server.stop().unwrap();
                assert_eq!((stats.connections, stats.handshakes, stats.requests), (1, 1, 2), "{stats:?}");
                assert!(stats.handshake_cpu_ns_total > 0);
                assert!(stats.errors.is_empty(), "{stats:?}");
            }
        }
    }
}

#[test]
fn keep_alive_is_one_handshake_per_connection_and_new_connections_one_per_request() {
    let cfg = config(Stack::Rustls, "X25519MLKEM768", "p256:p256");
    let prep = prepare(&cfg);
    let server = serve(Some(prep.clone()), 2, true);
    let mut c = Client::new(server.addr(), Some(&prep));
    for _ in 0..5 {
        assert_eq!(c.get("/0", true), (200, Vec::new()));
    }
    drop(c);
    for _ in 0..5 {
        let mut c = Client::new(server.addr(), Some(&prep));
        assert_eq!(c.get("/100", false).1.len(), 100);
    }
    let s = server.stop().unwrap();
    assert_eq!((s.connections, s.handshakes, s.requests), (6, 6, 10), "{s:?}");
}

#[test]
fn a_server_without_keep_alive_closes_after_each_response() {
    let server = serve(None, 1, false);
    let mut c = Client::new(server.addr(), None);
    let (status, body) = c.get("/10", true);
    assert_eq!((status, body.len()), (200, 10));
    assert!(!c.more(), "the connection should be closed after the response");
    server.stop().unwrap();
}

#[test]
fn plain_http_stats_and_bad_requests() {
    let server = serve(None, 1, true);
    let mut c = Client::new(server.addr(), None);
    assert_eq!(c.get("/64KiB", true).1.len(), 65536);
    let (status, body) = c.get("/stats", true);
    assert_eq!(status, 200);
    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(v["requests"], 2);
    let (status, body) = c.get("/lots", true);
    assert_eq!(status, 404);
    assert!(String::from_utf8_lossy(&body).contains("/<size>"));
    // Not HTTP at all: 400 and the connection closes.
    let mut raw = connect(server.addr());
    raw.write_all(b"\x16\x03\x01\x00\x05hello").unwrap();
    let mut answer = String::new();
    raw.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400") && answer.contains("not an HTTP/1.x request"), "{answer}");
    let s = server.stop().unwrap();
    assert_eq!(s.errors.iter().map(|e| (e.kind.as_str(), e.count)).collect::<Vec<_>>(), [("http", 1)]);
}

#[test]
fn a_tls_server_counts_a_peer_that_does_not_speak_tls() {
    let cfg = config(Stack::Openssl, "x25519", "p256:p256");
    let server = serve(Some(prepare(&cfg)), 1, true);
    let mut raw = connect(server.addr());
    raw.write_all(b"GET / HTTP/1.1\r\n\r\n").unwrap();
    let mut rest = Vec::new();
    let _ = raw.read_to_end(&mut rest);
    let s = server.stop().unwrap();
    assert_eq!(s.handshakes, 0);
    assert_eq!(s.errors.iter().map(|e| (e.kind.as_str(), e.count)).collect::<Vec<_>>(), [("tls", 1)], "{s:?}");
}

#[test]
fn a_port_in_use_is_a_clear_error() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let e = Server::start(ServeOptions {
        listen: taken.local_addr().unwrap(),
        threads: 1,
        tls: None,
        endpoint: EndpointOptions::default(),
        keep_alive: true,
    })
    .err()
    .expect("the port is taken")
    .to_string();
    assert!(e.contains("is in use") && e.contains("127.0.0.1:0"), "{e}");
}
