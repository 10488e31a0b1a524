//! How a change in a metric is told when two trials or studies are set
//! side by side: speeds, times and memory as a percent of the first;
//! shares (quality, recall, same top token) as a difference in points;
//! divergences as a difference in nats. Never a percent of something near 0.

use crate::types::{Metric, MetricScale};

/// The scale a metric's change is told on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    Percent,
    Points,
    Nats,
}

/// The scale of the metric named `metric`, as the metric list says
/// ([`Metric::scale`]); a setting's value changes by percent.
pub fn scale(metric: &str) -> Scale {
    match Metric::parse(metric).map(Metric::scale) {
        Some(MetricScale::Rate) => Scale::Points,
        Some(MetricScale::Difference) => Scale::Nats,
        Some(MetricScale::Ratio) | None => Scale::Percent,
    }
}

/// The change from `from` to `to` on `metric`'s scale; `None` for a
/// percent of 0.
pub fn change(metric: &str, from: f64, to: f64) -> Option<f64> {
    match scale(metric) {
        Scale::Percent => (from != 0.0).then(|| (to / from - 1.0) * 100.0),
        Scale::Points => Some((to - from) * 100.0),
        Scale::Nats => Some(to - from),
    }
}

/// A change as [`change`] gives it, with its unit: `+25.0 %`, `−12.5
/// points`, `+0.0035 nats`.
pub fn change_text(metric: &str, x: f64) -> String {
    let sign = if x < 0.0 { "−" } else { "+" };
    let a = x.abs();
    match scale(metric) {
        Scale::Percent => format!("{sign}{a:.1} %"),
        Scale::Points => format!("{sign}{a:.1} points"),
        Scale::Nats if a != 0.0 && a < 1e-3 => format!("{sign}{a:.2e} nats"),
        Scale::Nats => format!("{sign}{a:.4} nats"),
    }
}

/// The median of `changes` with the way it went in words that agree
/// with its sign: `−9.3 % (worse)` for a speed that fell.
pub fn median_text(metric: &str, more_is_better: bool, mut changes: Vec<f64>) -> Option<String> {
    changes.sort_by(f64::total_cmp);
    let m = *changes.get(changes.len() / 2)?;
    let way = if m == 0.0 {
        "the same"
    } else if (m > 0.0) == more_is_better {
        "better"
    } else {
        "worse"
    };
    Some(format!("{} ({way})", change_text(metric, m)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_and_divergences_change_by_difference_never_by_percent() {
        assert_eq!(change("decode_tps", 10.0, 12.5), Some(25.0));
        assert_eq!(change("decode_tps", 0.0, 1.0), None);
        // A divergence from 0.00000 to 0.00347 is no "+346600 %".
        let kld = change("kld_mean", 1e-8, 0.00347).unwrap();
        assert_eq!(change_text("kld_mean", kld), "+0.0035 nats");
        assert_eq!(change_text("kld_mean", -0.0004), "−4.00e-4 nats");
        // One question of eight: points, not "−20 %".
        let q = change("quality_score", 0.625, 0.5).unwrap();
        assert_eq!(change_text("quality_score", q), "−12.5 points");
        assert_eq!(change_text("peak_rss_bytes", -25.0), "−25.0 %");
    }

    #[test]
    fn the_median_s_words_agree_with_its_sign() {
        let slower = median_text("decode_tps", true, vec![-9.3, -20.0, 4.0]);
        assert_eq!(slower.as_deref(), Some("−9.3 % (worse)"));
        let smaller = median_text("peak_rss_bytes", false, vec![-10.0]);
        assert_eq!(smaller.as_deref(), Some("−10.0 % (better)"));
        let same = median_text("kld_mean", false, vec![0.0]);
        assert_eq!(same.as_deref(), Some("+0.0000 nats (the same)"));
        assert_eq!(median_text("decode_tps", true, vec![]), None);
    }
}
