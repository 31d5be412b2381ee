//! Measurement settings: how long and how precisely each scenario is measured. One type for
//! every front door (`insitu` flags, experiment files) and for the runner; a results
//! directory holds records measured with one set of settings only.

use crate::error::{Error, Result};
use crate::stats::Quantiles;
use serde::{Deserialize, Serialize};

/// The most handshakes one configuration may be asked for (`loops`, `max_loops`, `min_loops`):
/// a billion, 11 days at a millisecond each — beyond it a number is a typo, not a plan.
pub const MAX_LOOPS: u64 = 1_000_000_000;

/// How long and how precisely each scenario is measured.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Settings {
    /// Handshakes run and discarded before measuring.
    pub warmup: u64,
    /// Fixed number of measured handshakes; `None` in adaptive mode.
    pub loops: Option<u64>,
    /// Adaptive mode: stop once every step's median is known to this relative precision.
    pub precision: Option<f64>,
    /// Adaptive mode: at least this many handshakes.
    pub min_loops: u64,
    /// Adaptive mode: at most this many handshakes.
    pub max_loops: u64,
    /// In situ: the most time one configuration's handshakes may take, warm-up included, ms
    /// (`max_time = "20s"`; `None`: no time cap). The warm-up gets at most half of it; when the
    /// rest is spent the configuration stops where it is, whatever its loop rule — its record
    /// says `stopped = "time cap reached"`, `stopped_by = "time cap"`, with the handshakes it
    /// measured and the median's interval it reached (docs/replication.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_time_ms: Option<u64>,
    pub quantiles: Quantiles,
    /// Keep every handshake's per-step times.
    pub raw_samples: bool,
    /// Count heap allocations (`--memory`, `memory = true`; docs/memory.md): in situ, per side
    /// and step; under load, pqtls serve's per connection. Absent from records that did not.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub memory: bool,
    /// How long the load measurement runs each scenario.
    pub load: LoadSettings,
    /// How many idle connections the resident measurement holds (absent: the defaults).
    #[serde(skip_serializing_if = "ResidentSettings::is_default")]
    pub resident: ResidentSettings,
}

/// The idle connections the resident measurement holds per scenario (`[settings]` key `held`;
/// `pqtls resident --held`): the terminator's memory is read with none, then with each count
/// in turn (ascending; connections are added, never re-opened).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ResidentSettings {
    /// Connections held at each reading after the one at 0, ascending, each above 0.
    pub held: Vec<u64>,
    /// Wait this long after the last connection of a step opened before reading the memory
    /// (the terminator finishes what the responses left, e.g. tickets), ms.
    pub settle_ms: u64,
}

impl Default for ResidentSettings {
    fn default() -> Self {
        ResidentSettings { held: vec![1000, 10_000], settle_ms: 500 }
    }
}

impl ResidentSettings {
    pub fn is_default(&self) -> bool {
        *self == ResidentSettings::default()
    }

    /// The counts, ascending and each above 0, from what was written (errors say what works).
    pub fn held_from(counts: &[u64]) -> Result<Vec<u64>> {
        let mut v = counts.to_vec();
        v.sort_unstable();
        v.dedup();
        if v.first() == Some(&0) {
            v.remove(0);
        }
        if v.is_empty() {
            return Err(Error::Invalid(
                "held: give at least one number of connections above 0 (the reading at 0 is always made), e.g.                  [1000, 10000]"
                    .into(),
            ));
        }
        Ok(v)
    }
}

/// How long and how the load measurement runs one scenario (`[settings]` keys
/// `duration`, `warmup_time`, `requests`, `timeout`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadSettings {
    /// Measured time, ms.
    pub duration_ms: u64,
    /// Unmeasured time first (connections, caches, the server's workers warm up), ms.
    pub warmup_ms: u64,
    /// Closed loop: stop after this many measured requests (or at `duration_ms`).
    pub requests: Option<u64>,
    /// A transaction not complete after this long counts as a `timeout` error, ms.
    pub timeout_ms: u64,
}

impl Default for LoadSettings {
    fn default() -> Self {
        LoadSettings { duration_ms: 10_000, warmup_ms: 1_000, requests: None, timeout_ms: 10_000 }
    }
}

impl Default for Settings {
    fn default() -> Self {
        Settings {
            warmup: 100,
            loops: Some(1000),
            precision: None,
            min_loops: 100,
            max_loops: 1000,
            max_time_ms: None,
            quantiles: Quantiles::default(),
            raw_samples: false,
            memory: false,
            load: LoadSettings::default(),
            resident: ResidentSettings::default(),
        }
    }
}

/// Instruction counts' settings ([`Settings::for_counts`]).
pub const COUNT_WARMUP: u64 = 3;
pub const COUNT_PRECISION: f64 = 0.005;
pub const COUNT_MIN_LOOPS: u64 = 10;
pub const COUNT_MAX_LOOPS: u64 = 40;

