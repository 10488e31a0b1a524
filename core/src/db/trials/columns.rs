//! The columns of a trial, listed once: every query that reads or writes
//! more than a few of them (a [`super::TrialRow`], a worker's result, a
//! study's history, an import) takes its columns from [`COLUMNS`], and
//! moves their values with [`bind`] and [`read`] by their [`Col`] kind.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use serde_json::Value;
use sqlx::Row as _;
use tunebook_domain::Metric;

/// How a column is typed, for moving it between databases and JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Col {
    Int,
    Real,
    Text,
}

/// One column of `trials`, and the rows that carry it (`IN_*` flags).
pub struct Column {
    pub name: &'static str,
    pub kind: Col,
    carried_in: u8,
}

/// In a [`super::TrialRow`]: what the pages and the runners read.
pub const IN_ROW: u8 = 1;
/// In what a worker sends back of a trial it ran.
pub const IN_RESULT: u8 = 2;
/// In a study's lean history ([`super::HistoryRow`]), in this order.
pub const IN_HISTORY: u8 = 4;
/// Written by an import (of an export or of llama-bench's results).
pub const IN_IMPORT: u8 = 8;

const fn c(name: &'static str, kind: Col, carried_in: u8) -> Column {
    Column { name, kind, carried_in }
}

use Col::{Int, Real, Text};

/// Every column of `trials` a row, a result, a history or an import
/// carries besides the metrics' ([`metric_columns`]). The order is the
/// history's: these, then the metrics.
pub const COLUMNS: &[Column] = &[
    c("id", Int, IN_ROW | IN_HISTORY),
    c("profile", Text, IN_ROW | IN_IMPORT),
    c("model", Text, IN_ROW | IN_IMPORT),
    c("state", Text, IN_ROW | IN_RESULT | IN_HISTORY | IN_IMPORT),
    c("role", Text, IN_ROW | IN_HISTORY | IN_IMPORT),
    c("settings", Text, IN_ROW | IN_HISTORY | IN_IMPORT),
    // JSON: the program, its arguments and environment, and `display`.
    // Never a worker's to say: the server writes it from the profile.
    c("command", Text, IN_ROW),
    c("created_ms", Int, IN_ROW | IN_IMPORT),
    c("started_ms", Int, IN_ROW | IN_RESULT),
    c("finished_ms", Int, IN_RESULT),
    c("failure_kind", Text, IN_ROW | IN_RESULT | IN_HISTORY | IN_IMPORT),
    c("client_decode_tps", Real, IN_ROW | IN_RESULT | IN_IMPORT),
    c("prompt_tokens", Int, IN_ROW | IN_RESULT | IN_IMPORT),
    c("tokens_requested", Int, IN_ROW | IN_RESULT | IN_IMPORT),
    c("tokens_generated", Int, IN_ROW | IN_RESULT | IN_IMPORT),
    c("n_ctx", Int, IN_ROW | IN_RESULT | IN_IMPORT),
    // What the engine said of itself (`/props`), as JSON.
    c("props", Text, IN_RESULT),
    c("error", Text, IN_ROW | IN_RESULT | IN_IMPORT),
    c("log_tail", Text, IN_RESULT),
    // The whole measurement, as JSON.
    c("measurement", Text, IN_RESULT),
    c("ceiling_tps", Real, IN_ROW | IN_RESULT | IN_IMPORT),
    c("expected_load_ms", Real, IN_ROW | IN_RESULT),
    c("load_state", Text, IN_ROW | IN_RESULT),
    c("study_id", Int, IN_ROW | IN_IMPORT),
    c("note", Text, IN_ROW | IN_IMPORT),
    c("drift_pct", Real, IN_ROW | IN_IMPORT),
    c("machine", Text, IN_ROW | IN_IMPORT),
    // JSON: each setting the engine did not run as asked, and what it ran.
    c("mismatched", Text, IN_ROW | IN_RESULT | IN_IMPORT),
    // JSON: each speed per measured request, the items behind each share.
    c("support", Text, IN_ROW | IN_RESULT | IN_IMPORT),
];

/// A column for each metric, named as the metric, carried in every kind
/// of row, in the order of [`Metric::ALL`].
pub fn metric_columns() -> &'static [Column] {
    static ALL: LazyLock<Vec<Column>> = LazyLock::new(|| {
        Metric::ALL
            .into_iter()
            .map(|m| {
                c(
                    m.name(),
                    if m.whole() { Int } else { Real },
                    IN_ROW | IN_RESULT | IN_HISTORY | IN_IMPORT,
                )
            })
            .collect()
    });
    &ALL
}

/// The columns a kind of row carries: [`COLUMNS`]' in order, then the
/// metrics'.
pub fn carried_in(flag: u8) -> impl Iterator<Item = &'static Column> {
    COLUMNS.iter().chain(metric_columns()).filter(move |c| c.carried_in & flag != 0)
}

