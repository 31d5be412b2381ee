//! Bounded fuzzing in the normal test suite (no extra tool): the experiment parser, the
//! record reader (`Record::from_json_line` and the store's file reader) and the TLS wire
//! parser get mutated valid inputs and random bytes for a fixed time each. They must never
//! panic; what they accept must be consistent. A seeded generator makes every failure
//! reproducible: the panic message prints the seed and the input.
//!
//! `PQTLS_FUZZ_SECONDS` (read by this test, not by any library) lengthens a run, e.g. for a
//! nightly job: `PQTLS_FUZZ_SECONDS=600 cargo test -p pqtls-store --test fuzz --release`.

use pqtls_core::record::Record;
use pqtls_core::wire;
use pqtls_store::{Experiment, Store, StoreOptions};
use pqtls_testkit::synthetic;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;
use std::time::{Duration, Instant};

use pqtls_testkit::synthetic::Rng;

/// A uniform index below `n` (seeded: a failure names its seed and replays).
fn below(rng: &mut Rng, n: usize) -> usize {
    (rng.next() % n.max(1) as u64) as usize
}

/// Tokens that matter to the parsers, spliced in by the mutator.
const DICT: &[&[u8]] = &[
    b"\"",
    b"[",
    b"]",
    b"{",
    b"}",
    b",",
    b"=",
    b"\n",
    b"[matrix]",
    b"[settings]",
    b"[[extra]]",
    b"[baseline]",
    b"[[exclude]]",
    b"\"schema\":",
    b"99",
    b"-1",
    b"1e400",
    b"NaN",
    b"18446744073709551616",
    b"null",
    b"\"x25519\"",
    b"\"p256:p256\"",
    b"loops",
    b"warmup",
    b"precision",
    b"quantiles",
    b"\"kind\":\"transfer\"",
    b"\xff\xfe",
    b"\x00",
    b"0.0",
    b"\"\"",
    b"x25519,x25519",
    b"\"1%\"",
    b"group",
    b"chain",
    b"stack",
    b"\\u0000",
];

fn mutate(rng: &mut Rng, seeds: &[Vec<u8>]) -> Vec<u8> {
    let mut v = seeds[below(rng, seeds.len())].clone();
    for _ in 0..1 + below(rng, 6) {
        let at = below(rng, v.len() + 1);
        match below(rng, 7) {
            0 if !v.is_empty() => {
                let i = below(rng, v.len());
                v[i] ^= 1 << below(rng, 8);
            }
            1 => v.insert(at, rng.next() as u8),
            2 if at < v.len() => {
                let end = (at + 1 + below(rng, 16)).min(v.len());
                v.drain(at..end);
            }
            3 => {
                let t = DICT[below(rng, DICT.len())];
                v.splice(at..at, t.iter().copied());
            }
            4 => v.truncate(at),
            5 if !v.is_empty() => {
                // Duplicate a slice (repeated keys, lists, records).
                let a = below(rng, v.len());
                let b = (a + 1 + below(rng, 64)).min(v.len());
                let piece = v[a..b].to_vec();
                v.splice(at..at, piece);
            }
            _ => {
                let n = below(rng, 32);
                v.extend((0..n).map(|_| rng.next() as u8));
            }
        }
    }
    v
}

fn budget() -> Duration {
    let s = std::env::var("PQTLS_FUZZ_SECONDS").ok().and_then(|s| s.parse().ok()).unwrap_or(2.0);
    Duration::from_secs_f64(s)
}

/// Runs `target` on mutated inputs for the time budget; a panic fails with seed and input.
fn fuzz(name: &str, seed: u64, seeds: &[Vec<u8>], target: &mut dyn FnMut(&[u8])) -> u64 {
    let mut rng = Rng(seed);
    let t0 = Instant::now();
    let mut n = 0u64;
    // The seeds themselves, then mutations.
    for s in seeds {
        target(s);
    }
    // At least 101 mutations whatever a busy machine does in the budget, then more for it
    // (the count asserted below is a floor of coverage, not a speed).
    while (n <= 100 || t0.elapsed() < budget()) && n < 2_000_000 {
        let input = mutate(&mut rng, seeds);
        if catch_unwind(AssertUnwindSafe(|| target(&input))).is_err() {
            panic!("{name}: panic on input #{n} (seed {seed}): {:?}", String::from_utf8_lossy(&input));
        }
        n += 1;
    }
    assert!(n > 100, "{name}: only {n} inputs in {:?}", budget());
    n
}

