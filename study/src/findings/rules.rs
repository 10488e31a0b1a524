//! Where failures happen: the smallest conjunction of conditions on the
//! settings (`= value`, `≠ value`, `≥ number`, `≤ number`) inside which
//! trials failed for one cause and no trial ran, covering as many of those
//! failures as any such rule can. Up to three conditions are searched
//! exhaustively over bit sets of the trials, so a failure that needs
//! flash attention off *and* an f16 K cache *and* a large context is
//! stated as that, with its support.

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

use super::TrialFacts;
use super::design::value_of;

/// Most conditions a rule may have.
const MAX_CONDITIONS: usize = 3;
/// A rule must hold at least this many failures (fewer is anecdote).
const MIN_SUPPORT: usize = 2;

/// One condition on a setting.
#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Op {
    Is,
    IsNot,
    AtLeast,
    AtMost,
}

#[derive(
    Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Condition {
    pub setting: String,
    pub op: Op,
    /// `""`: left to the engine.
    pub value: String,
}

/// Where one cause of failure lies: inside `conditions` every trial
/// failed so (`failed` of the cause's `of` failures), and every trial
/// that ran (`ran`) lies outside. `also`: values every failure inside
/// shared that no trial inside changed, so the rule may need them too.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Rule {
    pub conditions: Vec<Condition>,
    pub also: Vec<Condition>,
    pub failed: usize,
    pub of: usize,
    pub ran: usize,
}

/// A set of trials, one bit each.
#[derive(Clone, PartialEq)]
struct Bits(Vec<u64>);

impl Bits {
    fn new(n: usize, f: impl Fn(usize) -> bool) -> Bits {
        let mut words = vec![0u64; n.div_ceil(64)];
        for i in (0..n).filter(|i| f(*i)) {
            words[i / 64] |= 1 << (i % 64);
        }
        Bits(words)
    }
    fn and(&self, other: &Bits) -> Bits {
        Bits(self.0.iter().zip(&other.0).map(|(a, b)| a & b).collect())
    }
    fn count_in(&self, mask: &Bits) -> usize {
        self.0.iter().zip(&mask.0).map(|(a, b)| (a & b).count_ones() as usize).sum()
    }
}

/// The rule for the `failed` trials against those that `ran`, where one
/// holds at least [`MIN_SUPPORT`] failures and the trials tell it from
/// every other: `Err` with the rules (at most [`MAX_UNDECIDED`]) that
/// separate as many failures as well with as few conditions but name
/// other settings, where the trials cannot choose between them.
pub fn rule(
    failed: &[&TrialFacts],
    ran: &[&TrialFacts],
    varied: &[String],
) -> Option<Result<Rule, Vec<Rule>>> {
    if ran.is_empty() || failed.len() < MIN_SUPPORT {
        return None;
    }
    let all: Vec<&TrialFacts> = failed.iter().chain(ran).copied().collect();
    let n = all.len();
    let is_failed = Bits::new(n, |i| i < failed.len());
    let is_ran = Bits::new(n, |i| i >= failed.len());
    let candidates = conditions(failed, &all, varied);
    let sets: Vec<Bits> =
        candidates.iter().map(|c| Bits::new(n, |i| holds(c, &all[i].settings))).collect();
    // Conditions that keep at least one failure and drop at least one run.
    let useful: Vec<usize> = (0..candidates.len())
        .filter(|&k| {
            sets[k].count_in(&is_failed) >= MIN_SUPPORT && sets[k].count_in(&is_ran) < ran.len()
        })
        .collect();
    // The best rules found, all as good: the most failures, then the
    // fewest conditions.
    let mut best: Vec<(usize, Vec<usize>)> = Vec::new();
    let mut consider = |picked: Vec<usize>, inside: &Bits| {
        if inside.count_in(&is_ran) > 0 {
            return;
        }
        let covered = inside.count_in(&is_failed);
        if covered < MIN_SUPPORT {
            return;
        }
        match best.first() {
            Some((c, p)) if covered < *c || (covered == *c && picked.len() > p.len()) => {}
            Some((c, p)) if covered == *c && picked.len() == p.len() => {
                best.push((covered, picked))
            }
            _ => best = vec![(covered, picked)],
        }
    };
    for (x, &a) in useful.iter().enumerate() {
        consider(vec![a], &sets[a]);
        if MAX_CONDITIONS < 2 {
            continue;
        }
        for (y, &b) in useful.iter().enumerate().skip(x + 1) {
            let ab = sets[a].and(&sets[b]);
            if ab.count_in(&is_failed) < MIN_SUPPORT {
                continue;
            }
            consider(vec![a, b], &ab);
            for &c in useful.iter().skip(y + 1) {
                consider(vec![a, b, c], &ab.and(&sets[c]));
            }
        }
    }
    let built: Vec<Rule> = best
        .into_iter()
        .map(|(covered, picked)| {
            let conditions: Vec<Condition> =
                picked.into_iter().map(|k| candidates[k].clone()).collect();
            finish(conditions, covered, failed, &all, varied)
        })
        .collect();
    // Rules over the same settings differ only in where between two tried
    // values a threshold lies: the first stands for them. Rules over other
    // settings are another explanation.
    let mut distinct: Vec<Rule> = Vec::new();
    for r in built {
        let names =
            |r: &Rule| r.conditions.iter().map(|c| c.setting.clone()).collect::<BTreeSet<_>>();
        if !distinct.iter().any(|d| names(d) == names(&r)) {
            distinct.push(r);
        }
    }
    match distinct.len() {
        0 => None,
        1 => distinct.pop().map(Ok),
        _ => {
            distinct.truncate(MAX_UNDECIDED);
            Some(Err(distinct))
        }
    }
}

