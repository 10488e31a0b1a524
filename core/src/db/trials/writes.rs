//! Trials written: created, moved through their states, finished with a
//! measurement or a failure, annotated, and imported.

use std::collections::BTreeMap;

use engine_bridge::Failure;
use tunebook_domain::Role;

use super::columns::{self, IN_IMPORT};
use super::measured::Measured;
use super::{State, TrialRow};
use crate::db::rows::from_row;
use crate::db::{Db, now_ms};

/// A trial as it is first stored.
pub struct NewTrial<'a> {
    pub profile: &'a str,
    pub model: &'a str,
    pub settings: &'a BTreeMap<String, String>,
    pub tokens_requested: Option<u32>,
    /// In a study: the study, the trial's role and why it runs.
    pub study: Option<StudyPart<'a>>,
    /// Queued for workers rather than this server's runner: `any`, a
    /// worker's name, or a JSON list of names (see `db::queue`).
    pub target: Option<&'a str>,
    /// The class of machine it is queued for.
    pub machine: Option<&'a str>,
}

/// What a study's trial carries.
pub struct StudyPart<'a> {
    pub study_id: i64,
    pub role: Role,
    pub note: &'a str,
}

/// Stores a new queued trial and returns its id.
pub async fn insert(db: &Db, t: &NewTrial<'_>) -> Result<i64, sqlx::Error> {
    let settings = serde_json::to_string(t.settings).expect("a string map serializes");
    sqlx::query_scalar(
        "INSERT INTO trials (profile, model, settings, state, created_ms, tokens_requested, \
         study_id, role, note, target, machine) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, \
         $11) RETURNING id",
    )
    .bind(t.profile)
    .bind(t.model)
    .bind(settings)
    .bind(State::Queued.as_str())
    .bind(now_ms())
    .bind(t.tokens_requested.map(i64::from))
    .bind(t.study.as_ref().map(|s| s.study_id))
    .bind(t.study.as_ref().map(|s| s.role.as_str()))
    .bind(t.study.as_ref().map(|s| s.note))
    .bind(t.target)
    .bind(t.machine)
    .fetch_all(&db.pool)
    .await
    .and_then(crate::db::only)
}

/// Moves a trial to a new phase.
pub async fn set_state(db: &Db, id: i64, state: State) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE trials SET state = $1, started_ms = COALESCE(started_ms, $2) WHERE id = $3",
    )
    .bind(state.as_str())
    .bind(now_ms())
    .bind(id)
    .execute(&db.pool)
    .await?;
    Ok(())
}

/// The mean load time of finished trials of this profile and model.
pub async fn mean_load_ms(db: &Db, profile: &str, model: &str) -> Result<Option<f64>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT AVG(load_ms) FROM trials WHERE profile = $1 AND model = $2 AND state = $3 \
         AND load_ms IS NOT NULL",
    )
    .bind(profile)
    .bind(model)
    .bind(State::Done.as_str())
    .fetch_one(&db.pool)
    .await
}

/// The mean wall time of done trials of a model (launch to stop), and how
/// many there were: what estimates of a study's time go by.
pub async fn mean_wall_ms(
    db: &Db,
    profile: &str,
    model: &str,
) -> Result<(Option<f64>, i64), sqlx::Error> {
    let (mean, n): (Option<f64>, i64) = sqlx::query_as(
        "SELECT AVG(CAST(finished_ms - started_ms AS DOUBLE PRECISION)), COUNT(*) FROM trials \
         WHERE profile = $1 AND model = $2 AND state = $3 AND started_ms IS NOT NULL \
         AND finished_ms IS NOT NULL",
    )
    .bind(profile)
    .bind(model)
    .bind(State::Done.as_str())
    .fetch_one(&db.pool)
    .await?;
    Ok((mean, n))
}

