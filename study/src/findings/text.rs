//! Findings as a reader gets them: one markdown paragraph each, numbers
//! with their intervals and the trials they rest on, and the sections of
//! a write-up.

use std::fmt::Write as _;

use engine_bridge::Settings;

use super::numbers::{
    change_size, interval_text, measure_text, num, ratio_text, small, value_text, within_text,
};
use super::rules::{Condition, Op};
use super::{Finding, Interval, Undetermined, WALL_PCT};
use crate::metric::{Goal, Measure, Metric, Scale};

fn trial_list(ids: &[i64]) -> String {
    let shown: Vec<String> = ids.iter().take(8).map(|i| i.to_string()).collect();
    let more = ids.len().saturating_sub(8);
    let rest = if more > 0 { format!(" and {more} more") } else { String::new() };
    format!("{}{rest}", shown.join(", "))
}

fn value_name(v: &str) -> &str {
    if v.is_empty() { "the engine's default" } else { v }
}

fn p_text(p: f64) -> String {
    if p < 0.0001 { "p < 0.0001".into() } else { format!("p = {p:.4}") }
}

pub(super) fn config_text(settings: &Settings) -> String {
    settings.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>().join(" ")
}

fn condition_text(c: &Condition) -> String {
    let op = match c.op {
        Op::Is => "=",
        Op::IsNot => "≠",
        Op::AtLeast => "≥",
        Op::AtMost => "≤",
    };
    format!("`{}` {op} {}", c.setting, value_name(&c.value))
}

/// "`a` = x instead of y", or for two: "`a` = x and `b` = z instead of y and w".
fn change_text(changes: &[super::Change]) -> String {
    let to: Vec<String> =
        changes.iter().map(|c| format!("`{}` = {}", c.setting, value_name(&c.value))).collect();
    let from: Vec<&str> = changes.iter().map(|c| value_name(&c.over)).collect();
    format!("{} instead of {}", to.join(" and "), from.join(" and "))
}

/// How far an interval reaches from "no change", on its scale.
fn reach(metric: Metric, i: &Interval) -> f64 {
    if metric.scale() == Scale::Ratio {
        i.lo.ln().abs().max(i.hi.ln().abs())
    } else {
        i.lo.abs().max(i.hi.abs())
    }
}

/// What a best on a divergence is best among: never the reference itself.
fn reference_note(measure: &Measure) -> &'static str {
    let against = measure.metric().is_some_and(Metric::against_reference);
    if against { " of those that differ from the reference" } else { "" }
}

pub(super) fn names(settings: &[String]) -> String {
    settings.iter().map(|s| format!("`{s}`")).collect::<Vec<_>>().join(", ")
}

