//! `pqtls assess`: what moving from one configuration to others costs, across the studies, in
//! one command and one page (docs/assess.md).
//!
//! Each part — in situ, throughput, latency at a moderate rate, transfers over the user's link —
//! is an experiment file written into the assessment's directory and run by `pqtls run` (this
//! program, as a child process), so each part resumes as any run does and the page quotes the
//! command that reproduces it. The page is the report over every part's records
//! (`ResultSet::load_all`) with the answer first (`ReportOptions::assessment`).

use crate::context::Ending;
use anyhow::{bail, Context, Result};
use pqtls_core::backend::ClientTrust;
use pqtls_core::factor::{self, Class, Kind};
use pqtls_core::settings::{LoadSettings, Settings};
use pqtls_core::units;
use pqtls_export::analysis::assessment::part as part_name;
use pqtls_export::analysis::assessment::{Assessment, Config, Deployment, Endpoint, Split};
use pqtls_export::{ReportOptions, ResultSet};
use pqtls_store::experiment::{BaselineRule, Experiment, FactorLists, Matrix};
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// The default question: the classical configuration most services run, and the hybrid key
/// exchange with an ML-DSA-65 chain.
const DEFAULT_FROM: &str = "x25519:p256:p256";
const DEFAULT_TO: &str = "X25519MLKEM768:mldsa65:mldsa65";

#[derive(clap::Args)]
pub struct AssessArgs {
    /// What you run today: group:leaf:root (or group:leaf:intermediate:root), then optional
    /// factor=value words, e.g. "x25519:p256:p256 mtls=p256:p256 cipher=TLS_AES_128_GCM_SHA256".
    #[arg(long, default_value = DEFAULT_FROM)]
    pub from: String,
    /// What you consider moving to, written as --from; repeat the flag for several.
    #[arg(long, default_values_t = [DEFAULT_TO.to_string()])]
    pub to: Vec<String>,
    /// The stacks to measure on, comma-separated (default: every stack of this build but
    /// s2n-tls, whose serve is not there yet); a configuration's own `stack=` word wins.
    #[arg(long, value_delimiter = ',')]
    pub stack: Vec<String>,
    /// Your clients' round-trip time.
    #[arg(long, default_value = "50ms")]
    pub rtt: String,
    /// Your clients' bandwidth (bottleneck), e.g. 100mbit; `none` for no limit.
    #[arg(long, default_value = "100mbit")]
    pub bandwidth: String,
    /// A typical response body.
    #[arg(long = "response-size", visible_alias = "size", default_value = "50KiB")]
    pub response_size: String,
    /// Your servers' TCP initial congestion window (segments; Linux's default is 10).
    #[arg(long, default_value = "10", value_parser = crate::flags::count(1, 1000, "10"))]
    pub initcwnd: u64,
    /// TTFB/TTLB over your link: `lab` measures it in the network lab (root), `model` predicts
    /// it with the round-trip model, `auto` measures when root and predicts otherwise.
    #[arg(long, default_value = "auto", value_parser = ["auto", "lab", "model"])]
    pub network: String,
    /// About how long the measurements may take (more: more precise); e.g. 2m, 5m, 20m.
    #[arg(long, default_value = "5m")]
    pub budget: String,
    /// Root of the results: the assessment goes to <results>/assess-<digest of the question>/,
    /// so running the same question again resumes it.
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Move this question's earlier results aside and start again.
    #[arg(long)]
    pub fresh: bool,
    /// The transfers' link verification: its RTT tolerance (as `pqtls transfer --rtt-tolerance`).
    #[arg(long, default_value = "0.3ms", allow_hyphen_values = true)]
    pub rtt_tolerance: String,
    /// Also write the HTML page here (it is always written as report.html in the results).
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Also write the Markdown page here (always written as report.md in the results).
    #[arg(long)]
    pub markdown: Option<PathBuf>,
    /// One line per configuration instead of progress bars (batch logs).
    #[arg(long)]
    pub no_progress: bool,
    /// Directory of the PKI cache.
    #[arg(long, default_value_os_t = crate::context::default_pki_dir())]
    pub pki: PathBuf,
    /// Your own HTTPS endpoint, e.g. https://example.org/ : each configuration's client side is
    /// measured against it too (handshake CPU with verification, bytes, connections/s, the group
    /// it negotiates). Its chain is checked against --ca, or the system's store.
    #[arg(long)]
    pub url: Option<String>,
    #[command(flatten)]
    pub trust: crate::flags::TrustArgs,
}

