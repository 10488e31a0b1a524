//! Workers and the queue of trials they run. A trial queued for workers
//! (`target`: `any` or a worker's name) is taken by one worker at a time
//! under a lease it renews while it runs; on PostgreSQL the taking uses
//! `FOR UPDATE SKIP LOCKED`, so any number of workers take different trials
//! without waiting on each other (SQLite has one writer at a time anyway).
//! A lease that runs out puts the trial back in the queue; only the worker
//! holding the lease can finish the trial, so no trial finishes twice.

use std::collections::BTreeMap;

use crate::db::trials::State;
use crate::db::trials::columns::{self, IN_RESULT, SAMPLE, bind, read, sample_names};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::{Db, Kind, now_ms};
use crate::db::rows::from_row;

/// A trial whose worker stopped renewing its lease this many times fails
/// instead of being queued again: something about it takes machines down.
pub const MAX_ATTEMPTS: i64 = 3;

/// The phases a worker's trial passes through while it holds the lease.
const IN_FLIGHT: &str = "('launching', 'loading', 'probing')";

/// A worker as the server knows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Worker {
    pub id: i64,
    pub name: String,
    pub hardware: Option<Value>,
    pub profiles: Option<Value>,
    /// The class of machine it stands for (see [`crate::machine_class::of`]).
    pub machine_class: Option<String>,
    pub created_ms: i64,
    pub last_seen_ms: Option<i64>,
    pub revoked: bool,
}

fn sha256(token: &str) -> String {
    format!("{:x}", Sha256::digest(token.as_bytes()))
}

/// Adds a worker named `name` and returns its token (256 random bits, in
/// hex), which is not stored: only its SHA-256 is.
pub async fn create_worker(db: &Db, name: &str) -> Result<String, sqlx::Error> {
    let token = crate::new_token();
    sqlx::query("INSERT INTO workers (name, token_sha256, created_ms) VALUES ($1, $2, $3)")
        .bind(name)
        .bind(sha256(&token))
        .bind(now_ms())
        .execute(&db.pool)
        .await?;
    Ok(token)
}

/// The worker a token belongs to, unless revoked; notes that it was seen.
pub async fn authenticate(db: &Db, token: &str) -> Result<Option<(i64, String)>, sqlx::Error> {
    let found: Option<(i64, String)> = sqlx::query_as(
        "UPDATE workers SET last_seen_ms = $1 WHERE token_sha256 = $2 AND revoked_ms IS NULL \
         RETURNING id, name",
    )
    .bind(now_ms())
    .bind(sha256(token))
    .fetch_all(&db.pool)
    .await?
    .into_iter()
    .next();
    Ok(found)
}

/// Revokes a worker's token; `false` when there is no such worker.
pub async fn revoke_worker(db: &Db, name: &str) -> Result<bool, sqlx::Error> {
    let done =
        sqlx::query("UPDATE workers SET revoked_ms = COALESCE(revoked_ms, $1) WHERE name = $2")
            .bind(now_ms())
            .bind(name)
            .execute(&db.pool)
            .await?;
    Ok(done.rows_affected() > 0)
}

/// Fails the trials meant for worker `name` alone that have not finished
/// (queued, or in flight on it), with `why`; their ids.
pub async fn fail_targeted(db: &Db, name: &str, why: &str) -> Result<Vec<i64>, sqlx::Error> {
    let sql = format!(
        "UPDATE trials SET state = 'failed', failure_kind = $1, error = $2, \
         lease_expires_ms = NULL, finished_ms = $3 \
         WHERE target = $4 AND (state = 'queued' OR state IN {IN_FLIGHT}) RETURNING id"
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(engine_bridge::FailureKind::Interrupted.label())
        .bind(why)
        .bind(now_ms())
        .bind(name)
        .fetch_all(&db.pool)
        .await
}

/// A profile a worker registered: its name, engine and models.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorkerProfile {
    pub name: String,
    pub engine: String,
    #[serde(default)]
    pub models: Vec<String>,
}

