//! `pqtls batch slurm` on a real Slurm: the one-node cluster of `scripts/slurm-local.sh`
//! (started here when it is not running, and stopped again at the end; skipped with a notice
//! where it cannot run: not root, or neither Slurm nor apt-get). One test, in steps, because
//! the steps share the cluster and its two cores:
//!
//! 1. bad input is refused before anything is submitted: a controller that does not answer,
//!    more shards than configurations, a results directory the tasks cannot see;
//! 2. a 24-configuration experiment in 4 shards: one task requeued mid-run resumes its shard
//!    without measuring its finished configurations again; a second run of a shard while its
//!    task holds the lock is refused by name; the merged store has the ids of a single-machine
//!    run and `pqtls check` calls it sound;
//! 3. a shard that fails: the batch names it with pqtls' exit code, and `sacct` shows it FAILED
//!    with that exit code;
//! 4. two load generators (`srun -n 2 pqtls load … --shard $((SLURM_PROCID+1))/2`) against one
//!    `pqtls serve`: their records merge into one whose counts add and whose p99 is the p99 of
//!    the union of their transactions (from `--timelines`).

mod common;
use common::{collect_stderr, fails_with, ok, pqtls, pqtls_cmd, record_ids, text, Serve};

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-local.sh")
}

/// The local cluster, stopped on drop if this test started it (also when the test fails).
struct Cluster {
    started_here: bool,
}

impl Cluster {
    /// None (with a printed notice) where the cluster cannot run.
    fn up() -> Option<Cluster> {
        // SAFETY: getuid has no preconditions.
        let root = unsafe { libc::getuid() } == 0;
        let have = |c: &str| {
            Command::new("sh").arg("-c").arg(format!("command -v {c}")).output().is_ok_and(|o| o.status.success())
        };
        if !root || !(have("slurmctld") || have("apt-get")) {
            eprintln!(
                "NOTICE: skipping the Slurm tests: the local cluster (scripts/slurm-local.sh) needs root and either \
                 slurm-wlm or apt-get to install it"
            );
            return None;
        }
        let running = Command::new("bash").arg(script()).arg("status").output().is_ok_and(|o| o.status.success());
        if !running {
            let o = Command::new("bash").arg(script()).arg("start").output().expect("running slurm-local.sh");
            assert!(o.status.success(), "scripts/slurm-local.sh start failed:\n{}", text(&o));
        }
        Some(Cluster { started_here: !running })
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if self.started_here {
            let o = Command::new("bash").arg(script()).arg("stop").output();
            if let Ok(o) = o {
                eprintln!("slurm-local.sh stop: {}", text(&o).trim());
            }
        }
    }
}

