//! ClientHello padding (RFC 7685) as a factor, end to end: `pqtls insitu
//! --client-hello-padding 512` on OpenSSL pads a hello of 256–511 bytes to exactly 512 and
//! leaves a shorter one alone, with the id and label naming the factor; the stacks without
//! padding, QUIC and sizes no library pads to are refused naming what would work.

mod common;
use common::{ok, pqtls};
use serde_json::Value;

#[test]
fn openssl_pads_a_hello_of_256_to_511_bytes_to_512_and_leaves_a_shorter_one_alone() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    #[rustfmt::skip]
    let args = [
        "insitu", "--stack", "openssl", "--group", "secp384r1,x25519", "--chain", "ed25519:ed25519",
        "--client-hello-padding", "none,512", "--warmup", "1", "--loops", "3", "--quiet",
        "--json", json.to_str().unwrap(),
    ];
    ok(&pqtls(&args, &dir.path().join("pki")));
    let records: Value = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let records = records.as_array().unwrap();
    assert_eq!(records.len(), 4);
    let find = |group: &str, padding: &str| {
        records
            .iter()
            .find(|r| r["scenario"]["group"] == group && r["scenario"]["client_hello_padding"] == padding)
            .unwrap_or_else(|| panic!("no record for {group} {padding}"))
    };
    let hello = |r: &Value| r["result"]["bytes"]["messages"]["ClientHello"].as_u64().unwrap();
    // secp384r1's 97-byte share puts OpenSSL's hello between 256 and 511 bytes: padded to 512.
    let (plain, padded) = (find("secp384r1", "none"), find("secp384r1", "512"));
    assert!((256..512).contains(&hello(plain)), "{}", hello(plain));
    assert_eq!(hello(padded), 512);
    assert!(!plain["id"].as_str().unwrap().contains("ch_pad"), "{}", plain["id"]);
    assert!(padded["id"].as_str().unwrap().ends_with("|ch_pad=512"), "{}", padded["id"]);
    assert!(padded["label"].as_str().unwrap().contains("hello-pad=512B"), "{}", padded["label"]);
    // Only the client's hello grows: the server's flight is the same.
    let s2c = |r: &Value| r["result"]["bytes"]["server_to_client"].as_u64().unwrap();
    assert_eq!(s2c(plain), s2c(padded));
    let c2s = |r: &Value| r["result"]["bytes"]["client_to_server"].as_u64().unwrap();
    assert_eq!(c2s(padded) - c2s(plain), 512 - hello(plain));
    // x25519's hello is under 256 bytes: RFC 7685 leaves it as it is, as OpenSSL does for cURL.
    let (plain, padded) = (find("x25519", "none"), find("x25519", "512"));
    assert!(hello(plain) < 256, "{}", hello(plain));
    assert_eq!(hello(padded), hello(plain));
}

#[test]
fn stacks_without_padding_quic_and_other_sizes_are_refused_naming_what_would_work() {
    let dir = tempfile::tempdir().unwrap();
    let pki = dir.path().join("pki");
    let run = |args: &[&str]| {
        let out = pqtls(args, &pki);
        assert!(!out.status.success(), "{args:?} succeeded");
        let e = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(e.contains("error") && !e.contains("panicked"), "{e}");
        e
    };
    for stack in ["rustls", "s2n", "boringssl"] {
        let e = run(&["insitu", "--stack", stack, "--chain", "p256:p256", "--client-hello-padding", "512"]);
        assert!(e.contains("client_hello_padding = 512 (RFC 7685"), "{e}");
        assert!(e.contains(&format!("is not available on {stack}")) && e.contains("stacks that pad: openssl"), "{e}");
    }
    let e = run(&["insitu", "--stack", "rustls", "--transport", "quic", "--client-hello-padding", "512"]);
    assert!(
        e.contains("over QUIC") && e.contains("1200 bytes") && e.contains("stack = openssl over another transport"),
        "{e}"
    );
    let e = run(&["insitu", "--stack", "openssl", "--client-hello-padding", "1024"]);
    assert!(e.contains("1024 bytes: a ClientHello can be padded only to 512") && e.contains("Give 512 or none"), "{e}");
    let e = run(&["insitu", "--stack", "openssl", "--client-hello-padding", "lots"]);
    assert!(e.contains("'lots'") && e.contains("none") && e.contains("512"), "{e}");
}
