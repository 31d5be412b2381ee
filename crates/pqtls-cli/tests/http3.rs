//! HTTP/3 (`pqtls serve --quic`, `pqtls load --quic`, `http = "3"`) as a user meets it: the
//! same load records over QUIC on loopback, third-party peers from the Debian trixie root
//! (curl 8.14 `--http3-only` against `pqtls serve --quic`; pqtls' QUIC client against nginx 1.26
//! and HAProxy 3.0), and bad input that says what would work. Every run is bounded by a request
//! count or a duration; servers are children stopped when dropped, or stop on their own.

use std::io::{BufRead, BufReader};
use std::net::UdpSocket;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

mod common;
use common::{ok, pqtls_in as pqtls, Peer, Serve};
use pqtls_core::backend::ChainFiles;
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_peers::{Root, Staged};

fn records(path: &Path) -> Vec<serde_json::Value> {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// Checks one HTTP/3 load record: `n` requests, one handshake each, every histogram holding
/// them all, the group and signature asked for, no errors.
fn check_record(r: &serde_json::Value, n: u64, group: &str, chain: &str) {
    let res = &r["result"];
    assert_eq!(r["kind"], "load");
    assert!(r["id"].as_str().unwrap().contains("|transport=quic"), "{}", r["id"]);
    assert_eq!(res["requests"], n, "{res}");
    assert_eq!(res["handshakes"], n, "one connection per request: {res}");
    assert_eq!(res["errors"], serde_json::json!([]), "every body had its exact size: {res}");
    for h in ["latency", "ttfb"] {
        assert_eq!(res[h]["count"], n, "{h}");
    }
    for layer in ["tcp", "tcp_to_tls", "tls", "tls_to_http", "http_first_byte", "http"] {
        assert_eq!(res["layers"][layer]["count"], n, "{layer}");
    }
    // No TCP under QUIC: those layers are (recorded as) nothing.
    assert!(res["layers"]["tcp"]["max_ns"].as_u64().unwrap() <= 1, "{res}");
    assert_eq!(res["negotiated"]["group"], group);
    let leaf = ChainSpec::parse(chain).unwrap().leaf;
    assert_eq!(res["negotiated"]["sigalg"], leaf.scheme);
    let messages = &res["bytes"]["messages"];
    let sum: u64 = messages.as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
    let b = &res["bytes"];
    assert_eq!(sum, b["client_to_server"].as_u64().unwrap() + b["server_to_client"].as_u64().unwrap(), "{b}");
    assert!(messages["ClientFinished"].as_u64().unwrap() > 0, "{b}");
}

#[test]
fn http3_load_against_pqtls_serve_quic_on_loopback() {
    let dir = tempfile::tempdir().unwrap();
    for (group, chain, share_bytes) in [("x25519", "p256:p256", 32), ("X25519MLKEM768", "mldsa65:mldsa65", 1216)] {
        let base = ["load", "--quic", "--stack", "rustls", "--group", group, "--chain", chain, "--warmup-time", "0s"];
        let closed = ok(&pqtls(
            &[&base[..], &["--response-size", "3KiB", "--requests", "20", "--connections", "2", "--json", "c.json"]]
                .concat(),
            dir.path(),
        ));
        assert!(closed.contains("HTTP/3"), "{closed}");
        let r = &records(&dir.path().join("c.json"))[0];
        check_record(r, 20, group, chain);
        let res = &r["result"];
        assert_eq!(res["loop_mode"], "closed");
        assert_eq!(res["stopped"], "requests");
        assert_eq!(res["server"]["requests"], 20, "the server's counters: {res}");
        assert_eq!(res["server"]["handshakes"], 20);
        assert!(res["terminator"]["version"].as_str().unwrap().contains("serve --quic"), "{res}");
        assert!(res["bytes"]["messages"]["ClientHello"].as_u64().unwrap() > share_bytes, "{res}");
        // The verification of the server's chain: part of the client's handshake CPU.
        let verify = res["client_verify_cpu_ns_mean"].as_f64().expect("verification CPU over QUIC");
        assert!(verify > 0.0 && verify < res["client_handshake_cpu_ns_mean"].as_f64().unwrap(), "{res}");
        // Open loop: 40/s for 1 s is 40 transactions due, each run to its end.
        ok(&pqtls(
            &[&base[..], &["--response-size", "1KiB", "--rate", "40/s", "--duration", "1s", "--json", "o.json"]]
                .concat(),
            dir.path(),
        ));
        let r = &records(&dir.path().join("o.json"))[0];
        check_record(r, 40, group, chain);
        assert_eq!(r["result"]["loop_mode"], "open");
    }
}

/// The datagrams the first ClientHello took over QUIC, counted on the client's socket: one for
/// an x25519 share (a ClientHello of ~300 bytes in one 1,200-byte Initial datagram), two for
/// X25519MLKEM768 + x25519 (~1,500 bytes of ClientHello); the TCP count stays absent.
#[test]
fn http3_load_counts_the_datagrams_of_the_client_hello() {
    let dir = tempfile::tempdir().unwrap();
    for (group, shares, datagrams) in [("x25519", "one", 1), ("X25519MLKEM768", "X25519MLKEM768+x25519", 2)] {
        let args = [
            "load",
            "--quic",
            "--stack",
            "rustls",
            "--group",
            group,
            "--key-shares",
            shares,
            "--chain",
            "ed25519:ed25519",
            "--warmup-time",
            "0s",
            "--response-size",
            "0",
            "--requests",
            "4",
            "--connections",
            "2",
            "--json",
            "d.json",
        ];
        ok(&pqtls(&args, dir.path()));
        let res = &records(&dir.path().join("d.json"))[0]["result"];
        assert_eq!(res["client_hello_datagrams"], datagrams, "{group} {shares}: {res}");
        assert!(res.get("client_hello_segments").is_none(), "{res}");
        let hello = res["bytes"]["messages"]["ClientHello"].as_u64().unwrap();
        assert!(hello > 1200 * (datagrams - 1) && hello < 1200 * datagrams, "{hello} B in {datagrams}: {res}");
    }
}

/// Certificate compression over HTTP/3: rustls over quinn sends the server's chain as a
/// CompressedCertificate of the asked algorithm, read from the handshake's messages on the wire
/// (`negotiated.cert_compression`, the message table); without it, a Certificate.
#[test]
fn http3_load_sends_the_chain_compressed_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    for algorithm in ["none", "zlib", "brotli", "zstd"] {
        let args = [
            "load",
            "--quic",
            "--stack",
            "rustls",
            "--group",
            "X25519MLKEM768",
            "--chain",
            "mldsa44:mldsa44",
            "--cert-compression",
            algorithm,
            "--warmup-time",
            "0s",
            "--response-size",
            "0",
            "--requests",
            "3",
            "--connections",
            "1",
            "--json",
            "z.json",
        ];
        ok(&pqtls(&args, dir.path()));
        let r = &records(&dir.path().join("z.json"))[0];
        let res = &r["result"];
        assert_eq!(res["negotiated"]["cert_compression"], algorithm, "{res}");
        let messages = &res["bytes"]["messages"];
        let (sent, not) = if algorithm == "none" {
            ("Certificate", "CompressedCertificate")
        } else {
            ("CompressedCertificate", "Certificate")
        };
        assert!(messages[sent].as_u64().unwrap() > 3000, "{algorithm}: {messages}");
        assert!(messages.get(not).is_none(), "{algorithm}: {messages}");
    }
}

