//! `pqtls run`, `report`, `compare`, `merge`: experiment files, the results store and the
//! exporters (crates pqtls-store and pqtls-export) wired to the lab's one runner.

use crate::context::{self, measurement_for, Ending, OwnedStacks, Setup};
use crate::flags::{self, RunArgs};
use crate::output;
use crate::progress::{Style, View};
use anyhow::{bail, Context, Result};
use pqtls_core::factor::Kind;
use pqtls_export::{NetworkModel, ReportOptions, ResultSet};
use pqtls_lab::{Plan, RunOptions, RunPolicy};
use pqtls_store::{Experiment, Shard, Store, StoreOptions};
use std::path::{Path, PathBuf};

pub fn run(args: RunArgs) -> Result<Ending> {
    let schedule = args.schedule.schedule()?;
    output::not_stdout("--results", Some(&args.results), "the results are directories and", "results")?;
    let rtt_tolerance_ns = flags::rtt_tolerance_ns(&args.rtt_tolerance)?;
    let mut exp = Experiment::load_capped(&args.file, args.max_configurations.into())?;
    if let Some(clock) = &args.clock {
        exp = exp.with_clock(pqtls_core::trace::Clock::parse(clock)?)?;
    }
    let shard = args.shard.as_deref().map(Shard::parse).transpose()?;
    if let Some(s) = shard {
        // More shards than configurations leaves some shards nothing to measure (as `batch`
        // refuses more array tasks than configurations).
        let configs = exp.configurations();
        if s.count > configs {
            bail!(
                "--shard {s}: {} has {configs} configuration(s), so at most {configs} shards (one configuration \
                 each); e.g. --shard 1/{configs}",
                exp.name
            );
        }
    }
    // The scenarios are made afresh on each walk, never held (a matrix may hold 100,000): the
    // shard's share of the experiment's, in link order when the network lab runs them.
    let shard_walk =
        || exp.each_scenario().enumerate().filter(move |(i, _)| shard.is_none_or(|s| s.selects(*i))).map(|(_, s)| s);
    let all_walk =
        || -> Box<dyn Iterator<Item = pqtls_core::scenario::Scenario> + '_> { Box::new(exp.each_scenario()) };
    let all = pqtls_lab::Scenarios::Made { count: exp.configurations(), walk: &all_walk };
    context::can_measure(exp.kind, all)?;
    let counter = match crate::count::counting(all, args.counter.counter)? {
        crate::count::Counting::ReExecuted(ending) => return Ok(ending),
        crate::count::Counting::Here(c) => Some(c),
        crate::count::Counting::NotAsked => None,
    };
    let url = match args.url.as_deref() {
        Some(_) if exp.kind != Kind::Load => {
            bail!(
                "--url: only load experiments load a server of yours; {} is a {} experiment",
                exp.name,
                exp.kind.name()
            )
        }
        Some(u) => {
            flags::url_port(u)?;
            Some(pqtls_net::load::Target::parse(u)?)
        }
        None if args.trust.ca.is_some() || args.trust.servername.is_some() => {
            bail!("--ca and --servername are for a server of yours: give its --url too")
        }
        None => None,
    };
    let trust = args.trust.trust(url.as_ref())?;
    let owned = OwnedStacks::open(&args.pki)?;
    let dir = Store::dir_for(&args.results, &exp, shard);
    let mut store = Store::open(&dir, &exp, &StoreOptions { fresh: args.fresh, shard, env: Some(owned.env().clone()) })
        .with_context(|| format!("opening the results in {}", dir.display()))?;
    // `layers`: the load measurement with a capture per scenario, its pcap and key log kept in
    // the results directory as captures/<id>.pcap and .keys (docs/layers.md).
    let captures = dir.join("captures");
    let capture_files = |s: &pqtls_core::scenario::Scenario| {
        let name = pqtls_net::measure::file_name(&s.id());
        (captures.join(format!("{name}.pcap")), captures.join(format!("{name}.keys")))
    };
    let mut via = args.via.via();
    if exp.kind == Kind::Resident {
        via.hold_connections = exp.settings.resident.held.iter().max().map(|&n| n as usize);
    }
    let via = via;
    let serve_child = context::serve_child(&args.pki)?;
    let mut setup = Setup { counter, ..Setup::default() };
    setup.load.terminators = Some(&via);
    setup.load.url = url;
    setup.load.trust = trust;
    setup.resident.terminators = Some(&via);
    setup.resident.serve = Some(&serve_child);
    if exp.kind == Kind::Layers {
        std::fs::create_dir_all(&captures).with_context(|| format!("creating {}", captures.display()))?;
        setup.load.capture = Some(pqtls_net::measure::CaptureTo {
            files: &capture_files,
            interface: "lo".into(),
            netns: None,
            append_keylog: false,
        });
    }
    setup.transfer.verify.tolerances.rtt_absolute_ns = rtt_tolerance_ns;
    let measurement = measurement_for(exp.kind, owned.stacks(), setup)?;
    let policy = RunPolicy::of(exp.kind, all);
    let opts = RunOptions { interrupt: context::interrupt_flag(), keep_going: policy.keep_going(args.keep_going) };
    let schedule = policy.schedule(|| anyhow::Ok(schedule))?;
    let mut view = View::new(if args.no_progress { Style::Lines } else { Style::Bar });
    view.println(format!("{}: results in {}", exp.name, dir.display()));
    for n in &store.notices {
        view.println(format!("note: {n}"));
    }
    // Through the network lab, each link's points together, links in order of first appearance
    // (each lab is built and verified once): one walk per link.
    let links = if policy.by_link { pqtls_net::links::link_order(shard_walk())? } else { Vec::new() };
    let walk = || -> Box<dyn Iterator<Item = pqtls_core::scenario::Scenario> + '_> {
        if links.is_empty() {
            return Box::new(shard_walk());
        }
        Box::new(links.iter().flat_map(move |link| shard_walk().filter(move |s| link.holds(s))))
    };
    let count = if shard.is_some() { shard_walk().count() } else { exp.configurations() };
    let scenarios = pqtls_lab::Scenarios::Made { count, walk: &walk };
    // The configurations still to measure: how many, and their chains, made before the first
    // handshake (in parallel where missing).
    let mut to_measure = 0u64;
    let mut chains: Vec<pqtls_core::config::HandshakeConfig> = Vec::new();
    for s in scenarios.walk() {
        if !pqtls_core::sink::Sink::contains(&store, &s.id()) {
            to_measure += 1;
            if !chains.iter().any(|c| c.chain == s.handshake.chain && c.client_chain == s.handshake.client_chain) {
                chains.push(s.handshake.clone());
            }
        }
    }
    // What the run asks for, from the settings, before anything is measured.
    let work = pqtls_lab::estimate::work(exp.kind, &exp.settings, to_measure);
    view.println(work.to_string());
    view = view.with_floor(&work);
    for line in context::prepare_chains(&args.pki, &chains)? {
        view.println(line);
    }
    let skipped: Vec<(String, String)> = exp.skipped.iter().map(|s| (s.id.clone(), s.reason.clone())).collect();
    let baseline_of = |s: &pqtls_core::scenario::Scenario| exp.baseline.baseline_of(s);
    let plan = Plan { scenarios, settings: &exp.settings, baseline_of: &baseline_of, skipped: &skipped };
    let summary =
        pqtls_lab::run_with(&plan, measurement.as_dyn(), &mut store, &opts, &schedule, &mut |e| view.event(e));
    view.finish();
    // The network lab goes before anything else is reported (also after Ctrl-C).
    let refusals = measurement.close();
    let summary = summary?;
    let refusals = refusals?;
    crate::progress::line(&summary.to_string());
    for (link, why) in refusals {
        crate::progress::line(&format!("refused link {link}: {why}"));
    }
    // The points this run could not measure, with why (refused links…), for the report: the
    // file holds this run's failures only (a point measured since has a record).
    let failures = dir.join(pqtls_store::FAILURES);
    let _ = std::fs::remove_file(&failures);
    let at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    let mut failed: std::collections::HashMap<String, pqtls_core::scenario::Scenario> =
        std::collections::HashMap::new();
    if !summary.failed.is_empty() {
        for s in scenarios.walk() {
            let id = s.id();
            if summary.failed.iter().any(|(f, _)| *f == id) {
                failed.insert(id, s.into_owned());
            }
        }
    }
    for (id, error) in &summary.failed {
        let scenario = failed.get(id);
        let failure = pqtls_store::Failure {
            id: id.clone(),
            label: scenario.map(|s| s.label()).unwrap_or_default(),
            kind: exp.kind.name().to_string(),
            scenario: scenario.map(|s| s.values().clone()).unwrap_or_default(),
            error: error.clone(),
            at,
        };
        pqtls_store::append_failure(&dir, &failure).with_context(|| format!("writing {}", failures.display()))?;
    }
    if summary.interrupted {
        return Ok(Ending::Interrupted);
    }
    if !summary.failed.is_empty() {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_FAILED,
            message: format!(
                "{} configurations failed (see above); the others are stored, and the failed ones are retried on \
                 the next run",
                summary.failed.len()
            ),
        }
        .into());
    }
    Ok(Ending::Complete)
}