/// A configuration as the user wrote it: `group:chain word=value …` → canonical factor values.
fn config(spec: &str, what: &str) -> Result<Config> {
    let mut words = spec.split_whitespace();
    let first = words.next().with_context(|| format!("{what} is empty: give group:leaf:root, e.g. {DEFAULT_TO}"))?;
    let (group, chain) = first.split_once(':').with_context(|| {
        format!("{what} '{first}' must start with group:leaf:root (or group:leaf:intermediate:root), e.g. {DEFAULT_TO}")
    })?;
    let mut factors = vec![
        ("group".to_string(), factor::canonical("group", group).with_context(|| format!("{what} '{spec}'"))?),
        ("chain".to_string(), factor::canonical("chain", chain).with_context(|| format!("{what} '{spec}'"))?),
    ];
    for word in words {
        let (name, value) = word.split_once('=').with_context(|| {
            format!("{what} '{spec}': '{word}' is not factor=value (e.g. mtls=p256:p256, stack=rustls, cipher=…)")
        })?;
        let f = factor::factor(name)
            .with_context(|| format!("{what} '{spec}': unknown factor '{name}' (pqtls insitu --help lists them)"))?;
        if f.class != Class::Handshake {
            bail!(
                "{what} '{spec}': '{name}' describes the deployment or the measurement, not the configuration: the \
                 assessment takes --rtt, --bandwidth, --response-size and --initcwnd for the deployment"
            );
        }
        if factors.iter().any(|(n, _)| n == f.name) {
            bail!("{what} '{spec}': {} is given twice", f.name);
        }
        factors
            .push((f.name.to_string(), factor::canonical(f.name, value).with_context(|| format!("{what} '{spec}'"))?));
    }
    Ok(Config { spec: spec.split_whitespace().collect::<Vec<_>>().join(" "), factors })
}

/// The part that loads the user's endpoint (`--url`), and its results directory.
const ENDPOINT: &str = part_name::ENDPOINT;

/// The user's endpoint, checked before anything is measured: an https:// URL whose host
/// resolves and accepts a TCP connection (3 s at most), and the trust its client uses (`--ca`,
/// else the system's store).
fn endpoint(args: &AssessArgs) -> Result<Option<(String, ClientTrust)>> {
    let Some(url) = args.url.as_deref() else {
        if args.trust.ca.is_some() || args.trust.servername.is_some() {
            bail!("--ca and --servername are for your endpoint: give its --url too");
        }
        return Ok(None);
    };
    if !url.starts_with("https://") {
        bail!("--url {url}: not an https:// URL; the endpoint part measures TLS handshakes, e.g. --url https://example.org/");
    }
    crate::flags::url_port(url)?;
    let target = pqtls_net::load::Target::parse(url).with_context(|| format!("--url {url}"))?;
    if let Err(e) = std::net::TcpStream::connect_timeout(&target.addr, std::time::Duration::from_secs(3)) {
        bail!(
            "--url {url}: cannot connect to {} ({e}); is the server up and reachable from here? Nothing was measured",
            target.addr
        );
    }
    let mut trust_args = args.trust.clone();
    if trust_args.ca.is_none() {
        // Their chain is not pqtls': the system's store unless told otherwise.
        trust_args.ca = Some("system".into());
    }
    Ok(Some((url.to_string(), trust_args.trust(Some(&target))?)))
}

/// One part of the assessment: an experiment file and what it is for.
struct Part {
    name: &'static str,
    toml: String,
}

