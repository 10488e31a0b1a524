//! Trials and their samples: what a trial is as stored, and reading
//! trials back. Writing them ([`writes`]) and reading a study's history a
//! page at a time ([`history`]) are beside this.

use std::collections::BTreeMap;

use tunebook_app::types::{SampleView, TrialState, TrialView};

use super::Db;

/// A trial as [`select_trials!`] reads it, before it becomes a view.
#[derive(sqlx::FromRow)]
struct Row {
    id: i64,
    profile: String,
    model: String,
    settings: String,
    state: String,
    command: Option<String>,
    created_ms: i64,
    load_ms: Option<f64>,
    ttft_ms: Option<f64>,
    prefill_tps: Option<f64>,
    decode_tps: Option<f64>,
    client_decode_tps: Option<f64>,
    prompt_tokens: Option<i64>,
    tokens_requested: Option<i64>,
    tokens_generated: Option<i64>,
    n_ctx: Option<i64>,
    peak_rss_bytes: Option<i64>,
    mem_available_drop_bytes: Option<i64>,
    peak_gpu_bytes: Option<i64>,
    quality_score: Option<f64>,
    context_pass_rate: Option<f64>,
    context_tokens: Option<i64>,
    ceiling_tps: Option<f64>,
    pct_of_ceiling: Option<f64>,
    perplexity: Option<f64>,
    started_ms: Option<i64>,
    expected_load_ms: Option<f64>,
    load_state: Option<String>,
    failure_kind: Option<String>,
    error: Option<String>,
    study_id: Option<i64>,
    role: Option<String>,
    note: Option<String>,
    drift_pct: Option<f64>,
    machine: Option<String>,
    worker: Option<String>,
}

/// `SELECT` of every [`Row`] column, followed by the rest of the query.
macro_rules! select_trials {
    ($rest:literal) => {
        concat!(
            "SELECT id, profile, model, settings, state, command, created_ms, load_ms, ttft_ms, ",
            "prefill_tps, decode_tps, client_decode_tps, prompt_tokens, tokens_requested, ",
            "tokens_generated, n_ctx, peak_rss_bytes, mem_available_drop_bytes, peak_gpu_bytes, ",
            "quality_score, context_pass_rate, context_tokens, ceiling_tps, pct_of_ceiling, ",
            "perplexity, ",
            "started_ms, expected_load_ms, load_state, ",
            "failure_kind, error, study_id, role, note, drift_pct, machine, ",
            "(SELECT name FROM workers WHERE workers.id = trials.worker_id) AS worker FROM trials ",
            $rest
        )
    };
}

// After the macro, which they use too.
mod history;
mod writes;

pub use history::*;
pub use writes::*;

impl Row {
    fn into_view(self) -> TrialView {
        let command = self
            .command
            .and_then(|c| serde_json::from_str::<serde_json::Value>(&c).ok())
            .and_then(|c| c.get("display").and_then(|d| d.as_str()).map(str::to_string));
        TrialView {
            id: self.id,
            profile: self.profile,
            model: self.model,
            settings: serde_json::from_str(&self.settings).unwrap_or_default(),
            state: TrialState::parse(&self.state).unwrap_or(TrialState::Failed),
            command,
            created_ms: self.created_ms,
            load_ms: self.load_ms,
            ttft_ms: self.ttft_ms,
            prefill_tps: self.prefill_tps,
            decode_tps: self.decode_tps,
            client_decode_tps: self.client_decode_tps,
            prompt_tokens: self.prompt_tokens,
            tokens_requested: self.tokens_requested,
            tokens_generated: self.tokens_generated,
            n_ctx: self.n_ctx,
            peak_rss_bytes: self.peak_rss_bytes,
            mem_available_drop_bytes: self.mem_available_drop_bytes,
            peak_gpu_bytes: self.peak_gpu_bytes,
            quality_score: self.quality_score,
            context_pass_rate: self.context_pass_rate,
            context_tokens: self.context_tokens,
            ceiling_tps: self.ceiling_tps,
            pct_of_ceiling: self.pct_of_ceiling,
            perplexity: self.perplexity,
            started_ms: self.started_ms,
            expected_load_ms: self.expected_load_ms,
            load_state: self.load_state,
            failure_kind: self.failure_kind,
            error: self.error,
            study_id: self.study_id,
            role: self.role,
            note: self.note,
            drift_pct: self.drift_pct,
            machine: self.machine,
            worker: self.worker,
        }
    }
}

