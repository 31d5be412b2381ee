//! Transfer records (`kind = "transfer"`, issue 11): what the reports show of them, computed
//! once — TTFB and TTLB against RTT (one panel per transfer size, initial window and the other
//! network factors; one line per handshake configuration), the PQ − classical difference of
//! the medians with its interval and as a ratio, measured vs predicted round trips, and the
//! verified links.
//!
//! The uncertainty of a median, and of a difference or ratio of two ([`difference`]): core's
//! estimators over the record's HdrHistogram (`pqtls_core::stats::histogram`: order
//! statistics, intervals combined in quadrature; the same rule `compare` uses for latency
//! percentiles).

use super::warnings::{grouped_lines, Warning};
use super::{same_except, View};
use crate::ResultSet;
use pqtls_core::catalogue;
use pqtls_core::config::ChainSpec;
use pqtls_core::factor::{IdPart, FACTORS};
use pqtls_core::load::Latency;
use pqtls_core::record::Record;
use pqtls_core::stats::QuantileDifference;
use pqtls_core::transfer::{Rounds, TransferResult};

/// The factors that name a handshake configuration (the factor table's handshake class): one
/// line per value of them in a chart.
pub fn line_factors() -> Vec<&'static str> {
    FACTORS.iter().filter(|f| f.class == pqtls_core::factor::Class::Handshake).map(|f| f.name).collect()
}

/// The x axis of the charts.
pub const X_FACTOR: &str = "rtt";

/// Factors every panel title names, whether they vary or not.
const ALWAYS_IN_TITLE: &[&str] = &["response_size", "initcwnd", "bandwidth"];

/// Measured rounds farther than this from the prediction are flagged: a quarter of a round
/// trip, what the model is held to on the mTLS study (docs/benchmarks-netlab.md).
pub const ROUNDS_TOLERANCE: f64 = 0.25;

/// The emulator's lateness is worth a warning above this share of the RTT (it delays every
/// packet twice per round trip).
pub const LATENESS_WARNING_SHARE: f64 = 0.01;

/// A transfer record with its result at hand; derefs to the [`TransferResult`].
pub type TransferView<'a> = View<'a, TransferResult>;

impl<'a> TransferView<'a> {
    /// The handshake configuration (the line it is drawn on): group, chain, `mtls=…`, and the
    /// other line factors away from their defaults; the stack when it is not OpenSSL.
    pub fn configuration(&self) -> String {
        let mut parts: Vec<String> = Vec::new();
        for f in FACTORS.iter().filter(|f| f.class == pqtls_core::factor::Class::Handshake) {
            let v = self.factor(f.name);
            if f.name == "stack" {
                if v != f.default.unwrap_or("") && !v.is_empty() {
                    parts.push(format!("on {v}"));
                }
                continue;
            }
            parts.extend((f.label)(v));
        }
        // Stack last: `X25519MLKEM768 mldsa65:mldsa65 mtls=mldsa65:mldsa65 on rustls`.
        if let Some(i) = parts.iter().position(|p| p.starts_with("on ")) {
            let s = parts.remove(i);
            parts.push(s);
        }
        if self.is_quic() {
            parts.push("over quic".into());
        }
        parts.join(" ")
    }

    /// Whether the transfers ran over QUIC (`transport = quic`).
    pub fn is_quic(&self) -> bool {
        self.quic.is_some() || self.factor("transport") == "quic"
    }

    /// The asked RTT (ns): the link's, else the scenario's; `None` without an emulated delay.
    pub fn rtt_ns(&self) -> Option<u64> {
        self.link.asked.rtt_ns.or_else(|| pqtls_core::units::duration_ns(self.factor(X_FACTOR)).ok())
    }

