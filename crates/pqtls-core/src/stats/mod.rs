//! Statistics, every estimator in one place, computed here and nowhere else (measurements
//! collect samples, exporters show what these functions return):
//! - over the samples of one quantity (ns; the in-situ steps): quantiles, a distribution-free
//!   confidence interval of the median, the trimmed mean and its interval, adaptive stopping,
//!   differences against a baseline ([`Summary`], [`Delta`], [`precise_enough`]);
//! - over a recorded distribution (an HdrHistogram: load latencies, transfers' TTFB/TTLB):
//!   a quantile with its ~95 % interval and the difference and ratio of two such quantiles with
//!   their intervals combined ([`histogram`]);
//! - the percentile bootstrap with a seeded generator, the same interval for the same data
//!   ([`bootstrap`]);
//! - a rate from per-second counts with its interval, and the ratio of two ([`rate`]).

pub mod bootstrap;
pub mod histogram;
pub mod rate;

pub use bootstrap::MedianChange;
pub use histogram::{QuantileDifference, QuantileInterval};

use crate::error::{Error, Result};
use serde::{Deserialize, Serialize};

/// The quantile levels reported, as fractions (default 0.15, 0.50, 0.99).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Quantiles(pub Vec<f64>);

impl Default for Quantiles {
    fn default() -> Self {
        Quantiles(vec![0.15, 0.50, 0.99])
    }
}

impl Quantiles {
    /// Parses percentages: `15,50,99` (a `%` sign may follow each). Values are always percent,
    /// so `0.5` is the 0.5th percentile; a list whose values are all ≤ 1 looks like fractions
    /// and is refused with the percent spelling, rather than read one way silently. The median
    /// is always added: the confidence interval and the deltas are about it. A level given
    /// twice, an empty item, 0 % or 100 % (the min and max are always reported) are errors.
    pub fn parse(s: &str) -> Result<Quantiles> {
        let mut v: Vec<f64> = Vec::new();
        let parts: Vec<&str> = s.split(',').map(str::trim).collect();
        for part in &parts {
            if part.is_empty() {
                return Err(Error::Invalid(format!(
                    "quantiles '{s}' have an empty item; write percentages like 15,50,99"
                )));
            }
            let x: f64 = part.trim_end_matches('%').trim().parse().map_err(|_| {
                Error::Invalid(format!("quantile '{part}' is not a number; write percentages like 15,50,99"))
            })?;
            if !(x > 0.0 && x < 100.0) {
                return Err(Error::Invalid(format!(
                    "quantile '{part}' must be a percentage strictly between 0 and 100 (min and max are always reported)"
                )));
            }
            if v.iter().any(|q| (q * 100.0 - x).abs() < 1e-9) {
                return Err(Error::Invalid(format!("quantile {part} is listed twice in '{s}'")));
            }
            // Rounded to 1e-11 so that `99.9` is exactly the double nearest 0.999.
            v.push((x * 1e9).round() / 1e11);
        }
        if v.is_empty() {
            return Err(Error::Invalid("no quantiles given; e.g. 15,50,99".into()));
        }
        if v.iter().all(|q| *q <= 0.01) && !parts.iter().any(|p| p.ends_with('%')) {
            let pct: Vec<String> =
                parts.iter().map(|p| p.parse::<f64>().map_or(p.to_string(), |x| format!("{}", x * 100.0))).collect();
            return Err(Error::Invalid(format!(
                "quantiles are percentages: '{s}' reads as p{} — if you meant fractions, write {}; for those small percentiles write them with %",
                parts.join(", p"),
                pct.join(",")
            )));
        }
        if !v.iter().any(|q| (*q - 0.5).abs() < 1e-12) {
            v.push(0.5);
        }
        v.sort_by(|a, b| a.total_cmp(b));
        Ok(Quantiles(v))
    }

    /// Key used in records: `p15`, `p50`, `p99.9`.
    pub fn key(q: f64) -> String {
        let p = q * 100.0;
        if (p - p.round()).abs() < 1e-9 {
            format!("p{}", p.round() as u64)
        } else {
            format!("p{}", (p * 1000.0).round() / 1000.0)
        }
    }
}