/// An experiment file asks `http = ["1.1", "3"]` (the old spelling of `transport = ["tcp",
/// "quic"]`): both transports' records in one store, the QUIC one's id marked `transport=quic`;
/// the layers measurement refuses it by name.
#[test]
fn a_load_experiment_runs_http3_next_to_https() {
    let dir = tempfile::tempdir().unwrap();
    let experiment = |measurement: &str| {
        format!(
            "name = \"{measurement}\"\nmeasurement = \"{measurement}\"\n[settings]\nduration = \"1s\"\n\
             warmup_time = \"0s\"\nrequests = 6\n[matrix]\nstack = \"rustls\"\ngroup = [\"X25519MLKEM768\"]\n\
             chain = \"mldsa65:mldsa65\"\nhttp = [\"1.1\", \"3\"]\n"
        )
    };
    std::fs::write(dir.path().join("load.toml"), experiment("load")).unwrap();
    ok(&pqtls(&["run", "load.toml", "--no-progress"], dir.path()));
    let text = std::fs::read_to_string(dir.path().join("results/load/records.ndjson")).unwrap();
    let recs: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(recs.len(), 2);
    let (h3, h1): (Vec<_>, Vec<_>) = recs.iter().partition(|r| r["id"].as_str().unwrap().contains("|transport=quic"));
    assert_eq!((h3.len(), h1.len()), (1, 1));
    assert!(!h1[0]["id"].as_str().unwrap().contains("transport="), "HTTP/1.1 ids are unchanged: {}", h1[0]["id"]);
    assert!(!h1[0]["scenario"].as_object().unwrap().contains_key("http"), "no http factor: {}", h1[0]["scenario"]);
    assert_eq!(h1[0]["result"]["requests"], 6);
    check_record(h3[0], 6, "X25519MLKEM768", "mldsa65:mldsa65");
    std::fs::write(dir.path().join("layers.toml"), experiment("layers")).unwrap();
    fails_with(&pqtls(&["run", "layers.toml", "--no-progress"], dir.path()), &["transport = quic", "layers"]);
}

