//! The resident records' tables: memory per idle connection and connections per GiB per
//! configuration (the table `pqtls resident` prints), every reading, the rules of thumb per
//! chain, and the notes.

use super::Table;
use crate::analysis::resident::{chain_rules, ResidentView};

/// What the per-connection figures are, for the reports.
pub const NOTE: &str = "Memory the terminator keeps per idle connection (handshake and one response done): \
    (reading with N connections held − reading with none) / N, at the largest N. Heap: pqtls serve's own counters \
    (every allocation of its process: Rust's allocator, OpenSSL's or aws-lc's hooks); RSS and PSS: Σ over the \
    terminator's processes from /proc/<pid>/smaps_rollup. Connections per GiB: 1 GiB / (heap per connection for \
    pqtls serve, PSS per connection for nginx and HAProxy).";

fn kib(bytes: f64) -> String {
    format!("{:.1}", bytes / 1024.0)
}

fn opt_kib(bytes: Option<f64>) -> String {
    bytes.map_or("–".into(), kib)
}

/// The terminator as a table cell: `pqtls serve (openssl)`, `nginx`, `haproxy`.
fn who(v: &ResidentView) -> String {
    match v.terminator() {
        "pqtls" => format!("pqtls serve ({})", v.factor("stack")),
        t => t.to_string(),
    }
}

/// One row per record: terminator, configuration, N, heap / RSS / PSS per connection (KiB),
/// heap blocks per connection, connections per GiB.
pub fn summary(all: &[ResidentView]) -> Table {
    let head = [
        "terminator",
        "configuration",
        "resumed",
        "held",
        "heap KiB/conn",
        "heap blocks/conn",
        "RSS KiB/conn",
        "PSS KiB/conn",
        "conns per GiB",
    ];
    let rows = all
        .iter()
        .map(|v| {
            let p = v.per_connection();
            vec![
                who(v),
                format!("{} {}", v.factor("group"), v.factor("chain")),
                format!("{}/{}", v.resumed_connections, p.map_or(0, |p| p.connections)),
                p.map_or("–".into(), |p| p.connections.to_string()),
                opt_kib(p.and_then(|p| p.heap_bytes)),
                p.and_then(|p| p.heap_allocations).map_or("–".into(), |a| format!("{a:.1}")),
                opt_kib(p.map(|p| p.rss_bytes)),
                opt_kib(p.map(|p| p.pss_bytes)),
                p.and_then(|p| p.per_gib())
                    .map_or("–".into(), |g| format!("{:.0} ({})", g, p.map_or("", |p| p.source()))),
            ]
        })
        .collect();
    (head.iter().map(|s| s.to_string()).collect(), rows)
}

/// Every reading of every record: the raw figures the per-connection ones come from.
pub fn readings(all: &[ResidentView]) -> Table {
    let head = [
        "terminator",
        "configuration",
        "held",
        "open (server)",
        "heap live KiB",
        "heap live blocks",
        "processes",
        "RSS KiB",
        "PSS KiB",
    ];
    let mut rows = Vec::new();
    for v in all {
        for r in &v.readings {
            rows.push(vec![
                who(v),
                v.label().to_string(),
                r.connections.to_string(),
                r.open_connections.map_or("–".into(), |o| o.to_string()),
                r.heap.map_or("–".into(), |h| kib(h.live_bytes as f64)),
                r.heap.map_or("–".into(), |h| h.live_allocations.to_string()),
                r.processes.to_string(),
                kib(r.rss_bytes as f64),
                kib(r.pss_bytes as f64),
            ]);
        }
    }
    (head.iter().map(|s| s.to_string()).collect(), rows)
}

/// The rules of thumb per chain, one sentence each.
pub fn rules_of_thumb(all: &[ResidentView]) -> Vec<String> {
    chain_rules(all).iter().map(|r| r.sentence()).collect()
}

/// The records' notes, and connections left open after the client closed them.
pub fn notes(all: &[ResidentView]) -> Vec<String> {
    let mut out = Vec::new();
    for v in all {
        for n in &v.notes {
            out.push(format!("{}: {n}", v.label()));
        }
        if let Some(open) = v.open_after_close.filter(|&o| o > 0) {
            out.push(format!(
                "{}: {open} connections were still open on the server after the client closed them all",
                v.label()
            ));
        }
        if v.stopped != "complete" {
            out.push(format!("{}: {}", v.label(), v.stopped));
        }
    }
    out
}