/// The question, parsed and checked.
struct Question {
    from: Config,
    to: Vec<Config>,
    stacks: Vec<String>,
    rtt_ns: u64,
    bits_per_s: Option<u64>,
    response_bytes: u64,
    initcwnd: u64,
    budget_s: f64,
    /// This process may use the network lab.
    root: bool,
    lab: bool,
    nginx: bool,
    /// The user's endpoint (`--url`) as given, and what its client trusts.
    url: Option<(String, ClientTrust)>,
    /// Per `to`, the configurations that split its cost (key exchange only, certificates only).
    splits: Vec<Split>,
}

/// Whether two configurations set the same factors to the same values.
fn same(a: &Config, b: &Config) -> bool {
    let mut x = a.factors.clone();
    let mut y = b.factors.clone();
    x.sort();
    y.sort();
    x == y
}

impl Question {
    /// Every configuration, from first.
    fn configs(&self) -> impl Iterator<Item = &Config> {
        std::iter::once(&self.from).chain(&self.to)
    }

    /// The configurations between from and each to that split its cost, once each, none that is
    /// from or a to.
    fn middles(&self) -> Vec<&Config> {
        let mut out: Vec<&Config> = Vec::new();
        for s in &self.splits {
            for c in [&s.key_exchange, &s.certificates].into_iter().flatten() {
                if !self.configs().any(|x| same(x, c)) && !out.iter().any(|x| same(x, c)) {
                    out.push(c);
                }
            }
        }
        out
    }

    /// Every configuration and the split's middles (the parts that measure them all).
    fn with_middles(&self) -> Vec<&Config> {
        self.configs().chain(self.middles()).collect()
    }

    /// Factor names any configuration sets besides stack (each point names them all, at their
    /// default where a configuration leaves them).
    fn factor_names(&self) -> Vec<String> {
        let mut names: Vec<String> = Vec::new();
        for c in self.with_middles() {
            for (n, _) in &c.factors {
                if n != "stack" && !names.contains(n) {
                    names.push(n.clone());
                }
            }
        }
        names
    }

    /// The points (from: `[matrix]`; each to, then each of the split's middles when `middles`:
    /// an `[[extra]]`) with `common` factors set on every point, and the baseline rule (from).
    fn points(&self, common: &[(&str, String)], stacks: &[String], middles: bool) -> (Matrix, BaselineRule) {
        let names = self.factor_names();
        let configs = if middles { self.with_middles() } else { self.configs().collect() };
        let mut tables = configs.into_iter().map(|c| {
            let own = c.factors.iter().find(|(n, _)| n == "stack").map(|(_, v)| vec![v.clone()]);
            let mut table: FactorLists = vec![("stack".into(), own.unwrap_or_else(|| stacks.to_vec()))];
            table.extend(point(c, &names, common));
            table
        });
        let factors = tables.next().expect("from is a configuration");
        let matrix = Matrix { factors, extra: tables.collect(), ..Matrix::default() };
        let mut baseline = BaselineRule::default();
        baseline.factors.extend(self.from.factors.iter().filter(|(n, _)| n != "stack").cloned());
        for n in names.iter().filter(|n| !self.from.factors.iter().any(|(f, _)| f == *n)) {
            baseline.factors.push((n.clone(), default_of(n)));
        }
        (matrix, baseline)
    }

