//! Interop with a real OQS-enabled peer: oqs-provider 0.9.0 over liboqs 0.13.0, loaded into
//! the OpenSSL 3.5 of the Debian trixie root (scripts/oqs-peer.sh builds and installs it once,
//! without internet). pqtls' rustls backend (with liboqs) talks to `openssl s_server` /
//! `s_client` with the provider loaded per command, to nginx (provider through the lab-only
//! OpenSSL configuration) and to HAProxy 3.0 (provider from its global section), over
//! loopback TCP, with FrodoKEM and the OQS hybrids and Falcon-512 chains from both sides.
//! If the peer cannot be built, the tests fail saying so: they never pass without having
//! talked to it. Every peer process is killed when its test ends, also on failure.

use pqtls_core::backend::{Backend, ChainFiles, PkiFiles};
use pqtls_core::catalogue::{self, CodepointOverrides, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;

/// The trixie root with oqs-provider installed (built on first use, then < 1 s).
fn root() -> &'static Path {
    static ROOT: OnceLock<PathBuf> = OnceLock::new();
    ROOT.get_or_init(|| {
        common::root_from("oqs-peer.sh", "the OQS peer (liboqs + oqs-provider in the Debian trixie root)")
    })
}

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| common::pki_in("pki-oqs"))
}

/// The OQS groups of the studies, as oqs-provider names them (= pqtls' catalogue names).
const GROUPS: &[&str] = &["frodo640aes", "x25519_frodo640aes", "x25519_mlkem512", "p256_mlkem512"];
const CHAIN: &str = "falcon512:falcon512";
/// Loads oqs-provider for one `openssl` command.
const PROVIDERS: &[&str] = &["-provider", "oqsprovider", "-provider", "default"];

use common::{connect_when_listening, free_port, Peer};
use pqtls_peers::{Root, Site, Staged};

fn staged(tag: &str) -> Staged {
    static ROOT: OnceLock<Root> = OnceLock::new();
    ROOT.get_or_init(|| Root::open(root()).unwrap()).stage(&format!("oqs-{tag}")).unwrap()
}

fn stage(files: &ChainFiles, tag: &str) -> Staged {
    let st = staged(tag);
    for (from, to) in [(&files.leaf_key, "key.pem"), (&files.chain, "chain.pem"), (&files.root, "root.pem")] {
        st.copy(from, to).unwrap();
    }
    st
}

/// `chroot <root> args...`.
fn chroot(args: &[&str]) -> Command {
    let mut c = Command::new("chroot");
    c.arg(root()).args(args);
    c
}

/// `openssl <sub> -provider oqsprovider -provider default <args>` in the root.
fn openssl(sub: &str, args: &[&str]) -> Command {
    let mut all = vec!["openssl", sub];
    all.extend_from_slice(PROVIDERS);
    all.extend_from_slice(args);
    chroot(&all)
}

fn config(group: &str, chain: &str) -> HandshakeConfig {
    HandshakeConfig::new(
        Stack::Rustls,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap(),
    )
}

fn s_server(port: u16, st: &Staged, group: &str) -> Peer {
    let accept = format!("127.0.0.1:{port}");
    let (cert, key) = (format!("{}/chain.pem", st.inside), format!("{}/key.pem", st.inside));
    let args =
        ["-accept", &accept, "-cert", &cert, "-key", &key, "-groups", group, "-tls1_3", "-naccept", "1", "-quiet"];
    Peer::spawn(
        openssl("s_server", &args).stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()),
        "openssl s_server in the trixie root",
    )
}

/// pqtls' rustls client handshakes with the peer on `port`; returns what it negotiated.
fn rustls_client(cfg: &HandshakeConfig, files: &PkiFiles, port: u16, peer: &mut Peer) -> pqtls_core::Result<()> {
    let mut tcp = connect_when_listening(port, peer);
    let prepared = RustlsBackend::new().prepare(cfg, files)?;
    let mut client = prepared.client(&pqtls_core::backend::EndpointOptions::default())?;
    pqtls_lab::transport::over_stream(client.as_mut(), &mut tcp, true)?;
    cfg.check(&client.negotiated()?, false)
}

