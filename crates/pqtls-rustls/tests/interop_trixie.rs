//! Interop with software nobody here wrote: `openssl s_server` / `s_client` 3.5 from a Debian
//! trixie root (scripts/trixie-root.sh), over loopback TCP, against pqtls' rustls endpoints.
//! If the root cannot be made (no registry, no root privileges), the test fails and says so.

use pqtls_core::backend::{Backend, Endpoint};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn trixie_root() -> PathBuf {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/trixie-root.sh");
    let out = Command::new("bash").arg(&script).output().expect("running scripts/trixie-root.sh");
    assert!(
        out.status.success(),
        "could not make the Debian trixie root for interop tests (is the Debian package registry reachable? are we root?): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

/// A process killed (and reaped) when dropped, even if the test fails.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A directory inside the root holding the chain files, removed when dropped.
struct Staged {
    host: PathBuf,
    inside: String,
}

impl Drop for Staged {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.host);
    }
}

fn pki() -> &'static Pki {
    static PKI: std::sync::OnceLock<Pki> = std::sync::OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn stage(root: &Path, cfg: &HandshakeConfig, tag: &str) -> Staged {
    let files = pki().files_for(cfg).unwrap();
    let inside = format!("/tmp/pqtls-interop-{}-{tag}", std::process::id());
    let host = root.join(inside.trim_start_matches('/'));
    std::fs::create_dir_all(&host).unwrap();
    std::fs::copy(&files.server.chain, host.join("chain.pem")).unwrap();
    std::fs::copy(&files.server.leaf_key, host.join("leaf.key")).unwrap();
    std::fs::copy(&files.server.root, host.join("root.pem")).unwrap();
    Staged { host, inside }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// Runs one endpoint over a blocking socket until it reports the handshake complete.
fn pump(ep: &mut dyn Endpoint, sock: &mut TcpStream) -> pqtls_core::Result<()> {
    sock.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::new();
    let mut done = ep.drive()?;
    loop {
        out.clear();
        ep.take_output(&mut out)?;
        if !out.is_empty() {
            sock.write_all(&out).map_err(|e| pqtls_core::Error::io("writing to the peer", e))?;
        }
        if done {
            return Ok(());
        }
        let n = sock.read(&mut buf).map_err(|e| pqtls_core::Error::io("reading from the peer", e))?;
        if n == 0 {
            return Err(pqtls_core::Error::Other("the peer closed the connection".into()));
        }
        ep.receive(&buf[..n])?;
        done = ep.drive()?;
    }
}

const CASES: &[(&str, &str)] =
    &[("X25519MLKEM768", "mldsa65:mldsa65"), ("x25519", "p256:p256"), ("MLKEM768", "mldsa44:mldsa44")];

fn config(group: &str, chain: &str) -> HandshakeConfig {
    HandshakeConfig::new(
        Stack::Rustls,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap(),
    )
}

#[test]
fn rustls_client_against_openssl_s_server_from_trixie() {
    let root = trixie_root();
    for (group, chain) in CASES {
        let cfg = config(group, chain);
        let staged = stage(&root, &cfg, "server");
        let port = free_port();
        let _server = Killed(
            Command::new("chroot")
                .arg(&root)
                .args(["openssl", "s_server", "-quiet", "-tls1_3", "-naccept", "1", "-groups", group])
                .args(["-accept", &format!("127.0.0.1:{port}")])
                .args(["-cert", &format!("{}/chain.pem", staged.inside)])
                .args(["-key", &format!("{}/leaf.key", staged.inside)])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("starting openssl s_server in the trixie root"),
        );
        let start = Instant::now();
        let mut sock = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(s) => break s,
                Err(e) if start.elapsed() < Duration::from_secs(10) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(50));
                }
                Err(e) => panic!("s_server did not listen on {port}: {e}"),
            }
        };
        let prepared = RustlsBackend::new().prepare(&cfg, &pki().files_for(&cfg).unwrap()).unwrap();
        let mut client = prepared.client(true).unwrap();
        pump(client.as_mut(), &mut sock).unwrap_or_else(|e| panic!("{group} {chain}: {e}"));
        let neg = client.negotiated().unwrap();
        assert_eq!(neg.group, *group);
        assert_eq!(neg.sigalg, cfg.chain.leaf.scheme);
        assert_eq!(neg.cipher, "TLS_AES_256_GCM_SHA384");
    }
}

