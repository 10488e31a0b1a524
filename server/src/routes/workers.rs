//! Workers over HTTP. `/api/workers`: add a worker (its token is shown
//! once), list and revoke them. `/api/worker/…`: what a worker calls, with
//! its token as `Authorization: Bearer …`: register its hardware and
//! profiles, take a trial, renew its lease while it runs (reporting the
//! phase), and send back what it measured.

use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use engine_bridge::ProbePlan;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tunebook_views::types::{TrialState, TrialView};

use crate::AppState;
use crate::announce;
use crate::db::queue::{self, TrialResult, Worker};
use crate::db::trials;
use crate::error::{Error, Result};
use crate::ops;
use crate::service::Service;

#[derive(Deserialize)]
pub struct NewWorker {
    name: String,
}

/// Adds a worker: its token, shown this once.
pub async fn create(
    State(state): State<AppState>,
    Json(body): Json<NewWorker>,
) -> Result<(StatusCode, Json<Value>)> {
    let token = ops::workers::add(&state.service.db, &body.name).await?;
    let name = body.name.trim();
    Ok((StatusCode::CREATED, Json(serde_json::json!({ "name": name, "token": token }))))
}

pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<Worker>>> {
    Ok(Json(queue::workers(&state.service.db).await?))
}

pub async fn revoke(State(state): State<AppState>, Path(name): Path<String>) -> Result<StatusCode> {
    ops::workers::revoke(&state.service, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The worker whose token the request carries.
async fn worker(state: &AppState, headers: &HeaderMap) -> Result<(i64, String)> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            Error::Unauthorized("a worker sends its token as `Authorization: Bearer …`".into())
        })?;
    queue::authenticate(&state.service.db, token.trim())
        .await?
        .ok_or_else(|| Error::Unauthorized("unknown or revoked worker token".into()))
}

