//! The code points pqtls' rustls backend puts on the wire for the OQS algorithms are
//! oqs-provider's (0.9.0 – 0.11.0, docs/oqs.md), read back from its own ClientHello; a run's
//! `CodepointOverrides` moves them, and the handshake still negotiates what was asked.

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::{self, CodepointOverrides, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_lab::transport;
use pqtls_pki::Pki;
use pqtls_rustls::RustlsBackend;
use std::path::Path;
use std::sync::OnceLock;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-codepoints"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn config(group: &str, codepoints: &str) -> HandshakeConfig {
    let mut cfg = HandshakeConfig::new(
        Stack::Rustls,
        catalogue::group(group).unwrap(),
        ChainSpec::parse("falcon512:falcon512").unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    cfg.codepoints = CodepointOverrides::parse(codepoints).unwrap();
    cfg
}

/// What a ClientHello says: supported_groups, key_share (group, length), signature_algorithms.
#[derive(Debug, Default)]
struct Hello {
    groups: Vec<u16>,
    shares: Vec<(u16, usize)>,
    schemes: Vec<u16>,
}

fn be16(b: &[u8], i: usize) -> usize {
    u16::from_be_bytes([b[i], b[i + 1]]) as usize
}

fn list16(body: &[u8]) -> Vec<u16> {
    body[2..2 + be16(body, 0)].chunks(2).map(|c| u16::from_be_bytes([c[0], c[1]])).collect()
}

fn client_hello(flight: &[u8]) -> Hello {
    assert_eq!(flight[0], 22, "a handshake record");
    let msg = &flight[5..5 + be16(flight, 3)];
    assert_eq!(msg[0], 1, "a ClientHello");
    let mut i = 4 + 2 + 32;
    i += 1 + msg[i] as usize; // session id
    i += 2 + be16(msg, i); // cipher suites
    i += 1 + msg[i] as usize; // compression methods
    let end = i + 2 + be16(msg, i);
    i += 2;
    let mut hello = Hello::default();
    while i < end {
        let (ty, len) = (be16(msg, i), be16(msg, i + 2));
        let body = &msg[i + 4..i + 4 + len];
        match ty {
            0x000a => hello.groups = list16(body),
            0x000d => hello.schemes = list16(body),
            0x0033 => {
                let mut j = 2;
                while j < body.len() {
                    let (g, l) = (be16(body, j), be16(body, j + 2));
                    hello.shares.push((g as u16, l));
                    j += 4 + l;
                }
            }
            _ => {}
        }
        i += 4 + len;
    }
    hello
}

fn hello_of(cfg: &HandshakeConfig) -> Hello {
    let files = pki().files_for(cfg).unwrap();
    let prepared = RustlsBackend::new().prepare(cfg, &files).unwrap();
    let mut client =
        prepared.client(&pqtls_core::backend::EndpointOptions { traced: false, ..Default::default() }).unwrap();
    let mut out = Vec::new();
    client.take_output(&mut out).unwrap();
    client_hello(&out)
}

#[test]
fn oqs_code_points_on_the_wire_are_oqs_providers() {
    for (group, cp, share) in [
        ("frodo640aes", 0xFE00u16, 9616usize),
        ("x25519_frodo640aes", 0xFE02, 32 + 9616),
        ("x25519_mlkem512", 0x2FB6, 800 + 32),
        ("p256_mlkem512", 0x2F4B, 65 + 800),
    ] {
        let cfg = config(group, "");
        let hello = hello_of(&cfg);
        assert_eq!(hello.groups, vec![cp], "{group}");
        assert_eq!(hello.shares, vec![(cp, share)], "{group}");
        assert_eq!(hello.schemes, vec![0xFED7], "{group}: falcon512");
        let files = pki().files_for(&cfg).unwrap();
        let h = transport::handshake(RustlsBackend::new().prepare(&cfg, &files).unwrap().as_ref(), &Default::default())
            .unwrap();
        cfg.check(&h.negotiated, false).unwrap();
    }
}

#[test]
fn an_override_moves_the_code_points_and_still_negotiates_what_was_asked() {
    let cfg = config("x25519_frodo640aes", "x25519_frodo640aes=0x2F80,falcon512=0xFE99");
    let hello = hello_of(&cfg);
    assert_eq!(hello.groups, vec![0x2F80]);
    assert_eq!(hello.shares, vec![(0x2F80, 32 + 9616)]);
    assert_eq!(hello.schemes, vec![0xFE99]);
    let files = pki().files_for(&cfg).unwrap();
    let h = transport::handshake(RustlsBackend::new().prepare(&cfg, &files).unwrap().as_ref(), &Default::default())
        .unwrap();
    // The CertificateVerify carried 0xFE99 (the only scheme offered) and is named falcon512.
    assert_eq!(h.negotiated.group, "x25519_frodo640aes");
    assert_eq!(h.negotiated.sigalg, "falcon512");
    cfg.check(&h.negotiated, false).unwrap();
    assert!(cfg.id().ends_with("|codepoints=falcon512=0xFE99,x25519_frodo640aes=0x2F80"), "{}", cfg.id());
    assert!(!config("x25519_frodo640aes", "").id().contains("codepoints"));
}
