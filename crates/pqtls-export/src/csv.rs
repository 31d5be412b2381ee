//! CSV: one row per configuration × side × step with its statistics (`csv`, [`steps`]), and
//! one row per configuration with totals, bytes and capacity (`summary-csv`, [`summary`]).
//! Times in ns. In-situ records only (others are left out with a notice from
//! [`crate::Exporter::notices`]).
//!
//! Configuration columns: `id`, `label`, then one column per factor that every label names
//! (group, chain) or that some record sets away from its default, named as in the factor
//! table ([`crate::analysis::factor_columns`]) — another factor at its default everywhere
//! is no column.

use crate::analysis::{capacity::capacity, factor_columns, InsituView};
use crate::capacity::NetworkModel;
use crate::{quantile_keys, Exporter, ReportOptions, ResultSet};
use pqtls_core::factor::{Factor, Kind};
use pqtls_core::stats::Summary;
use pqtls_core::{Error, Result};

/// The `csv` exporter: [`steps`].
pub struct StepsCsv;

impl Exporter for StepsCsv {
    fn name(&self) -> &'static str {
        "csv"
    }
    fn describe(&self) -> &'static str {
        "CSV, one row per configuration × side × step: n, min, mean, stdev, median and its 95 % interval, max, quantiles (ns)"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Insitu]
    }
    fn render(&self, set: &ResultSet, _opts: &ReportOptions) -> Result<String> {
        steps(set)
    }
}

/// The `summary-csv` exporter: [`summary`].
pub struct SummaryCsv;

impl Exporter for SummaryCsv {
    fn name(&self) -> &'static str {
        "summary-csv"
    }
    fn describe(&self) -> &'static str {
        "CSV, one row per configuration: CPU per side, bytes, capacity model, loops"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Insitu]
    }
    fn render(&self, set: &ResultSet, opts: &ReportOptions) -> Result<String> {
        summary(set, &opts.model)
    }
}

/// The `load-csv` exporter: [`loads`].
pub struct LoadCsv;

impl Exporter for LoadCsv {
    fn name(&self) -> &'static str {
        "load-csv"
    }
    fn describe(&self) -> &'static str {
        "CSV, one row per load record: rates, ratio to x25519 + Ed25519, latency percentiles, CPU per handshake under load and in situ, errors, terminator, layers (ns)"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Load]
    }
    fn render(&self, set: &ResultSet, _opts: &ReportOptions) -> Result<String> {
        loads(set)
    }
}

/// The `transfer-csv` exporter: [`transfers`].
pub struct TransferCsv;

impl Exporter for TransferCsv {
    fn name(&self) -> &'static str {
        "transfer-csv"
    }
    fn describe(&self) -> &'static str {
        "CSV, one row per transfer record: factors, initial windows, TTFB/TTLB percentiles, PQ − classical difference of the TTLB median, the link asked and measured, the emulator, rounds measured and predicted (ns)"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Transfer]
    }
    fn render(&self, set: &ResultSet, _opts: &ReportOptions) -> Result<String> {
        transfers(set)
    }
}

/// The `resident-csv` exporter: [`residents`].
pub struct ResidentCsv;

impl Exporter for ResidentCsv {
    fn name(&self) -> &'static str {
        "resident-csv"
    }
    fn describe(&self) -> &'static str {
        "CSV, one row per resident record and count of idle connections held: factors, terminator, the readings at 0 and at N (heap, RSS, PSS), bytes per connection, connections per GiB"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Resident]
    }
    fn render(&self, set: &ResultSet, _opts: &ReportOptions) -> Result<String> {
        residents(set)
    }
}

