//! The TLS 1.3 records of one connection's two byte streams, opened with the connection's
//! secrets from a key log: the handshake messages and their sizes, the moments of the
//! ClientHello and the client's Finished, and the application data of each direction with
//! the capture times of the records that carried it.
//!
//! Works on any pair of streams (a capture's reassembled directions, or the bytes a client
//! wrote and read): [`handshake_messages`] is the entry point without a capture.

use crate::keylog::{short_hex, KeyLog, Secrets};
use crate::tcp::Stream;
use indexmap::IndexMap;
use pqtls_core::{Error, Result};
use pqtls_tls13::wire::{
    hello_random, server_hello_suite, HsType, Reassembler, Record, Records, ALERT, APPLICATION_DATA,
    CHANGE_CIPHER_SPEC, HANDSHAKE,
};
use pqtls_tls13::{next_traffic_secret, Opener, Suite};

/// Whether a stream starts like TLS (a handshake record).
pub use pqtls_tls13::wire::looks_like_tls;

/// Application data of one direction (decrypted, or the bytes themselves without TLS), with
/// the capture times of what carried it: per record (TLS) or per segment (plain TCP).
#[derive(Clone, Debug, Default)]
pub struct Plain {
    pub data: Vec<u8>,
    /// (first plaintext offset, capture ns of the carrier's first byte, of its last byte).
    chunks: Vec<(u64, u64, u64)>,
}

impl Plain {
    pub(crate) fn push(&mut self, bytes: &[u8], first_ns: u64, last_ns: u64) {
        if bytes.is_empty() {
            return;
        }
        self.chunks.push((self.data.len() as u64, first_ns, last_ns));
        self.data.extend_from_slice(bytes);
    }

    fn chunk(&self, offset: u64) -> Option<&(u64, u64, u64)> {
        let i = self.chunks.partition_point(|c| c.0 <= offset);
        self.chunks.get(i.checked_sub(1)?)
    }

    /// When the record (or segment) carrying plaintext byte `offset` started to be captured.
    pub fn first_ns(&self, offset: u64) -> u64 {
        self.chunk(offset).map_or(0, |c| c.1)
    }

    /// When the record (or segment) carrying plaintext byte `offset` was captured whole.
    pub fn last_ns(&self, offset: u64) -> u64 {
        self.chunk(offset).map_or(0, |c| c.2)
    }

    /// A plain TCP stream's bytes as application data, segment by segment.
    pub(crate) fn of_stream(s: &Stream) -> Plain {
        let mut p = Plain::default();
        for (start, end, ts) in s.pieces() {
            p.push(&s.data[start as usize..end as usize], ts, ts);
        }
        p
    }
}

/// Whether the secrets for a connection were there.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Keys {
    /// No key log was given.
    #[default]
    NoKeyLog,
    /// The key log has no secret for the connection's client random.
    Missing,
    /// The key log's secrets opened every record that was read.
    Found,
}

