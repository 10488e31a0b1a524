//! Summary statistics of repeated measurements.

use serde::{Deserialize, Serialize};

/// The spread of repeated measurements of one quantity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stats {
    pub n: usize,
    pub median: f64,
    pub mean: f64,
    /// 10th and 90th percentiles (linear interpolation).
    pub p10: f64,
    pub p90: f64,
    /// Coefficient of variation: standard deviation over mean (0 for one value).
    pub cv: f64,
}

impl Stats {
    /// Statistics of the finite values; `None` when there are none.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Option<Self> {
        let mut v: Vec<f64> = values.into_iter().filter(|x| x.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let mean = v.iter().sum::<f64>() / n as f64;
        let var = if n > 1 {
            v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64
        } else {
            0.0
        };
        let cv = if mean != 0.0 { var.sqrt() / mean.abs() } else { 0.0 };
        Some(Self {
            n,
            median: percentile(&v, 0.5),
            mean,
            p10: percentile(&v, 0.1),
            p90: percentile(&v, 0.9),
            cv,
        })
    }
}

/// The `q` quantile of sorted values, interpolating linearly.
fn percentile(sorted: &[f64], q: f64) -> f64 {
    let pos = q * (sorted.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    sorted[lo] + (sorted[hi] - sorted[lo]) * (pos - lo as f64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_percentiles_and_spread() {
        let median = |v: &[f64]| Stats::of(v.iter().copied()).map(|s| s.median);
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        let s = Stats::of((1..=11).map(f64::from)).unwrap();
        assert_eq!((s.n, s.median, s.p10, s.p90, s.mean), (11, 6.0, 2.0, 10.0, 6.0));
        assert!((s.cv - 3.3166 / 6.0).abs() < 1e-3, "{}", s.cv);
        let one = Stats::of([5.0, f64::NAN]).unwrap();
        assert_eq!((one.n, one.cv, one.p10, one.p90), (1, 0.0, 5.0, 5.0));
    }
}
