//! `pqtls load` against hostile servers and bad limits, as a user meets it: more connections
//! than file descriptors (refused with what fits, or the soft limit raised), Ctrl-C while
//! thousands connect, a server that never answers (exit 3, errors by kind), a server killed
//! mid-run (exit 3, the record says `stopped = "server gone"`), `openssl s_server -www`'s
//! close-delimited responses over TLS. Servers are written here, on 127.0.0.1 (plain TCP: the
//! `tls = false` baseline), or are `openssl s_server`; each is stopped when its test ends,
//! every run is bounded.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

mod common;

fn pqtls_cmd(args: &[&str], dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.args(args).current_dir(dir).env("PQTLS_PKI_DIR", dir.join("pki")).env("RUST_BACKTRACE", "0");
    c
}

fn pqtls(args: &[&str], dir: &Path) -> Output {
    pqtls_cmd(args, dir).output().expect("pqtls runs")
}

/// `pqtls …` under `prlimit --nofile=SOFT:HARD`.
fn pqtls_limited(nofile: &str, args: &[&str], dir: &Path) -> Output {
    Command::new("prlimit")
        .arg(format!("--nofile={nofile}"))
        .arg("--")
        .arg(env!("CARGO_BIN_EXE_pqtls"))
        .args(args)
        .current_dir(dir)
        .env("PQTLS_PKI_DIR", dir.join("pki"))
        .env("RUST_BACKTRACE", "0")
        .output()
        .expect("prlimit runs (util-linux)")
}

fn text(o: &Output) -> (String, String) {
    (String::from_utf8_lossy(&o.stdout).into_owned(), String::from_utf8_lossy(&o.stderr).into_owned())
}