/// At most this many equally good rules are named when the trials cannot
/// choose between them.
const MAX_UNDECIDED: usize = 4;

/// A rule of `conditions` holding `covered` of the `failed` (`all` is
/// `failed` and then the trials that ran), with what every failure inside
/// shared that no trial inside changed: one value, or for a number a side
/// of the trials' range the failures never left (all had `ubatch_size ≥
/// 512` though smaller ones ran elsewhere), so the rule may need it too.
fn finish(
    mut conditions: Vec<Condition>,
    covered: usize,
    failed: &[&TrialFacts],
    all: &[&TrialFacts],
    varied: &[String],
) -> Rule {
    conditions.sort();
    let inside: Vec<&TrialFacts> = failed
        .iter()
        .filter(|t| conditions.iter().all(|c| holds(c, &t.settings)))
        .copied()
        .collect();
    let mut also = Vec::new();
    for s in varied.iter().filter(|s| !conditions.iter().any(|c| &c.setting == *s)) {
        let values: BTreeSet<String> = inside.iter().map(|t| value_of(&t.settings, s)).collect();
        let condition = |op, value: &str| Condition { setting: s.clone(), op, value: value.into() };
        if values.len() == 1 {
            also.push(condition(Op::Is, values.first().map_or("", |v| v.as_str())));
            continue;
        }
        let number = |v: &str| v.parse::<f64>().ok();
        let Some(inside_numbers) = values.iter().map(|v| number(v)).collect::<Option<Vec<_>>>()
        else {
            continue;
        };
        let lo = inside_numbers.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = inside_numbers.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let tried: Vec<f64> =
            all.iter().filter_map(|t| number(&value_of(&t.settings, s))).collect();
        let spelled = |x: f64| values.iter().find(|v| number(v) == Some(x)).cloned();
        if tried.iter().any(|x| *x < lo)
            && let Some(v) = spelled(lo)
        {
            also.push(condition(Op::AtLeast, &v));
        }
        if tried.iter().any(|x| *x > hi)
            && let Some(v) = spelled(hi)
        {
            also.push(condition(Op::AtMost, &v));
        }
    }
    let ran = all.len() - failed.len();
    Rule { conditions, also, failed: covered, of: failed.len(), ran }
}

/// Thresholds a numeric setting gets besides the failures' own ends: the
/// rest spread over its values, so that a study that sampled a thousand
/// distinct values costs no more than one that tried twenty.
const MAX_THRESHOLDS: usize = 16;
/// Words beyond this many distinct values are judged only by those the
/// failures had.
const MAX_WORDS: usize = 32;