/// One row per resident record and N above 0: the reading at 0, the reading at N, and per
/// connection (bytes; heap blocks), connections per GiB and what they are computed from.
pub fn residents(set: &ResultSet) -> Result<String> {
    let all: Vec<crate::ResidentView> = set.records.iter().filter_map(crate::ResidentView::of).collect();
    let recs: Vec<pqtls_core::record::Record> = all.iter().map(|v| v.record.clone()).collect();
    let cols = factor_columns(&recs, true);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = config_header(&cols);
    header.extend(
        [
            "terminator",
            "resumed_connections",
            "held",
            "open_connections",
            "heap_live_bytes_at_0",
            "heap_live_bytes",
            "rss_bytes_at_0",
            "rss_bytes",
            "pss_bytes_at_0",
            "pss_bytes",
            "heap_bytes_per_connection",
            "heap_allocations_per_connection",
            "rss_bytes_per_connection",
            "pss_bytes_per_connection",
            "connections_per_gib",
            "per_gib_from",
        ]
        .map(String::from),
    );
    w.write_record(&header).map_err(err)?;
    let opt = |x: Option<f64>| x.map_or(String::new(), |x| format!("{x:.1}"));
    for v in &all {
        let Some(zero) = v.readings.first() else { continue };
        for (r, p) in v.readings.iter().skip(1).zip(&v.per_connection) {
            let mut row = vec![v.id().to_string(), v.label().to_string()];
            row.extend(cols.iter().map(|f| v.factor(f.name).to_string()));
            row.extend([
                v.terminator.name.clone(),
                v.resumed_connections.to_string(),
                r.connections.to_string(),
                r.open_connections.map_or(String::new(), |o| o.to_string()),
                zero.heap.map_or(String::new(), |h| h.live_bytes.to_string()),
                r.heap.map_or(String::new(), |h| h.live_bytes.to_string()),
                zero.rss_bytes.to_string(),
                r.rss_bytes.to_string(),
                zero.pss_bytes.to_string(),
                r.pss_bytes.to_string(),
                opt(p.heap_bytes),
                opt(p.heap_allocations),
                format!("{:.1}", p.rss_bytes),
                format!("{:.1}", p.pss_bytes),
                opt(p.per_gib()),
                p.source().to_string(),
            ]);
            w.write_record(&row).map_err(err)?;
        }
    }
    finish(w)
}

fn config_header(cols: &[&Factor]) -> Vec<String> {
    let mut h = vec!["id".to_string(), "label".to_string()];
    h.extend(cols.iter().map(|f| f.name.to_string()));
    h
}

fn config_cells(r: &InsituView, cols: &[&Factor]) -> Vec<String> {
    let mut c = vec![r.id().to_string(), r.label().to_string()];
    c.extend(cols.iter().map(|f| r.factor(f.name).to_string()));
    c
}

fn finish(w: csv::Writer<Vec<u8>>) -> Result<String> {
    let bytes = w.into_inner().map_err(|e| Error::Other(format!("writing CSV: {e}")))?;
    String::from_utf8(bytes).map_err(|e| Error::Other(format!("writing CSV: {e}")))
}

fn err(e: csv::Error) -> Error {
    Error::Other(format!("writing CSV: {e}"))
}

/// One row per configuration × side × step (plus a `total` row per side and a `both` side
/// for the handshake total): n, min, mean, stdev, median and its 95 % interval, max, quantiles.
pub fn steps(set: &ResultSet) -> Result<String> {
    let recs = set.insitu();
    let cols = factor_columns(&set.records, true);
    let qk = quantile_keys(&recs);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = config_header(&cols);
    for h in [
        "side",
        "step",
        "n",
        "min_ns",
        "mean_ns",
        "stdev_ns",
        "median_ns",
        "median_ci_low_ns",
        "median_ci_high_ns",
        "max_ns",
    ] {
        header.push(h.into());
    }
    header.extend(qk.iter().map(|k| format!("{k}_ns")));
    w.write_record(&header).map_err(err)?;
    for r in &recs {
        let mut rows: Vec<(&str, &str, &Summary)> = Vec::new();
        for (side, s) in [("client", &r.client), ("server", &r.server)] {
            for (name, sum) in &s.steps {
                rows.push((side, name, sum));
            }
            rows.push((side, "total", &s.total_cpu_ns));
        }
        rows.push(("both", "total", &r.total_cpu_ns));
        for (side, step, s) in rows {
            let mut cells = config_cells(r, &cols);
            cells.push(side.into());
            cells.push(step.into());
            cells.push(s.n.to_string());
            for v in [s.min, s.mean, s.stdev, s.median, s.median_ci[0], s.median_ci[1], s.max] {
                cells.push(format!("{v:.1}"));
            }
            for k in &qk {
                cells.push(s.quantiles.get(k).map_or(String::new(), |v| format!("{v:.1}")));
            }
            w.write_record(&cells).map_err(err)?;
        }
    }
    finish(w)
}

