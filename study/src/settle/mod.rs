//! Settling what the findings could not tell. A setting's effect on a
//! metric is "not determined" when the trials never changed it on its own,
//! were too few, or left its interval straddling the margin. Runs of the
//! baseline interleaved with the baseline changed in that one setting
//! (B, V₁, V₂, B, V₁, V₂, …) measure exactly the contrast the finding
//! lacks, with the machine's drift spread over every arm.
//!
//! A failure rule that names a value its failures merely shared is
//! settled by one run of a failure with that value changed
//! ([`rule_plans`]).
//!
//! [`plan`] names those runs for one finding (the page's "settle this"
//! queues them); [`next`] picks, once the search is over, the most
//! valuable finding still open and plans it, out of the share of the
//! budget [`reserve`] keeps for it. A share over too few items cannot be
//! settled by trials (its chance lies in the questions, not the runs), and
//! a setting the study's constraints never let change alone cannot either:
//! both say so instead.

use std::collections::BTreeMap;
use tunebook_domain::Role;

use engine_bridge::Settings;

use crate::findings::{self, Finding, TrialFacts, Undetermined};
use crate::study::{Metric, Study};

mod rules;

pub use rules::rule_plans;

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

/// What a plan settles.
#[derive(Debug, Clone, PartialEq)]
pub enum Target {
    /// The setting's effect on a metric, held not determined.
    Effect(Metric),
    /// The setting's effect on a metric at the pick (see
    /// [`findings::PickRow`]), held open there.
    AtPick(Metric),
    /// Whether the rule of a cause of failure needs the setting's value,
    /// which every failure inside it shared and no trial there changed.
    Rule { cause: String },
}

/// A finding settling runs were asked for: a setting on a metric, at the
/// baseline or at the pick.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Asked {
    pub setting: String,
    pub metric: Metric,
    pub at_pick: bool,
}

/// Where a plan's arms are compared from: the first run of every plan is
/// the first of this arm, which is how the runner counts plans asked.
pub const FIRST_OF: [&str; 2] = [": the baseline, 1 of ", ": the pick, 1 of "];

/// The runs that would settle one finding, in the order to run them.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub setting: String,
    pub target: Target,
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

/// The same for a plan at the pick.
fn key_at_pick(setting: &str, metric: Metric) -> String {
    format!("{}{AT_PICK}", key(setting, metric))
}

const AT_PICK: &str = " at the pick";

/// The finding a settling trial's note was for, if it is one.
pub fn asked(note: &str) -> Option<Asked> {
    let rest = note.strip_prefix("settle `")?;
    let (setting, rest) = rest.split_once("` on ")?;
    let name = rest.split([':', ' ']).next()?;
    let at_pick = rest[name.len()..].starts_with(AT_PICK);
    Some(Asked { setting: setting.to_string(), metric: Metric::parse(name)?, at_pick })
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
    cannot(reason)?;
    let base = study.baseline.get(setting).cloned().unwrap_or_default();
    let values = compared(study, trials, &study.baseline, setting, &base, None);
    if values.is_empty() {
        return Err(format!(
            "runs cannot settle this: the baseline changed in `{setting}` alone breaks a constraint of the study, or `{setting}` never ran at another value"
        ));
    }
    let from = (&study.baseline, "the baseline", key(setting, metric));
    Ok(arms(from, setting, values, reason, Target::Effect(metric)))
}

/// The runs that would settle `setting` on `metric` at the pick (its
/// `row` of the findings there): the pick interleaved with the pick
/// changed to each value still open; or why trials cannot.
pub fn plan_at_pick(
    study: &Study,
    trials: &[TrialFacts],
    pick: &Settings,
    row: &findings::PickRow,
    metric: Metric,
) -> Result<Plan, String> {
    let reason = row.open.clone().ok_or("nothing is open at the pick")?;
    cannot(&reason)?;
    let open = row.open_values();
    let values = compared(study, trials, pick, &row.setting, &row.value, Some(&open));
    if values.is_empty() {
        return Err(format!(
            "runs cannot settle this: the pick changed in `{}` alone breaks a constraint of the study",
            row.setting
        ));
    }
    let from = (pick, "the pick", key_at_pick(&row.setting, metric));
    Ok(arms(from, &row.setting, values, &reason, Target::AtPick(metric)))
}

/// The plan for one finding a user asked to settle (`asked`: a setting on
/// a metric, at the baseline or at the pick), or why there is none: the
/// findings `found` hold nothing open there, or runs cannot settle it.
pub fn plan_for(
    study: &Study,
    trials: &[TrialFacts],
    found: &[Finding],
    asked: &Asked,
) -> Result<Plan, String> {
    let Asked { setting, metric, at_pick } = asked;
    let label = metric.label();
    if *at_pick {
        let open = open_at_pick(found, study)
            .into_iter()
            .find(|(_, row, m)| row.setting == *setting && m == metric);
        let Some((pick, row, _)) = open else {
            return Err(format!(
                "the findings hold nothing open of `{setting}` on {label} at the pick: nothing to settle"
            ));
        };
        return plan_at_pick(study, trials, &pick, &row, *metric);
    }
    let open = open(found, study).into_iter().find(|(s, m, _)| s == setting && m == metric);
    let Some((_, _, reason)) = open else {
        return Err(format!(
            "the findings do not hold `{setting}` not determined on {label}: nothing to settle"
        ));
    };
    plan(study, trials, setting, *metric, &reason)
}

/// Why runs cannot settle what is open for `reason`, if they cannot.
fn cannot(reason: &Undetermined) -> Result<(), String> {
    match reason {
        Undetermined::FewItems { items, .. } => Err(format!(
            "runs cannot settle this: a greedy answer asked again is the same answer, so only more than {items} items (questions, recall points) would"
        )),
        _ => Ok(()),
    }
}

