//! Trials and their samples.

use std::collections::BTreeMap;

use engine_bridge::{Failure, Outcome};
use tunebook_app::types::{SampleView, TrialQuery, TrialState, TrialView};
use tunebook_study::{Goal, Measure, Metric};

use super::{Db, Kind, now_ms};

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
    pub role: &'a str,
    pub note: &'a str,
}

/// Everything a finished trial measured.
pub struct Measured<'a> {
    pub outcome: &'a Outcome,
    /// The decode speed memory bandwidth allows (see `planner`).
    pub ceiling_tps: Option<f64>,
    /// Measured on an engine an earlier trial launched: no load time of
    /// its own.
    pub reused: bool,
}

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
    .bind(TrialState::Queued.as_str())
    .bind(now_ms())
    .bind(t.tokens_requested.map(i64::from))
    .bind(t.study.as_ref().map(|s| s.study_id))
    .bind(t.study.as_ref().map(|s| s.role))
    .bind(t.study.as_ref().map(|s| s.note))
    .bind(t.target)
    .bind(t.machine)
    .fetch_one(&db.pool)
    .await
}

/// Moves a trial to a new phase.
pub async fn set_state(db: &Db, id: i64, state: TrialState) -> Result<(), sqlx::Error> {
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
    .bind(TrialState::Done.as_str())
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
    .bind(TrialState::Done.as_str())
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
    sqlx::query(
        "UPDATE trials SET state = $1, finished_ms = $2, load_ms = $3, ttft_ms = $4, \
         prefill_tps = $5, decode_tps = $6, client_decode_tps = $7, prompt_tokens = $8, \
         tokens_generated = $9, n_ctx = $10, props = $11, peak_rss_bytes = $12, \
         mem_available_drop_bytes = $13, peak_gpu_bytes = $14, measurement = $15, \
         quality_score = $16, context_pass_rate = $17, ceiling_tps = $18, \
         pct_of_ceiling = $19, perplexity = $20, context_tokens = $21 WHERE id = $22",
    )
    .bind(TrialState::Done.as_str())
    .bind(now_ms())
    .bind((!m.reused).then_some(o.load_time.as_secs_f64() * 1e3))
    .bind(s.map(|s| s.ttft_ms))
    .bind(s.map(|s| s.prefill_tps))
    .bind(s.map(|s| s.decode_tps))
    .bind(s.and_then(|s| s.client_decode_tps))
    .bind(s.map(|s| s.prompt_tokens as i64))
    .bind(s.map(|s| s.tokens_generated as i64))
    .bind(o.props.as_ref().and_then(|p| p.n_ctx).map(|n| n as i64))
    .bind(o.props.as_ref().map(|p| serde_json::to_string(p).expect("props serialize")))
    .bind(o.memory.peak_rss_bytes as i64)
    .bind(o.memory.mem_available_drop_bytes.map(|b| b as i64))
    .bind(o.memory.peak_gpu_bytes.map(|b| b as i64))
    .bind(serde_json::to_string(&o.measurement).expect("a measurement serializes"))
    .bind(o.measurement.quality.as_ref().map(|q| q.score))
    .bind(o.measurement.context_pass_rate())
    .bind(m.ceiling_tps)
    .bind(m.ceiling_tps.zip(s.map(|s| s.decode_tps)).map(|(c, d)| 100.0 * d / c))
    .bind(o.measurement.perplexity.as_ref().map(|p| p.ppl))
    .bind(o.measurement.context_tokens().map(|t| t as i64))
    .bind(id)
    .execute(&mut *tx)
    .await?;
    tx.commit().await
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

/// What a trial's page shows besides its [`TrialView`]: the command as
/// launched (JSON: program, args, env), what the engine read back (JSON),
/// and the engine's last lines.
#[derive(Debug, Default, sqlx::FromRow)]
pub struct Extras {
    pub command: Option<String>,
    pub props: Option<String>,
    pub log_tail: Option<String>,
}

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
    .bind(TrialState::Failed.as_str())
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
        .bind(TrialState::Pruned.as_str())
        .bind(now_ms())
        .bind(reason)
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

/// Stores a finished trial read from an export or from llama-bench, with
/// its metrics, in one transaction for the whole batch. Returns the new ids.
pub async fn import(db: &Db, records: &[TrialView]) -> Result<Vec<i64>, sqlx::Error> {
    let mut tx = db.pool.begin().await?;
    let mut ids = Vec::with_capacity(records.len());
    for t in records {
        let id: i64 = sqlx::query_scalar(
            "INSERT INTO trials (profile, model, settings, state, created_ms, finished_ms, load_ms, \
             ttft_ms, prefill_tps, decode_tps, client_decode_tps, prompt_tokens, tokens_requested, \
             tokens_generated, n_ctx, peak_rss_bytes, mem_available_drop_bytes, peak_gpu_bytes, \
             quality_score, context_pass_rate, ceiling_tps, pct_of_ceiling, perplexity, \
             failure_kind, error, study_id, role, note, drift_pct, machine, context_tokens) VALUES \
             ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, \
             $20, $21, $22, $23, $24, $25, $26, $27, $28, $29, $30, $31) RETURNING id",
        )
        .bind(&t.profile)
        .bind(&t.model)
        .bind(serde_json::to_string(&t.settings).expect("a string map serializes"))
        .bind(t.state.as_str())
        .bind(t.created_ms)
        .bind(now_ms())
        .bind(t.load_ms)
        .bind(t.ttft_ms)
        .bind(t.prefill_tps)
        .bind(t.decode_tps)
        .bind(t.client_decode_tps)
        .bind(t.prompt_tokens)
        .bind(t.tokens_requested)
        .bind(t.tokens_generated)
        .bind(t.n_ctx)
        .bind(t.peak_rss_bytes)
        .bind(t.mem_available_drop_bytes)
        .bind(t.peak_gpu_bytes)
        .bind(t.quality_score)
        .bind(t.context_pass_rate)
        .bind(t.ceiling_tps)
        .bind(t.pct_of_ceiling)
        .bind(t.perplexity)
        .bind(&t.failure_kind)
        .bind(&t.error)
        .bind(t.study_id)
        .bind(&t.role)
        .bind(&t.note)
        .bind(t.drift_pct)
        .bind(&t.machine)
        .bind(t.context_tokens)
        .fetch_one(&mut *tx)
        .await?;
        ids.push(id);
    }
    tx.commit().await?;
    Ok(ids)
}

/// A trial as a study's history needs it: settings, state and metrics,
/// without the command line, load progress and the other display fields.
/// The field order is the column order of [`history`]'s arrays.
#[derive(Debug, Clone, PartialEq, sqlx::FromRow, serde::Serialize, serde::Deserialize)]
pub struct HistoryRow {
    pub id: i64,
    pub state: String,
    pub role: Option<String>,
    pub settings: String,
    pub failure_kind: Option<String>,
    pub load_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub prefill_tps: Option<f64>,
    pub decode_tps: Option<f64>,
    pub peak_rss_bytes: Option<i64>,
    pub mem_available_drop_bytes: Option<i64>,
    pub peak_gpu_bytes: Option<i64>,
    pub quality_score: Option<f64>,
    pub context_pass_rate: Option<f64>,
    pub context_tokens: Option<i64>,
    pub pct_of_ceiling: Option<f64>,
    pub perplexity: Option<f64>,
}

/// The columns of [`HistoryRow`], in its field order; REAL ones marked.
const HISTORY_COLUMNS: [(&str, bool); 17] = [
    ("id", false),
    ("state", false),
    ("role", false),
    ("settings", false),
    ("failure_kind", false),
    ("load_ms", true),
    ("ttft_ms", true),
    ("prefill_tps", true),
    ("decode_tps", true),
    ("peak_rss_bytes", false),
    ("mem_available_drop_bytes", false),
    ("peak_gpu_bytes", false),
    ("quality_score", true),
    ("context_pass_rate", true),
    ("context_tokens", false),
    ("pct_of_ceiling", true),
    ("perplexity", true),
];

/// A study's history, oldest first: the lean query behind strategies,
/// Pareto fronts and large tables.
///
/// The database packs the rows into one JSON array of arrays, which serde
/// reads far faster than the generic driver decodes a row at a time
/// (100,000 trials: see `examples/history_bench.rs`).
pub async fn history(db: &Db, study_id: i64) -> Result<Vec<HistoryRow>, sqlx::Error> {
    let columns = |real: fn(&str) -> String| {
        HISTORY_COLUMNS
            .iter()
            .map(|(c, is_real)| if *is_real { real(c) } else { c.to_string() })
            .collect::<Vec<_>>()
            .join(", ")
    };
    let sql = match db.kind {
        // SQLite's JSON writes floats with 15 digits; printf's `%!.17g`
        // keeps every one.
        Kind::Sqlite => format!(
            "SELECT COALESCE(json_group_array(json_array({})), '[]') FROM \
             (SELECT * FROM trials WHERE study_id = $1 ORDER BY id)",
            columns(|c| format!("IIF({c} IS NULL, NULL, json(printf('%!.17g', {c})))"))
        ),
        Kind::Postgres => format!(
            "SELECT COALESCE(json_agg(json_build_array({}) ORDER BY id), '[]')::text \
             FROM trials WHERE study_id = $1",
            columns(|c| c.to_string())
        ),
    };
    let packed: String =
        sqlx::query_scalar(sqlx::AssertSqlSafe(sql)).bind(study_id).fetch_one(&db.pool).await?;
    serde_json::from_str(&packed).map_err(|e| sqlx::Error::Decode(Box::new(e)))
}

/// The same rows, decoded one at a time; kept to check [`history`] against.
pub async fn history_rows(db: &Db, study_id: i64) -> Result<Vec<HistoryRow>, sqlx::Error> {
    let columns: Vec<&str> = HISTORY_COLUMNS.iter().map(|(c, _)| *c).collect();
    let sql = format!("SELECT {} FROM trials WHERE study_id = $1 ORDER BY id", columns.join(", "));
    sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(study_id).fetch_all(&db.pool).await
}

/// The page of a study's trials a table asks for, and how many match.
///
/// Sorting and filtering happen in the database, so a study of 100,000
/// trials costs one page of rows (see `examples/history_bench.rs`).
pub async fn page(
    db: &Db,
    study_id: i64,
    query: &TrialQuery,
) -> Result<(Vec<TrialView>, u64), sqlx::Error> {
    // The sort column comes from a closed set: a metric's column, or `id`.
    let direction = if query.descending { "DESC" } else { "ASC" };
    let order = match Metric::parse(&query.sort) {
        // Unknown values last either way; ties newest first.
        Some(m) => format!("{0} IS NULL, {0} {direction}, id DESC", m.name()),
        // By id the index on (study_id, id) gives the order.
        None => format!("id {direction}"),
    };
    let filter = Filter::new(&query.filter);
    let limit = query.limit.clamp(1, 1000);
    let offset = query.offset.min(i64::MAX as u64);
    // The page's ids first, so sorting carries two columns, not whole rows.
    let sql = format!(
        "{} WHERE id IN (SELECT id FROM trials WHERE study_id = $1{} ORDER BY {order} \
         LIMIT {limit} OFFSET {offset}) ORDER BY {order}",
        select_trials!(""),
        filter.clause()
    );
    let rows: Vec<Row> = sqlx::query_as_with(sqlx::AssertSqlSafe(sql), filter.arguments(study_id)?)
        .fetch_all(&db.pool)
        .await?;
    let count = format!("SELECT COUNT(*) FROM trials WHERE study_id = $1{}", filter.clause());
    let matching: i64 =
        sqlx::query_scalar_with(sqlx::AssertSqlSafe(count), filter.arguments(study_id)?)
            .fetch_one(&db.pool)
            .await?;
    Ok((rows.into_iter().map(Row::into_view).collect(), matching as u64))
}

/// A table's filter text as two `LIKE` patterns: $2 for the state and the
/// role, $3 for the settings' JSON, where `k=v` is stored as `"k":"v"`.
/// Blank text matches every trial.
struct Filter(Option<(String, String)>);

impl Filter {
    fn new(text: &str) -> Self {
        let needle = text.trim().to_lowercase();
        let like = |s: &str| {
            format!("%{}%", s.replace('\\', "\\\\").replace('%', "\\%").replace('_', "\\_"))
        };
        Self((!needle.is_empty()).then(|| (like(&needle), like(&needle.replace('=', "\":\"")))))
    }

    fn clause(&self) -> &'static str {
        match self.0 {
            None => "",
            Some(_) => {
                " AND (LOWER(state) LIKE $2 ESCAPE '\\' OR LOWER(COALESCE(role, '')) LIKE $2 \
                 ESCAPE '\\' OR LOWER(settings) LIKE $3 ESCAPE '\\')"
            }
        }
    }

    /// The study ($1) and, where there is a filter, its patterns.
    fn arguments(&self, study_id: i64) -> Result<sqlx::any::AnyArguments, sqlx::Error> {
        use sqlx::Arguments as _;
        let mut args = sqlx::any::AnyArguments::default();
        args.add(study_id).map_err(sqlx::Error::Encode)?;
        if let Some((state, settings)) = &self.0 {
            args.add(state.clone()).map_err(sqlx::Error::Encode)?;
            args.add(settings.clone()).map_err(sqlx::Error::Encode)?;
        }
        Ok(args)
    }
}

