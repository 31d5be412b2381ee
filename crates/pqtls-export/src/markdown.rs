//! Markdown: CPU quantiles per side and each configuration's step table, bytes per message
//! and direction, capacity, rules of thumb and deltas against the baseline; the load and
//! transfer records' tables, among them the one `pqtls load` and `pqtls transfer` print — as
//! tables to paste into a report, made by [`crate::tables`]. Besides the label, the in-situ
//! summary tables have a column per factor that some record sets away from its default
//! ([`crate::analysis::factor_columns`]).

use crate::analysis::roles::{across_stacks, role_medians, Role};
use crate::analysis::{baseline_deltas, factor_columns, rules::rules_of_thumb, InsituView, STACK};
use crate::tables::{delta_us, pct, us};
use crate::{Exporter, ReportOptions, ResultSet};
use pqtls_core::factor::Kind;
use pqtls_core::trace::Side;
use pqtls_core::Result;
use std::fmt::Write;

/// The `markdown` exporter: [`render`].
pub struct Markdown;

impl Exporter for Markdown {
    fn name(&self) -> &'static str {
        "markdown"
    }
    fn describe(&self) -> &'static str {
        "Markdown report: settings, rules of thumb, CPU quantiles, bytes, capacity, baseline deltas"
    }
    fn kinds(&self) -> &'static [Kind] {
        &[Kind::Insitu, Kind::Load, Kind::Transfer, Kind::Resident]
    }
    fn render(&self, set: &ResultSet, opts: &ReportOptions) -> Result<String> {
        render(set, opts)
    }
}

/// Settings as one sentence (shared with the HTML report).
/// The settings that apply to the records of `kinds` in the set (all of them when it has
/// none): the in-situ loop rule, the load/layers/transfer timing, the resident connections.
pub(crate) fn settings_sentence(s: &pqtls_core::settings::Settings, kinds: &[Kind]) -> String {
    let has = |k: Kind| kinds.is_empty() || kinds.contains(&k);
    let mut parts = Vec::new();
    if has(Kind::Insitu) {
        let loops = match (s.loops, s.precision) {
            (Some(n), _) => format!("{n} handshakes per configuration"),
            (None, Some(p)) => format!(
                "adaptive to ±{}% of each step's and total's location ({}–{} handshakes)",
                p * 100.0,
                s.min_loops,
                s.max_loops
            ),
            _ => "?".into(),
        };
        let loops = match s.max_time_ms {
            Some(cap) if cap.is_multiple_of(1000) => format!("{loops}, at most {} s per configuration", cap / 1000),
            Some(cap) => format!("{loops}, at most {cap} ms per configuration"),
            None => loops,
        };
        parts.push(format!(
            "warm-up {} handshakes, {loops}, quantiles {}, raw samples {}",
            s.warmup,
            s.quantiles.0.iter().map(|q| pqtls_core::stats::Quantiles::key(*q)).collect::<Vec<_>>().join("/"),
            if s.raw_samples { "kept" } else { "not kept" }
        ));
    }
    if has(Kind::Load) || has(Kind::Layers) || has(Kind::Transfer) {
        let l = &s.load;
        let ms = |v: u64| if v % 1000 == 0 { format!("{} s", v / 1000) } else { format!("{v} ms") };
        let requests = l.requests.map_or(String::new(), |n| format!(" or {n} requests (closed loop)"));
        parts.push(format!(
            "per point {} warm-up, then {} measured{requests}, a transaction timing out after {}",
            ms(l.warmup_ms),
            ms(l.duration_ms),
            ms(l.timeout_ms)
        ));
    }
    if has(Kind::Resident) {
        let held = s.resident.held.iter().map(u64::to_string).collect::<Vec<_>>().join("/");
        parts.push(format!(
            "idle connections held {held}, memory read {} ms after the last one opened",
            s.resident.settle_ms
        ));
    }
    parts.join("; ")
}

