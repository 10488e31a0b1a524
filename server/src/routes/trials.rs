//! `/api/profiles` and `/api/trials`: the same operations as the pages, as JSON.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use tunebook_views::types::{ProfileView, RunRequest, SampleView, TrialView};

use crate::AppState;
use crate::api_error::Result;
use crate::ops;
use crate::routes::params::{Id, IdFormat};

pub async fn profiles(State(state): State<AppState>) -> Json<Vec<ProfileView>> {
    Json(ops::catalog::profiles(&state.service.profiles).await)
}

pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<TrialView>>> {
    Ok(Json(ops::trials::list(&state.service.db).await?))
}

pub async fn create(
    State(state): State<AppState>,
    Json(request): Json<RunRequest>,
) -> Result<(StatusCode, Json<TrialView>)> {
    let view = ops::trials::submit(&state.service, request).await?;
    Ok((StatusCode::CREATED, Json(view)))
}

/// `GET /api/trials/{id}/handoff/{format}`: the trial's configuration as a
/// llama-swap entry, a compose service or a systemd unit, as text.
pub async fn handoff(
    State(state): State<AppState>,
    Path(IdFormat { id, format }): Path<IdFormat>,
) -> Result<([(axum::http::header::HeaderName, &'static str); 1], String)> {
    let Some(format) = ops::handoff::Format::parse(&format) else {
        let known: Vec<&str> = ops::handoff::Format::ALL.iter().map(|f| f.name()).collect();
        return Err(crate::Error::BadRequest(format!(
            "unknown format `{format}`: one of {}",
            known.join(", ")
        ))
        .into());
    };
    let text = ops::handoff::trial(&state.service.db, id, format).await?;
    Ok(([(axum::http::header::CONTENT_TYPE, "text/plain; charset=utf-8")], text))
}

pub async fn get(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<Json<TrialView>> {
    Ok(Json(ops::trials::get(&state.service.db, id).await?))
}

pub async fn samples(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<Json<Vec<SampleView>>> {
    Ok(Json(ops::trials::samples(&state.service.db, id).await?))
}

pub async fn measurement(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<Json<serde_json::Value>> {
    Ok(Json(ops::trials::measurement(&state.service.db, id).await?))
}
