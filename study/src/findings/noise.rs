//! The measurement model of each metric: how much of a trial's value is
//! noise, worked out from what the study itself measured, so that no
//! effect is claimed that the machine or the questions could have made.
//!
//! - **A trial's own requests.** A speed is the median of a trial's
//!   measured requests; their spread says how far that median could have
//!   fallen otherwise (the variance of a median of `n` is about
//!   π/2 · s²/`n`). One request far slower than its siblings moves the
//!   median little, and the spread of one trial moves the pooled figure
//!   little: the study's floor is the median over its trials.
//! - **The baseline run again.** What a trial's requests share (another
//!   process, the clock, heat) shows only between trials: the baseline's
//!   runs through the study give it, from the differences of successive
//!   runs so that a slow drift does not count as noise. Their drift itself
//!   is taken out of every speed before it is modelled, linearly between
//!   successive runs ([`Noise::drift_at`]).
//! - **Pass/fail items.** A share of a few questions or recall points
//!   judges the model on those items only: a greedy answer asked again
//!   adds nothing, and two configurations differ by chance by a binomial
//!   `p(1−p)/n` each. That variance is added to every comparison of
//!   configurations and never shrinks with more trials.
//!   Where every trial kept its verdict on each item, configurations are
//!   compared item by item instead ([`Paired`]).
//! - **A trial most of whose requests were slowed.** Another process
//!   only ever slows a request down. Where a trial's median request is
//!   far slower than its fastest (beyond what the study's trials spread
//!   within themselves, and by a fifth at least), most of its requests
//!   were slowed and its median with them: the trial measured the machine,
//!   not its settings, and is left out of that speed's model ([`slowed`]).
//! - **A system-wide metric** (the fall in the machine's available
//!   memory) moves with everything else the machine runs: no effect is
//!   claimed from it unless the baseline's runs show its noise.

use std::f64::consts::FRAC_PI_2;

use statrs::distribution::{ChiSquared, ContinuousCDF};

use super::TrialFacts;
use super::paired::Paired;
use crate::metric::{Metric, Scale};

/// What the study measured of one metric's noise, on the scale its model
/// is fitted on (a log for ratios).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Noise {
    /// The variance of a trial's value from its own requests (median over
    /// the trials that had at least two), and how many trials had them.
    pub repeats: Option<(f64, usize)>,
    /// The baseline's runs: (trial id, value on the model's scale), in order.
    pub baseline: Vec<(i64, f64)>,
    /// The variance of one run of the baseline beyond drift, where it ran
    /// at least twice: from the median of the differences of successive
    /// runs, so that neither a slow drift nor one bad run counts.
    pub reruns: Option<f64>,
    /// The baseline's drift a trial, where its runs show one beyond their
    /// noise (a line through them, its slope at 1 %): each value is then
    /// taken relative to the baseline at its time.
    pub drift: Option<f64>,
    /// Pass/fail items a share was counted over (median over the trials),
    /// and the per-configuration variance they allow.
    pub items: Option<(u32, f64)>,
    /// Trials left out of the model: most of their requests were slowed.
    pub slowed: Vec<i64>,
    /// Each trial's verdict on each item of a share, where all kept them.
    pub paired: Option<Paired>,
}

/// The median of |z| for a standard normal z.
const MEDIAN_ABS_NORMAL: f64 = 0.674_489_750_196_081_7;

/// At most this many repeats of one trial are read.
const MAX_REPEATS: usize = 100;

/// Whether `metric` is the machine's and not the engine's alone.
fn system_wide(metric: Metric) -> bool {
    metric == Metric::MemAvailableDropBytes
}

/// Whether a metric drifts with the machine's load: speeds and times.
fn drifts(metric: Metric) -> bool {
    matches!(metric, Metric::DecodeTps | Metric::PrefillTps | Metric::TtftMs | Metric::GoodputRps)
}

/// `v` on the scale `metric` is modelled on (`log` or as it is).
fn scaled(metric: Metric, v: f64, log: bool) -> Option<f64> {
    let y = if log && metric.scale() == Scale::Ratio { v.ln() } else { v };
    y.is_finite().then_some(y)
}

