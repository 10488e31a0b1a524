//! Checks findings against a world's truth: which planted facts they
//! recovered, and every claim the truth contradicts — an effect that is
//! not there or points the wrong way, "no effect" on a real one, an
//! interaction that is additive in truth, a free win that costs quality
//! or gains nothing, an anomaly on a trial measured as it should be, a
//! failure rule whose region mostly runs.

use engine_bridge::Settings;

use super::{Fact, Truth, World};
use crate::findings::{Finding, Margins, holds};
use crate::metric::Scale;
use crate::study::{Metric, Study};

/// What a study's findings got right and wrong.
#[derive(Debug, Clone, PartialEq)]
pub struct Score {
    /// Each planted fact and whether it was found.
    pub facts: Vec<(Fact, bool)>,
    /// Each claim the truth contradicts, said why.
    pub wrong: Vec<String>,
}

impl Score {
    pub fn found(&self) -> usize {
        self.facts.iter().filter(|(_, f)| *f).count()
    }
}

/// How far `a` is from `b` on `m`'s scale: a log ratio, or a difference
/// for rates and divergences.
fn gap(m: Metric, a: f64, b: f64) -> f64 {
    if m.scale() == Scale::Ratio { (a / b).ln() } else { a - b }
}

/// The true value of `m` at the baseline with `changes`.
fn truth_at(world: &World, base: &Settings, changes: &[(&str, &str)], m: Metric) -> Option<f64> {
    let mut s = base.clone();
    for (k, v) in changes {
        s.insert(k.to_string(), v.to_string());
    }
    match (world.truth)(&s) {
        Truth::Runs(metrics) => metrics.get(&m).copied(),
        Truth::Fails(_) => None,
    }
}

/// The margin a "no effect" claim on `m` promised, on its scale.
fn margin(m: Metric, margins: &Margins) -> f64 {
    margins.on_model_scale(m)
}

