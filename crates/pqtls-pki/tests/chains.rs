//! Chains made by the PKI verify with OpenSSL 3.5 itself, keys are private, seeds reproduce
//! keys, the cache is reused, and what cannot be made is refused clearly.

use openssl::pkey::PKey;
use openssl::stack::Stack;
use openssl::x509::store::X509StoreBuilder;
use openssl::x509::verify::{X509VerifyFlags, X509VerifyParam};
use openssl::x509::{X509PurposeId, X509StoreContext, X509VerifyResult, X509};
use pqtls_core::backend::ChainFiles;
use pqtls_core::catalogue::{self, SigAlg};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::{Error, Result};
use pqtls_pki::{CertKey, KeyFactory, Padding, Pki, Role};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;
use x509_cert::der::Decode;

fn spec(s: &str) -> ChainSpec {
    ChainSpec::parse(s).expect("valid chain spec")
}

fn certs(path: &Path) -> Vec<X509> {
    X509::stack_from_pem(&fs::read(path).expect("read chain")).expect("parse chain")
}

/// Verifies `files.chain` against the root certificate in `root`, as a TLS peer would.
fn verify(files: &ChainFiles, root: &Path, role: Role) -> X509VerifyResult {
    let chain = certs(&files.chain);
    let root = X509::from_pem(&fs::read(root).expect("read root")).expect("parse root");
    let mut store = X509StoreBuilder::new().expect("store");
    store.add_cert(root).expect("add root");
    let mut param = X509VerifyParam::new().expect("param");
    param.set_flags(X509VerifyFlags::X509_STRICT).expect("flags");
    if role == Role::Server {
        param.set_host("localhost").expect("host");
    }
    store.set_param(&param).expect("set param");
    store
        .set_purpose(if role == Role::Server { X509PurposeId::SSL_SERVER } else { X509PurposeId::SSL_CLIENT })
        .expect("purpose");
    let store = store.build();
    let mut untrusted = Stack::new().expect("stack");
    for c in &chain[1..] {
        untrusted.push(c.clone()).expect("push");
    }
    let mut ctx = X509StoreContext::new().expect("ctx");
    ctx.init(&store, &chain[0], &untrusted, |c| {
        c.verify_cert()?;
        Ok(c.error())
    })
    .expect("verification ran")
}

fn assert_mode(path: &Path, mode: u32) {
    let m = fs::metadata(path).expect("metadata").permissions().mode() & 0o777;
    assert_eq!(m, mode, "{} has mode {m:o}", path.display());
}

/// Checks one generated chain: verification, key files, sizes against the catalogue.
fn check(pki: &Pki, spec: &ChainSpec, role: Role) -> ChainFiles {
    let files = pki.chain(spec, role).unwrap_or_else(|e| panic!("{spec}: {e}"));
    assert_eq!(verify(&files, &files.root, role), X509VerifyResult::OK, "{spec} {role:?} does not verify");
    let chain = certs(&files.chain);
    assert_eq!(chain.len(), spec.algs().len() - 1, "{spec}: chain must hold leaf [+ intermediate], not the root");
    // The leaf key file is the key of the leaf certificate.
    let key = PKey::private_key_from_pem(&fs::read(&files.leaf_key).expect("read key")).expect("parse key");
    assert!(chain[0].public_key().expect("leaf public key").public_eq(&key), "{spec}: leaf key does not match");
    let dir = files.leaf_key.parent().expect("cache dir");
    for entry in fs::read_dir(dir).expect("cache dir") {
        let path = entry.expect("entry").path();
        if path.to_string_lossy().ends_with(".key.pem") {
            assert_mode(&path, 0o600);
        }
    }
    // Public key and signature sizes are the catalogue's.
    let root = fs::read(&files.root).expect("root");
    let mut all: Vec<Vec<u8>> = chain.iter().map(|c| c.to_der().expect("der")).collect();
    all.push(X509::from_pem(&root).expect("root").to_der().expect("der"));
    for (der, alg) in all.iter().zip(spec.algs()) {
        let cert = x509_cert::Certificate::from_der(der).expect("x509-cert parses it");
        let pk = cert.tbs_certificate.subject_public_key_info.subject_public_key.raw_bytes().len();
        assert_eq!(pk, alg.public_key_bytes, "{spec}: {} public key size", alg.name);
    }
    for (i, der) in all.iter().enumerate() {
        let signer = spec.algs()[(i + 1).min(all.len() - 1)];
        let cert = x509_cert::Certificate::from_der(der).expect("parse");
        let sig = cert.signature.raw_bytes().len();
        if signer.variable_signature {
            assert!(sig <= signer.signature_bytes, "{spec}: {} signature {sig} bytes", signer.name);
        } else {
            assert_eq!(sig, signer.signature_bytes, "{spec}: {} signature size", signer.name);
        }
    }
    files
}