/// Notes how long the load is expected to take.
pub async fn set_expected_load(db: &Db, id: i64, ms: Option<f64>) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE trials SET expected_load_ms = $1 WHERE id = $2")
        .bind(ms)
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Notes what the engine's health check says while it loads.
pub async fn set_load_state(db: &Db, id: i64, state: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE trials SET load_state = $1 WHERE id = $2")
        .bind(state)
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Records the exact command line and environment that will run.
pub async fn set_command(db: &Db, id: i64, command: &serde_json::Value) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE trials SET command = $1 WHERE id = $2")
        .bind(command.to_string())
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Stores the measurements and samples and marks the trial done, atomically.
pub async fn finish_done(db: &Db, id: i64, m: &Measured<'_>) -> Result<(), sqlx::Error> {
    let mut tx = db.pool.begin().await?;
    let o = m.outcome;
    let speed = o.measurement.speed.as_ref();
    for (idx, s) in speed.map(|s| s.samples.as_slice()).unwrap_or_default().iter().enumerate() {
        sqlx::query(
            "INSERT INTO samples (trial_id, idx, ttft_ms, total_ms, client_decode_tps, prompt_n, \
             prompt_ms, prompt_tps, predicted_n, predicted_ms, predicted_tps) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)",
        )
        .bind(id)
        .bind(idx as i64)
        .bind(s.ttft_ms)
        .bind(s.total_ms)
        .bind(s.client_decode_tps)
        .bind(s.timings.prompt_n as i64)
        .bind(s.timings.prompt_ms)
        .bind(s.timings.prompt_per_second)
        .bind(s.timings.predicted_n as i64)
        .bind(s.timings.predicted_ms)
        .bind(s.timings.predicted_per_second)
        .execute(&mut *tx)
        .await?;
    }
    let s = speed.map(|s| &s.summary);
    // The metrics' columns follow the others, from $11 on.
    let mut sql = String::from(
        "UPDATE trials SET state = $1, finished_ms = $2, client_decode_tps = $3, \
         prompt_tokens = $4, tokens_generated = $5, n_ctx = $6, props = $7, measurement = $8, \
         ceiling_tps = $9, support = $10",
    );
    let metrics = columns::metric_columns();
    for (i, c) in metrics.iter().enumerate() {
        sql.push_str(&format!(", {} = ${}", c.name, 11 + i));
    }
    sql.push_str(&format!(" WHERE id = ${}", 11 + metrics.len()));
    let mut q = sqlx::query(sqlx::AssertSqlSafe(sql))
        .bind(State::Done.as_str())
        .bind(now_ms())
        .bind(s.and_then(|s| s.client_decode_tps))
        .bind(s.map(|s| s.prompt_tokens as i64))
        .bind(s.map(|s| s.tokens_generated as i64))
        .bind(o.props.as_ref().and_then(|p| p.n_ctx).map(|n| n as i64))
        .bind(o.props.as_ref().map(|p| serde_json::to_string(p).expect("props serialize")))
        .bind(serde_json::to_string(&o.measurement).expect("a measurement serializes"))
        .bind(m.ceiling_tps)
        .bind(support(&o.measurement));
    let measured = super::measured::metrics(m);
    for c in metrics {
        let value = tunebook_domain::Metric::parse(c.name).and_then(|metric| measured.get(metric));
        let value = value.map(|v| match c.kind {
            columns::Col::Int => serde_json::Value::from(v.round() as i64),
            _ => serde_json::Value::from(v),
        });
        q = columns::bind(q, c.kind, value.as_ref());
    }
    q.bind(id).execute(&mut *tx).await?;
    tx.commit().await
}

/// What a measurement's numbers rest on, as stored (JSON, read back as
/// the pages' `TrialSupport`): each speed per measured request, the
/// items behind each share, and each question's verdict.
fn support(m: &engine_bridge::Measurement) -> Option<String> {
    use engine_bridge::llama_server::CompletionSample;
    use tunebook_study::Metric;
    let mut repeats = serde_json::Map::new();
    if let Some(speed) = &m.speed {
        let each =
            |f: fn(&CompletionSample) -> f64| -> Vec<f64> { speed.samples.iter().map(f).collect() };
        repeats.insert(
            Metric::DecodeTps.name().into(),
            each(|s| s.timings.predicted_per_second).into(),
        );
        repeats
            .insert(Metric::PrefillTps.name().into(), each(|s| s.timings.prompt_per_second).into());
        repeats.insert(Metric::TtftMs.name().into(), each(|s| s.ttft_ms).into());
    }
    let mut items = serde_json::Map::new();
    let (questions, points) = m.items();
    for (metric, n) in [(Metric::QualityScore, questions), (Metric::ContextPassRate, points)] {
        if let Some(n) = n {
            items.insert(metric.name().into(), n.into());
        }
    }
    // Each question's verdict, in the suite's order: two trials of a
    // study asked the same questions are compared on those they answered
    // differently (see `tunebook_study::findings`' paired items).
    let mut verdicts = serde_json::Map::new();
    if let Some(q) = &m.quality {
        let passed: String = q.cases.iter().map(|c| if c.passed { '1' } else { '0' }).collect();
        if !passed.is_empty() {
            verdicts.insert(Metric::QualityScore.name().into(), passed.into());
        }
    }
    (!repeats.is_empty() || !items.is_empty()).then(|| {
        serde_json::json!({ "repeats": repeats, "items": items, "verdicts": verdicts }).to_string()
    })
}

/// The full measurement of a finished trial, as stored (JSON).
pub async fn measurement(db: &Db, id: i64) -> Result<Option<serde_json::Value>, sqlx::Error> {
    let text: Option<Option<String>> =
        sqlx::query_scalar("SELECT measurement FROM trials WHERE id = $1")
            .bind(id)
            .fetch_optional(&db.pool)
            .await?;
    Ok(text.flatten().and_then(|t| serde_json::from_str(&t).ok()))
}

/// What a trial's page shows besides its [`TrialRow`]: the command as
/// launched (JSON: program, args, env), what the engine read back (JSON),
/// and the engine's last lines.
#[derive(Debug, Default)]
pub struct Extras {
    pub command: Option<String>,
    pub props: Option<String>,
    pub log_tail: Option<String>,
}

from_row!(Extras { command, props, log_tail });

pub async fn extras(db: &Db, id: i64) -> Result<Option<Extras>, sqlx::Error> {
    sqlx::query_as("SELECT command, props, log_tail FROM trials WHERE id = $1")
        .bind(id)
        .fetch_optional(&db.pool)
        .await
}

/// Marks a trial failed, with its cause and the engine's log tail.
pub async fn finish_failed(db: &Db, id: i64, failure: &Failure) -> Result<(), sqlx::Error> {
    sqlx::query(
        "UPDATE trials SET state = $1, finished_ms = $2, failure_kind = $3, error = $4, \
         log_tail = $5 WHERE id = $6",
    )
    .bind(State::Failed.as_str())
    .bind(now_ms())
    .bind(failure.kind.label())
    .bind(&failure.message)
    .bind(failure.log_tail.join("\n"))
    .bind(id)
    .execute(&db.pool)
    .await?;
    Ok(())
}

/// Marks a trial pruned: never launched, for `reason`.
pub async fn finish_pruned(db: &Db, id: i64, reason: &str) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE trials SET state = $1, finished_ms = $2, error = $3 WHERE id = $4")
        .bind(State::Pruned.as_str())
        .bind(now_ms())
        .bind(reason)
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Records the settings the engine did not run as asked (setting → what
/// ran); nothing when all ran as asked.
pub async fn set_mismatched(
    db: &Db,
    id: i64,
    mismatched: &BTreeMap<String, String>,
) -> Result<(), sqlx::Error> {
    if mismatched.is_empty() {
        return Ok(());
    }
    sqlx::query("UPDATE trials SET mismatched = $1 WHERE id = $2")
        .bind(serde_json::to_string(mismatched).expect("a map serializes"))
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Adds to a trial's note (probes skipped, drift seen).
pub async fn append_note(db: &Db, id: i64, text: &str) -> Result<(), sqlx::Error> {
    let note: Option<Option<String>> = sqlx::query_scalar("SELECT note FROM trials WHERE id = $1")
        .bind(id)
        .fetch_optional(&db.pool)
        .await?;
    let note = match note.flatten() {
        Some(n) if !n.is_empty() => format!("{n}; {text}"),
        _ => text.to_string(),
    };
    sqlx::query("UPDATE trials SET note = $1 WHERE id = $2")
        .bind(note)
        .bind(id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Flags drift on trials of a study from `from_id` to `to_id`.
pub async fn set_drift(
    db: &Db,
    study_id: i64,
    from_id: i64,
    to_id: i64,
    pct: f64,
) -> Result<(), sqlx::Error> {
    sqlx::query("UPDATE trials SET drift_pct = $1 WHERE study_id = $2 AND id >= $3 AND id <= $4")
        .bind(pct)
        .bind(study_id)
        .bind(from_id)
        .bind(to_id)
        .execute(&db.pool)
        .await?;
    Ok(())
}

/// Stores a finished trial read from an export or from llama-bench, with
/// its metrics, in one transaction for the whole batch. Returns the new ids.
pub async fn import(db: &Db, records: &[TrialRow]) -> Result<Vec<i64>, sqlx::Error> {
    let names = columns::names_in(IN_IMPORT);
    let n = columns::carried_in(IN_IMPORT).count();
    let places: Vec<String> = (1..=n + 1).map(|i| format!("${i}")).collect();
    let sql = format!(
        "INSERT INTO trials ({names}, finished_ms) VALUES ({}) RETURNING id",
        places.join(", ")
    );
    let mut tx = db.pool.begin().await?;
    let mut ids = Vec::with_capacity(records.len());
    for t in records {
        let values = serde_json::to_value(t).map_err(|e| sqlx::Error::Encode(Box::new(e)))?;
        let mut q = sqlx::query(sqlx::AssertSqlSafe(sql.clone()));
        for c in columns::carried_in(IN_IMPORT) {
            q = columns::bind(q, c.kind, values.get(c.name));
        }
        let row = crate::db::only(q.bind(now_ms()).fetch_all(&mut *tx).await?)?;
        ids.push(sqlx::Row::try_get(&row, 0)?);
    }
    tx.commit().await?;
    Ok(ids)
}
