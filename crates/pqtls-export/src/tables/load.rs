//! The load tables (the numbers come from [`crate::analysis::load`]): the one `pqtls load`
//! prints ([`summary`], [`notes`]), which the Markdown report shows too, and the reports'
//! connections per second, runs, message sizes, latency, CPU, errors and layers.

use super::{ms, rate, us, Table};
use crate::analysis::load::{cpu_under_load, percentiles, rate_groups, ratio, stacked_layers, LoadView};
use crate::analysis::InsituView;
use pqtls_core::load::LoadResult;

/// One row per load record, as `pqtls load` prints it: stack, configuration (the record's
/// label), who served it, the loop, connections (TLS handshakes) and requests per second, the
/// latency's percentiles (ms), the mean CPU per handshake of client (and of that, its chain
/// verification) and server (µs) and the client's errors. Numbers from the fifth column on.
pub fn summary(all: &[LoadView]) -> Table {
    let head = [
        "stack",
        "configuration",
        "served by",
        "loop",
        "conns/s",
        "req/s",
        "p50 ms",
        "p90 ms",
        "p99 ms",
        "p99.9 ms",
        "max ms",
        "client CPU/hs µs",
        "verify CPU/hs µs",
        "server CPU/hs µs",
        "errors",
    ]
    .map(String::from)
    .to_vec();
    let cpu = |handshakes: u64, ns: f64| if handshakes > 0 { us(ns) } else { "–".to_string() };
    let rows = all
        .iter()
        .map(|r| {
            let lat = &r.latency;
            let mut row = vec![
                r.factor("stack").to_string(),
                r.label().to_string(),
                r.terminator.name.clone(),
                r.target_rate_per_s.map_or("closed".into(), |t| format!("open {t}/s")),
                format!("{:.1}", r.handshakes_per_s),
                format!("{:.1}", r.achieved_rate_per_s),
            ];
            row.extend([lat.p50_ns, lat.p90_ns, lat.p99_ns, lat.p999_ns, lat.max_ns].map(|v| ms(v as f64)));
            row.push(cpu(r.handshakes, r.client_handshake_cpu_ns_mean));
            // The chain verification inside it; "not verified" for verify = false.
            row.push(match r.client_verify_cpu_ns_mean {
                Some(ns) => cpu(r.handshakes, ns),
                None if r.factor("verify") == "false" => "not verified".into(),
                // s2n-tls validates inside its Certificate handler: not measurable apart.
                None if r.factor("stack") == "s2n" => "n/a (s2n)".into(),
                None => "–".into(),
            });
            row.push(match (&r.server, r.terminator_processes.as_ref().and_then(|p| p.cpu_ns_per_handshake)) {
                (Some(s), _) if s.handshakes > 0 => cpu(s.handshakes, s.handshake_cpu_ns_mean),
                // A third-party terminator: its processes' CPU per connection (from /proc).
                (_, Some(ns)) => format!("{} (process)", us(ns)),
                _ => "–".into(),
            });
            row.push(r.errors.iter().map(|e| e.count).sum::<u64>().to_string());
            row
        })
        .collect();
    (head, rows)
}

/// What `pqtls load` says under its table: each record's notes and its errors by kind.
pub fn notes(all: &[LoadView]) -> Vec<String> {
    // Named by label and stack: a run of several stacks has one record per stack of each label.
    all.iter().flat_map(|r| result_notes(&format!("{} ({})", r.label(), r.factor("stack")), r.result)).collect()
}

/// A load result's notes and errors by kind (with the last message), each named by `label`.
pub(crate) fn result_notes(label: &str, l: &LoadResult) -> Vec<String> {
    let notes = l.notes.iter().map(|n| format!("{label}: {n}"));
    let errors = l.errors.iter().map(|e| format!("{label}: {} {} errors, last: {}", e.count, e.kind, e.last));
    let processes = l.terminator_processes.iter().map(|p| {
        let mib = |b: u64| format!("{:.1}", b as f64 / (1024.0 * 1024.0));
        format!(
            "{label}: {} from /proc (processes: {}; warm-up included): {} ms CPU{}; RSS {} → {} MiB, PSS {} → {} MiB \
             before → after the run",
            l.terminator.name,
            p.processes,
            p.cpu_ns / 1_000_000,
            p.cpu_ns_per_handshake.map_or(String::new(), |ns| format!(
                " over {} connections = {} µs per connection",
                p.handshakes.unwrap_or(0),
                us(ns)
            )),
            mib(p.rss_bytes_before),
            mib(p.rss_bytes_after),
            mib(p.pss_bytes_before),
            mib(p.pss_bytes_after),
        )
    });
    let heap = l.server.iter().filter_map(|s| s.heap.as_ref()).map(|h| {
        format!(
            "{label}: pqtls serve's heap (its worker threads): {:.1} allocations and {:.1} KiB allocated per \
             connection over {} connections (warm-up included); {:.0} B per connection not freed by the end",
            h.allocations_per_connection,
            h.allocated_bytes_per_connection / 1024.0,
            h.connections,
            h.retained_bytes_per_connection
        )
    });
    // What the client trusted, when it is not pqtls' own root (a server whose chain we did not make).
    let trust = l
        .trust
        .iter()
        .filter(|t| !t.starts_with("pqtls PKI root, name localhost"))
        .map(|t| format!("{label}: the client trusted {t}"));
    notes.chain(errors).chain(processes).chain(trust).chain(heap).collect()
}