#[derive(clap::Args)]
pub struct ReportArgs {
    /// A results directory (results/<experiment>).
    pub dir: PathBuf,
    /// Another results directory whose records join the report (repeatable), e.g. the same
    /// experiment's instruction counts: `--with results/default-instructions` gives their
    /// sections and the time per instruction of the configurations measured both ways.
    #[arg(long = "with", value_name = "DIR")]
    pub with: Vec<PathBuf>,
    /// Self-contained HTML report with charts (default: report.html when no output is given).
    /// Every output takes a FILE, or `-` for standard output (one of them at most).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// Markdown tables.
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Per-step CSV (one row per configuration × side × step).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// One row per configuration: totals, bytes, capacity.
    #[arg(long, value_name = "FILE")]
    pub summary_csv: Option<PathBuf>,
    /// One row per load record: rates, ratio to x25519 + Ed25519, latency percentiles, CPU,
    /// errors, terminator, layers.
    #[arg(long, value_name = "FILE")]
    pub load_csv: Option<PathBuf>,
    /// One row per transfer record: TTFB/TTLB percentiles, PQ − classical difference, the
    /// link asked and measured, the emulator, rounds measured and predicted.
    #[arg(long, value_name = "FILE")]
    pub transfer_csv: Option<PathBuf>,
    /// One row per resident record and count of idle connections held: the readings, bytes per
    /// connection, connections per GiB.
    #[arg(long, value_name = "FILE")]
    pub resident_csv: Option<PathBuf>,
    /// All records as a JSON array.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Compare every configuration with this one (id or label).
    #[arg(long)]
    pub baseline: Option<String>,
    /// TCP initial congestion window (segments) for the round-trip model.
    #[arg(long, default_value_t = 10, allow_negative_numbers = true, value_parser = crate::flags::count(1, 1000, "10"))]
    pub initcwnd: u64,
    /// TCP maximum segment size (bytes).
    #[arg(long, default_value_t = 1448, allow_negative_numbers = true, value_parser = crate::flags::count(1, 65535, "1448"))]
    pub mss: u64,
    /// How the capacity table counts a handshake's bytes on a link: pqtls (8 bits per byte plus
    /// each segment's TCP/IP and Ethernet framing, both directions) or ibm (the IBM in-situ
    /// study's: 10 bits per byte, no framing, sessions/s from the server→client bytes only).
    #[arg(long, default_value = "pqtls", value_parser = capacity_convention)]
    pub capacity_convention: pqtls_export::Convention,
}

