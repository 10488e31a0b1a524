//! What a worker sends, checked before anything is stored: its
//! registration (bounded names of one plain line, a bounded hardware
//! description) and its results (single values that can be measurements,
//! times of the last year, known kinds of failure).

use serde::Deserialize;
use serde_json::Value;

use crate::db::queue::{self, TrialResult};
use crate::error::{Error, Result};

#[derive(Deserialize, schemars::JsonSchema)]
pub struct Registration {
    pub hardware: Value,
    /// The class of machine, where the worker was given one (`--class`).
    #[serde(default)]
    pub class: Option<String>,
    pub profiles: Vec<queue::WorkerProfile>,
}

/// Most profiles a worker may register.
const MAX_PROFILES: usize = 64;
/// Most models one registered profile may list.
const MAX_MODELS: usize = 256;
/// Longest name (profile, engine, model, class) a worker may send.
const MAX_NAME: usize = 200;
/// Largest hardware description a worker may send, as JSON.
const MAX_HARDWARE: usize = 16 * 1024;

/// A name a worker sends that pages show: bounded, one line of plain text.
fn check_name(what: &str, name: &str) -> Result<()> {
    if name.len() > MAX_NAME {
        return Err(Error::BadRequest(format!("{what} is over {MAX_NAME} bytes")));
    }
    if name.chars().any(char::is_control) {
        return Err(Error::BadRequest(format!("{what} {:?} has a control character", name)));
    }
    Ok(())
}

impl Registration {
    /// What is wrong with this registration, checked before it is stored.
    pub fn check(&self) -> Result<()> {
        if let Some(class) = &self.class {
            check_name("the class", class)?;
        }
        if self.profiles.len() > MAX_PROFILES {
            return Err(Error::BadRequest(format!(
                "{} profiles, over the limit of {MAX_PROFILES}",
                self.profiles.len()
            )));
        }
        for p in &self.profiles {
            check_name("a profile's name", &p.name)?;
            check_name("a profile's engine", &p.engine)?;
            if p.models.len() > MAX_MODELS {
                return Err(Error::BadRequest(format!(
                    "profile {:?} lists {} models, over the limit of {MAX_MODELS}",
                    p.name,
                    p.models.len()
                )));
            }
            for m in &p.models {
                check_name("a model's name", m)?;
            }
        }
        if !self.hardware.is_object() || self.hardware.to_string().len() > MAX_HARDWARE {
            return Err(Error::BadRequest(format!(
                "the hardware is not an object of at most {MAX_HARDWARE} bytes"
            )));
        }
        // Its texts name the class of machine on pages.
        for text in strings(&self.hardware) {
            check_name("a hardware name", text)?;
        }
        Ok(())
    }
}

/// Every string in a JSON value.
fn strings(value: &Value) -> Vec<&str> {
    match value {
        Value::String(s) => vec![s],
        Value::Array(items) => items.iter().flat_map(strings).collect(),
        Value::Object(map) => map.values().flat_map(strings).collect(),
        _ => vec![],
    }
}

/// Most samples a result may carry.
const MAX_SAMPLES: usize = 10_000;
/// Longest text a result's column may hold.
const MAX_TEXT: usize = 1024 * 1024;

