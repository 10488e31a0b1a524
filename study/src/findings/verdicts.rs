//! What the fitted models claim, and only what they can back: an effect
//! where a setting's Type-II test survives Holm's correction over every
//! test of the study (stated as contrasts with the baseline, the other
//! settings held there, with 95 % intervals); "no effect" only where every
//! contrast's 90 % interval lies inside the equivalence margin (two
//! one-sided tests); "not determined" otherwise, with roughly how many
//! more trials would decide it, or with the settings it moved together
//! with. Interactions that survive the same correction are findings of
//! their own. Free wins (in [`super::free_wins`]) need a shown gain, no
//! shown cost and equivalence on every quality measure. Anomalies are
//! judged by leave-one-out residuals of the same models.

use super::analysis::{Analysis, Tested};
use super::design::value_of;
use super::ols::{holm, t_p, t_quantile};
use super::support::{confounded, few_items, items_p, unconfirmed, unshown};
use super::{ALPHA, EQUIVALENCE, Finding, INTERVAL, Interval, Level, Margins, Undetermined};
use crate::metric::{Goal, Scale};

/// Every test made, Holm-adjusted together: per analysis, its mains' and
/// its pairs' adjusted p-values.
pub struct Adjusted {
    pub mains: Vec<Vec<Option<f64>>>,
    pub pairs: Vec<Vec<f64>>,
}

pub fn adjust(analyses: &[Analysis]) -> Adjusted {
    let mut raw = Vec::new();
    for a in analyses {
        for m in &a.mains {
            if let Tested::Ran { p, .. } = m {
                raw.push(*p);
            }
        }
        raw.extend(a.pairs.iter().map(|(_, _, p)| *p));
    }
    let adjusted = holm(&raw);
    let mut next = adjusted.into_iter();
    let mut out = Adjusted { mains: vec![], pairs: vec![] };
    for a in analyses {
        out.mains.push(
            a.mains
                .iter()
                .map(|m| matches!(m, Tested::Ran { .. }).then(|| next.next().unwrap_or(1.0)))
                .collect(),
        );
        out.pairs.push(a.pairs.iter().map(|_| next.next().unwrap_or(1.0)).collect());
    }
    out
}

/// The interval of a contrast at two-sided `level`, in the metric's own
/// terms (a ratio, or a difference).
pub(super) fn interval(a: &Analysis, est: f64, se: f64, level: f64) -> Interval {
    let t = t_quantile(level, a.fit.df());
    Interval { est: a.told(est), lo: a.told(est - t * se), hi: a.told(est + t * se) }
}

/// The equivalence margin of `a`'s metric on its model's scale.
pub(super) fn margin(a: &Analysis, margins: &Margins) -> f64 {
    margin_at(a, margins, a.base())
}

/// The same where the value is `there` (memory, in bytes: a share of it).
pub(super) fn margin_at(a: &Analysis, margins: &Margins, there: f64) -> f64 {
    let m = margins.on_model_scale(a.metric);
    if a.told_as_ratio() && !a.log { there.abs() * m.exp_m1() } else { m }
}

/// Values of a factor, each with its contrast against the base (estimate
/// and standard error) where the design determines it.
type Points = Vec<(String, Option<(f64, f64)>)>;

/// Each point of factor `i` against its base, the other factors at their
/// bases but those `held` at the values given: (value, estimate, se).
fn contrasts(a: &Analysis, i: usize, held: &[(usize, &str)]) -> Points {
    let f = &a.design.factors[i];
    let base = f.base();
    let there = a.design.contrast(held);
    f.points()
        .into_iter()
        .filter(|v| *v != base)
        .map(|v| {
            let mut changed = vec![(i, v.as_str())];
            changed.extend_from_slice(held);
            let with = a.design.contrast(&changed);
            let c: Vec<f64> = with.iter().zip(&there).map(|(x, y)| x - y).collect();
            let e = a.contrast(&c);
            (v, e)
        })
        .collect()
}

/// Most combinations of partners' values an equivalence is checked at.
const MAX_COMBINATIONS: usize = 64;