fn variance(xs: &[f64]) -> Option<f64> {
    if xs.len() < 2 {
        return None;
    }
    let mean = xs.iter().sum::<f64>() / xs.len() as f64;
    Some(xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (xs.len() - 1) as f64)
}

impl Noise {
    /// The noise of `metric` in `trials` (those done), `baseline` being the
    /// study's baseline settings.
    pub fn of(
        metric: Metric,
        trials: &[&TrialFacts],
        baseline: &engine_bridge::Settings,
        log: bool,
    ) -> Noise {
        let scaled = |m: Metric, v: f64| scaled(m, v, log);
        let mut per_trial: Vec<f64> = trials
            .iter()
            .filter_map(|t| {
                let values: Vec<f64> = t
                    .repeats
                    .get(&metric)?
                    .iter()
                    .take(MAX_REPEATS)
                    .filter_map(|v| scaled(metric, *v))
                    .collect();
                Some(variance(&values)? * FRAC_PI_2 / values.len() as f64)
            })
            .collect();
        let repeats =
            (!per_trial.is_empty()).then(|| (super::median(&mut per_trial), per_trial.len()));
        let slowed = slowed(metric, trials);
        let mut runs: Vec<(i64, f64)> = trials
            .iter()
            .filter(|t| !baseline.is_empty() && t.settings == *baseline)
            .filter(|t| !slowed.contains(&t.id))
            .filter_map(|t| Some((t.id, scaled(metric, *t.metrics.get(&metric)?)?)))
            .collect();
        runs.sort_by_key(|r| r.0);
        let reruns = (runs.len() >= 2).then(|| {
            // Robust: one run whose requests were mostly slowed moves two
            // differences, not the median of them.
            let mut steps: Vec<f64> = runs.windows(2).map(|w| (w[1].1 - w[0].1).abs()).collect();
            (super::median(&mut steps) / MEDIAN_ABS_NORMAL).powi(2) / 2.0
        });
        let repeat = repeats.map_or(0.0, |r| r.0);
        let drift = if drifts(metric) { trend(&runs, repeat) } else { None };
        let paired = metric.is_rate().then(|| Paired::of(metric, trials)).flatten();
        let items = metric.is_rate().then(|| item_variance(metric, trials)).flatten();
        // Compared item by item, two configurations differ by chance as
        // the items they answered differently say: typically, a trial's
        // from the baseline's.
        let items = match (items, &paired) {
            (Some((n, _)), Some(p)) => {
                let reference = runs.first().map(|r| r.0).or_else(|| trials.first().map(|t| t.id));
                let same = |id: i64| runs.iter().any(|r| r.0 == id);
                let typical = reference.and_then(|r| p.typical(r, same));
                Some((n, typical.map_or(0.0, |v| v / 2.0)))
            }
            (items, _) => items,
        };
        Noise { repeats, baseline: runs, reruns, drift, items, slowed, paired }
    }

    /// How far the baseline had moved from its first run when trial `id`
    /// ran (model scale): along the line through its runs, flat beyond
    /// them; 0 unless it drifted.
    pub fn drift_at(&self, id: i64) -> f64 {
        let (Some(slope), Some(first), Some(last)) =
            (self.drift, self.baseline.first(), self.baseline.last())
        else {
            return 0.0;
        };
        slope * (id.clamp(first.0, last.0) - first.0) as f64
    }

    /// The baseline's move over the study, on the model's scale, where it drifted.
    pub fn drifted_by(&self) -> Option<f64> {
        self.drift?;
        Some(self.drift_at(self.baseline.last()?.0))
    }

    /// The least variance of one trial's value believed: its requests' and
    /// the baseline's runs', whichever is larger, and for a share the
    /// items' (unless compared item by item: each contrast then carries
    /// its own items' chance, see [`Analysis::contrast_among`]).
    ///
    /// [`Analysis::contrast_among`]: super::analysis::Analysis::contrast_among
    pub fn floor(&self) -> f64 {
        let items = self.items.filter(|_| self.paired.is_none()).map(|i| i.1);
        [self.repeats.map(|r| r.0), self.reruns_at_least(), items]
            .into_iter()
            .flatten()
            .fold(0.0, f64::max)
    }

