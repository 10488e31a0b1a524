//! Findings: what a study's trials say, worked out deterministically from
//! them. Every finding cites its trials and numbers, and claims nothing the
//! data does not support:
//!
//! - the best trial for each objective, and a balanced pick on the Pareto
//!   front when there are several objectives;
//! - the effect of each varied setting on each metric measured, tested
//!   against the trials' own spread (main-effects analysis of variance,
//!   Bonferroni-corrected over every setting and metric tested), with where
//!   it peaks when the best value lies between others; "no effect within
//!   noise" where the test finds none;
//! - free wins: a setting's value that saves memory or gains speed while
//!   every quality measure stays where it was;
//! - anomalies: trials several times off what the other trials predict for
//!   their settings;
//! - failures grouped by cause, with the boundary that separates them from
//!   the trials that ran, where one setting draws it;
//! - the decode ceiling: how close the fastest trial came to what memory
//!   bandwidth allows, and whether any setting moved decode at all;
//! - drift: how far the baseline moved between its re-runs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use engine_bridge::Settings;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

use crate::study::{Goal, Metric};

/// Family-wise chance of claiming an effect where there is none.
pub const ALPHA: f64 = 0.05;

/// An anomaly is at least this many times off its prediction…
pub const ANOMALY_RATIO: f64 = 1.5;
/// …and this many robust standard deviations of the other trials' misfit.
pub const ANOMALY_SIGMAS: f64 = 6.0;

/// Decode at or above this share of the bandwidth ceiling is "at the wall".
pub const WALL_PCT: f64 = 80.0;

/// Metrics that measure quality: a free win must leave each one measured
/// where it was.
pub const QUALITY: [Metric; 3] =
    [Metric::QualityScore, Metric::ContextPassRate, Metric::Perplexity];

/// Metrics a free win may gain on: speed and memory.
pub const GAINS: [Metric; 6] = [
    Metric::DecodeTps,
    Metric::PrefillTps,
    Metric::TtftMs,
    Metric::PeakRssBytes,
    Metric::PeakGpuBytes,
    Metric::MemAvailableDropBytes,
];

/// One trial as the findings see it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TrialFacts {
    pub id: i64,
    pub settings: Settings,
    /// Ran to the end and was measured.
    pub done: bool,
    /// Why it failed (a failure kind such as `out_of_memory`), and the
    /// engine's message.
    pub failure: Option<(String, String)>,
    pub metrics: BTreeMap<Metric, f64>,
    /// The decode speed memory bandwidth allows this configuration.
    pub ceiling_tps: Option<f64>,
    /// `baseline`, `rerun` (of the baseline) or `search`.
    pub role: Option<String>,
    /// How far the baseline had drifted when this trial ran, where it had.
    pub drift_pct: Option<f64>,
}

/// The trials that share one value of a setting, on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// `""`: left to the engine.
    pub value: String,
    pub median: f64,
    pub trials: Vec<i64>,
}

/// How much a free win gains on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Gain {
    pub metric: Metric,
    /// The median with the winning value, and with the value it replaces.
    pub with: f64,
    pub without: f64,
    /// How much better, in percent.
    pub pct: f64,
}

/// Something the data shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// The best trial on an objective.
    Best { metric: Metric, goal: Goal, trial: i64, value: f64, settings: Settings },
    /// The Pareto-front trial closest to the best of every objective at once
    /// (each objective scaled over the front).
    Balanced { trial: i64, values: Vec<(Metric, f64)>, settings: Settings, front: Vec<i64> },
    /// A setting moves a metric beyond the noise: its levels from best to
    /// worst; `peak`: the best value lies between others (numbers only).
    Effect {
        setting: String,
        metric: Metric,
        goal: Goal,
        levels: Vec<Level>,
        /// Best median over worst, minus one, in percent (oriented: how much
        /// better the best value is).
        size_pct: f64,
        p_value: f64,
        peak: bool,
    },
    /// A setting whose values leave a metric where it was, within noise.
    NoEffect {
        setting: String,
        metric: Metric,
        levels: Vec<Level>,
        /// Largest median over smallest, minus one, in percent.
        spread_pct: f64,
        p_value: f64,
    },
    /// A value of a setting that gains speed or saves memory over another
    /// while every quality measure stays within noise.
    FreeWin {
        setting: String,
        value: String,
        over: String,
        gains: Vec<Gain>,
        /// Each quality measure's median with the two values.
        quality: Vec<(Metric, f64, f64)>,
        trials: Vec<i64>,
    },
    /// A trial far from what the other trials predict for its settings.
    Anomaly { trial: i64, metric: Metric, value: f64, expected: f64, settings: Settings },
    /// Trials that failed the same way, and where one setting separates
    /// them from the trials that ran.
    Failures { cause: String, trials: Vec<i64>, message: String, boundary: Option<Boundary> },
    /// How close the fastest decode came to what memory bandwidth allows;
    /// `movers`: the settings that changed decode beyond noise.
    Ceiling { trial: i64, decode: f64, ceiling: f64, pct: f64, movers: Vec<String> },
    /// The baseline run again during the study: how far its first objective
    /// moved, and the trials flagged for it.
    Drift { metric: Metric, baseline: Vec<(i64, f64)>, worst_pct: f64, flagged: Vec<i64> },
}

/// Where a setting separates failures from trials that ran.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Boundary {
    pub setting: String,
    /// For numbers: failed at or beyond `failed_from`, ran up to `ran_to`.
    /// For words: failed with `failed_from`, never ran with it.
    pub failed_from: String,
    pub ran_to: Option<String>,
    pub at_least: bool,
}

/// Every finding of a study's trials: `varied` are the settings the study
/// varies, `objectives` what it optimizes.
pub fn findings(
    trials: &[TrialFacts],
    varied: &[String],
    objectives: &[(Metric, Goal)],
) -> Vec<Finding> {
    let done: Vec<&TrialFacts> = trials.iter().filter(|t| t.done).collect();
    let mut out = Vec::new();
    for &(metric, goal) in objectives {
        let best = done
            .iter()
            .filter_map(|t| Some((*t, *t.metrics.get(&metric)?)))
            .max_by(|a, b| goal.oriented(a.1).total_cmp(&goal.oriented(b.1)));
        if let Some((t, value)) = best {
            out.push(Finding::Best {
                metric,
                goal,
                trial: t.id,
                value,
                settings: t.settings.clone(),
            });
        }
    }
    out.extend(balanced(&done, objectives));
    let tests = tests(&done, varied, &tested_metrics(&done, objectives));
    out.extend(judged(&tests));
    out.extend(free_wins(&tests));
    for &(metric, _) in objectives {
        out.extend(anomalies(&done, varied, metric));
    }
    out.extend(failures(trials, varied));
    out.extend(ceiling(&done, &tests));
    if let Some(&(metric, _)) = objectives.first() {
        out.extend(drift(trials, metric));
    }
    out
}

