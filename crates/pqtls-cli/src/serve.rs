//! `pqtls serve`: the HTTPS/1.1 server of crates/pqtls-net on either stack, for one
//! configuration, until Ctrl-C (or `--duration`); its counters are printed at the end and
//! served at `GET /stats`.

use crate::factors::Factors;
use anyhow::{bail, Context, Result};
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
    /// Server worker threads, each with its own event loop, accepting from one listening socket.
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
    /// Close a connection whose TLS handshake has not completed this long after it was
    /// accepted (e.g. 10s).
    #[arg(long, default_value = "60s", value_name = "DURATION", allow_hyphen_values = true)]
    pub handshake_timeout: String,
    /// Close a connection whose request head is not complete this long after its first byte
    /// (the first request: after the handshake).
    #[arg(long, default_value = "60s", value_name = "DURATION", allow_hyphen_values = true)]
    pub header_timeout: String,
    /// Close a keep-alive connection idle this long between a response and the next request.
    #[arg(long, default_value = "75s", value_name = "DURATION", allow_hyphen_values = true)]
    pub idle_timeout: String,
    /// Close a connection whose client reads nothing of its response for this long.
    #[arg(long, default_value = "60s", value_name = "DURATION", allow_hyphen_values = true)]
    pub send_timeout: String,
    /// Connections open at once; more are accepted and closed at once (counted in /stats as
    /// refused_at_cap). Default: what the open-files limit (ulimit -n) leaves.
    #[arg(
        long,
        value_name = "N",
        allow_negative_numbers = true,
        value_parser = crate::flags::count_usize(1, MAX_CONNECTIONS, "1000")
    )]
    pub max_connections: Option<usize>,
    /// Count the process's heap (every allocation through the counting allocator and the TLS
    /// libraries' hooks, all threads) and report it in /stats under `heap`: what the resident
    /// measurement reads (docs/memory.md). Costs two atomic additions per allocation.
    #[arg(long)]
    pub memory: bool,
    /// Serve HTTP/3 over QUIC on UDP at --listen instead of HTTPS/1.1 over TCP (rustls only;
    /// docs/serve.md): the same GET /<size> and /stats.
    #[arg(long)]
    pub quic: bool,
}

/// The largest `--max-connections` (the server's own ceiling on its default cap).
const MAX_CONNECTIONS: usize = 1 << 20;

/// What a factor flag that `serve` does not use would be instead.
fn instead(factor: &str) -> &'static str {
    match factor {
        "threads" => "the server's threads are --workers",
        "keep_alive" => "serve keeps connections alive when clients ask; --no-keep-alive closes them",
        "tls" => "plain HTTP is --plain",
        "transport" => "serve speaks HTTPS/1.1 over TCP at --listen, or HTTP/3 over QUIC with --quic",
        "terminator" => "serve is the pqtls terminator; pqtls load --terminator runs the others",
        "connections" | "rate" | "response_size" => "it is the load generator's: pqtls load",
        "client_hello_padding" => {
            "the ClientHello is the client's: pqtls load --client-hello-padding pads the load's hellos"
        }
        _ => "network emulation is pqtls transfer's (or pqtls netlab)",
    }
}

/// Factor flags `serve` does not apply are refused by name (as an experiment file refuses
/// factors its measurement does not use), so that a banner never lists a setting that is not
/// in effect. `serve` applies the handshake configuration and the clock (the factors of class
/// `Handshake` and `Clock`), all but the ClientHello's padding, which is the client's.
fn refuse_unused_factors(factors: &Factors) -> Result<()> {
    use pqtls_core::factor::{self, Class};
    for name in factors.given.keys() {
        // The ClientHello's padding is the client's alone: a server has nothing to apply.
        let used = factor::factor(name)
            .is_some_and(|f| matches!(f.class, Class::Handshake | Class::Clock) && f.name != "client_hello_padding");
        if !used {
            let flag = name.replace('_', "-");
            return Err(crate::context::Exit {
                code: 2,
                message: format!("--{flag}: serve does not use this factor ({}); leave it out", instead(name)),
            }
            .into());
        }
    }
    Ok(())
}

/// `--duration`: `None` serves until Ctrl-C.
fn duration(args: &ServeArgs) -> Result<Option<Duration>> {
    let duration = args
        .duration
        .as_deref()
        .map(|d| pqtls_core::units::duration_ns(d).map(Duration::from_nanos))
        .transpose()
        .context("--duration")?;
    if duration.is_some_and(|d| d.is_zero()) {
        bail!("--duration 0 would stop at once: give a time, e.g. --duration 30s, or none (until Ctrl-C)");
    }
    Ok(duration)
}

fn timeout(flag: &str, value: &str) -> Result<Duration> {
    let d = pqtls_core::units::duration_ns(value).map(Duration::from_nanos).with_context(|| format!("--{flag}"))?;
    if d.is_zero() {
        anyhow::bail!("--{flag} 0: give a duration above 0, e.g. 10s");
    }
    // The event loop's timers tick in milliseconds: a shorter limit would cut every connection.
    if d < Duration::from_millis(1) {
        anyhow::bail!("--{flag} {value}: below the server's 1ms timer resolution, every connection would be cut; give at least 1ms, e.g. 10s");
    }
    Ok(d)
}

