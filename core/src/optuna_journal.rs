//! A study as an Optuna journal: the file Optuna's `JournalStorage` (with
//! a `JournalFileBackend`) loads and optuna-dashboard opens. One JSON
//! object a line, each an operation Optuna replays: the study with its
//! objectives' directions, then each ended trial, created whole, with its
//! parameters (each with its distribution, from the study's space), its
//! objectives' values, its state (complete, failed, or pruned: never
//! run), and what Tunebook knows of it as user attributes (its trial id,
//! role, every metric it measured, how it failed).
//!
//! Trials still queued or running are left out: a journal's running trial
//! would stay running for Optuna. A trial that ran but lacks one of the
//! objectives' values is told as failed, with the reason: Optuna's
//! complete trials carry a value for every objective.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use time::OffsetDateTime;
use time::macros::format_description;
use tunebook_domain::TrialState;
use tunebook_study::space::Domain;
use tunebook_study::{Goal, Study};

use crate::trial::Trial;

/// The worker id every operation names: the journal's single writer.
const WRITER: &str = "tunebook-export";

/// Optuna's operation codes (`JournalOperation`).
const CREATE_STUDY: u8 = 0;
const CREATE_TRIAL: u8 = 4;

/// Optuna's trial states (`TrialState`) and study directions
/// (`StudyDirection`).
const COMPLETE: u8 = 1;
const PRUNED: u8 = 2;
const FAIL: u8 = 3;
const MINIMIZE: u8 = 1;
const MAXIMIZE: u8 = 2;

/// Longest failure message kept as a user attribute.
const MAX_ERROR: usize = 2000;

/// The journal of `study` (named `name`) with its `trials`; `finished`
/// gives each ended trial's end (ms since the epoch) where known.
pub fn journal(
    name: &str,
    study: &Study,
    trials: &[Trial],
    finished: &BTreeMap<i64, i64>,
) -> String {
    let directions: Vec<u8> = study
        .objectives
        .iter()
        .map(|t| if t.goal == Goal::Max { MAXIMIZE } else { MINIMIZE })
        .collect();
    let mut lines = vec![json!({
        "op_code": CREATE_STUDY,
        "worker_id": WRITER,
        "study_name": name,
        "directions": directions,
    })];
    let ended: Vec<&Trial> = trials.iter().filter(|t| t.state.is_final()).collect();
    let distributions = distributions(study, &ended);
    for t in ended {
        lines.push(trial_op(study, t, &distributions, finished.get(&t.id).copied()));
    }
    lines.iter().map(|l| format!("{l}\n")).collect()
}

/// A parameter's distribution as Optuna writes it, and how a value is
/// stored under it (Optuna's "internal representation").
#[derive(Debug, Clone, PartialEq)]
enum Dist {
    /// Choices by their text; a value is stored as its index.
    Choice(Vec<String>),
    Int {
        low: i64,
        high: i64,
        step: i64,
        log: bool,
    },
    Float {
        low: f64,
        high: f64,
        log: bool,
    },
}

impl Dist {
    fn to_json(&self) -> Value {
        match self {
            Dist::Choice(choices) => json!({
                "name": "CategoricalDistribution",
                "attributes": { "choices": typed(choices) },
            }),
            Dist::Int { low, high, step, log } => json!({
                "name": "IntDistribution",
                "attributes": { "log": log, "step": step, "low": low, "high": high },
            }),
            Dist::Float { low, high, log } => json!({
                "name": "FloatDistribution",
                "attributes": { "step": null, "low": low, "high": high, "log": log },
            }),
        }
    }

    /// `value` as stored under this distribution.
    fn internal(&self, value: &str) -> Option<Value> {
        match self {
            Dist::Choice(choices) => choices.iter().position(|c| c == value).map(|i| json!(i)),
            Dist::Int { .. } => value.trim().parse::<i64>().ok().map(|v| json!(v as f64)),
            Dist::Float { .. } => {
                value.trim().parse::<f64>().ok().filter(|v| v.is_finite()).map(|v| json!(v))
            }
        }
    }
}

/// Choices as Optuna shows them: numbers where every one is a whole
/// number (or every one a number), switches where every one is `true` or
/// `false`, else their text.
fn typed(choices: &[String]) -> Vec<Value> {
    let all = |f: &dyn Fn(&str) -> Option<Value>| -> Option<Vec<Value>> {
        choices.iter().map(|c| f(c.trim())).collect()
    };
    all(&|c| c.parse::<i64>().ok().map(Value::from))
        .or_else(|| all(&|c| c.parse::<f64>().ok().filter(|x| x.is_finite()).map(Value::from)))
        .or_else(|| all(&|c| c.parse::<bool>().ok().map(Value::from)))
        .unwrap_or_else(|| choices.iter().map(|c| Value::from(c.as_str())).collect())
}