/// A plain HTTP server on 127.0.0.1: `answer` says what each request gets (`None`: nothing,
/// the connection held open). Killed (listener and connections closed) when dropped or
/// [`Server::kill`]ed.
struct Server {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Server {
    fn start(answer: Option<&'static [u8]>) -> Server {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let addr = l.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !s.load(Ordering::SeqCst) {
                let Ok((mut c, _)) = l.accept() else {
                    std::thread::sleep(Duration::from_millis(2));
                    continue;
                };
                let s = s.clone();
                conns.push(std::thread::spawn(move || {
                    c.set_nonblocking(false).unwrap();
                    c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
                    let mut head = Vec::new();
                    let mut b = [0u8; 1024];
                    while !s.load(Ordering::SeqCst) {
                        match c.read(&mut b) {
                            Ok(0) => return,
                            Ok(n) => head.extend_from_slice(&b[..n]),
                            Err(e)
                                if matches!(
                                    e.kind(),
                                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                                ) => {}
                            Err(_) => return,
                        }
                        if head.windows(4).any(|w| w == b"\r\n\r\n") {
                            head.clear();
                            if let Some(a) = answer {
                                let _ = c.write_all(a);
                                return;
                            }
                        }
                    }
                }));
            }
            drop(l);
            for c in conns {
                let _ = c.join();
            }
        });
        Server { addr, stop, thread: Some(thread) }
    }

    fn kill(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            t.join().unwrap();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

const OK: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

#[test]
fn more_connections_than_file_descriptors_are_refused_with_what_fits_or_the_limit_is_raised() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(OK));
    let url = format!("http://{}/2", server.addr);
    // The hard limit is 256: refused before any connection, naming what fits and what to do.
    let t0 = Instant::now();
    let o = pqtls_limited("256:256", &["load", &url, "--connections", "300", "--requests", "5", "--quiet"], dir.path());
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("connections per thread fit: give --connections"), "{err}");
    assert!(err.contains("ulimit -n") && err.contains("hard 256"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
    // The soft limit is 256 but the hard one allows it: raised, and the run measures.
    let o = pqtls_limited(
        "256:8192",
        &[
            "load",
            &url,
            "--connections",
            "300",
            "--requests",
            "200",
            "--warmup-time",
            "0s",
            "--json",
            "r.json",
            "--quiet",
        ],
        dir.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r[0]["result"]["requests"], 200);
}

#[test]
fn ctrl_c_is_honoured_while_thousands_connect() {
    let dir = tempfile::tempdir().unwrap();
    // Never accepts: past its backlog, connections stay in SYN-SENT.
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", l.local_addr().unwrap());
    let child = pqtls_cmd(
        &["load", &url, "--connections", "2000", "--duration", "60s", "--timeout", "60s", "--warmup-time", "0s"],
        dir.path(),
    )
    .stdout(Stdio::null())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(took < Duration::from_secs(5), "the first Ctrl-C took {took:?}");
    drop(l);
}

#[test]
fn a_run_that_measured_nothing_exits_3_with_the_errors_by_kind() {
    let dir = tempfile::tempdir().unwrap();
    let silent = Server::start(None);
    let url = format!("http://{}/", silent.addr);
    let t0 = Instant::now();
    let o = pqtls(
        &["load", &url, "--duration", "1s", "--timeout", "500ms", "--warmup-time", "0s", "--connections", "2"],
        dir.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(3), "{err}");
    assert!(err.contains("measured nothing") && err.contains("errors by kind") && err.contains("timeout"), "{err}");
    assert!(t0.elapsed() < Duration::from_secs(20), "{:?}", t0.elapsed());
}

#[test]
fn a_server_killed_mid_run_ends_it_with_what_was_measured_and_exit_3() {
    let dir = tempfile::tempdir().unwrap();
    let mut server = Server::start(Some(OK));
    let url = format!("http://{}/2", server.addr);
    let child = pqtls_cmd(
        &["load", &url, "--duration", "30s", "--warmup-time", "0s", "--timeout", "2s", "--json", "r.json"],
        dir.path(),
    )
    .stdout(Stdio::piped())
    .stderr(Stdio::piped())
    .spawn()
    .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    server.kill();
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    let (stdout, err) = text(&out);
    assert_eq!(out.status.code(), Some(3), "{stdout}\n{err}");
    assert!(err.contains("the server went away mid-run"), "{err}");
    assert!(took < Duration::from_secs(10), "{took:?}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    let res = &r[0]["result"];
    assert_eq!(res["stopped"], "server gone", "{res}");
    assert!(res["requests"].as_u64().unwrap() > 0);
    // The rate is over the ~1.5 s the server answered, not 30 s.
    assert!(res["duration_ns"].as_u64().unwrap() < 5_000_000_000, "{res}");
    assert!(stdout.contains("went away"), "the note is printed: {stdout}");
}

#[test]
fn openssl_s_server_www_close_delimited_responses_are_read_over_tls() {
    let dir = tempfile::tempdir().unwrap();
    let o = pqtls(&["pki", "--chain", "p256:p256", "--out", "pki"], dir.path());
    let (out, err) = text(&o);
    assert!(o.status.success(), "{err}");
    let path = |what: &str| {
        out.lines()
            .find_map(|l| l.trim().strip_prefix(what).map(|p| p.trim().to_string()))
            .unwrap_or_else(|| panic!("{what} in {out}"))
    };
    let (key, chain) = (path("leaf key"), path("chain"));
    let openssl = std::env::var("OPENSSL_DIR").map_or("openssl".to_string(), |d| format!("{d}/bin/openssl"));
    let port = common::free_port();
    let mut peer = common::Peer::spawn(
        Command::new(&openssl)
            .args(["s_server", "-www", "-accept", &format!("127.0.0.1:{port}"), "-cert", &chain, "-key", &key])
            .args(["-tls1_3", "-naccept", "1000"])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "openssl s_server -www",
    );
    drop(common::connect_when_listening(port, &mut peer));
    let url = format!("https://127.0.0.1:{port}/");
    let o = pqtls(
        &["load", &url, "--stack", "openssl", "--group", "x25519", "--chain", "p256:p256", "--requests", "10"]
            .iter()
            .chain(&["--warmup-time", "0s", "--json", "r.json", "--quiet"])
            .copied()
            .collect::<Vec<_>>(),
        dir.path(),
    );
    let (_, err) = text(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let r: serde_json::Value = serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(r[0]["result"]["requests"], 10, "{}", r[0]["result"]);
    assert_eq!(r[0]["result"]["negotiated"]["sigalg"], "ecdsa_secp256r1_sha256");
}