/// The metrics to test settings against: the objectives, then every speed,
/// memory and quality measure most done trials have.
fn tested_metrics(done: &[&TrialFacts], objectives: &[(Metric, Goal)]) -> Vec<(Metric, Goal)> {
    let mut out = objectives.to_vec();
    for m in GAINS.into_iter().chain(QUALITY) {
        let measured = done.iter().filter(|t| t.metrics.contains_key(&m)).count();
        if measured * 2 > done.len() && !out.iter().any(|(o, _)| *o == m) {
            out.push((m, m.natural_goal()));
        }
    }
    out
}

fn balanced(done: &[&TrialFacts], objectives: &[(Metric, Goal)]) -> Option<Finding> {
    if objectives.len() < 2 {
        return None;
    }
    let points: Vec<(&TrialFacts, Vec<f64>)> = done
        .iter()
        .filter_map(|t| {
            let v: Option<Vec<f64>> =
                objectives.iter().map(|(m, _)| t.metrics.get(m).copied()).collect();
            Some((*t, v?))
        })
        .collect();
    let values: Vec<Vec<f64>> = points.iter().map(|(_, v)| v.clone()).collect();
    let goals: Vec<Goal> = objectives.iter().map(|(_, g)| *g).collect();
    let front = crate::pareto::front(&values, &goals);
    if front.len() < 2 {
        return None;
    }
    // Each objective scaled over the front: 1 is the front's best, 0 its worst.
    let scaled = |i: usize, k: usize| {
        let oriented = |j: usize| goals[k].oriented(values[j][k]);
        let (lo, hi) = front
            .iter()
            .fold((f64::MAX, f64::MIN), |(lo, hi), &j| (lo.min(oriented(j)), hi.max(oriented(j))));
        if hi > lo { (oriented(i) - lo) / (hi - lo) } else { 1.0 }
    };
    let distance = |i: usize| (0..goals.len()).map(|k| (1.0 - scaled(i, k)).powi(2)).sum::<f64>();
    let pick = *front.iter().min_by(|&&a, &&b| distance(a).total_cmp(&distance(b)))?;
    let (t, v) = &points[pick];
    Some(Finding::Balanced {
        trial: t.id,
        values: objectives.iter().map(|(m, _)| *m).zip(v.iter().copied()).collect(),
        settings: t.settings.clone(),
        front: front.iter().map(|&i| points[i].0.id).collect(),
    })
}

/// The levels of `setting` on `metric` over the done trials.
fn levels(done: &[&TrialFacts], setting: &str, metric: Metric) -> Vec<(String, Vec<(i64, f64)>)> {
    let mut by: BTreeMap<String, Vec<(i64, f64)>> = BTreeMap::new();
    for t in done {
        if let Some(v) = t.metrics.get(&metric) {
            let value = t.settings.get(setting).cloned().unwrap_or_default();
            by.entry(value).or_default().push((t.id, *v));
        }
    }
    by.into_iter().collect()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

/// One-way analysis of variance: the chance of group means this far apart
/// if the groups did not differ. `used_df`: degrees of freedom already
/// spent on other settings' effects (taken out of the values beforehand).
/// `None` when there is too little to tell.
pub fn anova_p(groups: &[Vec<f64>], used_df: usize) -> Option<f64> {
    let k = groups.len();
    let n: usize = groups.iter().map(Vec::len).sum();
    if k < 2 || n <= k + used_df {
        return None;
    }
    let mean = groups.iter().flatten().sum::<f64>() / n as f64;
    let means: Vec<f64> = groups.iter().map(|g| g.iter().sum::<f64>() / g.len() as f64).collect();
    let between: f64 =
        groups.iter().zip(&means).map(|(g, m)| g.len() as f64 * (m - mean).powi(2)).sum();
    let within: f64 = groups
        .iter()
        .zip(&means)
        .map(|(g, m)| g.iter().map(|x| (x - m).powi(2)).sum::<f64>())
        .sum();
    let (d1, d2) = ((k - 1) as f64, (n - k - used_df) as f64);
    // Spread this small is rounding, not noise: the groups agree or differ
    // exactly.
    let scale = groups.iter().flatten().map(|x| x.abs()).fold(0.0, f64::max);
    if within <= 1e-12 * scale * scale * n as f64 {
        return Some(if between > 1e-12 * scale * scale * n as f64 { 0.0 } else { 1.0 });
    }
    let f = (between / d1) / (within / d2);
    Some(FisherSnedecor::new(d1, d2).ok()?.sf(f))
}

/// Main effects of the `varied` settings on one metric: each setting's
/// level means, to take the other settings' effects out before testing one
/// or predicting a trial (exact for a full grid).
struct MainEffects<'a> {
    varied: &'a [String],
    grand: f64,
    /// Per setting, per value: (sum, count).
    sums: BTreeMap<&'a str, BTreeMap<String, (f64, usize)>>,
}

fn value_of(t: &TrialFacts, s: &str) -> String {
    t.settings.get(s).cloned().unwrap_or_default()
}

impl<'a> MainEffects<'a> {
    fn fit(measured: &[(&TrialFacts, f64)], varied: &'a [String]) -> Self {
        let mut sums: BTreeMap<&str, BTreeMap<String, (f64, usize)>> = BTreeMap::new();
        for s in varied {
            let by = sums.entry(s.as_str()).or_default();
            for (t, v) in measured {
                let e = by.entry(value_of(t, s)).or_default();
                e.0 += v;
                e.1 += 1;
            }
        }
        let n = measured.len();
        let grand = measured.iter().map(|(_, v)| v).sum::<f64>() / n.max(1) as f64;
        MainEffects { varied, grand, sums }
    }

    fn level_mean(&self, s: &str, value: &str) -> f64 {
        let (sum, n) = self.sums[s][value];
        sum / n as f64
    }

    /// `v` with every setting's effect but `keep`'s taken out.
    fn adjusted(&self, t: &TrialFacts, v: f64, keep: &str) -> f64 {
        v - self
            .varied
            .iter()
            .filter(|o| *o != keep)
            .map(|o| self.level_mean(o, &value_of(t, o)) - self.grand)
            .sum::<f64>()
    }
}

/// One setting tested on one metric.
struct Test {
    setting: String,
    metric: Metric,
    goal: Goal,
    /// Best first.
    levels: Vec<Level>,
    p: f64,
    /// Tests made in all (for Bonferroni).
    family: usize,
}

