//! `/api/profiles` and `/api/trials`: the same operations as the pages, as JSON.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use tunebook_app::types::{ProfileView, RunRequest, SampleView, TrialView};

use crate::AppState;
use crate::db::trials;
use crate::error::{Error, Result};

pub async fn profiles(State(state): State<AppState>) -> Json<Vec<ProfileView>> {
    Json(state.service.profile_views())
}

pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<TrialView>>> {
    Ok(Json(trials::list(&state.service.db).await?))
}

pub async fn create(
    State(state): State<AppState>,
    Json(request): Json<RunRequest>,
) -> Result<(StatusCode, Json<TrialView>)> {
    let view = state.service.submit(request).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

pub async fn get(State(state): State<AppState>, Path(id): Path<i64>) -> Result<Json<TrialView>> {
    trials::get(&state.service.db, id).await?.map(Json).ok_or(Error::NotFound)
}

pub async fn samples(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<Vec<SampleView>>> {
    trials::get(&state.service.db, id).await?.ok_or(Error::NotFound)?;
    Ok(Json(trials::samples(&state.service.db, id).await?))
}

pub async fn measurement(
    State(state): State<AppState>,
    Path(id): Path<i64>,
) -> Result<Json<serde_json::Value>> {
    trials::measurement(&state.service.db, id).await?.map(Json).ok_or(Error::NotFound)
}
