//! A study's trials as CSV, for a spreadsheet or a notebook: what the
//! study page's download and `tunebook export --format csv` write.

use std::collections::BTreeSet;
use std::io::Write;

use tunebook_views::types::TrialView;

/// What identifies a trial: the CSV's first columns.
const FIRST: [&str; 7] = ["id", "study_id", "role", "state", "profile", "model", "created_ms"];
/// What a trial records beside its metrics: the columns after them.
const LAST: [&str; 8] = [
    "client_decode_tps",
    "prompt_tokens",
    "tokens_requested",
    "tokens_generated",
    "n_ctx",
    "ceiling_tps",
    "failure_kind",
    "error",
];

/// The CSV's fixed columns, before one `setting.NAME` column per setting:
/// the trial's identity, every metric (in the list's order), then the
/// rest. A new metric is a new column without a word here.
fn columns() -> Vec<&'static str> {
    let metrics = tunebook_views::types::Metric::ALL.map(|m| m.name());
    FIRST.into_iter().chain(metrics).chain(LAST).collect()
}

/// Writes `list` as CSV: the fixed columns, then `setting.NAME` for every
/// setting any trial has. Text a spreadsheet would run as a formula (`=…`,
/// `@…`, and `+…`/`-…` that are not numbers) is written behind a `'`.
pub fn write(list: &[TrialView], out: &mut dyn Write) -> Result<(), csv::Error> {
    let names: BTreeSet<&String> = list.iter().flat_map(|t| t.settings.keys()).collect();
    let mut w = csv::Writer::from_writer(out);
    let columns = columns();
    let mut header: Vec<String> = columns.iter().map(|c| c.to_string()).collect();
    header.extend(names.iter().map(|n| format!("setting.{n}")));
    w.write_record(&header)?;
    for t in list {
        let v = serde_json::to_value(t).expect("a trial serializes");
        let mut row: Vec<String> = columns
            .iter()
            .map(|c| match &v[*c] {
                serde_json::Value::Null => String::new(),
                serde_json::Value::String(s) => inert(s),
                other => other.to_string(),
            })
            .collect();
        row.extend(names.iter().map(|n| inert(t.settings.get(*n).map_or("", String::as_str))));
        w.write_record(&row)?;
    }
    w.flush()?;
    Ok(())
}

/// `text` as a spreadsheet cell that cannot start a formula.
fn inert(text: &str) -> String {
    let formula = match text.chars().next() {
        Some('=' | '@' | '\t' | '\r') => true,
        Some('+' | '-') => text.parse::<f64>().is_err(),
        _ => false,
    };
    if formula { format!("'{text}") } else { text.to_string() }
}

/// A cell as it was before [`inert`] guarded it: what an import reads.
pub fn unguarded(cell: &str) -> &str {
    match cell.strip_prefix('\'') {
        Some(rest) if inert(rest) != rest => rest,
        _ => cell,
    }
}

/// The trials as CSV text.
pub fn to_string(list: &[TrialView]) -> String {
    let mut out = Vec::new();
    write(list, &mut out).expect("writing to memory");
    String::from_utf8(out).expect("CSV of UTF-8 text")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_row_per_trial_a_column_per_setting_and_no_formulas() {
        let mut t = TrialView::new(
            "demo",
            "m",
            [("n_gpu_layers".into(), "-1".into())].into(),
            tunebook_views::types::TrialState::Failed,
        );
        t.id = 3;
        t.error = Some("=HYPERLINK(\"http://x\")".into());
        let mut u = TrialView::new(
            "demo",
            "m",
            [("threads".into(), "4".into())].into(),
            tunebook_views::types::TrialState::Done,
        );
        u.id = 4;
        u.metrics.set(tunebook_views::types::Metric::DecodeTps, Some(51.5));
        let text = to_string(&[t, u]);
        let mut rows = csv::Reader::from_reader(text.as_bytes());
        let header = rows.headers().unwrap().clone();
        let at = |name: &str| header.iter().position(|h| h == name).unwrap();
        let rows: Vec<csv::StringRecord> = rows.records().map(Result::unwrap).collect();
        assert_eq!(rows.len(), 2);
        assert_eq!(&rows[0][at("setting.n_gpu_layers")], "-1", "a number stays a number");
        assert_eq!(&rows[0][at("error")], "'=HYPERLINK(\"http://x\")");
        assert_eq!(&rows[1][at("decode_tps")], "51.5");
        // Every metric has its column, from the list of metrics.
        for m in tunebook_views::types::Metric::ALL {
            assert!(header.iter().any(|h| h == m.name()), "{} has no column", m.name());
        }
        assert_eq!(&rows[1][at("setting.threads")], "4");
        assert_eq!(&rows[1][at("setting.n_gpu_layers")], "");
        // An import reads back what was guarded, and only that.
        assert_eq!(unguarded(&rows[0][at("error")]), "=HYPERLINK(\"http://x\")");
        assert_eq!(unguarded("'quoted"), "'quoted");
    }
}