impl Test {
    fn significant(&self) -> bool {
        self.p * self.family as f64 <= ALPHA
    }

    fn level(&self, value: &str) -> Option<&Level> {
        self.levels.iter().find(|l| l.value == value)
    }
}

fn tests(done: &[&TrialFacts], varied: &[String], metrics: &[(Metric, Goal)]) -> Vec<Test> {
    let mut tests = Vec::new();
    for &(metric, goal) in metrics {
        let measured: Vec<(&TrialFacts, f64)> =
            done.iter().filter_map(|t| Some((*t, *t.metrics.get(&metric)?))).collect();
        if measured.is_empty() {
            continue;
        }
        let fit = MainEffects::fit(&measured, varied);
        let by_id: BTreeMap<i64, &TrialFacts> = measured.iter().map(|(t, _)| (t.id, *t)).collect();
        for setting in varied {
            let groups = levels(done, setting, metric);
            let used_df: usize = varied
                .iter()
                .filter(|o| *o != setting)
                .map(|o| fit.sums[o.as_str()].len().saturating_sub(1))
                .sum();
            let values: Vec<Vec<f64>> = groups
                .iter()
                .map(|(_, g)| {
                    g.iter().map(|(id, v)| fit.adjusted(by_id[id], *v, setting)).collect()
                })
                .collect();
            let Some(p) = anova_p(&values, used_df) else { continue };
            let mut levels: Vec<Level> = groups
                .into_iter()
                .map(|(value, g)| {
                    let mut v: Vec<f64> = g.iter().map(|(_, v)| *v).collect();
                    Level {
                        value,
                        median: median(&mut v),
                        trials: g.iter().map(|(id, _)| *id).collect(),
                    }
                })
                .collect();
            levels.sort_by(|a, b| goal.oriented(b.median).total_cmp(&goal.oriented(a.median)));
            tests.push(Test { setting: setting.clone(), metric, goal, levels, p, family: 0 });
        }
    }
    // Bonferroni: the family of every test made keeps its false claims at ALPHA.
    let family = tests.len();
    for t in &mut tests {
        t.family = family;
    }
    tests
}

/// How much better `a` is than `b` toward `goal`, in percent of `b`.
fn better_pct(goal: Goal, a: f64, b: f64) -> f64 {
    (goal.oriented(a) - goal.oriented(b)) / b.abs().max(f64::MIN_POSITIVE) * 100.0
}

/// Effects beyond the noise and settings with none; a test in between
/// (suggestive, not shown) makes no claim either way.
fn judged(tests: &[Test]) -> Vec<Finding> {
    tests
        .iter()
        .filter_map(|t| {
            let (best, worst) = (t.levels.first()?.median, t.levels.last()?.median);
            if t.significant() {
                Some(Finding::Effect {
                    setting: t.setting.clone(),
                    metric: t.metric,
                    goal: t.goal,
                    levels: t.levels.clone(),
                    size_pct: better_pct(t.goal, best, worst),
                    p_value: t.p,
                    peak: is_interior(&t.levels),
                })
            } else if t.p >= ALPHA {
                let (hi, lo) = (best.max(worst), best.min(worst));
                let spread_pct = if hi == lo {
                    0.0
                } else if lo <= 0.0 {
                    // No ratio to zero: the gap as a share of the larger.
                    (hi - lo) / hi.abs() * 100.0
                } else {
                    (hi / lo - 1.0) * 100.0
                };
                Some(Finding::NoEffect {
                    setting: t.setting.clone(),
                    metric: t.metric,
                    levels: t.levels.clone(),
                    spread_pct,
                    p_value: t.p,
                })
            } else {
                None
            }
        })
        .collect()
}

/// Whether the best level (first) lies strictly between others in number.
fn is_interior(levels: &[Level]) -> bool {
    let numbers: Option<Vec<f64>> = levels.iter().map(|l| l.value.parse().ok()).collect();
    let Some(numbers) = numbers.filter(|n| n.len() >= 3) else { return false };
    let best = numbers[0];
    numbers.iter().any(|x| *x < best) && numbers.iter().any(|x| *x > best)
}

/// Whether two quality medians are the same for a reader: within one
/// percentage point for rates, within 1 % for anything else.
fn same_quality(metric: Metric, a: f64, b: f64) -> bool {
    match metric {
        Metric::QualityScore | Metric::ContextPassRate => (a - b).abs() <= 0.01,
        _ => (a - b).abs() <= 0.01 * a.abs().max(b.abs()),
    }
}

/// Free wins: for each setting, the value best on its largest speed or
/// memory effect, when it costs nothing on any other speed or memory
/// effect and every quality measure was measured and stayed put.
fn free_wins(tests: &[Test]) -> Vec<Finding> {
    let settings: BTreeSet<&str> = tests.iter().map(|t| t.setting.as_str()).collect();
    let mut out = Vec::new();
    for setting in settings {
        let of = |m: Metric| tests.iter().find(|t| t.setting == setting && t.metric == m);
        let quality: Vec<&Test> = QUALITY.iter().filter_map(|m| of(*m)).collect();
        if quality.is_empty() {
            // Nothing says quality held: no claim.
            continue;
        }
        let effects: Vec<&Test> =
            GAINS.iter().filter_map(|m| of(*m)).filter(|t| t.significant()).collect();
        let Some(main) = effects.iter().max_by(|a, b| {
            let size =
                |t: &Test| better_pct(t.goal, t.levels[0].median, t.levels.last().unwrap().median);
            size(a).total_cmp(&size(b))
        }) else {
            continue;
        };
        let value = main.levels[0].value.clone();
        let over = main.levels.last().map(|l| l.value.clone()).unwrap_or_default();
        let mut gains = Vec::new();
        let mut costs = false;
        for t in &effects {
            let (Some(with), Some(without)) = (t.level(&value), t.level(&over)) else {
                costs = true;
                continue;
            };
            let pct = better_pct(t.goal, with.median, without.median);
            // Within the other trials' spread counts as no cost; more than
            // 2 % worse is a trade-off, not a free win.
            if pct < -2.0 {
                costs = true;
            } else if pct > 2.0 {
                gains.push(Gain {
                    metric: t.metric,
                    with: with.median,
                    without: without.median,
                    pct,
                });
            }
        }
        let mut held = Vec::new();
        for q in &quality {
            let (Some(with), Some(without)) = (q.level(&value), q.level(&over)) else {
                costs = true;
                continue;
            };
            if q.p < ALPHA || !same_quality(q.metric, with.median, without.median) {
                costs = true;
            }
            held.push((q.metric, with.median, without.median));
        }
        if costs || gains.is_empty() {
            continue;
        }
        let trials = [&value, &over]
            .iter()
            .flat_map(|v| main.level(v).map(|l| l.trials.clone()).unwrap_or_default())
            .collect();
        out.push(Finding::FreeWin {
            setting: setting.to_string(),
            value,
            over,
            gains,
            quality: held,
            trials,
        });
    }
    out
}