/// Each algorithm as leaf and as root (`alg:alg`), each chain also checked against a root
/// from another seed (an independent PKI), which must not verify it.
fn every_algorithm(filter: impl Fn(&str) -> bool) {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    let other = Pki::open(tmp.path()).expect("open").with_seed(1);
    for name in pqtls_pki::key::openssl_algorithms().into_iter().filter(|n| filter(n)) {
        let t = Instant::now();
        let s = spec(&format!("{name}:{name}"));
        let files = check(&pki, &s, Role::Server);
        // The same root algorithm from seed 1, except for the slow SLH-DSA "s" variants.
        let slow = name.starts_with("slhdsa") && name.ends_with('s');
        let foreign = other.chain(&spec(&format!("mldsa44:{}", if slow { "mldsa44" } else { name })), Role::Server);
        let foreign = foreign.expect("seed 1 chain");
        assert_ne!(verify(&files, &foreign.root, Role::Server), X509VerifyResult::OK, "{s} verified by seed 1 root");
        eprintln!("{s}: {:?}", t.elapsed());
    }
}

#[test]
fn every_classical_and_mldsa_algorithm_makes_a_verifying_chain() {
    every_algorithm(|n| !n.starts_with("slhdsa"));
}

#[test]
fn every_slhdsa_algorithm_makes_a_verifying_chain() {
    every_algorithm(|n| n.starts_with("slhdsa"));
}

#[test]
fn intermediates_and_client_chains_verify() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    for s in
        ["p256:mldsa65:mldsa87", "mldsa44:slhdsa-sha2-128f:ed25519", "ed448:rsa2048:p384", "mldsa44:slhdsa-sha2-128f"]
    {
        check(&pki, &spec(s), Role::Server);
    }
    let files = check(&pki, &spec("mldsa65:mldsa87"), Role::Client);
    assert!(files.chain.starts_with(tmp.path().join("client-mldsa65_mldsa87-s0")), "{}", files.chain.display());
    // A client certificate is not a server certificate, and the other way round.
    assert_ne!(verify(&files, &files.root, Role::Server), X509VerifyResult::OK);
    let server = pki.chain(&spec("mldsa65:mldsa87"), Role::Server).expect("server");
    assert_ne!(verify(&server, &server.root, Role::Client), X509VerifyResult::OK);
    // Server and client roots are different CAs.
    assert_ne!(fs::read(&server.root).expect("root"), fs::read(&files.root).expect("root"));
}

#[test]
fn files_for_a_configuration() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path().join("nested/pki")).expect("open");
    assert_mode(&tmp.path().join("nested/pki"), 0o700);
    let mut cfg = HandshakeConfig::new(
        catalogue::Stack::Openssl,
        catalogue::group("x25519").expect("group"),
        spec("ed25519:p256"),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").expect("cipher"),
    );
    let files = pki.files_for(&cfg).expect("files");
    assert!(files.client.is_none());
    assert!(files.server.chain.starts_with(tmp.path().join("nested/pki/server-ed25519_p256-s0")));
    cfg.client_chain = Some(spec("p256:ed25519"));
    let files = pki.files_for(&cfg).expect("files");
    let client = files.client.expect("client chain");
    assert_eq!(verify(&client, &client.root, Role::Client), X509VerifyResult::OK);
}

