//! Settling what the findings could not tell. A setting's effect on a
//! metric is "not determined" when the trials never changed it on its own,
//! were too few, or left its interval straddling the margin. Runs of the
//! baseline interleaved with the baseline changed in that one setting
//! (B, V₁, V₂, B, V₁, V₂, …) measure exactly the contrast the finding
//! lacks, with the machine's drift spread over every arm.
//!
//! [`plan`] names those runs for one finding (the page's "settle this"
//! queues them); [`next`] picks, once the search is over, the most
//! valuable finding still open and plans it, out of the share of the
//! budget [`reserve`] keeps for it. A share over too few items cannot be
//! settled by trials (its chance lies in the questions, not the runs), and
//! a setting the study's constraints never let change alone cannot either:
//! both say so instead.

use std::collections::BTreeMap;

use engine_bridge::Settings;

use crate::findings::{self, Finding, TrialFacts, Undetermined};
use crate::study::{Metric, Study};

/// The role of a trial run to settle a finding.
pub const ROLE: &str = "settle";

/// Most runs one plan takes: a finding still open after that many more
/// runs of its contrast is below what the machine can tell.
pub const MAX_RUNS: usize = 16;

/// Most values of the setting one plan compares with the baseline's.
const MAX_VALUES: usize = 3;

/// Most runs of each arm (the baseline, each value).
const MAX_REPEATS: usize = 4;

/// A study whose budget is below this keeps no share for settling: its
/// search needs every trial.
const MIN_BUDGET: u32 = 30;

/// The runs that would settle one finding, in the order to run them.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub setting: String,
    pub metric: Metric,
    /// Each run: its settings and its note (which finding, which arm).
    pub runs: Vec<(Settings, String)>,
    /// About how many more trials the findings reckon would decide it,
    /// where they reckon: more than `runs` when one plan only goes toward it.
    pub needed: Option<usize>,
}

impl Plan {
    /// Whether its runs are about as many as the findings reckon would
    /// decide the finding (or they do not reckon).
    pub fn settles(&self) -> bool {
        self.needed.is_none_or(|n| self.runs.len() >= n)
    }
}

/// The note every run of a plan for (`setting`, `metric`) begins with: how
/// the runner and the page know which finding a settling trial was for.
pub fn key(setting: &str, metric: Metric) -> String {
    format!("settle `{setting}` on {}", metric.name())
}

/// The finding a settling trial's note was for, if it is one.
pub fn asked(note: &str) -> Option<(String, Metric)> {
    let rest = note.strip_prefix("settle `")?;
    let (setting, rest) = rest.split_once("` on ")?;
    let name = rest.split([':', ' ']).next()?;
    Some((setting.to_string(), Metric::parse(name)?))
}

/// The trials a study keeps, out of its budget, for settling findings once
/// its search is over: `budget.settle_trials`, else a fifth of the budget
/// where that is at least [`MIN_BUDGET`] trials. None on workers: each
/// class of machine is searched on its own and has no single baseline.
pub fn reserve(study: &Study) -> usize {
    if !study.def.machines.is_empty() {
        return 0;
    }
    let budget = study.def.budget.max_trials;
    match study.def.budget.settle_trials {
        Some(n) => n.min(budget / 2) as usize,
        None if budget >= MIN_BUDGET => (budget / 5) as usize,
        None => 0,
    }
}

/// The runs that would settle `setting` on `metric`, held undetermined for
/// `reason`, or why trials cannot.
pub fn plan(
    study: &Study,
    trials: &[TrialFacts],
    setting: &str,
    metric: Metric,
    reason: &Undetermined,
) -> Result<Plan, String> {
    if let Undetermined::FewItems { items, .. } = reason {
        return Err(format!(
            "runs cannot settle this: a greedy answer asked again is the same answer, so only more than {items} items (questions, recall points) would"
        ));
    }
    let base = study.baseline.get(setting).cloned().unwrap_or_default();
    let values = compared(study, trials, setting, &base);
    if values.is_empty() {
        return Err(format!(
            "runs cannot settle this: the baseline changed in `{setting}` alone breaks a constraint of the study, or `{setting}` never ran at another value"
        ));
    }
    let repeats = match reason {
        Undetermined::MoreTrials { about: Some(n) } => n.div_ceil(values.len() + 1).max(2),
        Undetermined::MoreTrials { about: None } => 3,
        _ => 2,
    };
    // Fewer values before fewer repeats: two runs of an arm is what a
    // claim on it needs.
    let mut values = values;
    let repeats = repeats.min(MAX_REPEATS);
    while repeats * (values.len() + 1) > MAX_RUNS && values.len() > 1 {
        values.pop();
    }
    let repeats = repeats.min(MAX_RUNS / (values.len() + 1));
    let key = key(setting, metric);
    let mut runs = Vec::new();
    for r in 1..=repeats {
        runs.push((study.baseline.clone(), format!("{key}: the baseline, {r} of {repeats}")));
        for v in &values {
            let mut config = study.baseline.clone();
            config.insert(setting.to_string(), v.clone());
            runs.push((config, format!("{key}: `{setting}` = {v}, {r} of {repeats}")));
        }
    }
    let needed = match reason {
        Undetermined::MoreTrials { about } => *about,
        _ => None,
    };
    Ok(Plan { setting: setting.to_string(), metric, runs, needed })
}

