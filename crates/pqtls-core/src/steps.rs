//! The canonical step vocabulary both stacks report, named by what happens in the protocol
//! (see docs/attribution.md for each stack's mapping).
//!
//! Each stack attributes CPU time to its own steps (OpenSSL: `read_<m>`/`process_<m>`/
//! `write_<m>`/`io`; rustls: API calls and timed crypto operations) and maps every interval
//! to one canonical step with a pure function ([`crate::trace::StepMap`]). A sample's
//! `steps` then holds canonical steps only (they add up to the side's CPU time), and its
//! `substeps` the stack steps under their parent, keyed `<canonical>/<stack step>`.

use crate::trace::{HsType, Side};

/// Client: building the ClientHello, key-share generation included (again after a
/// HelloRetryRequest). Server: receiving and processing the ClientHello.
pub const CLIENT_HELLO: &str = "client_hello";
/// Client: processing the ServerHello (decapsulation / shared secret, handshake key
/// schedule). Server: key share (encapsulation / shared secret) and writing the ServerHello.
pub const SERVER_HELLO: &str = "server_hello";
/// Client: processing a HelloRetryRequest. Server: writing it.
pub const HELLO_RETRY_REQUEST: &str = "hello_retry_request";
pub const ENCRYPTED_EXTENSIONS: &str = "encrypted_extensions";
/// Server: writing the CertificateRequest (mutual TLS). Client: processing it.
pub const CERTIFICATE_REQUEST: &str = "certificate_request";
/// Client: the server's Certificate, chain validation included. Server: writing its own.
pub const CERTIFICATE: &str = "certificate";
/// Client: verifying the server's CertificateVerify. Server: signing and writing it.
pub const CERTIFICATE_VERIFY: &str = "certificate_verify";
/// Client: verifying the server's Finished and writing its own. Server: writing its own.
pub const FINISHED: &str = "finished";
/// Server: reading and verifying the client's Finished.
pub const CLIENT_FINISHED: &str = "client_finished";
/// Mutual TLS. Client: writing its Certificate. Server: processing it, chain validation included.
pub const CLIENT_CERTIFICATE: &str = "client_certificate";
/// Mutual TLS. Client: signing and writing its CertificateVerify. Server: verifying it.
pub const CLIENT_CERTIFICATE_VERIFY: &str = "client_certificate_verify";
/// Server: writing a ticket. Client: processing it.
pub const NEW_SESSION_TICKET: &str = "new_session_ticket";
/// Application data written ([`crate::backend::Endpoint::write_app`]), after the handshake.
pub const APP_WRITE: &str = "app_write";
/// Application data received and decrypted ([`crate::backend::Endpoint::read_app`]).
pub const APP_READ: &str = "app_read";
/// Queuing close_notify ([`crate::backend::Endpoint::close`]).
pub const CLOSE: &str = "close";
/// Anything else (e.g. a call that handled no message).
pub const OTHER: &str = "other";

/// Every canonical step.
pub const ALL: &[&str] = &[
    CLIENT_HELLO,
    SERVER_HELLO,
    HELLO_RETRY_REQUEST,
    ENCRYPTED_EXTENSIONS,
    CERTIFICATE_REQUEST,
    CERTIFICATE,
    CERTIFICATE_VERIFY,
    FINISHED,
    CLIENT_FINISHED,
    CLIENT_CERTIFICATE,
    CLIENT_CERTIFICATE_VERIFY,
    NEW_SESSION_TICKET,
    APP_WRITE,
    APP_READ,
    CLOSE,
    OTHER,
];

