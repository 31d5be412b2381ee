//! `pqtls insitu` and `pqtls overhead`.

use crate::{backends, table};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use pqtls_core::catalogue::{self, Stack};
use pqtls_core::config::{ChainSpec, HandshakeConfig};
use pqtls_core::record::{ConfigRecord, RawSample};
use pqtls_core::stats::{parse_precision, Quantiles};
use pqtls_lab::runner::{self, Measured, Mode, Progress, Settings};
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

/// The factors shared by `insitu` and `overhead`.
#[derive(clap::Args, Clone)]
pub struct Factors {
    /// TLS stacks, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "openssl")]
    pub stack: Vec<String>,
    /// Key-exchange groups, comma-separated: one configuration each (the server supports only
    /// that group, so it is what must be negotiated).
    #[arg(long, value_delimiter = ',', default_value = "x25519")]
    pub group: Vec<String>,
    /// Certificate chains, comma-separated: leaf:root or leaf:intermediate:root.
    #[arg(long, value_delimiter = ',', default_value = "p256:p256")]
    pub chain: Vec<String>,
    /// TLS 1.3 cipher suites, comma-separated.
    #[arg(long, value_delimiter = ',', default_value = "TLS_AES_128_GCM_SHA256")]
    pub cipher: Vec<String>,
    /// The key shares the client sends (default: one, for the group). Groups listed here are
    /// added to the client's supported groups; a share the server will not pick forces a
    /// HelloRetryRequest, e.g. `--group X25519MLKEM768 --key-shares x25519`.
    #[arg(long, value_delimiter = ',')]
    pub key_shares: Vec<String>,
    /// rustls: one X25519 key behind both an X25519MLKEM768 and an x25519 share.
    #[arg(long)]
    pub share_x25519: bool,
    /// The server also sends the root certificate.
    #[arg(long)]
    pub send_root: bool,
    /// The client verifies the root's own signature too (stands for an intermediate CA).
    #[arg(long)]
    pub verify_parent: bool,
    /// Mutual TLS with this client chain (e.g. mldsa65:mldsa65).
    #[arg(long)]
    pub mtls: Option<String>,
    /// Measure resumed (session ticket) handshakes instead of full ones.
    #[arg(long)]
    pub resumption: bool,
    /// Directory of the PKI cache.
    #[arg(long, default_value_os_t = crate::backends::default_pki_dir())]
    pub pki: PathBuf,
    /// split: thread CPU clock around each call into the stack, split among the steps inside
    /// it by wall time (cheap); cpu: thread CPU clock at every event (exact, ~0.5 µs per event
    /// where that clock is a system call). See docs/attribution.md.
    #[arg(long, default_value = "split")]
    pub clock: String,
}

impl Factors {
    pub fn clock(&self) -> Result<pqtls_core::trace::Clock> {
        Ok(pqtls_core::trace::Clock::parse(&self.clock)?)
    }

    /// The configurations: stack × group × chain × cipher, validated.
    pub fn configs(&self) -> Result<Vec<HandshakeConfig>> {
        let stacks = self.stack.iter().map(|s| Stack::parse(s)).collect::<pqtls_core::Result<Vec<_>>>()?;
        let groups = self.group.iter().map(|g| catalogue::group(g)).collect::<pqtls_core::Result<Vec<_>>>()?;
        let chains = self.chain.iter().map(|c| ChainSpec::parse(c)).collect::<pqtls_core::Result<Vec<_>>>()?;
        let ciphers = self.cipher.iter().map(|c| catalogue::cipher(c)).collect::<pqtls_core::Result<Vec<_>>>()?;
        let shares = self.key_shares.iter().map(|g| catalogue::group(g)).collect::<pqtls_core::Result<Vec<_>>>()?;
        let mtls = self.mtls.as_deref().map(ChainSpec::parse).transpose()?;
        let mut out = Vec::new();
        for &stack in &stacks {
            backends::get(stack)?;
            for &group in &groups {
                for &chain in &chains {
                    for &cipher in &ciphers {
                        let mut c = HandshakeConfig::new(stack, group, chain, cipher);
                        for s in &shares {
                            if !c.groups.contains(s) {
                                c.groups.push(s);
                            }
                        }
                        c.key_shares = shares.clone();
                        c.share_x25519 = self.share_x25519;
                        c.send_root = self.send_root;
                        c.verify_parent = self.verify_parent;
                        c.client_chain = mtls;
                        c.resumption = self.resumption;
                        c.validate().with_context(|| format!("configuration {} on {stack}", c.label()))?;
                        out.push(c);
                    }
                }
            }
        }
        if out.is_empty() {
            bail!("no configuration to measure");
        }
        Ok(out)
    }
}

