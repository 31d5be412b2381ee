//! Experiment files written from values (`Experiment::to_toml`, `Experiment::new`): parsing
//! what is written gives the same experiment back, for every shipped experiment file.

use pqtls_core::factor::Kind;
use pqtls_store::{BaselineRule, Experiment, Matrix, Settings};
use std::path::{Path, PathBuf};

/// Everything an experiment says, its path and source text aside.
fn meaning(e: &Experiment) -> impl PartialEq + std::fmt::Debug + '_ {
    let ids: Vec<String> = e.scenarios().iter().map(|s| s.id()).collect();
    (
        (&e.name, &e.description, e.kind, &e.settings, e.skip_unsupported, &e.skipped, e.excluded),
        (&e.baseline, &e.matrix, e.scenarios(), ids),
    )
}

fn toml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for p in entries.map(|e| e.unwrap().path()) {
        if p.is_dir() {
            toml_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "toml") {
            out.push(p);
        }
    }
}

/// experiments/*.toml and the experiment files among the crates' test fixtures.
fn shipped_experiment_files() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let mut files = Vec::new();
    toml_files(&root.join("experiments"), &mut files);
    for krate in std::fs::read_dir(root.join("crates")).unwrap().map(|e| e.unwrap().path()) {
        toml_files(&krate.join("tests/fixtures"), &mut files);
    }
    files.retain(|f| std::fs::read_to_string(f).is_ok_and(|t| t.lines().any(|l| l.trim() == "[matrix]")));
    files.sort();
    files
}

#[test]
fn parse_after_write_is_the_identity_on_every_shipped_experiment_file() {
    let files = shipped_experiment_files();
    assert!(files.len() >= 13, "{files:?}");
    for f in files {
        let read = Experiment::load(&f).unwrap_or_else(|e| panic!("{e}"));
        let text = read.to_toml();
        let again = Experiment::parse(&text, Path::new("written.toml"))
            .unwrap_or_else(|e| panic!("{}: {e}\n{text}", f.display()));
        assert_eq!(meaning(&again), meaning(&read), "{}: written as\n{text}", f.display());
        // Writing is a fixed point: the written text is written again unchanged.
        assert_eq!(again.to_toml(), text, "{}", f.display());
    }
}

#[test]
fn every_setting_and_table_survives_the_round_trip() {
    // Every setting, each in an experiment of a measurement that reads it (another
    // measurement's setting is refused).
    let settings = [
        ("insitu", "warmup = 7\nprecision = \"1.5%\"\nmin_loops = 30\nmax_loops = 300\nmax_time = \"1500ms\"\nquantiles = [10, 50, 99.9]\nraw_samples = true\nmemory = true\n"),
        ("load", "memory = true\nduration = \"2s\"\nwarmup_time = \"0s\"\ntimeout = \"1500ms\"\nrequests = 100\n"),
        ("resident", "held = [10, 5]\nsettle = \"250ms\"\n"),
    ];
    for (measurement, settings) in settings {
        let transport = if measurement == "insitu" { "transport = \"tcp\"\n" } else { "" };
        let keep_alive = if measurement == "load" { "keep_alive = [false]\n" } else { "" };
        let text = format!(
            r#"
name = "all-keys"
description = "every key the format has"
measurement = "{measurement}"
skip_unsupported = true
[settings]
{settings}{transport}
[matrix]
stack = ["rustls", "openssl"]
group = ["x25519", "X25519MLKEM768"]
chain = ["p256:p256"]
{keep_alive}
[[exclude]]
stack = ["rustls"]
group = ["X25519MLKEM768"]
[[extra]]
group = ["secp256r1"]
[baseline]
group = "x25519"
"#
        );
        let read = Experiment::parse(&text, Path::new("all-keys.toml")).unwrap();
        assert_eq!(read.excluded, 1, "{measurement}");
        if measurement == "insitu" {
            assert_eq!(read.matrix.fixed, [("transport".to_string(), "tcp".to_string())]);
        }
        let again = Experiment::parse(&read.to_toml(), Path::new("x.toml")).unwrap();
        assert_eq!(meaning(&again), meaning(&read), "{}", read.to_toml());
    }
    // A fixed loop count, and settings left at their defaults, are written as the parser reads them.
    for loops in ["loops = 1000", "loops = 20", "max_loops = 500", ""] {
        let text = format!("[settings]\n{loops}\n[matrix]\ngroup = [\"x25519\"]\nchain = [\"p256:p256\"]\n");
        let read = Experiment::parse(&text, Path::new("loops.toml")).unwrap();
        let again = Experiment::parse(&read.to_toml(), Path::new("loops.toml")).unwrap();
        assert_eq!(meaning(&again), meaning(&read), "{loops:?}: {}", read.to_toml());
    }
}

#[test]
fn an_experiment_made_in_code_is_what_its_file_reads_as() {
    let matrix = Matrix {
        factors: vec![("group".into(), vec!["x25519".into()]), ("chain".into(), vec!["p256:p256".into()])],
        extra: vec![vec![("group".into(), vec!["X25519MLKEM768".into()])]],
        ..Matrix::default()
    };
    let baseline = BaselineRule { factors: vec![("group".into(), "x25519".into())] };
    let settings = Settings { warmup: 3, ..Settings::default() };
    let e =
        Experiment::new("made", "in code", Kind::Insitu, settings.clone(), matrix.clone(), baseline.clone()).unwrap();
    assert_eq!((e.name.as_str(), e.description.as_str(), e.settings.warmup), ("made", "in code", 3));
    assert_eq!((&e.matrix, &e.baseline), (&matrix, &baseline));
    assert_eq!(e.scenarios().len(), 2);
    assert_eq!(e.source, e.to_toml());
    let file = Experiment::parse(&e.source, Path::new("made.toml")).unwrap();
    assert_eq!(meaning(&file), meaning(&e));
    // Values the parser refuses are refused here too, with what would work.
    let bad = Matrix { factors: vec![("group".into(), vec!["x25519".into()])], ..Matrix::default() };
    let err = Experiment::new("bad", "", Kind::Insitu, settings, bad, BaselineRule::default()).unwrap_err();
    assert!(err.to_string().contains("no 'chain' list"), "{err}");
}