/// The canonical step in which `side` handles message `m`; `received`: `m` came from the peer.
pub fn of_message(side: Side, m: HsType, received: bool) -> &'static str {
    use HsType::*;
    // A compressed certificate (RFC 8879) is the Certificate's step: writing it (its
    // compression, when not done ahead), or receiving it (its decompression, then the chain).
    let m = if m == CompressedCertificate { Certificate } else { m };
    match (side, received, m) {
        (Side::Client, false, ClientHello) => CLIENT_HELLO,
        (Side::Client, false, Certificate) => CLIENT_CERTIFICATE,
        (Side::Client, false, CertificateVerify) => CLIENT_CERTIFICATE_VERIFY,
        (Side::Client, _, Finished) => FINISHED,
        (Side::Client, true, ServerHello) => SERVER_HELLO,
        (Side::Client, true, HelloRetryRequest) => HELLO_RETRY_REQUEST,
        (Side::Client, true, EncryptedExtensions) => ENCRYPTED_EXTENSIONS,
        (Side::Client, true, CertificateRequest) => CERTIFICATE_REQUEST,
        (Side::Client, true, Certificate) => CERTIFICATE,
        (Side::Client, true, CertificateVerify) => CERTIFICATE_VERIFY,
        (Side::Client, true, NewSessionTicket) => NEW_SESSION_TICKET,
        (Side::Server, true, ClientHello) => CLIENT_HELLO,
        (Side::Server, true, Certificate) => CLIENT_CERTIFICATE,
        (Side::Server, true, CertificateVerify) => CLIENT_CERTIFICATE_VERIFY,
        (Side::Server, true, Finished) => CLIENT_FINISHED,
        (Side::Server, false, ServerHello) => SERVER_HELLO,
        (Side::Server, false, HelloRetryRequest) => HELLO_RETRY_REQUEST,
        (Side::Server, false, EncryptedExtensions) => ENCRYPTED_EXTENSIONS,
        (Side::Server, false, CertificateRequest) => CERTIFICATE_REQUEST,
        (Side::Server, false, Certificate) => CERTIFICATE,
        (Side::Server, false, CertificateVerify) => CERTIFICATE_VERIFY,
        (Side::Server, false, Finished) => FINISHED,
        (Side::Server, false, NewSessionTicket) => NEW_SESSION_TICKET,
        _ => OTHER,
    }
}

/// Tells, for a stack that reports messages without their direction, whether each message
/// was received, from the TLS 1.3 message order: Certificate, CertificateVerify and
/// Finished come from the server until the first Finished (the server's) has gone by, then
/// from the client.
#[derive(Clone, Copy, Debug)]
pub struct Direction {
    side: Side,
    finished_seen: bool,
}

impl Direction {
    pub fn new(side: Side) -> Direction {
        Direction { side, finished_seen: false }
    }

    /// Whether `m` was received by this side; call once per message, in transcript order.
    pub fn received(&mut self, m: HsType) -> bool {
        use HsType::*;
        let from_server = match m {
            ClientHello | EndOfEarlyData => false,
            Certificate | CompressedCertificate | CertificateVerify | Finished => !self.finished_seen,
            KeyUpdate | Other(_) => self.side == Side::Client,
            _ => true,
        };
        if m == Finished {
            self.finished_seen = true;
        }
        from_server == (self.side == Side::Client)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_follows_the_tls13_message_order() {
        use HsType::*;
        let mut c = Direction::new(Side::Client);
        let got: Vec<&str> = [ServerHello, EncryptedExtensions, CertificateRequest, Certificate, CertificateVerify]
            .into_iter()
            .chain([Finished, Certificate, CertificateVerify, Finished, NewSessionTicket])
            .map(|m| of_message(Side::Client, m, c.received(m)))
            .collect();
        assert_eq!(
            got,
            [
                SERVER_HELLO,
                ENCRYPTED_EXTENSIONS,
                CERTIFICATE_REQUEST,
                CERTIFICATE,
                CERTIFICATE_VERIFY,
                FINISHED,
                CLIENT_CERTIFICATE,
                CLIENT_CERTIFICATE_VERIFY,
                FINISHED,
                NEW_SESSION_TICKET
            ]
        );
        let mut s = Direction::new(Side::Server);
        let got: Vec<&str> = [ClientHello, ServerHello, Certificate, CertificateVerify, Finished]
            .into_iter()
            .chain([Certificate, CertificateVerify, Finished, NewSessionTicket])
            .map(|m| of_message(Side::Server, m, s.received(m)))
            .collect();
        assert_eq!(
            got,
            [
                CLIENT_HELLO,
                SERVER_HELLO,
                CERTIFICATE,
                CERTIFICATE_VERIFY,
                FINISHED,
                CLIENT_CERTIFICATE,
                CLIENT_CERTIFICATE_VERIFY,
                CLIENT_FINISHED,
                NEW_SESSION_TICKET
            ]
        );
    }
}
