//! Studies and their events.

use serde::{Deserialize, Serialize};
use tunebook_study::StudyDef;

use super::{Db, now_ms};
use crate::db::rows::from_row;

/// Where a study is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StudyState {
    Running,
    Paused,
    /// Ended by its budget, its patience, or an exhausted space.
    Done,
    /// Ended on request.
    Stopped,
    /// Could not go on (its profile vanished, say).
    Failed,
}

impl StudyState {
    pub const ALL: [StudyState; 5] =
        [Self::Running, Self::Paused, Self::Done, Self::Stopped, Self::Failed];

    pub fn as_str(self) -> &'static str {
        match self {
            StudyState::Running => "running",
            StudyState::Paused => "paused",
            StudyState::Done => "done",
            StudyState::Stopped => "stopped",
            StudyState::Failed => "failed",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.as_str() == s)
    }

    pub fn is_final(self) -> bool {
        matches!(self, Self::Done | Self::Stopped | Self::Failed)
    }
}

/// A stored study.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct StudyRow {
    pub id: i64,
    pub name: String,
    pub definition: StudyDef,
    pub state: StudyState,
    pub stop_reason: Option<String>,
    pub created_ms: i64,
    pub finished_ms: Option<i64>,
}

struct Raw {
    id: i64,
    name: String,
    definition: String,
    state: String,
    stop_reason: Option<String>,
    created_ms: i64,
    finished_ms: Option<i64>,
}

from_row!(Raw { id, name, definition, state, stop_reason, created_ms, finished_ms });

impl Raw {
    fn into_row(self) -> Result<StudyRow, sqlx::Error> {
        Ok(StudyRow {
            id: self.id,
            name: self.name,
            definition: serde_json::from_str(&self.definition)
                .map_err(|e| sqlx::Error::Decode(Box::new(e)))?,
            state: StudyState::parse(&self.state).unwrap_or(StudyState::Failed),
            stop_reason: self.stop_reason,
            created_ms: self.created_ms,
            finished_ms: self.finished_ms,
        })
    }
}

/// `SELECT` of every [`Raw`] column, followed by the rest of the query.
macro_rules! select_studies {
    ($rest:literal) => {
        concat!(
            "SELECT id, name, definition, state, stop_reason, created_ms, finished_ms FROM studies ",
            $rest
        )
    };
}

/// Stores a checked study, running, and returns its id.
pub async fn insert(db: &Db, def: &StudyDef) -> Result<i64, sqlx::Error> {
    let definition = serde_json::to_string(def).expect("a study serializes");
    sqlx::query_scalar(
        "INSERT INTO studies (name, definition, state, created_ms) VALUES ($1, $2, $3, $4) RETURNING id",
    )
    .bind(&def.name)
    .bind(definition)
    .bind(StudyState::Running.as_str())
    .bind(now_ms())
    .fetch_all(&db.pool)
    .await
    .and_then(super::only)
}

pub async fn get(db: &Db, id: i64) -> Result<Option<StudyRow>, sqlx::Error> {
    let raw: Option<Raw> =
        sqlx::query_as(select_studies!("WHERE id = $1")).bind(id).fetch_optional(&db.pool).await?;
    raw.map(Raw::into_row).transpose()
}

/// Every study, newest first.
pub async fn list(db: &Db) -> Result<Vec<StudyRow>, sqlx::Error> {
    let raws: Vec<Raw> =
        sqlx::query_as(select_studies!("ORDER BY id DESC")).fetch_all(&db.pool).await?;
    raws.into_iter().map(Raw::into_row).collect()
}

/// Ids of studies in a state, oldest first.
/// How many studies there are in each state.
pub async fn state_counts(db: &Db) -> Result<Vec<(String, i64)>, sqlx::Error> {
    sqlx::query_as("SELECT state, COUNT(*) FROM studies GROUP BY state").fetch_all(&db.pool).await
}

pub async fn ids_in_state(db: &Db, state: StudyState) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar("SELECT id FROM studies WHERE state = $1 ORDER BY id")
        .bind(state.as_str())
        .fetch_all(&db.pool)
        .await
}

/// Moves a study to `state`; a final state records why and when.
pub async fn set_state(
    db: &Db,
    id: i64,
    state: StudyState,
    reason: Option<&str>,
) -> Result<(), sqlx::Error> {
    let finished = state.is_final().then(now_ms);
    sqlx::query("UPDATE studies SET state = $1, stop_reason = COALESCE($2, stop_reason), finished_ms = $3 WHERE id = $4")
        .bind(state.as_str())
        .bind(reason)
        .bind(finished)
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// One thing that happened in a study.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Event {
    pub id: i64,
    pub at_ms: i64,
    pub kind: String,
    pub message: String,
}

from_row!(Event { id, at_ms, kind, message });

pub async fn add_event(
    db: &Db,
    study_id: i64,
    kind: &str,
    message: &str,
) -> Result<i64, sqlx::Error> {
    let at_ms = now_ms();
    sqlx::query(
        "INSERT INTO study_events (study_id, at_ms, kind, message) VALUES ($1, $2, $3, $4)",
    )
    .bind(study_id)
    .bind(at_ms)
    .bind(kind)
    .bind(message)
    .execute(&db.pool)
    .await?;
    Ok(at_ms)
}

pub async fn events(db: &Db, study_id: i64) -> Result<Vec<Event>, sqlx::Error> {
    sqlx::query_as(
        "SELECT id, at_ms, kind, message FROM study_events WHERE study_id = $1 ORDER BY id",
    )
    .bind(study_id)
    .fetch_all(&db.pool)
    .await
}
