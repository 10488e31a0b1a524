//! A study's reports as the pages and the API edit them: each change makes
//! a new version and answers with the report as it now stands. The work
//! itself (drafting, merging, rendering, prose) is [`crate::report`]'s.

use tunebook_views::types::{Notebook, ReportSummary, ReportView};

use crate::db::reports;
use crate::error::{Error, Result};
use crate::report::{self, Reports};

/// A study's reports, oldest first.
pub async fn list(ctx: &Reports, study_id: i64) -> Result<Vec<ReportSummary>> {
    super::studies::row(&ctx.db, study_id).await?;
    let list = reports::of_study(&ctx.db, study_id).await?;
    Ok(list.into_iter().map(|(id, title, version)| ReportSummary { id, title, version }).collect())
}

/// A report at a version (the newest when `None`), for its owner.
pub async fn open(ctx: &Reports, id: i64, version: Option<i64>) -> Result<ReportView> {
    report::view(ctx, id, version, true).await
}

/// A new report written from the study's findings.
pub async fn create(ctx: &Reports, study_id: i64) -> Result<ReportView> {
    let id = report::create(ctx, study_id).await?;
    open(ctx, id, None).await
}

/// Saves a new version made from version `base`: the cells as the user
/// left them.
pub async fn save(
    ctx: &Reports,
    id: i64,
    base: i64,
    title: &str,
    notebook: Notebook,
) -> Result<ReportView> {
    report::save(ctx, id, base, title, notebook).await?;
    open(ctx, id, None).await
}

/// Rewrites the cells written from the findings, keeping the user's.
pub async fn regenerate(ctx: &Reports, id: i64, base: i64) -> Result<ReportView> {
    report::regenerate(ctx, id, base).await?;
    open(ctx, id, None).await
}

/// Makes an earlier version the newest again.
pub async fn restore(ctx: &Reports, id: i64, base: i64, version: i64) -> Result<ReportView> {
    report::restore(ctx, id, base, version).await?;
    open(ctx, id, None).await
}

/// Adds the findings rewritten as prose by the server's writer model.
pub async fn prose(ctx: &Reports, id: i64, base: i64) -> Result<ReportView> {
    report::prose(ctx, id, base).await?;
    open(ctx, id, None).await
}

/// A new read-only link to the newest version: its token, and the report
/// with the link among its shares.
pub async fn publish(ctx: &Reports, id: i64) -> Result<(String, ReportView)> {
    let token = report::publish(ctx, id).await?;
    Ok((token, open(ctx, id, None).await?))
}

/// Withdraws a link.
pub async fn revoke_link(ctx: &Reports, token: &str) -> Result<()> {
    if reports::revoke(&ctx.db, token).await? { Ok(()) } else { Err(Error::NotFound) }
}

/// What a read-only link shows.
pub async fn shared(ctx: &Reports, token: &str) -> Result<ReportView> {
    report::shared(ctx, token).await
}
