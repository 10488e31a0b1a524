//! A study as a user writes it ([`StudyDef`], from TOML or JSON), and as
//! it is checked against the engine's catalog ([`Study`]).

use std::collections::BTreeMap;

use engine_bridge::{ProbePlan, Settings};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::expr::BoundExpr;
use crate::metric::Scale;
pub use crate::metric::{Goal, Measure, Metric};
use crate::space::Space;

/// An objective or a bound, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct TargetDef {
    pub metric: String,
    /// `max` or `min`; the metric's natural direction when absent.
    #[serde(default)]
    pub goal: Option<Goal>,
    /// A lower bound (`"baseline - 1%"`, `"30"`).
    #[serde(default)]
    pub min: Option<String>,
    /// An upper bound (`"120 GiB"`).
    #[serde(default)]
    pub max: Option<String>,
}

/// When a study stops on its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Budget {
    /// Trials in all, the baseline and its re-runs included.
    pub max_trials: u32,
    /// Wall time, in minutes.
    pub max_minutes: Option<f64>,
    /// Stop after this many trials without an improvement of the first
    /// objective beyond `min_gain`.
    pub patience: Option<u32>,
    /// In the first objective's unit (`5` for +5 tok/s).
    pub min_gain: f64,
    /// Re-run the baseline every this many trials (10 unless set; 0 never):
    /// its runs measure the machine's noise between trials and its drift,
    /// which the findings take out (see `findings::noise`).
    pub rerun_baseline_every: Option<u32>,
    /// A re-run baseline further than this (percent, first objective) from
    /// the first flags drift.
    pub drift_pct: f64,
    /// Cut short the speed repeats and skip the slower probes (quality,
    /// context, depth, concurrency, perplexity) of a trial another trial
    /// beats by more than 20 % in decode and prefill while matching it on
    /// every other objective; with an objective only those later probes
    /// or memory measure, no trial is cut short (it might reach the front
    /// on that objective).
    pub skip_dominated: bool,
    /// Before the best configuration is named, it is run again this many
    /// times interleaved with the baseline (A-B-A-B…), out of the budget;
    /// 0 names it without (see [`crate::confirm`]). At least 3.
    pub confirm_pairs: u32,
    /// Trials the findings may spend, once the search is over, on what
    /// they could not yet tell: runs of the baseline interleaved with the
    /// baseline changed in the one setting a finding left open (see
    /// [`crate::settle`]). A fifth of `max_trials` unless set, where that
    /// is 30 or more; 0 never; at most half the budget.
    pub settle_trials: Option<u32>,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_trials: 30,
            max_minutes: None,
            patience: None,
            min_gain: 0.0,
            rerun_baseline_every: Some(10),
            drift_pct: 5.0,
            skip_dominated: true,
            confirm_pairs: 3,
            settle_trials: None,
        }
    }
}

/// The search strategies.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum StrategyKind {
    /// Every combination, like llama-bench's comma lists.
    Grid,
    Random,
    /// Each axis alone from the baseline, then perturbations of the best.
    TwoPhase,
    /// Multi-objective tree-structured Parzen estimator.
    Motpe,
    /// Bayesian models of every objective (a linear model of all settings
    /// and their pairs, and a Gaussian process with a length scale a
    /// setting) and of failure; the largest expected hypervolume gain per
    /// unit of cost. The default: on the planted search worlds it is the only
    /// strategy that beats random on every one (`scripts/bench-strategies.sh`).
    #[default]
    Bayes,
    /// Bisection of the first objective, a setting (`setting.ctx_size`),
    /// against the bounds: the largest (or smallest) value that holds.
    Bisect,
    /// Asks a language model, falling back to two-phase.
    Llm,
}

pub use engine_bridge::endpoints::Endpoint;

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct StrategyDef {
    pub kind: StrategyKind,
    pub seed: u64,
    /// For `llm`: the name of an endpoint of the server's configuration
    /// (`--endpoints`); without it the strategy falls back at once.
    pub endpoint: Option<String>,
}

