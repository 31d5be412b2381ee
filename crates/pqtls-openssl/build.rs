// Which OpenSSL this crate is built against, for `build_info()` (and through it `--version`
// and every record's env.libraries): openssl-sys passes the installation's version number
// and include directory (DEP_OPENSSL_*). Refuses OpenSSL older than 3.5 (no ML-KEM/ML-DSA).
// From the include directory: the features the build disabled (OPENSSL_NO_* of
// configuration.h) and, for the build scripts/openssl.sh makes, its configure line.
use std::{env, fs, path::PathBuf};

const MIN_VERSION_NUMBER: u64 = 0x3_05_00_00_0;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    let out = PathBuf::from(env::var_os("OUT_DIR").expect("cargo sets OUT_DIR"));
    let include = env::var("DEP_OPENSSL_INCLUDE").unwrap_or_default();
    let version_hex = env::var("DEP_OPENSSL_VERSION_NUMBER").unwrap_or_default();
    let version = u64::from_str_radix(&version_hex, 16).unwrap_or(0);
    if version < MIN_VERSION_NUMBER {
        panic!(
            "\n\npqtls needs OpenSSL 3.5 or newer (ML-KEM, ML-DSA, X25519MLKEM768), but the OpenSSL \
             openssl-sys found (include directory '{include}') is {}.{}.{}.\n\
             Run scripts/openssl.sh (scripts/setup.sh does) for pqtls' own build, or point OPENSSL_DIR \
             at an OpenSSL 3.5+ installation: OPENSSL_DIR=/opt/openssl-3.5 cargo build --release\n\n",
            version >> 28,
            (version >> 20) & 0xff,
            (version >> 4) & 0xff,
        );
    }

    let include = PathBuf::from(include);
    let configuration = include.join("openssl").join("configuration.h");
    println!("cargo:rerun-if-changed={}", configuration.display());
    let mut disabled: Vec<String> = fs::read_to_string(&configuration)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim_start_matches('#').trim().strip_prefix("define OPENSSL_NO_"))
        .filter_map(|rest| rest.split_whitespace().next())
        .map(|name| name.to_ascii_lowercase())
        .collect();
    disabled.sort();
    disabled.dedup();

    // scripts/openssl.sh writes pqtls-build.txt next to include/ ("configure: ./Configure ...").
    let root = include.parent().map(PathBuf::from).unwrap_or_default();
    let stamp = root.join("pqtls-build.txt");
    println!("cargo:rerun-if-changed={}", stamp.display());
    let configure = fs::read_to_string(&stamp)
        .ok()
        .and_then(|s| s.lines().find_map(|l| l.strip_prefix("configure: ").map(str::to_string)));

    let code = format!(
        "/// The installation openssl-sys linked (OPENSSL_DIR).\n\
         pub(crate) const BUILD_ROOT: &str = {root:?};\n\
         /// OPENSSL_NO_* of its configuration.h, lower case (e.g. \"ec_nistp_64_gcc_128\").\n\
         pub(crate) const BUILD_DISABLED: &[&str] = &{disabled:?};\n\
         /// Its configure line when scripts/openssl.sh built it.\n\
         pub(crate) const BUILD_CONFIGURE: Option<&str> = {configure:?};\n",
        root = root.display().to_string(),
    );
    fs::write(out.join("build_info.rs"), code).expect("writing build_info.rs to OUT_DIR");
}
