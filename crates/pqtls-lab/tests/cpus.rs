//! The choice of the two threads' CPUs, on synthetic sysfs trees, and the placement the
//! socketpair transport reports on this machine.

use nix::sched::{sched_getaffinity, sched_setaffinity, CpuSet};
use nix::unistd::Pid;
use pqtls_lab::transport::cpus::{self, plan, Placement, Topology};
use std::fs;
use std::path::Path;

/// Writes `cpuN/topology/{core_id,physical_package_id,thread_siblings_list}` for each
/// `(cpu, core, package, siblings)`.
fn sysfs(root: &Path, cpus: &[(usize, u64, u64, &str)]) {
    for (cpu, core, package, siblings) in cpus {
        let dir = root.join(format!("cpu{cpu}/topology"));
        fs::create_dir_all(&dir).unwrap();
        fs::write(dir.join("core_id"), format!("{core}\n")).unwrap();
        fs::write(dir.join("physical_package_id"), format!("{package}\n")).unwrap();
        fs::write(dir.join("thread_siblings_list"), format!("{siblings}\n")).unwrap();
    }
}

#[test]
fn two_cores_of_two_smt_threads_give_two_different_cores() {
    // Linux's usual numbering: the second thread of each core after all the first ones.
    let dir = tempfile::tempdir().unwrap();
    sysfs(dir.path(), &[(0, 0, 0, "0,2"), (1, 1, 0, "1,3"), (2, 0, 0, "0,2"), (3, 1, 0, "1,3")]);
    let all = [0, 1, 2, 3];
    let p = plan(&all, None, &Topology::read(dir.path(), &all)).unwrap();
    assert_eq!(p.placement, Placement::Pinned { client: 0, server: 1 });
    assert_eq!(p.notes, vec!["client thread on CPU 0, server thread on CPU 1 (different cores)".to_string()]);

    // Siblings numbered next to each other.
    let dir = tempfile::tempdir().unwrap();
    sysfs(dir.path(), &[(0, 0, 0, "0-1"), (1, 0, 0, "0-1"), (2, 1, 0, "2-3"), (3, 1, 0, "2-3")]);
    let p = plan(&all, None, &Topology::read(dir.path(), &all)).unwrap();
    assert_eq!(p.placement, Placement::Pinned { client: 0, server: 2 });

    // Only part of the machine allowed: the choice stays inside the mask.
    let p = plan(&[1, 2, 3], None, &Topology::read(dir.path(), &[1, 2, 3])).unwrap();
    assert_eq!(p.placement, Placement::Pinned { client: 1, server: 2 });
}

#[test]
fn two_cpus_that_are_siblings_are_used_and_the_notes_say_they_share_a_core() {
    let dir = tempfile::tempdir().unwrap();
    sysfs(dir.path(), &[(0, 0, 0, "0-1"), (1, 0, 0, "0-1")]);
    let p = plan(&[0, 1], None, &Topology::read(dir.path(), &[0, 1])).unwrap();
    assert_eq!(p.placement, Placement::Pinned { client: 0, server: 1 });
    assert!(p.notes[0].contains("CPUs 0 and 1 are SMT siblings: they share a core"), "{:?}", p.notes);
}

#[test]
fn without_siblings_lists_core_and_package_ids_decide() {
    let dir = tempfile::tempdir().unwrap();
    sysfs(dir.path(), &[(0, 0, 0, ""), (1, 0, 0, ""), (2, 0, 1, ""), (3, 1, 0, "")]);
    for cpu in 0..4 {
        fs::remove_file(dir.path().join(format!("cpu{cpu}/topology/thread_siblings_list"))).unwrap();
    }
    let all = [0, 1, 2, 3];
    let t = Topology::read(dir.path(), &all);
    assert_eq!(t.same_core(0, 1), Some(true));
    assert_eq!(t.same_core(0, 2), Some(false));
    // Different cores of one package beat a core on another package.
    assert_eq!(plan(&all, None, &t).unwrap().placement, Placement::Pinned { client: 0, server: 3 });
    // No sysfs at all: still two CPUs, and the notes say the topology is unknown.
    let empty = tempfile::tempdir().unwrap();
    let p = plan(&all, None, &Topology::read(empty.path(), &all)).unwrap();
    assert_eq!(p.placement, Placement::Pinned { client: 0, server: 1 });
    assert!(p.notes[0].contains("sysfs does not say whether CPUs 0 and 1 share a core"), "{:?}", p.notes);
}

#[test]
fn one_allowed_cpu_means_unpinned_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    sysfs(dir.path(), &[(0, 0, 0, "0-1"), (1, 0, 0, "0-1"), (5, 2, 0, "5")]);
    let p = plan(&[5], None, &Topology::read(dir.path(), &[5])).unwrap();
    assert_eq!(p.placement, Placement::Unpinned);
    assert!(p.notes[0].contains("only CPU 5 is in this process's affinity mask"), "{:?}", p.notes);
    assert!(p.notes[0].contains("ran unpinned"), "{:?}", p.notes);
}

/// On this machine: with the calling thread limited to one CPU the socketpair transport runs
/// unpinned and says so; with its full mask it pins, and leaves the caller's mask as it was.
#[test]
fn the_socketpair_transport_reports_its_placement_and_restores_the_callers_mask() {
    use pqtls_core::backend::{Backend, Prepared};
    use pqtls_core::catalogue::{self, Stack};
    use pqtls_core::config::{ChainSpec, HandshakeConfig};
    use pqtls_lab::transport::{build, TransportKind, TransportOptions};
    use std::sync::Arc;

    let cfg = HandshakeConfig::new(
        Stack::Openssl,
        catalogue::group("x25519").unwrap(),
        ChainSpec::parse("p256:p256").unwrap(),
        catalogue::cipher("TLS_AES_128_GCM_SHA256").unwrap(),
    );
    let pki = pqtls_pki::Pki::open(Path::new(env!("CARGO_TARGET_TMPDIR")).join("pki")).unwrap();
    let prepared: Arc<dyn Prepared> =
        Arc::from(pqtls_openssl::OpensslBackend::new().prepare(&cfg, &pki.files_for(&cfg).unwrap()).unwrap());

    let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
    let allowed = cpus::allowed_cpus().unwrap();
    let batch = build(TransportKind::Socketpair, &TransportOptions::default())
        .run(prepared.clone(), 2, &pqtls_core::backend::EndpointOptions::default(), &|| false)
        .unwrap();
    assert_eq!(batch.handshakes.len(), 2);
    assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before, "the caller's mask changed");
    if allowed.len() >= 2 {
        assert!(batch.notes[0].starts_with("client thread on CPU "), "{:?}", batch.notes);
    }

    let mut one = CpuSet::new();
    one.set(allowed[0]).unwrap();
    sched_setaffinity(Pid::from_raw(0), &one).unwrap();
    let batch = build(TransportKind::Socketpair, &TransportOptions::default()).run(
        prepared,
        2,
        &pqtls_core::backend::EndpointOptions::default(),
        &|| false,
    );
    sched_setaffinity(Pid::from_raw(0), &before).unwrap();
    let batch = batch.unwrap();
    assert_eq!(batch.handshakes.len(), 2);
    assert!(batch.notes[0].contains(&format!("only CPU {} is in this process's affinity mask", allowed[0])));
    assert!(batch.notes[1].contains("prefer waiting by sleeping"), "{:?}", batch.notes);
}
