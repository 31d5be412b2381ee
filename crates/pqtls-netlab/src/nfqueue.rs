//! A small NFQUEUE client over a netlink socket (nfnetlink_queue, metadata only): bind a
//! queue, read packets' ids, input interfaces and kernel timestamps, accept packets by id.
//!
//! Ours rather than the `nfq` crate's: nfq 0.2.5 reads the packet timestamp through a
//! misaligned pointer (undefined behaviour; a panic in debug builds) and does not expose its
//! socket, so an emulator cannot wait for "a packet arrived or the next one is due" in one
//! `ppoll`. The protocol is a handful of fixed layouts (linux/netfilter/nfnetlink_queue.h),
//! parsed here from bytes with no `unsafe`.

use nix::sys::socket::{
    bind, recv, send, setsockopt, socket, sockopt, AddressFamily, MsgFlags, NetlinkAddr, SockFlag, SockProtocol,
    SockType,
};
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};

const NFNL_SUBSYS_QUEUE: u16 = 3;
const NFQNL_MSG_PACKET: u16 = 0;
const NFQNL_MSG_VERDICT: u16 = 1;
const NFQNL_MSG_CONFIG: u16 = 2;
const NFQA_PACKET_HDR: u16 = 1;
const NFQA_VERDICT_HDR: u16 = 2;
const NFQA_TIMESTAMP: u16 = 4;
const NFQA_IFINDEX_INDEV: u16 = 5;
const NFQA_CFG_CMD: u16 = 1;
const NFQA_CFG_PARAMS: u16 = 2;
const NFQA_CFG_QUEUE_MAXLEN: u16 = 3;
const NFQNL_CFG_CMD_BIND: u8 = 1;
const NFQNL_COPY_META: u8 = 1;
const NF_ACCEPT: u32 = 1;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 1;
const NLM_F_ACK: u16 = 4;
const NLMSG_HDRLEN: usize = 16;
const NLA_TYPE_MASK: u16 = 0x3fff;

/// A queued packet's metadata.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Packet {
    pub id: u32,
    /// Interface index it came in on (the direction, in a router).
    pub indev: u32,
    /// When the kernel received it (CLOCK_REALTIME, µs resolution), if it stamped it.
    pub stamp_realtime_ns: Option<u64>,
}

/// One bound queue.
pub struct NfQueue {
    fd: OwnedFd,
    queue_num: u16,
    seq: u32,
    buf: Vec<u8>,
    out: Vec<u8>,
}

fn align4(n: usize) -> usize {
    (n + 3) & !3
}

fn push_attr(out: &mut Vec<u8>, kind: u16, payload: &[u8]) {
    out.extend_from_slice(&((4 + payload.len()) as u16).to_ne_bytes());
    out.extend_from_slice(&kind.to_ne_bytes());
    out.extend_from_slice(payload);
    out.resize(align4(out.len()), 0);
}

/// Appends one nfnetlink message (header, nfgenmsg, attributes) to `out`.
fn push_message(out: &mut Vec<u8>, msg_type: u16, flags: u16, seq: u32, queue_num: u16, attrs: &[(u16, &[u8])]) {
    let start = out.len();
    out.extend_from_slice(&0u32.to_ne_bytes()); // length, set below
    out.extend_from_slice(&((NFNL_SUBSYS_QUEUE << 8) | msg_type).to_ne_bytes());
    out.extend_from_slice(&flags.to_ne_bytes());
    out.extend_from_slice(&seq.to_ne_bytes());
    out.extend_from_slice(&0u32.to_ne_bytes()); // port id: the kernel's
                                                // nfgenmsg: family AF_UNSPEC, version 0, the queue number (big-endian).
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&queue_num.to_be_bytes());
    for (kind, payload) in attrs {
        push_attr(out, *kind, payload);
    }
    let len = (out.len() - start) as u32;
    out[start..start + 4].copy_from_slice(&len.to_ne_bytes());
}

fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_ne_bytes(b.get(at..at + 2)?.try_into().ok()?))
}

fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_ne_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_be_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn be64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_be_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// What one netlink message in a received buffer is.
#[derive(Debug, PartialEq, Eq)]
enum Incoming {
    Packet(Packet),
    /// An acknowledgement (0) or error (−errno) of request `seq`.
    Ack {
        seq: u32,
        error: i32,
    },
    Other,
}