/// Factor `i`'s contrasts with the factors it acts with held at every
/// combination of their values (the baseline's included); `None` when
/// there are more than [`MAX_COMBINATIONS`].
fn across_partners(a: &Analysis, i: usize) -> Option<Points> {
    let mut combinations: Vec<Vec<(usize, String)>> = vec![vec![]];
    for j in a.interacts(i) {
        let values = a.design.factors[j].points();
        if combinations.len() * values.len() > MAX_COMBINATIONS {
            return None;
        }
        combinations = combinations
            .into_iter()
            .flat_map(|c| {
                values.iter().map(move |w| {
                    let mut c = c.clone();
                    c.push((j, w.clone()));
                    c
                })
            })
            .collect();
    }
    let out = combinations.iter().flat_map(|c| {
        let held: Vec<(usize, &str)> = c.iter().map(|(j, w)| (*j, w.as_str())).collect();
        contrasts(a, i, &held)
    });
    Some(out.collect())
}

/// Whether every contrast's 90 % interval lies inside ±`m`: the two
/// one-sided tests at 5 % each.
pub(super) fn equivalent(
    a: &Analysis,
    points: &[(String, Option<(f64, f64)>)],
    m: f64,
) -> Option<bool> {
    let t = t_quantile(EQUIVALENCE, a.fit.df());
    let mut all = true;
    for (_, e) in points {
        let (est, se) = (*e)?;
        all &= est - t * se > -m && est + t * se < m;
    }
    Some(all)
}

/// Roughly how many more trials (like those run) would settle an
/// undetermined contrast: enough to show it inside the margin or to
/// show it beyond noise, whichever comes sooner. `None` past
/// [`MORE_TRIALS_TOLD`] times the trials run, or 100: a count in the
/// thousands is no plan, only a sign the noise hides the contrast.
pub(super) fn more_trials(
    a: &Analysis,
    points: &[(String, Option<(f64, f64)>)],
    m: f64,
) -> Option<usize> {
    let n = a.trials.len() as f64;
    let t90 = t_quantile(EQUIVALENCE, a.fit.df());
    let t95 = t_quantile(1.0 - ALPHA, a.fit.df());
    let (est, se) = points
        .iter()
        .filter_map(|(_, e)| *e)
        .max_by(|x, y| (x.0.abs() + x.1).total_cmp(&(y.0.abs() + y.1)))?;
    let needed = |se_wanted: f64| {
        (se_wanted > 0.0).then(|| n * (se / se_wanted).powi(2) - n).filter(|x| x.is_finite())
    };
    let to_equivalence = (est.abs() < m).then(|| needed((m - est.abs()) / t90)).flatten();
    let to_effect = (est.abs() > 0.0).then(|| needed(est.abs() / t95)).flatten();
    let best = [to_equivalence, to_effect].into_iter().flatten().fold(f64::MAX, f64::min);
    (best <= (MORE_TRIALS_TOLD * n).max(100.0)).then(|| best.max(1.0).ceil() as usize)
}

/// How many times the trials run a count of more trials may be, and
/// still be told as a count.
const MORE_TRIALS_TOLD: f64 = 4.0;

/// Raw medians of the trials at each value of factor `i` (for the reader).
fn levels(a: &Analysis, i: usize) -> Vec<(String, f64, Vec<i64>)> {
    let setting = &a.design.factors[i].setting;
    let mut by: std::collections::BTreeMap<String, Vec<(i64, f64)>> = Default::default();
    for t in &a.trials {
        by.entry(value_of(&t.settings, setting)).or_default().push((t.id, a.value_of(t)));
    }
    by.into_iter()
        .map(|(v, list)| {
            let mut values: Vec<f64> = list.iter().map(|x| x.1).collect();
            (v, super::median(&mut values), list.iter().map(|x| x.0).collect())
        })
        .collect()
}

