//! A study as a user writes it ([`StudyDef`], from TOML or JSON), and as
//! it is checked against the engine's catalog ([`Study`]).

use std::collections::BTreeMap;

use engine_bridge::{Catalog, ProbePlan, Settings};
use serde::{Deserialize, Serialize};
use serde_json::Value as Json;

use crate::expr::{BoundExpr, Constraint};
pub use crate::metric::{Goal, Measure, Metric};
use crate::space::{Domain, Param, Space, scalar_text};

/// An objective or a bound, as written.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    /// Re-run the baseline every this many trials, to catch drift.
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
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            max_trials: 30,
            max_minutes: None,
            patience: None,
            min_gain: 0.0,
            rerun_baseline_every: None,
            drift_pct: 5.0,
            skip_dominated: true,
            confirm_pairs: 3,
        }
    }
}

/// The search strategies.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
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

#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StrategyDef {
    pub kind: StrategyKind,
    pub seed: u64,
    /// For `llm`: the name of an endpoint of the server's configuration
    /// (`--endpoints`); without it the strategy falls back at once.
    pub endpoint: Option<String>,
}

/// A study as written in a file or sent by the browser.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
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
    pub margins: crate::findings::Margins,
}

fn is_default_margins(m: &crate::findings::Margins) -> bool {
    *m == crate::findings::Margins::default()
}

