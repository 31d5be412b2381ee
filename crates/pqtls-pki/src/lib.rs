//! pqtls PKI: certificate chains for every signature algorithm of the lab, generated once
//! from a seed and cached on disk.
//!
//! ```no_run
//! # fn main() -> pqtls_core::Result<()> {
//! use pqtls_core::config::ChainSpec;
//! use pqtls_pki::{Pki, Role};
//! let pki = Pki::open(Pki::default_dir())?;
//! let files = pki.chain(&ChainSpec::parse("mldsa65:mldsa87")?, Role::Server)?;
//! println!("{}", files.chain.display());
//! # Ok(()) }
//! ```
//!
//! # Chains
//!
//! A chain spec `leaf[:intermediate]:root` gives one certificate per algorithm; each is signed
//! by its parent's key with the parent's algorithm (RSA: sha256WithRSAEncryption; ECDSA with
//! SHA-256/384/512 for P-256/384/521; Ed25519, Ed448, ML-DSA and SLH-DSA pure). Roots are
//! self-signed CAs (CA:TRUE, keyCertSign + cRLSign), an intermediate is a CA with path
//! length 0, and leaves are CA:FALSE with digitalSignature and serverAuth (SAN DNS:localhost,
//! IP:127.0.0.1) or clientAuth. All carry subject and authority key identifiers and the
//! validity window 2025-01-01 .. 2045-01-01.
//!
//! # Cache layout
//!
//! `<dir>/<role>-<label with ':' as '_'>-s<seed>/`, e.g. `pki/server-mldsa65_mldsa87-s0/`:
//! `leaf.key.pem`, `intermediate.key.pem` (with an intermediate), `root.key.pem` (PKCS#8,
//! mode 0600), `chain.pem` (leaf then intermediate, no root), `root.pem`, and
//! `manifest.json` (format, crate version, role, chain, seed, key implementations). A chain is
//! built in a temporary directory next to it and renamed into place, so a crash never leaves
//! a partial cache and, when two processes build the same chain, the first rename wins and
//! the other uses it.
//!
//! # Reproducibility
//!
//! Every key gets a 32-byte seed, SHAKE-256 of (PKI seed, role, position, algorithm), so the
//! root of `p256:mldsa87` and of `mldsa65:mldsa87` is the same key. From it:
//! - ML-DSA: the FIPS 204 key-generation seed ξ (OpenSSL keygen parameter `seed`);
//! - SLH-DSA: SK.seed ‖ SK.prf ‖ PK.seed, 3n bytes (keygen parameter `seed`);
//! - Ed25519 / Ed448: the raw private key;
//! - ECDSA: the private scalar, 1 + (x mod (n − 1)) for a wide x;
//! - RSA: **not reproducible** — generated at random once and kept in the cache.
//!
//! Certificate serials come from the key seed and the public key. Signatures are made
//! deterministic where the algorithm has the option (ECDSA RFC 6979 nonces, ML-DSA and
//! SLH-DSA `deterministic`), and RSA PKCS#1 v1.5 and EdDSA always are, so with the same seed
//! every certificate without an RSA key in its chain of signers is identical byte for byte.
//! A different seed is an independent PKI with different roots.
//!
//! # Formats
//!
//! Keys are PKCS#8 as OpenSSL 3.5 writes them; ML-DSA private keys carry both the seed and
//! the expanded key (the `both` choice of RFC 9881), which OpenSSL and aws-lc-rs read.
//! Signature algorithm OIDs: sha256WithRSAEncryption, ecdsa-with-SHA256/384/512, id-Ed25519,
//! id-Ed448, id-ml-dsa-44/65/87 (2.16.840.1.101.3.4.3.17–19), id-slh-dsa-* (…3.20–31).
//!
//! # Other key implementations
//!
//! OpenSSL 3.5 cannot make Falcon or composite keys. A [`KeyFactory`] from another library
//! plugs in through [`Pki::with_factory`] (there is no process-wide registry: whoever opens
//! a PKI passes the factories its build has); the certificate
//! builder ([`cert::build`]) only needs a [`CertKey`] (SPKI, AlgorithmIdentifier, sign,
//! PKCS#8 PEM).

pub mod cert;
pub mod key;

pub use key::{CertKey, KeyFactory, OpenSslKey, OpenSslKeys};

use cert::{CertRequest, Issuer, Profile};
use openssl::hash::MessageDigest;
use pqtls_core::backend::{ChainFiles, PkiFiles};
use pqtls_core::catalogue::SigAlg;
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::{Error, Result};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// What [`Pki::prepare`] did.
#[derive(Debug)]
pub struct Prepared {
    /// Distinct chains asked for.
    pub chains: usize,
    /// Of them, not in the cache: generated now.
    pub generated: usize,
    /// Threads that generated them.
    pub threads: usize,
    /// Chains that could not be made, with why, in the order asked.
    pub failed: Vec<(ChainSpec, Role, Error)>,
}