/// The profiles worker `id` registered (none before it registers).
pub async fn registered_profiles(db: &Db, id: i64) -> Result<Vec<WorkerProfile>, sqlx::Error> {
    let stored: Option<Option<String>> =
        sqlx::query_scalar("SELECT profiles FROM workers WHERE id = $1")
            .bind(id)
            .fetch_optional(&db.pool)
            .await?;
    Ok(stored.flatten().and_then(|t| serde_json::from_str(&t).ok()).unwrap_or_default())
}

/// Records what a worker runs on, its class of machine (given, or
/// [`crate::machine_class::of`] its hardware) and what it can run.
pub async fn register(
    db: &Db,
    id: i64,
    hardware: &Value,
    class: Option<&str>,
    profiles: &[WorkerProfile],
) -> Result<(), sqlx::Error> {
    let class = class.map_or_else(|| crate::machine_class::of(hardware), str::to_string);
    sqlx::query(
        "UPDATE workers SET hardware = $1, profiles = $2, last_seen_ms = $3, machine_class = $4 \
         WHERE id = $5",
    )
    .bind(hardware.to_string())
    .bind(serde_json::to_string(profiles).expect("profiles serialize"))
    .bind(now_ms())
    .bind(class)
    .bind(id)
    .execute(&db.pool)
    .await?;
    Ok(())
}

struct WorkerRow {
    id: i64,
    name: String,
    hardware: Option<String>,
    profiles: Option<String>,
    machine_class: Option<String>,
    created_ms: i64,
    last_seen_ms: Option<i64>,
    revoked_ms: Option<i64>,
}

from_row!(WorkerRow {
    id,
    name,
    hardware,
    profiles,
    machine_class,
    created_ms,
    last_seen_ms,
    revoked_ms
});

pub async fn workers(db: &Db) -> Result<Vec<Worker>, sqlx::Error> {
    let rows: Vec<WorkerRow> = sqlx::query_as(
        "SELECT id, name, hardware, profiles, machine_class, created_ms, last_seen_ms, revoked_ms \
         FROM workers \
         ORDER BY id",
    )
    .fetch_all(&db.pool)
    .await?;
    let json = |t: Option<String>| t.and_then(|t| serde_json::from_str(&t).ok());
    Ok(rows
        .into_iter()
        .map(|r| Worker {
            id: r.id,
            name: r.name,
            hardware: json(r.hardware),
            profiles: json(r.profiles),
            machine_class: r.machine_class,
            created_ms: r.created_ms,
            last_seen_ms: r.last_seen_ms,
            revoked: r.revoked_ms.is_some(),
        })
        .collect())
}

/// A queue target naming a set of workers: any one of them may take the trial.
pub fn target_of(names: &[String]) -> String {
    serde_json::to_string(names).expect("names serialize")
}

/// The oldest queued trial worker `id` (named `name`) may run, of the
/// `profiles` it has, now leased to it for `lease_ms`: one queued for any
/// worker, for this one, or for a set of workers it is in. The trial
/// records the worker's class of machine.
pub async fn claim(
    db: &Db,
    id: i64,
    name: &str,
    profiles: &[String],
    lease_ms: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let list = serde_json::to_string(profiles).expect("names serialize");
    let (profiles_in, in_set, lock) = match db.kind {
        Kind::Postgres => (
            "SELECT value FROM json_array_elements_text(CAST($4 AS json))",
            "SELECT value FROM json_array_elements_text(CAST(q.target AS json))",
            " FOR UPDATE SKIP LOCKED",
        ),
        Kind::Sqlite => {
            ("SELECT value FROM json_each($4)", "SELECT value FROM json_each(q.target)", "")
        }
    };
    // A set of names is a JSON list; names never start with `[`.
    let sql = format!(
        "UPDATE trials SET state = 'launching', worker_id = $1, lease_expires_ms = $2, \
         attempts = attempts + 1, \
         machine = COALESCE((SELECT machine_class FROM workers WHERE id = $1), machine) \
         WHERE id = (SELECT q.id FROM trials q WHERE q.state = 'queued' \
         AND CASE WHEN q.target LIKE '[%' THEN $3 IN ({in_set}) ELSE q.target IN ('any', $3) END \
         AND q.profile IN ({profiles_in}) ORDER BY q.id LIMIT 1{lock}) RETURNING id"
    );
    sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(id)
        .bind(now_ms() + lease_ms)
        .bind(name)
        .bind(list)
        .fetch_all(&db.pool)
        .await
        .map(|ids| ids.into_iter().next())
}

