//! `pqtls insitu`, `overhead`, `trace`, `cross-check`: the in-situ measurement from flags.
//! `insitu` goes through the same factor table, runner and records as `pqtls run`.

use crate::context::{self, measurement_for, Ending, OwnedStacks, Setup};
use crate::factors::Factors;
use crate::flags::{self, ScheduleArgs, ThreadArgs};
use crate::table;
use anyhow::{bail, Context, Result};
use pqtls_core::factor::Kind;
use pqtls_core::record::{RawSample, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::stats::Quantiles;
use pqtls_lab::Plan;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(clap::Args)]
pub struct InsituArgs {
    #[command(flatten)]
    pub factors: Factors,
    /// Warm-up handshakes per configuration (not measured) [default: 100; 3 with --clock
    /// instructions].
    #[arg(long, allow_negative_numbers = true, value_parser = flags::count(0, u64::MAX, "100"))]
    pub warmup: Option<u64>,
    /// Measured handshakes per configuration (the cap with --precision) [default: 1000; with
    /// --clock instructions and no loop flag: ±0.5 % in 10 to 40].
    #[arg(long, allow_negative_numbers = true, value_parser = flags::count(0, u64::MAX, "1000"))]
    pub loops: Option<u64>,
    /// Adaptive: stop when every step's median is known to ± this (e.g. 1%), or at --loops.
    #[arg(long, allow_hyphen_values = true)]
    pub precision: Option<String>,
    /// Quantiles to report, in percent.
    #[arg(long, default_value = "15,50,99", allow_hyphen_values = true)]
    pub quantiles: String,
    /// Report each configuration's per-step delta against this one: group:leaf[:int]:root,
    /// e.g. x25519:p256:p256 (same stack, cipher and options as each configuration).
    #[arg(long)]
    pub baseline: Option<String>,
    /// Write the records (JSON array) to FILE (`-`: standard output, without the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Write per-step summaries (CSV) to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Write every handshake's per-step times (NDJSON) to FILE (`-`: standard output).
    #[arg(long, value_name = "FILE")]
    pub ndjson: Option<PathBuf>,
    /// No terminal table.
    #[arg(long)]
    pub quiet: bool,
    /// Count heap allocations too: per side and step, allocations, bytes allocated and freed,
    /// and the peak of live heap (docs/memory.md). Counting costs CPU time (`pqtls overhead
    /// --memory`), so per-step times of such a run are not comparable with a run without it.
    #[arg(long)]
    pub memory: bool,
    #[command(flatten)]
    pub threads: ThreadArgs,
    #[command(flatten)]
    pub schedule: ScheduleArgs,
    #[command(flatten)]
    pub counter: crate::count::CounterArgs,
}