/// The findings of one setting on one metric.
pub fn setting_findings(
    a: &Analysis,
    i: usize,
    adjusted_p: Option<f64>,
    margins: &Margins,
) -> Option<Finding> {
    let factor = &a.design.factors[i];
    let setting = factor.setting.clone();
    let metric = a.metric;
    let undetermined =
        |reason| Some(Finding::NotDetermined { setting: setting.clone(), metric, reason });
    match &a.mains[i] {
        Tested::Aliased { with } => {
            return undetermined(Undetermined::Aliased { with: with.clone() });
        }
        Tested::TooFew => return undetermined(Undetermined::TooFew),
        Tested::Ran { .. } => {}
    }
    let p = adjusted_p?;
    let points = contrasts(a, i, &[]);
    let given: Vec<String> =
        a.interacts(i).into_iter().map(|j| a.design.factors[j].setting.clone()).collect();
    let raw = levels(a, i);
    let base = factor.base();
    let m = margin(a, margins);
    let level = |value: &str, vs: Option<Interval>| {
        let (median, trials) = raw
            .iter()
            .find(|(v, _, _)| v == value)
            .map(|(_, m, t)| (*m, t.clone()))
            .unwrap_or((f64::NAN, vec![]));
        Level { value: value.to_string(), median, trials, vs_base: vs }
    };
    if p <= ALPHA && points.iter().all(|(_, e)| e.is_none()) {
        // Beyond noise, but never tried away from the baseline's value with
        // the others at theirs: the data cannot say what it does there.
        let mut with = given.clone();
        if with.is_empty() {
            with = a
                .design
                .factors
                .iter()
                .filter(|f| f.setting != setting)
                .map(|f| f.setting.clone())
                .collect();
        }
        return undetermined(Undetermined::Aliased { with });
    }
    // An effect worth stating moves some value beyond the margin, its
    // whole interval there: a smaller one is, for a reader, no effect (and
    // is judged as such below), or not determined.
    let t = t_quantile(INTERVAL, a.fit.df());
    // A value of a few that one trial alone ran cannot carry a claim: one
    // slow request would pass for its effect.
    // Nor a value every trial of which held another setting at one same
    // other value: the two together may have done it.
    let tangled = confounded(a, i, None);
    let supported = |v: &str| {
        (factor.is_curve() || raw.iter().any(|(w, _, ids)| w == v && ids.len() >= 2))
            && !tangled.iter().any(|(w, _)| w == v)
    };
    let clear = |points: &[(String, Option<(f64, f64)>)]| {
        points
            .iter()
            .filter(|(v, _)| supported(v))
            .filter_map(|(_, e)| *e)
            .map(|(est, se)| est.abs() - t * se)
            .fold(f64::MIN, f64::max)
    };
    let mut points = points;
    let mut at = None;
    if p <= ALPHA && clear(&points) <= m {
        // Within the margin at the baseline, but it acts with others: the
        // values compared where one of them moves it most, if that clears
        // the margin there.
        let elsewhere = a
            .interacts(i)
            .into_iter()
            .flat_map(|j| {
                let partner = &a.design.factors[j];
                let base = partner.base();
                partner.points().into_iter().filter(move |w| *w != base).map(move |w| (j, w))
            })
            .map(|(j, w)| {
                // Only the values run there by two trials at least, and
                // not only with a third setting's same other value.
                let partner = &a.design.factors[j];
                let mut there = contrasts(a, i, &[(j, &w)]);
                let tangled_there = confounded(a, i, Some((j, &w)));
                there.retain(|(v, _)| !tangled_there.iter().any(|(t, _)| t == v));
                there.retain(|(v, _)| {
                    partner.is_curve()
                        || a.trials
                            .iter()
                            .filter(|t| {
                                value_of(&t.settings, &factor.setting) == *v
                                    && value_of(&t.settings, &partner.setting) == w
                            })
                            .count()
                            >= 2
                });
                (there, j, w)
            })
            .max_by(|x, y| clear(&x.0).total_cmp(&clear(&y.0)));
        if let Some((there, j, w)) = elsewhere.filter(|(there, ..)| clear(there) > m) {
            points = there;
            at = Some((a.design.factors[j].setting.clone(), w));
        }
    }
    let beyond = clear(&points) > m;
    // A share of few items: its test over trials counts a greedy answer
    // asked again as evidence; the contrasts, with the items' chance, do not.
    let p = if a.noise.items.is_some() { p.max(items_p(a, &points)) } else { p };
    if p <= ALPHA && beyond {
        let base_level = level(&base, Some(Interval { est: unit(a), lo: unit(a), hi: unit(a) }));
        let mut ranked: Vec<(Level, f64)> = vec![(base_level, 0.0)];
        // A value tangled with another setting's is no level of this one's.
        for (v, e) in points.iter().filter(|(v, _)| !tangled.iter().any(|(w, _)| w == v)) {
            if let Some((est, se)) = e {
                ranked.push((level(v, Some(interval(a, *est, *se, INTERVAL))), *est));
            }
        }
        ranked.sort_by(|x, y| a.goal.oriented(y.1).total_cmp(&a.goal.oriented(x.1)));
        let (best, worst) = (ranked[0].1, ranked[ranked.len() - 1].1);
        let size_pct = better_pct(a, best - worst);
        let peak = factor.is_curve() || factor.points().iter().all(|v| v.parse::<f64>().is_ok());
        let peak = peak && interior_peak(a, i, &ranked[0].0.value);
        return Some(Finding::Effect {
            setting,
            metric,
            goal: a.goal,
            base,
            log: a.told_as_ratio(),
            levels: ranked.into_iter().map(|(l, _)| l).collect(),
            size_pct,
            p_value: p,
            peak,
            given,
            at,
        });
    }
    // A setting that acts with others may matter only away from the
    // baseline: "no effect" is claimed of it only where its contrasts at
    // every combination of their values lie inside the margin too.
    let everywhere = if given.is_empty() { points.clone() } else { across_partners(a, i)? };
    // Never moved with another setting at its baseline value: "no effect"
    // at the baseline would be the model's guess, not a measurement.
    let away: Vec<String> = unshown(a, i)
        .into_iter()
        .filter(|(k, v)| a.design.factors.iter().any(|f| &f.setting == k && f.base() == *v))
        .map(|(k, _)| k)
        .collect();
    let mut with_others: Vec<String> = tangled.iter().map(|(_, s)| s.clone()).collect();
    with_others.sort();
    with_others.dedup();
    match equivalent(a, &everywhere, m) {
        Some(true) if !away.is_empty() => undetermined(Undetermined::Aliased { with: away }),
        _ if !with_others.is_empty() => undetermined(Undetermined::Aliased { with: with_others }),
        Some(true) => {
            let mut not_shown = unshown(a, i);
            for w in unconfirmed(a, i, &base, &points, m) {
                if !not_shown.contains(&w) {
                    not_shown.push(w);
                }
            }
            let t90 = EQUIVALENCE;
            let mut levels = vec![level(&base, None)];
            levels.extend(points.iter().filter_map(|(v, e)| {
                let (est, se) = (*e)?;
                Some(level(v, Some(interval(a, est, se, t90))))
            }));
            Some(Finding::NoEffect {
                setting,
                metric,
                log: a.told_as_ratio(),
                margin: if a.told_as_ratio() {
                    margins.on_model_scale(metric).exp_m1() * 100.0
                } else {
                    m
                },
                levels,
                p_value: p,
                given,
                unshown: not_shown,
            })
        }
        Some(false) | None if !given.is_empty() => None,
        Some(false) if few_items(a, i, m).is_some() => undetermined(few_items(a, i, m)?),
        Some(false) => undetermined(Undetermined::MoreTrials { about: more_trials(a, &points, m) }),
        None => undetermined(Undetermined::TooFew),
    }
}

