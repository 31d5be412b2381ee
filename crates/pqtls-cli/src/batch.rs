//! `pqtls batch slurm FILE --shards N`: an experiment as a Slurm job array — one `pqtls run
//! FILE --shard K/N` per array task, on a results directory the tasks share — then, once every
//! task has ended, `pqtls merge`, `check` and `report` of the shards (docs/batch.md).
//!
//! Slurm is driven through its commands (`sinfo`, `sbatch`, `scontrol`, `scancel`), the same
//! on a laptop's one-node cluster (`scripts/slurm-local.sh`) as on a site's. The tasks' states
//! and exit codes are read with `scontrol show job` while the job is known to the controller
//! (what the wait does: it polls until every task has ended), so no accounting database is
//! needed; `sacct` shows the same where the site keeps accounting.

use crate::context::Ending;
use crate::flags;
use crate::flags::RunArgs;
use anyhow::{bail, Context, Result};
use pqtls_store::{Experiment, Shard, Store};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[derive(clap::Args)]
pub struct BatchArgs {
    #[command(subcommand)]
    pub system: System,
}

#[derive(clap::Subcommand)]
pub enum System {
    /// Submit FILE as a Slurm job array of N shards (one `pqtls run --shard K/N` per task,
    /// requeued when preempted), wait, then merge, check and report the shards.
    Slurm(SlurmArgs),
}

#[derive(clap::Args)]
pub struct SlurmArgs {
    /// The experiment file (TOML), e.g. experiments/in-situ.toml.
    pub file: PathBuf,
    /// Number of shards (array tasks), at most the experiment's configurations.
    #[arg(long, allow_negative_numbers = true, value_parser = flags::count_usize(1, 100_000, "8"))]
    pub shards: usize,
    /// Root of the results directories; must be on a file system the compute nodes share
    /// (checked by a probe job before submitting).
    #[arg(long, default_value = "results")]
    pub results: PathBuf,
    /// Slurm partition (default: the cluster's default partition).
    #[arg(long)]
    pub partition: Option<String>,
    /// Time limit per task, in sbatch's format (e.g. 2:00:00, 1-00:00:00); a task cut by it is
    /// resumed by running the same command again.
    #[arg(long)]
    pub time: Option<String>,
    /// CPUs per task: the handshake's two threads want two cores each.
    #[arg(long, default_value_t = 2, allow_negative_numbers = true, value_parser = flags::count_u32(1, 4096, "2"))]
    pub cpus_per_task: u32,
    /// Whole nodes per task (sbatch --exclusive): no other job's work on the measured cores.
    #[arg(long)]
    pub exclusive: bool,
    /// Submit and return: print the job id and the commands that merge, check and report.
    #[arg(long)]
    pub no_wait: bool,
    /// Skip the probe job that checks the tasks see the results directory, the experiment file
    /// and the pqtls binary (for a cluster whose queue would make the probe wait long).
    #[arg(long)]
    pub no_probe: bool,
    /// Directory of the PKI cache (on the shared file system too: the tasks read and fill it).
    #[arg(long, default_value_os_t = crate::context::default_pki_dir())]
    pub pki: PathBuf,
    /// Options for every task's `pqtls run`, after `--` (e.g. `-- --keep-going --window 4`).
    #[arg(last = true, allow_hyphen_values = true)]
    pub run_args: Vec<String>,
}

/// How long the probe job may take (queueing included) before the command gives up.
const PROBE_TIMEOUT: Duration = Duration::from_secs(300);
/// How often the wait asks the controller.
const POLL: Duration = Duration::from_secs(2);
/// Options of `pqtls run` that `pqtls batch` sets for every task.
const SET_BY_BATCH: &[&str] = &["--shard", "--results", "--pki", "--no-progress", "--fresh"];

pub fn run(args: BatchArgs) -> Result<Ending> {
    match args.system {
        System::Slurm(a) => slurm(a),
    }
}

