//! What a study's trials say, by the study's rules: the study's
//! objectives, the facts its findings are drawn from and the findings
//! themselves, and its trials grouped by the class of machine they ran
//! on. The runners, the reports and the views all read these; the views
//! only show them.

use tunebook_domain::TrialState;
use tunebook_study::findings::{self, Finding, TrialFacts};
use tunebook_study::{Goal, Measure, Metric, StudyDef};

use crate::checked::Checked;
use crate::trial::Trial;

/// A study's objectives as written: what each reads, with its goal.
pub fn measures_of(def: &StudyDef) -> Vec<(Measure, Goal)> {
    def.objectives
        .iter()
        .filter_map(|t| {
            let m = Measure::parse(&t.metric)?;
            let goal = t.goal.unwrap_or(m.natural_goal());
            Some((m, goal))
        })
        .collect()
}

/// The objectives that read a metric, with their goals: what findings
/// judge (a setting's value is no effect to find).
pub fn objectives_of(def: &StudyDef) -> Vec<(Metric, Goal)> {
    measures_of(def).into_iter().filter_map(|(m, g)| Some((m.metric()?, g))).collect()
}

/// What a study's trials show (see [`tunebook_study::findings`]): trials cut
/// off by a restart and configurations never run (pruned) are left out;
/// memory is modelled with the planner's prediction from the server's
/// profiles (see [`crate::memory_plan`]).
pub fn findings_of(def: &StudyDef, trials: &[Trial], checked: &Checked) -> Vec<Finding> {
    let facts = facts_of(def, trials);
    let varied: Vec<String> = def.space.keys().cloned().collect();
    let mut found: Vec<Finding> = findings::boundary(def, &facts).into_iter().collect();
    let plan = crate::memory_plan::planner(checked, def);
    let measures = measures_of(def);
    found.extend(findings::findings_planned(
        &facts,
        &varied,
        &measures,
        &def.margins,
        plan.as_ref(),
    ));
    found
}

/// Trials as the findings see them: those that ended, neither pruned nor
/// cut off by a restart nor run otherwise than asked (what they measured
/// belongs to settings they do not record), each marked with the bound of
/// `def` it broke.
pub fn facts_of(def: &StudyDef, trials: &[Trial]) -> Vec<TrialFacts> {
    let mut facts: Vec<TrialFacts> = trials
        .iter()
        .filter(|t| t.counts_against_budget())
        .filter(|t| t.mismatched.is_empty())
        .map(|t| TrialFacts {
            id: t.id,
            settings: t.settings.clone(),
            done: t.state == TrialState::Done,
            failure: (t.state == TrialState::Failed).then(|| {
                let kind = t.failure_kind.map(|k| k.label().to_string()).unwrap_or_default();
                (kind, t.error.clone().unwrap_or_default())
            }),
            metrics: t.measured(),
            ceiling_tps: t.ceiling_tps,
            role: t.role,
            drift_pct: t.drift_pct,
            missed: None,
            repeats: t
                .support
                .repeats
                .iter()
                .filter_map(|(m, v)| Some((Metric::parse(m)?, v.clone())))
                .collect(),
            items: t
                .support
                .items
                .iter()
                .filter_map(|(m, n)| Some((Metric::parse(m)?, *n)))
                .collect(),
            verdicts: t
                .support
                .verdicts
                .iter()
                .filter_map(|(m, v)| Some((Metric::parse(m)?, findings::parse_verdicts(v)?)))
                .collect(),
        })
        .collect();
    findings::mark_missed(def, &mut facts);
    facts
}

/// A study's trials by the class of machine they ran on, each class in
/// the order of its first trial. Speeds compare only within a class, so
/// findings are drawn per class. A study that ran on one class (or on this
/// server's engine) is one group, unnamed.
pub fn by_machine(list: &[Trial]) -> Vec<(Option<String>, Vec<Trial>)> {
    let mut groups: Vec<(Option<String>, Vec<Trial>)> = Vec::new();
    for t in list {
        match groups.iter_mut().find(|(m, _)| *m == t.machine) {
            Some((_, g)) => g.push(t.clone()),
            None => groups.push((t.machine.clone(), vec![t.clone()])),
        }
    }
    if let [(name, _)] = groups.as_mut_slice() {
        *name = None;
    }
    groups
}