    /// The parts to run, with their share of the budget.
    fn parts(&self) -> Result<Vec<Part>> {
        let n = self.configs().count() as f64;
        let s = self.stacks.len() as f64;
        let b = self.budget_s;
        let ms = |x: f64| x.round().max(1.0) as u64 * 1000;
        // A load part: `duration_s` measured after 1 s of warm-up.
        let load = |duration_s: f64| Settings {
            load: LoadSettings { duration_ms: ms(duration_s), warmup_ms: 1000, ..LoadSettings::default() },
            ..Settings::default()
        };
        let part = |name: &'static str, description: &str, kind, settings, (matrix, baseline)| -> Result<Part> {
            let experiment = Experiment::new(name, description, kind, settings, matrix, baseline)?;
            Ok(Part { name, toml: experiment.to_toml() })
        };
        let mut parts = Vec::new();
        if let Some((url, _)) = &self.url {
            // The user's server, from the client side, first (a short part; their server is up now):
            // closed loop, one connection at a time.
            let duration = (0.05 * b / (n * s)).clamp(2.0, 10.0);
            let description = format!("pqtls assess: the client side against {url}");
            parts.push(part(
                ENDPOINT,
                &description,
                Kind::Load,
                load(duration),
                self.points(&[], &self.stacks, false),
            )?);
        }
        // In situ (with the split's middles): ±2 % of each step's median, at most ~7 handshakes
        // per budget second for each of from and the tos.
        let max_loops = ((b * 7.0 * n / (n + self.middles().len() as f64)) as u64).clamp(300, 20_000);
        let insitu = Settings {
            warmup: 100,
            loops: None,
            precision: Some(0.02),
            min_loops: 200,
            max_loops,
            ..Settings::default()
        };
        let description = "pqtls assess: CPU per step and bytes, in situ";
        parts.push(part(part_name::INSITU, description, Kind::Insitu, insitu, self.points(&[], &self.stacks, true))?);
        // Throughput: closed loop through pqtls serve (one worker) on each stack, and nginx.
        let terminators = s + if self.nginx { 1.0 } else { 0.0 };
        let duration = (0.15 * b / (n * terminators)).clamp(2.0, 30.0);
        let small = [("response_size", "1KiB".to_string())];
        let (mut matrix, baseline) = self.points(&small, &self.stacks, false);
        if self.nginx {
            matrix.extra.extend(self.extra_via_nginx(&small));
        }
        let description = "pqtls assess: connections per second on loopback, a new TLS connection per request";
        parts.push(part(part_name::THROUGHPUT, description, Kind::Load, load(duration), (matrix, baseline))?);
        // Latency at a moderate rate: an open loop of 50 new connections per second.
        let duration = (0.1 * b / (n * s)).clamp(2.0, 20.0);
        let common = [("rate", "50/s".into()), ("connections", "4".into()), ("response_size", "1KiB".into())];
        let description = "pqtls assess: latency by layer at 50 connections/s (open loop)";
        parts.push(part(
            part_name::LATENCY,
            description,
            Kind::Load,
            load(duration),
            self.points(&common, &self.stacks, false),
        )?);
        if self.lab {
            // Transfers over the user's link, with the split's middles: one stack (the network's
            // part does not depend on it).
            let duration = (0.25 * b / self.with_middles().len() as f64).clamp(5.0, 120.0);
            let mut common = vec![
                ("rtt", units::format_duration(self.rtt_ns)),
                ("response_size", units::format_bytes(self.response_bytes)),
                ("initcwnd", self.initcwnd.to_string()),
            ];
            if let Some(bps) = self.bits_per_s {
                common.push(("bandwidth", units::format_bits(bps)));
            }
            let load =
                LoadSettings { duration_ms: ms(duration), warmup_ms: 300, requests: Some(200), timeout_ms: 30_000 };
            let transfer = Settings { load, ..Settings::default() };
            let description = "pqtls assess: TTFB and TTLB over the deployment's link (network lab)";
            parts.push(part(
                part_name::TRANSFER,
                description,
                Kind::Transfer,
                transfer,
                self.points(&common, &self.stacks[..1], true),
            )?);
        }
        Ok(parts)
    }

    /// The throughput part's points through nginx (OpenSSL 3.5 of the trixie root; the load
    /// generator on OpenSSL).
    fn extra_via_nginx(&self, common: &[(&str, String)]) -> Vec<FactorLists> {
        let names = self.factor_names();
        let via = |f: &str, v: &str| (f.to_string(), vec![v.to_string()]);
        self.configs()
            .map(|c| [vec![via("stack", "openssl"), via("terminator", "nginx")], point(c, &names, common)].concat())
            .collect()
    }

    /// A short digest of the question: its directory's name.
    fn digest(&self) -> String {
        let mut h = Sha256::new();
        for c in self.configs() {
            h.update(format!("{:?};", c.factors));
        }
        // The split's middles are measured too: an assessment made before them is another.
        h.update(format!("split{}", self.middles().len()));
        h.update(format!(
            "{:?}|{}|{:?}|{}|{}|{}|{}",
            self.stacks, self.rtt_ns, self.bits_per_s, self.response_bytes, self.initcwnd, self.budget_s, self.lab
        ));
        if let Some((url, trust)) = &self.url {
            h.update(format!("|{url}|{trust:?}"));
        }
        h.finalize().iter().take(4).map(|b| format!("{b:02x}")).collect()
    }
}