/// One row per configuration: CPU per side (median and quantiles), bytes, loops, and the
/// capacity model's results.
pub fn summary(set: &ResultSet, model: &NetworkModel) -> Result<String> {
    let recs = set.insitu();
    let cols = factor_columns(&set.records, true);
    let qk = quantile_keys(&recs);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = config_header(&cols);
    let ibm = model.convention == crate::capacity::Convention::Ibm;
    for side in ["client", "server", "total"] {
        header.push(format!("{side}_cpu_median_ns"));
        header.extend(qk.iter().map(|k| format!("{side}_cpu_{k}_ns")));
    }
    for h in [
        "bytes_client_to_server",
        "bytes_server_to_client",
        "records_client_to_server",
        "records_server_to_client",
        "unmeasured_records",
        // Under the IBM convention: the TLS bytes it counts, 10 bits each (named so).
        if ibm { "ibm_bytes_client_to_server" } else { "wire_bytes_client_to_server" },
        if ibm { "ibm_bytes_server_to_client" } else { "wire_bytes_server_to_client" },
        "bottleneck",
        "server_sessions_per_core",
        "client_sessions_per_core",
        "server_first_flight_round_trips",
        "client_certificate_flight_round_trips",
        "handshakes_measured",
        "stopped",
        "hrr",
    ] {
        header.push(h.into());
    }
    let prefix = if ibm { "ibm_" } else { "" };
    header.extend(model.bandwidths_gbps.iter().map(|g| format!("{prefix}sessions_per_s_{g}gbps")));
    w.write_record(&header).map_err(err)?;
    for r in &recs {
        let mut cells = config_cells(r, &cols);
        for s in [&r.client.total_cpu_ns, &r.server.total_cpu_ns, &r.total_cpu_ns] {
            cells.push(format!("{:.1}", s.median));
            cells.extend(qk.iter().map(|k| s.quantiles.get(k).map_or(String::new(), |v| format!("{v:.1}"))));
        }
        let c = capacity(*r, model);
        cells.extend([
            r.bytes.client_to_server.to_string(),
            r.bytes.server_to_client.to_string(),
            r.bytes.records_client_to_server.to_string(),
            r.bytes.records_server_to_client.to_string(),
            r.bytes.unmeasured_records.to_string(),
            c.client_to_server_wire_bytes.to_string(),
            c.server_to_client_wire_bytes.to_string(),
            c.bottleneck.name().to_string(),
            format!("{:.1}", c.server_sessions_per_core),
            format!("{:.1}", c.client_sessions_per_core),
            c.server_first_flight_round_trips.to_string(),
            c.client_certificate_flight_round_trips.map_or(String::new(), |x| x.to_string()),
            r.loops.measured.to_string(),
            r.loops.stopped.clone(),
            r.negotiated.hrr.to_string(),
        ]);
        cells.extend(c.links.iter().map(|l| format!("{:.1}", l.sessions_per_s)));
        w.write_record(&cells).map_err(err)?;
    }
    finish(w)
}