/// Runs of `from` (a configuration, its name, the plan's key) interleaved
/// with it changed to each of `values` in `setting`, as many rounds as
/// `reason` reckons, within [`MAX_RUNS`].
fn arms(
    from: (&Settings, &str, String),
    setting: &str,
    values: Vec<String>,
    reason: &Undetermined,
    target: Target,
) -> Plan {
    let (config, name, key) = from;
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
    let mut runs = Vec::new();
    for r in 1..=repeats {
        runs.push((config.clone(), format!("{key}: {name}, {r} of {repeats}")));
        for v in &values {
            let mut changed = config.clone();
            changed.insert(setting.to_string(), v.clone());
            runs.push((changed, format!("{key}: `{setting}` = {v}, {r} of {repeats}")));
        }
    }
    let needed = match reason {
        Undetermined::MoreTrials { about } => *about,
        _ => None,
    };
    Plan { setting: setting.to_string(), target, runs, needed }
}

/// The values of `setting` to compare with `from`'s own (`own`): those
/// the trials ran (of `only`, where given), where `from` changed in that
/// setting alone stays in the space; the most run first, or for numbers
/// the ends and the middle.
fn compared(
    study: &Study,
    trials: &[TrialFacts],
    from: &Settings,
    setting: &str,
    own: &str,
    only: Option<&[String]>,
) -> Vec<String> {
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in trials.iter().filter(|t| t.done) {
        let v = t.settings.get(setting).cloned().unwrap_or_default();
        if v != own && only.is_none_or(|o| o.contains(&v)) {
            *counts.entry(v).or_default() += 1;
        }
    }
    let allowed = |v: &String| {
        let mut config = from.clone();
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
    asked: &[Asked],
    planner: Option<&findings::PlanFn>,
) -> Option<Plan> {
    next_with(study, trials, left, asked, planner, true)
}

/// As [`next`]; `at_pick`: whether effects at the pick are settled too
/// (the benchmark compares without).
pub fn next_with(
    study: &Study,
    trials: &[TrialFacts],
    left: usize,
    asked: &[Asked],
    planner: Option<&findings::PlanFn>,
    at_pick: bool,
) -> Option<Plan> {
    if left < 4 {
        return None;
    }
    let varied: Vec<String> = study.def.space.keys().cloned().collect();
    let (measures, margins) = (study.measures(), &study.def.margins);
    let found = findings::findings_planned(trials, &varied, &measures, margins, planner);
    let rules = rule_plans(study, trials, &found);
    let times = |setting: &str, metric: Metric, at_pick: bool| {
        let this = Asked { setting: setting.to_string(), metric, at_pick };
        asked.iter().filter(|a| **a == this).count()
    };
    let at_baseline = open(&found, study)
        .into_iter()
        .filter(|(s, m, _)| times(s, *m, false) < 2)
        .filter_map(|(s, m, why)| plan(study, trials, &s, m, &why).ok());
    let at_pick = open_at_pick(&found, study)
        .into_iter()
        .filter(|_| at_pick)
        .filter(|(_, row, m)| times(&row.setting, *m, true) < 2)
        .filter_map(|(pick, row, m)| plan_at_pick(study, trials, &pick, &row, m).ok());
    at_baseline
        .chain(at_pick)
        .filter_map(|mut p| {
            // Whole rounds of the arms only: a round cut short leaves an
            // arm without its pair.
            let from = p.runs.first()?.0.clone();
            let arms = p.runs.len() / p.runs.iter().filter(|(c, _)| *c == from).count();
            p.runs.truncate(left / arms * arms);
            // Not one that needs many times what a plan may run: its runs
            // would decide nothing.
            let hopeless = p.needed.is_some_and(|n| n > 2 * MAX_RUNS);
            (p.runs.len() >= 2 * arms && !hopeless).then_some(p)
        })
        .chain(rules)
        .min_by_key(|p| (rank(study, &p.target), !p.settles(), p.runs.len()))
}

/// Trials run to settle findings so far.
fn settled(trials: &[TrialFacts]) -> usize {
    trials.iter().filter(|t| t.role == Some(Role::Settle)).count()
}

/// Where a finding stands among what is worth settling: an effect on an
/// objective by the objective's place, then a failure rule in doubt (one
/// run each), then an objective's effect at the pick, before an effect on
/// any other measure. Both orders were measured on the planted worlds:
/// a rule first took runs an objective's effect needed (a "no effect" of
/// the V cache on memory was then claimed that the truth contradicts),
/// and the pick's ranked with the baseline's took runs the baseline's
/// effects needed (facts found fell from 14 to 11 on one world) while
/// what stayed open at the pick barely moved.
fn rank(study: &Study, target: &Target) -> usize {
    let objectives = study.metric_objectives();
    let n = objectives.len();
    match target {
        Target::Rule { .. } => n,
        Target::AtPick(_) => n + 1,
        Target::Effect(metric) => objectives.iter().position(|(m, _)| m == metric).unwrap_or(n + 2),
    }
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

/// What is still open at the pick: the pick, the setting's row there, and
/// the objective.
pub fn open_at_pick(
    found: &[Finding],
    study: &Study,
) -> Vec<(Settings, findings::PickRow, Metric)> {
    let mut out = Vec::new();
    for f in found {
        let Finding::AtPick { settings, metric, rows, .. } = f else { continue };
        for row in rows.iter().filter(|r| r.open.is_some()) {
            if study.def.space.contains_key(&row.setting) {
                out.push((settings.clone(), row.clone(), *metric));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests;