/// The conditions the trials' values suggest (`failed` first in `all`).
fn conditions(failed: &[&TrialFacts], all: &[&TrialFacts], varied: &[String]) -> Vec<Condition> {
    let mut out = Vec::new();
    for setting in varied {
        let of = |ts: &[&TrialFacts]| -> BTreeSet<String> {
            ts.iter().map(|t| value_of(&t.settings, setting)).collect()
        };
        let values = of(all);
        if values.len() < 2 {
            continue;
        }
        let numbers: Option<Vec<f64>> = values.iter().map(|v| v.parse::<f64>().ok()).collect();
        let push = |out: &mut Vec<Condition>, op: Op, value: &str| {
            out.push(Condition { setting: setting.clone(), op, value: value.to_string() });
        };
        match numbers {
            Some(mut xs) => {
                xs.sort_by(f64::total_cmp);
                let failing: Vec<f64> = of(failed).iter().filter_map(|v| v.parse().ok()).collect();
                let (lo, hi) = failing
                    .iter()
                    .fold((f64::MAX, f64::MIN), |(lo, hi), x| (lo.min(*x), hi.max(*x)));
                let mut cuts: Vec<f64> = (0..MAX_THRESHOLDS.min(xs.len()))
                    .map(|k| xs[k * (xs.len() - 1) / (MAX_THRESHOLDS.min(xs.len()) - 1).max(1)])
                    .chain([lo, hi].into_iter().filter(|_| !failing.is_empty()))
                    .collect();
                cuts.sort_by(f64::total_cmp);
                cuts.dedup();
                // Each cut as the trials spelled it.
                let spelled = |x: f64| {
                    values
                        .iter()
                        .find(|v| v.parse::<f64>().ok() == Some(x))
                        .cloned()
                        .unwrap_or_default()
                };
                for x in cuts {
                    let v = spelled(x);
                    push(&mut out, Op::AtLeast, &v);
                    push(&mut out, Op::AtMost, &v);
                }
            }
            None => {
                let words = if values.len() > MAX_WORDS { of(failed) } else { values.clone() };
                for v in &words {
                    push(&mut out, Op::Is, v);
                    if values.len() > 2 {
                        push(&mut out, Op::IsNot, v);
                    }
                }
            }
        }
    }
    out
}

