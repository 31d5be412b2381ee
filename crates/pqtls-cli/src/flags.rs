//! Values of the command's own flags that clap reads: whole numbers with their range, listen
//! addresses, URL ports, tolerances; the flag groups several commands share (schedule,
//! threads, terminators, `pqtls run`'s for `pqtls batch`) and the settings that flags make. Each error names the value and what would work (clap adds the flag).
//! Numeric flags accept a leading `-` (clap would call `-1` an unexpected argument), so that
//! a negative number is answered by what the flag takes.

use anyhow::{bail, Context as _, Result};
use pqtls_core::backend::{Anchors, ClientTrust};
use pqtls_core::settings::{LoadSettings, Settings};
use pqtls_core::stats::{parse_precision, Quantiles};
use std::net::SocketAddr;
use std::path::PathBuf;

/// A whole number from `min` to `max` (a value parser for clap), e.g. `count(1, 1_000_000, "20")`.
pub fn count(min: u64, max: u64, example: &'static str) -> impl Fn(&str) -> Result<u64, String> + Clone {
    move |s: &str| {
        let why = || match max {
            u64::MAX => format!("give a whole number ≥ {min}, e.g. {example}"),
            _ => format!("give a whole number from {min} to {max}, e.g. {example}"),
        };
        match s.trim().parse::<u64>() {
            Ok(n) if (min..=max).contains(&n) => Ok(n),
            Ok(_) => Err(format!("{s} is out of range: {}", why())),
            Err(_) if s.trim().starts_with('-') && s.trim()[1..].parse::<u64>().is_ok() => {
                Err(format!("a negative number: {}", why()))
            }
            Err(_) => Err(format!("not a whole number: {}", why())),
        }
    }
}

/// Like [`count`], for `usize` flags.
pub fn count_usize(min: usize, max: usize, example: &'static str) -> impl Fn(&str) -> Result<usize, String> + Clone {
    let c = count(min as u64, max as u64, example);
    move |s: &str| c(s).map(|n| n as usize)
}

/// Like [`count`], for `u32` flags.
pub fn count_u32(min: u32, max: u32, example: &'static str) -> impl Fn(&str) -> Result<u32, String> + Clone {
    let c = count(min as u64, max as u64, example);
    move |s: &str| c(s).map(|n| n as u32)
}

/// An address to listen on: `127.0.0.1:8443`, `[::1]:0` (0: a free port).
pub fn listen(s: &str) -> Result<SocketAddr, String> {
    if let Ok(a) = s.trim().parse::<SocketAddr>() {
        return Ok(a);
    }
    let example = "e.g. 127.0.0.1:8443 or [::1]:0 (port 0: a free one)";
    match s.trim().rsplit_once(':') {
        Some((host, port)) if !port.contains(']') => {
            if port.parse::<u64>().is_ok() {
                if host.trim_start_matches('[').trim_end_matches(']').parse::<std::net::IpAddr>().is_err() {
                    return Err(format!("'{host}' is not an IP address; {example}"));
                }
                return Err(format!("port {port} is out of range 0–65535; {example}"));
            }
            Err(format!("port '{port}' is not a number; {example}"))
        }
        _ => Err(format!("give an IP address and a port; {example}")),
    }
}

/// The port of an `http(s)://host:port/…` URL is a number from 1 to 65535 (before the host is
/// looked up: a bad port is not a name-resolution failure).
pub fn url_port(url: &str) -> Result<()> {
    // Another scheme is the URL parser's to refuse.
    let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) else { return Ok(()) };
    let authority = rest.split('/').next().unwrap_or("");
    let port = match authority.rfind(']') {
        Some(b) => authority[b + 1..].strip_prefix(':'),
        None => authority.rsplit_once(':').map(|(_, p)| p),
    };
    let Some(port) = port else { return Ok(()) };
    match port.parse::<u64>() {
        Ok(1..=65535) => Ok(()),
        Ok(p) => bail!("URL {url}: port {p} is out of range 1–65535; e.g. https://127.0.0.1:8443/1KiB"),
        Err(_) => bail!("URL {url}: port '{port}' is not a number; e.g. https://127.0.0.1:8443/1KiB"),
    }
}

