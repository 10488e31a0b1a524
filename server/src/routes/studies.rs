//! `/api/studies`: create (checked first), list, read, pause, resume and
//! stop studies; their trials and Pareto fronts.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::json;
use tunebook_app::types::TrialView;
use tunebook_study::{Goal, Metric, StudyDef, pareto};

use crate::AppState;
use crate::db::studies::{self, Event, StudyRow};
use crate::db::trials;
use crate::error::{Error, Result};
use crate::studies::{check as check_study, objectives_of, points};

pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<StudyRow>>> {
    Ok(Json(studies::list(&state.service.db).await?))
}

/// Checks a study without storing it: what the designer shows as you type.
pub async fn check(
    State(state): State<AppState>,
    Json(def): Json<StudyDef>,
) -> Result<Json<serde_json::Value>> {
    let study =
        check_study(&state.service.profiles, &def).map_err(|e| Error::BadRequest(e.to_string()))?;
    let allowed = if study.space.grid_size() <= 200_000 {
        Some(study.space.grid().filter(|c| study.space.allows(c)).count())
    } else {
        None
    };
    Ok(Json(json!({
        "ok": true,
        "grid_size": study.space.grid_size().min(u64::MAX as u128) as u64,
        "allowed_by_constraints": allowed,
        "baseline": study.baseline,
    })))
}

pub async fn create(
    State(state): State<AppState>,
    Json(def): Json<StudyDef>,
) -> Result<(StatusCode, Json<StudyRow>)> {
    let (id, _) = state.service.studies.create(&def).await?;
    let row = studies::get(&state.service.db, id).await?.ok_or(Error::NotFound)?;
    Ok((StatusCode::CREATED, Json(row)))
}

#[derive(Serialize)]
pub struct StudyDetail {
    #[serde(flatten)]
    study: StudyRow,
    events: Vec<Event>,
    trials_by_state: BTreeMap<&'static str, usize>,
}

pub async fn get(State(state): State<AppState>, Path(id): Path<i64>) -> Result<Json<StudyDetail>> {
    let db = &state.service.db;
    let study = studies::get(db, id).await?.ok_or(Error::NotFound)?;
    let mut trials_by_state = BTreeMap::new();
    for t in trials::of_study(db, id).await? {
        *trials_by_state.entry(t.state.as_str()).or_default() += 1;
    }
    Ok(Json(StudyDetail { study, events: studies::events(db, id).await?, trials_by_state }))
}

pub async fn trials(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<Vec<TrialView>>> {
    studies::get(&state.service.db, id).await?.ok_or(Error::NotFound)?;
    Ok(Json(trials::of_study(&state.service.db, id).await?))
}

/// `pause`, `resume` or `stop`.
pub async fn control(
    State(state): State<AppState>,
    Path((id, action)): Path<(i64, String)>,
) -> Result<Json<StudyRow>> {
    let studies = &state.service.studies;
    match action.as_str() {
        "pause" => studies.pause(id).await?,
        "resume" => studies.resume(id).await?,
        "stop" => studies.stop(id).await?,
        other => {
            return Err(Error::BadRequest(format!(
                "unknown action `{other}`: use pause, resume or stop"
            )));
        }
    }
    studies::get(&state.service.db, id).await?.map(Json).ok_or(Error::NotFound)
}

#[derive(Deserialize)]
pub struct ParetoQuery {
    /// Comma-separated metrics; the study's objectives when absent.
    metrics: Option<String>,
}

#[derive(Serialize)]
pub struct ParetoPoint {
    trial_id: i64,
    values: Vec<f64>,
    on_front: bool,
}

/// The done trials of a study on chosen metrics, the front marked.
pub async fn pareto(
    State(state): State<AppState>,
    Path(id): Path<i64>,
    Query(q): Query<ParetoQuery>,
) -> Result<Json<serde_json::Value>> {
    let db = &state.service.db;
    let row = studies::get(db, id).await?.ok_or(Error::NotFound)?;
    let chosen: Vec<(Metric, Goal)> = match q.metrics {
        Some(list) => list
            .split(',')
            .map(|name| {
                let m = Metric::parse(name.trim())
                    .ok_or_else(|| Error::BadRequest(format!("unknown metric `{name}`")))?;
                Ok((m, m.natural_goal()))
            })
            .collect::<Result<_>>()?,
        None => objectives_of(&row.definition),
    };
    let trials = trials::of_study(db, id).await?;
    let done = points(&trials, &chosen);
    let values: Vec<Vec<f64>> = done.iter().map(|(_, v)| v.clone()).collect();
    let goals: Vec<Goal> = chosen.iter().map(|(_, g)| *g).collect();
    let front = pareto::front(&values, &goals);
    let points: Vec<ParetoPoint> = done
        .into_iter()
        .enumerate()
        .map(|(i, (trial, values))| ParetoPoint {
            trial_id: trial.id,
            values,
            on_front: front.binary_search(&i).is_ok(),
        })
        .collect();
    Ok(Json(json!({
        "metrics": chosen.iter().map(|(m, _)| m.name()).collect::<Vec<_>>(),
        "goals": goals,
        "points": points,
    })))
}