fn shipped_experiments() -> Vec<Vec<u8>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../experiments");
    let mut v: Vec<Vec<u8>> =
        std::fs::read_dir(&dir).unwrap().map(|e| std::fs::read(e.unwrap().path()).unwrap()).collect();
    v.push(
        b"name = \"f\"\n[settings]\nwarmup = 1\nloops = 3\nquantiles = [15, 50, 99]\n[matrix]\nstack = [\"openssl\", \"rustls\"]\n\
          group = [\"x25519\", \"X25519MLKEM768\"]\nchain = [\"p256:p256\", \"mldsa65:mldsa87\"]\nkey_shares = [\"one\", \"X25519MLKEM768,x25519\"]\n\
          [[exclude]]\ngroup = \"x25519\"\nchain = \"mldsa65:mldsa87\"\n[baseline]\ngroup = \"x25519\"\n"
            .to_vec(),
    );
    v
}

#[test]
fn the_experiment_parser_never_panics_and_accepted_files_expand() {
    let seeds = shipped_experiments();
    let n = fuzz("experiment parser", 0x5eed_0001, &seeds, &mut |input| {
        let text = String::from_utf8_lossy(input);
        if let Ok(e) = Experiment::parse(&text, Path::new("fuzz.toml")) {
            // What is accepted expands into distinct scenarios and a valid settings block.
            let ids: std::collections::HashSet<String> = e.scenarios().iter().map(|s| s.id()).collect();
            assert_eq!(ids.len(), e.scenarios().len(), "an id twice in an accepted experiment");
            assert!(e.settings.loops.is_none_or(|l| l > 0));
        }
    });
    eprintln!("experiment parser: {n} inputs");
}

fn record_seeds() -> Vec<Vec<u8>> {
    let e = Experiment::parse(
        "name = \"f\"\n[matrix]\ngroup = [\"x25519\", \"MLKEM768\"]\nchain = [\"p256:p256\"]\n[baseline]\ngroup = \"x25519\"\n",
        Path::new("f.toml"),
    )
    .unwrap();
    e.scenarios()
        .iter()
        .map(|s| {
            let mut m = synthetic::measure(s, 7);
            m.record.settings = Some(e.settings.clone());
            pqtls_store::record_line(&m.record, "f").unwrap()
        })
        .collect()
}

#[test]
fn the_record_reader_never_panics_and_round_trips_what_it_accepts() {
    let seeds = record_seeds();
    let n = fuzz("record reader", 0x5eed_0002, &seeds, &mut |input| {
        if let Ok(r) = Record::from_json_line(&String::from_utf8_lossy(input)) {
            // An accepted record writes back to a line that reads as the same record.
            if let Ok(line) = serde_json::to_string(&r) {
                if let Ok(again) = Record::from_json_line(&line) {
                    assert_eq!(again.id, r.id);
                    assert_eq!(again.scenario, r.scenario);
                }
            }
        }
    });
    eprintln!("record reader: {n} inputs");
}

/// The store's file reader on damaged files: it opens (quarantining a bad last line) or refuses
/// with an error naming a line — never a panic, and never two records with one id.
#[test]
fn the_store_reader_never_panics_on_damaged_files() {
    let e = Experiment::parse(
        "name = \"f\"\n[matrix]\ngroup = [\"x25519\", \"MLKEM768\"]\nchain = [\"p256:p256\"]\n",
        Path::new("f.toml"),
    )
    .unwrap();
    let lines = record_seeds();
    let mut file = Vec::new();
    for l in &lines {
        file.extend_from_slice(l);
        file.push(b'\n');
    }
    let tmp = tempfile::tempdir().unwrap();
    let mut rng = Rng(0x5eed_0003);
    let t0 = Instant::now();
    let mut n = 0;
    // At least 50 damaged files whatever the disk's fsyncs cost, then more for the time budget.
    const AT_LEAST: usize = 50;
    while (n < AT_LEAST || t0.elapsed() < budget() / 2) && n < 2000 {
        let dir = tmp.path().join(format!("s{n}"));
        std::fs::create_dir_all(&dir).unwrap();
        let damaged = mutate(&mut rng, std::slice::from_ref(&file));
        std::fs::write(dir.join("records.ndjson"), &damaged).unwrap();
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let read = pqtls_store::read_records(&dir);
            let opened = Store::open(&dir, &e, &StoreOptions::default()).map(|s| s.records().map(|r| r.len()));
            let check = pqtls_store::check(&dir);
            (read.is_ok(), opened.is_ok(), check.map(|c| c.is_sound()))
        }));
        match outcome {
            Ok((_, opened, _)) => {
                if opened {
                    let (rs, _) = pqtls_store::read_records(&dir).unwrap();
                    let ids: std::collections::HashSet<_> = rs.iter().map(|r| &r.id).collect();
                    assert_eq!(ids.len(), rs.len());
                    assert!(pqtls_store::check(&dir).unwrap().is_sound(), "{:?}", String::from_utf8_lossy(&damaged));
                }
            }
            Err(_) => panic!("store reader panicked on {:?}", String::from_utf8_lossy(&damaged)),
        }
        n += 1;
    }
    eprintln!("store reader: {n} damaged files");
    assert!(n >= AT_LEAST);
}

