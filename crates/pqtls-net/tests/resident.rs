//! The resident measurement on the mock stack through the lab's runner: `pqtls serve`'s own
//! code (in this process here; the CLI starts it as a process of its own) holds the connections,
//! its heap counted process-wide by the counting allocator this test binary declares. The
//! readings are at 0 and at each count held, the server counts exactly the connections held,
//! every one is closed afterwards, and a connection keeps heap on the server.

use pqtls_core::backend::{AllocationCoverage, Backend, EndpointOptions};
use pqtls_core::catalogue::Stack;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::{ResidentSettings, Settings};
use pqtls_core::sink::MemorySink;
use pqtls_lab::{Plan, RunOptions};
use pqtls_net::resident::{Resident, ResidentServers, ResidentSetup};
use pqtls_net::shared::RunningTerminator;
use pqtls_net::{ServeOptions, Server};
use pqtls_testkit::MockBackend;
use std::net::SocketAddr;

#[global_allocator]
static ALLOCATOR: pqtls_core::memory::CountingAllocator = pqtls_core::memory::CountingAllocator;

/// `pqtls serve`'s server in this process, on the mock stack, its heap reported.
struct InProcess<'a> {
    backends: &'a [Box<dyn Backend>],
}

struct Running(Server);

impl RunningTerminator for Running {
    fn addr(&self) -> SocketAddr {
        self.0.addr()
    }
    fn describe(&self) -> pqtls_core::load::Terminator {
        pqtls_core::load::Terminator { name: "pqtls".into(), version: "in-process (test)".into(), backend: None }
    }
}

impl ResidentServers for InProcess<'_> {
    fn serve(&self, scenario: &Scenario, _connections: u64) -> pqtls_core::Result<Box<dyn RunningTerminator>> {
        let prepared = self.backends[0].prepare(&scenario.handshake, &MockBackend::pki_files())?;
        let server = Server::start(ServeOptions {
            listen: "127.0.0.1:0".parse().unwrap(),
            threads: 1,
            tls: Some(prepared.into()),
            endpoint: EndpointOptions::traced(false),
            keep_alive: true,
        })?;
        server.count_heap(AllocationCoverage { counted: "everything (mock test)".into(), not_counted: String::new() });
        Ok(Box::new(Running(server)))
    }
}

#[test]
fn connections_are_held_counted_and_closed_through_the_runner() {
    pqtls_core::memory::start_process_totals();
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(MockBackend::new(Stack::Openssl))];
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let servers = InProcess { backends: &backends };
    let measurement = Resident {
        stacks: pqtls_lab::Stacks::new(&backends, &files, Default::default()),
        setup: ResidentSetup { serve: Some(&servers), ..ResidentSetup::default() },
    };
    let scenarios = vec![
        Scenario::new([("group", "x25519"), ("chain", "p256:p256")]).unwrap(),
        Scenario::new([("group", "MLKEM1024"), ("chain", "mldsa87:mldsa87"), ("response_size", "1KiB")]).unwrap(),
    ];
    let settings = Settings { resident: ResidentSettings { held: vec![20, 50], settle_ms: 10 }, ..Settings::default() };
    let none = |_: &Scenario| None;
    let plan = Plan { scenarios: (&scenarios).into(), settings: &settings, baseline_of: &none, skipped: &[] };
    let mut sink = MemorySink::default();
    let summary = pqtls_lab::run(&plan, &measurement, &mut sink, &RunOptions::default(), &mut |_| {}).unwrap();
    assert_eq!((summary.total, summary.measured), (2, 2));
    for m in &sink.measured {
        let r = m.record.resident().expect("a resident record");
        assert_eq!(r.readings.iter().map(|x| x.connections).collect::<Vec<_>>(), [0, 20, 50]);
        for x in &r.readings {
            assert_eq!(x.open_connections, Some(x.connections), "{}", m.record.label);
            assert!(x.heap.is_some());
        }
        assert_eq!(r.per_connection.len(), 2);
        for p in &r.per_connection {
            assert!(p.heap_bytes.unwrap() > 0.0, "{}: {p:?}", m.record.label);
            assert!(p.heap_allocations.unwrap() > 0.0);
        }
        assert_eq!(r.open_after_close, Some(0));
        assert_eq!(r.stopped, "complete");
        assert_eq!(
            r.negotiated.group,
            scenarios.iter().find(|s| s.id() == m.record.id).unwrap().handshake.expected_group().name
        );
        assert_eq!(r.counted, "everything (mock test)");
    }
}

#[test]
fn a_terminator_that_cannot_be_started_is_refused_by_name() {
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(MockBackend::new(Stack::Openssl))];
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let measurement = Resident {
        stacks: pqtls_lab::Stacks::new(&backends, &files, Default::default()),
        setup: ResidentSetup::default(),
    };
    let sc = Scenario::new([("terminator", "nginx")]).unwrap();
    let settings = Settings { resident: ResidentSettings { held: vec![1], settle_ms: 0 }, ..Settings::default() };
    let e = pqtls_lab::Measurement::measure(&measurement, &sc, &settings, &Default::default(), &mut |_| {})
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("terminator nginx") && e.contains("third-party"), "{e}");
}
