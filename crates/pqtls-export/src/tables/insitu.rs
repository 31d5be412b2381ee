//! The in-situ tables: one record's CPU time per step ([`steps`], with the lines around it:
//! [`negotiated`], [`notes`]), which `pqtls insitu` prints and the reports show per
//! configuration; and the tables of a set of records: CPU time per handshake ([`quantiles`]),
//! bytes on the wire ([`bytes`]), capacity (`capacity`); heap per step ([`memory`]) and per
//! handshake ([`memory_totals`]) when the records counted it; over QUIC, datagrams and packets
//! per type ([`quic`]) and the same configuration over TCP and QUIC side by side
//! ([`tcp_vs_quic`]).

use super::{cost_unit, delta_us, pct, rate, signed_us, us, Table};
use crate::analysis::capacity::{capacity as capacity_of, Convention, NetworkModel};
use crate::analysis::resident::{idle_memory, ResidentView};
use crate::analysis::InsituView;
use crate::quantile_keys;
use pqtls_core::factor::Factor;
use pqtls_core::memory::MeanMemory;
use pqtls_core::stats::{Delta, Summary};

/// Whether a step table lists the stack's own steps (sub-steps) under each canonical step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Substeps {
    Listed,
    Left,
}

/// What was negotiated and how much was measured, on one line: `negotiated: group … ·
/// signature … · cipher …`, a HelloRetryRequest or a resumption, the handshakes and the rate.
pub fn negotiated(r: &InsituView) -> String {
    let n = &r.negotiated;
    format!(
        "negotiated: group {} · signature {} · cipher {}{}{} · {} handshakes ({}, {} mode), {:.0} handshakes/s",
        n.group,
        if n.sigalg.is_empty() { "-" } else { &n.sigalg },
        n.cipher,
        if n.hrr { " · HelloRetryRequest" } else { "" },
        if n.resumed { " · resumed" } else { "" },
        r.loops.measured,
        r.loops.stopped,
        r.loops.mode,
        r.rate.handshakes_per_s,
    )
}

/// A record's CPU time per step (µs, thread CPU clock). Per side each step — then, with
/// [`Substeps::Listed`], the stack's own steps inside it (`step/stack step`, part of its
/// time) — and the side's `TOTAL`; last the `both` sides' `TOTAL`. Columns: side, step, the
/// record's quantiles, mean, stdev, min, max, the median's ~95 % interval and, when the record
/// has a baseline, each step's change against it. Numbers from the third column on.
pub fn steps(r: &InsituView, substeps: Substeps) -> Table {
    let qkeys = quantile_keys(&[*r]);
    let unit = cost_unit(r.unit);
    let mut head = vec!["side".to_string(), "step".into()];
    head.extend(qkeys.iter().map(|k| format!("{k} {unit}")));
    head.extend(["mean", "stdev", "min", "max", "median 95 % CI"].map(String::from));
    let base = r.baseline.as_ref();
    if base.is_some() {
        head.push(format!("Δp50 vs baseline {unit}"));
    }
    let row = |side: &str, step: &str, sum: &Summary, delta: Option<&Delta>| {
        let mut v = vec![side.to_string(), step.to_string()];
        v.extend(qkeys.iter().map(|k| sum.quantiles.get(k).map_or("–".into(), |x| us(*x))));
        v.extend([sum.mean, sum.stdev, sum.min, sum.max].map(us));
        v.push(format!("{} – {}", us(sum.median_ci[0]), us(sum.median_ci[1])));
        if base.is_some() {
            v.push(delta.map(delta_us).unwrap_or_default());
        }
        v
    };
    let mut rows = Vec::new();
    for (side, summary) in [("client", &r.client), ("server", &r.server)] {
        let deltas = base.map(|b| if side == "client" { &b.client } else { &b.server });
        for (step, sum) in &summary.steps {
            rows.push(row(side, step, sum, deltas.and_then(|d| d.get(step))));
            if substeps == Substeps::Listed {
                let prefix = format!("{step}/");
                for (name, sub) in summary.substeps.iter().filter(|(k, _)| k.starts_with(&prefix)) {
                    rows.push(row(side, name, sub, None));
                }
            }
        }
        let total = base.map(|b| if side == "client" { &b.client_total } else { &b.server_total });
        rows.push(row(side, "TOTAL", &summary.total_cpu_ns, total));
    }
    rows.push(row("both", "TOTAL", &r.total_cpu_ns, base.map(|b| &b.total)));
    (head, rows)
}

