//! One metric's model: a regression over every varied setting fitted to
//! whatever trials the study ran (a full grid or the uneven sample of an
//! adaptive search alike), on a log scale for speeds and perplexity, in
//! bytes for memory (with the planner's prediction where there is one:
//! see [`super::planned`]). Two-setting interactions enter where the data
//! supports them (forward selection, each step Bonferroni-guarded over the
//! pairs left); each setting is then tested by a Type-II F-test (its
//! effect given every term that does not involve it), each interaction
//! against the rest of the model. A setting the design cannot separate from others is
//! marked aliased, with the settings that moved with it.

use std::collections::{BTreeMap, BTreeSet};

use engine_bridge::Settings;

use super::ALPHA;
use super::TrialFacts;
use super::design::{Design, Factor, Term, value_of};
use super::noise::Noise;
use super::ols::{Fit, Gram, f_test, f_test_against, t_p};
use super::planned::{Against, PlanFn};
use super::scales::{in_bytes, log_scale, noise_floor};
use super::selection::{choose_scales, select_pairs};
use crate::metric::{Goal, Metric, Scale};

/// A trial weighing this much in its own prediction has nothing else to
/// be judged against.
pub(super) const MAX_LEVERAGE: f64 = 0.8;

/// How many times one trial's noise a contrast's standard error may be
/// and still be stated: two configurations each measured once give √2,
/// the ends of a curve a few times that; a contrast known no better than
/// from a thirtieth of a trial is the model's reach, not a measurement.
const MAX_INFLATION: f64 = 8.0;

/// An interaction takes at most this many columns.
const MAX_PAIR_WIDTH: usize = 16;

/// What a test of one term found.
#[derive(Debug, Clone, PartialEq)]
pub enum Tested {
    /// The p-value (before correction for the other tests) and its degrees
    /// of freedom.
    Ran { p: f64, df: usize },
    /// The design moved it only together with these settings.
    Aliased { with: Vec<String> },
    /// Too few trials to leave any noise to judge by.
    TooFew,
}

/// One metric's fitted model and its tests.
#[derive(Debug, Clone)]
pub struct Analysis {
    pub metric: Metric,
    pub goal: Goal,
    /// Fitted to logarithms (effects are ratios); else to values
    /// (effects are differences).
    pub log: bool,
    pub design: Design,
    /// The terms of the final model, mains first.
    pub terms: Vec<Term>,
    pub fit: Fit,
    /// The noise variance on the model's scale (at least the floor).
    pub sigma2: Option<f64>,
    /// The mean the responses were centered on.
    pub center: f64,
    /// What the study measured of the metric's noise.
    pub noise: Noise,
    /// Per factor: its Type-II test.
    pub mains: Vec<Tested>,
    /// The interactions in the model and their tests.
    pub pairs: Vec<(usize, usize, f64)>,
    /// Interactions in the model the trials cannot tell from another one
    /// (the same fit with the other instead): not claimed.
    pub ambiguous: Vec<(usize, usize)>,
    pub trials: Vec<Measured>,
}

/// A trial measured on the metric.
#[derive(Debug, Clone)]
pub struct Measured {
    pub id: i64,
    pub settings: Settings,
    /// The value on the model's scale, centered.
    pub y: f64,
    pub row: Vec<f64>,
    /// Set aside as an anomaly: not part of the fit.
    pub excluded: bool,
    /// How far the baseline had drifted when it ran (taken out of `y`).
    pub drift: f64,
}

/// The cross-products of the trials not set aside.
pub(super) fn gram_of(trials: &[Measured]) -> Gram {
    let kept: Vec<&Measured> = trials.iter().filter(|t| !t.excluded).collect();
    let rows: Vec<Vec<f64>> = kept.iter().map(|t| t.row.clone()).collect();
    let ys: Vec<f64> = kept.iter().map(|t| t.y).collect();
    Gram::new(&rows, &ys)
}

