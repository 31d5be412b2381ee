//! Rates: the mean of per-second counts with its ~95 % interval, and the ratio of two such
//! estimates with their relative errors combined. One run gives one rate; its spread comes from
//! the rate measured every second of the run (a load's `per_second`, completed requests per
//! second).

/// A mean with the half-width of its ~95 % interval.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Estimate {
    pub mean: f64,
    pub half_width: f64,
}

impl Estimate {
    /// The mean of per-second counts and its ~95 % interval (1.96 standard errors, the sample
    /// standard deviation over √n); `None` under two seconds.
    pub fn of_counts(per_second: &[u64]) -> Option<Estimate> {
        let n = per_second.len();
        if n < 2 {
            return None;
        }
        let mean = per_second.iter().sum::<u64>() as f64 / n as f64;
        let var = per_second.iter().map(|x| (*x as f64 - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        Some(Estimate { mean, half_width: 1.96 * (var / n as f64).sqrt() })
    }

    /// The half-width relative to the mean (`None` for a mean of 0 or less).
    pub fn relative_half_width(&self) -> Option<f64> {
        (self.mean > 0.0).then(|| self.half_width / self.mean)
    }

    /// `self / by` with its half-width (relative errors combined in quadrature: independent
    /// runs); `None` when either mean is 0 or less.
    pub fn ratio(self, by: Estimate) -> Option<Estimate> {
        if self.mean <= 0.0 || by.mean <= 0.0 {
            return None;
        }
        let r = self.mean / by.mean;
        let rel = ((self.half_width / self.mean).powi(2) + (by.half_width / by.mean).powi(2)).sqrt();
        Some(Estimate { mean: r, half_width: r * rel })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spreads_come_from_per_second_counts_and_ratios_combine_them() {
        assert_eq!(Estimate::of_counts(&[5]), None);
        let e = Estimate::of_counts(&[90, 110, 100, 100]).unwrap();
        assert_eq!(e.mean, 100.0);
        // stdev √(200/3), standard error stdev/2.
        assert!((e.half_width - 1.96 * (200.0f64 / 3.0).sqrt() / 2.0).abs() < 1e-9, "{e:?}");
        let r = Estimate { mean: 200.0, half_width: 4.0 }.ratio(Estimate { mean: 100.0, half_width: 3.0 }).unwrap();
        assert_eq!(r.mean, 2.0);
        assert!((r.half_width - 2.0 * (0.02f64.powi(2) + 0.03f64.powi(2)).sqrt()).abs() < 1e-12);
        assert_eq!(Estimate { mean: 1.0, half_width: 0.1 }.ratio(Estimate { mean: 0.0, half_width: 0.0 }), None);
        assert_eq!(Estimate { mean: 0.0, half_width: 1.0 }.relative_half_width(), None);
    }
}
