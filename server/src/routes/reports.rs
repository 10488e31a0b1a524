//! `/api/…/reports`: reports of a study, their versions, read-only links
//! and exports. A link (`/api/shared/{token}`) needs nothing but its token.

use axum::Json;
use axum::extract::{Path, Query, State};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tunebook_views::types::{Notebook, ReportSummary, ReportView};

use crate::AppState;
use crate::Error;
use crate::api_error::Result;
use crate::db::reports;
use crate::ops;
use crate::report;
use crate::routes::params::{Id, IdFile, Token, TokenFile};

pub async fn list(
    State(state): State<AppState>,
    Path(Id { id: study_id }): Path<Id>,
) -> Result<Json<Vec<ReportSummary>>> {
    Ok(Json(ops::reports::list(&state.service.reports(), study_id).await?))
}

pub async fn create(
    State(state): State<AppState>,
    Path(Id { id: study_id }): Path<Id>,
) -> Result<(StatusCode, Json<ReportView>)> {
    Ok((StatusCode::CREATED, Json(ops::reports::create(&state.service.reports(), study_id).await?)))
}

#[derive(Deserialize, JsonSchema)]
pub struct VersionQuery {
    version: Option<i64>,
}

pub async fn get(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
    Query(q): Query<VersionQuery>,
) -> Result<Json<ReportView>> {
    Ok(Json(ops::reports::open(&state.service.reports(), id, q.version).await?))
}

/// A new version: the cells as the user left them, made from `base`.
#[derive(Deserialize, JsonSchema)]
pub struct Save {
    base: i64,
    title: String,
    notebook: Notebook,
}

pub async fn save(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
    Json(body): Json<Save>,
) -> Result<Json<ReportView>> {
    let ctx = state.service.reports();
    Ok(Json(ops::reports::save(&ctx, id, body.base, &body.title, body.notebook).await?))
}

#[derive(Deserialize, JsonSchema)]
pub struct Base {
    base: i64,
}

pub async fn regenerate(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
    Json(body): Json<Base>,
) -> Result<Json<ReportView>> {
    Ok(Json(ops::reports::regenerate(&state.service.reports(), id, body.base).await?))
}

/// Adds the findings rewritten as prose by the configured writer.
pub async fn prose(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
    Json(body): Json<Base>,
) -> Result<Json<ReportView>> {
    Ok(Json(ops::reports::prose(&state.service.reports(), id, body.base).await?))
}

/// A report's new read-only link.
#[derive(Serialize, JsonSchema)]
pub struct Published {
    token: String,
    /// The page that shows it: `/share/{token}`.
    path: String,
}

pub async fn publish(
    State(state): State<AppState>,
    Path(Id { id }): Path<Id>,
) -> Result<(StatusCode, Json<Published>)> {
    let (token, _) = ops::reports::publish(&state.service.reports(), id).await?;
    let path = format!("/share/{token}");
    Ok((StatusCode::CREATED, Json(Published { token, path })))
}

pub async fn revoke(
    State(state): State<AppState>,
    Path(Token { token }): Path<Token>,
) -> Result<StatusCode> {
    ops::reports::revoke_link(&state.service.reports(), &token).await?;
    Ok(StatusCode::NO_CONTENT)
}

pub async fn shared(
    State(state): State<AppState>,
    Path(Token { token }): Path<Token>,
) -> Result<Json<ReportView>> {
    Ok(Json(ops::reports::shared(&state.service.reports(), &token).await?))
}

/// `export.html` or `export.md`.
async fn export(state: &AppState, id: i64, version: Option<i64>, file: &str) -> Result<Response> {
    let service = &state.service;
    let row = reports::get::<Notebook>(&service.db, id, version).await?.ok_or(Error::NotFound)?;
    let name = format!("report-{id}-v{}", row.version);
    match file {
        "export.md" => {
            let text = report::export_markdown(&service.reports(), row).await?;
            Ok(download(text, "text/markdown; charset=utf-8", &format!("{name}.md")))
        }
        "export.html" => {
            let path = service.site_root.join("pkg").join("plotly.min.js");
            let plotly = tokio::fs::read_to_string(&path).await.map_err(|_| {
                Error::Unavailable(format!(
                    "plotly.js is not at {} (scripts/build-site.sh puts it there): the HTML export inlines it",
                    path.display()
                ))
            })?;
            let (view, _) = report::rendered(&service.reports(), row, false).await?;
            let html = report::export_html(&view, &plotly);
            Ok(download(html, "text/html; charset=utf-8", &format!("{name}.html")))
        }
        _ => Err(Error::NotFound.into()),
    }
}

fn download(body: String, kind: &str, name: &str) -> Response {
    (
        [
            (header::CONTENT_TYPE, kind.to_string()),
            (header::CONTENT_DISPOSITION, format!("attachment; filename=\"{name}\"")),
        ],
        body,
    )
        .into_response()
}

pub async fn export_own(
    State(state): State<AppState>,
    Path(IdFile { id, file }): Path<IdFile>,
    Query(q): Query<VersionQuery>,
) -> Result<Response> {
    export(&state, id, q.version, &file).await
}

pub async fn export_shared(
    State(state): State<AppState>,
    Path(TokenFile { token, file }): Path<TokenFile>,
) -> Result<Response> {
    let (id, version) = report::link(&state.service.reports(), &token).await?;
    export(&state, id, Some(version), &file).await
}
