//! A bisection's answer: the most ambitious value of its setting that held
//! every objective's and bound's limits, and the nearest value beyond it
//! that did not, each with its trial.

use super::{Finding, TrialFacts};
use crate::study::{Goal, Measure, StrategyKind, StudyDef, Target};
use tunebook_domain::Role;

/// What a bisection study found, or `None` for other studies (or one
/// whose objectives cannot be read).
pub fn boundary(def: &StudyDef, trials: &[TrialFacts]) -> Option<Finding> {
    if def.strategy.kind != StrategyKind::Bisect {
        return None;
    }
    let targets = targets(def)?;
    let first = targets.first()?;
    let Measure::Setting(setting) = &first.measure else { return None };
    let goal = first.goal;
    let baseline = trials.iter().find(|t| t.role == Some(Role::Baseline));
    // Why a trial did not hold, or `None` when it held.
    let miss = |t: &TrialFacts| -> Option<String> {
        if !t.done {
            return Some(t.failure.as_ref().map_or("it did not finish".into(), |f| f.0.clone()));
        }
        broken(&targets, t, baseline)
    };
    let value = |t: &TrialFacts| t.settings.get(setting)?.trim().parse::<f64>().ok();
    let rungs: Vec<(f64, &TrialFacts, Option<String>)> = trials
        .iter()
        .filter(|t| matches!(t.role, Some(Role::Baseline | Role::Search)))
        .filter_map(|t| Some((goal.oriented(value(t)?), t, miss(t))))
        .collect();
    // A value holds when none of its runs missed.
    let held_always = |v: f64| rungs.iter().filter(|r| r.0 == v).all(|r| r.2.is_none());
    let held = rungs
        .iter()
        .filter(|r| held_always(r.0))
        .max_by(|a, b| a.0.total_cmp(&b.0).then(b.1.id.cmp(&a.1.id)))
        .map(|r| (r.1.id, r.1.settings[setting].clone()));
    let again = held.as_ref().and_then(|(id, v)| {
        rungs.iter().find(|r| r.1.id != *id && r.1.settings[setting] == *v).map(|r| r.1.id)
    });
    let beyond = held
        .as_ref()
        .map_or(f64::MIN, |(id, _)| rungs.iter().find(|r| r.1.id == *id).map_or(f64::MIN, |r| r.0));
    let failed = rungs
        .iter()
        .filter(|r| r.0 > beyond)
        .filter_map(|r| Some((r.0, r.1, r.2.clone()?)))
        .min_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, t, why)| (t.id, t.settings[setting].clone(), why));
    Some(Finding::Boundary { setting: setting.clone(), goal, held, again, failed })
}

/// The objectives' and bounds' limits of `def`, objectives first; `None`
/// when one cannot be read.
fn targets(def: &StudyDef) -> Option<Vec<Target>> {
    def.objectives.iter().chain(&def.bounds).map(|t| t.read().ok()).collect()
}

/// The first of `targets` (objectives' and bounds' limits) that the
/// ended trial `t` did not hold, as a reason; `None` when it held them all.
fn broken(targets: &[Target], t: &TrialFacts, baseline: Option<&TrialFacts>) -> Option<String> {
    targets.iter().find_map(|target| {
        let value = target.measure.value(&t.metrics, &t.settings);
        let base = baseline.and_then(|b| target.measure.value(&b.metrics, &b.settings));
        match value {
            Some(v) if target.within(v, base) => None,
            Some(v) => Some(format!("{} was {v}, outside its bound", target.measure.name())),
            None => (target.min.is_some() || target.max.is_some())
                .then(|| format!("{} was not measured", target.measure.name())),
        }
    })
}

/// Notes on each trial that ran the bound it broke, if any, as the study
/// `def` states its objectives' and bounds' limits (a limit relative to
/// the baseline read against the baseline trial).
pub fn mark_missed(def: &StudyDef, trials: &mut [TrialFacts]) {
    let Some(targets) = targets(def) else { return };
    let baseline = trials.iter().find(|t| t.role == Some(Role::Baseline)).cloned();
    for t in trials.iter_mut().filter(|t| t.done) {
        t.missed = broken(&targets, t, baseline.as_ref());
    }
}