/// Trials of a study that count against its budget: run to an end, not
/// pruned, not cut off (as `studies::counts_against_budget` says).
pub async fn counted(db: &Db, study_id: i64) -> Result<u64, sqlx::Error> {
    let n: i64 = sqlx::query_scalar(
        "SELECT COUNT(*) FROM trials WHERE study_id = $1 AND state IN ($2, $3) \
         AND COALESCE(failure_kind, '') <> $4",
    )
    .bind(study_id)
    .bind(TrialState::Done.as_str())
    .bind(TrialState::Failed.as_str())
    .bind(engine_bridge::FailureKind::Interrupted.label())
    .fetch_one(&db.pool)
    .await?;
    Ok(n as u64)
}

/// A study's trials that have not reached a final state (one, or one per
/// worker of a study on workers), oldest first; at most `limit`.
pub async fn in_flight(db: &Db, study_id: i64, limit: i64) -> Result<Vec<TrialView>, sqlx::Error> {
    let rows: Vec<Row> = sqlx::query_as(select_trials!(
        "WHERE study_id = $1 AND state NOT IN ($2, $3, $4) ORDER BY id LIMIT $5"
    ))
    .bind(study_id)
    .bind(TrialState::Done.as_str())
    .bind(TrialState::Failed.as_str())
    .bind(TrialState::Pruned.as_str())
    .bind(limit)
    .fetch_all(&db.pool)
    .await?;
    Ok(rows.into_iter().map(Row::into_view).collect())
}

