//! What the interop suites share: the peers' root (made by a script, once per test binary)
//! and the lab's PKI with every key implementation this build has. Running and staging peers
//! is pqtls-peers' (`Root`, `Staged`, `Supervised`): the same code as `--via`.

#![allow(dead_code)] // each suite uses a part

use pqtls_peers::Supervised;
use pqtls_pki::Pki;
use std::io::{BufRead, BufReader};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// A peer process in its own process group, stopped with all its processes when dropped
/// (also when a test fails), and also if the test binary dies.
pub struct Peer(pub Supervised);

impl Peer {
    /// Starts `cmd`; `what` names it in the panic if it cannot start.
    pub fn spawn(cmd: &mut Command, what: &str) -> Peer {
        Peer(Supervised::spawn(cmd, what).unwrap_or_else(|e| panic!("{e}")))
    }
}

/// Runs `scripts/<script>` (which makes or finds a root and prints its path); a failure is
/// the test's failure, with `what` and the script's message: the suites never pass without
/// having talked to the peer.
pub fn root_from(script: &str, what: &str) -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts").join(script);
    let out = Command::new("bash").arg(&path).output().unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
    assert!(out.status.success(), "{what} could not be made:\n{}", String::from_utf8_lossy(&out.stderr));
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// The lab's PKI in the test target dir's `name`, with liboqs' key implementations.
pub fn pki_in(name: &str) -> Pki {
    Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join(name))
        .expect("pki")
        .with_factories(pqtls_rustls::key_factories())
}

/// A free port on loopback (for a peer told to listen on it), below the kernel's ephemeral
/// range: no other test's `bind(0)` or connection takes it before the peer binds.
pub fn free_port() -> u16 {
    pqtls_peers::port::free_port([127, 0, 0, 1].into(), false).unwrap()
}

/// Connects once `peer` listens on `port` (20 s at most; a peer that exits first fails).
pub fn connect_when_listening(port: u16, peer: &mut Peer) -> TcpStream {
    let t0 = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
            return s;
        }
        if let Ok(Some(status)) = peer.0.try_wait() {
            panic!("the peer exited before listening: {status}");
        }
        assert!(t0.elapsed() < Duration::from_secs(20), "the peer did not listen on {port} within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The `pqtls` binary under test with `args`, its PKI cache in `pki`, and no backtraces (a
/// test reads the error line a user would).
pub fn pqtls_cmd(args: &[&str], pki: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.args(args).env("PQTLS_PKI_DIR", pki).env("RUST_BACKTRACE", "0");
    c
}

/// Runs `pqtls args` with its PKI cache in `pki`.
pub fn pqtls(args: &[&str], pki: &Path) -> Output {
    pqtls_cmd(args, pki).output().expect("pqtls runs")
}

/// Runs `pqtls args` in `dir` (relative output paths land there), its PKI cache in `dir/pki`.
pub fn pqtls_in(args: &[&str], dir: &Path) -> Output {
    pqtls_cmd(args, &dir.join("pki")).current_dir(dir).output().expect("pqtls runs")
}

/// Standard output and standard error as one text.
pub fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

/// The standard output of a run that must succeed (a failure fails the test with both streams).
pub fn ok(o: &Output) -> String {
    assert!(o.status.success(), "pqtls failed ({:?}):\n{}", o.status.code(), text(o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// A run refused with an `error:` line (no panic) that names every hint; `code` is the exit
/// code it must have (None: any but 0).
pub fn fails_with(o: &Output, code: Option<i32>, hints: &[&str]) {
    let err = String::from_utf8_lossy(&o.stderr);
    match code {
        Some(c) => assert_eq!(o.status.code(), Some(c), "{err}"),
        None => assert_ne!(o.status.code(), Some(0), "{err}"),
    }
    assert!(err.contains("error") && !err.contains("panicked"), "{err}");
    for h in hints {
        assert!(err.contains(h), "expected '{h}' in: {err}");
    }
}

/// `pqtls serve` in its own process, run in a directory with its PKI cache there (as
/// [`pqtls_in`]), on a free loopback port for 60 s at most; killed when dropped.
pub struct Serve {
    child: Child,
    /// Where it listens (`127.0.0.1:PORT`): the first line it prints.
    pub addr: String,
}

impl Serve {
    /// Starts `pqtls serve args…` in `dir`, its PKI cache in `dir/pki`; returns once it listens.
    pub fn start_in(args: &[&str], dir: &Path) -> Serve {
        let mut child = pqtls_cmd(&["serve"], &dir.join("pki"))
            .args(args)
            .args(["--listen", "127.0.0.1:0", "--duration", "60s"])
            .current_dir(dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("pqtls serve starts");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        Serve { child, addr: line.trim().to_string() }
    }

    /// `https://ADDR/path`.
    pub fn url(&self, path: &str) -> String {
        format!("https://{}/{path}", self.addr)
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The arguments of an `openssl s_client` that connects to `connect` offering only `group`,
/// verifies the server's chain against the root certificate `ca_file` for the name
/// `localhost` (a failure ends the handshake), and prints a brief summary.
pub fn s_client_verifying<'a>(connect: &'a str, group: &'a str, ca_file: &'a str) -> [&'a str; 12] {
    [
        "-connect",
        connect,
        "-servername",
        "localhost",
        "-groups",
        group,
        "-CAfile",
        ca_file,
        "-verify_return_error",
        "-verify_hostname",
        "localhost",
        "-brief",
    ]
}

/// Runs an `openssl s_client` command of a peer's root to its end, with nothing on its input;
/// returns its output, and its standard output and error as one text.
pub fn s_client_output(cmd: &mut Command) -> (Output, String) {
    let out = cmd.stdin(Stdio::null()).output().expect("running openssl s_client in the trixie root");
    let both = text(&out);
    (out, both)
}

/// The ids of a records file (`records.ndjson`), in order; none when it does not exist yet.
pub fn record_ids(records: &Path) -> Vec<String> {
    std::fs::read_to_string(records)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap()["id"].as_str().unwrap().to_string())
        .collect()
}

/// Collects `child`'s standard error (taken from it: spawn it with `Stdio::piped()`) as it
/// comes, into the returned text; the thread ends with the pipe.
pub fn collect_stderr(child: &mut Child) -> (std::sync::Arc<std::sync::Mutex<String>>, std::thread::JoinHandle<()>) {
    use std::io::Read;
    let err = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
    let (mut pipe, sink) = (child.stderr.take().expect("stderr piped"), err.clone());
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n) = pipe.read(&mut buf) {
            if n == 0 {
                break;
            }
            sink.lock().unwrap().push_str(&String::from_utf8_lossy(&buf[..n]));
        }
    });
    (err, reader)
}
