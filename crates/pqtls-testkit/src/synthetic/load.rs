//! Made-up load records (`kind = "load"`, issue 9) with a realistic shape: rates that fall with
//! the handshake's CPU cost, real HdrHistograms of latencies (so merges and percentiles are
//! exact), errors by kind, the terminator of each row, shards. Deterministic per scenario id
//! and shard. Invented numbers: never use them as results.

use super::{bytes_of, negotiated_as_asked, synthetic_record, Rng};
use pqtls_core::backend::Negotiated;
use pqtls_core::catalogue::{GroupKind, Stack};
use pqtls_core::load::{count_error, histogram, Latency, LoadResult, LoadShare, ServerSide, Terminator};
use pqtls_core::record::{Outcome, Record};
use pqtls_core::scenario::Scenario;
use pqtls_core::timeline::LAYER_NAMES;
use sha2::{Digest, Sha256};

/// The TLS configurations (group, chain) of SPEC.md's reference experiment 2 as written
/// (experiments/throughput-22.toml); its "no TLS" baseline is [`plain`]. 23 TLS rows: the list
/// names 23 (plus no TLS), though the study calls itself the 22-configuration matrix.
pub const STUDY: &[(&str, &str)] = &[
    ("ffdhe3072", "rsa4096:rsa4096"),
    ("x25519", "ed25519:ed25519"),
    ("MLKEM512", "ed25519:ed25519"),
    ("frodo640aes", "ed25519:ed25519"),
    ("x25519", "mldsa44:mldsa44"),
    ("x25519", "falcon512:falcon512"),
    ("x25519", "slhdsa-sha2-128s:slhdsa-sha2-128s"),
    ("x25519", "slhdsa-sha2-128f:slhdsa-sha2-128f"),
    ("x25519", "slhdsa-shake-128s:slhdsa-shake-128s"),
    ("x25519", "slhdsa-shake-128f:slhdsa-shake-128f"),
    ("MLKEM512", "mldsa44:mldsa44"),
    ("MLKEM512", "falcon512:falcon512"),
    ("MLKEM512", "slhdsa-sha2-128s:slhdsa-sha2-128s"),
    ("MLKEM512", "slhdsa-sha2-128f:slhdsa-sha2-128f"),
    ("frodo640aes", "mldsa44:mldsa44"),
    ("frodo640aes", "falcon512:falcon512"),
    ("frodo640aes", "slhdsa-sha2-128s:slhdsa-sha2-128s"),
    ("frodo640aes", "slhdsa-sha2-128f:slhdsa-sha2-128f"),
    ("x25519_mlkem512", "ed25519:ed25519"),
    ("x25519_frodo640aes", "ed25519:ed25519"),
    ("x25519", "mldsa44_ed25519:mldsa44_ed25519"),
    ("x25519_mlkem512", "mldsa44_ed25519:mldsa44_ed25519"),
    ("x25519_frodo640aes", "mldsa44_ed25519:mldsa44_ed25519"),
];

/// Client threads of the study.
pub const STUDY_THREADS: [u64; 3] = [1, 4, 8];

/// The study's cipher suite.
pub const STUDY_CIPHER: &str = "TLS_AES_256_GCM_SHA384";

/// Measured seconds of every fabricated run (short: the histograms stay small).
const DURATION_S: u64 = 3;

/// The study's scenario of one row (1 KiB responses, one connection per request): on OpenSSL
/// terminated by HAProxy where OpenSSL negotiates both the group and the signature, else on
/// rustls terminated by `pqtls serve`, as experiments/throughput-22.toml measures them.
pub fn study_scenario(group: &str, chain: &str, threads: u64) -> Scenario {
    let t = threads.to_string();
    let sc = Scenario::new([
        ("group", group),
        ("chain", chain),
        ("cipher", STUDY_CIPHER),
        ("threads", t.as_str()),
        ("response_size", "1KiB"),
    ])
    .expect("the study's configurations are in the catalogue");
    let (stack, terminator) = if openssl_can(&sc) { ("openssl", "haproxy") } else { ("rustls", "pqtls") };
    sc.with([("stack", stack), ("terminator", terminator)]).expect("a stack and a terminator")
}

fn openssl_can(sc: &Scenario) -> bool {
    let h = &sc.handshake;
    h.expected_group().provided_by(Stack::Openssl) && h.chain.leaf.provided_by(Stack::Openssl)
}

/// Every row of the study × [`STUDY_THREADS`], the "no TLS" rows first.
pub fn study() -> Vec<Record> {
    let mut out: Vec<Record> = STUDY_THREADS.iter().map(|t| plain(*t)).collect();
    for (g, c) in STUDY {
        for t in STUDY_THREADS {
            out.push(load(&study_scenario(g, c, t), false));
        }
    }
    out
}

