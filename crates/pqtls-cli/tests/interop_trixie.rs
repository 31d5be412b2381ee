//! Interop with peers nobody here wrote: `openssl s_server` / `s_client` 3.5 and nginx from a
//! Debian trixie root (scripts/trixie-root.sh, made once and cached), over loopback TCP,
//! with X25519MLKEM768 and an ML-DSA chain. If the root cannot be made (no registry), the
//! tests fail saying so: they never pass without having talked to the peer.

use pqtls_core::backend::{Backend, ChainFiles};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use std::io::Write;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

mod common;

fn trixie() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        common::root_from(
            "trixie-root.sh",
            "the Debian trixie root with openssl 3.5 and nginx (is the package registry reachable?)",
        )
    })
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| common::pki_in("pki"))
}

use common::{connect_when_listening, free_port, Peer};
use pqtls_peers::{Root, Staged};

fn root() -> &'static Root {
    static ROOT: OnceLock<Root> = OnceLock::new();
    ROOT.get_or_init(|| Root::open(trixie()).unwrap())
}

fn stage(files: &ChainFiles, tag: &str) -> Staged {
    let st = root().stage(tag).unwrap();
    for (from, to) in [(&files.leaf_key, "key.pem"), (&files.chain, "chain.pem"), (&files.root, "root.pem")] {
        st.copy(from, to).unwrap();
    }
    st
}

/// `chroot <root> args...`.
fn chroot(args: &[&str]) -> Command {
    let mut c = root().command(args[0]);
    c.args(&args[1..]);
    c
}

/// Both of pqtls' first stacks (against `openssl s_server` and `s_client`).
fn backends() -> Vec<Box<dyn Backend>> {
    vec![Box::new(OpensslBackend::new()), Box::new(pqtls_rustls::RustlsBackend::new())]
}

/// Every stack of pqtls (against nginx).
fn every_backend() -> Vec<Box<dyn Backend>> {
    let mut all = backends();
    all.push(Box::new(pqtls_s2n::S2nBackend::new()));
    all.push(Box::new(pqtls_boring::BoringBackend::new()));
    all
}

fn config(stack: Stack, group: &str, chain: &str) -> HandshakeConfig {
    HandshakeConfig::new(
        stack,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap(),
    )
}

const CASES: &[(&str, &str)] =
    &[("X25519MLKEM768", "mldsa65:mldsa65"), ("MLKEM1024", "mldsa87:mldsa87"), ("x25519", "p256:p256")];

