//! Reading a confirmation (see [`crate::confirm`]): the runs of a pick
//! interleaved with runs of the baseline, paired in the order they ran,
//! and the paired ratio on each objective with its interval. The best
//! pick holds up when it beats the baseline on the first objective beyond
//! noise; the balanced pick (a trade-off, so not better on everything),
//! when on every objective the search's measurement of it lies within
//! what the re-runs show or below: its trade-off was not luck.

use engine_bridge::Settings;

use super::ols::t_quantile;
use super::{INTERVAL, Interval, TrialFacts};
use crate::metric::{Goal, Metric};
use tunebook_domain::Role;

/// Whether a trial is a run of a confirmation (not of the search).
pub fn is_confirmation(t: &TrialFacts) -> bool {
    matches!(t.role, Some(Role::Confirm | Role::ConfirmBalanced | Role::ConfirmBase))
}

/// One run of the pick and the baseline's run after it: their trials and
/// their values on each objective.
#[derive(Debug, Clone, PartialEq)]
pub struct Pair {
    pub pick: i64,
    pub base: i64,
    pub pick_values: Vec<f64>,
    pub base_values: Vec<f64>,
}

/// One candidate's confirmation so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    pub settings: Settings,
    /// Confirmed as the balanced pick (else as the best).
    pub balanced: bool,
    pub pairs: Vec<Pair>,
    /// What the search measured: its run of the pick over the baseline's
    /// first run, on each objective.
    pub searched: Option<Vec<f64>>,
    /// A run of the pick failed: it does not hold up.
    pub failed: bool,
    /// A run of the pick waits for its baseline run.
    pub(crate) pending: bool,
}

impl Confirmation {
    /// The pick over the baseline on objective `k`, paired, with its 95 %
    /// interval (a ratio); `None` with fewer than two pairs.
    pub fn ratio(&self, k: usize) -> Option<Interval> {
        let logs: Vec<f64> =
            self.pairs.iter().map(|p| (p.pick_values[k] / p.base_values[k]).ln()).collect();
        let n = logs.len();
        if n < 2 || logs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t_quantile(INTERVAL, n - 1) * (var / n as f64).sqrt();
        Some(Interval { est: mean.exp(), lo: (mean - half).exp(), hi: (mean + half).exp() })
    }

    /// Each objective's paired ratio, and whether the pick held up; `None`
    /// with fewer than two pairs.
    pub fn verdict(&self, goals: &[Goal]) -> Option<(Vec<Interval>, bool)> {
        let ratios: Option<Vec<Interval>> = (0..goals.len()).map(|k| self.ratio(k)).collect();
        let ratios = ratios?;
        // The interval's end toward better and toward worse, as log ratios
        // oriented so that positive is better.
        let ends = |k: usize| {
            let (lo, hi) = (ratios[k].lo.ln(), ratios[k].hi.ln());
            if goals[k] == Goal::Max { (lo, hi) } else { (-hi, -lo) }
        };
        let held = if self.balanced {
            let searched = |k: usize| {
                let r = self.searched.as_ref().map_or(1.0, |s| s[k]).ln();
                if goals[k] == Goal::Max { r } else { -r }
            };
            (0..goals.len()).all(|k| searched(k) <= ends(k).1)
        } else {
            ends(0).0 > 0.0
        };
        Some((ratios, held && !self.failed))
    }
}

/// The confirmations among `trials` (in the order they ran), read on the
/// objectives' `metrics`.
pub fn confirmations(trials: &[TrialFacts], metrics: &[Metric]) -> Vec<Confirmation> {
    let values = |t: &TrialFacts| -> Option<Vec<f64>> {
        if !t.done {
            return None;
        }
        metrics.iter().map(|m| t.metrics.get(m).copied()).collect()
    };
    let baseline = trials.iter().find(|t| t.role == Some(Role::Baseline)).and_then(values);
    let searched = |settings: &Settings| -> Option<Vec<f64>> {
        let run = trials
            .iter()
            .find(|t| t.role == Some(Role::Search) && &t.settings == settings)
            .and_then(values)?;
        Some(run.iter().zip(baseline.as_ref()?).map(|(a, b)| a / b).collect())
    };
    let mut out: Vec<Confirmation> = Vec::new();
    let mut waiting: Option<(i64, Vec<f64>)> = None;
    for t in trials {
        match t.role {
            Some(role @ (Role::Confirm | Role::ConfirmBalanced)) => {
                let balanced = role == Role::ConfirmBalanced;
                if out.last().is_none_or(|c| c.settings != t.settings || c.balanced != balanced) {
                    out.push(Confirmation {
                        settings: t.settings.clone(),
                        balanced,
                        pairs: vec![],
                        searched: searched(&t.settings),
                        failed: false,
                        pending: false,
                    });
                }
                let current = out.last_mut().expect("pushed");
                waiting = values(t).map(|v| (t.id, v));
                current.failed |= waiting.is_none();
                current.pending = waiting.is_some();
            }
            Some(Role::ConfirmBase) => {
                let (Some((pick, pick_values)), Some(current)) = (waiting.take(), out.last_mut())
                else {
                    continue;
                };
                current.pending = false;
                if let Some(base_values) = values(t) {
                    current.pairs.push(Pair { pick, base: t.id, pick_values, base_values });
                }
            }
            _ => {}
        }
    }
    out
}
