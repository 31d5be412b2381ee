//! The rules of thumb issue 37 measured on this project's lab, as the assessment page cites
//! them ("what would help"): one table of figures, each with where it was measured. The source
//! of every figure is docs/auth-bytes.md (its section named in the constant's comment); a
//! figure remeasured there is changed here, and only here.
//!
//! The page cites a rule only where it applies to the configurations it compares
//! ([`crate::tables::assessment::what_would_help`]).

/// Where the figures and their commands are.
pub const SOURCE: &str = "docs/auth-bytes.md";

/// §1 (rustls, 300 handshakes, medians): certificate compression of an ML-DSA-65 leaf:root
/// chain — the best of zlib, brotli and zstd (zstd) saves 62 of the Certificate's 5,646 bytes.
pub const COMPRESSION_MLDSA65_SAVED_BYTES: u64 = 62;
pub const COMPRESSION_MLDSA65_CERTIFICATE_BYTES: u64 = 5_646;
/// §1: the range saved over the ML-DSA, Falcon and SLH-DSA chains measured, % of the
/// Certificate (SLH-DSA-128f + zlib 0.1 %; ML-DSA-65 leaf + ML-DSA-87 intermediate + brotli 2.6 %).
pub const COMPRESSION_PQ_SAVED_PCT: (f64, f64) = (0.1, 2.6);
/// §1 (the network lab, 50 ms, X25519MLKEM768, twice): the one round trip compression was seen
/// to save — a flight within its few hundred saved bytes of a step.
pub const COMPRESSION_ROUND_TRIP_SAVED: &str =
    "ML-DSA-65 leaf + ML-DSA-87 intermediate, 15,913 → 15,595 authentication bytes with zstd, 3 → 2 rounds";
/// §1: the client's decompression CPU, µs (rustls' `cert_decompress`, ML-DSA chains: 19–63).
pub const COMPRESSION_CLIENT_CPU_US: (u64, u64) = (20, 60);

/// One measured step of the staircase (§2): the largest authentication flight (the server's
/// Certificate + CertificateVerify, headers included) that costs no extra round trip — the
/// round-trip model's "bytes before the next round trip", which the measured step matched
/// within one TCP segment or QUIC datagram — for rustls with X25519MLKEM768 at 50 ms RTT
/// (the rest of the server's flight: 1,283 bytes over TCP, 1,356 over QUIC).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Step {
    /// `TCP at initcwnd 10`, `QUIC on a first contact`, …
    pub series: &'static str,
    /// TCP's initial window, segments (`None`: QUIC).
    pub initcwnd: Option<u64>,
    pub auth_bytes_before: u64,
}

/// §2's first step of each series measured (QUIC: quinn's 12,000-byte initial window; its
/// first contact is bound by the 3× anti-amplification budget of the ClientHello's two
/// Initial datagrams; a second step, above 16,994 bytes, is not cited).
pub const STEPS: [Step; 5] = [
    Step { series: "TCP at initcwnd 10", initcwnd: Some(10), auth_bytes_before: 13_197 },
    Step { series: "TCP at initcwnd 16", initcwnd: Some(16), auth_bytes_before: 21_885 },
    Step { series: "TCP at initcwnd 32", initcwnd: Some(32), auth_bytes_before: 45_053 },
    Step { series: "QUIC on a first contact", initcwnd: None, auth_bytes_before: 5_494 },
    Step { series: "QUIC with an address-validation token", initcwnd: None, auth_bytes_before: 10_094 },
];

/// §3: a HelloRetryRequest over TCP in the lab at 50 ms: one more round trip, measured +51.0
/// and +55.6 ms (the reverse and the x25519-only client), ~200 bytes more from the client.
pub const HRR_EXTRA_ROUND_TRIPS: u64 = 1;
pub const HRR_MEASURED_MS_AT_50_MS: (f64, f64) = (51.0, 55.6);
pub const HRR_EXTRA_CLIENT_BYTES: u64 = 200;

/// The steps an authentication flight growing from `from` to `to` bytes climbs: those whose
/// bytes before the next round trip `from` stays within and `to` exceeds.
pub fn steps_crossed(from: u64, to: u64) -> Vec<Step> {
    STEPS.iter().copied().filter(|s| from <= s.auth_bytes_before && to > s.auth_bytes_before).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flight_crosses_the_steps_between_its_two_sizes() {
        let names = |v: Vec<Step>| v.iter().map(|s| s.series).collect::<Vec<_>>();
        // Ed25519 (~500 B) → ML-DSA-65 leaf:root (~9 KB): QUIC's first-contact step only.
        assert_eq!(names(steps_crossed(500, 9_000)), ["QUIC on a first contact"]);
        assert_eq!(
            names(steps_crossed(500, 16_000)),
            ["TCP at initcwnd 10", "QUIC on a first contact", "QUIC with an address-validation token"]
        );
        assert!(steps_crossed(9_000, 9_100).is_empty(), "no step between");
        assert!(steps_crossed(9_000, 500).is_empty(), "a smaller flight climbs none");
    }
}