pub(crate) fn cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// The whole Markdown report.
pub fn render(set: &ResultSet, opts: &ReportOptions) -> Result<String> {
    let mut out = String::new();
    let recs = set.insitu();
    let recs = &recs;
    let insitu_records: Vec<pqtls_core::record::Record> =
        set.records.iter().filter(|r| r.kind() == pqtls_core::factor::Kind::Insitu).cloned().collect();
    let cols = factor_columns(&insitu_records, false);
    match &opts.assessment {
        Some(a) => {
            let _ = writeln!(
                out,
                "# From {} to {}: what it costs\n",
                a.from.spec,
                a.to.iter().map(|c| c.spec.as_str()).collect::<Vec<_>>().join(", ")
            );
            assessment(&mut out, set, a);
            out.push_str("\n## The evidence\n\n");
        }
        None => {
            let _ = writeln!(out, "# pqtls report: {}\n", set.title());
        }
    }
    if let Some(m) = &set.manifest {
        if !m.description.is_empty() {
            let _ = writeln!(out, "{}\n", m.description);
        }
    }
    if let Some(s) = set.settings() {
        let _ = writeln!(out, "Settings: {}.\n", settings_sentence(s, &set.kinds()));
    }
    if let Some(r) = set.records.first() {
        let libs: Vec<String> = r.env.libraries.values().map(|v| crate::tables::short_version(v)).collect();
        let _ = writeln!(
            out,
            "Measured with pqtls {}{} (the environment at the end).\n",
            r.env.tool_version,
            if libs.is_empty() { String::new() } else { format!(" on {}", libs.join(", ")) }
        );
    }
    for n in set.report_notices(&Markdown, opts) {
        let _ = writeln!(out, "> {n}\n");
    }
    let contents = crate::contents(set);
    if !contents.is_empty() {
        out.push_str("This report has records of several kinds, a part each:\n\n");
        for (_, what) in &contents {
            let _ = writeln!(out, "- {what}");
        }
        out.push('\n');
    }
    let loads = crate::analysis::load::loads(set);
    let transfers = crate::analysis::transfer::transfers(set);
    let residents: Vec<crate::ResidentView> = set.records.iter().filter_map(crate::ResidentView::of).collect();
    let (timed, counted) = crate::analysis::by_unit(recs);
    if !timed.is_empty() || (counted.is_empty() && loads.is_empty() && transfers.is_empty() && residents.is_empty()) {
        out += &insitu_sections(set, &timed, &cols, opts, false)?;
    }
    if !counted.is_empty() {
        out += "\n# Instruction counts\n\nThe same sections in instructions retired (`clock = \"instructions\"`; \
                docs/instructions.md): thousands of instructions where time would be µs.\n\n";
        out += &crate::tables::in_counts(&insitu_sections(set, &counted, &cols, opts, true)?);
        let pairs = crate::tables::insitu::per_instruction(&timed, &counted);
        if !pairs.1.is_empty() {
            out += "\n## Time per instruction\n\nConfigurations measured both ways: CPU time / instructions \
                    (10 %-trimmed means), the cycles per instruction implied at the CPU's clock rate.\n\n";
            table(&mut out, &pairs);
        }
    }
    if !loads.is_empty() {
        load_sections(&mut out, &loads, recs);
    }
    if !transfers.is_empty() {
        transfer_sections(&mut out, &transfers);
    }
    if !residents.is_empty() {
        resident_sections(&mut out, &residents);
    }
    if !set.failures.is_empty() {
        out.push_str(
            "\n## Points not measured\n\nPoints of the run that have no record, with the reason the run gave.\n\n",
        );
        table(&mut out, &crate::tables::failures(&set.failures));
    }
    environment(&mut out, set);
    Ok(out)
}

