//! rustls' steps mapped to the canonical vocabulary ([`pqtls_core::steps`]).
//!
//! rustls has no message callback. Its stack steps are its API calls (`write_client_hello`,
//! `new_server`, `read_tls`, `process_new_packets`, `write_tls`) and the timed crypto
//! operations inside them; the trace also carries a `Message(m)` marker each time a
//! handshake message enters this side's transcript hash (the suite's hash is wrapped, see
//! `provider::TranscriptHash`), plus one when a ticket is issued or stored. The mapping:
//!
//! - a crypto operation belongs to the message it serves: `kx_keygen` → `client_hello`,
//!   `kx_encapsulate` / `kx_decapsulate` → `server_hello`, `verify_cert_chain` →
//!   `certificate` (server side: `client_certificate`), `verify_signature` →
//!   `certificate_verify` (`client_certificate_verify`), `sign` → `certificate_verify`
//!   (client side: `client_certificate_verify`), `encrypt_ticket` → `new_session_ticket`,
//!   `decrypt_ticket` → `client_hello`;
//! - `write_client_hello` (`ClientConnection::new`) and `new_server` (`ServerConnection::new`)
//!   → `client_hello`;
//! - inside `process_new_packets`, the time after `Message(m)` belongs to `m`'s canonical
//!   step until the next marker; the time before the call's first marker (record
//!   decryption and parsing of the message about to enter the transcript) belongs to that
//!   first marker's step, and so does the `read_tls` call before it. A call without a
//!   marker goes with the step before it;
//! - `write_tls` (copying out records already built) goes with the step before it;
//! - the application-data calls are their own steps.
//!
//! On the client, rustls hashes the ClientHello (and a HelloRetryRequest) only when the
//! ServerHello arrives, so those markers are ignored there; a client `process_new_packets`
//! call without markers that generates a key share is the HelloRetryRequest being handled:
//! its intervals other than `kx_keygen` (which stays `client_hello`) are
//! `hello_retry_request`, building the second ClientHello included.

use pqtls_core::steps::{self, of_message, Direction};
use pqtls_core::trace::{Event, EventKind, HsType, Interval, Side};

/// The canonical step of a timed crypto operation.
pub fn operation(side: Side, step: &str) -> Option<&'static str> {
    let client = side == Side::Client;
    Some(match step {
        "kx_keygen" | "decrypt_ticket" => steps::CLIENT_HELLO,
        "kx_encapsulate" | "kx_decapsulate" => steps::SERVER_HELLO,
        "verify_cert_chain" if client => steps::CERTIFICATE,
        "verify_cert_chain" => steps::CLIENT_CERTIFICATE,
        "verify_signature" if client => steps::CERTIFICATE_VERIFY,
        "verify_signature" => steps::CLIENT_CERTIFICATE_VERIFY,
        "sign" if client => steps::CLIENT_CERTIFICATE_VERIFY,
        "sign" => steps::CERTIFICATE_VERIFY,
        "encrypt_ticket" => steps::NEW_SESSION_TICKET,
        // Certificate compression (RFC 8879): the chain's own step on each side.
        "cert_decompress" if client => steps::CERTIFICATE,
        "cert_decompress" => steps::CLIENT_CERTIFICATE,
        "cert_compress" if client => steps::CLIENT_CERTIFICATE,
        "cert_compress" => steps::CERTIFICATE,
        _ => return None,
    })
}

/// The canonical step of a call whose step is fixed: creating the connection, and the
/// application-data calls.
pub fn named_call(step: &str) -> Option<&'static str> {
    match step {
        "write_client_hello" | "new_server" => Some(steps::CLIENT_HELLO),
        s => [steps::APP_WRITE, steps::APP_READ, steps::CLOSE].into_iter().find(|c| *c == s),
    }
}