/// What the TLS records of one connection told.
#[derive(Clone, Debug, Default)]
pub struct TlsConnection {
    /// The first ClientHello's random (the key log's index).
    pub client_random: Option<[u8; 32]>,
    /// The cipher suite the ServerHello chose (IANA name).
    pub cipher_suite: Option<String>,
    pub hello_retry: bool,
    pub keys: Keys,
    /// Capture ns of the first byte of the first ClientHello.
    pub client_hello_ns: Option<u64>,
    /// Capture ns of the first byte of the record holding the client's Finished.
    pub client_finished_ns: Option<u64>,
    /// Handshake messages (4-byte header included) → bytes, named as the in-situ
    /// measurement names them ([`pqtls_core::record::Bytes::messages`]): the server's by
    /// their RFC name, the client's prefixed `Client` (except the ClientHello); messages of a
    /// type sent twice (two ClientHellos after a HelloRetryRequest, two tickets) add up.
    pub messages: IndexMap<String, u64>,
    pub client_app: Plain,
    pub server_app: Plain,
    /// Encrypted records that were not opened (no key, or after a problem).
    pub unopened_records: u64,
    /// What could not be read, each naming the direction, the record and why.
    pub problems: Vec<String>,
    /// A close_notify was seen from the client / the server.
    pub client_closed: bool,
    pub server_closed: bool,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Dir {
    Client,
    Server,
}

impl Dir {
    fn name(self) -> &'static str {
        match self {
            Dir::Client => "client",
            Dir::Server => "server",
        }
    }
    fn label(self, phase: Phase) -> &'static str {
        match (self, phase) {
            (Dir::Client, Phase::Handshake) => "CLIENT_HANDSHAKE_TRAFFIC_SECRET",
            (Dir::Server, Phase::Handshake) => "SERVER_HANDSHAKE_TRAFFIC_SECRET",
            (Dir::Client, _) => "CLIENT_TRAFFIC_SECRET_0",
            (Dir::Server, _) => "SERVER_TRAFFIC_SECRET_0",
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    Plaintext,
    Handshake,
    Traffic,
}

/// One direction's walk through its records.
struct Walk<'a> {
    dir: Dir,
    stream: &'a Stream,
    suite: Option<Suite>,
    secrets: Option<&'a Secrets>,
    phase: Phase,
    opener: Option<Opener>,
    /// The secret `opener` uses (a KeyUpdate derives the next from it).
    secret: Vec<u8>,
    /// Handshake bytes not yet a whole message.
    hs: Reassembler,
    /// The ServerHello's suite (server direction).
    chosen: Option<u16>,
}

/// What a walk found, besides the connection-wide fields it fills in.
#[derive(Default)]
struct WalkOut {
    hello_ns: Option<u64>,
    finished_ns: Option<u64>,
    random: Option<[u8; 32]>,
    hrr: bool,
}

