//! `pqtls load` against `pqtls serve` on loopback: both stacks and across stacks negotiate
//! exactly what was asked; one handshake per request with new connections, one per connection
//! with keep-alive; the open loop issues requests on its timetable even while the server stalls
//! (latency counts from the due time); bad targets are clear errors. Counts and ordering only:
//! no timing is asserted. Every run is bounded by its duration and timeout.

use pqtls_core::backend::{Backend, EndpointOptions, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_net::load::{self, Client, Expect, LoadOptions, LoadRun, Target};
use pqtls_net::{ServeOptions, Server};
use pqtls_pki::Pki;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-load"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn prepare(stack: Stack, group: &str, chain: &str) -> Arc<dyn Prepared> {
    let cfg = HandshakeConfig::named(stack, group, chain, "TLS_AES_256_GCM_SHA384").unwrap();
    let backend: Box<dyn Backend> = match stack {
        Stack::Openssl => Box::new(pqtls_openssl::OpensslBackend::new()),
        Stack::Rustls => Box::new(pqtls_rustls::RustlsBackend::new()),
        Stack::S2n => panic!("these tests run OpenSSL and rustls; s2n-tls' are crates/pqtls-s2n/tests"),
        Stack::Boringssl => Box::new(pqtls_boring::BoringBackend::new()),
    };
    Arc::from(backend.prepare(&cfg, &pki().files_for(&cfg).unwrap()).unwrap())
}

fn serve(tls: Option<Arc<dyn Prepared>>, keep_alive: bool) -> Server {
    Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        tls,
        endpoint: EndpointOptions::traced(false),
        keep_alive,
    })
    .unwrap()
}

fn options(url: &str, tls: Option<Arc<dyn Prepared>>) -> LoadOptions {
    LoadOptions {
        target: Target::parse(url).unwrap(),
        client: Client::Tcp { tls, endpoint: EndpointOptions::traced(false) },
        threads: 1,
        connections: 1,
        rate_per_s: None,
        keep_alive: false,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(10),
        requests: Some(40),
        timeout: Duration::from_secs(5),
        max_body_bytes: load::DEFAULT_MAX_BODY_BYTES,
        expect: Expect::default(),
        trust: "pqtls PKI root, name localhost".into(),
        timelines: true,
        stalls: None,
    }
}

fn run(o: &LoadOptions) -> pqtls_core::Result<LoadRun> {
    load::run(o, &AtomicBool::new(false), &mut |_| {})
}