/// The lines after a record's step table: how often a side was descheduled inside the stack,
/// the record's warnings (`Warning: …`), the bytes per direction and per message, and the
/// change against the baseline.
pub fn notes(r: &InsituView) -> Vec<String> {
    let mut lines = Vec::new();
    if let Some(noise) = r.noise.as_ref().filter(|n| n.disturbed_client + n.disturbed_server > 0) {
        lines.push(format!(
            "descheduled inside the stack: {} client and {} server sides of {}; {} and {} of them left out of the \
             step statistics (gap not placeable in one step; totals include them; docs/attribution.md)",
            noise.disturbed_client,
            noise.disturbed_server,
            r.loops.measured,
            noise.excluded_client,
            noise.excluded_server
        ));
    }
    lines.extend(r.warnings().into_iter().map(|w| format!("Warning: {w}")));
    let b = &r.bytes;
    let units = if r.quic.is_some() { "datagrams" } else { "records" };
    lines.push(format!(
        "bytes: client→server {} B in {} {units} · server→client {} B in {} {units}",
        b.client_to_server, b.records_client_to_server, b.server_to_client, b.records_server_to_client,
    ));
    if let Some(q) = &r.quic {
        let dir = |d: &pqtls_core::quic::QuicDirection| {
            let packets: Vec<String> = d.packets.iter().map(|(t, n)| format!("{n} {t}")).collect();
            let flights: Vec<String> = d.flights.iter().map(|f| f.to_string()).collect();
            format!(
                "{} datagrams in flights {} ({}), {} B CRYPTO, {} B not handshake data",
                d.datagrams,
                flights.join("+"),
                packets.join(", "),
                d.crypto_bytes,
                d.not_handshake_data_bytes
            )
        };
        let a = &q.amplification;
        lines.push(format!(
            "quic: client→server {} · server→client {} · server sent {} B before the client's address was validated \
             (limit 3 × {} = {} B{}) · {} rounds",
            dir(&q.client_to_server),
            dir(&q.server_to_client),
            a.sent_before_validation_bytes,
            a.received_before_validation_bytes,
            a.limit_bytes,
            if a.limited { ", reached: the server waited for the client's next flight" } else { "" },
            q.rounds
        ));
    }
    let messages: Vec<String> = b
        .messages
        .iter()
        .map(|(k, v)| match b.compressed_certificates.get(k) {
            // A compressed certificate: what it stands for, and the algorithm.
            Some(c) => format!("{k} {v} ({} of a {}-byte Certificate)", c.algorithm, c.uncompressed_bytes),
            None => format!("{k} {v}"),
        })
        .collect();
    lines.push(format!("messages (B, with 4-byte header): {}", messages.join(" · ")));
    if let Some(base) = &r.baseline {
        let unit = cost_unit(r.unit);
        lines.push(format!(
            "baseline: {} · total Δ {} {unit} ({}) ± {} {unit} (10 %-trimmed means)",
            base.label,
            signed_us(base.total.delta),
            pct(base.total.relative),
            us(base.total.half_width)
        ));
    }
    lines
}

/// Where a configuration was measured both in time and in instructions: nanoseconds per
/// instruction (time / count, 10 %-trimmed means) per side — the cycles per instruction
/// implied at the CPU's clock rate. One row per pair: `timed` and `counted` match when every
/// factor but the clock agrees.
pub fn per_instruction(timed: &[InsituView], counted: &[InsituView]) -> Table {
    let head = ["configuration", "stack", "client ns/instr", "server ns/instr", "client M instr", "server M instr"]
        .map(String::from)
        .to_vec();
    let same = |a: &InsituView, b: &InsituView| {
        pqtls_core::factor::FACTORS.iter().filter(|f| f.name != "clock").all(|f| a.factor(f.name) == b.factor(f.name))
    };
    let rows = timed
        .iter()
        .filter_map(|t| counted.iter().find(|c| same(t, c)).map(|c| (t, c)))
        .map(|(t, c)| {
            let ratio = |ns: &Summary, n: &Summary| format!("{:.3}", ns.trimmed_mean / n.trimmed_mean);
            vec![
                t.label().to_string(),
                t.factor("stack").to_string(),
                ratio(&t.client.total_cpu_ns, &c.client.total_cpu_ns),
                ratio(&t.server.total_cpu_ns, &c.server.total_cpu_ns),
                format!("{:.3}", c.client.total_cpu_ns.trimmed_mean / 1e6),
                format!("{:.3}", c.server.total_cpu_ns.trimmed_mean / 1e6),
            ]
        })
        .collect();
    (head, rows)
}

