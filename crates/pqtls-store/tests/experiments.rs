//! Experiment files: parsing, validation errors with file:line:column, expansion.

use pqtls_store::Experiment;
use std::path::{Path, PathBuf};

fn parse(text: &str) -> Result<Experiment, String> {
    Experiment::parse(text, Path::new("exp.toml")).map_err(|e| e.to_string())
}

fn shipped(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments").join(name)
}

const SMALL: &str = r#"
name = "small"
[settings]
warmup = 5
loops = 20
[matrix]
group = ["x25519", "X25519MLKEM768"]
chain = ["p256:p256", "mldsa65:mldsa65"]
send_root = [false, true]
"#;

#[test]
fn matrix_expands_in_a_deterministic_order() {
    let e = parse(SMALL).unwrap();
    let ids: Vec<String> = e.scenarios().iter().map(|c| c.id()).collect();
    assert_eq!(ids.len(), 8);
    // First factor outermost, the last named factor fastest.
    assert_eq!(ids[0], "openssl|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0");
    assert_eq!(ids[1], "openssl|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=1|parent=0");
    assert_eq!(ids[2], "openssl|x25519|mldsa65:mldsa65|TLS_AES_128_GCM_SHA256|root=0|parent=0");
    assert_eq!(ids[4], "openssl|X25519MLKEM768|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0");
    assert_eq!(ids, parse(SMALL).unwrap().scenarios().iter().map(|c| c.id()).collect::<Vec<_>>());
    assert_eq!(e.settings.loops, Some(20));
    assert_eq!(e.settings.warmup, 5);
    assert!(e.scenarios().iter().all(|s| s.value("transport") == "memory"));
}

#[test]
fn exclusions_and_extra_points() {
    let e = parse(
        r#"
[matrix]
group = ["x25519", "MLKEM768"]
chain = ["p256", "mldsa44:mldsa44"]
[[exclude]]
group = "MLKEM768"
chain = ["P-256:P-256"]
[[extra]]
stack = "rustls"
group = "X25519MLKEM768,x25519"
key_shares = "X25519MLKEM768+x25519"
share_x25519 = true
[[extra]]
group = "x25519"
"#,
    )
    .unwrap();
    let ids: Vec<String> = e.scenarios().iter().map(|c| c.id()).collect();
    assert_eq!(e.excluded, 1);
    // 4 - 1 excluded + 1 extra (the second extra repeats a matrix point: kept once).
    assert_eq!(ids.len(), 4, "{ids:#?}");
    assert!(!ids.iter().any(|i| i.contains("MLKEM768|p256:p256")));
    assert_eq!(
        ids[3],
        "rustls|X25519MLKEM768,x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0|shares=X25519MLKEM768,x25519|share_x25519"
    );
}

#[test]
fn bad_toml_names_file_line_and_column() {
    let e = parse("[matrix]\ngroup = [\"x25519\"\nchain = 3\n").unwrap_err();
    assert!(e.starts_with("exp.toml: 1 problem"), "{e}");
    assert!(e.contains("exp.toml:2:") || e.contains("exp.toml:3:"), "{e}");
    assert!(e.contains("invalid TOML"), "{e}");
}

#[test]
fn unknown_factor_lists_the_known_ones() {
    let e = parse("[matrix]\ngroup = [\"x25519\"]\nchain = [\"p256\"]\ncurve = [\"p256\"]\n").unwrap_err();
    assert!(e.contains("exp.toml:4:1: unknown factor 'curve' in [matrix]; known factors: stack, group, chain"), "{e}");
    let e = parse("[matrix]\ngrup = [\"x25519\"]\nchain = [\"p256\"]\n").unwrap_err();
    assert!(e.contains("exp.toml:2:1: unknown factor 'grup' (did you mean 'group'?) in [matrix]"), "{e}");
    let e = parse("nme = \"x\"\n[matrix]\ngroup = [\"x25519\"]\nchain = [\"p256\"]\n").unwrap_err();
    assert!(e.contains("unknown key 'nme' (did you mean 'name'?)"), "{e}");
    let e = parse("group = [\"x25519\"]\n[matrix]\nchain = [\"p256\"]\n").unwrap_err();
    assert!(e.contains("exp.toml:1:1: unknown key 'group'") && e.contains("factors go in [matrix]"), "{e}");
    let e = parse("[settings]\nloop = 3\n[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n").unwrap_err();
    assert!(
        e.contains("exp.toml:2:1: unknown setting 'loop' (did you mean 'loops'?); [settings] takes: warmup, loops"),
        "{e}"
    );
}

