//! What the planner predicts of a configuration's memory, and how the
//! findings' models of memory take it in. The planner knows the structure
//! physics gives memory (the weights, plus context × bytes per K/V cache
//! element), a product of settings that no sum of their effects and
//! pairs fits: what such a model leaves over passes for effects of
//! settings that cannot move memory. So memory is modelled in bytes with
//! the plan's prediction as a column (measured ÷ planned is its slope, near
//! 1 where the planner is right), and that column times each factor's as a
//! candidate interaction: a constant plus the cache's bytes times a
//! flash-attention factor is then fitted exactly, and what the settings
//! did beyond the plan is what the other terms explain.

use std::fmt;
use std::sync::Arc;

use engine_bridge::Settings;

use crate::metric::Metric;

/// The planner: a configuration's predicted bytes of a memory metric,
/// `None` where it has no prediction (another engine, a split it does not
/// model, a metric it does not predict).
pub type PlanFn = Arc<dyn Fn(&Settings, Metric) -> Option<f64> + Send + Sync>;

/// A metric's model against the plan: the plan, and the baseline's
/// complete settings (the fixed ones too), which every configuration a
/// contrast names is the baseline changed in its factors.
#[derive(Clone)]
pub struct Against {
    plan: PlanFn,
    metric: Metric,
    baseline: Settings,
    /// The plan's bytes at the baseline.
    base: f64,
}

impl fmt::Debug for Against {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Against").field("metric", &self.metric).field("base", &self.base).finish()
    }
}

impl Against {
    /// The model of `metric` against `plan`, where the plan predicts a
    /// positive number of bytes for the baseline and for every one of
    /// `configurations` (the trials measured): one it cannot predict
    /// would have nothing to be measured against.
    pub fn new<'a>(
        plan: &PlanFn,
        metric: Metric,
        baseline: &Settings,
        mut configurations: impl Iterator<Item = &'a Settings>,
    ) -> Option<Against> {
        let mut against =
            Against { plan: plan.clone(), metric, baseline: baseline.clone(), base: 1.0 };
        against.base = against.bytes(baseline)?;
        configurations.all(|s| against.bytes(s).is_some()).then_some(against)
    }

    /// The plan's ratio of a configuration to the baseline: the baseline
    /// with what `settings` names instead (a trial's settings name every
    /// varied one). 1 where the plan cannot say.
    pub fn ratio_to(&self, settings: &Settings) -> f64 {
        self.bytes(settings).map_or(1.0, |b| b / self.base)
    }

    /// The plan's bytes for a configuration (the baseline with what
    /// `settings` names instead), where it predicts a positive number.
    pub fn bytes(&self, settings: &Settings) -> Option<f64> {
        let b = (self.plan)(&with_baseline(&self.baseline, settings), self.metric);
        b.filter(|b| *b > 0.0 && b.is_finite())
    }

    /// Whether the plan moves with `setting` over `values`, the other
    /// settings at the baseline's (by more than a millionth).
    pub fn moved_by(&self, setting: &str, values: &[String]) -> bool {
        values.iter().any(|v| {
            let s: Settings = [(setting.to_string(), v.clone())].into();
            (self.ratio_to(&s) - 1.0).abs() > 1e-6
        })
    }
}

/// `baseline` with every setting of `settings` in place of its own.
fn with_baseline(baseline: &Settings, settings: &Settings) -> Settings {
    let mut s = baseline.clone();
    s.extend(settings.iter().map(|(k, v)| (k.clone(), v.clone())));
    s
}

#[cfg(test)]
#[path = "planned_tests.rs"]
mod tests;
