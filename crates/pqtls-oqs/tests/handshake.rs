//! In-memory rustls handshakes with this crate's groups and signature algorithms, over
//! chains made by the PKI with the `OqsKeys` factory.

use pqtls_core::catalogue::{self, CodepointOverrides};
use pqtls_core::config::ChainSpec;
use pqtls_oqs::{signing_key, OqsKeys};
use pqtls_pki::{Pki, Role};
use rustls::crypto::{aws_lc_rs, CryptoProvider, SupportedKxGroup};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::sign::{CertifiedKey, SigningKey, SingleCertAndKey};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, SignatureScheme};
use std::fs;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use x509_cert::der::Decode;

/// One PKI per test process, shared by the tests (SLH-DSA and Falcon keys are slow to make).
fn pki() -> &'static Pki {
    static DIR: OnceLock<tempfile::TempDir> = OnceLock::new();
    static PKI: OnceLock<Pki> = OnceLock::new();
    let dir = DIR.get_or_init(|| tempfile::tempdir().expect("tempdir"));
    PKI.get_or_init(|| Pki::open(dir.path()).expect("open").with_factory(Arc::new(OqsKeys)))
}

fn provider(group: &'static dyn SupportedKxGroup, codepoints: &CodepointOverrides) -> Arc<CryptoProvider> {
    let base = aws_lc_rs::default_provider();
    Arc::new(CryptoProvider {
        kx_groups: vec![group],
        signature_verification_algorithms: pqtls_oqs::webpki_algorithms(codepoints),
        ..base
    })
}

/// The group named `name` with the code point `codepoints` give it.
fn kx(name: &str, codepoints: &CodepointOverrides) -> &'static dyn SupportedKxGroup {
    let g = catalogue::group(name).expect("catalogue");
    pqtls_oqs::group(g, codepoints.group_code_point(g)).expect(name)
}

fn pem_blocks(path: &Path) -> Vec<Vec<u8>> {
    let text = fs::read_to_string(path).expect("read PEM");
    let mut out = Vec::new();
    let mut b64 = String::new();
    let mut inside = false;
    for line in text.lines() {
        if line.starts_with("-----BEGIN") {
            inside = true;
            b64.clear();
        } else if line.starts_with("-----END") {
            inside = false;
            out.push(openssl::base64::decode_block(&b64).expect("base64"));
        } else if inside {
            b64.push_str(line.trim());
        }
    }
    out
}

/// Records the scheme the server signs CertificateVerify with.
#[derive(Debug)]
struct Recording {
    inner: Arc<dyn SigningKey>,
    used: Arc<Mutex<Option<SignatureScheme>>>,
}

impl SigningKey for Recording {
    fn choose_scheme(&self, offered: &[SignatureScheme]) -> Option<Box<dyn rustls::sign::Signer>> {
        let signer = self.inner.choose_scheme(offered)?;
        if let Ok(mut used) = self.used.lock() {
            *used = Some(signer.scheme());
        }
        Some(signer)
    }
    fn algorithm(&self) -> rustls::SignatureAlgorithm {
        self.inner.algorithm()
    }
}

struct Outcome {
    result: Result<(), rustls::Error>,
    group: Option<u16>,
    scheme: Option<SignatureScheme>,
    client_hello: Vec<u8>,
    server_hello: Vec<u8>,
}

/// A handshake with the server chain `spec` (leaf algorithm `leaf`), the client trusting
/// `trusted_root` (the chain's own root when `None`).
fn handshake(group: &'static dyn SupportedKxGroup, spec: &str, leaf: &str, trusted_root: Option<&Path>) -> Outcome {
    handshake_with(group, spec, leaf, trusted_root, &CodepointOverrides::none())
}

