//! How a memory metric measured against the planner's prediction: what
//! the baseline took over what was planned for it, and the spread of that
//! ratio over every trial measured. A ratio near 1 everywhere says the
//! planner knows this engine's memory; one that moves says the settings do
//! something the plan leaves out, which the metric's model then explains.

use super::analysis::Analysis;
use super::numbers::{num, value_text};
use super::{Finding, median};
use crate::metric::Metric;

/// The finding of `a`'s metric against the plan, where it was modelled
/// with one.
pub(super) fn against_plan(a: &Analysis) -> Option<Finding> {
    let (plan, _) = a.design.plan.as_ref()?;
    let base = a.design.base_settings();
    let planned = plan.bytes(&base)?;
    let mut ratios: Vec<f64> = a
        .trials
        .iter()
        .filter_map(|t| Some(a.value_of(t) / plan.bytes(&t.settings)?))
        .filter(|r| r.is_finite())
        .collect();
    let middle = median(&mut ratios);
    let (lo, hi) = (*ratios.first()?, *ratios.last()?);
    Some(Finding::Planned {
        metric: a.metric,
        base: a.base(),
        planned,
        ratios: (lo, middle, hi),
        trials: a.trials.iter().map(|t| t.id).collect(),
    })
}

/// The finding in words: the baseline's value and its plan (`base`), and
/// measured ÷ planned over `trials` (lowest, median, highest).
pub(super) fn told(
    metric: Metric,
    (base, planned): (f64, f64),
    (lo, middle, hi): (f64, f64, f64),
    trials: &[i64],
) -> String {
    format!(
        "**{} against the planner's prediction**: the baseline took {}, where the planner predicted {} for its weights and K/V cache — {}× the plan ({}); over the {} trials measured ÷ planned ran from {}× to {}× (median {}×). Its effects above are modelled with the plan: the context's and the cache types' arithmetic is the plan's, and what the settings did beyond it is the model's.",
        capitalized(metric.label()),
        value_text(metric, base),
        value_text(metric, planned),
        num(base / planned),
        if base >= planned {
            "buffers and the runtime take the rest"
        } else {
            "less than planned: pages of the weights never read stay out of memory, or the plan counts high"
        },
        trials.len(),
        num(lo),
        num(hi),
        num(middle)
    )
}

/// `text` with its first letter a capital (a label opening a sentence).
fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars.next().map_or_else(String::new, |c| c.to_uppercase().chain(chars).collect())
}
