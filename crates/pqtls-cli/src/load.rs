//! `pqtls load`: the load measurement from flags (crates/pqtls-net): against a URL, or against
//! a server pqtls starts for each configuration (`--terminator pqtls|nginx|haproxy`). Goes
//! through the same factor table, runner and records as `pqtls run`.

use crate::context::{self, measurement_for, Ending, OwnedStacks, Setup};
use crate::factors::Factors;
use crate::{flags, table};
use anyhow::{bail, Context, Result};
use pqtls_core::factor::Kind;
use pqtls_core::load::LoadShare;
use pqtls_core::record::Record;
use pqtls_lab::Plan;
use pqtls_net::load::Target;
use pqtls_net::measure::LoadSetup;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct LoadArgs {
    /// The server, e.g. https://127.0.0.1:8443/1KiB (any HTTPS/1.1 endpoint; its path is what
    /// each request asks for). Without it, pqtls starts a server for each configuration on
    /// loopback (`--terminator`) and asks for `--response-size` bytes.
    pub url: Option<String>,
    #[command(flatten)]
    pub factors: Factors,
    /// One request per TLS connection, no resumption (the default; the opposite of --keep-alive).
    #[arg(long, conflicts_with = "keep_alive")]
    pub new_connection: bool,
    /// Measured time per configuration (e.g. 20s, 2h; at most 7d).
    #[arg(long, default_value = "10s", allow_hyphen_values = true)]
    pub duration: String,
    /// Unmeasured time first (e.g. 1s).
    #[arg(long = "warmup-time", default_value = "1s", allow_hyphen_values = true)]
    pub warmup: String,
    /// Closed loop: stop after this many measured requests (or at --duration).
    #[arg(long, allow_negative_numbers = true, value_parser = crate::flags::count(0, u64::MAX, "10000"))]
    pub requests: Option<u64>,
    /// A transaction not complete this long after it started (connect → last response byte,
    /// however slowly bytes keep arriving) is an error of kind `timeout`.
    #[arg(long, default_value = "10s", allow_hyphen_values = true)]
    pub timeout: String,
    /// A response body over this size is an error of kind `body` — when the URL's path names no
    /// size; a path such as /1KiB makes that size the limit.
    #[arg(long, value_name = "SIZE", default_value = "64MiB", allow_hyphen_values = true)]
    pub max_body: String,
    /// Worker threads of the `pqtls serve` started for each configuration (1 to 256).
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = crate::flags::count_usize(1, 256, "4"))]
    pub workers: usize,
    /// Do 1/N of the load (of the rate; closed loop: of the connections) as shard K of N,
    /// e.g. 2/4; `pqtls merge` joins the shards' records exactly.
    #[arg(long, allow_hyphen_values = true)]
    pub shard: Option<String>,
    /// Append every connection's TLS secrets to FILE (SSLKEYLOGFILE format; with pqtls' own
    /// server, its side too).
    #[arg(long)]
    pub keylog: Option<PathBuf>,
    /// Print the time of each layer (TCP, TCP→TLS, TLS, TLS→HTTP, HTTP) per configuration
    /// (and, with --capture, the capture's view of each layer and its differences).
    #[arg(long)]
    pub layers: bool,
    /// Capture the run's packets into FILE (tcpdump on loopback, filtered to the server's
    /// port, from before the first connection to after the last; needs root or CAP_NET_RAW)
    /// and cross-check every transaction's layers with the capture's. The key log the capture
    /// is read with goes to --keylog (default: FILE with the extension .keys). Several
    /// configurations: one capture (and key log) each, named FILE-1.pcap, FILE-2.pcap, …
    #[arg(long, value_name = "FILE")]
    pub capture: Option<PathBuf>,
    /// Write every measured transaction's timeline (NDJSON: connect, connected, ClientHello,
    /// handshake done, request, first and last byte, ns since the run's start; `-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub timelines: Option<PathBuf>,
    /// Write the records (JSON array; `pqtls report` reads results directories made by `run`)
    /// to FILE (`-`: standard output, without the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// No terminal table.
    #[arg(long)]
    pub quiet: bool,
    /// Count pqtls serve's heap: allocations, bytes allocated and bytes kept per connection on
    /// its worker threads (docs/memory.md). Counting costs CPU time on both sides
    /// (`pqtls overhead --memory`): rates of such a run are not comparable with a run without it.
    #[arg(long)]
    pub memory: bool,
    #[command(flatten)]
    pub via: flags::ViaArgs,
    #[command(flatten)]
    pub trust: flags::TrustArgs,
    /// Do not verify the server's certificate chain: accept it as sent (its CertificateVerify
    /// signature is still checked) — the work h2load does. Never the default; the records say
    /// verify = false and reports label them "no verify". Same as --verify false.
    #[arg(long)]
    pub no_verify: bool,
    /// HTTP/3 over QUIC (rustls through quinn; the same as --http 3): against the URL's UDP
    /// port, or `pqtls serve --quic` started for each configuration (docs/quic-load.md).
    #[arg(long)]
    pub quic: bool,
    /// With network factors (--rtt …): the link verification accepts a median RTT this far
    /// from the asked one (or 2 % of it, whichever is larger), as `pqtls transfer`'s.
    #[arg(long, default_value = "0.3ms", allow_hyphen_values = true)]
    pub rtt_tolerance: String,
}

