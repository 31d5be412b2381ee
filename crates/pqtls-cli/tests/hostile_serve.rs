//! `pqtls serve` (the binary) against hostile peers on 127.0.0.1: a port another server holds,
//! factor flags it does not use, a key log that cannot be written or would be readable by
//! others, and 100 idle sockets under a 64-descriptor limit (`ulimit -n 64`) that must not lock
//! out a real client nor make the server spin. Every server runs in its own process group,
//! killed when its guard drops; every socket has a timeout.

mod common;

use common::Peer;
use pqtls_core::backend::{Backend, EndpointOptions};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use std::io::{BufRead, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn pqtls() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.env("PQTLS_PKI_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-hostile"));
    c
}

/// Resource limits for the server process (set in the child, before exec).
#[derive(Clone, Copy, Default)]
struct Rlimits {
    open_files: Option<u64>,
    file_bytes: Option<u64>,
}

/// A running `pqtls serve`: its process (killed with its group when dropped) and its stderr,
/// read by a thread (through a socket, not a file: `RLIMIT_FSIZE` limits files).
struct Served {
    peer: Peer,
    stderr: std::thread::JoinHandle<String>,
}

/// Starts `pqtls serve ARGS --listen 127.0.0.1:0 --duration 120s` and returns it with the
/// address it printed.
fn serve(args: &[&str], limits: Rlimits) -> (Served, SocketAddr) {
    let mut cmd = pqtls();
    cmd.arg("serve").args(args).args(["--listen", "127.0.0.1:0", "--duration", "120s"]);
    let (theirs, mut ours) = std::os::unix::net::UnixStream::pair().unwrap();
    cmd.stdout(Stdio::piped()).stderr(Stdio::from(std::os::fd::OwnedFd::from(theirs)));
    // SAFETY: runs in the forked child before exec; setrlimit(2) and signal(2) are
    // async-signal-safe, and the closure allocates nothing and touches no shared memory.
    #[allow(unsafe_code)]
    unsafe {
        use std::os::unix::process::CommandExt;
        cmd.pre_exec(move || {
            let set = |resource, n: u64| {
                let lim = libc::rlimit { rlim_cur: n as libc::rlim_t, rlim_max: n as libc::rlim_t };
                if libc::setrlimit(resource, &lim) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            };
            if let Some(n) = limits.open_files {
                set(libc::RLIMIT_NOFILE, n)?;
            }
            if let Some(n) = limits.file_bytes {
                set(libc::RLIMIT_FSIZE, n)?;
                // A write over the limit fails with EFBIG instead of killing the process.
                libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
            }
            Ok(())
        });
    }
    let mut peer = Peer::spawn(&mut cmd, "pqtls serve");
    drop(cmd); // our copy of the socket's other end: EOF once the server is gone
    let stderr = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = ours.read_to_string(&mut text);
        text
    });
    let mut line = String::new();
    let mut stdout = std::io::BufReader::new(peer.0.take_stdout().expect("the server's stdout"));
    stdout.read_line(&mut line).unwrap();
    let addr = match line.trim().parse() {
        Ok(a) => a,
        Err(_) => {
            let _ = peer.0.stop(Duration::from_secs(5));
            panic!("pqtls serve printed {line:?}; stderr: {}", stderr.join().unwrap_or_default())
        }
    };
    // Kept open while the test runs (a server whose stdout is closed is not what is tested).
    std::mem::forget(stdout);
    (Served { peer, stderr }, addr)
}

/// GET `path` on a new plain connection; `None` if the server closed it without an answer.
fn get(addr: SocketAddr, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(addr).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.set_write_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: pqtls\r\nConnection: close\r\n\r\n").as_bytes()).ok()?;
    let mut answer = Vec::new();
    let _ = s.read_to_end(&mut answer);
    let text = String::from_utf8_lossy(&answer).to_string();
    let status = text.get(9..12)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()).unwrap_or_default();
    Some((status, body))
}