fn public_keys(files: &ChainFiles) -> (Vec<u8>, Vec<u8>) {
    let leaf = certs(&files.chain)[0].public_key().expect("pk").public_key_to_der().expect("der");
    let root = X509::from_pem(&fs::read(&files.root).expect("root")).expect("root");
    (leaf, root.public_key().expect("pk").public_key_to_der().expect("der"))
}

#[test]
fn a_seed_reproduces_keys_and_certificates() {
    let a = tempfile::tempdir().expect("tempdir");
    let b = tempfile::tempdir().expect("tempdir");
    let pa = Pki::open(a.path()).expect("open").with_seed(7);
    let pb = Pki::open(b.path()).expect("open").with_seed(7);
    let pc = Pki::open(b.path()).expect("open").with_seed(8);
    for s in ["p256:p384", "p521:ed448", "ed25519:mldsa44", "mldsa65:mldsa87", "slhdsa-shake-128f:slhdsa-sha2-128f"] {
        let s = spec(s);
        let (fa, fb, fc) = (pa.chain(&s, Role::Server), pb.chain(&s, Role::Server), pc.chain(&s, Role::Server));
        let (fa, fb, fc) = (fa.expect("a"), fb.expect("b"), fc.expect("c"));
        assert_eq!(public_keys(&fa), public_keys(&fb), "{s}: same seed, different keys");
        let (ca, cc) = (public_keys(&fa), public_keys(&fc));
        assert!(ca.0 != cc.0 && ca.1 != cc.1, "{s}: different seeds, same keys");
        // Deterministic signatures: the certificates themselves are identical.
        for (x, y) in [(&fa.chain, &fb.chain), (&fa.root, &fb.root), (&fa.leaf_key, &fb.leaf_key)] {
            assert_eq!(fs::read(x).expect("a"), fs::read(y).expect("b"), "{s}: {} differs", x.display());
        }
    }
    // RSA keys are random: only the cache keeps them.
    let s = spec("rsa2048:p256");
    let (fa, fb) = (pa.chain(&s, Role::Server).expect("a"), pb.chain(&s, Role::Server).expect("b"));
    assert_ne!(public_keys(&fa).0, public_keys(&fb).0);
    assert_eq!(public_keys(&fa).1, public_keys(&fb).1);
}

fn mtimes(dir: &Path) -> Vec<(String, std::time::SystemTime)> {
    let mut v: Vec<_> = fs::read_dir(dir)
        .expect("dir")
        .map(|e| {
            let e = e.expect("entry");
            (e.file_name().to_string_lossy().into_owned(), e.metadata().expect("meta").modified().expect("mtime"))
        })
        .collect();
    v.sort();
    v
}