/// Trials of `metric` far off what the other trials predict for their
/// settings: a multiplicative main-effects model fitted by median polish on
/// the logarithm (medians, so one anomaly does not skew the predictions for
/// its neighbours), and a misfit both large ([`ANOMALY_RATIO`]) and beyond
/// the other trials' spread ([`ANOMALY_SIGMAS`] robust standard
/// deviations). Only trials whose every value was tried at least three
/// times are judged: with fewer, the model has nothing to predict from.
fn anomalies(done: &[&TrialFacts], varied: &[String], metric: Metric) -> Vec<Finding> {
    let measured: Vec<(&TrialFacts, f64)> = done
        .iter()
        .filter_map(|t| Some((*t, t.metrics.get(&metric)?.ln())))
        .filter(|(_, v)| v.is_finite())
        .collect();
    if measured.len() < 8 || varied.is_empty() {
        return Vec::new();
    }
    let mut residual: Vec<f64> = measured.iter().map(|(_, v)| *v).collect();
    let center = median(&mut residual.clone());
    residual.iter_mut().for_each(|r| *r -= center);
    let groups: Vec<Vec<Vec<usize>>> = varied
        .iter()
        .map(|s| {
            let mut by: BTreeMap<String, Vec<usize>> = BTreeMap::new();
            for (i, (t, _)) in measured.iter().enumerate() {
                by.entry(value_of(t, s)).or_default().push(i);
            }
            by.into_values().collect()
        })
        .collect();
    for _ in 0..20 {
        let mut moved = 0.0f64;
        for level in groups.iter().flatten() {
            let m = median(&mut level.iter().map(|&i| residual[i]).collect::<Vec<_>>());
            level.iter().for_each(|&i| residual[i] -= m);
            moved = moved.max(m.abs());
        }
        if moved < 1e-9 {
            break;
        }
    }
    let judged: Vec<usize> = (0..measured.len())
        .filter(|&i| groups.iter().flatten().all(|level| !level.contains(&i) || level.len() >= 3))
        .collect();
    // Median absolute misfit, as a standard deviation (1.4826 for normal noise).
    let sigma = 1.4826 * median(&mut residual.iter().map(|r| r.abs()).collect::<Vec<_>>());
    judged
        .into_iter()
        .filter(|&i| {
            let r = residual[i].abs();
            r >= ANOMALY_RATIO.ln() && r >= ANOMALY_SIGMAS * sigma
        })
        .map(|i| {
            let (t, v) = measured[i];
            Finding::Anomaly {
                trial: t.id,
                metric,
                value: v.exp(),
                expected: (v - residual[i]).exp(),
                settings: t.settings.clone(),
            }
        })
        .collect()
}

fn failures(trials: &[TrialFacts], varied: &[String]) -> Vec<Finding> {
    let mut by: BTreeMap<&str, Vec<&TrialFacts>> = BTreeMap::new();
    for t in trials {
        if let Some((cause, _)) = &t.failure {
            by.entry(cause.as_str()).or_default().push(t);
        }
    }
    let ran: Vec<&TrialFacts> = trials.iter().filter(|t| t.done).collect();
    by.into_iter()
        .map(|(cause, failed)| {
            let boundary = varied.iter().find_map(|s| boundary(s, &failed, &ran));
            Finding::Failures {
                cause: cause.to_string(),
                trials: failed.iter().map(|t| t.id).collect(),
                message: failed[0].failure.as_ref().map(|f| f.1.clone()).unwrap_or_default(),
                boundary,
            }
        })
        .collect()
}

/// The fastest decode against its bandwidth ceiling.
fn ceiling(done: &[&TrialFacts], tests: &[Test]) -> Option<Finding> {
    let (t, decode, ceiling) = done
        .iter()
        .filter_map(|t| Some((*t, *t.metrics.get(&Metric::DecodeTps)?, t.ceiling_tps?)))
        .filter(|(_, _, c)| *c > 0.0)
        .max_by(|a, b| a.1.total_cmp(&b.1))?;
    let movers = tests
        .iter()
        .filter(|x| x.metric == Metric::DecodeTps && x.significant())
        .map(|x| x.setting.clone())
        .collect();
    Some(Finding::Ceiling { trial: t.id, decode, ceiling, pct: decode / ceiling * 100.0, movers })
}

/// The baseline's first objective over its runs, where it ran more than once.
fn drift(trials: &[TrialFacts], metric: Metric) -> Option<Finding> {
    let baseline: Vec<(i64, f64)> = trials
        .iter()
        .filter(|t| t.done && matches!(t.role.as_deref(), Some("baseline" | "rerun")))
        .filter_map(|t| Some((t.id, *t.metrics.get(&metric)?)))
        .collect();
    let &(_, first) = baseline.first()?;
    if baseline.len() < 2 {
        return None;
    }
    let worst_pct = baseline
        .iter()
        .map(|(_, v)| (v - first) / first.abs().max(f64::MIN_POSITIVE) * 100.0)
        .max_by(|a, b| a.abs().total_cmp(&b.abs()))
        .unwrap_or_default();
    let flagged = trials.iter().filter(|t| t.drift_pct.is_some()).map(|t| t.id).collect();
    Some(Finding::Drift { metric, baseline, worst_pct, flagged })
}

/// Where `setting` alone separates the failed trials from those that ran.
fn boundary(setting: &str, failed: &[&TrialFacts], ran: &[&TrialFacts]) -> Option<Boundary> {
    if ran.is_empty() {
        return None;
    }
    let value = |t: &&TrialFacts| t.settings.get(setting).cloned().unwrap_or_default();
    let failed_values: BTreeSet<String> = failed.iter().map(value).collect();
    let ran_values: BTreeSet<String> = ran.iter().map(value).collect();
    let number = |v: &String| v.parse::<f64>().ok();
    let nums = |set: &BTreeSet<String>| -> Option<Vec<f64>> { set.iter().map(number).collect() };
    if let (Some(f), Some(r)) = (nums(&failed_values), nums(&ran_values)) {
        let (fmin, fmax) = (
            f.iter().copied().fold(f64::MAX, f64::min),
            f.iter().copied().fold(f64::MIN, f64::max),
        );
        let (rmin, rmax) = (
            r.iter().copied().fold(f64::MAX, f64::min),
            r.iter().copied().fold(f64::MIN, f64::max),
        );
        let text = |x: f64| crate::space::fmt_float(x);
        if fmin > rmax {
            return Some(Boundary {
                setting: setting.into(),
                failed_from: text(fmin),
                ran_to: Some(text(rmax)),
                at_least: true,
            });
        }
        if fmax < rmin {
            return Some(Boundary {
                setting: setting.into(),
                failed_from: text(fmax),
                ran_to: Some(text(rmin)),
                at_least: false,
            });
        }
        return None;
    }
    // Words: one value every failure had and no trial that ran.
    match failed_values.iter().collect::<Vec<_>>()[..] {
        [only] if !ran_values.contains(only) => Some(Boundary {
            setting: setting.into(),
            failed_from: only.clone(),
            ran_to: None,
            at_least: true,
        }),
        _ => None,
    }
}