impl Analysis {
    /// The model of `metric` over the done trials, with `varied` settings
    /// coded against `baseline`, each value taken relative to the
    /// baseline's drift at its time and no noise believed below what the
    /// study measured (see [`Noise`]); memory with `plan` where it
    /// predicts every configuration measured; `None` when nothing was
    /// measured or nothing varied.
    pub fn fit(
        done: &[&TrialFacts],
        varied: &[String],
        baseline: &Settings,
        (metric, goal): (Metric, Goal),
        plan: Option<&PlanFn>,
    ) -> Option<Analysis> {
        let against = plan.filter(|_| in_bytes(metric)).and_then(|plan| {
            let measured = done.iter().filter(|t| t.metrics.contains_key(&metric));
            Against::new(plan, metric, baseline, measured.map(|t| &t.settings))
        });
        let log = log_scale(metric);
        let noise = Noise::of(metric, done, baseline, log);
        let measured: Vec<(&TrialFacts, f64)> = done
            .iter()
            .filter(|t| !noise.slowed.contains(&t.id))
            .filter_map(|t| {
                let v = *t.metrics.get(&metric)?;
                let y = if log { v.ln() } else { v };
                let y = y - noise.drift_at(t.id);
                y.is_finite().then_some((*t, y))
            })
            .collect();
        if measured.len() < 3 {
            return None;
        }
        let mut factors: Vec<Factor> = varied
            .iter()
            .filter_map(|s| {
                let values: Vec<String> =
                    measured.iter().map(|(t, _)| value_of(&t.settings, s)).collect();
                Factor::new(s, &values, baseline.get(s).map(String::as_str))
            })
            .collect();
        if factors.is_empty() {
            return None;
        }
        choose_scales(&mut factors, &measured);
        let design = Design::new(factors, MAX_PAIR_WIDTH, against);
        let center = measured.iter().map(|(_, y)| y).sum::<f64>() / measured.len() as f64;
        let trials: Vec<Measured> = measured
            .iter()
            .map(|(t, y)| Measured {
                id: t.id,
                settings: t.settings.clone(),
                y: y - center,
                row: design.row(&t.settings),
                excluded: false,
                drift: noise.drift_at(t.id),
            })
            .collect();
        let floor = noise_floor(metric).max(noise.floor());
        let mut mains: Vec<Term> = (0..design.factors.len()).map(Term::Main).collect();
        if design.plan.is_some() {
            mains.push(Term::Plan);
        }
        let mut analysis = Analysis {
            metric,
            goal,
            log,
            terms: mains.clone(),
            fit: Fit::new(&gram_of(&trials), &design.columns(&mains)),
            design,
            sigma2: None,
            center,
            noise,
            mains: vec![],
            pairs: vec![],
            ambiguous: vec![],
            trials,
        };
        // Gross outliers would pass for interactions: they are set aside
        // while the model is chosen, and come back unless it still finds
        // them far off.
        analysis.set_aside_outliers();
        // Choose the interactions, then take back what they explain; once
        // more if any came back, since those may show another interaction.
        for round in 0..2 {
            let pairs = select_pairs(&analysis.design, &gram_of(&analysis.trials), &mains, floor);
            analysis.terms = mains.clone();
            analysis.terms.extend(pairs.iter().map(|(t, _)| *t));
            analysis.refit(floor);
            if !analysis.take_back() {
                break;
            }
            if round == 1 {
                analysis.refit(floor);
            }
        }
        let candidates = analysis.design.terms.iter().filter(|(t, _)| matches!(t, Term::Pair(..)));
        analysis.test(floor, candidates.count().max(1));
        Some(analysis)
    }

    /// Fits the model's terms to the trials not set aside.
    fn refit(&mut self, floor: f64) {
        self.fit = Fit::new(&gram_of(&self.trials), &self.design.columns(&self.terms));
        self.sigma2 = self.fit.sigma2(floor);
    }

    /// The Type-II test of each factor and the test of each interaction
    /// (Bonferroni over the `candidates` it was chosen among).
    fn test(&mut self, floor: f64, candidates: usize) {
        let gram = gram_of(&self.trials);
        let (design, terms) = (&self.design, &self.terms);
        let fit_of = |terms: &[Term]| Fit::new(&gram, &design.columns(terms));
        self.mains = (0..design.factors.len())
            .map(|i| {
                let without: Vec<Term> =
                    terms.iter().copied().filter(|t| !design.involves(*t, i)).collect();
                let mut with = without.clone();
                with.push(Term::Main(i));
                let (reduced, full) = (fit_of(&without), fit_of(&with));
                if full.rank == reduced.rank {
                    return Tested::Aliased { with: partners(design, i, &self.trials) };
                }
                // Judged against the whole model's noise, as a Type-II
                // test is: the model without the factor's interactions
                // would count them as noise, and a strong effect that
                // differs a little with another setting would drown.
                let error = if self.fit.df() > 0 { &self.fit } else { &full };
                match f_test_against(&reduced, &full, error, floor) {
                    Some((p, df)) => Tested::Ran { p: self.planned_p(i).unwrap_or(p), df },
                    None => Tested::TooFew,
                }
            })
            .collect();
        self.pairs = terms
            .iter()
            .filter_map(|t| {
                let Term::Pair(a, b) = *t else { return None };
                let rest: Vec<Term> = terms.iter().copied().filter(|x| x != t).collect();
                let (p, _) = f_test(&fit_of(&rest), &self.fit, floor)?;
                Some((a, b, (p * candidates as f64).min(1.0)))
            })
            .collect();
        // A pair that another sharing a setting with it, put in beside the
        // rest, leaves adding nothing: the design cannot say which of the
        // two acts (a search that ran the large batch mostly with other
        // micro-batches at many threads lets `batch_size` × `threads` stand
        // in for `threads` × `ubatch_size`).
        self.ambiguous = terms
            .iter()
            .filter_map(|t| {
                let Term::Pair(a, b) = *t else { return None };
                let rest: Vec<Term> = terms.iter().copied().filter(|x| x != t).collect();
                let twin = design.terms.iter().any(|(other, _)| {
                    let Term::Pair(c, d) = *other else { return false };
                    if terms.contains(other) || !(a == c || a == d || b == c || b == d) {
                        return false;
                    }
                    let mut instead = rest.clone();
                    instead.push(*other);
                    let mut both = instead.clone();
                    both.push(*t);
                    f_test(&fit_of(&instead), &fit_of(&both), floor).is_none_or(|(p, _)| p > ALPHA)
                });
                twin.then_some((a, b))
            })
            .collect();
    }

