//! `clock = "instructions"` end to end: pqtls re-executes itself under valgrind's callgrind,
//! counts instructions per step on both stacks, and the records say so; what is missing gets
//! a clear error; counts are never compared with time. A few handshakes each (a handshake takes
//! about a second under callgrind).

use pqtls_core::record::Record;
use pqtls_core::scenario::Scenario;
use pqtls_core::trace::{Clock, CostUnit};
use pqtls_store::SampleLine;
use std::path::Path;
use std::process::{Command, Output};

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_pqtls"));
    c.env("RUST_BACKTRACE", "0");
    c
}

fn text(o: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&o.stdout), String::from_utf8_lossy(&o.stderr))
}

fn pki() -> std::path::PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki-instructions")
}

/// x25519 + Ed25519 on each stack, counted under callgrind: the record is in instructions and
/// names its counter; every handshake's steps add up to its side's total exactly; the counts
/// repeat from handshake to handshake within stated bounds: the server's within 0.5 %
/// (constant-time x25519 and deterministic Ed25519 signing leave only the stacks' bookkeeping —
/// allocation, hash tables — to vary: measured ≤ 0.15 %), the client's within 2 % (Ed25519
/// verification is variable-time in the signature, which covers the random hellos: OpenSSL's
/// verify step spreads ±1.2 %, its client total ±0.4 %; docs/instructions.md).
#[test]
fn both_stacks_count_instructions_per_step_under_callgrind() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("r.json");
    let ndjson = dir.path().join("s.ndjson");
    let o = bin()
        .args(["insitu", "--clock", "instructions", "--counter", "callgrind", "--group", "x25519"])
        .args(["--chain", "ed25519:ed25519", "--stack", "openssl,rustls", "--warmup", "2", "--loops", "4"])
        .arg("--json")
        .arg(&json)
        .arg("--ndjson")
        .arg(&ndjson)
        .arg("--quiet")
        .env("PQTLS_PKI_DIR", pki())
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(t.contains("running again under valgrind-"), "{t}");
    let records: Vec<Record> = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    assert_eq!(records.len(), 2, "{t}");
    for r in &records {
        let res = r.insitu().unwrap();
        assert_eq!(res.unit, CostUnit::Instructions);
        assert_eq!(res.loops.clock, "instructions");
        let c = res.loops.counter.as_ref().expect("the counter is recorded");
        assert_eq!(c.source, "callgrind");
        assert!(c.version.starts_with("valgrind-"), "{c:?}");
        assert_eq!(res.loops.measured, 4);
        assert!(r.id.contains("instructions"), "{}", r.id);
        // A TLS 1.3 handshake is hundreds of thousands of instructions at least, per side.
        assert!(res.client.total_cpu_ns.min > 100_000.0 && res.server.total_cpu_ns.min > 100_000.0, "{res:?}");
        for (side, bound) in [(&res.client.total_cpu_ns, 0.02), (&res.server.total_cpu_ns, 0.005)] {
            assert!(side.max / side.min - 1.0 < bound, "{} counts vary by more than {bound}: {side:?}", r.label);
        }
    }
    let lines = std::fs::read_to_string(&ndjson).unwrap();
    let mut n = 0;
    for line in lines.lines() {
        let s: SampleLine = serde_json::from_str(line).unwrap();
        for side in [&s.client, &s.server] {
            assert_eq!(side.steps.values().sum::<u64>(), side.total_cpu_ns, "steps add up: {line}");
            assert_eq!(side.unscheduled_ns, 0, "instructions have no unscheduled time");
        }
        n += 1;
    }
    assert_eq!(n, 8);
}

#[test]
fn without_valgrind_the_error_says_how_to_get_it() {
    let o = bin()
        .args(["insitu", "--clock", "instructions", "--counter", "callgrind", "--loops", "2"])
        .env("PATH", "/nonexistent")
        .env("PQTLS_PKI_DIR", pki())
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("needs valgrind") && t.contains("scripts/setup.sh"), "{t}");
    assert!(!t.contains("panicked"), "{t}");
}

/// Where the machine has no PMU (these VMs), `--counter perf` says so and names the fallback;
/// where it has one, it counts.
#[test]
fn perf_counter_is_used_where_it_exists_or_refused_with_the_alternative() {
    let o = bin()
        .args(["insitu", "--clock", "instructions", "--counter", "perf", "--loops", "2", "--warmup", "1", "--quiet"])
        .env("PQTLS_PKI_DIR", pki())
        .output()
        .unwrap();
    let t = text(&o);
    match o.status.code() {
        Some(0) => {}
        _ => assert!(t.contains("--counter callgrind counts under valgrind instead"), "{t}"),
    }
}