/// `--quic` is `--transport quic`; flags HTTP/3 cannot honour yet (`--capture`) are refused by
/// name.
fn quic(args: &mut LoadArgs) -> Result<()> {
    if !args.quic {
        return Ok(());
    }
    if let Some(v) = args.factors.given.get("transport").filter(|v| v.iter().any(|x| x != "quic")) {
        bail!(
            "--quic is --transport quic (HTTP/3), but another transport was given too (--transport or --http {}); \
             give one",
            v.join(",")
        );
    }
    if args.capture.is_some() {
        bail!(
            "--capture with --quic: the capture analysis reads TCP, not QUIC, yet; leave out --capture (--keylog \
             alone works: Wireshark decrypts the HTTP/3 connections with it)"
        );
    }
    args.factors.given.insert("transport", vec!["quic".into()]);
    Ok(())
}

/// The (capture, key log) files of each scenario for `--capture FILE [--keylog K]`: FILE and K
/// (default FILE.keys) for one configuration; FILE-i.pcap and K (appended) or FILE-i.keys for
/// several. Captures are on loopback: a URL elsewhere is refused.
type CaptureFiles = Box<dyn Fn(&pqtls_core::scenario::Scenario) -> (PathBuf, PathBuf) + Sync>;

fn capture_files(
    pcap: &std::path::Path,
    keylog: Option<&std::path::Path>,
    scenarios: &[pqtls_core::scenario::Scenario],
    url: Option<&Target>,
) -> Result<CaptureFiles> {
    if let Some(t) = url {
        if !t.addr.ip().is_loopback() {
            bail!(
                "--capture records on loopback (lo); {} is not a loopback address (capture another interface with \
                 tcpdump, then `pqtls layers FILE --keylog K`)",
                t.addr
            );
        }
    }
    let ids: Vec<String> = scenarios.iter().map(|s| s.id()).collect();
    let (pcap, keylog) = (pcap.to_path_buf(), keylog.map(|k| k.to_path_buf()));
    if ids.len() == 1 {
        let keys = keylog.unwrap_or_else(|| pcap.with_extension("keys"));
        return Ok(Box::new(move |_| (pcap.clone(), keys.clone())));
    }
    let stem = pcap.file_stem().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "capture".into());
    let ext = pcap.extension().map(|s| s.to_string_lossy().to_string()).unwrap_or_else(|| "pcap".into());
    Ok(Box::new(move |s| {
        let i = ids.iter().position(|id| *id == s.id()).map_or(0, |i| i + 1);
        let p = pcap.with_file_name(format!("{stem}-{i}.{ext}"));
        let k = keylog.clone().unwrap_or_else(|| p.with_extension("keys"));
        (p, k)
    }))
}

/// The user's server, if the command names one (`pqtls load URL`): its path sets the response
/// size and its scheme whether TLS is used — factors given too must agree.
fn target(args: &mut LoadArgs) -> Result<Option<Target>> {
    args.url.as_deref().map(crate::flags::url_port).transpose()?;
    let url = args.url.as_deref().map(Target::parse).transpose()?;
    if let Some(t) = &url {
        // The URL says what is fetched, and whether with TLS.
        if let Ok(n) = pqtls_core::units::bytes(t.path.trim_start_matches('/')) {
            let size = pqtls_core::units::format_bytes(n);
            match args.factors.given.get("response_size") {
                Some(v)
                    if v.iter()
                        .any(|x| pqtls_core::factor::canonical("response_size", x).ok().as_deref() != Some(&size)) =>
                {
                    bail!("--response-size {} differs from the URL's path {}; give one", v.join(","), t.path)
                }
                _ => {
                    args.factors.given.insert("response_size", vec![size]);
                }
            }
        }
        if !t.tls {
            args.factors.given.insert("tls", vec!["false".into()]);
        }
        if args.factors.given.contains_key("terminator") {
            bail!("--terminator starts a server; with a URL, the server is the one at the URL");
        }
    }
    Ok(url)
}