    /// Initial congestion windows (client, server): the model's (what the routes had), else
    /// the lab's setup; `None`: the kernel's default.
    pub fn initcwnd(&self) -> (Option<u64>, Option<u64>) {
        let m = &self.model;
        let pick = |model: u64, setup: Option<u64>| if model > 0 { Some(model) } else { setup };
        (
            pick(m.client_initcwnd, self.link.setup.client_initcwnd),
            pick(m.server_initcwnd, self.link.setup.server_initcwnd),
        )
    }

    /// Whether the key exchange and every certificate (server's and client's) are classical.
    pub fn is_classical(&self) -> bool {
        let group_pq = self
            .factor("group")
            .split(',')
            .next()
            .and_then(|g| catalogue::group(g).ok())
            .is_none_or(|g| g.post_quantum);
        let chain_pq = |v: &str| {
            if v.is_empty() || v == "none" {
                return false;
            }
            !matches!(ChainSpec::parse(v), Ok(c) if c.algs().iter().all(|a| !a.post_quantum))
        };
        !group_pq && !chain_pq(self.factor("chain")) && !chain_pq(self.factor("client_chain"))
    }

    /// Measured vs predicted rounds per layer, by the model of today from the record's
    /// inputs ([`TransferResult::rounds_now`]).
    pub fn rounds(&self) -> Vec<Rounds> {
        self.result.rounds_now()
    }

    /// Rounds of one layer ([`Self::rounds`]).
    pub fn rounds_of(&self, layer: &str) -> Option<Rounds> {
        self.rounds().into_iter().find(|r| r.layer == layer)
    }

    /// Client and server errors.
    pub fn error_count(&self) -> u64 {
        self.load.errors.iter().map(|e| e.count).sum::<u64>()
            + self.load.server.as_ref().map_or(0, |s| s.errors.iter().map(|e| e.count).sum())
    }
}

/// The transfer records of a set, in order.
pub fn transfers(set: &ResultSet) -> Vec<TransferView<'_>> {
    set.records.iter().filter_map(TransferView::of).collect()
}

/// TTFB or TTLB.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    Ttfb,
    Ttlb,
}

impl Metric {
    pub const BOTH: [Metric; 2] = [Metric::Ttlb, Metric::Ttfb];

    pub fn name(self) -> &'static str {
        match self {
            Metric::Ttfb => "TTFB",
            Metric::Ttlb => "TTLB",
        }
    }

    /// The id part of its charts.
    pub fn slug(self) -> &'static str {
        match self {
            Metric::Ttfb => "ttfb",
            Metric::Ttlb => "ttlb",
        }
    }

    /// Its distribution (with the histogram).
    pub fn latency<'a>(self, t: &TransferView<'a>) -> &'a Latency {
        match self {
            Metric::Ttfb => &t.result.load.ttfb,
            Metric::Ttlb => &t.result.load.latency,
        }
    }

    /// Its percentiles as the record stores them.
    pub fn percentiles<'a>(self, t: &TransferView<'a>) -> &'a pqtls_core::transfer::Percentiles {
        match self {
            Metric::Ttfb => &t.result.ttfb,
            Metric::Ttlb => &t.result.ttlb,
        }
    }
}

/// A point's median against its classical counterpart's: the difference and the ratio with
/// their intervals (`d.delta_ns`, `d.ratio`, `d.significant()`: [`QuantileDifference`]'s).
#[derive(Clone, Debug, PartialEq)]
pub struct Difference {
    /// The classical record compared with.
    pub baseline_id: String,
    pub baseline_configuration: String,
    /// This median − the classical one, and this / the classical one, ns.
    pub median: QuantileDifference,
}

impl std::ops::Deref for Difference {
    type Target = QuantileDifference;

    fn deref(&self) -> &QuantileDifference {
        &self.median
    }
}

/// The classical counterpart of a non-classical point: a classical record ([`Transfer::is_classical`])
/// equal in every factor except the line factors (the handshake), on the same stack first.
/// `None` for a classical point or when the set has no counterpart.
pub fn classical_of<'a>(t: &TransferView, all: &[TransferView<'a>]) -> Option<TransferView<'a>> {
    if t.is_classical() {
        return None;
    }
    let candidates: Vec<TransferView> =
        all.iter().filter(|b| b.is_classical() && same_except(t.record, b.record, &line_factors())).copied().collect();
    candidates.iter().find(|b| b.factor("stack") == t.factor("stack")).or(candidates.first()).copied()
}