/// Summary of one quantity.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    pub n: usize,
    pub min: f64,
    pub max: f64,
    pub mean: f64,
    pub stdev: f64,
    /// `p15`, `p50`, … in ns.
    pub quantiles: indexmap::IndexMap<String, f64>,
    pub median: f64,
    /// 95 % confidence interval of the median (order statistics, distribution-free).
    pub median_ci: [f64; 2],
    /// Mean of the middle 80 % (10 % trimmed off each end, [`TRIM`]): the location statistic
    /// that stays repeatable when the samples come in separate modes (see `median_near_gap`)
    /// and, unlike the mean, is not moved by a few preempted samples. 0 in records written
    /// before it existed.
    #[serde(default)]
    pub trimmed_mean: f64,
    /// 95 % confidence interval of the trimmed mean (Tukey–McLaughlin: winsorized variance,
    /// Student t with n − 2g − 1 degrees of freedom).
    #[serde(default)]
    pub trimmed_mean_ci: [f64; 2],
    /// The samples around the median have a gap: two modes meet near the median, so the
    /// median jumps between them from run to run even when its confidence interval is narrow
    /// (ML-DSA signing: a rejection loop repeated a random number of times). Compare trimmed
    /// means then; the stopping rule does ([`precise_enough`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub median_near_gap: bool,
}

impl Summary {
    pub fn of(samples: &[u64], qs: &Quantiles) -> Summary {
        let mut v: Vec<f64> = samples.iter().map(|&x| x as f64).collect();
        v.sort_by(|a, b| a.partial_cmp(b).unwrap());
        Summary::of_sorted(&v, qs)
    }

    pub fn of_sorted(v: &[f64], qs: &Quantiles) -> Summary {
        let n = v.len();
        if n == 0 {
            return Summary::default();
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 { v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64 } else { 0.0 };
        let (lo, hi) = median_ci_ranks(n);
        let (trimmed_mean, trimmed_mean_ci) = trimmed_mean_sorted(v, TRIM);
        Summary {
            n,
            min: v[0],
            max: v[n - 1],
            mean,
            stdev: var.sqrt(),
            quantiles: qs.0.iter().map(|&q| (Quantiles::key(q), quantile_sorted(v, q))).collect(),
            median: quantile_sorted(v, 0.5),
            median_ci: [v[lo], v[hi]],
            trimmed_mean,
            trimmed_mean_ci,
            median_near_gap: gap_near_median(v),
        }
    }

    /// Half-width of the median's confidence interval.
    pub fn median_half_width(&self) -> f64 {
        (self.median_ci[1] - self.median_ci[0]) / 2.0
    }

    /// Half-width of the trimmed mean's confidence interval.
    pub fn trimmed_mean_half_width(&self) -> f64 {
        (self.trimmed_mean_ci[1] - self.trimmed_mean_ci[0]) / 2.0
    }

    /// The location statistic to trust for this quantity, with its CI half-width: the median,
    /// or the trimmed mean when the median lies next to a gap between modes.
    pub fn location(&self) -> (&'static str, f64, f64) {
        if self.median_near_gap {
            ("trimmed mean", self.trimmed_mean, self.trimmed_mean_half_width())
        } else {
            ("median", self.median, self.median_half_width())
        }
    }
}

/// The fraction trimmed off each end for [`Summary::trimmed_mean`].
pub const TRIM: f64 = 0.10;

/// Trimmed mean of sorted data (`trim` of the samples, rounded down, off each end) and its
/// ~95 % confidence interval after Tukey & McLaughlin (1963): standard error
/// s_w / ((1 − 2·trim)·√n) from the winsorized standard deviation s_w, times Student's t
/// quantile with h − 1 degrees of freedom (h samples kept). Fewer than 3 samples kept: the
/// interval is the whole range.
pub fn trimmed_mean_sorted(v: &[f64], trim: f64) -> (f64, [f64; 2]) {
    let n = v.len();
    if n == 0 {
        return (f64::NAN, [f64::NAN, f64::NAN]);
    }
    let g = ((n as f64 * trim).floor() as usize).min((n - 1) / 2);
    let kept = &v[g..n - g];
    let h = kept.len();
    let tm = kept.iter().sum::<f64>() / h as f64;
    if h < 3 {
        return (tm, [v[0], v[n - 1]]);
    }
    let (low, high) = (v[g], v[n - 1 - g]);
    let w: Vec<f64> = v.iter().map(|x| x.clamp(low, high)).collect();
    let wm = w.iter().sum::<f64>() / n as f64;
    let wvar = w.iter().map(|x| (x - wm).powi(2)).sum::<f64>() / (n - 1) as f64;
    let se = wvar.sqrt() / ((1.0 - 2.0 * g as f64 / n as f64) * (n as f64).sqrt());
    let half = student_t_975((h - 1) as f64) * se;
    (tm, [tm - half, tm + half])
}

/// The 97.5 % quantile of Student's t with `df` degrees of freedom: the Cornish–Fisher
/// expansion around the normal quantile (within 0.2 % for df ≥ 5; 12.7 for df = 1 exactly).
pub fn student_t_975(df: f64) -> f64 {
    const Z: f64 = 1.959_963_985;
    if df < 1.5 {
        return 12.706;
    }
    let (z3, z5, z7) = (Z.powi(3), Z.powi(5), Z.powi(7));
    Z + (z3 + Z) / (4.0 * df)
        + (5.0 * z5 + 16.0 * z3 + 3.0 * Z) / (96.0 * df * df)
        + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * Z) / (384.0 * df.powi(3))
}