#[test]
fn new_connections_mean_one_handshake_per_request_on_both_stacks_and_across() {
    let group = "X25519MLKEM768";
    for (client, server) in [
        (Stack::Openssl, Stack::Openssl),
        (Stack::Rustls, Stack::Rustls),
        (Stack::Openssl, Stack::Rustls),
        (Stack::Rustls, Stack::Openssl),
    ] {
        let srv = serve(Some(prepare(server, group, "mldsa65:mldsa65")), true);
        let mut o = options(&format!("https://{}/1KiB", srv.addr()), Some(prepare(client, group, "mldsa65:mldsa65")));
        o.threads = 2;
        o.connections = 2;
        o.expect = Expect {
            group: Some(group.into()),
            cipher: Some("TLS_AES_256_GCM_SHA384".into()),
            sigalg: Some("mldsa65".into()),
            ..Expect::default()
        };
        let r = run(&o).unwrap();
        let stats = srv.stop().unwrap();
        assert_eq!(r.requests, 40, "{client:?}→{server:?}: the fixed count");
        assert_eq!(r.handshakes, 40);
        assert!(r.errors.is_empty(), "{:?}", r.errors);
        assert_eq!(r.latency.len(), 40);
        assert_eq!(stats.handshakes, stats.requests, "the server saw one handshake per request");
        assert_eq!(stats.requests, r.all_requests);
        assert_eq!(stats.response_bytes, 1024 * r.all_requests);
        let n = r.negotiated.unwrap();
        assert!(o.expect.mismatches(&n).is_empty(), "{n:?}");
        assert!(r.handshake_cpu_ns > 0 && r.thread_cpu_ns > r.handshake_cpu_ns);
        // One handshake's message sizes, read from its bytes with its secrets.
        let m = r.messages.as_ref().unwrap().as_ref().unwrap();
        for msg in [
            "ClientHello",
            "ServerHello",
            "EncryptedExtensions",
            "Certificate",
            "CertificateVerify",
            "Finished",
            "ClientFinished",
        ] {
            assert!(m.get(msg).is_some_and(|&b| b > 4), "{client:?}→{server:?}: {msg} in {m:?}");
        }
        // ML-DSA-65: a 3309-byte signature (+ 4 + 4 bytes of headers).
        assert_eq!(m["CertificateVerify"], 3309 + 8, "{m:?}");
        let (c2s, s2c) = r.handshake_bytes;
        assert!(c2s > m["ClientHello"] && s2c > m["Certificate"] + m["CertificateVerify"]);
        for t in &r.timelines {
            let l = t.layers().unwrap();
            assert!(t.connect_start_ns.unwrap() <= t.connected_ns.unwrap());
            assert!(t.client_hello_ns.unwrap() <= t.handshake_done_ns.unwrap());
            assert!(t.handshake_done_ns.unwrap() <= t.request_ns);
            assert!(t.first_byte_ns <= t.last_byte_ns);
            assert_eq!(
                l.tcp_ns + l.tcp_to_tls_ns + l.tls_ns + l.tls_to_http_ns + l.http_ns,
                t.last_byte_ns - t.connect_start_ns.unwrap()
            );
        }
    }
}

#[test]
fn keep_alive_means_one_handshake_per_connection() {
    let srv = serve(Some(prepare(Stack::Rustls, "x25519", "ed25519:ed25519")), true);
    let mut o =
        options(&format!("https://{}/64KiB", srv.addr()), Some(prepare(Stack::Rustls, "x25519", "ed25519:ed25519")));
    o.keep_alive = true;
    o.connections = 3;
    o.requests = Some(60);
    let r = run(&o).unwrap();
    let stats = srv.stop().unwrap();
    assert_eq!(r.requests, 60);
    assert_eq!(stats.handshakes, 3, "three connections, each kept");
    assert_eq!(stats.connections, 3);
    assert_eq!(stats.response_bytes, 60 * 65536);
    // Transactions after the first on a connection have no connection moments.
    assert_eq!(r.timelines.iter().filter(|t| t.connect_start_ns.is_some()).count(), 3);
}

#[test]
fn plain_http_works_and_a_negotiation_mismatch_is_an_error() {
    let srv = serve(None, true);
    let r = run(&options(&format!("http://{}/0", srv.addr()), None)).unwrap();
    assert_eq!((r.requests, r.handshakes), (40, 0));
    drop(srv);

    let srv = serve(Some(prepare(Stack::Openssl, "x25519", "p256:p256")), true);
    let mut o = options(&format!("https://{}/", srv.addr()), Some(prepare(Stack::Openssl, "x25519", "p256:p256")));
    o.expect.group = Some("X25519MLKEM768".into());
    let e = run(&o).unwrap_err().to_string();
    assert!(e.contains("negotiated group x25519 (asked: X25519MLKEM768)"), "{e}");
}

