//! Estimators over a recorded distribution (an HdrHistogram of ns values): a quantile with its
//! distribution-free ~95 % interval ([`QuantileInterval`]), and the difference and ratio of two
//! such quantiles of independent samples, their intervals combined ([`QuantileDifference`]).
//!
//! **A quantile's interval**: order statistics — the values at the quantiles
//! q ± 1.96·√(q(1−q)/n) of the histogram. **A difference** of two quantiles: each side's
//! distance from its quantile to its interval's end, combined in quadrature (lower end: the
//! first's lower and the second's upper distance, and vice versa). **A ratio**: the same with
//! relative distances. Intervals of 0 width mean every value of both fell in one histogram
//! bucket (0.1 % wide).

use hdrhistogram::Histogram;

/// The normal quantile of a two-sided ~95 % interval.
const Z_95: f64 = 1.96;

/// A quantile of a recorded distribution with its ~95 % interval, ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileInterval {
    pub value_ns: f64,
    pub low_ns: f64,
    pub high_ns: f64,
    /// Values recorded.
    pub n: u64,
}

impl QuantileInterval {
    /// Quantile `q` of `h` and its order-statistic ~95 % interval; `None` for an empty
    /// histogram.
    pub fn of(h: &Histogram<u64>, q: f64) -> Option<QuantileInterval> {
        let n = h.len();
        if n == 0 {
            return None;
        }
        let half = Z_95 * (q * (1.0 - q) / n as f64).sqrt();
        Some(QuantileInterval {
            value_ns: h.value_at_quantile(q) as f64,
            low_ns: h.value_at_quantile((q - half).max(0.0)) as f64,
            high_ns: h.value_at_quantile((q + half).min(1.0)) as f64,
            n,
        })
    }

    /// `self − baseline`, with its interval, and the ratio `self / baseline`, with its
    /// interval (NaN when either quantile is 0).
    pub fn difference(&self, baseline: &QuantileInterval) -> QuantileDifference {
        let (a, b) = (self, baseline);
        let (a_lo, a_hi) = (a.value_ns - a.low_ns, a.high_ns - a.value_ns);
        let (b_lo, b_hi) = (b.value_ns - b.low_ns, b.high_ns - b.value_ns);
        let delta_ns = a.value_ns - b.value_ns;
        let low_ns = delta_ns - a_lo.hypot(b_hi);
        let high_ns = delta_ns + a_hi.hypot(b_lo);
        if b.value_ns <= 0.0 || a.value_ns <= 0.0 {
            let nan = f64::NAN;
            return QuantileDifference { delta_ns, low_ns, high_ns, ratio: nan, ratio_low: nan, ratio_high: nan };
        }
        let ratio = a.value_ns / b.value_ns;
        let rel = |x: f64, m: f64| x / m;
        let ratio_low = ratio * (1.0 - rel(a_lo, a.value_ns).hypot(rel(b_hi, b.value_ns)));
        let ratio_high = ratio * (1.0 + rel(a_hi, a.value_ns).hypot(rel(b_lo, b.value_ns)));
        QuantileDifference { delta_ns, low_ns, high_ns, ratio, ratio_low, ratio_high }
    }
}

/// The difference of two quantiles and their ratio, each with its ~95 % interval
/// ([`QuantileInterval::difference`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QuantileDifference {
    /// This quantile − the baseline's, ns.
    pub delta_ns: f64,
    pub low_ns: f64,
    pub high_ns: f64,
    /// This quantile / the baseline's (NaN when either is 0).
    pub ratio: f64,
    pub ratio_low: f64,
    pub ratio_high: f64,
}

impl QuantileDifference {
    /// Whether the interval of the difference excludes 0.
    pub fn significant(&self) -> bool {
        self.low_ns > 0.0 || self.high_ns < 0.0
    }
}

/// Every value of a histogram, each recorded value repeated by its count (at the top of its
/// bucket: HdrHistogram's 3 significant digits), for resampling.
pub fn recorded_values(h: &Histogram<u64>) -> Vec<u64> {
    let mut v = Vec::with_capacity(h.len() as usize);
    for x in h.iter_recorded() {
        v.extend(std::iter::repeat_n(h.highest_equivalent(x.value_iterated_to()), x.count_at_value() as usize));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::histogram;

    fn recorded(values: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = histogram();
        for (v, n) in values {
            h.record_n(*v, *n).unwrap();
        }
        h
    }

    #[test]
    fn the_median_interval_and_the_difference_by_hand() {
        // 10 002 431 and 12 001 279 ns are the tops of their HdrHistogram buckets (8 192 ns
        // wide): stored exactly.
        let (a, b) = (10_002_431u64, 12_001_279u64);
        let one = QuantileInterval::of(&recorded(&[(a, 100)]), 0.5).unwrap();
        assert_eq!((one.value_ns, one.low_ns, one.high_ns, one.n), (a as f64, a as f64, a as f64, 100));
        // 50 at a, 50 at b: the median is a (rank 50 of 100); ½ ± 1.96·√(¼/100) = 0.402…0.598.
        let two = QuantileInterval::of(&recorded(&[(a, 50), (b, 50)]), 0.5).unwrap();
        assert_eq!((two.value_ns, two.low_ns, two.high_ns), (a as f64, a as f64, b as f64));
        // two − one: delta 0, lower end 0 − √(0² + 0²), upper end 0 + √((b − a)² + 0²).
        let d = two.difference(&one);
        assert_eq!((d.delta_ns, d.low_ns, d.high_ns), (0.0, 0.0, (b - a) as f64));
        assert_eq!((d.ratio, d.ratio_low), (1.0, 1.0));
        assert!((d.ratio_high - (1.0 + (b - a) as f64 / a as f64)).abs() < 1e-12, "{}", d.ratio_high);
        assert!(!d.significant());
        assert!(QuantileInterval::of(&histogram(), 0.5).is_none());
    }

    #[test]
    fn a_quantile_interval_narrows_with_n_and_a_zero_baseline_has_no_ratio() {
        // 1..=1000 µs once each: p90's interval is 0.9 ± 1.96·√(0.09/1000), about ±18.6 values.
        let h = recorded(&(1..=1000).map(|i| (i * 1000, 1)).collect::<Vec<_>>());
        let p90 = QuantileInterval::of(&h, 0.9).unwrap();
        assert!(p90.low_ns < p90.value_ns && p90.value_ns < p90.high_ns, "{p90:?}");
        assert!((p90.high_ns - p90.low_ns - 37_000.0).abs() < 2_000.0, "{p90:?}");
        let wide = QuantileInterval::of(&recorded(&(1..=100).map(|i| (i * 10_000, 1)).collect::<Vec<_>>()), 0.9);
        let wide = wide.unwrap();
        assert!((wide.high_ns - wide.low_ns) / wide.value_ns > (p90.high_ns - p90.low_ns) / p90.value_ns);
        let zero = QuantileInterval { value_ns: 0.0, low_ns: 0.0, high_ns: 0.0, n: 1 };
        let d = p90.difference(&zero);
        assert_eq!(d.delta_ns, p90.value_ns);
        assert!(d.ratio.is_nan() && d.ratio_low.is_nan() && d.ratio_high.is_nan());
        assert_eq!(recorded_values(&recorded(&[(5, 2), (7, 1)])), [5, 5, 7]);
    }
}