/// Renews worker `worker`'s lease on `trial` and records the phase it is
/// in; `false` when the lease is no longer its own (it ran out and the
/// trial went to another worker, or the trial was stopped).
pub async fn heartbeat(
    db: &Db,
    trial: i64,
    worker: i64,
    state: State,
    lease_ms: i64,
) -> Result<bool, sqlx::Error> {
    if !matches!(state, State::Launching | State::Loading | State::Probing) {
        return Ok(false);
    }
    let sql = format!(
        "UPDATE trials SET lease_expires_ms = $1, state = $2, started_ms = COALESCE(started_ms, $3) \
         WHERE id = $4 AND worker_id = $5 AND state IN {IN_FLIGHT}"
    );
    let done = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(now_ms() + lease_ms)
        .bind(state.as_str())
        .bind(now_ms())
        .bind(trial)
        .bind(worker)
        .execute(&db.pool)
        .await?;
    Ok(done.rows_affected() == 1)
}

/// Whether worker `worker` holds the lease on `trial`, still in flight.
pub async fn holds(db: &Db, trial: i64, worker: i64) -> Result<bool, sqlx::Error> {
    let sql = format!(
        "SELECT COUNT(*) FROM trials WHERE id = $1 AND worker_id = $2 AND state IN {IN_FLIGHT}"
    );
    let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(sql))
        .bind(trial)
        .bind(worker)
        .fetch_one(&db.pool)
        .await?;
    Ok(n == 1)
}

/// Trials whose lease ran out: back in the queue, or failed (as a crash,
/// which a study counts and does not try again) after [`MAX_ATTEMPTS`].
/// Returns their ids.
pub async fn expire(db: &Db) -> Result<Vec<i64>, sqlx::Error> {
    let now = now_ms();
    let mut tx = db.pool.begin().await?;
    let failed = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
        "UPDATE trials SET state = 'failed', finished_ms = $1, failure_kind = 'crashed', \
         error = $2, lease_expires_ms = NULL WHERE target IS NOT NULL AND state IN {IN_FLIGHT} \
         AND lease_expires_ms < $3 AND attempts >= $4 RETURNING id"
    )))
    .bind(now)
    .bind(format!(
        "its worker stopped answering {MAX_ATTEMPTS} times: the machine may go down running it"
    ))
    .bind(now)
    .bind(MAX_ATTEMPTS)
    .fetch_all(&mut *tx)
    .await?;
    let requeued = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(format!(
        "UPDATE trials SET state = 'queued', worker_id = NULL, lease_expires_ms = NULL, \
         load_state = NULL WHERE target IS NOT NULL AND state IN {IN_FLIGHT} \
         AND lease_expires_ms < $1 RETURNING id"
    )))
    .bind(now)
    .fetch_all(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(failed.into_iter().chain(requeued).collect())
}

/// A finished trial as a worker sends it back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TrialResult {
    pub columns: BTreeMap<String, Value>,
    pub samples: Vec<BTreeMap<String, Value>>,
    /// The end of the engine's output the worker had not yet sent.
    #[serde(default)]
    pub log: String,
}

