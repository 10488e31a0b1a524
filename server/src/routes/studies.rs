//! `/api/studies`: create (checked first), list, read, pause, resume and
//! stop studies; their trials and Pareto fronts.

use std::collections::BTreeMap;

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tunebook_study::findings::Finding;
use tunebook_study::{Measure, StudyDef};
use tunebook_views::types::{
    CheckView, OpenQuestion, ParetoFigure, ParetoView, Settling, TrialView,
};

use crate::AppState;
use crate::Error;
use crate::api_error::Result;
use crate::db::studies::{self, Event, StudyRow};
use crate::db::trials;
use crate::ops;
use crate::routes::params::{Id, IdAction, JsonOf};

pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<StudyRow>>> {
    Ok(Json(studies::list(&state.service.db).await?))
}

/// A study from a request body: 400 naming what is wrong (a field it does
/// not know, such as a URL where an endpoint's name belongs).
fn study_of(body: serde_json::Value) -> Result<StudyDef> {
    serde_json::from_value(body)
        .map_err(|e| Error::BadRequest(format!("the study cannot be read: {e}")).into())
}

/// Checks a study without storing it: what the designer shows as you type.
pub async fn check(
    State(state): State<AppState>,
    JsonOf(body, _): JsonOf<StudyDef>,
) -> Result<Json<CheckView>> {
    Ok(Json(ops::studies::check(&state.service, &study_of(body)?).await?))
}

pub async fn create(
    State(state): State<AppState>,
    JsonOf(body, _): JsonOf<StudyDef>,
) -> Result<(StatusCode, Json<StudyRow>)> {
    let id = ops::studies::create(&state.service, &study_of(body)?).await?;
    Ok((StatusCode::CREATED, Json(ops::studies::row(&state.service.db, id).await?)))
}

#[derive(Serialize, JsonSchema)]
pub struct StudyDetail {
    #[serde(flatten)]
    study: StudyRow,
    events: Vec<Event>,
    trials_by_state: BTreeMap<String, usize>,
}

pub async fn get(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<Json<StudyDetail>> {
    let db = &state.service.db;
    let study = ops::studies::row(db, id).await?;
    let trials_by_state = trials::state_counts(db, id).await?;
    Ok(Json(StudyDetail { study, events: studies::events(db, id).await?, trials_by_state }))
}

pub async fn trials(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<Json<Vec<TrialView>>> {
    ops::studies::row(&state.service.db, id).await?;
    Ok(Json(crate::views::all::<_, TrialView>(trials::of_study(&state.service.db, id).await?)))
}

/// The study's trials as a CSV file, one row each and a column per setting
/// (the page's download; `tunebook export --format csv` writes the same).
pub async fn trials_csv(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<axum::response::Response> {
    use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
    use axum::response::IntoResponse;
    ops::studies::row(&state.service.db, id).await?;
    let mut list: Vec<TrialView> =
        crate::views::all(trials::of_study(&state.service.db, id).await?);
    list.sort_by_key(|t| t.id);
    let text = crate::trials_csv::to_string(&list);
    let file = format!("attachment; filename=\"study-{id}-trials.csv\"");
    Ok(([(CONTENT_TYPE, "text/csv; charset=utf-8".to_string()), (CONTENT_DISPOSITION, file)], text)
        .into_response())
}

/// `GET /api/studies/{id}/optuna-journal`: the study as a journal Optuna's
/// `JournalStorage` loads, as a download.
pub async fn optuna_journal(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<axum::response::Response> {
    use axum::http::header::{CONTENT_DISPOSITION, CONTENT_TYPE};
    use axum::response::IntoResponse;
    let service = &state.service;
    let text = ops::handoff::optuna_journal(&service.db, &service.checked, id).await?;
    let file = format!("attachment; filename=\"study-{id}-optuna.log\"");
    Ok((
        [(CONTENT_TYPE, "text/plain; charset=utf-8".to_string()), (CONTENT_DISPOSITION, file)],
        text,
    )
        .into_response())
}

/// What "settle this" names: a setting and a metric the findings hold not
/// determined.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SettleRequest {
    setting: String,
    metric: String,
    /// Settle it at the pick rather than at the baseline.
    #[serde(default)]
    at_pick: bool,
}

/// "Settle this": queues the runs that would settle a finding left open
/// (the baseline interleaved with the baseline changed in that setting
/// alone), and sets the study running again if it had ended. 400 naming
/// why where the findings hold nothing open there or runs cannot settle it.
pub async fn settle(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
    JsonOf(body, _): JsonOf<SettleRequest>,
) -> Result<(StatusCode, Json<Settling>)> {
    let asked: SettleRequest = serde_json::from_value(body)
        .map_err(|e| Error::BadRequest(format!("the request cannot be read: {e}")))?;
    let (setting, metric) = (&asked.setting, &asked.metric);
    let queued = ops::settle::settle(&state.service, id, setting, metric, asked.at_pick).await?;
    Ok((StatusCode::ACCEPTED, Json(queued)))
}

/// `pause`, `resume` or `stop`.
pub async fn control(
    State(state): State<AppState>,
    Path(IdAction { id, action }): Path<IdAction>,
) -> Result<Json<StudyRow>> {
    ops::studies::control(&state.service, id, &action).await?;
    Ok(Json(ops::studies::row(&state.service.db, id).await?))
}

#[derive(Deserialize, JsonSchema)]
pub struct ParetoQuery {
    /// Comma-separated metrics; the study's objectives when absent.
    metrics: Option<String>,
    /// One class of machine, in a study run on several.
    machine: Option<String>,
}

/// The done trials of a study on chosen metrics, the front marked.
pub async fn pareto(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
    Query(q): Query<ParetoQuery>,
) -> Result<Json<ParetoView>> {
    pareto_view(&state, id, q).await.map(Json)
}

/// The study page's Pareto plot: the figure of [`pareto`]'s answer, built
/// here, with what the page shows around it.
pub async fn pareto_figure(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
    Query(q): Query<ParetoQuery>,
) -> Result<Json<ParetoFigure>> {
    let view = pareto_view(&state, id, q).await?;
    let label = |name: &str| Measure::parse(name).map_or(name.to_string(), |m| m.label());
    let (points, figure) = tunebook_views::figures::pareto_plot(&view, &label);
    Ok(Json(ParetoFigure { figure, points, machines: view.machines, machine: view.machine }))
}

async fn pareto_view(state: &AppState, id: i64, q: ParetoQuery) -> Result<ParetoView> {
    let metrics: Vec<String> = q
        .metrics
        .map(|list| {
            list.split(',').map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect()
        })
        .unwrap_or_default();
    let machine = q.machine.filter(|m| !m.is_empty());
    Ok(ops::pareto::front(&state.service, id, &metrics, machine.as_deref()).await?)
}

#[derive(Serialize, JsonSchema)]
pub struct Written {
    findings: Vec<Finding>,
    markdown: String,
    html: String,
    /// What the findings leave open, and the runs that would settle each.
    open: Vec<OpenQuestion>,
    /// Each objective's settings by how far they move it.
    importance: Vec<tunebook_views::types::ImportanceView>,
}

/// What the study's trials show: each finding with the trials it cites,
/// all of them as one markdown document, and what they leave open.
pub async fn findings(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<Json<Written>> {
    let (findings, view) = ops::studies::findings(&state.service, id).await?;
    Ok(Json(Written {
        findings,
        markdown: view.markdown,
        html: view.html,
        open: view.open,
        importance: view.importance,
    }))
}