/// A point's factors: every name in `names` (the configuration's value, else the factor's
/// default) and the `common` ones, one value each.
fn point(c: &Config, names: &[String], common: &[(&str, String)]) -> FactorLists {
    let value = |n: &String| c.factors.iter().find(|(f, _)| f == n).map_or_else(|| default_of(n), |(_, v)| v.clone());
    let own = names.iter().map(|n| (n.clone(), vec![value(n)]));
    own.chain(common.iter().map(|(n, v)| (n.to_string(), vec![v.clone()]))).collect()
}

/// A factor's default value (empty for a factor without one).
fn default_of(name: &str) -> String {
    factor::factor(name).and_then(|f| f.default).unwrap_or_default().to_string()
}

/// Runs one part as a supervised child — its own process group, SIGTERM from the kernel when
/// the assessment dies (even by SIGKILL: `PR_SET_PDEATHSIG`) — and passes an interrupt of the
/// assessment on to it: the part stops as after Ctrl-C, keeping what it measured (it has two
/// minutes; then it is killed). A terminal's Ctrl-C reaches the assessment only, and from it
/// the part, once.
fn run_part(cmd: &mut std::process::Command, name: &str, interrupted: &AtomicBool) -> Result<std::process::ExitStatus> {
    let what = format!("the {name} part");
    let mut part = pqtls_peers::process::Supervised::spawn(cmd, &what)?;
    loop {
        if let Some(status) = part.try_wait()? {
            return Ok(status);
        }
        if interrupted.load(Ordering::SeqCst) {
            let stopped = part.stop(std::time::Duration::from_secs(120))?;
            return stopped.status.with_context(|| format!("{what} stopped, but its exit status could not be read"));
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Why a part's first failed point failed, from its store's failures (`None`: none stored).
fn first_failure(store: &Path) -> Option<String> {
    let text = std::fs::read_to_string(store.join("failures.ndjson")).ok()?;
    let first: serde_json::Value = serde_json::from_str(text.lines().next()?).ok()?;
    Some(format!("{}: {}", first["id"].as_str()?, first["error"].as_str()?))
}

/// Whether this process may use the network lab (root).
fn is_root() -> bool {
    pqtls_netlab::require_root().is_ok()
}

fn question(args: &AssessArgs) -> Result<Question> {
    let from = config(&args.from, "--from")?;
    let mut to: Vec<Config> = Vec::new();
    for spec in &args.to {
        let c = config(spec, "--to")?;
        if same(&c, &from) {
            bail!("--to '{spec}' is the configuration of --from: nothing to compare; give another group or chain");
        }
        if to.iter().any(|t| same(t, &c)) {
            bail!("--to '{spec}' is given twice");
        }
        to.push(c);
    }
    // Every stack of this build.
    let all: Vec<String> = crate::context::all_backends().iter().map(|b| b.stack().to_string()).collect();
    let stacks = if args.stack.is_empty() {
        all.clone()
    } else {
        let mut out = Vec::new();
        for s in &args.stack {
            let s = factor::canonical("stack", s).context("--stack")?;
            if !out.contains(&s) {
                out.push(s);
            }
        }
        out
    };
    let rtt_ns = units::duration_ns(&args.rtt).context("--rtt")?;
    units::duration_ns(&args.rtt_tolerance).context("--rtt-tolerance")?;
    let bits_per_s = match args.bandwidth.as_str() {
        "none" => None,
        b => Some(units::bits_per_s(b).context("--bandwidth")?),
    };
    let response_bytes = units::bytes(&args.response_size).context("--response-size")?;
    let budget_s = units::duration_ns(&args.budget).context("--budget")? as f64 / 1e9;
    if budget_s < 30.0 {
        bail!("--budget {}: an assessment needs at least 30s (2m–5m is a quick one, 20m a precise one)", args.budget);
    }
    let root = is_root();
    let lab = match args.network.as_str() {
        "lab" if !root => {
            bail!("--network lab: the network lab needs root (namespaces, links, qdiscs); run as root, or use --network model")
        }
        "lab" => true,
        "model" => false,
        _ => root,
    };
    let url = endpoint(args)?;
    let nginx =
        root && pqtls_peers::Root::open(pqtls_peers::DEFAULT_ROOT).is_ok() && stacks.iter().any(|s| s == "openssl");
    let splits = to.iter().map(|t| Split::of(&from, t)).collect();
    Ok(Question {
        splits,
        from,
        to,
        stacks,
        rtt_ns,
        bits_per_s,
        response_bytes,
        initcwnd: args.initcwnd,
        budget_s,
        root,
        lab,
        nginx,
        url,
    })
}

pub fn run(args: AssessArgs) -> Result<Ending> {
    let q = question(&args)?;
    let dir = args.results.join(format!("assess-{}", q.digest()));
    if args.fresh && dir.exists() {
        let aside = dir.with_extension(format!("old-{}", std::process::id()));
        std::fs::rename(&dir, &aside).with_context(|| format!("moving {} aside", dir.display()))?;
        crate::progress::line(&format!("earlier results moved to {}", aside.display()));
    }
    let parts_dir = dir.join("parts");
    std::fs::create_dir_all(&parts_dir).with_context(|| format!("creating {}", parts_dir.display()))?;
    let exe = std::env::current_exe().context("finding this program to run the parts")?;
    let parts = q.parts()?;
    crate::progress::line(&format!(
        "assessment in {}: {} → {} on {}; {} parts within about {} (budget)",
        dir.display(),
        q.from.spec,
        q.to.iter().map(|c| c.spec.as_str()).collect::<Vec<_>>().join(", "),
        q.stacks.join(", "),
        parts.len(),
        args.budget
    ));
    let mut not_run: Vec<(String, String)> = Vec::new();
    if !q.lab {
        not_run.push((
            "transfers over your link".into(),
            if q.root {
                "--network model: TTFB/TTLB and round trips are the round-trip model's prediction".into()
            } else {
                "not root, so the network lab cannot run: TTFB/TTLB and round trips are the round-trip model's \
                 prediction from the measured message sizes (run as root to measure them)"
                    .into()
            },
        ));
    }
    if !q.nginx {
        not_run.push((
            "throughput through nginx".into(),
            "needs root, OpenSSL among the stacks and the trixie root (scripts/trixie-root.sh)".into(),
        ));
    }
    // The parent only waits: its Ctrl-C handler keeps it alive while a part stops cleanly.
    let interrupted = crate::context::interrupt_flag();
    let mut commands = Vec::new();
    let mut failed = Vec::new();
    let mut interrupted_part = false;
    for part in &parts {
        let file = parts_dir.join(format!("{}.toml", part.name));
        std::fs::write(&file, &part.toml).with_context(|| format!("writing {}", file.display()))?;
        let mut cmd = std::process::Command::new(&exe);
        cmd.arg("run").arg(&file).arg("--results").arg(&dir).arg("--pki").arg(&args.pki);
        if args.no_progress {
            cmd.arg("--no-progress");
        }
        if part.name == part_name::TRANSFER {
            cmd.arg("--rtt-tolerance").arg(&args.rtt_tolerance);
        }
        let mut tolerance = if part.name == part_name::TRANSFER {
            format!(" --rtt-tolerance {}", args.rtt_tolerance)
        } else {
            String::new()
        };
        if part.name == ENDPOINT {
            // A configuration the server refuses is noted (failures) and the others measured.
            let mut extra = vec!["--keep-going".to_string(), "--url".into(), args.url.clone().unwrap_or_default()];
            let t = &args.trust;
            extra.extend(["--ca".to_string(), t.ca.clone().unwrap_or_else(|| "system".into())]);
            if let Some(n) = &t.servername {
                extra.extend(["--servername".to_string(), n.clone()]);
            }
            cmd.args(&extra);
            tolerance += &format!(" {}", extra.join(" "));
        }
        commands.push((
            part.name.to_string(),
            format!("pqtls run {} --results {}{tolerance}", file.display(), dir.display()),
        ));
        crate::progress::line(&format!("part {}: pqtls run {}", part.name, file.display()));
        let status = run_part(&mut cmd, part.name, &interrupted)?;
        // Ctrl-C (here, or in the part: a part killed by it before its handler was set up, or
        // ended cleanly with 130) stops the assessment; what was measured is kept.
        if status.code() == Some(crate::context::EXIT_INTERRUPTED) || interrupted.load(Ordering::SeqCst) {
            interrupted_part = true;
            break;
        }
        match status.code() {
            Some(0) => {}
            // Configurations your server refused (or whose chain did not verify) are the
            // endpoint's answer: the page names each with why.
            Some(crate::context::EXIT_FAILED) if part.name == ENDPOINT => {}
            Some(c) => failed.push((part.name, format!("{} (exit {c})", part.name))),
            None => failed.push((part.name, format!("{} (killed: {status})", part.name))),
        }
    }
    let deployment = Deployment {
        rtt_ns: q.rtt_ns,
        bits_per_s: q.bits_per_s,
        response_bytes: q.response_bytes,
        response_head_bytes: pqtls_net::http::head(200, q.response_bytes, false, "application/octet-stream").len()
            as u64,
        request_bytes: pqtls_net::http::get("/", "127.0.0.1", false).len() as u64,
        initcwnd: q.initcwnd,
    };
    for (name, f) in &failed {
        let why = match first_failure(&dir.join(name)) {
            Some(e) => format!("{e}; running the assessment again retries it"),
            None => "see its output above; running the assessment again retries it".into(),
        };
        not_run.push((format!("part {f}"), why));
    }
    let assessment = Assessment {
        from: q.from.clone(),
        to: q.to.clone(),
        deployment,
        commands,
        not_run,
        parts: parts.iter().map(|p| p.name.to_string()).collect(),
        endpoint: q.url.as_ref().map(|(url, trust)| Endpoint {
            url: url.clone(),
            trust: trust.describe(),
            part: ENDPOINT.to_string(),
        }),
        splits: q.splits.clone(),
    };
    assessment.save(&dir)?;
    write_page(&dir, assessment, &args)?;
    if interrupted_part {
        return Ok(Ending::Interrupted);
    }
    if !failed.is_empty() {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_FAILED,
            message: format!(
                "parts not fully measured: {}; the page shows the others, and the same command resumes",
                failed.iter().map(|(_, f)| f.as_str()).collect::<Vec<_>>().join(", ")
            ),
        }
        .into());
    }
    Ok(Ending::Complete)
}

/// The page: every part's records, the answer first; report.html and report.md in the
/// assessment's directory, and where the user asked.
fn write_page(dir: &Path, assessment: Assessment, args: &AssessArgs) -> Result<()> {
    let set = ResultSet::load_all(dir, &assessment.part_dirs(dir))?;
    let opts = ReportOptions { assessment: Some(assessment), ..ReportOptions::default() };
    let headline = opts
        .assessment
        .as_ref()
        .map_or_else(Vec::new, |a| pqtls_export::tables::assessment::headline(a, &a.answers(&set)));
    for (name, file, extra) in [("html", "report.html", &args.html), ("markdown", "report.md", &args.markdown)] {
        let text = crate::output::render(name, &set, &opts)?;
        let path = dir.join(file);
        std::fs::write(&path, &text).with_context(|| format!("writing {}", path.display()))?;
        if let Some(p) = extra {
            std::fs::write(p, &text).with_context(|| format!("writing {}", p.display()))?;
        }
    }
    for line in headline {
        crate::progress::line(&line);
    }
    crate::progress::line(&format!("the page: {} (and report.md)", dir.join("report.html").display()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Questions covering every part and point: a second `to` with its own stack and an extra
    /// factor, nginx, the network lab, the user's endpoint — without the split's middles (as
    /// the fixtures were written before the split existed).
    fn questions() -> Vec<(&'static str, Question)> {
        let q = |to: &[&str], lab: bool, nginx: bool, url: bool| Question {
            from: config(DEFAULT_FROM, "--from").unwrap(),
            to: to.iter().map(|t| config(t, "--to").unwrap()).collect(),
            stacks: vec!["openssl".into(), "rustls".into()],
            rtt_ns: 50_000_000,
            bits_per_s: Some(100_000_000),
            response_bytes: 51_200,
            initcwnd: 10,
            budget_s: 300.0,
            root: lab,
            lab,
            nginx,
            url: url.then(|| ("https://example.com/".to_string(), ClientTrust::default())),
            splits: Vec::new(),
        };
        vec![
            ("default", q(&[DEFAULT_TO], false, false, false)),
            (
                "everything",
                q(&[DEFAULT_TO, "X25519MLKEM768:mldsa44:mldsa65 stack=rustls mtls=p256:p256"], true, true, true),
            ),
        ]
    }

    fn fixtures() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/assess-parts")
    }

    /// The part files written from `Experiment` values read as the ones `format!` wrote before
    /// (tests/fixtures/assess-parts: written by the code of main 6bb666a for these questions):
    /// the same experiment — name, description, kind, settings, matrix, baseline, scenarios.
    #[test]
    fn the_parts_read_as_the_files_written_before() {
        let meaning = |e: &Experiment| {
            let ids: Vec<String> = e.scenarios().iter().map(|s| s.id()).collect();
            let what = (&e.name, &e.description, e.kind, &e.settings, &e.skipped, e.excluded, &e.baseline);
            format!("{what:?} {:?} {ids:?}", e.matrix)
        };
        for (name, q) in questions() {
            let dir = fixtures().join(name);
            let parts = q.parts().unwrap();
            let mut before: Vec<String> = std::fs::read_dir(&dir)
                .unwrap()
                .map(|e| e.unwrap().file_name().to_string_lossy().trim_end_matches(".toml").to_string())
                .collect();
            before.sort();
            let mut now: Vec<String> = parts.iter().map(|p| p.name.to_string()).collect();
            now.sort();
            assert_eq!(now, before, "{name}: the parts");
            for p in parts {
                let file = dir.join(format!("{}.toml", p.name));
                let old = Experiment::load(&file).unwrap();
                let new = Experiment::parse(&p.toml, &file).unwrap();
                assert_eq!(meaning(&new), meaning(&old), "{name}/{}: now written as\n{}", p.name, p.toml);
            }
        }
    }

    /// With the split, the in-situ and transfer parts also measure the two middles of each
    /// `to` (once each), the throughput and latency parts do not.
    #[test]
    fn the_split_adds_its_middles_to_the_in_situ_and_transfer_parts() {
        let (_, mut q) = questions().remove(1);
        q.splits = q.to.iter().map(|t| Split::of(&q.from, t)).collect();
        let middles: Vec<String> = q.middles().iter().map(|c| c.spec.clone()).collect();
        assert_eq!(
            middles,
            ["X25519MLKEM768:p256:p256", "x25519:mldsa65:mldsa65", "x25519:mldsa44:mldsa65 client_chain=p256:p256"],
            "the second to's key-exchange middle is the first's; its certificates' middle takes its client chain"
        );
        let parts = q.parts().unwrap();
        let count = |name: &str| {
            let p = parts.iter().find(|p| p.name == name).unwrap();
            Experiment::parse(&p.toml, Path::new("p.toml")).unwrap().scenarios().len()
        };
        let (_, before) = questions().remove(1);
        let before_parts = before.parts().unwrap();
        let before_count = |name: &str| {
            let p = before_parts.iter().find(|p| p.name == name).unwrap();
            Experiment::parse(&p.toml, Path::new("p.toml")).unwrap().scenarios().len()
        };
        assert_eq!(count("insitu"), before_count("insitu") + 3 * 2, "three middles on both stacks");
        assert_eq!(count("transfer"), before_count("transfer") + 3, "the lab's one stack (openssl): three middles");
        assert_eq!(count("throughput"), before_count("throughput"));
        assert_eq!(count("latency"), before_count("latency"));
    }
}
