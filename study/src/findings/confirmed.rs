//! Reading a confirmation (see [`crate::confirm`]): the runs of a pick
//! interleaved with runs of the baseline, paired in the order they ran,
//! and the paired ratio on the first objective with its interval.

use engine_bridge::Settings;

use super::ols::t_quantile;
use super::{INTERVAL, Interval, TrialFacts};
use crate::study::{Goal, Metric};

/// The role of a confirmation run of the pick…
pub const ROLE_PICK: &str = "confirm";
/// …and of the baseline run right after it.
pub const ROLE_BASE: &str = "confirm_base";

/// One candidate's confirmation so far.
#[derive(Debug, Clone, PartialEq)]
pub struct Confirmation {
    pub settings: Settings,
    /// (pick's trial, baseline's trial, pick's value, baseline's value).
    pub pairs: Vec<(i64, i64, f64, f64)>,
    /// A run of the pick failed: it does not hold up.
    pub failed: bool,
    /// A run of the pick waits for its baseline run.
    pub(crate) pending: bool,
}

impl Confirmation {
    /// The pick over the baseline on the first objective, paired, with its
    /// 95 % interval (a ratio), and whether the pick held up: better than
    /// the baseline beyond noise. `None` with fewer than two pairs.
    pub fn verdict(&self, goal: Goal) -> Option<(Interval, bool)> {
        let logs: Vec<f64> = self.pairs.iter().map(|(_, _, a, b)| (a / b).ln()).collect();
        let n = logs.len();
        if n < 2 || logs.iter().any(|x| !x.is_finite()) {
            return None;
        }
        let mean = logs.iter().sum::<f64>() / n as f64;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
        let half = t_quantile(INTERVAL, n - 1) * (var / n as f64).sqrt();
        let interval =
            Interval { est: mean.exp(), lo: (mean - half).exp(), hi: (mean + half).exp() };
        let worse_end = if goal == Goal::Max { mean - half } else { -(mean + half) };
        Some((interval, !self.failed && worse_end > 0.0))
    }
}

/// The confirmations among `trials` (in the order they ran), read on the
/// first objective `metric`.
pub fn confirmations(trials: &[TrialFacts], metric: Metric) -> Vec<Confirmation> {
    let mut out: Vec<Confirmation> = Vec::new();
    let mut waiting: Option<(i64, f64)> = None;
    for t in trials {
        match t.role.as_deref() {
            Some(ROLE_PICK) => {
                if out.last().is_none_or(|c| c.settings != t.settings) {
                    out.push(Confirmation {
                        settings: t.settings.clone(),
                        pairs: vec![],
                        failed: false,
                        pending: false,
                    });
                }
                let current = out.last_mut().expect("pushed");
                match t.metrics.get(&metric).filter(|_| t.done) {
                    Some(v) => waiting = Some((t.id, *v)),
                    None => {
                        current.failed = true;
                        waiting = None;
                    }
                }
                current.pending = waiting.is_some();
            }
            Some(ROLE_BASE) => {
                let (Some((a, va)), Some(current)) = (waiting.take(), out.last_mut()) else {
                    continue;
                };
                current.pending = false;
                if let Some(vb) = t.metrics.get(&metric).filter(|_| t.done) {
                    current.pairs.push((a, t.id, va, *vb));
                }
            }
            _ => {}
        }
    }
    out
}
