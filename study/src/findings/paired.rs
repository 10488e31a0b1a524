//! A share's items compared question by question. Where every trial
//! measured on a share kept its pass/fail verdict on each item (the same
//! suite, in the same order), two configurations are compared on the
//! items they answered differently, not on two independent counts: a
//! greedy model that answers 200 questions alike with and without a
//! setting shows that setting lossless, where the binomial chance of two
//! separate scores of 200 (±10 points) never could.
//!
//! Any contrast of the model is a weighted sum of the trials' shares
//! (least squares: `cᵀβ = Σ w_k y_k`), so it is the mean over the items
//! of the same sum of their verdicts; how far that mean could fall on
//! other items is the variance of the per-item sums over the items. A
//! few items answered alike say little of the rest, so, as Agresti and
//! Min (2005) do for matched pairs, half an item is added to each side
//! of the contrast: two configurations that agree on all of 8 questions
//! still differ by up to ±20 points, on all of 200 by ±1.

use std::collections::BTreeMap;

use super::TrialFacts;
use crate::metric::Metric;

/// At most this many items of one trial are read (a quality suite's cap).
pub const MAX_ITEMS: usize = engine_bridge::probes::limits::MAX_CASES;

/// Each trial's verdicts on the same items.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Paired {
    by_trial: BTreeMap<i64, Vec<bool>>,
    items: usize,
}

impl Paired {
    /// The verdicts on `metric` of `trials`, where every trial measured
    /// on it has them over the same number of items and its share is
    /// theirs (a stored share its verdicts contradict pairs nothing).
    pub fn of(metric: Metric, trials: &[&TrialFacts]) -> Option<Paired> {
        let mut by_trial = BTreeMap::new();
        let mut items = None;
        for t in trials {
            let Some(&share) = t.metrics.get(&metric) else { continue };
            let verdicts = t.verdicts.get(&metric)?;
            let n = verdicts.len();
            if n == 0 || n > MAX_ITEMS || *items.get_or_insert(n) != n {
                return None;
            }
            let passed = verdicts.iter().filter(|v| **v).count() as f64 / n as f64;
            if (passed - share).abs() > 1e-9 {
                return None;
            }
            by_trial.insert(t.id, verdicts.clone());
        }
        Some(Paired { by_trial, items: items? })
    }

    /// The variance, over the items, of `Σ w_k × share_k` for trials
    /// `k` weighted `w_k` (weights summing to 0): the per-item sums'
    /// spread over the item count, with half an item at each end of
    /// their range added (see the module's note). `None` where a trial
    /// weighed has no verdicts.
    pub fn variance(&self, weights: &[(i64, f64)]) -> Option<f64> {
        let rows: Vec<(&Vec<bool>, f64)> = weights
            .iter()
            .filter(|(_, w)| *w != 0.0)
            .map(|(id, w)| Some((self.by_trial.get(id)?, *w)))
            .collect::<Option<_>>()?;
        let reach: f64 = weights.iter().map(|(_, w)| w.max(0.0)).sum();
        let mut sum = 0.0;
        let mut squares = reach * reach;
        for item in 0..self.items {
            let e: f64 = rows.iter().filter(|(v, _)| v[item]).map(|(_, w)| w).sum();
            sum += e;
            squares += e * e;
        }
        let n = self.items as f64 + 2.0;
        let mean = sum / n;
        Some(((squares / n - mean * mean) / n).max(0.0))
    }

    /// The variance of trial `a`'s share less trial `b`'s over the items.
    pub fn between(&self, a: i64, b: i64) -> Option<f64> {
        self.variance(&[(a, 1.0), (b, -1.0)])
    }

    /// The typical variance of two configurations' difference: the median,
    /// over the trials that are not `reference`'s configuration, of their
    /// difference from `reference`; `None` with no such trial.
    pub fn typical(&self, reference: i64, same: impl Fn(i64) -> bool) -> Option<f64> {
        let mut vs: Vec<f64> = self
            .by_trial
            .keys()
            .filter(|&&id| id != reference && !same(id))
            .filter_map(|&id| self.between(id, reference))
            .collect();
        (!vs.is_empty()).then(|| super::median(&mut vs))
    }
}

/// Verdicts as stored: one character a item, `1` passed and `0` failed;
/// `None` for anything else or more than [`MAX_ITEMS`].
pub fn parse_verdicts(text: &str) -> Option<Vec<bool>> {
    if text.is_empty() || text.len() > MAX_ITEMS {
        return None;
    }
    text.bytes()
        .map(|b| match b {
            b'1' => Some(true),
            b'0' => Some(false),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(id: i64, verdicts: &str) -> TrialFacts {
        let v = parse_verdicts(verdicts).unwrap();
        let share = v.iter().filter(|x| **x).count() as f64 / v.len() as f64;
        TrialFacts {
            id,
            done: true,
            metrics: [(Metric::QualityScore, share)].into(),
            verdicts: [(Metric::QualityScore, v)].into(),
            ..Default::default()
        }
    }

    #[test]
    fn two_configurations_that_answer_alike_differ_by_half_an_item_a_side() {
        let same = "1".repeat(150) + &"0".repeat(50);
        let trials = [trial(1, &same), trial(2, &same)];
        let refs: Vec<&TrialFacts> = trials.iter().collect();
        let p = Paired::of(Metric::QualityScore, &refs).unwrap();
        let se = p.between(1, 2).unwrap().sqrt();
        // Agresti–Min with no discordant pair: √1 / (n + 2).
        assert!((se - 1.0 / 202.0).abs() < 1e-12, "{se}");
        // Eight alike: ten times as wide as two hundred alike.
        let few = [trial(1, "11110000"), trial(2, "11110000")];
        let refs: Vec<&TrialFacts> = few.iter().collect();
        let p = Paired::of(Metric::QualityScore, &refs).unwrap();
        assert!((p.between(1, 2).unwrap().sqrt() - 0.1).abs() < 1e-12);
    }

    #[test]
    fn discordant_items_set_the_chance_as_agresti_and_min_do() {
        // b = 3 passed only by the first, c = 1 only by the second, n = 20.
        let a = "1110".to_string() + &"1".repeat(8) + &"0".repeat(8);
        let b = "0001".to_string() + &"1".repeat(8) + &"0".repeat(8);
        let trials = [trial(1, &a), trial(2, &b)];
        let refs: Vec<&TrialFacts> = trials.iter().collect();
        let p = Paired::of(Metric::QualityScore, &refs).unwrap();
        let (b, c, n) = (3.5, 1.5, 22.0);
        let want = ((b + c) - (b - c) * (b - c) / n) / (n * n);
        assert!((p.between(1, 2).unwrap() - want).abs() < 1e-12);
    }

    #[test]
    fn verdicts_that_contradict_the_share_or_differ_in_length_pair_nothing() {
        let mut lying = trial(1, "1100");
        lying.metrics.insert(Metric::QualityScore, 1.0);
        let honest = trial(2, "1100");
        assert!(Paired::of(Metric::QualityScore, &[&lying, &honest]).is_none());
        let longer = trial(3, "11000");
        assert!(Paired::of(Metric::QualityScore, &[&honest, &longer]).is_none());
        let mut none = trial(4, "1100");
        none.verdicts.clear();
        assert!(Paired::of(Metric::QualityScore, &[&honest, &none]).is_none());
        assert!(parse_verdicts("10x1").is_none());
        assert!(parse_verdicts(&"1".repeat(MAX_ITEMS + 1)).is_none());
    }
}
