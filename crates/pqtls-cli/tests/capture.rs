//! `pqtls load --capture --keylog` and `pqtls run` of a `layers` experiment on loopback, both
//! stacks: the pcap opens in tshark with the key log pqtls wrote (the Certificate of every
//! connection is seen), every client transaction is matched to the capture's, the layers add
//! up on both sides, and the cross-check's differences exist and are finite. No timing is
//! asserted. Needs root (or CAP_NET_RAW), tcpdump and tshark (scripts/setup.sh); bounded: each
//! run is 1 s at 40 transactions/s.

mod common;
use common::{ok, pqtls_in as pqtls};

use serde_json::Value;
use std::path::Path;

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a count: {v}"))
}

/// The layers of a timeline (JSON) add up to last byte − connect.
fn adds_up(t: &Value) {
    let at = |k: &str| u(&t[k]);
    let (c, d, h, f, r, l) = (
        at("connect_start_ns"),
        at("connected_ns"),
        at("client_hello_ns"),
        at("handshake_done_ns"),
        at("request_ns"),
        at("last_byte_ns"),
    );
    assert!(c <= d && d <= h && h <= f && f <= r && r <= l, "moments out of order: {t}");
    assert_eq!((d - c) + (h - d) + (f - h) + (r - f) + (l - r), l - c);
}

/// A capture's section in a load record: every client transaction matched, the differences
/// there and finite.
fn check_section(c: &Value, requests: u64, what: &str) {
    assert_eq!(u(&c["client_transactions"]), requests, "{what}: {c}");
    assert_eq!(u(&c["matched"]), requests, "{what}: every client transaction has its capture transaction: {c}");
    assert_eq!(u(&c["unmatched_client"]), 0, "{what}");
    assert_eq!(u(&c["anomalies"]["dropped_by_kernel"]), 0, "{what}");
    assert_eq!(u(&c["anomalies"]["connections_without_keys"]), 0, "{what}");
    for layer in ["tcp", "tcp_to_tls", "tls", "tls_to_http", "http_first_byte", "http"] {
        let d = &c["differences"][layer];
        assert_eq!(u(&d["n"]), requests, "{what} {layer}: {d}");
        for k in ["median_abs_ns", "p95_abs_ns", "max_abs_ns"] {
            assert!(d[k].is_u64(), "{what} {layer} {k}: {d}");
        }
        assert!(d["mean_ns"].as_f64().is_some_and(f64::is_finite), "{what} {layer}: {d}");
        assert!(u(&d["median_abs_ns"]) <= u(&d["p95_abs_ns"]) && u(&d["p95_abs_ns"]) <= u(&d["max_abs_ns"]));
        assert_eq!(u(&c["capture_layers"][layer]["count"]), requests, "{what} {layer}");
    }
}

#[test]
fn load_with_a_capture_on_both_stacks_is_decrypted_by_tshark_and_cross_checked() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for (stack, group, chain) in [("openssl", "X25519MLKEM768", "mldsa44:mldsa44"), ("rustls", "x25519", "p256:p256")] {
        let (pcap, keys, json, timelines) = (
            d.join(format!("{stack}.pcap")),
            d.join(format!("{stack}.keys")),
            d.join(format!("{stack}.json")),
            d.join(format!("{stack}.ndjson")),
        );
        let out = ok(&pqtls(
            &[
                "load",
                "--stack",
                stack,
                "--group",
                group,
                "--chain",
                chain,
                "--rate",
                "40/s",
                "--duration",
                "1s",
                "--warmup-time",
                "250ms",
                "--new-connection",
                "--layers",
                "--capture",
                pcap.to_str().unwrap(),
                "--keylog",
                keys.to_str().unwrap(),
                "--json",
                json.to_str().unwrap(),
                "--timelines",
                timelines.to_str().unwrap(),
            ],
            d,
        ));
        assert!(out.contains("capture − client") && out.contains("client transactions matched"), "{out}");
        let records: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
        let r = &records[0]["result"];
        let requests = u(&r["requests"]);
        assert!(requests > 0, "{stack}: {r}");
        check_section(&r["capture"], requests, stack);
        assert_eq!(
            std::fs::canonicalize(r["capture"]["pcap"].as_str().unwrap()).unwrap(),
            std::fs::canonicalize(&pcap).unwrap()
        );
        // The client's own timelines (with their port) add up.
        let lines = std::fs::read_to_string(&timelines).unwrap();
        assert_eq!(lines.lines().count() as u64, requests, "{stack}");
        for l in lines.lines() {
            let t: Value = serde_json::from_str(l).unwrap();
            assert!(t["client_port"].is_u64(), "{stack}: {t}");
            adds_up(&t);
        }
        // The capture's, from the packets alone, add up too.
        let layers =
            ok(&pqtls(&["layers", pcap.to_str().unwrap(), "--keylog", keys.to_str().unwrap(), "--json", "-"], d));
        let v: Value = serde_json::from_str(&layers).unwrap();
        let conns = v["analysis"]["connections"].as_array().unwrap();
        for c in conns {
            for t in c["transactions"].as_array().unwrap() {
                adds_up(&t["timeline"]);
            }
        }
        // Wireshark's dissector opens the capture with the key log pqtls wrote: a Certificate
        // for every connection in which ours decrypted one (warm-up ones included; a connection
        // still opening when the run ended has none).
        let certificates = pqtls_testkit::tshark::certificates(&pcap, &keys);
        let with_certificate = conns.iter().filter(|c| c["handshake_messages"]["Certificate"].is_u64()).count();
        assert_eq!(certificates, with_certificate, "{stack}: {} connections in the capture", conns.len());
        assert!(certificates as u64 >= requests, "{stack}");
    }
}

#[test]
fn run_of_a_layers_experiment_keeps_the_captures_and_records_the_cross_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(
        d.join("tiny.toml"),
        r#"name = "layers-tiny"
measurement = "layers"
[settings]
duration = "1s"
warmup_time = "250ms"
[matrix]
stack = ["openssl", "rustls"]
group = "x25519"
chain = "ed25519:ed25519"
rate = "40/s"
keep_alive = false
response_size = "4KiB"
"#,
    )
    .unwrap();
    ok(&pqtls(&["run", "tiny.toml", "--results", "res", "--no-progress"], d));
    let store = d.join("res/layers-tiny");
    let text = std::fs::read_to_string(store.join("records.ndjson")).unwrap();
    let records: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(records.len(), 2);
    for r in &records {
        let c = &r["result"]["capture"];
        check_section(c, u(&r["result"]["requests"]), r["id"].as_str().unwrap());
        for k in ["pcap", "keylog"] {
            let f = Path::new(c[k].as_str().unwrap());
            let captures = std::fs::canonicalize(store.join("captures")).unwrap();
            assert!(f.starts_with(&captures) && f.exists(), "{f:?}");
        }
    }
    // The report has the cross-check.
    let md = d.join("report.md");
    ok(&pqtls(&["report", store.to_str().unwrap(), "--markdown", md.to_str().unwrap()], d));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("capture vs client"), "{md}");
}
