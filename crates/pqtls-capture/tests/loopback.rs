//! Captures of real transactions on loopback, analysed: `pqtls serve`'s server (with its key
//! log) on a free port, tcpdump on `lo` filtered to that port, a small blocking client of each
//! stack making new-connection and kept-alive transactions. The analysis must find every
//! connection, the moments in order, the request and response sizes exactly, the handshake
//! messages as the in-situ measurement measures them, and name what is wrong with a key log
//! of another run, a tampered one, a truncated capture or a file that is not one. Bounded:
//! every socket has a timeout; needs root (or CAP_NET_RAW) and tcpdump; tshark for the
//! Wireshark cross-check (scripts/setup.sh installs both).

/// The stacks these tests run (s2n-tls serves and loads in a later change of issue 36).
const TWO_STACKS: [Stack; 2] = [Stack::Openssl, Stack::Rustls];

use pqtls_capture::{analyse, Capture, KeyLog};
use pqtls_core::backend::{Backend, Endpoint, EndpointOptions, Prepared};
use pqtls_core::catalogue::Stack;
use pqtls_core::config::HandshakeConfig;
use pqtls_core::record::Bytes;
use pqtls_net::{ServeOptions, Server};
use pqtls_pki::Pki;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-capture"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn config(stack: Stack, group: &str, chain: &str, cipher: &str) -> HandshakeConfig {
    HandshakeConfig::named(stack, group, chain, cipher).unwrap()
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

/// A client port that Wireshark decodes as Performance Co-Pilot's `pmproxy`, not TLS, unless
/// told otherwise: an ephemeral port CI once drew, which hid that connection from tshark.
const PMPROXY_PORT: u16 = 44322;

/// A connection to `addr` from local port `port` (SO_REUSEADDR, so a previous run's TIME_WAIT
/// does not stand in the way); from an ephemeral port, with a note, when `port` is taken.
fn from_port(addr: SocketAddr, port: u16) -> TcpStream {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.set_reuse_address(true).unwrap();
    let local: SocketAddr = ([127, 0, 0, 1], port).into();
    if let Err(e) = socket.bind(&local.into()) {
        eprintln!("local port {port} is taken ({e}); this connection uses an ephemeral port");
        return TcpStream::connect(addr).unwrap();
    }
    socket.connect(&addr.into()).unwrap();
    socket.into()
}

/// A blocking HTTPS/1.1 client over one connection; remembers the plaintext bytes of each
/// request and response.
struct Client {
    stream: TcpStream,
    tls: Box<dyn Endpoint>,
    plain: Vec<u8>,
}

impl Client {
    fn connect(addr: SocketAddr, prepared: &Arc<dyn Prepared>, local_port: Option<u16>) -> Client {
        let mut stream = match local_port {
            None => TcpStream::connect(addr).unwrap(),
            Some(port) => from_port(addr, port),
        };
        stream.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
        stream.set_nodelay(true).unwrap();
        let mut tls = prepared.client(&EndpointOptions::traced(false)).unwrap();
        pqtls_lab::transport::over_stream(tls.as_mut(), &mut stream, true).unwrap();
        Client { stream, tls, plain: Vec::new() }
    }

    fn more(&mut self) -> bool {
        let mut buf = [0u8; 65536];
        let n = self.stream.read(&mut buf).unwrap();
        if n == 0 {
            return false;
        }
        self.tls.receive(&buf[..n]).unwrap();
        self.tls.read_app(&mut self.plain).unwrap();
        true
    }

    /// GET `path`; returns (request bytes, response bytes incl. head, body bytes).
    fn get(&mut self, path: &str, keep: bool) -> (u64, u64, u64) {
        let conn = if keep { "keep-alive" } else { "close" };
        let req = format!("GET {path} HTTP/1.1\r\nHost: pqtls\r\nConnection: {conn}\r\n\r\n");
        self.tls.write_app(req.as_bytes()).unwrap();
        let mut out = Vec::new();
        self.tls.take_output(&mut out).unwrap();
        self.stream.write_all(&out).unwrap();
        loop {
            if let Some(end) = self.plain.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&self.plain[..end]).to_string();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("Content-Length: "))
                    .map(|v| v.trim().parse().unwrap())
                    .unwrap();
                while self.plain.len() < end + 4 + len {
                    assert!(self.more(), "the server closed mid-response");
                }
                self.plain.drain(..end + 4 + len);
                return (req.len() as u64, (end + 4 + len) as u64, len as u64);
            }
            assert!(self.more(), "the server closed before answering");
        }
    }

    /// Sends close_notify and waits for the server to close (so the capture has it all).
    fn close(mut self) {
        self.tls.close().unwrap();
        let mut out = Vec::new();
        self.tls.take_output(&mut out).unwrap();
        let _ = self.stream.write_all(&out);
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        let mut buf = [0u8; 4096];
        while matches!(self.stream.read(&mut buf), Ok(n) if n > 0) {}
    }
}