/// The done trial with the best value of a metric (of one class of
/// machine, where given): its id and the value.
pub async fn best(
    db: &Db,
    study_id: i64,
    metric: Metric,
    goal: Goal,
    machine: Option<&str>,
) -> Result<Option<(i64, f64)>, sqlx::Error> {
    let column = metric.name();
    let direction = if goal == Goal::Max { "DESC" } else { "ASC" };
    let on = if machine.is_some() { " AND machine = $3" } else { "" };
    let sql = format!(
        "SELECT id, CAST({column} AS DOUBLE PRECISION) FROM trials \
         WHERE study_id = $1 AND state = $2 AND {column} IS NOT NULL{on} \
         ORDER BY {column} {direction}, id LIMIT 1"
    );
    let mut query =
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(study_id).bind(TrialState::Done.as_str());
    if let Some(m) = machine {
        query = query.bind(m);
    }
    query.fetch_optional(&db.pool).await
}

/// The classes of machine a study's trials ran on (or are queued for).
pub async fn machines(db: &Db, study_id: i64) -> Result<Vec<String>, sqlx::Error> {
    sqlx::query_scalar(
        "SELECT DISTINCT machine FROM trials WHERE study_id = $1 AND machine IS NOT NULL \
         ORDER BY machine",
    )
    .bind(study_id)
    .fetch_all(&db.pool)
    .await
}