/// Splits a received buffer into its messages.
fn parse(buf: &[u8]) -> Vec<Incoming> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + NLMSG_HDRLEN <= buf.len() {
        let (Some(len), Some(kind), Some(seq)) = (u32_at(buf, at), u16_at(buf, at + 4), u32_at(buf, at + 8)) else {
            break;
        };
        let len = len as usize;
        if len < NLMSG_HDRLEN || at + len > buf.len() {
            break;
        }
        let msg = &buf[at..at + len];
        if kind == NLMSG_ERROR {
            let error = u32_at(msg, NLMSG_HDRLEN).map_or(-libc::EPROTO, |e| e as i32);
            out.push(Incoming::Ack { seq, error });
        } else if kind == (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET {
            out.push(parse_packet(&msg[NLMSG_HDRLEN..]).map_or(Incoming::Other, Incoming::Packet));
        } else {
            out.push(Incoming::Other);
        }
        at += align4(len);
    }
    out
}

/// A packet message's body: nfgenmsg (4 bytes), then attributes.
fn parse_packet(body: &[u8]) -> Option<Packet> {
    let mut p = Packet { id: 0, indev: 0, stamp_realtime_ns: None };
    let mut have_id = false;
    let mut at = 4;
    while at + 4 <= body.len() {
        let len = u16_at(body, at)? as usize;
        let kind = u16_at(body, at + 2)? & NLA_TYPE_MASK;
        if len < 4 || at + len > body.len() {
            break;
        }
        let v = &body[at + 4..at + len];
        match kind {
            NFQA_PACKET_HDR => {
                p.id = be32_at(v, 0)?;
                have_id = true;
            }
            NFQA_IFINDEX_INDEV => p.indev = be32_at(v, 0)?,
            NFQA_TIMESTAMP => {
                let (sec, usec) = (be64_at(v, 0)?, be64_at(v, 8)?);
                p.stamp_realtime_ns = Some(sec * 1_000_000_000 + usec * 1000);
            }
            _ => {}
        }
        at += align4(len);
    }
    have_id.then_some(p)
}

fn errno(e: nix::errno::Errno) -> io::Error {
    io::Error::from(e)
}

impl NfQueue {
    /// Binds queue `queue_num` of the calling thread's network namespace: metadata only (no
    /// payload copies), at most `max_len` packets held.
    pub fn open(queue_num: u16, max_len: u32) -> io::Result<NfQueue> {
        let fd = socket(
            AddressFamily::Netlink,
            SockType::Raw,
            SockFlag::SOCK_CLOEXEC | SockFlag::SOCK_NONBLOCK,
            SockProtocol::NetlinkNetFilter,
        )
        .map_err(errno)?;
        bind(fd.as_raw_fd(), &NetlinkAddr::new(0, 0)).map_err(errno)?;
        // Room for bursts of packet messages between two reads (root may exceed rmem_max).
        let _ = setsockopt(&fd, sockopt::RcvBufForce, &(8 << 20));
        let mut q = NfQueue { fd, queue_num, seq: 0, buf: vec![0; 1 << 16], out: Vec::with_capacity(1 << 16) };
        q.configure(NFQA_CFG_CMD, &[NFQNL_CFG_CMD_BIND, 0, 0, 0])?;
        let mut params = 0u32.to_be_bytes().to_vec(); // copy range 0: metadata only
        params.push(NFQNL_COPY_META);
        q.configure(NFQA_CFG_PARAMS, &params)?;
        q.configure(NFQA_CFG_QUEUE_MAXLEN, &max_len.to_be_bytes())?;
        Ok(q)
    }

    /// Sends one configuration attribute and waits (up to a second) for its acknowledgement.
    fn configure(&mut self, attr: u16, payload: &[u8]) -> io::Result<()> {
        self.seq += 1;
        let seq = self.seq;
        let mut msg = Vec::new();
        push_message(&mut msg, NFQNL_MSG_CONFIG, NLM_F_REQUEST | NLM_F_ACK, seq, self.queue_num, &[(attr, payload)]);
        send(self.fd.as_raw_fd(), &msg, MsgFlags::empty()).map_err(errno)?;
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while std::time::Instant::now() < deadline {
            let mut pfd = [nix::poll::PollFd::new(self.fd.as_fd(), nix::poll::PollFlags::POLLIN)];
            let _ = nix::poll::poll(&mut pfd, nix::poll::PollTimeout::from(100u16));
            let n = match recv(self.fd.as_raw_fd(), &mut self.buf, MsgFlags::empty()) {
                Ok(n) => n,
                Err(nix::errno::Errno::EAGAIN) => continue,
                Err(e) => return Err(errno(e)),
            };
            for m in parse(&self.buf[..n]) {
                if let Incoming::Ack { seq: s, error } = m {
                    if s == seq {
                        return if error == 0 { Ok(()) } else { Err(io::Error::from_raw_os_error(-error)) };
                    }
                }
            }
        }
        Err(io::Error::new(io::ErrorKind::TimedOut, "no answer from nfnetlink_queue"))
    }

