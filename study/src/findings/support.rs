//! What a claim rests on, beyond its test: the values of other settings
//! a setting was never moved at (a "no effect" does not reach them), and
//! for a share of few items, the chance its items alone allow.

use super::analysis::Analysis;
use super::design::value_of;
use super::ols::{t_p, t_quantile};
use super::{EQUIVALENCE, INTERVAL, Undetermined};

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

/// Why a share cannot be decided, where its items' chance alone spans
/// the margin `m`: no number of trials would show equivalence.
pub(super) fn few_items(a: &Analysis, m: f64) -> Option<Undetermined> {
    let (items, _) = a.noise.items?;
    let chance = a.noise.between(2).sqrt();
    (t_quantile(EQUIVALENCE, a.fit.df()) * chance >= m).then(|| Undetermined::FewItems {
        items,
        chance: t_quantile(INTERVAL, a.fit.df()) * chance,
    })
}