/// Each varied setting's distribution: the study's domain, widened to
/// every value its trials ran (a baseline may sit outside the searched
/// range), and a list of choices where a value is not a number.
fn distributions(study: &Study, trials: &[&Trial]) -> BTreeMap<String, Dist> {
    let mut out = BTreeMap::new();
    for p in &study.space.params {
        let seen: Vec<&str> =
            trials.iter().filter_map(|t| t.settings.get(&p.name)).map(String::as_str).collect();
        let ints: Option<Vec<i64>> = seen.iter().map(|v| v.trim().parse().ok()).collect();
        let floats: Option<Vec<f64>> =
            seen.iter().map(|v| v.trim().parse().ok().filter(|x: &f64| x.is_finite())).collect();
        let dist = match (&p.domain, ints, floats) {
            (Domain::Int { min, max, step, log }, Some(ints), _) => {
                let low = ints.iter().copied().fold(*min, i64::min);
                let high = ints.iter().copied().fold(*max, i64::max);
                // A log range is its doublings: Optuna's log ranges step by one.
                let step = if *log { 1 } else { (*step).max(1) };
                let on_grid = ints.iter().all(|v| (v - low) % step == 0);
                let log = *log && low >= 1;
                Dist::Int { low, high, step: if on_grid { step } else { 1 }, log }
            }
            (Domain::Float { min, max, log, .. }, _, Some(floats)) => {
                let low = floats.iter().copied().fold(*min, f64::min);
                let high = floats.iter().copied().fold(*max, f64::max);
                Dist::Float { low, high, log: *log && low > 0.0 }
            }
            (domain, _, _) => {
                let mut choices: Vec<String> = match domain {
                    Domain::Values(values) => values.clone(),
                    _ => vec![],
                };
                for v in seen {
                    if !choices.iter().any(|c| c == v) {
                        choices.push(v.to_string());
                    }
                }
                Dist::Choice(choices)
            }
        };
        out.insert(p.name.clone(), dist);
    }
    out
}

/// Milliseconds since the epoch as Optuna writes a time: ISO 8601, UTC,
/// without a zone (what Python's `datetime.fromisoformat` reads back).
fn iso(ms: i64) -> Option<String> {
    let at = OffsetDateTime::from_unix_timestamp_nanos(i128::from(ms) * 1_000_000).ok()?;
    at.format(format_description!(
        "[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]"
    ))
    .ok()
}

/// The operation that creates trial `t` whole.
fn trial_op(
    study: &Study,
    t: &Trial,
    distributions: &BTreeMap<String, Dist>,
    finished_ms: Option<i64>,
) -> Value {
    let metrics = t.measured();
    let values: Option<Vec<f64>> =
        study.objectives.iter().map(|o| o.measure.value(&metrics, &t.settings)).collect();
    let mut attrs = serde_json::Map::new();
    attrs.insert("tunebook_trial".into(), json!(t.id));
    if let Some(role) = t.role {
        attrs.insert("role".into(), json!(role.as_str()));
    }
    for (m, v) in &metrics {
        attrs.insert(m.name().into(), json!(v));
    }
    let state = match (t.state, &values) {
        (TrialState::Done, Some(_)) => COMPLETE,
        (TrialState::Pruned, _) => PRUNED,
        (TrialState::Done, None) => {
            attrs.insert("failure".into(), json!("an objective's value was not measured"));
            FAIL
        }
        _ => {
            let kind = t.failure_kind.map_or("failed", |k| k.label());
            attrs.insert("failure".into(), json!(kind));
            if let Some(error) = &t.error {
                let error: String = error.chars().take(MAX_ERROR).collect();
                attrs.insert("error".into(), json!(error));
            }
            FAIL
        }
    };
    let mut params = serde_json::Map::new();
    let mut dists = serde_json::Map::new();
    for (name, dist) in distributions {
        let Some(internal) = t.settings.get(name).and_then(|v| dist.internal(v)) else { continue };
        params.insert(name.clone(), internal);
        // Optuna stores a distribution as its JSON text.
        dists.insert(name.clone(), Value::String(dist.to_json().to_string()));
    }
    let start = t.started_ms.unwrap_or(t.created_ms);
    let end = finished_ms.unwrap_or(start).max(start);
    json!({
        "op_code": CREATE_TRIAL,
        "worker_id": WRITER,
        "study_id": 0,
        "datetime_start": iso(start),
        "datetime_complete": iso(end),
        "state": state,
        "values": if state == COMPLETE { json!(values) } else { Value::Null },
        "params": params,
        "distributions": dists,
        "user_attrs": attrs,
        "system_attrs": {},
        "intermediate_values": {},
    })
}