    /// Where the plan moves factor `i`, the test of its whole effect (the
    /// plan's part and the rest together) being none: the least p-value of
    /// its contrasts with the baseline, Bonferroni over them. Its terms'
    /// F-test asks whether it did more than the plan says, which for a
    /// setting the plan moves (the context, a cache type) is not the
    /// question. `None` where the plan does not move it.
    fn planned_p(&self, i: usize) -> Option<f64> {
        if !self.design.plan_moves(i) || self.sigma2.is_none() {
            return None;
        }
        let factor = &self.design.factors[i];
        let base = factor.base();
        let values: Vec<String> = factor.points().into_iter().filter(|v| *v != base).collect();
        let p = values
            .iter()
            .filter_map(|v| self.contrast(&self.design.contrast(&[(i, v.as_str())])))
            .map(|(est, se)| t_p(est / se.max(f64::MIN_POSITIVE), self.fit.df()))
            .fold(1.0f64, f64::min);
        Some((p * values.len() as f64).min(1.0))
    }

    /// Sets aside the trials of the main-effects model whose leave-one-out
    /// residuals are anomalies (see [`Analysis::outlying`]), at most one in
    /// twenty.
    fn set_aside_outliers(&mut self) {
        let mut flagged: Vec<(usize, f64)> = {
            let outlying = self.outlying();
            (0..self.trials.len()).filter_map(|k| Some((k, outlying(k)?))).collect()
        };
        flagged.sort_by(|a, b| a.1.total_cmp(&b.1));
        flagged.truncate((self.trials.len() / 20).max(1));
        for (k, _) in flagged {
            self.trials[k].excluded = true;
        }
        if self.trials.iter().any(|t| t.excluded) {
            self.fit = Fit::new(&gram_of(&self.trials), &self.design.columns(&self.terms));
        }
    }

    /// Takes back the trials set aside that the chosen model no longer
    /// finds far off, or cannot predict without them (no other trial
    /// shares what sets them apart); whether any came back.
    fn take_back(&mut self) -> bool {
        let back: Vec<usize> = {
            let outlying = self.outlying();
            (0..self.trials.len())
                .filter(|&k| {
                    let t = &self.trials[k];
                    t.excluded && (!self.fit.is_estimable(&t.row) || outlying(k).is_none())
                })
                .collect()
        };
        for &k in &back {
            self.trials[k].excluded = false;
        }
        !back.is_empty()
    }

    /// What the model predicts for trial `k` without it, on its scale.
    pub fn predicted_without(&self, k: usize) -> f64 {
        let t = &self.trials[k];
        let e = t.y - self.fit.predict(&t.row);
        if t.excluded { t.y - e } else { t.y - e / (1.0 - self.fit.leverage(&t.row)) }
    }

    /// The least noise variance believed of one trial: rounding, or what
    /// the study measured (see [`Noise::floor`]).
    pub fn floor(&self) -> f64 {
        noise_floor(self.metric).max(self.noise.floor())
    }

    /// A trial's value in the metric's own terms, as measured.
    pub fn value_of(&self, t: &Measured) -> f64 {
        self.natural(t.y + t.drift)
    }