fn capacity_convention(s: &str) -> std::result::Result<pqtls_export::Convention, String> {
    pqtls_export::Convention::parse(s)
}

pub fn report(mut args: ReportArgs) -> Result<()> {
    if !(1..=1000).contains(&args.initcwnd) || !(1..=65535).contains(&args.mss) {
        bail!(
            "--initcwnd must be 1 to 1000 segments and --mss 1 to 65535 bytes (got --initcwnd {} --mss {}; typical: \
             --initcwnd 10 --mss 1448)",
            args.initcwnd,
            args.mss
        );
    }
    if [
        &args.html,
        &args.markdown,
        &args.csv,
        &args.summary_csv,
        &args.load_csv,
        &args.transfer_csv,
        &args.resident_csv,
        &args.json,
    ]
    .iter()
    .all(|o| o.is_none())
    {
        args.html = Some(PathBuf::from("report.html"));
    }
    // Outputs are checked (created) before anything is read or rendered: none may be a file of
    // the stores read, nor share a file with another.
    let flags = [
        ("--html", args.html.as_deref()),
        ("--markdown", args.markdown.as_deref()),
        ("--csv", args.csv.as_deref()),
        ("--summary-csv", args.summary_csv.as_deref()),
        ("--load-csv", args.load_csv.as_deref()),
        ("--transfer-csv", args.transfer_csv.as_deref()),
        ("--resident-csv", args.resident_csv.as_deref()),
        ("--json", args.json.as_deref()),
    ];
    let inputs: Vec<&std::path::Path> =
        std::iter::once(args.dir.as_path()).chain(args.with.iter().map(|p| p.as_path())).collect();
    output::not_an_input(&flags, &inputs)?;
    output::terminal(&flags, true)?;
    let mut outputs = Vec::new();
    for (name, path) in [
        ("html", &args.html),
        ("markdown", &args.markdown),
        ("csv", &args.csv),
        ("summary-csv", &args.summary_csv),
        ("load-csv", &args.load_csv),
        ("transfer-csv", &args.transfer_csv),
        ("resident-csv", &args.resident_csv),
        ("json", &args.json),
    ] {
        if let Some(out) = output::create(path.as_deref())? {
            outputs.push((name, out));
        }
    }
    // An assessment's directory (pqtls assess): its parts' records, its question first.
    let assessment = pqtls_export::analysis::assessment::Assessment::read(&args.dir)?;
    let set = match &assessment {
        Some(a) => ResultSet::load_all(&args.dir, &a.part_dirs(&args.dir)),
        None => ResultSet::load(&args.dir),
    };
    let set = set.with_context(|| format!("reading results from {}", args.dir.display())).and_then(|mut set| {
        for d in &args.with {
            let more = ResultSet::load(d).with_context(|| format!("reading results from {}", d.display()))?;
            if let Some(r) = more.records.iter().find(|r| set.records.iter().any(|x| x.id == r.id)) {
                bail!(
                    "{} and {} both hold {}: --with joins different configurations (e.g. the same experiment's \
                         instruction counts), not two runs of the same ones (pqtls compare does that)",
                    args.dir.display(),
                    d.display(),
                    r.id
                );
            }
            set.records.extend(more.records);
            set.notices.extend(more.notices);
        }
        if set.records.is_empty() {
            bail!("{} holds no records yet; measure first with `pqtls run FILE`", args.dir.display());
        }
        Ok(set)
    });
    let set = match set {
        Ok(set) => set,
        Err(e) => {
            let created: Vec<_> = outputs.into_iter().map(|(_, o)| Some(o)).collect();
            output::discard(&created);
            return Err(e);
        }
    };
    for n in &set.notices {
        crate::progress::line(&format!("note: {n}"));
    }
    let opts = ReportOptions {
        model: NetworkModel {
            initcwnd: args.initcwnd,
            mss: args.mss,
            convention: args.capacity_convention,
            ..NetworkModel::default()
        },
        baseline: args.baseline.clone(),
        assessment,
        ..ReportOptions::default()
    };
    // `--baseline` is the in-situ records' per-step deltas: a baseline the set does not hold, or
    // one that is not an in-situ record (a load store's), is refused before anything is written,
    // not ignored.
    if args.baseline.is_some() {
        if let Err(e) = pqtls_export::analysis::baseline_deltas(&set, &opts) {
            output::discard(&outputs.into_iter().map(|(_, o)| Some(o)).collect::<Vec<_>>());
            bail!("--baseline: {e}");
        }
    }
    for (name, out) in outputs {
        output::write(out, output::render(name, &set, &opts)?.as_bytes())?;
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct CompareArgs {
    /// Results before (a results directory).
    pub before: PathBuf,
    /// Results after.
    pub after: PathBuf,
    /// Every step, not only the totals and the steps that changed.
    #[arg(long)]
    pub all_steps: bool,
    /// Also write the comparison as Markdown to FILE (`-`: standard output, without the table).
    #[arg(long, value_name = "FILE")]
    pub markdown: Option<PathBuf>,
    /// Also write the comparison as JSON to FILE (`-`: standard output, without the table).
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Instruction counts: a step changed when it moved by more than this (and beyond its
    /// interval), e.g. 0.5% (the default) or 1%.
    #[arg(long, default_value = "0.5%", allow_hyphen_values = true)]
    pub threshold: String,
    /// Exit with code 5 when a step or total of a configuration got slower (a CI gate: run a
    /// base and a head build with --clock instructions and compare them).
    #[arg(long)]
    pub fail_on_slower: bool,
}

/// The unit of a set's in-situ records, or why they cannot be compared with each other.
fn insitu_unit(set: &ResultSet, dir: &Path) -> Result<Option<pqtls_core::trace::CostUnit>> {
    let mut units = set.records.iter().filter_map(|r| r.insitu()).map(|r| r.unit);
    let Some(first) = units.next() else { return Ok(None) };
    if units.any(|u| u != first) {
        bail!("{} holds in-situ records in nanoseconds and in instructions: compare them apart", dir.display());
    }
    Ok(Some(first))
}

pub fn compare(args: CompareArgs) -> Result<()> {
    // Outputs are checked (created) before anything is read or computed: neither may be a file
    // of the sets compared.
    let flags = [("--markdown", args.markdown.as_deref()), ("--json", args.json.as_deref())];
    output::not_an_input(&flags, &[args.before.as_path(), args.after.as_path()])?;
    let terminal = output::terminal(&flags, false)?;
    let markdown = output::create(args.markdown.as_deref())?;
    let json = output::create(args.json.as_deref())?;
    let load = |d: &Path| ResultSet::load(d).with_context(|| format!("reading results from {}", d.display()));
    let (before, after) = match load(&args.before).and_then(|b| Ok((b, load(&args.after)?))) {
        Ok(x) => x,
        Err(e) => {
            output::discard([&markdown, &json]);
            return Err(e);
        }
    };
    let threshold = pqtls_core::stats::parse_precision(&args.threshold)
        .with_context(|| format!("--threshold {}", args.threshold))?;
    let units = (insitu_unit(&before, &args.before)?, insitu_unit(&after, &args.after)?);
    if let (Some(b), Some(a)) = units {
        if a != b {
            output::discard([&markdown, &json]);
            bail!(
                "{} measured {} and {} measured {}: CPU time and instruction counts are different units and are not \
                 compared (compare time with time, counts with counts; docs/instructions.md)",
                args.before.display(),
                b.name(),
                args.after.display(),
                a.name()
            );
        }
    }
    let opts = pqtls_export::compare::CompareOptions { count_threshold: threshold };
    let c = pqtls_export::compare::compare_with(&before, &after, &opts);
    if let Some(out) = markdown {
        output::write(out, c.to_markdown().as_bytes())?;
    }
    if let Some(out) = json {
        output::write(out, c.to_json()?.as_bytes())?;
    }
    terminal.print(&c.to_terminal(args.all_steps))?;
    let slower = c.slower_steps();
    if args.fail_on_slower && !slower.is_empty() {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_SLOWER,
            message: format!("{} got slower: {}", slower.len(), slower.join("; ")),
        }
        .into());
    }
    Ok(())
}

#[derive(clap::Args)]
pub struct MergeArgs {
    /// Shard directories (results/<experiment>/shard-K-of-N …), or the outputs of load
    /// generators that drove one endpoint together (`pqtls load … --shard K/N --out …`:
    /// directories or records files), whose shards join into one record per run.
    #[arg(required = true)]
    pub shards: Vec<PathBuf>,
    /// The merged results directory.
    #[arg(long)]
    pub out: PathBuf,
}

#[derive(clap::Args)]
pub struct CheckArgs {
    /// Results directories (results/<experiment>, a shard, or a merged set).
    #[arg(required = true)]
    pub dirs: Vec<PathBuf>,
}

pub fn check(args: CheckArgs) -> Result<()> {
    let (mut unsound, mut incomplete) = (0, 0);
    for d in &args.dirs {
        let r = pqtls_store::check(d)?;
        let mut text = String::new();
        for n in &r.notes {
            text.push_str(&format!("{}: note: {n}\n", d.display()));
        }
        for p in &r.problems {
            text.push_str(&format!("{}: problem: {p}\n", d.display()));
        }
        if r.is_complete() {
            text.push_str(&format!("{}: sound, {} records\n", d.display(), r.records));
        } else if r.is_sound() {
            // Sound but incomplete: nothing is wrong with the files, a run completes them.
            text.push_str(&format!(
                "{}: incomplete: {} configurations interrupted; `pqtls run` measures them again ({} records, sound)\n",
                d.display(),
                r.interrupted.len(),
                r.records
            ));
            incomplete += 1;
        } else {
            text.push_str(&format!(
                "{}: NOT sound: {} problem(s), {} valid records\n",
                d.display(),
                r.problems.len(),
                r.records
            ));
            unsound += 1;
        }
        output::print(&text)?;
    }
    if unsound > 0 {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_UNSOUND,
            message: format!("{unsound} of {} results directories are not sound (see above)", args.dirs.len()),
        }
        .into());
    }
    if incomplete > 0 {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_FAILED,
            message: format!(
                "{incomplete} of {} results directories are incomplete (configurations interrupted; sound otherwise)",
                args.dirs.len()
            ),
        }
        .into());
    }
    Ok(())
}

pub fn merge(args: MergeArgs) -> Result<()> {
    output::not_stdout("--out", Some(&args.out), "the merged results are a directory and", "results/merged")?;
    let s = pqtls_store::merge(&args.shards, &args.out)?;
    crate::progress::line(&format!(
        "merged {} records ({} sample files) into {}",
        s.records,
        s.sample_files,
        args.out.display()
    ));
    for (id, n) in &s.joined_load_shards {
        crate::progress::line(&format!("joined {n} load shards of {id} (counts added, latency histograms merged)"));
    }
    if !s.interrupted.is_empty() {
        crate::progress::line(&format!(
            "note: {} configurations taken as interrupted records (the merged set is incomplete)",
            s.interrupted.len()
        ));
    }
    if let Some(why) = &s.no_manifest {
        crate::progress::line(&format!("note: no manifest written ({why}); `pqtls check` will say so"));
    }
    if !s.missing_shards.is_empty() {
        crate::progress::line(&format!(
            "note: shards not given (the merged set is incomplete): {:?}",
            s.missing_shards
        ));
    }
    Ok(())
}