/// An assessment's answer, first: the question, the sentences, the answer table, the split,
/// what did not run, the commands.
fn assessment(out: &mut String, set: &ResultSet, a: &crate::analysis::assessment::Assessment) {
    use crate::tables::assessment as t;
    let answers = a.answers(set);
    let _ = writeln!(
        out,
        "Your link: {}; initcwnd {}. Every figure: from → to (change ± its ~95 % interval).\n",
        t::link(a),
        a.deployment.initcwnd
    );
    for line in t::headline(a, &answers) {
        let _ = writeln!(out, "{line}");
    }
    out.push('\n');
    table(out, &t::answers(a, &answers));
    if let Some(split) = t::split(a, &answers) {
        out.push_str(
            "\nThe split: the key exchange's change is that of the configuration with only the group moved to the \
             target's, the certificates' that of the one with only the chain moved; the rest is their interaction (and \
             any other factor the target changes). Under each change, its share of the whole.\n\n",
        );
        table(out, &split);
    }
    for line in t::no_split(&answers) {
        let _ = writeln!(out, "\n{line}");
    }
    for (part, why) in &a.not_run {
        let _ = writeln!(out, "\n> Not run: {part} — {why}");
    }
    let helps = t::what_would_help(a, &answers);
    if !helps.is_empty() {
        out.push_str("\n### What would help\n\n");
        for line in &helps {
            let _ = writeln!(out, "- {line}");
        }
    }
    if let Some(note) = t::endpoint_note(a) {
        let _ = writeln!(out, "\n### Your endpoint\n\n{note}\n");
        table(out, &t::endpoint(&a.endpoint_rows(set)));
    }
    out.push_str("\nThe commands that made these records (each reproduces its part):\n\n");
    for (part, command) in &a.commands {
        let _ = writeln!(out, "- {part}: `{command}`");
    }
}

/// The environment, once, at the end: the tool, every library's whole version and build line,
/// the CPU and kernel.
fn environment(out: &mut String, set: &ResultSet) {
    let Some(r) = set.records.first() else { return };
    let e = &r.env;
    let _ = writeln!(
        out,
        "\n## Environment\n\n- pqtls {} ({})",
        e.tool_version,
        if e.tool_commit.is_empty() { "commit unknown" } else { &e.tool_commit }
    );
    for (k, v) in &e.libraries {
        let _ = writeln!(out, "- {k}: `{v}`");
    }
    let _ = writeln!(
        out,
        "- CPU {} ({} CPUs), kernel {}{}",
        e.cpu_model,
        e.cpus,
        e.kernel,
        e.governor.as_ref().map_or(String::new(), |g| format!(", governor {g}"))
    );
}

/// At most this many columns in one Markdown table: wider ones are split into several, each
/// repeating the columns that name the row (a viewer shows each whole).
pub const MAX_COLUMNS: usize = 10;

fn table(out: &mut String, (head, rows): &crate::tables::Table) {
    if head.len() <= MAX_COLUMNS {
        return one_table(out, head, rows);
    }
    // The columns that name a row start every part: the first, or up to `configuration` when
    // it comes second or third (`stack | configuration | …`).
    let names = head.iter().take(3).position(|h| h == "configuration").map_or(1, |i| i + 1);
    let rest: Vec<usize> = (names..head.len()).collect();
    for (i, chunk) in rest.chunks(MAX_COLUMNS - names).enumerate() {
        if i > 0 {
            out.push('\n');
        }
        let cols: Vec<usize> = (0..names).chain(chunk.iter().copied()).collect();
        let pick = |r: &Vec<String>| cols.iter().map(|c| r.get(*c).cloned().unwrap_or_default()).collect::<Vec<_>>();
        let part_rows: Vec<Vec<String>> = rows.iter().map(pick).collect();
        one_table(out, &pick(head), &part_rows);
    }
}

fn one_table(out: &mut String, head: &[String], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |\n|{}|", head.join(" | "), vec!["---:"; head.len()].join("|"));
    for row in rows {
        let _ = writeln!(out, "| {} |", row.iter().map(|c| cell(c)).collect::<Vec<_>>().join(" | "));
    }
}

/// The resident records' sections: memory per idle connection and connections per GiB, the
/// rules of thumb per chain, every reading.
fn resident_sections(out: &mut String, all: &[crate::ResidentView]) {
    use crate::tables::resident as t;
    let _ = writeln!(out, "\n## Resident: memory per idle connection\n\n{} resident records. {}\n", all.len(), t::NOTE);
    table(out, &t::summary(all));
    let rules = t::rules_of_thumb(all);
    if !rules.is_empty() {
        out.push_str("\n### Rules of thumb per chain\n\n");
        for r in rules {
            let _ = writeln!(out, "- {r}");
        }
    }
    out.push_str("\n### Every reading\n\n");
    table(out, &t::readings(all));
    let notes = t::notes(all);
    if !notes.is_empty() {
        out.push('\n');
        for n in notes {
            let _ = writeln!(out, "- {n}");
        }
    }
}

