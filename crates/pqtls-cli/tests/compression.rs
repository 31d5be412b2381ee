//! Certificate compression (RFC 8879) as a factor, end to end: `pqtls insitu
//! --cert-compression` on OpenSSL and rustls gives records whose server chain went as a
//! CompressedCertificate standing for exactly the Certificate of the uncompressed run, with the
//! id and label naming it; with mutual TLS the client's chain is compressed too; an algorithm a
//! stack lacks, and a chain a stack will not send compressed, are errors naming what would work.

mod common;
use common::{ok, pqtls};
use serde_json::Value;

#[test]
fn insitu_on_both_stacks_sends_compressed_certificates_as_asked() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    #[rustfmt::skip]
    let args = [
        "insitu", "--stack", "openssl,rustls", "--chain", "mldsa44:mldsa44", "--client-chain", "none,p256:p256",
        "--cert-compression", "none,zlib", "--warmup", "2", "--loops", "5", "--quiet",
        "--json", json.to_str().unwrap(),
    ];
    ok(&pqtls(&args, &dir.path().join("pki")));
    let records: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 8);
    let find = |stack: &str, mtls: &str, compression: &str| {
        records
            .iter()
            .find(|r| {
                r["scenario"]["stack"] == stack
                    && r["scenario"]["client_chain"] == mtls
                    && r["scenario"]["cert_compression"] == compression
            })
            .unwrap_or_else(|| panic!("no record for {stack} {mtls} {compression}"))
    };
    for stack in ["openssl", "rustls"] {
        for mtls in ["none", "p256:p256"] {
            let plain = &find(stack, mtls, "none")["result"];
            let zlib = find(stack, mtls, "zlib");
            assert!(zlib["id"].as_str().unwrap().ends_with("|compress=zlib"), "{}", zlib["id"]);
            assert!(zlib["label"].as_str().unwrap().contains("compress=zlib"), "{}", zlib["label"]);
            let zlib = &zlib["result"];
            assert_eq!(plain["negotiated"]["cert_compression"], "none", "{stack}");
            assert_eq!(zlib["negotiated"]["cert_compression"], "zlib", "{stack}");
            let (pm, zm) = (&plain["bytes"]["messages"], &zlib["bytes"]["messages"]);
            assert!(zm.get("Certificate").is_none() && plain["bytes"].get("compressed_certificates").is_none());
            let c = &zlib["bytes"]["compressed_certificates"]["CompressedCertificate"];
            assert_eq!(c["algorithm"], "zlib", "{stack}");
            assert_eq!(c["wire_bytes"], zm["CompressedCertificate"], "{stack}");
            assert_eq!(c["uncompressed_bytes"], pm["Certificate"], "{stack}: stands for the plain run's Certificate");
            assert!(c["wire_bytes"].as_u64().unwrap() < pm["Certificate"].as_u64().unwrap(), "{stack}: {c}");
            // The server flight is smaller by what compression saved.
            let s2c = |r: &Value| r["bytes"]["server_to_client"].as_u64().unwrap();
            assert!(s2c(zlib) < s2c(plain), "{stack}");
            if mtls != "none" {
                let cc = &zlib["bytes"]["compressed_certificates"]["ClientCompressedCertificate"];
                assert_eq!(cc["uncompressed_bytes"], pm["ClientCertificate"], "{stack}");
                assert!(cc["wire_bytes"].as_u64().unwrap() < pm["ClientCertificate"].as_u64().unwrap(), "{stack}");
            }
        }
    }
}

#[test]
fn what_a_stack_lacks_or_will_not_compress_is_refused_naming_what_would_work() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let run = |args: &[&str]| {
        let out = pqtls(args, &pki);
        assert!(!out.status.success(), "{args:?} succeeded");
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let e = run(&["insitu", "--stack", "s2n", "--chain", "p256:p256", "--cert-compression", "brotli", "--loops", "2"]);
    assert!(
        e.contains("certificate compression brotli is not available on s2n; stacks that have it: openssl, rustls"),
        "{e}"
    );
    let e = run(&["insitu", "--stack", "openssl", "--chain", "p256:p256", "--cert-compression", "lz4", "--loops", "2"]);
    assert!(e.contains("'lz4'") && e.contains("zstd"), "{e}");
    // OpenSSL sends a compressed chain only when it is smaller: ML-DSA-65's is not with zstd.
    let e = run(&[
        "insitu",
        "--stack",
        "openssl",
        "--chain",
        "mldsa65:mldsa65",
        "--cert-compression",
        "zstd",
        "--loops",
        "2",
    ]);
    assert!(
        e.contains("OpenSSL does not compress the server chain mldsa65:mldsa65 with zstd") && e.contains("rustls"),
        "{e}"
    );
}
