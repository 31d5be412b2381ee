//! `pqtls serve` on loopback: both stacks serve and are fetched from by both stacks, negotiate
//! exactly what was asked, answer `GET /<size>` with that many bytes; keep-alive means one
//! handshake per connection, a new connection per request one handshake per request; bad input
//! gets clear errors. Bounded: every socket has a timeout.

/// The stacks these tests run (s2n-tls serves and loads in a later change of issue 36).
const TWO_STACKS: [Stack; 2] = [Stack::Openssl, Stack::Rustls];

use pqtls_core::backend::{Backend, Endpoint, EndpointOptions, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_net::serve::Limits;
use pqtls_net::{ServeOptions, Server, StatsSnapshot};
use pqtls_pki::Pki;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-serve"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn config(stack: Stack, group: &str, chain: &str) -> HandshakeConfig {
    HandshakeConfig::named(stack, group, chain, cipher(&[stack])).unwrap()
}

/// TLS_AES_256_GCM_SHA384 (not a default), or TLS_AES_128_GCM_SHA256 when BoringSSL is one of
/// the stacks (it fixes its TLS 1.3 suites, docs/stacks.md).
fn cipher(stacks: &[Stack]) -> &'static str {
    if stacks.contains(&Stack::Boringssl) {
        "TLS_AES_128_GCM_SHA256"
    } else {
        "TLS_AES_256_GCM_SHA384"
    }
}