/// The canonical step of each interval (a [`pqtls_core::trace::StepMap`]).
pub fn map(side: Side, events: &[Event], intervals: &[Interval]) -> Vec<&'static str> {
    let mut out: Vec<&'static str> = Vec::with_capacity(intervals.len());
    let mut direction = Direction::new(side);
    // The step of the latest marker (or fixed step) seen, and intervals waiting for a marker.
    let mut last: Option<&'static str> = None;
    let mut marked: Option<&'static str> = None;
    let mut pending: Vec<usize> = Vec::new();
    let mut current_call = "";
    // The call generated a key share (on the client after the first call: a HelloRetryRequest).
    let mut keygen_in_call = false;
    for iv in intervals {
        let before = iv.end.checked_sub(1).and_then(|i| events.get(i)).map(|e| e.kind);
        match before {
            Some(EventKind::CallStart { name }) => {
                current_call = name.unwrap_or("");
                marked = None;
                keygen_in_call = false;
            }
            Some(EventKind::Message(m)) => {
                if let Some(c) = marker(side, m, &mut direction) {
                    for i in pending.drain(..) {
                        out[i] = c;
                    }
                    marked = Some(c);
                    last = Some(c);
                }
            }
            _ => {}
        }
        let c = if let Some(c) = operation(side, &iv.step) {
            keygen_in_call |= iv.step == "kx_keygen";
            c
        } else if let Some(c) = named_call(&iv.step) {
            last = Some(c);
            c
        } else if iv.step == "read_tls" || (current_call == "process_new_packets" && marked.is_none()) {
            pending.push(out.len());
            steps::OTHER
        } else if let Some(c) = marked {
            c
        } else {
            last.unwrap_or(steps::OTHER)
        };
        out.push(c);
        // A call that ends without a marker: what waits goes with the step before.
        let ends_call = matches!(events.get(iv.end).map(|e| e.kind), Some(EventKind::CallEnd));
        if ends_call && current_call != "read_tls" && marked.is_none() {
            let hrr = side == Side::Client && keygen_in_call && current_call == "process_new_packets";
            let c = if hrr { steps::HELLO_RETRY_REQUEST } else { last.unwrap_or(steps::OTHER) };
            for i in pending.drain(..) {
                out[i] = c;
            }
        }
    }
    out
}