/// pqtls (rustls + liboqs) as the client of `openssl s_server -provider oqsprovider`, with a
/// Falcon-512 chain made by pqtls' PKI, for every OQS group.
#[test]
fn pqtls_client_with_oqs_s_server() {
    for group in GROUPS {
        let cfg = config(group, CHAIN);
        let files = pki().files_for(&cfg).unwrap();
        let st = stage(&files.server, &format!("s_server-{group}"));
        let port = free_port();
        let mut peer = s_server(port, &st, group);
        rustls_client(&cfg, &files, port, &mut peer)
            .unwrap_or_else(|e| panic!("{group} {CHAIN} against oqs-provider's s_server: {e}"));
    }
}

/// `openssl s_client -provider oqsprovider` against pqtls' rustls server: the peer verifies
/// pqtls' Falcon-512 chain and negotiates exactly the group asked, for every OQS group.
#[test]
fn oqs_s_client_with_pqtls_server() {
    for group in GROUPS {
        let cfg = config(group, CHAIN);
        let files = pki().files_for(&cfg).unwrap();
        let st = stage(&files.server, &format!("s_client-{group}"));
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let prepared = RustlsBackend::new().prepare(&cfg, &files).unwrap();
        let server = std::thread::spawn(move || -> pqtls_core::Result<pqtls_core::backend::Negotiated> {
            let (mut tcp, _) = listener.accept().map_err(|e| pqtls_core::Error::io("accept", e))?;
            tcp.set_read_timeout(Some(Duration::from_secs(20))).ok();
            let mut ep = prepared.server(&pqtls_core::backend::EndpointOptions::default())?;
            pqtls_lab::transport::over_stream(ep.as_mut(), &mut tcp, false)?;
            ep.negotiated()
        });
        let connect = format!("127.0.0.1:{port}");
        let ca = format!("{}/root.pem", st.inside);
        let (_, text) =
            common::s_client_output(&mut openssl("s_client", &common::s_client_verifying(&connect, group, &ca)));
        let negotiated = server.join().unwrap().unwrap_or_else(|e| panic!("{group}: our server: {e}\n{text}"));
        assert_eq!(negotiated.group, *group, "{text}");
        assert!(text.contains("Verification: OK"), "{group}: s_client did not verify our Falcon-512 chain:\n{text}");
        assert!(text.contains(&format!("Negotiated TLS1.3 group: {group}")), "{group}: {text}");
        assert!(text.contains("Signature type: falcon512"), "{group}: {text}");
    }
}

