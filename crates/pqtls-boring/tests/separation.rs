//! BoringSSL and OpenSSL in one process, each calling its own library: the test binary links
//! OpenSSL 3.5 statically (pqtls-openssl) and loads BoringSSL's engine beside it.
//!
//! - each backend reports its own library, asked from inside that library;
//! - a BoringSSL client completes X25519MLKEM768 handshakes with an OpenSSL server and the
//!   other way round, in the same process (each side's state lives in its own library);
//! - a behaviour only BoringSSL has: its Chrome profile puts GREASE values (RFC 8701) in the
//!   ClientHello, which OpenSSL never sends, and OpenSSL's server accepts them.

use pqtls_boring::BoringBackend;
use pqtls_core::backend::{Backend, Endpoint, EndpointOptions, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, ClientProfile, HandshakeConfig};
use pqtls_openssl::OpensslBackend;
use pqtls_pki::Pki;
use pqtls_tls13::wire::{client_key_shares, handshake_messages, hello_extensions};
use std::path::Path;
use std::sync::OnceLock;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).expect("pki"))
}

fn config(stack: Stack) -> HandshakeConfig {
    let mut cfg = HandshakeConfig::new(
        stack,
        catalogue::group("X25519MLKEM768").unwrap(),
        ChainSpec::parse("p256:p256").unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    // Chrome's offer: X25519MLKEM768 and x25519, a share for each.
    let x = catalogue::group("x25519").unwrap();
    cfg.groups.push(x);
    cfg.key_shares = vec![cfg.groups[0], x];
    cfg
}

fn prepared(backend: &dyn Backend) -> Box<dyn Prepared> {
    let mut cfg = config(backend.stack());
    if backend.stack() == Stack::Boringssl {
        cfg.client_profile = ClientProfile::Chrome;
    }
    backend.prepare(&cfg, &pki().files_for(&cfg).unwrap()).unwrap()
}

/// Runs a handshake between two endpoints; returns the client's first flight.
fn handshake(c: &mut dyn Endpoint, s: &mut dyn Endpoint) -> Vec<u8> {
    let (mut to_s, mut to_c, mut first) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..10 {
        let dc = c.drive().unwrap();
        c.take_output(&mut to_s).unwrap();
        if round == 0 {
            first = to_s.clone();
        }
        s.receive(&to_s).unwrap();
        to_s.clear();
        let ds = s.drive().unwrap();
        s.take_output(&mut to_c).unwrap();
        c.receive(&to_c).unwrap();
        to_c.clear();
        if dc && ds {
            return first;
        }
    }
    panic!("no handshake in 10 rounds");
}

#[test]
fn each_backend_reports_its_own_library() {
    let boring = BoringBackend::new().library_version();
    let openssl = OpensslBackend::new().library_version();
    assert!(boring.starts_with("BoringSSL (API "), "{boring}");
    assert!(openssl.starts_with("OpenSSL 3."), "{openssl}");
}

/// GREASE code points: 0x0A0A, 0x1A1A, …, 0xFAFA (RFC 8701 §2).
fn is_grease(v: u16) -> bool {
    v & 0x0f0f == 0x0a0a && v >> 8 == v & 0xff
}

#[test]
fn boringssl_and_openssl_handshake_with_each_other_in_one_process() {
    let boring = BoringBackend::new();
    let openssl = OpensslBackend::new();
    let (b, o) = (prepared(&boring), prepared(&openssl));
    let opts = EndpointOptions::default();

    // BoringSSL client (Chrome profile) → OpenSSL server.
    let (mut c, mut s) = (b.client(&opts).unwrap(), o.server(&opts).unwrap());
    let flight = handshake(c.as_mut(), s.as_mut());
    let (cn, sn) = (c.negotiated().unwrap(), s.negotiated().unwrap());
    assert_eq!((cn.group.as_str(), sn.group.as_str()), ("X25519MLKEM768", "X25519MLKEM768"));
    assert_eq!(cn.sigalg, "ecdsa_secp256r1_sha256");
    let ch = &handshake_messages(&flight)[0].1;
    let exts = hello_extensions(ch, true).unwrap();
    assert!(exts.iter().any(|(t, _)| is_grease(*t)), "BoringSSL's Chrome profile sends a GREASE extension");
    let shares = client_key_shares(ch).unwrap();
    assert!(is_grease(shares[0].0), "a GREASE key share first: {shares:04x?}");
    assert_eq!(&shares[1..], &[(0x11EC, 1216), (0x001D, 32)]);

    // OpenSSL client → BoringSSL server: OpenSSL sends no GREASE.
    let (mut c, mut s) = (o.client(&opts).unwrap(), b.server(&opts).unwrap());
    let flight = handshake(c.as_mut(), s.as_mut());
    assert_eq!(s.negotiated().unwrap().group, "X25519MLKEM768");
    assert_eq!(c.negotiated().unwrap().sigalg, "ecdsa_secp256r1_sha256");
    let ch = &handshake_messages(&flight)[0].1;
    assert!(!hello_extensions(ch, true).unwrap().iter().any(|(t, _)| is_grease(*t)));
    assert_eq!(client_key_shares(ch).unwrap(), vec![(0x11EC, 1216), (0x001D, 32)]);

    // Application data both ways over the mixed pair.
    c.write_app(b"from OpenSSL").unwrap();
    let mut bytes = Vec::new();
    c.take_output(&mut bytes).unwrap();
    s.receive(&bytes).unwrap();
    let mut got = Vec::new();
    s.read_app(&mut got).unwrap();
    assert_eq!(got, b"from OpenSSL");
}
