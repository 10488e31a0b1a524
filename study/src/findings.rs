//! Findings: what a study's trials say, worked out deterministically from
//! them. Every finding cites its trials and numbers, and claims nothing the
//! data does not support:
//!
//! - the best trial for each objective;
//! - the effect of each varied setting on each objective, tested against
//!   the trials' own spread (one-way analysis of variance over the groups of
//!   trials that share a value of the setting, Bonferroni-corrected over
//!   every setting and metric tested), with where it peaks when the best
//!   value lies between others; "no effect within noise" where the test
//!   finds none and the medians agree;
//! - failures grouped by cause, with the boundary that separates them from
//!   the trials that ran, where one setting draws it.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use engine_bridge::Settings;
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, FisherSnedecor};

use crate::study::{Goal, Metric};

/// Family-wise chance of claiming an effect where there is none.
pub const ALPHA: f64 = 0.05;

/// One trial as the findings see it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrialFacts {
    pub id: i64,
    pub settings: Settings,
    /// Ran to the end and was measured.
    pub done: bool,
    /// Why it failed (a failure kind such as `out_of_memory`), and the
    /// engine's message.
    pub failure: Option<(String, String)>,
    pub metrics: BTreeMap<Metric, f64>,
}

/// The trials that share one value of a setting, on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Level {
    /// `""`: left to the engine.
    pub value: String,
    pub median: f64,
    pub trials: Vec<i64>,
}

/// Something the data shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// The best trial on an objective.
    Best { metric: Metric, goal: Goal, trial: i64, value: f64, settings: Settings },
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
    /// Trials that failed the same way, and where one setting separates
    /// them from the trials that ran (`at_least`: failures at and above
    /// `threshold`; else at and below).
    Failures { cause: String, trials: Vec<i64>, message: String, boundary: Option<Boundary> },
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
    out.extend(effects(&done, varied, objectives));
    out.extend(failures(trials, varied));
    out
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
    if within <= 0.0 {
        // No spread within groups at all: any difference between them is real.
        return Some(if between > 0.0 { 0.0 } else { 1.0 });
    }
    let f = (between / d1) / (within / d2);
    Some(FisherSnedecor::new(d1, d2).ok()?.sf(f))
}

fn effects(done: &[&TrialFacts], varied: &[String], objectives: &[(Metric, Goal)]) -> Vec<Finding> {
    struct Test {
        setting: String,
        metric: Metric,
        goal: Goal,
        levels: Vec<Level>,
        p: f64,
    }
    let mut tests = Vec::new();
    for &(metric, goal) in objectives {
        // Each setting's level means, to take the other settings' effects
        // out before testing one (main effects, as in a multi-way analysis
        // of variance; exact for a full grid).
        let measured: Vec<(&TrialFacts, f64)> =
            done.iter().filter_map(|t| Some((*t, *t.metrics.get(&metric)?))).collect();
        if measured.is_empty() {
            continue;
        }
        let grand = measured.iter().map(|(_, v)| v).sum::<f64>() / measured.len() as f64;
        let value_of = |t: &TrialFacts, s: &str| t.settings.get(s).cloned().unwrap_or_default();
        let level_means: BTreeMap<&String, BTreeMap<String, f64>> = varied
            .iter()
            .map(|s| {
                let mut sums: BTreeMap<String, (f64, usize)> = BTreeMap::new();
                for (t, v) in &measured {
                    let e = sums.entry(value_of(t, s)).or_default();
                    e.0 += v;
                    e.1 += 1;
                }
                (s, sums.into_iter().map(|(k, (sum, n))| (k, sum / n as f64)).collect())
            })
            .collect();
        for setting in varied {
            let groups = levels(done, setting, metric);
            let others: Vec<&String> = varied.iter().filter(|o| *o != setting).collect();
            let used_df: usize =
                others.iter().map(|o| level_means[o].len().saturating_sub(1)).sum();
            let adjusted = |t: &TrialFacts, v: f64| {
                v - others.iter().map(|o| level_means[o][&value_of(t, o)] - grand).sum::<f64>()
            };
            let by_id: BTreeMap<i64, &TrialFacts> =
                measured.iter().map(|(t, _)| (t.id, *t)).collect();
            let values: Vec<Vec<f64>> = groups
                .iter()
                .map(|(_, g)| g.iter().map(|(id, v)| adjusted(by_id[id], *v)).collect())
                .collect();
            let Some(p) = anova_p(&values, used_df) else { continue };
            let levels = groups
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
            tests.push(Test { setting: setting.clone(), metric, goal, levels, p });
        }
    }
    // Bonferroni: the family of every test made keeps its false claims at ALPHA.
    let m = tests.len().max(1) as f64;
    tests
        .into_iter()
        .filter_map(|mut t| {
            t.levels
                .sort_by(|a, b| t.goal.oriented(b.median).total_cmp(&t.goal.oriented(a.median)));
            let (best, worst) = (t.levels.first()?.median, t.levels.last()?.median);
            if t.p * m < ALPHA {
                let size_pct = (t.goal.oriented(best) - t.goal.oriented(worst))
                    / worst.abs().max(f64::MIN_POSITIVE)
                    * 100.0;
                let peak = is_interior(&t.levels);
                Some(Finding::Effect {
                    setting: t.setting,
                    metric: t.metric,
                    goal: t.goal,
                    levels: t.levels,
                    size_pct,
                    p_value: t.p,
                    peak,
                })
            } else if t.p >= ALPHA {
                let (hi, lo) = (best.max(worst), best.min(worst));
                let spread_pct = (hi / lo.abs().max(f64::MIN_POSITIVE) - 1.0) * 100.0;
                Some(Finding::NoEffect {
                    setting: t.setting,
                    metric: t.metric,
                    levels: t.levels,
                    spread_pct,
                    p_value: t.p,
                })
            } else {
                // Suggestive, not shown to be beyond noise: no claim either way.
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

impl Finding {
    /// The trials it rests on.
    pub fn trials(&self) -> Vec<i64> {
        match self {
            Finding::Best { trial, .. } => vec![*trial],
            Finding::Effect { levels, .. } | Finding::NoEffect { levels, .. } => {
                levels.iter().flat_map(|l| l.trials.iter().copied()).collect()
            }
            Finding::Failures { trials, .. } => trials.clone(),
        }
    }

    /// One paragraph of markdown, numbers and trials cited.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        match self {
            Finding::Best { metric, goal, trial, value, settings } => {
                let config: Vec<String> =
                    settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let _ = write!(
                    s,
                    "**Best {}** ({}): {} — trial {trial}, `{}`.",
                    metric.label(),
                    if *goal == Goal::Max { "highest" } else { "lowest" },
                    value_text(*metric, *value),
                    config.join(" ")
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
        }
        s
    }
}

/// Every finding as a markdown document, best first, then effects, then
/// what made no difference, then failures.
pub fn markdown(findings: &[Finding]) -> String {
    let section = |title: &str, pick: fn(&Finding) -> bool| {
        let items: Vec<String> =
            findings.iter().filter(|f| pick(f)).map(|f| format!("- {}", f.markdown())).collect();
        if items.is_empty() {
            String::new()
        } else {
            format!("## {title}\n\n{}\n\n", items.join("\n"))
        }
    };
    [
        section("Best configurations", |f| matches!(f, Finding::Best { .. })),
        section("What each setting changes", |f| matches!(f, Finding::Effect { .. })),
        section("No effect within noise", |f| matches!(f, Finding::NoEffect { .. })),
        section("Failures", |f| matches!(f, Finding::Failures { .. })),
    ]
    .concat()
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