/// Is there a gap (or a valley) between modes next to the median? Looks at a band of order
/// statistics around the median twice as wide (in ranks) as its 95 % interval. Where the
/// density is smooth there the band reaches about as far below the median as above it; it is
/// flagged when
/// - one side reaches more than 3× as far as the other: the median sits at the edge of a
///   mode, next to a low-density valley that another run's median may cross (ML-DSA
///   signing: a peak per number of rejection rounds, ~145 µs apart for ML-DSA-65 here), or
/// - one spacing between neighbours holds a quarter of the band: an empty gap inside it.
///
/// Then the sample median's own distribution is bimodal — which mode it lands in depends on
/// the run — so its order-statistic interval (valid for a smooth density) may be narrow and
/// still miss the next run's median. Differences under 1 % of the median are ignored (they
/// cannot move it by more; discrete data has "gaps" of one unit). Needs ≥ 50 samples.
pub fn gap_near_median(v: &[f64]) -> bool {
    let n = v.len();
    if n < 50 {
        return false;
    }
    let (lo, hi) = median_ci_ranks(n);
    let half_span = (hi - lo).div_ceil(2);
    let (a, b) = (lo.saturating_sub(half_span), (hi + half_span).min(n - 1));
    let median = quantile_sorted(v, 0.5);
    let floor = 0.01 * median.abs();
    let (below, above) = (median - v[a], v[b] - median);
    let (near, far) = (below.min(above), below.max(above));
    let widest = v[a..=b].windows(2).map(|w| w[1] - w[0]).fold(0.0, f64::max);
    (far > 3.0 * near && far - near >= floor) || (widest >= 0.25 * (v[b] - v[a]) && widest >= floor)
}

/// Quantile of sorted data, linear interpolation between order statistics (Hyndman & Fan
/// type 7, the default of R and NumPy).
pub fn quantile_sorted(v: &[f64], q: f64) -> f64 {
    let n = v.len();
    if n == 0 {
        return f64::NAN;
    }
    let h = (n - 1) as f64 * q.clamp(0.0, 1.0);
    let lo = h.floor() as usize;
    let hi = h.ceil() as usize;
    v[lo] + (h - lo as f64) * (v[hi] - v[lo])
}

