//! What a run asks for, from its settings alone, said before the first measurement: the
//! running ETA extrapolates from the configurations measured so far, which says nothing until
//! the first ones end and too little while a window of them is open; the settings bound the
//! time from below (a load or a transfer measures for its warm-up and duration) or give the
//! handshakes (in situ, whose time depends on the algorithms).

use pqtls_core::factor::Kind;
use pqtls_core::settings::Settings;
use std::fmt;

/// The work a run of `configurations` asks for (its [`fmt::Display`] is the line printed).
#[derive(Clone, Debug, PartialEq)]
pub struct Work {
    pub configurations: u64,
    /// Measuring time the settings guarantee at least (configurations one after another), ms.
    pub at_least_ms: Option<u128>,
    /// Measuring time the settings allow at most (a closed loop that stops at `requests`,
    /// or at its duration if sooner), ms.
    pub at_most_ms: Option<u128>,
    /// Handshakes asked (in situ: warm-up + measured, the adaptive mode's least).
    pub handshakes: Option<u128>,
    /// What one configuration asks, as written in the settings.
    pub each: String,
}

/// The work of measuring `configurations` configurations of `kind` with `settings`.
pub fn work(kind: Kind, settings: &Settings, configurations: u64) -> Work {
    let n = u128::from(configurations);
    let ms = |v: u64| if v < 60_000 && v % 1000 != 0 { format!("{v} ms") } else { human_ms(u128::from(v)) };
    match kind {
        Kind::Insitu => {
            let measured = settings.loops.unwrap_or(settings.min_loops);
            let each = match settings.loops {
                Some(l) => format!("{} warm-up + {l} measured handshakes", settings.warmup),
                None => format!(
                    "{} warm-up + {}–{} measured handshakes (precision {})",
                    settings.warmup,
                    settings.min_loops,
                    settings.max_loops,
                    settings.precision.map_or_else(String::new, |p| format!("{p}"))
                ),
            };
            let each = match settings.max_time_ms {
                Some(cap) => format!("{each}; at most {}", ms(cap)),
                None => each,
            };
            Work {
                configurations,
                at_least_ms: None,
                at_most_ms: settings.max_time_ms.map(|cap| n * u128::from(cap)),
                handshakes: Some(n * u128::from(settings.warmup + measured)),
                each,
            }
        }
        Kind::Load | Kind::Layers | Kind::Transfer => {
            let l = &settings.load;
            let per_ms = u128::from(l.warmup_ms) + u128::from(l.duration_ms);
            let each = format!("{} warm-up + {} measured", ms(l.warmup_ms), ms(l.duration_ms));
            match l.requests {
                // A closed loop stops at its requests or its duration, whichever comes first.
                Some(r) => Work {
                    configurations,
                    at_least_ms: Some(n * u128::from(l.warmup_ms)),
                    at_most_ms: Some(n * per_ms),
                    handshakes: None,
                    each: format!("{each} (or {r} requests, if sooner)"),
                },
                None => {
                    Work { configurations, at_least_ms: Some(n * per_ms), at_most_ms: None, handshakes: None, each }
                }
            }
        }
        Kind::Resident => {
            let readings = settings.resident.held.len() as u128 + 1;
            Work {
                configurations,
                at_least_ms: Some(n * readings * u128::from(settings.resident.settle_ms)),
                at_most_ms: None,
                handshakes: None,
                each: format!("{readings} readings, {} settling each", ms(settings.resident.settle_ms)),
            }
        }
    }
}

/// `55 h 33 min`, `2 min 10 s`, `40 s` (whole seconds, rounded up).
pub fn human_ms(ms: u128) -> String {
    let s = ms.div_ceil(1000);
    let (d, h, m, sec) = (s / 86_400, s / 3600 % 24, s / 60 % 60, s % 60);
    match (d, h, m) {
        (0, 0, 0) => format!("{sec} s"),
        (0, 0, _) => format!("{m} min {sec} s"),
        (0, _, _) => format!("{h} h {m} min"),
        _ => format!("{d} d {h} h"),
    }
}

impl fmt::Display for Work {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let c = self.configurations;
        let s = if c == 1 { "" } else { "s" };
        match (self.at_least_ms, self.at_most_ms, self.handshakes) {
            (_, Some(hi), Some(h)) => write!(
                f,
                "{c} configuration{s} to measure: {h} handshakes ({} each); at most {} of handshakes in all",
                self.each,
                human_ms(hi)
            ),
            (_, _, Some(h)) => write!(
                f,
                "{c} configuration{s} to measure: {h} handshakes ({} each); their time depends on the algorithms \
                 (the ETA follows from the first ones)",
                self.each
            ),
            (Some(lo), Some(hi), None) => write!(
                f,
                "{c} configuration{s} to measure: between {} and {} of measuring ({} each, one after another)",
                human_ms(lo),
                human_ms(hi),
                self.each
            ),
            (Some(lo), None, None) => write!(
                f,
                "{c} configuration{s} to measure: at least {} of measuring ({} each, one after another)",
                human_ms(lo),
                self.each
            ),
            _ => write!(f, "{c} configuration{s} to measure ({} each)", self.each),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_load_matrix_says_its_floor_from_warm_up_and_duration() {
        let mut s = Settings::default();
        s.load.warmup_ms = 1000;
        s.load.duration_ms = 1000;
        let w = work(Kind::Load, &s, 100_000);
        assert_eq!(w.at_least_ms, Some(200_000_000));
        assert_eq!(
            w.to_string(),
            "100000 configurations to measure: at least 2 d 7 h of measuring (1 s warm-up + 1 s measured each, one \
             after another)"
        );
        s.load.requests = Some(500);
        let w = work(Kind::Transfer, &s, 3);
        assert_eq!((w.at_least_ms, w.at_most_ms), (Some(3000), Some(6000)));
        assert!(w.to_string().contains("between 3 s and 6 s"), "{w}");
    }

    #[test]
    fn in_situ_says_its_handshakes() {
        let s = Settings::default();
        let w = work(Kind::Insitu, &s, 12);
        assert_eq!(w.handshakes, Some(12 * 1100));
        assert!(w.to_string().starts_with("12 configurations to measure: 13200 handshakes (100 warm-up + 1000"), "{w}");
    }

    #[test]
    fn human_durations() {
        assert_eq!(human_ms(0), "0 s");
        assert_eq!(human_ms(40_001), "41 s");
        assert_eq!(human_ms(130_000), "2 min 10 s");
        assert_eq!(human_ms(200_000_000), "2 d 7 h");
        assert_eq!(human_ms(3_600_000 * 5 + 60_000 * 33), "5 h 33 min");
    }
}