/// Server CPU per handshake inside the stack's calls, ns.
fn sign_ns(alg: &str) -> f64 {
    match alg {
        a if a.starts_with("rsa") => 3_800_000.0,
        "ed25519" => 22_000.0,
        "falcon512" => 180_000.0,
        "mldsa44_ed25519" => 140_000.0,
        a if a.starts_with("mldsa") => 110_000.0,
        a if a.starts_with("slhdsa") && a.ends_with('s') => 60_000_000.0,
        a if a.starts_with("slhdsa") => 3_000_000.0,
        _ => 200_000.0,
    }
}

fn verify_ns(alg: &str) -> f64 {
    match alg {
        a if a.starts_with("rsa") => 70_000.0,
        "ed25519" => 55_000.0,
        "falcon512" => 40_000.0,
        a if a.starts_with("slhdsa") && a.ends_with('s') => 300_000.0,
        a if a.starts_with("slhdsa") => 900_000.0,
        _ => 60_000.0,
    }
}

fn kex_ns(sc: &Scenario) -> f64 {
    let g = sc.handshake.expected_group();
    let one = |name: &str, kind: &GroupKind| match (name, kind) {
        (n, _) if n.starts_with("ffdhe") => 4_000_000.0,
        (n, _) if n.starts_with("frodo") => 900_000.0,
        (_, GroupKind::Kem { .. }) => 40_000.0,
        _ => 45_000.0,
    };
    match g.components() {
        Some((a, b)) => one(a.name, &a.kind) + one(b.name, &b.kind),
        None => one(g.name, &g.kind),
    }
}

/// Share of two cores the run gets with this many client threads (client and server compete).
fn cores_used(threads: u64) -> f64 {
    match threads {
        1 => 1.0,
        2..=4 => 1.85,
        _ => 1.75,
    }
}

fn seed_of(text: &str) -> u64 {
    let d = Sha256::digest(text.as_bytes());
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], d[6], d[7]]) | 1
}

/// A whole run of `sc` (a load scenario: its threads, connections, rate, response size and
/// keep-alive are read), with per-layer distributions when `layers`.
pub fn load(sc: &Scenario, layers: bool) -> Record {
    part(sc, None, layers)
}

/// The `n` shards of one run of `sc` (`--shard K/N`: each did 1/n of the target rate or of
/// the connections, with its own latencies).
pub fn shards(sc: &Scenario, n: u32) -> Vec<Record> {
    (1..=n).map(|k| part(sc, Some(LoadShare { index: k, count: n }), false)).collect()
}

fn part(sc: &Scenario, shard: Option<LoadShare>, layers: bool) -> Record {
    let mut rng = Rng(seed_of(&format!("{}#{shard:?}", sc.id())));
    let h = &sc.handshake;
    let leaf = h.chain.leaf.name;
    let kex = kex_ns(sc);
    let client_cpu = kex * 0.5 + 60_000.0 + verify_ns(leaf) + (h.chain.algs().len() as f64 - 1.0) * 5_000.0;
    let server_cpu = kex * 0.5 + 50_000.0 + sign_ns(leaf);
    let via_haproxy = sc.load.terminator == "haproxy";
    let terminator = if via_haproxy {
        Terminator {
            name: "haproxy".into(),
            version: "HAProxy 3.0.11 (OpenSSL 3.5.1)".into(),
            backend: Some("pqtls serve --plain".into()),
        }
    } else {
        Terminator { name: "pqtls".into(), version: "pqtls synthetic (rustls)".into(), backend: None }
    };
    let mut l = fabricate(sc, shard, &mut rng, client_cpu, server_cpu, layers);
    l.negotiated = negotiated_as_asked(h);
    l.terminator = terminator;
    l.bytes = Some(bytes_of(sc));
    l.client_handshake_cpu_ns_mean = client_cpu * (1.0 + 0.1 * rng.unit());
    if !via_haproxy {
        l.server = Some(ServerSide {
            handshakes: l.handshakes,
            requests: l.requests,
            handshake_cpu_ns_mean: server_cpu * (1.05 + 0.1 * rng.unit()),
            process_cpu_ns_per_handshake: Some(server_cpu * 1.1 + 40_000.0),
            heap: None,
            phases: None,
            errors: Vec::new(),
        });
    }
    // Slow signers time out now and then with many clients; Frodo's big messages meet a reset.
    if sc.load.threads >= 8 && leaf.starts_with("slhdsa") && leaf.ends_with('s') {
        for _ in 0..3 {
            count_error(&mut l.errors, "timeout", "no response within 10 s".into());
        }
    }
    if sc.load.threads >= 8 && h.expected_group().name.contains("frodo") {
        count_error(&mut l.errors, "io", "connection reset by peer while reading the ServerHello".into());
    }
    record(sc, shard, l)
}