/// What one scenario ran and captured.
struct Run {
    dir: tempfile::TempDir,
    /// Per connection, per transaction: (request bytes, response bytes, body bytes).
    expected: Vec<Vec<(u64, u64, u64)>>,
    cfg: HandshakeConfig,
    dropped_by_kernel: u64,
}

impl Run {
    fn pcap(&self) -> PathBuf {
        self.dir.path().join("run.pcap")
    }
    fn keys(&self) -> PathBuf {
        self.dir.path().join("run.keys")
    }
}

/// `new_connections` connections with one request each, then one kept-alive connection with
/// two, all captured.
fn run(cfg: HandshakeConfig, new_connections: usize) -> Run {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("run.keys");
    let prepared = prepare(&cfg);
    let key_log = pqtls_lab::keylog::KeyLogFile::open(&keys).unwrap();
    let server = Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        tls: Some(prepared.clone()),
        endpoint: EndpointOptions { traced: false, key_log: Some(Arc::new(key_log)), ..EndpointOptions::default() },
        keep_alive: true,
    })
    .unwrap();
    let addr = server.addr();
    let capture = Capture::start("lo", None, &format!("tcp port {}", addr.port()), &dir.path().join("run.pcap"))
        .expect("tcpdump on lo (needs root or CAP_NET_RAW, and tcpdump: scripts/setup.sh)");
    let mut expected = Vec::new();
    for i in 0..new_connections {
        // The first from a port Wireshark gives another protocol (the cross-check must still
        // find its TLS, as it must for any ephemeral port).
        let local_port = (i == 0).then_some(PMPROXY_PORT);
        let mut c = Client::connect(addr, &prepared, local_port);
        let size = ["1KiB", "16KiB", "100"][i % 3];
        expected.push(vec![c.get(&format!("/{size}"), false)]);
        c.close();
    }
    let mut c = Client::connect(addr, &prepared, None);
    expected.push(vec![c.get("/100", true), c.get("/64KiB", true)]);
    c.close();
    let stats = capture.stop().unwrap();
    assert_eq!(stats.dropped_by_kernel, 0, "the capture lost packets: {stats:?}");
    let served = server.stop().unwrap();
    assert!(served.errors.is_empty(), "{served:?}");
    assert!(stats.captured > 0 && stats.file_bytes > 24, "{stats:?}");
    Run { dir, expected, cfg, dropped_by_kernel: stats.dropped_by_kernel }
}

/// The handshake messages the in-situ measurement reports for `cfg` (one in-memory handshake).
fn insitu_messages(cfg: &HandshakeConfig) -> indexmap::IndexMap<String, u64> {
    let prepared = prepare(cfg);
    let h = pqtls_lab::transport::handshake(prepared.as_ref(), &EndpointOptions::traced(true)).unwrap();
    Bytes::from_sides(&h.client, &h.server, h.client_to_server, h.server_to_client).messages
}