fn ratio_cell(r: &LoadView, all: &[LoadView]) -> String {
    match ratio(r, all) {
        Some(q) => match q.half_width {
            Some(h) => format!("{:.2} ± {:.2}", q.ratio, h),
            None => format!("{:.2}", q.ratio),
        },
        None => "–".into(),
    }
}

/// Connections/s per configuration (rows) and thread count (columns), each with its ratio to
/// the baseline when some row has one (no column of dashes).
pub(crate) fn rates_by_threads(all: &[LoadView]) -> Table {
    let (groups, threads) = rate_groups(all);
    let ratios = all.iter().any(|r| crate::analysis::load::ratio(r, all).is_some());
    let mut head = vec!["configuration".to_string(), "stack".into(), "terminated by".into()];
    for t in &threads {
        head.push(format!("{t} thr conn/s"));
        if ratios {
            head.push(format!("{t} thr × base"));
        }
    }
    let rows = groups
        .iter()
        .map(|g| {
            let first = g.rows[0].1;
            let mut row = vec![g.configuration.clone(), first.stack().to_string(), first.terminator.name.clone()];
            for t in &threads {
                match g.rows.iter().find(|(x, _)| x == t) {
                    Some((_, r)) => {
                        row.push(rate(r.connections_per_s()));
                        if ratios {
                            row.push(ratio_cell(r, all));
                        }
                    }
                    None => row.extend(std::iter::repeat_n("–".to_string(), 1 + ratios as usize)),
                }
            }
            row
        })
        .collect();
    (head, rows)
}

/// What the first ClientHello took on the wire: `1 TCP segment`, `2 QUIC datagrams`, or `–`
/// (not counted: older records, synthetic ones).
pub(crate) fn client_hello_on_the_wire(l: &LoadResult) -> String {
    let plural = |n: u64, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
    match (l.client_hello_segments, l.client_hello_datagrams) {
        (Some(n), _) => plural(n, "TCP segment"),
        (None, Some(n)) => plural(n, "QUIC datagram"),
        (None, None) => "–".into(),
    }
}

/// The handshake's message sizes, once per handshake configuration, transport and terminator
/// (bytes, headers included; one handshake of each run, read from its bytes with its secrets),
/// and what its first ClientHello took on the wire ([`client_hello_on_the_wire`]).
pub(crate) fn sizes(all: &[LoadView]) -> Table {
    let head = [
        "handshake",
        "terminated by",
        "ClientHello",
        "ClientHello on the wire",
        "ServerHello",
        "Certificate",
        "CertificateVerify",
        "c→s",
        "s→c",
    ]
    .map(String::from)
    .to_vec();
    let mut seen = std::collections::HashSet::new();
    let mut rows = Vec::new();
    for r in all {
        let Some(b) = &r.result.bytes else { continue };
        let quic = r.record.factor("transport") == "quic";
        let key = format!(
            "{} {} {} {} {} {quic}",
            r.record.factor("stack"),
            r.record.factor("group"),
            r.record.factor("key_shares"),
            r.record.factor("chain"),
            r.result.terminator.name
        );
        if !seen.insert(key) {
            continue;
        }
        let m = |name: &str| b.messages.get(name).map_or("–".to_string(), |v| v.to_string());
        rows.push(vec![
            format!(
                "{} {}{}{}",
                r.record.factor("group"),
                r.record.factor("chain"),
                match r.record.factor("key_shares") {
                    "" | "one" => String::new(),
                    k => format!(" (key shares {k})"),
                },
                if quic { " over QUIC" } else { "" }
            ),
            r.result.terminator.name.clone(),
            m("ClientHello"),
            client_hello_on_the_wire(r.result),
            m("ServerHello"),
            m("Certificate"),
            m("CertificateVerify"),
            b.client_to_server.to_string(),
            b.server_to_client.to_string(),
        ]);
    }
    (head, rows)
}

