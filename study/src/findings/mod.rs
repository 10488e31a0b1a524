//! Findings: what a study's trials say, worked out deterministically from
//! them. Every finding cites its trials and numbers, and claims nothing the
//! data does not support, whatever design the strategy produced:
//!
//! - the best trial for each objective, and a balanced pick on the Pareto
//!   front when there are several objectives;
//! - per metric, a regression over every varied setting ([`analysis`]):
//!   an effect where a setting's test survives Holm's correction over the
//!   whole study, stated against the baseline with intervals; two
//!   settings that act together as a finding of their own; "no effect"
//!   only where an equivalence test puts it inside a stated margin; "not
//!   determined" otherwise, with why ([`verdicts`]);
//! - free wins: a value that gains speed or memory beyond noise while
//!   every quality measure is shown equivalent;
//! - anomalies: trials far off what the other trials predict for them;
//! - failures by cause, with the smallest rule over the settings that
//!   separates them from the trials that ran ([`rules`]);
//! - the decode ceiling, memory against the planner's prediction, and
//!   drift of the baseline between its runs.

mod against_plan;
mod analysis;
mod anomalies;
mod at_pick;
mod boundary;
mod cites;
pub mod confirmed;
mod design;
mod digest;
mod files;
mod free_wins;
mod noise;
mod numbers;
mod ols;
mod paired;
mod parts;
mod planned;
mod rules;
mod scales;
mod sections;
mod selection;
mod spread;
mod summary;
mod support;
mod text;
mod verdicts;

use std::collections::BTreeMap;
use tunebook_domain::Role;

use engine_bridge::Settings;
use serde::{Deserialize, Serialize};

pub use at_pick::{Alternative, PickRow, Versus};
pub use boundary::{boundary, mark_missed};
pub use digest::digest;
pub use files::FileRow;
pub use numbers::{num, value_text};
pub use paired::{MAX_ITEMS, parse_verdicts};
pub use parts::{Cell, Change, Gain, Interval, Level, Undetermined};
pub use planned::PlanFn;
pub use rules::{Condition, Op, Rule, holds};
pub use sections::{Pick, SECTIONS, markdown, section_markdown};
pub use summary::balanced_pick;

pub use crate::margins::Margins;
use crate::metric::{Goal, Measure, Metric};
use analysis::Analysis;

/// Family-wise chance of claiming an effect or an interaction where there
/// is none: a study's findings are acted on, so one in a hundred.
pub const ALPHA: f64 = 0.01;

/// The confidence of the intervals an equivalence must lie within: 90 %,
/// two one-sided tests at 5 % each.
pub const EQUIVALENCE: f64 = 0.90;

/// The confidence of the intervals findings state.
pub const INTERVAL: f64 = 0.95;

/// Decode at or above this share of the bandwidth ceiling is "at the wall".
pub const WALL_PCT: f64 = 80.0;

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
    pub role: Option<Role>,
    /// How far the baseline had drifted when this trial ran, where it had.
    pub drift_pct: Option<f64>,
    /// The bound it broke, when it ran but broke one (see
    /// [`mark_missed`]): such a trial is never named as a pick.
    pub missed: Option<String>,
    /// Each speed's value per measured request: the trial's value is their
    /// median, and their spread its noise (see [`noise`]).
    pub repeats: BTreeMap<Metric, Vec<f64>>,
    /// How many pass/fail items a share was counted over: questions of
    /// the quality suite, points of the recall probe.
    pub items: BTreeMap<Metric, u32>,
    /// Each item's verdict behind a share, in the suite's order (see
    /// [`paired`]).
    pub verdicts: BTreeMap<Metric, Vec<bool>>,
}