pub fn run(args: InsituArgs) -> Result<Ending> {
    let scenarios = args.factors.scenarios(Kind::Insitu)?;
    let mut settings = flags::insitu_settings(
        args.warmup.unwrap_or(100),
        args.loops.unwrap_or(1000),
        args.precision.as_deref(),
        &args.quantiles,
    )?;
    let counts = scenarios.iter().any(|s| s.clock == pqtls_core::trace::Clock::Instructions);
    if counts && args.loops.is_none() && args.precision.is_none() {
        settings = settings.for_counts();
        if let Some(w) = args.warmup {
            settings.warmup = w;
        }
    }
    let counter = match crate::count::counting(&scenarios, args.counter.counter)? {
        crate::count::Counting::ReExecuted(ending) => return Ok(ending),
        crate::count::Counting::Here(c) => Some(c),
        crate::count::Counting::NotAsked => None,
    };
    // --ndjson keeps every handshake's samples, as `raw_samples = true` does in a run.
    settings.raw_samples = args.ndjson.is_some();
    settings.memory = args.memory;
    let baseline = args.baseline.as_deref().map(parse_baseline).transpose()?;
    let owned = OwnedStacks::open(&args.factors.pki)?;
    owned.check(&scenarios)?;
    // Outputs are checked (created) before anything is measured.
    let terminal = crate::output::terminal(
        &[("--json", args.json.as_deref()), ("--csv", args.csv.as_deref()), ("--ndjson", args.ndjson.as_deref())],
        args.quiet,
    )?;
    let json = crate::output::create(args.json.as_deref())?;
    let csv = crate::output::create(args.csv.as_deref())?;
    let ndjson = crate::output::create(args.ndjson.as_deref())?;
    let setup = Setup { transport: args.threads.options()?, counter, ..Setup::default() };
    let measurement = measurement_for(Kind::Insitu, owned.stacks(), setup)?;

    // Each scenario's baseline: itself with the baseline's group and chain, measured too (the
    // runner measures it first and gives the others their deltas against it).
    let baseline_of = |s: &Scenario| -> Option<Scenario> {
        let (group, chain) = baseline.as_ref()?;
        s.with([("group", group.as_str()), ("key_shares", "one"), ("share_x25519", "false"), ("chain", chain.as_str())])
            .ok()
    };
    let mut plan_scenarios = scenarios.clone();
    for s in &scenarios {
        if let Some(b) = baseline_of(s) {
            if !plan_scenarios.iter().any(|x| x.id() == b.id()) {
                b.validate_for(Kind::Insitu).with_context(|| format!("baseline {}", b.label()))?;
                plan_scenarios.push(b);
            }
        }
    }
    let base_id = |s: &Scenario| baseline_of(s).map(|b| b.id());
    let plan = Plan { scenarios: (&plan_scenarios).into(), settings: &settings, baseline_of: &base_id, skipped: &[] };
    let schedule = pqtls_lab::RunPolicy::of(Kind::Insitu, &scenarios).schedule(|| args.schedule.schedule())?;
    let ran = context::run(&plan, &measurement, &schedule, false, true)?;
    if ran.measured.is_empty() && ran.interrupted {
        // No handshake was measured: no record, and no empty output left behind.
        crate::output::discard([&json, &csv, &ndjson]);
        crate::progress::line("interrupted before any handshake was measured: nothing to keep");
        return Ok(Ending::Interrupted);
    }
    if ran.measured.is_empty() {
        bail!("nothing was measured");
    }
    // In the order asked, baselines after; the terminal and the CSV show those asked for.
    let asked: std::collections::HashSet<String> = scenarios.iter().map(|s| s.id()).collect();
    let records: Vec<Record> =
        ran.measured.iter().filter(|m| asked.contains(&m.record.id)).map(|m| m.record.clone()).collect();

    // Results first: a reader of the table that went away loses only the table.
    if json.is_some() {
        // Plan order (baselines included), not the order in which configurations completed.
        let all: Vec<&Record> = ran.measured.iter().map(|m| &m.record).collect();
        write_to(json, &serde_json::to_vec_pretty(&all)?)?;
    }
    if csv.is_some() {
        let set = pqtls_export::ResultSet::from_records(records.clone());
        let text = crate::output::render("csv", &set, &pqtls_export::ReportOptions::default())?;
        write_to(csv, text.as_bytes())?;
    }
    if ndjson.is_some() {
        let mut buf = Vec::new();
        for m in &ran.measured {
            for (j, (c, s)) in m.samples.iter().enumerate() {
                let line = RawSample { id: &m.record.id, i: j as u64, client: c, server: s };
                serde_json::to_writer(&mut buf, &line)?;
                buf.push(b'\n');
            }
        }
        write_to(ndjson, &buf)?;
    }
    for r in &records {
        terminal.print(&table::record(r))?;
    }
    if ran.interrupted {
        let cut = records.iter().filter(|r| r.is_interrupted()).count();
        crate::progress::line(&format!(
            "interrupted: of {} configurations, {} measured completely and {cut} kept as far as measured (marked \
             `stopped: interrupted`)",
            scenarios.len(),
            records.len() - cut
        ));
        return Ok(Ending::Interrupted);
    }
    Ok(Ending::Complete)
}

/// `group:leaf[:int]:root` → canonical (group, chain).
fn parse_baseline(s: &str) -> Result<(String, String)> {
    let (g, chain) = s.split_once(':').with_context(|| {
        format!("baseline '{s}' must be group:leaf:root (or group:leaf:intermediate:root), e.g. x25519:p256:p256")
    })?;
    Ok((pqtls_core::factor::canonical("group", g)?, pqtls_core::factor::canonical("chain", chain)?))
}

/// Writes an output when it was asked for.
fn write_to(out: Option<crate::output::Output>, data: &[u8]) -> Result<()> {
    match out {
        Some(o) => crate::output::write(o, data),
        None => Ok(()),
    }
}