/// The transfer records' sections: percentiles, PQ − classical differences, rounds, links.
fn transfer_sections(out: &mut String, all: &[crate::TransferView]) {
    use crate::tables::transfer as t;
    let _ = writeln!(
        out,
        "\n## Transfer: TTFB and TTLB (ms)\n\n{} transfer records: one new TLS connection per transfer over an emulated \
         link, from connect to the first / last response byte; HdrHistogram percentiles.\n",
        all.len()
    );
    table(out, &t::percentiles(all));
    out.push_str(
        "\n## Transfer: per point\n\nOne row per point, the table `pqtls transfer` prints: the verified link, TTFB \
         and TTLB (ms), round trips measured / predicted.\n\n",
    );
    table(out, &t::summary(all));
    let diffs = t::differences(all);
    if !diffs.1.is_empty() {
        let _ = writeln!(out, "\n## Transfer: post-quantum − classical\n\n{}\n", t::DIFFERENCE_NOTE);
        table(out, &diffs);
    }
    let versus = t::tcp_vs_quic(all);
    if !versus.1.is_empty() {
        let _ = writeln!(out, "\n## Transfer: TCP + TLS vs QUIC\n\n{}\n", t::TCP_VS_QUIC_NOTE);
        table(out, &versus);
    }
    let rounds = t::rounds(all);
    if !rounds.1.is_empty() {
        let _ = writeln!(out, "\n## Transfer: round trips, measured vs predicted\n\n{}\n", t::ROUNDS_NOTE);
        table(out, &rounds);
    }
    let stairs = crate::analysis::staircase::series(all);
    if !stairs.is_empty() {
        let _ = writeln!(out, "\n## Authentication bytes: the staircase\n\n{}\n", t::STAIRCASE_NOTE);
        table(out, &t::staircase_steps(&stairs));
        out.push('\n');
        table(out, &t::staircase_points(&stairs));
    }
    out.push_str(
        "\n## Transfer: the verified links\n\nAsked vs measured before the transfers; the lateness is the delay \
         emulator's during the verification (µs).\n\n",
    );
    table(out, &t::link_table(all));
    let checks = t::checks(all);
    if !checks.1.is_empty() {
        out.push('\n');
        table(out, &checks);
    }
    out.push_str("\n## Transfer: the delay emulator during the transfers\n\n");
    table(out, &t::emulator(all));
}

/// The load records' sections, led by the question they answer
/// ([`crate::analysis::load::Question`]): rates first for closed loops, layers and latency first
/// for open ones; the table `pqtls load` prints after the first.
fn load_sections(out: &mut String, loads: &[crate::LoadView], insitu: &[InsituView]) {
    use crate::analysis::load::{question, Part, Question};
    use crate::tables::load as t;
    let question = question(loads);
    let _ = writeln!(out, "\n# Load\n\n{} load records.{}", loads.len(), question.lead());
    for (i, part) in question.parts().into_iter().enumerate() {
        match part {
            Part::Rates => {
                let _ = writeln!(out, "\n## Load: connections per second\n\n{}\n", t::SPREAD_NOTE);
                if question == Question::Latency {
                    out.push_str("Open loops: connections/s is the target's unless a row says otherwise.\n\n");
                }
                table(out, &t::rates_by_threads(loads));
                out.push('\n');
                table(out, &t::runs(loads));
                let sizes = t::sizes(loads);
                if !sizes.1.is_empty() {
                    out.push_str("\n## Load: handshake message sizes (bytes)\n\nOne handshake of each run, read from its bytes with its secrets (as a capture would be).\n\n");
                    table(out, &sizes);
                }
            }
            Part::Latency => {
                out.push_str("\n## Load: latency (µs)\n\nFrom the scheduled time (open loop) or the connection's start to the last byte; HdrHistogram percentiles.\n\n");
                table(out, &t::latency(loads));
            }
            Part::Cpu => {
                out.push_str("\n## Load: CPU per handshake (µs, mean)\n\nInside the TLS stack's calls under load, next to the in-situ mean of the same handshake when this set holds it; the server side when pqtls served.\n\n");
                table(out, &t::cpu(loads, insitu));
            }
            Part::Errors => {
                let errors = t::errors(loads);
                if !errors.1.is_empty() {
                    out.push_str("\n## Load: errors\n\n");
                    table(out, &errors);
                }
            }
            Part::Layers => {
                let layers = t::layers(loads);
                if !layers.1.is_empty() {
                    out.push_str(
                        "\n## Load: layers (µs)\n\nEach layer's own percentiles (they do not add up to the latency's).\n\n",
                    );
                    table(out, &layers);
                    layered_sections(out, loads);
                }
            }
        }
        if i == 0 {
            out.push_str(
                "\n## Load: per record\n\nOne row per record, the table `pqtls load` prints: latency in ms, CPU per \
                 handshake (mean) in µs, the client's errors.\n\n",
            );
            table(out, &t::summary(loads));
        }
    }
}