/// 0-based ranks (j, k) of the order statistics bounding a ≥95 % confidence interval of the
/// median: the number of samples below the median is Binomial(n, 1/2), so
/// P(X(j) ≤ median ≤ X(k)) = P(j ≤ B < k+1). Exact binomial for n ≤ 1000, normal
/// approximation above.
pub fn median_ci_ranks(n: usize) -> (usize, usize) {
    if n < 6 {
        return (0, n.saturating_sub(1));
    }
    if n <= 1000 {
        // Largest j with P(B < j) ≤ 2.5 %, computed in log space.
        let ln_half_n = n as f64 * 0.5f64.ln();
        let mut cdf = 0.0;
        let mut ln_c = 0.0; // ln C(n, i)
        let mut j = 0;
        for i in 0..n {
            let p = (ln_c + ln_half_n).exp();
            if cdf + p > 0.025 {
                j = i;
                break;
            }
            cdf += p;
            ln_c += ((n - i) as f64).ln() - ((i + 1) as f64).ln();
        }
        // j is now the count such that P(B < j) ≤ 0.025 < P(B ≤ j): X(j) (1-based) is the bound,
        // i.e. 0-based rank j - 1 … symmetric upper bound.
        let lo = j.saturating_sub(1).min(n - 1);
        (lo, n - 1 - lo)
    } else {
        let half = 1.959_963_985 * (n as f64).sqrt() / 2.0;
        let lo = ((n as f64 / 2.0 - half).floor() as usize).saturating_sub(1);
        let hi = ((n as f64 / 2.0 + half).ceil() as usize).min(n - 1);
        (lo, hi)
    }
}

/// A difference of medians against a baseline, with its uncertainty.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Delta {
    /// median − baseline median, ns.
    pub delta: f64,
    /// Half-width of the ~95 % interval of the difference: the two medians' half-widths
    /// combined in quadrature (the runs are independent).
    pub half_width: f64,
    /// delta / baseline median (NaN when the baseline is 0; JSON null).
    #[serde(deserialize_with = "nan_from_null")]
    pub relative: f64,
}

/// Reads back what JSON writes for NaN (`null`).
fn nan_from_null<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<f64, D::Error> {
    Ok(Option::<f64>::deserialize(d)?.unwrap_or(f64::NAN))
}

impl Delta {
    pub fn between(this: &Summary, baseline: &Summary) -> Delta {
        let delta = this.median - baseline.median;
        let half_width = (this.median_half_width().powi(2) + baseline.median_half_width().powi(2)).sqrt();
        let relative = if baseline.median > 0.0 { delta / baseline.median } else { f64::NAN };
        Delta { delta, half_width, relative }
    }

    /// The difference of the 10 %-trimmed means (their intervals combined in quadrature), for
    /// handshake and side totals: two runs' ratios of ML-DSA configurations hold to ±2 % on
    /// the trimmed mean and not on the median, which jumps between the signing step's modes
    /// (docs/benchmarks-history.md §5.6). Falls back to [`Delta::between`] (medians) when either
    /// summary has no trimmed mean (records written before it existed).
    pub fn between_trimmed(this: &Summary, baseline: &Summary) -> Delta {
        let usable = |s: &Summary| s.trimmed_mean.is_finite() && s.trimmed_mean > 0.0;
        if !(usable(this) && usable(baseline)) {
            return Delta::between(this, baseline);
        }
        let delta = this.trimmed_mean - baseline.trimmed_mean;
        let half_width = (this.trimmed_mean_half_width().powi(2) + baseline.trimmed_mean_half_width().powi(2)).sqrt();
        Delta { delta, half_width, relative: delta / baseline.trimmed_mean }
    }

    /// True when zero lies outside the interval.
    pub fn significant(&self) -> bool {
        self.delta.abs() > self.half_width
    }
}

/// A relative precision target such as `1%` or `0.01`.
pub fn parse_precision(s: &str) -> Result<f64> {
    let t = s.trim();
    let (num, pct) = match t.strip_suffix('%') {
        Some(n) => (n, true),
        None => (t, false),
    };
    let x: f64 = num
        .trim()
        .parse()
        .map_err(|_| Error::Invalid(format!("precision '{s}' is not a number; write e.g. 1% or 0.01")))?;
    let p = if pct || x >= 1.0 { x / 100.0 } else { x };
    if !(p > 0.0 && p < 1.0) {
        return Err(Error::Invalid(format!("precision '{s}' must be between 0 and 100 %, e.g. 1%")));
    }
    Ok(p)
}

