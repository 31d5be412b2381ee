//! The socketpair transport: two pinned threads over a UNIX socketpair, a new pair per
//! handshake. Real kernel I/O without a network stack.

use super::threads::{Link, Threads};
use super::{TransportKind, Wait};
use pqtls_core::{Error, Result};
use std::os::unix::net::UnixStream;
use std::time::Duration;

/// The socketpair transport.
pub type SocketpairTransport = Threads<Socketpair>;

/// Makes a UNIX socketpair per handshake.
pub struct Socketpair;

impl Link for Socketpair {
    const KIND: TransportKind = TransportKind::Socketpair;
    type Stream = UnixStream;

    fn open() -> Result<Self> {
        Ok(Socketpair)
    }

    fn connect(&mut self, wait: Wait, timeout: Duration) -> Result<(UnixStream, UnixStream)> {
        let (client, server) = UnixStream::pair().map_err(|e| Error::io("socketpair: creating a socketpair", e))?;
        for s in [&client, &server] {
            let spin = wait == Wait::Spin;
            s.set_nonblocking(spin)
                .and_then(|()| s.set_read_timeout((!spin).then_some(timeout)))
                .and_then(|()| s.set_write_timeout((!spin).then_some(timeout)))
                .map_err(|e| Error::io("socketpair: setting how the sockets wait", e))?;
        }
        Ok((client, server))
    }
}