#[test]
fn unknown_algorithms_list_the_catalogue_and_every_error_is_reported() {
    let e =
        parse("[matrix]\ngroup = [\"x25519\", \"x25520\"]\nchain = [\"p256:nope\"]\ncipher = \"rc4\"\n").unwrap_err();
    assert!(e.contains("3 problems"), "{e}");
    assert!(e.contains("exp.toml:2:20: unknown group 'x25520' (did you mean 'x25519'?); known: secp256r1"), "{e}");
    assert!(e.contains("X25519MLKEM768"), "{e}");
    assert!(e.contains("exp.toml:3:10: unknown signature algorithm 'nope'; known: rsa2048"), "{e}");
    assert!(e.contains("exp.toml:4:10: unknown cipher suite 'rc4'; known: TLS_AES_128_GCM_SHA256"), "{e}");
}

#[test]
fn empty_matrix_is_an_error() {
    let e = parse("[matrix]\ngroup = []\nchain = [\"p256\"]\n").unwrap_err();
    assert!(e.contains("exp.toml:2:9: group in [matrix] is an empty list"), "{e}");
    let e = parse("[matrix]\ngroup = [\"x25519\"]\nchain = [\"p256\"]\n[[exclude]]\ngroup = \"x25519\"\n").unwrap_err();
    assert!(e.contains("exp.toml:1:1: the matrix is empty: all 1 configurations are excluded"), "{e}");
    let e = parse("[settings]\nwarmup = 1\n").unwrap_err();
    assert!(e.contains("no [matrix] table"), "{e}");
}

#[test]
fn unsupported_combinations_fail_or_are_skipped_explicitly() {
    let text = "[matrix]\nstack = [\"openssl\", \"rustls\"]\ngroup = [\"x25519\", \"ffdhe2048\"]\nchain = [\"p256\"]\n";
    let e = parse(text).unwrap_err();
    assert!(e.contains("configuration rustls|ffdhe2048|"), "{e}");
    assert!(e.contains("group ffdhe2048 is not available on rustls; stacks that have it: openssl"), "{e}");
    assert!(e.contains("skip_unsupported = true"), "{e}");
    let e = parse(&format!("skip_unsupported = true\n{text}")).unwrap();
    assert_eq!(e.scenarios().len(), 3);
    assert_eq!(e.skipped.len(), 1);
    assert!(e.skipped[0].id.starts_with("rustls|ffdhe2048") && e.skipped[0].reason.contains("not available"));
}

#[test]
fn settings_are_checked() {
    let e = parse(
        "[settings]\nloops = 10\nprecision = \"1%\"\nmode = \"fast\"\n[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n",
    )
    .unwrap_err();
    assert!(e.contains("exp.toml:3:13: give either loops"), "{e}");
    assert!(e.contains("exp.toml:4:8: transport: unknown transport 'fast'; known: memory, socketpair, tcp"), "{e}");
    let e = parse("[settings]\nprecision = \"2%\"\nmax_loops = 3000\nquantiles = [5, 95]\n[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n")
        .unwrap();
    assert_eq!(e.settings.precision, Some(0.02));
    assert_eq!(e.settings.loops, None);
    assert_eq!(e.settings.quantiles.0, vec![0.05, 0.5, 0.95]);
    // What `insitu` takes as flags, an experiment takes too: the exact clock and a transport
    // for the whole matrix, or varied in it.
    let e = parse("[settings]\nclock = \"cpu\"\nmode = \"threads\"\n[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n")
        .unwrap();
    assert_eq!(e.scenarios()[0].clock, pqtls_core::trace::Clock::Cpu);
    assert!(e.scenarios()[0].id().ends_with("|transport=socketpair|clock=cpu"), "{}", e.scenarios()[0].id());
    let e = parse("[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\ntransport=[\"memory\",\"tcp\"]\n").unwrap();
    assert_eq!(e.scenarios().len(), 2);
    let e = parse("[settings]\nmemory = \"yes\"\n[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n").unwrap_err();
    assert!(e.contains("exp.toml:2:10") && e.contains("memory"), "{e}");
    let e = parse("[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\nrtt=[\"50ms\"]\n").unwrap_err();
    assert!(e.contains("rtt = 50ms is not measurable by the insitu measurement"), "{e}");
}

