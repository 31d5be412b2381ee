//! The Kubernetes manifests in deploy/k8s/ (docs/batch.md) are valid against the Kubernetes
//! API schema: kubernetes-validate (PyPI; its schemas ship in the package, so it works
//! offline) in strict mode, which also refuses fields the API does not have. Installed by
//! `PQTLS_SETUP_TESTS=1 scripts/setup.sh`; where it is missing this test fails saying so.
//! And what the schema cannot know: each Job's `--shard K/N` uses its `completions` as N.

use std::path::{Path, PathBuf};
use std::process::Command;

fn manifests() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/k8s");
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml"))
        .collect();
    v.sort();
    assert!(v.len() >= 2, "the Indexed Job manifests are in {}", dir.display());
    v
}

fn validate(files: &[&Path]) -> std::process::Output {
    Command::new("kubernetes-validate").arg("--strict").args(files).output().unwrap_or_else(|e| {
        panic!(
            "kubernetes-validate could not run ({e}): install it with `PQTLS_SETUP_TESTS=1 scripts/setup.sh` (or \
             `python3 -m pip install kubernetes-validate`)"
        )
    })
}

#[test]
fn the_indexed_job_manifests_are_valid_against_the_kubernetes_api_schema() {
    let files = manifests();
    let o = validate(&files.iter().map(PathBuf::as_path).collect::<Vec<_>>());
    let out = format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr));
    assert!(o.status.success(), "{out}");
    for f in &files {
        assert!(out.contains(&format!("{} passed", f.display())), "{out}");
    }

    // The validator does refuse a field the API does not have (a misspelling of completionMode).
    let tmp = tempfile::tempdir().unwrap();
    let bad = tmp.path().join("bad.yaml");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    std::fs::write(&bad, text.replace("completionMode:", "completionMod:")).unwrap();
    let o = validate(&[&bad]);
    assert!(!o.status.success(), "a misspelt field passed: {}", String::from_utf8_lossy(&o.stdout));
}

#[test]
fn each_job_shards_by_its_completions() {
    for f in manifests() {
        let text = std::fs::read_to_string(&f).unwrap();
        let completions: u32 = text
            .lines()
            .find_map(|l| l.trim().strip_prefix("completions:"))
            .and_then(|v| v.split('#').next()?.trim().parse().ok())
            .unwrap_or_else(|| panic!("{}: no completions", f.display()));
        let parallelism: Option<u32> =
            text.lines().find_map(|l| l.trim().strip_prefix("parallelism:")?.split('#').next()?.trim().parse().ok());
        assert!(text.contains("completionMode: Indexed"), "{}", f.display());
        // `--shard $((JOB_COMPLETION_INDEX + 1))/N` or `--shard $K/N` with K from the index.
        let code: String = text
            .lines()
            .filter(|l| !l.trim_start().starts_with('#'))
            .map(|l| l.split(" #").next().unwrap_or(""))
            .collect::<Vec<_>>()
            .join("\n");
        let n: Vec<u32> = code
            .split("--shard ")
            .skip(1)
            .map(|s| {
                let after = s.split_once('/').expect("--shard K/N").1;
                after.chars().take_while(char::is_ascii_digit).collect::<String>().parse().expect("N")
            })
            .collect();
        assert_eq!(n, vec![completions], "{}: --shard K/N with N = completions", f.display());
        assert!(text.contains("JOB_COMPLETION_INDEX + 1"), "{}: shards are 1-based", f.display());
        if text.contains("pqtls load") {
            assert_eq!(parallelism, Some(completions), "{}: load shards must run together", f.display());
        }
    }
}