#[test]
fn bad_targets_are_clear_errors() {
    // Nothing listening.
    let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let e = run(&options(&format!("http://127.0.0.1:{port}/"), None)).unwrap_err().to_string();
    assert!(e.contains("connect error") && e.contains("is a server listening"), "{e}");

    // A server with another root: certificate verification fails, naming what was trusted.
    let srv = serve(Some(prepare(Stack::Openssl, "x25519", "p256:p256")), true);
    let e =
        run(&options(&format!("https://{}/", srv.addr()), Some(prepare(Stack::Openssl, "x25519", "ed25519:ed25519"))))
            .unwrap_err()
            .to_string();
    assert!(e.contains("verify error") && e.contains("certificate verification failed"), "{e}");
    assert!(e.contains("the client trusted: pqtls PKI root, name localhost") && e.contains("--ca FILE"), "{e}");
    drop(srv);

    // Not an HTTP server.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let _ = s.write_all(b"SSH-2.0-OpenSSH_9.2\r\n");
            let mut b = [0u8; 256];
            let _ = s.read(&mut b);
        }
    });
    let e = run(&options(&format!("http://{addr}/"), None)).unwrap_err().to_string();
    assert!(e.contains("not an HTTP/1.x response"), "{e}");
    t.join().unwrap();

    // A server that closes mid-response.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    let t = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let mut b = [0u8; 1024];
            let _ = s.read(&mut b);
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten..");
        }
    });
    let e = run(&options(&format!("http://{addr}/"), None)).unwrap_err().to_string();
    assert!(e.contains("after 10 body bytes, 90 short"), "{e}");
    t.join().unwrap();

    let mut o = options("http://127.0.0.1:1/", None);
    o.connections = 0;
    assert!(run(&o).unwrap_err().to_string().contains("--connections"));
}

/// A plain HTTP/1.1 server, one connection at a time, that stalls `pause` before answering
/// its `stall_at`-th request; it records when each request arrived.
fn stalling_server(
    stall_at: usize,
    pause: Duration,
) -> (std::net::SocketAddr, Arc<std::sync::Mutex<Vec<Instant>>>, Arc<AtomicBool>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    l.set_nonblocking(true).unwrap();
    let addr = l.local_addr().unwrap();
    let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
    let stop = Arc::new(AtomicBool::new(false));
    let (seen2, stop2) = (seen.clone(), stop.clone());
    std::thread::spawn(move || {
        let mut n = 0;
        while !stop2.load(std::sync::atomic::Ordering::SeqCst) {
            let Ok((mut s, _)) = l.accept() else {
                std::thread::sleep(Duration::from_millis(1));
                continue;
            };
            s.set_nonblocking(false).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            let mut buf = Vec::new();
            let mut b = [0u8; 1024];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                match s.read(&mut b) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => buf.extend_from_slice(&b[..k]),
                }
            }
            seen2.lock().unwrap().push(Instant::now());
            n += 1;
            if n == stall_at {
                std::thread::sleep(pause);
            }
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    (addr, seen, stop)
}

#[test]
fn the_open_loop_keeps_its_timetable_while_the_server_stalls() {
    // 50/s for 2 s: 100 requests due, 20 ms apart. The server answers one connection at a time
    // and stalls 500 ms on its 20th: requests due meanwhile wait — and their latency counts
    // from when they were due.
    let (addr, _seen, stop) = stalling_server(20, Duration::from_millis(500));
    let mut o = options(&format!("http://{addr}/"), None);
    o.requests = None;
    o.rate_per_s = Some(50.0);
    o.duration = Duration::from_secs(2);
    o.connections = 8;
    let r = run(&o).unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(r.requests + r.unfinished + r.errors.iter().map(|e| e.count).sum::<u64>(), 100, "{r:?}");
    let due: Vec<u64> = r.timelines.iter().map(|t| t.scheduled_ns.unwrap()).collect();
    // Issued on schedule: due times are the timetable's (k × 20 ms), in order, none skipped.
    for (k, d) in due.iter().enumerate() {
        assert_eq!(*d, k as u64 * 20_000_000, "request {k}");
    }
    // The requests due during the stall started late, and their latency includes the wait
    // for the stalled server: each one's latency exceeds the time from its due time to when
    // the stalled request's response arrived.
    let stalled = &r.timelines[19];
    let released = stalled.last_byte_ns;
    let waiting: Vec<_> = r
        .timelines
        .iter()
        .filter(|t| t.scheduled_ns.unwrap() > stalled.scheduled_ns.unwrap() && t.scheduled_ns.unwrap() < released)
        .collect();
    assert!(!waiting.is_empty());
    // (Responses read in one batch of events are stamped one after the other: a few µs out of
    // order, or as much as the vCPU is taken away between two stamps on a busy machine: 50 ms
    // slack. A latency counted from the start instead falls short by up to the 500 ms stall.)
    for t in waiting {
        assert!(t.latency_ns() + 50_000_000 >= released - t.scheduled_ns.unwrap(), "{t:?}");
    }
}

#[test]
fn the_closed_loop_hides_the_same_stall_in_its_rate() {
    // For contrast: a closed loop measures from each request's own start, so the requests that
    // waited behind the stall are not issued at all — fewer requests, no due times.
    let (addr, _seen, stop) = stalling_server(5, Duration::from_millis(300));
    let mut o = options(&format!("http://{addr}/"), None);
    o.requests = Some(10);
    let r = run(&o).unwrap();
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    assert_eq!(r.requests, 10);
    assert!(r.timelines.iter().all(|t| t.scheduled_ns.is_none()));
}

#[test]
fn a_traced_server_gives_its_per_step_profile_under_load_and_the_steps_add_up() {
    let srv = Server::start(ServeOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        threads: 1,
        tls: Some(prepare(Stack::Openssl, "X25519MLKEM768", "mldsa44:mldsa44")),
        endpoint: EndpointOptions::traced(true),
        keep_alive: true,
    })
    .unwrap();
    let mut o = options(
        &format!("https://{}/", srv.addr()),
        Some(prepare(Stack::Openssl, "X25519MLKEM768", "mldsa44:mldsa44")),
    );
    o.connections = 2;
    run(&o).unwrap();
    let s = srv.stop().unwrap();
    assert_eq!(s.handshakes, 40);
    for step in ["server_hello", "certificate_verify"] {
        assert!(s.steps_ns_mean.keys().any(|k| k.contains(step)), "{step} in {:?}", s.steps_ns_mean);
    }
    let sum: f64 = s.steps_ns_mean.values().sum();
    assert!(
        (sum - s.handshake_cpu_ns_mean).abs() <= 1e-6 * s.handshake_cpu_ns_mean,
        "{sum} vs {}",
        s.handshake_cpu_ns_mean
    );
}