/// One row per load record: loop, rates, counts, terminator, how it stopped.
pub(crate) fn runs(all: &[LoadView]) -> Table {
    let head = [
        "configuration",
        "threads",
        "connections",
        "loop",
        "target /s",
        "achieved /s",
        "conn/s",
        "handshakes/s",
        "× base",
        "requests",
        "errors",
        "terminated by",
        "stopped",
    ]
    .map(String::from)
    .to_vec();
    let rows = all
        .iter()
        .map(|r| {
            vec![
                r.configuration(),
                r.threads().to_string(),
                r.connections.to_string(),
                r.loop_mode.clone(),
                r.target_rate_per_s.map_or("–".into(), |t| format!("{t:.1}")),
                format!("{:.1}", r.achieved_rate_per_s),
                rate(r.connections_per_s()),
                rate(r.handshakes_per_s),
                ratio_cell(r, all),
                r.requests.to_string(),
                r.error_count().to_string(),
                r.terminator(),
                r.stopped.clone(),
            ]
        })
        .collect();
    (head, rows)
}

/// Latency and time to first byte percentiles, µs.
pub(crate) fn latency(all: &[LoadView]) -> Table {
    let mut head = vec!["configuration".to_string(), "threads".into(), "n".into()];
    head.extend(percentiles(&Default::default()).iter().map(|(k, _)| k.to_string()));
    head.extend(["TTFB p50".into(), "TTFB p99".into()]);
    let rows = all
        .iter()
        .map(|r| {
            let mut row = vec![r.configuration(), r.threads().to_string(), r.latency.count.to_string()];
            row.extend(percentiles(&r.latency).iter().map(|(_, v)| us(*v as f64)));
            row.push(us(r.ttfb.p50_ns as f64));
            row.push(us(r.ttfb.p99_ns as f64));
            row
        })
        .collect();
    (head, rows)
}

/// CPU per handshake under load (means) next to the in-situ mean of the same handshake, µs.
pub(crate) fn cpu(all: &[LoadView], insitu: &[InsituView]) -> Table {
    let head = [
        "configuration",
        "threads",
        "client under load",
        "client in situ",
        "server under load",
        "server in situ",
        "client process CPU / request",
        "server process CPU / handshake",
    ]
    .map(String::from)
    .to_vec();
    let opt = |x: Option<f64>| x.map_or("–".to_string(), us);
    let rows = all
        .iter()
        .filter(|r| !r.is_plain())
        .map(|r| {
            let c = cpu_under_load(r, insitu);
            vec![
                r.configuration(),
                r.threads().to_string(),
                us(c.client_load_ns),
                opt(c.client_insitu_ns),
                opt(c.server_load_ns),
                opt(c.server_insitu_ns),
                us(r.client_process_cpu_ns_per_request),
                opt(r
                    .server
                    .as_ref()
                    .and_then(|s| s.process_cpu_ns_per_handshake)
                    .or_else(|| r.terminator_processes.as_ref().and_then(|p| p.cpu_ns_per_handshake))),
            ]
        })
        .collect();
    (head, rows)
}

/// Errors by kind, client and server side; no rows when there were none.
pub(crate) fn errors(all: &[LoadView]) -> Table {
    let head = ["configuration", "threads", "side", "kind", "count", "last message"].map(String::from).to_vec();
    let mut rows = Vec::new();
    for r in all {
        let server = r.server.as_ref().map_or(&[][..], |s| &s.errors[..]);
        for (side, list) in [("client", &r.errors[..]), ("server", server)] {
            for e in list {
                rows.push(vec![
                    r.configuration(),
                    r.threads().to_string(),
                    side.to_string(),
                    e.kind.clone(),
                    e.count.to_string(),
                    e.last.clone(),
                ]);
            }
        }
    }
    (head, rows)
}

/// The layers of the records that have them, µs at p50 and p95; each row named by what varies
/// among them ([`crate::analysis::varying_label`]).
pub(crate) fn layers(all: &[LoadView]) -> Table {
    let names = stacked_layers();
    let among: Vec<&pqtls_core::record::Record> =
        all.iter().filter(|r| !r.layers.is_empty()).map(|r| r.record).collect();
    let mut head = vec!["configuration".to_string()];
    for n in &names {
        head.push(format!("{n} p50"));
        head.push(format!("{n} p95"));
    }
    let rows = all
        .iter()
        .filter(|r| !r.layers.is_empty())
        .map(|r| {
            let mut row = vec![crate::analysis::varying_label(r.record, &among, &[])];
            for n in &names {
                match r.layers.get(*n) {
                    Some(l) => {
                        row.push(us(l.p50_ns as f64));
                        row.push(us(l.p95_ns as f64));
                    }
                    None => row.extend(["–".to_string(), "–".to_string()]),
                }
            }
            row
        })
        .collect();
    (head, rows)
}

/// How ratios and their intervals are made (see [`crate::analysis::load`]).
pub(crate) const SPREAD_NOTE: &str = "Ratios are this row's connections/s over the x25519 + Ed25519 row's with the \
    same other factors (the same stack and terminator first). ± is the ~95 % interval from the completed requests \
    of every second of the two runs (1.96 standard errors of each mean rate, combined); a ratio without ± lacks \
    per-second counts (or is not one connection per request).";
