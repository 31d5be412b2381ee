//! BoringSSL through the `pqtls` binary, beside the three other stacks: in situ on four stacks
//! with steps adding up handshake by handshake and sizes equal to the catalogue's; Chrome's
//! ClientHello (`--client-profile chrome`) in situ, under load with a capture (layers) and in a
//! transfer, every record saying which profile; the profile refused on the stacks that lack it,
//! naming boringssl. Loopback only, or the namespaces the transfer makes as root; bounded.

mod common;
mod lab;
use common::{ok, pqtls, pqtls_in};
use pqtls_core::catalogue;
use serde_json::Value;

fn records(path: &std::path::Path) -> Vec<Value> {
    serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap()
}

/// The done-when line of issue 38: `pqtls insitu --stack openssl,rustls,s2n,boringssl` on
/// X25519MLKEM768 (with x25519's share, as s2n-tls sends it) with P-256 and ML-DSA-65 chains:
/// negotiated = requested, steps add up in every handshake, sizes are the catalogue's and the
/// same chain is the same bytes on every stack.
#[test]
fn insitu_on_four_stacks_steps_add_up_and_sizes_match_the_catalogue() {
    let dir = tempfile::tempdir().unwrap();
    let (json, nd) = (dir.path().join("r.json"), dir.path().join("s.ndjson"));
    #[rustfmt::skip]
    let args = [
        "insitu", "--stack", "openssl,rustls,s2n,boringssl",
        "--group", "X25519MLKEM768+x25519", "--key-shares", "X25519MLKEM768+x25519",
        "--chain", "p256:p256,mldsa65:mldsa65",
        "--warmup", "2", "--loops", "10", "--quiet",
        "--json", json.to_str().unwrap(), "--ndjson", nd.to_str().unwrap(),
    ];
    ok(&pqtls(&args, &dir.path().join("pki")));
    let recs = records(&json);
    assert_eq!(recs.len(), 8);
    let hybrid = catalogue::group("X25519MLKEM768").unwrap();
    let mldsa65 = catalogue::sig_alg("mldsa65").unwrap();
    let msgs = |stack: &str, chain: &str| -> Value {
        let r = recs
            .iter()
            .find(|r| r["scenario"]["stack"] == stack && r["scenario"]["chain"] == chain)
            .unwrap_or_else(|| panic!("no record for {stack} {chain}"));
        assert_eq!(r["scenario"]["client_profile"], "plain", "every record says its profile");
        let neg = &r["result"]["negotiated"];
        assert_eq!((neg["group"].as_str(), neg["hrr"].as_bool()), (Some("X25519MLKEM768"), Some(false)), "{stack}");
        assert_eq!(neg["cipher"], "TLS_AES_128_GCM_SHA256");
        r["result"]["bytes"]["messages"].clone()
    };
    let pq_cert = msgs("openssl", "mldsa65:mldsa65")["Certificate"].clone();
    for stack in ["openssl", "rustls", "s2n", "boringssl"] {
        let (classic, pq) = (msgs(stack, "p256:p256"), msgs(stack, "mldsa65:mldsa65"));
        // Two shares: the hybrid's and x25519's, each its catalogue size.
        let shares = hybrid.client_share_bytes() as u64 + 32;
        assert!(classic["ClientHello"].as_u64().unwrap() > shares, "{stack}: {classic}");
        assert_eq!(pq["ServerHello"], classic["ServerHello"], "{stack}: the same ServerHello");
        assert!(pq["ServerHello"].as_u64().unwrap() > hybrid.server_share_bytes() as u64, "{stack}");
        assert_eq!(pq["CertificateVerify"], 4 + 4 + mldsa65.signature_bytes as u64, "{stack}");
        assert_eq!(pq["Certificate"], pq_cert, "{stack}: the same chain on the wire");
    }
    let libraries = &recs[0]["env"]["libraries"];
    assert!(libraries["boringssl"].as_str().unwrap().starts_with("BoringSSL (API "), "{libraries}");
    let lines = std::fs::read_to_string(&nd).unwrap();
    assert_eq!(lines.lines().count(), 8 * 10);
    for line in lines.lines() {
        let h: Value = serde_json::from_str(line).unwrap();
        for side in ["client", "server"] {
            let s = &h[side];
            let sum: u64 = s["steps"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
            assert_eq!(sum, s["total_cpu_ns"].as_u64().unwrap(), "{line}");
        }
    }
}

/// `--client-profile plain,chrome` in situ: two records, the chrome one's id, label and
/// scenario say so; its ClientHello is larger by what GREASE adds (a GREASE suite, group,
/// share, version, signature scheme and extensions) and negotiates the same. On the other
/// stacks it is refused before anything runs (exit 1), naming boringssl; an unknown profile
/// names the known ones.
#[test]
fn the_chrome_profile_in_situ_is_recorded_and_refused_where_it_is_not() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, json) = (dir.path().join("pki"), dir.path().join("r.json"));
    #[rustfmt::skip]
    let args = [
        "insitu", "--stack", "boringssl", "--group", "X25519MLKEM768+x25519",
        "--key-shares", "X25519MLKEM768+x25519", "--client-profile", "plain,chrome",
        "--warmup", "2", "--loops", "10", "--quiet", "--json", json.to_str().unwrap(),
    ];
    ok(&pqtls(&args, &pki));
    let recs = records(&json);
    assert_eq!(recs.len(), 2);
    let (plain, chrome) = (&recs[0], &recs[1]);
    assert_eq!(
        (plain["scenario"]["client_profile"].as_str(), chrome["scenario"]["client_profile"].as_str()),
        (Some("plain"), Some("chrome"))
    );
    assert!(!plain["id"].as_str().unwrap().contains("profile"), "{}", plain["id"]);
    assert!(chrome["id"].as_str().unwrap().ends_with("|profile=chrome"), "{}", chrome["id"]);
    assert!(chrome["label"].as_str().unwrap().contains("profile=chrome"), "{}", chrome["label"]);
    let hello = |r: &Value| r["result"]["bytes"]["messages"]["ClientHello"].as_u64().unwrap();
    // At least a GREASE share (1 byte of data, 4 of header), a GREASE extension (4), a GREASE
    // suite, group, version and signature scheme (2 each).
    assert!(hello(chrome) >= hello(plain) + 5 + 4 + 8, "{} vs {}", hello(chrome), hello(plain));
    assert_eq!(chrome["result"]["negotiated"], plain["result"]["negotiated"]);

    for stack in ["openssl", "rustls", "s2n", "openssl,boringssl"] {
        #[rustfmt::skip]
        let o = pqtls(&["insitu", "--stack", stack, "--group", "x25519", "--client-profile", "chrome",
            "--loops", "5", "--quiet"], &pki);
        common::fails_with(&o, Some(1), &["client profile chrome", "stacks that have it: boringssl"]);
    }
    let o = pqtls(&["insitu", "--stack", "boringssl", "--client-profile", "firefox", "--loops", "5"], &pki);
    common::fails_with(&o, Some(1), &["firefox", "plain", "chrome"]);
}