/// A study as written in a file or sent by the browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StudyDef {
    pub name: String,
    /// The engine profile (server-side) and one of its models.
    pub profile: String,
    pub model: String,
    /// Setting name to domain (see [`Domain::from_json`]).
    #[serde(default)]
    pub space: BTreeMap<String, Json>,
    #[serde(default)]
    pub fixed: BTreeMap<String, Json>,
    /// The configuration everything is compared with; settings it leaves
    /// out take the fixed value, or the engine's default.
    #[serde(default)]
    pub baseline: BTreeMap<String, Json>,
    #[serde(default)]
    pub constraints: Vec<String>,
    #[serde(default)]
    pub objectives: Vec<TargetDef>,
    /// Bounds on metrics that are not optimized.
    #[serde(default)]
    pub bounds: Vec<TargetDef>,
    #[serde(default)]
    pub strategy: StrategyDef,
    #[serde(default)]
    pub budget: Budget,
    /// The probes each trial runs; speed alone when absent.
    #[serde(default)]
    pub probes: Option<ProbePlan>,
    /// Where the trials run: left out, on this server's own engine; else
    /// on workers (`tunebook worker`), by name, or `any` for every worker
    /// that has the profile. Workers of one class of machine share the
    /// work, a trial each at a time; each class is searched on its own,
    /// with its own baseline and budget, since speeds on different
    /// hardware do not compare.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub machines: Vec<String>,
    /// What the findings call "the same": the equivalence margins a "no
    /// effect" or a free win must be shown within.
    #[serde(default, skip_serializing_if = "is_default_margins")]
    pub margins: crate::margins::Margins,
    /// Take llama.cpp's own choice for this model and the memory free now
    /// (`llama-fit-params`) as the baseline, for what the baseline leaves
    /// unset: the configuration a tuned one has to beat. The server asks
    /// when the study is created and writes the answer into `baseline`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub fit_baseline: bool,
}

fn is_default_margins(m: &crate::margins::Margins) -> bool {
    *m == crate::margins::Margins::default()
}

/// Why a study's list of machines is wrong, if it is.
pub(crate) fn machines_error(machines: &[String]) -> Option<String> {
    let bad = machines.iter().find(|m| {
        m.is_empty() || !m.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
    });
    if let Some(m) = bad {
        return Some(format!(
            "machine `{m}`: a worker's name is letters, digits, `-`, `_` and `.`"
        ));
    }
    if machines.len() > 1 && machines.iter().any(|m| m == "any") {
        return Some("machines: `any` already means every worker; name no other".into());
    }
    let mut seen = std::collections::BTreeSet::new();
    machines
        .iter()
        .find(|m| !seen.insert(m.as_str()))
        .map(|m| format!("machine `{m}` is named twice"))
}

impl TargetDef {
    /// The target as written, its names and bounds read; whether a setting
    /// it names suits the study is [`StudyDef::check`]'s to say.
    pub fn read(&self) -> Result<Target, Vec<String>> {
        let mut errors = Vec::new();
        let Some(measure) = Measure::parse(&self.metric) else {
            let known: Vec<_> = Metric::ALL.iter().map(|m| m.name()).collect();
            return Err(vec![format!(
                "unknown metric `{}` (known: {}, or setting.NAME for a setting's value)",
                self.metric,
                known.join(", ")
            )]);
        };
        let mut bound = |b: &Option<String>| {
            b.as_ref().and_then(|text| {
                BoundExpr::parse(text)
                    .map_err(|e| errors.push(format!("bound on {}: {e}", self.metric)))
                    .ok()
            })
        };
        let (min, max) = (bound(&self.min), bound(&self.max));
        if !errors.is_empty() {
            return Err(errors);
        }
        Ok(Target { goal: self.goal.unwrap_or(measure.natural_goal()), measure, min, max })
    }
}