/// Which side of the handshake a chain authenticates.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    Server,
    Client,
}

impl Role {
    fn as_str(self) -> &'static str {
        match self {
            Role::Server => "server",
            Role::Client => "client",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The lab's certificate authority: a cache directory and a seed.
#[derive(Clone)]
pub struct Pki {
    dir: PathBuf,
    seed: u64,
    factories: Vec<Arc<dyn KeyFactory>>,
}

impl fmt::Debug for Pki {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pki")
            .field("dir", &self.dir)
            .field("seed", &self.seed)
            .field("factories", &self.factories.iter().map(|k| k.id()).collect::<Vec<_>>())
            .finish()
    }
}

const FORMAT: u32 = 1;
const LEAF_KEY: &str = "leaf.key.pem";
const INTERMEDIATE_KEY: &str = "intermediate.key.pem";
const ROOT_KEY: &str = "root.key.pem";
const CHAIN: &str = "chain.pem";
const ROOT: &str = "root.pem";
const MANIFEST: &str = "manifest.json";

/// What a cache directory was made from; a cache hit needs all of it to match.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Manifest {
    format: u32,
    tool: String,
    role: String,
    chain: String,
    seed: u64,
    /// Key implementation per certificate, leaf first.
    keys: Vec<String>,
    /// Informational: the library version the chain was made with (not compared).
    #[serde(default)]
    library: String,
    /// Hex DER of each certificate's SubjectPublicKeyInfo AlgorithmIdentifier, leaf first (what
    /// the certificates must say: a chain of another algorithm copied in is not a hit).
    #[serde(default)]
    spki_algorithms: Vec<String>,
    /// A padded chain ([`Padding`]): the Certificate message's size it was made for, and
    /// whether that message carries the root. `None`: not padded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    certificate_message_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    root_sent: bool,
}

/// A chain whose leaf carries a padding extension ([`cert::PADDING_OID`]) sized so that the
/// server's authentication bytes — its TLS 1.3 Certificate message (header, empty request
/// context, each certificate with its 3-byte length and empty extensions) plus
/// `certificate_verify_bytes` — are exactly `auth_bytes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Padding {
    pub auth_bytes: u64,
    /// Bytes counted with the Certificate message: the CertificateVerify.
    pub certificate_verify_bytes: u64,
    /// The Certificate message carries the root too (`send_root`).
    pub root_sent: bool,
}

impl Padding {
    /// What a configuration with `auth_bytes` asks for (`None` without it).
    pub fn of(cfg: &HandshakeConfig) -> Option<Padding> {
        cfg.auth_bytes.map(|auth_bytes| Padding {
            auth_bytes,
            certificate_verify_bytes: cfg.certificate_verify_bytes(),
            root_sent: cfg.send_root,
        })
    }

    fn certificate_message_bytes(&self) -> u64 {
        self.auth_bytes.saturating_sub(self.certificate_verify_bytes)
    }
}

/// Bytes a certificate takes in a TLS 1.3 Certificate message: its 3-byte length, its DER and
/// its (empty) 2-byte extensions.
fn certificate_entry_bytes(der_bytes: usize) -> u64 {
    3 + der_bytes as u64 + 2
}

/// The Certificate message's header (4), empty request context (1) and list length (3).
const CERTIFICATE_MESSAGE_OVERHEAD_BYTES: u64 = 8;

impl Manifest {
    fn matches(&self, other: &Manifest) -> bool {
        self.format == other.format
            && self.tool == other.tool
            && self.role == other.role
            && self.chain == other.chain
            && self.seed == other.seed
            && self.keys == other.keys
            && self.certificate_message_bytes == other.certificate_message_bytes
            && self.root_sent == other.root_sent
    }
}

/// Says where an error happened, keeping "unsupported" and "invalid" recognisable.
fn within(e: Error, ctx: String) -> Error {
    match e {
        Error::Unsupported(m) => Error::Unsupported(format!("{ctx}: {m}")),
        Error::Invalid(m) => Error::Invalid(format!("{ctx}: {m}")),
        e => e.context(ctx),
    }
}

static TMP_COUNTER: AtomicU64 = AtomicU64::new(0);

fn io(context: impl fmt::Display, path: &Path) -> impl FnOnce(std::io::Error) -> Error {
    let context = format!("{context} {}", path.display());
    move |e| Error::io(context, e)
}

fn create_private_dir(path: &Path) -> Result<()> {
    fs::DirBuilder::new().recursive(true).mode(0o700).create(path).map_err(io("creating PKI directory", path))
}

fn write_file(path: &Path, contents: &[u8], mode: u32) -> Result<()> {
    let mut f =
        fs::OpenOptions::new().write(true).create_new(true).mode(mode).open(path).map_err(io("creating", path))?;
    f.write_all(contents).map_err(io("writing", path))?;
    f.sync_all().map_err(io("syncing", path))
}

