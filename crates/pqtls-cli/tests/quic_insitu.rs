//! `pqtls insitu --transport quic` end to end: the record's QUIC section (datagrams, packets per
//! type, amplification, rounds), a report with the QUIC and TCP vs QUIC tables from a store that
//! holds the same configuration over both, and the refusals.

mod common;
use common::{ok, pqtls, text};

#[test]
fn insitu_over_quic_records_datagrams_and_reports_tcp_vs_quic() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let args = [
        "insitu",
        "--stack",
        "rustls",
        "--transport",
        "memory,quic",
        "--group",
        "X25519MLKEM768",
        "--chain",
        "mldsa65:mldsa65",
        "--warmup",
        "2",
        "--loops",
        "5",
        "--json",
        "-",
    ];
    let out = ok(&pqtls(&args, dir.path()));
    let records: Vec<serde_json::Value> = serde_json::from_str(&out).unwrap();
    assert_eq!(records.len(), 2);
    let (tcp, quic): (Vec<_>, Vec<_>) = records.iter().partition(|r| r["result"].get("quic").is_none());
    assert_eq!((tcp.len(), quic.len()), (1, 1), "one record has the QUIC section");
    let q = &quic[0]["result"];
    assert_eq!(q["negotiated"]["group"], "X25519MLKEM768");
    assert_eq!(q["loops"]["mode"], "quic");
    let w = &q["quic"];
    assert_eq!(w["client_to_server"]["flights"][0], 2, "{w}");
    assert_eq!(w["rounds"], 3, "{w}");
    assert_eq!(w["amplification"]["limited"], true, "{w}");
    // The record's bytes are the datagrams'.
    assert_eq!(q["bytes"]["client_to_server"], w["client_to_server"]["datagram_bytes"]);
    assert_eq!(q["bytes"]["records_server_to_client"], w["server_to_client"]["datagrams"]);

    // A store with both, and its report.
    let toml = dir.path().join("e.toml");
    std::fs::write(
        &toml,
        "name = \"q\"\n[settings]\nwarmup = 2\nloops = 5\n[matrix]\nstack = [\"rustls\"]\ntransport = [\"memory\", \"quic\"]\n\
         group = [\"x25519\"]\nchain = [\"p256:p256\"]\n",
    )
    .unwrap();
    ok(&pqtls(&["run", toml.to_str().unwrap(), "--results", store.to_str().unwrap(), "--no-progress"], dir.path()));
    let md = dir.path().join("r.md");
    ok(&pqtls(&["report", store.join("q").to_str().unwrap(), "--markdown", md.to_str().unwrap()], dir.path()));
    let md = std::fs::read_to_string(md).unwrap();
    assert!(md.contains("## QUIC: datagrams and packets") && md.contains("Initial packets / B"), "{md}");
    assert!(md.contains("## TCP vs QUIC") && md.contains("| quic |") && md.contains("| memory |"), "{md}");
}

#[test]
fn quic_refuses_the_openssl_stack_by_name() {
    let dir = tempfile::tempdir().unwrap();
    let o = pqtls(
        &[
            "insitu",
            "--stack",
            "openssl",
            "--transport",
            "quic",
            "--group",
            "x25519",
            "--chain",
            "p256:p256",
            "--loops",
            "2",
        ],
        dir.path(),
    );
    assert!(!o.status.success());
    let e = text(&o);
    assert!(e.contains("rustls stack only") && e.contains("openssl"), "{e}");
}