/// `pqtls serve --quic --listen 127.0.0.1:0` with `args` in its own process (stdout and stderr
/// piped), and the UDP address it printed.
fn serve_quic(dir: &Path, args: &[&str]) -> (std::process::Child, std::net::SocketAddr) {
    let mut server = common::pqtls_cmd(&["serve", "--quic", "--listen", "127.0.0.1:0"], &dir.join("pki"))
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(server.stdout.take().unwrap()).read_line(&mut line).unwrap();
    match line.trim().parse() {
        Ok(addr) => (server, addr),
        Err(_) => {
            let _ = server.kill();
            panic!("pqtls serve --quic printed {line:?}")
        }
    }
}

/// `pqtls serve --quic` in its own process loaded through its URL (its `/stats` over HTTP/3
/// names the group of every handshake); it stops on its own and leaves the port free.
#[test]
fn serve_quic_serves_a_url_and_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (mut server, addr) = serve_quic(
        dir.path(),
        &["--stack", "rustls", "--group", "X25519MLKEM768", "--chain", "mldsa65:mldsa65", "--duration", "8s"],
    );
    let url = format!("https://{addr}/2KiB");
    let loaded = pqtls(
        &[
            "load",
            "--quic",
            &url,
            "--stack",
            "rustls",
            "--group",
            "X25519MLKEM768",
            "--chain",
            "mldsa65:mldsa65",
            "--requests",
            "10",
            "--warmup-time",
            "0s",
            "--json",
            "u.json",
        ],
        dir.path(),
    );
    let status = server.wait().unwrap();
    let mut err = String::new();
    std::io::Read::read_to_string(&mut server.stderr.take().unwrap(), &mut err).unwrap();
    ok(&loaded);
    let r = &records(&dir.path().join("u.json"))[0];
    check_record(r, 10, "X25519MLKEM768", "mldsa65:mldsa65");
    assert_eq!(r["result"]["terminator"]["name"], "external");
    assert!(status.success(), "{err}");
    assert!(err.contains("10 handshakes") && err.contains("10 requests"), "the server's summary: {err}");
    // Nothing left: the UDP port is free again.
    UdpSocket::bind(addr).unwrap_or_else(|e| panic!("{addr} still held after serve --quic exited: {e}"));
}