    /// The least the baseline's runs show of one run's variance, at 95 %:
    /// a few runs may spread little by luck, and a floor must not pass
    /// for more noise than they show.
    fn reruns_at_least(&self) -> Option<f64> {
        let df = self.baseline.len().checked_sub(1).filter(|d| *d > 0)? as f64;
        let chi2 = ChiSquared::new(df).ok()?.inverse_cdf(0.95);
        Some(self.reruns? * df / chi2)
    }

    /// The variance chance adds to a comparison of `configurations`
    /// configurations' values that their items do not share out: 0 but
    /// for shares of a few items (compared item by item: typically).
    pub fn between(&self, configurations: usize) -> f64 {
        self.items.map_or(0.0, |(_, v)| v * configurations as f64)
    }

    /// Whether an effect on the metric may be claimed at all: a
    /// system-wide metric only when the baseline's runs show its noise.
    pub fn claimable(&self, metric: Metric) -> bool {
        !system_wide(metric) || self.reruns.is_some()
    }
}

/// A trial's median request is this many times the spread the study's
/// trials show within themselves beyond its fastest, at least, before its
/// value is taken to rest on slowed requests.
const SLOWED_SPREADS: f64 = 6.0;

/// And at least this much slower (log): a fifth.
const SLOWED_AT_LEAST: f64 = 0.182_321_556_793_954_6;

/// The trials of a speed whose value rests on slowed requests: their
/// median request slower than their fastest by more than
/// [`SLOWED_SPREADS`] times the study's typical spread within a trial (the
/// median over its trials of their requests' standard deviation, on a
/// log scale) and by a fifth at least. A request is only ever slowed by
/// what else the machine runs, never sped up, so the fastest is the
/// trial's least disturbed; one slow request of three leaves the median
/// alone, two move it. Trials of fewer than three requests are kept.
pub fn slowed(metric: Metric, trials: &[&TrialFacts]) -> Vec<i64> {
    if !drifts(metric) {
        return vec![];
    }
    // Oriented so that slower is larger: times grow, rates fall.
    let sign = if metric == Metric::TtftMs { 1.0 } else { -1.0 };
    let logs = |t: &TrialFacts| -> Option<Vec<f64>> {
        let values: Vec<f64> = t
            .repeats
            .get(&metric)?
            .iter()
            .take(MAX_REPEATS)
            .filter(|v| **v > 0.0 && v.is_finite())
            .map(|v| sign * v.ln())
            .collect();
        (values.len() >= 3).then_some(values)
    };
    let mut spreads: Vec<f64> =
        trials.iter().filter_map(|t| variance(&logs(t)?)).map(f64::sqrt).collect();
    if spreads.len() < 3 {
        return vec![];
    }
    let cutoff = (SLOWED_SPREADS * super::median(&mut spreads)).max(SLOWED_AT_LEAST);
    trials
        .iter()
        .filter(|t| {
            let Some(mut values) = logs(t) else { return false };
            let fastest = values.iter().copied().fold(f64::INFINITY, f64::min);
            super::median(&mut values) - fastest > cutoff
        })
        .map(|t| t.id)
        .collect()
}

/// The slope of the line through the baseline's `runs` (trial id →
/// value), where it is beyond their noise at 1 %: the median of the
/// slopes between pairs of runs (Theil–Sen), judged against the runs'
/// robust spread about it and at least a run's `repeat` variance, so
/// that one run whose requests were mostly slowed neither makes a drift
/// nor hides one. Four runs at least: the spread of fewer says nothing.
fn trend(runs: &[(i64, f64)], repeat: f64) -> Option<f64> {
    let k = runs.len();
    if k < 4 {
        return None;
    }
    let mut slopes: Vec<f64> = Vec::new();
    for (i, a) in runs.iter().enumerate() {
        for b in &runs[i + 1..] {
            if b.0 != a.0 {
                slopes.push((b.1 - a.1) / (b.0 - a.0) as f64);
            }
        }
    }
    if slopes.is_empty() {
        return None;
    }
    let slope = super::median(&mut slopes);
    let mut offsets: Vec<f64> = runs.iter().map(|r| r.1 - slope * r.0 as f64).collect();
    let middle = super::median(&mut offsets);
    let mut spread: Vec<f64> = offsets.iter().map(|o| (o - middle).abs()).collect();
    let sd = (super::median(&mut spread) / MEDIAN_ABS_NORMAL).max(repeat.sqrt()).max(1e-6);
    let n = k as f64;
    let mx = runs.iter().map(|r| r.0 as f64).sum::<f64>() / n;
    let sxx: f64 = runs.iter().map(|r| (r.0 as f64 - mx).powi(2)).sum();
    let t = slope * sxx.sqrt() / sd;
    (t.abs() > super::ols::t_quantile(1.0 - super::ALPHA, k - 2)).then_some(slope)
}

