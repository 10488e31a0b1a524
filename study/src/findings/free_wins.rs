//! Free wins: changes from the baseline, one setting or a few together,
//! with a shown gain, no shown cost and equivalence on every quality
//! measure, judged by the same models and Holm's correction as every other
//! claim.

use super::analysis::Analysis;
use super::design::value_of;
use super::ols::t_quantile;
use super::verdicts::{Adjusted, better_pct, equivalent, interval, margin};
use super::{ALPHA, Change, EQUIVALENCE, Finding, GAINS, Gain, INTERVAL, Margins};

/// Free wins: a change from the baseline (one setting's value, or two
/// settings that act together changed at once) with a gain shown beyond
/// noise and beyond the margin on some speed or memory measure, no cost
/// beyond the margin shown absent on any other, and every quality measure
/// measured shown equivalent to the baseline's. Per setting (or pair), the
/// change with the largest gain.
pub fn free_wins(analyses: &[Analysis], adjusted: &Adjusted, margins: &Margins) -> Vec<Finding> {
    let quality: Vec<&Analysis> = analyses.iter().filter(|a| a.metric.measures_quality()).collect();
    if quality.is_empty() {
        return vec![];
    }
    let mut out = Vec::new();
    for group in candidate_groups(analyses, adjusted) {
        let mut best: Option<(f64, Finding)> = None;
        for change in combinations(analyses, &group) {
            if let Some((gain, finding)) = free_win(analyses, adjusted, margins, &quality, &change)
                && best.as_ref().is_none_or(|(b, _)| gain > *b)
            {
                best = Some((gain, finding));
            }
        }
        out.extend(best.map(|(_, f)| f));
    }
    out
}

/// The settings a free win may change: each alone, and each pair found
/// to act together on some metric.
fn candidate_groups(analyses: &[Analysis], adjusted: &Adjusted) -> Vec<Vec<String>> {
    let mut groups: Vec<Vec<String>> = Vec::new();
    for a in analyses {
        for f in &a.design.factors {
            if !groups.iter().any(|g| g.len() == 1 && g[0] == f.setting) {
                groups.push(vec![f.setting.clone()]);
            }
        }
    }
    for (a, ps) in analyses.iter().zip(&adjusted.pairs) {
        for (&(x, y, _), &p) in a.pairs.iter().zip(ps) {
            let pair =
                vec![a.design.factors[x].setting.clone(), a.design.factors[y].setting.clone()];
            if p <= ALPHA && !groups.contains(&pair) {
                groups.push(pair);
            }
        }
    }
    groups
}

/// Every change of a group's settings away from the baseline (each of
/// them changed), as (setting, value, baseline's value).
fn combinations(analyses: &[Analysis], group: &[String]) -> Vec<Vec<(String, String, String)>> {
    let mut out: Vec<Vec<(String, String, String)>> = vec![vec![]];
    for setting in group {
        let Some(f) =
            analyses.iter().flat_map(|a| &a.design.factors).find(|f| &f.setting == setting)
        else {
            return vec![];
        };
        let base = f.base();
        let values: Vec<String> = f.points().into_iter().filter(|v| *v != base).collect();
        out = out
            .into_iter()
            .flat_map(|prefix| {
                values.iter().map(move |v| {
                    let mut c = prefix.clone();
                    c.push((setting.clone(), v.clone(), f.base()));
                    c
                })
            })
            .collect();
    }
    out
}

/// The change's contrast row in `a`, `None` where `a` does not model one
/// of its settings.
fn change_row(a: &Analysis, change: &[(String, String, String)]) -> Option<Vec<f64>> {
    let at: Option<Vec<(usize, &str)>> = change
        .iter()
        .map(|(s, v, _)| Some((a.design.factors.iter().position(|f| &f.setting == s)?, v.as_str())))
        .collect();
    Some(a.design.contrast(&at?))
}

/// The free win `change` makes, with its largest gain in percent, if it is one.
fn free_win(
    analyses: &[Analysis],
    adjusted: &Adjusted,
    margins: &Margins,
    quality: &[&Analysis],
    change: &[(String, String, String)],
) -> Option<(f64, Finding)> {
    let mut gains = Vec::new();
    let mut biggest = 0.0f64;
    for (k, a) in analyses.iter().enumerate() {
        if !GAINS.contains(&a.metric) {
            continue;
        }
        let Some(row) = change_row(a, change) else { continue };
        let (est, se) = a.contrast(&row)?;
        let oriented = a.goal.oriented(est);
        let m = margin(a, margins);
        let t90 = t_quantile(EQUIVALENCE, a.fit.df());
        let t95 = t_quantile(1.0 - ALPHA, a.fit.df());
        let moved = change.iter().any(|(s, _, _)| {
            let i = a.design.factors.iter().position(|f| &f.setting == s);
            i.is_some_and(|i| adjusted.mains[k][i].is_some_and(|p| p <= ALPHA))
        });
        // A gain beyond the noise, and beyond the margin: no one changes a
        // setting for less than they would call the same.
        if moved && oriented - t95 * se > 0.0 && oriented > m {
            let iv = interval(a, est, se, INTERVAL);
            let pct = better_pct(a, est);
            biggest = biggest.max(pct);
            let base_row = a.design.row(&a.design.base_settings());
            let without = a.natural(a.fit.predict(&base_row));
            let with = if a.told_as_ratio() { without * iv.est } else { without + iv.est };
            gains.push(Gain { metric: a.metric, with, without, pct, interval: iv });
        } else if oriented - t90 * se <= -m {
            // A cost not shown absent: not free.
            return None;
        }
    }
    if gains.is_empty() {
        return None;
    }
    let mut held = Vec::new();
    for a in quality {
        let row = change_row(a, change)?;
        let (est, se) = a.contrast(&row)?;
        let points = [(String::new(), Some((est, se)))];
        if equivalent(a, &points, margin(a, margins)) != Some(true) {
            return None;
        }
        held.push((a.metric, interval(a, est, se, EQUIVALENCE)));
    }
    let trials = analyses
        .iter()
        .flat_map(|a| a.trials.iter())
        .filter(|t| {
            change.iter().all(|(s, v, base)| {
                let got = value_of(&t.settings, s);
                got == *v || got == *base
            })
        })
        .map(|t| t.id)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let changes = change
        .iter()
        .map(|(setting, value, over)| Change {
            setting: setting.clone(),
            value: value.clone(),
            over: over.clone(),
        })
        .collect();
    Some((biggest, Finding::FreeWin { changes, gains, quality: held, trials }))
}
