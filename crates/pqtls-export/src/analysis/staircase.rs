//! The authentication staircase (docs/auth-bytes.md §2): transfer records that sweep the
//! server's authentication bytes (`auth_bytes`) at otherwise equal points, one series per
//! transport, initial window and address-validation token. Along a series TTFB climbs in steps
//! of one RTT; for each step this module puts the measured position (between the last point
//! that did not pay the round trip and the first that did) beside the round-trip model's (the
//! largest flight the model sends without it, found byte by byte from the series' own model
//! inputs), and says whether they agree within one TCP segment or one QUIC datagram.

use super::transfer::TransferView;
use pqtls_core::roundtrip::Prediction;
use std::collections::BTreeMap;

/// One point of a series.
#[derive(Clone, Debug, PartialEq)]
pub struct Point {
    pub auth_bytes: u64,
    pub ttfb_p50_ns: u64,
    /// The handshake's (`tls` layer's) round trips: measured, and the model's count.
    pub measured_rounds: f64,
    pub model_rounds: u32,
}

/// One step of a series: the round trip the `rounds`-th round of the handshake adds.
#[derive(Clone, Debug, PartialEq)]
pub struct Step {
    /// The handshake's round trips after the step.
    pub rounds: u32,
    /// Measured: the largest swept size below the step and the smallest at or above it
    /// (`None`: the sweep did not reach that side).
    pub measured_below: Option<u64>,
    pub measured_above: Option<u64>,
    /// The model's "bytes before the next round trip": the largest authentication size it
    /// sends without this round (`None`: not within the swept range).
    pub model_bytes: Option<u64>,
}

impl Step {
    /// Whether measurement and model agree within `unit_bytes` (one segment or datagram): the
    /// model's position lies within a unit of the measured bracket.
    pub fn agrees(&self, unit_bytes: u64) -> Option<bool> {
        let model = self.model_bytes?;
        let below = self.measured_below.unwrap_or(0);
        let above = self.measured_above?;
        Some(model + unit_bytes >= below && model < above + unit_bytes)
    }
}

/// One series: the points of one transport, initial window and token, in size order.
#[derive(Clone, Debug)]
pub struct Series {
    /// `tcp initcwnd 10`, `quic`, `quic + token`.
    pub name: String,
    pub quic: bool,
    /// One TCP segment (the model's MSS) or one QUIC datagram, bytes.
    pub unit_bytes: u64,
    pub points: Vec<Point>,
    pub steps: Vec<Step>,
}

impl Series {
    /// The first step's measured and modelled "bytes before the next round trip".
    pub fn first_step(&self) -> Option<&Step> {
        self.steps.first()
    }
}

/// The series of a result set: transfer records with `auth_bytes` set, grouped by everything
/// else (configuration without the size, transport, link, initial window, token). Series of
/// fewer than two sizes are left out.
pub fn series(all: &[TransferView]) -> Vec<Series> {
    let mut groups: BTreeMap<String, Vec<&TransferView>> = BTreeMap::new();
    for t in all.iter().filter(|t| t.factor("auth_bytes") != "none" && t.load.requests > 0) {
        let mut key: Vec<String> = t
            .record
            .scenario
            .iter()
            .filter(|(k, _)| k.as_str() != "auth_bytes")
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        key.sort();
        groups.entry(key.join("|")).or_default().push(t);
    }
    let mut out: Vec<Series> = groups.into_values().filter(|g| g.len() >= 2).map(|g| one_series(&g)).collect();
    out.sort_by(|a, b| (a.quic, a.name.len(), &a.name).cmp(&(b.quic, b.name.len(), &b.name)));
    out
}