/// How much better a contrast `d` (on the model's scale) is, in percent
/// of the worse value's (points for rates, the plain difference for a
/// divergence): 25 for memory cut by a quarter, 50 for a speed up by half.
pub(super) fn better_pct(a: &Analysis, d: f64) -> f64 {
    match (a.metric.scale(), a.goal) {
        (Scale::Ratio, Goal::Max) => (a.told(d) - 1.0) * 100.0,
        (Scale::Ratio, Goal::Min) => (1.0 - a.told(d)) * 100.0,
        (Scale::Rate, _) => a.goal.oriented(d) * 100.0,
        (Scale::Difference, _) => a.goal.oriented(d),
    }
}

/// "No change": 1 as a ratio, 0 as a difference.
fn unit(a: &Analysis) -> f64 {
    if a.told_as_ratio() { 1.0 } else { 0.0 }
}

/// Whether `best`, a value of numeric factor `i`, beats both the smallest
/// and the largest value tried beyond noise, while lying between them.
fn interior_peak(a: &Analysis, i: usize, best: &str) -> bool {
    let f = &a.design.factors[i];
    let points = f.points();
    let numbers: Vec<f64> = points.iter().filter_map(|v| v.parse().ok()).collect();
    let Ok(b) = best.parse::<f64>() else { return false };
    let (lo, hi) = (
        numbers.iter().copied().fold(f64::MAX, f64::min),
        numbers.iter().copied().fold(f64::MIN, f64::max),
    );
    if !(lo < b && b < hi) {
        return false;
    }
    let beats = |end: f64| {
        let end = crate::space::fmt_float(end);
        let (x, y) = (a.design.contrast(&[(i, best)]), a.design.contrast(&[(i, &end)]));
        let c: Vec<f64> = x.iter().zip(&y).map(|(p, q)| p - q).collect();
        a.contrast(&c).is_some_and(|(est, se)| {
            a.goal.oriented(est) > 0.0 && t_p(est / se.max(f64::MIN_POSITIVE), a.fit.df()) <= ALPHA
        })
    };
    beats(lo) && beats(hi)
}

