//! The `--via` terminator: nginx or HAProxy started by pqtls in front of a plain backend,
//! with exactly the group, cipher suite and certificate chain asked for; checked (OpenSSL
//! 3.5 or newer, listening), recorded (version, TLS library) and stopped, leaving no process
//! behind.

use crate::forward::{haproxy_forward_cfg, nginx_forward_conf, ForwardConf};
use crate::process::{Stopped, Supervised};
use crate::root::{Root, Staged};
use crate::{haproxy_key_path, OQS_OPENSSL_CONF};
use pqtls_core::backend::ChainFiles;
use pqtls_core::catalogue::{CodepointOverrides, Group, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::{Error, Result};
use serde::Serialize;
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Which third-party program terminates TLS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Terminator {
    Nginx,
    Haproxy,
}

/// How to run the terminator's program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HowToRun {
    /// In the Debian trixie root at this path (scripts/trixie-root.sh; oqs-provider from
    /// scripts/oqs-peer.sh): `chroot ROOT nginx|haproxy`, files staged under ROOT/tmp.
    Root(PathBuf),
    /// This binary (`--nginx PATH` / `--haproxy PATH`), no chroot; files staged in a new
    /// directory under `work_dir`. With oqs-provider, nginx uses the `OPENSSL_CONF` of pqtls'
    /// environment (inherited) and HAProxy loads `oqsprovider` from its OpenSSL's module
    /// directory.
    Binary { program: PathBuf, work_dir: PathBuf },
}

/// What to terminate (paths on this machine).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Forward {
    /// Where the terminator listens; port 0 picks a free one ([`Running::addr`] has it).
    pub listen: SocketAddr,
    /// The one TLS 1.3 group (OpenSSL's name).
    pub group: String,
    /// The one TLS 1.3 cipher suite.
    pub cipher: String,
    /// Leaf certificate then intermediates (PEM), e.g. `ChainFiles::chain` of the lab's PKI.
    pub chain_pem: PathBuf,
    /// The leaf's private key (PEM).
    pub key_pem: PathBuf,
    /// nginx worker processes / HAProxy threads (default 1).
    pub workers: usize,
    /// Load oqs-provider (FrodoKEM, OQS hybrids, Falcon): in the root, it must have been
    /// added by scripts/oqs-peer.sh.
    pub oqs_provider: bool,
    /// Keep connections to the backend open between requests (default true: the study
    /// measured the TLS side, so the terminator should not add a TCP connect to the backend
    /// per request; false opens one backend connection per request).
    pub backend_keep_alive: bool,
    /// Hold this many idle client connections (the resident measurement; see
    /// [`crate::forward::ForwardConf::hold_connections`]).
    pub hold_connections: Option<usize>,
    /// Listen for HTTP/3 over QUIC (UDP) instead of HTTPS over TCP.
    pub quic: bool,
}

impl Forward {
    /// One worker, no oqs-provider, keep-alive to the backend.
    pub fn new(listen: SocketAddr, group: &str, cipher: &str, chain_pem: &Path, key_pem: &Path) -> Forward {
        Forward {
            listen,
            group: group.to_string(),
            cipher: cipher.to_string(),
            chain_pem: chain_pem.to_path_buf(),
            key_pem: key_pem.to_path_buf(),
            workers: 1,
            oqs_provider: false,
            backend_keep_alive: true,
            hold_connections: None,
            quic: false,
        }
    }
}