/// Network factors (`--rtt …`) carry the load through the network lab, to a server pqtls
/// starts in its server namespace: flags that name another server or capture on loopback are
/// refused, saying what would work.
fn network_flags(args: &LoadArgs, url: Option<&Target>, scenarios: &[pqtls_core::scenario::Scenario]) -> Result<()> {
    if scenarios.iter().any(|s| s.network.rtt_ns.is_none()) {
        bail!(
            "a load through the network lab needs the link's RTT, e.g. --rtt 10ms (with --bandwidth, --loss, --jitter)"
        );
    }
    if let Some(t) = url {
        bail!(
            "network factors (--rtt …) with a URL ({}): the network lab carries the load to a server it starts in its \
             server namespace (--terminator pqtls|nginx|haproxy); leave out the URL, or the network factors",
            t.url()
        );
    }
    let quic = scenarios.iter().any(|s| s.transport == pqtls_core::transport::TransportKind::Quic);
    if args.capture.is_some() || quic {
        bail!(
            "{} with network factors (--rtt …): not built for the network lab yet (pqtls transfer crosses it over \
             QUIC); leave out {0}, or the network factors",
            if quic { "--quic (--transport quic)" } else { "--capture" }
        );
    }
    Ok(())
}

pub fn run(mut args: LoadArgs) -> Result<Ending> {
    let url = target(&mut args)?;
    quic(&mut args)?;
    if args.new_connection {
        args.factors.given.insert("keep_alive", vec!["false".into()]);
    }
    if args.no_verify {
        if args.factors.given.get("verify").is_some_and(|v| {
            v.iter().any(|x| pqtls_core::factor::canonical("verify", x).ok().as_deref() != Some("false"))
        }) {
            bail!("--no-verify and --verify true contradict each other; give one");
        }
        args.factors.given.insert("verify", vec!["false".into()]);
    }
    let trust = args.trust.trust(url.as_ref())?;
    let mut scenarios = args.factors.scenarios(Kind::Load)?;
    let rtt_tolerance_ns = flags::rtt_tolerance_ns(&args.rtt_tolerance)?;
    if pqtls_lab::RunPolicy::of(Kind::Load, &scenarios).by_link {
        network_flags(&args, url.as_ref(), &scenarios)?;
        pqtls_net::links::plan_links(&mut scenarios)?;
    }
    context::can_measure(Kind::Load, &scenarios)?;
    let mut settings = flags::load_settings(&args.duration, &args.warmup, &args.timeout, args.requests)?;
    settings.memory = args.memory;
    let shard = args.shard.as_deref().map(LoadShare::parse).transpose()?;
    let max_body_bytes = pqtls_core::units::bytes(&args.max_body)
        .with_context(|| format!("--max-body {}: give a size, e.g. --max-body 16MiB", args.max_body))?;
    // The connections' file descriptors (both sides when pqtls serves them itself) fit, or the
    // run is refused now, with the connections that would fit.
    for s in &scenarios {
        let connections = match shard {
            Some(sh) if s.load.rate_per_s.is_none() => (s.load.connections / sh.count as u64).max(1),
            _ => s.load.connections,
        };
        pqtls_net::load::ensure_fds(s.load.threads as usize, connections as usize, if url.is_some() { 1 } else { 2 })?;
    }
    let owned = OwnedStacks::open(&args.factors.pki)?;
    owned.check(&scenarios)?;
    let terminal = crate::output::terminal(
        &[("--json", args.json.as_deref()), ("--timelines", args.timelines.as_deref())],
        args.quiet,
    )?;
    crate::output::not_stdout("--keylog", args.keylog.as_deref(), "the key log is written as it goes and", "run.keys")?;
    crate::output::not_stdout("--capture", args.capture.as_deref(), "the capture", "run.pcap")?;
    let json = crate::output::create(args.json.as_deref())?;
    let timelines_out = crate::output::create(args.timelines.as_deref())?;
    let capture_files = match &args.capture {
        Some(pcap) => Some(capture_files(pcap, args.keylog.as_deref(), &scenarios, url.as_ref())?),
        None => None,
    };
    let key_log_file = match &args.keylog {
        // With a capture, the key log is the capture's (the measurement writes it).
        _ if args.capture.is_some() => None,
        Some(p) => Some(context::key_log_file(p)?),
        None => None,
    };
    let timelines = std::sync::Mutex::new(Vec::new());
    let via = args.via.via();
    let mut setup = Setup {
        load: LoadSetup {
            url,
            terminators: Some(&via),
            server_workers: args.workers,
            max_body_bytes,
            key_log: key_log_file.clone().map(|k| k as Arc<dyn pqtls_core::backend::KeyLog>),
            shard,
            timelines: args.timelines.is_some().then_some(&timelines),
            capture: capture_files.as_ref().map(|files| pqtls_net::measure::CaptureTo {
                files,
                interface: "lo".into(),
                netns: None,
                append_keylog: args.keylog.is_some(),
            }),
            trust,
            ..LoadSetup::default()
        },
        ..Setup::default()
    };
    setup.transfer.verify.tolerances.rtt_absolute_ns = rtt_tolerance_ns;
    let kind = if args.capture.is_some() { Kind::Layers } else { Kind::Load };
    let measurement = measurement_for(kind, owned.stacks(), setup)?;
    let plan = Plan { scenarios: (&scenarios).into(), settings: &settings, baseline_of: &|_| None, skipped: &[] };
    // Every configuration is tried; those that failed or measured nothing are reported at the
    // end (exit 3).
    let ran = context::run(&plan, &measurement, &pqtls_lab::Schedule::Sequential, true, false)?;
    if ran.measured.is_empty() && ran.summary.failed.is_empty() {
        crate::progress::line("interrupted before anything was measured");
        return Ok(Ending::Interrupted);
    }
    let records: Vec<Record> = ran.measured.iter().map(|m| m.record.clone()).collect();
    // Results first: a reader of the table that went away loses only the table.
    if json.is_some() {
        crate::output::write(json.expect("checked"), &serde_json::to_vec_pretty(&records)?)?;
    }
    if let Some(out) = timelines_out {
        #[derive(serde::Serialize)]
        struct Line<'a> {
            id: &'a str,
            #[serde(flatten)]
            timeline: &'a pqtls_core::timeline::Timeline,
        }
        let mut buf = Vec::new();
        for (id, t) in timelines.lock().unwrap_or_else(|p| p.into_inner()).iter() {
            serde_json::to_writer(&mut buf, &Line { id, timeline: t })?;
            buf.push(b'\n');
        }
        crate::output::write(out, &buf)?;
    }
    if !records.is_empty() {
        terminal.print(&table(&records, args.layers))?;
    }
    crate::output::key_log_written(key_log_file.as_deref())?;
    if ran.interrupted {
        crate::progress::line(&format!(
            "interrupted: {} of {} configurations measured and kept",
            records.len(),
            scenarios.len()
        ));
        return Ok(Ending::Interrupted);
    }
    failed(&ran.summary.failed, &records, &scenarios)?;
    Ok(Ending::Complete)
}