/// The process id in a temporary directory's name (`.tmp-<chain>-<pid>-<n>`, `.stale-<pid>-<n>`).
fn tmp_owner(name: &str) -> Option<u32> {
    let mut parts = name.rsplitn(3, '-');
    let _counter = parts.next()?;
    parts.next()?.parse().ok()
}

/// Removes temporary directories that crashed runs left behind: at once when the process that
/// made it is gone (no `/proc/<pid>` on this host), else after an hour (a generation in
/// progress is never touched). Best effort.
fn sweep(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with(".tmp-") || name.starts_with(".stale-")) {
            continue;
        }
        let old = entry
            .metadata()
            .and_then(|m| m.modified())
            .ok()
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > Duration::from_secs(3600));
        let dead = tmp_owner(&name).is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists());
        if old || dead {
            let _ = fs::remove_dir_all(entry.path());
        }
    }
}

impl Pki {
    /// Opens (creating it with mode 0700 if needed) a PKI cache directory, seed 0. The
    /// returned file paths are absolute, so they stay valid if the working directory changes.
    pub fn open(dir: impl Into<PathBuf>) -> Result<Pki> {
        let dir = dir.into();
        create_private_dir(&dir)?;
        let mode = fs::metadata(&dir).map_err(io("reading", &dir))?.permissions().mode() & 0o777;
        if mode & 0o022 != 0 {
            return Err(Error::Invalid(format!(
                "PKI directory {} is writable by others (mode {mode:o}): anyone could replace its keys. \
                 Run `chmod 700 {}` (or choose another --pki directory)",
                dir.display(),
                dir.display()
            )));
        }
        let dir = std::path::absolute(&dir).map_err(io("resolving", &dir))?;
        sweep(&dir);
        Ok(Pki { dir, seed: 0, factories: Vec::new() })
    }

    /// The same directory with another seed: an independent PKI (different roots).
    pub fn with_seed(self, seed: u64) -> Pki {
        Pki { seed, ..self }
    }

    /// Adds a key implementation, consulted before those added earlier and before OpenSSL.
    pub fn with_factory(mut self, factory: Arc<dyn KeyFactory>) -> Pki {
        self.factories.insert(0, factory);
        self
    }