/// The commands that read clocks refuse instructions with the commands that count them; a run
/// that would time configurations under valgrind is refused.
#[test]
fn clock_commands_refuse_instructions() {
    let o = bin()
        .args(["insitu", "--clock", "split,instructions", "--counter", "callgrind", "--loops", "2"])
        .env("PQTLS_PKI_DIR", pki())
        .output()
        .unwrap();
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("mixes clock = instructions with time"), "{t}");
    for cmd in ["trace", "overhead"] {
        let o = bin().args([cmd, "--clock", "instructions"]).env("PQTLS_PKI_DIR", pki()).output().unwrap();
        let t = text(&o);
        assert_eq!(o.status.code(), Some(1), "{cmd}: {t}");
        assert!(t.contains("pqtls insitu --clock instructions"), "{cmd}: {t}");
    }
}

fn store_of(dir: &Path, clock: &str) {
    let sc = Scenario::new([("group", "x25519"), ("chain", "p256:p256"), ("clock", clock)]).unwrap();
    let r = pqtls_testkit::synthetic::measure(&sc, 50).record;
    std::fs::create_dir_all(dir).unwrap();
    std::fs::write(dir.join("records.ndjson"), format!("{}\n", serde_json::to_string(&r).unwrap())).unwrap();
}

/// Time and counts are different units: compare refuses, naming both.
#[test]
fn counts_are_not_compared_with_time() {
    let dir = tempfile::tempdir().unwrap();
    let (t, c) = (dir.path().join("time"), dir.path().join("counts"));
    store_of(&t, "split");
    store_of(&c, "instructions");
    let o = bin().arg("compare").arg(&t).arg(&c).output().unwrap();
    let s = text(&o);
    assert_eq!(o.status.code(), Some(1), "{s}");
    assert!(s.contains("measured ns") && s.contains("measured instructions") && s.contains("different units"), "{s}");
    // Counts with counts: compared (the same set: nothing slower, exit 0 with --fail-on-slower).
    let o = bin().arg("compare").arg(&c).arg(&c).arg("--fail-on-slower").output().unwrap();
    assert!(o.status.success(), "{}", text(&o));
    assert_eq!(Scenario::new([("clock", "instructions")]).unwrap().clock, Clock::Instructions);
}

/// `pqtls run FILE --clock instructions`: the file's configurations counted, in
/// `<name>-instructions`, records saying `clock = instructions` in their id and scenario, and
/// the report labelled in instructions.
#[test]
fn an_experiment_file_runs_with_instruction_counts() {
    let dir = tempfile::tempdir().unwrap();
    let exp = dir.path().join("e.toml");
    std::fs::write(
        &exp,
        "name = \"e\"\n[settings]\nwarmup = 200\nloops = 500\n[matrix]\nstack = [\"rustls\"]\n\
         group = [\"x25519\"]\nchain = [\"ed25519:ed25519\"]\n",
    )
    .unwrap();
    let results = dir.path().join("results");
    let o = bin()
        .arg("run")
        .arg(&exp)
        .arg("--results")
        .arg(&results)
        .args(["--clock", "instructions", "--counter", "callgrind", "--no-progress"])
        .env("PQTLS_PKI_DIR", pki())
        .output()
        .unwrap();
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let store = results.join("e-instructions");
    let line = std::fs::read_to_string(store.join("records.ndjson")).unwrap();
    let r: Record = serde_json::from_str(line.lines().next().unwrap()).unwrap();
    assert!(r.id.contains("clock=instructions"), "{}", r.id);
    assert_eq!(r.scenario["clock"], "instructions");
    let res = r.insitu().unwrap();
    assert_eq!(res.unit, CostUnit::Instructions);
    // The counts' settings: a few handshakes (10 to 40), not the file's 500.
    assert!((10..=40).contains(&res.loops.measured), "{:?}", res.loops);
    let o = bin().arg("report").arg(&store).args(["--markdown", "-"]).output().unwrap();
    let md = text(&o);
    assert!(o.status.success() && md.contains("# Instruction counts") && md.contains("k instr"), "{md}");
}
