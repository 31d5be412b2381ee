//! The assessment's tables (the numbers come from [`crate::analysis::assessment`]): the answer
//! per `to` and stack, and the sentences that lead the page.

use super::Table;
use crate::analysis::assessment::{
    Answer, Assessment, EndpointRefusal, EndpointRow, Estimate, Metric, Pair, Source, SplitRow,
};
use crate::analysis::auth_rules::{self as rules, steps_crossed, STEPS};
use pqtls_core::units::format_bytes;

/// `from → to (+x % ± y)` with `digits` decimals: the change with the half-width of its ~95 %
/// interval in percentage points when the records give one.
fn change(p: Option<Pair>, digits: usize) -> String {
    match p {
        None => "–".into(),
        Some(p) => {
            let pct = match (p.change(), p.change_half_width()) {
                (Some(c), Some(h)) => format!("\n{}{} % ± {}", plus(c), whole(c * 100.0), points(h * 100.0)),
                (Some(c), None) => format!("\n{}{} %", plus(c), whole(c * 100.0)),
                (None, _) => String::new(),
            };
            format!("{} → {}{pct}", grouped(p.from, digits), grouped(p.to, digits))
        }
    }
}

/// `+` before a positive change that rounds to a whole percent.
fn plus(c: f64) -> &'static str {
    if (c * 100.0).round() > 0.0 {
        "+"
    } else {
        ""
    }
}

/// A whole number without a sign on zero (`0`, not `-0`).
fn whole(v: f64) -> String {
    let r = v.round();
    if r == 0.0 {
        "0".into()
    } else if r < 0.0 {
        format!("−{:.0}", -r)
    } else {
        format!("{r:.0}")
    }
}

/// A half-width in percentage points: whole points, `<1` below one.
fn points(h: f64) -> String {
    if h < 1.0 {
        "<1".into()
    } else {
        format!("{h:.0}")
    }
}

/// A number with `digits` decimals and narrow no-break spaces between thousands (`9 454`).
fn grouped(v: f64, digits: usize) -> String {
    let text = format!("{:.digits$}", v.abs());
    let (int, frac) = text.split_once('.').map_or((text.as_str(), None), |(i, f)| (i, Some(f)));
    let mut out = super::thousands(int, '\u{202f}');
    if let Some(f) = frac {
        out.push('.');
        out += f;
    }
    if v < 0.0 && out.chars().any(|c| c.is_ascii_digit() && c != '0') {
        out.insert(0, '−');
    }
    out
}

/// A signed change with its interval: `+312 ± 8`, `−47.4`.
fn signed(e: Estimate, digits: usize) -> String {
    let sign = if e.value >= 0.0 { "+" } else { "" };
    let v = format!("{sign}{}", grouped(e.value, digits));
    match e.half_width {
        Some(h) => format!("{v} ± {}", grouped(h, digits)),
        None => v,
    }
}

fn timed(p: Option<(Pair, Source)>) -> String {
    match p {
        None => "–".into(),
        Some((pair, Source::Measured)) => change(Some(pair), 1),
        Some((pair, Source::Predicted)) => format!("{}, predicted", change(Some(pair), 1)),
    }
}

/// A stack as a reader names it (`OpenSSL`, `rustls`); its version is in the question line.
pub fn stack_name(stack: &str) -> String {
    pqtls_core::catalogue::Stack::ALL
        .iter()
        .find(|s| s.name() == stack)
        .map_or_else(|| stack.to_string(), |s| s.display_name().to_string())
}

/// A column's name: the stack, and the target when there are several.
fn column(a: &Assessment, x: &Answer) -> String {
    if a.to.len() > 1 {
        format!("{} · {}", x.to, stack_name(&x.stack))
    } else {
        stack_name(&x.stack)
    }
}

