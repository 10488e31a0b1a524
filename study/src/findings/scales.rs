//! The scale each metric is modelled on (logarithms for speeds, bytes
//! for memory, plain shares and divergences), which metrics a study tests
//! and which are modelled at all, and the least noise and the least
//! anomaly believed on each.

use crate::metric::{Goal, Metric, Scale};

/// An anomaly is at least this many times off its prediction…
pub const ANOMALY_RATIO: f64 = 1.5;
/// …and its residual beyond this family-wise chance.
pub(super) const ANOMALY_ALPHA: f64 = 0.01;
/// Whether settings' effects on `metric` are modelled at all. Context
/// tokens is a step between the probed sizes, often 0: neither a ratio nor
/// a difference of it is a model anyone should act on, so its best and its
/// front are reported and its effects are not claimed. Goodput is 0 for a
/// configuration that held the objective at no rate, and a search's steps
/// between rates: the same.
pub fn modelled(metric: Metric) -> bool {
    !matches!(metric, Metric::ContextTokens | Metric::GoodputRps)
}

/// Whether `metric` is modeled on a log scale: speeds, times and
/// perplexity, not rates, divergences or memory.
pub fn log_scale(metric: Metric) -> bool {
    metric.scale() == Scale::Ratio && !in_bytes(metric)
}

/// Whether `metric` is memory, modelled in bytes (with the planner's
/// prediction where there is one: see [`super::planned`]) and told as
/// ratios: a
/// configuration's memory is a sum of parts (weights, caches, buffers),
/// each at most a product of two settings (context × bytes per cache
/// element), which pairs of settings fit exactly and logarithms do not:
/// on a log scale what the model leaves over passes for effects of
/// settings that cannot move memory.
pub fn in_bytes(metric: Metric) -> bool {
    metric.name().ends_with("_bytes")
}

/// The least noise believed on a metric's scale: 0.01 % on a log scale,
/// a tenth of a point on a rate, 0.00001 nats of divergence. Spreads
/// smaller than that are rounding, and effects that small are no one's
/// concern.
pub(super) fn noise_floor(metric: Metric) -> f64 {
    match metric.scale() {
        Scale::Ratio if in_bytes(metric) => 1.0,
        Scale::Ratio => 1e-4f64.powi(2),
        Scale::Rate => 1e-6,
        Scale::Difference => 1e-10,
    }
}

/// The least a trial must be off its prediction to be an anomaly: a
/// factor of [`ANOMALY_RATIO`] (of the baseline's `base` for memory), ten
/// points of a rate, 0.01 nats.
pub(super) fn anomaly_gap(metric: Metric, base: f64) -> f64 {
    match metric.scale() {
        Scale::Ratio if in_bytes(metric) => (ANOMALY_RATIO - 1.0) * base.abs(),
        Scale::Ratio => ANOMALY_RATIO.ln(),
        Scale::Rate => 0.1,
        Scale::Difference => 0.01,
    }
}

/// The metrics to test settings against: the objectives, then every speed,
/// memory and quality measure most done trials have.
pub(super) fn tested_metrics(
    done: &[&super::TrialFacts],
    objectives: &[(Metric, Goal)],
) -> Vec<(Metric, Goal)> {
    let mut out = objectives.to_vec();
    let quality = Metric::ALL.into_iter().filter(|m| m.measures_quality());
    for m in super::GAINS.into_iter().chain(quality) {
        let measured = done.iter().filter(|t| t.metrics.contains_key(&m)).count();
        if measured * 2 > done.len() && !out.iter().any(|(o, _)| *o == m) {
            out.push((m, m.natural_goal()));
        }
    }
    out
}
