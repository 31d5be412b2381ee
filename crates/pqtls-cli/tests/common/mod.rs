//! What the interop suites share: the peers' root (made by a script, once per test binary)
//! and the lab's PKI with every key implementation this build has. Running and staging peers
//! is pqtls-peers' (`Root`, `Staged`, `Supervised`): the same code as `--via`.

#![allow(dead_code)] // each suite uses a part

use pqtls_peers::Supervised;
use pqtls_pki::Pki;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
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

/// A free port on loopback (for a peer told to listen on it).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
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