    /// The PKI directory when none is given: `./pki` (the CLI lets `$PQTLS_PKI_DIR` override
    /// it; this library reads no environment variable).
    pub fn default_dir() -> PathBuf {
        PathBuf::from("pki")
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    pub fn seed(&self) -> u64 {
        self.seed
    }

    /// The server chain, and the client chain when the configuration asks for mutual TLS.
    /// With `auth_bytes`, the server chain is the padded one ([`Pki::padded_chain`]).
    pub fn files_for(&self, cfg: &HandshakeConfig) -> Result<PkiFiles> {
        let server = match Padding::of(cfg) {
            Some(p) => self.padded_chain(&cfg.chain, Role::Server, p)?,
            None => self.chain(&cfg.chain, Role::Server)?,
        };
        let client = match &cfg.client_chain {
            Some(c) => Some(self.chain(c, Role::Client)?),
            None => None,
        };
        Ok(PkiFiles { server, client, trust: Default::default() })
    }

    /// The files of one chain: from the cache if it holds this chain for this seed, else
    /// generated now.
    pub fn chain(&self, spec: &ChainSpec, role: Role) -> Result<ChainFiles> {
        self.chain_with(spec, role, None)
    }

    /// The files of `spec` with its leaf padded as `padding` asks: the same keys and names as
    /// the chain without padding (RSA keys, random, excepted), the leaf one extension larger. Cached like any chain (keyed
    /// on the padding). A size no padding can give is an error naming the sizes that work:
    /// below the chain's own size, or between it and the smallest padded one.
    pub fn padded_chain(&self, spec: &ChainSpec, role: Role, padding: Padding) -> Result<ChainFiles> {
        self.chain_with(spec, role, Some(padding))
    }

    fn chain_with(&self, spec: &ChainSpec, role: Role, padding: Option<Padding>) -> Result<ChainFiles> {
        let algs = spec.algs();
        let factories = algs.iter().map(|a| self.factory(a)).collect::<Result<Vec<_>>>()?;
        let mut manifest = self.manifest(spec, role, &factories);
        if let Some(p) = padding {
            manifest.certificate_message_bytes = Some(p.certificate_message_bytes());
            manifest.root_sent = p.root_sent;
        }
        let name = self.cache_name(spec, role, padding);
        let target = self.dir.join(&name);
        let files = ChainFiles { leaf_key: target.join(LEAF_KEY), chain: target.join(CHAIN), root: target.join(ROOT) };
        if cached(&target, &manifest, spec.intermediate.is_some()) {
            return Ok(files);
        }

        let tmp = self.dir.join(format!(
            ".tmp-{name}-{}-{}",
            std::process::id(),
            TMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        ));
        let built = fs::DirBuilder::new()
            .mode(0o700)
            .create(&tmp)
            .map_err(io("creating", &tmp))
            .and_then(|()| self.generate(spec, role, &factories, &manifest, padding, &tmp))
            .and_then(|()| self.install(&tmp, &target, &manifest, spec.intermediate.is_some()));
        if tmp.exists() {
            // Best effort: a leftover temporary directory is never mistaken for a cache.
            let _ = fs::remove_dir_all(&tmp);
        }
        built.map_err(|e| match padding {
            // The refusal of a size speaks for itself (it names the chain).
            Some(_) if matches!(e, Error::Invalid(_)) => e,
            _ => within(e, format!("PKI chain {role} {spec} (seed {})", self.seed)),
        })?;
        Ok(files)
    }

    /// Every chain of `wanted` (each distinct one once): from the cache, or generated now by up
    /// to `threads` threads at once (at least one) — a sweep over thousands of configurations
    /// needs its chains before its first handshake, and key generation (RSA above all) is
    /// slow and independent from chain to chain. Several processes preparing the same
    /// directory at once are safe (each chain is built aside and renamed into place). A chain
    /// that cannot be made is listed with its error in [`Prepared::failed`] (the others are
    /// made all the same; [`Pki::chain`] gives the same error to whoever asks for it later).
    pub fn prepare(&self, wanted: &[(ChainSpec, Role)], threads: usize) -> Prepared {
        let mut distinct: Vec<(ChainSpec, Role)> = Vec::new();
        for w in wanted {
            if !distinct.contains(w) {
                distinct.push(*w);
            }
        }
        let todo: Vec<(ChainSpec, Role)> = distinct.iter().copied().filter(|(s, r)| !self.is_cached(s, *r)).collect();
        let next = std::sync::atomic::AtomicUsize::new(0);
        let failed: std::sync::Mutex<Vec<(usize, Error)>> = std::sync::Mutex::new(Vec::new());
        let threads = threads.clamp(1, todo.len().max(1));
        std::thread::scope(|scope| {
            for _ in 0..threads {
                scope.spawn(|| loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((spec, role)) = todo.get(i) else { break };
                    if let Err(e) = self.chain(spec, *role) {
                        failed.lock().unwrap_or_else(|p| p.into_inner()).push((i, e));
                    }
                });
            }
        });
        let mut failed = failed.into_inner().unwrap_or_else(|p| p.into_inner());
        failed.sort_by_key(|(i, _)| *i);
        let failed: Vec<(ChainSpec, Role, Error)> =
            failed.into_iter().map(|(i, e)| (todo[i].0, todo[i].1, e)).collect();
        Prepared { chains: distinct.len(), generated: todo.len() - failed.len(), threads, failed }
    }

    /// Whether the cache holds `spec` for `role` and this seed (what [`Pki::chain`] would use
    /// without generating anything).
    pub fn is_cached(&self, spec: &ChainSpec, role: Role) -> bool {
        let Ok(factories) = spec.algs().iter().map(|a| self.factory(a)).collect::<Result<Vec<_>>>() else {
            return false;
        };
        let manifest = self.manifest(spec, role, &factories);
        cached(&self.dir.join(self.cache_name(spec, role, None)), &manifest, spec.intermediate.is_some())
    }

    /// What the cache directory of `spec` for `role`, its keys made by `factories` (leaf first),
    /// must say to be used.
    fn manifest(&self, spec: &ChainSpec, role: Role, factories: &[Arc<dyn KeyFactory>]) -> Manifest {
        Manifest {
            format: FORMAT,
            tool: format!("pqtls-pki {}", env!("CARGO_PKG_VERSION")),
            role: role.to_string(),
            chain: spec.label(),
            seed: self.seed,
            keys: factories.iter().map(|f| f.id()).collect(),
            library: openssl::version::version().to_string(),
            spki_algorithms: Vec::new(),
            certificate_message_bytes: None,
            root_sent: false,
        }
    }

    /// `<role>-<label with ':' as '_'>-s<seed>`, and for a padded chain
    /// `-cert<Certificate message bytes>` (`r`: with the root).
    fn cache_name(&self, spec: &ChainSpec, role: Role, padding: Option<Padding>) -> String {
        let mut name = format!("{role}-{}-s{}", spec.label().replace(':', "_"), self.seed);
        if let Some(p) = padding {
            name += &format!("-cert{}{}", p.certificate_message_bytes(), if p.root_sent { "r" } else { "" });
        }
        name
    }

    /// Adds several key implementations (e.g. every library of a build), in order.
    pub fn with_factories(self, factories: impl IntoIterator<Item = Arc<dyn KeyFactory>>) -> Pki {
        factories.into_iter().fold(self, Pki::with_factory)
    }