#[cfg(test)]
mod tests {
    use engine_bridge::FailureKind;
    use tunebook_domain::{Metric, Metrics, Role};
    use tunebook_study::StudyDef;

    use super::*;

    fn study() -> Study {
        let text = r#"
name = "s"
profile = "p"
model = "m"
[space]
threads = { min = 2, max = 8, step = 2 }
batch_size = { min = 512, max = 4096, log = true }
cache_type_k = ["f16", "q8_0"]
ubatch_size = [128, 256]
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#;
        StudyDef::from_toml(text)
            .and_then(|d| d.check(&engine_bridge::Catalog::llama_server(), &["m".to_string()]))
            .unwrap()
    }

    fn trial(id: i64, settings: &[(&str, &str)], state: TrialState) -> Trial {
        let settings = settings.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Trial { id, created_ms: 1_700_000_000_000, ..Trial::new("p", "m", settings, state) }
    }

    fn ops(text: &str) -> Vec<Value> {
        text.lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    #[test]
    fn a_baseline_outside_the_space_widens_its_distribution_and_choices_keep_their_type() {
        let s = study();
        let mut base = trial(1, &[("threads", "3"), ("batch_size", "2048")], TrialState::Done);
        base.metrics =
            Metrics::of([(Metric::DecodeTps, Some(10.0)), (Metric::PeakRssBytes, Some(5e9))]);
        base.role = Some(Role::Baseline);
        let mut run = trial(
            2,
            &[("threads", "8"), ("cache_type_k", "q8_0"), ("ubatch_size", "256")],
            TrialState::Done,
        );
        run.metrics =
            Metrics::of([(Metric::DecodeTps, Some(12.0)), (Metric::PeakRssBytes, Some(4e9))]);
        let journal =
            ops(&journal("s", &s, &[base, run], &BTreeMap::from([(2, 1_700_000_060_000)])));
        assert_eq!(journal[0]["directions"], json!([MAXIMIZE, MINIMIZE]));
        let dist = |op: &Value, name: &str| -> Value {
            serde_json::from_str(op["distributions"][name].as_str().unwrap()).unwrap()
        };
        // Threads stepped by 2 from 2; the baseline's 3 is off that grid.
        let threads = dist(&journal[1], "threads");
        assert_eq!(threads["attributes"], json!({ "log": false, "step": 1, "low": 2, "high": 8 }));
        assert_eq!(journal[1]["params"]["threads"], json!(3.0));
        // A log range is Optuna's log range, by ones.
        let batch = dist(&journal[1], "batch_size");
        assert_eq!(batch["attributes"]["log"], json!(true));
        assert_eq!(batch["attributes"]["step"], json!(1));
        // Choices as numbers where they are, stored by their index.
        let ubatch = dist(&journal[2], "ubatch_size");
        assert_eq!(ubatch["attributes"]["choices"], json!([128, 256]));
        assert_eq!(journal[2]["params"]["ubatch_size"], json!(1));
        assert_eq!(
            dist(&journal[2], "cache_type_k")["attributes"]["choices"],
            json!(["f16", "q8_0"])
        );
        assert_eq!(journal[2]["values"], json!([12.0, 4e9]));
        assert_eq!(journal[2]["state"], json!(COMPLETE));
        assert_eq!(journal[2]["datetime_complete"], json!("2023-11-14T22:14:20.000000"));
        assert_eq!(journal[1]["user_attrs"]["role"], json!("baseline"));
    }

    #[test]
    fn failed_unmeasured_and_never_run_trials_are_not_complete_and_unended_ones_are_left_out() {
        let s = study();
        let mut failed = trial(1, &[], TrialState::Failed);
        failed.failure_kind = Some(FailureKind::OutOfMemory);
        failed.error = Some("x".repeat(5000));
        let unmeasured = trial(2, &[], TrialState::Done);
        let pruned = trial(3, &[], TrialState::Pruned);
        let queued = trial(4, &[], TrialState::Queued);
        let journal =
            ops(&journal("s", &s, &[failed, unmeasured, pruned, queued], &BTreeMap::new()));
        assert_eq!(journal.len(), 4, "the study and three trials");
        assert_eq!(journal[1]["state"], json!(FAIL));
        assert_eq!(journal[1]["user_attrs"]["failure"], json!("out of memory"));
        assert_eq!(journal[1]["user_attrs"]["error"].as_str().unwrap().len(), MAX_ERROR);
        assert_eq!(journal[2]["state"], json!(FAIL));
        assert!(journal[2]["values"].is_null());
        assert_eq!(journal[3]["state"], json!(PRUNED));
    }
}
