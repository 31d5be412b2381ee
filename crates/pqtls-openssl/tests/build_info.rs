//! The linked OpenSSL is a production-grade 3.5+ build, and says so.

use pqtls_core::backend::Backend;
use pqtls_openssl::{build_info, OpensslBackend};

#[test]
fn the_linked_openssl_is_3_5_or_newer() {
    let b = build_info();
    assert!(b.version_number >= 0x3050_0000, "{}: pqtls needs OpenSSL 3.5+", b.version);
    assert!(b.version.starts_with("OpenSSL 3."), "{}", b.version);
}

#[test]
fn the_linked_openssl_has_the_production_configuration() {
    let b = build_info();
    assert!(
        b.has_ec_nistp_64_gcc_128(),
        "{}: built without enable-ec_nistp_64_gcc_128, so P-384/P-521 run the generic code (~7x slower than \
         production builds); disabled: {:?}",
        b.identity(),
        b.disabled
    );
    assert!(!b.disabled.iter().any(|d| d == "asm"), "{}: built with no-asm", b.identity());
    let options = b.options_vs_defaults();
    assert!(options.iter().any(|o| o == "enable-ec_nistp_64_gcc_128"), "{options:?}");
    if let Some(line) = &b.configure {
        assert!(line.contains("enable-ec_nistp_64_gcc_128"), "{line}");
        assert!(!line.contains("no-asm"), "{line}");
        // What configuration.h says agrees with the configure line: nothing enabled beyond it.
        for o in options.iter().filter(|o| o.starts_with("enable-")) {
            assert!(line.split_whitespace().any(|w| w == o), "{o} not in {line}");
        }
    }
    assert!(b.cflags.starts_with("compiler: "), "{}", b.cflags);
    assert!(b.cflags.contains("-O3") || b.cflags.contains("-O2"), "not an optimised build: {}", b.cflags);
}

#[test]
fn records_and_version_carry_the_build_identity() {
    let b = build_info();
    let v = OpensslBackend::new().library_version();
    assert_eq!(v, b.identity());
    assert!(v.starts_with(&b.version), "{v}");
    assert!(v.contains(&b.cflags), "{v}");
    assert!(!v.contains(&b.built_on), "the build date is not part of the identity: {v}");
}