    fn factories(&self) -> impl Iterator<Item = Arc<dyn KeyFactory>> + '_ {
        let builtin: Arc<dyn KeyFactory> = Arc::new(OpenSslKeys);
        self.factories.iter().cloned().chain(std::iter::once(builtin))
    }

    /// Names of the algorithms this PKI can make keys for (its factories and OpenSSL's).
    pub fn algorithms(&self) -> Vec<&'static str> {
        pqtls_core::catalogue::SIG_ALGS
            .iter()
            .filter(|a| self.factories().any(|f| f.supports(a)))
            .map(|a| a.name)
            .collect()
    }

    fn factory(&self, alg: &SigAlg) -> Result<Arc<dyn KeyFactory>> {
        self.factories().find(|f| f.supports(alg)).ok_or_else(|| {
            Error::Unsupported(format!(
                "certificates with '{}' keys need a key implementation this PKI was not given: OpenSSL \
                 cannot make them (Falcon-512 and composite keys come from pqtls-oqs: \
                 Pki::with_factory(Arc::new(pqtls_oqs::OqsKeys)), which the pqtls CLI adds); \
                 algorithms this PKI makes: {}",
                alg.name,
                self.algorithms().join(", ")
            ))
        })
    }

    /// The 32-byte seed of one key.
    fn key_seed(&self, role: Role, position: &str, alg: &SigAlg) -> Result<[u8; 32]> {
        let mut input = b"pqtls-pki key v1\0".to_vec();
        input.extend_from_slice(&self.seed.to_be_bytes());
        for part in [role.as_str(), position, alg.name] {
            input.extend_from_slice(part.as_bytes());
            input.push(0);
        }
        let mut out = [0u8; 32];
        openssl::hash::hash_xof(MessageDigest::shake_256(), &input, &mut out)
            .map_err(|e| Error::Other(format!("OpenSSL SHAKE-256: {e}")))?;
        Ok(out)
    }

    fn generate(
        &self,
        spec: &ChainSpec,
        role: Role,
        factories: &[Arc<dyn KeyFactory>],
        manifest: &Manifest,
        padding: Option<Padding>,
        tmp: &Path,
    ) -> Result<()> {
        let algs = spec.algs();
        let positions: &[&str] =
            if spec.intermediate.is_some() { &["leaf", "intermediate", "root"] } else { &["leaf", "root"] };
        // Keys and subjects, leaf first.
        let mut keys = Vec::with_capacity(algs.len());
        let mut seeds = Vec::with_capacity(algs.len());
        for ((alg, factory), position) in algs.iter().zip(factories).zip(positions) {
            let seed = self.key_seed(role, position, alg)?;
            keys.push(factory.key(alg, &seed).map_err(|e| within(e, format!("{position} key {}", alg.name)))?);
            seeds.push(seed);
        }
        let subjects: Vec<String> = algs
            .iter()
            .zip(positions)
            .map(|(alg, position)| match (*position, role) {
                ("leaf", Role::Server) => "CN=localhost,O=pqtls lab".to_string(),
                ("leaf", Role::Client) => "CN=pqtls lab client,O=pqtls lab".to_string(),
                _ => format!("CN=pqtls lab {role} {position} {} s{},O=pqtls lab", alg.name, self.seed),
            })
            .collect();

        // Root first, each signed by its parent.
        let mut ders = vec![Vec::new(); algs.len()];
        for i in (0..algs.len()).rev() {
            let profile = match (positions[i], role) {
                ("root", _) => Profile::Root,
                ("intermediate", _) => Profile::Intermediate,
                (_, Role::Server) => Profile::ServerLeaf,
                (_, Role::Client) => Profile::ClientLeaf,
            };
            let serial = serial(&seeds[i], &keys[i].spki_der()?);
            let issuer = if i + 1 < algs.len() {
                Some(Issuer { subject: &subjects[i + 1], key: keys[i + 1].as_ref() })
            } else {
                None
            };
            let build = |padding: &[&[u8]]| {
                let req =
                    CertRequest { profile, subject: &subjects[i], serial: &serial, key: keys[i].as_ref(), padding };
                cert::build(&req, issuer.as_ref())
                    .map_err(|e| within(e, format!("{} certificate {}", positions[i], algs[i].name)))
            };
            ders[i] = match padding {
                Some(p) if i == 0 => {
                    // The other certificates the message carries are made: what is left is the leaf's.
                    let sent_after_leaf = if p.root_sent { &ders[1..] } else { &ders[1..ders.len() - 1] };
                    let others: u64 = CERTIFICATE_MESSAGE_OVERHEAD_BYTES
                        + p.certificate_verify_bytes
                        + sent_after_leaf.iter().map(|d| certificate_entry_bytes(d.len())).sum::<u64>()
                        + certificate_entry_bytes(0);
                    padded_leaf(
                        &build,
                        p.auth_bytes,
                        others,
                        &self.padding_source(p.auth_bytes + PADDING_SKIPS as u64)?,
                    )
                    .map_err(|e| {
                        Error::Invalid(format!("auth_bytes = {} for the {role} chain {spec}: {e}", p.auth_bytes))
                    })?
                }
                _ => build(&[])?,
            };
        }

        let key_files: &[&str] =
            if spec.intermediate.is_some() { &[LEAF_KEY, INTERMEDIATE_KEY, ROOT_KEY] } else { &[LEAF_KEY, ROOT_KEY] };
        for (key, file) in keys.iter().zip(key_files) {
            write_file(&tmp.join(file), key.private_key_pem()?.as_bytes(), 0o600)?;
        }
        let mut chain = Vec::new();
        for der in &ders[..ders.len() - 1] {
            chain.extend(cert::pem("CERTIFICATE", der).into_bytes());
        }
        write_file(&tmp.join(CHAIN), &chain, 0o644)?;
        write_file(&tmp.join(ROOT), cert::pem("CERTIFICATE", &ders[ders.len() - 1]).as_bytes(), 0o644)?;
        let mut manifest = manifest.clone();
        manifest.spki_algorithms =
            keys.iter().map(|k| spki_algorithm(&k.spki_der()?).map(|a| hex(&a))).collect::<Result<Vec<_>>>()?;
        let json = serde_json::to_vec_pretty(&manifest).map_err(|e| Error::Other(format!("manifest: {e}")))?;
        write_file(&tmp.join(MANIFEST), &json, 0o644)
    }

    /// Pseudo-random padding bytes (SHAKE-256 of the seed): incompressible, like the keys and
    /// signatures they stand for, so that certificate compression does not shrink them away.
    fn padding_source(&self, len: u64) -> Result<Vec<u8>> {
        let len = usize::try_from(len).map_err(|_| Error::Invalid(format!("padding of {len} bytes")))?;
        let mut input = b"pqtls-pki padding v1\0".to_vec();
        input.extend_from_slice(&self.seed.to_be_bytes());
        let mut out = vec![0u8; len];
        openssl::hash::hash_xof(MessageDigest::shake_256(), &input, &mut out)
            .map_err(|e| Error::Other(format!("OpenSSL SHAKE-256: {e}")))?;
        Ok(out)
    }

    /// Renames the finished temporary directory into place. If another process got there
    /// first with a valid cache, that one is kept; a stale cache is replaced.
    fn install(&self, tmp: &Path, target: &Path, manifest: &Manifest, intermediate: bool) -> Result<()> {
        // Other threads or processes may be installing or replacing the same chain at the same
        // time: every failed rename looks again at what is there now.
        for _ in 0..16 {
            let e = match fs::rename(tmp, target) {
                Ok(()) => return Ok(()),
                Err(e) => e,
            };
            if !target.exists() {
                // Moved aside by another writer between our rename and this look: try again.
                continue;
            }
            if cached(target, manifest, intermediate) {
                let _ = fs::remove_dir_all(tmp);
                return Ok(());
            }
            // Stale (other manifest, missing or damaged files): move it aside, then retry.
            let aside =
                self.dir.join(format!(".stale-{}-{}", std::process::id(), TMP_COUNTER.fetch_add(1, Ordering::Relaxed)));
            match fs::rename(target, &aside) {
                Ok(()) => fs::remove_dir_all(&aside).map_err(io("removing stale cache", &aside))?,
                Err(_) if !target.exists() || cached(target, manifest, intermediate) => {}
                Err(_) => return Err(Error::io(format!("replacing stale cache {}", target.display()), e)),
            }
        }
        Err(Error::Other(format!("could not install {} (concurrent changes)", target.display())))
    }
}