/// The capacity table, shared by the Markdown and HTML reports: one row per record (label
/// first) — wire bytes, the bottleneck direction, sessions per second per link and per core,
/// the server's first flight in segments, round trips and serialisation time; and, when
/// `residents` hold the same configurations held idle by pqtls serve, the heap per idle
/// connection and the idle connections 1 GiB holds.
pub(crate) fn capacity(records: &[InsituView], model: &NetworkModel, residents: &[ResidentView]) -> Table {
    let idle: Vec<_> = records.iter().map(|r| idle_memory(r, residents)).collect();
    // Under the IBM convention the bytes are the TLS bytes, each counted 10 bits.
    let bytes = match model.convention {
        Convention::Pqtls => "wire B",
        Convention::Ibm => "TLS B (10 bit each)",
    };
    let mut head =
        vec!["configuration".to_string(), format!("{bytes} c→s"), format!("{bytes} s→c"), "bottleneck".into()];
    head.extend(model.bandwidths_gbps.iter().map(|g| format!("sessions/s @ {g} Gbit/s")));
    head.extend(["server sessions/s per core".into(), "client sessions/s per core".into()]);
    head.extend(["1st flight segments".into(), "1st flight RTTs".into(), "client cert RTTs".into()]);
    head.extend(model.bandwidths_gbps.iter().map(|g| format!("1st flight µs @ {g} Gbit/s")));
    let with_idle = idle.iter().any(Option::is_some);
    if with_idle {
        head.extend(["idle KiB/conn (pqtls serve heap)".into(), "idle conns per GiB".into()]);
    }
    let rows = records
        .iter()
        .zip(&idle)
        .map(|(r, idle)| {
            let c = capacity_of(*r, model);
            let mut row = vec![
                c.label.clone(),
                c.client_to_server_wire_bytes.to_string(),
                c.server_to_client_wire_bytes.to_string(),
                c.bottleneck.name().into(),
            ];
            row.extend(c.links.iter().map(|l| rate(l.sessions_per_s)));
            row.push(rate(c.server_sessions_per_core));
            row.push(rate(c.client_sessions_per_core));
            row.push(c.flights[1].segments.to_string());
            row.push(c.server_first_flight_round_trips.to_string());
            row.push(c.client_certificate_flight_round_trips.map_or("–".into(), |x| x.to_string()));
            row.extend(c.flights[1].serialisation_us.iter().map(|(_, t)| format!("{t:.2}")));
            if with_idle {
                row.push(idle.map_or("–".into(), |p| format!("{:.1}", p.bytes() / 1024.0)));
                row.push(idle.and_then(|p| p.per_gib()).map_or("–".into(), rate));
            }
            row
        })
        .collect();
    (head, rows)
}

/// CPU time per handshake: the client's, the server's and both sides' quantiles (µs) of each
/// configuration, with the factors that vary as columns, and the handshakes measured.
pub fn quantiles(recs: &[InsituView], cols: &[&Factor]) -> Table {
    let qk = quantile_keys(recs);
    let mut head: Vec<String> =
        ["client", "server", "total"].iter().flat_map(|side| qk.iter().map(move |k| format!("{side} {k}"))).collect();
    head.push("n".into());
    by_configuration(recs, cols, head, |r| {
        let mut row: Vec<String> = [&r.client.total_cpu_ns, &r.server.total_cpu_ns, &r.total_cpu_ns]
            .iter()
            .flat_map(|s| qk.iter().map(|k| s.quantiles.get(k).map_or("–".into(), |v| us(*v))))
            .collect();
        row.push(r.loops.measured.to_string());
        row
    })
}

/// Bytes on the wire: each handshake message (its 4-byte header included) and the record-layer
/// bytes and records per direction, per configuration.
pub fn bytes(recs: &[InsituView], cols: &[&Factor]) -> Table {
    let names = message_names(recs);
    let mut head = names.clone();
    head.extend(["client→server".into(), "server→client".into(), "records c→s".into(), "records s→c".into()]);
    by_configuration(recs, cols, head, |r| {
        let mut row: Vec<String> =
            names.iter().map(|n| r.bytes.messages.get(n).map_or("–".into(), |b| b.to_string())).collect();
        row.extend([
            r.bytes.client_to_server.to_string(),
            r.bytes.server_to_client.to_string(),
            r.bytes.records_client_to_server.to_string(),
            r.bytes.records_server_to_client.to_string(),
        ]);
        row
    })
}