/// Contexts for each scenario of the flags (for the commands that drive handshakes
/// themselves: overhead, trace, cross-check).
fn prepared(factors: &Factors) -> Result<Vec<(Scenario, Arc<dyn pqtls_core::backend::Prepared>)>> {
    let scenarios = factors.scenarios(Kind::Insitu)?;
    if scenarios.iter().any(|s| s.clock == pqtls_core::trace::Clock::Instructions) {
        bail!(
            "this command reads clocks; instructions are counted by `pqtls insitu --clock instructions` and `pqtls run \
             FILE --clock instructions`"
        );
    }
    let owned = OwnedStacks::open(&factors.pki)?;
    let stacks = owned.stacks();
    let mut out = Vec::new();
    for s in scenarios {
        let (p, _) = stacks.prepare(&s).with_context(|| format!("{} on {}", s.label(), s.handshake.stack))?;
        out.push((s, p));
    }
    Ok(out)
}

/// Interleaved blocks of two kinds of handshakes (traced/untraced, memory/threads).
#[derive(clap::Args, Clone, Copy)]
pub struct Blocks {
    /// Pairs of blocks, one of each kind, alternating (1 to 1 000 000).
    #[arg(long, default_value_t = 20, allow_negative_numbers = true, value_parser = flags::count(1, 1_000_000, "20"))]
    pub blocks: u64,
    /// Handshakes per block (1 to 1 000 000).
    #[arg(long, default_value_t = 100, allow_negative_numbers = true, value_parser = flags::count(1, 1_000_000, "100"))]
    pub block: u64,
}

#[derive(clap::Args)]
pub struct OverheadArgs {
    #[command(flatten)]
    pub factors: Factors,
    #[command(flatten)]
    pub blocks: Blocks,
    /// Write the results (JSON) to FILE (`-`: standard output, without the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// The cost of counting allocations (`insitu --memory`) instead of the tracer's.
    #[arg(long)]
    pub memory: bool,
}

pub fn overhead(args: OverheadArgs) -> Result<()> {
    if args.memory {
        return memory_overhead(args);
    }
    let terminal = crate::output::terminal(&[("--json", args.json.as_deref())], false)?;
    let json = crate::output::create(args.json.as_deref())?;
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
        "CPU reads",
        "ns/CPU read",
        "computed overhead",
    ]);
    let mut out = Vec::new();
    for (sc, prepared) in prepared(&args.factors)? {
        let opts = pqtls_core::backend::EndpointOptions { clock: sc.clock, ..Default::default() };
        // Warm-up, untimed.
        for _ in 0..args.blocks.block {
            pqtls_lab::transport::handshake(prepared.as_ref(), &opts)?;
        }
        let o = pqtls_lab::insitu::tracer_overhead(prepared, args.blocks.blocks, args.blocks.block, sc.clock)?;
        t.add_row(vec![
            sc.handshake.stack.to_string(),
            sc.label(),
            o.handshakes_per_mode.to_string(),
            table::us(o.traced_cpu_ns),
            table::us(o.untraced_cpu_ns),
            format!("{:+.2}%", o.cpu_overhead * 100.0),
            format!("{:.0}", o.traced_per_s),
            format!("{:.0}", o.untraced_per_s),
            format!("{:+.2}%", o.rate_overhead * 100.0),
            format!("{:.0}", o.extra_events),
            format!("{:.0}", o.stamp_ns),
            format!("{:.1}", o.cpu_reads),
            format!("{:.0}", o.cpu_read_ns),
            format!("{:.2}%", o.computed_overhead * 100.0),
        ]);
        out.push(serde_json::json!({"id": sc.id(), "label": sc.label(), "overhead": o}));
    }
    table::numeric_from(&mut t, 2);
    if json.is_some() {
        let v = serde_json::json!({"env": context::environment(&context::all_backends()), "results": out});
        write_to(json, &serde_json::to_vec_pretty(&v)?)?;
    }
    terminal.print(&format!("{t}\n"))
}

