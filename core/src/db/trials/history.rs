//! A study's trials as its history, its pages and its plots read them:
//! compact rows, pages filtered and sorted, counts, the best so far, and
//! the points on chosen measures.

use std::collections::BTreeMap;

use tunebook_study::{Goal, Measure, Metric};

use super::columns::{self, Col, IN_HISTORY};
use super::{MetricColumns, State, TrialRow, select};
use crate::db::rows::from_row;
use crate::db::{Db, Kind};

/// A trial as a study's history needs it: settings, state and metrics,
/// without the command line, load progress and the other display fields.
/// Read from [`history`]'s arrays, whose order is [`columns::IN_HISTORY`]'s:
/// the fields here, then each metric in [`Metric::ALL`]'s order.
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize)]
pub struct HistoryRow {
    pub id: i64,
    pub state: String,
    pub role: Option<String>,
    pub settings: String,
    pub failure_kind: Option<String>,
    /// Its metrics, a column each.
    #[serde(flatten)]
    pub metrics: MetricColumns,
}

from_row!(HistoryRow { id, state, role, settings, failure_kind; flatten metrics });

/// Read from an array, as [`history`] packs a row.
impl<'de> serde::Deserialize<'de> for HistoryRow {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Array;
        impl<'de> serde::de::Visitor<'de> for Array {
            type Value = HistoryRow;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a trial's history columns, as an array")
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut a: A,
            ) -> Result<HistoryRow, A::Error> {
                let short = || serde::de::Error::custom("a history row is short");
                let mut row = HistoryRow {
                    id: a.next_element()?.ok_or_else(short)?,
                    state: a.next_element()?.ok_or_else(short)?,
                    role: a.next_element()?.ok_or_else(short)?,
                    settings: a.next_element()?.ok_or_else(short)?,
                    failure_kind: a.next_element()?.ok_or_else(short)?,
                    metrics: MetricColumns::default(),
                };
                for m in Metric::ALL {
                    let value: Option<f64> = a.next_element()?.ok_or_else(short)?;
                    row.metrics.set(m, value);
                }
                Ok(row)
            }
        }
        d.deserialize_seq(Array)
    }
}

/// A study's history, oldest first: the lean query behind strategies,
/// Pareto fronts and large tables.
///
/// The database packs the rows into one JSON array of arrays, which serde
/// reads far faster than the generic driver decodes a row at a time
/// (100,000 trials: see `examples/history_bench.rs`).
pub async fn history(db: &Db, study_id: i64) -> Result<Vec<HistoryRow>, sqlx::Error> {
    let columns = |real: fn(&str) -> String| {
        columns::carried_in(IN_HISTORY)
            .map(|c| if c.kind == Col::Real { real(c.name) } else { c.name.to_string() })
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
    let columns = columns::names_in(IN_HISTORY);
    let sql = format!("SELECT {columns} FROM trials WHERE study_id = $1 ORDER BY id");
    sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(study_id).fetch_all(&db.pool).await
}

/// Which of a study's trials a table shows: sorted, filtered, one page.
#[derive(Debug, Clone, Copy)]
pub struct PageQuery<'a> {
    /// `id` or a metric's name.
    pub sort: &'a str,
    pub descending: bool,
    /// Case-insensitive text to find in the state, the role or the settings
    /// (`setting=value`); empty for every trial.
    pub filter: &'a str,
    pub offset: u64,
    pub limit: u64,
}

/// The page of a study's trials a table asks for, and how many match.
///
/// Sorting and filtering happen in the database, so a study of 100,000
/// trials costs one page of rows (see `examples/history_bench.rs`).
pub async fn page(
    db: &Db,
    study_id: i64,
    query: &PageQuery<'_>,
) -> Result<(Vec<TrialRow>, u64), sqlx::Error> {
    // The sort column comes from a closed set: a metric's column, or `id`.
    let direction = if query.descending { "DESC" } else { "ASC" };
    let order = match Metric::parse(query.sort) {
        // Unknown values last either way; ties newest first.
        Some(m) => format!("{0} IS NULL, {0} {direction}, id DESC", m.name()),
        // By id the index on (study_id, id) gives the order.
        None => format!("id {direction}"),
    };
    let filter = Filter::new(query.filter);
    let limit = query.limit.clamp(1, 1000);
    let offset = query.offset.min(i64::MAX as u64);
    // The page's ids first, so sorting carries two columns, not whole rows.
    let sql = select(&format!(
        "WHERE id IN (SELECT id FROM trials WHERE study_id = $1{} ORDER BY {order} \
         LIMIT {limit} OFFSET {offset}) ORDER BY {order}",
        filter.clause()
    ));
    let rows: Vec<TrialRow> =
        sqlx::query_as_with(sql, filter.arguments(study_id)?).fetch_all(&db.pool).await?;
    let count = format!("SELECT COUNT(*) FROM trials WHERE study_id = $1{}", filter.clause());
    let matching: i64 =
        sqlx::query_scalar_with(sqlx::AssertSqlSafe(count), filter.arguments(study_id)?)
            .fetch_one(&db.pool)
            .await?;
    Ok((rows, matching as u64))
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
    .bind(State::Done.as_str())
    .bind(State::Failed.as_str())
    .bind(engine_bridge::FailureKind::Interrupted.label())
    .fetch_one(&db.pool)
    .await?;
    Ok(n as u64)
}

/// A study's trials that have not reached a final state (one, or one per
/// worker of a study on workers), oldest first; at most `limit`.
pub async fn in_flight(db: &Db, study_id: i64, limit: i64) -> Result<Vec<TrialRow>, sqlx::Error> {
    sqlx::query_as(select("WHERE study_id = $1 AND state NOT IN ($2, $3, $4) ORDER BY id LIMIT $5"))
        .bind(study_id)
        .bind(State::Done.as_str())
        .bind(State::Failed.as_str())
        .bind(State::Pruned.as_str())
        .bind(limit)
        .fetch_all(&db.pool)
        .await
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
        sqlx::query_as(sqlx::AssertSqlSafe(sql)).bind(study_id).bind(State::Done.as_str());
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
    let mut query = sqlx::query(sqlx::AssertSqlSafe(sql)).bind(study_id).bind(State::Done.as_str());
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
