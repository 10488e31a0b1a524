//! What each setting does at the pick, not only at the baseline: the
//! configuration a user will run is the balanced pick (or the best, with
//! one objective), and there a setting the baseline needed may be free,
//! or one it could spare may matter, wherever settings act together or a
//! memory metric follows the plan.
//!
//! For each objective and each setting, the model's contrast of the pick
//! changed in that setting alone with the pick itself, at every other
//! value tried. A value is **worse** or **better** beyond the margin only
//! where the setting's own test survived (an effect or an interaction
//! was claimed of it) and the value was a stated level of that effect:
//! the same support the baseline's claims need. It is **within** the
//! margin by the same equivalence test as a "no effect" (90 %, two
//! one-sided tests), which needs no effect claimed. Anything else is
//! open, and the findings' share may settle it ([`crate::settle`]).

use engine_bridge::Settings;
use serde::{Deserialize, Serialize};

use super::analysis::Analysis;
use super::design::value_of;
use super::numbers::{interval_text, within_text};
use super::ols::t_quantile;
use super::support::{few_items, ran_beside, unconfirmed};
use super::verdicts::{margin_at, more_trials};
use super::{EQUIVALENCE, Finding, INTERVAL, Interval, Margins, Undetermined};
use crate::metric::{Goal, Metric};

/// How one other value of a setting compares with the pick's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Versus {
    Worse,
    Better,
    Within,
    Open,
}

/// One other value of a setting at the pick: the pick changed in that
/// setting alone, against the pick (95 % interval), where the trials reach.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Alternative {
    pub value: String,
    pub interval: Option<Interval>,
    pub versus: Versus,
    /// Whether trials ran it beside the pick's other values (else the
    /// model only carries it over from elsewhere, and it stays open).
    pub measured: bool,
}

/// One setting at the pick on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PickRow {
    pub setting: String,
    /// The pick's value.
    pub value: String,
    pub others: Vec<Alternative>,
    /// Why the open values are open, where some are.
    pub open: Option<Undetermined>,
}

impl PickRow {
    /// The values still open, to settle.
    pub fn open_values(&self) -> Vec<String> {
        self.others.iter().filter(|o| o.versus == Versus::Open).map(|o| o.value.clone()).collect()
    }
}

/// The pick the findings name: the balanced one, else the best on the
/// first objective; `None` when a confirmation found it was luck.
pub(super) fn pick(found: &[Finding], first: Option<Metric>) -> Option<(i64, bool, Settings)> {
    let named = found.iter().find_map(|f| match f {
        Finding::Balanced { trial, settings, .. } => Some((*trial, true, settings.clone())),
        _ => None,
    });
    let named = named.or_else(|| {
        found.iter().find_map(|f| match f {
            Finding::Best { measure, trial, settings, .. } if measure.metric() == first => {
                Some((*trial, false, settings.clone()))
            }
            _ => None,
        })
    })?;
    let refuted = found.iter().any(
        |f| matches!(f, Finding::Confirmed { settings, held: false, .. } if *settings == named.2),
    );
    (!refuted).then_some(named)
}

/// The findings at the pick, one per objective modelled: each setting's
/// other values against the pick's. None where the pick is the baseline:
/// the other findings state its effects.
pub(super) fn at_pick(
    analyses: &[Analysis],
    found: &[Finding],
    objectives: &[(Metric, Goal)],
    margins: &Margins,
) -> Vec<Finding> {
    let Some((trial, balanced, settings)) = pick(found, objectives.first().map(|o| o.0)) else {
        return vec![];
    };
    let objective = |a: &&Analysis| objectives.iter().any(|(m, _)| *m == a.metric);
    analyses
        .iter()
        .filter(objective)
        .filter(|a| a.design.base_settings().iter().any(|(k, v)| value_of(&settings, k) != *v))
        .filter_map(|a| {
            let rows: Vec<PickRow> = (0..a.design.factors.len())
                .filter_map(|i| row(a, i, &settings, found, margins))
                .collect();
            let margin = margins.on_model_scale(a.metric);
            (!rows.is_empty()).then(|| Finding::AtPick {
                trial,
                balanced,
                settings: settings.clone(),
                metric: a.metric,
                goal: a.goal,
                margin: if a.told_as_ratio() { margin.exp_m1() * 100.0 } else { margin },
                rows,
            })
        })
        .collect()
}

