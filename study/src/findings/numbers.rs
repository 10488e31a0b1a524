//! How findings write numbers: values in their units, changes on each
//! metric's scale (ratios, points, differences) and their intervals.

use super::Interval;
use crate::metric::{Measure, Metric, Scale};

/// A number as reports show it: three significant digits or whole.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2} G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} M", x / 1e6)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A metric's value as [`value_text`] writes it; a setting's as the
/// number it is (a whole one without decimals: a context of 32768).
pub(super) fn measure_text(measure: &Measure, x: f64) -> String {
    match measure {
        Measure::Metric(m) => value_text(*m, x),
        Measure::Setting(_) if x.fract() == 0.0 && x.abs() < 1e15 => format!("{x:.0}"),
        Measure::Setting(_) => num(x),
    }
}

/// A metric's value as reports show it: memory in MiB or GiB, shares in
/// percent, a divergence to its first digits, anything else as a plain
/// number.
pub fn value_text(metric: Metric, x: f64) -> String {
    let name = metric.name();
    if name.ends_with("_bytes") {
        let gib = x / (1u64 << 30) as f64;
        if gib >= 1.0 {
            format!("{gib:.2} GiB")
        } else {
            format!("{:.0} MiB", x / (1u64 << 20) as f64)
        }
    } else {
        match metric.scale() {
            Scale::Rate => format!("{:.1} %", x * 100.0),
            Scale::Difference => small(x),
            Scale::Ratio => num(x),
        }
    }
}

/// A value that may be tiny (a KL divergence of 0.000012): four decimals,
/// or three significant digits below a thousandth.
pub(super) fn small(x: f64) -> String {
    if x == 0.0 || x.abs() >= 1e-3 { format!("{x:.4}") } else { format!("{x:.2e}") }
}

/// [`small`] with its sign.
pub(super) fn signed(x: f64) -> String {
    if x < 0.0 { format!("−{}", small(-x)) } else { format!("+{}", small(x)) }
}

/// An estimate against the baseline: `0.40× [0.37, 0.43]` for a ratio,
/// `−3.1 points [−5.0, −1.2]` for a rate's difference, `+0.0038 [+0.0031,
/// +0.0045]` for a plain difference.
pub(super) fn interval_text(metric: Metric, i: &Interval) -> String {
    match metric.scale() {
        Scale::Ratio => ratio_text(i),
        Scale::Rate => {
            format!("{:+.1} points [{:+.1}, {:+.1}]", i.est * 100.0, i.lo * 100.0, i.hi * 100.0)
        }
        Scale::Difference => format!("{} [{}, {}]", signed(i.est), signed(i.lo), signed(i.hi)),
    }
}

pub(super) fn ratio_text(i: &Interval) -> String {
    format!("{:.2}× [{:.2}, {:.2}]", i.est, i.lo, i.hi)
}

/// A change on `metric`'s scale with no interval: `1.20×`, `+3.0 points`.
pub(super) fn change_size(metric: Metric, x: f64) -> String {
    match metric.scale() {
        Scale::Ratio => format!("{x:.2}×"),
        Scale::Rate => format!("{:+.1} points", x * 100.0),
        Scale::Difference => signed(x),
    }
}

/// An equivalence margin as a reader gets it: `±3 %`, `±2.0 points`,
/// `±0.0100` (`margin`: percent for ratios, else on the metric's scale).
pub(super) fn within_text(metric: Metric, margin: f64) -> String {
    match metric.scale() {
        Scale::Ratio => format!("±{margin:.0} %"),
        Scale::Rate => format!("±{:.1} points", margin * 100.0),
        Scale::Difference => format!("±{}", small(margin)),
    }
}
