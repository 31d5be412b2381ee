//! `pqtls layers` on hand-built captures: a plain-HTTP transaction is split and written as
//! JSON and CSV; a capture without TLS or HTTP, a file that is not a capture and a key log
//! that is not one are clear errors (the TLS captures are pqtls-capture's loopback tests).

use etherparse::PacketBuilder;
use pcap_file::pcap::{PcapHeader, PcapPacket, PcapWriter};
use pcap_file::{DataLink, TsResolution};
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

const MS: u64 = 1_000_000;

fn pqtls(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_pqtls")).args(args).output().unwrap()
}

/// One plain TCP connection: SYN, SYN/ACK, ACK, the client's bytes, the server's bytes.
fn write_capture(path: &Path, request: &[u8], response: &[u8]) {
    let (c, s) = (([10, 0, 0, 1], 5000u16), ([10, 0, 0, 2], 80u16));
    let packet = |from: ([u8; 4], u16), to: ([u8; 4], u16), seq: u32, ack: Option<u32>, syn: bool, data: &[u8]| {
        let b = PacketBuilder::ethernet2([0; 6], [0; 6]).ipv4(from.0, to.0, 64).tcp(from.1, to.1, seq, 65535);
        let b = if syn { b.syn() } else { b };
        let b = match ack {
            Some(a) => b.ack(a),
            None => b,
        };
        let mut out = Vec::new();
        b.write(&mut out, data).unwrap();
        out
    };
    let packets = [
        (0, packet(c, s, 100, None, true, b"")),
        (MS, packet(s, c, 500, Some(101), true, b"")),
        (2 * MS, packet(c, s, 101, Some(501), false, request)),
        (5 * MS, packet(s, c, 501, Some(101 + request.len() as u32), false, response)),
    ];
    let header =
        PcapHeader { datalink: DataLink::ETHERNET, ts_resolution: TsResolution::NanoSecond, ..PcapHeader::default() };
    let mut w = PcapWriter::with_header(std::fs::File::create(path).unwrap(), header).unwrap();
    for (ts, data) in packets {
        w.write_packet(&PcapPacket::new(Duration::from_nanos(ts), data.len() as u32, &data)).unwrap();
    }
}

#[test]
fn layers_of_a_capture_and_clear_errors_for_what_is_not_one() {
    let dir = tempfile::tempdir().unwrap();
    let http = dir.path().join("http.pcap");
    write_capture(&http, b"GET /1 HTTP/1.1\r\nHost: x\r\n\r\n", b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx");
    let csv = dir.path().join("t.csv");
    let out = pqtls(&["layers", http.to_str().unwrap(), "--json", "-", "--csv", csv.to_str().unwrap()]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["layers"]["http"]["count"], 1);
    // HdrHistogram percentiles, 3 significant digits (the load records' resolution).
    assert!(v["layers"]["tcp"]["p50_ns"].as_u64().unwrap().abs_diff(MS) <= MS / 1000, "{}", v["layers"]["tcp"]);
    assert_eq!(v["analysis"]["connections"][0]["transactions"][0]["response_bytes"], 39);
    let rows = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(rows.lines().count(), 2, "{rows}");
    assert!(rows.lines().next().unwrap().ends_with(",http_first_byte_ns,http_ns"));
    assert!(rows.lines().nth(1).unwrap().ends_with(&format!(",{},{}", 3 * MS, 3 * MS)), "{rows}");
    let out = pqtls(&["layers", http.to_str().unwrap()]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("1 transactions") && text.contains("http_first_byte"), "{text}");

    let other = dir.path().join("other.pcap");
    write_capture(&other, b"\x00\x01 not tls, not http", b"");
    let out = pqtls(&["layers", other.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("no TLS connection and no HTTP transaction"), "{err}");

    let out = pqtls(&["layers", env!("CARGO_MANIFEST_DIR")]);
    assert!(!out.status.success());
    let toml = Path::new(env!("CARGO_MANIFEST_DIR")).join("Cargo.toml");
    let out = pqtls(&["layers", toml.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("not a pcap or pcapng file"), "{err}");
    let out = pqtls(&["layers", http.to_str().unwrap(), "--keylog", toml.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("line 1:"), "{err}");
}
