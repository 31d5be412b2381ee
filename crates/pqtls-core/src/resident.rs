//! The resident measurement's result (`kind = "resident"`, docs/memory.md): what a TLS
//! terminator keeps in memory per established, idle connection. N connections are opened to
//! the terminator (`pqtls serve` in a process of its own, nginx or HAProxy), each completes its
//! handshake and one request/response and stays open, idle; the terminator's memory is read
//! at N = 0 and at each N asked, and the difference divided by N is the memory per connection.

use crate::backend::Negotiated;
use crate::load::Terminator;
use serde::{Deserialize, Serialize};

/// Bytes in a GiB, for "connections per GiB".
pub const GIB_BYTES: f64 = (1u64 << 30) as f64;

/// The terminator's heap as its own allocator counts it (`pqtls serve --memory`: every
/// allocation of the process through the counting Rust allocator and the C libraries' hooks,
/// since the server started; docs/memory.md says which are not seen).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeapReading {
    /// Bytes allocated and not freed (`allocated_bytes − freed_bytes`).
    pub live_bytes: i64,
    /// Blocks allocated and not freed (`allocations − frees`).
    pub live_allocations: i64,
    pub allocations: u64,
    pub frees: u64,
    pub allocated_bytes: u64,
    pub freed_bytes: u64,
}

impl HeapReading {
    /// From the process-wide totals.
    pub fn of(allocations: u64, frees: u64, allocated_bytes: u64, freed_bytes: u64) -> HeapReading {
        HeapReading {
            live_bytes: allocated_bytes as i64 - freed_bytes as i64,
            live_allocations: allocations as i64 - frees as i64,
            allocations,
            frees,
            allocated_bytes,
            freed_bytes,
        }
    }
}

/// A server's heap counters as `pqtls serve --memory` reports them in `/stats`: the reading
/// and what it counts.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HeapCounters {
    #[serde(flatten)]
    pub reading: HeapReading,
    /// Whose allocations are counted, and whose not (the stack's
    /// [`crate::backend::AllocationCoverage`]).
    pub counted: String,
    pub not_counted: String,
}

/// The terminator's memory with `connections` connections held open and idle.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResidentReading {
    /// Connections the client held open (handshake and one response done, idle) at the reading.
    pub connections: u64,
    /// The terminator's own count of open connections, when it has one (`pqtls serve`'s
    /// `/stats`; the reading's own `/stats` connection not included).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_connections: Option<u64>,
    /// Heap counters (`pqtls serve` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap: Option<HeapReading>,
    /// Processes of the terminator (master and workers), Σ RSS and Σ PSS from
    /// /proc/<pid>/smaps_rollup, bytes.
    pub processes: u32,
    pub rss_bytes: u64,
    pub pss_bytes: u64,
}

/// Memory per connection at one N: (reading at N − reading at 0) / N.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PerConnection {
    pub connections: u64,
    /// Live heap bytes and blocks per connection (`pqtls serve` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub heap_allocations: Option<f64>,
    pub rss_bytes: f64,
    pub pss_bytes: f64,
}

impl PerConnection {
    /// The figure a terminator's capacity is computed from: the heap when it was counted
    /// (exact, page-independent), else the PSS (what the processes hold, shared pages divided).
    pub fn bytes(&self) -> f64 {
        self.heap_bytes.unwrap_or(self.pss_bytes)
    }

    /// Which of the two [`PerConnection::bytes`] is: `heap` or `pss`.
    pub fn source(&self) -> &'static str {
        if self.heap_bytes.is_some() {
            "heap"
        } else {
            "pss"
        }
    }

    /// Idle connections 1 GiB holds at [`PerConnection::bytes`] each (`None` when the figure is
    /// not above 0: nothing measurable per connection).
    pub fn per_gib(&self) -> Option<f64> {
        let b = self.bytes();
        (b > 0.0).then(|| GIB_BYTES / b)
    }

    /// (at `n` − at `zero`) / n.
    pub fn between(zero: &ResidentReading, at: &ResidentReading) -> PerConnection {
        let n = at.connections.max(1) as f64;
        let d = |a: u64, b: u64| (a as f64 - b as f64) / n;
        let heap = zero.heap.zip(at.heap);
        PerConnection {
            connections: at.connections,
            heap_bytes: heap.map(|(z, a)| (a.live_bytes - z.live_bytes) as f64 / n),
            heap_allocations: heap.map(|(z, a)| (a.live_allocations - z.live_allocations) as f64 / n),
            rss_bytes: d(at.rss_bytes, zero.rss_bytes),
            pss_bytes: d(at.pss_bytes, zero.pss_bytes),
        }
    }
}

/// The resident measurement's result.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ResidentResult {
    pub terminator: Terminator,
    /// What the first held connection negotiated.
    pub negotiated: Negotiated,
    /// The request each connection made before going idle (e.g. `/0B`), and its response's
    /// body bytes.
    pub path: String,
    /// Held connections that were resumed from a session ticket (with resumption: all of them).
    pub resumed_connections: u64,
    /// Readings in order, the first at 0 connections.
    pub readings: Vec<ResidentReading>,
    /// Per connection at each N above 0.
    pub per_connection: Vec<PerConnection>,
    /// The terminator's open connections after the client closed them all (`pqtls serve`
    /// only; 0 when everything was closed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_after_close: Option<u64>,
    /// How long opening the connections took, ns (all of them, up to the largest N).
    pub opening_ns: u64,
    /// Whose allocations the heap figures count, and whose they do not (empty without heap).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub counted: String,
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub not_counted: String,
    /// `complete` or `interrupted`.
    pub stopped: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
}

impl ResidentResult {
    /// The figure at the largest N (the most connections: the least noise per connection).
    pub fn largest(&self) -> Option<&PerConnection> {
        self.per_connection.iter().max_by_key(|p| p.connections)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reading(connections: u64, heap: i64, rss: u64) -> ResidentReading {
        ResidentReading {
            connections,
            open_connections: Some(connections),
            heap: Some(HeapReading::of(100 + connections * 3, 100, (1000 + heap) as u64, 1000)),
            processes: 1,
            rss_bytes: rss,
            pss_bytes: rss / 2,
        }
    }

    #[test]
    fn per_connection_is_the_difference_over_n() {
        let zero = reading(0, 5_000, 10 << 20);
        let at = reading(1000, 5_000 + 1000 * 20_480, (10 << 20) + 1000 * 32_768);
        let p = PerConnection::between(&zero, &at);
        assert_eq!(p.heap_bytes, Some(20_480.0));
        assert_eq!(p.heap_allocations, Some(3.0));
        assert_eq!(p.rss_bytes, 32_768.0);
        assert_eq!(p.pss_bytes, 16_384.0);
        assert_eq!(p.source(), "heap");
        assert_eq!(p.per_gib(), Some(GIB_BYTES / 20_480.0));
        let no_heap = PerConnection { heap_bytes: None, ..p };
        assert_eq!((no_heap.bytes(), no_heap.source()), (16_384.0, "pss"));
        assert_eq!(PerConnection::default().per_gib(), None);
    }
}