// ---- Hostile servers (plain TCP on 127.0.0.1: the `tls = false` baseline; each stops, with
// every connection it accepted, when dropped) ----

type Handler = dyn Fn(std::net::TcpStream, &AtomicBool) + Send + Sync;

/// A server that runs `handler` on every connection in its own thread until dropped (or
/// [`Hostile::kill`]ed: the listener closes, so new connections are refused).
struct Hostile {
    addr: std::net::SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Hostile {
    fn start(handler: impl Fn(std::net::TcpStream, &AtomicBool) + Send + Sync + 'static) -> Hostile {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let handler: Arc<Handler> = Arc::new(handler);
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !s.load(std::sync::atomic::Ordering::SeqCst) {
                match l.accept() {
                    Ok((c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        let (h, s) = (handler.clone(), s.clone());
                        conns.push(std::thread::spawn(move || h(c, &s)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(2)),
                }
            }
            drop(l);
            for c in conns {
                let _ = c.join();
            }
        });
        Hostile { addr, stop, thread: Some(thread) }
    }

    /// Stops accepting (the port refuses from now on) and ends every connection.
    fn kill(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads one request head (false: the client left, or the server is stopping).
fn read_request(s: &mut std::net::TcpStream, stop: &AtomicBool) -> bool {
    s.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
    let mut head = Vec::new();
    let mut b = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if stop.load(std::sync::atomic::Ordering::SeqCst) {
            return false;
        }
        match s.read(&mut b) {
            Ok(0) => return false,
            Ok(n) => head.extend_from_slice(&b[..n]),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return false,
        }
    }
    true
}

/// Holds the connection open, answering nothing, until the client leaves or the server stops.
fn linger(s: &mut std::net::TcpStream, stop: &AtomicBool) {
    let mut b = [0u8; 1024];
    while !stop.load(std::sync::atomic::Ordering::SeqCst) {
        match s.read(&mut b) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

fn errors_of<'a>(r: &'a LoadRun, kind: &str) -> Option<&'a pqtls_core::load::ErrorCount> {
    r.errors.iter().find(|e| e.kind == kind)
}

#[test]
fn chunked_and_close_delimited_responses_are_read() {
    // Chunked, with extensions and trailers, several responses per kept-alive connection.
    let chunked = Hostile::start(|mut s, stop| {
        while read_request(&mut s, stop) {
            let r = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=y\r\nabcd\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-T: 1\r\n\r\n";
            if s.write_all(r).is_err() {
                return;
            }
        }
    });
    let mut o = options(&format!("http://{}/", chunked.addr), None);
    o.keep_alive = true;
    o.connections = 2;
    let r = run(&o).unwrap();
    assert_eq!((r.requests, r.errors.len()), (40, 0), "{:?}", r.errors);
    drop(chunked);

    // Close-delimited (as `openssl s_server -www` answers): HTTP/1.0, no length, then the close.
    let close = Hostile::start(|mut s, stop| {
        if read_request(&mut s, stop) {
            let _ = s.write_all(b"HTTP/1.0 200 ok\r\nContent-type: text/html\r\n\r\n<HTML><BODY>");
            let _ = s.write_all(&[b'x'; 3000]);
        }
    });
    let mut o = options(&format!("http://{}/", close.addr), None);
    o.keep_alive = true; // asked, but the server closes: a new connection per request
    let r = run(&o).unwrap();
    assert_eq!((r.requests, r.errors.len()), (40, 0), "{:?}", r.errors);
    for t in &r.timelines {
        assert!(t.first_byte_ns <= t.last_byte_ns && t.connect_start_ns.is_some(), "{t:?}");
    }
}

#[test]
fn an_endless_body_ends_at_the_limit_as_an_error_of_its_own_kind() {
    let endless = Hostile::start(|mut s, stop| {
        if read_request(&mut s, stop) {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n");
            let chunk = vec![b'x'; 64 * 1024];
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && s.write_all(&chunk).is_ok() {}
        }
    });
    // The URL's size is the limit: the 1025th byte is one too many, and before any success
    // the error ends the run, naming the limit.
    let o = options(&format!("http://{}/1KiB", endless.addr), None);
    let t0 = Instant::now();
    let e = run(&o).unwrap_err().to_string();
    assert!(e.contains("body error") && e.contains("limit of 1024 bytes") && e.contains("/1KiB asks for 1024"), "{e}");
    // A path without a size: --max-body.
    let mut o = options(&format!("http://{}/stream", endless.addr), None);
    o.max_body_bytes = 4 << 20;
    let e = run(&o).unwrap_err().to_string();
    assert!(e.contains("limit of 4194304 bytes") && e.contains("--max-body 4"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(30), "bounded: {:?}", t0.elapsed());
}

#[test]
fn the_timeout_covers_the_whole_transaction_while_bytes_trickle_in() {
    // One body byte every 100 ms of a 1000-byte body: never silent, never done.
    let trickle = Hostile::start(|mut s, stop| {
        if read_request(&mut s, stop) {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n");
            while !stop.load(std::sync::atomic::Ordering::SeqCst) && s.write_all(b"x").is_ok() {
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    });
    let mut o = options(&format!("http://{}/", trickle.addr), None);
    o.requests = None;
    o.duration = Duration::from_secs(1);
    o.timeout = Duration::from_millis(700);
    o.connections = 2;
    let t0 = Instant::now();
    let r = run(&o).unwrap();
    let took = t0.elapsed();
    assert_eq!(r.requests, 0);
    let t = errors_of(&r, "timeout").unwrap_or_else(|| panic!("{:?}", r.errors));
    assert!(t.count >= 2 && t.last.contains("no complete response within 700ms"), "{t:?}");
    // duration + timeout + a wide margin (was: as long as the server trickled, 100 s): the
    // bound catches that, not speed.
    assert!(took < Duration::from_secs(20), "{took:?}");
}

#[test]
fn the_open_loop_queue_is_bounded_and_what_did_not_fit_is_counted() {
    let silent = Hostile::start(|mut s, stop| {
        if read_request(&mut s, stop) {
            linger(&mut s, stop);
        }
    });
    let mut o = options(&format!("http://{}/", silent.addr), None);
    o.requests = None;
    o.rate_per_s = Some(9_999_999.0);
    o.duration = Duration::from_secs(1);
    o.timeout = Duration::from_millis(300);
    o.timelines = false;
    let t0 = Instant::now();
    let r = run(&o).unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let q = errors_of(&r, "queue").unwrap_or_else(|| panic!("{:?}", r.errors));
    assert!(q.last.contains("not sent: queue full"), "{q:?}");
    // ~10 M due in the measured second; at most MAX_QUEUED (+ the one connection) waited.
    assert!(q.count > 5_000_000, "{q:?}");
    assert!(r.unfinished <= load::MAX_QUEUED as u64 + 1, "{}", r.unfinished);
    // (What falls due while the thread is kept from running just before the end is not counted:
    // 10 000 per ms. 8 M leaves 200 ms of that to a busy machine; without the count, ~1 M.)
    assert!(q.count + r.unfinished + r.requests >= 8_000_000, "{q:?} {}", r.unfinished);
}

#[test]
fn a_server_that_dies_mid_run_ends_it_with_what_was_measured() {
    let mut server = Hostile::start(|mut s, stop| {
        if read_request(&mut s, stop) {
            let _ = s.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
        }
    });
    let mut o = options(&format!("http://{}/2", server.addr), None);
    o.requests = None;
    o.duration = Duration::from_secs(30);
    o.timeout = Duration::from_secs(2);
    o.connections = 2;
    let killer = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(1000));
        server.kill();
    });
    let t0 = Instant::now();
    let r = run(&o).unwrap();
    let took = t0.elapsed();
    killer.join().unwrap();
    assert_eq!(r.stopped, "server gone");
    assert!(r.requests > 0);
    assert!(errors_of(&r, "connect").is_some_and(|e| e.last.contains("refused")), "{:?}", r.errors);
    // The rate is over the time the server answered (~1 s), not the run's 30 s.
    assert!(r.duration_ns < 3_000_000_000, "{}", r.duration_ns);
    assert!(r.per_second.len() <= 3 && r.per_second.iter().sum::<u64>() == r.requests, "{:?}", r.per_second);
    assert!(took < Duration::from_secs(10), "{took:?}");
}

#[test]
fn an_interrupt_ends_the_run_promptly_while_thousands_connect() {
    // A listener that never accepts: past its backlog, connections stay in SYN-SENT.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let mut o = options(&format!("http://{}/", l.local_addr().unwrap()), None);
    o.requests = None;
    o.connections = 3000;
    o.duration = Duration::from_secs(60);
    o.timeout = Duration::from_secs(60);
    o.timelines = false;
    let interrupt = Arc::new(AtomicBool::new(false));
    let i = interrupt.clone();
    let at = Arc::new(std::sync::Mutex::new(None));
    let at2 = at.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        *at2.lock().unwrap() = Some(Instant::now());
        i.store(true, std::sync::atomic::Ordering::SeqCst);
    });
    let r = load::run(&o, &interrupt, &mut |_| {}).unwrap();
    let after = at.lock().unwrap().unwrap().elapsed();
    assert_eq!(r.stopped, "interrupted");
    // Promptly, not at the 60 s duration or timeout: the bound catches that (a hang), not speed.
    assert!(after < Duration::from_secs(15), "the interrupt took {after:?}");
    drop(l);
}

#[test]
fn a_signature_scheme_other_than_the_chain_leaf_ends_the_run_naming_both() {
    // The server signs with Ed25519; the client trusts that chain's root but was asked for a
    // P-256 leaf (OpenSSL's client offers every scheme, so the handshake completes).
    let server_cfg = HandshakeConfig::new(
        Stack::Openssl,
        catalogue::group("x25519").unwrap(),
        ChainSpec::parse("ed25519:ed25519").unwrap(),
        catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap(),
    );
    let files = pki().files_for(&server_cfg).unwrap();
    let mut client_cfg = server_cfg.clone();
    client_cfg.chain = ChainSpec::parse("p256:p256").unwrap();
    let client: Arc<dyn Prepared> =
        Arc::from(pqtls_openssl::OpensslBackend::new().prepare(&client_cfg, &files).unwrap());
    let srv = serve(Some(prepare(Stack::Openssl, "x25519", "ed25519:ed25519")), true);
    let mut o = options(&format!("https://{}/", srv.addr()), Some(client));
    o.expect = Expect {
        group: Some("x25519".into()),
        cipher: Some("TLS_AES_256_GCM_SHA384".into()),
        sigalg: Some(client_cfg.chain.leaf.scheme.into()),
        ..Expect::default()
    };
    let e = run(&o).unwrap_err().to_string();
    assert!(e.contains("negotiated signature algorithm ed25519 (asked: ecdsa_secp256r1_sha256)"), "{e}");
}

/// A client whose only key share the server will not pick: every handshake over real sockets
/// takes a HelloRetryRequest, which the run records (negotiated, and the message table), and the
/// ClientHello's TCP segments are counted (one on loopback: its MSS is far above a ClientHello).
/// With the share predicted, no retry.
#[test]
fn a_mispredicted_key_share_retries_over_real_sockets_and_the_client_hello_segments_are_counted() {
    let on = |stack: Stack, shares: &str| {
        let mut cfg =
            HandshakeConfig::named(stack, "X25519MLKEM768", "mldsa44:mldsa44", "TLS_AES_256_GCM_SHA384").unwrap();
        cfg.groups.push(catalogue::group("x25519").unwrap());
        cfg.key_shares = vec![catalogue::group(shares).unwrap()];
        cfg.validate().unwrap();
        let backend: Box<dyn Backend> = match stack {
            Stack::Openssl => Box::new(pqtls_openssl::OpensslBackend::new()),
            _ => Box::new(pqtls_rustls::RustlsBackend::new()),
        };
        Arc::<dyn Prepared>::from(backend.prepare(&cfg, &pki().files_for(&cfg).unwrap()).unwrap())
    };
    for stack in [Stack::Openssl, Stack::Rustls] {
        for (shares, retry) in [("x25519", true), ("X25519MLKEM768", false)] {
            let srv = serve(Some(on(stack, shares)), false);
            let mut o = options(&format!("https://{}/0", srv.addr()), Some(on(stack, shares)));
            o.requests = Some(5);
            let r = run(&o).unwrap();
            srv.stop().unwrap();
            assert!(r.errors.is_empty(), "{stack:?} {shares}: {:?}", r.errors);
            let n = r.negotiated.as_ref().unwrap();
            assert_eq!(n.group, "X25519MLKEM768", "{stack:?} {shares}");
            assert_eq!(n.hrr, retry, "{stack:?} {shares}");
            let m = r.messages.as_ref().unwrap().as_ref().unwrap();
            assert_eq!(m.contains_key("HelloRetryRequest"), retry, "{stack:?} {shares}: {m:?}");
            assert_eq!(r.client_hello_segments, Some(1), "{stack:?} {shares}");
        }
    }
}