fn one_series(points: &[&TransferView]) -> Series {
    let mut points: Vec<&TransferView> = points.to_vec();
    points.sort_by_key(|t| auth_bytes(t));
    let first = points[0];
    let quic = first.is_quic();
    let name = if quic {
        if first.factor("quic_token") == "true" {
            "quic + token".to_string()
        } else {
            "quic".to_string()
        }
    } else {
        format!("tcp initcwnd {}", first.initcwnd().1.map_or("default".into(), |w| w.to_string()))
    };
    let unit_bytes = match &first.quic {
        Some(q) => q.model.datagram_bytes,
        None => first.model.mss_bytes,
    };
    let rows: Vec<Point> = points
        .iter()
        .map(|t| Point {
            auth_bytes: auth_bytes(t),
            ttfb_p50_ns: t.ttfb.p50_ns,
            measured_rounds: t.rounds_of("tls").map_or(0.0, |r| r.measured),
            model_rounds: model_rounds(t, auth_bytes(t)),
        })
        .collect();
    let steps = steps(first, &rows);
    Series { name, quic, unit_bytes, points: rows, steps }
}

fn auth_bytes(t: &TransferView) -> u64 {
    t.factor("auth_bytes").parse().unwrap_or(0)
}

/// The model's handshake round trips for the point's inputs with `auth` authentication bytes
/// (the server's flight moved by the difference).
fn model_rounds(t: &TransferView, auth: u64) -> u32 {
    let shift = |flight: u64| (flight + auth).saturating_sub(auth_bytes(t));
    let tls = |p: Prediction| p.layer("tls").map_or(0, |l| l.round_trips);
    match &t.quic {
        Some(q) => {
            let mut m = q.model.clone();
            m.server_flight_bytes = shift(m.server_flight_bytes);
            tls(m.predict())
        }
        None => {
            let mut m = t.model.clone();
            m.server_flight_bytes = shift(m.server_flight_bytes);
            tls(m.predict())
        }
    }
}

/// Each step the model takes within the sweep, with where the measurement put it: the model's
/// position byte by byte (from the first point's inputs), the measured one from the rounded
/// measured rounds along the series.
/// The largest authentication size in `lo..hi` whose modelled handshake takes fewer than `rounds`
/// (binary search: the model's rounds grow with the flight; `lo` is below, `hi` at or above).
fn largest_below(first: &TransferView, rounds: u32, lo: u64, hi: u64) -> u64 {
    let (mut ok, mut bad) = (lo, hi);
    while bad - ok > 1 {
        let mid = ok + (bad - ok) / 2;
        if model_rounds(first, mid) < rounds {
            ok = mid;
        } else {
            bad = mid;
        }
    }
    ok
}

fn steps(first: &TransferView, points: &[Point]) -> Vec<Step> {
    let (lo, hi) = (points[0].auth_bytes, points[points.len() - 1].auth_bytes);
    let base = model_rounds(first, lo);
    let top = model_rounds(first, hi).max(points.iter().map(|p| p.measured_rounds.round() as u32).max().unwrap_or(0));
    let mut out = Vec::new();
    for rounds in base + 1..=top {
        // The model: the largest size below `rounds` (binary search: its rounds grow with the flight).
        let model_bytes = (model_rounds(first, hi) >= rounds).then(|| largest_below(first, rounds, lo, hi));
        let reached = |p: &Point| p.measured_rounds.round() as u32 >= rounds;
        let above = points.iter().position(reached);
        out.push(Step {
            rounds,
            measured_below: match above {
                Some(0) => None,
                Some(i) => Some(points[i - 1].auth_bytes),
                None => Some(hi),
            },
            measured_above: above.map(|i| points[i].auth_bytes),
            model_bytes,
        });
    }
    if out.is_empty() {
        // No step within the sweep: where the model puts the next one (up to 2^24 bytes).
        let rounds = base + 1;
        let limit = pqtls_core::config::MAX_HANDSHAKE_BODY_BYTES;
        let model_bytes = (model_rounds(first, limit) >= rounds).then(|| largest_below(first, rounds, hi, limit));
        out.push(Step { rounds, measured_below: Some(hi), measured_above: None, model_bytes });
    }
    out
}