/// A command run in the background with its stderr collected, killed on drop.
struct Background {
    child: std::process::Child,
    err: Arc<Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Background {
    fn spawn(mut cmd: Command) -> Background {
        let mut child = cmd.stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawns");
        let (err, reader) = collect_stderr(&mut child);
        Background { child, err, reader: Some(reader) }
    }

    fn stderr(&self) -> String {
        self.err.lock().unwrap().clone()
    }

    /// Waits (bounded) for the command to end: its exit code and stderr.
    fn wait(mut self, limit: Duration) -> (Option<i32>, String) {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                self.reader.take().unwrap().join().unwrap();
                return (s.code(), self.stderr());
            }
            assert!(t0.elapsed() < limit, "still running after {limit:?}:\n{}", self.stderr());
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn slurm(program: &str, args: &[&str]) -> String {
    let o = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(o.status.success(), "{program} {args:?}: {}", text(&o));
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `KEY=value` of one line of `scontrol show job -o`.
fn field<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace().find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// The state and raw job id of array task `job_k` (e.g. 12_3).
fn task(job_k: &str) -> (String, String) {
    let line = slurm("scontrol", &["show", "job", "-o", job_k]);
    (field(&line, "JobState").unwrap().to_string(), field(&line, "JobId").unwrap().to_string())
}

/// The job id in `pqtls batch`'s "submitted job N:" line.
fn submitted(err: &str) -> Option<String> {
    let rest = err.split("submitted job ").nth(1)?;
    Some(rest.split(':').next()?.to_string())
}

/// 24 configurations, 2 of each shard's 6 with RSA-4096 leaves (a few seconds each: a shard
/// is cut mid-run reliably), the rest cheap.
const EXPERIMENT: &str = "name = \"b24\"\n[settings]\nwarmup = 5\nloops = 300\nmode = \"memory\"\n[matrix]\n\
     stack = [\"openssl\"]\ngroup = [\"x25519\", \"secp256r1\", \"X25519MLKEM768\", \"MLKEM768\"]\n\
     chain = [\"ed25519:ed25519\", \"rsa4096:rsa4096\", \"p256:p256\"]\n\
     cipher = [\"TLS_AES_128_GCM_SHA256\", \"TLS_AES_256_GCM_SHA384\"]\n";

/// The options every task's `pqtls run` gets (after `--`): one configuration after another,
/// so that each one's record is stored as it ends.
const RUN: &[&str] = &["--", "--schedule", "sequential"];

#[test]
fn batch_slurm_end_to_end_on_a_local_cluster() {
    let Some(_cluster) = Cluster::up() else { return };
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let pki = d.join("pki");
    ok(&pqtls(&["pki", "--chain", "ed25519:ed25519,rsa4096:rsa4096,p256:p256"], &pki));
    let exp = d.join("b24.toml");
    std::fs::write(&exp, EXPERIMENT).unwrap();
    let exp = exp.to_str().unwrap();
    refusals(d, exp, &pki);
    requeued_shard_resumes_and_the_merge_is_the_single_machine_run(d, exp, &pki);
    a_failed_shard_is_named_and_reaches_sacct(d, &pki);
    load_generators_on_srun_merge_into_one_histogram(d, &pki);
}

/// Bad input, refused before anything is submitted.
fn refusals(d: &Path, exp: &str, pki: &Path) {
    let results = d.join("refused");
    let r = results.to_str().unwrap();
    // More shards than configurations.
    fails_with(
        &pqtls(&["batch", "slurm", exp, "--shards", "25", "--results", r], pki),
        Some(1),
        &["--shards 25", "24 configurations", "at most 24 shards"],
    );
    // Options for the tasks' `pqtls run` that it refuses, or that batch sets itself.
    fails_with(
        &pqtls(&["batch", "slurm", exp, "--shards", "4", "--results", r, "--", "--windo", "2"], pki),
        Some(1),
        &["given to `pqtls run`", "--windo"],
    );
    fails_with(
        &pqtls(&["batch", "slurm", exp, "--shards", "4", "--results", r, "--", "--shard", "1/2"], pki),
        Some(1),
        &["--shard after `--`", "pqtls batch sets it"],
    );
    // A controller that does not answer (a configuration naming a port where nothing listens).
    let conf = std::fs::read_to_string("/etc/slurm/slurm.conf").unwrap();
    let dead = d.join("dead-slurm.conf");
    std::fs::write(&dead, conf.replace("SlurmctldPort=6817", "SlurmctldPort=9")).unwrap();
    let o = pqtls_cmd(&["batch", "slurm", exp, "--shards", "4", "--results", r], pki)
        .env("SLURM_CONF", &dead)
        .output()
        .unwrap();
    fails_with(&o, Some(1), &["Slurm is not answering", "scripts/slurm-local.sh start", "sinfo"]);
    // A results directory the tasks cannot see: a tmpfs mounted in a mount namespace of the
    // submitting side only; the probe job (run by slurmd, outside it) does not find it.
    let private = d.join("private");
    std::fs::create_dir_all(&private).unwrap();
    let line = format!(
        "mount -t tmpfs pqtls-probe {p} && exec {bin} batch slurm {exp} --shards 4 --results {p}/results",
        p = private.display(),
        bin = env!("CARGO_BIN_EXE_pqtls"),
    );
    let o = Command::new("unshare")
        .args(["--mount", "--propagation", "private", "sh", "-c", &line])
        .env("PQTLS_PKI_DIR", pki)
        .env("RUST_BACKTRACE", "0")
        .output()
        .unwrap();
    fails_with(&o, Some(1), &["the tasks cannot see the results directory", "a file system the compute nodes share"]);
    assert!(!text(&o).contains("submitted job"), "{}", text(&o));
    assert!(!results.exists() || record_ids(&results.join("b24/records.ndjson")).is_empty());
}

fn requeued_shard_resumes_and_the_merge_is_the_single_machine_run(d: &Path, exp: &str, pki: &Path) {
    let results = d.join("results");
    let r = results.to_str().unwrap();
    let mut cmd = pqtls_cmd(
        &[&["batch", "slurm", exp, "--shards", "4", "--results", r, "--cpus-per-task", "1"][..], RUN].concat(),
        pki,
    );
    cmd.current_dir(d);
    let batch = Background::spawn(cmd);

    // Shard 2, once it has stored a configuration but not all six: a second run of the shard
    // is refused (the task holds the lock), then the task is requeued (SIGTERM, as preemption
    // does: taken like Ctrl-C, the open configuration is kept marked interrupted) and released
    // at once (a requeued job waits ~2 minutes for its begin time).
    let shard2 = results.join("b24/shard-2-of-4/records.ndjson");
    let t0 = Instant::now();
    let job = loop {
        assert!(t0.elapsed() < Duration::from_secs(120), "shard 2 stored nothing in 120 s:\n{}", batch.stderr());
        if let Some(job) = submitted(&batch.stderr()) {
            let n = record_ids(&shard2).len();
            assert!(n < 6, "shard 2 ended before it could be cut; make its configurations slower\n{}", batch.stderr());
            if n >= 1 && task(&format!("{job}_2")).0 == "RUNNING" {
                break job;
            }
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    let again = pqtls(&["run", exp, "--shard", "2/4", "--results", r, "--no-progress"], pki);
    fails_with(&again, Some(1), &["shard-2-of-4 is being written by another pqtls run", "host and pid"]);
    slurm("scontrol", &["requeue", &format!("{job}_2")]);
    let cut_at = complete_ids(&shard2).len();
    // The requeued task is pending with a begin time; make it eligible now.
    let t1 = Instant::now();
    while task(&format!("{job}_2")).0 != "PENDING" {
        assert!(t1.elapsed() < Duration::from_secs(60), "task {job}_2 not requeued");
        std::thread::sleep(Duration::from_millis(200));
    }
    slurm("scontrol", &["update", &format!("JobId={job}_2"), "StartTime=now"]);

    let (code, err) = batch.wait(Duration::from_secs(240));
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("shard 2/4: requeued (restart 1)"), "{err}");
    assert!(err.contains("merged 24 records"), "{err}");
    // The requeued shard: each of its 6 configurations once; the resumed run measured only
    // what the cut one had not stored.
    let ids2 = complete_ids(&shard2);
    assert_eq!(ids2.len(), 6, "{ids2:?}");
    assert_eq!(ids2.iter().collect::<BTreeSet<_>>().len(), 6, "{ids2:?}");
    // SIGTERM stopped the task at a safe point: at most the one open configuration (one at a
    // time) is kept marked interrupted, and measured again by the resumed run.
    let cut = record_ids(&shard2).len() - ids2.len();
    assert!(cut <= 1, "{cut} interrupted records");
    let log = std::fs::read_to_string(results.join("b24/slurm-4/task-2.out")).unwrap();
    assert!(log.contains("shard 2/4 on") && log.contains("restart 1"), "{log}");
    let resumed = log.lines().rfind(|l| l.contains("already stored")).unwrap();
    let stored_before: usize = resumed.split(": ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
    assert!(stored_before >= cut_at && stored_before < 6, "{resumed} (cut at {cut_at})");
    assert!(resumed.contains(&format!("{} measured", 6 - stored_before)), "{resumed}");

    // The merged set: the ids of one machine's run of the same file, each once; sound.
    let merged = record_ids(&results.join("b24/records.ndjson"));
    let single_root = d.join("single");
    ok(&pqtls(
        &["run", exp, "--results", single_root.to_str().unwrap(), "--no-progress", "--schedule", "sequential"],
        pki,
    ));
    let single = record_ids(&single_root.join("b24/records.ndjson"));
    assert_eq!(merged.len(), 24);
    assert_eq!(merged.iter().collect::<BTreeSet<_>>(), single.iter().collect::<BTreeSet<_>>());
    let c = pqtls(&["check", results.join("b24").to_str().unwrap()], pki);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c));
    assert!(text(&c).contains("sound, 24 records"), "{}", text(&c));
    assert!(results.join("b24/report.md").exists() && results.join("b24/report.html").exists());
    // As sacct reads the job completion log: every task ended COMPLETED; the requeued one
    // was logged first when it was requeued (as PENDING: the job completion log has no
    // REQUEUED state), then COMPLETED.
    for k in 1..=4 {
        let states = sacct_states(&task(&format!("{job}_{k}")).1);
        let want: &[&str] = if k == 2 { &["PENDING|0:0", "COMPLETED|0:0"] } else { &["COMPLETED|0:0"] };
        assert_eq!(states, want, "task {job}_{k}");
    }
}

/// The ids of the records in `records` that are complete (not marked `stopped: interrupted`).
fn complete_ids(records: &Path) -> Vec<String> {
    std::fs::read_to_string(records)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["result"]["loops"]["stopped"] != "interrupted")
        .map(|v| v["id"].as_str().unwrap().to_string())
        .collect()
}

/// `State|ExitCode` of each line `sacct -c` has for the raw job id `raw`, in order.
fn sacct_states(raw: &str) -> Vec<String> {
    let sacct = slurm("sacct", &["-c", "-n", "-P", "-o", "JobID,State,ExitCode"]);
    sacct.lines().filter_map(|l| l.strip_prefix(&format!("{raw}|"))).map(str::to_string).collect()
}

/// A shard whose store is refused (shard 2's directory was made with other settings):
/// pqtls run exits 1 and sacct shows the task FAILED with exit code 1; the batch names the
/// shard with that exit code and exits 3; run again once the cause is gone, it completes.
fn a_failed_shard_is_named_and_reaches_sacct(d: &Path, pki: &Path) {
    let exp = d.join("f.toml");
    std::fs::write(
        &exp,
        "name = \"f\"\n[settings]\nwarmup = 2\nloops = 20\n[matrix]\nstack = [\"openssl\"]\n\
         group = [\"x25519\", \"secp256r1\"]\nchain = [\"ed25519:ed25519\"]\n",
    )
    .unwrap();
    let other = d.join("g.toml");
    std::fs::write(&other, std::fs::read_to_string(&exp).unwrap().replace("loops = 20", "loops = 30")).unwrap();
    let results = d.join("failing");
    let r = results.to_str().unwrap();
    // Shard 2's directory made by a run of another file of the same name (other settings):
    // the task's run refuses it.
    ok(&pqtls(&["run", other.to_str().unwrap(), "--shard", "2/2", "--results", r, "--no-progress"], pki));
    assert!(results.join("f/shard-2-of-2/manifest.json").exists());
    let e = exp.to_str().unwrap();
    let batch = ["batch", "slurm", e, "--shards", "2", "--results", r, "--cpus-per-task", "1"];

    // Submitted with --no-wait (and the placement options): the job id and what to run later.
    let o = pqtls(&[&batch[..], &["--partition", "pqtls", "--time", "5", "--no-wait"]].concat(), pki);
    ok(&o);
    let job = submitted(&text(&o)).unwrap();
    assert!(text(&o).contains("not waiting (--no-wait)") && text(&o).contains(" merge "), "{}", text(&o));
    let t0 = Instant::now();
    while !slurm("squeue", &["-h", "-j", &job]).trim().is_empty() {
        assert!(t0.elapsed() < Duration::from_secs(120), "job {job} still queued after 120 s");
        std::thread::sleep(Duration::from_millis(300));
    }
    // What sacct says: shard 1 COMPLETED, shard 2 FAILED with pqtls run's exit code 1.
    assert_eq!(sacct_states(&task(&format!("{job}_1")).1), ["COMPLETED|0:0"]);
    assert_eq!(sacct_states(&task(&format!("{job}_2")).1), ["FAILED|1:0"], "pqtls run's exit code 1");

    // The same command again, waiting: shard 1 has nothing left to measure, shard 2 fails
    // again, and the batch names it with its exit code and the task's error line.
    let o = pqtls(&batch, pki);
    fails_with(
        &o,
        Some(3),
        &["1 of 2 shards did not complete", "shard 2/2", "FAILED with exit code 1", "task-2.out: error:"],
    );
    assert!(!results.join("f/records.ndjson").exists(), "nothing merged");
    let log1 = std::fs::read_to_string(results.join("f/slurm-2/task-1.out")).unwrap();
    assert!(log1.contains("1 configurations: 1 already stored, 0 measured"), "{log1}");

    // Once the cause is gone (the foreign shard moved aside), the same command completes.
    std::fs::rename(results.join("f/shard-2-of-2"), d.join("foreign-shard")).unwrap();
    let o = pqtls(&[&batch[..], &["--no-probe"]].concat(), pki);
    ok(&o);
    assert!(text(&o).contains("merged 2 records") && text(&o).contains("sound, 2 records"), "{}", text(&o));
}

/// `srun -n 2`: two load generators, one `pqtls serve`; merged counts add, the target rate is
/// 2 × each shard's, and the merged p99 is the p99 of the union of both shards' transactions.
fn load_generators_on_srun_merge_into_one_histogram(d: &Path, pki: &Path) {
    let server = Serve::start_in(&["--stack", "rustls", "--group", "x25519", "--chain", "ed25519:ed25519"], d);
    let url = server.url("1KiB");
    let out = d.join("load");
    std::fs::create_dir_all(&out).unwrap();
    let line = format!(
        "K=$((SLURM_PROCID+1)); exec {bin} load {url} --stack openssl --group x25519 --chain ed25519:ed25519 \
         --rate 100/s --duration 3s --warmup-time 0s --shard $K/2 --timelines {o}/timelines-$K.ndjson \
         --json {o}/shard-$K.json --quiet",
        bin = env!("CARGO_BIN_EXE_pqtls"),
        o = out.display()
    );
    let o = Command::new("srun")
        .args(["-n", "2", "--cpus-per-task=1", "--time=2", "bash", "-c", &line])
        .env("PQTLS_PKI_DIR", pki)
        .output()
        .unwrap();
    assert!(o.status.success(), "srun: {}", text(&o));
    let read = |f: &str| -> serde_json::Value {
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join(f)).unwrap()).unwrap();
        v[0]["result"].clone()
    };
    let shards = [read("shard-1.json"), read("shard-2.json")];
    for s in &shards {
        assert_eq!(s["target_rate_per_s"].as_f64(), Some(50.0), "each generator: half of 100/s");
    }
    let merged_dir = out.join("merged");
    let m = pqtls(
        &[
            "merge",
            out.join("shard-1.json").to_str().unwrap(),
            out.join("shard-2.json").to_str().unwrap(),
            "--out",
            merged_dir.to_str().unwrap(),
        ],
        pki,
    );
    ok(&m);
    assert!(text(&m).contains("joined 2 load shards"), "{}", text(&m));
    let c = pqtls(&["check", merged_dir.to_str().unwrap()], pki);
    assert_eq!(c.status.code(), Some(0), "{}", text(&c));
    let merged: serde_json::Value = serde_json::from_str(
        std::fs::read_to_string(merged_dir.join("records.ndjson")).unwrap().lines().next().unwrap(),
    )
    .unwrap();
    let merged = &merged["result"];
    let sum = |k: &str| shards.iter().map(|s| s[k].as_u64().unwrap()).sum::<u64>();
    assert_eq!(merged["requests"].as_u64(), Some(sum("requests")));
    assert_eq!(merged["handshakes"].as_u64(), Some(sum("handshakes")));
    assert_eq!(merged["target_rate_per_s"].as_f64(), Some(100.0), "N × the per-shard rate");
    // (Requests the timetable had issued but that had not completed at the end, if the machine
    // stalled a generator: not in the latency histogram, counted apart, and added too.)
    assert_eq!(merged["unfinished"].as_u64(), Some(sum("unfinished")));
    let rate_sum: f64 = shards.iter().map(|s| s["achieved_rate_per_s"].as_f64().unwrap()).sum();
    assert_eq!(merged["achieved_rate_per_s"].as_f64(), Some(rate_sum));
    // The union of both shards' transactions, from their timelines.
    let mut latencies_ns: Vec<u64> = Vec::new();
    for k in 1..=2 {
        for l in std::fs::read_to_string(out.join(format!("timelines-{k}.ndjson"))).unwrap().lines() {
            let t: pqtls_core::timeline::Timeline = serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}"));
            latencies_ns.push(t.latency_ns().max(1));
        }
    }
    assert_eq!(latencies_ns.len() as u64, sum("requests"), "one timeline per measured request");
    assert_eq!(merged["latency"]["count"].as_u64(), Some(latencies_ns.len() as u64));
    let mut h = pqtls_core::load::histogram();
    for v in &latencies_ns {
        h.record(*v).unwrap();
    }
    let p99_ns = merged["latency"]["p99_ns"].as_u64().unwrap();
    assert_eq!(p99_ns, h.value_at_quantile(0.99), "the merged p99 is the union's (same histogram)");
    // …and within the histogram's resolution (3 significant digits) of the exact order statistic.
    latencies_ns.sort_unstable();
    let exact = latencies_ns[((latencies_ns.len() as f64 * 0.99).ceil() as usize).max(1) - 1];
    assert!(p99_ns.abs_diff(exact) * 1000 <= exact, "merged p99 {p99_ns} vs the union's exact {exact}");
    drop(server);
}
