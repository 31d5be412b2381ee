//! `pqtls resident` end to end on loopback: `pqtls serve --memory` in a process of its own holds
//! the connections on both stacks, full and resumed; the readings are at 0 and at N, the server
//! counted exactly N open connections, each keeps heap, and all are closed afterwards. The
//! open-files limit is raised when the hard limit allows, and refused with how to raise it when
//! it does not.

mod common;
use common::{fails_with, ok, pqtls_cmd};

const HELD: u64 = 50;

#[test]
fn idle_connections_are_held_counted_and_closed_on_both_stacks() {
    let pki = tempfile::tempdir().unwrap();
    let held = HELD.to_string();
    // A soft open-files limit too low for the connections: raised to the hard limit.
    let args = [
        "resident",
        "--stack",
        "openssl,rustls",
        "--group",
        "x25519",
        "--chain",
        "p256:p256",
        "--resumption",
        "false,true",
        "--held",
        &held,
        "--settle",
        "50ms",
        "--json",
        "-",
    ];
    let mut cmd = std::process::Command::new("prlimit");
    cmd.args(["--nofile=100:", "--"]).arg(env!("CARGO_BIN_EXE_pqtls")).args(args);
    let base = pqtls_cmd(&[], pki.path());
    cmd.envs(base.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
    let records: Vec<serde_json::Value> = serde_json::from_str(&ok(&cmd.output().unwrap())).unwrap();
    assert_eq!(records.len(), 4);
    for r in &records {
        let label = r["label"].as_str().unwrap();
        let res = &r["result"];
        assert_eq!(r["kind"], "resident");
        let readings = res["readings"].as_array().unwrap();
        assert_eq!(readings.iter().map(|x| x["connections"].as_u64().unwrap()).collect::<Vec<_>>(), [0, HELD]);
        // The server held exactly the connections the client held.
        assert_eq!(readings[0]["open_connections"], 0, "{label}");
        assert_eq!(readings[1]["open_connections"], HELD, "{label}");
        for x in readings {
            assert!(x["heap"]["live_bytes"].is_i64() && x["rss_bytes"].as_u64().unwrap() > 0, "{label}: {x}");
            assert_eq!(x["processes"], 1, "{label}");
        }
        let p = &res["per_connection"][0];
        assert_eq!(p["connections"], HELD);
        assert!(p["heap_bytes"].as_f64().unwrap() > 0.0, "{label}: {p}");
        assert!(p["heap_allocations"].as_f64().unwrap() > 0.0, "{label}: {p}");
        assert_eq!(res["open_after_close"], 0, "{label}: everything closed");
        assert!(res["counted"].as_str().unwrap().contains("CRYPTO_set_mem_functions"), "{res}");
        let resumed = r["scenario"]["resumption"] == "true";
        assert_eq!(res["resumed_connections"], if resumed { HELD } else { 0 }, "{label}");
        assert_eq!(res["terminator"]["name"], "pqtls");
    }
}

#[test]
fn more_connections_than_the_hard_open_files_limit_are_refused_with_how_to_raise_it() {
    let pki = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new("prlimit");
    cmd.args(["--nofile=200:200", "--"]).arg(env!("CARGO_BIN_EXE_pqtls"));
    cmd.args(["resident", "--group", "x25519", "--chain", "p256:p256", "--held", "1000"]);
    let base = pqtls_cmd(&[], pki.path());
    cmd.envs(base.get_envs().filter_map(|(k, v)| v.map(|v| (k, v))));
    fails_with(&cmd.output().unwrap(), None, &["RLIMIT_NOFILE", "hard 200", "ulimit -n"]);
}