impl Forward {
    /// The terminator's side of `cfg`: its expected group (the one the server supports), its
    /// cipher suite, the server chain of the lab's PKI (`PkiFiles::server`), oqs-provider when
    /// the algorithms need it ([`needs_oqs_provider`]). What a terminator cannot do for a
    /// scenario is an `Unsupported` error: mutual TLS, sending the root, code point overrides,
    /// algorithms neither OpenSSL 3.5 nor the root's oqs-provider has.
    pub fn for_handshake(listen: SocketAddr, cfg: &HandshakeConfig, server_chain: &ChainFiles) -> Result<Forward> {
        let refuse = |what: &str| {
            Err(Error::Unsupported(format!(
                "{what} through a terminator (--via nginx|haproxy) is not supported: drop it, or measure against                  pqtls serve"
            )))
        };
        if cfg.client_chain.is_some() {
            return refuse("mutual TLS (--mtls)");
        }
        if cfg.send_root {
            return refuse("sending the root certificate (--send-root)");
        }
        if cfg.codepoints != CodepointOverrides::none() {
            return refuse("a code point override");
        }
        let group = cfg.expected_group();
        let mut f = Forward::new(listen, group.name, cfg.cipher.name, &server_chain.chain, &server_chain.leaf_key);
        f.oqs_provider = needs_oqs_provider(group, &cfg.chain)?;
        Ok(f)
    }
}

/// What a record says about the terminator that served it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TerminatorInfo {
    pub kind: Terminator,
    /// `nginx/1.26.3`, `HAProxy 3.0.11-1`.
    pub version: String,
    /// The OpenSSL it runs with, `OpenSSL 3.5.7 9 Jun 2026`.
    pub tls_library: String,
    /// `chroot /var/cache/pqtls/trixie nginx` or the binary's path.
    pub program: String,
    pub workers: usize,
    pub backend_keep_alive: bool,
    pub oqs_provider: bool,
}

/// How long a terminator may take to listen.
const START_TIMEOUT: Duration = Duration::from_secs(15);
/// How long it may take to stop after SIGTERM before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(5);

impl Terminator {
    /// `nginx` or `haproxy`.
    pub fn parse(name: &str) -> Result<Terminator> {
        match name.to_ascii_lowercase().as_str() {
            "nginx" => Ok(Terminator::Nginx),
            "haproxy" => Ok(Terminator::Haproxy),
            _ => Err(Error::unknown("terminator", name, ["nginx", "haproxy"])),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Terminator::Nginx => "nginx",
            Terminator::Haproxy => "haproxy",
        }
    }