/// A checked objective or bound.
#[derive(Debug, Clone)]
pub struct Target {
    pub measure: Measure,
    pub goal: Goal,
    pub min: Option<BoundExpr>,
    pub max: Option<BoundExpr>,
}

impl Target {
    /// Whether `value` is within the bounds, given the baseline's value.
    pub fn within(&self, value: f64, baseline: Option<f64>) -> bool {
        let ok = |b: &Option<BoundExpr>, f: fn(f64, f64) -> bool| {
            b.as_ref().and_then(|b| b.value(baseline)).is_none_or(|limit| f(value, limit))
        };
        ok(&self.min, |v, l| v >= l) && ok(&self.max, |v, l| v <= l)
    }
}

/// A study that passed every check.
#[derive(Debug, Clone)]
pub struct Study {
    pub def: StudyDef,
    pub space: Space,
    pub baseline: Settings,
    pub objectives: Vec<Target>,
    pub bounds: Vec<Target>,
    pub probes: ProbePlan,
    /// The settings the engine takes with each request: changing only
    /// these keeps the running engine (no reload).
    pub request_time: std::collections::BTreeSet<String>,
}

/// Everything wrong with a study, one line each.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}", .0.join("; "))]
pub struct StudyError(pub Vec<String>);

impl StudyDef {
    pub fn from_toml(text: &str) -> Result<Self, StudyError> {
        toml::from_str(text).map_err(|e| StudyError(vec![e.message().to_string()]))
    }

    /// Reads a study written as JSON (text starting with `{`) or TOML.
    pub fn from_text(text: &str) -> Result<Self, StudyError> {
        if text.trim_start().starts_with('{') {
            serde_json::from_str(text)
                .map_err(|e| StudyError(vec![format!("the study is not valid JSON: {e}")]))
        } else {
            toml::from_str(text).map_err(|e| {
                let line = e.span().map(|s| text[..s.start].lines().count().max(1));
                let at = line.map_or(String::new(), |l| format!(" (line {l})"));
                StudyError(vec![format!("the study is not valid TOML{at}: {}", e.message())])
            })
        }
    }
}

/// One finished (or failed, or pruned) trial, as strategies see it.
#[derive(Debug, Clone, PartialEq)]
pub struct Observation {
    pub config: Settings,
    /// The objectives' values in the study's order; `None` for a trial
    /// that failed or was pruned.
    pub values: Option<Vec<f64>>,
    /// Within every bound.
    pub feasible: bool,
    /// Why it failed, where the runner could tell: each kind of failure
    /// has its own model of where it happens.
    pub failure: Option<engine_bridge::FailureKind>,
    /// How far within each limit it measured, a limit a side of a
    /// target's bounds in [`Study::observe`]'s order (the objectives',
    /// then the bounds'): positive within, negative past it. `None` where
    /// the trial did not run, a bounded metric was not measured or a
    /// limit set relative to the baseline has no baseline to go by.
    pub slack: Option<Vec<f64>>,
}

impl Study {
    /// The model file `config` loads: the one it names (a study that
    /// varies `model`), else the study's own.
    pub fn model_of<'a>(&'a self, config: &'a Settings) -> &'a str {
        config.get(engine_bridge::catalog::MODEL_SETTING).map_or(&self.def.model, |m| m.trim())
    }

    /// Every value the study may give `setting`: its listed values where
    /// it varies it, its fixed value where it fixes it, its baseline's.
    pub fn values_of(&self, setting: &str) -> Vec<String> {
        let listed = self.space.params.iter().filter(|p| p.name == setting);
        let mut values: Vec<String> = listed
            .flat_map(|p| match &p.domain {
                crate::space::Domain::Values(v) => v.clone(),
                _ => vec![],
            })
            .chain(self.space.fixed.get(setting).cloned())
            .chain(self.baseline.get(setting).cloned())
            .collect();
        values.sort();
        values.dedup();
        values
    }