/// The findings of `study` (run on `world`, `trials`) checked against the truth.
pub fn score(
    world: &World,
    study: &Study,
    trials: &[crate::findings::TrialFacts],
    found: &[Finding],
    margins: &Margins,
) -> Score {
    let base = &study.baseline;
    let at = |changes: &[(&str, &str)], m: Metric| truth_at(world, base, changes, m);
    let mut wrong = Vec::new();
    let silent = |m: &Metric| world.silent.contains(m);
    for f in found {
        match f {
            Finding::Effect { setting, metric, .. }
            | Finding::NoEffect { setting, metric, .. }
            | Finding::Interaction { settings: (setting, _), metric, .. }
                if silent(metric) =>
            {
                wrong.push(format!(
                    "claim on {} that its few items cannot support: `{setting}`",
                    metric.name()
                ));
            }
            Finding::FreeWin { quality, .. } if quality.iter().any(|(m, _)| silent(m)) => {
                wrong.push("free win judged on a share its few items cannot support".into());
            }
            Finding::Effect { setting, metric, goal, levels, at: held, .. } => {
                let (b, w) = (&levels[0].value, &levels[levels.len() - 1].value);
                // Compared where the finding says: at the baseline, or with
                // one partner at another value.
                let with = |v: &str| {
                    let mut changes = vec![(setting.as_str(), v)];
                    changes.extend(held.iter().map(|(p, pv)| (p.as_str(), pv.as_str())));
                    at(&changes, *metric)
                };
                let (Some(tb), Some(tw)) = (with(b), with(w)) else {
                    continue;
                };
                let d = goal.oriented(gap(*metric, tb, tw));
                if d.abs() < 0.005 {
                    wrong.push(format!("invented effect: `{setting}` on {}", metric.name()));
                } else if d < 0.0 {
                    wrong.push(format!(
                        "reversed effect: `{setting}` on {} ({b} best, {w} worst)",
                        metric.name()
                    ));
                }
            }
            Finding::NoEffect { setting, metric, levels, unshown, .. } => {
                // At the baseline, and with every other setting at each of
                // its values, but where the claim says it was not shown.
                let spans: Vec<(&str, Vec<String>)> = study
                    .space
                    .params
                    .iter()
                    .filter(|p| p.name != *setting)
                    .map(|p| (p.name.as_str(), p.domain.span()))
                    .collect();
                let mut held: Vec<Vec<(&str, &str)>> = vec![vec![]];
                for (partner, values) in &spans {
                    held.extend(
                        values
                            .iter()
                            .filter(|w| !unshown.iter().any(|(k, v)| k == partner && v == *w))
                            .map(|w| vec![(*partner, w.as_str())]),
                    );
                }
                let worst = held
                    .iter()
                    .filter_map(|h| {
                        let t0 = at(h, *metric)?;
                        let gaps = levels.iter().filter_map(|l| {
                            let mut c = h.clone();
                            c.push((setting, &l.value));
                            Some(gap(*metric, at(&c, *metric)?, t0).abs())
                        });
                        Some(gaps.fold(0.0, f64::max))
                    })
                    .fold(0.0, f64::max);
                if worst > margin(*metric, margins) + 0.01 {
                    wrong.push(format!(
                        "\"no effect\" on a real effect: `{setting}` on {}",
                        metric.name()
                    ));
                }
            }
            Finding::Interaction { settings: (a, b), bases, metric, cells, .. } => {
                let non_additive = cells
                    .iter()
                    .filter_map(|c| {
                        let (va, vb) = (&c.values.0, &c.values.1);
                        let both = at(&[(a, va), (b, vb)], *metric)?;
                        let only_a = at(&[(a, va), (b, &bases.1)], *metric)?;
                        let only_b = at(&[(a, &bases.0), (b, vb)], *metric)?;
                        let none = at(&[(a, &bases.0), (b, &bases.1)], *metric)?;
                        Some((gap(*metric, both, only_a) - gap(*metric, only_b, none)).abs())
                    })
                    .fold(0.0, f64::max);
                if non_additive < 0.02 {
                    wrong.push(format!("invented interaction: `{a}` × `{b}` on {}", metric.name()));
                }
            }
            Finding::FreeWin { changes, gains, .. } => {
                let to: Vec<(&str, &str)> =
                    changes.iter().map(|c| (c.setting.as_str(), c.value.as_str())).collect();
                let what: Vec<String> =
                    changes.iter().map(|c| format!("`{}` = {}", c.setting, c.value)).collect();
                let quality_lost =
                    Metric::ALL.into_iter().filter(|m| m.measures_quality()).any(|m| {
                        let (Some(with), Some(without)) = (at(&to, m), at(&[], m)) else {
                            return false;
                        };
                        gap(m, with, without).abs() > margin(m, margins) + 0.005
                    });
                let no_gain = gains.iter().any(|g| {
                    let (Some(with), Some(without)) = (at(&to, g.metric), at(&[], g.metric)) else {
                        return true;
                    };
                    g.metric.natural_goal().oriented(gap(g.metric, with, without)) < 0.005
                });
                if quality_lost {
                    wrong.push(format!("free win that costs quality: {}", what.join(" and ")));
                }
                if no_gain {
                    wrong.push(format!("free win that gains nothing: {}", what.join(" and ")));
                }
            }
            Finding::Anomaly { trial, metric, value, .. } => {
                let Some(t) = trials.iter().find(|t| t.id == *trial) else { continue };
                let truth = match (world.truth)(&t.settings) {
                    Truth::Runs(m) => m.get(metric).copied(),
                    Truth::Fails(_) => None,
                };
                if let Some(truth) = truth {
                    let sd = match metric.scale() {
                        Scale::Rate => world.noise.quality,
                        Scale::Difference => world.noise.divergence,
                        Scale::Ratio => world.noise.speed.max(world.noise.memory),
                    };
                    if gap(*metric, *value, truth).abs() < 4.0 * sd {
                        wrong.push(format!(
                            "anomaly on a trial measured as it should be: trial {trial}"
                        ));
                    }
                }
            }
            Finding::AtPick { settings, metric, goal, rows, .. } => {
                wrong.extend(at_pick_wrong(world, settings, *metric, *goal, rows, margins));
            }
            Finding::Failures { cause, rule: Some(rule), .. } => {
                let inside = region(study, rule.conditions.iter().chain(&rule.also));
                let failing = inside.iter().filter(|s| fails_so(world, s, cause)).count();
                if !inside.is_empty() && (failing as f64) < 0.9 * inside.len() as f64 {
                    wrong.push(format!(
                        "failure rule whose region mostly runs: {cause} ({failing} of {} fail)",
                        inside.len()
                    ));
                }
                // Each condition needed: without it, the region must mostly run.
                for (k, c) in rule.conditions.iter().enumerate() {
                    let rest = rule.conditions.iter().enumerate().filter(|(j, _)| *j != k);
                    let wider = region(study, rest.map(|(_, c)| c));
                    let fail = wider.iter().filter(|s| fails_so(world, s, cause)).count();
                    if wider.len() > inside.len() && fail as f64 >= 0.9 * wider.len() as f64 {
                        wrong.push(format!(
                            "failure rule with a condition the failures merely shared: {cause}: `{}`",
                            c.setting
                        ));
                    }
                }
            }
            _ => {}
        }
    }
    let facts = world
        .facts
        .iter()
        .map(|fact| (fact.clone(), recovered(fact, world, study, found, &wrong)))
        .collect();
    Score { facts, wrong }
}