/// The values of `setting` to compare with the baseline's `base`: those the
/// trials ran, where the baseline changed in that setting alone stays in
/// the space; the most run first, or for numbers the ends and the middle.
fn compared(study: &Study, trials: &[TrialFacts], setting: &str, base: &str) -> Vec<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in trials.iter().filter(|t| t.done) {
        let v = t.settings.get(setting).cloned().unwrap_or_default();
        if v != base {
            *counts.entry(v).or_default() += 1;
        }
    }
    let allowed = |v: &String| {
        let mut config = study.baseline.clone();
        config.insert(setting.to_string(), v.clone());
        !v.is_empty() && study.space.check(&config).is_ok() && study.space.allows(&config)
    };
    let mut values: Vec<(String, usize)> = counts.into_iter().filter(|(v, _)| allowed(v)).collect();
    let numbers: Option<Vec<f64>> = values.iter().map(|(v, _)| v.parse().ok()).collect();
    match numbers {
        Some(mut xs) if values.len() > MAX_VALUES => {
            xs.sort_by(f64::total_cmp);
            let picks = [xs[0], xs[xs.len() - 1], xs[xs.len() / 2]];
            let mut out: Vec<String> = Vec::new();
            for x in picks {
                let v = values
                    .iter()
                    .find(|(v, _)| v.parse::<f64>().ok() == Some(x))
                    .map(|(v, _)| v.clone())
                    .expect("a value tried");
                if !out.contains(&v) {
                    out.push(v);
                }
            }
            out
        }
        _ => {
            values.sort_by_key(|v| std::cmp::Reverse(v.1));
            values.into_iter().take(MAX_VALUES).map(|(v, _)| v).collect()
        }
    }
}

/// How many trials settling may still spend in a study run on this
/// server: what is left of its share, and of the budget once the
/// confirmation's reserve is kept (`spent`: trials counted against it).
pub fn left(study: &Study, trials: &[TrialFacts], spent: usize) -> usize {
    let budget = study.def.budget.max_trials as usize;
    let rest = budget.saturating_sub(spent + crate::confirm::reserve(study));
    // Of the share only: the search may have ended before its own part ran out.
    rest.min(reserve(study).saturating_sub(settled(trials)))
}

/// Once the search is over: the plan for the most valuable finding still
/// open that fits in `left` trials (`asked`: the findings settling trials
/// were already run for, once each plan). The study's objectives come
/// first, in their order, then every other measure; among equals, a plan
/// that would decide its finding before one that only goes toward it, then
/// the cheapest. A finding asked twice, or that needs many times what a
/// plan may run, is left as it stands.
pub fn next(
    study: &Study,
    trials: &[TrialFacts],
    left: usize,
    asked: &[(String, Metric)],
    planner: Option<&findings::PlanFn>,
) -> Option<Plan> {
    if left < 4 {
        return None;
    }
    let varied: Vec<String> = study.def.space.keys().cloned().collect();
    let (measures, margins) = (study.measures(), &study.def.margins);
    let found = findings::findings_planned(trials, &varied, &measures, margins, planner);
    open(&found, study)
        .into_iter()
        .filter(|(s, m, _)| asked.iter().filter(|(a, b)| a == s && b == m).count() < 2)
        .filter_map(|(s, m, why)| {
            let mut p = plan(study, trials, &s, m, &why).ok()?;
            // Whole rounds of the arms only: a round cut short leaves an
            // arm without its pair.
            let arms = p.runs.len() / p.runs.iter().filter(|(c, _)| *c == study.baseline).count();
            p.runs.truncate(left / arms * arms);
            // Not one that needs many times what a plan may run: its runs
            // would decide nothing.
            let hopeless = p.needed.is_some_and(|n| n > 2 * MAX_RUNS);
            (p.runs.len() >= 2 * arms && !hopeless).then_some(p)
        })
        .min_by_key(|p| (rank(study, p.metric), !p.settles(), p.runs.len()))
}

/// Trials run to settle findings so far.
fn settled(trials: &[TrialFacts]) -> usize {
    trials.iter().filter(|t| t.role.as_deref() == Some(ROLE)).count()
}

/// Where a metric stands among what is worth settling: its objective's
/// place, objectives before everything else.
fn rank(study: &Study, metric: Metric) -> usize {
    let objectives = study.metric_objectives();
    objectives.iter().position(|(m, _)| *m == metric).unwrap_or(objectives.len())
}

/// The findings that are still open: each setting not determined on a
/// metric, and why.
pub fn open(found: &[Finding], study: &Study) -> Vec<(String, Metric, Undetermined)> {
    found
        .iter()
        .filter_map(|f| match f {
            Finding::NotDetermined { setting, metric, reason }
                if study.def.space.contains_key(setting) =>
            {
                Some((setting.clone(), *metric, reason.clone()))
            }
            _ => None,
        })
        .collect()
}

#[cfg(test)]
#[path = "settle_tests.rs"]
mod tests;