/// The binomial variance of a share over its items, for one
/// configuration: the median item count over the trials that say it, and
/// `p(1−p)/n` at the mean share (shrunk off 0 and 1 by half an item, so
/// that a suite every configuration passes still has a variance).
fn item_variance(metric: Metric, trials: &[&TrialFacts]) -> Option<(u32, f64)> {
    let mut counts: Vec<f64> =
        trials.iter().filter_map(|t| t.items.get(&metric)).map(|n| *n as f64).collect();
    let values: Vec<f64> = trials.iter().filter_map(|t| t.metrics.get(&metric).copied()).collect();
    if counts.is_empty() || values.is_empty() {
        return None;
    }
    let n = super::median(&mut counts).max(1.0);
    let mean = values.iter().sum::<f64>() / values.len() as f64;
    let p = (mean * n + 0.5) / (n + 1.0);
    Some((n.round() as u32, p * (1.0 - p) / n))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn trial(id: i64, settings: &[(&str, &str)], decode: f64, repeats: &[f64]) -> TrialFacts {
        TrialFacts {
            id,
            settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            done: true,
            metrics: BTreeMap::from([(Metric::DecodeTps, decode)]),
            repeats: BTreeMap::from([(Metric::DecodeTps, repeats.to_vec())]),
            ..Default::default()
        }
    }

    #[test]
    fn one_slow_request_moves_the_pooled_repeat_noise_little() {
        let mut trials: Vec<TrialFacts> =
            (1..=9).map(|i| trial(i, &[("t", "4")], 40.0, &[40.0, 40.4, 39.6])).collect();
        trials.push(trial(10, &[("t", "4")], 40.0, &[40.0, 40.2, 12.0]));
        let refs: Vec<&TrialFacts> = trials.iter().collect();
        let noise = Noise::of(Metric::DecodeTps, &refs, &Default::default(), true);
        let (var, n) = noise.repeats.unwrap();
        assert_eq!(n, 10);
        // About a 1 % spread a request, a median of three.
        assert!(var.sqrt() < 0.02, "{var}");
    }

    #[test]
    fn a_trial_most_of_whose_requests_were_slowed_is_left_out_one_slow_request_is_not() {
        let mut trials: Vec<TrialFacts> =
            (1..=9).map(|i| trial(i, &[("t", "4")], 40.0, &[40.0, 40.4, 39.6])).collect();
        // One slow request of three: the median is the trial's.
        trials.push(trial(10, &[("t", "4")], 40.0, &[40.0, 40.2, 12.0]));
        // Two of three: the median is the machine's.
        trials.push(trial(11, &[("t", "2")], 21.0, &[21.0, 40.1, 19.5]));
        // Slower as a whole, its requests agreeing: a setting did that.
        trials.push(trial(12, &[("t", "1")], 20.0, &[20.0, 20.2, 19.8]));
        let refs: Vec<&TrialFacts> = trials.iter().collect();
        assert_eq!(slowed(Metric::DecodeTps, &refs), [11]);
        let noise = Noise::of(Metric::DecodeTps, &refs, &Default::default(), true);
        assert_eq!(noise.slowed, [11]);
        // Times are slowed upwards.
        let ttft = |t: &TrialFacts| TrialFacts {
            metrics: BTreeMap::from([(Metric::TtftMs, 1000.0 / t.metrics[&Metric::DecodeTps])]),
            repeats: BTreeMap::from([(
                Metric::TtftMs,
                t.repeats[&Metric::DecodeTps].iter().map(|v| 1000.0 / v).collect(),
            )]),
            ..t.clone()
        };
        let times: Vec<TrialFacts> = trials.iter().map(ttft).collect();
        let refs: Vec<&TrialFacts> = times.iter().collect();
        assert_eq!(slowed(Metric::TtftMs, &refs), [11]);
        // Memory and shares have no requests to be slowed.
        assert!(slowed(Metric::PeakRssBytes, &refs).is_empty());
    }

    #[test]
    fn a_drifting_baseline_is_taken_out_between_its_runs() {
        let base = [("t", "4")];
        // 40 tok/s falling 1 % a trial, runs at trials 1, 11, 21 and 31.
        let mut trials: Vec<TrialFacts> = [1i64, 11, 21, 31]
            .iter()
            .map(|&i| {
                let v = 40.0 * (-0.01 * (i - 1) as f64).exp();
                trial(i, &base, v, &[v, v * 1.004, v / 1.004])
            })
            .collect();
        trials.push(trial(5, &[("t", "8")], 50.0, &[50.0, 50.1, 49.9]));
        let refs: Vec<&TrialFacts> = trials.iter().collect();
        let baseline = trials[0].settings.clone();
        let noise = Noise::of(Metric::DecodeTps, &refs, &baseline, true);
        assert!((noise.drift_at(16) + 0.15).abs() < 1e-6, "{noise:?}");
        assert_eq!(noise.drift_at(1), 0.0);
        assert!((noise.drift_at(40) + 0.30).abs() < 1e-6);
        // Runs close together say nothing of a trend.
        let close: Vec<TrialFacts> = [(1, 40.0), (2, 39.0), (3, 40.5)]
            .iter()
            .map(|&(i, v)| trial(i, &base, v, &[v]))
            .collect();
        let refs: Vec<&TrialFacts> = close.iter().collect();
        assert_eq!(Noise::of(Metric::DecodeTps, &refs, &baseline, true).drift, None);
    }

    #[test]
    fn a_steady_baseline_is_not_called_drift() {
        let base = [("t", "4")];
        let trials: Vec<TrialFacts> =
            [1, 11, 21].iter().map(|&i| trial(i, &base, 40.0, &[40.0, 40.3, 39.7])).collect();
        let refs: Vec<&TrialFacts> = trials.iter().collect();
        let noise = Noise::of(Metric::DecodeTps, &refs, &trials[0].settings.clone(), true);
        assert_eq!(noise.drift, None);
        assert_eq!(noise.drift_at(15), 0.0);
        assert_eq!(noise.reruns, Some(0.0));
    }

    #[test]
    fn a_share_of_eight_questions_carries_binomial_chance_between_configurations() {
        let trials: Vec<TrialFacts> = (1..=4)
            .map(|i| TrialFacts {
                id: i,
                done: true,
                metrics: BTreeMap::from([(Metric::QualityScore, 0.625)]),
                items: BTreeMap::from([(Metric::QualityScore, 8)]),
                ..Default::default()
            })
            .collect();
        let refs: Vec<&TrialFacts> = trials.iter().collect();
        let noise = Noise::of(Metric::QualityScore, &refs, &Default::default(), false);
        let (n, var) = noise.items.unwrap();
        assert_eq!(n, 8);
        // Two configurations differ by chance by about ±0.24: one question
        // in eight (0.125) is well inside it.
        assert!((2.0 * var).sqrt() > 0.2, "{var}");
        assert_eq!(noise.between(2), 2.0 * var);
    }

    #[test]
    fn available_memory_is_claimed_on_only_with_the_baselines_noise() {
        let mut noise = Noise::default();
        assert!(!noise.claimable(Metric::MemAvailableDropBytes));
        assert!(noise.claimable(Metric::PeakRssBytes));
        noise.reruns = Some(0.1);
        assert!(noise.claimable(Metric::MemAvailableDropBytes));
    }
}
