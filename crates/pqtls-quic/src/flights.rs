//! The client's first flight as it went on the wire: how many UDP datagrams each QUIC
//! connection sent before the server's first datagram came back — the datagrams that carried
//! its first ClientHello's Initial packets (quinn pads each to the initial datagram size, 1,200
//! bytes by default; a ClientHello with an X25519MLKEM768 share does not fit in one).
//!
//! [`FirstFlights`] wraps a client endpoint's UDP socket and reads the long header of every
//! datagram it sends and receives (headers are not encrypted: RFC 9000 §17.2). A connection's
//! flight is keyed by its initial destination connection ID (which the client's TLS session
//! is given for its Initial keys: `h3::Seen::initial_dcid`); it counts the client's Initial
//! datagrams with that DCID until a datagram arrives addressed to the client's source
//! connection ID (the server's Initial, or a Retry). Retransmissions before the answer count,
//! as the kernel counts a retransmitted TCP segment.

use crate::wire;
use pqtls_core::quic::INITIAL;
use quinn::udp::{RecvMeta, Transmit};
use quinn::{AsyncUdpSocket, UdpPoller};
use std::collections::HashMap;
use std::io::IoSliceMut;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

/// Flights kept at most (of connections that never asked for theirs: failed handshakes); past
/// it they are forgotten, those of connections still handshaking with them.
const MAX_FLIGHTS: usize = 4096;

/// One connection's first flight so far.
#[derive(Debug)]
struct Flight {
    /// The client's source connection ID: what the server's answer is addressed to.
    scid: Vec<u8>,
    datagrams: u64,
    answered: bool,
}

/// The first flights of an endpoint's connections, from the datagrams it sent and received.
#[derive(Debug, Default)]
pub struct Flights {
    /// By the connection's initial destination connection ID.
    by_dcid: HashMap<Vec<u8>, Flight>,
    /// The initial DCID of each unanswered flight, by the client's source connection ID.
    unanswered: HashMap<Vec<u8>, Vec<u8>>,
}

impl Flights {
    /// A datagram the client sent.
    pub fn sent(&mut self, datagram: &[u8]) {
        let Some((kind, dcid, scid)) = wire::long_header(datagram) else { return };
        if kind != INITIAL {
            return;
        }
        if let Some(f) = self.by_dcid.get_mut(dcid) {
            if !f.answered {
                f.datagrams += 1;
            }
            return;
        }
        if self.by_dcid.len() >= MAX_FLIGHTS {
            self.by_dcid.clear();
            self.unanswered.clear();
        }
        self.by_dcid.insert(dcid.to_vec(), Flight { scid: scid.to_vec(), datagrams: 1, answered: false });
        self.unanswered.insert(scid.to_vec(), dcid.to_vec());
    }

    /// A datagram the client received: the server's first one ends the flight of the
    /// connection it is addressed to.
    pub fn received(&mut self, datagram: &[u8]) {
        let Some((_, dcid, _)) = wire::long_header(datagram) else { return };
        if let Some(initial) = self.unanswered.remove(dcid) {
            if let Some(f) = self.by_dcid.get_mut(&initial) {
                f.answered = true;
            }
        }
    }

    /// The datagrams of the connection whose initial destination connection ID is `dcid`, once
    /// the server answered it (`None`: not seen, or not answered); forgets it.
    pub fn take(&mut self, dcid: &[u8]) -> Option<u64> {
        let f = self.by_dcid.remove(dcid)?;
        self.unanswered.remove(&f.scid);
        f.answered.then_some(f.datagrams)
    }
}

/// A client endpoint's UDP socket, its first flights counted ([`Flights`]); everything else
/// is the wrapped socket's.
#[derive(Debug)]
pub struct FirstFlights {
    inner: Arc<dyn AsyncUdpSocket>,
    flights: Mutex<Flights>,
}

impl FirstFlights {
    pub fn new(inner: Arc<dyn AsyncUdpSocket>) -> FirstFlights {
        FirstFlights { inner, flights: Mutex::new(Flights::default()) }
    }