fn check(run: &Run) {
    let a = analyse(&run.pcap(), Some(&run.keys())).unwrap();
    let what = format!("{} {}", run.cfg.stack, run.cfg.cipher.name);
    assert_eq!(a.connections.len(), run.expected.len(), "{what}: {:#?}", a.connections);
    assert_eq!(run.dropped_by_kernel, 0);
    assert_eq!(a.anomalies.syn_retransmissions + a.anomalies.connections_with_gaps, 0, "{what}: {:?}", a.anomalies);
    let insitu = insitu_messages(&run.cfg);
    for (c, expected) in a.connections.iter().zip(&run.expected) {
        assert!(c.tls, "{what}");
        assert_eq!(c.keys, pqtls_capture::tls::Keys::Found, "{what}: {:?}", c.problems);
        assert_eq!(c.cipher_suite.as_deref(), Some(run.cfg.cipher.name), "{what}");
        assert!(c.problems.is_empty(), "{what}: {:?}", c.problems);
        let sizes: Vec<(u64, u64)> = c.transactions.iter().map(|t| (t.request_bytes, t.response_bytes)).collect();
        let want: Vec<(u64, u64)> = expected.iter().map(|e| (e.0, e.1)).collect();
        assert_eq!(sizes, want, "{what}: request and response sizes");
        for (i, t) in c.transactions.iter().enumerate() {
            let tl = t.timeline;
            let l = tl.layers().unwrap_or_else(|e| panic!("{what}: moments out of order: {e}"));
            if i == 0 {
                let start = tl.connect_start_ns.unwrap();
                assert!(start <= tl.connected_ns.unwrap());
                assert!(tl.connected_ns.unwrap() <= tl.client_hello_ns.unwrap());
                assert!(tl.client_hello_ns.unwrap() < tl.handshake_done_ns.unwrap());
                assert!(tl.handshake_done_ns.unwrap() <= tl.request_ns);
                assert_eq!(
                    l.tcp_ns + l.tcp_to_tls_ns + l.tls_ns + l.tls_to_http_ns + l.http_ns,
                    tl.last_byte_ns - start
                );
            } else {
                assert_eq!(tl.connect_start_ns, None, "a kept-alive transaction has no connection moments");
            }
            assert!(tl.request_ns < tl.first_byte_ns && tl.first_byte_ns <= tl.last_byte_ns, "{what}: {tl:?}");
            assert_eq!((t.method.as_str(), t.status.as_str()), ("GET", "200"));
        }
        for m in ["ClientHello", "ServerHello", "EncryptedExtensions", "Certificate", "CertificateVerify", "Finished"] {
            let (wire, there) = (c.handshake_messages.get(m).copied(), insitu.get(m).copied());
            let leaf = &run.cfg.chain.leaf;
            if m == "CertificateVerify" && leaf.variable_signature {
                // ECDSA signatures are DER, at most `signature_bytes` long and a byte shorter per
                // leading zero byte of either INTEGER: both within 8 bytes of the maximum.
                let max = 8 + leaf.signature_bytes as u64;
                for n in [wire.unwrap(), there.unwrap()] {
                    assert!((max - 8..=max).contains(&n), "{what}: {m} {wire:?} vs {there:?}");
                }
            } else {
                assert_eq!(wire, there, "{what}: {m} on the wire vs in situ");
            }
        }
        assert_eq!(c.handshake_messages.get("ClientFinished"), insitu.get("ClientFinished"), "{what}");
    }
    assert_eq!(a.transactions().count(), run.expected.iter().map(Vec::len).sum::<usize>());
    let layers = a.layers();
    assert!(layers.refused.is_empty(), "{:?}", layers.refused);
    assert_eq!(layers.layers["tls"].count, run.expected.len() as u64);
    assert_eq!(layers.layers["http"].count, a.transactions().count() as u64);
}

#[test]
fn captures_of_both_stacks_give_every_transaction_its_moments_and_exact_sizes() {
    let runs = [
        run(config(Stack::Openssl, "X25519MLKEM768", "mldsa65:mldsa65", "TLS_AES_256_GCM_SHA384"), 3),
        run(config(Stack::Rustls, "x25519", "p256:p256", "TLS_CHACHA20_POLY1305_SHA256"), 3),
    ];
    for r in &runs {
        check(r);
        // Wireshark's dissector opens the same capture with the same key log and sees each
        // connection's Certificate.
        assert_eq!(
            pqtls_testkit::tshark::certificates(&r.pcap(), &r.keys()),
            r.expected.len(),
            "{} {}",
            r.cfg.stack,
            r.cfg.cipher.name
        );
    }

    // Without a key log: the connections and their ClientHellos, no transactions, and why.
    let a = analyse(&runs[0].pcap(), None).unwrap();
    assert_eq!(a.connections.len(), runs[0].expected.len());
    assert!(a
        .connections
        .iter()
        .all(|c| c.transactions.is_empty() && c.handshake_messages.contains_key("ClientHello")));
    assert!(a.connections[0].problems.iter().any(|p| p.contains("no key log")), "{:?}", a.connections[0].problems);

    // The key log of the other run matches nothing.
    let e = analyse(&runs[0].pcap(), Some(&runs[1].keys())).unwrap_err().to_string();
    assert!(e.contains("matches none of the capture's 4 TLS connections"), "{e}");

    // A key log with this run's client randoms but other secrets does not open the records.
    let text = std::fs::read_to_string(runs[1].keys()).unwrap();
    let tampered: String = text
        .lines()
        .map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            format!("{} {} {}\n", f[0], f[1], f[2].chars().rev().collect::<String>())
        })
        .collect();
    let bad = runs[1].dir.path().join("tampered.keys");
    std::fs::write(&bad, tampered).unwrap();
    let e = analyse(&runs[1].pcap(), Some(&bad)).unwrap_err().to_string();
    assert!(e.contains("do not open its records") && e.contains("SERVER_HANDSHAKE_TRAFFIC_SECRET"), "{e}");
    assert!(KeyLog::read(&bad).unwrap().len() == runs[1].expected.len());

    // A capture cut in the middle of a packet, and a file that is not a capture.
    let bytes = std::fs::read(runs[1].pcap()).unwrap();
    let cut = runs[1].dir.path().join("cut.pcap");
    std::fs::write(&cut, &bytes[..bytes.len() - 7]).unwrap();
    let e = analyse(&cut, Some(&runs[1].keys())).unwrap_err().to_string();
    assert!(e.contains("the capture is truncated") && e.contains("whole packets"), "{e}");
    let e = analyse(&runs[1].keys(), None).unwrap_err().to_string();
    assert!(e.contains("not a pcap or pcapng file"), "{e}");
    let e = analyse(&runs[1].pcap(), Some(&runs[1].pcap())).unwrap_err().to_string();
    assert!(e.contains("not a key log") || e.contains("line 1"), "{e}");
}

