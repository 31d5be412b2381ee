//! `pqtls transfer --transport quic` as a process, as root, in namespaces it makes itself:
//! HTTP/3 transfers through the network lab negotiate as asked, the delay emulator delays UDP
//! (the last byte is no earlier than the round trips the model counts), the rounds are counted,
//! `initcwnd` is quinn's initial window, a token lifts the 3× limit on a second contact,
//! nothing of the lab is left; what QUIC cannot do is a clear error. Every run is bounded in time.

mod lab;

use lab::{bin, namespaces_of, one_lab_at_a_time, root, run_bounded, stopped_by_host_stalls, text};
use std::time::Duration;

/// `pqtls transfer` over QUIC through a 20 ms, 100 Mbit/s lab (X25519MLKEM768 + ML-DSA-44,
/// rustls) with `more` flags, as root; its two records and the process id. `None` without root,
/// or when the machine stalled under more transfers than the run may measure again (the
/// handling checked).
fn two_quic_points(more: &[&str]) -> Option<(u32, Vec<serde_json::Value>)> {
    if !root() {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let mut cmd = bin();
    cmd.args(["transfer", "--transport", "quic", "--stack", "rustls", "--rtt", "20ms", "--bandwidth", "100mbit"]);
    cmd.args(["--rtt-tolerance", "5ms", "--group", "X25519MLKEM768", "--chain", "mldsa44:mldsa44"]);
    cmd.args(more).args(["--quiet", "--json"]).arg(&json);
    let (pid, out) = run_bounded(cmd, Duration::from_secs(90));
    if stopped_by_host_stalls(pid, &out) {
        return None;
    }
    assert!(out.status.success(), "{}", text(&out));
    let recs: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(recs.len(), 2, "{}", text(&out));
    Some((pid, recs))
}

/// Two points on one link: quinn's default initial MTU (1,200) and 1,452 bytes; the key log
/// has the secrets of every connection.
#[test]
fn a_quic_transfer_through_the_lab_negotiates_as_asked_and_counts_its_rounds() {
    let _one = one_lab_at_a_time();
    let keys = tempfile::tempdir().unwrap();
    let keylog = keys.path().join("k.log");
    let Some((pid, recs)) = two_quic_points(&[
        "--initcwnd",
        "20",
        "--quic-initial-mtu",
        "default,1452",
        "--size",
        "10KiB",
        "--repeat",
        "5",
        "--keylog",
        keylog.to_str().unwrap(),
    ]) else {
        return;
    };
    let logged = std::fs::read_to_string(&keylog).unwrap();
    let handshakes = logged.lines().filter(|l| l.starts_with("CLIENT_HANDSHAKE_TRAFFIC_SECRET ")).count();
    assert!(handshakes >= 10, "5 transfers per point, warm-up ones besides: {handshakes} in the key log");
    let r = &recs[0];
    assert!(r["id"].as_str().unwrap().contains("|transport=quic|"), "{r}");
    let x = &r["result"];
    let load = &x["load"];
    assert_eq!(load["negotiated"]["group"], "X25519MLKEM768", "{r}");
    assert_eq!(load["negotiated"]["sigalg"], "mldsa44", "{r}");
    assert_eq!(load["requests"], 5);
    assert_eq!(load["handshakes"], 5);
    assert!(load["server"]["handshakes"].as_u64().unwrap() >= 5, "{r}");
    assert_eq!(x["link"]["accepted"], true);
    // initcwnd 20 is quinn's initial window: 20 × 1,200 bytes, on both sides.
    let q = &x["quic"];
    assert_eq!(q["model"]["server_initial_window_bytes"], 24_000, "{q}");
    assert_eq!(q["model"]["client_initial_window_bytes"], 24_000, "{q}");
    // quinn's counters: the ClientHello with an ML-KEM share fills two Initial datagrams of at
    // least 1,200 bytes; the server sent the whole chain.
    let c = &q["handshake"];
    assert!(c["client_datagrams"].as_u64().unwrap() >= 2, "{c}");
    assert!(c["client_bytes"].as_u64().unwrap() >= 2 * 1200, "{c}");
    let server_flight: u64 = ["ServerHello", "EncryptedExtensions", "Certificate", "CertificateVerify", "Finished"]
        .iter()
        .map(|m| load["bytes"]["messages"][m].as_u64().unwrap())
        .sum();
    assert!(c["server_bytes"].as_u64().unwrap() > server_flight, "{c} vs {server_flight}");
    // The rounds: no tcp layer; the ~7.9 KB flight does not fit 3 × 2,400 bytes, so the
    // handshake takes two round trips whatever the window.
    let rounds = x["rounds"].as_array().unwrap();
    let layers: Vec<&str> = rounds.iter().map(|l| l["layer"].as_str().unwrap()).collect();
    assert_eq!(layers, ["tls", "http", "total"]);
    assert_eq!(rounds[0]["predicted"], 2, "{rounds:?}");
    // The emulator delays UDP: the last byte comes no earlier than the round trips counted.
    let total_rounds = rounds[2]["predicted"].as_u64().unwrap();
    assert!(x["ttlb"]["p50_ns"].as_u64().unwrap() >= total_rounds * 20_000_000, "{x}");
    assert!(x["emulator"]["packets"].as_u64().unwrap() > 0);
    // At an initial MTU of 1,452 the two Initial datagrams carry 2,652 bytes: 3 × that holds
    // the flight, one round trip fewer, as the model says and the lab measures.
    let big = &recs[1]["result"];
    assert!(recs[1]["id"].as_str().unwrap().contains("|quic_mtu=1452"), "{}", recs[1]["id"]);
    assert_eq!(big["quic"]["model"]["datagram_bytes"], 1452);
    assert_eq!(big["quic"]["model"]["server_initial_window_bytes"], 20 * 1452);
    let tls = |x: &serde_json::Value| {
        let k = x["rounds"].as_array().unwrap().iter().find(|k| k["layer"] == "tls").unwrap().clone();
        (k["measured"].as_f64().unwrap(), k["predicted"].as_u64().unwrap())
    };
    let ((m1200, p1200), (m1452, p1452)) = (tls(x), tls(big));
    assert_eq!((p1200, p1452), (2, 1), "the model");
    assert_eq!(m1200.round() as u64, p1200, "measured {m1200:.2} round trips at 1,200 bytes");
    assert_eq!(m1452.round() as u64, p1452, "measured {m1452:.2} round trips at 1,452 bytes");
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left");
}

/// A second contact (`quic_token = true`): every connection offers the address-validation token
/// its predecessor received, the server counts each as validated, and the ML-DSA-44 flight
/// (~7.9 KB, over the 3 × 2,400-byte budget of a first contact) leaves in one round — as the
/// model predicts for each.
#[test]
fn a_token_lifts_the_3x_limit_on_a_second_contact() {
    let _one = one_lab_at_a_time();
    let Some((pid, recs)) = two_quic_points(&["--quic-token", "false,true", "--size", "0", "--repeat", "5"]) else {
        return;
    };
    let tls = |x: &serde_json::Value| {
        let k = x["rounds"].as_array().unwrap().iter().find(|k| k["layer"] == "tls").unwrap().clone();
        (k["measured"].as_f64().unwrap(), k["predicted"].as_u64().unwrap())
    };
    // First contact: no tokens asked or counted; two rounds.
    let (first, second) = (&recs[0]["result"], &recs[1]["result"]);
    assert!(first["quic"].get("tokens").is_none(), "{}", first["quic"]);
    assert_eq!(first["quic"]["model"]["address_validated"], false);
    // Second contact: every connection of the run (warm-up included) came with a valid token.
    assert!(recs[1]["id"].as_str().unwrap().contains("|quic_token"), "{}", recs[1]["id"]);
    let t = &second["quic"]["tokens"];
    assert!(t["connections"].as_u64().unwrap() >= 5, "{t}");
    assert_eq!(t["validated"], t["connections"], "{t}");
    assert_eq!(second["quic"]["model"]["address_validated"], true);
    assert_eq!(second["load"]["requests"], 5);
    let ((m1, p1), (m2, p2)) = (tls(first), tls(second));
    assert_eq!((p1, p2), (2, 1), "the model");
    assert_eq!(m1.round() as u64, p1, "measured {m1:.2} round trips on a first contact");
    assert_eq!(m2.round() as u64, p2, "measured {m2:.2} round trips with a token");
    assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left");
}

#[test]
fn what_quic_cannot_do_is_a_clear_error() {
    let base = ["transfer", "--group", "x25519", "--chain", "p256:p256", "--repeat", "1", "--rtt", "20ms"];
    // Refused before anything runs; the rest when the point is measured (as root).
    let mut cases = vec![
        (vec!["--transport", "quic", "--stack", "openssl"], "rustls stack only"),
        (vec!["--transport", "quic", "--initcwnd", "0"], "initcwnd 0"),
        (vec!["--transport", "quic", "--stack", "rustls", "--quic-initial-mtu", "1000"], "give 1200"),
    ];
    if root() {
        cases.push((vec!["--quic-initial-mtu", "1452"], "applies to QUIC"));
        cases.push((vec!["--quic-token", "true"], "applies to QUIC"));
        cases.push((vec!["--transport", "socketpair"], "transport socketpair is in situ's"));
    }
    for (args, expect) in cases {
        let mut c = bin();
        c.args(base).args(&args);
        let (pid, out) = run_bounded(c, Duration::from_secs(60));
        let t = text(&out);
        assert!(!out.status.success(), "{args:?} was accepted: {t}");
        assert!(t.contains(expect), "{args:?}: {t}");
        assert!(!t.contains("panicked"), "{args:?}: {t}");
        assert_eq!(namespaces_of(pid), Vec::<String>::new(), "namespaces left after {args:?}");
    }
}