/// The checked, absolute inputs of a submission.
struct Job {
    name: String,
    shards: usize,
    /// `results/<name>`: the shards' parent and the merged set.
    merged: PathBuf,
    /// `results/<name>/slurm-N`: the job script, its logs.
    batch_dir: PathBuf,
    pqtls: PathBuf,
    file: PathBuf,
    results: PathBuf,
    pki: PathBuf,
    /// Configurations per shard (for the progress line).
    per_shard: Vec<usize>,
}

fn slurm(args: SlurmArgs) -> Result<Ending> {
    let job = prepare(&args)?;
    cluster_is_up(args.partition.as_deref())?;
    for d in [&job.batch_dir, &job.pki] {
        std::fs::create_dir_all(d).with_context(|| format!("creating {}", d.display()))?;
    }
    if !args.no_probe {
        probe(&job, &args)?;
    }
    let script = job.batch_dir.join("job.sbatch");
    std::fs::write(&script, sbatch_script(&job, &args)).with_context(|| format!("writing {}", script.display()))?;
    let id = submit(&[script.as_os_str().to_str().context("the job script's path is not UTF-8")?])?;
    crate::progress::line(&format!(
        "submitted job {id}: {} tasks (shards 1–{} of {}), script {}, logs {}/task-K.out",
        job.shards,
        job.shards,
        job.shards,
        script.display(),
        job.batch_dir.display()
    ));
    if args.no_wait {
        crate::progress::line(&format!(
            "not waiting (--no-wait): follow it with `squeue -j {id}`; once it has ended, run the same command again \
             without --no-wait (the shards' configurations are stored: nothing is measured twice), or:\n  {}",
            after_commands(&job).join("\n  ")
        ));
        return Ok(Ending::Complete);
    }
    let tasks = wait(&id, &job)?;
    let failed: Vec<String> = tasks
        .iter()
        .filter(|(_, t)| t.state != "COMPLETED")
        .map(|(k, t)| {
            let log = job.batch_dir.join(format!("task-{k}.out"));
            format!(
                "shard {k}/{n} (task {id}_{k}) {} with exit code {}{}; log {}{}",
                t.state,
                t.exit_code,
                if t.signal != 0 { format!(" (signal {})", t.signal) } else { String::new() },
                log.display(),
                last_error(&log).map(|l| format!(": {l}")).unwrap_or_default(),
                n = job.shards,
            )
        })
        .collect();
    if !failed.is_empty() {
        return Err(crate::context::Exit {
            code: crate::context::EXIT_FAILED,
            message: format!(
                "{} of {} shards did not complete:\n  {}\nthe other shards are stored; run the same command again: \
                 each task measures only what its shard is missing",
                failed.len(),
                job.shards,
                failed.join("\n  ")
            ),
        }
        .into());
    }
    // Merge, check and report: the commands a user would run, with this binary.
    let shard_dirs: Vec<String> = (1..=job.shards).map(|k| shard_dir(&job, k).display().to_string()).collect();
    let merged = job.merged.display().to_string();
    let mut merge = vec!["merge".to_string()];
    merge.extend(shard_dirs);
    merge.extend(["--out".to_string(), merged.clone()]);
    step(&job.pqtls, &merge)?;
    step(&job.pqtls, &["check".into(), merged.clone()])?;
    let (md, html) = (job.merged.join("report.md"), job.merged.join("report.html"));
    step(
        &job.pqtls,
        &[
            "report".into(),
            merged,
            "--markdown".into(),
            md.display().to_string(),
            "--html".into(),
            html.display().to_string(),
        ],
    )?;
    crate::progress::line(&format!("done: {} and {}", md.display(), html.display()));
    Ok(Ending::Complete)
}

