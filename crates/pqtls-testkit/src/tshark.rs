//! Wireshark's own reading of a capture, for tests that cross-check ours with it: `tshark`
//! (installed by `scripts/setup.sh` with `PQTLS_SETUP_TESTS=1`) opens the capture with the key
//! log and counts the frames that carry a TLS Certificate message.

use std::path::Path;
use std::process::Command;

/// Frames of `pcap` in which tshark, decrypting with `keys`, finds a Certificate message (one
/// per connection that got as far as the server's flight). Panics with tshark's error (a test
/// helper).
pub fn certificates(pcap: &Path, keys: &Path) -> usize {
    let out = Command::new("tshark")
        .arg("-r")
        .arg(pcap)
        .arg("-o")
        .arg(format!("tls.keylog_file:{}", keys.display()))
        .args(["-Y", "tls.handshake.type == 11", "-T", "fields", "-e", "frame.number"])
        .output()
        .expect("tshark (scripts/setup.sh with PQTLS_SETUP_TESTS=1 installs it)");
    assert!(out.status.success(), "tshark: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.trim().is_empty()).count()
}