/// The PQ − classical difference of a point's median TTFB or TTLB ([`classical_of`]), with
/// its interval and as a ratio; `None` for classical points, points without a counterpart,
/// or medians without a histogram.
pub fn difference(t: &TransferView, all: &[TransferView], metric: Metric) -> Option<Difference> {
    let b = classical_of(t, all)?;
    let x = metric.latency(t).quantile_interval(0.5)?;
    let y = metric.latency(&b).quantile_interval(0.5)?;
    Some(Difference {
        baseline_id: b.id().to_string(),
        baseline_configuration: b.configuration(),
        median: x.difference(&y),
    })
}

/// The TCP counterpart of a QUIC point: the point equal in every factor but the transport
/// (TCP is the transfer's default, or `transport = tcp`). `None` for TCP points or without one.
pub fn tcp_of<'a>(t: &TransferView, all: &[TransferView<'a>]) -> Option<TransferView<'a>> {
    if !t.is_quic() {
        return None;
    }
    all.iter().find(|b| !b.is_quic() && same_except(t.record, b.record, &["transport"])).copied()
}

/// Measured / predicted round trips of a point's handshake: over TCP the connect and the TLS
/// handshake, over QUIC the handshake (its first Initial carries the ClientHello).
pub fn handshake_rounds(t: &TransferView) -> Option<(f64, f64)> {
    let layers: &[&str] = if t.is_quic() { &["tls"] } else { &["tcp", "tls"] };
    let rounds: Option<Vec<Rounds>> = layers.iter().map(|l| t.rounds_of(l)).collect();
    rounds.map(|r| (r.iter().map(|k| k.measured).sum(), r.iter().map(|k| k.expected()).sum()))
}

/// One line of a chart: a configuration's points by RTT (ms, ascending).
#[derive(Clone, Debug)]
pub struct Line<'a> {
    pub configuration: String,
    pub points: Vec<(f64, TransferView<'a>)>,
}

/// One chart: the points that share every factor except the handshake and the RTT.
#[derive(Clone, Debug)]
pub struct Panel<'a> {
    /// `size 150KiB · initcwnd 10 · bandwidth 100mbit`.
    pub title: String,
    /// For chart ids: `size-150KiB-initcwnd-10-bw-100mbit`.
    pub slug: String,
    pub lines: Vec<Line<'a>>,
    /// Records without an RTT (no emulated delay): not on a chart, in the tables.
    pub without_rtt: usize,
}

/// Letters, digits, `.` and `-` of a text; anything else as `_`.
fn slug_part(s: &str) -> String {
    s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '.' || c == '-' { c } else { '_' }).collect()
}

/// The panel factors of a set: every factor but the line factors and the RTT; those a title
/// names are [`ALWAYS_IN_TITLE`] and the ones whose value differs between records.
fn title_factors(all: &[TransferView]) -> Vec<&'static pqtls_core::factor::Factor> {
    let mut out: Vec<&'static pqtls_core::factor::Factor> =
        ALWAYS_IN_TITLE.iter().filter_map(|n| FACTORS.iter().find(|f| f.name == *n)).collect();
    out.extend(FACTORS.iter().filter(|f| {
        f.class != pqtls_core::factor::Class::Handshake
            && f.name != X_FACTOR
            && !ALWAYS_IN_TITLE.contains(&f.name)
            && all.first().is_some_and(|a| all.iter().any(|b| b.factor(f.name) != a.factor(f.name)))
    }));
    out
}

