//! What a claim rests on, beyond its test: the values of other settings
//! a setting was never moved at (a "no effect" does not reach them), the
//! values it ran only together with another setting's same other value
//! (what it did there may be theirs together), and for a share of few
//! items, the chance its items alone allow.

use engine_bridge::Settings;

use super::analysis::Analysis;
use super::design::value_of;
use super::ols::{t_p, t_quantile};
use super::{EQUIVALENCE, Undetermined};

/// Values of factor `i`, each with its contrast against the base.
type Points = Vec<(String, Option<(f64, f64)>)>;

/// The values of the other factors at which factor `i` was never moved
/// off its base: a "no effect" shown elsewhere does not reach them (an
/// effect confined to long contexts that the search barely visited).
/// Numbers along a range are judged by their quarters' ends.
pub(super) fn unshown(a: &Analysis, i: usize) -> Vec<(String, String)> {
    let own = &a.design.factors[i];
    let base = own.base();
    let moved: Vec<&super::analysis::Measured> =
        a.trials.iter().filter(|t| value_of(&t.settings, &own.setting) != base).collect();
    let mut out = Vec::new();
    for (j, other) in a.design.factors.iter().enumerate() {
        if j == i || other.is_curve() {
            continue;
        }
        for w in other.points() {
            if !moved.iter().any(|t| value_of(&t.settings, &other.setting) == w) {
                out.push((other.setting.clone(), w));
            }
        }
    }
    out
}

/// The values of factor `i` (one of a few) whose every trial held one
/// other setting (also one of a few) at the same value off its base, with
/// that setting: what those trials measured may be the two together (a
/// q4_0 K cache slowing decode only at the longest context, where every
/// trial of that context ran q4_0), so no effect of `i` alone at them is
/// stated, and no "no effect".
/// `held`: where the values are compared, another setting at a value of
/// its own (only the trials there count, and that setting is no suspect).
pub(super) fn confounded(
    a: &Analysis,
    i: usize,
    held: Option<(usize, &str)>,
) -> Vec<(String, String)> {
    let own = &a.design.factors[i];
    if own.is_curve() {
        return vec![];
    }
    let base = own.base();
    let there = |t: &&super::analysis::Measured| {
        held.is_none_or(|(j, w)| value_of(&t.settings, &a.design.factors[j].setting) == w)
    };
    let mut out = Vec::new();
    for v in own.points().into_iter().filter(|v| *v != base) {
        let at: Vec<&super::analysis::Measured> = a
            .trials
            .iter()
            .filter(|t| value_of(&t.settings, &own.setting) == v)
            .filter(there)
            .collect();
        if at.is_empty() {
            continue;
        }
        for (j, other) in a.design.factors.iter().enumerate() {
            if j == i || other.is_curve() || held.is_some_and(|(h, _)| h == j) {
                continue;
            }
            let w = value_of(&at[0].settings, &other.setting);
            if w != other.base() && at.iter().all(|t| value_of(&t.settings, &other.setting) == w) {
                out.push((v.clone(), other.setting.clone()));
            }
        }
    }
    out
}

/// The p-value of the clearest contrast with the items' chance in its
/// error, Bonferroni over the contrasts.
pub(super) fn items_p(a: &Analysis, points: &Points) -> f64 {
    let ps: Vec<f64> = points
        .iter()
        .filter_map(|(_, e)| *e)
        .map(|(est, se)| t_p(est / se.max(f64::MIN_POSITIVE), a.fit.df()))
        .collect();
    (ps.iter().copied().fold(1.0, f64::min) * ps.len().max(1) as f64).min(1.0)
}

/// Whether value `v` of factor `i` ran beside each value `at` gives the
/// other settings of a few values, but those it acts with in the model
/// (whose cells the model measures itself): what it did at `at` is then
/// measured, not only carried over from elsewhere.
pub(super) fn ran_beside(a: &Analysis, i: usize, v: &str, at: &Settings) -> bool {
    let own = &a.design.factors[i].setting;
    let partners = a.interacts(i);
    a.design.factors.iter().enumerate().all(|(j, other)| {
        j == i
            || other.is_curve()
            || partners.contains(&j)
            || a.trials.iter().any(|t| {
                value_of(&t.settings, own) == v
                    && value_of(&t.settings, &other.setting) == value_of(at, &other.setting)
            })
    })
}

