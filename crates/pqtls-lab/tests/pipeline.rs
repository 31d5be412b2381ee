//! The whole in-situ pipeline on the mock stack: scenarios → runner → measurement → driver →
//! trace → attribution → statistics → record → sink. Nothing fabricated: the records come
//! out of real runs.

use pqtls_core::backend::Backend;
use pqtls_core::catalogue::Stack;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_core::sink::MemorySink;
use pqtls_core::stats::Quantiles;
use pqtls_lab::{Event, Insitu, Plan, RunOptions};
use pqtls_testkit::{Behaviour, MockBackend};

fn scenarios() -> Vec<Scenario> {
    ["x25519", "X25519MLKEM768", "MLKEM1024"]
        .iter()
        .flat_map(|g| ["p256:p256", "mldsa65:mldsa65"].map(|c| Scenario::new([("group", *g), ("chain", c)]).unwrap()))
        .collect()
}

type Outcome = (pqtls_core::Result<pqtls_lab::RunSummary>, MemorySink);

fn run(backends: &[Box<dyn Backend>], scenarios: &[Scenario]) -> Outcome {
    run_with(backends, scenarios, Settings::new(3, 20, None, Quantiles::default()).unwrap())
}

fn run_with(backends: &[Box<dyn Backend>], scenarios: &[Scenario], settings: Settings) -> Outcome {
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let lab = Insitu {
        stacks: pqtls_lab::Stacks::new(backends, &files, Default::default()),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    let none = |_: &Scenario| None;
    let plan = Plan { scenarios: scenarios.into(), settings: &settings, baseline_of: &none, skipped: &[] };
    let mut sink = MemorySink::default();
    let mut stored = 0;
    let r = pqtls_lab::run(&plan, &lab, &mut sink, &RunOptions::default(), &mut |e| {
        if matches!(e, Event::Stored { .. }) {
            stored += 1;
        }
    });
    assert_eq!(stored, sink.measured.len());
    (r, sink)
}

#[test]
fn records_come_out_of_real_runs_with_exact_sizes_and_steps_that_add_up() {
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(MockBackend::new(Stack::Openssl))];
    let sc = scenarios();
    let (summary, sink) = run(&backends, &sc);
    let summary = summary.unwrap();
    assert_eq!((summary.total, summary.measured), (6, 6));
    // Interleaved: records are stored as their scenarios complete, in any order.
    assert_eq!(sink.measured.len(), sc.len());
    for m in &sink.measured {
        let s = sc.iter().find(|s| s.id() == m.record.id).expect("a record of a scenario of the plan");
        let r = m.record.insitu().unwrap();
        assert_eq!(r.negotiated.group, s.handshake.expected_group().name);
        assert_eq!(r.loops.measured, 20);
        // Sizes: what the mock puts on the wire, from the catalogue.
        let g = s.handshake.expected_group();
        assert_eq!(r.bytes.messages["ClientHello"], 4 + 200 + g.client_share_bytes() as u64);
        assert_eq!(r.bytes.messages["ServerHello"], 4 + 86 + g.server_share_bytes() as u64);
        assert_eq!(r.bytes.messages["CertificateVerify"], 8 + s.handshake.chain.leaf.signature_bytes as u64);
        // Every handshake's steps add up to its total, on both sides.
        for (c, srv) in &m.samples {
            for side in [c, srv] {
                assert_eq!(side.steps.values().sum::<u64>(), side.total_cpu_ns);
                assert!(side.total_cpu_ns > 0);
            }
        }
    }
}

/// A configuration stops at its time cap (`max_time`) whatever its loop rule, cutting a
/// warm-up that would not fit short, and its record says so. A billion handshakes and a
/// million warm-up ones cannot fit in 200 ms: the cap, not the count, ends them.
#[test]
fn a_configuration_stops_at_its_time_cap_and_its_record_says_so() {
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(MockBackend::new(Stack::Openssl))];
    let sc = &scenarios()[..2];
    let loops = pqtls_core::settings::MAX_LOOPS;
    let settings =
        Settings { max_time_ms: Some(200), ..Settings::new(1_000_000, loops, None, Quantiles::default()).unwrap() };
    let (summary, sink) = run_with(&backends, sc, settings);
    assert_eq!(summary.unwrap().measured, 2);
    for m in &sink.measured {
        let r = m.record.insitu().unwrap();
        assert_eq!((r.loops.stopped.as_str(), r.loops.stopped_by.as_str()), ("time cap reached", "time cap"));
        assert!(r.loops.measured >= 1 && r.loops.measured < loops, "{:?}", r.loops);
        assert!(r.loops.warmup < 1_000_000, "the warm-up was not cut short: {:?}", r.loops);
        assert_eq!(m.record.settings.as_ref().unwrap().max_time_ms, Some(200));
        let warning = r.warnings().join("\n");
        assert!(
            warning.contains(&format!("stopped by its time cap after {} handshakes", r.loops.measured)),
            "{warning}"
        );
    }
}

#[test]
fn a_peer_that_negotiates_something_else_is_an_error_and_nothing_is_kept() {
    let liar = MockBackend::new(Stack::Openssl)
        .with(Behaviour { negotiate_group: Some("secp256r1".into()), ..Behaviour::default() });
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(liar)];
    let (r, sink) = run(&backends, &scenarios()[..1]);
    let e = r.unwrap_err().to_string();
    assert!(e.contains("negotiated group 'secp256r1' but 'x25519' was requested"), "{e}");
    assert!(sink.measured.is_empty());
}

#[test]
fn scenarios_on_a_stack_the_build_lacks_are_skipped_with_a_notice() {
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(MockBackend::new(Stack::Openssl))];
    let sc: Vec<Scenario> = scenarios().into_iter().map(|s| s.with([("stack", "rustls")]).unwrap()).collect();
    let (r, sink) = run(&backends, &sc[..2]);
    let r = r.unwrap();
    assert_eq!(r.skipped_stacks, vec![(Stack::Rustls, 2)]);
    assert!(sink.measured.is_empty());
}
