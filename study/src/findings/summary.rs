//! The findings that need no model: the balanced pick on the Pareto
//! front, failures by cause with their rule, the decode ceiling, and the
//! baseline's drift between its runs.

use std::collections::{BTreeMap, BTreeSet};
use tunebook_domain::Role;

use engine_bridge::Settings;

use super::{Finding, TrialFacts, rules};
use crate::metric::{Goal, Measure, Metric};

/// The settings of the balanced pick among `done` (see [`Finding::Balanced`]).
pub fn balanced_pick(done: &[&TrialFacts], objectives: &[(Measure, Goal)]) -> Option<Settings> {
    match balanced(done, objectives)? {
        Finding::Balanced { settings, .. } => Some(settings),
        _ => None,
    }
}

pub(super) fn balanced(done: &[&TrialFacts], objectives: &[(Measure, Goal)]) -> Option<Finding> {
    if objectives.len() < 2 {
        return None;
    }
    let points: Vec<(&TrialFacts, Vec<f64>)> = done
        .iter()
        .filter_map(|t| {
            let v: Option<Vec<f64>> =
                objectives.iter().map(|(m, _)| m.value(&t.metrics, &t.settings)).collect();
            Some((*t, v?))
        })
        .collect();
    let values: Vec<Vec<f64>> = points.iter().map(|(_, v)| v.clone()).collect();
    let goals: Vec<Goal> = objectives.iter().map(|(_, g)| *g).collect();
    let front = crate::pareto::front(&values, &goals);
    if front.len() < 2 {
        return None;
    }
    // Each objective scaled over the front: 1 is the front's best, 0 its worst.
    let scaled = |i: usize, k: usize| {
        let oriented = |j: usize| goals[k].oriented(values[j][k]);
        let (lo, hi) = front
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &j| (lo.min(oriented(j)), hi.max(oriented(j))));
        if hi > lo { (oriented(i) - lo) / (hi - lo) } else { 1.0 }
    };
    let distance = |i: usize| (0..goals.len()).map(|k| (1.0 - scaled(i, k)).powi(2)).sum::<f64>();
    let pick = *front.iter().min_by(|&&a, &&b| distance(a).total_cmp(&distance(b)))?;
    let (t, v) = &points[pick];
    Some(Finding::Balanced {
        trial: t.id,
        values: objectives.iter().map(|(m, _)| m.clone()).zip(v.iter().copied()).collect(),
        settings: t.settings.clone(),
        front: front.iter().map(|&i| points[i].0.id).collect(),
    })
}

/// Failures by cause, each with the rule that separates it, where one does.
pub(super) fn failures(trials: &[TrialFacts], varied: &[String]) -> Vec<Finding> {
    let mut by: BTreeMap<&str, Vec<&TrialFacts>> = BTreeMap::new();
    for t in trials {
        if let Some((cause, _)) = &t.failure {
            by.entry(cause.as_str()).or_default().push(t);
        }
    }
    let ran: Vec<&TrialFacts> = trials.iter().filter(|t| t.done).collect();
    by.into_iter()
        .map(|(cause, failed)| {
            let (rule, undecided) = match rules::rule(&failed, &ran, varied) {
                Some(Ok(rule)) => (Some(rule), vec![]),
                Some(Err(rules)) => (None, rules),
                None => (None, vec![]),
            };
            Finding::Failures {
                cause: cause.to_string(),
                trials: failed.iter().map(|t| t.id).collect(),
                message: failed[0].failure.as_ref().map(|f| f.1.clone()).unwrap_or_default(),
                rule,
                undecided,
            }
        })
        .collect()
}

/// The fastest decode against its bandwidth ceiling; the settings found
/// to move decode.
pub(super) fn ceiling(done: &[&TrialFacts], found: &[Finding]) -> Option<Finding> {
    let (t, decode, ceiling) = done
        .iter()
        .filter_map(|t| Some((*t, *t.metrics.get(&Metric::DecodeTps)?, t.ceiling_tps?)))
        .filter(|(_, _, c)| *c > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let movers: BTreeSet<String> = found
        .iter()
        .filter_map(|f| match f {
            Finding::Effect { setting, metric: Metric::DecodeTps, .. } => Some(setting.clone()),
            Finding::Interaction { settings: (a, b), metric: Metric::DecodeTps, .. } => {
                Some(format!("{a} × {b}"))
            }
            _ => None,
        })
        .collect();
    Some(Finding::Ceiling {
        trial: t.id,
        decode,
        ceiling,
        pct: decode / ceiling * 100.0,
        movers: movers.into_iter().collect(),
    })
}

/// The baseline's first objective over its runs, where it ran more than once.
pub(super) fn drift(trials: &[TrialFacts], metric: Metric) -> Option<Finding> {
    let baseline: Vec<(i64, f64)> = trials
        .iter()
        .filter(|t| t.done && matches!(t.role, Some(Role::Baseline | Role::Rerun)))
        .filter_map(|t| Some((t.id, *t.metrics.get(&metric)?)))
        .collect();
    let &(_, first) = baseline.first()?;
    if baseline.len() < 2 {
        return None;
    }
    let worst_pct = baseline
        .iter()
        .map(|(_, v)| (v - first) / first.abs().max(f64::MIN_POSITIVE) * 100.0)
        .max_by(|a, b| a.abs().total_cmp(&b.abs()))
        .unwrap_or_default();
    let flagged = trials.iter().filter(|t| t.drift_pct.is_some()).map(|t| t.id).collect();
    Some(Finding::Drift { metric, baseline, worst_pct, flagged })
}