/// pqtls' clients (OpenSSL and rustls) against `openssl s_server` 3.5.
#[test]
fn pqtls_clients_with_openssl_s_server() {
    for backend in backends() {
        for (group, chain) in CASES {
            let cfg = config(backend.stack(), group, chain);
            let files = pki().files_for(&cfg).unwrap();
            let st = stage(&files.server, "s_server");
            let port = free_port();
            let mut peer = Peer::spawn(
                chroot(&[
                    "openssl",
                    "s_server",
                    "-accept",
                    &format!("127.0.0.1:{port}"),
                    "-cert",
                    &format!("{}/chain.pem", st.inside),
                    "-key",
                    &format!("{}/key.pem", st.inside),
                    "-groups",
                    group,
                    "-tls1_3",
                    "-naccept",
                    "1",
                    "-quiet",
                ])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null()),
                "openssl s_server in the trixie root",
            );
            let mut tcp = connect_when_listening(port, &mut peer);
            let prepared = backend.prepare(&cfg, &files).unwrap();
            let mut client = prepared.client(&Default::default()).unwrap();
            pqtls_lab::transport::over_stream(client.as_mut(), &mut tcp, true)
                .unwrap_or_else(|e| panic!("{} {group} {chain} against s_server: {e}", cfg.stack));
            let n = client.negotiated().unwrap();
            cfg.check(&n, false).unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// `openssl s_client` 3.5 against pqtls' servers (OpenSSL and rustls), verifying our chain.
#[test]
fn openssl_s_client_with_pqtls_servers() {
    for backend in backends() {
        for (group, chain) in CASES {
            let cfg = config(backend.stack(), group, chain);
            let files = pki().files_for(&cfg).unwrap();
            let st = stage(&files.server, "s_client");
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let port = listener.local_addr().unwrap().port();
            let prepared = backend.prepare(&cfg, &files).unwrap();
            let server = std::thread::spawn(move || -> pqtls_core::Result<pqtls_core::backend::Negotiated> {
                let (mut tcp, _) = listener.accept().map_err(|e| pqtls_core::Error::io("accept", e))?;
                tcp.set_read_timeout(Some(Duration::from_secs(20))).ok();
                let mut ep = prepared.server(&Default::default())?;
                pqtls_lab::transport::over_stream(ep.as_mut(), &mut tcp, false)?;
                ep.negotiated()
            });
            let (connect, ca) = (format!("127.0.0.1:{port}"), format!("{}/root.pem", st.inside));
            let mut s_client = chroot(&["openssl", "s_client"]);
            s_client.args(common::s_client_verifying(&connect, group, &ca));
            let (_, text) = common::s_client_output(&mut s_client);
            let negotiated =
                server.join().unwrap().unwrap_or_else(|e| panic!("{group} {chain}: our server: {e}\n{text}"));
            assert_eq!(negotiated.group, *group);
            assert!(text.contains("Verification: OK"), "{group} {chain}: s_client did not verify our chain:\n{text}");
            assert!(text.contains("TLSv1.3"), "{text}");
            // s_client names a KEM or hybrid group "Negotiated TLS1.3 group", an ECDH one "Peer Temp Key".
            let named = text.lines().any(|l| {
                (l.starts_with("Negotiated TLS1.3 group:") || l.starts_with("Peer Temp Key:"))
                    && l.to_lowercase().contains(&group.to_lowercase())
            });
            assert!(named, "{group}: {text}");
            let leaf = ChainSpec::parse(chain).unwrap().leaf;
            assert!(text.contains(&format!("Signature type: {}", leaf.scheme)), "{text}");
        }
    }
}

/// pqtls' clients (OpenSSL, rustls, s2n-tls, BoringSSL) against nginx (Debian trixie, OpenSSL 3.5).
#[test]
fn pqtls_clients_with_nginx() {
    let cfg = config(Stack::Openssl, "X25519MLKEM768", "mldsa65:mldsa65");
    let files = pki().files_for(&cfg).unwrap();
    let st = stage(&files.server, "nginx");
    let port = free_port();
    let conf = format!(
        "daemon off;\nmaster_process off;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\nevents {{}}\n\
         http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
         server {{\n    listen 127.0.0.1:{port} ssl;\n    ssl_certificate {d}/chain.pem;\n    ssl_certificate_key {d}/key.pem;\n\
         ssl_protocols TLSv1.3;\n    ssl_ecdh_curve X25519MLKEM768;\n    location / {{ return 200 \"ok\\n\"; }}\n  }}\n}}\n",
        d = st.inside
    );
    std::fs::write(st.host.join("nginx.conf"), conf).unwrap();
    let mut peer = Peer::spawn(
        chroot(&["nginx", "-c", &format!("{}/nginx.conf", st.inside)])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "nginx in the trixie root",
    );
    for backend in every_backend() {
        let mut cfg = cfg.clone();
        cfg.stack = backend.stack();
        if matches!(cfg.stack, Stack::S2n | Stack::Boringssl) {
            // BoringSSL's TLS 1.3 suites are not configurable; s2n-tls' client policy with a lone
            // hybrid share and ML-DSA offers AES-128 first.
            cfg.cipher = catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap();
        }
        let mut tcp = connect_when_listening(port, &mut peer);
        let prepared = backend.prepare(&cfg, &files).unwrap();
        let mut client = prepared.client(&Default::default()).unwrap();
        pqtls_lab::transport::over_stream(client.as_mut(), &mut tcp, true).unwrap_or_else(|e| {
            let log = std::fs::read_to_string(st.host.join("error.log")).unwrap_or_default();
            panic!("{} handshake with nginx: {e}\nnginx error.log:\n{log}", cfg.stack)
        });
        cfg.check(&client.negotiated().unwrap(), false).unwrap();
    }
}

/// `pqtls serve` (both stacks) fetched from by a third-party client, `openssl s_client` 3.5:
/// an HTTP/1.1 request over X25519MLKEM768 + ML-DSA-65, the response has the asked size, the
/// server's key log names the connection, and the server stops on its own (`--duration`).
#[test]
fn openssl_s_client_fetches_from_pqtls_serve() {
    let dir = std::env::temp_dir().join(format!("pqtls-serve-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for stack in ["openssl", "rustls"] {
        let (group, chain) = ("X25519MLKEM768", "mldsa65:mldsa65");
        let cfg = config(Stack::parse(stack).unwrap(), group, chain);
        let files = pki().files_for(&cfg).unwrap();
        let st = stage(&files.server, "serve");
        let keylog = dir.join(format!("{stack}.keys"));
        let mut server = Command::new(env!("CARGO_BIN_EXE_pqtls"));
        server
            .args(["serve", "--stack", stack, "--group", group, "--chain", chain, "--cipher", "TLS_AES_256_GCM_SHA384"])
            .args(["--listen", "127.0.0.1:0", "--workers", "2", "--duration", "60s", "--keylog"])
            .arg(&keylog)
            .env("PQTLS_PKI_DIR", Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki"))
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut peer = Peer::spawn(&mut server, "pqtls serve");
        let mut line = String::new();
        // Kept open until the server is stopped.
        let mut stdout = std::io::BufReader::new(peer.0.take_stdout().expect("the server's stdout"));
        std::io::BufRead::read_line(&mut stdout, &mut line).unwrap();
        let addr = line.trim().to_string();
        assert!(addr.starts_with("127.0.0.1:"), "pqtls serve printed {line:?}");
        let mut client = chroot(&[
            "openssl",
            "s_client",
            "-connect",
            &addr,
            "-groups",
            group,
            "-CAfile",
            &format!("{}/root.pem", st.inside),
            "-verify_return_error",
            "-quiet",
        ]);
        let mut child = client.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        child
            .stdin
            .as_mut()
            .unwrap()
            .write_all(b"GET /4KiB HTTP/1.1\r\nHost: pqtls\r\nConnection: close\r\n\r\n")
            .unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.starts_with("HTTP/1.1 200 OK"), "{stack}: {text}\n{}", String::from_utf8_lossy(&out.stderr));
        let body = text.split("\r\n\r\n").nth(1).unwrap_or("");
        assert_eq!(body.len(), 4096, "{stack}");
        let keys = std::fs::read_to_string(&keylog).unwrap();
        assert!(
            keys.contains("CLIENT_HANDSHAKE_TRAFFIC_SECRET ") && keys.contains("SERVER_TRAFFIC_SECRET_0 "),
            "{keys}"
        );
        drop(peer);
    }
    let _ = std::fs::remove_dir_all(&dir);
}