/// A record's heap use per step, beside its CPU time, when the run counted memory
/// (`insitu --memory`): per side each step's median CPU (µs) and its mean allocations, bytes
/// allocated, bytes freed and bytes still held (allocated − freed) per handshake, then the
/// side's `TOTAL` with its peak of live heap (median); `None` for a record without counts.
pub fn memory(r: &InsituView) -> Option<Table> {
    let m = r.memory.as_ref()?;
    let head = ["side", "step", "CPU p50 µs", "allocations", "allocated B", "freed B", "held B", "peak live B"]
        .map(String::from)
        .to_vec();
    let row = |side: &str, step: &str, cpu: Option<f64>, mem: &MeanMemory, peak: Option<i64>| {
        vec![
            side.to_string(),
            step.to_string(),
            cpu.map_or("–".into(), us),
            format!("{:.1}", mem.allocations),
            format!("{:.0}", mem.allocated_bytes),
            format!("{:.0}", mem.freed_bytes),
            format!("{:.0}", mem.allocated_bytes - mem.freed_bytes),
            peak.map_or(String::new(), |p| p.to_string()),
        ]
    };
    let mut rows = Vec::new();
    for (side, cpu, mem) in [("client", &r.client, &m.client), ("server", &r.server, &m.server)] {
        for (step, s) in &mem.steps {
            rows.push(row(side, step, cpu.steps.get(step).map(|x| x.median), s, None));
        }
        rows.push(row(side, "TOTAL", Some(cpu.total_cpu_ns.median), &mem.total, Some(mem.peak_live_bytes_median)));
    }
    Some((head, rows))
}

/// The line under a memory table: what was counted and what was not.
pub fn memory_note(r: &InsituView) -> Option<String> {
    let m = r.memory.as_ref()?;
    Some(format!(
        "heap: means per handshake over {} handshakes, inside the stack's calls; counted: {}; not counted: {}",
        m.client.handshakes, m.counted, m.not_counted
    ))
}

/// Heap per handshake, per configuration (the records that counted memory): per side the
/// mean allocations, KiB allocated, and the median peak of live heap (KiB).
pub fn memory_totals(recs: &[InsituView], cols: &[&Factor]) -> Option<Table> {
    let counted: Vec<InsituView> = recs.iter().filter(|r| r.memory.is_some()).copied().collect();
    if counted.is_empty() {
        return None;
    }
    let head = [
        "client allocations",
        "client KiB allocated",
        "client peak KiB",
        "server allocations",
        "server KiB allocated",
        "server peak KiB",
    ]
    .map(String::from)
    .to_vec();
    Some(by_configuration(&counted, cols, head, |r| {
        let m = r.memory.as_ref().expect("filtered");
        let kib = |b: f64| format!("{:.1}", b / 1024.0);
        vec![
            format!("{:.0}", m.client.total.allocations),
            kib(m.client.total.allocated_bytes),
            kib(m.client.peak_live_bytes_median as f64),
            format!("{:.0}", m.server.total.allocations),
            kib(m.server.total.allocated_bytes),
            kib(m.server.peak_live_bytes_median as f64),
        ]
    }))
}

/// Over QUIC (`transport = quic`), per configuration and direction: datagrams, packets and bytes
/// per packet type, the TLS handshake bytes they carry (CRYPTO), what is not handshake data, the
/// server's anti-amplification view and the rounds; `None` when no record went over QUIC.
pub fn quic(recs: &[InsituView], cols: &[&Factor]) -> Option<Table> {
    let over: Vec<InsituView> = recs.iter().filter(|r| r.quic.is_some()).copied().collect();
    if over.is_empty() {
        return None;
    }
    let types: Vec<&str> = pqtls_core::quic::PACKET_TYPES
        .into_iter()
        .filter(|t| {
            over.iter()
                .filter_map(|r| r.quic.as_ref())
                .any(|q| q.client_to_server.packets.contains_key(*t) || q.server_to_client.packets.contains_key(*t))
        })
        .collect();
    let mut head = vec!["configuration".to_string()];
    head.extend(cols.iter().map(|f| f.name.to_string()));
    head.extend(["direction".to_string(), "datagrams".into(), "flights".into()]);
    head.extend(types.iter().map(|t| format!("{t} packets / B")));
    head.extend([
        "datagram B".into(),
        "CRYPTO B".into(),
        "not handshake data B".into(),
        "server sent before validation / 3× received B".into(),
        "rounds".into(),
    ]);
    let mut rows = Vec::new();
    for r in &over {
        let q = r.quic.as_ref().expect("filtered");
        for (dir, d) in [("client→server", &q.client_to_server), ("server→client", &q.server_to_client)] {
            let mut row = vec![r.label().to_string()];
            row.extend(cols.iter().map(|f| r.factor(f.name).to_string()));
            row.extend([
                dir.to_string(),
                d.datagrams.to_string(),
                d.flights.iter().map(|f| f.to_string()).collect::<Vec<_>>().join("+"),
            ]);
            row.extend(types.iter().map(|t| match (d.packets.get(*t), d.packet_bytes.get(*t)) {
                (Some(n), Some(b)) => format!("{n} / {b}"),
                _ => "–".into(),
            }));
            let a = &q.amplification;
            row.extend([
                d.datagram_bytes.to_string(),
                d.crypto_bytes.to_string(),
                d.not_handshake_data_bytes.to_string(),
                if dir == "server→client" {
                    format!(
                        "{} / {}{}",
                        a.sent_before_validation_bytes,
                        a.limit_bytes,
                        if a.limited { " (waited)" } else { "" }
                    )
                } else {
                    "–".into()
                },
                q.rounds.to_string(),
            ]);
            rows.push(row);
        }
    }
    Some((head, rows))
}

