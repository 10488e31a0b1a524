//! Trials as the pages, the API and exports show them, mapped from the
//! typed [`Trial`]; and an exported trial turned back into a row to import.

use tunebook_views::types::{SampleView, TrialQuery, TrialView};

use crate::db::trials::{PageQuery, SampleRow, TrialRow};
use crate::trial::Trial;

impl From<Trial> for TrialView {
    fn from(t: Trial) -> Self {
        TrialView {
            id: t.id,
            profile: t.profile,
            model: t.model,
            settings: t.settings,
            state: t.state,
            command: t.command,
            created_ms: t.created_ms,
            metrics: t.metrics,
            client_decode_tps: t.client_decode_tps,
            prompt_tokens: t.prompt_tokens,
            tokens_requested: t.tokens_requested,
            tokens_generated: t.tokens_generated,
            n_ctx: t.n_ctx,
            ceiling_tps: t.ceiling_tps,
            started_ms: t.started_ms,
            expected_load_ms: t.expected_load_ms,
            load_state: t.load_state,
            failure_kind: t.failure_kind.map(|k| k.label().to_string()),
            error: t.error,
            study_id: t.study_id,
            role: t.role,
            note: t.note,
            drift_pct: t.drift_pct,
            machine: t.machine,
            worker: t.worker,
            mismatched: t.mismatched,
            support: t.support,
        }
    }
}

/// A stored trial as shown: read as a [`Trial`], then mapped.
impl From<TrialRow> for TrialView {
    fn from(row: TrialRow) -> Self {
        Trial::from(row).into()
    }
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
    use crate::trial::{MAX_SUPPORT, support_of};
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