#[test]
fn the_cache_is_reused_and_stale_caches_are_replaced() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    let s = spec("rsa2048:mldsa44");
    let first = pki.chain(&s, Role::Server).expect("first");
    let dir = tmp.path().join("server-rsa2048_mldsa44-s0");
    assert_eq!(first.leaf_key, dir.join("leaf.key.pem"));
    let before = mtimes(&dir);
    let key = fs::read(&first.leaf_key).expect("key");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let again = Pki::open(tmp.path()).expect("open").chain(&s, Role::Server).expect("again");
    assert_eq!(mtimes(&dir), before, "a cache hit rewrote files");
    assert_eq!(fs::read(&again.leaf_key).expect("key"), key, "a cache hit made a new RSA key");

    // A manifest that does not match (another seed written into it) is a miss: regenerated.
    let manifest = dir.join("manifest.json");
    let text = fs::read_to_string(&manifest).expect("manifest");
    assert!(text.contains("\"seed\": 0"), "{text}");
    fs::write(&manifest, text.replace("\"seed\": 0", "\"seed\": 99")).expect("write");
    pki.chain(&s, Role::Server).expect("regenerated");
    assert_ne!(fs::read(&first.leaf_key).expect("key"), key, "a stale cache was used");
    // So is a missing file.
    fs::remove_file(dir.join("root.key.pem")).expect("rm");
    let files = pki.chain(&s, Role::Server).expect("regenerated");
    assert!(dir.join("root.key.pem").is_file());
    assert_eq!(verify(&files, &files.root, Role::Server), X509VerifyResult::OK);
    // Nothing temporary left behind.
    let names: Vec<_> = fs::read_dir(tmp.path()).expect("dir").map(|e| e.expect("e").file_name()).collect();
    assert_eq!(names, vec![std::ffi::OsString::from("server-rsa2048_mldsa44-s0")]);
}

#[test]
fn concurrent_generation_of_one_chain() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    let s = spec("p384:ed25519");
    let results: Vec<Result<ChainFiles>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4).map(|_| scope.spawn(|| pki.chain(&s, Role::Server))).collect();
        handles.into_iter().map(|h| h.join().expect("thread")).collect()
    });
    for r in results {
        let files = r.expect("every caller gets the chain");
        assert_eq!(verify(&files, &files.root, Role::Server), X509VerifyResult::OK);
    }
    assert_eq!(fs::read_dir(tmp.path()).expect("dir").count(), 1, "temporary directories left behind");
}

#[test]
fn prepare_makes_each_missing_chain_once_in_parallel_and_lists_what_it_cannot_make() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    // One chain already cached, one asked twice, one client chain, one that cannot be made.
    pki.chain(&spec("p256:p256"), Role::Server).expect("cached before");
    let wanted = [
        (spec("p256:p256"), Role::Server),
        (spec("ed25519:mldsa44"), Role::Server),
        (spec("ed25519:mldsa44"), Role::Server),
        (spec("p384:ed25519:ed448"), Role::Server),
        (spec("ed25519:mldsa44"), Role::Client),
        (spec("falcon512:falcon512"), Role::Server),
    ];
    let done = pki.prepare(&wanted, 3);
    assert_eq!((done.chains, done.generated, done.threads), (5, 3, 3));
    assert_eq!(done.failed.len(), 1, "{:?}", done.failed);
    let (s, role, e) = &done.failed[0];
    assert_eq!((s.label(), *role), ("falcon512:falcon512".to_string(), Role::Server));
    assert!(matches!(e, Error::Unsupported(m) if m.contains("falcon512")), "{e}");
    // Every chain that can be made is cached and verifies; nothing temporary is left.
    for (s, role) in &wanted[..5] {
        assert!(pki.is_cached(s, *role), "{s} {role}");
        let files = pki.chain(s, *role).expect("cached");
        assert_eq!(verify(&files, &files.root, *role), X509VerifyResult::OK);
    }
    assert!(!pki.is_cached(&spec("falcon512:falcon512"), Role::Server));
    let mut names: Vec<String> = fs::read_dir(tmp.path())
        .expect("dir")
        .map(|e| e.expect("e").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "client-ed25519_mldsa44-s0",
            "server-ed25519_mldsa44-s0",
            "server-p256_p256-s0",
            "server-p384_ed25519_ed448-s0"
        ]
    );
    // Asked again: nothing to make; one thread at most, however many are allowed.
    let again = pki.prepare(&wanted[..5], 8);
    assert_eq!((again.chains, again.generated, again.threads, again.failed.len()), (4, 0, 1, 0));
}