impl<'a> Walk<'a> {
    fn new(dir: Dir, stream: &'a Stream, suite: Option<Suite>, secrets: Option<&'a Secrets>) -> Walk<'a> {
        Walk {
            dir,
            stream,
            suite,
            secrets,
            phase: Phase::Plaintext,
            opener: None,
            secret: Vec::new(),
            hs: Reassembler::default(),
            chosen: None,
        }
    }

    fn secret_for(&self, phase: Phase) -> Option<&'a [u8]> {
        let s = self.secrets?;
        match (self.dir, phase) {
            (Dir::Client, Phase::Handshake) => s.client_handshake.as_deref(),
            (Dir::Server, Phase::Handshake) => s.server_handshake.as_deref(),
            (Dir::Client, _) => s.client_traffic_0.as_deref(),
            (Dir::Server, _) => s.server_traffic_0.as_deref(),
        }
    }

    /// Walks every record; fills `conn` (messages, application data, problems).
    fn run(&mut self, conn: &mut TlsConnection) -> WalkOut {
        let mut out = WalkOut::default();
        let data = &self.stream.data;
        let mut split = Records::checked(data);
        let recs: Vec<Record> = split.by_ref().collect();
        let mut blocked = false;
        for (i, r) in recs.iter().enumerate() {
            let payload = r.payload();
            let first_ns = self.stream.ts_at(r.offset as u64);
            let last_ns = self.stream.ts_at(r.end() as u64 - 1);
            match r.content_type() {
                CHANGE_CIPHER_SPEC => {}
                HANDSHAKE if self.phase == Phase::Plaintext => {
                    for (ty, msg) in self.messages(payload) {
                        if ty == HsType::ClientHello && out.hello_ns.is_none() {
                            out.hello_ns = Some(first_ns);
                            out.random = hello_random(&msg[4..]);
                        }
                        if ty == HsType::HelloRetryRequest {
                            out.hrr = true;
                        }
                        if ty == HsType::ServerHello {
                            self.chosen = server_hello_suite(&msg[4..]);
                            self.suite = self.suite.or(self.chosen.and_then(Suite::from_code_point));
                        }
                        self.count(conn, ty, msg.len());
                    }
                    if self.dir == Dir::Server && self.chosen.is_some() {
                        self.phase = Phase::Handshake;
                    }
                }
                ALERT if self.phase == Phase::Plaintext => {
                    conn.problems.push(format!(
                        "the {} sent an alert in the clear ({:?}): the handshake failed",
                        self.dir.name(),
                        payload
                    ));
                }
                APPLICATION_DATA if !blocked => {
                    if self.phase == Phase::Plaintext {
                        // The client's first protected record follows its ClientHello(s).
                        self.phase = Phase::Handshake;
                    }
                    match self.open(r, payload, i, conn) {
                        Some((inner, plain)) => {
                            if self.inner(inner, &plain, first_ns, last_ns, conn, &mut out) {
                                blocked = true;
                            }
                        }
                        None => {
                            blocked = true;
                            conn.unopened_records += 1;
                        }
                    }
                }
                APPLICATION_DATA => conn.unopened_records += 1,
                other => {
                    conn.problems.push(format!(
                        "the {}'s record {} (offset {}) has content type {other} where a protected record was expected",
                        self.dir.name(),
                        i + 1,
                        r.offset
                    ));
                    blocked = true;
                }
            }
        }
        if let Some(stop) = split.stop() {
            conn.problems.push(format!("the {}'s stream after {} records: {stop}", self.dir.name(), recs.len()));
        }
        out
    }

    /// Opens one protected record with the key of the current phase; `None` (with a problem
    /// said, or the key's absence noted) when it cannot.
    fn open(&mut self, r: &Record, payload: &[u8], index: usize, conn: &mut TlsConnection) -> Option<(u8, Vec<u8>)> {
        let header = r.header_bytes();
        if self.opener.is_none() {
            // A missing secret is said once per connection, by `decode`.
            let secret = self.secret_for(self.phase)?;
            let Some(suite) = self.suite else {
                conn.problems.push(format!(
                    "the {}'s protected records cannot be opened: the ServerHello chose no TLS 1.3 suite this \
                     analyser reads (TLS_AES_128_GCM_SHA256, TLS_AES_256_GCM_SHA384, TLS_CHACHA20_POLY1305_SHA256)",
                    self.dir.name()
                ));
                return None;
            };
            self.secret = secret.to_vec();
            self.opener = Opener::new(&suite, secret);
            if self.opener.is_none() {
                conn.problems.push(format!(
                    "the key log's {} ({} bytes) does not fit {}",
                    self.dir.label(self.phase),
                    secret.len(),
                    suite.name()
                ));
                return None;
            }
        }
        let opener = self.opener.as_mut()?;
        let seq = opener.seq();
        match opener.open(header, payload) {
            Some(x) => Some(x),
            None => {
                conn.problems.push(format!(
                    "the key log's {} does not open the {}'s record {} (offset {}, sequence number {seq}): the key \
                     log is not this connection's, or the capture lost bytes",
                    self.dir.label(self.phase),
                    self.dir.name(),
                    index + 1,
                    r.offset
                ));
                None
            }
        }
    }

    /// Handles an opened record's content; true when the walk cannot go on.
    fn inner(
        &mut self,
        inner: u8,
        plain: &[u8],
        first_ns: u64,
        last_ns: u64,
        conn: &mut TlsConnection,
        out: &mut WalkOut,
    ) -> bool {
        match inner {
            HANDSHAKE => {
                let mut next_phase = None;
                for (ty, msg) in self.messages(plain) {
                    self.count(conn, ty, msg.len());
                    if ty == HsType::Finished && self.phase == Phase::Handshake {
                        if self.dir == Dir::Client {
                            out.finished_ns = Some(first_ns);
                        }
                        next_phase = Some(Phase::Traffic);
                    }
                    if ty == HsType::KeyUpdate {
                        next_phase = Some(self.phase);
                    }
                }
                match next_phase {
                    Some(Phase::Traffic) if self.phase == Phase::Handshake => {
                        self.phase = Phase::Traffic;
                        self.opener = None;
                    }
                    Some(_) => {
                        // KeyUpdate: the next generation of this direction's secret.
                        let suite = self.suite.expect("a record was opened, so the suite is known");
                        match next_traffic_secret(&suite, &self.secret).and_then(|s| {
                            let o = Opener::new(&suite, &s);
                            self.secret = s;
                            o
                        }) {
                            Some(o) => self.opener = Some(o),
                            None => return true,
                        }
                    }
                    None => {}
                }
                false
            }
            APPLICATION_DATA => {
                if self.phase != Phase::Traffic {
                    conn.problems.push(format!("the {} sent application data before its Finished", self.dir.name()));
                }
                let app = if self.dir == Dir::Client { &mut conn.client_app } else { &mut conn.server_app };
                app.push(plain, first_ns, last_ns);
                false
            }
            ALERT => {
                if plain.len() == 2 && plain[1] == 0 {
                    if self.dir == Dir::Client {
                        conn.client_closed = true;
                    } else {
                        conn.server_closed = true;
                    }
                } else {
                    conn.problems.push(format!("the {} sent an alert {plain:?}", self.dir.name()));
                }
                false
            }
            other => {
                conn.problems.push(format!("the {} sent a protected record of inner type {other}", self.dir.name()));
                true
            }
        }
    }

    /// Whole handshake messages completed by `bytes`: (type, message with its header).
    fn messages(&mut self, bytes: &[u8]) -> Vec<(HsType, Vec<u8>)> {
        self.hs.push(bytes).map(|m| (m.kind(), m.bytes().to_vec())).collect()
    }

    fn count(&self, conn: &mut TlsConnection, ty: HsType, bytes: usize) {
        let name = ty.rfc_name();
        let key = if self.dir == Dir::Client && ty != HsType::ClientHello { format!("Client{name}") } else { name };
        *conn.messages.entry(key).or_insert(0) += bytes as u64;
    }
}