/// `--keylog` over HTTP/3, on both ends: `pqtls serve --quic --keylog` and `pqtls load --quic
/// --keylog` each write the TLS secrets of every connection, and Wireshark (tshark) decrypts a
/// capture of the UDP traffic with either log — the server's Certificate in each of the three
/// connections. Needs root (or CAP_NET_RAW), tcpdump and tshark (scripts/setup.sh).
#[test]
fn http3_key_logs_of_both_ends_decrypt_the_capture_in_tshark() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = ["--stack", "rustls", "--group", "X25519MLKEM768", "--chain", "mldsa44:mldsa44"];
    let server_keys = d.join("server.keys");
    let (mut server, addr) =
        serve_quic(d, &[&cfg[..], &["--duration", "20s", "--keylog", server_keys.to_str().unwrap()]].concat());
    let pcap = d.join("h3.pcap");
    let capture = pqtls_capture::Capture::start("lo", None, &format!("udp port {}", addr.port()), &pcap)
        .expect("tcpdump on lo (needs root or CAP_NET_RAW, and tcpdump: scripts/setup.sh)");
    let url = format!("https://{addr}/1KiB");
    let loaded = pqtls(
        &[&["load", "--quic", &url][..], &cfg, &["--requests", "3", "--warmup-time", "0s", "--keylog", "client.keys"]]
            .concat(),
        d,
    );
    let stats = capture.stop().unwrap();
    let _ = server.kill();
    let _ = server.wait();
    ok(&loaded);
    assert_eq!(stats.dropped_by_kernel, 0, "{stats:?}");
    for keys in ["client.keys", "server.keys"] {
        let text = std::fs::read_to_string(d.join(keys)).unwrap();
        let handshakes = text.lines().filter(|l| l.starts_with("CLIENT_HANDSHAKE_TRAFFIC_SECRET ")).count();
        assert_eq!(handshakes, 3, "{keys}: {text}");
        assert_eq!(pqtls_testkit::tshark::quic_certificates(&pcap, &d.join(keys), addr.port()), 3, "{keys}");
    }
}

/// Refused with an `error:` line naming every hint.
fn fails_with(o: &Output, hints: &[&str]) {
    common::fails_with(o, None, hints)
}

#[test]
fn http3_bad_input_is_refused_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let cfg = ["--group", "x25519", "--chain", "p256:p256"];
    let load = |extra: &[&str]| pqtls(&[&["load", "--quic", "--requests", "2"][..], &cfg, extra].concat(), d);
    // The OpenSSL stack: rustls only, and why.
    fails_with(&load(&["--stack", "openssl"]), &["rustls stack only", "stack = rustls"]);
    fails_with(
        &pqtls(&[&["serve", "--quic", "--stack", "openssl", "--listen", "127.0.0.1:0"][..], &cfg].concat(), d),
        &["rustls stack only"],
    );
    // A UDP port another program holds.
    let held = UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = held.local_addr().unwrap().to_string();
    fails_with(
        &pqtls(
            &[&["serve", "--quic", "--stack", "rustls", "--listen", &addr, "--duration", "5s"][..], &cfg].concat(),
            d,
        ),
        &[&format!("UDP {addr} is in use"), "--listen 127.0.0.1:0"],
    );
    // A server that speaks HTTPS over TCP only (pqtls serve without --quic): no QUIC answer.
    let tcp = Serve::start_in(&["--stack", "rustls", "--group", "x25519", "--chain", "p256:p256"], d);
    let t0 = Instant::now();
    let o = pqtls(
        &[
            &["load", "--quic", &tcp.url("1KiB"), "--stack", "rustls"][..],
            &cfg,
            &["--duration", "1s", "--warmup-time", "0s", "--timeout", "1s"],
        ]
        .concat(),
        d,
    );
    fails_with(&o, &["nothing speaks HTTP/3 there", "a TCP server listens", "leave out --quic"]);
    assert!(t0.elapsed() < Duration::from_secs(20), "refused at the first handshake, not after every request");
    drop(tcp);
    // Captures of QUIC are not analysed yet (key logs are written: the test above).
    fails_with(
        &load(&["--stack", "rustls", "--capture", "c.pcap"]),
        &["--capture with --quic", "--keylog alone works"],
    );
    fails_with(&load(&["--stack", "rustls", "--http", "1.1"]), &["--quic is --transport quic", "--http 1.1"]);
    // The load runs over tcp or quic: in situ's transports are refused, saying so.
    for t in ["memory", "socketpair"] {
        fails_with(&pqtls(&[&["load", "--transport", t][..], &cfg].concat(), d), &[t, "in situ's", "tcp", "quic"]);
    }
    fails_with(&load(&["--stack", "rustls", "--tls", "false"]), &["QUIC always carries TLS"]);
    fails_with(&pqtls(&[&["load", "--http", "2"][..], &cfg].concat(), d), &["unknown transport '2'", "quic", "1.1"]);
}