    /// Where the trixie root has it.
    fn root_program(self) -> &'static str {
        match self {
            Terminator::Nginx => "/usr/sbin/nginx",
            Terminator::Haproxy => "/usr/sbin/haproxy",
        }
    }

    /// What would work instead (for errors).
    fn alternatives(self) -> String {
        format!(
            "make the Debian trixie root with scripts/trixie-root.sh (as root; it has nginx and HAProxy on \
             OpenSSL 3.5), or give --{name} PATH of a {name} built with OpenSSL 3.5 or newer",
            name = self.name()
        )
    }

    /// A command running the program (chroot or not), checked to exist.
    fn command(self, how: &HowToRun) -> Result<(Command, String)> {
        match how {
            HowToRun::Root(path) => {
                let root =
                    Root::open(path).map_err(|e| Error::Unsupported(format!("{e}; or give --{} PATH", self.name())))?;
                if !root.host_path(self.root_program()).is_file() {
                    return Err(Error::Unsupported(format!(
                        "{} is not installed in the trixie root {} (no {}): {}",
                        self.name(),
                        root.path().display(),
                        self.root_program(),
                        self.alternatives()
                    )));
                }
                Ok((root.command(self.root_program()), format!("chroot {} {}", root.path().display(), self.name())))
            }
            HowToRun::Binary { program, .. } => {
                if !program.is_file() {
                    return Err(Error::Unsupported(format!(
                        "{} binary {} does not exist: {}",
                        self.name(),
                        program.display(),
                        self.alternatives()
                    )));
                }
                Ok((Command::new(program), program.display().to_string()))
            }
        }
    }

    /// The program's version and TLS library (`nginx -V` / `haproxy -vv`), refused unless
    /// the library is OpenSSL 3.5 or newer.
    pub fn probe(self, how: &HowToRun) -> Result<(String, String)> {
        self.probe_text(how).map(|(v, l, _)| (v, l))
    }

    /// [`Terminator::probe`], and whether the build has HTTP/3 (nginx `--with-http_v3_module`,
    /// HAProxy `+QUIC`).
    fn probe_text(self, how: &HowToRun) -> Result<(String, String, bool)> {
        let (mut cmd, program) = self.command(how)?;
        cmd.arg(match self {
            Terminator::Nginx => "-V",
            Terminator::Haproxy => "-vv",
        });
        let out = cmd
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Error::io(format!("running {program} for its version; {}", self.alternatives()), e))?;
        let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        let (version, library) = parse_version(self, &text).ok_or_else(|| {
            Error::Other(format!(
                "could not read the version and TLS library of {program} from its output ({}):\n{}",
                out.status,
                tail(&text, 10)
            ))
        })?;
        check_openssl(&library).map_err(|why| {
            Error::Unsupported(format!("{program} ({version}) runs on {library}: {why}; {}", self.alternatives()))
        })?;
        let quic = match self {
            Terminator::Nginx => text.contains("--with-http_v3_module"),
            Terminator::Haproxy => text.contains("+QUIC"),
        };
        Ok((version, library, quic))
    }

    /// Stages the configuration and the chain, starts the terminator in the foreground in its
    /// own process group, and returns once it accepts connections on `site.listen`
    /// (bounded; if it exits first, its own error output is in the error). It forwards
    /// HTTP/1.1 to `backend` (e.g. `pqtls serve --plain`, `pqtls_net::Server` with `tls: None`).
    pub fn start(self, how: &HowToRun, site: &Forward, backend: SocketAddr) -> Result<Running> {
        let (version, tls_library, quic_built) = self.probe_text(how)?;
        if site.quic && self == Terminator::Haproxy {
            // Measured with HAProxy 3.0.11 (limited-quic) in the trixie root: an HTTP/3 GET whose
            // stream ends in a frame after its HEADERS (as quinn/h3 send it; curl ends it in
            // the HEADERS frame) is forwarded as a chunked HTTP/1.1 request whose last chunk
            // never comes: the backend waits until the client gives up (docs/quic-load.md).
            return Err(Error::Unsupported(format!(
                "haproxy over HTTP/3 as pqtls' terminator: {version} (limited-quic) forwards the HTTP/3 GETs of \
                 pqtls' QUIC client as chunked requests it never ends, so no request completes; use terminator = \
                 nginx or pqtls for HTTP/3, run HAProxy yourself with `http-request return` and give its URL, or \
                 http = \"1.1\" for HAProxy"
            )));
        }
        if site.quic && !quic_built {
            return Err(Error::Unsupported(format!(
                "{} over HTTP/3: this {version} is built without QUIC ({}); use a build with it (the trixie root's \
                 nginx and HAProxy have it), terminator = pqtls, or http = \"1.1\"",
                self.name(),
                match self {
                    Terminator::Nginx => "nginx -V shows no --with-http_v3_module",
                    Terminator::Haproxy => "haproxy -vv shows no +QUIC",
                }
            )));
        }
        let (mut cmd, program) = self.command(how)?;
        if site.oqs_provider {
            if let HowToRun::Root(root) = how {
                if !Root::open(root)?.host_path(OQS_OPENSSL_CONF).is_file() {
                    return Err(Error::Unsupported(format!(
                        "group {} needs oqs-provider, which the trixie root {} lacks: run scripts/oqs-peer.sh \
                         (as root), or use `pqtls serve --stack rustls` as the terminator",
                        site.group,
                        root.display()
                    )));
                }
            }
        }
        let listen = free_address(site.listen, site.quic)?;
        let staged = match how {
            HowToRun::Root(root) => Root::open(root)?.stage(&format!("via-{}", self.name()))?,
            HowToRun::Binary { work_dir, .. } => {
                let inside = work_dir
                    .to_str()
                    .ok_or_else(|| Error::Invalid(format!("work directory {} is not UTF-8", work_dir.display())))?;
                Staged::new_under(work_dir, inside, &format!("via-{}", self.name()))?
            }
        };
        let chain_pem = staged.copy(&site.chain_pem, "chain.pem")?;
        let key_pem = staged.copy(&site.key_pem, "key.pem")?;
        let conf = ForwardConf {
            listen,
            quic: site.quic,
            group: site.group.clone(),
            cipher: site.cipher.clone(),
            chain_pem: chain_pem.clone(),
            key_pem,
            work_dir: staged.inside.clone(),
            workers: site.workers,
            backend,
            backend_keep_alive: site.backend_keep_alive,
            providers: if site.oqs_provider { vec!["oqsprovider".into(), "default".into()] } else { vec![] },
            hold_connections: site.hold_connections,
            fd_limit: crate::process::fd_hard_limit(),
        };
        match self {
            Terminator::Nginx => {
                let file = staged.write("nginx.conf", nginx_forward_conf(&conf)?.as_bytes())?;
                cmd.args(["-e", "stderr", "-p", &staged.inside, "-c", &file]);
                if site.oqs_provider && matches!(how, HowToRun::Root(_)) {
                    cmd.env("OPENSSL_CONF", OQS_OPENSSL_CONF);
                }
            }
            Terminator::Haproxy => {
                staged.copy(&site.key_pem, "chain.pem.key")?;
                debug_assert_eq!(haproxy_key_path(&chain_pem), staged.inside("chain.pem.key"));
                let file = staged.write("haproxy.cfg", haproxy_forward_cfg(&conf)?.as_bytes())?;
                cmd.args(["-db", "-f", &file]);
            }
        }
        let output = staged.host.join("output.log");
        let out_file =
            std::fs::File::create(&output).map_err(|e| Error::io(format!("creating {}", output.display()), e))?;
        let err_file = out_file.try_clone().map_err(|e| Error::io("duplicating the output file", e))?;
        cmd.stdin(Stdio::null()).stdout(out_file).stderr(err_file);
        let process = Supervised::spawn(&mut cmd, self.name())?;
        let info = TerminatorInfo {
            kind: self,
            version,
            tls_library,
            program,
            workers: site.workers,
            backend_keep_alive: site.backend_keep_alive,
            oqs_provider: site.oqs_provider,
        };
        let mut running =
            Running { process: Some(process), info, addr: listen, quic: site.quic, backend, output, staged };
        running.wait_listening()?;
        Ok(running)
    }
}