#[test]
fn shipped_experiments_are_valid() {
    let e = Experiment::load(&shipped("in-situ.toml")).unwrap();
    assert_eq!(e.scenarios().len(), 11 * 11 * 5 * 2 * 2);
    assert_eq!(e.name, "in-situ");
    let d = Experiment::load(&shipped("default.toml")).unwrap();
    assert_eq!(d.scenarios().len(), 3 * 2 * 2);
    assert_eq!(d.settings.max_loops, 3000);
    assert!(!d.settings.memory);
    // The memory study counts heap allocations (`[settings] memory = true`, as `insitu --memory`).
    let m = Experiment::load(&shipped("memory.toml")).unwrap();
    assert_eq!(m.scenarios().len(), 2 * 3 * 3 * 2);
    assert!(m.settings.memory);
    let s = Experiment::load(&shipped("stack-comparison.toml")).unwrap();
    assert_eq!(s.scenarios().len(), 2 * 2 * 4 * 2 + 3);
    let base = s.scenarios()[2].clone();
    assert_eq!(
        s.baseline.baseline_of(&base).unwrap(),
        "openssl|x25519|p256:p256|TLS_AES_128_GCM_SHA256|root=0|parent=0"
    );
}

#[test]
fn the_documented_factor_table_lists_every_factor() {
    let doc = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/experiments.md")).unwrap();
    for f in pqtls_core::factor::FACTORS {
        assert!(doc.contains(&format!("| `{}`", f.name)), "docs/experiments.md does not list the factor {}", f.name);
        for a in f.aliases {
            assert!(doc.contains(&format!("`{a}`")), "docs/experiments.md does not list {}'s alias {a}", f.name);
        }
    }
}

/// `pqtls run FILE --clock instructions`: every scenario counts instructions, the results go
/// beside the time-based ones, the settings become counts' (few handshakes); a load
/// experiment refuses (the clock is the in-situ measurement's).
#[test]
fn an_experiment_with_another_clock_counts_instructions_in_its_own_directory() {
    let text = "name = \"x\"\n[settings]\nwarmup = 200\nprecision = \"2%\"\nmin_loops = 200\nmax_loops = 3000\n\
                [matrix]\ngroup = [\"x25519\", \"X25519MLKEM768\"]\nchain = [\"p256:p256\"]\n";
    let e = Experiment::parse(text, Path::new("x.toml")).unwrap();
    let c = e.clone().with_clock(pqtls_core::trace::Clock::Instructions).unwrap();
    assert_eq!(c.name, "x-instructions");
    assert!(c.scenarios().iter().all(|s| s.clock == pqtls_core::trace::Clock::Instructions));
    assert!(c.scenarios().iter().all(|s| s.id().contains("instructions")), "ids name the clock");
    assert_eq!(c.settings, e.settings.for_counts());
    assert_eq!((c.settings.warmup, c.settings.min_loops, c.settings.max_loops), (3, 10, 40));
    let text = "name = \"l\"\nmeasurement = \"load\"\n[matrix]\ngroup = [\"x25519\"]\nchain = \"ed25519:ed25519\"\n";
    let load = Experiment::parse(text, Path::new("l.toml")).unwrap();
    let err = load.with_clock(pqtls_core::trace::Clock::Instructions).unwrap_err().to_string();
    assert!(err.contains("--clock applies to in-situ experiments"), "{err}");
}

#[test]
fn resident_experiments_read_the_connections_held_and_refuse_bad_ones() {
    let e = Experiment::load(&shipped("resident.toml")).unwrap();
    assert_eq!(e.kind, pqtls_core::factor::Kind::Resident);
    // pqtls serve: 2 stacks × 3 configurations × 2; nginx and HAProxy: 2 × 3 × 2.
    assert_eq!(e.scenarios().len(), 24);
    assert_eq!(e.settings.resident.held, vec![1000, 10_000]);
    assert_eq!(e.settings.resident.settle_ms, 500);
    let head = "measurement = \"resident\"\n[settings]\n";
    let tail = "[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n";
    let e = parse(&format!("{head}held = [500, 0, 50]\n{tail}")).unwrap();
    assert_eq!(e.settings.resident.held, vec![50, 500], "sorted, the 0 reading implied");
    let e = parse(&format!("{head}held = [0]\n{tail}")).unwrap_err();
    assert!(e.contains("exp.toml:3:8") && e.contains("at least one number of connections above 0"), "{e}");
    let e = parse(&format!("{head}held = 1000\n{tail}")).unwrap_err();
    assert!(e.contains("exp.toml:3:8") && e.contains("a list of connection counts"), "{e}");
    let e = parse(&format!("{head}settle = \"soon\"\n{tail}")).unwrap_err();
    assert!(e.contains("exp.toml:3:10") && e.contains("settle"), "{e}");
}