    /// The socket, to wait on (readable: packets came).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Appends every packet that is waiting to `out` without blocking; returns how many.
    pub fn read_ready(&mut self, out: &mut Vec<Packet>) -> io::Result<usize> {
        let mut count = 0;
        loop {
            match recv(self.fd.as_raw_fd(), &mut self.buf, MsgFlags::empty()) {
                Ok(n) => {
                    for m in parse(&self.buf[..n]) {
                        if let Incoming::Packet(p) = m {
                            out.push(p);
                            count += 1;
                        }
                    }
                }
                Err(nix::errno::Errno::EAGAIN) => return Ok(count),
                Err(nix::errno::Errno::EINTR) => continue,
                // The socket overflowed: the kernel dropped packets (its counters say how
                // many); what is still queued is read on.
                Err(nix::errno::Errno::ENOBUFS) => continue,
                Err(e) => return Err(errno(e)),
            }
        }
    }

    /// Lets the packets with these ids go on, in this order, a thousand verdicts per send.
    pub fn accept(&mut self, ids: &[u32]) -> io::Result<()> {
        for chunk in ids.chunks(1024) {
            self.out.clear();
            for &id in chunk {
                let mut hdr = [0u8; 8];
                hdr[..4].copy_from_slice(&NF_ACCEPT.to_be_bytes());
                hdr[4..].copy_from_slice(&id.to_be_bytes());
                push_message(
                    &mut self.out,
                    NFQNL_MSG_VERDICT,
                    NLM_F_REQUEST,
                    0,
                    self.queue_num,
                    &[(NFQA_VERDICT_HDR, &hdr)],
                );
            }
            send(self.fd.as_raw_fd(), &self.out, MsgFlags::empty()).map_err(errno)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packet message as the kernel sends it (layout of nfnetlink_queue.h).
    fn kernel_packet(id: u32, indev: u32, stamp: Option<(u64, u64)>) -> Vec<u8> {
        let mut hdr = id.to_be_bytes().to_vec();
        hdr.extend_from_slice(&0x0800u16.to_be_bytes());
        hdr.push(2); // hook: forward
        let mut attrs: Vec<(u16, Vec<u8>)> =
            vec![(NFQA_PACKET_HDR, hdr), (NFQA_IFINDEX_INDEV, indev.to_be_bytes().to_vec())];
        if let Some((s, us)) = stamp {
            let mut t = s.to_be_bytes().to_vec();
            t.extend_from_slice(&us.to_be_bytes());
            attrs.push((NFQA_TIMESTAMP, t));
        }
        let refs: Vec<(u16, &[u8])> = attrs.iter().map(|(k, v)| (*k, v.as_slice())).collect();
        let mut out = Vec::new();
        push_message(&mut out, NFQNL_MSG_PACKET, 0, 0, 0, &refs);
        out
    }

    #[test]
    fn packet_messages_parse_into_id_interface_and_stamp() {
        let mut buf = kernel_packet(7, 3, Some((1_700_000_000, 123_456)));
        buf.extend(kernel_packet(8, 4, None));
        let mut ack = Vec::new();
        ack.extend_from_slice(&36u32.to_ne_bytes());
        ack.extend_from_slice(&NLMSG_ERROR.to_ne_bytes());
        ack.extend_from_slice(&0u16.to_ne_bytes());
        ack.extend_from_slice(&5u32.to_ne_bytes());
        ack.extend_from_slice(&0u32.to_ne_bytes());
        ack.extend_from_slice(&(-libc::EPERM).to_ne_bytes());
        ack.resize(36, 0);
        buf.extend(ack);
        let got = parse(&buf);
        assert_eq!(
            got,
            vec![
                Incoming::Packet(Packet { id: 7, indev: 3, stamp_realtime_ns: Some(1_700_000_000_123_456_000) }),
                Incoming::Packet(Packet { id: 8, indev: 4, stamp_realtime_ns: None }),
                Incoming::Ack { seq: 5, error: -libc::EPERM },
            ]
        );
        // Truncated input ends the parse instead of reading past it.
        assert_eq!(parse(&buf[..10]), vec![]);
        let short = &kernel_packet(9, 1, None)[..30];
        assert_eq!(parse(short), vec![]);
    }

    #[test]
    fn a_verdict_is_laid_out_as_the_kernel_reads_it() {
        let mut out = Vec::new();
        let mut hdr = [0u8; 8];
        hdr[..4].copy_from_slice(&NF_ACCEPT.to_be_bytes());
        hdr[4..].copy_from_slice(&42u32.to_be_bytes());
        push_message(&mut out, NFQNL_MSG_VERDICT, NLM_F_REQUEST, 0, 0, &[(NFQA_VERDICT_HDR, &hdr)]);
        assert_eq!(out.len(), 16 + 4 + 4 + 8);
        assert_eq!(u32_at(&out, 0), Some(32));
        assert_eq!(u16_at(&out, 4), Some(0x0301));
        assert_eq!(&out[24..], &[0, 0, 0, 1, 0, 0, 0, 42]);
    }
}