/// A terminator that listens; stopped by [`Running::stop`] or when dropped (also when a
/// run fails or panics), its staged files removed.
#[derive(Debug)]
pub struct Running {
    process: Option<Supervised>,
    info: TerminatorInfo,
    addr: SocketAddr,
    /// It listens over QUIC (UDP `addr`).
    quic: bool,
    backend: SocketAddr,
    output: PathBuf,
    // Dropped after `process` (field order): the files outlive the program.
    staged: Staged,
}

impl Running {
    /// Where it listens (TLS).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Its version, TLS library and settings, for the record.
    pub fn info(&self) -> &TerminatorInfo {
        &self.info
    }

    /// What a load record says about it: `nginx`, `nginx/1.26.3 (OpenSSL 3.5.7 9 Jun 2026)`,
    /// backend `http://127.0.0.1:PORT`.
    pub fn record(&self) -> pqtls_core::load::Terminator {
        pqtls_core::load::Terminator {
            name: self.info.kind.name().to_string(),
            version: format!("{} ({})", self.info.version, self.info.tls_library),
            backend: Some(format!("http://{}", self.backend)),
        }
    }

    /// CPU time (user + system) of all its processes so far, ns (10 ms resolution): the
    /// difference over a run divided by the handshakes is its CPU per handshake.
    pub fn cpu_ns(&self) -> u64 {
        self.process.as_ref().map_or(0, |p| p.cpu_ns())
    }