/// The panels of a set, in the order their first point appears; lines in the order their
/// configuration first appears in the set, points by RTT.
pub fn panels<'a>(all: &[TransferView<'a>]) -> Vec<Panel<'a>> {
    let shown = title_factors(all);
    let mut free: Vec<&str> = line_factors();
    free.push(X_FACTOR);
    let mut order: Vec<String> = Vec::new();
    for t in all {
        let c = t.configuration();
        if !order.contains(&c) {
            order.push(c);
        }
    }
    let mut out: Vec<(&Record, Panel)> = Vec::new();
    for t in all {
        let i = match out.iter().position(|(first, _)| same_except(first, t.record, &free)) {
            Some(i) => i,
            None => {
                let title = shown
                    .iter()
                    .map(|f| {
                        let name = if f.name == "response_size" { "size" } else { f.name };
                        format!("{name} {}", t.factor(f.name))
                    })
                    .collect::<Vec<_>>()
                    .join(" · ");
                let slug = shown
                    .iter()
                    .map(|f| {
                        let name = match f.id {
                            IdPart::Named(n) => n,
                            _ => f.name,
                        };
                        format!("{name}-{}", slug_part(t.factor(f.name)))
                    })
                    .collect::<Vec<_>>()
                    .join("-");
                let slug = if slug.is_empty() { "all".to_string() } else { slug };
                out.push((t.record, Panel { title, slug, lines: Vec::new(), without_rtt: 0 }));
                out.len() - 1
            }
        };
        let panel = &mut out[i].1;
        let Some(rtt) = t.rtt_ns() else {
            panel.without_rtt += 1;
            continue;
        };
        let c = t.configuration();
        match panel.lines.iter_mut().find(|l| l.configuration == c) {
            Some(l) => l.points.push((rtt as f64 / 1e6, *t)),
            None => panel.lines.push(Line { configuration: c, points: vec![(rtt as f64 / 1e6, *t)] }),
        }
    }
    let mut panels: Vec<Panel> = out.into_iter().map(|(_, p)| p).collect();
    for p in &mut panels {
        p.lines.sort_by_key(|l| order.iter().position(|c| *c == l.configuration));
        for l in &mut p.lines {
            l.points.sort_by(|a, b| a.0.total_cmp(&b.0));
        }
    }
    panels
}

/// Whether a layer's measured rounds are farther than [`ROUNDS_TOLERANCE`] from the
/// prediction ([`Rounds::error`]).
pub fn rounds_disagree(r: &Rounds) -> bool {
    r.error().abs() > ROUNDS_TOLERANCE
}

/// A layer's rounds as the tables show them: `measured / predicted (round trips)`.
pub fn rounds_cell(r: &Rounds) -> String {
    format!("{:.2} / {:.2} ({})", r.measured, r.expected(), r.predicted)
}

/// The layers the rounds tables show, in order.
pub const ROUND_LAYERS: [&str; 4] = ["tcp", "tls", "http", "total"];

/// The distinct verified links of a set: (a record's link report, the records measured on it,
/// the initial windows (client/server) seen on it). Two records share a link when their
/// verification is the same apart from the routes' initial windows (which the lab sets in
/// place).
pub fn links<'a>(all: &[TransferView<'a>]) -> Vec<(TransferView<'a>, usize, Vec<String>)> {
    let key = |t: &TransferView| {
        let mut l = t.link.clone();
        l.asked.initcwnd = None;
        l.setup.client_initcwnd = None;
        l.setup.server_initcwnd = None;
        l
    };
    let mut out: Vec<(TransferView, pqtls_core::link::LinkReport, usize, Vec<String>)> = Vec::new();
    for t in all {
        let k = key(t);
        let (c, s) = t.initcwnd();
        let show = |x: Option<u64>| x.map_or("default".to_string(), |v| v.to_string());
        let iw = if c == s { show(c) } else { format!("{}/{}", show(c), show(s)) };
        match out.iter_mut().find(|(_, l, _, _)| *l == k) {
            Some((_, _, n, iws)) => {
                *n += 1;
                if !iws.contains(&iw) {
                    iws.push(iw);
                }
            }
            None => out.push((*t, k, 1, vec![iw])),
        }
    }
    out.into_iter().map(|(t, _, n, iws)| (t, n, iws)).collect()
}

