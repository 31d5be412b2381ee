//! Three stacks side by side: `pqtls insitu --stack openssl,rustls,s2n` gives records on every
//! stack whose steps add up handshake by handshake and whose sizes match the catalogue; what
//! no s2n-tls security policy expresses is refused saying why; `pqtls list` shows s2n-tls.

mod common;
use common::{ok, pqtls};
use pqtls_core::catalogue;
use serde_json::Value;

#[test]
fn insitu_on_three_stacks_steps_add_up_and_sizes_match_the_catalogue() {
    let dir = tempfile::tempdir().unwrap();
    let (json, nd) = (dir.path().join("r.json"), dir.path().join("s.ndjson"));
    #[rustfmt::skip]
    let args = [
        "insitu", "--stack", "openssl,rustls,s2n",
        // Issue 36's command: one key share each (s2n-tls' lone hybrid share with ML-DSA is
        // pqtls' composed policy, docs/stacks.md).
        "--group", "x25519,X25519MLKEM768",
        "--chain", "p256:p256,mldsa65:mldsa65",
        "--warmup", "2", "--loops", "20", "--quiet",
        "--json", json.to_str().unwrap(), "--ndjson", nd.to_str().unwrap(),
    ];
    ok(&pqtls(&args, &dir.path().join("pki")));
    let records: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 12);
    let msgs = |stack: &str, group: &str, chain: &str| -> Value {
        let r = records
            .iter()
            .find(|r| {
                r["scenario"]["stack"] == stack && r["scenario"]["group"] == group && r["scenario"]["chain"] == chain
            })
            .unwrap_or_else(|| panic!("no record for {stack} {group} {chain}"));
        let neg = &r["result"]["negotiated"];
        assert_eq!(neg["group"], group.split(',').next().unwrap(), "{stack}");
        assert_eq!(neg["cipher"], "TLS_AES_128_GCM_SHA256");
        r["result"]["bytes"]["messages"].clone()
    };
    let hybrid = catalogue::group("X25519MLKEM768").unwrap();
    let mldsa65 = catalogue::sig_alg("mldsa65").unwrap();
    for stack in ["openssl", "rustls", "s2n"] {
        let classic = msgs(stack, "x25519", "p256:p256");
        let pq = msgs(stack, "X25519MLKEM768", "mldsa65:mldsa65");
        // The server's share: the catalogue's exact size.
        let sh = |m: &Value| m["ServerHello"].as_u64().unwrap();
        assert_eq!(sh(&pq) - sh(&classic), hybrid.server_share_bytes() as u64 - 32, "{stack}");
        // The ML-DSA-65 signature: 4-byte header, scheme, length, 3309 bytes.
        assert_eq!(pq["CertificateVerify"], 4 + 4 + mldsa65.signature_bytes as u64, "{stack}");
        // The same chain on the wire on every stack.
        assert_eq!(pq["Certificate"], msgs("openssl", "X25519MLKEM768", "mldsa65:mldsa65")["Certificate"]);
    }
    assert!(records[0]["env"]["libraries"]["s2n"].as_str().unwrap().starts_with("s2n-tls 0.3"));
    // Handshake by handshake, every side's steps add up to its total.
    let lines = std::fs::read_to_string(&nd).unwrap();
    assert_eq!(lines.lines().count(), 12 * 20);
    for line in lines.lines() {
        let h: Value = serde_json::from_str(line).unwrap();
        for side in ["client", "server"] {
            let s = &h[side];
            let sum: u64 = s["steps"].as_object().unwrap().values().map(|v| v.as_u64().unwrap()).sum();
            assert_eq!(sum, s["total_cpu_ns"].as_u64().unwrap(), "{line}");
        }
    }
}

#[test]
fn what_no_s2n_policy_expresses_is_refused_saying_why() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    // A lone SecP256r1MLKEM768 share: no s2n-tls policy sends it.
    #[rustfmt::skip]
    let o = pqtls(&["insitu", "--stack", "s2n", "--group", "SecP256r1MLKEM768", "--chain", "p256:p256",
        "--loops", "5", "--quiet"], &pki);
    common::fails_with(&o, Some(1), &["no s2n-tls security policy", "--key-shares X25519MLKEM768+x25519", "openssl"]);
    // What s2n-tls lacks names the stacks that have it.
    let o = pqtls(&["insitu", "--stack", "s2n", "--group", "MLKEM768", "--loops", "5", "--quiet"], &pki);
    common::fails_with(&o, Some(1), &["MLKEM768", "openssl, rustls"]);
    let o = pqtls(&["insitu", "--stack", "s2n", "--group", "frodo640aes", "--loops", "5", "--quiet"], &pki);
    common::fails_with(&o, Some(1), &["frodo640aes", "rustls"]);
    let l = ok(&pqtls(&["list"], &pki));
    assert!(l.contains("Stacks in this build: openssl, rustls, s2n"), "{l}");
    assert!(l.contains("openssl, rustls, s2n"), "{l}");
}

/// `pqtls load --stack s2n` (pqtls serve on s2n-tls, the s2n-tls load client) measures, with the
/// chain's verification CPU recorded as not measured (s2n-tls validates inside its Certificate
/// handler: not separable), and the load table says so.
#[test]
fn load_on_s2n_records_verification_cpu_as_not_measured() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("l.json");
    #[rustfmt::skip]
    let out = ok(&pqtls(&["load", "--stack", "s2n", "--group", "X25519MLKEM768", "--chain", "mldsa65:mldsa65",
        "--requests", "20", "--warmup-time", "0s", "--json", json.to_str().unwrap()], &dir.path().join("pki")));
    assert!(out.contains("n/a (s2n)"), "{out}");
    let records: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let r = &records.as_array().unwrap()[0]["result"];
    assert_eq!(r["requests"], 20, "{r}");
    assert_eq!(r["negotiated"]["group"], "X25519MLKEM768", "{r}");
    assert_eq!(r["negotiated"]["sigalg"], "mldsa65", "{r}");
    assert!(r["client_handshake_cpu_ns_mean"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r.get("client_verify_cpu_ns_mean").is_none(), "not measurable apart on s2n-tls: {r}");
}
