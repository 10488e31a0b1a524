//! A study checked against the engine's catalog and the profile's models:
//! every setting, bound, constraint, target and objective, with every
//! problem named, and nothing half-accepted.

use std::collections::BTreeMap;

use engine_bridge::{Catalog, ProbePlan, Settings};
use serde_json::Value as Json;

use crate::expr::Constraint;
pub use crate::metric::{Goal, Measure, Metric};
use crate::space::{Domain, Param, Space, scalar_text};

use crate::study::{StrategyKind, Study, StudyDef, StudyError, Target, TargetDef, machines_error};

impl StudyDef {
    /// Checks everything against the engine's catalog and the profile's
    /// models; every problem is reported, and nothing is half-accepted.
    pub fn check(&self, catalog: &Catalog, models: &[String]) -> Result<Study, StudyError> {
        // Sizes first: nothing is built from a study past a bound.
        let over = crate::within_limits::check(self);
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
            // Model files are the profile's, by name: an allowlist.
            if name == engine_bridge::catalog::MODEL_SETTING
                && catalog.get(name).is_some()
                && !models.iter().any(|m| m == value.trim())
            {
                errors.push(format!(
                    "setting `{name}`: `{value}` is not a model of profile `{}` (it has {})",
                    self.profile,
                    models.join(", ")
                ));
                return false;
            }
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
                Err(e) => {
                    // The commonest slip, told as such.
                    // (Sliced only at an `=`, one byte: any other character
                    // may be several, and a slice inside one panics.)
                    let lone_eq = text.char_indices().filter(|&(_, c)| c == '=').any(|(i, _)| {
                        let before = text[..i].chars().next_back();
                        let after = text[i + 1..].chars().next();
                        !matches!(before, Some('=' | '!' | '<' | '>')) && after != Some('=')
                    });
                    let hint = if lone_eq { " (to compare, write `==`, not `=`)" } else { "" };
                    errors.push(format!("{e}{hint}"));
                }
                Ok(c) => {
                    for name in c.settings() {
                        if !self.space.contains_key(&name) && !fixed.contains_key(&name) {
                            // A word the engine has no setting of is most
                            // likely a value left unquoted.
                            let hint = match catalog.get(&name) {
                                None if !name.starts_with("env.") => format!(
                                    " (no engine setting is called that: if it is a value, quote it: \"{name}\")"
                                ),
                                _ => String::new(),
                            };
                            errors.push(format!(
                                "constraint `{text}` names `{name}`, which the study neither varies nor fixes{hint}"
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
        // Metrics only one probe measures, which the study must then run.
        let plan = self.probes.as_ref();
        for t in objectives.iter().chain(&bounds) {
            let needs = match t.measure.metric() {
                Some(m) if m.against_reference() => {
                    plan.is_none_or(|p| p.kld.is_none()).then_some(("KL-divergence", "kld"))
                }
                Some(Metric::GoodputRps) => {
                    plan.is_none_or(|p| p.load.is_none()).then_some(("load", "load"))
                }
                _ => None,
            };
            if let Some((what, table)) = needs {
                errors.push(format!(
                    "metric `{}` is measured by the {what} probe: add [probes.{table}]",
                    t.measure.name()
                ));
            }
        }
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
        // A study that compares model files starts from its own model.
        let model = engine_bridge::catalog::MODEL_SETTING;
        if space.params.iter().any(|p| p.name == model) && !baseline.contains_key(model) {
            baseline.insert(model.to_string(), self.model.clone());
        }
        // Every trial is compared with the baseline: it must be a point of
        // the space, or no setting's effect could be measured from it.
        for p in &space.params {
            if let Some(value) = baseline.get(&p.name)
                && let Some(why) = outside(&p.domain, value)
            {
                errors.push(format!(
                    "the baseline's `{}` = `{value}` {why}: the baseline is what every trial is \
                     compared with, so it must be one of the values tried",
                    p.name
                ));
            }
        }
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
        // Speed, unless the study names probes without it, and every probe
        // its objectives and bounds need that it left out (their defaults):
        // a quality bound is never left unmeasured.
        let needed = |m: &[Metric]| {
            objectives
                .iter()
                .chain(&bounds)
                .any(|t| t.measure.metric().is_some_and(|x| m.contains(&x)))
        };
        let mut probes = self.probes.clone().unwrap_or_else(|| ProbePlan {
            speed: Some(Default::default()),
            ..ProbePlan::default()
        });
        let speeds = [Metric::DecodeTps, Metric::PrefillTps, Metric::TtftMs, Metric::PctOfCeiling];
        if probes.speed.is_none() && needed(&speeds) {
            probes.speed = Some(Default::default());
        }
        if probes.quality.is_none() && needed(&[Metric::QualityScore]) {
            probes.quality = Some(Default::default());
        }
        if probes.context.is_none() && needed(&[Metric::ContextPassRate, Metric::ContextTokens]) {
            probes.context = Some(Default::default());
        }
        if probes.perplexity.is_none() && needed(&[Metric::Perplexity]) {
            probes.perplexity = Some(Default::default());
        }
        // A study's KL divergence is measured from its own baseline.
        if let Some(kld) = &mut probes.kld {
            kld.reference = baseline.clone();
        }
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

/// Why `value` is not a value of `domain`, if it is not (on a range:
/// between its ends, whatever the step).
fn outside(domain: &Domain, value: &str) -> Option<String> {
    match domain {
        Domain::Values(v) if !v.iter().any(|x| x == value) => {
            Some(format!("is not among the values the study tries ({})", v.join(", ")))
        }
        Domain::Values(_) => None,
        Domain::Int { min, max, .. } => match value.trim().parse::<i64>() {
            Ok(v) if (*min..=*max).contains(&v) => None,
            _ => Some(format!("is outside the range {min}..{max}")),
        },
        Domain::Float { min, max, .. } => match value.trim().parse::<f64>() {
            Ok(v) if v >= *min - 1e-9 && v <= *max + 1e-9 => None,
            _ => Some(format!("is outside the range {min}..{max}")),
        },
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
