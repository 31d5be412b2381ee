//! Builds the BoringSSL engine (crates/pqtls-boring/engine, a `cdylib` of its own workspace)
//! with the same cargo, into `<target>/boring-engine`, and copies the shared object into
//! `OUT_DIR`, where `src/engine.rs` embeds it.
//!
//! Why a nested build: BoringSSL and OpenSSL export the same C symbol names, so BoringSSL must
//! not be linked into the pqtls binary; inside its own shared object (exporting only the
//! `pqb_*` functions) its symbols stay local. Cargo cannot depend on a `cdylib` directly.

use std::env;
use std::path::PathBuf;
use std::process::Command;

fn main() {
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let out_dir = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let engine = manifest_dir.join("engine");
    for path in ["src", "Cargo.toml", "Cargo.lock"] {
        println!("cargo:rerun-if-changed={}", engine.join(path).display());
    }
    // OUT_DIR is <target>/<profile>/build/<pkg>-<hash>/out.
    let target = out_dir.ancestors().nth(4).expect("OUT_DIR is <target>/<profile>/build/<pkg>/out").to_path_buf();
    let engine_target = target.join("boring-engine");
    let cargo = env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.arg("build")
        .arg("--locked")
        .arg("--manifest-path")
        .arg(engine.join("Cargo.toml"))
        .arg("--target-dir")
        .arg(&engine_target);
    // The nested cargo builds for the host with its own profile: nothing of this build
    // script's environment may leak into it (boring-sys' build script reads TARGET, OPT_LEVEL…).
    for (key, _) in env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        let keep = ["CARGO_HOME", "CARGO_MAKEFLAGS", "CARGO_NET_OFFLINE"].contains(&key)
            || key.starts_with("CARGO_REGISTRIES_")
            || key.starts_with("CARGO_HTTP_")
            || key.starts_with("CARGO_NET_");
        let drop = (key.starts_with("CARGO_") && !keep)
            || [
                "TARGET",
                "HOST",
                "OUT_DIR",
                "OPT_LEVEL",
                "DEBUG",
                "PROFILE",
                "NUM_JOBS",
                "RUSTFLAGS",
                "RUSTC_WRAPPER",
                "RUSTC_WORKSPACE_WRAPPER",
                "RUSTDOC",
                "RUSTC_LINKER",
            ]
            .contains(&key);
        if drop {
            cmd.env_remove(key);
        }
    }
    let status = cmd.status().unwrap_or_else(|e| panic!("running cargo to build the BoringSSL engine: {e}"));
    if !status.success() {
        panic!(
            "building the BoringSSL engine (cargo build --manifest-path {}) failed: {status}; it needs cmake, a C/C++ compiler and libclang (scripts/setup.sh installs them)",
            engine.join("Cargo.toml").display()
        );
    }
    let built = engine_target.join("debug").join("libpqtls_boring_engine.so");
    std::fs::copy(&built, out_dir.join("libpqtls_boring_engine.so"))
        .unwrap_or_else(|e| panic!("copying {} into OUT_DIR: {e}", built.display()));
}
