//! A memory measurement of a stack that cannot count its allocations is refused with the
//! reason, before anything is measured (the mock stack has no allocator hooks).

use pqtls_core::backend::Backend;
use pqtls_core::scenario::Scenario;
use pqtls_core::settings::Settings;
use pqtls_lab::{Insitu, Measurement};
use pqtls_testkit::MockBackend;
use std::sync::atomic::AtomicBool;

#[test]
fn counting_memory_on_a_stack_without_hooks_is_an_error_naming_the_stack() {
    let backends: Vec<Box<dyn Backend>> = vec![Box::new(MockBackend::new(pqtls_core::catalogue::Stack::Openssl))];
    let files = |_: &pqtls_core::config::HandshakeConfig| Ok(MockBackend::pki_files());
    let lab = Insitu {
        stacks: pqtls_lab::Stacks::new(&backends, &files, Default::default()),
        transport: Default::default(),
        counter: None,
        quic: None,
    };
    let sc = Scenario::new([("group", "x25519"), ("chain", "p256:p256")]).unwrap();
    let settings = Settings { memory: true, ..Settings::new(1, 5, None, Default::default()).unwrap() };
    let Err(e) = lab.measure(&sc, &settings, &AtomicBool::new(false), &mut |_| {}) else { panic!("not refused") };
    assert!(e.to_string().contains("cannot count its allocations"), "{e}");
}