/// What is served, where, and under which limits (two lines for the terminal).
fn banner(
    args: &ServeArgs,
    scenario: &pqtls_core::scenario::Scenario,
    server: &pqtls_net::Server,
    limits: &pqtls_net::serve::Limits,
) -> String {
    let cfg = &scenario.handshake;
    let cap = server.stats().max_connections;
    let fd_note = match (pqtls_net::serve::fd_limit(), pqtls_net::serve::fd_capacity(args.workers)) {
        (Some(limit), Some(room)) if cap as usize > room => {
            format!(" (above what the open-files limit {limit} leaves, {room}: accepts may fail with EMFILE and pause)")
        }
        (Some(limit), _) => format!(" (open-files limit {limit})"),
        _ => String::new(),
    };
    let secs = |d: Duration| format!("{d:?}");
    let what = if args.plain {
        "plain HTTP".to_string()
    } else {
        format!("{} {} ({})", cfg.stack, scenario.label(), cfg.cipher.name)
    };
    let scheme = if args.plain { "http" } else { "https" };
    format!(
        "serving {what} on {scheme}://{} with {} thread{} — GET /<size> (e.g. /1KiB), /stats; Ctrl-C stops\n\
         timeouts: handshake {}, header {}, idle {}, send {}; at most {cap} connections{fd_note}",
        server.addr(),
        args.workers,
        if args.workers == 1 { "" } else { "s" },
        secs(limits.handshake_timeout),
        secs(limits.header_timeout),
        secs(limits.idle_timeout),
        secs(limits.send_timeout),
    )
}

/// What the server did, when it stops: connections, handshakes, requests, timeouts and caps,
/// CPU per step when traced, errors by kind.
fn summary(s: &pqtls_net::serve::StatsSnapshot) {
    crate::progress::line(&format!(
        "{} connections, {} handshakes ({:.0} µs server CPU each on average), {} requests, {} response bytes sent \
         (of {} asked)",
        s.connections,
        s.handshakes,
        s.handshake_cpu_ns_mean / 1000.0,
        s.requests,
        s.response_bytes,
        s.response_bytes_asked
    ));
    let t = &s.timeouts;
    if t.handshake + t.header + t.idle + t.send + s.refused_at_cap + s.accept_errors > 0 {
        crate::progress::line(&format!(
            "closed on timeouts: {} handshake, {} header, {} idle, {} send; {} refused at the cap of {}; {} failed accepts",
            t.handshake, t.header, t.idle, t.send, s.refused_at_cap, s.max_connections, s.accept_errors
        ));
    }
    if !s.steps_ns_mean.is_empty() {
        crate::progress::line("server CPU per step, mean per handshake:");
        for (step, ns) in &s.steps_ns_mean {
            crate::progress::line(&format!("  {step:<32} {:>10.1} µs", ns / 1000.0));
        }
    }
    for e in &s.errors {
        crate::progress::line(&format!("errors ({}): {} — last: {}", e.kind, e.count, e.last));
    }
}