    /// The configurations tried so far (failed ones count: trying again
    /// would fail again).
    pub fn tried(history: &[Observation], config: &Settings) -> bool {
        history.iter().any(|o| &o.config == config)
    }

    /// The best feasible observation on the first objective.
    pub fn best<'a>(&self, history: &'a [Observation]) -> Option<&'a Observation> {
        let goal = self.objectives.first()?.goal;
        history
            .iter()
            .filter(|o| o.feasible)
            .filter_map(|o| Some((o, goal.oriented(*o.values.as_ref()?.first()?))))
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .map(|(o, _)| o)
    }

    /// The objectives that read a metric, with their goals: what findings
    /// and confirmations judge (a setting needs no re-measuring).
    /// Every objective: metrics and settings' own values.
    pub fn measures(&self) -> Vec<(Measure, Goal)> {
        self.objectives.iter().map(|o| (o.measure.clone(), o.goal)).collect()
    }

    pub fn metric_objectives(&self) -> Vec<(Metric, Goal)> {
        self.objectives.iter().filter_map(|o| Some((o.measure.metric()?, o.goal))).collect()
    }

    /// An observation from a trial's metrics: objective values in order,
    /// and whether every bound (objectives' and others') holds.
    pub fn observe(
        &self,
        config: Settings,
        metrics: Option<&BTreeMap<Metric, f64>>,
        baseline: Option<&BTreeMap<Metric, f64>>,
    ) -> Observation {
        let Some(metrics) = metrics else {
            let failure = None;
            return Observation { config, values: None, feasible: false, failure, slack: None };
        };
        let values: Option<Vec<f64>> =
            self.objectives.iter().map(|t| t.measure.value(metrics, &config)).collect();
        let feasible = self.objectives.iter().chain(&self.bounds).all(|t| {
            match t.measure.value(metrics, &config) {
                Some(v) => t.within(v, baseline.and_then(|b| t.measure.value(b, &self.baseline))),
                // A bounded metric the trial did not measure cannot be vouched for.
                None => t.min.is_none() && t.max.is_none(),
            }
        });
        let slack = self.slack(metrics, &config, baseline);
        let feasible = feasible && values.is_some();
        Observation { config, feasible, values, failure: None, slack }
    }

    /// [`Observation::slack`]: for a metric compared by ratio (sizes,
    /// speeds, times), the difference as a share of the limit; for
    /// others, the difference. Not the log of their ratio, as objectives
    /// are modelled: memory adds up in bytes over the layers, the caches
    /// and the buffers, and over the same 15 searches of the `bounded`
    /// world a slack on the log scale took 22 trials to this one's 18.
    fn slack(
        &self,
        metrics: &BTreeMap<Metric, f64>,
        config: &Settings,
        baseline: Option<&BTreeMap<Metric, f64>>,
    ) -> Option<Vec<f64>> {
        let mut out = Vec::new();
        for t in self.objectives.iter().chain(&self.bounds) {
            if t.min.is_none() && t.max.is_none() {
                continue;
            }
            let v = t.measure.value(metrics, config)?;
            let base = baseline.and_then(|b| t.measure.value(b, &self.baseline));
            let ratio = t.measure.metric().is_none_or(|m| m.scale() == Scale::Ratio);
            for (limit, above) in [(&t.min, true), (&t.max, false)] {
                let Some(limit) = limit else { continue };
                let l = limit.value(base)?;
                let gap = if ratio && v > 0.0 && l > 0.0 { (v - l) / l } else { v - l };
                // A value no model can fit (an overflow) is not told.
                if !gap.is_finite() {
                    return None;
                }
                out.push(if above { gap } else { -gap });
            }
        }
        Some(out)
    }
}

#[cfg(test)]
#[path = "study_tests.rs"]
mod tests;