    /// The process id of its leader (nginx's master, HAProxy) = its process group id.
    pub fn pid(&self) -> u32 {
        self.process.as_ref().map_or(0, |p| p.pid())
    }

    /// Its processes that are alive now (nginx: master and workers).
    pub fn processes(&self) -> Vec<u32> {
        self.process.as_ref().map_or(Vec::new(), |p| p.alive())
    }

    /// Σ RSS and Σ PSS of its live processes, bytes (see [`Supervised::memory`]).
    pub fn memory(&self) -> (u64, u64) {
        self.process.as_ref().map_or((0, 0), |p| p.memory())
    }

    /// What it wrote on stdout and stderr so far (its error log: warnings and errors).
    pub fn output(&self) -> String {
        std::fs::read_to_string(&self.output).unwrap_or_default()
    }

    /// The staged directory (configuration, chain, pid file) on this machine.
    pub fn staged_dir(&self) -> &Path {
        &self.staged.host
    }

    /// Checks that it is still running (an error with its output if it exited).
    pub fn check_alive(&mut self) -> Result<()> {
        if let Some(p) = self.process.as_mut() {
            if let Some(status) = p.try_wait()? {
                return Err(Error::Other(format!(
                    "{} exited ({status}); its output:\n{}",
                    self.info.kind.name(),
                    tail(&self.output(), 20)
                )));
            }
        }
        Ok(())
    }

    /// SIGTERM to its process group, SIGKILL after 5 s; returns once none of its processes
    /// is alive.
    pub fn stop(mut self) -> Result<Stopped> {
        match self.process.take() {
            Some(p) => p.stop(STOP_GRACE),
            None => Ok(Stopped { status: None, killed: false }),
        }
    }

