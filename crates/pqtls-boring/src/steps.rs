//! BoringSSL's steps mapped to the canonical vocabulary ([`pqtls_core::steps`]).
//!
//! BoringSSL has OpenSSL's hooks (message and info callbacks), so its stack steps name the
//! message and what is done with it: `read_<m>` / `process_<m>` (received), `write_<m>`
//! (sent), and the canonical step follows from the side and the message
//! ([`pqtls_core::steps::of_message`]). Two timed operations come from BoringSSL's own
//! interfaces: `sign` (the leaf key behind `SSL_PRIVATE_KEY_METHOD`) belongs to
//! `certificate_verify` (client side: `client_certificate_verify`), and `verify_cert_chain`
//! (`X509_verify_cert` in the verify callback) to `certificate` (server side:
//! `client_certificate`). `io` (the part of a call after its last message) goes with the step
//! before it; the application-data calls are their own steps.

// Why this is not shared with crates/pqtls-openssl/src/steps.rs, which it resembles: the two
// differ where it matters (`sign` and `verify_cert_chain` are BoringSSL's operations, mapped by
// side; OpenSSL has none), and what they share — `map`'s "an `io` interval follows the step
// before it" — is six lines. The place for it is pqtls-core's `steps` (both crates depend on
// it; no symbol of either TLS library is involved, so the engine's separation is untouched),
// as a `map` that takes the per-step function: not done in issue 38's time (it changes
// pqtls-core and pqtls-openssl, and so rebuilds every backend), left for a review mend.
use pqtls_core::steps::{self, of_message};
use pqtls_core::trace::{Event, HsType, Interval, Side};

/// The canonical step of each interval (a [`pqtls_core::trace::StepMap`]).
pub fn map(side: Side, _events: &[Event], intervals: &[Interval]) -> Vec<&'static str> {
    let mut last = None;
    intervals
        .iter()
        .map(|iv| {
            let c = canonical(side, &iv.step).unwrap_or_else(|| last.unwrap_or(steps::OTHER));
            last = Some(c);
            c
        })
        .collect()
}

/// The canonical step of one BoringSSL step; `None` for `io`, which follows the step before.
pub fn canonical(side: Side, step: &str) -> Option<&'static str> {
    let client = side == Side::Client;
    let message = |slug: &str| HsType::from_slug(slug);
    if let Some(m) = step.strip_prefix("read_").or_else(|| step.strip_prefix("process_")).and_then(message) {
        return Some(of_message(side, m, true));
    }
    if let Some(m) = step.strip_prefix("write_").and_then(message) {
        return Some(of_message(side, m, false));
    }
    Some(match step {
        "io" => return None,
        "sign" if client => steps::CLIENT_CERTIFICATE_VERIFY,
        "sign" => steps::CERTIFICATE_VERIFY,
        "verify_cert_chain" if client => steps::CERTIFICATE,
        "verify_cert_chain" => steps::CLIENT_CERTIFICATE,
        s => steps::ALL.iter().copied().find(|c| *c == s).unwrap_or(steps::OTHER),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::steps::*;

    fn assert_maps(side: Side, expect: &[(&str, &str)]) {
        let ivs: Vec<Interval> =
            expect.iter().map(|(s, _)| Interval { end: 0, step: s.to_string(), cpu_ns: 1, wall_ns: 1 }).collect();
        let want: Vec<&str> = expect.iter().map(|(_, c)| *c).collect();
        assert_eq!(map(side, &[], &ivs), want, "{side:?}");
    }

    #[test]
    fn operations_belong_to_the_message_they_serve() {
        assert_maps(
            Side::Client,
            &[
                ("write_client_hello", CLIENT_HELLO),
                ("io", CLIENT_HELLO),
                ("process_certificate", CERTIFICATE),
                ("verify_cert_chain", CERTIFICATE),
                ("process_certificate_verify", CERTIFICATE_VERIFY),
                ("sign", CLIENT_CERTIFICATE_VERIFY),
                ("write_certificate_verify", CLIENT_CERTIFICATE_VERIFY),
                ("app_read", APP_READ),
            ],
        );
        assert_maps(
            Side::Server,
            &[
                ("io", OTHER),
                ("process_client_hello", CLIENT_HELLO),
                ("sign", CERTIFICATE_VERIFY),
                ("write_certificate_verify", CERTIFICATE_VERIFY),
                ("verify_cert_chain", CLIENT_CERTIFICATE),
                ("read_finished", CLIENT_FINISHED),
                ("close", CLOSE),
            ],
        );
    }
}
