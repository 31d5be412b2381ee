// Exports the versions of s2n-tls and aws-lc-sys that the workspace's Cargo.lock pins (the
// ones linked), for `S2nBackend::library_version`; compiles csrc/policy.c (the one security
// policy pqtls composes from s2n-tls' preference lists) against the internal headers of the
// s2n-tls-sys sources cargo unpacked, so its layouts are the linked library's.
use std::path::{Path, PathBuf};

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
    let s2n_version = locked_versions(&lock, "s2n-tls-sys").expect("Cargo.lock pins s2n-tls-sys");
    let sources = s2n_sources(&s2n_version);
    let aws_lc_include = std::env::vars()
        .find(|(k, _)| k.starts_with("DEP_AWS_LC_") && k.ends_with("_INCLUDE"))
        .map(|(_, v)| v)
        .expect("aws-lc-sys exports its include directory (DEP_AWS_LC_*_INCLUDE)");
    println!("cargo:rerun-if-changed=csrc/policy.c");
    cc::Build::new()
        .file("csrc/policy.c")
        .include(&aws_lc_include)
        .include(sources.join("lib"))
        .include(sources.join("lib/api"))
        .flag("-include")
        .flag(sources.join("lib/utils/s2n_prelude.h").display().to_string())
        .flag("-std=c11")
        .warnings(false)
        .compile("pqtls_s2n_policy");
}

/// The s2n-tls-sys sources cargo unpacked for `version` (its internal headers).
fn s2n_sources(version: &str) -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")))
        .expect("CARGO_HOME or HOME is set");
    let registry = home.join("registry/src");
    let dir = format!("s2n-tls-sys-{version}");
    std::fs::read_dir(&registry)
        .into_iter()
        .flatten()
        .flatten()
        .map(|index| index.path().join(&dir))
        .find(|p| p.join("lib/tls/s2n_security_policies.h").exists())
        .unwrap_or_else(|| panic!("the s2n-tls-sys {version} sources are not under {}", registry.display()))
}