/// `pqtls run`'s flags (also checked by `pqtls batch`, which passes them on to each task).
#[derive(clap::Args)]
pub struct RunArgs {
    /// The experiment file (TOML), e.g. experiments/in-situ.toml.
    pub file: PathBuf,
    /// Root of the results directories.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Measure only slice K of N (1-based), e.g. 3/8: for spreading a sweep over machines.
    #[arg(long, allow_hyphen_values = true)]
    pub shard: Option<String>,
    /// Move existing results aside and start again.
    #[arg(long)]
    pub fresh: bool,
    /// One line per configuration instead of a progress bar (batch logs).
    #[arg(long)]
    pub no_progress: bool,
    /// On a failed configuration, note it and go on (it is retried next time).
    #[arg(long)]
    pub keep_going: bool,
    /// Allow a matrix of up to N configurations (default 100000). The run walks the matrix rather
    /// than holding it (about 160 bytes per configuration: a million is about 160 MB), and
    /// measures them one after another (it prints how long that takes at least before it
    /// starts): for a sweep that large, shard it over machines (`pqtls batch`, `--shard`).
    #[arg(long, value_name = "N", default_value_t = 100_000, allow_negative_numbers = true, value_parser = count(1, 100_000_000, "200000"))]
    pub max_configurations: u64,
    /// Transfer experiments and loads with network factors: the link verification's RTT
    /// tolerance (as `pqtls transfer --rtt-tolerance`; recorded with each link).
    #[arg(long, default_value = "0.3ms", allow_hyphen_values = true)]
    pub rtt_tolerance: String,
    /// Directory of the PKI cache.
    #[arg(long, default_value_os_t = crate::context::default_pki_dir())]
    pub pki: PathBuf,
    #[command(flatten)]
    pub via: ViaArgs,
    // --schedule, --block, --window, --seed: the one definition `insitu` uses too.
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    /// In-situ experiments: every configuration with this clock instead of the file's —
    /// `instructions` counts instructions per step (repeatable where time is not; results in
    /// <name>-instructions, few handshakes each: docs/instructions.md).
    #[arg(long, value_name = "CLOCK", value_parser = ["split", "cpu", "instructions"])]
    pub clock: Option<String>,
    #[command(flatten)]
    pub counter: crate::count::CounterArgs,
    /// Load experiments: load this server (https://host[:port]/path) instead of starting one per
    /// configuration; its chain is checked against --ca (or pqtls' root), as `pqtls load URL`.
    #[arg(long)]
    pub url: Option<String>,
    #[command(flatten)]
    pub trust: TrustArgs,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_listen_addresses_and_ports_say_what_works() {
        let c = count(1, 100, "20");
        assert_eq!(c("20"), Ok(20));
        assert!(c("0").unwrap_err().contains("out of range: give a whole number from 1 to 100, e.g. 20"));
        assert!(c("-1").unwrap_err().contains("negative"));
        assert!(c("x").unwrap_err().contains("not a whole number"));
        assert!(c("99999999999999999999999").unwrap_err().contains("not a whole number"));
        assert_eq!(listen("127.0.0.1:0").unwrap().port(), 0);
        assert!(listen("127.0.0.1:70000").unwrap_err().contains("port 70000 is out of range 0–65535"));
        assert!(listen("[::1]:99999").unwrap_err().contains("port 99999 is out of range"));
        assert!(listen("localhost:8443").unwrap_err().contains("'localhost' is not an IP address"));
        assert!(listen("127.0.0.1:x").unwrap_err().contains("port 'x' is not a number"));
        assert!(listen("127.0.0.1").unwrap_err().contains("an IP address and a port"));
        assert!(url_port("https://127.0.0.1:8443/1KiB").is_ok());
        assert!(url_port("https://127.0.0.1/").is_ok());
        assert!(url_port("https://[::1]/").is_ok());
        let e = url_port("https://127.0.0.1:70000/").unwrap_err().to_string();
        assert!(e.contains("port 70000 is out of range 1–65535"), "{e}");
        assert!(url_port("https://[::1]:0/").unwrap_err().to_string().contains("port 0 is out of range"));
        assert!(url_port("http://127.0.0.1:https/").unwrap_err().to_string().contains("'https' is not a number"));
    }
}