#[derive(clap::Args)]
pub struct InsituArgs {
    #[command(flatten)]
    pub factors: Factors,
    /// Warm-up handshakes per configuration (not measured).
    #[arg(long, default_value_t = 100)]
    pub warmup: u64,
    /// Measured handshakes per configuration (the cap with --precision).
    #[arg(long, default_value_t = 1000)]
    pub loops: u64,
    /// Adaptive: stop when every step's median is known to ± this (e.g. 1%), or at --loops.
    #[arg(long)]
    pub precision: Option<String>,
    /// Quantiles to report, in percent.
    #[arg(long, default_value = "15,50,99")]
    pub quantiles: String,
    /// memory: client and server in one thread; threads: two pinned threads over a socketpair.
    #[arg(long, default_value = "memory")]
    pub mode: String,
    /// Report each configuration's per-step delta against this one: group:leaf[:int]:root,
    /// e.g. x25519:p256:p256 (same stack, cipher and options as each configuration).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Write the records (JSON array).
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Write per-step summaries (CSV).
    #[arg(long)]
    pub csv: Option<PathBuf>,
    /// Write every handshake's per-step times (NDJSON).
    #[arg(long)]
    pub ndjson: Option<PathBuf>,
    /// No terminal table.
    #[arg(long)]
    pub quiet: bool,
}

/// Ctrl-C sets a flag that the runner polls between handshakes; a second Ctrl-C exits.
pub fn interrupt_flag() -> Arc<AtomicBool> {
    let flag = Arc::new(AtomicBool::new(false));
    let f = flag.clone();
    let _ = ctrlc::set_handler(move || {
        if f.swap(true, Ordering::SeqCst) {
            eprintln!("\ninterrupted twice: exiting now");
            std::process::exit(130);
        }
        eprintln!(
            "\ninterrupted: finishing the current handshake and keeping what was measured (Ctrl-C again to quit now)"
        );
    });
    flag
}

pub fn settings(
    warmup: u64,
    loops: u64,
    precision: Option<&str>,
    quantiles: &str,
    mode: &str,
    clock: pqtls_core::trace::Clock,
) -> Result<Settings> {
    let s = Settings {
        clock,
        warmup,
        loops,
        precision: precision.map(parse_precision).transpose()?,
        min_loops: 200.min(loops),
        quantiles: Quantiles::parse(quantiles)?,
        mode: Mode::parse(mode)?,
    };
    s.validate()?;
    Ok(s)
}

pub fn environment() -> pqtls_core::record::Env {
    let libs = backends::all().iter().map(|b| (b.stack().name().to_string(), b.library_version())).collect();
    pqtls_lab::env::collect(crate::VERSION, crate::COMMIT, libs)
}

/// Measures one configuration with a progress bar.
pub fn measure_one(
    cfg: &HandshakeConfig,
    settings: &Settings,
    pki: &pqtls_pki::Pki,
    env: &pqtls_core::record::Env,
    interrupt: &AtomicBool,
    bar: &ProgressBar,
) -> Result<Measured> {
    let backend = backends::get(cfg.stack)?;
    let files = pki.files_for(cfg)?;
    bar.set_message(format!("{} {}", cfg.stack, cfg.label()));
    let mut progress = |p: &Progress| {
        bar.set_length(p.target);
        bar.set_position(p.done);
        let extra = match &p.worst {
            Some((step, rel)) if rel.is_finite() => format!(" · widest CI: {step} ±{:.1}%", rel * 100.0),
            _ => String::new(),
        };
        bar.set_prefix(format!("{:>9}", p.phase));
        bar.set_message(format!("{} {}{extra}", cfg.stack, cfg.label()));
    };
    let m = runner::measure(backend.as_ref(), cfg, &files, settings, env, interrupt, &mut progress)
        .with_context(|| format!("{} on {}", cfg.label(), cfg.stack))?;
    Ok(m)
}