/// `pqtls overhead --memory`: counting allocations vs not, interleaved blocks of traced
/// handshakes.
fn memory_overhead(args: OverheadArgs) -> Result<()> {
    let terminal = crate::output::terminal(&[("--json", args.json.as_deref())], false)?;
    let json = crate::output::create(args.json.as_deref())?;
    let mut t = table::new(&[
        "stack",
        "configuration",
        "handshakes/mode",
        "CPU counted µs",
        "CPU not counted µs",
        "CPU overhead",
        "allocations",
        "ns/allocation",
    ]);
    let backends = context::all_backends();
    let mut out = Vec::new();
    for (sc, prepared) in prepared(&args.factors)? {
        let stack = sc.handshake.stack;
        let backend = backends.iter().find(|b| b.stack() == stack).context("no backend for the stack")?;
        let coverage = backend.counted_allocations()?;
        let opts = pqtls_core::backend::EndpointOptions { clock: sc.clock, ..Default::default() };
        for _ in 0..args.blocks.block {
            pqtls_lab::transport::handshake(prepared.as_ref(), &opts)?;
        }
        let o = pqtls_lab::insitu::memory_overhead(prepared, args.blocks.blocks, args.blocks.block, sc.clock)?;
        t.add_row(vec![
            stack.to_string(),
            sc.label(),
            o.handshakes_per_mode.to_string(),
            table::us(o.counted_cpu_ns),
            table::us(o.uncounted_cpu_ns),
            format!("{:+.2}%", o.cpu_overhead * 100.0),
            format!("{:.0}", o.allocations),
            format!("{:.0}", o.ns_per_allocation),
        ]);
        out.push(serde_json::json!({"id": sc.id(), "label": sc.label(), "memory_overhead": o, "counted": coverage}));
    }
    table::numeric_from(&mut t, 2);
    if json.is_some() {
        let v = serde_json::json!({"env": context::environment(&backends), "results": out});
        write_to(json, &serde_json::to_vec_pretty(&v)?)?;
    }
    terminal.print(&format!("{t}\n"))
}

#[derive(clap::Args)]
pub struct TraceArgs {
    #[command(flatten)]
    pub factors: Factors,
    /// Handshakes to run first (untimed), so the one traced is warm.
    #[arg(long, default_value_t = 50, allow_negative_numbers = true, value_parser = flags::count(0, 1_000_000, "50"))]
    pub warmup: u64,
}