// ---- third-party peers from the Debian trixie root ----

fn trixie() -> &'static Root {
    static ROOT: OnceLock<Root> = OnceLock::new();
    ROOT.get_or_init(|| {
        let path = common::root_from(
            "trixie-root.sh",
            "the Debian trixie root with curl 8.14, nginx 1.26 and HAProxy 3.0 (is the package registry reachable?)",
        );
        Root::open(path).unwrap()
    })
}

/// The PKI the interop tests and the `pqtls` children they start share.
fn pki_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")
}

fn files(group: &str, chain: &str) -> pqtls_core::backend::PkiFiles {
    let cfg = HandshakeConfig::new(
        Stack::Rustls,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    common::pki_in("pki").files_for(&cfg).unwrap()
}

fn stage(files: &ChainFiles, tag: &str) -> Staged {
    let st = trixie().stage(tag).unwrap();
    for (from, to) in [(&files.leaf_key, "key.pem"), (&files.chain, "chain.pem"), (&files.root, "root.pem")] {
        st.copy(from, to).unwrap();
    }
    st
}

fn chroot(args: &[&str]) -> Command {
    let mut c = trixie().command(args[0]);
    c.args(&args[1..]);
    c
}

/// A free UDP port on loopback (for a peer told to listen on it), below the kernel's ephemeral
/// range (`pqtls_peers::port`).
fn free_udp_port() -> u16 {
    pqtls_peers::port::free_port([127, 0, 0, 1].into(), true).unwrap()
}

/// curl 8.14 (OpenSSL 3.5's QUIC, nghttp3) `--http3-only` with X25519MLKEM768 only against
/// `pqtls serve --quic` with an ML-DSA-65 chain: the body has the asked size, and the server's
/// /stats says both handshakes negotiated X25519MLKEM768.
#[test]
fn curl_http3_fetches_from_pqtls_serve_quic() {
    let (group, chain) = ("X25519MLKEM768", "mldsa65:mldsa65");
    let st = stage(&files(group, chain).server, "curl-h3");
    let mut server = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    server
        .args(["serve", "--quic", "--stack", "rustls", "--group", group, "--chain", chain])
        .args(["--listen", "127.0.0.1:0", "--duration", "60s"])
        .env("PQTLS_PKI_DIR", pki_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut peer = Peer::spawn(&mut server, "pqtls serve --quic");
    let mut line = String::new();
    let mut stdout = BufReader::new(peer.0.take_stdout().expect("the server's stdout"));
    stdout.read_line(&mut line).unwrap();
    let port = line.trim().rsplit(':').next().unwrap().to_string();
    let curl = |path: &str| {
        let out = chroot(&[
            "curl",
            "--http3-only",
            "--curves",
            group,
            "--cacert",
            &format!("{}/root.pem", st.inside),
            "--resolve",
            &format!("localhost:{port}:127.0.0.1"),
            "--max-time",
            "20",
            "-sS",
            "-w",
            "\n%{http_version} %{size_download}",
            &format!("https://localhost:{port}{path}"),
        ])
        .output()
        .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).to_string();
        assert!(out.status.success(), "curl {path}: {text}\n{}", String::from_utf8_lossy(&out.stderr));
        let (body, tail) = text.rsplit_once('\n').unwrap();
        (body.to_string(), tail.to_string())
    };
    let (body, tail) = curl("/5KiB");
    assert_eq!(tail, "3 5120", "HTTP/3, 5 KiB");
    assert_eq!(body.len(), 5120);
    let (stats, _) = curl("/stats");
    let stats: serde_json::Value = serde_json::from_str(&stats).unwrap();
    assert_eq!(stats["handshakes"], 2, "{stats}");
    assert_eq!(stats["negotiated_groups"], serde_json::json!({ group: 2 }), "{stats}");
    assert_eq!(stats["response_bytes"], 5120, "{stats}");
}

/// `pqtls load --quic --terminator nginx`: pqtls starts nginx in the trixie root listening
/// for HTTP/3 (`listen … quic`), forwarding HTTP/1.1 to pqtls serve --plain: the group and
/// signature asked for, every request through nginx to the backend, its processes read. A
/// build without QUIC is skipped by name (and refused by name by pqtls, which this checks
/// too). HAProxy over HTTP/3 as pqtls' terminator is refused by name (it never ends the
/// chunked requests it makes of quinn's GETs: docs/quic-load.md).
#[test]
fn pqtls_starts_nginx_for_http3_and_refuses_haproxy_by_name() {
    let (nginx_h3, _) = quic_builds();
    let d = tempfile::tempdir().unwrap();
    let d = d.path();
    let base = ["load", "--quic", "--stack", "rustls", "--group", "X25519MLKEM768", "--chain", "mldsa65:mldsa65"];
    let haproxy = pqtls(&[&base[..], &["--terminator", "haproxy", "--requests", "2"]].concat(), d);
    let said = common::text(&haproxy);
    assert!(
        !haproxy.status.success() && said.contains("haproxy over HTTP/3") && said.contains("terminator = nginx"),
        "{said}"
    );
    let json = d.join("nginx.json");
    let more = ["--terminator", "nginx", "--requests", "8", "--warmup-time", "0s", "--timeout", "5s", "--json"];
    let o = pqtls(&[&base[..], &more, &[json.to_str().unwrap()]].concat(), d);
    if !nginx_h3 {
        eprintln!("skipped: nginx in the trixie root is built without --with-http_v3_module");
        assert!(!o.status.success() && common::text(&o).contains("built without QUIC"), "{}", common::text(&o));
        return;
    }
    ok(&o);
    let r = &records(&json)[0];
    check_record(r, 8, "X25519MLKEM768", "mldsa65:mldsa65");
    let res = &r["result"];
    assert_eq!(res["terminator"]["name"], "nginx", "{res}");
    assert!(res["terminator"]["backend"].as_str().unwrap().contains("pqtls serve --plain"), "{res}");
    // Every request went through to the backend; nginx's processes were read.
    assert!(res["server"]["requests"].as_u64().unwrap() >= 8, "{res}");
    assert_eq!(res["server"]["handshakes"], 0, "the backend terminates no TLS: {res}");
    assert!(res["terminator_processes"]["processes"].as_u64().unwrap() >= 1, "{res}");
}

/// Whether the trixie root's nginx and HAProxy are built with HTTP/3, from their `-V`/`-vv`.
fn quic_builds() -> (bool, bool) {
    let nginx_v = chroot(&["nginx", "-V"]).output().unwrap();
    let haproxy_vv = chroot(&["haproxy", "-vv"]).output().unwrap();
    (
        String::from_utf8_lossy(&nginx_v.stderr).contains("--with-http_v3_module"),
        String::from_utf8_lossy(&haproxy_vv.stdout).contains("+QUIC"),
    )
}

/// pqtls' QUIC client against nginx 1.26 (`listen … quic`) and HAProxy 3.0 (`quic4@`, built
/// with the OpenSSL QUIC compatibility layer: `limited-quic`) in the trixie root, for
/// X25519MLKEM768 + ML-DSA-65 and x25519 + P-256: the group and signature asked for, every body
/// exact. A peer whose build lacks QUIC is skipped by name, as its `-V`/`-vv` says at run time.
#[test]
fn pqtls_http3_client_with_nginx_and_haproxy() {
    let (nginx_h3, haproxy_quic) = quic_builds();
    let mut talked = 0;
    for (group, chain) in [("X25519MLKEM768", "mldsa65:mldsa65"), ("x25519", "p256:p256")] {
        for peer in ["nginx", "haproxy"] {
            match peer {
                "nginx" if !nginx_h3 => {
                    eprintln!("skipped: nginx in the trixie root is built without --with-http_v3_module");
                    continue;
                }
                "haproxy" if !haproxy_quic => {
                    eprintln!("skipped: HAProxy in the trixie root is built without QUIC (haproxy -vv: no +QUIC)");
                    continue;
                }
                _ => {}
            }
            let st = stage(&files(group, chain).server, &format!("{peer}-h3"));
            std::fs::create_dir_all(st.host.join("www")).unwrap();
            std::fs::write(st.host.join("www/3KiB"), vec![b'x'; 3072]).unwrap();
            let port = free_udp_port();
            let d = &st.inside;
            let mut cmd = if peer == "nginx" {
                let conf = format!(
                    "daemon off;\nmaster_process off;\nerror_log {d}/error.log;\npid {d}/nginx.pid;\nevents {{}}\n\
                     http {{\n  access_log off;\n  client_body_temp_path {d}/body;\n  proxy_temp_path {d}/proxy;\n  \
                     fastcgi_temp_path {d}/fcgi;\n  uwsgi_temp_path {d}/uwsgi;\n  scgi_temp_path {d}/scgi;\n\
                     server {{\n    listen 127.0.0.1:{port} quic;\n    ssl_certificate {d}/chain.pem;\n    \
                     ssl_certificate_key {d}/key.pem;\n    ssl_protocols TLSv1.3;\n    ssl_ecdh_curve {group};\n    \
                     location / {{ root {d}/www; }}\n  }}\n}}\n"
                );
                std::fs::write(st.host.join("nginx.conf"), conf).unwrap();
                chroot(&["nginx", "-c", &format!("{d}/nginx.conf")])
            } else {
                let both = [
                    std::fs::read(st.host.join("chain.pem")).unwrap(),
                    std::fs::read(st.host.join("key.pem")).unwrap(),
                ]
                .concat();
                std::fs::write(st.host.join("both.pem"), both).unwrap();
                let conf = format!(
                    "global\n  limited-quic\ndefaults\n  mode http\n  timeout client 10s\n  timeout connect 5s\n  \
                     timeout server 10s\nfrontend h3\n  bind quic4@127.0.0.1:{port} ssl crt {d}/both.pem alpn h3 \
                     curves {group} ssl-min-ver TLSv1.3\n  http-request return status 200 content-type \
                     application/octet-stream file {d}/www/3KiB\n"
                );
                std::fs::write(st.host.join("haproxy.cfg"), conf).unwrap();
                chroot(&["haproxy", "-db", "-f", &format!("{d}/haproxy.cfg")])
            };
            let _running = Peer::spawn(
                cmd.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()),
                &format!("{peer} in the trixie root"),
            );
            let json = st.host.join("r.json");
            let url = format!("https://localhost:{port}/3KiB");
            let args = ["load", "--quic", &url, "--stack", "rustls", "--group", group, "--chain", chain];
            let more = ["--requests", "10", "--warmup-time", "0s", "--timeout", "5s", "--json"];
            // A peer still starting answers nothing: a few tries over 30 s at most (a busy
            // machine may start it slowly; a peer that answers ends the loop at once).
            let t0 = Instant::now();
            let out = loop {
                let out = common::pqtls(&[&args[..], &more, &[json.to_str().unwrap()]].concat(), &pki_dir());
                if out.status.success() || t0.elapsed() > Duration::from_secs(30) {
                    break out;
                }
                std::thread::sleep(Duration::from_millis(300));
            };
            let log = std::fs::read_to_string(st.host.join("error.log")).unwrap_or_default();
            assert!(out.status.success(), "{peer} {group}: {}\n{log}", common::text(&out));
            let r = &records(&json)[0];
            check_record(r, 10, group, chain);
            assert_eq!(r["result"]["terminator"]["name"], "external");
            talked += 1;
        }
    }
    assert!(talked > 0, "no peer with HTTP/3 in the trixie root: nothing was tested");
}