/// The answer: one row per figure, one column per stack (and `to`), each figure as `from → to
/// (change ± interval)`; predicted figures say so. Rows no answer has a figure for are left
/// out.
pub fn answers(a: &Assessment, answers: &[Answer]) -> Table {
    let d = &a.deployment;
    let mut head = vec![format!("{} → …", a.from.spec)];
    head.extend(answers.iter().map(|x| column(a, x)));
    type Cell = dyn Fn(&Answer) -> String;
    let extra = |x: &Answer| x.round_trips.is_some_and(|r| r.to > r.from);
    let rows: Vec<(String, Box<Cell>)> = vec![
        ("server CPU per handshake, µs".into(), Box::new(|x: &Answer| change(x.server_cpu_us, 0))),
        ("client CPU per handshake, µs".into(), Box::new(|x: &Answer| change(x.client_cpu_us, 0))),
        ("handshake bytes client → server".into(), Box::new(|x: &Answer| change(x.client_to_server_bytes, 0))),
        ("handshake bytes server → client".into(), Box::new(|x: &Answer| change(x.server_to_client_bytes, 0))),
        (
            format!("round trips to the last byte at initcwnd {} (the round-trip model)", d.initcwnd),
            Box::new(|x: &Answer| change(x.round_trips, 0)),
        ),
        (
            "initcwnd that removes the extra round trips".into(),
            Box::new(move |x: &Answer| match (extra(x), x.initcwnd_removing_extra) {
                (false, _) => "–".into(),
                (true, Some(iw)) => iw.to_string(),
                (true, None) => "none up to 1000".into(),
            }),
        ),
        ("TTFB p50, ms".into(), Box::new(|x: &Answer| timed(x.ttfb_ms))),
        ("TTLB p50, ms".into(), Box::new(|x: &Answer| timed(x.ttlb_ms))),
        ("connections/s per core (pqtls serve)".into(), Box::new(|x: &Answer| change(x.serve_connections_per_s, 0))),
        ("connections/s (nginx)".into(), Box::new(|x: &Answer| change(x.nginx_connections_per_s, 0))),
        ("TLS layer p50 at 50 connections/s, µs".into(), Box::new(|x: &Answer| change(x.tls_layer_p50_us, 0))),
    ];
    let rows = rows
        .into_iter()
        .map(|(name, cell)| {
            let mut row = vec![name];
            row.extend(answers.iter().map(|x| cell(x)));
            row
        })
        .filter(|row| row[1..].iter().any(|c| c != "–"))
        .collect();
    (head, rows)
}

/// Answers (stacks, targets) the split table shows with a column per part; more share one
/// column each.
const SPLIT_COLUMNS_WIDE: usize = 2;

/// The split of each answer that has one: one row per metric, three columns per stack (and
/// `to`): the key exchange's change, the certificates', the rest — each with its interval and
/// its share of the whole change; beyond [`SPLIT_COLUMNS_WIDE`] answers, one column each with
/// the three parts and their shares side by side.
pub fn split(a: &Assessment, answers: &[Answer]) -> Option<Table> {
    let split: Vec<(&Answer, &Vec<SplitRow>)> =
        answers.iter().filter_map(|x| Some((x, x.split.as_ref()?.as_ref().ok()?))).collect();
    if split.is_empty() {
        return None;
    }
    // Up to two columns (stacks, targets), each part its own column; beyond, one column each with
    // the three parts side by side in its cells, so that four stacks fit the first screen.
    let compact = split.len() > SPLIT_COLUMNS_WIDE;
    let mut head = vec!["change".to_string()];
    for (x, _) in &split {
        let c = column(a, x);
        if compact {
            head.push(format!("{c}\nkey exchange, certificates, rest"));
        } else {
            head.extend([format!("key exchange\n{c}"), format!("certificates\n{c}"), format!("rest\n{c}")]);
        }
    }
    let digits = |m: Metric| if m == Metric::Ttlb { 1 } else { 0 };
    let share = |part: Estimate, total: Estimate| {
        (total.value.abs() > f64::EPSILON).then(|| format!("\n{} %", whole(part.value / total.value * 100.0)))
    };
    let pct = |part: Estimate, total: Estimate| {
        if total.value.abs() > f64::EPSILON {
            whole(part.value / total.value * 100.0)
        } else {
            "–".to_string()
        }
    };
    let rows = Metric::ALL
        .iter()
        .enumerate()
        .map(|(i, m)| {
            let how = if *m == Metric::RoundTrips { " (model)" } else { "" };
            let mut row = vec![format!("{}{how}", m.name())];
            for (_, rows) in &split {
                let r = rows[i];
                // A figure of the model where others are measured (TTLB on a stack the lab did
                // not transfer with) says so in its cells.
                let mark = if r.predicted && *m != Metric::RoundTrips { "\npredicted" } else { "" };
                let parts = [r.key_exchange, r.certificates, r.rest];
                if compact {
                    let lines: Vec<String> =
                        parts.iter().map(|p| format!("{} ({} %)", signed(*p, digits(*m)), pct(*p, r.total))).collect();
                    row.push(format!("{}{mark}", lines.join("\n")));
                    continue;
                }
                for part in parts {
                    row.push(format!("{}{}{mark}", signed(part, digits(*m)), share(part, r.total).unwrap_or_default()));
                }
            }
            row
        })
        .collect();
    Some((head, rows))
}