#[test]
fn algorithms_without_a_key_implementation_are_refused() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    for s in ["falcon512:falcon512", "mldsa44_ed25519:mldsa65", "p256:falcon512"] {
        match pki.chain(&spec(s), Role::Server) {
            Err(Error::Unsupported(msg)) => {
                assert!(msg.contains("with_factory") && msg.contains("OqsKeys") && msg.contains("mldsa65"), "{msg}")
            }
            other => panic!("{s}: expected Unsupported, got {other:?}"),
        }
    }
    assert_eq!(fs::read_dir(tmp.path()).expect("dir").count(), 0, "a refused chain left files");
}

/// A stand-in for a key from another library (as liboqs will provide for Falcon): claims
/// falcon512, but is an Ed25519 key handled as raw bytes, encoded with the crate's DER helpers
/// and only signed by OpenSSL.
struct Plugged;

struct RawEd25519 {
    seed: [u8; 32],
}

const ED25519_OID: &str = "1.3.101.112";

impl RawEd25519 {
    fn pkey(&self) -> Result<PKey<openssl::pkey::Private>> {
        PKey::private_key_from_raw_bytes(&self.seed, openssl::pkey::Id::ED25519)
            .map_err(|e| Error::Other(e.to_string()))
    }
}

impl CertKey for RawEd25519 {
    fn spki_der(&self) -> Result<Vec<u8>> {
        let public = self.pkey()?.raw_public_key().map_err(|e| Error::Other(e.to_string()))?;
        pqtls_pki::cert::spki_der(ED25519_OID, &public)
    }
    fn signature_algorithm_der(&self) -> Result<Vec<u8>> {
        pqtls_pki::cert::algorithm_identifier_der(ED25519_OID)
    }
    fn sign(&self, tbs: &[u8]) -> Result<Vec<u8>> {
        let pkey = self.pkey()?;
        let mut signer = openssl::sign::Signer::new_without_digest(&pkey).map_err(|e| Error::Other(e.to_string()))?;
        signer.sign_oneshot_to_vec(tbs).map_err(|e| Error::Other(e.to_string()))
    }
    fn private_key_pem(&self) -> Result<String> {
        // RFC 8410 CurvePrivateKey: an OCTET STRING inside the PKCS#8 OCTET STRING.
        let mut inner = vec![0x04, 0x20];
        inner.extend_from_slice(&self.seed);
        pqtls_pki::cert::pkcs8_pem(ED25519_OID, &inner)
    }
}

impl KeyFactory for Plugged {
    fn id(&self) -> String {
        "test-plugged".into()
    }
    fn supports(&self, alg: &SigAlg) -> bool {
        alg.name == "falcon512"
    }
    fn key(&self, _alg: &SigAlg, seed: &[u8; 32]) -> Result<Box<dyn CertKey>> {
        Ok(Box::new(RawEd25519 { seed: *seed }))
    }
}

#[test]
fn a_key_factory_plugs_in() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open").with_factory(Arc::new(Plugged));
    // As leaf, intermediate and root, under and over OpenSSL keys.
    for (s, dir) in [
        ("falcon512:mldsa44", "server-falcon512_mldsa44-s0"),
        ("p256:falcon512:mldsa44", "server-p256_falcon512_mldsa44-s0"),
        ("mldsa44:falcon512", "server-mldsa44_falcon512-s0"),
    ] {
        let files = pki.chain(&spec(s), Role::Server).expect("plugged chain");
        assert_eq!(verify(&files, &files.root, Role::Server), X509VerifyResult::OK, "{s}");
        let key = PKey::private_key_from_pem(&fs::read(&files.leaf_key).expect("key")).expect("PKCS#8 helper output");
        assert!(certs(&files.chain)[0].public_key().expect("pk").public_eq(&key), "{s}");
        let manifest = fs::read_to_string(tmp.path().join(dir).join("manifest.json")).expect("manifest");
        assert!(manifest.contains("test-plugged"), "{manifest}");
    }
    // Without the factory, the same chain is refused rather than made with something else.
    let plain = Pki::open(tmp.path()).expect("open");
    assert!(matches!(plain.chain(&spec("falcon512:mldsa44"), Role::Server), Err(Error::Unsupported(_))));
}