impl Finding {
    /// One paragraph of markdown, numbers and trials cited.
    pub fn markdown(&self) -> String {
        let mut s = String::new();
        match self {
            Finding::Best { measure, goal, trial, value, settings } => {
                let _ = write!(
                    s,
                    "**Best {}** ({}{}): {} — trial {trial}, `{}`.",
                    measure.label(),
                    if *goal == Goal::Max { "highest" } else { "lowest" },
                    reference_note(measure),
                    measure_text(measure, *value),
                    config_text(settings)
                );
            }
            Finding::Boundary { setting, goal, held, again, failed } => {
                s.push_str(&super::boundary::markdown(setting, *goal, held, *again, failed));
            }
            Finding::Confirmed { settings, balanced, ratios, pairs, trials, held } => {
                let each: Vec<String> = ratios
                    .iter()
                    .map(|(m, r)| format!("{} {}", m.label(), ratio_text(r)))
                    .collect();
                let how = format!(
                    "run again {pairs} times interleaved with the baseline (A-B-A-B), against the baseline's, paired: {}",
                    each.join("; ")
                );
                let (what, short) = if *balanced {
                    (
                        "balanced pick",
                        "It is not both better on one objective beyond noise and worse on none",
                    )
                } else {
                    ("pick", "It is not better than the baseline beyond noise")
                };
                if *held {
                    let _ = write!(
                        s,
                        "**Confirmed {what}**: `{}`, {how}. It holds up. Trials: {}.",
                        config_text(settings),
                        trial_list(trials)
                    );
                } else {
                    let _ = write!(
                        s,
                        "**Not confirmed ({what})**: `{}`, {how}. {short}, so it is not named: the search's measurement of it was luck or drift. Trials: {}.",
                        config_text(settings),
                        trial_list(trials)
                    );
                }
            }
            Finding::Balanced { trial, values, settings, front } => {
                let values: Vec<String> = values
                    .iter()
                    .map(|(m, v)| format!("{} {}", m.label(), measure_text(m, *v)))
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
            Finding::Effect {
                setting,
                metric,
                base,
                levels,
                size_pct,
                p_value,
                peak,
                given,
                at,
                ..
            } => {
                let (best, worst) = (&levels[0], &levels[levels.len() - 1]);
                let against = |l: &super::Level| match &l.vs_base {
                    Some(i) if l.value != *base => format!(" ({})", interval_text(*metric, i)),
                    _ => " (the baseline's)".to_string(),
                };
                let apart = match metric.scale() {
                    Scale::Ratio => format!("{:.1}%", size_pct.abs()),
                    Scale::Rate => format!("{:.1} points", size_pct.abs()),
                    Scale::Difference => small(size_pct.abs()),
                };
                let held = at.as_ref().map_or(String::new(), |(partner, value)| {
                    format!("with `{partner}` = {}, ", value_name(value))
                });
                let _ = write!(
                    s,
                    "**`{setting}` changes {}**: {} is best{}, {} worst{}, {apart} apart (against the baseline's {}, {held}other settings held; {}, Holm-corrected).",
                    metric.label(),
                    value_name(&best.value),
                    against(best),
                    value_name(&worst.value),
                    against(worst),
                    value_name(base),
                    p_text(*p_value),
                );
                if *peak {
                    let _ = write!(
                        s,
                        " It peaks in between: both smaller and larger values of `{setting}` do worse."
                    );
                }
                let acts = match at {
                    Some((partner, _)) => format!(
                        " With `{partner}` at the baseline's value the change stays within the margin; it acts together with {}.",
                        names(given)
                    ),
                    None if !given.is_empty() => format!(
                        " This holds with {} at the baseline; it acts together with it.",
                        names(given)
                    ),
                    None => String::new(),
                };
                s.push_str(&acts);
                let _ = write!(s, " Trials: {}.", trial_list(&self.trials()));
            }
            Finding::NoEffect { setting, metric, margin, levels, given, unshown, .. } => {
                let within = within_text(*metric, *margin);
                // The value that comes closest to the margin speaks for all.
                let furthest = levels
                    .iter()
                    .filter_map(|l| Some((l, l.vs_base.as_ref()?)))
                    .max_by(|a, b| reach(*metric, a.1).total_cmp(&reach(*metric, b.1)));
                let closest = furthest.map_or(String::new(), |(l, i)| {
                    format!("; closest: {} {}", value_name(&l.value), interval_text(*metric, i))
                });
                let too = if given.is_empty() {
                    String::new()
                } else {
                    format!(", also with {} at each value tried", names(given))
                };
                let _ = write!(
                    s,
                    "**`{setting}` has no effect on {} beyond {within}**: every value's 90 % interval against the baseline's lies inside that (equivalence){too}{closest}. Trials: {}.",
                    metric.label(),
                    trial_list(&self.trials()),
                );
                if !unshown.is_empty() {
                    let at: Vec<String> =
                        unshown.iter().map(|(k, v)| format!("`{k}` = {}", value_name(v))).collect();
                    let _ = write!(
                        s,
                        " Not shown at {}: too few trials changed it there.",
                        at.join(", ")
                    );
                }
            }
            Finding::NotDetermined { setting, metric, reason } => match reason {
                Undetermined::Aliased { with } if !with.is_empty() => {
                    let _ = write!(
                        s,
                        "**`{setting}` on {}: not determined** — the trials changed it only together with {}, so their effects cannot be told apart. Trials that change one without the other would.",
                        metric.label(),
                        names(with)
                    );
                }
                Undetermined::Aliased { .. } => {
                    let _ = write!(
                        s,
                        "**`{setting}` on {}: not determined** — the trials' other settings account for every change of it.",
                        metric.label()
                    );
                }
                Undetermined::MoreTrials { about } => {
                    let more = match about {
                        Some(n) => format!("about {n} more trials like these would decide it"),
                        None => "many more trials would be needed to decide it".into(),
                    };
                    let _ = write!(
                        s,
                        "**`{setting}` on {}: not determined yet** — neither an effect nor its absence within the margin is shown; {more}.",
                        metric.label()
                    );
                }
                Undetermined::TooFew | Undetermined::Unreached => {
                    let _ = write!(
                        s,
                        "**`{setting}` on {}: not determined** — {}.",
                        metric.label(),
                        reason.text()
                    );
                }
                Undetermined::FewItems { items, chance } => {
                    let _ = write!(
                        s,
                        "**`{setting}` on {}: not determined** — it is counted over {items} items, and by chance alone two configurations differ by up to {:.0} points on so few: neither an effect nor its absence can be shown, however many trials run. A larger suite would decide it.",
                        metric.label(),
                        chance * 100.0
                    );
                }
            },
            Finding::Interaction { settings: (a, b), bases, metric, cells, p_value, .. } => {
                let mut ranked: Vec<&super::Cell> = cells.iter().collect();
                // The combinations furthest from what the two effects alone predict first.
                let off = |c: &super::Cell| {
                    if metric.scale() == Scale::Ratio {
                        (c.vs_base.est / c.additive).ln().abs()
                    } else {
                        (c.vs_base.est - c.additive).abs()
                    }
                };
                ranked.sort_by(|x, y| off(y).total_cmp(&off(x)));
                let shown: Vec<String> = ranked
                    .iter()
                    .take(4)
                    .map(|c| {
                        let alone = change_size(*metric, c.additive);
                        format!(
                            "`{a}` = {}, `{b}` = {}: {} (the two alone would give {alone})",
                            value_name(&c.values.0),
                            value_name(&c.values.1),
                            interval_text(*metric, &c.vs_base),
                        )
                    })
                    .collect();
                let _ = write!(
                    s,
                    "**`{a}` × `{b}` act together on {}**: the effect of one depends on the other ({}, Holm-corrected). Against the baseline ({} = {}, {} = {}), the other settings there: {}.",
                    metric.label(),
                    p_text(*p_value),
                    a,
                    value_name(&bases.0),
                    b,
                    value_name(&bases.1),
                    shown.join("; "),
                );
            }
            Finding::FreeWin { changes, gains, quality, trials } => {
                let gains: Vec<String> = gains
                    .iter()
                    .map(|g| {
                        format!(
                            "{} {} → {} ({:.1} % better; {})",
                            g.metric.label(),
                            value_text(g.metric, g.without),
                            value_text(g.metric, g.with),
                            g.pct,
                            interval_text(g.metric, &g.interval),
                        )
                    })
                    .collect();
                let quality: Vec<String> = quality
                    .iter()
                    .map(|(m, i)| format!("{} {}", m.label(), interval_text(*m, i)))
                    .collect();
                let _ = write!(
                    s,
                    "**Free win: {}**: {}; quality shown equivalent ({}). Trials: {}.",
                    change_text(changes),
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
            Finding::Failures { cause, trials, message, rule, undecided } => {
                let cause_text = cause.replace('_', " ");
                match rule {
                    Some(r) => {
                        let when: Vec<String> = r.conditions.iter().map(condition_text).collect();
                        let elsewhere = match r.of - r.failed {
                            0 => String::new(),
                            n => format!(" ({n} more failed so elsewhere)"),
                        };
                        let _ = write!(
                            s,
                            "**{cause_text} whenever {}**: the {} trials run there all failed so{elsewhere}; all {} trials that ran lie outside it.",
                            when.join(" and "),
                            r.failed,
                            r.ran,
                        );
                        if !r.also.is_empty() {
                            let also: Vec<String> = r.also.iter().map(condition_text).collect();
                            let _ = write!(
                                s,
                                " Every failure there also had {}, and no trial there tried otherwise: the rule may need that too.",
                                also.join(" and ")
                            );
                        }
                    }
                    None if !undecided.is_empty() => {
                        let each: Vec<String> = undecided
                            .iter()
                            .map(|r| {
                                r.conditions
                                    .iter()
                                    .map(condition_text)
                                    .collect::<Vec<_>>()
                                    .join(" and ")
                            })
                            .collect();
                        let _ = write!(
                            s,
                            "**{cause_text}: where is not determined** — {} trials failed so, and the trials that ran tell them apart equally well by {}: trials that hold one of these and not the others would decide which.",
                            trials.len(),
                            each.join(", or by ")
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
            Finding::Planned { metric, base, planned, ratios, trials } => {
                s.push_str(&super::against_plan::told(*metric, (*base, *planned), *ratios, trials));
            }
            Finding::Ceiling { trial, decode, ceiling, pct, movers } => {
                if *pct > 100.0 {
                    let _ = write!(
                        s,
                        "**The bandwidth ceiling does not fit this engine**: the fastest trial ({trial}) decodes {} tok/s, {pct:.0} % of the {} tok/s the measured memory bandwidth should allow for the bytes each token reads. The engine reads fewer bytes a token than the ceiling assumes (or the bandwidth was measured low), so the ceiling says nothing here.",
                        num(*decode),
                        num(*ceiling)
                    );
                } else if *pct >= WALL_PCT {
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
            Finding::Files { setting, base, base_trials, rows } => {
                let each: Vec<String> = rows
                    .iter()
                    .map(|r| {
                        let changes: Vec<String> = r
                            .changes
                            .iter()
                            .map(|(m, x, change)| match m.scale() {
                                Scale::Ratio => {
                                    format!("{} {}", m.label(), change_size(*m, *change))
                                }
                                _ => format!(
                                    "{} {} ({})",
                                    m.label(),
                                    value_text(*m, *x),
                                    change_size(*m, *change)
                                ),
                            })
                            .collect();
                        let trials = trial_list(&r.trials);
                        format!("`{}` (trials {trials}): {}", r.file, changes.join(", "))
                    })
                    .collect();
                let _ = write!(
                    s,
                    "**What each model file costs and saves**, against the baseline's `{base}` (trials {}), \
                     each at the baseline's other settings (medians of what ran): {}. Not a test: \
                     a file run once carries the machine's noise, and the effects of `{setting}` \
                     say what clears it.",
                    trial_list(base_trials),
                    each.join("; ")
                );
            }
            Finding::Noise { .. } => s.push_str(&super::spread::markdown(self)),
            Finding::AtPick { trial, balanced, metric, goal, margin, rows, .. } => {
                let text =
                    super::at_pick::markdown(*trial, *balanced, *metric, *goal, *margin, rows);
                s.push_str(&text);
            }
            Finding::Drift { metric, baseline, worst_pct, flagged } => {
                let runs: Vec<String> = baseline
                    .iter()
                    .map(|(id, v)| format!("{} (trial {id})", value_text(*metric, *v)))
                    .collect();
                if flagged.is_empty() {
                    let _ = write!(
                        s,
                        "**The baseline through the study**: it ran {} times, its {} at most {:.1} % from the first run, and no trial was flagged for drift: {}.",
                        baseline.len(),
                        metric.label(),
                        worst_pct.abs(),
                        runs.join(", ")
                    );
                } else {
                    let _ = write!(
                        s,
                        "**Drift during the study**: the baseline's {} moved by as much as {worst_pct:+.1} % between its runs ({}); the trials run meanwhile are flagged and may be off by as much: {}.",
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