    /// What the model predicts for trial `k` without it, in the metric's
    /// own terms at the time it ran.
    pub fn expected(&self, k: usize) -> f64 {
        let t = &self.trials[k];
        self.natural(self.predicted_without(k) + t.drift)
    }

    /// The estimate and standard error of a contrast row between two
    /// configurations; `None` when the design does not determine it or
    /// there is no noise to judge by.
    pub fn contrast(&self, c: &[f64]) -> Option<(f64, f64)> {
        self.contrast_among(c, 2)
    }

    /// The same for a contrast among `configurations` configurations (an
    /// interaction compares four): a share of few items adds its chance
    /// for each, however many trials ran them.
    ///
    /// A contrast the trials measure only through the model's reach far
    /// from them (its standard error more than [`MAX_INFLATION`] times one
    /// trial's noise) is `None` too: a pair of curves extrapolated into a
    /// corner no trial ran gives ratios in the thousands, with intervals
    /// that still exclude 1.
    pub fn contrast_among(&self, c: &[f64], configurations: usize) -> Option<(f64, f64)> {
        let sigma2 = self.sigma2?;
        let (est, se) = self.fit.contrast(c, sigma2)?;
        if se > MAX_INFLATION * sigma2.sqrt() {
            return None;
        }
        Some((est, (se * se + self.items_variance(c, configurations)?).sqrt()))
    }

    /// The variance a share's items add to contrast `c` among
    /// `configurations`: compared item by item, the spread of the
    /// contrast over the items (see [`super::paired`]); else each
    /// configuration's binomial chance. 0 for other metrics.
    pub fn items_variance(&self, c: &[f64], configurations: usize) -> Option<f64> {
        let Some(paired) = &self.noise.paired else {
            return Some(self.noise.between(configurations));
        };
        let kept = self.trials.iter().filter(|t| !t.excluded);
        let weights = self.fit.weights(c, kept.clone().map(|t| t.row.as_slice()));
        let by_trial: Vec<(i64, f64)> = kept.map(|t| t.id).zip(weights).collect();
        paired.variance(&by_trial)
    }

    /// Whether `factor` acts together with another on this metric.
    pub fn interacts(&self, factor: usize) -> Vec<usize> {
        self.pairs
            .iter()
            .filter_map(|&(a, b, _)| {
                if a == factor {
                    Some(b)
                } else if b == factor {
                    Some(a)
                } else {
                    None
                }
            })
            .collect()
    }

    /// A value on the model's scale as the metric's own.
    pub fn natural(&self, y: f64) -> f64 {
        if self.log { (y + self.center).exp() } else { y + self.center }
    }

    /// The model's value at the baseline, in the metric's own terms.
    pub fn base(&self) -> f64 {
        self.natural(self.fit.predict(&self.design.row(&self.design.base_settings())))
    }

    /// Whether contrasts are told as ratios to the baseline (speeds,
    /// memory, perplexity) rather than as differences.
    pub fn told_as_ratio(&self) -> bool {
        self.metric.scale() == Scale::Ratio
    }

    /// A contrast on the model's scale in the metric's own terms: a ratio
    /// to the baseline's value, or a difference.
    pub fn told(&self, d: f64) -> f64 {
        self.told_at(self.base(), d)
    }

    /// The same for a contrast from a configuration whose value is
    /// `there` (a ratio of a model in bytes is told against it).
    pub fn told_at(&self, there: f64, d: f64) -> f64 {
        match (self.log, self.told_as_ratio()) {
            (true, _) => d.exp(),
            (false, true) if there.abs() > 0.0 => (there + d) / there,
            (false, true) => f64::NAN,
            (false, false) => d,
        }
    }

    /// A contrast on the model's scale as a log ratio, where it is told as
    /// a ratio (what margins and spreads in percent are on); else as is.
    pub fn as_log(&self, d: f64) -> f64 {
        if self.told_as_ratio() && !self.log { self.told(d).max(f64::MIN_POSITIVE).ln() } else { d }
    }
}

/// The settings whose values the trials moved in lockstep with factor
/// `i`'s (one determines the other), so that their effects cannot be told
/// apart.
fn partners(design: &Design, i: usize, trials: &[Measured]) -> Vec<String> {
    let own = &design.factors[i].setting;
    let determines = |a: &str, b: &str| {
        let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for t in trials {
            map.entry(value_of(&t.settings, a)).or_default().insert(value_of(&t.settings, b));
        }
        map.values().all(|v| v.len() == 1)
    };
    design
        .factors
        .iter()
        .filter(|f| &f.setting != own)
        .filter(|f| determines(own, &f.setting) || determines(&f.setting, own))
        .map(|f| f.setting.clone())
        .collect()
}
