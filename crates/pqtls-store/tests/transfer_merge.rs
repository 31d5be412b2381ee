//! Transfer records are never sharded: `merge` takes them as whole records.

use pqtls_testkit::synthetic::transfer::{study_scenario, transfer};

#[test]
fn transfer_records_of_two_machines_merge_as_whole_records() {
    let a = transfer(&study_scenario("x25519", "p256:p256", "p256:p256", "10ms", "10", "0"));
    let b = transfer(&study_scenario("MLKEM768", "mldsa65:mldsa65", "mldsa65:mldsa65", "10ms", "10", "0"));
    assert!(!pqtls_store::shards::is_load_shard(&a));
    let tmp = tempfile::tempdir().unwrap();
    let (x, y, out) = (tmp.path().join("x.ndjson"), tmp.path().join("y.ndjson"), tmp.path().join("out"));
    std::fs::write(&x, serde_json::to_string(&a).unwrap() + "\n").unwrap();
    std::fs::write(&y, serde_json::to_string(&b).unwrap() + "\n").unwrap();
    let s = pqtls_store::merge(&[x.clone(), y], &out).unwrap();
    assert_eq!((s.records, s.joined_load_shards.len()), (2, 0));
    let (records, _) = pqtls_store::read_records(&out).unwrap();
    // Whole records, as written (floats and factor order may differ in their last digit / order
    // after a JSON round trip: compare what identifies and measures them).
    let ids: Vec<&str> = records.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, [a.id.as_str(), b.id.as_str()]);
    assert_eq!(records[1].transfer().unwrap().ttlb, b.transfer().unwrap().ttlb);
    assert_eq!(records[1].transfer().unwrap().load.latency.histogram, b.transfer().unwrap().load.latency.histogram);
    // The same point twice is refused, as for any record.
    let e = pqtls_store::merge(&[x.clone(), x], &tmp.path().join("again")).unwrap_err().to_string();
    assert!(e.contains("measured more than once"), "{e}");
}