/// A load on BoringSSL with Chrome's ClientHello and a capture (the layers measurement): every
/// transaction is matched in the capture, tshark decrypts every connection with the key log
/// pqtls wrote (GREASE and a permuted hello do not confuse it), and the record says which
/// profile. Needs root (or CAP_NET_RAW), tcpdump and tshark; 1 s at 40 transactions/s.
#[test]
fn a_load_with_a_capture_on_boringssl_sends_chromes_hello_and_is_decrypted() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let (pcap, keys) = (d.join("b.pcap"), d.join("b.keys"));
    #[rustfmt::skip]
    let args = [
        "load", "--stack", "boringssl", "--group", "X25519MLKEM768+x25519", "--key-shares", "X25519MLKEM768+x25519",
        "--client-profile", "chrome", "--chain", "mldsa44:mldsa44", "--rate", "40/s", "--duration", "1s",
        "--warmup-time", "250ms", "--new-connection", "--layers", "--capture", pcap.to_str().unwrap(),
        "--keylog", keys.to_str().unwrap(), "--json", "r.json",
    ];
    ok(&pqtls_in(&args, d));
    let recs = records(&d.join("r.json"));
    assert_eq!(recs.len(), 1);
    let r = &recs[0];
    assert_eq!((r["kind"].as_str(), r["scenario"]["client_profile"].as_str()), (Some("load"), Some("chrome")));
    assert!(r["id"].as_str().unwrap().contains("|profile=chrome"), "{}", r["id"]);
    let res = &r["result"];
    assert_eq!(res["negotiated"]["group"], "X25519MLKEM768");
    assert_eq!(res["negotiated"]["sigalg"], "mldsa44");
    let requests = res["requests"].as_u64().unwrap();
    assert!(requests > 0, "{res}");
    let c = &res["capture"];
    assert_eq!(c["matched"].as_u64(), Some(requests), "{c}");
    assert_eq!(c["anomalies"]["connections_without_keys"], 0, "{c}");
    assert!(pqtls_testkit::tshark::certificates(&pcap, &keys) as u64 >= requests);
}