/// The layered study's tables: percentile profile, TLS change vs x25519, capture vs client.
fn layered_sections(out: &mut String, loads: &[crate::LoadView]) {
    use crate::tables::layers as l;
    out.push_str("\n## Layers: percentile profile (µs)\n\n");
    table(out, &l::profile(loads));
    let change = l::tls_change(loads);
    if !change.1.is_empty() {
        let _ = writeln!(out, "\n## Layers: the TLS layer vs x25519 (µs)\n\n{}\n", l::TLS_CHANGE_NOTE);
        table(out, &change);
    }
    let diffs = l::capture_differences(loads);
    if !diffs.1.is_empty() {
        let _ = writeln!(out, "\n## Layers: capture vs client (µs)\n\n{}\n", l::CAPTURE_NOTE);
        table(out, &diffs);
    }
}

/// Each configuration's CPU time per step: what was negotiated and the step table `pqtls
/// insitu` prints, with the stack's own steps.
fn steps_section(out: &mut String, recs: &[InsituView]) {
    use crate::tables::insitu::{negotiated, steps, Substeps};
    out.push_str(
        "\n## CPU time per step (µs), per configuration\n\nEach configuration, each step of each side (the stack's own steps inside \
         a canonical step as `step/…`, part of its time), with the median's ~95 % interval and, when the record has \
         a baseline, each step's change against it.\n",
    );
    for r in recs {
        let _ = writeln!(out, "\n### {} ({})\n\n{}\n", r.label(), r.factor(STACK), negotiated(r));
        table(out, &steps(r, Substeps::Listed));
        if let (Some(t), Some(note)) = (crate::tables::insitu::memory(r), crate::tables::insitu::memory_note(r)) {
            let _ = writeln!(out, "\nHeap per step (means per handshake; CPU beside it):\n");
            table(out, &t);
            let _ = writeln!(out, "\n{note}");
        }
    }
}

/// The heading and explanation of the QUIC table (docs/quic.md).
pub(crate) const QUIC_HEAD: &str = "\n## QUIC: datagrams and packets\n\nOver `transport = quic`, the last measured \
     handshake per direction: UDP datagrams (payload bytes) and their flights, QUIC packets and bytes per type, the TLS \
     handshake data they carry (CRYPTO), what is not handshake data (packet headers, AEAD tags, ACK/PADDING/other \
     frames), the bytes the server sent before the client's address was validated against 3× what it had received \
     (RFC 9000 §8.1), and the rounds: client flights until both sides were done (docs/quic.md).\n\n";

/// The heading and explanation of the TCP vs QUIC table.
pub(crate) const TCP_VS_QUIC_HEAD: &str = "\n## TCP vs QUIC\n\nThe same configuration over a byte stream (TLS \
     records) and over QUIC (datagrams): median CPU per side, bytes each way (record-layer bytes; datagram payloads) \
     and rounds (TLS over a stream in memory: the client's 2 flights).\n\n";

