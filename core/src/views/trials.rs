//! Trials as the pages, the API and exports show them, built from
//! storage's rows; and an exported trial turned back into a row to import.

use tunebook_views::types::{SampleView, TrialQuery, TrialSupport, TrialView};

use crate::db::trials::{PageQuery, SampleRow, TrialRow};

impl From<TrialRow> for TrialView {
    fn from(row: TrialRow) -> Self {
        let command = row.command_display();
        let settings = row.settings();
        let state = row.state();
        let role = row.role();
        let mismatched = row
            .mismatched
            .as_deref()
            .and_then(|m| serde_json::from_str(m).ok())
            .unwrap_or_default();
        let support = support_of(row.support.as_deref());
        TrialView {
            id: row.id,
            profile: row.profile,
            model: row.model,
            settings,
            state,
            command,
            created_ms: row.created_ms,
            metrics: row.metrics.0,
            client_decode_tps: row.client_decode_tps,
            prompt_tokens: row.prompt_tokens,
            tokens_requested: row.tokens_requested,
            tokens_generated: row.tokens_generated,
            n_ctx: row.n_ctx,
            ceiling_tps: row.ceiling_tps,
            started_ms: row.started_ms,
            expected_load_ms: row.expected_load_ms,
            load_state: row.load_state,
            failure_kind: row.failure_kind,
            error: row.error,
            study_id: row.study_id,
            role,
            note: row.note,
            drift_pct: row.drift_pct,
            machine: row.machine,
            worker: row.worker,
            mismatched,
            support,
        }
    }
}

/// Most repeats of one metric, and metrics, a stored support is read with:
/// a worker's result is untrusted.
const MAX_SUPPORT: usize = 100;

/// A stored support (JSON), bounded; empty when absent or unreadable.
fn support_of(text: Option<&str>) -> TrialSupport {
    let mut s: TrialSupport = text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
    s.repeats = std::mem::take(&mut s.repeats).into_iter().take(MAX_SUPPORT).collect();
    for values in s.repeats.values_mut() {
        values.truncate(MAX_SUPPORT);
        values.retain(|v| v.is_finite());
    }
    s.items = std::mem::take(&mut s.items).into_iter().take(MAX_SUPPORT).collect();
    // Verdicts are kept only as the findings read them: `0`s and `1`s,
    // at most a suite's cap of them.
    s.verdicts = std::mem::take(&mut s.verdicts)
        .into_iter()
        .take(MAX_SUPPORT)
        .filter(|(_, v)| tunebook_study::findings::parse_verdicts(v).is_some())
        .collect();
    s
}

impl From<SampleRow> for SampleView {
    fn from(s: SampleRow) -> Self {
        SampleView {
            idx: s.idx,
            ttft_ms: s.ttft_ms,
            total_ms: s.total_ms,
            client_decode_tps: s.client_decode_tps,
            prompt_n: s.prompt_n,
            prompt_ms: s.prompt_ms,
            prompt_tps: s.prompt_tps,
            predicted_n: s.predicted_n,
            predicted_ms: s.predicted_ms,
            predicted_tps: s.predicted_tps,
        }
    }
}

/// A table's query as storage takes it.
pub fn page_query(q: &TrialQuery) -> PageQuery<'_> {
    PageQuery {
        sort: &q.sort,
        descending: q.descending,
        filter: &q.filter,
        offset: q.offset,
        limit: q.limit,
    }
}

/// An exported trial as a row to import. The export carries the command
/// only as shown, so none is imported; every other field has the same name
/// in both (`a_view_and_a_row_name_their_fields_alike`).
pub fn row_of(view: &TrialView) -> TrialRow {
    let mut value = serde_json::to_value(view).expect("a view serializes");
    value["settings"] = serde_json::to_string(&view.settings).expect("a map serializes").into();
    value["command"] = serde_json::Value::Null;
    value["mismatched"] = match view.mismatched.is_empty() {
        true => serde_json::Value::Null,
        false => serde_json::to_string(&view.mismatched).expect("a map serializes").into(),
    };
    value["support"] = match view.support.is_empty() {
        true => serde_json::Value::Null,
        false => serde_json::to_string(&view.support).expect("a map serializes").into(),
    };
    serde_json::from_value(value).expect("a row takes any view")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::db::trials::MetricColumns;
    use tunebook_views::types::{Metric, Metrics};

    #[test]
    fn a_stored_support_is_read_bounded_and_goes_back_as_it_came() {
        let many: Vec<f64> = (0..250).map(f64::from).collect();
        let text = serde_json::json!({
            "repeats": { "decode_tps": many },
            "items": { "quality_score": 8 },
            "verdicts": {
                "quality_score": "10110111",
                "context_pass_rate": "1x0",
                "same_top_rate": "1".repeat(engine_bridge::probes::limits::MAX_CASES + 1),
            },
        })
        .to_string();
        let support = support_of(Some(&text));
        assert_eq!(
            support.repeats["decode_tps"].len(),
            MAX_SUPPORT,
            "a worker's result is bounded"
        );
        assert_eq!(support.items["quality_score"], 8);
        // Verdicts only as the findings read them: `0`s and `1`s, a suite's cap.
        assert_eq!(support.verdicts.keys().collect::<Vec<_>>(), ["quality_score"]);
        assert_eq!(support.verdicts["quality_score"], "10110111");
        assert!(support_of(Some("not json")).is_empty());
        assert!(support_of(None).is_empty());
        // Exported and imported, it comes back the same.
        let view = TrialView { support: support.clone(), ..TrialView::from(TrialRow::default()) };
        assert_eq!(support_of(row_of(&view).support.as_deref()), support);
    }

    #[test]
    fn a_view_and_a_row_name_their_fields_alike() {
        let row = TrialRow {
            id: 7,
            settings: r#"{"threads":"4"}"#.into(),
            state: "done".into(),
            metrics: MetricColumns(Metrics::of([(Metric::DecodeTps, Some(12.5))])),
            machine: Some("m".into()),
            mismatched: Some(r#"{"ubatch_size":"64"}"#.into()),
            support: Some(r#"{"items":{"quality_score":8}}"#.into()),
            ..Default::default()
        };
        let view = TrialView::from(row.clone());
        assert_eq!(view.settings["threads"], "4");
        assert_eq!(view.state, tunebook_views::types::TrialState::Done);
        assert_eq!(view.mismatched["ubatch_size"], "64");
        let keys = |v: serde_json::Value| {
            v.as_object().unwrap().keys().cloned().collect::<std::collections::BTreeSet<_>>()
        };
        assert_eq!(
            keys(serde_json::to_value(&view).unwrap()),
            keys(serde_json::to_value(&row).unwrap())
        );
        assert_eq!(row_of(&view), TrialRow { command: None, ..row });
    }
}