/// A cache hit: the manifest matches, every file is there, and the files are what the
/// manifest says (see [`verify`]). Anything else is regenerated.
fn cached(dir: &Path, expected: &Manifest, intermediate: bool) -> bool {
    let Ok(bytes) = fs::read(dir.join(MANIFEST)) else {
        return false;
    };
    let Ok(found) = serde_json::from_slice::<Manifest>(&bytes) else {
        return false;
    };
    let mut names = vec![LEAF_KEY, ROOT_KEY, CHAIN, ROOT];
    if intermediate {
        names.push(INTERMEDIATE_KEY);
    }
    found.matches(expected) && names.iter().all(|n| dir.join(n).is_file()) && verify(dir, &found, intermediate).is_ok()
}

/// Checks a cache directory against its manifest: private files (directory 0700, keys 0600);
/// one certificate per algorithm, each with the public-key algorithm the manifest recorded;
/// each issued by the next (names, and the signature where OpenSSL can check it), the root
/// self-signed; each private key the one of its certificate. The error names the file.
fn verify(dir: &Path, m: &Manifest, intermediate: bool) -> std::result::Result<(), String> {
    use x509_cert::der::{Decode, Encode};
    let mode = |p: &Path| {
        fs::metadata(p).map(|md| md.permissions().mode() & 0o777).map_err(|e| format!("{}: {e}", p.display()))
    };
    let dmode = mode(dir)?;
    if dmode & 0o077 != 0 {
        return Err(format!("{} has mode {dmode:o}, not 700", dir.display()));
    }
    let key_files: &[&str] = if intermediate { &[LEAF_KEY, INTERMEDIATE_KEY, ROOT_KEY] } else { &[LEAF_KEY, ROOT_KEY] };
    let n = key_files.len();
    if m.spki_algorithms.len() != n || m.keys.len() != n {
        return Err(format!(
            "{}: made by a version that did not record the key algorithms",
            dir.join(MANIFEST).display()
        ));
    }
    let read = |name: &str| fs::read(dir.join(name)).map_err(|e| format!("{}: {e}", dir.join(name).display()));
    let mut certs = openssl::x509::X509::stack_from_pem(&read(CHAIN)?)
        .map_err(|e| format!("{}: not PEM certificates: {e}", dir.join(CHAIN).display()))?;
    certs.push(
        openssl::x509::X509::from_pem(&read(ROOT)?)
            .map_err(|e| format!("{}: not a PEM certificate: {e}", dir.join(ROOT).display()))?,
    );
    if certs.len() != n {
        return Err(format!("{}: {} certificates for a chain of {n}", dir.display(), certs.len()));
    }
    let file_of = |i: usize| if i + 1 == n { dir.join(ROOT) } else { dir.join(CHAIN) };
    let mut parsed = Vec::with_capacity(n);
    for (i, c) in certs.iter().enumerate() {
        let der = c.to_der().map_err(|e| format!("{}: {e}", file_of(i).display()))?;
        let cert = x509_cert::Certificate::from_der(&der).map_err(|e| format!("{}: {e}", file_of(i).display()))?;
        let alg = cert.tbs_certificate.subject_public_key_info.algorithm.to_der().map_err(|e| e.to_string())?;
        if hex(&alg) != m.spki_algorithms[i] {
            return Err(format!(
                "{}: certificate {} has another public-key algorithm than chain {} asks for",
                file_of(i).display(),
                i + 1,
                m.chain
            ));
        }
        parsed.push(cert);
    }
    for i in 0..n {
        let parent = (i + 1).min(n - 1);
        if parsed[i].tbs_certificate.issuer != parsed[parent].tbs_certificate.subject {
            return Err(format!("{}: certificate {} is not issued by the next one", file_of(i).display(), i + 1));
        }
        match certs[parent].public_key() {
            Ok(pk) => {
                if !certs[i].verify(&pk).unwrap_or(false) {
                    return Err(format!(
                        "{}: the signature of certificate {} does not verify",
                        file_of(i).display(),
                        i + 1
                    ));
                }
            }
            // A key type OpenSSL cannot load (another factory's): names checked above.
            Err(_) if m.keys[parent] != "openssl" => {}
            Err(e) => {
                return Err(format!("{}: public key of certificate {}: {e}", file_of(parent).display(), parent + 1))
            }
        }
    }
    for (i, name) in key_files.iter().enumerate() {
        let path = dir.join(name);
        let kmode = mode(&path)?;
        if kmode & 0o077 != 0 {
            return Err(format!("{} has mode {kmode:o}, not 600", path.display()));
        }
        let pem = read(name)?;
        let spki = parsed[i].tbs_certificate.subject_public_key_info.to_der().map_err(|e| e.to_string())?;
        match openssl::pkey::PKey::private_key_from_pem(&pem) {
            Ok(key) => {
                if key.public_key_to_der().ok() != Some(spki) {
                    return Err(format!("{}: not the key of certificate {}", path.display(), i + 1));
                }
            }
            Err(_) if m.keys[i] != "openssl" && pem.starts_with(b"-----BEGIN PRIVATE KEY-----") => {}
            Err(e) => return Err(format!("{}: not a readable private key: {e}", path.display())),
        }
    }
    Ok(())
}

