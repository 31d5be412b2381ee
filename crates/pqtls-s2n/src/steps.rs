//! s2n-tls' steps mapped to the canonical vocabulary ([`pqtls_core::steps`]).
//!
//! s2n-tls' stack steps are its API calls (`negotiate`, `recv_ticket`, `app_write`,
//! `app_read`, `close`). Inside a call, a `Message(m)` marker is put in the trace when
//! s2n-tls' handler of message `m` has finished (its timing checkpoint), when the client has
//! processed a ticket (its session-ticket callback) and when the server has written one (its
//! send callback after the client's Finished). An interval belongs to the step of the marker
//! that *ends* it — everything s2n-tls did since the previous marker (reading and decrypting
//! the record, then the handler; or sending the previous message's record, updating the key
//! schedule, then building this message) is spent on the way to that message; an interval
//! with no marker after it in its call (the call's tail: flushing, waiting for input) goes
//! with the step before it. The direction of a message follows the TLS 1.3 order
//! ([`Direction`]).

use pqtls_core::steps::{self, of_message, Direction};
use pqtls_core::trace::{Event, EventKind, HsType, Interval, Side};

/// The handshake message of an s2n-tls timing checkpoint (its `message_names`), if it is one
/// pqtls reports (ChangeCipherSpec, record and negotiate checkpoints are not).
pub fn message(name: &[u8]) -> Option<HsType> {
    Some(match name {
        b"CLIENT_HELLO" => HsType::ClientHello,
        b"SERVER_HELLO" => HsType::ServerHello,
        b"HELLO_RETRY_MSG" => HsType::HelloRetryRequest,
        b"ENCRYPTED_EXTENSIONS" => HsType::EncryptedExtensions,
        b"SERVER_CERT_REQ" => HsType::CertificateRequest,
        b"SERVER_CERT" | b"CLIENT_CERT" => HsType::Certificate,
        b"SERVER_CERT_VERIFY" | b"CLIENT_CERT_VERIFY" => HsType::CertificateVerify,
        b"SERVER_FINISHED" | b"CLIENT_FINISHED" => HsType::Finished,
        b"END_OF_EARLY_DATA" => HsType::EndOfEarlyData,
        _ => return None,
    })
}

/// The IANA name of a signature scheme as s2n-tls names it (`ecdsa_sha256` is, in TLS 1.3,
/// `ecdsa_secp256r1_sha256`).
pub fn iana_scheme(s2n_name: &str) -> String {
    match s2n_name {
        "ecdsa_sha256" => "ecdsa_secp256r1_sha256",
        "ecdsa_sha384" => "ecdsa_secp384r1_sha384",
        "ecdsa_sha512" => "ecdsa_secp521r1_sha512",
        other => other,
    }
    .to_string()
}

/// The code of the key-schedule marker (`crate::KEY_SCHEDULE`): s2n-tls derived secrets, right
/// after handling the message before it (the handshake secrets after the ServerHello — the
/// shared secret with them —, the application secrets after the server's Finished).
pub const KEY_SCHEDULE_CODE: u8 = 0xFE;