/// Whether the findings claimed an effect of `setting` on `metric`, alone
/// or with another; and the values its effect stated.
fn claimed(found: &[Finding], setting: &str, metric: Metric) -> (bool, Vec<String>) {
    let mut stated = Vec::new();
    let mut any = false;
    for f in found {
        match f {
            Finding::Effect { setting: s, metric: m, levels, .. }
                if s == setting && *m == metric =>
            {
                any = true;
                stated.extend(levels.iter().map(|l| l.value.clone()));
            }
            Finding::Interaction { settings: (x, y), metric: m, .. }
                if *m == metric && (x == setting || y == setting) =>
            {
                any = true;
            }
            _ => {}
        }
    }
    (any, stated)
}

/// Factor `i` at the pick `settings`: each other value changed from the
/// pick's, judged; `None` when the factor has no other value.
fn row(
    a: &Analysis,
    i: usize,
    settings: &Settings,
    found: &[Finding],
    margins: &Margins,
) -> Option<PickRow> {
    let factor = &a.design.factors[i];
    let own = value_of(settings, &factor.setting);
    let at = a.design.row(settings);
    // A ratio of a model in bytes is told against the pick's own value.
    let there = a.natural(a.fit.predict(&at));
    let m = margin_at(a, margins, there);
    let (claimable, stated) = claimed(found, &factor.setting, a.metric);
    let (t95, t90) = (t_quantile(INTERVAL, a.fit.df()), t_quantile(EQUIVALENCE, a.fit.df()));
    let points: Vec<(String, Option<(f64, f64)>)> = factor
        .points()
        .into_iter()
        .filter(|v| *v != own)
        .map(|v| {
            let mut changed = settings.clone();
            changed.insert(factor.setting.clone(), v.clone());
            let c: Vec<f64> = a.design.row(&changed).iter().zip(&at).map(|(x, y)| x - y).collect();
            let e = a.contrast(&c);
            (v, e)
        })
        .collect();
    // Where the trials' deviations from the model say "the same" was not
    // shown beside the pick's own values (an effect confined to a region
    // the model spreads thin), nothing is claimed the same there.
    let unshown = unconfirmed(a, i, &own, &points, m);
    let shown_here = !unshown.iter().any(|(k, w)| value_of(settings, k) == *w);
    let others: Vec<Alternative> = points
        .iter()
        .map(|(v, e)| {
            let v = v.clone();
            let Some((est, se)) = *e else {
                return Alternative {
                    value: v,
                    interval: None,
                    versus: Versus::Open,
                    measured: false,
                };
            };
            // Measured beside the pick's values, not carried over.
            let beside = factor.is_curve() || ran_beside(a, i, &v, settings);
            let supported = beside && (factor.is_curve() || stated.contains(&v));
            let versus = if beside && shown_here && est.abs() + t90 * se < m {
                Versus::Within
            } else if claimable && supported && est.abs() - t95 * se > m {
                if a.goal.oriented(est) > 0.0 { Versus::Better } else { Versus::Worse }
            } else {
                Versus::Open
            };
            let told = |d: f64| a.told_at(there, d);
            let interval =
                Interval { est: told(est), lo: told(est - t95 * se), hi: told(est + t95 * se) };
            Alternative { value: v, interval: Some(interval), versus, measured: beside }
        })
        .collect();
    if others.is_empty() {
        return None;
    }
    let open = others.iter().any(|o| o.versus == Versus::Open).then(|| {
        if let Some(few) = few_items(a, i, m) {
            few
        } else if others.iter().any(|o| o.versus == Versus::Open && !o.measured) {
            Undetermined::Unreached
        } else {
            let open: Vec<_> = points
                .into_iter()
                .filter(|(v, _)| others.iter().any(|o| o.value == *v && o.versus == Versus::Open))
                .collect();
            Undetermined::MoreTrials { about: more_trials(a, &open, m) }
        }
    });
    Some(PickRow { setting: factor.setting.clone(), value: own, others, open })
}