pub fn progress_bar() -> ProgressBar {
    let bar = ProgressBar::new(0);
    bar.set_style(
        ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} eta {eta} {msg}")
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    bar
}

pub fn run(args: InsituArgs) -> Result<()> {
    let configs = args.factors.configs()?;
    let settings = settings(
        args.warmup,
        args.loops,
        args.precision.as_deref(),
        &args.quantiles,
        &args.mode,
        args.factors.clock()?,
    )?;
    let baseline_spec = args.baseline.as_deref().map(parse_baseline).transpose()?;
    let pki = crate::backends::open_pki(&args.factors.pki)?;
    let env = environment();
    let interrupt = interrupt_flag();
    let mut ndjson = match &args.ndjson {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("creating {}", p.display()))?,
        )),
        None => None,
    };

    let mut records: Vec<ConfigRecord> = Vec::new();
    let mut baselines: Vec<ConfigRecord> = Vec::new();
    let total = configs.len();
    for (i, cfg) in configs.iter().enumerate() {
        if interrupt.load(Ordering::SeqCst) {
            break;
        }
        let bar = progress_bar();
        bar.println(format!("[{}/{total}] {} {}", i + 1, cfg.stack, cfg.label()));
        let m = measure_one(cfg, &settings, &pki, &env, &interrupt, &bar);
        bar.finish_and_clear();
        let m = m?;
        if let Some(w) = ndjson.as_mut() {
            for (j, (c, s)) in m.samples.iter().enumerate() {
                let line = RawSample { id: &m.record.config.id, i: j as u64, client: c, server: s };
                serde_json::to_writer(&mut *w, &line)?;
                w.write_all(b"\n")?;
            }
            w.flush()?;
        }
        records.push(m.record);
    }
    if records.is_empty() {
        bail!("interrupted before anything was measured");
    }

    if let Some((group, chain)) = baseline_spec {
        // Each configuration's baseline: itself with the baseline's group and chain.
        let baseline_of = |id: &str| -> Result<HandshakeConfig> {
            let mut b = configs.iter().find(|c| c.id() == id).context("record without configuration")?.clone();
            b.groups = vec![group];
            b.key_shares.clear();
            b.share_x25519 = false;
            b.chain = chain;
            Ok(b)
        };
        for r in &records {
            let b = baseline_of(&r.config.id)?;
            let id = b.id();
            if baselines.iter().any(|x| x.config.id == id) {
                continue;
            }
            if let Some(existing) = records.iter().find(|x| x.config.id == id) {
                baselines.push(existing.clone());
                continue;
            }
            if interrupt.load(Ordering::SeqCst) {
                break;
            }
            let bar = progress_bar();
            bar.println(format!("[baseline] {} {}", b.stack, b.label()));
            let m = measure_one(&b, &settings, &pki, &env, &interrupt, &bar);
            bar.finish_and_clear();
            baselines.push(m?.record);
        }
        for r in records.iter_mut() {
            let id = baseline_of(&r.config.id)?.id();
            if let Some(base) = baselines.iter().find(|x| x.config.id == id) {
                r.baseline = Some(pqtls_core::record::BaselineDelta::between(r, base));
            }
        }
    }

    if !args.quiet {
        for r in &records {
            print!("{}", table::record(r));
        }
    }
    if let Some(p) = &args.json {
        let mut all = records.clone();
        all.extend(baselines.iter().filter(|b| !records.iter().any(|r| r.config.id == b.config.id)).cloned());
        std::fs::write(p, serde_json::to_vec_pretty(&all)?).with_context(|| format!("writing {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.csv {
        let set = pqtls_export::ResultSet::from_records(records.clone());
        std::fs::write(p, pqtls_export::csv::steps(&set)?).with_context(|| format!("writing {}", p.display()))?;
        eprintln!("wrote {}", p.display());
    }
    if let Some(p) = &args.ndjson {
        eprintln!("wrote {}", p.display());
    }
    if interrupt.load(Ordering::SeqCst) {
        eprintln!("interrupted: {} of {total} configurations measured and kept", records.len());
    }
    Ok(())
}

/// `group:leaf[:int]:root`.
fn parse_baseline(s: &str) -> Result<(&'static catalogue::Group, ChainSpec)> {
    let (g, chain) = s.split_once(':').with_context(|| {
        format!("baseline '{s}' must be group:leaf:root (or group:leaf:intermediate:root), e.g. x25519:p256:p256")
    })?;
    Ok((catalogue::group(g)?, ChainSpec::parse(chain)?))
}

/// Interleaved blocks of two kinds of handshakes (traced/untraced, memory/threads).
#[derive(clap::Args, Clone, Copy)]
pub struct Blocks {
    /// Pairs of blocks, one of each kind, alternating.
    #[arg(long, default_value_t = 20)]
    pub blocks: u64,
    /// Handshakes per block.
    #[arg(long, default_value_t = 100)]
    pub block: u64,
}

#[derive(clap::Args)]
pub struct OverheadArgs {
    #[command(flatten)]
    pub factors: Factors,
    #[command(flatten)]
    pub blocks: Blocks,
    /// Write the results (JSON).
    #[arg(long)]
    pub json: Option<PathBuf>,
}

pub fn overhead(args: OverheadArgs) -> Result<()> {
    let configs = args.factors.configs()?;
    pqtls_core::trace::set_default_clock(args.factors.clock()?);
    let pki = crate::backends::open_pki(&args.factors.pki)?;
    let mut t = table::new(&[
        "stack",
        "configuration",
        "handshakes/mode",
        "CPU traced µs",
        "CPU untraced µs",
        "CPU overhead",
        "hs/s traced",
        "hs/s untraced",
        "rate overhead",
        "events",
        "ns/event",
        "computed overhead",
    ]);
    let mut out = Vec::new();
    for cfg in &configs {
        let backend = backends::get(cfg.stack)?;
        let prepared = backend.prepare(cfg, &pki.files_for(cfg)?)?;
        // Warm-up, untimed.
        for _ in 0..args.blocks.block {
            pqtls_lab::drive::handshake(prepared.as_ref(), true)?;
        }
        let o = runner::tracer_overhead(Arc::from(prepared), args.blocks.blocks, args.blocks.block)?;
        t.add_row(vec![
            cfg.stack.to_string(),
            cfg.label(),
            o.handshakes_per_mode.to_string(),
            table::us(o.traced_cpu_ns),
            table::us(o.untraced_cpu_ns),
            format!("{:+.2}%", o.cpu_overhead * 100.0),
            format!("{:.0}", o.traced_per_s),
            format!("{:.0}", o.untraced_per_s),
            format!("{:+.2}%", o.rate_overhead * 100.0),
            format!("{:.0}", o.extra_events),
            format!("{:.0}", o.stamp_ns),
            format!("{:.2}%", o.computed_overhead * 100.0),
        ]);
        out.push(serde_json::json!({"config": cfg.id(), "label": cfg.label(), "overhead": o}));
    }
    table::numeric_from(&mut t, 2);
    println!("{t}");
    if let Some(p) = &args.json {
        let v = serde_json::json!({"env": environment(), "results": out});
        std::fs::write(p, serde_json::to_vec_pretty(&v)?).with_context(|| format!("writing {}", p.display()))?;
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct TraceArgs {
    #[command(flatten)]
    pub factors: Factors,
    /// Handshakes to run first (untimed), so the one traced is warm.
    #[arg(long, default_value_t = 50)]
    pub warmup: u64,
}

/// One handshake's raw events on both sides, interleaved by wall clock, with the step each
/// interval is attributed to: the attribution rule, shown.
pub fn trace(args: TraceArgs) -> Result<()> {
    use pqtls_core::trace::{attribute_intervals, EventKind};
    pqtls_core::trace::set_default_clock(args.factors.clock()?);
    let pki = crate::backends::open_pki(&args.factors.pki)?;
    for cfg in args.factors.configs()? {
        let backend = backends::get(cfg.stack)?;
        let prepared = backend.prepare(&cfg, &pki.files_for(&cfg)?)?;
        for _ in 0..args.warmup {
            pqtls_lab::drive::handshake(prepared.as_ref(), true)?;
        }
        let mut client = prepared.client(true)?;
        let mut server = prepared.server(true)?;
        pqtls_lab::drive::in_memory(client.as_mut(), server.as_mut())?;
        let sides = [("client", client.trace().events.clone()), ("server", server.trace().events.clone())];
        let t0 = sides.iter().filter_map(|(_, e)| e.first().map(|e| e.wall_ns)).min().unwrap_or(0);
        let mut rows = Vec::new();
        for (side, events) in &sides {
            let (_, intervals) = attribute_intervals(events);
            for (i, ev) in events.iter().enumerate() {
                let (step, cpu) =
                    intervals.iter().find(|iv| iv.end == i).map(|iv| (iv.step.clone(), iv.cpu_ns)).unwrap_or_default();
                let what = match ev.kind {
                    EventKind::CallStart { name } => {
                        format!("call start{}", name.map(|n| format!(" ({n})")).unwrap_or_default())
                    }
                    EventKind::CallEnd => "call end".into(),
                    EventKind::Boundary => "state boundary".into(),
                    EventKind::Read(m) => format!("read {} ({} B)", m.rfc_name(), ev.bytes),
                    EventKind::Wrote(m) => format!("wrote {} ({} B)", m.rfc_name(), ev.bytes),
                    EventKind::OpStart(op) => format!("op start {op}"),
                    EventKind::OpEnd => "op end".into(),
                };
                rows.push((ev.wall_ns - t0, *side, what, step, cpu));
            }
        }
        rows.sort_by_key(|r| r.0);
        println!("\n{} {} — one warm handshake, events in wall-clock order", cfg.stack, cfg.label());
        let mut t = table::new(&["wall µs", "side", "event", "interval ending here → step", "CPU µs"]);
        for (wall, side, what, step, cpu) in rows {
            let cpu = if step.is_empty() { String::new() } else { table::us(cpu as f64) };
            t.add_row(vec![table::us(wall as f64), side.to_string(), what, step, cpu]);
        }
        table::numeric_from(&mut t, 4);
        println!("{t}");
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct CrossCheckArgs {
    #[command(flatten)]
    pub factors: Factors,
    #[command(flatten)]
    pub blocks: Blocks,
}

/// In-memory vs two pinned threads, interleaved: the per-step medians side by side.
pub fn cross_check(args: CrossCheckArgs) -> Result<()> {
    use pqtls_core::record::SideSummary;
    use pqtls_core::stats::Delta;
    let configs = args.factors.configs()?;
    pqtls_core::trace::set_default_clock(args.factors.clock()?);
    let pki = crate::backends::open_pki(&args.factors.pki)?;
    let qs = Quantiles::default();
    for cfg in &configs {
        let backend = backends::get(cfg.stack)?;
        let prepared: Arc<dyn pqtls_core::backend::Prepared> = Arc::from(backend.prepare(cfg, &pki.files_for(cfg)?)?);
        let (mem, thr) = runner::mode_cross_check(prepared, args.blocks.blocks, args.blocks.block)?;
        println!(
            "\n{} {} — {} handshakes per mode, interleaved in blocks of {}",
            cfg.stack,
            cfg.label(),
            mem.len(),
            args.blocks.block
        );
        let mut t = table::new(&["side", "step", "memory p50 µs", "threads p50 µs", "Δ µs (95 %)", "threads/memory"]);
        for side in ["client", "server"] {
            let pick = |v: &Vec<(pqtls_core::trace::SideSample, pqtls_core::trace::SideSample)>| {
                let sides: Vec<&pqtls_core::trace::SideSample> =
                    v.iter().map(|(c, s)| if side == "client" { c } else { s }).collect();
                SideSummary::of(&sides, &qs)
            };
            let (m, th) = (pick(&mem), pick(&thr));
            let zero = pqtls_core::stats::Summary::default();
            let rows = m.steps.iter().map(|(k, v)| (k.clone(), v, th.steps.get(k).unwrap_or(&zero)));
            for (step, a, b) in rows.chain([("TOTAL".to_string(), &m.total_cpu_ns, &th.total_cpu_ns)]) {
                let d = Delta::between(b, a);
                t.add_row(vec![
                    side.to_string(),
                    step,
                    table::us(a.median),
                    table::us(b.median),
                    format!("{} ± {}", table::signed_us(d.delta), table::us(d.half_width)),
                    format!("{:.2}", b.median / a.median),
                ]);
            }
        }
        table::numeric_from(&mut t, 2);
        println!("{t}");
    }
    Ok(())
}