/// `handshake_messages` on the bytes each side of an in-memory handshake wrote, with the
/// client's in-memory key log: the same table as the in-situ measurement's.
#[test]
fn handshake_messages_from_two_byte_streams_equal_the_insitu_table() {
    use pqtls_core::backend::MemoryKeyLog;
    for stack in TWO_STACKS {
        let cfg = config(stack, "X25519MLKEM768", "mldsa65:mldsa65", "TLS_AES_128_GCM_SHA256");
        let prepared = prepare(&cfg);
        let log = Arc::new(MemoryKeyLog::new());
        let opts = EndpointOptions { traced: false, key_log: Some(log.clone()), ..EndpointOptions::default() };
        let mut client = prepared.client(&opts).unwrap();
        let mut server = prepared.server(&EndpointOptions::traced(false)).unwrap();
        let (mut c2s, mut s2c) = (Vec::new(), Vec::new());
        for round in 0.. {
            assert!(round < 20, "{stack}: the handshake does not end");
            let client_done = client.drive().unwrap();
            let mut out = Vec::new();
            client.take_output(&mut out).unwrap();
            server.receive(&out).unwrap();
            c2s.extend(&out);
            let server_done = server.drive().unwrap();
            let mut back = Vec::new();
            server.take_output(&mut back).unwrap();
            client.receive(&back).unwrap();
            s2c.extend(&back);
            if client_done && server_done && out.is_empty() && back.is_empty() {
                break;
            }
        }
        let keys = KeyLog::from_logged(&log.secrets());
        let wire = pqtls_capture::handshake_messages(&c2s, &s2c, &keys).unwrap();
        let insitu = insitu_messages(&cfg);
        let sorted = |m: &indexmap::IndexMap<String, u64>| {
            let mut v: Vec<(String, u64)> = m.iter().map(|(k, v)| (k.clone(), *v)).collect();
            v.sort();
            v
        };
        assert_eq!(sorted(&wire), sorted(&insitu), "{stack}");
        let e = pqtls_capture::handshake_messages(&c2s, &s2c, &KeyLog::new()).unwrap_err().to_string();
        assert!(e.contains("no secrets in the key log for client random"), "{e}");
    }
}

/// A capture dropped without `stop` (here: in a panic) leaves no tcpdump behind; a capture
/// that cannot start says why.
#[test]
fn a_capture_dropped_in_a_panic_leaves_no_tcpdump_and_bad_interfaces_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("dropped.pcap");
    let pid = std::thread::spawn(move || {
        let c = Capture::start("lo", None, "tcp port 9", &path).unwrap();
        std::panic::panic_any(c.pid().unwrap());
    })
    .join()
    .unwrap_err();
    let pid = *pid.downcast::<u32>().unwrap();
    assert!(!Path::new(&format!("/proc/{pid}")).exists(), "tcpdump {pid} is still there");
    let e = Capture::start("pqtls-nonesuch0", None, "tcp", &dir.path().join("x.pcap")).unwrap_err().to_string();
    assert!(e.contains("tcpdump could not capture on pqtls-nonesuch0"), "{e}");
    let e = Capture::start("lo", None, "tcp port nonsense", &dir.path().join("y.pcap")).unwrap_err().to_string();
    assert!(e.contains("filter 'tcp port nonsense'"), "{e}");
}