/// One handshake's raw events on both sides, interleaved by wall clock, with the step each
/// interval is attributed to: the attribution rule, shown.
pub fn trace(args: TraceArgs) -> Result<()> {
    use pqtls_core::trace::{attribute_intervals, EventKind};
    for (sc, prepared) in prepared(&args.factors)? {
        let opts = pqtls_core::backend::EndpointOptions { clock: sc.clock, ..Default::default() };
        for _ in 0..args.warmup {
            pqtls_lab::transport::handshake(prepared.as_ref(), &opts)?;
        }
        let mut client = prepared.client(&opts)?;
        let mut server = prepared.server(&opts)?;
        pqtls_lab::transport::in_memory(client.as_mut(), server.as_mut())?;
        let sides = [("client", client.trace().events.clone()), ("server", server.trace().events.clone())];
        let t0 = sides.iter().filter_map(|(_, e)| e.first().map(|e| e.wall_ns)).min().unwrap_or(0);
        let mut rows = Vec::new();
        for (side, events) in &sides {
            let (_, intervals) = attribute_intervals(events);
            for (i, ev) in events.iter().enumerate() {
                let (step, cpu) =
                    intervals.iter().find(|iv| iv.end == i).map(|iv| (iv.step.clone(), iv.cpu_ns)).unwrap_or_default();
                let mut what = match ev.kind {
                    EventKind::CallStart { name } => {
                        format!("call start{}", name.map(|n| format!(" ({n})")).unwrap_or_default())
                    }
                    EventKind::CallEnd => "call end".into(),
                    EventKind::Boundary => "state boundary".into(),
                    EventKind::Read(m) => format!("read {} ({} B)", m.rfc_name(), ev.bytes),
                    EventKind::Wrote(m) => format!("wrote {} ({} B)", m.rfc_name(), ev.bytes),
                    EventKind::OpStart(op) => format!("op start {op}"),
                    EventKind::OpEnd => "op end".into(),
                    EventKind::Message(m) => format!("transcript {}", m.rfc_name()),
                };
                if sc.clock == pqtls_core::trace::Clock::Split && ev.reads_cpu_inside_call() {
                    // An anchor: the split clock read the thread CPU clock here (docs/attribution.md).
                    what.push_str(" · CPU clock read");
                }
                rows.push((ev.wall_ns - t0, *side, what, step, cpu));
            }
        }
        rows.sort_by_key(|r| r.0);
        let mut text =
            format!("\n{} {} — one warm handshake, events in wall-clock order\n", sc.handshake.stack, sc.label());
        let mut t = table::new(&["wall µs", "side", "event", "interval ending here → step", "CPU µs"]);
        for (wall, side, what, step, cpu) in rows {
            let cpu = if step.is_empty() { String::new() } else { table::us(cpu as f64) };
            t.add_row(vec![table::us(wall as f64), side.to_string(), what, step, cpu]);
        }
        table::numeric_from(&mut t, 4);
        text.push_str(&format!("{t}\n"));
        crate::output::print(&text)?;
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct CrossCheckArgs {
    #[command(flatten)]
    pub factors: Factors,
    #[command(flatten)]
    pub blocks: Blocks,
    /// Transports to compare, the first being the reference: memory, socketpair, tcp.
    #[arg(long, default_value = "memory,socketpair")]
    pub transports: String,
    /// CPUs for the client and the server thread (e.g. 0,1); by default two different cores
    /// chosen from the machine's topology.
    #[command(flatten)]
    pub threads: ThreadArgs,
}

/// The same configurations over several transports, interleaved: per-step medians side by
/// side, each against the first transport.
pub fn cross_check(args: CrossCheckArgs) -> Result<()> {
    use pqtls_core::record::SideSummary;
    use pqtls_core::stats::Delta;
    use pqtls_core::trace::SideSample;
    use pqtls_core::transport::{TransportKind, TransportOptions};
    let kinds = TransportKind::parse_list(&args.transports)?;
    let options = TransportOptions { ..args.threads.options()? };
    let qs = Quantiles::default();
    for (sc, prepared) in prepared(&args.factors)? {
        let check = pqtls_lab::insitu::transport_cross_check(
            prepared,
            &kinds,
            &options,
            args.blocks.blocks,
            args.blocks.block,
            sc.clock,
        )?;
        let mut text = format!(
            "\n{} {} — {} handshakes per transport, interleaved in blocks of {}\n",
            sc.handshake.stack,
            sc.label(),
            check.samples[0].1.len(),
            args.blocks.block
        );
        for note in &check.notes {
            text.push_str(&format!("note: {note}\n"));
        }
        let first = kinds[0].name();
        let mut header = vec!["side".to_string(), "step".to_string()];
        header.extend(kinds.iter().map(|k| format!("{k} p50 µs")));
        for k in &kinds[1..] {
            header.push(format!("{k} Δ µs (95 %)"));
            header.push(format!("{k}/{first}"));
        }
        let header: Vec<&str> = header.iter().map(String::as_str).collect();
        let mut t = table::new(&header);
        for side in ["client", "server"] {
            let summaries: Vec<SideSummary> = check
                .samples
                .iter()
                .map(|(_, v)| {
                    let sides: Vec<&SideSample> = v.iter().map(|(c, s)| if side == "client" { c } else { s }).collect();
                    SideSummary::of(&sides, &qs)
                })
                .collect();
            let zero = pqtls_core::stats::Summary::default();
            let reference = &summaries[0];
            let steps = reference.steps.keys().cloned().map(Some).chain([None]);
            for step in steps {
                let pick = |s: &SideSummary| match &step {
                    Some(k) => s.steps.get(k).cloned().unwrap_or_else(|| zero.clone()),
                    None => s.total_cpu_ns.clone(),
                };
                let values: Vec<_> = summaries.iter().map(pick).collect();
                let mut row = vec![side.to_string(), step.clone().unwrap_or_else(|| "TOTAL".into())];
                row.extend(values.iter().map(|v| table::us(v.median)));
                for v in &values[1..] {
                    let d = Delta::between(v, &values[0]);
                    row.push(format!("{} ± {}", table::signed_us(d.delta), table::us(d.half_width)));
                    row.push(format!("{:.2}", v.median / values[0].median));
                }
                t.add_row(row);
            }
        }
        table::numeric_from(&mut t, 2);
        text.push_str(&format!("{t}\n"));
        crate::output::print(&text)?;
    }
    Ok(())
}