/// The DER AlgorithmIdentifier of a DER SubjectPublicKeyInfo.
fn spki_algorithm(spki: &[u8]) -> Result<Vec<u8>> {
    let bad = || Error::Other("a key's SubjectPublicKeyInfo is not DER".into());
    let (0x30, body, _) = cert::read_tlv(spki).ok_or_else(bad)? else { return Err(bad()) };
    let (0x30, _, rest) = cert::read_tlv(body).ok_or_else(bad)? else { return Err(bad()) };
    Ok(body[..body.len() - rest.len()].to_vec())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Other padding bytes of one length [`padded_leaf`] may try (it starts that many bytes later).
const PADDING_SKIPS: usize = 4;

/// The leaf, padded so that `others` (every other authentication byte) plus its DER make
/// exactly `auth_bytes`: its padding grown from a first guess until the signed certificate has
/// the size (an issuer's variable-size signature or a DER length crossing a boundary moves it by
/// a byte or two; each try is signed, so the sizes are the real ones). `build(None)` is the
/// leaf without the extension. The error names the sizes that can be made.
fn padded_leaf(
    build: &dyn Fn(&[&[u8]]) -> Result<Vec<u8>>,
    auth_bytes: u64,
    others: u64,
    source: &[u8],
) -> std::result::Result<Vec<u8>, String> {
    let plain = build(&[]).map_err(|e| e.to_string())?;
    let total = |der: &[u8]| others + der.len() as u64;
    if total(&plain) == auth_bytes {
        return Ok(plain);
    }
    let smallest = build(&[&[]]).map_err(|e| e.to_string())?;
    if auth_bytes < total(&smallest) {
        return Err(format!(
            "too small: this chain's Certificate + CertificateVerify is {} bytes without padding and at least {} \
             with the padding extension; use auth_bytes = {} or at least {}",
            total(&plain),
            total(&smallest),
            total(&plain),
            total(&smallest)
        ));
    }
    const SKIPS: usize = PADDING_SKIPS;
    let mut tried: Vec<(usize, u64)> = Vec::new();
    // One padding extension; where a DER length boundary skips the size, two (the second, empty,
    // moves the boundaries of the first).
    for extensions in 1..=2 {
        // `skip`: other padding bytes of the same length (an issuer's deterministic ECDSA
        // signature has another length for another certificate).
        let parts = |n: usize, skip: usize| -> Vec<&[u8]> {
            let mut p: Vec<&[u8]> = vec![&source[skip..skip + n]];
            p.resize(extensions, &[]);
            p
        };
        let mut n = (auth_bytes - total(&smallest)) as usize;
        let mut seen: Vec<usize> = Vec::new();
        // A guess may come back (an issuer whose signatures are randomised and vary in length
        // gives another size for the same certificate): a few times each.
        for _ in 0..24 {
            if n + SKIPS > source.len() || seen.iter().filter(|s| **s == n).count() >= 4 {
                break;
            }
            seen.push(n);
            let der = build(&parts(n, 0)).map_err(|e| e.to_string())?;
            let got = total(&der);
            if got == auth_bytes {
                return Ok(der);
            }
            tried.push((n, got));
            n = (n as i64 + auth_bytes as i64 - got as i64).max(0) as usize;
        }
        // Neighbours of the last guess, with other bytes (an ECDSA or Falcon issuer's signature
        // changes length with what it signs: some of them give the size).
        for skip in 0..SKIPS {
            for n in n.saturating_sub(4)..=(n + 4).min(source.len() - SKIPS) {
                let der = build(&parts(n, skip)).map_err(|e| e.to_string())?;
                if total(&der) == auth_bytes {
                    return Ok(der);
                }
                tried.push((n, total(&der)));
            }
        }
    }
    let below = tried.iter().map(|(_, g)| *g).filter(|g| *g < auth_bytes).max();
    let above = tried.iter().map(|(_, g)| *g).filter(|g| *g > auth_bytes).min();
    Err(format!(
        "no padding gives exactly this size (a DER length boundary skips it); nearest sizes made: {}",
        [below, above].iter().flatten().map(|g| g.to_string()).collect::<Vec<_>>().join(" and ")
    ))
}

/// Why the cache directory of a chain would not be used as it is (`None`: it would be), for
/// tools that report on a PKI directory. Reads only.
pub fn cache_problem(pki_dir: &Path, spec: &ChainSpec, role: Role, seed: u64) -> Option<String> {
    let dir = pki_dir.join(format!("{role}-{}-s{seed}", spec.label().replace(':', "_")));
    let bytes = match fs::read(dir.join(MANIFEST)) {
        Ok(b) => b,
        Err(e) => return Some(format!("{}: {e}", dir.join(MANIFEST).display())),
    };
    let m: Manifest = match serde_json::from_slice(&bytes) {
        Ok(m) => m,
        Err(e) => return Some(format!("{}: {e}", dir.join(MANIFEST).display())),
    };
    verify(&dir, &m, spec.intermediate.is_some()).err()
}

/// A positive 16-byte serial from the key seed and the public key (so that a random RSA key
/// gets its own serial).
fn serial(seed: &[u8; 32], spki: &[u8]) -> Vec<u8> {
    let mut input = b"pqtls-pki serial\0".to_vec();
    input.extend_from_slice(seed);
    input.extend_from_slice(spki);
    let mut out = openssl::sha::sha256(&input)[..16].to_vec();
    out[0] = (out[0] & 0x7f) | 0x40;
    out
}