/// The finding as a sentence.
pub(super) fn markdown(
    setting: &str,
    goal: Goal,
    held: &Option<(i64, String)>,
    again: Option<i64>,
    failed: &Option<(i64, String, String)>,
) -> String {
    let most = if goal == Goal::Max { "Largest" } else { "Smallest" };
    let again = again.map_or(String::new(), |t| format!(", and again in trial {t}"));
    match (held, failed) {
        (Some((trial, v)), Some((ft, fv, why))) => format!(
            "**{most} `{setting}` that holds every bound: {v}** — trial {trial}{again}; the \
             nearest value beyond it that was tried, {fv}, did not (trial {ft}: {why})."
        ),
        (Some((trial, v)), None) => format!(
            "**{most} `{setting}` that holds every bound: {v}** — trial {trial}{again}; no \
             value beyond it failed (it is the end of the range tried)."
        ),
        (None, Some((ft, fv, why))) => format!(
            "**No value of `{setting}` held every bound**: even {fv} did not (trial {ft}: {why})."
        ),
        (None, None) => format!("**No trial of `{setting}` has ended yet.**"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::metric::Metric;

    fn facts(id: i64, ctx: u32, decode: Option<f64>, role: &str) -> TrialFacts {
        TrialFacts {
            id,
            settings: [("ctx_size".to_string(), ctx.to_string())].into(),
            done: decode.is_some(),
            failure: decode.is_none().then(|| ("out_of_memory".into(), "oom".into())),
            metrics: decode.map_or(BTreeMap::new(), |d| [(Metric::DecodeTps, d)].into()),
            ceiling_tps: None,
            role: Role::parse(role),
            drift_pct: None,
            missed: None,
            ..Default::default()
        }
    }

    #[test]
    fn the_largest_value_that_held_and_the_nearest_that_did_not() {
        let def = StudyDef::from_toml(
            "name = \"b\"\nprofile = \"p\"\nmodel = \"m\"\nstrategy = { kind = \"bisect\" }\n\
             [space]\nctx_size = [1024, 2048, 4096, 8192, 16384]\n\
             [[objectives]]\nmetric = \"setting.ctx_size\"\n\
             [[bounds]]\nmetric = \"decode_tps\"\nmin = \"10\"\n",
        )
        .unwrap();
        let trials = [
            facts(1, 1024, Some(30.0), "baseline"),
            facts(2, 16384, None, "search"),
            facts(3, 4096, Some(12.0), "search"),
            facts(4, 8192, Some(9.0), "search"),
        ];
        let Some(Finding::Boundary { held, failed, .. }) = boundary(&def, &trials) else {
            panic!("a boundary")
        };
        assert_eq!(held, Some((3, "4096".into())));
        let (trial, value, why) = failed.unwrap();
        assert_eq!((trial, value.as_str()), (4, "8192"), "the nearest beyond, not the end");
        assert!(why.contains("decode_tps was 9"), "{why}");
        let text = markdown("ctx_size", Goal::Max, &Some((3, "4096".into())), None, &None);
        assert!(text.contains("Largest `ctx_size` that holds every bound: 4096"), "{text}");
        // Measured again: 4096 holds a second time and the finding says
        // so; had it failed, 2048 would be the answer and 4096 the failure.
        let mut again = trials.to_vec();
        again.extend([facts(5, 2048, Some(20.0), "search"), facts(6, 4096, Some(11.0), "search")]);
        let Some(Finding::Boundary { held, again: second, .. }) = boundary(&def, &again) else {
            panic!("a boundary")
        };
        assert_eq!((held, second), (Some((3, "4096".into())), Some(6)));
        let text = markdown("ctx_size", Goal::Max, &Some((3, "4096".into())), Some(6), &None);
        assert!(text.contains("trial 3, and again in trial 6"), "{text}");
        again[5] = facts(6, 4096, Some(9.5), "search");
        let Some(Finding::Boundary { held, again: second, failed, .. }) = boundary(&def, &again)
        else {
            panic!("a boundary")
        };
        assert_eq!((held, second), (Some((5, "2048".into())), None));
        assert_eq!(failed.map(|f| (f.0, f.1)), Some((6, "4096".into())), "its failed run");
        let other = StudyDef { strategy: Default::default(), ..def };
        assert!(boundary(&other, &trials).is_none(), "only a bisection claims a boundary");
    }

    #[test]
    fn a_trial_that_broke_a_bound_is_no_pick() {
        // The largest context that ran decoded below the bound: the best
        // context named is the largest that held it.
        let def = StudyDef::from_toml(
            "name = \"b\"\nprofile = \"p\"\nmodel = \"m\"\n\
             [space]\nctx_size = [1024, 4096, 8192]\n\
             [[objectives]]\nmetric = \"setting.ctx_size\"\n\
             [[bounds]]\nmetric = \"decode_tps\"\nmin = \"10\"\n",
        )
        .unwrap();
        let mut trials = vec![
            facts(1, 1024, Some(30.0), "baseline"),
            facts(2, 8192, Some(9.0), "search"),
            facts(3, 4096, Some(12.0), "search"),
        ];
        mark_missed(&def, &mut trials);
        let missed: Vec<Option<&str>> = trials.iter().map(|t| t.missed.as_deref()).collect();
        assert_eq!(missed, [None, Some("decode_tps was 9, outside its bound"), None]);
        let found = super::super::findings(&trials, &["ctx_size".into()], &def_measures(&def));
        let best = found.iter().find_map(|f| match f {
            Finding::Best { trial, value, .. } => Some((*trial, *value)),
            _ => None,
        });
        assert_eq!(best, Some((3, 4096.0)), "{found:#?}");
    }

    fn def_measures(def: &StudyDef) -> Vec<(Measure, Goal)> {
        def.objectives.iter().map(|t| t.read().map(|t| (t.measure, t.goal)).unwrap()).collect()
    }
}