/// Each claim at the pick the truth contradicts: a value worse or better
/// than the pick's that is not (or the other way), one within the margin
/// that is beyond it.
fn at_pick_wrong(
    world: &World,
    pick: &Settings,
    metric: Metric,
    goal: crate::metric::Goal,
    rows: &[crate::findings::PickRow],
    margins: &Margins,
) -> Vec<String> {
    use crate::findings::Versus;
    let Some(there) = truth_at(world, pick, &[], metric) else { return vec![] };
    let mut wrong = Vec::new();
    for r in rows {
        for o in &r.others {
            let Some(t) = truth_at(world, pick, &[(&r.setting, &o.value)], metric) else {
                continue;
            };
            let d = goal.oriented(gap(metric, t, there));
            let what = format!("`{}` = {} at the pick on {}", r.setting, o.value, metric.name());
            match o.versus {
                Versus::Worse if d > -0.005 => wrong.push(format!("invented cost: {what}")),
                Versus::Better if d < 0.005 => wrong.push(format!("invented gain: {what}")),
                Versus::Within if d.abs() > margin(metric, margins) + 0.01 => {
                    wrong.push(format!("\"the same\" on a real change: {what}"))
                }
                _ => {}
            }
        }
    }
    wrong
}

/// The configurations of `study`'s grid (over its baseline) that meet
/// every one of `conditions`.
fn region<'a>(
    study: &Study,
    conditions: impl Iterator<Item = &'a crate::findings::Condition> + Clone,
) -> Vec<Settings> {
    study
        .space
        .grid()
        .take(100_000)
        .map(|c| {
            let mut s = study.baseline.clone();
            s.extend(c);
            s
        })
        .filter(|s| conditions.clone().all(|c| holds(c, s)))
        .collect()
}

/// Whether the truth says `settings` fail for `cause`.
fn fails_so(world: &World, settings: &Settings, cause: &str) -> bool {
    matches!((world.truth)(settings), Truth::Fails(c) if c == cause)
}

/// Whether the findings state `fact`.
fn recovered(
    fact: &Fact,
    world: &World,
    study: &Study,
    found: &[Finding],
    wrong: &[String],
) -> bool {
    let interacts = |s: &str, m: Metric| {
        found.iter().any(|f| matches!(f, Finding::Interaction { settings: (a, b), metric, .. } if *metric == m && (a == s || b == s)))
    };
    let effect = |s: &str, m: Metric| {
        found.iter().find_map(|f| match f {
            Finding::Effect { setting, metric, levels, .. } if setting == s && *metric == m => {
                Some(levels[0].value.clone())
            }
            _ => None,
        })
    };
    match fact {
        Fact::Effect { setting, metric } => effect(setting, *metric).is_some() || interacts(setting, *metric),
        Fact::Peak { setting, metric, best } => effect(setting, *metric).is_some_and(|b| best.contains(&b)),
        Fact::Interaction { a, b, metric } => found.iter().any(|f| {
            matches!(f, Finding::Interaction { settings: (x, y), metric: m, .. }
                if m == metric && ((x == a && y == b) || (x == b && y == a)))
        }),
        Fact::Lossless { setting, value } => found.iter().any(|f| {
            matches!(f, Finding::FreeWin { changes, .. }
                if changes.iter().any(|c| &c.setting == setting && &c.value == value))
        }),
        Fact::Lossy { setting, metric, .. } => effect(setting, *metric).is_some() || interacts(setting, *metric),
        Fact::FailureRule { cause } => found.iter().any(|f| match f {
            Finding::Failures { cause: c, rule: Some(rule), .. } if c == cause => {
                // The rule's region is the truth's, over the whole grid.
                study.space.grid().take(100_000).all(|c| {
                    let mut s = study.baseline.clone();
                    s.extend(c);
                    let fails = fails_so(world, &s, cause);
                    fails == rule.conditions.iter().all(|k| holds(k, &s))
                }) && !wrong.iter().any(|w| w.contains("failure rule"))
            }
            _ => false,
        }),
        Fact::NoEffect { setting, metric } => found.iter().any(|f| {
            matches!(f, Finding::NoEffect { setting: s, metric: m, .. } if s == setting && m == metric)
        }),
    }
}
