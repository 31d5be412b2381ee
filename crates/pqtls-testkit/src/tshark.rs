//! Wireshark's own reading of a capture, for tests that cross-check ours with it: `tshark`
//! (installed by `scripts/setup.sh` with `PQTLS_SETUP_TESTS=1`) opens the capture with the key
//! log and counts the frames that carry a TLS Certificate message.
//!
//! Our servers listen on random ports, where Wireshark finds TLS by heuristics — after the
//! dissectors registered for either port. A client's ephemeral port that Wireshark assigns to
//! another protocol (44322 is `pmproxy`) would hide that connection's TLS, so every server port
//! (the destination of a SYN) is decoded as TLS explicitly (`-d tcp.port==P,tls`). Over QUIC
//! the caller names the server's UDP port (`-d udp.port==P,quic`).

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// Frames of `pcap` in which tshark, decrypting with `keys`, finds a Certificate message (one
/// per connection that got as far as the server's flight). Panics with tshark's error (a test
/// helper).
pub fn certificates(pcap: &Path, keys: &Path) -> usize {
    let mut decode_as = Vec::new();
    for port in server_ports(pcap) {
        decode_as.push("-d".to_string());
        decode_as.push(format!("tcp.port=={port},tls"));
    }
    let out = tshark(
        pcap,
        &[
            &["-o".to_string(), format!("tls.keylog_file:{}", keys.display())][..],
            &decode_as,
            &["-Y", "tls.handshake.type == 11", "-T", "fields", "-e", "frame.number"].map(String::from)[..],
        ]
        .concat(),
    );
    out.lines().filter(|l| !l.trim().is_empty()).count()
}

/// Frames of a QUIC `pcap` in which tshark, decrypting with `keys`, finds a TLS Certificate
/// message (in a CRYPTO frame of a Handshake packet): one per connection whose server flight
/// was decrypted. `server_port`: the server's UDP port, decoded as QUIC.
pub fn quic_certificates(pcap: &Path, keys: &Path, server_port: u16) -> usize {
    let out = tshark(
        pcap,
        &[
            "-o".to_string(),
            format!("tls.keylog_file:{}", keys.display()),
            "-d".to_string(),
            format!("udp.port=={server_port},quic"),
            "-Y".to_string(),
            "tls.handshake.type == 11".to_string(),
            "-T".to_string(),
            "fields".to_string(),
            "-e".to_string(),
            "frame.number".to_string(),
        ],
    );
    out.lines().filter(|l| !l.trim().is_empty()).count()
}

/// The ports that received a connection's first SYN in `pcap`.
fn server_ports(pcap: &Path) -> BTreeSet<u16> {
    let out = tshark(
        pcap,
        &["-Y", "tcp.flags.syn == 1 && tcp.flags.ack == 0", "-T", "fields", "-e", "tcp.dstport"].map(String::from),
    );
    out.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.trim().parse().unwrap_or_else(|e| panic!("tshark printed {l:?} as a port: {e}")))
        .collect()
}

fn tshark(pcap: &Path, args: &[String]) -> String {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .args(args)
        .output()
        .expect("tshark (scripts/setup.sh with PQTLS_SETUP_TESTS=1 installs it)");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}