/// A study's trials, oldest first.
pub async fn of_study(db: &Db, study_id: i64) -> Result<Vec<TrialView>, sqlx::Error> {
    let rows: Vec<Row> = sqlx::query_as(select_trials!("WHERE study_id = $1 ORDER BY id"))
        .bind(study_id)
        .fetch_all(&db.pool)
        .await?;
    Ok(rows.into_iter().map(Row::into_view).collect())
}

/// A study's trials after trial `after`, oldest first.
pub async fn of_study_after(
    db: &Db,
    study_id: i64,
    after: i64,
) -> Result<Vec<TrialView>, sqlx::Error> {
    let rows: Vec<Row> =
        sqlx::query_as(select_trials!("WHERE study_id = $1 AND id > $2 ORDER BY id"))
            .bind(study_id)
            .bind(after)
            .fetch_all(&db.pool)
            .await?;
    Ok(rows.into_iter().map(Row::into_view).collect())
}

/// One trial.
pub async fn get(db: &Db, id: i64) -> Result<Option<TrialView>, sqlx::Error> {
    let row: Option<Row> =
        sqlx::query_as(select_trials!("WHERE id = $1")).bind(id).fetch_optional(&db.pool).await?;
    Ok(row.map(Row::into_view))
}

/// Every trial, newest first.
pub async fn list(db: &Db) -> Result<Vec<TrialView>, sqlx::Error> {
    let rows: Vec<Row> =
        sqlx::query_as(select_trials!("ORDER BY id DESC")).fetch_all(&db.pool).await?;
    Ok(rows.into_iter().map(Row::into_view).collect())
}

/// Ids of this machine's trials (not queued for workers) in a given state,
/// oldest first.
pub async fn ids_in_state(db: &Db, state: TrialState) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM trials WHERE state = $1 AND target IS NULL ORDER BY id")
        .bind(state.as_str())
        .fetch_all(&db.pool)
        .await
}

/// The recorded samples of a trial, in order.
pub async fn samples(db: &Db, id: i64) -> Result<Vec<SampleView>, sqlx::Error> {
    type Row = (i64, f64, f64, Option<f64>, i64, f64, f64, i64, f64, f64);
    let rows: Vec<Row> = sqlx::query_as(
        "SELECT idx, ttft_ms, total_ms, client_decode_tps, prompt_n, prompt_ms, prompt_tps, \
         predicted_n, predicted_ms, predicted_tps FROM samples WHERE trial_id = $1 ORDER BY idx",
    )
    .bind(id)
    .fetch_all(&db.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|r| SampleView {
            idx: r.0,
            ttft_ms: r.1,
            total_ms: r.2,
            client_decode_tps: r.3,
            prompt_n: r.4,
            prompt_ms: r.5,
            prompt_tps: r.6,
            predicted_n: r.7,
            predicted_ms: r.8,
            predicted_tps: r.9,
        })
        .collect())
}

/// How many trials of a study are in each state.
pub async fn state_counts(db: &Db, study_id: i64) -> Result<BTreeMap<String, usize>, sqlx::Error> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, COUNT(*) FROM trials WHERE study_id = $1 GROUP BY state")
            .bind(study_id)
            .fetch_all(&db.pool)
            .await?;
    Ok(rows.into_iter().map(|(state, n)| (state, n as usize)).collect())
}