/// Why a study's list of machines is wrong, if it is.
fn machines_error(machines: &[String]) -> Option<String> {
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

    /// Checks everything against the engine's catalog and the profile's
    /// models; every problem is reported, and nothing is half-accepted.
    pub fn check(&self, catalog: &Catalog, models: &[String]) -> Result<Study, StudyError> {
        // Sizes first: nothing is built from a study past a bound.
        let over = crate::limits::check(self);
        if !over.is_empty() {
            return Err(StudyError(over));
        }
        let mut errors = Vec::new();
        if self.name.trim().is_empty() {
            errors.push("the study needs a name".to_string());
        }
        errors.extend(machines_error(&self.machines));
        errors.extend(self.margins.error());
        if !models.iter().any(|m| m == &self.model) {
            errors.push(format!(
                "model `{}` is not in profile `{}` (it has {})",
                self.model,
                self.profile,
                models.join(", ")
            ));
        }
        let check_value = |name: &str, value: &str, errors: &mut Vec<String>| {
            let one: Settings = [(name.to_string(), value.to_string())].into();
            if let Err(e) = catalog.render(&one) {
                errors.push(e.to_string());
                return false;
            }
            true
        };
        let mut params = Vec::new();
        for (name, raw) in &self.space {
            match Domain::from_json(raw) {
                Err(e) => errors.push(format!("setting `{name}`: {e}")),
                Ok(domain) => {
                    // The ends (and every listed value) must be values the
                    // engine takes; the ends are worked out, not listed.
                    let ends = domain.ends();
                    let probes: Vec<&String> = match &domain {
                        Domain::Values(v) => v.iter().collect(),
                        _ => vec![&ends.0, &ends.1],
                    };
                    if probes.into_iter().all(|v| check_value(name, v, &mut errors)) {
                        params.push(Param { name: name.clone(), domain });
                    }
                }
            }
        }
        let texts = |map: &BTreeMap<String, Json>, what: &str, errors: &mut Vec<String>| {
            let mut out = Settings::new();
            for (name, raw) in map {
                match scalar_text(raw) {
                    Ok(v) if check_value(name, &v, errors) => {
                        out.insert(name.clone(), v);
                    }
                    Ok(_) => {}
                    Err(e) => errors.push(format!("{what} `{name}`: {e}")),
                }
            }
            out
        };
        // Request-time settings last, so they change fastest in grid order
        // and the running engine is reused between neighbouring trials.
        params.sort_by_key(|p| {
            catalog
                .get(&p.name)
                .is_some_and(|c| c.phase == engine_bridge::catalog::Phase::RequestTime)
        });
        let fixed = texts(&self.fixed, "fixed setting", &mut errors);
        let baseline_given = texts(&self.baseline, "baseline setting", &mut errors);
        for name in fixed.keys().filter(|n| self.space.contains_key(*n)) {
            errors.push(format!("`{name}` is both varied and fixed"));
        }
        if params.is_empty() && self.space.is_empty() {
            errors.push("the search space is empty: vary at least one setting".into());
        }
        let mut constraints = Vec::new();
        for text in &self.constraints {
            match Constraint::parse(text) {
                Err(e) => errors.push(e.to_string()),
                Ok(c) => {
                    for name in c.settings() {
                        if !self.space.contains_key(&name) && !fixed.contains_key(&name) {
                            errors.push(format!(
                                "constraint `{text}` names `{name}`, which the study neither varies nor fixes"
                            ));
                        }
                    }
                    constraints.push(c);
                }
            }
        }
        let targets = |defs: &[TargetDef], errors: &mut Vec<String>| {
            defs.iter()
                .filter_map(|t| {
                    let target = t.read().map_err(|e| errors.extend(e)).ok()?;
                    if let Measure::Setting(name) = &target.measure
                        && let Some(why) = numeric_setting(name, &params, &fixed)
                    {
                        errors.push(format!("metric `{}`: {why}", t.metric));
                        return None;
                    }
                    Some(target)
                })
                .collect::<Vec<_>>()
        };
        let objectives = targets(&self.objectives, &mut errors);
        let bounds = targets(&self.bounds, &mut errors);
        if self.objectives.is_empty() {
            errors
                .push("no objective: say what better means (e.g. metric = \"decode_tps\")".into());
        }
        if self.budget.max_trials == 0 {
            errors.push("the budget allows no trial (max_trials = 0)".into());
        }
        if self.strategy.kind == StrategyKind::Bisect
            && !objectives.first().is_some_and(|t| match &t.measure {
                Measure::Setting(name) => params.iter().any(|p| &p.name == name),
                Measure::Metric(_) => false,
            })
        {
            errors.push(
                "strategy `bisect` needs the first objective to be a setting the study varies \
                 (metric = \"setting.ctx_size\")"
                    .into(),
            );
        }
        if self.strategy.kind == StrategyKind::Llm && self.strategy.endpoint.is_none() {
            tracing::info!("llm strategy without an endpoint: it will search two-phase");
        }
        let mut space = Space { params, fixed: fixed.clone(), constraints };
        let mut baseline = fixed;
        baseline.extend(baseline_given);
        if errors.is_empty() {
            // The baseline is the reference, so a bound on a setting may
            // exclude it; the search keeps within the bound.
            if let Some(why) = space.broken(&baseline) {
                errors.push(format!("the baseline {why}"));
            }
            for t in objectives.iter().chain(&bounds) {
                match setting_constraints(t, &baseline) {
                    Ok(list) => space.constraints.extend(list),
                    Err(e) => errors.push(e),
                }
            }
            if let Err(e) = satisfiable(&space) {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            return Err(StudyError(errors));
        }
        let probes = self.probes.clone().unwrap_or_else(|| ProbePlan {
            speed: Some(Default::default()),
            ..ProbePlan::default()
        });
        let request_time = space
            .params
            .iter()
            .map(|p| (p.name.clone(), p.domain.ends().0))
            .chain(space.fixed.clone())
            .filter(|(name, value)| {
                catalog.load_time(&[(name.clone(), value.clone())].into()).is_empty()
            })
            .map(|(name, _)| name)
            .collect();
        Ok(Study { def: self.clone(), space, baseline, objectives, bounds, probes, request_time })
    }
}

/// Why `name` cannot be an objective or a bound, if it cannot: the study
/// must vary or fix it, at numbers.
fn numeric_setting(name: &str, params: &[Param], fixed: &Settings) -> Option<String> {
    let number = |v: &String| v.trim().parse::<f64>().is_ok_and(f64::is_finite);
    match (params.iter().find(|p| p.name == name), fixed.get(name)) {
        (Some(p), _) => match &p.domain {
            Domain::Values(values) => (!values.iter().all(number))
                .then(|| format!("setting `{name}` takes values that are not numbers")),
            Domain::Int { .. } | Domain::Float { .. } => None,
        },
        (None, Some(v)) => {
            (!number(v)).then(|| format!("setting `{name}` is fixed at `{v}`, not a number"))
        }
        (None, None) => Some(format!("the study neither varies nor fixes `{name}`")),
    }
}

/// A bound on a setting as the constraints it means (`ctx_size >= 32768`),
/// so that no trial is spent on a configuration known to break it; a
/// bound relative to the baseline is read against the baseline's value.
fn setting_constraints(t: &Target, baseline: &Settings) -> Result<Vec<Constraint>, String> {
    let Measure::Setting(name) = &t.measure else { return Ok(Vec::new()) };
    let base = baseline.get(name).and_then(|v| v.trim().parse::<f64>().ok());
    let mut out = Vec::new();
    for (bound, op) in [(&t.min, ">="), (&t.max, "<=")] {
        let Some(bound) = bound else { continue };
        let Some(limit) = bound.value(base).filter(|l| l.is_finite()) else {
            return Err(format!(
                "bound `{}` on setting.{name}: the baseline gives `{name}` no number",
                bound.text
            ));
        };
        let text = format!("{name} {op} {limit}");
        out.push(Constraint::parse(&text).map_err(|e| e.to_string())?);
    }
    Ok(out)
}

/// Finds one configuration that satisfies every constraint: the whole grid
/// when it is small, else many random draws.
fn satisfiable(space: &Space) -> Result<(), String> {
    if space.constraints.is_empty() {
        return Ok(());
    }
    const LIMIT: u128 = 20_000;
    if space.grid_size() <= LIMIT {
        if space.grid().any(|c| space.allows(&c)) {
            return Ok(());
        }
        return Err(format!(
            "no configuration satisfies the constraints (all {} were checked)",
            space.grid_size()
        ));
    }
    let mut rng = rand::rng();
    if (0..LIMIT).any(|_| space.allows(&space.sample(&mut rng))) {
        return Ok(());
    }
    Err(format!("no configuration satisfies the constraints ({LIMIT} random draws were checked)"))
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
}

impl Study {
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
            return Observation { config, values: None, feasible: false };
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
        Observation { config, feasible: feasible && values.is_some(), values }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) const SEEDS: &str = r#"
name = "K/V cache types"
profile = "demo"
model = "tiny"
constraints = ['flash_attn == "on" when cache_type_v != "f16"']

[space]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
flash_attn = ["on", "off"]
ctx_size = { min = 2048, max = 16384, log = true }

[fixed]
threads = 2

[baseline]
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = "off"
ctx_size = 4096

[[objectives]]
metric = "decode_tps"

[[objectives]]
metric = "peak_rss_bytes"
max = "120 GiB"

[[bounds]]
metric = "quality_score"
min = "baseline - 1%"
"#;

    fn check(text: &str) -> Result<Study, StudyError> {
        StudyDef::from_toml(text)?.check(&Catalog::llama_server(), &["tiny".to_string()])
    }

    #[test]
    fn margins_are_checked_and_kept() {
        let text = SEEDS
            .replace("[space]\n", "margins = { speed_pct = 5, quality_rate = 0.01 }\n[space]\n");
        let study = check(&text).unwrap();
        assert_eq!(study.def.margins.speed_pct, 5.0);
        assert_eq!(study.def.margins.memory_pct, 3.0, "the rest keep their defaults");
        let bad = SEEDS.replace("[space]\n", "margins = { speed_pct = 0 }\n[space]\n");
        let e = check(&bad).unwrap_err().to_string();
        assert!(e.contains("margins.speed_pct: 0 is not between 0 and 50 percent"), "{e}");
        let unknown = SEEDS.replace("[space]\n", "margins = { speed = 5 }\n[space]\n");
        assert!(StudyDef::from_toml(&unknown).is_err());
    }

    #[test]
    fn a_study_from_the_seeds() {
        let study = check(SEEDS).unwrap();
        assert_eq!(study.space.params.len(), 4);
        assert_eq!(study.space.grid_size(), 3 * 3 * 2 * 4);
        assert_eq!(study.baseline["threads"], "2");
        assert_eq!(study.objectives[1].goal, Goal::Min);
        assert_eq!(study.def.strategy.kind, StrategyKind::Bayes, "the default");
        assert!(study.probes.speed.is_some() && study.probes.quality.is_none());
    }

    #[test]
    fn request_time_settings_change_fastest_in_the_grid() {
        let text = SEEDS.replace("[space]\n", "[space]\ntop_k = [1, 40]\n");
        let study = check(&text).unwrap();
        let names: Vec<&str> = study.space.params.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names.last(), Some(&"top_k"), "{names:?}");
        let grid: Vec<Settings> = study.space.grid().take(2).collect();
        assert_eq!(grid[0]["top_k"], "1");
        assert_eq!(grid[1]["top_k"], "40");
        let catalog = Catalog::llama_server();
        assert_eq!(catalog.load_time(&grid[0]), catalog.load_time(&grid[1]));
    }

    #[test]
    fn every_problem_is_named() {
        let bad = SEEDS
            .replace(r#"cache_type_k = ["f16", "q8_0", "q4_0"]"#, "cache_type_k = []")
            .replace("threads = 2", "threads = 2\nctx_size = 1\nbogus = 1")
            .replace(r#"metric = "decode_tps""#, r#"metric = "speed""#)
            .replace("flash_attn = [\"on\", \"off\"]", "flash_attn = [\"on\", \"sometimes\"]");
        let StudyError(errors) = check(&bad).unwrap_err();
        let all = errors.join("\n");
        for expected in [
            "setting `cache_type_k`: the list of values is empty",
            "unknown setting `bogus`",
            "`ctx_size` is both varied and fixed",
            "unknown metric `speed`",
            "`sometimes` is not one of",
        ] {
            assert!(all.contains(expected), "missing `{expected}` in:\n{all}");
        }
    }

    #[test]
    fn no_objective_and_unsatisfiable_constraints() {
        let none = SEEDS.split("[[objectives]]").next().unwrap();
        assert!(check(none).unwrap_err().to_string().contains("no objective"));
        let never = SEEDS.replace("constraints = [", "constraints = ['ctx_size < 1000', ");
        let e = check(&never).unwrap_err().to_string();
        assert!(e.contains("baseline breaks `ctx_size < 1000`"), "{e}");
        let never = never.replace("ctx_size = 4096", "ctx_size = 512");
        let e = check(&never).unwrap_err().to_string();
        assert!(e.contains("no configuration satisfies the constraints"), "{e}");
        let typo = SEEDS.replace("when cache_type_v", "when cache_typ_v");
        assert!(check(&typo).unwrap_err().to_string().contains("neither varies nor fixes"));
    }

    #[test]
    fn bounds_decide_feasibility() {
        let study = check(SEEDS).unwrap();
        let m = |tps: f64, q: f64| -> BTreeMap<Metric, f64> {
            [(Metric::DecodeTps, tps), (Metric::PeakRssBytes, 1e9), (Metric::QualityScore, q)]
                .into()
        };
        let base = m(10.0, 0.8);
        assert!(study.observe(Settings::new(), Some(&m(12.0, 0.795)), Some(&base)).feasible);
        let worse = study.observe(Settings::new(), Some(&m(12.0, 0.7)), Some(&base));
        assert!(!worse.feasible);
        assert_eq!(worse.values, Some(vec![12.0, 1e9]));
        assert!(!study.observe(Settings::new(), None, Some(&base)).feasible);
    }
}