    /// [`Flights::take`].
    pub fn take(&self, dcid: &[u8]) -> Option<u64> {
        self.flights.lock().unwrap_or_else(|p| p.into_inner()).take(dcid)
    }

    /// Whether any of `datagrams` has a long header (the rest need no lock).
    fn any_long<'a>(mut datagrams: impl Iterator<Item = &'a [u8]>) -> bool {
        datagrams.any(|d| d.first().is_some_and(|b| b & 0x80 != 0))
    }
}

/// The datagrams of `contents` (several when the socket segments them: GSO, GRO).
fn datagrams(contents: &[u8], segment: Option<usize>) -> impl Iterator<Item = &[u8]> {
    contents.chunks(segment.filter(|&s| s > 0).unwrap_or(contents.len().max(1)))
}

impl AsyncUdpSocket for FirstFlights {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &Transmit) -> std::io::Result<()> {
        self.inner.try_send(transmit)?;
        let sent = || datagrams(transmit.contents, transmit.segment_size);
        if Self::any_long(sent()) {
            let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
            sent().for_each(|d| flights.sent(d));
        }
        Ok(())
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [RecvMeta],
    ) -> Poll<std::io::Result<usize>> {
        let r = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(n)) = r {
            let got = || bufs.iter().zip(meta.iter()).take(n).flat_map(|(b, m)| datagrams(&b[..m.len], Some(m.stride)));
            if Self::any_long(got()) {
                let mut flights = self.flights.lock().unwrap_or_else(|p| p.into_inner());
                got().for_each(|d| flights.received(d));
            }
        }
        r
    }

    fn local_addr(&self) -> std::io::Result<std::net::SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        self.inner.max_receive_segments()
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A long-header datagram of `first` byte with these connection IDs, padded to `len`.
    fn datagram(first: u8, dcid: &[u8], scid: &[u8], len: usize) -> Vec<u8> {
        let mut d = vec![first, 0, 0, 0, 1, dcid.len() as u8];
        d.extend(dcid);
        d.push(scid.len() as u8);
        d.extend(scid);
        d.resize(len, 0);
        d
    }

    #[test]
    fn a_flight_counts_the_initial_datagrams_until_the_server_answers() {
        let mut f = Flights::default();
        let (dcid, scid) = ([1u8; 8], [2u8; 8]);
        f.sent(&datagram(0xc0, &dcid, &scid, 1200));
        f.sent(&datagram(0xc0, &dcid, &scid, 1200));
        // Another connection's flight, and a datagram addressed to nobody we know.
        f.sent(&datagram(0xc0, &[3; 8], &[4; 8], 1200));
        f.received(&datagram(0xc0, &[9; 8], &[5; 8], 1200));
        f.received(&datagram(0xc0, &scid, &[7; 8], 1200));
        // After the answer: the client's Initial ACKs and short headers are not the flight.
        f.sent(&datagram(0xc0, &dcid, &scid, 1200));
        f.sent(&[0x40, 1, 2, 3]);
        assert_eq!(f.take(&dcid), Some(2));
        assert_eq!(f.take(&dcid), None, "taken once");
        assert_eq!(f.take(&[3; 8]), None, "not answered yet");
    }

    #[test]
    fn a_retry_ends_the_flight() {
        let mut f = Flights::default();
        f.sent(&datagram(0xc0, &[1; 8], &[2; 8], 1200));
        f.received(&datagram(0xf0, &[2; 8], &[6; 8], 60));
        assert_eq!(f.take(&[1; 8]), Some(1));
    }

    #[test]
    fn segmented_contents_are_datagram_by_datagram() {
        let d: Vec<&[u8]> = datagrams(&[0u8; 2500], Some(1200)).collect();
        assert_eq!(d.iter().map(|d| d.len()).collect::<Vec<_>>(), [1200, 1200, 100]);
        assert_eq!(datagrams(&[0u8; 30], None).count(), 1);
    }
}