/// A number as reports show it: three significant digits or whole.
pub fn num(x: f64) -> String {
    let a = x.abs();
    if a >= 1e9 {
        format!("{:.2} G", x / 1e9)
    } else if a >= 1e6 {
        format!("{:.1} M", x / 1e6)
    } else if a >= 100.0 {
        format!("{x:.0}")
    } else if a >= 1.0 {
        format!("{x:.2}")
    } else {
        format!("{x:.3}")
    }
}

/// A metric's value as reports show it: memory in MiB or GiB, scores in
/// percent, anything else as a plain number.
pub fn value_text(metric: Metric, x: f64) -> String {
    let name = metric.name();
    if name.ends_with("_bytes") {
        let gib = x / (1u64 << 30) as f64;
        if gib >= 1.0 {
            format!("{gib:.2} GiB")
        } else {
            format!("{:.0} MiB", x / (1u64 << 20) as f64)
        }
    } else if matches!(metric, Metric::QualityScore | Metric::ContextPassRate) {
        format!("{:.1} %", x * 100.0)
    } else {
        num(x)
    }
}

fn trial_list(ids: &[i64]) -> String {
    let shown: Vec<String> = ids.iter().take(12).map(|i| i.to_string()).collect();
    let more = ids.len().saturating_sub(12);
    let rest = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{}{rest}", shown.join(", "))
}

fn value_name(v: &str) -> &str {
    if v.is_empty() { "the engine's default" } else { v }
}

fn p_text(p: f64) -> String {
    if p < 0.0001 { "p < 0.0001".into() } else { format!("p = {p:.4}") }
}

