//! The assessment's tables (the numbers come from [`crate::analysis::assessment`]): the answer
//! per `to` and stack, and the sentences that lead the page.

use super::Table;
use crate::analysis::assessment::{Answer, Assessment, EndpointRefusal, EndpointRow, Pair, Source};
use pqtls_core::units::format_bytes;

/// `from → to (+x %)` with `digits` decimals.
fn change(p: Option<Pair>, digits: usize) -> String {
    match p {
        None => "–".into(),
        Some(p) => {
            let pct = p.change().map_or(String::new(), |c| format!(" ({:+.0} %)", c * 100.0));
            format!("{:.digits$} → {:.digits$}{pct}", p.from, p.to)
        }
    }
}

fn timed(p: Option<(Pair, Source)>) -> String {
    match p {
        None => "–".into(),
        Some((pair, Source::Measured)) => change(Some(pair), 1),
        Some((pair, Source::Predicted)) => format!("{} predicted", change(Some(pair), 1)),
    }
}

/// One row per `to` and stack: each figure as `from → to (change)`.
pub fn answers(a: &Assessment, answers: &[Answer]) -> Table {
    let d = &a.deployment;
    let link = link(a);
    let head = vec![
        "to".to_string(),
        "stack".into(),
        "client CPU µs/handshake".into(),
        "server CPU µs/handshake".into(),
        "bytes client→server".into(),
        "bytes server→client".into(),
        format!("round trips to the last byte (initcwnd {})", d.initcwnd),
        "initcwnd that removes the extra round trips".into(),
        "connections/s per core (pqtls serve)".into(),
        "connections/s (nginx)".into(),
        "TLS layer p50 µs at a moderate rate".into(),
        format!("TTFB p50 ms ({link})"),
        format!("TTLB p50 ms ({link})"),
    ];
    let rows = answers
        .iter()
        .map(|x| {
            let extra = x.round_trips.is_some_and(|r| r.to > r.from);
            vec![
                x.to.clone(),
                x.stack.clone(),
                change(x.client_cpu_us, 0),
                change(x.server_cpu_us, 0),
                change(x.client_to_server_bytes, 0),
                change(x.server_to_client_bytes, 0),
                change(x.round_trips, 0),
                match (extra, x.initcwnd_removing_extra) {
                    (false, _) => "no extra round trip".into(),
                    (true, Some(iw)) => iw.to_string(),
                    (true, None) => "none up to 1000".into(),
                },
                change(x.serve_connections_per_s, 0),
                change(x.nginx_connections_per_s, 0),
                change(x.tls_layer_p50_us, 0),
                timed(x.ttfb_ms),
                timed(x.ttlb_ms),
            ]
        })
        .collect();
    (head, rows)
}

/// Your endpoint (`--url`): one row per configuration and stack, what the client measured
/// against it (a new connection per request), or why nothing (refused, fell back to another group).
pub fn endpoint(rows: &[EndpointRow]) -> Table {
    let head = [
        "configuration",
        "stack",
        "negotiated",
        "client CPU µs/handshake (verification included)",
        "verification µs/handshake",
        "bytes client→server",
        "bytes server→client",
        "connections/s",
    ]
    .map(String::from)
    .to_vec();
    let bytes = |b: Option<u64>| b.map_or("–".to_string(), |b| b.to_string());
    let rows = rows
        .iter()
        .map(|r| {
            let mut row = vec![r.config.clone(), r.stack.clone()];
            match &r.outcome {
                Ok(f) => row.extend([
                    format!("{} / {}", f.negotiated_group, f.negotiated_sigalg),
                    format!("{:.0}", f.client_cpu_us),
                    f.verify_cpu_us.map_or("–".to_string(), |v| format!("{v:.0}")),
                    bytes(f.client_to_server_bytes),
                    bytes(f.server_to_client_bytes),
                    format!("{:.1}", f.connections_per_s),
                ]),
                Err(why) => {
                    let text = match why {
                        EndpointRefusal::FellBack(e) => format!("fell back to another group: {e}"),
                        EndpointRefusal::Refused(e) => format!("refused: {e}"),
                        EndpointRefusal::NotMeasured => "not measured (the endpoint part did not run)".into(),
                    };
                    row.push(text);
                    row.extend(std::iter::repeat_n("–".to_string(), 5));
                }
            }
            row
        })
        .collect();
    (head, rows)
}

/// The sentence above the endpoint's table: which server, what was trusted, what does not apply.
pub fn endpoint_note(a: &Assessment) -> Option<String> {
    let e = a.endpoint.as_ref()?;
    Some(format!(
        "Your endpoint {}: the client side of each configuration's key exchange against it, closed loop, a new \
         connection per request. The chain is whatever your server sends: the leaf and root of --from/--to do not \
         apply to it. The client trusted {}.",
        e.url, e.trust
    ))
}

/// The deployment's link as a phrase: `50 ms RTT, 100 Mbit/s, 50KiB responses`.
pub fn link(a: &Assessment) -> String {
    let d = &a.deployment;
    let rate = d.bits_per_s.map_or("no rate limit".to_string(), |b| format!("{} Mbit/s", b as f64 / 1e6));
    format!("{} ms RTT, {rate}, {} responses", d.rtt_ns as f64 / 1e6, format_bytes(d.response_bytes))
}

/// The first screen's sentences: per answer, what moving costs.
pub fn headline(a: &Assessment, answers: &[Answer]) -> Vec<String> {
    let pct = |p: Option<Pair>| p.and_then(|p| p.change()).map(|c| format!("{:+.0} %", c * 100.0));
    let mut out: Vec<String> = answers
        .iter()
        .map(|x| {
            let mut parts = Vec::new();
            if let (Some(s), Some(c)) = (pct(x.server_cpu_us), pct(x.client_cpu_us)) {
                parts.push(format!("{s} server CPU and {c} client CPU per handshake"));
            }
            if let (Some(u), Some(d)) = (x.client_to_server_bytes, x.server_to_client_bytes) {
                parts.push(format!(
                    "{:+} bytes to the server and {:+} to the client",
                    (u.to - u.from) as i64,
                    (d.to - d.from) as i64
                ));
            }
            if let Some(r) = x.round_trips {
                let extra = (r.to - r.from) as i64;
                parts.push(match (extra > 0, x.initcwnd_removing_extra) {
                    (true, Some(iw)) => format!("{extra} more round trip(s) (gone with initcwnd {iw})"),
                    (true, None) => format!("{extra} more round trip(s)"),
                    _ => "no extra round trip".into(),
                });
            }
            if let Some((p, source)) = x.ttlb_ms {
                parts.push(format!(
                    "TTLB {:+.1} ms{}",
                    p.to - p.from,
                    if source == Source::Predicted { " (predicted)" } else { "" }
                ));
            }
            if let Some(p) = pct(x.serve_connections_per_s) {
                parts.push(format!("{p} connections/s through pqtls serve"));
            }
            format!(
                "{} on {}: {}.",
                x.to,
                x.stack,
                if parts.is_empty() { "not measured".into() } else { parts.join(", ") }
            )
        })
        .collect();
    out.extend(a.cheapest(answers));
    out
}