impl Settings {
    /// Fixed loops, or adaptive with a cap (`precision` given).
    pub fn new(warmup: u64, loops: u64, precision: Option<f64>, quantiles: Quantiles) -> Result<Settings> {
        let s = match precision {
            None => Settings {
                warmup,
                loops: Some(loops),
                min_loops: loops,
                max_loops: loops,
                quantiles,
                ..Default::default()
            },
            Some(p) => Settings {
                warmup,
                loops: None,
                precision: Some(p),
                min_loops: 200.min(loops),
                max_loops: loops,
                max_time_ms: None,
                quantiles,
                raw_samples: false,
                memory: false,
                load: LoadSettings::default(),
                resident: ResidentSettings::default(),
            },
        };
        s.validate()?;
        Ok(s)
    }

    /// These settings for instruction counts (`pqtls run FILE --clock instructions`, and
    /// `pqtls insitu --clock instructions` without loop flags): counts vary only with the
    /// algorithms' own randomness, so few handshakes suffice — warm-up at most
    /// [`COUNT_WARMUP`], adaptive to ±[`COUNT_PRECISION`] between [`COUNT_MIN_LOOPS`] and
    /// [`COUNT_MAX_LOOPS`] handshakes (a handshake takes ~1 s under callgrind, most of it its
    /// dumps: docs/instructions.md). Steps that vary by design — ML-DSA signing's rejection
    /// sampling — reach the cap, their spread shown.
    pub fn for_counts(&self) -> Settings {
        Settings {
            warmup: self.warmup.min(COUNT_WARMUP),
            loops: None,
            precision: Some(COUNT_PRECISION),
            min_loops: COUNT_MIN_LOOPS,
            max_loops: COUNT_MAX_LOOPS,
            ..self.clone()
        }
    }

    /// The time cap of one configuration (`max_time_ms`), in seconds.
    pub fn max_time_s(&self) -> Option<f64> {
        self.max_time_ms.map(|ms| ms as f64 / 1000.0)
    }

    /// The most handshakes measured (the fixed count, or the adaptive cap).
    pub fn cap(&self) -> u64 {
        self.loops.unwrap_or(self.max_loops)
    }

    pub fn validate(&self) -> Result<()> {
        if self.cap() == 0 {
            return Err(Error::Invalid("loops must be at least 1 (e.g. --loops 1000)".into()));
        }
        if self.cap() > MAX_LOOPS || self.min_loops > MAX_LOOPS {
            return Err(Error::Invalid(format!(
                "{} handshakes per configuration: at most {MAX_LOOPS} (at a millisecond each, 11 days); ask for a \
                 precision instead (e.g. --precision 1%), or fewer loops (e.g. --loops 10000)",
                self.cap().max(self.min_loops)
            )));
        }
        if let Some(p) = self.precision {
            if !(p > 0.0 && p < 1.0) {
                return Err(Error::Invalid(format!("precision {p} must be between 0 and 1 (e.g. --precision 1%)")));
            }
        }
        if self.max_time_ms == Some(0) {
            return Err(Error::Invalid(
                "max_time must be at least 1 ms (the most time one configuration's handshakes may take, e.g. \"20s\")"
                    .into(),
            ));
        }
        if self.loops.is_none() && self.min_loops > self.max_loops {
            return Err(Error::Invalid(format!("min_loops {} exceeds max_loops {}", self.min_loops, self.max_loops)));
        }
        Ok(())
    }

    /// Differences against `old` (`setting: old → new`), empty when equal.
    pub fn changes_from(&self, old: &Settings) -> Vec<String> {
        let mut v = Vec::new();
        let mut cmp = |name: &str, a: String, b: String| {
            if a != b {
                v.push(format!("{name}: {a} → {b}"));
            }
        };
        let opt = |x: Option<u64>| x.map_or("none".to_string(), |x| x.to_string());
        let pct = |x: Option<f64>| x.map_or("none".to_string(), |x| format!("{}%", x * 100.0));
        cmp("warmup", old.warmup.to_string(), self.warmup.to_string());
        cmp("loops", opt(old.loops), opt(self.loops));
        cmp("precision", pct(old.precision), pct(self.precision));
        cmp("min_loops", old.min_loops.to_string(), self.min_loops.to_string());
        cmp("max_loops", old.max_loops.to_string(), self.max_loops.to_string());
        let ms = |x: Option<u64>| x.map_or("none".to_string(), |x| format!("{x} ms"));
        cmp("max_time", ms(old.max_time_ms), ms(self.max_time_ms));
        let qs = |q: &Quantiles| q.0.iter().map(|x| Quantiles::key(*x)).collect::<Vec<_>>().join(",");
        cmp("quantiles", qs(&old.quantiles), qs(&self.quantiles));
        cmp("raw_samples", old.raw_samples.to_string(), self.raw_samples.to_string());
        cmp("memory", old.memory.to_string(), self.memory.to_string());
        let (a, b) = (&old.load, &self.load);
        cmp("duration", format!("{} ms", a.duration_ms), format!("{} ms", b.duration_ms));
        cmp("warmup_time", format!("{} ms", a.warmup_ms), format!("{} ms", b.warmup_ms));
        cmp("requests", opt(a.requests), opt(b.requests));
        cmp("timeout", format!("{} ms", a.timeout_ms), format!("{} ms", b.timeout_ms));
        let held = |r: &ResidentSettings| r.held.iter().map(u64::to_string).collect::<Vec<_>>().join(",");
        cmp("held", held(&old.resident), held(&self.resident));
        cmp("settle", format!("{} ms", old.resident.settle_ms), format!("{} ms", self.resident.settle_ms));
        v
    }
}
