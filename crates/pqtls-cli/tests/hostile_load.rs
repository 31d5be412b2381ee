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

/// Whether process `pid` has a handler for SIGINT (bit 2 of `SigCgt` in /proc/PID/status).
fn catches_sigint(pid: u32) -> bool {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let mask = status.lines().find_map(|l| l.strip_prefix("SigCgt:")).map(|m| m.trim().to_string());
    mask.and_then(|m| u64::from_str_radix(&m, 16).ok()).is_some_and(|m| m & (1 << (2 - 1)) != 0)
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
    // Its Ctrl-C handler is installed (waited for: a signal before it would kill the process,
    // whatever a busy machine's start-up time), then it connects for a while.
    let t0 = Instant::now();
    while !catches_sigint(child.id()) {
        assert!(t0.elapsed() < Duration::from_secs(60), "no SIGINT handler installed within 60 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(1500));
    let t0 = Instant::now();
    Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    let out = child.wait_with_output().unwrap();
    let took = t0.elapsed();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    // Honoured, not ignored until the 60 s run ends: the bound catches that (a hang), not speed.
    assert!(took < Duration::from_secs(20), "the first Ctrl-C took {took:?}");
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

/// The number after `before` in `err` (the refusal's advice).
fn advised(err: &str, before: &str) -> u64 {
    let at = err.find(before).unwrap_or_else(|| panic!("no '{before}' in: {err}")) + before.len();
    let digits: String = err[at..].chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no number after '{before}' in: {err}"))
}

/// What a refusal for want of descriptors advises works as given: the connections it says fit
/// under the same limit, and the limit it says to raise to with the connections asked, each
/// run and measure — against a server elsewhere (one descriptor per connection) and against
/// pqtls' own (both sides in this process). It advised one connection too many, and a limit a
/// few descriptors short: following it failed with the same error.
#[test]
fn the_connections_and_the_limit_a_refusal_advises_do_run() {
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(OK));
    let url = format!("http://{}/2", server.addr);
    let elsewhere = ["load", url.as_str()];
    let own = ["load", "--group", "x25519", "--chain", "p256:p256"];
    for target in [&elsewhere[..], &own[..]] {
        let run = |nofile: &str, connections: &str| {
            let mut args = target.to_vec();
            args.extend(["--connections", connections, "--requests", "50", "--warmup-time", "0s", "--timeout", "20s"]);
            args.extend(["--json", "r.json", "--quiet"]);
            let _ = std::fs::remove_file(dir.path().join("r.json"));
            let t0 = Instant::now();
            let o = pqtls_limited(nofile, &args, dir.path());
            assert!(t0.elapsed() < Duration::from_secs(120), "{target:?}: {:?}", t0.elapsed());
            o
        };
        let refused = run("256:256", "300");
        let (_, err) = text(&refused);
        assert_eq!(refused.status.code(), Some(1), "{target:?}: {err}");
        let fits = advised(&err, "give --connections ");
        let limit = advised(&err, "prlimit --nofile=");
        assert!(fits > 0 && fits < 300 && limit > 256, "{target:?}: {err}");
        for (nofile, connections) in
            [("256:256".to_string(), fits.to_string()), (format!("{limit}:{limit}"), "300".into())]
        {
            let o = run(&nofile, &connections);
            let (_, err) = text(&o);
            assert_eq!(o.status.code(), Some(0), "{target:?} --connections {connections} under {nofile}: {err}");
            let r: serde_json::Value =
                serde_json::from_slice(&std::fs::read(dir.path().join("r.json")).unwrap()).unwrap();
            assert_eq!(r[0]["result"]["requests"], 50, "{target:?} --connections {connections} under {nofile}");
        }
    }
}

/// `pqtls load --keylog FILE` makes the key log readable by its owner only (it was 0644), one
/// that others may read is refused, and one that cannot be written (`/dev/full`) is an error
/// naming it before anything is measured (it was silence). `pqtls serve`'s: hostile_serve.rs.
#[test]
fn the_key_log_of_load_is_owner_only_and_an_unwritable_one_is_an_error() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let server = Server::start(Some(OK));
    let url = format!("http://{}/2", server.addr);
    // A TLS run (pqtls' own server), so that secrets are written.
    let load = |keylog: &str| {
        pqtls(
            &["load", "--group", "x25519", "--chain", "p256:p256", "--requests", "5", "--warmup-time", "0s"]
                .iter()
                .chain(&["--quiet", "--keylog", keylog])
                .copied()
                .collect::<Vec<_>>(),
            dir.path(),
        )
    };
    let o = load("keys.log");
    assert_eq!(o.status.code(), Some(0), "{}", text(&o).1);
    let keys = dir.path().join("keys.log");
    assert_eq!(std::fs::metadata(&keys).unwrap().permissions().mode() & 0o777, 0o600);
    let secrets = std::fs::read_to_string(&keys).unwrap();
    assert!(secrets.lines().any(|l| l.starts_with("CLIENT_TRAFFIC_SECRET_0 ")), "{secrets}");
    // Made readable by others (by hand): refused, naming it and what to do.
    std::fs::set_permissions(&keys, std::fs::Permissions::from_mode(0o644)).unwrap();
    let o = load("keys.log");
    let (out, err) = text(&o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(err.contains("keys.log") && err.contains("chmod 600"), "{err}");
    assert!(!out.contains("conns/s"), "measured before refusing: {out}");
    // A device that takes no bytes: an error now, not secrets lost later.
    for args in [vec!["--group", "x25519", "--chain", "p256:p256"], vec![url.as_str()]] {
        let mut all = vec!["load"];
        all.extend(&args);
        all.extend(["--requests", "5", "--warmup-time", "0s", "--quiet", "--keylog", "/dev/full"]);
        let o = pqtls(&all, dir.path());
        let (out, err) = text(&o);
        assert_eq!(o.status.code(), Some(1), "{all:?}: {err}");
        assert!(err.contains("/dev/full") && !err.contains("panicked"), "{all:?}: {err}");
        assert!(!out.contains("conns/s"), "{all:?} measured before refusing: {out}");
    }
}