/// Everything that can be checked without the cluster: the file, the shard count, the options
/// for `pqtls run`, the paths (made absolute: the tasks run elsewhere).
fn prepare(args: &SlurmArgs) -> Result<Job> {
    for a in &args.run_args {
        if let Some(o) = SET_BY_BATCH.iter().find(|o| a.as_str() == **o || a.starts_with(&format!("{o}="))) {
            bail!(
                "{o} after `--`: pqtls batch sets it for every task (give --results and --pki to pqtls batch itself)"
            );
        }
    }
    // The options after `--` are `pqtls run`'s: parsed here, so that a typo fails now and not
    // in N tasks on the cluster.
    #[derive(clap::Parser)]
    #[command(name = "pqtls run (the options after --)")]
    struct RunLine {
        #[command(flatten)]
        run: RunArgs,
    }
    let mut line = vec!["pqtls-run".to_string(), args.file.display().to_string()];
    line.extend(args.run_args.iter().cloned());
    let parsed = <RunLine as clap::Parser>::try_parse_from(&line).map_err(|e| {
        anyhow::anyhow!("the options after `--` are given to `pqtls run`, which refuses them:\n{}", e.render())
    })?;
    parsed.run.schedule.schedule()?;
    // The tasks' cap on the matrix (`-- --max-configurations N`) is this command's too.
    let exp = Experiment::load_capped(&args.file, parsed.run.max_configurations.into())?;
    let configs = exp.configurations();
    if args.shards > configs {
        bail!(
            "--shards {}: {} has {configs} configurations, so at most {configs} shards (one configuration each)",
            args.shards,
            args.file.display()
        );
    }

    // Absolute (the tasks run elsewhere) but not created yet: nothing is written before the
    // cluster has answered.
    let absolute = |p: &Path, what: &str| -> Result<PathBuf> {
        std::path::absolute(p).with_context(|| format!("resolving {what} {}", p.display()))
    };
    let results = absolute(&args.results, "the results directory")?;
    let pki = absolute(&args.pki, "the PKI cache")?;
    let file = args.file.canonicalize().with_context(|| format!("resolving {}", args.file.display()))?;
    let pqtls = std::env::current_exe().context("finding the pqtls binary's path")?;
    let merged = Store::dir_for(&results, &exp, None);
    for f in [pqtls_store::store::RECORDS, pqtls_store::store::MANIFEST] {
        if merged.join(f).exists() {
            bail!(
                "{} already holds results (a merged set or a single-machine run), where the shards would be merged: \
                 move it aside, or give another --results",
                merged.display()
            );
        }
    }
    let per_shard = (1..=args.shards)
        .map(|k| {
            let s = Shard { index: k, count: args.shards };
            (0..configs).filter(|i| s.selects(*i)).count()
        })
        .collect();
    Ok(Job {
        batch_dir: merged.join(format!("slurm-{}", args.shards)),
        name: exp.name.clone(),
        shards: args.shards,
        merged,
        pqtls,
        file,
        results,
        pki,
        per_shard,
    })
}

fn shard_dir(job: &Job, k: usize) -> PathBuf {
    job.merged.join(Shard { index: k, count: job.shards }.dir_name())
}

/// Runs a Slurm command; its output, or an error that says what to do when Slurm is not
/// there or does not answer.
fn slurm_cmd(program: &str, args: &[&str]) -> Result<String> {
    let out = match Command::new(program).args(args).stdin(Stdio::null()).output() {
        Ok(o) => o,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
            "{program} not found: Slurm's commands are not installed here. On a machine of your own, \
             `scripts/slurm-local.sh start` (as root) installs and starts a one-node cluster; on a cluster, run \
             pqtls batch where `sinfo` and `sbatch` work (a login node)"
        ),
        Err(e) => return Err(e).with_context(|| format!("running {program}")),
    };
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let err = err.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join(" / ");
        bail!("`{program} {}` failed ({}): {err}", args.join(" "), out.status);
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// A controller that answers and a node that can take work (in the partition, if given).
fn cluster_is_up(partition: Option<&str>) -> Result<()> {
    let mut a = vec!["-h", "-o", "%T"];
    if let Some(p) = partition {
        a.extend(["-p", p]);
    }
    let states = slurm_cmd("sinfo", &a).map_err(|e| {
        anyhow::anyhow!(
            "Slurm is not answering ({e:#}). Start the local cluster with `scripts/slurm-local.sh start` (as root), \
             or check the site's controller with `sinfo`"
        )
    })?;
    let states: Vec<&str> = states.split_whitespace().collect();
    let usable = ["idle", "mixed", "allocated", "completing"];
    if !states.iter().any(|s| usable.contains(&s.trim_end_matches(['*', '~', '#', '!', '%', '$', '@', '^', '-']))) {
        bail!(
            "no Slurm node can take work{}: sinfo says [{}]; `sinfo -R` tells why (with the local cluster: \
             `scripts/slurm-local.sh stop` then `start`)",
            partition.map(|p| format!(" in partition {p}")).unwrap_or_default(),
            states.join(", ")
        );
    }
    Ok(())
}