/// Reads one TLS connection from its two streams. `keys`: the key log, if any (without one,
/// only the plaintext part of the handshake is read: ClientHello, ServerHello or
/// HelloRetryRequest).
pub fn decode(client_to_server: &Stream, server_to_client: &Stream, keys: Option<&KeyLog>) -> TlsConnection {
    let mut conn = TlsConnection::default();
    // The ClientHello first: its random finds the secrets.
    let mut probe = Walk::new(Dir::Client, client_to_server, None, None);
    let mut scratch = TlsConnection::default();
    let hello = probe.run(&mut scratch);
    conn.client_random = hello.random;
    let secrets = match (keys, hello.random) {
        (None, _) => None,
        (Some(log), Some(r)) => {
            let s = log.get(&r);
            conn.keys = if s.is_some() { Keys::Found } else { Keys::Missing };
            s
        }
        (Some(_), None) => {
            conn.keys = Keys::Missing;
            None
        }
    };
    // The server's walk learns the suite from its ServerHello, before its first protected
    // record; the client's walk needs it from the start.
    let mut server = Walk::new(Dir::Server, server_to_client, None, secrets);
    let s_out = server.run(&mut conn);
    conn.cipher_suite =
        server.chosen.map(|cp| Suite::from_code_point(cp).map_or(format!("0x{cp:04x}"), |x| x.name().into()));
    let suite = server.suite;
    let mut client = Walk::new(Dir::Client, client_to_server, suite, secrets);
    let c_out = client.run(&mut conn);
    conn.client_hello_ns = c_out.hello_ns;
    conn.client_finished_ns = c_out.finished_ns;
    conn.hello_retry = s_out.hrr;
    if conn.keys == Keys::Missing && conn.unopened_records > 0 {
        conn.problems.insert(
            0,
            format!(
                "no secrets in the key log for client random {}: the handshake's end and the HTTP moments are unknown",
                conn.client_random.map_or("(no ClientHello)".into(), |r| short_hex(&r))
            ),
        );
    } else if conn.keys == Keys::Found && conn.unopened_records > 0 && conn.problems.is_empty() {
        conn.problems.push(format!(
            "the key log lacks secrets for client random {}: {} protected records not opened",
            conn.client_random.map_or(String::new(), |r| short_hex(&r)),
            conn.unopened_records
        ));
    }
    conn
}

