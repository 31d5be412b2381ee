// Exports the versions of s2n-tls and aws-lc-sys that the workspace's Cargo.lock pins (the
// ones linked), for `S2nBackend::library_version`.
use std::path::Path;

/// Versions of package `name` in a Cargo.lock, joined with "+" when there are several.
fn locked_versions(lock: &str, name: &str) -> Option<String> {
    let mut versions = Vec::new();
    for block in lock.split("[[package]]").skip(1) {
        let field = |key: &str| {
            block.lines().find_map(|l| {
                let (k, v) = l.split_once('=')?;
                (k.trim() == key).then(|| v.trim().trim_matches('"').to_string())
            })
        };
        if field("name").as_deref() == Some(name) {
            versions.extend(field("version"));
        }
    }
    (!versions.is_empty()).then(|| versions.join("+"))
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").unwrap_or_else(|_| ".".into());
    let lock_path = Path::new(&manifest).join("../../Cargo.lock");
    println!("cargo:rerun-if-changed={}", lock_path.display());
    let lock = std::fs::read_to_string(&lock_path).unwrap_or_default();
    for (name, var) in [("s2n-tls", "PQTLS_S2N_TLS_VERSION"), ("aws-lc-sys", "PQTLS_AWS_LC_SYS_VERSION")] {
        let v = locked_versions(&lock, name).unwrap_or_else(|| "unknown (no Cargo.lock entry)".into());
        println!("cargo:rustc-env={var}={v}");
    }
}
