//! Workers over HTTP. `/api/workers`: add a worker (its token is shown
//! once), list and revoke them. `/api/worker/…`: what a worker calls, with
//! its token as `Authorization: Bearer …`: register its hardware and
//! profiles, take a trial, renew its lease while it runs (reporting the
//! phase), and send back what it measured. What each does is
//! `tunebook_core::remote`'s; this translates.

use axum::Json;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode, header};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::AppState;
use crate::Error;
use crate::api_error::Result;
use crate::db::queue::{self, TrialResult, Worker};
use crate::ops;
use crate::remote::{self, Beat, Claimed, Registration};
use crate::routes::params::{Id, Name};

#[derive(Deserialize, JsonSchema)]
pub struct NewWorker {
    name: String,
}

/// A worker's name and token: the token is shown this once.
#[derive(Serialize, JsonSchema)]
pub struct WorkerToken {
    name: String,
    token: String,
}

/// Adds a worker: its token, shown this once.
pub async fn create(
    State(state): State<AppState>,
    Json(body): Json<NewWorker>,
) -> Result<(StatusCode, Json<WorkerToken>)> {
    let token = ops::workers::add(&state.service.db, &body.name).await?;
    let name = body.name.trim().to_string();
    Ok((StatusCode::CREATED, Json(WorkerToken { name, token })))
}

pub async fn list(State(state): State<AppState>) -> Result<Json<Vec<Worker>>> {
    Ok(Json(queue::workers(&state.service.db).await?))
}

pub async fn revoke(
    State(state): State<AppState>,
    Path(Name { name }): Path<Name>,
) -> Result<StatusCode> {
    ops::workers::revoke(&state.service, &name).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// The worker whose token the request carries: its id and name.
async fn worker(state: &AppState, headers: &HeaderMap) -> Result<(i64, String)> {
    let token = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .ok_or_else(|| {
            Error::Unauthorized("a worker sends its token as `Authorization: Bearer …`".into())
        })?;
    Ok(remote::authenticate(&state.service, token).await?)
}

/// The worker a token belongs to.
#[derive(Serialize, JsonSchema)]
pub struct Registered {
    id: i64,
    name: String,
}

pub async fn register(
    State(state): State<AppState>,
    headers: HeaderMap,
    Json(body): Json<Registration>,
) -> Result<Json<Registered>> {
    let (id, name) = worker(&state, &headers).await?;
    remote::register(&state.service, id, &name, &body).await?;
    Ok(Json(Registered { id, name }))
}

/// Hands the worker the oldest trial it may run, waiting a while for one;
/// `null` when none came.
pub async fn claim(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Option<Claimed>>> {
    let (id, name) = worker(&state, &headers).await?;
    Ok(Json(remote::claim(&state.service, id, &name, &state.shutdown).await?))
}

/// Renews the lease; 409 when it is no longer this worker's (stop the trial).
pub async fn heartbeat(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(Id { id: trial }): Path<Id>,
    Json(body): Json<Beat>,
) -> Result<StatusCode> {
    let (id, _) = worker(&state, &headers).await?;
    remote::heartbeat(&state.service, id, trial, &body).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// Stores what the worker measured; 409 when the lease was lost.
pub async fn result(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(Id { id: trial }): Path<Id>,
    Json(body): Json<TrialResult>,
) -> Result<StatusCode> {
    let (id, name) = worker(&state, &headers).await?;
    remote::finish(&state.service, (id, &name), trial, &body).await?;
    Ok(StatusCode::NO_CONTENT)
}
