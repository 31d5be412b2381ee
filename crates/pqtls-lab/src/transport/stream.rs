//! One endpoint's side of a handshake over a byte stream: drive, send what the stack wrote,
//! read the peer's answer, until this side is done. The same code runs the client and the
//! server thread of the socketpair and TCP transports, and talks to peers that pqtls does
//! not control ([`over_stream`]).

use pqtls_core::backend::Endpoint;
use pqtls_core::trace::{RecordCount, RecordCounter};
use pqtls_core::{Error, Result};
use std::io::{ErrorKind, Read, Write};
use std::time::{Duration, Instant};

/// Which side of the handshake this end plays: a client writes first, a server reads first.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    Client,
    Server,
}

impl Role {
    fn name(self) -> &'static str {
        match self {
            Role::Client => "client",
            Role::Server => "server",
        }
    }

    fn peer(self) -> &'static str {
        match self {
            Role::Client => "server",
            Role::Server => "client",
        }
    }
}

/// How long one side waits, and what its errors call the transport.
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    /// Past this instant, a side still waiting for its peer gives up. `None`: wait as the
    /// stream itself waits (a blocking stream without timeout waits forever).
    pub deadline: Option<Instant>,
    /// The timeout the deadline came from, for the error message.
    pub timeout: Duration,
    /// The transport's name in error messages (`tcp`, `socketpair`, `stream`).
    pub transport: &'static str,
}

impl Limit {
    /// A deadline `timeout` from now.
    pub fn after(timeout: Duration, transport: &'static str) -> Limit {
        Limit { deadline: Some(Instant::now() + timeout), timeout, transport }
    }

    /// Called when the stream has nothing to read or no room to write: Ok to try again, or
    /// the error that ends the handshake.
    fn wait(&self, role: Role, what: &str) -> Result<()> {
        match self.deadline {
            Some(d) if Instant::now() < d => {
                std::hint::spin_loop();
                Ok(())
            }
            Some(_) => Err(Error::tls(
                self.transport,
                format!(
                    "the {role} side gave up {what} the {peer} after the handshake timeout of {:?}: the {peer} is stuck or never answers",
                    self.timeout,
                    role = role.name(),
                    peer = role.peer()
                ),
            )),
            None => Err(Error::tls(
                self.transport,
                format!("{what} the {} timed out (the stream's own timeout)", role.peer()),
            )),
        }
    }
}

/// Runs one endpoint's handshake over a blocking byte stream (a TCP connection to a peer
/// that pqtls does not control): the client writes first, a server reads first. Set a read
/// timeout on the stream to bound the wait for a silent peer.
pub fn over_stream<S: Read + Write>(ep: &mut dyn Endpoint, stream: &mut S, client: bool) -> Result<RecordCount> {
    let role = if client { Role::Client } else { Role::Server };
    let limit = Limit { deadline: None, timeout: Duration::ZERO, transport: "stream" };
    exchange(ep, stream, role, &limit)
}

/// One endpoint's handshake over `stream`. Input is handed to the stack in whole TLS
/// records only (everything whole that has arrived, at once), so a flight split by the
/// kernel does not add calls that a flight in memory would not have. On a non-blocking
/// stream the wait for the peer spins (see [`pqtls_core::transport::Wait`]).
pub fn exchange<S: Read + Write>(
    ep: &mut dyn Endpoint,
    stream: &mut S,
    role: Role,
    limit: &Limit,
) -> Result<RecordCount> {
    let mut sent = RecordCounter::default();
    let mut out = Vec::with_capacity(16 * 1024);
    let mut input = vec![0u8; 64 * 1024];
    let mut pending: Vec<u8> = Vec::with_capacity(64 * 1024);
    let mut first = role == Role::Client;
    loop {
        if !first {
            let whole = loop {
                let whole = whole_records(&pending);
                if whole > 0 {
                    break whole;
                }
                let n = read_some(stream, &mut input, role, limit)?;
                pending.extend_from_slice(&input[..n]);
            };
            ep.receive(&pending[..whole])?;
            pending.drain(..whole);
        }
        first = false;
        let done = ep.drive()?;
        out.clear();
        ep.take_output(&mut out)?;
        if !out.is_empty() {
            sent.feed(&out);
            write_all(stream, &out, role, limit)?;
        }
        if done {
            ep.finish()?;
            return Ok(sent.count);
        }
    }
}

/// Reads what is there (at least one byte), waiting as the stream and `limit` say.
fn read_some<S: Read>(stream: &mut S, buf: &mut [u8], role: Role, limit: &Limit) -> Result<usize> {
    loop {
        match stream.read(buf) {
            Ok(0) => {
                return Err(Error::tls(
                    limit.transport,
                    format!("the {} closed the connection during the handshake", role.peer()),
                ))
            }
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            // A non-blocking stream with nothing yet, or a blocking one whose timeout passed.
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                limit.wait(role, "waiting for bytes from")?
            }
            Err(e) => {
                return Err(Error::io(
                    format!("{}: reading from the {} during the handshake", limit.transport, role.peer()),
                    e,
                ))
            }
        }
    }
}

fn write_all<S: Write>(stream: &mut S, mut data: &[u8], role: Role, limit: &Limit) -> Result<()> {
    let closed =
        || Error::tls(limit.transport, format!("the {} closed the connection during the handshake", role.peer()));
    while !data.is_empty() {
        match stream.write(data) {
            Ok(0) => return Err(closed()),
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                limit.wait(role, "writing to")?
            }
            Err(e) if matches!(e.kind(), ErrorKind::BrokenPipe | ErrorKind::ConnectionReset) => return Err(closed()),
            Err(e) => {
                return Err(Error::io(
                    format!("{}: writing to the {} during the handshake", limit.transport, role.peer()),
                    e,
                ))
            }
        }
    }
    stream
        .flush()
        .map_err(|e| Error::io(format!("{}: writing to the {} during the handshake", limit.transport, role.peer()), e))
}

/// Length of the longest prefix of `data` made of whole TLS records (0 when not even the
/// first record is all there).
pub fn whole_records(data: &[u8]) -> usize {
    let mut at = 0;
    while data.len() >= at + 5 {
        let len = 5 + u16::from_be_bytes([data[at + 3], data[at + 4]]) as usize;
        if data.len() < at + len {
            break;
        }
        at += len;
    }
    at
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_whole_records_are_handed_over() {
        let rec = |len: u16| {
            let mut r = vec![22, 3, 3];
            r.extend(len.to_be_bytes());
            r.resize(5 + len as usize, 0);
            r
        };
        let mut data = rec(3);
        data.extend(rec(0));
        assert_eq!(whole_records(&data), 13);
        data.extend(&rec(10)[..7]);
        assert_eq!(whole_records(&data), 13);
        assert_eq!(whole_records(&data[..7]), 0);
        assert_eq!(whole_records(&[22, 3]), 0);
    }
}
