//! In situ over QUIC: a handshake between quinn-proto endpoints in memory on the rustls
//! backend's prepared configuration — what was negotiated, the steps, the datagrams and packets
//! per type, the CRYPTO bytes against the TLS messages over TCP, the amplification budget.

use pqtls_core::backend::{Backend, EndpointOptions, Prepared};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::quic::{QuicHandshaker, QuicWire, HANDSHAKE, INITIAL};
use pqtls_core::trace::{HsType, SideSample};
use pqtls_core::transport::Handshake;
use pqtls_lab::transport;
use pqtls_pki::Pki;
use pqtls_quic::insitu::Driver;
use pqtls_rustls::RustlsBackend;
use std::path::Path;
use std::sync::OnceLock;

fn pki() -> &'static Pki {
    static PKI: OnceLock<Pki> = OnceLock::new();
    PKI.get_or_init(|| {
        Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-quic-insitu"))
            .expect("pki")
            .with_factories(pqtls_rustls::key_factories())
    })
}

fn prepared(group: &str, chain: &str) -> (HandshakeConfig, Box<dyn Prepared>) {
    let cfg = HandshakeConfig::new(
        Stack::Rustls,
        catalogue::group(group).unwrap(),
        ChainSpec::parse(chain).unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    let files = pki().files_for(&cfg).unwrap();
    let p = RustlsBackend::new().prepare(&cfg, &files).unwrap();
    (cfg, p)
}

fn traced() -> EndpointOptions {
    EndpointOptions { traced: true, ..Default::default() }
}

fn wire(h: &Handshake) -> &QuicWire {
    h.quic.as_ref().expect("a QUIC handshake has its quic section")
}

fn wrote(side: &SideSample, m: HsType) -> u64 {
    side.wrote.iter().filter(|(t, _)| *t == m).map(|(_, b)| u64::from(*b)).sum()
}

/// What every QUIC handshake must show, whatever the configuration.
fn check_invariants(h: &Handshake, group: &str) {
    assert_eq!(h.negotiated.group, group, "negotiated group");
    assert_eq!(h.negotiated.version, "TLSv1.3");
    for (name, side) in [("client", &h.client), ("server", &h.server)] {
        let steps: u64 = side.steps.values().sum();
        assert_eq!(steps, side.total_cpu_ns, "{name}: steps add up to the side's total");
        assert!(side.steps.contains_key("client_hello"), "{name}: {:?}", side.steps.keys());
    }
    for (name, d) in [("client→server", &wire(h).client_to_server), ("server→client", &wire(h).server_to_client)] {
        assert_eq!(d.datagram_sizes_bytes.len() as u64, d.datagrams, "{name}");
        assert_eq!(d.datagram_sizes_bytes.iter().sum::<u64>(), d.datagram_bytes, "{name}");
        assert_eq!(d.packet_bytes.values().sum::<u64>(), d.datagram_bytes, "{name}: bytes per packet type add up");
        assert_eq!(d.flights.iter().sum::<u64>(), d.datagrams, "{name}: flights add up");
        assert_eq!(d.not_handshake_data_bytes + d.crypto_bytes, d.datagram_bytes, "{name}");
    }
    // CRYPTO bytes are exactly the TLS messages each side wrote.
    let msgs = |s: &SideSample| s.wrote.iter().map(|(_, b)| u64::from(*b)).sum::<u64>();
    assert_eq!(wire(h).client_to_server.crypto_bytes, msgs(&h.client));
    assert_eq!(wire(h).server_to_client.crypto_bytes, msgs(&h.server));
    // Every datagram carrying a client Initial is padded to at least 1,200 bytes (RFC 9000 §14.1).
    let c = &wire(h).client_to_server;
    let first = c.flights[0] as usize;
    for size in &c.datagram_sizes_bytes[..first] {
        assert!(*size >= 1200, "client Initial datagram of {size} bytes: {:?}", c.datagram_sizes_bytes);
    }
    // The server never exceeds its anti-amplification budget.
    let a = &wire(h).amplification;
    assert!(a.sent_before_validation_bytes <= a.limit_bytes, "{a:?}");
    assert_eq!(a.limit_bytes, 3 * a.received_before_validation_bytes);
    assert!(wire(h).server_to_client.packets[INITIAL] >= 1 && wire(h).server_to_client.packets[HANDSHAKE] >= 1);
}

/// x25519 + P-256: the ClientHello fits one Initial datagram, the server's whole flight fits
/// its budget, and the handshake takes the 2 rounds TLS over TCP does.
#[test]
fn x25519_p256_fits_one_initial_and_two_rounds() {
    let (cfg, p) = prepared("x25519", "p256:p256");
    let h = &Driver.handshake(p.as_ref(), &traced()).unwrap();
    check_invariants(&h, cfg.expected_group().name);
    check_against_tcp(&h, &cfg, p.as_ref());
    assert_eq!(wire(h).client_to_server.flights[0], 1, "{:?}", wire(h).client_to_server);
    assert_eq!(wire(h).rounds, 2);
    assert!(!wire(h).amplification.limited, "{:?}", wire(h).amplification);
    assert_eq!(wire(h).amplification.client_flights_to_send_all, 1);
}

/// X25519MLKEM768 + ML-DSA-65 with an intermediate: the ClientHello needs two Initial
/// datagrams, and the server's ~16 KB flight does not fit 3 × 2,400 bytes: it sends exactly its
/// budget, waits for the client's next flight (which validates the address), then the rest —
/// one round more than TCP.
#[test]
fn mlkem768_mldsa65_needs_two_initials_and_waits_on_amplification() {
    let (cfg, p) = prepared("X25519MLKEM768", "mldsa65:mldsa65:mldsa65");
    let h = &Driver.handshake(p.as_ref(), &traced()).unwrap();
    check_invariants(&h, cfg.expected_group().name);
    check_against_tcp(&h, &cfg, p.as_ref());
    assert_eq!(h.negotiated.sigalg, "mldsa65");
    let c = &wire(h).client_to_server;
    assert_eq!(c.flights[0], 2, "{c:?}");
    assert_eq!(c.packets[INITIAL], 3, "two Initials with the ClientHello, one with the ACK of the server's: {c:?}");
    let a = &wire(h).amplification;
    assert_eq!(a.received_before_validation_bytes, 2 * 1200, "{a:?}");
    assert_eq!(a.sent_before_validation_bytes, a.limit_bytes, "{a:?}");
    assert!(a.limited && a.client_flights_to_send_all == 2, "{a:?}");
    assert_eq!(wire(h).rounds, 3);
    assert_eq!(wire(h).server_to_client.flights[0] * 1200, a.limit_bytes, "{:?}", wire(h).server_to_client);
}

/// QUIC carries the same TLS messages as TCP but for what RFC 9001 changes: no
/// legacy_session_id (32 bytes fewer in the ClientHello and the ServerHello echo), and the
/// quic_transport_parameters extension in the ClientHello and the EncryptedExtensions.
fn check_against_tcp(h: &Handshake, cfg: &HandshakeConfig, p: &dyn Prepared) {
    let tcp = transport::handshake(p, &traced()).unwrap();
    let (cq, sq) = (&wire(h).client_to_server, &wire(h).server_to_client);
    assert!(cq.transport_parameters_bytes > 4 && sq.transport_parameters_bytes > 4);
    assert_eq!(
        wrote(&h.client, HsType::ClientHello),
        wrote(&tcp.client, HsType::ClientHello) - 32 + cq.transport_parameters_bytes,
        "ClientHello"
    );
    assert_eq!(wrote(&h.server, HsType::ServerHello), wrote(&tcp.server, HsType::ServerHello) - 32, "ServerHello");
    assert_eq!(
        wrote(&h.server, HsType::EncryptedExtensions),
        wrote(&tcp.server, HsType::EncryptedExtensions) + sq.transport_parameters_bytes,
        "EncryptedExtensions"
    );
    assert_eq!(wrote(&h.server, HsType::Certificate), wrote(&tcp.server, HsType::Certificate), "Certificate");
    assert_eq!(wrote(&h.server, HsType::Finished), wrote(&tcp.server, HsType::Finished), "Finished");
    // A fixed-size signature (ML-DSA) gives the same CertificateVerify; a DER one (ECDSA) one
    // within its possible lengths: 4 (header) + 2 (scheme) + 2 (length) + at most
    // `signature_bytes`, each INTEGER a byte shorter per leading zero byte (1/256 each), so two
    // handshakes can differ by 3 bytes and more (8 bytes shorter is a 2^-32 event).
    let (q, t) = (wrote(&h.server, HsType::CertificateVerify), wrote(&tcp.server, HsType::CertificateVerify));
    let leaf = &cfg.chain.leaf;
    if leaf.variable_signature {
        let max = 8 + leaf.signature_bytes as u64;
        for n in [q, t] {
            assert!((max - 8..=max).contains(&n), "CertificateVerify {n}, expected {}..={max}", max - 8);
        }
    } else {
        assert_eq!(q, t, "CertificateVerify");
    }
    assert_eq!(wrote(&h.client, HsType::Finished), wrote(&tcp.client, HsType::Finished));
}

/// A configuration not prepared by the rustls backend is refused by name.
#[test]
fn a_stack_other_than_rustls_is_refused() {
    struct Other;
    impl Prepared for Other {
        fn client(&self, _: &EndpointOptions) -> pqtls_core::Result<Box<dyn pqtls_core::backend::Endpoint>> {
            unreachable!("the QUIC driver makes no TLS endpoint")
        }
        fn server(&self, _: &EndpointOptions) -> pqtls_core::Result<Box<dyn pqtls_core::backend::Endpoint>> {
            unreachable!("the QUIC driver makes no TLS endpoint")
        }
    }
    let e = Driver.handshake(&Other, &traced()).unwrap_err().to_string();
    assert!(e.contains("rustls stack only") && e.contains("stack = rustls"), "{e}");
}

/// Every handshake of one configuration writes the same bytes: quinn's random reserved
/// ("GREASE") transport parameter (0–15 random bytes under a random id, which nginx 1.26 misreads)
/// is left out, on both sides (`session::without_grease`). With it, 30 handshakes would all
/// have the same ClientHello size with odds of 16^-29.
#[test]
fn handshake_sizes_are_exact_without_the_grease_parameter() {
    let (_, p) = prepared("x25519", "p256:p256");
    let sizes: std::collections::BTreeSet<[u64; 4]> = (0..30)
        .map(|_| {
            let h = Driver.handshake(p.as_ref(), &traced()).unwrap();
            let w = wire(&h);
            [
                wrote(&h.client, HsType::ClientHello),
                wrote(&h.server, HsType::EncryptedExtensions),
                w.client_to_server.transport_parameters_bytes,
                w.server_to_client.transport_parameters_bytes,
            ]
        })
        .collect();
    assert_eq!(sizes.len(), 1, "ClientHello, EncryptedExtensions, both transport parameters: {sizes:?}");
}