/// A plaintext TLS 1.3 ClientHello (one record) with the given key shares, and a ServerHello.
fn client_hello(shares: &[(u16, usize)]) -> Vec<u8> {
    let mut ks = Vec::new();
    for (g, len) in shares {
        ks.extend_from_slice(&g.to_be_bytes());
        ks.extend_from_slice(&(*len as u16).to_be_bytes());
        ks.extend(std::iter::repeat_n(0xab, *len));
    }
    let mut ext_data = (ks.len() as u16).to_be_bytes().to_vec();
    ext_data.extend(ks);
    let mut exts = 0x0033u16.to_be_bytes().to_vec();
    exts.extend_from_slice(&(ext_data.len() as u16).to_be_bytes());
    exts.extend(ext_data);
    let mut body = vec![3, 3];
    body.extend([7u8; 32]);
    body.push(0); // session id
    body.extend([0, 2, 0x13, 0x01]); // cipher suites
    body.extend([1, 0]); // compression
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend(exts);
    wrap(1, &body)
}

fn server_hello(group: u16, len: usize) -> Vec<u8> {
    let mut ks = group.to_be_bytes().to_vec();
    ks.extend_from_slice(&(len as u16).to_be_bytes());
    ks.extend(std::iter::repeat_n(0xcd, len));
    let mut exts = 0x0033u16.to_be_bytes().to_vec();
    exts.extend_from_slice(&(ks.len() as u16).to_be_bytes());
    exts.extend(ks);
    let mut body = vec![3, 3];
    body.extend([9u8; 32]);
    body.push(0);
    body.extend([0x13, 0x01, 0]);
    body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
    body.extend(exts);
    wrap(2, &body)
}

fn wrap(msg_type: u8, body: &[u8]) -> Vec<u8> {
    let mut hs = vec![msg_type];
    hs.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    hs.extend_from_slice(body);
    let mut rec = vec![22, 3, 3];
    rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
    rec.extend(hs);
    rec
}

#[test]
fn the_wire_parser_never_panics_and_reads_what_was_built() {
    let ch = client_hello(&[(0x11ec, 1216), (0x001d, 32)]);
    let sh = server_hello(0x11ec, 1120);
    // The seeds parse as built.
    let msgs = wire::handshake_messages(&ch);
    assert_eq!(msgs.len(), 1);
    assert_eq!(wire::client_key_shares(&msgs[0].1), Some(vec![(0x11ec, 1216), (0x001d, 32)]));
    let msgs = wire::handshake_messages(&sh);
    assert_eq!(wire::server_key_share(&msgs[0].1), Some((0x11ec, 1120)));

    let seeds = vec![ch, sh, client_hello(&[]), server_hello(0x001d, 32)];
    let n = fuzz("wire parser", 0x5eed_0004, &seeds, &mut |input| {
        let msgs = wire::handshake_messages(input);
        let total: usize = msgs.iter().map(|(_, b)| b.len() + 4).sum();
        assert!(total <= input.len(), "messages longer than the stream");
        for (t, body) in &msgs {
            let client = *t == 1;
            let _ = wire::hello_extensions(body, client);
            if let Some(shares) = wire::client_key_shares(body) {
                assert!(shares.iter().map(|(_, l)| l + 4).sum::<usize>() <= body.len());
            }
            if let Some((_, l)) = wire::server_key_share(body) {
                assert!(l <= body.len());
            }
        }
        // The message parsers also get raw bytes, not only what a record stream yields.
        let _ = wire::hello_extensions(input, true);
        let _ = wire::hello_extensions(input, false);
        let _ = wire::client_key_shares(input);
        let _ = wire::server_key_share(input);
    });
    eprintln!("wire parser: {n} inputs");
}