/// Whether a configuration meets a condition.
pub fn holds(c: &Condition, settings: &engine_bridge::Settings) -> bool {
    let v = value_of(settings, &c.setting);
    let number = |s: &str| s.parse::<f64>().ok();
    match c.op {
        Op::Is => v == c.value,
        Op::IsNot => v != c.value,
        Op::AtLeast => matches!((number(&v), number(&c.value)), (Some(a), Some(b)) if a >= b),
        Op::AtMost => matches!((number(&v), number(&c.value)), (Some(a), Some(b)) if a <= b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trial(id: i64, settings: &[(&str, &str)]) -> TrialFacts {
        TrialFacts {
            id,
            settings: settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn a_failure_that_needs_three_settings_is_stated_with_all_three() {
        let mut failed = Vec::new();
        let mut ran = Vec::new();
        let mut id = 0;
        for fa in ["on", "off"] {
            for k in ["f16", "q8_0"] {
                for ctx in ["4096", "16384", "32768", "65536"] {
                    for threads in ["2", "4"] {
                        id += 1;
                        let t = trial(
                            id,
                            &[
                                ("flash_attn", fa),
                                ("cache_type_k", k),
                                ("ctx_size", ctx),
                                ("threads", threads),
                            ],
                        );
                        let big: u32 = ctx.parse().unwrap();
                        if fa == "off" && k == "f16" && big >= 32768 {
                            failed.push(t);
                        } else {
                            ran.push(t);
                        }
                    }
                }
            }
        }
        let varied: Vec<String> =
            ["flash_attn", "cache_type_k", "ctx_size", "threads"].map(String::from).to_vec();
        let f: Vec<&TrialFacts> = failed.iter().collect();
        let r: Vec<&TrialFacts> = ran.iter().collect();
        let rule = rule(&f, &r, &varied).unwrap().unwrap();
        let c = |s: &str, op, v: &str| Condition { setting: s.into(), op, value: v.into() };
        assert_eq!(
            rule.conditions,
            [
                c("cache_type_k", Op::Is, "f16"),
                c("ctx_size", Op::AtLeast, "32768"),
                c("flash_attn", Op::Is, "off")
            ]
        );
        assert_eq!((rule.failed, rule.of, rule.ran), (4, 4, 28));
        assert_eq!(rule.also, [], "the failures ran with both thread counts");
        // Had the trials kept one thread count, the rule could need it.
        let two: Vec<&TrialFacts> =
            r.iter().copied().filter(|t| t.settings["threads"] == "2").collect();
        let failed_two: Vec<&TrialFacts> =
            f.iter().copied().filter(|t| t.settings["threads"] == "2").collect();
        let narrow = super::rule(&failed_two, &two, &varied).unwrap().unwrap();
        assert_eq!(narrow.also, [c("threads", Op::Is, "2")]);
    }

    #[test]
    fn a_side_of_a_range_the_failures_never_left_is_unconfirmed() {
        // Out of memory at a long context without flash attention; every
        // such trial had a micro-batch of 512 or more, though 128 ran at
        // short contexts: whether 128 fails there too is not known.
        let mut trials = Vec::new();
        for (k, (ctx, fa, ub)) in [
            ("65536", "off", "512"),
            ("65536", "off", "2048"),
            ("65536", "off", "1024"),
            ("65536", "on", "2048"),
            ("4096", "off", "128"),
            ("4096", "off", "2048"),
            ("65536", "on", "128"),
        ]
        .into_iter()
        .enumerate()
        {
            let settings = [("ctx_size", ctx), ("flash_attn", fa), ("ubatch_size", ub)];
            trials.push(trial(k as i64, &settings));
        }
        let (f, r): (Vec<&TrialFacts>, Vec<&TrialFacts>) = trials.iter().partition(|t| t.id < 3);
        let varied: Vec<String> =
            ["ctx_size", "flash_attn", "ubatch_size"].map(String::from).to_vec();
        let rule = rule(&f, &r, &varied).unwrap().unwrap();
        let c = |s: &str, op, v: &str| Condition { setting: s.into(), op, value: v.into() };
        assert_eq!(
            rule.conditions,
            [c("ctx_size", Op::AtLeast, "65536"), c("flash_attn", Op::Is, "off")]
        );
        assert_eq!(rule.also, [c("ubatch_size", Op::AtLeast, "512")]);
    }

    #[test]
    fn a_lone_failure_makes_no_rule() {
        let failed = [trial(1, &[("threads", "16")])];
        let ran = [trial(2, &[("threads", "4")]), trial(3, &[("threads", "8")])];
        let f: Vec<&TrialFacts> = failed.iter().collect();
        let r: Vec<&TrialFacts> = ran.iter().collect();
        assert_eq!(rule(&f, &r, &["threads".into()]), None);
    }

    #[test]
    fn failures_two_settings_explain_equally_are_left_undecided() {
        // Both failures had a long context with a large batch and a large
        // micro-batch; the runs tell neither apart from the other.
        let trials = [
            trial(1, &[("ctx_size", "65536"), ("batch_size", "1024"), ("ubatch_size", "1024")]),
            trial(2, &[("ctx_size", "65536"), ("batch_size", "1024"), ("ubatch_size", "512")]),
            trial(3, &[("ctx_size", "65536"), ("batch_size", "2048"), ("ubatch_size", "128")]),
            trial(4, &[("ctx_size", "4096"), ("batch_size", "1024"), ("ubatch_size", "1024")]),
            trial(5, &[("ctx_size", "4096"), ("batch_size", "2048"), ("ubatch_size", "512")]),
        ];
        let (f, r): (Vec<&TrialFacts>, Vec<&TrialFacts>) = trials.iter().partition(|t| t.id <= 2);
        let varied: Vec<String> =
            ["ctx_size", "batch_size", "ubatch_size"].map(String::from).to_vec();
        let Some(Err(undecided)) = rule(&f, &r, &varied) else { panic!("one rule named") };
        let settings: Vec<Vec<&str>> = undecided
            .iter()
            .map(|r| r.conditions.iter().map(|c| c.setting.as_str()).collect())
            .collect();
        assert!(settings.contains(&vec!["batch_size", "ctx_size"]), "{settings:?}");
        assert!(settings.contains(&vec!["ctx_size", "ubatch_size"]), "{settings:?}");
    }

    #[test]
    fn a_thousand_distinct_values_still_give_the_exact_boundary() {
        // Context sizes sampled finely: out of memory from 40,000 tokens.
        let trials: Vec<TrialFacts> = (0..1000)
            .map(|k| {
                let ctx = (1000 + 61 * k).to_string();
                let fa = if k % 2 == 0 { "on" } else { "off" };
                trial(k as i64, &[("ctx_size", &ctx), ("flash_attn", fa)])
            })
            .collect();
        let too_big = |t: &&TrialFacts| t.settings["ctx_size"].parse::<u32>().unwrap() >= 40_000;
        let f: Vec<&TrialFacts> = trials.iter().filter(too_big).collect();
        let r: Vec<&TrialFacts> = trials.iter().filter(|t| !too_big(t)).collect();
        let varied: Vec<String> = ["ctx_size", "flash_attn"].map(String::from).to_vec();
        let rule = rule(&f, &r, &varied).unwrap().unwrap();
        let first = f.iter().map(|t| t.settings["ctx_size"].parse::<u32>().unwrap()).min().unwrap();
        let c = Condition { setting: "ctx_size".into(), op: Op::AtLeast, value: first.to_string() };
        assert_eq!(rule.conditions, [c]);
        assert_eq!((rule.failed, rule.ran), (f.len(), r.len()));
    }
}
