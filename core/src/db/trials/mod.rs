//! Trials and their samples: what a trial is as stored, and reading
//! trials back. Writing them ([`writes`]) and reading a study's history a
//! page at a time ([`history`]) are beside this.

use std::collections::BTreeMap;

use super::Db;
use crate::db::rows::from_row;
pub use metric_columns::MetricColumns;

/// Where a trial is in its life: the one type every layer speaks.
pub use tunebook_domain::TrialState as State;

/// A trial as stored: one field for each column [`columns::IN_ROW`]
/// marks, as the database holds it (settings and command as JSON text),
/// and the name of the worker that ran it.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default)]
pub struct TrialRow {
    pub id: i64,
    pub profile: String,
    pub model: String,
    pub settings: String,
    pub state: String,
    pub command: Option<String>,
    pub created_ms: i64,
    /// Its metrics, a column each.
    #[serde(flatten)]
    pub metrics: MetricColumns,
    pub client_decode_tps: Option<f64>,
    pub prompt_tokens: Option<i64>,
    pub tokens_requested: Option<i64>,
    pub tokens_generated: Option<i64>,
    pub n_ctx: Option<i64>,
    pub ceiling_tps: Option<f64>,
    pub started_ms: Option<i64>,
    pub expected_load_ms: Option<f64>,
    pub load_state: Option<String>,
    pub failure_kind: Option<String>,
    pub error: Option<String>,
    pub study_id: Option<i64>,
    pub role: Option<String>,
    pub note: Option<String>,
    pub drift_pct: Option<f64>,
    pub machine: Option<String>,
    pub worker: Option<String>,
    pub mismatched: Option<String>,
    /// JSON: each speed per request and the items behind each share.
    pub support: Option<String>,
}

from_row!(TrialRow {
    id, profile, model, settings, state, command, created_ms, client_decode_tps, prompt_tokens,
    tokens_requested, tokens_generated, n_ctx, ceiling_tps, started_ms, expected_load_ms,
    load_state, failure_kind, error, study_id, role, note, drift_pct, machine, worker,
    mismatched, support;
    flatten metrics
});

impl TrialRow {
    /// Its state; failed when the stored word is unknown.
    pub fn state(&self) -> State {
        State::parse(&self.state).unwrap_or(State::Failed)
    }

    /// Its role in its study; none when it has none, or one unknown here.
    pub fn role(&self) -> Option<tunebook_domain::Role> {
        self.role.as_deref().and_then(tunebook_domain::Role::parse)
    }

    /// Its settings, by name.
    pub fn settings(&self) -> BTreeMap<String, String> {
        serde_json::from_str(&self.settings).unwrap_or_default()
    }

    /// Its command line as shown to a user.
    pub fn command_display(&self) -> Option<String> {
        let command: serde_json::Value = serde_json::from_str(self.command.as_deref()?).ok()?;
        command.get("display")?.as_str().map(str::to_string)
    }
}

/// `SELECT` of every [`TrialRow`] column, followed by the rest of the query.
fn select(rest: &str) -> sqlx::AssertSqlSafe<String> {
    sqlx::AssertSqlSafe(format!(
        "SELECT {}, (SELECT name FROM workers WHERE workers.id = trials.worker_id) AS worker \
         FROM trials {rest}",
        columns::names_in(columns::IN_ROW)
    ))
}

/// One recorded request of a trial's speed probe.
#[derive(Debug, Clone, PartialEq)]
pub struct SampleRow {
    pub idx: i64,
    pub ttft_ms: f64,
    pub total_ms: f64,
    pub client_decode_tps: Option<f64>,
    pub prompt_n: i64,
    pub prompt_ms: f64,
    pub prompt_tps: f64,
    pub predicted_n: i64,
    pub predicted_ms: f64,
    pub predicted_tps: f64,
}

from_row!(SampleRow {
    idx,
    ttft_ms,
    total_ms,
    client_decode_tps,
    prompt_n,
    prompt_ms,
    prompt_tps,
    predicted_n,
    predicted_ms,
    predicted_tps
});

pub mod columns;
mod history;
mod measured;
mod metric_columns;
mod writes;

pub use history::*;
pub use measured::Measured;
pub use writes::*;

/// A study's trials, oldest first.
pub async fn of_study(db: &Db, study_id: i64) -> Result<Vec<TrialRow>, sqlx::Error> {
    let rows: Vec<TrialRow> = sqlx::query_as(select("WHERE study_id = $1 ORDER BY id"))
        .bind(study_id)
        .fetch_all(&db.pool)
        .await?;
    Ok(rows)
}

/// A study's trials after trial `after`, oldest first.
pub async fn of_study_after(
    db: &Db,
    study_id: i64,
    after: i64,
) -> Result<Vec<TrialRow>, sqlx::Error> {
    let rows: Vec<TrialRow> = sqlx::query_as(select("WHERE study_id = $1 AND id > $2 ORDER BY id"))
        .bind(study_id)
        .bind(after)
        .fetch_all(&db.pool)
        .await?;
    Ok(rows)
}

/// When each of a study's ended trials ended: (id, ms since the epoch).
pub async fn finished_times(db: &Db, study_id: i64) -> Result<Vec<(i64, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, finished_ms FROM trials WHERE study_id = $1 AND finished_ms IS NOT NULL \
         ORDER BY id",
    )
    .bind(study_id)
    .fetch_all(&db.pool)
    .await
}

/// One trial.
pub async fn get(db: &Db, id: i64) -> Result<Option<TrialRow>, sqlx::Error> {
    let row: Option<TrialRow> =
        sqlx::query_as(select("WHERE id = $1")).bind(id).fetch_optional(&db.pool).await?;
    Ok(row)
}

/// Every trial, newest first.
pub async fn list(db: &Db) -> Result<Vec<TrialRow>, sqlx::Error> {
    let rows: Vec<TrialRow> =
        sqlx::query_as(select("ORDER BY id DESC")).fetch_all(&db.pool).await?;
    Ok(rows)
}

/// Ids of this machine's trials (not queued for workers) in a given state,
/// oldest first.
pub async fn ids_in_state(db: &Db, state: State) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM trials WHERE state = $1 AND target IS NULL ORDER BY id")
        .bind(state.as_str())
        .fetch_all(&db.pool)
        .await
}

/// The recorded samples of a trial, in order.
pub async fn samples(db: &Db, id: i64) -> Result<Vec<SampleRow>, sqlx::Error> {
    let names = columns::sample_names();
    let sql = format!("SELECT {names} FROM samples WHERE trial_id = $1 ORDER BY idx");
    sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(id).fetch_all(&db.pool).await
}

/// How many trials of a study are in each state.
/// How many trials there are in each state, over every study and none.
pub async fn state_counts_all(db: &Db) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as("SELECT state, COUNT(*) FROM trials GROUP BY state").fetch_all(&db.pool).await
}

pub async fn state_counts(db: &Db, study_id: i64) -> Result<BTreeMap<String, usize>, sqlx::Error> {
    let rows: Vec<(String, i64)> =
        sqlx::query_as("SELECT state, COUNT(*) FROM trials WHERE study_id = $1 GROUP BY state")
            .bind(study_id)
            .fetch_all(&db.pool)
            .await?;
    Ok(rows.into_iter().map(|(state, n)| (state, n as usize)).collect())
}