#[test]
fn openssl_s_client_from_trixie_against_rustls_server() {
    let root = trixie_root();
    for (group, chain) in CASES {
        let cfg = config(group, chain);
        let staged = stage(&root, &cfg, "client");
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let client = Command::new("chroot")
            .arg(&root)
            .args(["openssl", "s_client", "-tls1_3", "-groups", group, "-servername", "localhost"])
            .args(["-verify_hostname", "localhost", "-verify_return_error"])
            .args(["-connect", &format!("127.0.0.1:{port}")])
            .args(["-CAfile", &format!("{}/root.pem", staged.inside)])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting openssl s_client in the trixie root");
        let mut client = Killed(client);
        listener.set_nonblocking(false).unwrap();
        let (mut sock, _) = listener.accept().unwrap();
        let prepared = RustlsBackend::new().prepare(&cfg, &pki().files_for(&cfg).unwrap()).unwrap();
        let mut server = prepared.server(true).unwrap();
        pump(server.as_mut(), &mut sock).unwrap_or_else(|e| panic!("{group} {chain}: {e}"));
        drop(sock);
        let mut stdout = String::new();
        if let Some(mut o) = client.0.stdout.take() {
            o.read_to_string(&mut stdout).unwrap();
        }
        let status = client.0.wait().unwrap();
        assert!(stdout.contains("Verify return code: 0 (ok)"), "{group} {chain}: {status}\n{stdout}");
        // s_client names a KEM group "Negotiated TLS1.3 group", an ECDH one "Peer Temp Key".
        let (out, g) = (stdout.to_lowercase(), group.to_lowercase());
        assert!(
            out.contains(&format!("negotiated tls1.3 group: {g}")) || out.contains(&format!("peer temp key: {g},")),
            "{group} {chain}:\n{stdout}"
        );
        assert_eq!(server.negotiated().unwrap().group, *group);
    }
}

/// pqtls' rustls client against nginx (Debian trixie, OpenSSL 3.5) terminating TLS.
#[test]
fn rustls_client_against_nginx_from_trixie() {
    let root = trixie_root();
    let cfg = config("X25519MLKEM768", "mldsa65:mldsa65");
    let staged = stage(&root, &cfg, "nginx");
    let port = free_port();
    let conf = format!(
        "daemon off;\nmaster_process off;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\nevents {{}}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{\n    listen 127.0.0.1:{port} ssl;\n    ssl_certificate {d}/chain.pem;\n    ssl_certificate_key {d}/leaf.key;\n\
         ssl_protocols TLSv1.3;\n    ssl_ecdh_curve X25519MLKEM768;\n    location / {{ return 200 \"ok\\n\"; }}\n  }}\n}}\n",
        d = staged.inside
    );
    std::fs::write(staged.host.join("nginx.conf"), conf).unwrap();
    let _nginx = Killed(
        Command::new("chroot")
            .arg(&root)
            .args(["nginx", "-c", &format!("{}/nginx.conf", staged.inside)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("starting nginx in the trixie root"),
    );
    let start = Instant::now();
    let mut sock = loop {
        match TcpStream::connect(("127.0.0.1", port)) {
            Ok(s) => break s,
            Err(_) if start.elapsed() < Duration::from_secs(10) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => {
                let log = std::fs::read_to_string(staged.host.join("error.log")).unwrap_or_default();
                panic!("nginx did not listen on {port}: {e}\n{log}")
            }
        }
    };
    let prepared = RustlsBackend::new().prepare(&cfg, &pki().files_for(&cfg).unwrap()).unwrap();
    let mut client = prepared.client(true).unwrap();
    pump(client.as_mut(), &mut sock).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(staged.host.join("error.log")).unwrap_or_default();
        panic!("handshake with nginx: {e}\nnginx error.log:\n{log}")
    });
    cfg.check(&client.negotiated().unwrap(), false).unwrap();
}
