//! Reports, every version of them, and their read-only links. A version's
//! notebook is stored as JSON, whatever its type `N`.

use serde::Serialize;
use serde::de::DeserializeOwned;

use super::{Db, now_ms};

/// A report at one version.
#[derive(Debug, Clone)]
pub struct ReportRow<N> {
    pub id: i64,
    pub study_id: i64,
    pub title: String,
    pub version: i64,
    pub latest: i64,
    pub notebook: N,
}

/// One version in a report's history.
#[derive(Debug, Clone, PartialEq)]
pub struct VersionRow {
    pub version: i64,
    pub note: String,
    pub created_ms: i64,
}

/// A read-only link to a report.
#[derive(Debug, Clone, PartialEq)]
pub struct ShareRow {
    pub token: String,
    pub version: i64,
    pub created_ms: i64,
    pub revoked: bool,
}

fn decode<N: DeserializeOwned>(text: &str) -> Result<N, sqlx::Error> {
    serde_json::from_str(text).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// Creates a report of `study_id` with its first version.
pub async fn insert(
    db: &Db,
    study_id: i64,
    title: &str,
    notebook: &impl Serialize,
) -> Result<i64, sqlx::Error> {
    let mut tx = db.pool.begin().await?;
    let id: i64 = super::only(
        sqlx::query_scalar(
            "INSERT INTO reports (study_id, title, created_ms) VALUES ($1, $2, $3) RETURNING id",
        )
        .bind(study_id)
        .bind(title)
        .bind(now_ms())
        .fetch_all(&mut *tx)
        .await?,
    )?;
    add_version(&mut tx, id, 1, title, notebook, "written from the findings").await?;
    tx.commit().await?;
    Ok(id)
}

async fn add_version(
    tx: &mut sqlx::Transaction<'_, sqlx::Any>,
    id: i64,
    version: i64,
    title: &str,
    notebook: &impl Serialize,
    note: &str,
) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO report_versions (report_id, version, title, notebook, note, created_ms) \
         VALUES ($1, $2, $3, $4, $5, $6)",
    )
    .bind(id)
    .bind(version)
    .bind(title)
    .bind(serde_json::to_string(notebook).expect("serializes"))
    .bind(note)
    .bind(now_ms())
    .execute(&mut **tx)
    .await?;
    Ok(())
}

/// Why a new version was not stored.
#[derive(Debug)]
pub enum SaveError {
    /// Someone saved a newer version since `base` was read.
    Stale {
        base: i64,
        latest: i64,
    },
    NotFound,
    Db(sqlx::Error),
}

impl From<sqlx::Error> for SaveError {
    fn from(e: sqlx::Error) -> Self {
        SaveError::Db(e)
    }
}

/// Stores a new version made from version `base`, which must still be the
/// newest: two people editing at once do not overwrite each other.
/// Returns the new version.
pub async fn save(
    db: &Db,
    id: i64,
    base: i64,
    title: &str,
    notebook: &impl Serialize,
    note: &str,
) -> Result<i64, SaveError> {
    // Two saves from the same base raced: one wrote first, and the other's
    // write was refused by the database (the primary key on PostgreSQL,
    // the write lock on SQLite). Read again: a newer version means this
    // one is stale, as if it had come second. The same version still
    // means the other has not committed yet (or gave up): try again.
    let mut attempt = 0;
    loop {
        match try_save(db, id, base, title, notebook, note).await {
            Err(SaveError::Db(e)) => {
                let mut conn = db.pool.acquire().await?;
                match newest_version(&mut conn, id).await? {
                    Some(latest) if latest != base => {
                        return Err(SaveError::Stale { base, latest });
                    }
                    _ if attempt < SAVE_ATTEMPTS => {
                        drop(conn);
                        attempt += 1;
                        tokio::time::sleep(std::time::Duration::from_millis(5 << attempt)).await;
                    }
                    _ => return Err(SaveError::Db(e)),
                }
            }
            other => return other,
        }
    }
}

/// How many times a save refused by a concurrent one is tried again
/// (waiting 10, 20, … 640 ms) before its error is reported.
const SAVE_ATTEMPTS: u32 = 7;

/// The newest version of report `id`; `None` when there is no such report.
async fn newest_version(
    conn: &mut sqlx::AnyConnection,
    id: i64,
) -> Result<Option<i64>, sqlx::Error> {
    let (latest,): (Option<i64>,) =
        sqlx::query_as("SELECT MAX(version) FROM report_versions WHERE report_id = $1")
            .bind(id)
            .fetch_one(conn)
            .await?;
    Ok(latest)
}

