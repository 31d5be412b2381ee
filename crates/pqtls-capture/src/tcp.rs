//! One direction of a TCP connection, reassembled by sequence number: the bytes in stream
//! order and, for every byte, when the packet that first carried it was captured.
//! Retransmitted bytes are counted and not appended twice; segments that arrive ahead of a
//! gap wait until the gap is filled; bytes never filled are reported as a gap.

use std::collections::BTreeMap;

/// A reassembled byte stream with the capture time of each byte.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stream {
    pub data: Vec<u8>,
    /// (offset of the first byte of a piece, capture ns of the packet that carried it),
    /// offsets increasing: byte `i` was carried by the last piece starting at or before `i`.
    marks: Vec<(u64, u64)>,
}

impl Stream {
    /// A stream without capture times (every byte at 0 ns): for byte streams that did not
    /// come from a capture.
    pub fn untimed(data: &[u8]) -> Stream {
        Stream { data: data.to_vec(), marks: vec![(0, 0)] }
    }

    /// Appends bytes captured at `ts_ns`.
    pub fn push(&mut self, bytes: &[u8], ts_ns: u64) {
        if bytes.is_empty() {
            return;
        }
        self.marks.push((self.data.len() as u64, ts_ns));
        self.data.extend_from_slice(bytes);
    }

    /// When the byte at `offset` was captured (the stream's last byte's time past its end; 0
    /// for an empty stream).
    pub fn ts_at(&self, offset: u64) -> u64 {
        let i = self.marks.partition_point(|(o, _)| *o <= offset);
        self.marks.get(i.saturating_sub(1)).map_or(0, |(_, t)| *t)
    }

    /// The pieces as they were captured: (start offset, end offset, capture ns).
    pub fn pieces(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.marks.iter().enumerate().map(|(i, (start, ts))| {
            let end = self.marks.get(i + 1).map_or(self.len(), |m| m.0);
            (*start, end, *ts)
        })
    }

    pub fn len(&self) -> u64 {
        self.data.len() as u64
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }
}

/// The receiving half of reassembly for one direction.
#[derive(Debug, Default)]
pub struct Reassembler {
    /// Sequence number of the first data byte (the SYN's + 1).
    base: u32,
    pub stream: Stream,
    /// Segments ahead of the next expected byte: offset → (ts, bytes).
    ahead: BTreeMap<u64, (u64, Vec<u8>)>,
    /// Data segments that carried only bytes already seen (or partly: those count too).
    pub retransmissions: u32,
    /// Data segments that arrived ahead of a gap (reordered, or after a loss).
    pub out_of_order: u32,
}

impl Reassembler {
    /// Reassembly for a direction whose SYN carried sequence number `isn`.
    pub fn new(isn: u32) -> Reassembler {
        Reassembler { base: isn.wrapping_add(1), ..Reassembler::default() }
    }

    /// A data segment (`seq`: the sequence number of its first payload byte).
    pub fn segment(&mut self, seq: u32, payload: &[u8], ts_ns: u64) {
        if payload.is_empty() {
            return;
        }
        let next = self.stream.len();
        // The offset relative to the next expected byte, within ±2 GiB (sequence arithmetic).
        let delta = seq.wrapping_sub(self.base.wrapping_add(next as u32)) as i32 as i64;
        let offset = next as i64 + delta;
        let end = offset + payload.len() as i64;
        if end <= next as i64 {
            self.retransmissions += 1;
            return;
        }
        if offset > next as i64 {
            let offset = offset as u64;
            let seen =
                self.ahead.range(..=offset).next_back().is_some_and(|(o, (_, b))| o + b.len() as u64 >= end as u64);
            if seen {
                self.retransmissions += 1;
            } else {
                self.out_of_order += 1;
                self.ahead.insert(offset, (ts_ns, payload.to_vec()));
            }
            return;
        }
        if offset < next as i64 {
            self.retransmissions += 1;
        }
        self.stream.push(&payload[(next as i64 - offset) as usize..], ts_ns);
        self.drain_ahead();
    }

    fn drain_ahead(&mut self) {
        while let Some(entry) = self.ahead.first_entry() {
            let next = self.stream.len();
            if *entry.key() > next {
                break;
            }
            let (offset, (ts, bytes)) = entry.remove_entry();
            let end = offset + bytes.len() as u64;
            if end > next {
                self.stream.push(&bytes[(next - offset) as usize..], ts);
            }
        }
    }

    /// Bytes that arrived after a gap that was never filled (the capture lost packets, or
    /// the connection was cut).
    pub fn bytes_after_gap(&self) -> u64 {
        self.ahead.values().map(|(_, b)| b.len() as u64).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_segments_keep_their_times() {
        let mut r = Reassembler::new(1000);
        r.segment(1001, b"abc", 10);
        r.segment(1004, b"de", 20);
        assert_eq!(r.stream.data, b"abcde");
        assert_eq!((r.stream.ts_at(0), r.stream.ts_at(2), r.stream.ts_at(3), r.stream.ts_at(4)), (10, 10, 20, 20));
        assert_eq!((r.retransmissions, r.out_of_order), (0, 0));
    }

    #[test]
    fn reordered_segments_are_reassembled() {
        let mut r = Reassembler::new(u32::MAX - 1); // the sequence numbers wrap
        r.segment(u32::MAX.wrapping_add(3), b"de", 20);
        r.segment(u32::MAX.wrapping_add(5), b"fg", 30);
        assert!(r.stream.is_empty());
        assert_eq!(r.bytes_after_gap(), 4);
        r.segment(u32::MAX, b"abc", 40);
        assert_eq!(r.stream.data, b"abcdefg");
        assert_eq!((r.stream.ts_at(0), r.stream.ts_at(3), r.stream.ts_at(6)), (40, 20, 30));
        assert_eq!((r.retransmissions, r.out_of_order, r.bytes_after_gap()), (0, 2, 0));
    }

    #[test]
    fn retransmissions_are_counted_not_appended() {
        let mut r = Reassembler::new(0);
        r.segment(1, b"abcd", 10);
        r.segment(1, b"abcd", 11); // whole again
        r.segment(3, b"cdef", 12); // partly new
        r.segment(9, b"ij", 13); // ahead
        r.segment(9, b"ij", 14); // ahead, again
        r.segment(7, b"gh", 15);
        assert_eq!(r.stream.data, b"abcdefghij");
        assert_eq!((r.retransmissions, r.out_of_order), (3, 1));
        assert_eq!((r.stream.ts_at(4), r.stream.ts_at(8)), (12, 13));
    }
}