/// An interaction that survived correction: each combination of the two
/// settings' values (the others at the baseline) against the baseline,
/// and what the two effects alone would have made of it.
pub fn interaction(a: &Analysis, x: usize, y: usize, p: f64, margins: &Margins) -> Option<Finding> {
    let (fx, fy) = (&a.design.factors[x], &a.design.factors[y]);
    let mut cells = Vec::new();
    let m = margin(a, margins);
    let t = t_quantile(INTERVAL, a.fit.df());
    // Whether some combination where both differ from the baseline is off
    // what the two alone give by more than the margin, beyond noise.
    let mut matters = false;
    // Each departure from the two alone, with the items' chance in its
    // error (for a share of few items).
    let mut departures = Vec::new();
    for vx in fx.points() {
        for vy in fy.points() {
            if vx == fx.base() && vy == fy.base() {
                continue;
            }
            let both = a.contrast(&a.design.contrast(&[(x, &vx), (y, &vy)]));
            let alone_x = a.contrast(&a.design.contrast(&[(x, &vx)]));
            let alone_y = a.contrast(&a.design.contrast(&[(y, &vy)]));
            let (Some((est, se)), Some((ex, _)), Some((ey, _))) = (both, alone_x, alone_y) else {
                continue;
            };
            let additive = a.told(ex + ey);
            if vx != fx.base() && vy != fy.base() {
                let rows = [
                    a.design.contrast(&[(x, &vx), (y, &vy)]),
                    a.design.contrast(&[(x, &vx)]),
                    a.design.contrast(&[(y, &vy)]),
                ];
                let beyond: Vec<f64> =
                    (0..rows[0].len()).map(|k| rows[0][k] - rows[1][k] - rows[2][k]).collect();
                // Carried by two trials at least: one alone in its cell
                // would pass for the pair.
                let ran = a
                    .trials
                    .iter()
                    .filter(|t| {
                        value_of(&t.settings, &fx.setting) == vx
                            && value_of(&t.settings, &fy.setting) == vy
                    })
                    .count();
                let curves = fx.is_curve() || fy.is_curve();
                if let Some((d, d_se)) = a.contrast_among(&beyond, 4) {
                    matters |= d.abs() - t * d_se > m && (ran >= 2 || curves);
                    departures.push((d, d_se));
                }
            }
            cells.push(super::Cell {
                values: (vx.clone(), vy.clone()),
                vs_base: interval(a, est, se, INTERVAL),
                additive,
            });
        }
    }
    // A share of few items: the test over trials counts a greedy answer
    // asked again as evidence; the departures, with the items' chance,
    // Bonferroni over them, do not (on pure noise over 8 questions, one
    // cell of a dozen cleared the margin by chance).
    let items_p = || {
        let ps = departures.iter().map(|(d, se)| t_p(d / se.max(f64::MIN_POSITIVE), a.fit.df()));
        (ps.fold(1.0, f64::min) * departures.len().max(1) as f64).min(1.0)
    };
    let p = if a.noise.items.is_some() { p.max(items_p()) } else { p };
    if !matters || p > ALPHA {
        return None;
    }
    Some(Finding::Interaction {
        settings: (fx.setting.clone(), fy.setting.clone()),
        bases: (fx.base(), fy.base()),
        metric: a.metric,
        goal: a.goal,
        log: a.told_as_ratio(),
        cells,
        p_value: p,
    })
}