/// The in-situ records' sections.
fn insitu_sections(
    set: &ResultSet,
    recs: &[InsituView],
    cols: &[&pqtls_core::factor::Factor],
    opts: &ReportOptions,
    counts: bool,
) -> Result<String> {
    let mut out = String::new();
    let _ = writeln!(out, "{} configurations.\n", recs.len());

    // Rules of thumb and capacity turn CPU time into sessions per second: not counts.
    let rules = if counts { Vec::new() } else { rules_of_thumb(recs, &opts.model, 40) };
    if !rules.is_empty() {
        out += "## Rules of thumb\n\n";
        for r in &rules {
            let _ = writeln!(out, "- {}", r.text);
        }
        out += "\n";
    }

    out += "## CPU time per handshake (µs)\n\n";
    table(&mut out, &crate::tables::insitu::quantiles(recs, cols));

    out += "\n## Bytes on the wire\n\nHandshake messages (header included) and record-layer bytes per direction.\n\n";
    table(&mut out, &crate::tables::insitu::bytes(recs, cols));

    if let Some(cmp) = across_stacks(recs, usize::MAX) {
        out += "\n## Stacks side by side\n\nScenarios measured on more than one stack: median CPU (µs) of each \
                step role, client + server (docs/report.md, step roles), which both step vocabularies map to.\n\n";
        let mut head = vec!["configuration".to_string(), "stack".into()];
        head.extend(Role::ALL.iter().map(|r| r.name().to_string()));
        let _ = writeln!(out, "| {} |\n|---|---|{}|", head.join(" | "), vec!["---:"; Role::ALL.len()].join("|"));
        for b in &cmp.bars {
            let (c, s) = (role_medians(&b.record.client, Side::Client), role_medians(&b.record.server, Side::Server));
            let mut cells = vec![cell(b.record.label()), cell(b.record.factor(STACK))];
            cells.extend(Role::ALL.iter().map(|r| us(c[r] + s[r])));
            let _ = writeln!(out, "| {} |", cells.join(" | "));
        }
    }

    if let Some(t) = crate::tables::insitu::quic(recs, cols) {
        out += QUIC_HEAD;
        table(&mut out, &t);
    }
    if let Some(t) = crate::tables::insitu::tcp_vs_quic(recs) {
        out += TCP_VS_QUIC_HEAD;
        table(&mut out, &t);
    }

    if let Some(t) = crate::tables::insitu::memory_totals(recs, cols) {
        out += "\n## Heap per handshake\n\nAllocations and bytes allocated inside each side's calls into the stack \
                (means per handshake) and the peak of live heap above the side's level at the handshake's start \
                (median), for the configurations measured with `--memory` (docs/memory.md).\n\n";
        table(&mut out, &t);
    }

    let m = &opts.model;
    if !counts {
        out += "\n## Capacity\n\n";
        let _ = writeln!(
            out,
            "New sessions per second a link carries (bottleneck direction), per CPU core (median), and the round \
             trips the server's first flight needs with initcwnd {} and MSS {} B.\n\n{}\n",
            m.initcwnd,
            m.mss,
            m.convention.sentence()
        );
        let residents: Vec<crate::ResidentView> = set.records.iter().filter_map(crate::ResidentView::of).collect();
        table(&mut out, &crate::tables::insitu::capacity(recs, m, &residents));
    }

    let deltas = baseline_deltas(set, opts)?;
    if !deltas.is_empty() {
        out += "\n## Against the baseline\n\nChange of the 10 %-trimmed mean handshake CPU (stable where ML-DSA signing makes the median jump between modes) with its ~95 % interval.\n\n";
        out += "| configuration | baseline | Δ total µs | Δ % | Δ client µs | Δ server µs |\n|---|---|---:|---:|---:|---:|\n";
        for (r, d) in &deltas {
            let _ = writeln!(
                out,
                "| {} | {} | {} | {} | {} | {} |",
                cell(r.label()),
                cell(&d.label),
                delta_us(&d.total),
                pct(d.total.relative),
                delta_us(&d.client_total),
                delta_us(&d.server_total)
            );
        }
    }

    if !counts {
        out += "\n## Capacity model assumptions\n\n";
        for a in m.assumptions() {
            let _ = writeln!(out, "- {a}");
        }
    }
    // Long (a table per configuration): last, after the summaries.
    steps_section(&mut out, recs);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_settings_sentence_says_what_applies_to_the_records_shown() {
        let mut s = pqtls_core::settings::Settings::default();
        s.load.requests = Some(300);
        let load = settings_sentence(&s, &[Kind::Load]);
        assert_eq!(
            load,
            "per point 1 s warm-up, then 10 s measured or 300 requests (closed loop), a transaction timing out after 10 s"
        );
        let insitu = settings_sentence(&s, &[Kind::Insitu]);
        assert!(
            insitu.starts_with("warm-up ") && insitu.contains("handshakes") && !insitu.contains("requests"),
            "{insitu}"
        );
        let resident = settings_sentence(&s, &[Kind::Resident]);
        assert!(resident.starts_with("idle connections held ") && !resident.contains("handshakes"), "{resident}");
        // A set with no records: everything the settings say.
        assert_eq!(settings_sentence(&s, &[]).matches("; ").count(), 2);
    }

    #[test]
    fn a_record_measured_under_interference_gets_a_warning_line() {
        let mut set = crate::csv::tests::sample_set();
        let quiet = render(&set, &ReportOptions::default()).unwrap();
        assert!(!quiet.contains("Warning:"), "{quiet}");
        let label = set.records[1].label.clone();
        let r = set.records[1].insitu_mut().unwrap();
        r.noise = Some(pqtls_core::record::Noise {
            disturbed_client: r.loops.measured / 2,
            disturbed_server: r.loops.measured / 2,
            cpus: 2,
            ..Default::default()
        });
        let md = render(&set, &ReportOptions::default()).unwrap();
        let line = md.lines().find(|l| l.contains("Warning:")).unwrap_or_else(|| panic!("{md}"));
        assert!(line.contains(&label) && line.contains("measured under interference: 50 %"), "{line}");
        let html = crate::html::render(&set, &ReportOptions::default()).unwrap();
        assert!(html.contains("measured under interference: 50 %"), "no warning in the HTML report");
    }

    #[test]
    fn a_record_that_counted_memory_gets_its_heap_tables_and_the_others_none() {
        use pqtls_core::memory::{MemoryResult, SideMemory, SideMemorySummary, StepMemory};
        let mut set = crate::csv::tests::sample_set();
        let plain = render(&set, &ReportOptions::default()).unwrap();
        assert!(!plain.contains("Heap per"), "{plain}");
        let step = |allocations: u64, bytes: u64| StepMemory {
            allocations,
            frees: allocations,
            allocated_bytes: bytes,
            freed_bytes: bytes / 2,
        };
        let side = SideMemory {
            steps: [("server_hello".to_string(), step(3, 3_000)), ("certificate".to_string(), step(2, 9_000))]
                .into_iter()
                .collect(),
            total: step(5, 12_000),
            peak_live_bytes: 7_000,
        };
        let summary = SideMemorySummary::of(&[&side, &side]);
        let r = set.records[1].insitu_mut().unwrap();
        r.memory = Some(MemoryResult {
            counted: "the test's allocator".into(),
            not_counted: "nothing".into(),
            client: summary.clone(),
            server: summary,
        });
        let md = render(&set, &ReportOptions::default()).unwrap();
        assert!(md.contains("## Heap per handshake"), "{md}");
        assert_eq!(md.matches("Heap per step").count(), 1, "{md}");
        assert!(md.contains("| server | certificate |"), "{md}");
        // Totals: 5 allocations, 12 000 B allocated, 6 000 freed and held, peak 7 000.
        assert!(md.contains("| 5.0 | 12000 | 6000 | 6000 | 7000 |"), "{md}");
        assert!(md.contains("counted: the test's allocator; not counted: nothing"), "{md}");
    }

    #[test]
    fn tables_are_present() {
        let set = crate::csv::tests::sample_set();
        let md = render(&set, &ReportOptions { baseline: Some(set.records[0].label.clone()), ..Default::default() })
            .unwrap();
        for h in [
            "## CPU time per handshake (µs)",
            "## CPU time per step (µs)",
            "## Bytes on the wire",
            "## Capacity",
            "## Against the baseline",
        ] {
            assert!(md.contains(h), "{h}\n{md}");
        }
        // Each configuration's step table, the one `pqtls insitu` prints: last, after the summaries.
        let steps_at = md.find("## CPU time per step (µs)").unwrap();
        assert!(steps_at > md.find("## Capacity model assumptions").unwrap(), "{md}");
        assert!(
            md.contains("### X25519MLKEM768 mldsa65:mldsa65 (openssl)\n\nnegotiated: group X25519MLKEM768"),
            "{md}"
        );
        assert_eq!(md.matches("\n| both | TOTAL |").count(), set.records.len(), "{md}");
        assert!(md.contains("| configuration | stack | client p15 | client p50 | client p99 | server p15"), "{md}");
        assert!(md.contains("| X25519MLKEM768 mldsa65:mldsa65 |"), "{md}");
        // x25519 p256:p256 is on both stacks: compared by role.
        assert!(md.contains("## Stacks side by side"), "{md}");
        assert!(md.contains("| configuration | stack | key share | key exchange | sign | verify chain |"), "{md}");
        let rustls = crate::InsituView::of(&set.records[2]).unwrap();
        let sign = us(rustls.server.steps["write_certificate_verify"].median);
        // The stacks table has 8 columns (configuration, stack, 6 roles): 9 bars.
        let stacks = &md[md.find("## Stacks side by side").unwrap()..];
        let row =
            stacks.lines().find(|l| l.starts_with("| x25519 p256:p256 | rustls |") && l.matches('|').count() == 9);
        let row = row.unwrap_or_else(|| panic!("{md}"));
        assert_eq!(row.split(" | ").nth(4), Some(sign.as_str()), "{row}");
        let bad = render(&set, &ReportOptions { baseline: Some("nope".into()), ..Default::default() }).unwrap_err();
        assert!(bad.to_string().contains("baseline 'nope' is not among the 3 records"), "{bad}");
    }

    /// A set of time records and instruction-count records of the same configurations: the
    /// counts get their own sections in instructions (no capacity or rules of thumb, which turn
    /// CPU time into sessions/s), and time per instruction relates the two.
    #[test]
    fn instruction_counts_get_their_own_sections_and_time_per_instruction() {
        use pqtls_core::scenario::Scenario;
        let mut records = Vec::new();
        for clock in ["split", "instructions"] {
            for group in ["x25519", "X25519MLKEM768"] {
                let sc = Scenario::new([("group", group), ("chain", "p256:p256"), ("clock", clock)]).unwrap();
                records.push(pqtls_testkit::synthetic::measure(&sc, 40).record);
            }
        }
        let set = ResultSet::from_records(records);
        let md = render(&set, &ReportOptions::default()).unwrap();
        let counts_at = md.find("# Instruction counts").unwrap_or_else(|| panic!("{md}"));
        let (time, counts) = md.split_at(counts_at);
        assert!(time.contains("## CPU time per handshake (µs)") && time.contains("## Capacity"), "{time}");
        assert!(counts.contains("## Instructions per handshake (k instr)"), "{counts}");
        assert!(counts.contains("| p50 k instr |") || counts.contains(" p50 k instr "), "{counts}");
        assert!(!counts.contains("## Capacity") && !counts.contains("µs |"), "{counts}");
        assert!(counts.contains("## Time per instruction"), "{counts}");
        assert_eq!(counts.matches("\n| x25519 p256:p256 |").count() >= 1, true, "{counts}");
        let html = crate::html::render(&set, &ReportOptions::default()).unwrap();
        assert!(
            html.contains("<h2>Instruction counts</h2>") && html.contains("id=\"count-quantiles\""),
            "no counts in HTML"
        );
        assert!(html.contains("<h2>Time per instruction</h2>"), "no time per instruction in HTML");
    }
}