/// A Falcon-512 chain made by the peer's own `openssl req` (oqs-provider's encodings, keys
/// included) is verified by pqtls' client; its private key loads in pqtls' server configuration.
#[test]
fn falcon512_chain_made_by_oqs_provider_works_in_pqtls() {
    let st = staged("req");
    let d = &st.inside;
    let run = |args: &[&str]| {
        let out = openssl("req", args).stdin(Stdio::null()).output().expect("openssl req");
        assert!(out.status.success(), "openssl req {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    let (ca_key, ca) = (format!("{d}/ca.key"), format!("{d}/root.pem"));
    let (leaf_key, leaf) = (format!("{d}/key.pem"), format!("{d}/chain.pem"));
    // A self-signed Falcon-512 root, then a leaf it signs (`extra`: the CA and extensions).
    let req = |key: &str, cert: &str, subject: &str, extra: &[&str]| {
        let new = ["-x509", "-new", "-newkey", "falcon512", "-keyout", key, "-out", cert, "-nodes", "-days", "365"];
        run(&[&new[..], &["-subj", subject], extra].concat())
    };
    req(&ca_key, &ca, "/CN=oqs-provider root", &[]);
    req(
        &leaf_key,
        &leaf,
        "/CN=localhost",
        &[
            "-CA",
            &ca,
            "-CAkey",
            &ca_key,
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
            "-addext",
            "keyUsage=critical,digitalSignature",
            "-addext",
            "extendedKeyUsage=serverAuth",
        ],
    );
    let files = ChainFiles {
        leaf_key: st.host.join("key.pem"),
        chain: st.host.join("chain.pem"),
        root: st.host.join("root.pem"),
    };
    let pki_files = PkiFiles { server: files, client: None, trust: Default::default() };
    for group in ["x25519_mlkem512", "frodo640aes"] {
        // The peer serves its own chain; pqtls' client verifies it against the peer's root.
        let cfg = config(group, CHAIN);
        let port = free_port();
        let mut peer = s_server(port, &st, group);
        rustls_client(&cfg, &pki_files, port, &mut peer)
            .unwrap_or_else(|e| panic!("{group}: pqtls with the chain oqs-provider made: {e}"));
    }
}

/// A peer that offers only a group pqtls lacks gets a clear error, quickly, not a hang.
#[test]
fn a_group_pqtls_lacks_is_a_clear_error() {
    // Our client asks for x25519_mlkem512; the server has only p256_frodo640aes.
    let cfg = config("x25519_mlkem512", CHAIN);
    let files = pki().files_for(&cfg).unwrap();
    let st = stage(&files.server, "lacks");
    let port = free_port();
    let mut peer = s_server(port, &st, "p256_frodo640aes");
    let t0 = Instant::now();
    let e = rustls_client(&cfg, &files, port, &mut peer).expect_err("no common group");
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
    let msg = e.to_string();
    assert!(msg.contains("HandshakeFailure") || msg.contains("handshake failure"), "{msg}");

    // pqtls asked for a group it lacks: refused before any byte, naming what works.
    assert!(catalogue::group("p256_frodo640aes").is_err(), "p256_frodo640aes is not in pqtls' catalogue");
    let e = catalogue::group("p256_frodo640aes").unwrap_err().to_string();
    assert!(e.contains("x25519_frodo640aes"), "{e}");
}

/// A client that offers only a group pqtls lacks: pqtls' server refuses at once with a clear
/// error (no common group), and the peer is told so; nobody hangs.
#[test]
fn a_client_offering_only_a_group_pqtls_lacks_is_refused() {
    // The peer's one-time build (minutes on a fresh machine) happens here, not in the timed part.
    root();
    let cfg = config("x25519_mlkem512", CHAIN);
    let files = pki().files_for(&cfg).unwrap();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let prepared = RustlsBackend::new().prepare(&cfg, &files).unwrap();
    let server = std::thread::spawn(move || -> pqtls_core::Result<()> {
        let (mut tcp, _) = listener.accept().map_err(|e| pqtls_core::Error::io("accept", e))?;
        tcp.set_read_timeout(Some(Duration::from_secs(20))).ok();
        let mut ep = prepared.server(&pqtls_core::backend::EndpointOptions { traced: false, ..Default::default() })?;
        pqtls_lab::transport::over_stream(ep.as_mut(), &mut tcp, false).map(|_| ())
    });
    let t0 = Instant::now();
    let connect = format!("127.0.0.1:{port}");
    let (out, _) = common::s_client_output(&mut openssl(
        "s_client",
        &["-connect", &connect, "-groups", "p256_frodo640aes", "-brief"],
    ));
    let e = server.join().unwrap().expect_err("no common group");
    assert!(t0.elapsed() < Duration::from_secs(10), "took {:?}", t0.elapsed());
    assert!(!out.status.success(), "s_client should fail");
    let msg = e.to_string();
    assert!(msg.contains("handshake failed") && msg.to_lowercase().contains("group"), "{msg}");
}

/// With a code point override, the peer (built with the standard code points) no longer
/// finds the group: the override really changes what pqtls puts on the wire.
#[test]
fn an_override_changes_what_the_peer_sees() {
    let mut cfg = config("x25519_mlkem512", CHAIN);
    cfg.codepoints = CodepointOverrides::parse("x25519_mlkem512=0x2FB7").unwrap();
    let files = pki().files_for(&cfg).unwrap();
    let st = stage(&files.server, "override");
    let port = free_port();
    let mut peer = s_server(port, &st, "x25519_mlkem512");
    assert!(rustls_client(&cfg, &files, port, &mut peer).is_err(), "0x2FB7 is not oqs-provider's x25519_mlkem512");
}

fn site(st: &Staged, port: u16, group: &str) -> Site {
    Site {
        listen: format!("127.0.0.1:{port}"),
        group: group.to_string(),
        chain_pem: format!("{}/chain.pem", st.inside),
        key_pem: format!("{}/key.pem", st.inside),
        work_dir: st.inside.clone(),
    }
}

/// nginx with oqs-provider (lab-only OpenSSL configuration) terminates TLS with
/// x25519_mlkem512 and a Falcon-512 chain made by pqtls' PKI, as the layered study did.
#[test]
fn pqtls_client_with_nginx_and_oqs_provider() {
    let cfg = config("x25519_mlkem512", CHAIN);
    let files = pki().files_for(&cfg).unwrap();
    let st = stage(&files.server, "nginx");
    let port = free_port();
    std::fs::write(st.host.join("nginx.conf"), pqtls_peers::nginx_conf(&site(&st, port, "x25519_mlkem512"))).unwrap();
    let mut peer = Peer::spawn(
        chroot(&["nginx", "-c", &format!("{}/nginx.conf", st.inside)])
            .env("OPENSSL_CONF", pqtls_peers::OQS_OPENSSL_CONF)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null()),
        "nginx in the trixie root",
    );
    rustls_client(&cfg, &files, port, &mut peer).unwrap_or_else(|e| {
        let log = std::fs::read_to_string(st.host.join("error.log")).unwrap_or_default();
        panic!("handshake with nginx + oqs-provider: {e}\nnginx error.log:\n{log}")
    });
}

/// HAProxy 3.0 with oqs-provider loaded from its global section terminates TLS with
/// x25519_mlkem512 and a Falcon-512 chain made by pqtls' PKI, as the throughput study did.
#[test]
fn pqtls_client_with_haproxy_and_oqs_provider() {
    let cfg = config("x25519_mlkem512", CHAIN);
    let files = pki().files_for(&cfg).unwrap();
    let st = stage(&files.server, "haproxy");
    let port = free_port();
    let site = site(&st, port, "x25519_mlkem512");
    std::fs::copy(&files.server.leaf_key, st.host.join("chain.pem.key")).unwrap();
    assert_eq!(pqtls_peers::haproxy_key_path(&site.chain_pem), format!("{}/chain.pem.key", st.inside));
    std::fs::write(st.host.join("haproxy.cfg"), pqtls_peers::haproxy_cfg(&site, &["oqsprovider", "default"])).unwrap();
    let log = st.host.join("haproxy.log");
    let mut peer = Peer::spawn(
        chroot(&["haproxy", "-db", "-f", &format!("{}/haproxy.cfg", st.inside)])
            .stdin(Stdio::null())
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(st.host.join("haproxy.err")).unwrap()),
        "haproxy in the trixie root",
    );
    rustls_client(&cfg, &files, port, &mut peer).unwrap_or_else(|e| {
        let err = std::fs::read_to_string(st.host.join("haproxy.err")).unwrap_or_default();
        panic!("handshake with HAProxy + oqs-provider: {e}\nhaproxy stderr:\n{err}")
    });
}

/// The peer build is cached (a second run only checks its marker) and leaves nothing
/// mounted in the root. (It starts no process of its own: every step runs in the foreground.)
#[test]
fn the_peer_script_is_cached_and_leaves_nothing_mounted() {
    let root = root();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/oqs-peer.sh");
    let t0 = Instant::now();
    let out = Command::new("bash").arg(&script).output().expect("running scripts/oqs-peer.sh again");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(Path::new(String::from_utf8_lossy(&out.stdout).trim()), root);
    // Cached, not built again (about two minutes): the bound tells those apart, with room for a
    // busy machine; it does not time the check.
    assert!(t0.elapsed() < Duration::from_secs(30), "a cached run took {:?}", t0.elapsed());
    let mounts = std::fs::read_to_string("/proc/mounts").unwrap();
    let root_text = root.to_string_lossy();
    assert!(!mounts.lines().any(|l| l.contains(root_text.as_ref())), "mounted under {root_text}:\n{mounts}");
    assert!(!root.join("tmp/pqtls-oqs-build").exists(), "the build directory was left behind");
}
