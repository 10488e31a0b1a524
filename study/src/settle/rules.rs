//! Settling a failure rule in doubt: one run of a failure with a value
//! its failures merely shared changed, or one inside a rule and outside
//! another the trials could not choose between; and for a cause that
//! failed once, too few for any rule, its failure changed in one setting.

use std::collections::BTreeMap;
use tunebook_domain::Role;

use engine_bridge::Settings;

use super::{Plan, Target};
use crate::findings::{self, Condition, Finding, Op, TrialFacts};
use crate::study::Study;

/// Where a cause of failure's rule is in doubt, one run that settles it:
/// a failure inside the rule with one value changed, where the study's
/// space allows it. A rule that names values its failures merely shared
/// (`also`) is tested by changing one: if the run fails the same way the
/// value was never the cause, if it runs the rule needs it. Between two
/// rules the trials cannot choose from, a run inside the one and outside
/// the other rules out one of them. A cause that failed once gets its
/// failure changed in one setting (see [`single`]). A configuration
/// already run is not planned again.
pub fn rule_plans(study: &Study, trials: &[TrialFacts], found: &[Finding]) -> Vec<Plan> {
    let mut plans = Vec::new();
    for f in found {
        let Finding::Failures { cause, rule, undecided, trials: failed, .. } = f else {
            continue;
        };
        // (the rule kept, the condition broken)
        let mut doubts: Vec<(Vec<Condition>, Condition)> = Vec::new();
        if let Some(rule) = rule {
            doubts.extend(rule.also.iter().map(|c| (rule.conditions.clone(), c.clone())));
        }
        for pair in undecided.windows(2) {
            let (kept, other) = (&pair[0].conditions, &pair[1].conditions);
            doubts.extend(
                other
                    .iter()
                    .filter(|c| !kept.iter().any(|k| k.setting == c.setting))
                    .map(|c| (kept.clone(), c.clone())),
            );
        }
        if let [only] = failed.as_slice()
            && rule.is_none()
            && undecided.is_empty()
        {
            doubts.extend(single(study, trials, *only).into_iter().map(|c| (vec![], c)));
        }
        for (kept, broken) in &doubts {
            let (kept, broken) = (kept.as_slice(), broken);
            if plans.iter().any(|p: &Plan| p.target == Target::Rule { cause: cause.clone() }) {
                break;
            }
            let inside = trials.iter().find(|t| {
                t.failure.as_ref().is_some_and(|(c, _)| c == cause)
                    && kept.iter().chain([broken]).all(|c| findings::holds(c, &t.settings))
            });
            let Some(inside) = inside else { continue };
            let Some(config) = other_value(study, trials, &inside.settings, kept, broken) else {
                continue;
            };
            let value = config.get(&broken.setting).cloned().unwrap_or_default();
            let note = format!(
                "settle the rule for {cause}: trial {} with `{}` = {value}",
                inside.id, broken.setting
            );
            plans.push(Plan {
                setting: broken.setting.clone(),
                target: Target::Rule { cause: cause.clone() },
                runs: vec![(config, note)],
                needed: Some(1),
            });
        }
    }
    plans
}

/// `settings` with `broken`'s setting at a value that does not meet
/// `broken`, every condition `kept` still met (the values trials ran, the
/// most run first, then the space's), where the study's space allows it
/// and no trial ran it already.
fn other_value(
    study: &Study,
    trials: &[TrialFacts],
    settings: &Settings,
    kept: &[findings::Condition],
    broken: &findings::Condition,
) -> Option<Settings> {
    if !study.def.space.contains_key(&broken.setting) {
        return None;
    }
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for t in trials {
        let v = t.settings.get(&broken.setting).cloned().unwrap_or_default();
        *counts.entry(v).or_default() += 1;
    }
    let mut values: Vec<(String, usize)> = counts.into_iter().collect();
    values.sort_by_key(|v| std::cmp::Reverse(v.1));
    // Then the values next to its own on the space's grid, then the rest:
    // a search may never have moved it.
    let domain = study.space.param(&broken.setting).map(|p| &p.domain);
    let own = settings.get(&broken.setting).cloned().unwrap_or_default();
    let untried = domain.map(|d| [d.neighbours(&own), d.grid()].concat()).unwrap_or_default();
    let values = values.into_iter().map(|(v, _)| v).chain(untried);
    values.into_iter().find_map(|v| {
        let mut config = settings.clone();
        config.insert(broken.setting.clone(), v.clone());
        let allowed = !v.is_empty()
            && !findings::holds(broken, &config)
            && kept.iter().all(|c| findings::holds(c, &config))
            && !trials.iter().any(|t| t.settings == config)
            && study.space.check(&config).is_ok()
            && study.space.allows(&config);
        allowed.then_some(config)
    })
}

/// Most runs spent on a cause that failed once: each its failure changed
/// in one setting. A failure that neither recurs nor names a setting by
/// then may have been the machine's, not the configuration's.
const MAX_SINGLE: usize = 2;

/// For a cause that failed only in trial `only`, which no rule can be
/// drawn from: its values, each a condition to break by one run, the one
/// most trials that ran shared first (the least suspect: changing it most
/// likely fails again, which gives a rule its second failure; if it runs,
/// that value is needed). None once [`MAX_SINGLE`] such runs were made.
fn single(study: &Study, trials: &[TrialFacts], only: i64) -> Vec<Condition> {
    let Some(failed) = trials.iter().find(|t| t.id == only) else { return vec![] };
    let differs = |t: &TrialFacts| {
        let moved = failed.settings.iter().filter(|(k, v)| t.settings.get(*k) != Some(v)).count();
        t.role == Some(Role::Settle) && moved == 1
    };
    if trials.iter().filter(|t| differs(t)).count() >= MAX_SINGLE {
        return vec![];
    }
    let ran: Vec<&TrialFacts> = trials.iter().filter(|t| t.done).collect();
    let mut conditions: Vec<(usize, Condition)> = study
        .def
        .space
        .keys()
        .filter_map(|setting| {
            let value = failed.settings.get(setting)?.clone();
            let shared = ran.iter().filter(|t| t.settings.get(setting) == Some(&value)).count();
            Some((shared, Condition { setting: setting.clone(), op: Op::Is, value }))
        })
        .collect();
    conditions.sort_by_key(|(shared, _)| std::cmp::Reverse(*shared));
    conditions.into_iter().map(|(_, c)| c).collect()
}