/// The same configuration over a byte-stream transport (`memory`, `tcp`…) and over QUIC, side
/// by side: median CPU per side (µs), bytes and datagrams/records each way, rounds (QUIC's
/// from its record; TLS over TCP in memory: the client's 2 flights, ClientHello and Finished);
/// `None` when no configuration was measured both ways.
pub fn tcp_vs_quic(recs: &[InsituView]) -> Option<Table> {
    // A configuration's id without its transport.
    let key = |r: &InsituView| r.id().split('|').filter(|p| !p.starts_with("transport=")).collect::<Vec<_>>().join("|");
    let mut rows = Vec::new();
    for q in recs.iter().filter(|r| r.quic.is_some()) {
        let k = key(q);
        let tcp: Vec<&InsituView> = recs.iter().filter(|r| r.quic.is_none() && key(r) == k).collect();
        if tcp.is_empty() {
            continue;
        }
        for r in tcp.into_iter().chain([q]) {
            let (units, rounds) = match &r.quic {
                Some(w) => ("datagrams", w.rounds.to_string()),
                None => ("records", "2".to_string()),
            };
            rows.push(vec![
                r.label().to_string(),
                r.factor("transport").to_string(),
                us(r.client.total_cpu_ns.median),
                us(r.server.total_cpu_ns.median),
                r.bytes.client_to_server.to_string(),
                r.bytes.server_to_client.to_string(),
                format!("{} {units}", r.bytes.records_client_to_server),
                format!("{} {units}", r.bytes.records_server_to_client),
                rounds,
            ]);
        }
    }
    if rows.is_empty() {
        return None;
    }
    let head = [
        "configuration",
        "transport",
        "client CPU p50 µs",
        "server CPU p50 µs",
        "bytes c→s",
        "bytes s→c",
        "c→s",
        "s→c",
        "rounds",
    ]
    .map(String::from)
    .to_vec();
    Some((head, rows))
}

/// A row per configuration: its label and the factors that vary (`cols`), then `cells`' columns
/// under `head`.
fn by_configuration(
    recs: &[InsituView],
    cols: &[&Factor],
    head: Vec<String>,
    cells: impl Fn(&InsituView) -> Vec<String>,
) -> Table {
    let mut full = vec!["configuration".to_string()];
    full.extend(cols.iter().map(|f| f.name.to_string()));
    full.extend(head);
    let rows = recs
        .iter()
        .map(|r| {
            let mut row = vec![r.label().to_string()];
            row.extend(cols.iter().map(|f| r.factor(f.name).to_string()));
            row.extend(cells(r));
            row
        })
        .collect();
    (full, rows)
}

/// Message names in a stable order: the usual handshake order, then anything else.
pub(crate) fn message_names(records: &[InsituView]) -> Vec<String> {
    const ORDER: &[&str] = &[
        "ClientHello",
        "HelloRetryRequest",
        "ServerHello",
        "EncryptedExtensions",
        "CertificateRequest",
        "Certificate",
        "CompressedCertificate",
        "CertificateVerify",
        "Finished",
        "ClientCertificate",
        "ClientCompressedCertificate",
        "ClientCertificateVerify",
        "ClientFinished",
        "NewSessionTicket",
    ];
    let mut names: Vec<String> = ORDER
        .iter()
        .filter(|n| records.iter().any(|r| r.bytes.messages.contains_key(**n)))
        .map(|n| n.to_string())
        .collect();
    for r in records {
        for k in r.bytes.messages.keys() {
            if !names.contains(k) {
                names.push(k.clone());
            }
        }
    }
    names
}