/// Reads trial `id`'s result from a (worker's own) database.
pub async fn result_of(db: &Db, id: i64) -> Result<TrialResult, sqlx::Error> {
    let row = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM trials WHERE id = $1",
        columns::names_in(IN_RESULT)
    )))
    .bind(id)
    .fetch_one(&db.pool)
    .await?;
    let samples = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {} FROM samples WHERE trial_id = $1 ORDER BY idx",
        sample_names()
    )))
    .bind(id)
    .fetch_all(&db.pool)
    .await?;
    Ok(TrialResult {
        columns: read(&row, columns::carried_in(IN_RESULT).map(|c| (c.name, c.kind)))?,
        samples: samples
            .iter()
            .map(|r| read(r, SAMPLE.iter().copied()))
            .collect::<Result<_, _>>()?,
        log: String::new(),
    })
}

/// Stores what worker `worker` measured for `trial`, if it still holds the
/// lease and the result is final; `false` otherwise (and nothing stored).
pub async fn finish(
    db: &Db,
    trial: i64,
    worker: i64,
    result: &TrialResult,
) -> Result<bool, sqlx::Error> {
    let state = result.columns.get("state").and_then(Value::as_str).and_then(State::parse);
    if !state.is_some_and(State::is_final) {
        return Ok(false);
    }
    let sets: Vec<String> = columns::carried_in(IN_RESULT)
        .enumerate()
        .map(|(i, c)| format!("{} = ${}", c.name, i + 1))
        .collect();
    let n = sets.len();
    let sql = format!(
        "UPDATE trials SET {}, lease_expires_ms = NULL WHERE id = ${} AND worker_id = ${} \
         AND state IN {IN_FLIGHT}",
        sets.join(", "),
        n + 1,
        n + 2
    );
    let mut tx = db.pool.begin().await?;
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
    for c in columns::carried_in(IN_RESULT) {
        q = bind(q, c.kind, result.columns.get(c.name));
    }
    let done = q.bind(trial).bind(worker).execute(&mut *tx).await?;
    if done.rows_affected() != 1 {
        return Ok(false);
    }
    let insert = format!(
        "INSERT INTO samples (trial_id, {}) VALUES ($1, {})",
        sample_names(),
        (2..=SAMPLE.len() + 1).map(|i| format!("${i}")).collect::<Vec<_>>().join(", ")
    );
    for s in &result.samples {
        let mut q = sqlx::query(sqlx::AssertSqlSafe(insert.clone())).bind(trial);
        for (name, col) in SAMPLE {
            q = bind(q, *col, s.get(*name));
        }
        q.execute(&mut *tx).await?;
    }
    tx.commit().await?;
    Ok(true)
}

/// Takes study `study`'s trials no worker has taken yet out of the queue:
/// they end as interrupted (`why`), never run, so the study proposes them
/// again when it goes on. Returns their ids.
pub async fn unqueue(db: &Db, study: i64, why: &str) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(
        "UPDATE trials SET state = 'failed', finished_ms = $1, failure_kind = 'interrupted', \
         error = $2 WHERE study_id = $3 AND state = 'queued' AND target IS NOT NULL RETURNING id",
    )
    .bind(now_ms())
    .bind(why)
    .bind(study)
    .fetch_all(&db.pool)
    .await
}

/// Marks study `study`'s trials running on workers as interrupted (`why`):
/// each worker hears it at its next report and stops its engine. Returns
/// their ids.
pub async fn interrupt(db: &Db, study: i64, why: &str) -> Result<Vec<i64>, sqlx::Error> {
    sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
        "UPDATE trials SET state = 'failed', finished_ms = $1, failure_kind = 'interrupted', \
         error = $2, lease_expires_ms = NULL WHERE study_id = $3 AND target IS NOT NULL \
         AND state IN {IN_FLIGHT} RETURNING id"
    )))
    .bind(now_ms())
    .bind(why)
    .bind(study)
    .fetch_all(&db.pool)
    .await
}