/// Something the data shows.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Finding {
    /// The best trial on an objective: a metric, or a setting's own value
    /// (the largest context among the trials that ran).
    Best {
        /// Named `metric`, as in study files (`setting.ctx_size` too).
        #[serde(rename = "metric")]
        measure: Measure,
        goal: Goal,
        trial: i64,
        value: f64,
        settings: Settings,
    },
    /// A bisection's answer: the most ambitious value of `setting` that
    /// held every bound in every run of it (trial, value), the trial that
    /// measured it again, and the nearest value beyond it that did not
    /// hold (trial, value, why).
    Boundary {
        setting: String,
        goal: Goal,
        held: Option<(i64, String)>,
        #[serde(default)]
        again: Option<i64>,
        failed: Option<(i64, String, String)>,
    },
    /// A pick run again interleaved with the baseline once the search was
    /// over: the paired ratio on each objective (95 % intervals), and
    /// whether it held up (see [`confirmed`]).
    Confirmed {
        settings: Settings,
        /// Confirmed as the balanced pick (else as the best).
        balanced: bool,
        /// Each objective's paired ratio, pick over baseline.
        ratios: Vec<(Metric, Interval)>,
        pairs: usize,
        trials: Vec<i64>,
        held: bool,
    },
    /// The Pareto-front trial closest to the best of every objective at once
    /// (each objective scaled over the front).
    Balanced { trial: i64, values: Vec<(Measure, f64)>, settings: Settings, front: Vec<i64> },
    /// A setting moves a metric beyond the noise: its values from best to
    /// worst against the baseline's; `peak`: a number whose best value lies
    /// between others, beating both ends; `given`: settings it acts with,
    /// held at the baseline for these numbers (or as `at` says).
    Effect {
        setting: String,
        metric: Metric,
        goal: Goal,
        base: String,
        /// Intervals are ratios (else differences).
        log: bool,
        levels: Vec<Level>,
        /// The best value over the worst, in percent (points for rates).
        size_pct: f64,
        /// Holm-adjusted.
        p_value: f64,
        peak: bool,
        given: Vec<String>,
        /// Where the values were compared when not at the baseline: a
        /// setting of `given` at another value, where the effect clears
        /// the margin while at the baseline's it does not (a K cache type
        /// saves little memory at a short context and much at a long one).
        #[serde(default)]
        at: Option<(String, String)>,
    },
    /// A setting whose every value is shown within the margin of the
    /// baseline's on a metric (90 % intervals, two one-sided tests).
    NoEffect {
        setting: String,
        metric: Metric,
        log: bool,
        /// Percent for ratios, a share for rates.
        margin: f64,
        levels: Vec<Level>,
        p_value: f64,
        /// Settings it acts with: the margin holds with them at each of
        /// their values too.
        #[serde(default)]
        given: Vec<String>,
        /// Values of other settings at which it was never changed: the
        /// claim does not reach there (`ctx_size` = 65536).
        #[serde(default)]
        unshown: Vec<(String, String)>,
    },
    /// A study that compares model files: each file against the
    /// baseline's, at the baseline's other settings (medians, see [`files`]).
    Files { setting: String, base: String, base_trials: Vec<i64>, rows: Vec<files::FileRow> },
    /// What the data cannot tell yet, and why.
    NotDetermined { setting: String, metric: Metric, reason: Undetermined },
    /// Two settings whose effects on a metric depend on each other.
    Interaction {
        settings: (String, String),
        bases: (String, String),
        metric: Metric,
        goal: Goal,
        log: bool,
        cells: Vec<Cell>,
        p_value: f64,
    },
    /// A change of one setting (or two that act together) that gains
    /// speed or saves memory over the baseline while every quality measure
    /// is shown equivalent.
    FreeWin {
        changes: Vec<Change>,
        gains: Vec<Gain>,
        /// Each quality measure against the baseline's, 90 % interval.
        quality: Vec<(Metric, Interval)>,
        trials: Vec<i64>,
    },
    /// A trial far from what the other trials predict for its settings.
    Anomaly { trial: i64, metric: Metric, value: f64, expected: f64, settings: Settings },
    /// Trials that failed the same way, and the rule that separates them
    /// from the trials that ran, where one does.
    /// `undecided`: where no rule is named, the equally good rules over
    /// other settings that the trials cannot choose between.
    Failures {
        cause: String,
        trials: Vec<i64>,
        message: String,
        rule: Option<Rule>,
        #[serde(default)]
        undecided: Vec<Rule>,
    },
    /// How close the fastest decode came to what memory bandwidth allows;
    /// `movers`: the settings that changed decode beyond noise.
    Ceiling { trial: i64, decode: f64, ceiling: f64, pct: f64, movers: Vec<String> },
    /// What each setting does at the pick (the balanced one, else the
    /// best): its other values against the pick's (see [`at_pick`]).
    AtPick {
        trial: i64,
        balanced: bool,
        settings: Settings,
        metric: Metric,
        goal: Goal,
        /// The equivalence margin: percent for ratios, else on the
        /// metric's own scale (as a "no effect" states it).
        margin: f64,
        rows: Vec<PickRow>,
    },
    /// How noisy the study's measurements of a metric were, in its terms
    /// (percent, points or nats, one standard deviation unless said): a
    /// trial's own requests (spread, trials that had them); the baseline's
    /// runs (how many, spread run to run); its drift over the study, taken
    /// out before effects were judged; the items a share rests on and the
    /// chance difference between two configurations (95 %); what one
    /// trial carries in all, the margin, and whether that is beyond it.
    Noise {
        metric: Metric,
        repeats: Option<(f64, usize)>,
        reruns: Option<(usize, f64)>,
        drift: Option<f64>,
        items: Option<(u32, f64)>,
        /// Whether the items were compared one by one between trials.
        #[serde(default)]
        paired: bool,
        trial: f64,
        margin: f64,
        too_noisy: bool,
        /// Trials left out of the metric's model: most of their requests
        /// were slowed (see `noise::slowed`).
        #[serde(default)]
        slowed: Vec<i64>,
    },
    /// A memory metric against the planner's prediction: the baseline's
    /// value (the model's) and what was planned for it, and measured ÷
    /// planned over the trials (lowest, median, highest). Its effects were
    /// modelled with the plan (see [`planned`]).
    Planned { metric: Metric, base: f64, planned: f64, ratios: (f64, f64, f64), trials: Vec<i64> },
    /// The baseline run again during the study: how far its first objective
    /// moved, and the trials flagged for it.
    Drift { metric: Metric, baseline: Vec<(i64, f64)>, worst_pct: f64, flagged: Vec<i64> },
}