/// What a reader must know about transfer records before their numbers, one line each (the
/// warnings about single records grouped where they are alike, [`super::warnings`]):
/// records measured on a link its verification refused, with errors, without transfers, with
/// an emulator late by more than [`LATENESS_WARNING_SHARE`] of the RTT; how many points'
/// rounds disagree with the model; non-classical points without a classical counterpart.
pub fn transfer_warnings(all: &[TransferView]) -> Vec<String> {
    let mut each: Vec<Warning> = Vec::new();
    for t in all {
        let mut warn = |text: String| each.push(Warning { subject: t.label().to_string(), text });
        if t.load.requests == 0 {
            warn("no transfer completed (no TTFB/TTLB)".into());
        }
        if !t.link.accepted && !t.link.checks.is_empty() {
            warn(format!("measured on a link its verification refused: {}", t.link.refusal()));
        }
        let errors = t.error_count();
        if errors > 0 {
            warn(format!("{errors} error(s) during the transfers"));
        }
        // How the figures were obtained: transfers the machine stalled under were measured again.
        if let Some(line) = t.load.stalls.as_ref().and_then(|s| s.summary()) {
            warn(line);
        }
        // With a stall screen, every kept transfer's packets were within the lateness budget
        // (those that were not were measured again, said in the notes): the emulator's p99
        // over the run speaks of the discarded ones.
        let screened = t.load.stalls.as_ref().is_some_and(|s| s.most_again.is_some());
        if let Some(rtt) = t.rtt_ns().filter(|r| *r > 0 && !screened) {
            let p99 = t.emulator.lateness.p99_ns;
            if p99 as f64 > LATENESS_WARNING_SHARE * rtt as f64 {
                warn(format!(
                    "the delay emulator released 1 % of packets {:.2} ms or more late ({:.1} % of \
                     the RTT)",
                    p99 as f64 / 1e6,
                    100.0 * p99 as f64 / rtt as f64
                ));
            }
        }
    }
    let mut out = grouped_lines(&each);
    let disagree = all.iter().filter(|t| t.rounds().iter().any(rounds_disagree)).count();
    if disagree > 0 {
        out.push(format!(
            "{disagree} of {} transfer points took more or less time than the round-trip model predicts \
             (by more than {ROUNDS_TOLERANCE} of a round trip; flagged in the rounds table)",
            all.len()
        ));
    }
    let orphans = all.iter().filter(|t| !t.is_classical() && classical_of(t, all).is_none()).count();
    if orphans > 0 {
        out.push(format!(
            "{orphans} post-quantum transfer point(s) have no classical point with the same network and size: no \
             PQ − classical difference for them"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use pqtls_testkit::synthetic::transfer::{study, study_scenario};

    /// A synthetic transfer record over QUIC: the TCP one's, with `transport = quic` and a QUIC
    /// model of the same link.
    fn over_quic(sc: &pqtls_core::scenario::Scenario) -> Record {
        let q = sc.with([("transport", "quic")]).unwrap();
        let mut r = pqtls_testkit::synthetic::transfer::transfer(&q);
        if let pqtls_core::record::Outcome::Transfer(t) = &mut r.result {
            let model = pqtls_core::transfer::QuicFlightModel { rtt_ns: t.model.rtt_ns, ..Default::default() };
            t.quic = Some(pqtls_core::transfer::QuicTransfer { model, ..Default::default() });
        }
        r
    }

    #[test]
    fn a_quic_point_pairs_with_its_tcp_point_and_counts_its_handshake_without_a_connect() {
        let pq = study_scenario("X25519MLKEM768", "mldsa65:mldsa65", "none", "50ms", "10", "0");
        let classical = study_scenario("x25519", "p256:p256", "none", "50ms", "10", "0");
        let tcp = |sc| pqtls_testkit::synthetic::transfer::transfer(sc);
        let recs = vec![tcp(&pq), over_quic(&pq), tcp(&classical), over_quic(&classical)];
        let set = ResultSet::from_records(recs);
        let all = transfers(&set);
        assert_eq!(all.iter().map(|t| t.is_quic()).collect::<Vec<_>>(), [false, true, false, true]);
        assert!(all[1].configuration().ends_with(" over quic"), "{}", all[1].configuration());
        assert_eq!(tcp_of(&all[1], &all).map(|t| t.id().to_string()), Some(all[0].id().to_string()));
        assert!(tcp_of(&all[0], &all).is_none(), "a TCP point has no TCP counterpart");
        // TCP's handshake is its connect and TLS layers; QUIC's only its handshake.
        let sum = |t: &TransferView, layers: &[&str]| -> f64 {
            layers.iter().map(|l| t.rounds_of(l).unwrap().measured).sum()
        };
        assert_eq!(handshake_rounds(&all[0]).unwrap().0, sum(&all[0], &["tcp", "tls"]));
        assert_eq!(handshake_rounds(&all[1]).unwrap().0, sum(&all[1], &["tls"]));
        assert!(all[1].rounds_of("tcp").is_none(), "no tcp layer over QUIC");
        // PQ − classical within each transport: the QUIC point against the classical QUIC one.
        let d = difference(&all[1], &all, Metric::Ttlb).unwrap();
        assert_eq!(d.baseline_id, all[3].id());
        let table = crate::tables::transfer::tcp_vs_quic(&all);
        assert_eq!(table.1.len(), 2, "one row per QUIC point with a TCP counterpart");
        assert!(table.1[0][12] != "–" && table.1[0][13] != "–", "PQ − classical per transport: {:?}", table.1[0]);
        assert_eq!(&table.1[1][12..], ["–", "–"], "the classical row has no difference");
    }

    #[test]
    fn panels_lines_and_classical_counterparts() {
        let recs = study();
        let set = ResultSet::from_records(recs);
        let all = transfers(&set);
        let panels = panels(&all);
        assert_eq!(panels.len(), 6, "3 sizes × 2 initcwnd");
        assert_eq!(panels[0].title, "size 0 · initcwnd 10 · bandwidth 100mbit");
        assert_eq!(panels[0].slug, "size-0-initcwnd-10-bw-100mbit");
        for p in &panels {
            assert_eq!(p.lines.len(), 3);
            assert!(p.lines.iter().all(|l| l.points.iter().map(|x| x.0).collect::<Vec<_>>() == [10.0, 50.0, 150.0]));
        }
        assert_eq!(panels[0].lines[0].configuration, "x25519 p256:p256 mtls=p256:p256");
        let pq = all
            .iter()
            .find(|t| {
                t.id() == study_scenario("MLKEM768", "mldsa65:mldsa65", "mldsa65:mldsa65", "50ms", "10", "0").id()
            })
            .unwrap();
        assert!(!pq.is_classical());
        let base = classical_of(pq, &all).unwrap();
        assert_eq!(base.id(), study_scenario("x25519", "p256:p256", "p256:p256", "50ms", "10", "0").id());
        let d = difference(pq, &all, Metric::Ttlb).unwrap();
        let (x, y) =
            (pq.load.latency.quantile_interval(0.5).unwrap(), base.load.latency.quantile_interval(0.5).unwrap());
        assert_eq!(d.delta_ns, x.value_ns - y.value_ns);
        // Bigger flights and slower signatures: later, by less than a round trip.
        assert!(d.significant() && d.delta_ns > 0.0 && d.delta_ns < 50e6, "{d:?}");
        assert!(difference(&base, &all, Metric::Ttlb).is_none(), "classical points have none");
        assert_eq!(links(&all).len(), 3, "one link per RTT");
        assert_eq!(links(&all)[0].1, 18);
        assert_eq!(links(&all)[0].2, ["10", "40"]);
    }
}