/// One row per load record. Factor columns as in the other CSVs; `errors` is the total and
/// `errors_by_kind` `kind=count` pairs joined by `;`; the layer columns (`layer_<name>_p50_ns`,
/// `…_p95_ns`) are there when some record has layers.
pub fn loads(set: &ResultSet) -> Result<String> {
    use crate::analysis::load::{cpu_under_load, is_plain, loads, ratio, LoadView};
    let all = loads(set);
    let load_records: Vec<pqtls_core::record::Record> = all.iter().map(|r| r.record.clone()).collect();
    let cols = factor_columns(&load_records, true);
    let insitu = set.insitu();
    let layer_names: Vec<&str> = pqtls_core::timeline::LAYER_NAMES
        .iter()
        .copied()
        .filter(|n| all.iter().any(|r| r.layers.contains_key(*n)))
        .collect();
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = config_header(&cols);
    for h in [
        "plain_http",
        "terminator",
        "terminator_version",
        "loop",
        "threads_total",
        "connections_total",
        "target_rate_per_s",
        "achieved_rate_per_s",
        "connections_per_s",
        "handshakes_per_s",
        "ratio_to_baseline",
        "baseline_id",
        "duration_ns",
        "requests",
        "handshakes",
        "unfinished",
        "latency_n",
        "latency_mean_ns",
        "latency_p50_ns",
        "latency_p90_ns",
        "latency_p95_ns",
        "latency_p99_ns",
        "latency_p999_ns",
        "latency_max_ns",
        "ttfb_p50_ns",
        "ttfb_p99_ns",
        "client_handshake_cpu_ns",
        "client_handshake_cpu_insitu_ns",
        "server_handshake_cpu_ns",
        "server_handshake_cpu_insitu_ns",
        "insitu_id",
        "client_process_cpu_ns_per_request",
        "server_process_cpu_ns_per_handshake",
        "errors",
        "errors_by_kind",
        "negotiated_group",
        "negotiated_sigalg",
        "stopped",
        "shard",
    ] {
        header.push(h.into());
    }
    for n in &layer_names {
        header.push(format!("layer_{n}_p50_ns"));
        header.push(format!("layer_{n}_p95_ns"));
    }
    w.write_record(&header).map_err(err)?;
    let opt = |x: Option<f64>| x.map_or(String::new(), |v| format!("{v:.1}"));
    for r in &all {
        let r: &LoadView = r;
        let mut cells = vec![r.id().to_string(), r.label().to_string()];
        cells.extend(cols.iter().map(|f| r.factor(f.name).to_string()));
        let q = ratio(r, &all);
        let cpu = cpu_under_load(r, &insitu);
        let mut kinds: Vec<String> = r.errors.iter().map(|e| format!("{}={}", e.kind, e.count)).collect();
        if let Some(s) = &r.server {
            kinds.extend(s.errors.iter().map(|e| format!("server {}={}", e.kind, e.count)));
        }
        let l = &r.latency;
        cells.extend([
            is_plain(r.record).to_string(),
            r.terminator.name.clone(),
            r.terminator.version.clone(),
            r.loop_mode.clone(),
            r.threads.to_string(),
            r.connections.to_string(),
            opt(r.target_rate_per_s),
            format!("{:.1}", r.achieved_rate_per_s),
            format!("{:.1}", r.connections_per_s()),
            format!("{:.1}", r.handshakes_per_s),
            q.as_ref().map_or(String::new(), |q| format!("{:.4}", q.ratio)),
            q.map_or(String::new(), |q| q.baseline_id),
            r.duration_ns.to_string(),
            r.requests.to_string(),
            r.handshakes.to_string(),
            r.unfinished.to_string(),
            l.count.to_string(),
            format!("{:.1}", l.mean_ns),
            l.p50_ns.to_string(),
            l.p90_ns.to_string(),
            l.p95_ns.to_string(),
            l.p99_ns.to_string(),
            l.p999_ns.to_string(),
            l.max_ns.to_string(),
            r.ttfb.p50_ns.to_string(),
            r.ttfb.p99_ns.to_string(),
            format!("{:.1}", cpu.client_load_ns),
            opt(cpu.client_insitu_ns),
            opt(cpu.server_load_ns),
            opt(cpu.server_insitu_ns),
            cpu.insitu_id.unwrap_or_default(),
            format!("{:.1}", r.client_process_cpu_ns_per_request),
            opt(r.server.as_ref().and_then(|s| s.process_cpu_ns_per_handshake)),
            r.error_count().to_string(),
            kinds.join(";"),
            r.negotiated.group.clone(),
            r.negotiated.sigalg.clone(),
            r.stopped.clone(),
            r.shard.map_or(String::new(), |s| format!("{}/{}", s.index, s.count)),
        ]);
        for n in &layer_names {
            match r.layers.get(*n) {
                Some(x) => cells.extend([x.p50_ns.to_string(), x.p95_ns.to_string()]),
                None => cells.extend([String::new(), String::new()]),
            }
        }
        w.write_record(&cells).map_err(err)?;
    }
    finish(w)
}