/// The canonical step of each interval (a [`pqtls_core::trace::StepMap`]).
pub fn map(side: Side, events: &[Event], intervals: &[Interval]) -> Vec<&'static str> {
    let mut direction = Direction::new(side);
    let kind = |iv: &Interval| events.get(iv.end).map(|e| e.kind);
    // The step of each interval that ends at a marker, in order (the direction needs it so).
    let mut previous = None;
    let own: Vec<Option<&'static str>> = intervals
        .iter()
        .map(|iv| match kind(iv) {
            Some(EventKind::Message(HsType::Other(KEY_SCHEDULE_CODE))) => previous,
            Some(EventKind::Message(m)) => {
                previous = Some(of_message(side, m, direction.received(m)));
                previous
            }
            _ => None,
        })
        .collect();
    let mut out = Vec::with_capacity(intervals.len());
    let mut last: Option<&'static str> = None;
    let mut first = 0;
    while first < intervals.len() {
        // One call: `first..=end`, its last interval ending at the CallEnd.
        let mut end = first;
        while end + 1 < intervals.len() && kind(&intervals[end]) != Some(EventKind::CallEnd) {
            end += 1;
        }
        for k in first..=end {
            let step = match intervals[k].step.as_str() {
                s if s == steps::APP_WRITE => steps::APP_WRITE,
                s if s == steps::APP_READ => steps::APP_READ,
                s if s == steps::CLOSE => steps::CLOSE,
                _ => own[k].or_else(|| own[k + 1..=end].iter().find_map(|o| *o)).or(last).unwrap_or(steps::OTHER),
            };
            out.push(step);
            last = Some(step);
        }
        first = end + 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::steps::*;

    /// A trace of calls, each a list of what ends its intervals (a marker, or nothing: `None`),
    /// and the steps expected for every interval.
    fn check(side: Side, calls: &[(&'static str, &[Option<HsType>])], want: &[&str]) {
        let mut events = Vec::new();
        let mut intervals = Vec::new();
        let ev = |kind| Event { kind, cpu_ns: 0, wall_ns: 0, bytes: 0 };
        for (name, ends) in calls {
            events.push(ev(EventKind::CallStart { name: Some(name) }));
            for end in ends.iter() {
                events.push(ev(match end {
                    Some(m) => EventKind::Message(*m),
                    None => EventKind::OpEnd,
                }));
                intervals.push(Interval { end: events.len() - 1, step: name.to_string(), cpu_ns: 1, wall_ns: 1 });
            }
            events.push(ev(EventKind::CallEnd));
            intervals.push(Interval { end: events.len() - 1, step: name.to_string(), cpu_ns: 1, wall_ns: 1 });
        }
        assert_eq!(map(side, &events, &intervals), want, "{side:?}");
    }

    #[test]
    fn intervals_go_to_the_marker_that_ends_them_and_tails_to_the_step_before() {
        use HsType::*;
        check(
            Side::Client,
            &[
                ("negotiate", &[Some(ClientHello)]),
                (
                    "negotiate",
                    &[
                        Some(ServerHello),
                        Some(HsType::Other(KEY_SCHEDULE_CODE)),
                        Some(EncryptedExtensions),
                        Some(CertificateRequest),
                        Some(Certificate),
                        Some(CertificateVerify),
                        Some(Finished),
                        Some(Certificate),
                        Some(CertificateVerify),
                        Some(Finished),
                    ],
                ),
                ("recv_ticket", &[Some(NewSessionTicket)]),
                ("app_write", &[]),
            ],
            &[
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
                NEW_SESSION_TICKET,
                APP_WRITE,
            ],
        );
        check(
            Side::Server,
            &[
                ("negotiate", &[]),
                (
                    "negotiate",
                    &[
                        Some(ClientHello),
                        None,
                        Some(ServerHello),
                        None,
                        Some(EncryptedExtensions),
                        Some(Certificate),
                        Some(CertificateVerify),
                        Some(Finished),
                    ],
                ),
                ("negotiate", &[Some(Finished), Some(NewSessionTicket)]),
                ("close", &[]),
            ],
            &[
                OTHER,
                CLIENT_HELLO,
                SERVER_HELLO,
                SERVER_HELLO,
                ENCRYPTED_EXTENSIONS,
                ENCRYPTED_EXTENSIONS,
                CERTIFICATE,
                CERTIFICATE_VERIFY,
                FINISHED,
                FINISHED,
                CLIENT_FINISHED,
                NEW_SESSION_TICKET,
                NEW_SESSION_TICKET,
                CLOSE,
            ],
        );
    }

    #[test]
    fn checkpoint_names_and_scheme_names() {
        assert_eq!(message(b"SERVER_CERT_VERIFY"), Some(HsType::CertificateVerify));
        assert_eq!(message(b"CLIENT_CHANGE_CIPHER_SPEC"), None);
        assert_eq!(message(b"RECORD_READ"), None);
        assert_eq!(iana_scheme("ecdsa_sha384"), "ecdsa_secp384r1_sha384");
        assert_eq!(iana_scheme("mldsa65"), "mldsa65");
    }
}
