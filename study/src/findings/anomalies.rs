//! Anomalies: trials far off what the rest of a study predicts for their
//! settings, each worth running again before it is trusted; and none
//! where so many are off that the model, not the trials, is what fails.
//! The test of one trial ([`Analysis::outlying`]) is here too: the model
//! also sets such trials aside while it chooses its terms.

use std::cell::OnceCell;

use super::Finding;
use super::analysis::{Analysis, MAX_LEVERAGE, gram_of};
use super::ols::{Fit, Gram, t_p};
use super::scales::{ANOMALY_ALPHA, anomaly_gap, in_bytes};
use crate::metric::Scale;

/// Most trials, as a share of a metric's, that may be named anomalies
/// (and never fewer than [`MIN_ANOMALIES`]). A model that fits flags
/// about none (each test is Bonferroni over the trials); one that flags a
/// tenth of them is what does not fit, and "the rest" is no reference:
/// none is named then. A real world of 80 trials whose prefill the model
/// could not follow had 23 trials named anomalies, every one measured as
/// it should have been.
const MAX_ANOMALY_SHARE: f64 = 0.1;

/// Anomalies a metric may always have, however few its trials.
const MIN_ANOMALIES: usize = 2;

/// Trials far off what the rest predict for their settings (see
/// [`Analysis::outlying`]), their prediction kept in the metric's range;
/// none where so many are that the model is what is off.
pub fn anomalies(a: &Analysis) -> Vec<Finding> {
    let outlying = a.outlying();
    let flagged: Vec<usize> = (0..a.trials.len()).filter(|&k| outlying(k).is_some()).collect();
    let most = ((a.trials.len() as f64 * MAX_ANOMALY_SHARE) as usize).max(MIN_ANOMALIES);
    if flagged.len() > most {
        return vec![];
    }
    flagged
        .into_iter()
        .map(|k| {
            let t = &a.trials[k];
            let predicted = a.expected(k);
            let expected = match a.metric.scale() {
                Scale::Rate => predicted.clamp(0.0, 1.0),
                Scale::Difference => predicted.max(0.0),
                Scale::Ratio => predicted,
            };
            Finding::Anomaly {
                trial: t.id,
                metric: a.metric,
                value: a.value_of(t),
                expected,
                settings: t.settings.clone(),
            }
        })
        .collect()
}

/// What the tests of every trial against one fit share, worked out when
/// first needed: the kept trials' spread and cross-products.
#[derive(Default)]
struct Shared {
    spread: OnceCell<f64>,
    kept: OnceCell<Gram>,
}

impl Analysis {
    /// The test of each trial against the current fit (see
    /// [`Analysis::outlying_with`]), what every trial's test shares worked
    /// out once. Memory's spread is a median over all the trials, and a
    /// trial's pairs are judged from the others' cross-products: worked
    /// out again for each trial, they made a study's findings take time in
    /// the square of its trials (19 s at 10,000 in a release build;
    /// `examples/findings_time.rs`).
    pub fn outlying(&self) -> impl Fn(usize) -> Option<f64> + '_ {
        let shared = Shared::default();
        move |k| self.outlying_with(k, &shared)
    }

    /// Whether trial `k` is an anomaly against the current fit: its
    /// prediction without it at least [`super::scales::ANOMALY_RATIO`] off (a tenth for
    /// rates), and its studentized residual beyond [`ANOMALY_ALPHA`],
    /// Bonferroni over the trials. The p-value when it is.
    fn outlying_with(&self, k: usize, shared: &Shared) -> Option<f64> {
        let t = &self.trials[k];
        let h = self.fit.leverage(&t.row);
        let e = t.y - self.fit.predict(&t.row);
        let df = self.fit.df();
        if df < 3 {
            return None;
        }
        let floor = self.floor();
        let (deleted, studentized, df) = if t.excluded {
            // Not in the fit: a prediction interval.
            let s2 = (self.fit.rss / df as f64).max(floor);
            (e, e / (s2 * (1.0 + h)).sqrt(), df)
        } else {
            if h >= MAX_LEVERAGE {
                return None;
            }
            let s2 = ((self.fit.rss - e * e / (1.0 - h)) / (df - 1) as f64).max(floor);
            (e / (1.0 - h), e / (s2 * (1.0 - h)).sqrt(), df - 1)
        };
        let min_gap = anomaly_gap(self.metric, self.base());
        let mut p = t_p(studentized, df) * self.trials.len() as f64;
        if in_bytes(self.metric) {
            // Memory's noise is relative: judged in bytes, a value high by
            // chance would pass for an anomaly. Judged again as a ratio.
            let ratio = (self.natural(t.y) / self.natural(t.y - deleted)).ln();
            let spread = *shared.spread.get_or_init(|| self.log_spread());
            let z = if ratio.is_finite() { ratio / spread.max(f64::MIN_POSITIVE) } else { 0.0 };
            p = p.max(t_p(z, df) * self.trials.len() as f64);
        }
        (deleted.abs() >= min_gap && p <= ANOMALY_ALPHA && !self.alone_in_a_pair(k, shared))
            .then_some(p)
    }

    /// The robust spread of the kept trials' values about the fit, as log
    /// ratios (the median absolute one, as a normal's standard deviation).
    fn log_spread(&self) -> f64 {
        let mut logs: Vec<f64> = self
            .trials
            .iter()
            .filter(|t| !t.excluded)
            .map(|t| (self.natural(t.y) / self.natural(self.fit.predict(&t.row))).ln().abs())
            .filter(|x| x.is_finite())
            .collect();
        super::median(&mut logs) / 0.674_489_750_196_081_7
    }

    /// Whether trial `k` is the only one of its combination of two
    /// settings' values: then an interaction of those two would explain it
    /// exactly, and one trial cannot tell an anomaly from an interaction.
    fn alone_in_a_pair(&self, k: usize, shared: &Shared) -> bool {
        let kept = shared.kept.get_or_init(|| gram_of(&self.trials));
        let t = &self.trials[k];
        let gram = if t.excluded { kept.clone() } else { kept.without(&t.row, t.y) };
        let row = &t.row;
        self.design.terms.iter().any(|(term, _)| {
            if !term.acts_with_another() || self.terms.contains(term) {
                return false;
            }
            let mut with = self.terms.clone();
            with.push(*term);
            !Fit::new(&gram, &self.design.columns(&with)).is_estimable(row)
        })
    }
}