/// How the configurations of a run share the machine's time.
#[derive(clap::Args, Clone)]
pub struct ScheduleArgs {
    /// interleaved (default): configurations measured in rounds of small blocks, in a
    /// shuffled order each round, so that drift and other work hit all alike; sequential: one
    /// configuration after another (the order before pqtls 0.x, for comparisons).
    #[arg(long, default_value = "interleaved")]
    pub schedule: String,
    /// Handshakes per block (interleaved); each block that follows another configuration's
    /// starts with one unmeasured handshake.
    #[arg(long, default_value_t = pqtls_lab::run::DEFAULT_BLOCK, allow_negative_numbers = true, value_parser = count(0, u64::MAX, "10"))]
    pub block: u64,
    /// At most this many configurations open (prepared and interleaved) at once.
    #[arg(long, default_value_t = 16, allow_negative_numbers = true, value_parser = count_usize(0, usize::MAX, "16"))]
    pub window: usize,
    /// Seed of the per-round shuffles (recorded in every record); by default from the clock.
    #[arg(long, allow_negative_numbers = true, value_parser = count(0, u64::MAX, "7"))]
    pub seed: Option<u64>,
    /// When a window's configurations stop (interleaved): together (default: measured on in
    /// every round until the window's last meets its rule; each costs as much as the window's
    /// slowest), thin (one that met its stopping rule stays in its window as a drift reference
    /// with one block every 8 rounds, thin:K every K rounds; cheaper, but its ratios held less
    /// well run after run: docs/benchmarks.md §10.5) or each (each stops at its own rule; its
    /// ratios drift). Records are stored when the window closes.
    #[arg(long, default_value = "together")]
    pub stop: String,
}

impl ScheduleArgs {
    pub fn schedule(&self) -> Result<pqtls_lab::Schedule> {
        let seed = self.seed.unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64)
        });
        let s = match self.schedule.to_ascii_lowercase().as_str() {
            "interleaved" => pqtls_lab::Schedule::Interleaved {
                block: self.block,
                window: self.window,
                seed,
                stop: pqtls_lab::WindowStop::parse(&self.stop)?,
            },
            "sequential" => pqtls_lab::Schedule::Sequential,
            other => bail!("unknown --schedule '{other}': use interleaved or sequential"),
        };
        s.validate()?;
        Ok(s)
    }
}

/// How the two-thread transports (socketpair, tcp) run.
#[derive(clap::Args, Clone)]
pub struct ThreadArgs {
    /// CPUs for the client and the server thread (e.g. 0,1); by default two different cores
    /// chosen from the machine's topology.
    #[arg(long, allow_hyphen_values = true)]
    pub cpus: Option<String>,
    /// How a thread waits for its peer: spin (default) or sleep.
    #[arg(long, default_value = "spin")]
    pub wait: String,
}

impl ThreadArgs {
    pub fn options(&self) -> Result<pqtls_core::transport::TransportOptions> {
        use pqtls_core::transport::{TransportOptions, Wait};
        Ok(TransportOptions {
            cpus: self.cpus.as_deref().map(TransportOptions::parse_cpus).transpose()?,
            wait: Wait::parse(&self.wait)?,
            ..TransportOptions::default()
        })
    }
}

/// The settings of `insitu`'s flags (`--warmup`, `--loops`, `--precision`, `--quantiles`).
pub fn insitu_settings(warmup: u64, loops: u64, precision: Option<&str>, quantiles: &str) -> Result<Settings> {
    Ok(Settings::new(warmup, loops, precision.map(parse_precision).transpose()?, Quantiles::parse(quantiles)?)?)
}

/// Where third-party terminators (`--terminator nginx|haproxy`) come from.
#[derive(clap::Args, Clone, Default)]
pub struct ViaArgs {
    /// nginx binary (OpenSSL 3.5+) for --terminator nginx; default: the Debian trixie root
    /// made by scripts/trixie-root.sh.
    #[arg(long, value_name = "PATH")]
    pub nginx: Option<PathBuf>,
    /// HAProxy binary (OpenSSL 3.5+) for --terminator haproxy; default: the trixie root.
    #[arg(long, value_name = "PATH")]
    pub haproxy: Option<PathBuf>,
}

impl ViaArgs {
    /// The terminators' setup: binaries given, else the trixie root; files staged in a
    /// directory of the system's temporary directory.
    pub fn via(&self) -> pqtls_peers::Via {
        let mut via = pqtls_peers::Via::root(pqtls_peers::DEFAULT_ROOT);
        let work_dir = std::env::temp_dir();
        if let Some(p) = &self.nginx {
            via.nginx = pqtls_peers::HowToRun::Binary { program: p.clone(), work_dir: work_dir.clone() };
        }
        if let Some(p) = &self.haproxy {
            via.haproxy = pqtls_peers::HowToRun::Binary { program: p.clone(), work_dir };
        }
        via
    }
}