fn prepare(cfg: &HandshakeConfig) -> Arc<dyn Prepared> {
    let backend: Box<dyn Backend> = match cfg.stack {
        Stack::Openssl => Box::new(pqtls_openssl::OpensslBackend::new()),
        Stack::Rustls => Box::new(pqtls_rustls::RustlsBackend::new()),
        Stack::S2n => panic!("these tests run OpenSSL and rustls; s2n-tls' are crates/pqtls-s2n/tests"),
        Stack::Boringssl => Box::new(pqtls_boring::BoringBackend::new()),
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
            pqtls_lab::transport::over_stream(ep.as_mut(), &mut stream, true).unwrap();
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
    for server_stack in TWO_STACKS {
        for client_stack in TWO_STACKS {
            for (group, chain) in [("x25519", "p256:p256"), ("X25519MLKEM768", "mldsa65:mldsa65")] {
                let suite = cipher(&[server_stack, client_stack]);
                let scfg = HandshakeConfig::named(server_stack, group, chain, suite).unwrap();
                let ccfg = HandshakeConfig::named(client_stack, group, chain, suite).unwrap();
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

/// A server with short timeouts (1 s) and, if given, a connection cap.
fn hardened(tls: Option<Arc<dyn Prepared>>, max_connections: Option<usize>) -> Server {
    hardened_with(tls, max_connections, Duration::from_secs(1))
}

fn hardened_with(tls: Option<Arc<dyn Prepared>>, max_connections: Option<usize>, second: Duration) -> Server {
    Server::start_with(
        ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 2,
            tls,
            endpoint: EndpointOptions::traced(false),
            keep_alive: true,
        },
        Limits {
            handshake_timeout: second,
            header_timeout: second,
            idle_timeout: second,
            send_timeout: second,
            max_connections,
        },
    )
    .unwrap()
}

/// Waits (at most 20 s) for the server to close `s`, reading and discarding what comes;
/// returns how long it took.
fn closed_within(s: &mut TcpStream) -> Duration {
    let t0 = Instant::now();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = [0u8; 65536];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return t0.elapsed(),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return t0.elapsed(),
            Err(e) => panic!("the server did not close the connection within 20 s: {e}"),
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the server kept sending for 20 s");
    }
}

/// Polls the server's counters until `done` holds (at most 20 s).
fn stats_until(server: &Server, done: impl Fn(&StatsSnapshot) -> bool) -> StatsSnapshot {
    let t0 = Instant::now();
    loop {
        let s = server.stats();
        if done(&s) {
            return s;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "not reached within 20 s: {s:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The first record of a real ClientHello (ML-KEM key share: over 1 KB).
fn client_hello(prep: &Arc<dyn Prepared>) -> Vec<u8> {
    let mut ep = prep.client(&EndpointOptions::traced(false)).unwrap();
    assert!(!ep.drive().unwrap());
    let mut out = Vec::new();
    ep.take_output(&mut out).unwrap();
    assert!(out.len() > 1000 && out[0] == 0x16, "{} bytes", out.len());
    out
}

#[test]
fn half_a_client_hello_then_silence_is_closed_at_the_handshake_timeout() {
    for stack in TWO_STACKS {
        let prep = prepare(&config(stack, "X25519MLKEM768", "p256:p256"));
        let server = hardened(Some(prep.clone()), None);
        let mut raw = connect(server.addr());
        raw.write_all(&client_hello(&prep)[..100]).unwrap();
        let took = closed_within(&mut raw);
        assert!(took < Duration::from_secs(10), "{stack}: {took:?} for a 1 s handshake timeout");
        let s = stats_until(&server, |s| s.open_connections == 0);
        assert_eq!((s.timeouts.handshake, s.handshakes), (1, 0), "{stack}: {s:?}");
        // Nothing sent at all: the same.
        let mut silent = connect(server.addr());
        closed_within(&mut silent);
        let s = server.stop().unwrap();
        assert_eq!(s.timeouts.handshake, 2, "{stack}: {s:?}");
    }
}

#[test]
fn a_partial_request_head_and_an_idle_keep_alive_connection_are_closed_at_their_timeouts() {
    let prep = prepare(&config(Stack::Rustls, "x25519", "p256:p256"));
    for tls in [None, Some(prep)] {
        let server = hardened(tls.clone(), None);
        // Half a head.
        let mut c = Client::new(server.addr(), tls.as_ref());
        c.send(b"GET /1KiB HTTP/1.1\r\nHost: pq");
        let took = closed_within(&mut c.stream);
        assert!(took < Duration::from_secs(10), "{took:?} for a 1 s header timeout");
        // Connected (and shaken hands), then nothing: the first request's head is late too.
        let mut c = Client::new(server.addr(), tls.as_ref());
        closed_within(&mut c.stream);
        // One response, then idle.
        let mut c = Client::new(server.addr(), tls.as_ref());
        assert_eq!(c.get("/10", true).1.len(), 10);
        let took = closed_within(&mut c.stream);
        assert!(took < Duration::from_secs(10), "{took:?} for a 1 s idle timeout");
        let s = stats_until(&server, |s| s.open_connections == 0);
        assert_eq!((s.timeouts.header, s.timeouts.idle, s.timeouts.handshake), (2, 1, 0), "{s:?}");
        // The counters as a client sees them.
        let mut c = Client::new(server.addr(), tls.as_ref());
        let (status, body) = c.get("/stats", false);
        assert_eq!(status, 200);
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["timeouts"], serde_json::json!({"handshake": 0, "header": 2, "idle": 1, "send": 0}), "{v}");
        assert_eq!((v["refused_at_cap"].as_u64(), v["accept_errors"].as_u64()), (Some(0), Some(0)), "{v}");
        assert!(v["max_connections"].as_u64().unwrap() >= 1, "{v}");
        server.stop().unwrap();
    }
}

#[test]
fn a_client_that_stops_reading_is_closed_at_the_send_timeout_and_only_sent_bytes_count() {
    let server = hardened(None, None);
    let mut c = Client::new(server.addr(), None);
    c.send(b"GET /1GiB HTTP/1.1\r\nHost: pqtls\r\n\r\n");
    let took = closed_within_without_reading(&mut c.stream);
    assert!(took < Duration::from_secs(15), "{took:?} for a 1 s send timeout");
    let s = stats_until(&server, |s| s.open_connections == 0);
    assert_eq!((s.timeouts.send, s.response_bytes_asked), (1, 1 << 30), "{s:?}");
    assert!(s.response_bytes < 256 << 20, "{} bytes counted as sent to a client that read none", s.response_bytes);

    // A client that reads 16 KiB of a 1 GiB response and leaves.
    let mut c = Client::new(server.addr(), None);
    c.send(b"GET /1GiB HTTP/1.1\r\nHost: pqtls\r\n\r\n");
    let mut got = 0;
    let mut buf = [0u8; 4096];
    while got < 16 * 1024 {
        got += c.stream.read(&mut buf).unwrap();
    }
    drop(c);
    let s = stats_until(&server, |s| s.open_connections == 0);
    assert_eq!(s.response_bytes_asked, 2 << 30, "{s:?}");
    assert!(s.response_bytes < 512 << 20, "{} bytes counted for two abandoned responses", s.response_bytes);
    server.stop().unwrap();
}

/// Waits (at most 20 s) until the server closes `s`, reading nothing until then (the socket
/// buffers fill: the server's writes stall): true once it did.
fn closed_within_without_reading(s: &mut TcpStream) -> Duration {
    let t0 = Instant::now();
    loop {
        // The peer's FIN or RST shows as POLLRDHUP only after the data; probe with a write:
        // once the server has closed, writing fails.
        std::thread::sleep(Duration::from_millis(100));
        let probe = s.write(b"x").and_then(|_| s.write(b"x"));
        if probe.is_err() {
            return t0.elapsed();
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the server still held the connection after 20 s");
    }
}

#[test]
fn over_the_connection_cap_connections_are_closed_at_once_and_counted() {
    let server = hardened_with(None, Some(3), Duration::from_secs(8));
    let held: Vec<TcpStream> = (0..3).map(|_| connect(server.addr())).collect();
    stats_until(&server, |s| s.open_connections == 3);
    let mut over = connect(server.addr());
    let took = closed_within(&mut over);
    assert!(took < Duration::from_secs(6), "{took:?}: refused at once, not at the 8 s timeout");
    let s = stats_until(&server, |s| s.refused_at_cap == 1);
    assert_eq!((s.connections, s.max_connections), (3, 3), "{s:?}");
    drop(held);
    // Once they time out (or leave), a real client is served.
    stats_until(&server, |s| s.open_connections == 0);
    let mut c = Client::new(server.addr(), None);
    assert_eq!(c.get("/1KiB", false), (200, vec![b'x'; 1024]));
    server.stop().unwrap();
}

/// A request head of `len` bytes.
fn head_of(len: usize) -> Vec<u8> {
    let fixed = "GET /3 HTTP/1.1\r\nX-Pad: \r\n\r\n".len();
    format!("GET /3 HTTP/1.1\r\nX-Pad: {}\r\n\r\n", "a".repeat(len - fixed)).into_bytes()
}

#[test]
fn a_head_over_the_limit_is_refused_however_it_arrives_and_one_at_the_limit_is_taken() {
    let max = pqtls_net::http::MAX_HEAD_BYTES;
    let server = serve(None, 1, true);
    let status = |data: &[u8], byte_by_byte: bool| {
        let mut raw = connect(server.addr());
        raw.set_nodelay(true).unwrap();
        if byte_by_byte {
            for b in data {
                if raw.write_all(std::slice::from_ref(b)).is_err() {
                    break; // refused (and closed) before the end
                }
            }
        } else {
            // The server may refuse (and close) before it has read all of it.
            let _ = raw.write_all(data);
        }
        let mut answer = Vec::new();
        let _ = raw.read_to_end(&mut answer);
        let text = String::from_utf8_lossy(&answer).to_string();
        (text.get(9..12).unwrap_or("").to_string(), text)
    };
    for byte_by_byte in [false, true] {
        let (code, text) = status(&head_of(max + 1), byte_by_byte);
        assert_eq!(code, "431", "{max}+1 bytes, byte by byte: {byte_by_byte}: {text}");
        assert!(text.contains("Connection: close"), "{text}");
    }
    // Exactly at the limit: served (the connection stays open: read the one response).
    for byte_by_byte in [false, true] {
        let mut raw = connect(server.addr());
        let head = head_of(max);
        if byte_by_byte {
            for b in &head {
                raw.write_all(std::slice::from_ref(b)).unwrap();
            }
        } else {
            raw.write_all(&head).unwrap();
        }
        let mut c = Client { stream: raw, tls: None, plain: Vec::new() };
        assert_eq!(c.response(), (200, b"xxx".to_vec()), "byte by byte: {byte_by_byte}");
    }
    // A 100 KB path: refused as too long a head, in a short answer.
    let (code, text) = status(format!("GET /{} HTTP/1.1\r\n\r\n", "z".repeat(100_000)).as_bytes(), false);
    assert!(code == "431" && text.len() < 400, "{text}");
    // A 10 KB path that is no size: 404, the path shown once, cut short.
    let mut c = Client::new(server.addr(), None);
    let (code, body) = c.get(&format!("/{}", "z".repeat(10_000)), true);
    let body = String::from_utf8_lossy(&body).to_string();
    let cut = "z".repeat(63);
    assert!(
        code == 404 && body.len() < 300 && body.matches(&cut).count() == 1 && !body.contains(&format!("{cut}z")),
        "{body}"
    );
    drop(c);
    let s = server.stop().unwrap();
    assert_eq!(s.errors.iter().map(|e| (e.kind.as_str(), e.count)).collect::<Vec<_>>(), [("http", 3)], "{s:?}");
}

#[test]
fn a_second_server_cannot_share_our_port_nor_we_its() {
    use socket2::{Domain, Socket, Type};
    let ours = serve(None, 2, true);
    // Another pqtls server.
    let e = Server::start(ServeOptions {
        listen: ours.addr(),
        threads: 1,
        tls: None,
        endpoint: EndpointOptions::default(),
        keep_alive: true,
    })
    .err()
    .expect("our port is taken")
    .to_string();
    assert!(e.contains("is in use") && e.contains(&ours.addr().to_string()), "{e}");
    // Any program that asks for SO_REUSEPORT.
    let reuse = || {
        let s = Socket::new(Domain::IPV4, Type::STREAM, None).unwrap();
        s.set_reuse_address(true).unwrap();
        s.set_reuse_port(true).unwrap();
        s
    };
    let intruder = reuse();
    let bound = intruder.bind(&ours.addr().into()).and_then(|_| intruder.listen(16));
    assert!(bound.is_err(), "another socket joined our port with SO_REUSEPORT");
    drop(ours);
    // The other way round: a program holds a port with SO_REUSEPORT; we do not join it.
    let holder = reuse();
    holder.bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into()).unwrap();
    holder.listen(16).unwrap();
    let addr = holder.local_addr().unwrap().as_socket().unwrap();
    let e = Server::start(ServeOptions {
        listen: addr,
        threads: 2,
        tls: None,
        endpoint: EndpointOptions::default(),
        keep_alive: true,
    })
    .err()
    .expect("a port held with SO_REUSEPORT is taken")
    .to_string();
    assert!(e.contains("is in use") && e.contains(&addr.to_string()), "{e}");
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

#[test]
fn thousands_of_pipelined_requests_are_answered_in_order_on_both_transports() {
    // 600 KB of requests in one burst: the server reads as it answers, and answers request
    // after request from what it read. It closed the connection once 64 KiB of requests
    // waited, and answered them by recursing once per request (the debug build's server
    // aborted with a stack overflow at ~1 800 pipelined `GET /1`).
    let prep = prepare(&config(Stack::Rustls, "x25519", "p256:p256"));
    for tls in [None, Some(prep)] {
        let server = serve(tls.clone(), 1, true);
        let mut c = Client::new(server.addr(), tls.as_ref());
        let n = 20_000;
        let mut burst = Vec::new();
        for i in 0..n {
            burst.extend_from_slice(format!("GET /{} HTTP/1.1\r\nHost: pqtls\r\n\r\n", i % 3).as_bytes());
        }
        // Sent by another thread while this one reads (neither side's buffers hold it all);
        // with TLS, encrypted here first (the endpoint stays in this thread).
        let wire = match c.tls.as_mut() {
            Some(ep) => {
                let mut out = Vec::new();
                for piece in burst.chunks(16 * 1024) {
                    ep.write_app(piece).unwrap();
                    ep.take_output(&mut out).unwrap();
                }
                out
            }
            None => burst,
        };
        let mut writer = c.stream.try_clone().unwrap();
        let sender = std::thread::spawn(move || writer.write_all(&wire).unwrap());
        for i in 0..n {
            let (status, body) = c.response();
            assert_eq!((status, body.len()), (200, i % 3), "response {i}");
        }
        sender.join().unwrap();
        drop(c);
        let s = server.stop().unwrap();
        assert_eq!(s.requests, n as u64, "{s:?}");
        assert!(s.errors.is_empty(), "{s:?}");
    }
}
