//! `pqtls load` against `pqtls serve` on loopback: both stacks and across stacks negotiate
//! exactly what was asked; one handshake per request with new connections, one per connection
//! with keep-alive; the open loop issues requests on its timetable even while the server stalls
//! (latency counts from the due time); bad targets are clear errors. Counts and ordering only:
//! no timing is asserted. Every run is bounded by its duration and timeout.

use pqtls_core::backend::{Backend, EndpointOptions, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_net::load::{self, Expect, LoadOptions, LoadRun, Target};
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
    let cfg = HandshakeConfig::new(
        stack,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap(),
    );
    cfg.validate().unwrap();
    let backend: Box<dyn Backend> = match stack {
        Stack::Openssl => Box::new(pqtls_openssl::OpensslBackend::new()),
        Stack::Rustls => Box::new(pqtls_rustls::RustlsBackend::new()),
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
        tls,
        endpoint: EndpointOptions::traced(false),
        threads: 1,
        connections: 1,
        rate_per_s: None,
        keep_alive: false,
        warmup: Duration::ZERO,
        duration: Duration::from_secs(10),
        requests: Some(40),
        timeout: Duration::from_secs(5),
        expect: Expect::default(),
        timelines: true,
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

    // A server with another root: certificate verification fails.
    let srv = serve(Some(prepare(Stack::Openssl, "x25519", "p256:p256")), true);
    let e =
        run(&options(&format!("https://{}/", srv.addr()), Some(prepare(Stack::Openssl, "x25519", "ed25519:ed25519"))))
            .unwrap_err()
            .to_string();
    assert!(e.contains("tls error"), "{e}");
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
    // (Responses read in one batch of events may be stamped a few µs out of order: 2 ms slack.)
    for t in waiting {
        assert!(t.latency_ns() + 2_000_000 >= released - t.scheduled_ns.unwrap(), "{t:?}");
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