/// Why a worker's result cannot be what a trial measured, if it cannot:
/// numbers that are not finite or below zero, a failure of a kind that
/// does not exist (pages use it as a class name), oversized text.
pub fn implausible(result: &TrialResult) -> Option<String> {
    if result.samples.len() > MAX_SAMPLES {
        return Some(format!("{} samples, over the limit of {MAX_SAMPLES}", result.samples.len()));
    }
    let values = result.columns.iter().chain(result.samples.iter().flatten());
    for (name, value) in values {
        match value {
            // Memory can come back during a trial: only that drop may be negative.
            Value::Number(n)
                if !n.as_f64().is_some_and(|v| {
                    v.is_finite() && (v >= 0.0 || name == "mem_available_drop_bytes")
                }) =>
            {
                return Some(format!("`{}` = {n} is not a measurement", name.escape_debug()));
            }
            Value::String(s) if s.len() > MAX_TEXT => {
                return Some(format!("`{}` is over {MAX_TEXT} bytes", name.escape_debug()));
            }
            Value::Array(_) | Value::Object(_) => {
                return Some(format!("`{}` is not a single value", name.escape_debug()));
            }
            _ => {}
        }
    }
    // Times are this side of a year ago and a day ahead (clocks drift):
    // an estimate built on `i64::MAX` would be nonsense for every trial after.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64);
    const DAY_MS: i64 = 86_400_000;
    for name in ["started_ms", "finished_ms"] {
        if let Some(v) = result.columns.get(name).filter(|v| !v.is_null()) {
            let ok = v.as_i64().is_some_and(|t| t > now - 365 * DAY_MS && t < now + DAY_MS);
            if !ok {
                return Some(format!("`{name}` = {v} is not a time of the last year"));
            }
        }
    }
    // Stored as its label ("out of memory"); its name is taken too.
    let known = |k: &Value| {
        engine_bridge::FailureKind::ALL.iter().any(|kind| {
            k.as_str() == Some(kind.label()) || serde_json::to_value(kind).ok().as_ref() == Some(k)
        })
    };
    if let Some(kind) = result.columns.get("failure_kind").filter(|k| !k.is_null())
        && !known(kind)
    {
        return Some(format!("`failure_kind` = {kind} is not a kind of failure"));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(columns: serde_json::Value) -> TrialResult {
        serde_json::from_value(serde_json::json!({ "columns": columns, "samples": [] })).unwrap()
    }

    #[test]
    fn forged_results_are_refused() {
        let ok = result(serde_json::json!({ "state": "done", "decode_tps": 12.5 }));
        assert_eq!(implausible(&ok), None);
        for bad in [
            serde_json::json!({ "state": "failed", "failure_kind": "x\" onmouseover=\"alert(1)" }),
            serde_json::json!({ "state": "done", "decode_tps": -1.0 }),
            serde_json::json!({ "state": "done", "props": { "a": 1 } }),
        ] {
            assert!(implausible(&result(bad.clone())).is_some(), "{bad}");
        }
        for kind in ["out of memory", "setting rejected", "out_of_memory"] {
            let failed = result(serde_json::json!({ "state": "failed", "failure_kind": kind }));
            assert_eq!(implausible(&failed), None, "{kind}");
        }
    }

    /// A column's value as a worker could send it: anything JSON holds.
    fn any_value() -> impl proptest::strategy::Strategy<Value = Value> {
        use proptest::prelude::*;
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::from),
            any::<i64>().prop_map(Value::from),
            any::<f64>()
                .prop_map(|x| serde_json::Number::from_f64(x).map_or(Value::Null, Value::Number)),
            ".{0,40}".prop_map(Value::from),
        ];
        leaf.prop_recursive(2, 8, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..3).prop_map(Value::from),
                proptest::collection::btree_map("[a-z]{1,4}", inner, 0..3)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    proptest::proptest! {
        /// Whatever a worker sends, what is accepted is single values: every
        /// number a measurement (finite, not below zero but the memory drop),
        /// every time of the last year, every failure a known kind.
        #[test]
        fn what_a_result_may_hold(
            columns in proptest::collection::btree_map(
                proptest::sample::select(vec![
                    "state", "decode_tps", "ttft_ms", "started_ms", "finished_ms", "failure_kind",
                    "mem_available_drop_bytes", "error", "props", "command",
                ]),
                any_value(),
                0..8,
            ),
        ) {
            let body: std::collections::BTreeMap<String, Value> =
                columns.into_iter().map(|(k, v)| (k.to_string(), v)).collect();
            let r = TrialResult { columns: body, samples: vec![], log: String::new() };
            if implausible(&r).is_none() {
                let now = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .unwrap()
                    .as_millis() as i64;
                for (name, v) in &r.columns {
                    proptest::prop_assert!(!v.is_array() && !v.is_object(), "{name}: {v}");
                    if let Some(x) = v.as_f64() {
                        proptest::prop_assert!(x.is_finite(), "{name}: {v}");
                        proptest::prop_assert!(x >= 0.0 || name == "mem_available_drop_bytes");
                    }
                    if name.ends_with("_ms") && name != "ttft_ms" && !v.is_null() {
                        let t = v.as_i64().unwrap_or(i64::MIN);
                        proptest::prop_assert!(t > now - 366 * 86_400_000 && t < now + 86_400_000);
                    }
                }
            }
        }
    }
}
