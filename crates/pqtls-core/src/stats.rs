//! Statistics over samples of one quantity (ns): quantiles, a distribution-free confidence
//! interval of the median, adaptive stopping and differences against a baseline.

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
        Summary {
            n,
            min: v[0],
            max: v[n - 1],
            mean,
            stdev: var.sqrt(),
            quantiles: qs.0.iter().map(|&q| (Quantiles::key(q), quantile_sorted(v, q))).collect(),
            median: quantile_sorted(v, 0.5),
            median_ci: [v[lo], v[hi]],
        }
    }

    /// Half-width of the median's confidence interval.
    pub fn median_half_width(&self) -> f64 {
        (self.median_ci[1] - self.median_ci[0]) / 2.0
    }
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

/// The adaptive stopping test: is every step's median known to within `precision`?
/// The target is relative to the step's median, with a floor of `precision` × 2 % of the
/// side's total (a step of a few hundred ns cannot be resolved to 1 % of itself and is
/// irrelevant to the total at that level). Returns the worst step when not yet there.
pub fn precise_enough<'a>(
    steps: impl IntoIterator<Item = (&'a str, &'a Summary)>,
    total_median: f64,
    precision: f64,
) -> std::result::Result<(), (String, f64)> {
    let mut worst: Option<(String, f64)> = None;
    for (name, s) in steps {
        let scale = s.median.max(0.02 * total_median);
        if scale <= 0.0 {
            continue;
        }
        let rel = s.median_half_width() / scale;
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
}