fn handshake_with(
    group: &'static dyn SupportedKxGroup,
    spec: &str,
    leaf: &str,
    trusted_root: Option<&Path>,
    codepoints: &CodepointOverrides,
) -> Outcome {
    let files = pki().chain(&ChainSpec::parse(spec).expect("spec"), Role::Server).expect("chain");
    let certs: Vec<CertificateDer<'static>> = pem_blocks(&files.chain).into_iter().map(CertificateDer::from).collect();
    let key_der = pem_blocks(&files.leaf_key).remove(0);
    let provider = provider(group, codepoints);
    let key: Arc<dyn SigningKey> = if pqtls_oqs::sig::scheme_code_point(leaf).is_some() {
        let scheme = codepoints.sig_code_point(catalogue::sig_alg(leaf).expect("leaf"));
        signing_key(leaf, &key_der, scheme).expect("signing key")
    } else {
        let der = PrivateKeyDer::try_from(key_der).expect("PKCS#8");
        provider.key_provider.load_private_key(der).expect("aws-lc-rs key")
    };
    let used = Arc::new(Mutex::new(None));
    let resolver =
        SingleCertAndKey::from(CertifiedKey::new(certs, Arc::new(Recording { inner: key, used: used.clone() })));
    let server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("server versions")
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(resolver));
    let mut roots = RootCertStore::empty();
    let root = pem_blocks(trusted_root.unwrap_or(&files.root)).remove(0);
    roots.add(CertificateDer::from(root)).expect("root");
    let client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .expect("client versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let mut c = ClientConnection::new(Arc::new(client), ServerName::try_from("localhost").expect("name")).expect("c");
    let mut s = ServerConnection::new(Arc::new(server)).expect("server");
    let (mut client_hello, mut server_hello) = (Vec::new(), Vec::new());
    let mut result = Ok(());
    for _ in 0..20 {
        let mut buf = Vec::new();
        c.write_tls(&mut buf).expect("client write");
        if client_hello.is_empty() {
            client_hello = buf.clone();
        }
        if let Err(e) = feed(&mut s, &buf) {
            result = Err(e);
            break;
        }
        let mut buf = Vec::new();
        s.write_tls(&mut buf).expect("server write");
        if server_hello.is_empty() {
            server_hello = buf.clone();
        }
        if let Err(e) = feed(&mut c, &buf) {
            result = Err(e);
            break;
        }
        if !c.is_handshaking() && !s.is_handshaking() {
            break;
        }
    }
    if result.is_ok() && (c.is_handshaking() || s.is_handshaking()) {
        result = Err(rustls::Error::General("handshake did not finish".into()));
    }
    let group = c.negotiated_key_exchange_group().map(|g| u16::from(g.name()));
    let scheme = *used.lock().expect("lock");
    Outcome { result, group, scheme, client_hello, server_hello }
}

/// Gives `buf` to `conn`, processing as it goes (large flights fill rustls' buffer).
fn feed<T: std::ops::DerefMut<Target = rustls::ConnectionCommon<D>>, D: rustls::SideData>(
    conn: &mut T,
    buf: &[u8],
) -> Result<(), rustls::Error> {
    let mut rd = buf;
    while !rd.is_empty() {
        conn.read_tls(&mut rd).expect("read_tls");
        conn.process_new_packets()?;
    }
    Ok(())
}

/// The key_share entries (group, length) of a ClientHello (client = true) or ServerHello
/// in the first record of `flight`.
fn key_shares(flight: &[u8], client: bool) -> Vec<(u16, usize)> {
    let be16 = |b: &[u8], i: usize| u16::from_be_bytes([b[i], b[i + 1]]) as usize;
    assert_eq!(flight[0], 22, "handshake record");
    let msg = &flight[5..5 + be16(flight, 3)];
    let mut i = 4 + 2 + 32; // handshake header, version, random
    i += 1 + msg[i] as usize; // session id
    if client {
        i += 2 + be16(msg, i); // cipher suites
        i += 1 + msg[i] as usize; // compression methods
    } else {
        i += 2 + 1; // cipher suite, compression method
    }
    let end = i + 2 + be16(msg, i);
    i += 2;
    let mut out = Vec::new();
    while i < end {
        let (ty, len) = (be16(msg, i), be16(msg, i + 2));
        let body = &msg[i + 4..i + 4 + len];
        if ty == 0x0033 {
            let mut j = if client { 2 } else { 0 };
            while j < body.len() {
                let (g, l) = (be16(body, j), be16(body, j + 2));
                out.push((g as u16, l));
                j += 4 + l;
            }
        }
        i += 4 + len;
    }
    out
}