/// `sbatch --parsable …`: the job id.
fn submit(args: &[&str]) -> Result<String> {
    let mut a = vec!["--parsable"];
    a.extend_from_slice(args);
    let out = slurm_cmd("sbatch", &a)?;
    // `--parsable` prints `ID` or `ID;CLUSTER`.
    let id = out.trim().split(';').next().unwrap_or("").to_string();
    if id.is_empty() || !id.chars().all(|c| c.is_ascii_digit()) {
        bail!("sbatch printed '{}' where a job id was expected", out.trim());
    }
    Ok(id)
}

/// Common sbatch options of the probe and the job.
fn placement(args: &SlurmArgs) -> Vec<String> {
    let mut o = Vec::new();
    if let Some(p) = &args.partition {
        o.push(format!("--partition={p}"));
    }
    o
}

/// A one-second job that checks, on a compute node, that the results directory (a token file
/// written here), the experiment file and the pqtls binary are there: the tasks would
/// otherwise fail one by one, or write their results where the submit side cannot merge them.
fn probe(job: &Job, args: &SlurmArgs) -> Result<()> {
    let token = job.batch_dir.join(format!(".probe-{}", std::process::id()));
    std::fs::write(&token, b"pqtls batch probe\n").with_context(|| format!("writing {}", token.display()))?;
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let check = format!(
        "test -f {} || exit 2; test -x {} || exit 3; test -r {} || exit 4",
        q(&token),
        q(&job.pqtls),
        q(&job.file)
    );
    let mut a: Vec<String> = vec![
        "--job-name=pqtls-probe".into(),
        "--output=/dev/null".into(),
        "--chdir=/".into(),
        "--ntasks=1".into(),
        "--time=1".into(),
    ];
    a.extend(placement(args));
    a.push(format!("--wrap={check}"));
    let id = submit(&a.iter().map(String::as_str).collect::<Vec<_>>())?;
    crate::progress::line(&format!("probe job {id}: can the tasks see {}?", job.results.display()));
    let t0 = Instant::now();
    let result = loop {
        let tasks = job_tasks(&id)?;
        if let Some(t) = tasks.values().next().filter(|t| is_final(&t.state)) {
            break t.clone();
        }
        if t0.elapsed() > PROBE_TIMEOUT {
            let _ = slurm_cmd("scancel", &[id.as_str()]);
            let _ = std::fs::remove_file(&token);
            bail!(
                "the probe job {id} did not run within {} s (the queue is busy, or the partition has no free \
                 node: `squeue -j {id}` said why); try again, or skip the check with --no-probe",
                PROBE_TIMEOUT.as_secs()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    };
    let _ = std::fs::remove_file(&token);
    match (result.state.as_str(), result.exit_code) {
        ("COMPLETED", _) => Ok(()),
        (_, 2) => bail!(
            "the tasks cannot see the results directory {}: a probe job on the cluster did not find the file written \
             there. Give --results on a file system the compute nodes share (a home or scratch file system), and keep \
             the experiment file and pqtls there too",
            job.results.display()
        ),
        (_, 3) => bail!(
            "the tasks cannot run {}: a probe job on the cluster did not find it. Install pqtls on a file system the \
             compute nodes share and run pqtls batch from there",
            job.pqtls.display()
        ),
        (_, 4) => bail!(
            "the tasks cannot read {}: a probe job on the cluster did not find it. Keep the experiment file on a \
             file system the compute nodes share",
            job.file.display()
        ),
        (state, code) => bail!(
            "the probe job {id} ended {state} (exit code {code}) before checking anything: `scontrol show job {id}` \
             or the site's logs say why"
        ),
    }
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// The job script: an array of N tasks, each `pqtls run FILE --shard K/N` on the shared
/// results directory; requeued when preempted (each task resumes its shard: what is stored
/// is not measured again).
fn sbatch_script(job: &Job, args: &SlurmArgs) -> String {
    let q = |p: &Path| shell_quote(&p.display().to_string());
    let mut s = String::from("#!/bin/bash\n# Written by `pqtls batch slurm` (docs/batch.md).\n");
    let mut opt = |o: String| s.push_str(&format!("#SBATCH {o}\n"));
    opt(format!("--job-name=pqtls-{}", job.name));
    opt(format!("--array=1-{}", job.shards));
    opt("--ntasks=1".into());
    opt(format!("--cpus-per-task={}", args.cpus_per_task));
    opt("--requeue".into());
    opt(format!("--chdir={}", job.results.display()));
    opt(format!("--output={}/task-%a.out", job.batch_dir.display()));
    // A requeued task appends to its log: the interrupted run's lines stay.
    opt("--open-mode=append".into());
    if args.exclusive {
        opt("--exclusive".into());
    }
    if let Some(t) = &args.time {
        opt(format!("--time={t}"));
    }
    for o in placement(args) {
        opt(o);
    }
    s.push_str("set -eu\n");
    s.push_str(&format!(
        "echo \"pqtls batch: shard ${{SLURM_ARRAY_TASK_ID}}/{n} on $(hostname), restart ${{SLURM_RESTART_COUNT:-0}}, \
         $(date -u +%FT%TZ)\"\n",
        n = job.shards
    ));
    let extra: String = args.run_args.iter().map(|a| format!(" {}", shell_quote(a))).collect();
    s.push_str(&format!(
        "exec {} run {} --shard \"${{SLURM_ARRAY_TASK_ID}}/{}\" --results {} --pki {} --no-progress{extra}\n",
        q(&job.pqtls),
        q(&job.file),
        job.shards,
        q(&job.results),
        q(&job.pki),
    ));
    s
}

/// One array task as the controller reports it.
#[derive(Clone, Debug, PartialEq)]
struct Task {
    state: String,
    exit_code: i32,
    signal: i32,
    restarts: u32,
}

/// Slurm's final job states: the task will not run again by itself.
fn is_final(state: &str) -> bool {
    matches!(
        state,
        "COMPLETED"
            | "FAILED"
            | "CANCELLED"
            | "TIMEOUT"
            | "NODE_FAIL"
            | "PREEMPTED"
            | "OUT_OF_MEMORY"
            | "BOOT_FAIL"
            | "DEADLINE"
            | "REVOKED"
    )
}

/// The value of `key=` in one line of `scontrol show job -o`.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// `1-4`, `2,5-7%2`: the task ids of a pending array record.
fn task_ids(spec: &str) -> Vec<usize> {
    let spec = spec.split('%').next().unwrap_or("");
    let mut ids = Vec::new();
    for part in spec.split(',') {
        match part.split_once('-') {
            Some((a, b)) => {
                if let (Ok(a), Ok(b)) = (a.parse::<usize>(), b.parse::<usize>()) {
                    ids.extend(a..=b);
                }
            }
            None => ids.extend(part.parse::<usize>().ok()),
        }
    }
    ids
}

/// The tasks of job `id` from `scontrol show job -o` (one line per task; a line for the tasks
/// still pending together), by task id (0 for a job that is not an array).
fn parse_tasks(text: &str) -> BTreeMap<usize, Task> {
    let mut tasks = BTreeMap::new();
    for line in text.lines().filter(|l| l.contains("JobState=")) {
        let state = field(line, "JobState").unwrap_or("UNKNOWN").to_string();
        let (exit_code, signal) = field(line, "ExitCode")
            .and_then(|e| e.split_once(':'))
            .map(|(a, b)| (a.parse().unwrap_or(-1), b.parse().unwrap_or(0)))
            .unwrap_or((-1, 0));
        let restarts = field(line, "Restarts").and_then(|r| r.parse().ok()).unwrap_or(0);
        let task = Task { state, exit_code, signal, restarts };
        match field(line, "ArrayTaskId") {
            Some(spec) => {
                for k in task_ids(spec) {
                    tasks.insert(k, task.clone());
                }
            }
            None => {
                tasks.insert(0, task);
            }
        }
    }
    tasks
}

fn job_tasks(id: &str) -> Result<BTreeMap<usize, Task>> {
    Ok(parse_tasks(&slurm_cmd("scontrol", &["show", "job", "-o", id])?))
}

/// Records in a shard's store so far (lines of its records file).
fn stored(job: &Job, k: usize) -> usize {
    std::fs::read(shard_dir(job, k).join(pqtls_store::store::RECORDS))
        .map(|b| b.split(|c| *c == b'\n').filter(|l| !l.is_empty()).count())
        .unwrap_or(0)
}

/// Polls the job until every task has ended, printing a line on every change: the tasks'
/// states, the records stored, each task's end with its exit code, each requeue.
fn wait(id: &str, job: &Job) -> Result<BTreeMap<usize, Task>> {
    let t0 = Instant::now();
    let mut last: BTreeMap<usize, Task> = BTreeMap::new();
    let mut last_line = String::new();
    let total: usize = job.per_shard.iter().sum();
    loop {
        let tasks = match job_tasks(id) {
            Ok(t) => t,
            Err(e) => bail!(
                "job {id} could not be followed ({e:#}); its tasks may still run: `squeue -j {id}`, and once it has \
                 ended run the same command again to merge (nothing stored is measured twice)"
            ),
        };
        let elapsed_s = t0.elapsed().as_secs();
        for (&k, t) in tasks.iter().filter(|(k, _)| (1..=job.shards).contains(*k)) {
            let before = last.get(&k);
            if t.restarts > before.map_or(0, |b| b.restarts) {
                crate::progress::line(&format!(
                    "  shard {k}/{}: requeued (restart {}); it resumes its shard",
                    job.shards, t.restarts
                ));
            }
            if is_final(&t.state) && before.is_none_or(|b| b.state != t.state) {
                crate::progress::line(&format!(
                    "  shard {k}/{}: {} (exit code {}) at {}:{:02}, {} of {} configurations stored",
                    job.shards,
                    t.state,
                    t.exit_code,
                    elapsed_s / 60,
                    elapsed_s % 60,
                    stored(job, k).min(job.per_shard[k - 1]),
                    job.per_shard[k - 1]
                ));
            }
        }
        let count = |f: &dyn Fn(&Task) -> bool| tasks.values().filter(|t| f(t)).count();
        let done = count(&|t: &Task| is_final(&t.state));
        let running = count(&|t: &Task| t.state == "RUNNING" || t.state == "COMPLETING");
        let records: usize = (1..=job.shards).map(|k| stored(job, k).min(job.per_shard[k - 1])).sum();
        let line = format!(
            "job {id}: {done} of {} tasks ended, {running} running, {} waiting; {records} of {total} configurations stored",
            job.shards,
            job.shards.saturating_sub(done + running)
        );
        if line != last_line {
            crate::progress::line(&format!("[{}:{:02}] {line}", elapsed_s / 60, elapsed_s % 60));
            last_line = line;
        }
        last = tasks;
        if last.len() >= job.shards && last.values().all(|t| is_final(&t.state)) {
            return Ok(last);
        }
        std::thread::sleep(POLL);
    }
}

/// The last `error:` line of a task's log, if any (what `pqtls run` said before it exited).
fn last_error(log: &Path) -> Option<String> {
    let text = std::fs::read_to_string(log).ok()?;
    text.lines().rev().find(|l| l.starts_with("error:")).map(|l| l.trim().to_string())
}

/// The commands that finish a job submitted with --no-wait.
fn after_commands(job: &Job) -> Vec<String> {
    let m = job.merged.display();
    let pqtls = job.pqtls.display();
    vec![
        format!("{pqtls} merge {m}/shard-*-of-{} --out {m}", job.shards),
        format!("{pqtls} check {m}"),
        format!("{pqtls} report {m} --markdown {m}/report.md --html {m}/report.html"),
    ]
}

/// Runs `pqtls args` (merge, check, report) with the terminal's output; its failure ends the
/// command with its exit code.
fn step(pqtls: &Path, args: &[String]) -> Result<()> {
    crate::progress::line(&format!("$ pqtls {}", args.join(" ")));
    let status =
        Command::new(pqtls).args(args).status().with_context(|| format!("running {} {}", pqtls.display(), args[0]))?;
    if !status.success() {
        return Err(crate::context::Exit {
            code: status.code().unwrap_or(1),
            message: format!("`pqtls {}` failed ({status}); the shards are kept as they are", args.join(" ")),
        }
        .into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scontrol_lines_give_each_task_its_state_exit_code_and_restarts() {
        let text = "JobId=5 ArrayJobId=4 ArrayTaskId=1 JobName=r.sh UserId=root(0) JobState=PENDING Reason=BeginTime \
                    Requeue=1 Restarts=1 BatchFlag=1 Reboot=0 ExitCode=0:0 RunTime=00:00:00\n\
                    JobId=4 ArrayJobId=4 ArrayTaskId=2 JobName=r.sh JobState=FAILED Reason=NonZeroExitCode \
                    Restarts=0 ExitCode=3:0\n\
                    JobId=4 ArrayJobId=4 ArrayTaskId=3-5%2 JobName=r.sh JobState=PENDING Restarts=0 ExitCode=0:0\n\
                    JobId=7 ArrayJobId=4 ArrayTaskId=6 JobState=CANCELLED Restarts=0 ExitCode=0:15\n";
        let t = parse_tasks(text);
        assert_eq!(t.keys().copied().collect::<Vec<_>>(), vec![1, 2, 3, 4, 5, 6]);
        assert_eq!(t[&1], Task { state: "PENDING".into(), exit_code: 0, signal: 0, restarts: 1 });
        assert_eq!(t[&2], Task { state: "FAILED".into(), exit_code: 3, signal: 0, restarts: 0 });
        assert_eq!(t[&4].state, "PENDING");
        assert_eq!((t[&6].state.as_str(), t[&6].signal), ("CANCELLED", 15));
        assert!(is_final("FAILED") && !is_final("PENDING") && !is_final("COMPLETING"));
        assert_eq!(task_ids("1,3-4"), vec![1, 3, 4]);
    }

    #[test]
    fn the_job_script_runs_one_shard_per_task_with_absolute_paths() {
        let job = Job {
            name: "x".into(),
            shards: 4,
            merged: "/r/x".into(),
            batch_dir: "/r/x/slurm-4".into(),
            pqtls: "/opt/pqtls bin/pqtls".into(),
            file: "/e/x.toml".into(),
            results: "/r".into(),
            pki: "/p".into(),
            per_shard: vec![1; 4],
        };
        let args = SlurmArgs {
            file: "x.toml".into(),
            shards: 4,
            results: "r".into(),
            partition: Some("long".into()),
            time: Some("1:00:00".into()),
            cpus_per_task: 2,
            exclusive: false,
            no_wait: false,
            no_probe: false,
            pki: "p".into(),
            run_args: vec!["--window".into(), "4".into()],
        };
        let s = sbatch_script(&job, &args);
        for want in [
            "#SBATCH --array=1-4\n",
            "#SBATCH --requeue\n",
            "#SBATCH --partition=long\n",
            "#SBATCH --time=1:00:00\n",
            "#SBATCH --output=/r/x/slurm-4/task-%a.out\n",
            "exec '/opt/pqtls bin/pqtls' run '/e/x.toml' --shard \"${SLURM_ARRAY_TASK_ID}/4\" --results '/r' --pki '/p' \
             --no-progress '--window' '4'\n",
        ] {
            assert!(s.contains(want), "{want} not in:\n{s}");
        }
    }
}
