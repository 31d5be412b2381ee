//! The TCP transport: two pinned threads over TCP on loopback. A listener on `127.0.0.1:0`
//! per run, a new connection per handshake (`TCP_NODELAY` on both ends, so every flight
//! leaves when written), both ends closed after the handshake. The connection is set up
//! before the handshake's measured calls, as the socketpair is.

use super::threads::{Link, Threads};
use super::{TransportKind, Wait};
use pqtls_core::{Error, Result};
use std::io::ErrorKind;
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};

/// The TCP loopback transport.
pub type TcpTransport = Threads<TcpLoopback>;

/// A listener on loopback; each handshake connects to it.
pub struct TcpLoopback {
    listener: TcpListener,
    addr: SocketAddr,
}

impl Link for TcpLoopback {
    const KIND: TransportKind = TransportKind::Tcp;
    type Stream = TcpStream;

    fn open() -> Result<Self> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
            .map_err(|e| Error::io("tcp: listening on 127.0.0.1 (any port)", e))?;
        // Non-blocking so that accept() can give up: see connect().
        listener.set_nonblocking(true).map_err(|e| Error::io("tcp: setting up the listener", e))?;
        let addr = listener.local_addr().map_err(|e| Error::io("tcp: reading the listener's address", e))?;
        Ok(TcpLoopback { listener, addr })
    }

    fn connect(&mut self, wait: Wait, timeout: Duration) -> Result<(TcpStream, TcpStream)> {
        let client = TcpStream::connect_timeout(&self.addr, timeout)
            .map_err(|e| Error::io(format!("tcp: connecting to our listener on {}", self.addr), e))?;
        let client_addr = client.local_addr().map_err(|e| Error::io("tcp: reading the client's address", e))?;
        // The kernel completed the connection already; accept it here, in the same thread.
        // Anything else that reached the port (another local process) is closed and skipped.
        let deadline = Instant::now() + timeout;
        let server = loop {
            match self.listener.accept() {
                Ok((s, peer)) if peer == client_addr => break s,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::Interrupted) => {
                    if Instant::now() >= deadline {
                        return Err(Error::tls(
                            "tcp",
                            format!("our own connection to {} was not accepted within {timeout:?}", self.addr),
                        ));
                    }
                    std::thread::yield_now();
                }
                Err(e) => return Err(Error::io(format!("tcp: accepting on {}", self.addr), e)),
            }
        };
        for s in [&client, &server] {
            let spin = wait == Wait::Spin;
            s.set_nodelay(true)
                .and_then(|()| s.set_nonblocking(spin))
                .and_then(|()| s.set_read_timeout((!spin).then_some(timeout)))
                .and_then(|()| s.set_write_timeout((!spin).then_some(timeout)))
                .map_err(|e| Error::io("tcp: setting up the connection (TCP_NODELAY, waiting)", e))?;
        }
        Ok((client, server))
    }
}
