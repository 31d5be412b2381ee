//! OpenSSL's steps mapped to the canonical vocabulary ([`pqtls_core::steps`]).
//!
//! OpenSSL's stack steps name the message and what is done with it (`read_<m>`,
//! `process_<m>`: received; `write_<m>`: sent), so the canonical step follows from the side
//! and the message ([`pqtls_core::steps::of_message`]). `io` (the part of a call after its
//! last message) goes with the step before it; the application-data calls are their own steps.

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

/// The canonical step of one OpenSSL step; `None` for `io`, which follows the step before.
pub fn canonical(side: Side, step: &str) -> Option<&'static str> {
    let message = |slug: &str| HsType::from_slug(slug);
    if let Some(m) = step.strip_prefix("read_").or_else(|| step.strip_prefix("process_")).and_then(message) {
        return Some(of_message(side, m, true));
    }
    if let Some(m) = step.strip_prefix("write_").and_then(message) {
        return Some(of_message(side, m, false));
    }
    match step {
        "io" => None,
        s => Some(steps::ALL.iter().copied().find(|c| *c == s).unwrap_or(steps::OTHER)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::steps::*;

    /// Asserts the canonical step of each (OpenSSL step, canonical step) of `expect`, the
    /// OpenSSL steps mapped in order.
    fn assert_maps(side: Side, expect: &[(&str, &str)]) {
        let ivs: Vec<Interval> =
            expect.iter().map(|(s, _)| Interval { end: 0, step: s.to_string(), cpu_ns: 1, wall_ns: 1 }).collect();
        let want: Vec<&str> = expect.iter().map(|(_, c)| *c).collect();
        assert_eq!(map(side, &[], &ivs), want, "{side:?}");
    }

    #[test]
    fn client_and_server_steps_map_by_message_and_direction() {
        assert_maps(
            Side::Client,
            &[
                ("write_client_hello", CLIENT_HELLO),
                ("io", CLIENT_HELLO),
                ("read_server_hello", SERVER_HELLO),
                ("process_server_hello", SERVER_HELLO),
                ("read_encrypted_extensions", ENCRYPTED_EXTENSIONS),
                ("process_certificate_request", CERTIFICATE_REQUEST),
                ("process_certificate", CERTIFICATE),
                ("process_certificate_verify", CERTIFICATE_VERIFY),
                ("process_finished", FINISHED),
                ("write_certificate", CLIENT_CERTIFICATE),
                ("write_certificate_verify", CLIENT_CERTIFICATE_VERIFY),
                ("write_finished", FINISHED),
                ("io", FINISHED),
                ("process_new_session_ticket", NEW_SESSION_TICKET),
                ("app_read", APP_READ),
                ("io", APP_READ),
            ],
        );
        assert_maps(
            Side::Server,
            &[
                ("io", OTHER),
                ("read_client_hello", CLIENT_HELLO),
                ("process_client_hello", CLIENT_HELLO),
                ("write_hello_retry_request", HELLO_RETRY_REQUEST),
                ("write_server_hello", SERVER_HELLO),
                ("write_encrypted_extensions", ENCRYPTED_EXTENSIONS),
                ("write_certificate_request", CERTIFICATE_REQUEST),
                ("write_certificate", CERTIFICATE),
                ("write_certificate_verify", CERTIFICATE_VERIFY),
                ("write_finished", FINISHED),
                ("read_certificate", CLIENT_CERTIFICATE),
                ("process_certificate_verify", CLIENT_CERTIFICATE_VERIFY),
                ("read_finished", CLIENT_FINISHED),
                ("write_new_session_ticket", NEW_SESSION_TICKET),
                ("app_write", APP_WRITE),
                ("close", CLOSE),
            ],
        );
    }
}