#[test]
fn bad_directories_are_reported() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let file = tmp.path().join("not-a-dir");
    fs::write(&file, b"x").expect("write");
    match Pki::open(&file) {
        Err(e @ Error::Io { .. }) => assert!(e.to_string().contains("not-a-dir"), "{e}"),
        other => panic!("expected an I/O error, got {other:?}"),
    }
}

/// The cache is verified on every hit: damaged keys, a chain of other algorithms copied in,
/// loose permissions — each found (the problem names the file) and the chain regenerated.
#[test]
fn a_damaged_or_foreign_cache_is_found_and_regenerated() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::open(tmp.path()).unwrap();
    let p256 = spec("p256:p256");
    let files = pki.chain(&p256, Role::Server).unwrap();
    assert_eq!(pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0), None);
    let good_key = fs::read(&files.leaf_key).unwrap();
    let dir = files.leaf_key.parent().unwrap().to_path_buf();

    // Random bytes as the leaf key.
    fs::write(&files.leaf_key, b"\x8f\x01random bytes, not a key").unwrap();
    let problem = pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0).unwrap();
    assert!(problem.contains("leaf.key.pem") && problem.contains("not a readable private key"), "{problem}");
    pki.chain(&p256, Role::Server).unwrap();
    assert_eq!(fs::read(&files.leaf_key).unwrap(), good_key);
    assert_mode(&files.leaf_key, 0o600);

    // A p256:p384 chain copied into the p256:p256 directory (manifest left as it was).
    let other = pki.chain(&spec("p256:p384"), Role::Server).unwrap();
    for (from, to) in [(&other.chain, &files.chain), (&other.root, &files.root)] {
        fs::copy(from, to).unwrap();
    }
    fs::copy(other.leaf_key.with_file_name("root.key.pem"), dir.join("root.key.pem")).unwrap();
    let problem = pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0).unwrap();
    assert!(problem.contains("root.pem") && problem.contains("another public-key algorithm"), "{problem}");
    pki.chain(&p256, Role::Server).unwrap();
    assert_eq!(pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0), None);
    let root = X509::from_pem(&fs::read(&files.root).unwrap()).unwrap();
    let curve = root.public_key().unwrap().ec_key().unwrap().group().curve_name().unwrap();
    assert_eq!(curve, openssl::nid::Nid::X9_62_PRIME256V1);

    // A leaf key that is a valid key, but not the certificate's.
    fs::copy(&other.leaf_key, &files.leaf_key).unwrap();
    fs::set_permissions(&files.leaf_key, fs::Permissions::from_mode(0o600)).unwrap();
    let p256_other = pki.chain(&spec("p256:p256"), Role::Client).unwrap();
    fs::copy(&p256_other.leaf_key, &files.leaf_key).unwrap();
    let problem = pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0).unwrap();
    assert!(problem.contains("leaf.key.pem: not the key of certificate 1"), "{problem}");
    pki.chain(&p256, Role::Server).unwrap();
    assert_eq!(fs::read(&files.leaf_key).unwrap(), good_key);

    // Loose permissions: a key at 0644, the directory at 0777.
    fs::set_permissions(&files.leaf_key, fs::Permissions::from_mode(0o644)).unwrap();
    let problem = pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0).unwrap();
    assert!(problem.contains("leaf.key.pem has mode 644"), "{problem}");
    pki.chain(&p256, Role::Server).unwrap();
    assert_mode(&files.leaf_key, 0o600);
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o777)).unwrap();
    assert!(pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0).unwrap().contains("mode 777"));
    pki.chain(&p256, Role::Server).unwrap();
    assert_mode(&dir, 0o700);
    assert_eq!(pqtls_pki::cache_problem(pki.dir(), &p256, Role::Server, 0), None);

    // A PKI directory anyone can write to is refused, naming it.
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o777)).unwrap();
    let err = Pki::open(tmp.path()).unwrap_err().to_string();
    assert!(err.contains(&tmp.path().display().to_string()) && err.contains("chmod 700"), "{err}");
    fs::set_permissions(tmp.path(), fs::Permissions::from_mode(0o700)).unwrap();
}