/// What the load client trusts for the server's chain (`pqtls load`, `pqtls assess --url`).
#[derive(clap::Args, Clone, Default)]
pub struct TrustArgs {
    /// Trust the CA certificates of FILE (a PEM bundle) for the server's chain, or `system`: the
    /// system's store (`$SSL_CERT_FILE`, else the first of /etc/ssl/certs/ca-certificates.crt,
    /// /etc/pki/tls/certs/ca-bundle.crt, /etc/ssl/cert.pem). Default: the root of the chain
    /// pqtls made for the configuration (its own servers).
    #[arg(long, value_name = "FILE|system")]
    pub ca: Option<String>,
    /// The name the server's certificate must be for, sent as SNI unless it is an IP address
    /// (default: the URL's host with --ca; localhost, the name of pqtls' chains, without).
    #[arg(long, value_name = "NAME")]
    pub servername: Option<String>,
}

/// Where Linux distributions keep the system's CA bundle (Debian/Ubuntu, Fedora/RHEL, Alpine).
pub const SYSTEM_CA_BUNDLES: &[&str] =
    &["/etc/ssl/certs/ca-certificates.crt", "/etc/pki/tls/certs/ca-bundle.crt", "/etc/ssl/cert.pem"];

impl TrustArgs {
    /// The client's trust: `--ca` (checked now: a file that exists, or the system's bundle
    /// found) and the name checked (`--servername`, else the URL's host with `--ca`).
    pub fn trust(&self, url: Option<&pqtls_net::load::Target>) -> Result<ClientTrust> {
        let mut trust = ClientTrust::default();
        if let Some(ca) = self.ca.as_deref() {
            let (file, named) = if ca == "system" {
                let env = std::env::var_os("SSL_CERT_FILE").map(PathBuf::from);
                let file = env.iter().cloned().chain(SYSTEM_CA_BUNDLES.iter().map(PathBuf::from)).find(|p| p.is_file());
                let Some(file) = file else {
                    bail!(
                        "--ca system: no system CA bundle found (looked at {}{}); install ca-certificates, or give \
                         --ca FILE (a PEM bundle)",
                        SYSTEM_CA_BUNDLES.join(", "),
                        env.map(|e| format!(" and $SSL_CERT_FILE {}", e.display())).unwrap_or_default()
                    );
                };
                let named = format!("system ({})", file.display());
                (file, named)
            } else {
                let file = PathBuf::from(ca);
                if !file.is_file() {
                    bail!("--ca {ca}: no such file; give a PEM bundle of CA certificates, or --ca system");
                }
                (file, format!("--ca {ca}"))
            };
            trust.anchors = Anchors::Bundle { file, named };
            if let Some(t) = url {
                trust.server_name = t.name().to_string();
            }
        }
        if let Some(name) = &self.servername {
            if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '/') {
                bail!("--servername {name:?}: give a DNS name (e.g. example.org) or an IP address");
            }
            trust.server_name = name.clone();
        }
        Ok(trust)
    }
}

/// The load settings of the flags.
pub fn load_settings(duration: &str, warmup: &str, timeout: &str, requests: Option<u64>) -> Result<Settings> {
    let ms = |what: &str, v: &str| -> Result<u64> {
        let ns = pqtls_core::units::duration_ns(v).with_context(|| format!("--{what} {v}"))?;
        Ok(ns / 1_000_000)
    };
    let load = LoadSettings {
        duration_ms: ms("duration", duration)?,
        warmup_ms: ms("warmup-time", warmup)?,
        requests,
        timeout_ms: ms("timeout", timeout)?,
    };
    if load.duration_ms == 0 {
        bail!("--duration {duration}: give at least 1ms, e.g. --duration 10s");
    }
    if load.timeout_ms == 0 {
        bail!("--timeout {timeout}: give at least 1ms, e.g. --timeout 10s");
    }
    if requests == Some(0) {
        bail!("--requests 0: give at least 1");
    }
    Ok(Settings { load, ..Settings::default() })
}

/// `--rtt-tolerance` of `pqtls transfer` and `pqtls run`, in ns, or an error naming it.
pub fn rtt_tolerance_ns(text: &str) -> Result<u64> {
    let ns = pqtls_core::units::duration_ns(text).with_context(|| format!("--rtt-tolerance {text}: e.g. 0.3ms"))?;
    if ns > 1_000_000_000 {
        bail!("--rtt-tolerance {text} is over 1s: a link that loose is not verified at all; e.g. 0.3ms or 2ms");
    }
    Ok(ns)
}
