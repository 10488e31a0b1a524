//! Anomalies: trials far off what the rest of a study predicts for their
//! settings, each worth running again before it is trusted; and none
//! where so many are off that the model, not the trials, is what fails.

use super::Finding;
use super::analysis::Analysis;
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
    let flagged: Vec<usize> = (0..a.trials.len()).filter(|&k| a.outlying(k).is_some()).collect();
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