/// One row per transfer record. Factor columns as in the other CSVs (of the transfer records);
/// empty cells where a value is unknown (no histogram, no rate limit, no check of that kind).
/// `ttlb_diff_*` / `ttfb_diff_*`: the PQ − classical difference of the medians with its ~95 %
/// interval and ratio ([`crate::analysis::transfer::difference`]); `rounds_<layer>_measured` /
/// `_predicted` (the model's time as rounds) / `_round_trips` (the round trips it counts) for
/// tcp, tls, http, total.
pub fn transfers(set: &ResultSet) -> Result<String> {
    use crate::analysis::transfer::{difference, transfers, Metric, ROUND_LAYERS};
    let all = transfers(set);
    let recs: Vec<pqtls_core::record::Record> = all.iter().map(|t| t.record.clone()).collect();
    let cols = factor_columns(&recs, true);
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut header = config_header(&cols);
    header.extend(["route_client_initcwnd", "route_server_initcwnd", "transfers"].map(String::from));
    for m in ["ttfb", "ttlb"] {
        for q in ["p50", "p75", "p95", "p99"] {
            header.push(format!("{m}_{q}_ns"));
        }
    }
    header.push("ttlb_mean_ns".into());
    for m in ["ttlb", "ttfb"] {
        for f in ["ns", "low_ns", "high_ns", "ratio", "ratio_low", "ratio_high"] {
            header.push(format!("{m}_diff_{f}"));
        }
    }
    header.push("classical_id".into());
    for h in [
        "link_accepted",
        "rtt_asked_ns",
        "rtt_measured_median_ns",
        "rtt_measured_p5_ns",
        "rtt_measured_p95_ns",
        "rate_asked_bits_per_s",
        "rate_measured_wire_bits_per_s",
        "rate_measured_goodput_bits_per_s",
        "loss_asked",
        "loss_measured_client_to_server",
        "loss_measured_server_to_client",
        "link_refusal",
        "delay_backend",
        "congestion_control",
        "tcp_rmem",
        "tcp_wmem",
        "emulator",
        "emulator_packets",
        "emulator_late_p50_ns",
        "emulator_late_p99_ns",
        "emulator_late_max_ns",
        "server_flight_bytes",
        "client_flight_bytes",
        "response_bytes",
    ] {
        header.push(h.into());
    }
    for l in ROUND_LAYERS {
        header.push(format!("rounds_{l}_measured"));
        header.push(format!("rounds_{l}_predicted"));
        header.push(format!("rounds_{l}_round_trips"));
    }
    header.extend(["negotiated_group", "negotiated_sigalg", "errors"].map(String::from));
    w.write_record(&header).map_err(err)?;
    let opt_u = |x: Option<u64>| x.map_or(String::new(), |v| v.to_string());
    let f1 = |x: f64| if x.is_finite() { format!("{x:.1}") } else { String::new() };
    let f4 = |x: f64| if x.is_finite() { format!("{x:.4}") } else { String::new() };
    for t in &all {
        let mut cells = vec![t.id().to_string(), t.label().to_string()];
        cells.extend(cols.iter().map(|f| t.factor(f.name).to_string()));
        let (c, s) = t.initcwnd();
        cells.extend([opt_u(c), opt_u(s), t.ttlb.count.to_string()]);
        for p in [&t.ttfb, &t.ttlb] {
            for v in [p.p50_ns, p.p75_ns, p.p95_ns, p.p99_ns] {
                cells.push(if p.count == 0 { String::new() } else { v.to_string() });
            }
        }
        cells.push(if t.load.latency.count == 0 { String::new() } else { f1(t.load.latency.mean_ns) });
        let mut classical = String::new();
        for m in [Metric::Ttlb, Metric::Ttfb] {
            match difference(t, &all, m) {
                Some(d) => {
                    cells.extend([f1(d.delta_ns), f1(d.low_ns), f1(d.high_ns)]);
                    cells.extend([f4(d.ratio), f4(d.ratio_low), f4(d.ratio_high)]);
                    classical = d.baseline_id;
                }
                None => cells.extend(std::iter::repeat_n(String::new(), 6)),
            }
        }
        cells.push(classical);
        let l = &t.link;
        let measured = l.rtt.probes_received > 0;
        let loss =
            |d: &pqtls_core::link::LossDirection| if d.sent == 0 { String::new() } else { format!("{}", d.fraction) };
        let e = &t.emulator;
        let late = |v: u64| if e.packets == 0 { String::new() } else { v.to_string() };
        cells.extend([
            l.accepted.to_string(),
            opt_u(l.asked.rtt_ns),
            if measured { l.rtt.median_ns.to_string() } else { String::new() },
            if measured { l.rtt.p5_ns.to_string() } else { String::new() },
            if measured { l.rtt.p95_ns.to_string() } else { String::new() },
            opt_u(l.asked.bits_per_s),
            l.rate.as_ref().map_or(String::new(), |r| f1(r.wire_bits_per_s)),
            l.rate.as_ref().map_or(String::new(), |r| f1(r.goodput_bits_per_s)),
            format!("{}", l.asked.loss),
            loss(&l.loss.client_to_server),
            loss(&l.loss.server_to_client),
            l.refusal(),
            l.setup.delay_backend.clone(),
            l.setup.congestion_control.clone(),
            l.setup.tcp_rmem.clone(),
            l.setup.tcp_wmem.clone(),
            e.kind.clone(),
            e.packets.to_string(),
            late(e.lateness.p50_ns),
            late(e.lateness.p99_ns),
            late(e.lateness.max_ns),
            t.model.server_flight_bytes.to_string(),
            t.model.client_flight_bytes.to_string(),
            t.model.response_bytes.to_string(),
        ]);
        for layer in ROUND_LAYERS {
            match t.rounds_of(layer) {
                Some(r) => cells.extend([
                    format!("{:.3}", r.measured),
                    format!("{:.3}", r.expected()),
                    r.predicted.to_string(),
                ]),
                None => cells.extend([String::new(), String::new(), String::new()]),
            }
        }
        cells.extend([t.load.negotiated.group.clone(), t.load.negotiated.sigalg.clone(), t.error_count().to_string()]);
        w.write_record(&cells).map_err(err)?;
    }
    finish(w)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use pqtls_core::record::Record;
    use pqtls_core::scenario::Scenario;

    pub(crate) fn record(given: &[(&str, &str)]) -> Record {
        pqtls_testkit::synthetic::measure(&Scenario::new(given.iter().copied()).unwrap(), 100).record
    }

    /// Two OpenSSL configurations and the first one on rustls.
    pub(crate) fn sample_set() -> ResultSet {
        ResultSet::from_records(vec![
            record(&[("group", "x25519"), ("chain", "p256:p256")]),
            record(&[("group", "X25519MLKEM768"), ("chain", "mldsa65:mldsa65")]),
            record(&[("stack", "rustls"), ("group", "x25519"), ("chain", "p256:p256")]),
        ])
    }

    #[test]
    fn steps_csv_has_one_row_per_config_side_step() {
        let set = sample_set();
        let text = steps(&set).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let h = rd.headers().unwrap().clone();
        assert!(h.iter().any(|c| c == "p99_ns") && h.iter().any(|c| c == "median_ci_low_ns"));
        let rows: Vec<csv::StringRecord> = rd.records().map(|r| r.unwrap()).collect();
        let recs = set.insitu();
        let r0 = &recs[0];
        let expected: usize = recs.iter().map(|r| r.client.steps.len() + r.server.steps.len() + 3).sum();
        assert_eq!(rows.len(), expected);
        let side = h.iter().position(|c| c == "side").unwrap();
        let step = h.iter().position(|c| c == "step").unwrap();
        let med = h.iter().position(|c| c == "median_ns").unwrap();
        let sign = rows
            .iter()
            .find(|r| &r[0] == r0.id() && &r[side] == "server" && &r[step] == "write_certificate_verify")
            .unwrap();
        assert_eq!(sign[med], format!("{:.1}", r0.server.steps["write_certificate_verify"].median));
    }

    #[test]
    fn summary_csv_has_capacity_columns() {
        let set = sample_set();
        let text = summary(&set, &NetworkModel::default()).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let h = rd.headers().unwrap().clone();
        assert!(h.iter().any(|c| c == "sessions_per_s_10gbps"), "{h:?}");
        assert_eq!(rd.records().count(), 3);
    }

    #[test]
    fn incomplete_message_sizes_are_told() {
        let mut set = sample_set();
        set.records[2].insitu_mut().unwrap().bytes.unmeasured_records = 2;
        let text = summary(&set, &NetworkModel::default()).unwrap();
        let mut rd = csv::Reader::from_reader(text.as_bytes());
        let col = rd.headers().unwrap().iter().position(|h| h == "unmeasured_records").unwrap();
        let v: Vec<String> = rd.records().map(|r| r.unwrap()[col].to_string()).collect();
        assert_eq!(v, ["0", "0", "2"]);
        let md = crate::markdown::render(&set, &ReportOptions::default()).unwrap();
        assert!(md.contains("> x25519 p256:p256 on rustls: 2 handshake record(s) could not be decrypted"), "{md}");
    }

    #[test]
    fn configuration_columns_come_from_the_factor_table() {
        let set = sample_set();
        let text = summary(&set, &NetworkModel::default()).unwrap();
        let header = text.lines().next().unwrap();
        // Required factors and the ones away from their default; not the ones at it.
        assert!(header.starts_with("id,label,stack,group,chain,client_cpu_median_ns"), "{header}");
        let only_openssl = ResultSet::from_records(set.records[..2].to_vec());
        let text = steps(&only_openssl).unwrap();
        assert!(text.starts_with("id,label,group,chain,side,step"), "{}", text.lines().next().unwrap());
    }
}
