//! Terminal tables.

use comfy_table::presets::UTF8_FULL_CONDENSED;
use comfy_table::{CellAlignment, ContentArrangement, Table};

pub fn new(header: &[&str]) -> Table {
    let mut t = Table::new();
    t.load_preset(UTF8_FULL_CONDENSED)
        .set_content_arrangement(ContentArrangement::Disabled)
        .set_header(header.to_vec());
    t
}

/// Right-aligns every column from `from` on (numbers).
pub fn numeric_from(t: &mut Table, from: usize) {
    let n = t.column_count();
    for i in from..n {
        if let Some(c) = t.column_mut(i) {
            c.set_cell_alignment(CellAlignment::Right);
        }
    }
}

/// ns → µs with a sensible number of digits.
pub fn us(ns: f64) -> String {
    let us = ns / 1000.0;
    if us >= 100.0 {
        format!("{us:.0}")
    } else if us >= 10.0 {
        format!("{us:.1}")
    } else {
        format!("{us:.2}")
    }
}

/// One configuration's result as text: negotiated values, the per-step table with
/// quantiles, and the bytes.
pub fn record(rec: &pqtls_core::record::Record) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let Some(r) = rec.insitu() else {
        return format!("\n== {} · {} == ({} record)\n", rec.factor("stack"), rec.label, rec.kind().name());
    };
    let n = &r.negotiated;
    let _ = writeln!(
        s,
        "\n== {} · {} ==\nnegotiated: group {} · signature {} · cipher {}{}{} · {} handshakes ({}, {} mode), {:.0} handshakes/s",
        rec.factor("stack"),
        rec.label,
        n.group,
        if n.sigalg.is_empty() { "-" } else { &n.sigalg },
        n.cipher,
        if n.hrr { " · HelloRetryRequest" } else { "" },
        if n.resumed { " · resumed" } else { "" },
        r.loops.measured,
        r.loops.stopped,
        r.loops.mode,
        r.rate.handshakes_per_s,
    );
    let qkeys: Vec<String> = r.client.total_cpu_ns.quantiles.keys().cloned().collect();
    let mut header: Vec<String> = vec!["side".into(), "step".into()];
    header.extend(qkeys.iter().map(|k| format!("{k} µs")));
    header.extend(["mean", "stdev", "min", "max", "median 95% CI"].iter().map(|h| h.to_string()));
    let with_delta = r.baseline.is_some();
    if with_delta {
        header.push("Δp50 vs baseline µs".into());
    }
    let mut t = new(&header.iter().map(|h| h.as_str()).collect::<Vec<_>>());
    let row = |side: &str, step: &str, sum: &pqtls_core::stats::Summary, delta: Option<&pqtls_core::stats::Delta>| {
        let mut v = vec![side.to_string(), step.to_string()];
        v.extend(qkeys.iter().map(|k| sum.quantiles.get(k).map(|x| us(*x)).unwrap_or_default()));
        v.push(us(sum.mean));
        v.push(us(sum.stdev));
        v.push(us(sum.min));
        v.push(us(sum.max));
        v.push(format!("{}–{}", us(sum.median_ci[0]), us(sum.median_ci[1])));
        if with_delta {
            v.push(delta.map(|d| format!("{} ± {}", signed_us(d.delta), us(d.half_width))).unwrap_or_default());
        }
        v
    };
    for (side, summary) in [("client", &r.client), ("server", &r.server)] {
        let deltas = r.baseline.as_ref().map(|b| if side == "client" { &b.client } else { &b.server });
        for (step, sum) in &summary.steps {
            t.add_row(row(side, step, sum, deltas.and_then(|d| d.get(step))));
        }
        let total_delta = r.baseline.as_ref().map(|b| if side == "client" { &b.client_total } else { &b.server_total });
        t.add_row(row(side, "TOTAL", &summary.total_cpu_ns, total_delta));
    }
    t.add_row(row("both", "TOTAL", &r.total_cpu_ns, r.baseline.as_ref().map(|b| &b.total)));
    numeric_from(&mut t, 2);
    let _ = writeln!(s, "CPU time per step (thread CPU clock)\n{t}");
    if let Some(noise) = r.noise.as_ref().filter(|n| n.disturbed_client + n.disturbed_server > 0) {
        let _ = writeln!(
            s,
            "descheduled inside the stack: {} client and {} server sides of {}; {} and {} of them left out of the \
             step statistics (gap not placeable in one step; totals include them; docs/attribution.md)",
            noise.disturbed_client,
            noise.disturbed_server,
            r.loops.measured,
            noise.excluded_client,
            noise.excluded_server
        );
    }
    for w in r.warnings() {
        let _ = writeln!(s, "Warning: {w}");
    }
    let b = &r.bytes;
    let msgs: Vec<String> = b.messages.iter().map(|(k, v)| format!("{k} {v}")).collect();
    let _ = writeln!(
        s,
        "bytes: client→server {} B in {} records · server→client {} B in {} records\nmessages (B, with 4-byte header): {}",
        b.client_to_server,
        b.records_client_to_server,
        b.server_to_client,
        b.records_server_to_client,
        msgs.join(" · ")
    );
    if let Some(base) = &r.baseline {
        let _ = writeln!(
            s,
            "baseline: {} · total Δ {} µs ({:+.1}%) ± {} µs (10 %-trimmed means)",
            base.label,
            signed_us(base.total.delta),
            base.total.relative * 100.0,
            us(base.total.half_width)
        );
    }
    s
}

/// A signed difference in µs: `+12.3`, `−4.56`.
pub fn signed_us(ns: f64) -> String {
    if ns < 0.0 {
        format!("−{}", us(-ns))
    } else {
        format!("+{}", us(ns))
    }
}