/// Every finding of a study's trials with the default margins.
pub fn findings(
    trials: &[TrialFacts],
    varied: &[String],
    objectives: &[(Measure, Goal)],
) -> Vec<Finding> {
    findings_with(trials, varied, objectives, &Margins::default())
}

/// Every finding of a study's trials: `varied` are the settings the study
/// varies, `objectives` what it optimizes (metrics, and settings' own values,
/// which have a best and a place on the front but no effect to test),
/// `margins` what counts as the same.
pub fn findings_with(
    trials: &[TrialFacts],
    varied: &[String],
    measures: &[(Measure, Goal)],
    margins: &Margins,
) -> Vec<Finding> {
    findings_planned(trials, varied, measures, margins, None)
}

/// As [`findings_with`], with memory modelled against what `plan`, the
/// planner, predicts of each configuration (see [`planned`]).
pub fn findings_planned(
    trials: &[TrialFacts],
    varied: &[String],
    measures: &[(Measure, Goal)],
    margins: &Margins,
    plan: Option<&PlanFn>,
) -> Vec<Finding> {
    let objectives: Vec<(Metric, Goal)> =
        measures.iter().filter_map(|(m, g)| Some((m.metric()?, *g))).collect();
    let objectives = objectives.as_slice();
    let done: Vec<&TrialFacts> = trials.iter().filter(|t| t.done).collect();
    // The picks are the search's: a confirmation's re-runs are judged apart.
    let searched: Vec<&TrialFacts> =
        done.iter().copied().filter(|t| !confirmed::is_confirmation(t)).collect();
    // A trial that broke a bound is no pick, however fast.
    let eligible: Vec<&TrialFacts> =
        searched.iter().copied().filter(|t| t.missed.is_none()).collect();
    let mut out = Vec::new();
    for (measure, goal) in measures {
        // A divergence from the reference is no merit of the reference, nor
        // of a configuration whose output is the reference's to the digit.
        let yardstick = |t: &TrialFacts| {
            measure.metric().is_some_and(Metric::against_reference)
                && t.metrics.get(&Metric::KldMean) == Some(&0.0)
        };
        let best = eligible
            .iter()
            .filter(|t| !yardstick(t))
            .filter_map(|t| Some((*t, measure.value(&t.metrics, &t.settings)?)))
            .max_by(|a, b| goal.oriented(a.1).total_cmp(&goal.oriented(b.1)));
        if let Some((t, value)) = best {
            out.push(Finding::Best {
                measure: measure.clone(),
                goal: *goal,
                trial: t.id,
                value,
                settings: t.settings.clone(),
            });
        }
    }
    out.extend(summary::balanced(&eligible, measures));
    let metrics: Vec<Metric> = objectives.iter().map(|o| o.0).collect();
    let goals: Vec<Goal> = objectives.iter().map(|o| o.1).collect();
    for c in confirmed::confirmations(trials, &metrics) {
        let Some((ratios, held)) = c.verdict(&goals) else { continue };
        out.push(Finding::Confirmed {
            ratios: metrics.iter().copied().zip(ratios).collect(),
            balanced: c.balanced,
            pairs: c.pairs.len(),
            trials: c.pairs.iter().flat_map(|p| [p.pick, p.base]).collect(),
            settings: c.settings,
            held,
        });
    }
    let baseline = trials
        .iter()
        .find(|t| t.role == Some(Role::Baseline))
        .map(|t| t.settings.clone())
        .unwrap_or_default();
    out.extend(files::compare(&done, &baseline, engine_bridge::catalog::MODEL_SETTING));
    let analyses: Vec<Analysis> = scales::tested_metrics(&done, objectives)
        .into_iter()
        .filter(|(m, _)| scales::modelled(*m))
        .filter_map(|(m, g)| Analysis::fit(&done, varied, &baseline, (m, g), plan))
        .filter(|a| a.noise.claimable(a.metric))
        .collect();
    // How noisy each objective, and each share of few items, was heads
    // what was found of it.
    let noisy = analyses
        .iter()
        .filter(|a| objectives.iter().any(|(m, _)| *m == a.metric) || a.noise.items.is_some());
    let spreads: Vec<Finding> = noisy.filter_map(|a| spread::spread(a, margins)).collect();
    out.splice(0..0, spreads);
    let adjusted = verdicts::adjust(&analyses);
    let mut interactions = Vec::new();
    for (k, a) in analyses.iter().enumerate() {
        for i in 0..a.design.factors.len() {
            out.extend(verdicts::setting_findings(a, i, adjusted.mains[k][i], margins));
        }
        for (&(x, y, _), &p) in a.pairs.iter().zip(&adjusted.pairs[k]) {
            if p <= ALPHA && !a.ambiguous.contains(&(x, y)) {
                interactions.extend(verdicts::interaction(a, x, y, p, margins));
            }
        }
    }
    out.extend(interactions);
    out.extend(free_wins::free_wins(&analyses, &adjusted, margins));
    let at_pick = at_pick::at_pick(&analyses, &out, objectives, margins);
    out.extend(at_pick);
    for a in analyses.iter().filter(|a| objectives.iter().any(|(m, _)| *m == a.metric)) {
        out.extend(anomalies::anomalies(a));
    }
    out.extend(summary::failures(trials, varied));
    out.extend(summary::ceiling(&done, &out));
    out.extend(analyses.iter().filter_map(against_plan::against_plan));
    if let Some(&(metric, _)) = objectives.first() {
        out.extend(summary::drift(trials, metric));
    }
    out
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

#[cfg(test)]
mod tests;