/// The handshake messages of a TLS 1.3 connection, from the bytes each side sent (whole
/// streams from the first byte; anything after the handshake may follow) and the secrets of
/// a key log (found by the ClientHello's random): message name → bytes, named as the in-situ
/// measurement's [`pqtls_core::record::Bytes::messages`]. An error names what could not be
/// read (no secrets for the connection, a record that does not open, a stream that is not
/// TLS).
pub fn handshake_messages(
    client_to_server: &[u8],
    server_to_client: &[u8],
    keys: &KeyLog,
) -> Result<IndexMap<String, u64>> {
    let conn = decode(&Stream::untimed(client_to_server), &Stream::untimed(server_to_client), Some(keys));
    if conn.client_random.is_none() {
        return Err(Error::Invalid("the client's bytes do not start with a TLS ClientHello".into()));
    }
    // A record cut short at the end of a stream is not a problem for message sizes when the
    // handshake is complete; anything else is.
    let problems: Vec<&String> =
        conn.problems.iter().filter(|p| !p.contains("cut short") || conn.client_finished_ns.is_none()).collect();
    if !problems.is_empty() || conn.client_finished_ns.is_none() {
        let what = if problems.is_empty() {
            "the client's Finished was not found".to_string()
        } else {
            problems.iter().map(|p| p.as_str()).collect::<Vec<_>>().join("; ")
        };
        return Err(Error::Invalid(format!("handshake messages: {what}")));
    }
    Ok(conn.messages)
}

#[cfg(test)]
mod tests {
    use super::*;

    use pqtls_tls13::wire::encode_records as rec;

    #[test]
    fn without_keys_the_plaintext_hello_is_read_and_the_rest_is_said_unknown() {
        let mut body = vec![3, 3];
        body.extend([7u8; 32]);
        body.extend([0, 0, 2, 0x13, 0x01, 1, 0, 0, 0]);
        let mut ch = vec![1, 0, 0, body.len() as u8];
        ch.extend(&body);
        let mut c2s = rec(22, &ch);
        c2s.extend(rec(23, &[0; 40]));
        let mut sh_body = vec![3, 3];
        sh_body.extend([9u8; 32]);
        sh_body.extend([0, 0x13, 0x02, 0, 0, 0]);
        let mut sh = vec![2, 0, 0, sh_body.len() as u8];
        sh.extend(&sh_body);
        let mut s2c = rec(22, &sh);
        s2c.extend(rec(20, &[1]));
        s2c.extend(rec(23, &[0; 40]));
        let conn = decode(&Stream::untimed(&c2s), &Stream::untimed(&s2c), Some(&KeyLog::new()));
        assert_eq!(conn.client_random, Some([7; 32]));
        assert_eq!(conn.cipher_suite.as_deref(), Some("TLS_AES_256_GCM_SHA384"));
        assert_eq!(conn.keys, Keys::Missing);
        assert_eq!(conn.messages.get("ClientHello"), Some(&(ch.len() as u64)));
        assert_eq!(conn.messages.get("ServerHello"), Some(&(sh.len() as u64)));
        assert_eq!(conn.unopened_records, 2);
        assert!(conn.problems[0].contains("no secrets in the key log for client random 070707"), "{:?}", conn.problems);
        let e = handshake_messages(&c2s, &s2c, &KeyLog::new()).unwrap_err().to_string();
        assert!(e.contains("no secrets in the key log"), "{e}");
    }
}