pub fn run(args: ServeArgs) -> Result<crate::context::Ending> {
    refuse_unused_factors(&args.factors)?;
    let scenario = args.factors.single()?;
    if args.quic {
        return run_quic(&args, &scenario);
    }
    let cfg = &scenario.handshake;
    if args.memory {
        // Before the TLS contexts are made: the heap they hold is the server's too.
        pqtls_core::memory::start_process_totals();
        if !pqtls_core::memory::rust_allocations_counted() {
            anyhow::bail!("--memory: Rust allocations are not counted (this binary has no counting allocator)");
        }
    }
    let duration = duration(&args)?;
    crate::output::not_stdout("--keylog", args.keylog.as_deref(), "the key log is written as it goes and", "run.keys")?;
    let limits = pqtls_net::serve::Limits {
        handshake_timeout: timeout("handshake-timeout", &args.handshake_timeout)?,
        header_timeout: timeout("header-timeout", &args.header_timeout)?,
        idle_timeout: timeout("idle-timeout", &args.idle_timeout)?,
        send_timeout: timeout("send-timeout", &args.send_timeout)?,
        max_connections: args.max_connections,
    };
    let mut endpoint = EndpointOptions { traced: args.trace, clock: scenario.clock, ..EndpointOptions::default() };
    let mut key_log = None;
    if let Some(p) = &args.keylog {
        let sink = crate::context::key_log_file(p)?;
        endpoint.key_log = Some(sink.clone());
        key_log = Some(sink);
    }
    let mut coverage = None;
    let tls = if args.plain {
        None
    } else {
        let owned = crate::context::OwnedStacks::open(&args.factors.pki)?;
        if args.memory {
            // The stack's hooks are in place, or serve refuses to report a heap without them.
            coverage = Some(owned.stacks().backend(cfg.stack)?.counted_allocations()?);
        }
        Some(owned.stacks().prepare_config(cfg)?.0)
    };
    if args.memory && coverage.is_none() {
        anyhow::bail!("--memory counts the TLS stack's heap: leave out --plain");
    }
    let server = pqtls_net::Server::start_with(
        pqtls_net::ServeOptions {
            listen: args.listen,
            threads: args.workers,
            tls,
            endpoint,
            keep_alive: !args.no_keep_alive,
        },
        limits.clone(),
    )?;
    if let Some(c) = coverage {
        server.count_heap(c);
    }
    crate::progress::line(&banner(&args, &scenario, &server, &limits));
    // Machine-readable for scripts and tests: the address actually bound. A reader that went
    // away (`pqtls serve | true`) does not stop the server (output.rs).
    if let Err(e) = crate::output::print(&format!("{}\n", server.addr())) {
        crate::progress::line(&format!("note: {e:#}"));
    }
    let interrupt = crate::context::interrupt_flag();
    let started = Instant::now();
    let mut key_log_error = None;
    while !interrupt.load(Ordering::SeqCst) && duration.is_none_or(|d| started.elapsed() < d) {
        // A secret that could not be written ends the run: a key log with holes would fail to
        // decrypt connections later, silently.
        if let Some(e) = key_log.as_ref().and_then(|k| k.error()) {
            key_log_error = Some(e);
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = interrupt.load(Ordering::SeqCst);
    let s = server.stop()?;
    summary(&s);
    if let Some(e) = key_log_error.or_else(|| key_log.as_ref().and_then(|k| k.error())) {
        anyhow::bail!("{e}; the run stopped (TLS secrets would be missing from the key log)");
    }
    Ok(if interrupted { crate::context::Ending::Interrupted } else { crate::context::Ending::Complete })
}

/// `pqtls serve --quic`: HTTP/3 on UDP `--listen` until Ctrl-C or `--duration`.
fn run_quic(args: &ServeArgs, scenario: &pqtls_core::scenario::Scenario) -> Result<crate::context::Ending> {
    let cfg = &scenario.handshake;
    pqtls_quic::h3::require_rustls(cfg.stack)?;
    for (flag, given) in [
        ("--plain", args.plain),
        ("--trace", args.trace),
        ("--memory", args.memory),
        ("--no-keep-alive", args.no_keep_alive),
        ("--max-connections", args.max_connections.is_some()),
    ] {
        if given {
            bail!("{flag} with --quic: not available over HTTP/3 yet (it applies to the TCP server); leave it out");
        }
    }
    let duration = duration(args)?;
    crate::output::not_stdout("--keylog", args.keylog.as_deref(), "the key log is written as it goes and", "run.keys")?;
    let key_log = args.keylog.as_deref().map(crate::context::key_log_file).transpose()?;
    let owned = crate::context::OwnedStacks::open(&args.factors.pki)?;
    let (prepared, _) = owned.stacks().prepare_config(cfg)?;
    let sink = key_log.clone().map(|k| k as Arc<dyn pqtls_core::backend::KeyLog>);
    let server = pqtls_net::carrier::quic::serve_tuned(
        args.listen,
        args.workers,
        cfg,
        prepared.as_ref(),
        Default::default(),
        sink,
    )?;
    crate::progress::line(&format!(
        "serving HTTP/3 {} {} ({}) on UDP {} (https://{}/) with {} thread{} — GET /<size> (e.g. /1KiB), /stats; \
         Ctrl-C stops",
        cfg.stack,
        scenario.label(),
        cfg.cipher.name,
        server.addr(),
        server.addr(),
        args.workers,
        if args.workers == 1 { "" } else { "s" },
    ));
    if let Err(e) = crate::output::print(&format!("{}\n", server.addr())) {
        crate::progress::line(&format!("note: {e:#}"));
    }
    let interrupt = crate::context::interrupt_flag();
    let started = Instant::now();
    while !interrupt.load(Ordering::SeqCst) && duration.is_none_or(|d| started.elapsed() < d) {
        // A key log that cannot be written stops the server (secrets would be missing).
        if key_log.as_ref().is_some_and(|k| k.error().is_some()) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let interrupted = interrupt.load(Ordering::SeqCst);
    let stats = pqtls_net::carrier::quic::stats(&server.stop());
    summary(&stats);
    if !stats.negotiated_groups.is_empty() {
        let groups: Vec<String> = stats.negotiated_groups.iter().map(|(g, n)| format!("{g} × {n}")).collect();
        crate::progress::line(&format!("handshakes by negotiated group: {}", groups.join(", ")));
    }
    if let Some(e) = key_log.as_ref().and_then(|k| k.error()) {
        bail!("{e}; the server stopped (TLS secrets would be missing from the key log)");
    }
    Ok(if interrupted { crate::context::Ending::Interrupted } else { crate::context::Ending::Complete })
}