/// The server's /stats, retried until it answers (at most `within`).
fn stats(addr: SocketAddr, within: Duration) -> serde_json::Value {
    let t0 = Instant::now();
    loop {
        if let Some((200, body)) = get(addr, "/stats") {
            return serde_json::from_str(&body).unwrap();
        }
        assert!(t0.elapsed() < within, "a real client was not served within {within:?}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Stops the server (if it still runs) and returns what it wrote on stderr.
fn stop(served: Served) -> String {
    let _ = served.peer.0.stop(Duration::from_secs(5));
    served.stderr.join().unwrap_or_default()
}

#[test]
fn serve_refuses_factor_flags_it_does_not_use_by_name() {
    for (flag, value) in [
        ("--rate", "100/s"),
        ("--threads", "4"),
        ("--rtt", "20ms"),
        ("--loss", "1%"),
        ("--terminator", "nginx"),
        ("--transport", "socketpair"),
        ("--connections", "8"),
    ] {
        let out = pqtls()
            .args(["serve", "--plain", "--listen", "127.0.0.1:0", "--duration", "5s", flag, value])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}: {err}");
        assert!(err.contains(flag) && err.contains("serve does not use"), "{flag}: {err}");
        assert!(out.stdout.is_empty(), "{flag}: it must not have started");
    }
}

#[test]
fn a_second_serve_on_a_port_in_use_fails_naming_the_address() {
    let (first, addr) = serve(&["--plain", "--workers", "2"], Rlimits::default());
    let t0 = Instant::now();
    let out = pqtls()
        .args(["serve", "--plain", "--workers", "2", "--duration", "10s", "--listen"])
        .arg(addr.to_string())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&addr.to_string()) && err.contains("in use") && err.contains("--listen"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(8), "refused at once, not after serving");
    // Every client still reaches the first server.
    for _ in 0..20 {
        assert_eq!(get(addr, "/3").map(|(s, b)| (s, b.len())), Some((200, 3)));
    }
    stop(first);
}

/// 100 idle sockets against a server limited to 64 descriptors: the server neither dies nor
/// spins, counts what it refused, and serves a real client once the idle ones time out.
fn idle_sockets_under_64_descriptors(extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["--plain", "--workers", "2", "--header-timeout", "3s"];
    args.extend_from_slice(extra);
    let (peer, addr) = serve(&args, Rlimits { open_files: Some(64), ..Rlimits::default() });
    let idle: Vec<TcpStream> = (0..100).filter_map(|_| TcpStream::connect(addr).ok()).collect();
    assert!(idle.len() >= 64, "only {} idle connections made", idle.len());
    std::thread::sleep(Duration::from_millis(300));
    let cpu0 = peer.peer.0.cpu_ns();
    std::thread::sleep(Duration::from_secs(2));
    let busy_ns = peer.peer.0.cpu_ns() - cpu0;
    assert!(
        busy_ns < 1_000_000_000,
        "the server used {} ms of CPU in 2 s at the descriptor limit",
        busy_ns / 1_000_000
    );
    let v = stats(addr, Duration::from_secs(30));
    drop(idle);
    let err = stop(peer);
    assert!(v["timeouts"]["header"].as_u64().unwrap() > 0, "{v}\n{err}");
    v
}

#[test]
fn idle_sockets_over_the_default_cap_are_refused_and_a_real_client_is_served() {
    let v = idle_sockets_under_64_descriptors(&[]);
    let cap = v["max_connections"].as_u64().unwrap();
    assert!((1..64).contains(&cap), "the default cap under ulimit -n 64 is {cap}: {v}");
    assert!(v["refused_at_cap"].as_u64().unwrap() > 0, "{v}");
    assert_eq!(v["accept_errors"], 0, "the default cap keeps accepts within the descriptors: {v}");
}

#[test]
fn out_of_descriptors_accepting_pauses_and_a_real_client_is_served() {
    let v = idle_sockets_under_64_descriptors(&["--max-connections", "1000"]);
    assert!(v["accept_errors"].as_u64().unwrap() > 0, "{v}");
    let errors = v["errors"].as_array().unwrap();
    let accept = errors.iter().find(|e| e["kind"] == "accept").unwrap_or_else(|| panic!("{v}"));
    assert!(accept["last"].as_str().unwrap().contains("file descriptors"), "{v}");
}

#[test]
fn the_key_log_is_created_owner_only_and_an_unwritable_one_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.log");
    let out = pqtls()
        .args(["serve", "--plain", "--listen", "127.0.0.1:0", "--duration", "0.2s", "--keylog"])
        .arg(&keys)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(std::fs::metadata(&keys).unwrap().permissions().mode() & 0o777, 0o600);
    let out = pqtls()
        .args(["serve", "--plain", "--listen", "127.0.0.1:0", "--duration", "5s", "--keylog", "/dev/full"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("/dev/full") && out.stdout.is_empty(), "{err}");
}

#[test]
fn a_key_log_write_that_fails_during_the_run_ends_it_with_an_error_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let keys = dir.path().join("keys.log");
    let keys_arg = keys.to_str().unwrap();
    let (group, chain, cipher) = ("x25519", "p256:p256", "TLS_AES_256_GCM_SHA384");
    // The PKI first: the server may not write files beyond the key log's first line.
    let cfg = HandshakeConfig::new(
        Stack::Rustls,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher(cipher).unwrap(),
    );
    let files = common::pki_in("pki-hostile").files_for(&cfg).unwrap();
    // Room for the key log's first (comment) line, not for a secret.
    let (mut peer, addr) = serve(
        &["--stack", "rustls", "--group", group, "--chain", chain, "--cipher", cipher, "--keylog", keys_arg],
        Rlimits { file_bytes: Some(100), ..Rlimits::default() },
    );
    let prepared = pqtls_rustls::RustlsBackend::new().prepare(&cfg, &files).unwrap();
    let mut ep = prepared.client(&EndpointOptions::default()).unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    // The handshake may or may not complete: the server stops once a secret fails to be written.
    let _ = pqtls_lab::drive::over_stream(ep.as_mut(), &mut s, true);
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = peer.peer.0.try_wait().unwrap() {
            break st;
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the server kept running without its key log");
        std::thread::sleep(Duration::from_millis(50));
    };
    let err = stop(peer);
    assert_eq!(status.code(), Some(1), "{err}");
    assert!(err.contains(keys_arg) && err.contains("key-log"), "{err}");
}