fn config_text(settings: &Settings) -> String {
    settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

impl Finding {
    /// The trials it rests on.
    pub fn trials(&self) -> Vec<i64> {
        match self {
            Finding::Best { trial, .. } | Finding::Anomaly { trial, .. } => vec![*trial],
            Finding::Balanced { front, .. } => front.clone(),
            Finding::Effect { levels, .. } | Finding::NoEffect { levels, .. } => {
                levels.iter().flat_map(|l| l.trials.iter().copied()).collect()
            }
            Finding::Failures { trials, .. } | Finding::FreeWin { trials, .. } => trials.clone(),
            Finding::Ceiling { trial, .. } => vec![*trial],
            Finding::Drift { baseline, flagged, .. } => {
                let mut ids: BTreeSet<i64> = baseline.iter().map(|(id, _)| *id).collect();
                ids.extend(flagged);
                ids.into_iter().collect()
            }
        }
    }

    /// A name for the finding that stays the same when the study's data
    /// changes its numbers: which best, which setting on which metric.
    pub fn key(&self) -> String {
        match self {
            Finding::Best { metric, .. } => format!("best:{}", metric.name()),
            Finding::Balanced { .. } => "balanced".into(),
            Finding::Effect { setting, metric, .. } => {
                format!("effect:{setting}:{}", metric.name())
            }
            Finding::NoEffect { setting, metric, .. } => {
                format!("no_effect:{setting}:{}", metric.name())
            }
            Finding::FreeWin { setting, .. } => format!("free_win:{setting}"),
            Finding::Anomaly { trial, metric, .. } => format!("anomaly:{trial}:{}", metric.name()),
            Finding::Failures { cause, .. } => format!("failures:{cause}"),
            Finding::Ceiling { .. } => "ceiling".into(),
            Finding::Drift { .. } => "drift".into(),
        }
    }

    /// One paragraph of markdown, numbers and trials cited.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        match self {
            Finding::Best { metric, goal, trial, value, settings } => {
                let _ = write!(
                    s,
                    "**Best {}** ({}): {} — trial {trial}, `{}`.",
                    metric.label(),
                    if *goal == Goal::Max { "highest" } else { "lowest" },
                    value_text(*metric, *value),
                    config_text(settings)
                );
            }
            Finding::Balanced { trial, values, settings, front } => {
                let values: Vec<String> = values
                    .iter()
                    .map(|(m, v)| format!("{} {}", m.label(), value_text(*m, *v)))
                    .collect();
                let _ = write!(
                    s,
                    "**Balanced pick**: trial {trial} — {} — of the {} trials on the Pareto front, the closest to the best of every objective at once (each scaled from the front's worst to its best), `{}`. Front: trials {}.",
                    values.join(", "),
                    front.len(),
                    config_text(settings),
                    trial_list(front),
                );
            }
            Finding::Effect { setting, metric, levels, size_pct, p_value, peak, .. } => {
                let (best, worst) = (&levels[0], &levels[levels.len() - 1]);
                let _ = write!(
                    s,
                    "**`{setting}` changes {}**: {} is best (median {} over {} trials), {} worst (median {} over {}), {:.1} % apart — beyond the noise ({}, {} trials).",
                    metric.label(),
                    value_name(&best.value),
                    value_text(*metric, best.median),
                    best.trials.len(),
                    value_name(&worst.value),
                    value_text(*metric, worst.median),
                    worst.trials.len(),
                    size_pct.abs(),
                    p_text(*p_value),
                    self.trials().len(),
                );
                if *peak {
                    let _ = write!(
                        s,
                        " It peaks in between: both smaller and larger values of `{setting}` do worse."
                    );
                }
                let _ = write!(s, " Trials: {}.", trial_list(&self.trials()));
            }
            Finding::NoEffect { setting, metric, levels, spread_pct, p_value } => {
                let medians: Vec<String> = levels
                    .iter()
                    .map(|l| format!("{} {}", value_name(&l.value), value_text(*metric, l.median)))
                    .collect();
                let _ = write!(
                    s,
                    "**`{setting}` has no effect on {} within noise**: medians {} ({:.1} % apart; {}, {} trials). Trials: {}.",
                    metric.label(),
                    medians.join(", "),
                    spread_pct,
                    p_text(*p_value),
                    self.trials().len(),
                    trial_list(&self.trials()),
                );
            }
            Finding::FreeWin { setting, value, over, gains, quality, trials } => {
                let gains: Vec<String> = gains
                    .iter()
                    .map(|g| {
                        format!(
                            "{} {} → {} ({:.1} % better)",
                            g.metric.label(),
                            value_text(g.metric, g.without),
                            value_text(g.metric, g.with),
                            g.pct
                        )
                    })
                    .collect();
                let quality: Vec<String> = quality
                    .iter()
                    .map(|(m, with, without)| {
                        format!(
                            "{} {} → {}",
                            m.label(),
                            value_text(*m, *without),
                            value_text(*m, *with)
                        )
                    })
                    .collect();
                let _ = write!(
                    s,
                    "**Free win: `{setting}` = {} instead of {}**: {}, while quality stays within noise ({}). Trials: {}.",
                    value_name(value),
                    value_name(over),
                    gains.join("; "),
                    quality.join("; "),
                    trial_list(trials),
                );
            }
            Finding::Anomaly { trial, metric, value, expected, settings } => {
                let ratio = value / expected;
                let how = if ratio < 1.0 {
                    format!("{:.1}× lower", 1.0 / ratio)
                } else {
                    format!("{ratio:.1}× higher")
                };
                let _ = write!(
                    s,
                    "**Trial {trial} is an anomaly on {}**: {}, where the other trials predict {} for `{}` — {how}. Run it again before trusting it, or look for what else changed.",
                    metric.label(),
                    value_text(*metric, *value),
                    value_text(*metric, *expected),
                    config_text(settings),
                );
            }
            Finding::Failures { cause, trials, message, boundary } => {
                let cause_text = cause.replace('_', " ");
                match boundary {
                    Some(b) if b.ran_to.is_some() => {
                        let (op, other) = if b.at_least { ("≥", "≤") } else { ("≤", "≥") };
                        let _ = write!(
                            s,
                            "**{cause_text} at `{}` {op} {}**: {} trials failed so; every trial with `{}` {other} {} ran.",
                            b.setting,
                            b.failed_from,
                            trials.len(),
                            b.setting,
                            b.ran_to.as_deref().unwrap_or_default(),
                        );
                    }
                    Some(b) => {
                        let _ = write!(
                            s,
                            "**{cause_text} with `{}` = {}**: {} trials failed so, and none with it ran.",
                            b.setting,
                            value_name(&b.failed_from),
                            trials.len(),
                        );
                    }
                    None => {
                        let _ = write!(s, "**{cause_text}**: {} trials failed so.", trials.len());
                    }
                }
                let first = message.lines().next().unwrap_or_default();
                if !first.is_empty() {
                    let _ = write!(s, " The engine said: “{first}”.");
                }
                let _ = write!(s, " Trials: {}.", trial_list(trials));
            }
            Finding::Ceiling { trial, decode, ceiling, pct, movers } => {
                if *pct >= WALL_PCT {
                    let _ = write!(
                        s,
                        "**Decode is at the memory-bandwidth wall**: the fastest trial ({trial}) decodes {} tok/s, {pct:.0} % of the {} tok/s the measured memory bandwidth allows for the bytes each token reads.",
                        num(*decode),
                        num(*ceiling)
                    );
                } else {
                    let _ = write!(
                        s,
                        "**Decode has headroom**: the fastest trial ({trial}) decodes {} tok/s, {pct:.0} % of the {} tok/s the measured memory bandwidth allows; something other than memory bandwidth (compute, threads, the engine) holds it back.",
                        num(*decode),
                        num(*ceiling)
                    );
                }
                if movers.is_empty() {
                    let _ = write!(s, " No setting moved decode beyond the noise.");
                } else {
                    let list: Vec<String> = movers.iter().map(|m| format!("`{m}`")).collect();
                    let _ = write!(s, " Settings that moved decode: {}.", list.join(", "));
                }
            }
            Finding::Drift { metric, baseline, worst_pct, flagged } => {
                let runs: Vec<String> = baseline
                    .iter()
                    .map(|(id, v)| format!("{} (trial {id})", value_text(*metric, *v)))
                    .collect();
                if flagged.is_empty() {
                    let _ = write!(
                        s,
                        "**No drift**: the baseline ran {} times, its {} at most {:.1} % from the first run: {}.",
                        baseline.len(),
                        metric.label(),
                        worst_pct.abs(),
                        runs.join(", ")
                    );
                } else {
                    let _ = write!(
                        s,
                        "**Drift during the study**: the baseline's {} moved up to {worst_pct:+.1} % between its runs ({}); the trials run meanwhile are flagged and may be off by as much: {}.",
                        metric.label(),
                        runs.join(", "),
                        trial_list(flagged)
                    );
                }
            }
        }
        s
    }
}

/// Which findings a section of a write-up holds.
pub type Pick = fn(&Finding) -> bool;

/// The sections of a write-up, in order: a key that names it (reports
/// find their cells by it), a title and which findings it holds.
pub const SECTIONS: [(&str, &str, Pick); 8] = [
    ("best", "Best configurations", |f| {
        matches!(f, Finding::Best { .. } | Finding::Balanced { .. })
    }),
    ("free_wins", "Free wins", |f| matches!(f, Finding::FreeWin { .. })),
    ("effects", "What each setting changes", |f| matches!(f, Finding::Effect { .. })),
    ("no_effect", "No effect within noise", |f| matches!(f, Finding::NoEffect { .. })),
    ("anomalies", "Anomalies", |f| matches!(f, Finding::Anomaly { .. })),
    ("failures", "Failures", |f| matches!(f, Finding::Failures { .. })),
    ("ceiling", "Ceiling", |f| matches!(f, Finding::Ceiling { .. })),
    ("drift", "Drift", |f| matches!(f, Finding::Drift { .. })),
];

/// One section's findings as a markdown list, or `None` when it has none.
pub fn section_markdown(findings: &[Finding], pick: Pick) -> Option<String> {
    let items: Vec<String> =
        findings.iter().filter(|f| pick(f)).map(|f| format!("- {}", f.markdown())).collect();
    (!items.is_empty()).then(|| items.join("\n"))
}