#[test]
fn every_group_handshakes_with_catalogue_share_sizes() {
    for (name, code_point, client_len, server_len) in [
        // oqs-provider 0.9.0 – 0.11.0 code points (docs/oqs.md).
        ("frodo640aes", 0xFE00u16, 9616usize, 9720usize),
        ("x25519_frodo640aes", 0xFE02, 32 + 9616, 32 + 9720),
        ("x25519_mlkem512", 0x2FB6, 832, 32 + 768),
        ("p256_mlkem512", 0x2F4B, 65 + 800, 65 + 768),
    ] {
        let group = kx(name, &CodepointOverrides::none());
        let catalogue = catalogue::group(name).expect("catalogue");
        assert_eq!(catalogue.client_share_bytes(), client_len, "{name}: catalogue client share");
        let out = handshake(group, "ed25519:ed25519", "ed25519", None);
        assert!(out.result.is_ok(), "{name}: {:?}", out.result);
        assert_eq!(out.group, Some(code_point), "{name}");
        assert_eq!(key_shares(&out.client_hello, true), vec![(code_point, client_len)], "{name}");
        assert_eq!(key_shares(&out.server_hello, false), vec![(code_point, server_len)], "{name}");
    }
}

#[test]
fn an_override_moves_the_code_points_on_the_wire() {
    let moved = CodepointOverrides::parse("frodo640aes=0xFE23,falcon512=0xFE99").expect("overrides");
    let out = handshake_with(kx("frodo640aes", &moved), "falcon512:falcon512", "falcon512", None, &moved);
    assert!(out.result.is_ok(), "{:?}", out.result);
    assert_eq!(out.group, Some(0xFE23));
    assert_eq!(key_shares(&out.client_hello, true), vec![(0xFE23, 9616)]);
    assert_eq!(key_shares(&out.server_hello, false), vec![(0xFE23, 9720)]);
    assert_eq!(out.scheme, Some(SignatureScheme::from(0xFE99)));
    // A client that knows falcon512 only at 0xFED7 does not accept the moved scheme.
    let key_der = {
        let files = pki().chain(&ChainSpec::parse("falcon512:falcon512").expect("spec"), Role::Server).expect("chain");
        pem_blocks(&files.leaf_key).remove(0)
    };
    let key = signing_key("falcon512", &key_der, 0xFE99).expect("key");
    assert!(key.choose_scheme(&[SignatureScheme::from(0xFED7)]).is_none());
    assert!(key.choose_scheme(&[SignatureScheme::from(0xFE99)]).is_some());
}

#[test]
fn falcon512_private_key_is_oqs_providers_encoding() {
    // PKCS#8 privateKey OCTET STRING { OCTET STRING { secret key (1281) || public key (897) } },
    // as oqs-provider's own genpkey writes it (`04 82 08 86 04 82 08 82 …`).
    let files = pki().chain(&ChainSpec::parse("falcon512:falcon512").expect("spec"), Role::Server).expect("chain");
    let der = pem_blocks(&files.leaf_key).remove(0);
    let (oid, key) = pqtls_pki::cert::parse_pkcs8(&der).expect("pkcs8");
    assert_eq!(oid, [0x2b, 0xce, 0x0f, 0x03, 0x0b]);
    assert_eq!(&key[..4], [0x04, 0x82, 0x08, 0x82]);
    assert_eq!(key.len(), 4 + 2178);
    // The raw form (no inner OCTET STRING) is refused with a message saying what is expected.
    let raw = pqtls_pki::cert::pkcs8_pem("1.3.9999.3.11", &key[4..]).expect("raw");
    let b64: String = raw.lines().filter(|l| !l.starts_with("-----")).collect();
    let e = signing_key("falcon512", &openssl::base64::decode_block(&b64).expect("b64"), 0xFED7).unwrap_err();
    assert!(e.to_string().contains("OCTET STRING"), "{e}");
}