/// The done trials that have every one of `measures`, oldest first: id,
/// settings and the values, for plots and Pareto fronts. A metric is read
/// from its column, a setting from the trial's settings (a number, else the
/// trial is left out).
pub async fn points(
    db: &Db,
    study_id: i64,
    measures: &[Measure],
    machine: Option<&str>,
) -> Result<Vec<(i64, BTreeMap<String, String>, Vec<f64>)>, sqlx::Error> {
    use sqlx::Row as _;
    let metrics: Vec<Metric> = measures.iter().filter_map(Measure::metric).collect();
    let values: Vec<String> =
        metrics.iter().map(|m| format!("CAST({} AS DOUBLE PRECISION)", m.name())).collect();
    let measured: String =
        metrics.iter().map(|m| format!(" AND {} IS NOT NULL", m.name())).collect();
    let sql = format!(
        "SELECT id, settings{}{} FROM trials WHERE study_id = $1 AND state = $2{measured}{} ORDER BY id",
        if values.is_empty() { "" } else { ", " },
        values.join(", "),
        if machine.is_some() { " AND machine = $3" } else { "" }
    );
    let mut query =
        sqlx::query(sqlx::AssertSqlSafe(sql)).bind(study_id).bind(TrialState::Done.as_str());
    if let Some(m) = machine {
        query = query.bind(m);
    }
    let rows = query.fetch_all(&db.pool).await?;
    let mut out = Vec::with_capacity(rows.len());
    for row in &rows {
        let settings: String = row.try_get(1)?;
        let settings: BTreeMap<String, String> =
            serde_json::from_str(&settings).map_err(|e| sqlx::Error::Decode(Box::new(e)))?;
        let measured: BTreeMap<Metric, f64> = (0..metrics.len())
            .map(|i| Ok((metrics[i], row.try_get::<f64, _>(i + 2)?)))
            .collect::<Result<_, sqlx::Error>>()?;
        let values: Option<Vec<f64>> =
            measures.iter().map(|m| m.value(&measured, &settings)).collect();
        if let Some(values) = values {
            out.push((row.try_get(0)?, settings, values));
        }
    }
    Ok(out)
}
