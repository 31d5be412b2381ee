//! `pqtls insitu --memory` end to end: the binary installs its allocator hooks first, every
//! stack's record (OpenSSL, rustls, s2n-tls) gets a memory section whose steps add up, and the
//! table shows it.

mod common;
use common::{ok, pqtls};

#[test]
fn insitu_memory_records_allocations_per_step_on_both_stacks() {
    let pki = tempfile::tempdir().unwrap();
    let args = [
        "insitu",
        "--memory",
        "--stack",
        "openssl,rustls,s2n",
        "--group",
        "X25519MLKEM768",
        "--chain",
        "mldsa65:mldsa65",
        "--warmup",
        "2",
        "--loops",
        "5",
        "--json",
        "-",
    ];
    let records: Vec<serde_json::Value> = serde_json::from_str(&ok(&pqtls(&args, pki.path()))).unwrap();
    assert_eq!(records.len(), 3);
    for r in &records {
        let m = &r["result"]["memory"];
        assert!(m["counted"].as_str().unwrap().contains("CRYPTO_set_mem_functions"), "{m}");
        for side in ["client", "server"] {
            let s = &m[side];
            assert_eq!(s["handshakes"], 5);
            let total = s["total"]["allocations"].as_f64().unwrap();
            assert!(total > 0.0, "{side}: {s}");
            let sum: f64 = s["steps"].as_object().unwrap().values().map(|v| v["allocations"].as_f64().unwrap()).sum();
            assert!((sum - total).abs() < 1e-6, "{side}: steps {sum} vs total {total}");
            assert!(s["peak_live_bytes_median"].as_i64().unwrap() > 0, "{side}: {s}");
        }
    }
    // Without --memory, no section.
    let plain = ["insitu", "--group", "x25519", "--chain", "p256:p256", "--warmup", "1", "--loops", "3", "--json", "-"];
    let records: Vec<serde_json::Value> = serde_json::from_str(&ok(&pqtls(&plain, pki.path()))).unwrap();
    assert!(records.iter().all(|r| r["result"].get("memory").is_none()));
    // The terminal table.
    let table = ok(&pqtls(&args[..args.len() - 2], pki.path()));
    assert!(table.contains("Heap per step") && table.contains("peak live B"), "{table}");
}