/// The in-situ time cap per configuration (`max_time`, issue 35): a duration with its unit;
/// none, a number or less than a millisecond is refused saying what works.
#[test]
fn insitu_experiments_read_a_time_cap_and_refuse_bad_ones() {
    let head = "[settings]\nprecision = \"2%\"\n";
    let tail = "[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n";
    let e = parse(&format!("{head}{tail}")).unwrap();
    assert_eq!(e.settings.max_time_ms, None, "no time cap unless asked");
    let e = parse(&format!("{head}max_time = \"2.5min\"\n{tail}")).unwrap();
    assert_eq!(e.settings.max_time_ms, Some(150_000));
    assert!(e.to_toml().contains("max_time = \"150s\""), "{}", e.to_toml());
    for (bad, says) in [("\"soon\"", "max_time"), ("\"500us\"", "is under 1 ms"), ("20", "max_time must be a string")] {
        let err = parse(&format!("{head}max_time = {bad}\n{tail}")).unwrap_err();
        assert!(err.contains("exp.toml:3:12") && err.contains(says) && err.contains("20s"), "{bad}: {err}");
    }
    let load =
        "measurement = \"load\"\n[settings]\nmax_time = \"5s\"\n[matrix]\ngroup=[\"x25519\"]\nchain=[\"p256\"]\n";
    let err = parse(load).unwrap_err();
    assert!(err.contains("'max_time' is a setting of the insitu measurement"), "{err}");
}

/// Issue 39: a setting the experiment's measurement does not read is refused, naming the
/// measurement it belongs to and what this one takes.
#[test]
fn settings_of_another_measurement_are_refused() {
    let load = "name = \"l\"\nmeasurement = \"load\"\n[settings]\nloops = 100\nduration = \"5s\"\n[matrix]\ngroup = [\"x25519\"]\nchain = [\"p256:p256\"]\n";
    let e = Experiment::parse(load, std::path::Path::new("l.toml")).unwrap_err().to_string();
    assert!(
        e.contains("l.toml:4:1: 'loops' is a setting of the insitu measurement; this experiment measures load"),
        "{e}"
    );
    assert!(e.contains("load takes: memory, duration, warmup_time, requests, timeout"), "{e}");
    let insitu =
        "name = \"i\"\n[settings]\nduration = \"5s\"\n[matrix]\ngroup = [\"x25519\"]\nchain = [\"p256:p256\"]\n";
    let e = Experiment::parse(insitu, std::path::Path::new("i.toml")).unwrap_err().to_string();
    assert!(e.contains("'duration' is a setting of the load and layers and transfer measurement"), "{e}");
}

/// A file describing more configurations than the cap is refused before anything is expanded
/// (issue 39: a 1.6 KB file of 10^6 reached 3.8 GB and aborted), naming the count, how it
/// arises and the cap; an extra table's points count too.
#[test]
fn a_matrix_beyond_the_cap_is_refused_before_it_is_expanded() {
    let ten = |f: &dyn Fn(usize) -> String| (1..=10).map(|i| format!("\"{}\"", f(i))).collect::<Vec<_>>().join(", ");
    let lists = format!(
        "connections = [{}]\nresponse_size = [{}]\nthreads = [{}]\nrate = [{}]\n",
        ten(&|i| i.to_string()),
        ten(&|i| format!("{i}KiB")),
        ten(&|i| i.to_string()),
        ten(&|i| format!("{i}/s")),
    );
    let one = format!("measurement = \"load\"\n[matrix]\ngroup = [\"x25519\"]\nchain = [\"p256\"]\n{lists}");
    assert_eq!(parse(&one).unwrap().scenarios().len(), 10_000, "below the cap: expanded");
    let groups = "group = [\"x25519\", \"secp256r1\", \"secp384r1\", \"secp521r1\", \"X25519MLKEM768\", \"MLKEM1024\"]";
    let six = one.replace("group = [\"x25519\"]", groups);
    let twelve = six.replace("chain = [\"p256\"]", "chain = [\"p256\", \"p384\"]");
    let e = parse(&twelve).unwrap_err();
    assert!(e.contains("120000 configurations (6 group × 2 chain × 10 threads"), "{e}");
    assert!(e.contains("more than the 100000"), "{e}");
    // 60,000 in the matrix and 60,000 more in an extra table.
    let e = parse(&format!("{six}[[extra]]\n{groups}\n{lists}")).unwrap_err();
    assert!(e.contains("120000 configurations"), "{e}");
    assert!(e.contains("pqtls run --max-configurations 120000"), "the refusal names the flag that raises it: {e}");
    // The cap a run gives (`--max-configurations`): below it expanded, above it refused.
    let path = std::path::Path::new("capped.toml");
    let e = Experiment::parse_capped(&one, path, 9_999).unwrap_err().to_string();
    assert!(e.contains("10000 configurations") && e.contains("more than the 9999"), "{e}");
    assert_eq!(Experiment::parse_capped(&one, path, 10_000).unwrap().scenarios().len(), 10_000);
}