/// Why a share cannot be decided, where its items' chance alone spans
/// the margin `m` on some contrast of factor `i` with its baseline: no
/// number of trials would show equivalence.
pub(super) fn few_items(a: &Analysis, i: usize, m: f64) -> Option<Undetermined> {
    let (items, _) = a.noise.items?;
    let factor = &a.design.factors[i];
    let base = factor.base();
    let chance = factor
        .points()
        .iter()
        .filter(|v| **v != base)
        .filter_map(|v| a.items_variance(&a.design.contrast(&[(i, v.as_str())]), 2))
        .fold(0.0, f64::max)
        .sqrt();
    (t_quantile(EQUIVALENCE, a.fit.df()) * chance >= m)
        .then_some(Undetermined::FewItems { items, chance: 1.96 * chance })
}

/// How far two configurations' shares of few items differ by chance
/// alone, at 95 %: the items are the sample (binomial), so the normal
/// quantile, whatever the model's degrees of freedom; the noise section
/// and each undetermined share say the same number.
pub(super) fn items_chance(a: &Analysis) -> f64 {
    1.96 * a.noise.between(2).sqrt()
}

/// Where a "no effect" of factor `i` (one of a few values, against its
/// value `from`) was not shown at a value `w` of another setting (also of a few, and not in a pair
/// with `i` in the model, which judges those itself): at each value `v`
/// of `i`, the trials run with `v` and `w` together, their mean deviation
/// from the model (less the deviation of those run with `i`'s base and
/// `w`) added to `v`'s contrast. An effect confined to long contexts, which
/// a model of effects the same everywhere averages away, shows there: the
/// values where that contrast's 90 % interval reaches past the margin `m`
/// (it acts there, or too few trials ran there to tell).
pub(super) fn unconfirmed(
    a: &Analysis,
    i: usize,
    from: &str,
    points: &Points,
    m: f64,
) -> Vec<(String, String)> {
    let own = &a.design.factors[i];
    let s2 = a.sigma2.unwrap_or(0.0).max(a.floor());
    if own.is_curve() || s2 <= 0.0 {
        return vec![];
    }
    let t = t_quantile(EQUIVALENCE, a.fit.df());
    let partners = a.interacts(i);
    // Each trial's deviation from the model's prediction without it (one
    // set aside as an anomaly included: it may be all that ran there),
    // worked out once.
    let deviation: Vec<f64> =
        (0..a.trials.len()).map(|k| a.trials[k].y - a.predicted_without(k)).collect();
    let mean_at = |v: &str, j: usize, w: &str| {
        let d: Vec<f64> = (0..a.trials.len())
            .filter(|&k| value_of(&a.trials[k].settings, &own.setting) == v)
            .filter(|&k| value_of(&a.trials[k].settings, &a.design.factors[j].setting) == w)
            .map(|k| deviation[k])
            .collect();
        (!d.is_empty()).then(|| (d.iter().sum::<f64>() / d.len() as f64, d.len()))
    };
    let mut out = Vec::new();
    for (j, other) in a.design.factors.iter().enumerate() {
        if j == i || other.is_curve() || partners.contains(&j) {
            continue;
        }
        for w in other.points() {
            let (base_dev, base_n) = mean_at(from, j, &w).unwrap_or((0.0, 0));
            let shown = points.iter().all(|(v, e)| {
                let (Some((est, se)), Some((dev, n))) = (*e, mean_at(v, j, &w)) else {
                    return true;
                };
                let base_var = if base_n > 0 { s2 / base_n as f64 } else { 0.0 };
                let wide = (se * se + s2 / n as f64 + base_var).sqrt();
                (est + dev - base_dev).abs() + t * wide < m
            });
            if !shown {
                out.push((other.setting.clone(), w));
            }
        }
    }
    out
}