    fn wait_listening(&mut self) -> Result<()> {
        let t0 = Instant::now();
        let name = self.info.kind.name();
        loop {
            if let Some(p) = self.process.as_mut() {
                if let Some(status) = p.try_wait()? {
                    let out = self.output();
                    let why = if out.contains("Address already in use") {
                        format!(
                            "{} is in use by another program; pick another port (port 0 picks a free one)",
                            self.addr
                        )
                    } else {
                        format!("{name} exited ({status}) before listening on {}", self.addr)
                    };
                    return Err(Error::Other(format!("{why}; its output:\n{}", tail(&out, 20))));
                }
            }
            // nginx's master listens before it forks its workers: wait for them too (the
            // connections wait in the backlog meanwhile, but processes() and cpu_ns() should
            // see every process).
            let processes = match self.info.kind {
                Terminator::Nginx => 1 + self.info.workers,
                Terminator::Haproxy => 1,
            };
            let listening = if self.quic {
                // UDP has no connect to probe: the port is the terminator's once nothing else
                // can bind it (it was free when picked).
                matches!(UdpSocket::bind(self.addr), Err(e) if e.kind() == std::io::ErrorKind::AddrInUse)
            } else {
                TcpStream::connect_timeout(&self.addr, Duration::from_millis(200)).is_ok()
            };
            if self.processes().len() >= processes && listening {
                return Ok(());
            }
            if t0.elapsed() > START_TIMEOUT {
                return Err(Error::Other(format!(
                    "{name} did not listen on {} within {} s; its output:\n{}",
                    self.addr,
                    START_TIMEOUT.as_secs(),
                    tail(&self.output(), 20)
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The groups and signature algorithms that the trixie root's oqs-provider 0.9.0 serves
/// (scripts/oqs-peer.sh builds liboqs with FrodoKEM-640-AES, ML-KEM and Falcon-512 only;
/// each pair is tested in crates/pqtls-cli/tests/interop_oqs.rs and peers.rs).
pub const OQS_PROVIDER_GROUPS: &[&str] = &["frodo640aes", "x25519_frodo640aes", "x25519_mlkem512", "p256_mlkem512"];
pub const OQS_PROVIDER_SIG_ALGS: &[&str] = &["falcon512"];

/// Whether nginx/HAProxy on OpenSSL 3.5 can terminate `group` with `chain`: `Ok(false)` with
/// OpenSSL alone, `Ok(true)` with oqs-provider loaded ([`Forward::oqs_provider`]), an
/// `Unsupported` error naming the algorithm otherwise (SLH-DSA has certificates but no TLS
/// signature scheme in OpenSSL 3.5; composites and other OQS groups are not in the root's
/// provider) — then `pqtls serve --stack rustls` terminates instead.
pub fn needs_oqs_provider(group: &Group, chain: &ChainSpec) -> Result<bool> {
    let instead = "use pqtls serve --stack rustls as the terminator";
    let mut oqs = if group.provided_by(Stack::Openssl) {
        false
    } else if OQS_PROVIDER_GROUPS.contains(&group.name) {
        true
    } else {
        return Err(Error::Unsupported(format!(
            "group {}: neither OpenSSL 3.5 nor the trixie root's oqs-provider has it; {instead}",
            group.name
        )));
    };
    let algs = [Some(chain.leaf), chain.intermediate, Some(chain.root)];
    for (i, alg) in algs.iter().enumerate() {
        let Some(alg) = alg else { continue };
        let leaf = i == 0;
        if alg.tls_stacks.contains(&Stack::Openssl) || (!leaf && !alg.iana && alg.name.starts_with("slhdsa")) {
            continue;
        }
        if OQS_PROVIDER_SIG_ALGS.contains(&alg.name) {
            oqs = true;
            continue;
        }
        let why = if alg.name.starts_with("slhdsa") {
            "OpenSSL 3.5 has SLH-DSA certificates but no TLS signature scheme for them"
        } else {
            "neither OpenSSL 3.5 nor the trixie root's oqs-provider has it"
        };
        return Err(Error::Unsupported(format!(
            "{} {} in chain {chain}: {why}; {instead}",
            if leaf { "leaf" } else { "CA" },
            alg.name
        )));
    }
    Ok(oqs)
}

/// `addr` if nothing listens there (port 0: a free port on its address, [`crate::port`]); a clear error if
/// another program has it. (Checked before starting, so that the readiness probe cannot
/// mistake another program for the terminator.)
fn free_address(addr: SocketAddr, udp: bool) -> Result<SocketAddr> {
    if addr.port() == 0 {
        // Not one the kernel picks: another program could take it before the terminator binds.
        return crate::port::free_port(addr.ip(), udp)
            .map(|port| SocketAddr::new(addr.ip(), port))
            .map_err(|e| Error::io(format!("finding a free port on {} for the terminator", addr.ip()), e));
    }
    let bound = if udp {
        UdpSocket::bind(addr).and_then(|s| s.local_addr())
    } else {
        TcpListener::bind(addr).and_then(|l| l.local_addr())
    };
    match bound {
        Ok(a) => Ok(a),
        Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => Err(Error::Invalid(format!(
            "{addr} is in use by another program; pick another port for the terminator (port 0 picks a free one)"
        ))),
        Err(e) => Err(Error::io(format!("binding {addr} for the terminator"), e)),
    }
}

/// (version, TLS library) from `nginx -V` or `haproxy -vv`.
fn parse_version(kind: Terminator, text: &str) -> Option<(String, String)> {
    match kind {
        Terminator::Nginx => {
            let version = text.lines().find_map(|l| l.strip_prefix("nginx version: "))?.trim().to_string();
            let built = text.lines().find_map(|l| l.strip_prefix("built with "))?;
            // "OpenSSL 3.5.6 7 Apr 2026 (running with OpenSSL 3.5.7 9 Jun 2026)"
            let library = match built.split_once("(running with ") {
                Some((_, running)) => running.trim_end().trim_end_matches(')'),
                None => built.trim(),
            };
            Some((version, library.trim().to_string()))
        }
        Terminator::Haproxy => {
            let first = text.lines().find(|l| l.starts_with("HAProxy version "))?;
            let v = first.strip_prefix("HAProxy version ")?.split_whitespace().next()?;
            let library = text
                .lines()
                .find_map(|l| l.trim().strip_prefix("Running on OpenSSL version :"))
                .or_else(|| text.lines().find_map(|l| l.trim().strip_prefix("Built with OpenSSL version :")))?;
            Some((format!("HAProxy {v}"), library.trim().to_string()))
        }
    }
}

/// Ok for OpenSSL 3.5 or newer; else why not.
fn check_openssl(library: &str) -> std::result::Result<(), String> {
    let Some(v) = library.strip_prefix("OpenSSL ") else {
        return Err("pqtls drives terminators on OpenSSL 3.5 or newer only (ML-KEM, ML-DSA)".into());
    };
    let mut parts = v.split(|c: char| c == '.' || c.is_whitespace());
    let major: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    let minor: u32 = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
    if (major, minor) < (3, 5) {
        return Err(format!("OpenSSL {major}.{minor} is older than 3.5 and has no ML-KEM or ML-DSA"));
    }
    Ok(())
}

/// The last `n` lines of `text`.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_and_libraries_are_read_from_the_programs_output() {
        let nginx = "nginx version: nginx/1.26.3\nbuilt with OpenSSL 3.5.6 7 Apr 2026 (running with OpenSSL 3.5.7 9 Jun 2026)\nTLS SNI support enabled\n";
        assert_eq!(
            parse_version(Terminator::Nginx, nginx),
            Some(("nginx/1.26.3".into(), "OpenSSL 3.5.7 9 Jun 2026".into()))
        );
        let old = "nginx version: nginx/1.22.1\nbuilt with OpenSSL 3.0.11 19 Sep 2023\n";
        let (_, lib) = parse_version(Terminator::Nginx, old).unwrap();
        assert_eq!(lib, "OpenSSL 3.0.11 19 Sep 2023");
        let e = check_openssl(&lib).unwrap_err();
        assert!(e.contains("3.0") && e.contains("older than 3.5"), "{e}");
        let haproxy = "HAProxy version 3.0.11-1 2025/06/05 - https://haproxy.org/\nStatus: long-term\n  Built with OpenSSL version : OpenSSL 3.5.6 7 Apr 2026\n  Running on OpenSSL version : OpenSSL 3.5.7 9 Jun 2026\n";
        assert_eq!(
            parse_version(Terminator::Haproxy, haproxy),
            Some(("HAProxy 3.0.11-1".into(), "OpenSSL 3.5.7 9 Jun 2026".into()))
        );
        assert!(check_openssl("OpenSSL 3.5.0 8 Apr 2025").is_ok());
        assert!(check_openssl("OpenSSL 4.0.0").is_ok());
        assert!(check_openssl("BoringSSL").unwrap_err().contains("3.5 or newer"));
    }

    #[test]
    fn bad_names_and_missing_programs_say_what_would_work() {
        let e = Terminator::parse("envoy").unwrap_err().to_string();
        assert!(e.contains("nginx") && e.contains("haproxy"), "{e}");
        assert_eq!(Terminator::parse("HAProxy").unwrap(), Terminator::Haproxy);
        let how = HowToRun::Binary { program: "/nonexistent/sbin/nginx".into(), work_dir: std::env::temp_dir() };
        let e = Terminator::Nginx.probe(&how).unwrap_err().to_string();
        assert!(e.contains("/nonexistent/sbin/nginx"), "{e}");
        assert!(e.contains("scripts/trixie-root.sh") && e.contains("--nginx PATH"), "{e}");
        let e = Terminator::Haproxy.probe(&HowToRun::Root("/nonexistent-root".into())).unwrap_err().to_string();
        assert!(e.contains("scripts/trixie-root.sh") && e.contains("--haproxy PATH"), "{e}");
    }

    #[test]
    fn which_algorithms_need_oqs_provider() {
        let needs = |g: &str, c: &str| {
            needs_oqs_provider(pqtls_core::catalogue::group(g).unwrap(), &ChainSpec::parse(c).unwrap())
        };
        assert!(!needs("X25519MLKEM768", "mldsa65:mldsa65").unwrap());
        assert!(!needs("x25519", "ed25519:ed25519").unwrap());
        assert!(!needs("MLKEM1024", "mldsa87:mldsa65:mldsa87").unwrap());
        assert!(needs("x25519_frodo640aes", "p256:p256").unwrap());
        assert!(needs("X25519MLKEM768", "falcon512:falcon512").unwrap());
        assert!(needs("x25519", "mldsa65:falcon512").unwrap());
        let e = needs("x25519", "slhdsa-sha2-128s:slhdsa-sha2-128s").unwrap_err().to_string();
        assert!(e.contains("no TLS signature scheme") && e.contains("--stack rustls"), "{e}");
        assert!(!needs("x25519", "mldsa65:slhdsa-sha2-128s").unwrap(), "an SLH-DSA root is only sent");
        let e = needs("x25519", "mldsa44_ed25519:mldsa44_ed25519").unwrap_err().to_string();
        assert!(e.contains("mldsa44_ed25519") && e.contains("--stack rustls"), "{e}");
    }

    #[test]
    fn a_terminator_site_from_a_handshake_configuration() {
        use pqtls_core::catalogue;
        let files = ChainFiles { leaf_key: "/k.pem".into(), chain: "/c.pem".into(), root: "/r.pem".into() };
        let listen: SocketAddr = "127.0.0.1:0".parse().unwrap();
        let cfg = |g: &str, c: &str| {
            HandshakeConfig::new(
                Stack::Openssl,
                catalogue::group(g).unwrap(),
                ChainSpec::parse(c).unwrap(),
                catalogue::cipher("TLS_AES_256_GCM_SHA384").unwrap(),
            )
        };
        let f = Forward::for_handshake(listen, &cfg("X25519MLKEM768", "mldsa65:mldsa65"), &files).unwrap();
        assert_eq!((f.group.as_str(), f.cipher.as_str()), ("X25519MLKEM768", "TLS_AES_256_GCM_SHA384"));
        assert_eq!((f.chain_pem.to_str(), f.key_pem.to_str()), (Some("/c.pem"), Some("/k.pem")));
        assert!(!f.oqs_provider && f.backend_keep_alive && f.workers == 1);
        let f = Forward::for_handshake(listen, &cfg("x25519_mlkem512", "falcon512:falcon512"), &files).unwrap();
        assert!(f.oqs_provider);
        let mut mtls = cfg("x25519", "p256:p256");
        mtls.client_chain = Some(ChainSpec::parse("p256:p256").unwrap());
        let e = Forward::for_handshake(listen, &mtls, &files).unwrap_err().to_string();
        assert!(e.contains("mutual TLS") && e.contains("pqtls serve"), "{e}");
        let mut root = cfg("x25519", "p256:p256");
        root.send_root = true;
        assert!(Forward::for_handshake(listen, &root, &files).unwrap_err().to_string().contains("--send-root"));
    }

    #[test]
    fn a_port_in_use_is_named() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        let e = free_address(addr, false).unwrap_err().to_string();
        assert!(e.contains(&addr.to_string()) && e.contains("in use"), "{e}");
        assert_ne!(free_address("127.0.0.1:0".parse().unwrap(), false).unwrap().port(), 0);
        // A UDP port another program holds, for a terminator over QUIC.
        let held = UdpSocket::bind("127.0.0.1:0").unwrap();
        let e = free_address(held.local_addr().unwrap(), true).unwrap_err().to_string();
        assert!(e.contains("is in use by another program"), "{e}");
    }
}