/// Configurations that measured nothing or failed, and runs cut short by a server that went
/// away: an error (exit 3) naming each, after what was measured was printed and written.
fn failed(
    failures: &[(String, String)],
    records: &[Record],
    scenarios: &[pqtls_core::scenario::Scenario],
) -> Result<()> {
    let label = |id: &str| scenarios.iter().find(|s| s.id() == id).map_or(id.to_string(), |s| s.label());
    let mut problems: Vec<String> = failures.iter().map(|(id, e)| format!("{}: {e}", label(id))).collect();
    for r in records {
        if let Some(l) = r.load().filter(|l| l.stopped == "server gone") {
            problems.push(format!(
                "{}: the server went away mid-run (connections refused); {} requests measured over the {:.1} s it \
                 answered, kept with stopped = \"server gone\"",
                r.label,
                l.requests,
                l.duration_ns as f64 / 1e9
            ));
        }
    }
    match problems.len() {
        0 => Ok(()),
        1 => Err(crate::context::Exit { code: crate::context::EXIT_FAILED, message: problems.remove(0) }.into()),
        n => Err(crate::context::Exit {
            code: crate::context::EXIT_FAILED,
            message: format!("{n} configurations failed or were cut short:\n  {}", problems.join("\n  ")),
        }
        .into()),
    }
}

/// The load records as terminal tables (export's, [`pqtls_export::tables::load`]): rates,
/// latency, CPU; with `layers`, each layer's percentiles and the capture's differences; then
/// each run's capture and the notes.
pub fn table(records: &[Record], layers: bool) -> String {
    use pqtls_export::tables::{layers as l, load as t};
    let loads: Vec<pqtls_export::LoadView> = records.iter().filter_map(pqtls_export::LoadView::of).collect();
    let mut s = format!("{}\n", table::draw(&t::summary(&loads), 4));
    let profile = l::profile(&loads);
    if layers && !profile.1.is_empty() {
        s += &format!("layers, µs (each layer's own percentiles):\n{}\n", table::draw(&profile, 2));
    }
    let differences = l::capture_differences(&loads);
    if layers && !differences.1.is_empty() {
        let drawn = table::draw(&differences, 2);
        s += &format!("capture − client, per transaction (Δ = capture − client), µs:\n{drawn}\n");
    }
    for r in &loads {
        if let Some(c) = r.capture.as_deref() {
            s += &format!("capture: {}\n", l::capture_line(r.label(), c));
        }
    }
    s + &table::notes(&t::notes(&loads))
}