/// Every finding as a markdown document, section by section.
pub fn markdown(findings: &[Finding]) -> String {
    SECTIONS
        .iter()
        .filter_map(|(_, title, pick)| {
            Some(format!("## {title}\n\n{}\n\n", section_markdown(findings, *pick)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;

    /// A study of `threads` × `cache` × `mlock` (each combination `reps`
    /// times) whose decode speed is `speed(threads, cache, mlock)` plus
    /// noise of about 2 %.
    fn study(reps: usize, speed: impl Fn(u32, &str, bool) -> f64) -> Vec<TrialFacts> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(11);
        let mut out = Vec::new();
        for threads in [1u32, 2, 4, 8, 16] {
            for cache in ["f16", "q8_0"] {
                for mlock in [false, true] {
                    for _ in 0..reps {
                        let noise = 1.0 + rng.random_range(-0.02..0.02);
                        let settings: Settings = [
                            ("threads".to_string(), threads.to_string()),
                            ("cache_type_k".to_string(), cache.to_string()),
                            ("mlock".to_string(), mlock.to_string()),
                        ]
                        .into();
                        out.push(TrialFacts {
                            id: out.len() as i64 + 1,
                            settings,
                            done: true,
                            failure: None,
                            metrics: [(Metric::DecodeTps, speed(threads, cache, mlock) * noise)]
                                .into(),
                            ..Default::default()
                        });
                    }
                }
            }
        }
        out
    }

    fn varied() -> Vec<String> {
        ["threads", "cache_type_k", "mlock"].map(String::from).to_vec()
    }

    const DECODE: [(Metric, Goal); 1] = [(Metric::DecodeTps, Goal::Max)];

    #[test]
    fn pure_noise_makes_no_effect_claim() {
        let trials = study(2, |_, _, _| 40.0);
        let found = findings(&trials, &varied(), &DECODE);
        assert!(!found.iter().any(|f| matches!(f, Finding::Effect { .. })), "{found:#?}");
        let none: Vec<&str> = found
            .iter()
            .filter_map(|f| match f {
                Finding::NoEffect { setting, .. } => Some(setting.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(none, ["threads", "cache_type_k", "mlock"]);
    }

    #[test]
    fn a_planted_effect_is_found_and_a_bystander_is_not() {
        // Threads peak at 8 (non-monotonic); the cache type costs 30 %; mlock nothing.
        let peak = |t: u32| match t {
            1 => 10.0,
            2 => 20.0,
            4 => 35.0,
            8 => 40.0,
            _ => 30.0,
        };
        let trials = study(2, |t, c, _| peak(t) * if c == "q8_0" { 0.7 } else { 1.0 });
        let found = findings(&trials, &varied(), &DECODE);
        let effect = |name: &str| {
            found.iter().find_map(|f| match f {
                Finding::Effect { setting, levels, peak, .. } if setting == name => {
                    Some((levels[0].value.clone(), *peak))
                }
                _ => None,
            })
        };
        assert_eq!(effect("threads"), Some(("8".to_string(), true)), "{found:#?}");
        assert_eq!(effect("cache_type_k"), Some(("f16".to_string(), false)));
        assert_eq!(effect("mlock"), None, "mlock does nothing");
        let text = markdown(&found);
        assert!(text.contains("**`threads` changes decode tok/s**: 8 is best"), "{text}");
        assert!(text.contains("It peaks in between"), "{text}");
        assert!(!text.contains("`mlock` changes"), "{text}");
        let best = &found[0];
        assert!(
            matches!(best, Finding::Best { settings, .. } if settings["threads"] == "8" && settings["cache_type_k"] == "f16")
        );
    }

    #[test]
    fn a_small_effect_shows_under_a_large_one() {
        // Threads move decode 16-fold; the cache type only 6 %, which the
        // 2 % noise cannot explain once the threads' effect is taken out.
        let trials = study(2, |t, c, _| 5.0 * t as f64 * if c == "q8_0" { 0.94 } else { 1.0 });
        let found = findings(&trials, &varied(), &DECODE);
        let cache = found.iter().find_map(|f| match f {
            Finding::Effect { setting, levels, size_pct, .. } if setting == "cache_type_k" => {
                Some((levels[0].value.clone(), *size_pct))
            }
            _ => None,
        });
        let (best, size) = cache.expect("the cache type's effect");
        assert_eq!(best, "f16");
        assert!(size > 0.0, "{size}");
    }

    #[test]
    fn an_out_of_memory_boundary_is_drawn() {
        let mut trials = study(1, |_, _, _| 40.0);
        for t in trials.iter_mut() {
            let ctx = if t.id % 4 == 0 { "32768" } else { "8192" };
            t.settings.insert("ctx_size".into(), ctx.into());
            if ctx == "32768" {
                t.done = false;
                t.failure =
                    Some(("out_of_memory".into(), "cudaMalloc failed: out of memory".into()));
                t.metrics.clear();
            }
        }
        let varied: Vec<String> = ["threads", "ctx_size"].map(String::from).to_vec();
        let found = findings(&trials, &varied, &DECODE);
        let failures = found.iter().find(|f| matches!(f, Finding::Failures { .. })).unwrap();
        let text = failures.markdown();
        assert!(
            text.starts_with("**out of memory at `ctx_size` ≥ 32768**: 5 trials failed so; every trial with `ctx_size` ≤ 8192 ran."),
            "{text}"
        );
        assert!(text.contains("“cudaMalloc failed: out of memory”"), "{text}");
    }

    /// Sets `metric` on every trial to `f(trial)`.
    fn measure(trials: &mut [TrialFacts], metric: Metric, mut f: impl FnMut(&TrialFacts) -> f64) {
        for t in trials.iter_mut() {
            let v = f(t);
            t.metrics.insert(metric, v);
        }
    }

    #[test]
    fn a_lossless_setting_is_a_free_win_and_a_lossy_one_is_not() {
        // q8_0 K/V: 25 % less memory, same speed, same quality. A second
        // study where it also costs quality must not call it free.
        let mut rng = rand::rngs::StdRng::seed_from_u64(5);
        let mut trials = study(2, |t, _, _| 5.0 * t as f64);
        measure(&mut trials, Metric::PeakRssBytes, |t| {
            let base = 800e6 * if t.settings["cache_type_k"] == "q8_0" { 0.75 } else { 1.0 };
            base * (1.0 + (t.id % 7) as f64 * 0.002)
        });
        measure(&mut trials, Metric::QualityScore, |_| 0.625);
        let mut lossy = trials.clone();
        let found = findings(&trials, &varied(), &DECODE);
        // More threads are a free win too (faster, quality the same); the
        // cache type's is the one planted.
        let wins: Vec<&Finding> = found
            .iter()
            .filter(|f| matches!(f, Finding::FreeWin { setting, .. } if setting == "cache_type_k"))
            .collect();
        assert_eq!(wins.len(), 1, "{found:#?}");
        let Finding::FreeWin { setting, value, over, gains, .. } = wins[0] else { unreachable!() };
        assert_eq!(
            (setting.as_str(), value.as_str(), over.as_str()),
            ("cache_type_k", "q8_0", "f16")
        );
        assert_eq!(gains.len(), 1);
        assert_eq!(gains[0].metric, Metric::PeakRssBytes);
        assert!((gains[0].pct - 25.0).abs() < 2.0, "{gains:?}");
        let text = wins[0].markdown();
        assert!(
            text.starts_with("**Free win: `cache_type_k` = q8_0 instead of f16**: peak RSS"),
            "{text}"
        );
        assert!(text.contains("quality score 62.5 % → 62.5 %"), "{text}");

        measure(&mut lossy, Metric::QualityScore, |t| {
            let q = if t.settings["cache_type_k"] == "q8_0" { 0.55 } else { 0.625 };
            q + rng.random_range(-0.005..0.005)
        });
        let found = findings(&lossy, &varied(), &DECODE);
        let cache_win = |f: &Finding| matches!(f, Finding::FreeWin { setting, .. } if setting == "cache_type_k");
        assert!(!found.iter().any(cache_win), "{found:#?}");

        // Without any quality measure, nothing is called free.
        for t in trials.iter_mut() {
            t.metrics.remove(&Metric::QualityScore);
        }
        let found = findings(&trials, &varied(), &DECODE);
        assert!(!found.iter().any(|f| matches!(f, Finding::FreeWin { .. })), "{found:#?}");
    }

    #[test]
    fn one_combination_far_slower_than_its_neighbours_is_an_anomaly() {
        let mut trials = study(1, |t, c, _| 5.0 * t as f64 * if c == "q8_0" { 0.9 } else { 1.0 });
        // threads=8, q8_0, mlock on: four times slower than the rest predict.
        let odd = trials
            .iter_mut()
            .find(|t| {
                t.settings["threads"] == "8"
                    && t.settings["cache_type_k"] == "q8_0"
                    && t.settings["mlock"] == "true"
            })
            .unwrap();
        *odd.metrics.get_mut(&Metric::DecodeTps).unwrap() /= 4.0;
        let odd = odd.id;
        let found = findings(&trials, &varied(), &DECODE);
        let anomalies: Vec<&Finding> =
            found.iter().filter(|f| matches!(f, Finding::Anomaly { .. })).collect();
        assert_eq!(anomalies.len(), 1, "{found:#?}");
        let Finding::Anomaly { trial, value, expected, .. } = anomalies[0] else { unreachable!() };
        assert_eq!(*trial, odd);
        let ratio = expected / value;
        assert!((3.0..5.0).contains(&ratio), "{ratio}");
        let text = anomalies[0].markdown();
        assert!(
            text.starts_with(&format!("**Trial {odd} is an anomaly on decode tok/s**")),
            "{text}"
        );
        assert!(text.contains("× lower"), "{text}");

        // The same study without the odd trial has no anomaly.
        let clean = study(1, |t, c, _| 5.0 * t as f64 * if c == "q8_0" { 0.9 } else { 1.0 });
        let found = findings(&clean, &varied(), &DECODE);
        assert!(!found.iter().any(|f| matches!(f, Finding::Anomaly { .. })), "{found:#?}");
    }

    #[test]
    fn the_balanced_pick_sits_between_the_extremes() {
        // Decode rises with threads, memory too: the front is every thread
        // count; the balanced pick is neither end.
        let mut trials = study(1, |t, _, _| 10.0 * (t as f64).sqrt());
        measure(&mut trials, Metric::PeakRssBytes, |t| {
            let threads: f64 = t.settings["threads"].parse().unwrap();
            let cache = if t.settings["cache_type_k"] == "q8_0" { 1.0 } else { 1.1 };
            100e6 * threads * cache
        });
        let objectives = [(Metric::DecodeTps, Goal::Max), (Metric::PeakRssBytes, Goal::Min)];
        let found = findings(&trials, &varied(), &objectives);
        let Some(Finding::Balanced { trial, front, settings, .. }) =
            found.iter().find(|f| matches!(f, Finding::Balanced { .. }))
        else {
            panic!("{found:#?}")
        };
        assert!(front.contains(trial));
        assert!(!["1", "16"].contains(&settings["threads"].as_str()), "{settings:?}");
    }

    #[test]
    fn the_ceiling_and_drift_are_reported() {
        let mut trials = study(1, |_, _, _| 40.0);
        for t in trials.iter_mut() {
            t.ceiling_tps = Some(44.0);
        }
        let found = findings(&trials, &varied(), &DECODE);
        let ceiling = found.iter().find(|f| matches!(f, Finding::Ceiling { .. })).unwrap();
        let text = ceiling.markdown();
        assert!(text.starts_with("**Decode is at the memory-bandwidth wall**"), "{text}");
        assert!(text.contains("No setting moved decode beyond the noise."), "{text}");

        // The baseline (trial 1) run again as trials 6 and 12, 10 % slower
        // the second time; trials 7–12 flagged.
        for t in trials.iter_mut() {
            if [1, 6, 12].contains(&t.id) {
                t.role = Some(if t.id == 1 { "baseline" } else { "rerun" }.into());
            }
            if [1, 6].contains(&t.id) {
                t.metrics.insert(Metric::DecodeTps, 40.0);
            }
            if t.id == 12 {
                t.metrics.insert(Metric::DecodeTps, 36.0);
            }
            if (7..=12).contains(&t.id) {
                t.drift_pct = Some(-10.0);
            }
        }
        let found = findings(&trials, &varied(), &DECODE);
        let drift = found.iter().find(|f| matches!(f, Finding::Drift { .. })).unwrap();
        let text = drift.markdown();
        assert!(text.starts_with("**Drift during the study**"), "{text}");
        assert!(text.contains("-10.0 %"), "{text}");
        assert!(text.contains("7, 8, 9, 10, 11, 12"), "{text}");
    }

    #[test]
    fn values_read_as_people_read_them() {
        assert_eq!(value_text(Metric::PeakRssBytes, 33.9e6), "32 MiB");
        assert_eq!(value_text(Metric::PeakRssBytes, 5.0 * (1u64 << 30) as f64), "5.00 GiB");
        assert_eq!(value_text(Metric::QualityScore, 0.875), "87.5 %");
        assert_eq!(value_text(Metric::DecodeTps, 45.123), "45.12");
    }

    #[test]
    fn analysis_of_variance_matches_a_worked_example() {
        // Three groups of three: F = 27 on (2, 6) degrees of freedom, where
        // the tail is (1 + 2F/6)^-3 = 0.001 exactly.
        let groups = vec![vec![1.0, 2.0, 3.0], vec![4.0, 5.0, 6.0], vec![7.0, 8.0, 9.0]];
        let p = anova_p(&groups, 0).unwrap();
        assert!((p - 0.001).abs() < 1e-9, "{p}");
        assert_eq!(anova_p(&[vec![1.0], vec![2.0]], 0), None, "no spread to judge against");
    }
}