#[derive(Deserialize)]
pub struct Registration {
    hardware: Value,
    /// The class of machine, where the worker was given one (`--class`).
    #[serde(default)]
    class: Option<String>,
    profiles: Vec<queue::WorkerProfile>,
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
    fn check(&self) -> Result<()> {
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

pub async fn register(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<Registration>,
) -> Result<Json<Value>> {
    let (id, name) = worker(&state, &headers).await?;
    body.check()?;
    let class = body.class.as_deref().map(str::trim).filter(|c| !c.is_empty());
    queue::register(&state.service.db, id, &body.hardware, class, &body.profiles).await?;
    tracing::info!(worker = %name, "worker registered");
    Ok(Json(serde_json::json!({ "id": id, "name": name })))
}

/// A trial to run, what to measure, and how often to renew the lease.
#[derive(Serialize, Deserialize)]
pub struct Claimed {
    pub trial: TrialView,
    pub probes: ProbePlan,
    pub lease_ms: i64,
}

/// How long a worker's request for work waits for a trial to be queued
/// when there is none, before it is answered with none: idle workers are
/// told of new work at once, without asking again and again.
const CLAIM_WAIT: Duration = Duration::from_secs(20);

/// The profiles worker `id` registered that this server knows for the same
/// engine: a worker takes only trials of those, whatever it asks for.
async fn runnable(service: &Service, id: i64) -> Result<Vec<String>> {
    let registered = queue::registered_profiles(&service.db, id).await?;
    let known = |p: &queue::WorkerProfile| {
        service.profiles.iter().any(|s| s.name == p.name && s.kind.name() == p.engine)
    };
    Ok(registered.into_iter().filter(known).map(|p| p.name).collect())
}

/// Hands the worker the oldest trial it may run, waiting up to
/// [`CLAIM_WAIT`] for one; `null` when none came.
pub async fn claim(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Option<Claimed>>> {
    let (id, name) = worker(&state, &headers).await?;
    let service = &state.service;
    let profiles = runnable(service, id).await?;
    let lease_ms = service.lease.as_millis() as i64;
    // Listening before looking: a trial queued in between is not missed.
    let mut changes = service.events.changes.subscribe();
    let deadline = tokio::time::Instant::now() + CLAIM_WAIT;
    let trial = loop {
        if let Some(trial) = queue::claim(&service.db, id, &name, &profiles, lease_ms).await? {
            break trial;
        }
        let queued = changes.until(|c| c.state == trials::State::Queued);
        tokio::select! {
            _ = state.shutdown.cancelled() => return Ok(Json(None)),
            _ = tokio::time::sleep_until(deadline) => return Ok(Json(None)),
            _ = queued => {}
        }
    };
    let view =
        announce::trial(&service.db, &service.events, trial).await?.ok_or(Error::NotFound)?;
    tracing::info!(worker = %name, trial, "trial taken");
    // A study's trial runs the study's probes; any other the server's.
    let probes = match view.study_id {
        Some(study) => match crate::db::studies::get(&service.db, study).await? {
            Some(row) => crate::study_checks::check(&service.profiles, &row.definition)
                .map(|s| s.probes)
                .unwrap_or_else(|_| service.probes.clone()),
            None => service.probes.clone(),
        },
        None => service.probes.clone(),
    };
    Ok(Json(Some(Claimed { trial: view, probes, lease_ms })))
}

#[derive(Deserialize)]
pub struct Beat {
    state: TrialState,
    /// What the engine wrote since the last report, whole lines.
    #[serde(default)]
    log: String,
}

/// Adds a worker's report of an engine's output to the trial's log here,
/// which `/api/trials/{id}/log` follows as it does a local engine's.
/// Most output one report from a worker adds (its end is kept).
const MAX_LOG_REPORT: usize = 512 * 1024;
/// Most output kept of one worker's trial.
const MAX_LOG_FILE: u64 = 64 * 1024 * 1024;

async fn append_log(service: &Service, trial: i64, text: &str) {
    use tokio::io::AsyncWriteExt;
    if text.is_empty() {
        return;
    }
    let text = match text.len().checked_sub(MAX_LOG_REPORT) {
        Some(cut) if cut > 0 => {
            let at = text.ceil_char_boundary(cut);
            format!("[… {at} bytes of this report left out …]\n{}", &text[at..])
        }
        _ => text.to_string(),
    };
    let path = service.logs_dir.join(format!("trial-{trial}.log"));
    let written = async {
        let kept = tokio::fs::metadata(&path).await.map_or(0, |m| m.len());
        if kept > MAX_LOG_FILE {
            return Ok(());
        }
        tokio::fs::create_dir_all(&service.logs_dir).await?;
        let mut file = tokio::fs::OpenOptions::new().create(true).append(true).open(&path).await?;
        file.write_all(text.as_bytes()).await
    };
    if let Err(e) = written.await {
        tracing::warn!(trial, error = %e, "could not keep a worker's engine output");
    }
}

/// Renews the lease; 409 when it is no longer this worker's (stop the trial).
pub async fn heartbeat(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(trial): Path<i64>,
    Json(body): Json<Beat>,
) -> Result<StatusCode> {
    let (id, _) = worker(&state, &headers).await?;
    let service = &state.service;
    let before = trials::get(&service.db, trial).await?.map(|t| t.state());
    let lease_ms = service.lease.as_millis() as i64;
    let now = crate::views::trials::stored(body.state);
    if !queue::heartbeat(&service.db, trial, id, now, lease_ms).await? {
        return Err(Error::Conflict(format!("trial {trial} is no longer this worker's")));
    }
    append_log(service, trial, &body.log).await;
    if before != Some(now) {
        announce::trial(&service.db, &service.events, trial).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Most samples a result may carry.
const MAX_SAMPLES: usize = 10_000;
/// Longest text a result's column may hold.
const MAX_TEXT: usize = 1024 * 1024;

/// Why a worker's result cannot be what a trial measured, if it cannot:
/// numbers that are not finite or below zero, a failure of a kind that
/// does not exist (pages use it as a class name), oversized text.
fn implausible(result: &TrialResult) -> Option<String> {
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

/// Stores what the worker measured; 409 when the lease was lost.
pub async fn result(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(trial): Path<i64>,
    Json(body): Json<TrialResult>,
) -> Result<StatusCode> {
    let (id, name) = worker(&state, &headers).await?;
    let service = &state.service;
    implausible(&body).map_or(Ok(()), |why| Err(Error::BadRequest(why)))?;
    let refused = || {
        Error::Conflict(format!(
            "trial {trial} is no longer this worker's, or the result is not final: not stored"
        ))
    };
    // The engine's last words are kept before the trial shows as ended, so
    // that whoever sees it ended finds its whole log.
    if !queue::holds(&service.db, trial, id).await? {
        return Err(refused());
    }
    append_log(service, trial, &body.log).await;
    if !queue::finish(&service.db, trial, id, &body).await? {
        return Err(refused());
    }
    // What to run is the server's to write, from its own profile.
    if let Some(t) = trials::get(&service.db, trial).await?
        && let Some(command) =
            crate::recipe::planned_command(&service.profiles, &t.profile, &t.model, &t.settings())
    {
        trials::set_command(&service.db, trial, &command).await?;
    }
    tracing::info!(worker = %name, trial, "trial finished by its worker");
    announce::trial(&service.db, &service.events, trial).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Every second until `stop`: trials whose lease ran out go back to the
/// queue (or fail after too many tries), and their watchers are told.
pub async fn sweep(service: Arc<Service>, stop: CancellationToken) {
    loop {
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
        }
        match queue::expire(&service.db).await {
            Ok(ids) => {
                for id in ids {
                    tracing::warn!(
                        trial = id,
                        "a worker stopped renewing its lease: trial queued again"
                    );
                    let _ = announce::trial(&service.db, &service.events, id).await;
                }
            }
            Err(e) => tracing::error!(error = %e, "could not expire worker leases"),
        }
    }
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