async fn try_save(
    db: &Db,
    id: i64,
    base: i64,
    title: &str,
    notebook: &impl Serialize,
    note: &str,
) -> Result<i64, SaveError> {
    let mut tx = db.pool.begin().await?;
    let Some(latest) = newest_version(&mut tx, id).await? else { return Err(SaveError::NotFound) };
    if latest != base {
        return Err(SaveError::Stale { base, latest });
    }
    // The primary key refuses a second version `latest + 1` should another
    // save race this one past the check.
    add_version(&mut tx, id, latest + 1, title, notebook, note).await?;
    sqlx::query("UPDATE reports SET title = $1 WHERE id = $2")
        .bind(title)
        .bind(id)
        .execute(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(latest + 1)
}

/// Report `id` at `version`, or at its newest when `None`.
pub async fn get<N: DeserializeOwned>(
    db: &Db,
    id: i64,
    version: Option<i64>,
) -> Result<Option<ReportRow<N>>, sqlx::Error> {
    let row: Option<(i64, i64, String, String, i64, i64)> = sqlx::query_as(
        "SELECT r.id, r.study_id, v.title, v.notebook, v.version, \
         (SELECT MAX(version) FROM report_versions WHERE report_id = r.id) \
         FROM reports r JOIN report_versions v ON v.report_id = r.id \
         WHERE r.id = $1 AND v.version = COALESCE($2, \
           (SELECT MAX(version) FROM report_versions WHERE report_id = r.id))",
    )
    .bind(id)
    .bind(version)
    .fetch_optional(&db.pool)
    .await?;
    row.map(|(id, study_id, title, notebook, version, latest)| {
        Ok(ReportRow { id, study_id, title, version, latest, notebook: decode(&notebook)? })
    })
    .transpose()
}

/// A study's reports: id, title, newest version.
pub async fn of_study(db: &Db, study_id: i64) -> Result<Vec<(i64, String, i64)>, sqlx::Error> {
    sqlx::query_as(
        "SELECT r.id, r.title, (SELECT MAX(version) FROM report_versions WHERE report_id = r.id) \
         FROM reports r WHERE r.study_id = $1 ORDER BY r.id",
    )
    .bind(study_id)
    .fetch_all(&db.pool)
    .await
}

pub async fn versions(db: &Db, id: i64) -> Result<Vec<VersionRow>, sqlx::Error> {
    let rows: Vec<(i64, String, i64)> = sqlx::query_as(
        "SELECT version, note, created_ms FROM report_versions WHERE report_id = $1 \
         ORDER BY version DESC",
    )
    .bind(id)
    .fetch_all(&db.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(version, note, created_ms)| VersionRow { version, note, created_ms })
        .collect())
}

/// Stores a new link showing `version` of report `id`.
pub async fn share(db: &Db, id: i64, version: i64, token: &str) -> Result<(), sqlx::Error> {
    sqlx::query(
        "INSERT INTO report_shares (token, report_id, version, created_ms) VALUES ($1, $2, $3, $4)",
    )
    .bind(token)
    .bind(id)
    .bind(version)
    .bind(now_ms())
    .execute(&db.pool)
    .await?;
    Ok(())
}

pub async fn shares(db: &Db, id: i64) -> Result<Vec<ShareRow>, sqlx::Error> {
    let rows: Vec<(String, i64, i64, Option<i64>)> = sqlx::query_as(
        "SELECT token, version, created_ms, revoked_ms FROM report_shares WHERE report_id = $1 \
         ORDER BY created_ms DESC, token",
    )
    .bind(id)
    .fetch_all(&db.pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(token, version, created_ms, revoked)| ShareRow {
            token,
            version,
            created_ms,
            revoked: revoked.is_some(),
        })
        .collect())
}

/// What a link shows: the report and version, or `Err(true)` when it was
/// revoked (`Err(false)`: no such link).
pub async fn shared(db: &Db, token: &str) -> Result<Result<(i64, i64), bool>, sqlx::Error> {
    let row: Option<(i64, i64, Option<i64>)> =
        sqlx::query_as("SELECT report_id, version, revoked_ms FROM report_shares WHERE token = $1")
            .bind(token)
            .fetch_optional(&db.pool)
            .await?;
    Ok(match row {
        Some((id, version, None)) => Ok((id, version)),
        Some((_, _, Some(_))) => Err(true),
        None => Err(false),
    })
}

/// Revokes a link; `false` when there is no such link.
pub async fn revoke(db: &Db, token: &str) -> Result<bool, sqlx::Error> {
    let done = sqlx::query(
        "UPDATE report_shares SET revoked_ms = COALESCE(revoked_ms, $1) WHERE token = $2",
    )
    .bind(now_ms())
    .bind(token)
    .execute(&db.pool)
    .await?;
    Ok(done.rows_affected() > 0)
}