/// Temporary directories of a generation whose process is gone are removed on open, at once;
/// those of a live process are kept.
#[test]
fn temporaries_of_dead_generations_are_cleaned() {
    let tmp = tempfile::tempdir().unwrap();
    let pid_max: u32 = fs::read_to_string("/proc/sys/kernel/pid_max").unwrap().trim().parse().unwrap();
    let dead = tmp.path().join(format!(".tmp-server-p256_p256-s0-{pid_max}-0"));
    let stale = tmp.path().join(format!(".stale-{pid_max}-3"));
    let live = tmp.path().join(format!(".tmp-server-p256_p256-s0-{}-0", std::process::id()));
    for d in [&dead, &stale, &live] {
        fs::create_dir(d).unwrap();
        fs::write(d.join("leaf.key.pem"), "x").unwrap();
    }
    Pki::open(tmp.path()).unwrap();
    assert!(!dead.exists() && !stale.exists());
    assert!(live.exists());
}

/// A stale cache (made by another version) replaced by several threads at once: every one of
/// them gets a valid chain (none fails with "Directory not empty"), and one chain is left.
#[test]
fn a_stale_cache_is_replaced_safely_by_concurrent_users() {
    let tmp = tempfile::tempdir().unwrap();
    let pki = Pki::open(tmp.path()).expect("open");
    let s = spec("p256:p256");
    let first = pki.chain(&s, Role::Server).unwrap();
    let dir = first.chain.parent().unwrap().to_path_buf();
    for round in 0..3 {
        // Made stale: a manifest of another tool version.
        let m = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        let stale = m.replacen("\"tool\": \"", "\"tool\": \"stale-", 1);
        assert_ne!(m, stale, "the manifest names its tool");
        std::fs::write(dir.join("manifest.json"), stale).unwrap();
        std::thread::scope(|sc| {
            let handles: Vec<_> = (0..6).map(|_| sc.spawn(|| pki.chain(&s, Role::Server))).collect();
            for h in handles {
                h.join().unwrap().unwrap_or_else(|e| panic!("round {round}: {e}"));
            }
        });
        let entries: Vec<_> = std::fs::read_dir(tmp.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
        assert!(
            entries
                .iter()
                .all(|n| !n.to_string_lossy().starts_with(".stale") && !n.to_string_lossy().starts_with(".tmp")),
            "{entries:?}"
        );
    }
}

/// The bytes `files` would put in a TLS 1.3 Certificate message (header, empty context, each
/// certificate with its 3-byte length and empty extensions), the root too when `root_sent`.
fn certificate_message_bytes(files: &ChainFiles, root_sent: bool) -> u64 {
    let mut sent = certs(&files.chain);
    if root_sent {
        sent.extend(certs(&files.root));
    }
    8 + sent.iter().map(|c| 5 + c.to_der().expect("der").len() as u64).sum::<u64>()
}

#[test]
fn a_padded_chain_has_exactly_the_asked_authentication_bytes_and_still_verifies() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    // From the smallest padded size (the extension's 14 bytes) across the DER length boundaries
    // of the padding (128 and 256 bytes) to 40 KB; with an ECDSA issuer (randomised signatures
    // of 70 to 72 bytes: the chain's own size varies from one generation to the next) away
    // from the smallest.
    let fixed: &[u64] = &[14, 15, 140, 141, 142, 143, 144, 145, 270, 271, 272, 273, 274, 1000, 16_384, 40_000];
    let ecdsa_issuer: &[u64] = &[100, 1000, 16_384, 40_000];
    for (chain, cv, offsets) in [
        ("ed25519:ed25519", 8 + 64, fixed),
        ("mldsa44:mldsa44:mldsa44", 8 + 2420, fixed),
        ("rsa2048:rsa2048", 8 + 256, fixed),
        ("ed25519:p256", 8 + 64, ecdsa_issuer),
    ] {
        let spec = spec(chain);
        let plain = pki.chain(&spec, Role::Server).expect("plain chain");
        for root_sent in [false, true] {
            let own = certificate_message_bytes(&plain, root_sent) + cv;
            let sizes = offsets.iter().map(|d| own + d);
            for auth_bytes in sizes {
                let padding = Padding { auth_bytes, certificate_verify_bytes: cv, root_sent };
                let files = pki.padded_chain(&spec, Role::Server, padding).expect("padded chain");
                assert_eq!(certificate_message_bytes(&files, root_sent) + cv, auth_bytes, "{chain} {padding:?}");
                assert_eq!(verify(&files, &files.root, Role::Server), X509VerifyResult::OK, "{chain} {padding:?}");
                // The same keys and root as the unpadded chain (RSA keys are random: their own).
                if !chain.starts_with("rsa") {
                    assert_eq!(public_keys(&files), public_keys(&plain), "{chain}");
                    assert_eq!(fs::read(&files.root).expect("root"), fs::read(&plain.root).expect("root"), "{chain}");
                }
                // One more extension, non-critical, of pqtls' OID.
                let der = certs(&files.chain)[0].to_der().expect("der");
                let leaf = x509_cert::Certificate::from_der(&der).expect("leaf");
                let exts = leaf.tbs_certificate.extensions.expect("extensions");
                let pad = exts.iter().find(|e| e.extn_id.to_string() == pqtls_pki::cert::PADDING_OID).expect("padding");
                assert!(!pad.critical);
            }
        }
    }
    // The unpadded chain is untouched; each size has its own cache directory.
    assert!(tmp.path().join("server-ed25519_ed25519-s0").is_dir());
    let padded: Vec<String> = fs::read_dir(tmp.path())
        .expect("dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("server-ed25519_ed25519-s0-cert"))
        .collect();
    assert_eq!(padded.len(), 2 * 16, "{padded:?}");
    assert_eq!(padded.iter().filter(|n| n.ends_with('r')).count(), 16, "{padded:?}");
}

#[test]
fn an_authentication_size_that_cannot_be_made_is_refused_naming_what_can() {
    let tmp = tempfile::tempdir().expect("tempdir");
    let pki = Pki::open(tmp.path()).expect("open");
    let padding = Padding { auth_bytes: 300, certificate_verify_bytes: 72, root_sent: false };
    let e = pki.padded_chain(&spec("ed25519:ed25519"), Role::Server, padding).expect_err("too small").to_string();
    assert!(e.contains("auth_bytes = 300") && e.contains("too small") && e.contains("use auth_bytes ="), "{e}");
    // Exactly the chain's own size needs no padding extension.
    let plain = pki.chain(&spec("ed25519:ed25519"), Role::Server).expect("plain");
    let own = certificate_message_bytes(&plain, false) + 72;
    let padding = Padding { auth_bytes: own, certificate_verify_bytes: 72, root_sent: false };
    let files = pki.padded_chain(&spec("ed25519:ed25519"), Role::Server, padding).expect("own size");
    assert_eq!(fs::read(&files.chain).expect("chain"), fs::read(&plain.chain).expect("chain"));
    // Just above it, below the smallest padded leaf: refused, naming both sizes that work.
    let padding = Padding { auth_bytes: own + 1, certificate_verify_bytes: 72, root_sent: false };
    let e = pki.padded_chain(&spec("ed25519:ed25519"), Role::Server, padding).expect_err("between").to_string();
    assert!(e.contains(&format!("use auth_bytes = {own} or at least")), "{e}");
}
