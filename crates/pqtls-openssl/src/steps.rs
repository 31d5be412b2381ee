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

    fn iv(step: &str) -> Interval {
        Interval { end: 0, step: step.to_string(), cpu_ns: 1, wall_ns: 1 }
    }

    #[test]
    fn client_and_server_steps_map_by_message_and_direction() {
        let client = [
            "write_client_hello",
            "io",
            "read_server_hello",
            "process_server_hello",
            "read_encrypted_extensions",
            "process_certificate_request",
            "process_certificate",
            "process_certificate_verify",
            "process_finished",
            "write_certificate",
            "write_certificate_verify",
            "write_finished",
            "io",
            "process_new_session_ticket",
            "app_read",
            "io",
        ];
        let ivs: Vec<Interval> = client.iter().map(|s| iv(s)).collect();
        assert_eq!(
            map(Side::Client, &[], &ivs),
            [
                CLIENT_HELLO,
                CLIENT_HELLO,
                SERVER_HELLO,
                SERVER_HELLO,
                ENCRYPTED_EXTENSIONS,
                CERTIFICATE_REQUEST,
                CERTIFICATE,
                CERTIFICATE_VERIFY,
                FINISHED,
                CLIENT_CERTIFICATE,
                CLIENT_CERTIFICATE_VERIFY,
                FINISHED,
                FINISHED,
                NEW_SESSION_TICKET,
                APP_READ,
                APP_READ
            ]
        );
        let server = [
            "io",
            "read_client_hello",
            "process_client_hello",
            "write_hello_retry_request",
            "write_server_hello",
            "write_encrypted_extensions",
            "write_certificate_request",
            "write_certificate",
            "write_certificate_verify",
            "write_finished",
            "read_certificate",
            "process_certificate_verify",
            "read_finished",
            "write_new_session_ticket",
            "app_write",
            "close",
        ];
        let ivs: Vec<Interval> = server.iter().map(|s| iv(s)).collect();
        assert_eq!(
            map(Side::Server, &[], &ivs),
            [
                OTHER,
                CLIENT_HELLO,
                CLIENT_HELLO,
                HELLO_RETRY_REQUEST,
                SERVER_HELLO,
                ENCRYPTED_EXTENSIONS,
                CERTIFICATE_REQUEST,
                CERTIFICATE,
                CERTIFICATE_VERIFY,
                FINISHED,
                CLIENT_CERTIFICATE,
                CLIENT_CERTIFICATE_VERIFY,
                CLIENT_FINISHED,
                NEW_SESSION_TICKET,
                APP_WRITE,
                CLOSE
            ]
        );
    }
}