/// The "no TLS" baseline: plain HTTP to the backend (`pqtls serve --plain`), `tls = false`.
pub fn plain(threads: u64) -> Record {
    let sc = study_scenario("x25519", "ed25519:ed25519", threads)
        .with([("tls", "false"), ("terminator", "pqtls")])
        .expect("plain HTTP");
    let mut rng = Rng(seed_of(&format!("plain {threads}")));
    let mut l = fabricate(&sc, None, &mut rng, 0.0, 0.0, false);
    l.url = l.url.replace("https://", "http://");
    l.terminator = Terminator { name: "pqtls".into(), version: "pqtls synthetic (plain HTTP)".into(), backend: None };
    l.handshakes = 0;
    l.handshakes_per_s = 0.0;
    l.client_handshake_cpu_ns_mean = 0.0;
    record(&sc, None, l)
}

/// The record of a load result: on host `synthetic`, or `pod-K` for shard K.
fn record(sc: &Scenario, shard: Option<LoadShare>, result: LoadResult) -> Record {
    let mut r = synthetic_record(sc, Outcome::Load(Box::new(result)));
    r.env.hostname = shard.map_or("synthetic".to_string(), |s| format!("pod-{}", s.index));
    r
}

/// Rates, counts and latencies of a run whose handshake costs `client_cpu` + `server_cpu` ns.
fn fabricate(
    sc: &Scenario,
    shard: Option<LoadShare>,
    rng: &mut Rng,
    client_cpu: f64,
    server_cpu: f64,
    layers: bool,
) -> LoadResult {
    let spec = &sc.load;
    let parts = shard.map_or(1.0, |s| s.count as f64);
    let size = spec.response_bytes as f64;
    // CPU per connection outside the handshake: TCP, HTTP, the load balancer's forwarding.
    let per_connection = if spec.keep_alive { 0.0 } else { client_cpu + server_cpu + 70_000.0 };
    let per_request = 25_000.0 + size * 0.5;
    let cost = per_connection + per_request;
    let capacity = 1e9 * cores_used(spec.threads) / cost * (0.97 + 0.03 * rng.unit());
    let (loop_mode, target, achieved) = match spec.rate_per_s {
        Some(t) => {
            let t = t / parts;
            // Below capacity the timetable is kept to within a few parts per thousand.
            ("open", Some(t), if t < capacity { t * (1.0 - 0.004 * rng.unit()) } else { capacity })
        }
        None => ("closed", None, capacity / parts),
    };
    // Completed requests in each second: a few percent apart in a closed loop, a timetable
    // kept to a few parts per thousand in an open one.
    let jitter = if loop_mode == "open" { 0.004 } else { 0.06 };
    let per_second: Vec<u64> = (0..DURATION_S)
        .map(|_| (achieved * (1.0 - jitter / 2.0 + jitter * rng.unit())).round().max(1.0) as u64)
        .collect();
    let requests: u64 = per_second.iter().sum();
    // Connections per thread (closed loop: a shard takes 1/N of them).
    let connections = match (spec.rate_per_s, shard) {
        (None, Some(s)) => (spec.connections / s.count as u64).max(1),
        _ => spec.connections,
    };
    let concurrency = spec.threads * connections;
    let handshakes = if spec.keep_alive { concurrency } else { requests };
    // Service time of one transaction, and the time it waits for a busy core.
    let service = cost * 1.3;
    let wait = match loop_mode {
        "closed" => (concurrency as f64 * parts / capacity * 1e9 - service).max(0.0),
        _ => service * 0.2 * achieved * parts / capacity,
    };
    let (mut lat, mut ttfb) = (histogram(), histogram());
    let mut by_layer: Vec<_> = LAYER_NAMES.iter().map(|_| histogram()).collect();
    for _ in 0..requests {
        let tail = -(1.0 - rng.unit()).ln();
        let tcp = 20_000.0 * (1.0 + 0.5 * rng.unit());
        let tcp_to_tls = 8_000.0 * (1.0 + rng.unit());
        let tls = if spec.keep_alive { 0.0 } else { (client_cpu + server_cpu) * 1.2 + wait * tail };
        let tls_to_http = 4_000.0 * (1.0 + rng.unit());
        let first = 30_000.0 * (1.0 + 0.3 * rng.unit()) + if spec.keep_alive { wait * tail } else { 0.0 };
        let http = first + size * (1.0 + 0.2 * rng.unit());
        let (tcp, tcp_to_tls, tls_to_http) =
            if spec.keep_alive { (0.0, 0.0, 0.0) } else { (tcp, tcp_to_tls, tls_to_http) };
        let before_http = tcp + tcp_to_tls + tls + tls_to_http;
        // Auto-resizing histograms take any value ≥ 1.
        let ns = |v: f64| v.max(1.0) as u64;
        let _ = lat.record(ns(before_http + http));
        let _ = ttfb.record(ns(before_http + first));
        for (h, v) in by_layer.iter_mut().zip([tcp, tcp_to_tls, tls, tls_to_http, first, http]) {
            let _ = h.record(ns(v));
        }
    }
    let duration_ns = DURATION_S * 1_000_000_000;
    let url = format!("https://127.0.0.1:8443/{}", pqtls_core::units::format_bytes(spec.response_bytes));
    LoadResult {
        client_hello_segments: None,
        client_hello_datagrams: None,
        url,
        negotiated: Negotiated::default(),
        terminator: Terminator::default(),
        loop_mode: loop_mode.into(),
        target_rate_per_s: target,
        achieved_rate_per_s: requests as f64 / DURATION_S as f64,
        duration_ns,
        requests,
        handshakes,
        handshakes_per_s: handshakes as f64 / DURATION_S as f64,
        unfinished: 0,
        latency: Latency::of(&lat),
        ttfb: Latency::of(&ttfb),
        client_handshake_cpu_ns_mean: client_cpu,
        client_process_cpu_ns_per_request: client_cpu * 1.1 + per_request,
        server: None,
        bytes: spec.tls.then(|| super::bytes_of(sc)),
        per_second,
        errors: Vec::new(),
        layers: if layers {
            LAYER_NAMES.iter().zip(&by_layer).map(|(n, h)| (n.to_string(), Latency::of(h))).collect()
        } else {
            Default::default()
        },
        capture: None,
        terminator_processes: None,
        link: None,
        emulator: None,
        shard,
        stopped: "duration".into(),
        threads: spec.threads,
        connections,
        notes: Vec::new(),
        client_verify_cpu_ns_mean: None,
        client_phases: None,
        trust: None,
        stalls: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_study_has_every_row_and_thread_count_with_consistent_counts() {
        let all = study();
        assert_eq!(all.len(), (STUDY.len() + 1) * STUDY_THREADS.len());
        let mut ids: Vec<&str> = all.iter().map(|r| r.id.as_str()).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), all.len(), "ids are unique");
        for r in &all {
            let l = r.load().unwrap();
            assert_eq!(l.latency.count, l.requests, "{}", r.id);
            assert_eq!(l.latency.histogram().unwrap().len(), l.requests);
            assert!(l.latency.p50_ns <= l.latency.p99_ns && l.latency.p99_ns <= l.latency.max_ns);
        }
        let rate = |g: &str, c: &str| {
            let id = study_scenario(g, c, 4).id();
            all.iter().find(|r| r.id == id).unwrap().load().unwrap().achieved_rate_per_s
        };
        assert!(rate("x25519", "ed25519:ed25519") > 10.0 * rate("x25519", "slhdsa-sha2-128s:slhdsa-sha2-128s"));
        assert_eq!((all[0].factor("tls"), all[0].label.as_str()), ("false", "x25519 ed25519:ed25519 1KiB no TLS"));
        assert_eq!(all[0].load().unwrap().handshakes, 0);
        let l = all[5].load().unwrap();
        assert_eq!(l.per_second.iter().sum::<u64>(), l.requests);
        let frodo = study_scenario("frodo640aes", "ed25519:ed25519", 1);
        assert_eq!(frodo.value("stack"), "rustls");
        let base = study_scenario("x25519", "ed25519:ed25519", 1);
        assert_eq!((base.value("stack"), base.value("terminator")), ("openssl", "haproxy"));
    }

    #[test]
    fn shards_split_the_rate_and_know_their_place() {
        let sc = study_scenario("x25519", "ed25519:ed25519", 4).with([("rate", "300/s")]).unwrap();
        let parts = shards(&sc, 3);
        assert_eq!(parts.len(), 3);
        for (k, p) in parts.iter().enumerate() {
            let l = p.load().unwrap();
            assert_eq!(l.shard, Some(LoadShare { index: k as u32 + 1, count: 3 }));
            assert_eq!(l.target_rate_per_s, Some(100.0));
            assert_eq!(p.id, sc.id());
        }
        assert_ne!(parts[0].load().unwrap().latency, parts[1].load().unwrap().latency);
    }
}