/// The adaptive stopping test: is every quantity's location known to within `precision`?
/// The location is the median, or the trimmed mean where the median lies next to a gap
/// between modes ([`Summary::location`]): there the median jumps between modes from run to
/// run whatever its interval says, while the trimmed mean's sampling distribution is smooth.
/// The target is relative to the quantity's location, with a floor of `precision` × 2 % of
/// the side's total (a step of a few hundred ns cannot be resolved to 1 % of itself and is
/// irrelevant to the total at that level). Returns the worst quantity when not yet there.
pub fn precise_enough<'a>(
    steps: impl IntoIterator<Item = (&'a str, &'a Summary)>,
    total_median: f64,
    precision: f64,
) -> std::result::Result<(), (String, f64)> {
    let mut worst: Option<(String, f64)> = None;
    for (name, s) in steps {
        let (_, location, half_width) = s.location();
        let scale = location.max(0.02 * total_median);
        if scale <= 0.0 {
            continue;
        }
        let rel = half_width / scale;
        if rel > precision && worst.as_ref().is_none_or(|(_, w)| rel > *w) {
            worst = Some((name.to_string(), rel));
        }
    }
    match worst {
        None => Ok(()),
        Some(w) => Err(w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_type_7_and_ordered() {
        let v: Vec<f64> = (1..=10).map(|x| x as f64).collect();
        assert_eq!(quantile_sorted(&v, 0.5), 5.5);
        assert_eq!(quantile_sorted(&v, 0.0), 1.0);
        assert_eq!(quantile_sorted(&v, 1.0), 10.0);
        assert!((quantile_sorted(&v, 0.15) - 2.35).abs() < 1e-12);
        let s = Summary::of(&[5, 1, 9, 3, 7, 100, 2, 2, 8, 4], &Quantiles::default());
        let q: Vec<f64> = s.quantiles.values().copied().collect();
        assert!(q.windows(2).all(|w| w[0] <= w[1]));
        assert!(s.min <= q[0] && q[q.len() - 1] <= s.max);
        assert!(s.median_ci[0] <= s.median && s.median <= s.median_ci[1]);
    }

    #[test]
    fn median_ci_ranks_match_tables() {
        // Classic table values (1-based): n=10 → (2, 9); n=20 → (6, 15); n=100 → (40, 61).
        assert_eq!(median_ci_ranks(10), (1, 8));
        assert_eq!(median_ci_ranks(20), (5, 14));
        assert_eq!(median_ci_ranks(100), (39, 60));
        let (lo, hi) = median_ci_ranks(10_000);
        assert!(lo > 4880 && lo < 4910 && hi > 5090 && hi < 5120, "{lo} {hi}");
    }

    #[test]
    fn parsing_and_errors() {
        assert_eq!(Quantiles::parse("15,99").unwrap().0, vec![0.15, 0.5, 0.99]);
        assert_eq!(Quantiles::key(0.999), "p99.9");
        assert!(Quantiles::parse("x").unwrap_err().to_string().contains("15,50,99"));
        assert!(Quantiles::parse("150").is_err());
        // Always percent: `1,2` is p1 and p2 (not p100 and p2), `99.9,0.5` is p0.5 and p99.9.
        assert_eq!(Quantiles::parse("1,2").unwrap().0, vec![0.01, 0.02, 0.5]);
        assert_eq!(Quantiles::parse("99.9,0.5").unwrap().0, vec![0.005, 0.5, 0.999]);
        let e = Quantiles::parse("0.15,0.5,0.99").unwrap_err().to_string();
        assert!(e.contains("percentages") && e.contains("15,50,99"), "{e}");
        assert_eq!(Quantiles::parse("0.1%").unwrap().0, vec![0.001, 0.5]);
        assert!(Quantiles::parse("50,50").unwrap_err().to_string().contains("twice"));
        assert!(Quantiles::parse("15,,99").unwrap_err().to_string().contains("empty item"));
        assert!(Quantiles::parse("0").is_err() && Quantiles::parse("100").is_err());
        assert_eq!(parse_precision("1%").unwrap(), 0.01);
        assert_eq!(parse_precision("0.02").unwrap(), 0.02);
        assert!(parse_precision("0").is_err());
        assert!(parse_precision("abc").unwrap_err().to_string().contains("1%"));
    }

    /// Two tight modes (300 and 600) with 45 % / 55 % of the samples: the median lies in the
    /// upper mode, next to the gap; its interval is narrow, the gap flag says not to trust it.
    fn two_modes(n: usize, low_share: f64) -> Vec<u64> {
        (0..n)
            .map(
                |i| if (i as f64) < low_share * n as f64 { 300_000 + (i % 7) as u64 } else { 600_000 + (i % 5) as u64 },
            )
            .collect()
    }

    #[test]
    fn a_gap_next_to_the_median_is_flagged_and_the_trimmed_mean_stops_instead() {
        let qs = Quantiles::default();
        let s = Summary::of(&two_modes(1000, 0.45), &qs);
        assert!(s.median >= 600_000.0 && s.median_half_width() < 10.0, "{s:?}");
        assert!(s.median_near_gap);
        assert_eq!(s.location().0, "trimmed mean");
        // 10 % trimmed: 100 of each end dropped, 350 × ~300k and 450 × ~600k kept.
        assert!((s.trimmed_mean - (350.0 * 300_003.0 + 450.0 * 600_002.0) / 800.0).abs() < 5.0, "{}", s.trimmed_mean);
        assert!(s.trimmed_mean_ci[0] < s.trimmed_mean && s.trimmed_mean < s.trimmed_mean_ci[1]);
        // The stopping test uses the trimmed mean's interval (±~3.5 % here), not the median's.
        assert!(precise_enough([("sign", &s)], s.median, 0.01).is_err());
        assert!(precise_enough([("sign", &s)], s.median, 0.05).is_ok());
        // A gap far from the median (10 % / 90 %) is not flagged: the median is stable.
        let far = Summary::of(&two_modes(1000, 0.10), &qs);
        assert!(!far.median_near_gap && far.location().0 == "median");
        // A smooth distribution is not flagged either, nor are small samples.
        let smooth = Summary::of(&(0..1000).map(|i| 1000 + (i * 37 % 1000)).collect::<Vec<_>>(), &qs);
        assert!(!smooth.median_near_gap);
        assert!(!Summary::of(&two_modes(40, 0.5), &qs).median_near_gap);
    }

    /// Deterministic pseudo-random uniforms in (0, 1) (splitmix64).
    fn uniforms(seed: u64) -> impl Iterator<Item = f64> {
        let mut x = seed;
        std::iter::repeat_with(move || {
            x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
            let mut z = x;
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            ((z ^ (z >> 31)) >> 11) as f64 / (1u64 << 53) as f64 + 1e-12
        })
    }

    #[test]
    fn valleys_between_smeared_modes_are_flagged_smooth_skewed_data_is_not() {
        let qs = Quantiles::default();
        for seed in 1..6 {
            // ML-DSA-like: a peak per rejection round (300, 450, 600, 750 µs, shares
            // 30/23/22/25 %), each smeared by ±3 µs, and 10 % spread between the peaks: the
            // median falls at the upper edge of the 450 µs peak, next to a valley.
            let u: Vec<f64> = uniforms(seed).take(6000).collect();
            let v: Vec<u64> = u
                .chunks(3)
                .map(|c| {
                    if c[0] < 0.1 {
                        (300_000.0 + 450_000.0 * c[1]) as u64
                    } else {
                        let peak = match c[1] {
                            x if x < 0.30 => 300_000.0,
                            x if x < 0.53 => 450_000.0,
                            x if x < 0.75 => 600_000.0,
                            _ => 750_000.0,
                        };
                        (peak + 6_000.0 * (c[2] - 0.5)) as u64
                    }
                })
                .collect();
            let s = Summary::of(&v, &qs);
            assert!(s.median_near_gap, "seed {seed}: {s:?}");
            // Lognormal-like (sum of uniforms, exponentiated): smooth and skewed.
            let w: Vec<u64> = uniforms(seed + 100)
                .take(12_000)
                .collect::<Vec<_>>()
                .chunks(6)
                .map(|c| (500_000.0 * (0.4 * (c.iter().sum::<f64>() - 3.0)).exp()) as u64)
                .collect();
            assert!(!Summary::of(&w, &qs).median_near_gap, "seed {seed}");
        }
    }

    #[test]
    fn trimmed_mean_matches_hand_computation() {
        // n = 10, g = 1: kept 2..=9 → mean 5.5; winsorized sample 2,2,3,…,9,9.
        let v: Vec<f64> = (1..=10).map(|x| x as f64).collect();
        let (tm, ci) = trimmed_mean_sorted(&v, 0.10);
        assert_eq!(tm, 5.5);
        let w = [2.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 9.0];
        let wm: f64 = w.iter().sum::<f64>() / 10.0;
        let sw = (w.iter().map(|x| (x - wm) * (x - wm)).sum::<f64>() / 9.0).sqrt();
        let half = student_t_975(7.0) * sw / (0.8 * 10f64.sqrt());
        assert!((ci[1] - tm - half).abs() < 1e-9 && (tm - ci[0] - half).abs() < 1e-9);
        // t quantiles against tables: df 7 → 2.365, 30 → 2.042, 1000 → 1.962.
        for (df, t) in [(7.0, 2.365), (30.0, 2.042), (1000.0, 1.962)] {
            assert!((student_t_975(df) - t).abs() < 0.005, "df {df}: {}", student_t_975(df));
        }
        // Constant data: a zero-width interval; one sample: the sample.
        assert_eq!(trimmed_mean_sorted(&[4.0; 20], 0.1), (4.0, [4.0, 4.0]));
        assert_eq!(trimmed_mean_sorted(&[4.0], 0.1).0, 4.0);
    }

    #[test]
    fn deltas_and_precision() {
        let qs = Quantiles::default();
        let a = Summary::of(&(0..1000).map(|i| 1000 + i % 10).collect::<Vec<_>>(), &qs);
        let b = Summary::of(&(0..1000).map(|i| 2000 + i % 10).collect::<Vec<_>>(), &qs);
        let d = Delta::between(&b, &a);
        assert!((d.delta - 1000.0).abs() < 1e-9 && d.significant());
        assert!((d.relative - 1000.0 / a.median).abs() < 1e-12);
        assert!(precise_enough([("x", &a)], a.median, 0.01).is_ok());
        let wide = Summary::of(&(0..20).map(|i| 100 * i).collect::<Vec<_>>(), &qs);
        assert_eq!(precise_enough([("x", &a), ("w", &wide)], 1000.0, 0.01).unwrap_err().0, "w");
    }

    #[test]
    fn total_deltas_compare_trimmed_means_and_fall_back_to_medians() {
        let qs = Quantiles::default();
        // Two modes: the median sits at one, the trimmed mean between.
        let a: Vec<u64> = (0..100).map(|i| if i < 55 { 1_000 + i } else { 2_000 + i }).collect();
        let b: Vec<u64> = (0..100).map(|i| 1_000 + i).collect();
        let (sa, sb) = (Summary::of(&a, &qs), Summary::of(&b, &qs));
        let d = Delta::between_trimmed(&sa, &sb);
        assert_eq!(d.delta, sa.trimmed_mean - sb.trimmed_mean);
        assert_eq!(d.relative, d.delta / sb.trimmed_mean);
        let hw = (sa.trimmed_mean_half_width().powi(2) + sb.trimmed_mean_half_width().powi(2)).sqrt();
        assert_eq!(d.half_width, hw);
        assert_ne!(d.delta, Delta::between(&sa, &sb).delta);
        // A record of before (no trimmed mean): medians.
        let old = Summary { trimmed_mean: 0.0, ..sb.clone() };
        assert_eq!(Delta::between_trimmed(&sa, &old), Delta::between(&sa, &old));
    }
}