/// A transfer on BoringSSL over an emulated link (as root, in namespaces it makes), full and
/// mutual TLS with Chrome's hello: negotiated as asked, the records say the profile, and
/// nothing of the lab is left.
#[test]
fn a_transfer_on_boringssl_negotiates_as_asked_and_leaves_nothing() {
    let _one = lab::one_lab_at_a_time();
    if !lab::root() {
        eprintln!("NOTICE: not root: the transfer on BoringSSL was not run");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("t.json");
    let mut cmd = lab::bin();
    #[rustfmt::skip]
    cmd.args(["transfer", "--rtt-tolerance", "5ms", "--rtt", "30ms", "--bandwidth", "20mbit",
        "--stack", "boringssl", "--group", "X25519MLKEM768+x25519", "--key-shares", "X25519MLKEM768+x25519",
        "--client-profile", "chrome", "--chain", "mldsa44:mldsa44", "--mtls", "none,mldsa44:mldsa44",
        "--size", "1KiB", "--repeat", "5", "--quiet", "--json"]).arg(&json);
    let (pid, out) = lab::run_bounded(cmd, std::time::Duration::from_secs(120));
    if lab::stopped_by_host_stalls(pid, &out) {
        return;
    }
    assert!(out.status.success(), "{}", lab::text(&out));
    let recs = records(&json);
    assert_eq!(recs.len(), 2, "{}", lab::text(&out));
    for (r, mtls) in recs.iter().zip(["none", "mldsa44:mldsa44"]) {
        assert_eq!(r["kind"], "transfer");
        assert_eq!(
            (r["scenario"]["client_profile"].as_str(), r["scenario"]["client_chain"].as_str()),
            (Some("chrome"), Some(mtls))
        );
        let neg = &r["result"]["load"]["negotiated"];
        assert_eq!((neg["group"].as_str(), neg["sigalg"].as_str()), (Some("X25519MLKEM768"), Some("mldsa44")), "{r}");
    }
    assert_eq!(lab::namespaces_of(pid), Vec::<String>::new(), "namespaces left");
}

/// BoringSSL's heap is counted through the allocator hooks it offers (the engine defines its
/// weak `OPENSSL_memory_alloc/free/get_size`): `--memory` gives allocations in the steps of
/// both sides and the record says what was counted; `--clock instructions` counts BoringSSL's
/// instructions (under callgrind where there is no hardware counter) inside the engine loaded
/// from memory.
#[test]
fn boringssls_heap_and_instructions_are_counted() {
    let dir = tempfile::tempdir().unwrap();
    let (pki, json) = (dir.path().join("pki"), dir.path().join("m.json"));
    #[rustfmt::skip]
    let args = ["insitu", "--stack", "boringssl", "--group", "X25519MLKEM768", "--chain", "mldsa65:mldsa65",
        "--memory", "--warmup", "2", "--loops", "10", "--quiet", "--json", json.to_str().unwrap()];
    ok(&pqtls(&args, &pki));
    let recs = records(&json);
    let memory = &recs[0]["result"]["memory"];
    assert!(memory["counted"].as_str().unwrap().contains("OPENSSL_memory_alloc"), "{memory}");
    for (side, step) in [("client", "client_hello"), ("server", "server_hello")] {
        let s = &memory[side]["steps"][step];
        assert!(s["allocations"].as_f64().unwrap() >= 1.0, "{side} {step}: {s}");
        assert!(s["allocated_bytes"].as_f64().unwrap() > 1000.0, "{side} {step}: an ML-KEM key or more: {s}");
    }
    let json = dir.path().join("i.json");
    #[rustfmt::skip]
    let args = ["insitu", "--stack", "boringssl", "--group", "x25519", "--chain", "p256:p256",
        "--clock", "instructions", "--loops", "3", "--quiet", "--json", json.to_str().unwrap()];
    ok(&pqtls(&args, &pki));
    let r = &records(&json)[0]["result"];
    assert_eq!(r["unit"], "instructions", "{r}");
    for side in ["client", "server"] {
        assert!(r[side]["total_cpu_ns"]["median"].as_f64().unwrap() > 100_000.0, "{side}: {}", r[side]);
    }
}