/// A finding at the pick as one paragraph: which settings to keep, which
/// another value would better on this objective alone, which are free
/// within the margin, and which are still open, and why.
pub(super) fn markdown(
    trial: i64,
    balanced: bool,
    metric: Metric,
    goal: Goal,
    margin: f64,
    rows: &[PickRow],
) -> String {
    let name = |v: &str| if v.is_empty() { "the engine's default".to_string() } else { v.into() };
    let gives = |o: &Alternative| match &o.interval {
        Some(i) => format!("{} gives {}", name(&o.value), interval_text(metric, i)),
        None => name(&o.value),
    };
    let (mut keep, mut gain, mut free, mut partly) = (vec![], vec![], vec![], vec![]);
    let mut open: Vec<(String, Vec<String>)> = vec![];
    for r in rows {
        let all = |v: Versus| r.others.iter().all(|o| o.versus == v);
        let of = |v: Versus| r.others.iter().filter(move |o| o.versus == v);
        let best = of(Versus::Better).max_by(|x, y| {
            let est = |o: &Alternative| o.interval.map_or(0.0, |i| goal.oriented(i.est));
            est(x).total_cmp(&est(y))
        });
        let setting = format!("`{}`", r.setting);
        if let Some(b) = best {
            gain.push(format!("{setting} = {}", gives(b)));
        } else if let Some(why) = &r.open {
            match open.iter_mut().find(|(w, _)| *w == why.text()) {
                Some((_, list)) => list.push(setting),
                None => open.push((why.text(), vec![setting])),
            }
        } else if all(Versus::Worse) {
            let costs: Vec<String> = of(Versus::Worse).take(4).map(gives).collect();
            keep.push(format!("{setting} = {} ({})", name(&r.value), costs.join(", ")));
        } else if all(Versus::Within) {
            free.push(setting);
        } else {
            let within: Vec<String> = of(Versus::Within).map(|o| name(&o.value)).collect();
            let worse: Vec<String> = of(Versus::Worse).take(4).map(gives).collect();
            partly.push(format!(
                "{setting} = {}: the same as {}; {}",
                name(&r.value),
                within.join(", "),
                worse.join(", ")
            ));
        }
    }
    let what = if balanced { "the balanced pick" } else { "the best" };
    let mut parts = Vec::new();
    if !keep.is_empty() {
        parts.push(format!("keep {}", keep.join("; ")));
    }
    if !partly.is_empty() {
        parts.push(partly.join("; "));
    }
    if !gain.is_empty() {
        let trade = if balanced {
            "on this objective alone: the pick weighs the others"
        } else {
            "by the model: run it to confirm"
        };
        parts.push(format!("better here: {} ({trade})", gain.join("; ")));
    }
    if !free.is_empty() {
        let within = within_text(metric, margin);
        parts.push(format!("free within {within}: {}", free.join(", ")));
    }
    if !open.is_empty() {
        let each: Vec<String> =
            open.iter().map(|(why, list)| format!("{} ({why})", list.join(", "))).collect();
        parts.push(format!("not determined: {}", each.join("; ")));
    }
    format!(
        "**At {what} (trial {trial}), on {}**, each setting changed alone from the pick's value: {}.",
        metric.label(),
        parts.join("; ")
    )
}

#[cfg(test)]
#[path = "at_pick_tests.rs"]
mod tests;
