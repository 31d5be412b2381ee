//! The percentile bootstrap, from a seeded generator: the same interval for the same data (a
//! report regenerated from the same records shows the same numbers).

/// A small deterministic generator (xorshift64*), seeded by the caller.
#[derive(Clone, Debug)]
pub struct SeededRng(u64);

impl SeededRng {
    /// A generator starting from `seed` (not 0: xorshift stays at 0).
    pub fn new(seed: u64) -> SeededRng {
        SeededRng(seed)
    }

    /// A uniform index in `0..n` (`n` > 0).
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n
    }
}

/// The change of a median against another's, with its percentile-bootstrap ~95 % interval, ns.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct MedianChange {
    pub delta_ns: f64,
    pub low_ns: f64,
    pub high_ns: f64,
}

/// The lower median (rank ⌊(n − 1)/2⌋) of a non-empty sample; reorders it.
fn lower_median(v: &mut [u64]) -> u64 {
    let k = (v.len() - 1) / 2;
    *v.select_nth_unstable(k).1
}

/// The change of the (lower) median of `a` against `b`, with a percentile-bootstrap ~95 %
/// interval: both samples resampled with replacement `resamples` times, from a generator
/// seeded with `seed`. `None` when either sample is empty or `resamples` is 0.
pub fn median_change(a: &[u64], b: &[u64], resamples: usize, seed: u64) -> Option<MedianChange> {
    if a.is_empty() || b.is_empty() || resamples == 0 {
        return None;
    }
    let mut rng = SeededRng::new(seed);
    let delta_ns = lower_median(&mut a.to_vec()) as f64 - lower_median(&mut b.to_vec()) as f64;
    let mut diffs = Vec::with_capacity(resamples);
    let (mut ra, mut rb) = (vec![0; a.len()], vec![0; b.len()]);
    for _ in 0..resamples {
        for x in ra.iter_mut() {
            *x = a[rng.below(a.len())];
        }
        for x in rb.iter_mut() {
            *x = b[rng.below(b.len())];
        }
        diffs.push(lower_median(&mut ra) as f64 - lower_median(&mut rb) as f64);
    }
    diffs.sort_by(f64::total_cmp);
    let at = |q: f64| diffs[((q * resamples as f64) as usize).min(resamples - 1)];
    Some(MedianChange { delta_ns, low_ns: at(0.025), high_ns: at(0.975) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::histogram;
    use crate::stats::histogram::recorded_values;

    /// The values of an HdrHistogram of `values` (as the reports resample them).
    fn recorded(values: impl Iterator<Item = u64>) -> Vec<u64> {
        let mut h = histogram();
        for v in values {
            h.record(v).unwrap();
        }
        recorded_values(&h)
    }

    #[test]
    fn the_median_change_has_a_bootstrap_interval_around_it() {
        let base = recorded((0..1000).map(|i| 1_000_000 + i * 100));
        let same = median_change(&base, &base, 400, 7).unwrap();
        assert_eq!(same.delta_ns, 0.0);
        assert!(same.low_ns <= 0.0 && 0.0 <= same.high_ns, "{same:?}");
        let later = recorded((0..1000).map(|i| 1_200_000 + i * 100));
        let c = median_change(&later, &base, 400, 7).unwrap();
        // 3 significant digits: 200 µs ± the bucket widths.
        assert!((c.delta_ns - 200_000.0).abs() <= 2_000.0, "{c:?}");
        assert!(c.low_ns <= c.delta_ns && c.delta_ns <= c.high_ns, "{c:?}");
        assert!(c.low_ns > 150_000.0 && c.high_ns < 250_000.0, "{c:?}");
        assert!(median_change(&[], &base, 400, 7).is_none());
    }

    #[test]
    fn the_same_seed_gives_the_same_interval() {
        let a: Vec<u64> = (0..300).map(|i| 1_000 + (i * 7919) % 500).collect();
        let b: Vec<u64> = (0..200).map(|i| 1_100 + (i * 104_729) % 700).collect();
        assert_eq!(median_change(&a, &b, 200, 42), median_change(&a, &b, 200, 42));
        assert_ne!(median_change(&a, &b, 200, 42), median_change(&a, &b, 200, 43));
    }
}
