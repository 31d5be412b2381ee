//! `pqtls serve`: the HTTPS/1.1 server of crates/pqtls-net on either stack, for one
//! configuration, until Ctrl-C (or `--duration`); its counters are printed at the end and
//! served at `GET /stats`.

use crate::backends;
use crate::factors::Factors;
use anyhow::{Context, Result};
use pqtls_core::backend::EndpointOptions;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    pub factors: Factors,
    /// Address to listen on (loopback unless told otherwise; port 0: a free one, printed).
    #[arg(long, default_value = "127.0.0.1:8443", value_parser = crate::flags::listen)]
    pub listen: SocketAddr,
    /// Server worker threads, each with its own event loop and listening socket (SO_REUSEPORT).
    /// (`--threads` is the load generator's factor.)
    #[arg(long, default_value_t = 1, allow_negative_numbers = true, value_parser = crate::flags::count_usize(1, 256, "4"))]
    pub workers: usize,
    /// Plain HTTP without TLS (a backend behind a TLS-terminating load balancer; the "no TLS"
    /// baseline).
    #[arg(long)]
    pub plain: bool,
    /// Close every connection after its response, even when the client asks to keep it.
    #[arg(long)]
    pub no_keep_alive: bool,
    /// Append the TLS secrets of every connection to FILE (SSLKEYLOGFILE format: Wireshark
    /// and tshark decrypt a capture with it).
    #[arg(long)]
    pub keylog: Option<PathBuf>,
    /// Trace every handshake: the server's per-step CPU under load (mean per handshake, in
    /// /stats and at the end). Costs a clock read per event.
    #[arg(long)]
    pub trace: bool,
    /// Stop after this long (e.g. 30s, 2h; at most 7d); default: until Ctrl-C.
    #[arg(long, allow_hyphen_values = true)]
    pub duration: Option<String>,
}

pub fn run(args: ServeArgs) -> Result<crate::insitu::Outcome> {
    let scenario = args.factors.single()?;
    let cfg = &scenario.handshake;
    let duration = args
        .duration
        .as_deref()
        .map(|d| pqtls_core::units::duration_ns(d).map(Duration::from_nanos))
        .transpose()
        .context("--duration")?;
    if duration.is_some_and(|d| d.is_zero()) {
        anyhow::bail!("--duration 0 would stop at once: give a time, e.g. --duration 30s, or none (until Ctrl-C)");
    }
    crate::output::not_stdout("--keylog", args.keylog.as_deref(), "the key log is written as it goes and", "run.keys")?;
    let mut endpoint = EndpointOptions { traced: args.trace, clock: scenario.clock, key_log: None };
    if let Some(p) = &args.keylog {
        let sink = pqtls_lab::keylog::KeyLogFile::open(p).with_context(|| format!("cannot write {}", p.display()))?;
        endpoint.key_log = Some(Arc::new(sink));
    }
    let tls = if args.plain {
        None
    } else {
        let backends = backends::all();
        backends::check_stack(&backends, cfg.stack)?;
        let pki = backends::pki(&args.factors.pki)?;
        let files = pki.files_for(cfg)?;
        let backend = backends.iter().find(|b| b.stack() == cfg.stack).context("stack")?;
        Some(Arc::from(backend.prepare(cfg, &files)?))
    };
    let server = pqtls_net::Server::start(pqtls_net::ServeOptions {
        listen: args.listen,
        threads: args.workers,
        tls,
        endpoint,
        keep_alive: !args.no_keep_alive,
    })?;
    let what = if args.plain {
        "plain HTTP".to_string()
    } else {
        format!("{} {} ({})", cfg.stack, scenario.label(), cfg.cipher.name)
    };
    let scheme = if args.plain { "http" } else { "https" };
    crate::progress::line(&format!(
        "serving {what} on {scheme}://{} with {} thread{} — GET /<size> (e.g. /1KiB), /stats; Ctrl-C stops",
        server.addr(),
        args.workers,
        if args.workers == 1 { "" } else { "s" }
    ));
    // Machine-readable for scripts and tests: the address actually bound. A reader that went
    // away (`pqtls serve | true`) does not stop the server (output.rs).
    if let Err(e) = crate::output::print(&format!("{}\n", server.addr())) {
        crate::progress::line(&format!("note: {e:#}"));
    }
    let interrupt = crate::insitu::interrupt_flag();
    let started = Instant::now();
    while !interrupt.load(Ordering::SeqCst) && duration.is_none_or(|d| started.elapsed() < d) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = interrupt.load(Ordering::SeqCst);
    let s = server.stop()?;
    crate::progress::line(&format!(
        "{} connections, {} handshakes ({:.0} µs server CPU each on average), {} requests, {} response bytes",
        s.connections,
        s.handshakes,
        s.handshake_cpu_ns_mean / 1000.0,
        s.requests,
        s.response_bytes
    ));
    if !s.steps_ns_mean.is_empty() {
        crate::progress::line("server CPU per step, mean per handshake:");
        for (step, ns) in &s.steps_ns_mean {
            crate::progress::line(&format!("  {step:<32} {:>10.1} µs", ns / 1000.0));
        }
    }
    for e in &s.errors {
        crate::progress::line(&format!("errors ({}): {} — last: {}", e.kind, e.count, e.last));
    }
    Ok(if interrupted { crate::insitu::Outcome::Interrupted } else { crate::insitu::Outcome::Complete })
}