/// The canonical step a transcript marker opens, or `None` when the marker is ignored.
fn marker(side: Side, m: HsType, direction: &mut Direction) -> Option<&'static str> {
    match (side, m) {
        (Side::Client, HsType::ClientHello | HsType::HelloRetryRequest) => None,
        (_, HsType::Other(254)) => None, // message_hash (after a HelloRetryRequest)
        _ => Some(of_message(side, m, direction.received(m))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_core::steps::*;
    use pqtls_core::trace::attribute_intervals;
    use EventKind::*;
    use HsType::*;

    /// The client's first call: the ClientHello, its key share generated.
    const CLIENT_HELLO_CALL: [EventKind; 4] =
        [CallStart { name: Some("write_client_hello") }, OpStart("kx_keygen"), OpEnd, CallEnd];
    /// Sending what was built, then reading the peer's next flight.
    const WRITE_THEN_READ: [EventKind; 4] =
        [CallStart { name: Some("write_tls") }, CallEnd, CallStart { name: Some("read_tls") }, CallEnd];
    /// The peer's Certificate and CertificateVerify verified, then its Finished.
    const PEER_VERIFIED: [EventKind; 7] = [
        Message(Certificate),
        OpStart("verify_cert_chain"),
        OpEnd,
        OpStart("verify_signature"),
        OpEnd,
        Message(CertificateVerify),
        Message(Finished),
    ];

    /// Asserts each interval's (stack step, canonical step) for the events of `pieces`, in
    /// order, 10 ns apart.
    fn assert_maps(side: Side, pieces: &[&[EventKind]], expect: &[(&str, &str)]) {
        let at =
            |(i, kind): (usize, EventKind)| Event { kind, cpu_ns: i as u64 * 10, wall_ns: i as u64 * 10, bytes: 0 };
        let events: Vec<Event> = pieces.concat().into_iter().enumerate().map(at).collect();
        let (_, ivs) = attribute_intervals(&events);
        let names = map(side, &events, &ivs);
        let got: Vec<(&str, &str)> = ivs.iter().map(|iv| iv.step.as_str()).zip(names).collect();
        assert_eq!(got, expect);
    }

    #[test]
    fn a_client_handshake_maps_by_transcript_markers_and_operations() {
        let events: [&[EventKind]; 7] = [
            &CLIENT_HELLO_CALL,
            &WRITE_THEN_READ,
            &[
                CallStart { name: Some("process_new_packets") },
                Message(ClientHello),
                Message(ServerHello),
                OpStart("kx_decapsulate"),
                OpEnd,
                Message(EncryptedExtensions),
            ],
            &PEER_VERIFIED,
            &[Message(Finished), CallEnd],
            &WRITE_THEN_READ,
            &[
                CallStart { name: Some("process_new_packets") },
                Message(NewSessionTicket),
                CallEnd,
                CallStart { name: Some("app_read") },
                CallEnd,
            ],
        ];
        let expect = [
            ("write_client_hello", CLIENT_HELLO),
            ("kx_keygen", CLIENT_HELLO),
            ("write_client_hello", CLIENT_HELLO),
            ("write_tls", CLIENT_HELLO),
            ("read_tls", SERVER_HELLO),
            ("process_new_packets", SERVER_HELLO), // parsing, before the markers
            ("process_new_packets", SERVER_HELLO), // between the ClientHello and ServerHello markers
            ("process_new_packets", SERVER_HELLO),
            ("kx_decapsulate", SERVER_HELLO),
            ("process_new_packets", SERVER_HELLO),
            ("process_new_packets", ENCRYPTED_EXTENSIONS),
            ("process_new_packets", CERTIFICATE),
            ("verify_cert_chain", CERTIFICATE),
            ("process_new_packets", CERTIFICATE),
            ("verify_signature", CERTIFICATE_VERIFY),
            ("process_new_packets", CERTIFICATE),
            ("process_new_packets", CERTIFICATE_VERIFY),
            ("process_new_packets", FINISHED),
            ("process_new_packets", FINISHED),
            ("write_tls", FINISHED),
            ("read_tls", NEW_SESSION_TICKET),
            ("process_new_packets", NEW_SESSION_TICKET),
            ("process_new_packets", NEW_SESSION_TICKET),
            ("app_read", APP_READ),
        ];
        assert_maps(Side::Client, &events, &expect);
    }

    #[test]
    fn a_server_with_mutual_tls_and_tickets() {
        let events: [&[EventKind]; 3] = [
            &[
                CallStart { name: Some("new_server") },
                CallEnd,
                CallStart { name: Some("read_tls") },
                CallEnd,
                CallStart { name: Some("process_new_packets") },
                Message(ClientHello),
                OpStart("kx_encapsulate"),
                OpEnd,
                Message(ServerHello),
                Message(EncryptedExtensions),
                Message(CertificateRequest),
                Message(Certificate),
                OpStart("sign"),
                OpEnd,
                Message(CertificateVerify),
                Message(Finished),
                CallEnd,
                CallStart { name: Some("read_tls") },
                CallEnd,
                CallStart { name: Some("process_new_packets") },
            ],
            &PEER_VERIFIED,
            &[
                Message(NewSessionTicket),
                OpStart("encrypt_ticket"),
                OpEnd,
                CallEnd,
                CallStart { name: Some("process_new_packets") },
                CallEnd,
            ],
        ];
        let expect = [
            ("new_server", CLIENT_HELLO),
            ("read_tls", CLIENT_HELLO),
            ("process_new_packets", CLIENT_HELLO),
            ("process_new_packets", CLIENT_HELLO),
            ("kx_encapsulate", SERVER_HELLO),
            ("process_new_packets", CLIENT_HELLO),
            ("process_new_packets", SERVER_HELLO),
            ("process_new_packets", ENCRYPTED_EXTENSIONS),
            ("process_new_packets", CERTIFICATE_REQUEST),
            ("process_new_packets", CERTIFICATE),
            ("sign", CERTIFICATE_VERIFY),
            ("process_new_packets", CERTIFICATE),
            ("process_new_packets", CERTIFICATE_VERIFY),
            ("process_new_packets", FINISHED),
            ("read_tls", CLIENT_CERTIFICATE), // pending, named by the Certificate marker
            ("process_new_packets", CLIENT_CERTIFICATE), // decryption and parsing before the marker
            ("process_new_packets", CLIENT_CERTIFICATE),
            ("verify_cert_chain", CLIENT_CERTIFICATE),
            ("process_new_packets", CLIENT_CERTIFICATE),
            ("verify_signature", CLIENT_CERTIFICATE_VERIFY),
            ("process_new_packets", CLIENT_CERTIFICATE),
            ("process_new_packets", CLIENT_CERTIFICATE_VERIFY),
            ("process_new_packets", CLIENT_FINISHED),
            ("process_new_packets", NEW_SESSION_TICKET),
            ("encrypt_ticket", NEW_SESSION_TICKET),
            ("process_new_packets", NEW_SESSION_TICKET),
            ("process_new_packets", NEW_SESSION_TICKET),
        ];
        assert_maps(Side::Server, &events, &expect);
    }

    #[test]
    fn a_client_handling_a_hello_retry_request() {
        let events: [&[EventKind]; 2] = [
            &CLIENT_HELLO_CALL,
            &[
                CallStart { name: Some("read_tls") },
                CallEnd,
                CallStart { name: Some("process_new_packets") },
                OpStart("kx_keygen"),
                OpEnd,
                CallEnd,
                CallStart { name: Some("write_tls") },
                CallEnd,
            ],
        ];
        let expect = [
            ("write_client_hello", CLIENT_HELLO),
            ("kx_keygen", CLIENT_HELLO),
            ("write_client_hello", CLIENT_HELLO),
            ("read_tls", HELLO_RETRY_REQUEST),
            ("process_new_packets", HELLO_RETRY_REQUEST),
            ("kx_keygen", CLIENT_HELLO),
            ("process_new_packets", HELLO_RETRY_REQUEST),
            ("write_tls", CLIENT_HELLO),
        ];
        assert_maps(Side::Client, &events, &expect);
    }
}