/// The split's rows for a chart: per answer with a split and per metric whose change is not 0,
/// the label and each part's share of the change (%).
pub fn split_shares(a: &Assessment, answers: &[Answer]) -> Vec<(String, [f64; 3])> {
    let mut out = Vec::new();
    for x in answers {
        let Some(Ok(rows)) = &x.split else { continue };
        for r in rows {
            // A change within its interval, or under a tenth of from's value, has no shares worth
            // drawing (they run to ±200 % of nothing); the table shows it.
            let small = r.from.abs() > f64::EPSILON && r.total.value.abs() < 0.1 * r.from.abs();
            if r.total.value.abs() <= f64::EPSILON
                || small
                || r.total.half_width.is_some_and(|h| h >= r.total.value.abs())
            {
                continue;
            }
            let pct = |e: Estimate| e.value / r.total.value * 100.0;
            let label = format!("{} · {}", r.metric.name(), column(a, x));
            out.push((label, [pct(r.key_exchange), pct(r.certificates), pct(r.rest)]));
        }
    }
    out
}

/// Why answers have no split, once each (from and to share a part; not measured yet).
pub fn no_split(answers: &[Answer]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for x in answers {
        if let Some(Err(why)) = &x.split {
            let line = format!("No split of {} into key exchange and certificates: {why}.", x.to);
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
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

/// How much `to` spends against `from`: `5.7× the CPU` from 1.5×, else `10 % more`/`less`.
fn factor(p: Pair) -> Option<String> {
    let c = p.change()?;
    Some(if c >= 0.5 {
        format!("{:.1}×", p.to / p.from)
    } else {
        format!("{} % {}", whole(c.abs() * 100.0), if c < 0.0 { "less" } else { "more" })
    })
}

/// The first screen's sentences, two to four per `to`: the CPU on each stack, the bytes and what
/// they do over the user's link, the split between key exchange and certificates, the
/// connections per second. Then the cheapest `to` when there are several.
pub fn headline(a: &Assessment, answers: &[Answer]) -> Vec<String> {
    let mut out = Vec::new();
    for to in &a.to {
        let mine: Vec<&Answer> = answers.iter().filter(|x| x.to == to.spec).collect();
        let Some(first) = mine.first() else {
            out.push(format!("{}: not measured yet (the same command resumes the assessment).", to.spec));
            continue;
        };
        let lead = if a.to.len() > 1 { format!("{}: ", to.spec) } else { String::new() };
        let cpu: Vec<String> = mine
            .iter()
            .filter_map(|x| {
                let (s, c) = (x.server_cpu_us?, x.client_cpu_us?);
                Some(format!(
                    "on {} the server spends {} the CPU per handshake ({} → {} µs) and the client {} ({} → {} µs)",
                    stack_name(&x.stack),
                    factor(s)?,
                    grouped(s.from, 0),
                    grouped(s.to, 0),
                    factor(c)?,
                    grouped(c.from, 0),
                    grouped(c.to, 0)
                ))
            })
            .collect();
        if !cpu.is_empty() {
            out.push(capitalised(&format!("{lead}{}.", cpu.join("; "))));
        }
        if let (Some(up), Some(down)) = (first.client_to_server_bytes, first.server_to_client_bytes) {
            let mut s = format!(
                "Each handshake carries {} more bytes to the client and {} more to the server",
                grouped(down.to - down.from, 0),
                grouped(up.to - up.from, 0)
            );
            if let Some(r) = first.round_trips {
                let extra = (r.to - r.from) as i64;
                s += &match (extra > 0, first.initcwnd_removing_extra) {
                    (true, Some(iw)) => format!(
                        ": {extra} more round trip(s) at initcwnd {} (none from initcwnd {iw})",
                        a.deployment.initcwnd
                    ),
                    (true, None) => format!(": {extra} more round trip(s)"),
                    // A larger handshake flight is acknowledged segment by segment: slow start grows
                    // the congestion window, and the response needs fewer rounds.
                    _ if extra < 0 => format!(
                        ": {} round trip(s) fewer — the larger handshake grows TCP's congestion window (slow start) \
                         before the response",
                        -extra
                    ),
                    _ => ": no extra round trip".into(),
                };
            }
            if let Some((p, source)) = first.ttlb_ms {
                s += &format!(
                    ", and TTLB {}{} ms over your link ({})",
                    if p.to >= p.from { "+" } else { "" },
                    grouped(p.to - p.from, 1),
                    if source == Source::Predicted { "predicted" } else { "measured" }
                );
            }
            out.push(s + ".");
        }
        match mine.iter().find_map(|x| Some((x, x.split.as_ref()?.as_ref().ok()?))) {
            Some((x, rows)) => {
                let of = |m: Metric| rows.iter().find(|r| r.metric == m).copied();
                let share = |r: SplitRow| {
                    (r.total.value.abs() > f64::EPSILON).then(|| {
                        (r.certificates.value / r.total.value * 100.0, r.key_exchange.value / r.total.value * 100.0)
                    })
                };
                let mut parts = Vec::new();
                if let Some((c, k)) = of(Metric::ServerCpu).and_then(share) {
                    parts.push(format!(
                        "of the server's extra CPU the certificates make {c:.0} % and the key exchange {k:.0} %"
                    ));
                }
                if let Some((c, k)) = of(Metric::ServerToClientBytes).and_then(share) {
                    parts.push(format!(
                        "of the extra bytes to the client the certificates {c:.0} % and the key exchange {k:.0} %"
                    ));
                }
                if !parts.is_empty() {
                    out.push(capitalised(&format!(
                        "{} (on {}; the split below).",
                        parts.join("; "),
                        stack_name(&x.stack)
                    )));
                }
            }
            None => {
                if let Some(Some(Err(why))) = mine.first().map(|x| x.split.as_ref()) {
                    out.push(format!("No split into key exchange and certificates: {why}."));
                }
            }
        }
        let rates: Vec<String> = mine
            .iter()
            .filter_map(|x| {
                let c = x.serve_connections_per_s?.change()?;
                Some(format!(
                    "{}{} % on {}",
                    if c < 0.0 { "−" } else { "+" },
                    whole(c.abs() * 100.0),
                    stack_name(&x.stack)
                ))
            })
            .collect();
        if !rates.is_empty() {
            out.push(format!("New connections per second per core through pqtls serve: {}.", rates.join(", ")));
        }
    }
    out.extend(a.cheapest(answers));
    out
}

/// Whether a chain spec (`leaf:root…`) holds a post-quantum signature algorithm.
fn post_quantum_chain(chain: &str) -> bool {
    ["mldsa", "slhdsa", "falcon"].iter().any(|a| chain.to_ascii_lowercase().contains(a))
}

/// "What would help": the rules of thumb docs/auth-bytes.md measured ([`rules`]), each cited
/// only where it applies to the configurations compared, with its figure and its section —
///
/// - the server's authentication bytes grow across a measured step (TCP at initcwnd 10, 16,
///   32; QUIC on a first contact, with a token): that step, and the initial windows whose first
///   flight still carries them;
/// - the target's chain is post-quantum and not compressed: what certificate compression
///   saves of such a chain (little, and a round trip only at the edge of a step);
/// - the target's handshakes took a HelloRetryRequest (its client's first key shares lack the
///   group the server picks): the round trip a mispredicted key share costs.
pub fn what_would_help(a: &Assessment, answers: &[Answer]) -> Vec<String> {
    let mut out = Vec::new();
    let rtt_ms = a.deployment.rtt_ns as f64 / 1e6;
    for to in &a.to {
        let mine: Vec<&Answer> = answers.iter().filter(|x| x.to == to.spec).collect();
        let lead = if a.to.len() > 1 { format!("{}: ", to.spec) } else { String::new() };
        let auth = mine.iter().find_map(|x| x.auth_bytes);
        if let Some(p) = auth {
            let crossed = steps_crossed(p.from as u64, p.to as u64);
            if !crossed.is_empty() {
                let steps: Vec<String> = crossed
                    .iter()
                    .map(|s| format!("{} above {} bytes", s.series, grouped(s.auth_bytes_before as f64, 0)))
                    .collect();
                let fits = STEPS
                    .iter()
                    .filter(|s| s.initcwnd.is_some() && s.auth_bytes_before >= p.to as u64)
                    .map(|s| s.series)
                    .next();
                out.push(format!(
                    "{lead}The server's authentication bytes (Certificate + CertificateVerify) grow from {} to {} \
                     bytes, past a step where one more round trip was measured: {}. {} ({}, §2: rustls, \
                     X25519MLKEM768, 50 ms RTT; each step within one segment or datagram of the round-trip model.)",
                    grouped(p.from, 0),
                    grouped(p.to, 0),
                    steps.join("; "),
                    match fits {
                        Some(series) => format!("{series} still sends them in its first flight."),
                        None =>
                            "No initial window measured over TCP (10, 16, 32 segments) sends them in its first flight."
                                .into(),
                    },
                    rules::SOURCE
                ));
            }
        }
        if post_quantum_chain(&to.value("chain"))
            && matches!(to.value("cert_compression").as_str(), "" | "none")
            && auth.is_some_and(|p| p.to > p.from)
        {
            let (low, high) = rules::COMPRESSION_PQ_SAVED_PCT;
            let (cpu_low, cpu_high) = rules::COMPRESSION_CLIENT_CPU_US;
            out.push(format!(
                "{lead}Certificate compression (RFC 8879, cert_compression) would barely shrink the target's chain: \
                 it saves {:.1} % of an ML-DSA-65 chain ({} of {} bytes; {low}–{high} % of the ML-DSA, Falcon and \
                 SLH-DSA chains measured — their keys and signatures are random bytes) and no round trip unless \
                 the flight sits within those bytes of a step (measured once: {} over QUIC), for \
                 {cpu_low}–{cpu_high} µs of client CPU ({}, §1).",
                rules::COMPRESSION_MLDSA65_SAVED_BYTES as f64 / rules::COMPRESSION_MLDSA65_CERTIFICATE_BYTES as f64
                    * 100.0,
                rules::COMPRESSION_MLDSA65_SAVED_BYTES,
                grouped(rules::COMPRESSION_MLDSA65_CERTIFICATE_BYTES as f64, 0),
                rules::COMPRESSION_ROUND_TRIP_SAVED,
                rules::SOURCE
            ));
        }
        if mine.iter().any(|x| x.hello_retry.is_some_and(|(_, to)| to)) {
            let (low, high) = rules::HRR_MEASURED_MS_AT_50_MS;
            out.push(format!(
                "{lead}The target's handshakes take a HelloRetryRequest: the client's first key shares lack the group \
                 the server picks. A mispredicted key share costs {} round trip ({} ms on your link; measured \
                 +{low:.0} to +{high:.0} ms at 50 ms RTT over TCP) and ~{} bytes more from the client ({}, §3); a \
                 client that sends the target's group in its first ClientHello (key_shares) does not pay it.",
                rules::HRR_EXTRA_ROUND_TRIPS,
                grouped(rtt_ms * rules::HRR_EXTRA_ROUND_TRIPS as f64, 0),
                rules::HRR_EXTRA_CLIENT_BYTES,
                rules::SOURCE
            ));
        }
    }
    out
}

fn capitalised(s: &str) -> String {
    let mut c = s.chars();
    c.next().map_or(String::new(), |f| f.to_uppercase().collect::<String>() + c.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::assessment::{Config, Deployment, Split};
    use crate::ResultSet;
    use pqtls_core::scenario::Scenario;

    fn config(group: &str, chain: &str) -> Config {
        Config {
            spec: format!("{group}:{chain}"),
            factors: vec![("group".into(), group.into()), ("chain".into(), chain.into())],
        }
    }

    fn assessment(from: Config, to: Config) -> (ResultSet, Assessment) {
        let records = [&from, &to]
            .iter()
            .map(|c| {
                let pairs: Vec<(&str, &str)> = c.factors.iter().map(|(n, v)| (n.as_str(), v.as_str())).collect();
                pqtls_testkit::synthetic::measure(&Scenario::new(pairs).unwrap(), 200).record
            })
            .collect();
        let split = Split::of(&from, &to);
        let a = Assessment {
            from,
            to: vec![to],
            deployment: Deployment {
                rtt_ns: 50_000_000,
                bits_per_s: Some(100_000_000),
                response_bytes: 51_200,
                response_head_bytes: 116,
                request_bytes: 78,
                initcwnd: 10,
            },
            commands: Vec::new(),
            not_run: Vec::new(),
            parts: Vec::new(),
            endpoint: None,
            splits: vec![split],
        };
        (ResultSet::from_parts(vec![(crate::analysis::assessment::part::INSITU, records)]), a)
    }

    #[test]
    fn a_move_of_the_key_exchange_alone_is_answered_without_a_split_and_says_why() {
        let (set, a) = assessment(config("x25519", "p256:p256"), config("X25519MLKEM768", "p256:p256"));
        let answers = a.answers(&set);
        assert!(split(&a, &answers).is_none(), "no split table");
        assert!(split_shares(&a, &answers).is_empty(), "no split chart");
        let lines = headline(&a, &answers);
        assert!(lines[0].starts_with("On OpenSSL the server spends"), "{lines:?}");
        assert!(
            lines.iter().any(|l| l.starts_with("No split into key exchange and certificates:")
                && l.contains("share the certificates (p256:p256)")),
            "{lines:?}"
        );
        let (_, rows) = answers_table(&a, &answers);
        assert!(rows.iter().all(|r| r.len() == 2), "one column per stack: {rows:?}");
    }

    #[test]
    fn a_split_not_measured_yet_says_so() {
        let (set, a) = assessment(config("x25519", "p256:p256"), config("X25519MLKEM768", "mldsa65:mldsa65"));
        let answers = a.answers(&set);
        let why = no_split(&answers);
        assert_eq!(why.len(), 1, "{why:?}");
        assert!(why[0].contains("has no in-situ record (yet)"), "{why:?}");
    }

    /// The configuration `group:chain` with more factors.
    fn with(group: &str, chain: &str, more: &[(&str, &str)]) -> Config {
        let mut c = config(group, chain);
        c.factors.extend(more.iter().map(|(n, v)| (n.to_string(), v.to_string())));
        c.spec = format!("{} {}", c.spec, more.iter().map(|(n, v)| format!("{n}={v}")).collect::<Vec<_>>().join(" "));
        c
    }

    fn helps(from: Config, to: Config) -> Vec<String> {
        let (set, a) = assessment(from, to);
        what_would_help(&a, &a.answers(&set))
    }

    /// Each rule of thumb is cited where it applies, with its figure and its source, and only
    /// there: a move to an ML-DSA-65 chain climbs QUIC's first-contact step (not TCP's at
    /// initcwnd 10) and gains little from compression; one to a ML-DSA-65 leaf + ML-DSA-87
    /// intermediate climbs TCP's too; a key share the server does not pick costs a round trip.
    #[test]
    fn what_would_help_cites_the_measured_rules_where_they_apply() {
        let from = || config("x25519", "p256:p256");
        let none = helps(from(), config("X25519MLKEM768", "p256:p256"));
        assert!(none.is_empty(), "no step, no PQ chain, no retry: {none:?}");

        let mldsa = helps(from(), config("X25519MLKEM768", "mldsa65:mldsa65"));
        assert_eq!(mldsa.len(), 2, "{mldsa:?}");
        assert!(mldsa.iter().all(|l| !l.contains("  ")), "one space between words: {mldsa:?}");
        assert!(mldsa[0].contains("QUIC on a first contact above 5\u{202f}494 bytes"), "{mldsa:?}");
        assert!(!mldsa[0].contains("TCP at initcwnd 10 above"), "{mldsa:?}");
        assert!(mldsa[0].contains("TCP at initcwnd 10 still sends them in its first flight"), "{mldsa:?}");
        assert!(mldsa[0].contains("docs/auth-bytes.md, §2"), "{mldsa:?}");
        assert!(
            mldsa[1].starts_with("Certificate compression") && mldsa[1].contains("1.1 % of an ML-DSA-65"),
            "{mldsa:?}"
        );
        assert!(mldsa[1].contains("no round trip unless") && mldsa[1].contains("docs/auth-bytes.md, §1"), "{mldsa:?}");

        let big = helps(from(), config("X25519MLKEM768", "mldsa65:mldsa65:mldsa87"));
        assert!(big[0].contains("TCP at initcwnd 10 above 13\u{202f}197 bytes"), "{big:?}");
        assert!(big[0].contains("TCP at initcwnd 16 still sends them"), "{big:?}");

        let compressed = helps(from(), with("X25519MLKEM768", "mldsa65:mldsa65", &[("cert_compression", "zlib")]));
        assert!(
            compressed.iter().all(|l| !l.contains("Certificate compression")),
            "already compressed: {compressed:?}"
        );

        let retry = helps(from(), with("X25519MLKEM768", "p256:p256", &[("key_shares", "x25519")]));
        assert_eq!(retry.len(), 1, "{retry:?}");
        assert!(
            retry[0].contains("HelloRetryRequest") && retry[0].contains("1 round trip (50 ms on your link"),
            "{retry:?}"
        );
        assert!(retry[0].contains("docs/auth-bytes.md, §3"), "{retry:?}");
    }

    fn answers_table(a: &Assessment, x: &[Answer]) -> Table {
        super::answers(a, x)
    }
}
