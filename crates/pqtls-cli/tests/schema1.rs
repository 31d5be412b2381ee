//! Results written by the previous release (schema 1, a real results directory made by commit
//! a332fe9: tests/fixtures/schema1) open with `report`, `compare` and `merge`, and are resumed
//! by `run` without measuring again — nothing a user measured is lost.

mod common;

use common::pqtls;
use std::path::{Path, PathBuf};
use std::process::Output;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/schema1")
}

fn ok(o: &Output) -> String {
    let err = String::from_utf8_lossy(&o.stderr).to_string();
    assert!(o.status.success(), "pqtls failed ({:?}):\n{err}", o.status.code());
    format!("{}{err}", String::from_utf8_lossy(&o.stdout))
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &dest);
        } else {
            std::fs::copy(e.path(), &dest).unwrap();
        }
    }
}

#[test]
fn a_previous_release_store_opens_reports_compares_merges_and_resumes() {
    let tmp = tempfile::tempdir().unwrap();
    let results = tmp.path().join("results");
    copy_dir(&fixture(), &results);
    let pki = tmp.path().join("pki");
    let dir = results.join("previous-release");
    let before = std::fs::read_to_string(dir.join("records.ndjson")).unwrap();
    assert!(before.lines().all(|l| l.starts_with("{\"schema\":1,")), "the fixture is schema 1");

    let md = tmp.path().join("r.md");
    let json = tmp.path().join("r.json");
    ok(&pqtls(
        &["report", dir.to_str().unwrap(), "--markdown", md.to_str().unwrap(), "--json", json.to_str().unwrap()],
        &pki,
    ));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("X25519MLKEM768 p256:p256") && md.contains("x25519 p256:p256"), "{md}");
    let records: Vec<serde_json::Value> = serde_json::from_slice(&std::fs::read(json).unwrap()).unwrap();
    assert_eq!(records.len(), 2);
    assert_eq!(records[0]["id"], "openssl|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0");

    let out = ok(&pqtls(&["compare", dir.to_str().unwrap(), dir.to_str().unwrap()], &pki));
    assert!(out.contains("X25519MLKEM768"), "{out}");

    let merged = tmp.path().join("merged");
    ok(&pqtls(&["merge", dir.to_str().unwrap(), "--out", merged.to_str().unwrap()], &pki));
    assert_eq!(std::fs::read_to_string(merged.join("records.ndjson")).unwrap().lines().count(), 2);

    // Resumed: nothing measured again, nothing rewritten.
    for (file, name, n) in [
        ("previous-release.toml", "previous-release", 2),
        ("previous-release-threads.toml", "previous-release-threads", 1),
    ] {
        let exp = results.join(file);
        let out =
            ok(&pqtls(&["run", exp.to_str().unwrap(), "--results", results.to_str().unwrap(), "--no-progress"], &pki));
        assert!(out.contains(&format!("{n} configurations: {n} already stored, 0 measured")), "{name}: {out}");
        let after = std::fs::read_to_string(results.join(name).join("records.ndjson")).unwrap();
        assert_eq!(after.lines().count(), n, "{name}");
    }
    assert_eq!(std::fs::read_to_string(dir.join("records.ndjson")).unwrap(), before);
}