fn check_scheme(spec: &str, leaf: &str, scheme: u16) {
    let out = handshake(kx("x25519_mlkem512", &CodepointOverrides::none()), spec, leaf, None);
    assert!(out.result.is_ok(), "{spec}: {:?}", out.result);
    assert_eq!(out.scheme, Some(SignatureScheme::from(scheme)), "{spec}");
}

#[test]
fn falcon512_chain_signs_and_verifies() {
    check_scheme("falcon512:falcon512", "falcon512", 0xFED7);
    let files = pki().chain(&ChainSpec::parse("falcon512:falcon512").expect("spec"), Role::Server).expect("chain");
    let leaf = x509_cert::Certificate::from_der(&pem_blocks(&files.chain)[0]).expect("certificate");
    let spki = &leaf.tbs_certificate.subject_public_key_info;
    assert_eq!(spki.algorithm.oid.to_string(), "1.3.9999.3.11");
    assert_eq!(spki.subject_public_key.raw_bytes().len(), 897);
    assert!(leaf.signature.raw_bytes().len() <= 752);
}

#[test]
fn composite_chain_signs_and_verifies() {
    check_scheme("mldsa44_ed25519:mldsa44_ed25519", "mldsa44_ed25519", 0x090A);
    let files =
        pki().chain(&ChainSpec::parse("mldsa44_ed25519:mldsa44_ed25519").expect("spec"), Role::Server).expect("chain");
    let leaf = x509_cert::Certificate::from_der(&pem_blocks(&files.chain)[0]).expect("certificate");
    assert_eq!(leaf.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes().len(), 1312 + 32);
    assert_eq!(leaf.signature.raw_bytes().len(), 2420 + 64);
}

#[test]
fn slhdsa_fast_chains_sign_and_verify() {
    check_scheme("slhdsa-sha2-128f:slhdsa-sha2-128f", "slhdsa-sha2-128f", 0x0912);
    check_scheme("slhdsa-shake-128f:slhdsa-shake-128f", "slhdsa-shake-128f", 0x0918);
}

#[test]
fn slhdsa_small_chains_sign_and_verify() {
    check_scheme("slhdsa-sha2-128s:slhdsa-sha2-128s", "slhdsa-sha2-128s", 0x0911);
    check_scheme("slhdsa-shake-128s:slhdsa-shake-128s", "slhdsa-shake-128s", 0x0917);
}

#[test]
fn standard_leaves_under_oqs_parents_verify() {
    // webpki verifies the certificate signatures made by Falcon / SLH-DSA / composite roots.
    for spec in ["ed25519:falcon512", "ed25519:slhdsa-sha2-128f", "ed25519:mldsa44_ed25519"] {
        let out = handshake(kx("x25519_mlkem512", &CodepointOverrides::none()), spec, "ed25519", None);
        assert!(out.result.is_ok(), "{spec}: {:?}", out.result);
        assert_eq!(out.scheme, Some(SignatureScheme::ED25519), "{spec}");
    }
}

#[test]
fn a_chain_under_a_different_root_fails() {
    let other_dir = tempfile::tempdir().expect("tempdir");
    let other = Pki::open(other_dir.path()).expect("open").with_seed(99).with_factory(Arc::new(OqsKeys));
    for (spec, leaf) in [("falcon512:falcon512", "falcon512"), ("mldsa44_ed25519:mldsa44_ed25519", "mldsa44_ed25519")] {
        let foreign = other.chain(&ChainSpec::parse(spec).expect("spec"), Role::Server).expect("other chain");
        let out = handshake(kx("x25519_mlkem512", &CodepointOverrides::none()), spec, leaf, Some(&foreign.root));
        assert!(
            matches!(out.result, Err(rustls::Error::InvalidCertificate(_))),
            "{spec}: {:?} under a foreign root",
            out.result
        );
    }
}