/// The names of the columns `flag` marks, comma-separated for a query.
pub fn names_in(flag: u8) -> String {
    carried_in(flag).map(|c| c.name).collect::<Vec<_>>().join(", ")
}

/// A sample's columns (the `samples` table, beside its `trial_id`).
pub const SAMPLE: &[(&str, Col)] = &[
    ("idx", Int),
    ("ttft_ms", Real),
    ("total_ms", Real),
    ("client_decode_tps", Real),
    ("prompt_n", Int),
    ("prompt_ms", Real),
    ("prompt_tps", Real),
    ("predicted_n", Int),
    ("predicted_ms", Real),
    ("predicted_tps", Real),
];

/// The names of [`SAMPLE`]'s columns, comma-separated for a query.
pub fn sample_names() -> String {
    SAMPLE.iter().map(|(name, _)| *name).collect::<Vec<_>>().join(", ")
}

/// `q` with `v` bound as a `col` (NULL when absent or of another type).
pub fn bind<'q>(
    q: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    col: Col,
    v: Option<&Value>,
) -> sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments> {
    let v = v.filter(|v| !v.is_null());
    match col {
        Int => q.bind(v.and_then(Value::as_i64)),
        Real => q.bind(v.and_then(Value::as_f64)),
        Text => q.bind(v.and_then(Value::as_str).map(str::to_string)),
    }
}

/// A row's values by name, `cols` being the columns it was selected with.
pub fn read<'a>(
    row: &sqlx::any::AnyRow,
    cols: impl IntoIterator<Item = (&'a str, Col)>,
) -> Result<BTreeMap<String, Value>, sqlx::Error> {
    let mut out = BTreeMap::new();
    for (i, (name, col)) in cols.into_iter().enumerate() {
        let v = match col {
            Int => row.try_get::<Option<i64>, _>(i)?.map(Value::from),
            Real => row.try_get::<Option<f64>, _>(i)?.map(Value::from),
            Text => row.try_get::<Option<String>, _>(i)?.map(Value::from),
        };
        out.insert(name.to_string(), v.unwrap_or(Value::Null));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::trials::{HistoryRow, MetricColumns, TrialRow};

    /// Every metric measured: the metrics show as fields only when they are.
    fn measured() -> MetricColumns {
        MetricColumns(tunebook_domain::Metrics::of(Metric::ALL.map(|m| (m, Some(1.0)))))
    }

    fn fields<T: serde::Serialize>(row: T) -> Vec<String> {
        let value = serde_json::to_value(row).unwrap();
        value.as_object().unwrap().keys().cloned().collect()
    }

    fn sorted(mut names: Vec<String>) -> Vec<String> {
        names.sort();
        names
    }

    #[test]
    fn a_trial_row_has_a_field_for_each_of_its_columns_and_its_worker() {
        let mut columns: Vec<String> = carried_in(IN_ROW).map(|c| c.name.to_string()).collect();
        columns.push("worker".into());
        let row = TrialRow { metrics: measured(), ..Default::default() };
        assert_eq!(sorted(fields(row)), sorted(columns));
    }

    #[test]
    fn a_history_row_has_its_columns_in_their_order() {
        // Positional: the history is read as arrays.
        let columns: Vec<String> = carried_in(IN_HISTORY).map(|c| c.name.to_string()).collect();
        let row = HistoryRow { metrics: measured(), ..Default::default() };
        let text = serde_json::to_string(&row).unwrap();
        let order: Vec<usize> =
            columns.iter().map(|c| text.find(&format!("\"{c}\"")).unwrap()).collect();
        assert!(order.windows(2).all(|w| w[0] < w[1]), "{columns:?} vs {text}");
        assert_eq!(sorted(fields(row.clone())), sorted(columns.clone()));
        // And read back from an array in that order.
        let object = serde_json::to_value(&row).unwrap();
        let array: Vec<serde_json::Value> = columns.iter().map(|c| object[c].clone()).collect();
        let read: HistoryRow = serde_json::from_value(array.into()).unwrap();
        assert_eq!(read, row);
    }

    #[test]
    fn the_words_stored_are_the_words_sent() {
        use tunebook_domain::{Role, TrialState};
        for s in TrialState::ALL {
            assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
            assert_eq!(TrialState::parse(s.as_str()), Some(s));
        }
        for r in Role::ALL {
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
            assert_eq!(Role::parse(r.as_str()), Some(r));
        }
    }

    #[test]
    fn imports_and_results_write_only_known_columns() {
        for c in carried_in(IN_IMPORT) {
            assert!(c.carried_in & IN_ROW != 0, "{} is imported from a row", c.name);
        }
        assert!(carried_in(IN_RESULT).any(|c| c.name == "state"));
        assert!(!carried_in(IN_RESULT).any(|c| c.name == "id" || c.name == "study_id"));
    }
}
