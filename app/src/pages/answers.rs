//! What a trial's model answered: each quality case's question, answer and
//! verdict, and each context-recall point's, read from the trial's stored
//! measurement, with how the questions reached the model (its chat
//! template, or raw).

use leptos::prelude::*;
use serde_json::Value;

/// One answered question as the page shows it.
#[derive(Debug, Clone, PartialEq)]
struct AnswerRow {
    id: String,
    question: String,
    answer: String,
    verdict: &'static str,
    /// Thinking tokens, where the model thought.
    thinking: String,
}

/// The quality suite's head line and cases from a measurement (JSON);
/// `None` where the quality probe did not run.
fn quality_rows(measurement: &Value) -> Option<(String, Vec<AnswerRow>)> {
    let quality = measurement.get("quality").filter(|q| !q.is_null())?;
    let cases = quality["cases"].as_array()?;
    let rows: Vec<AnswerRow> = cases
        .iter()
        .map(|c| AnswerRow {
            id: c["id"].as_str().unwrap_or_default().to_string(),
            question: c["prompt"].as_str().unwrap_or_default().to_string(),
            answer: c["answer"].as_str().unwrap_or_default().to_string(),
            verdict: if c["passed"] == Value::Bool(true) { "passed" } else { "failed" },
            thinking: c["thinking_tokens"].as_u64().map(|n| n.to_string()).unwrap_or_default(),
        })
        .collect();
    let passed = rows.iter().filter(|r| r.verdict == "passed").count();
    let how = match quality["style"].as_str() {
        Some("chat") => "asked through the model's chat template".to_string(),
        _ => quality["note"]
            .as_str()
            .map(str::to_string)
            .unwrap_or_else(|| "asked as raw completions".into()),
    };
    let head = format!(
        "Suite {}: {passed} of {} passed, {how}.",
        quality["suite"].as_str().unwrap_or_default(),
        rows.len()
    );
    Some((head, rows))
}

/// The context-recall points from a measurement, each as a row.
fn recall_rows(measurement: &Value) -> Option<Vec<AnswerRow>> {
    let points = measurement.get("context").filter(|c| !c.is_null())?.as_array()?;
    let rows = points
        .iter()
        .map(|p| {
            let skipped = p["skipped"].as_str();
            AnswerRow {
                id: format!(
                    "{} tokens, fact at {:.0} %",
                    p["size"].as_u64().unwrap_or(0),
                    p["depth"].as_f64().unwrap_or(0.0) * 100.0
                ),
                question: String::new(),
                answer: skipped
                    .map(|s| format!("(not asked: {s})"))
                    .unwrap_or_else(|| p["answer"].as_str().unwrap_or_default().to_string()),
                verdict: match (skipped, p["passed"] == Value::Bool(true)) {
                    (Some(_), _) => "skipped",
                    (None, true) => "recalled",
                    (None, false) => "missed",
                },
                thinking: String::new(),
            }
        })
        .collect();
    Some(rows)
}

/// The quality cases and recall points of a trial, where it ran them.
#[component]
pub fn Answers(measurement: Option<String>) -> impl IntoView {
    let m = measurement.and_then(|m| serde_json::from_str::<Value>(&m).ok()).unwrap_or_default();
    let quality = quality_rows(&m).map(|(head, rows)| {
        let thinks = rows.iter().any(|r| !r.thinking.is_empty());
        view! {
            <section class="panel">
                <h2>"Quality: each question and answer"</h2>
                <p id="quality-head">{head}</p>
                <table class="trials" id="quality-cases">
                    <thead><tr>
                        <th>"case"</th><th>"question"</th><th>"answer"</th><th>"verdict"</th>
                        {thinks.then(|| view! { <th class="num">"thinking tokens"</th> })}
                    </tr></thead>
                    <tbody>
                        {rows.into_iter().map(|r| view! {
                            <tr class=format!("verdict-{}", r.verdict)>
                                <td>{r.id}</td><td>{r.question}</td><td><pre class="answer">{r.answer}</pre></td><td>{r.verdict}</td>
                                {thinks.then(|| view! { <td class="num">{r.thinking.clone()}</td> })}
                            </tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        }
    });
    let recall = recall_rows(&m).map(|rows| {
        view! {
            <section class="panel">
                <h2>"Context recall: each point"</h2>
                <table class="trials" id="recall-points">
                    <thead><tr><th>"where"</th><th>"answer"</th><th>"verdict"</th></tr></thead>
                    <tbody>
                        {rows.into_iter().map(|r| view! {
                            <tr><td>{r.id}</td><td><pre class="answer">{r.answer}</pre></td><td>{r.verdict}</td></tr>
                        }).collect_view()}
                    </tbody>
                </table>
            </section>
        }
    });
    view! { {quality} {recall} }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_case_s_question_answer_and_verdict_are_read() {
        let m = serde_json::json!({ "quality": {
            "suite": "default", "style": "chat", "score": 0.5,
            "cases": [
                { "id": "capital", "prompt": "What is the capital of France?", "passed": true,
                  "answer": "Paris.", "ms": 10.0 },
                { "id": "add", "prompt": "What is 17 + 25?", "passed": false, "answer": "43",
                  "thinking_tokens": 120, "ms": 30.0 }
            ]
        }});
        let (head, rows) = quality_rows(&m).unwrap();
        assert_eq!(head, "Suite default: 1 of 2 passed, asked through the model's chat template.");
        assert_eq!(
            (rows[0].question.as_str(), rows[0].verdict),
            ("What is the capital of France?", "passed")
        );
        assert_eq!(
            (rows[1].answer.as_str(), rows[1].verdict, rows[1].thinking.as_str()),
            ("43", "failed", "120")
        );
        // Stored before templates: raw, with the note where there is one.
        let raw = serde_json::json!({ "quality": { "suite": "s", "note": "the model file has no chat template: asked as a raw completion", "cases": [] } });
        assert!(
            quality_rows(&raw).unwrap().0.ends_with("no chat template: asked as a raw completion.")
        );
        assert!(quality_rows(&serde_json::json!({ "speed": {} })).is_none());
    }

    #[test]
    fn recall_points_say_recalled_missed_or_why_skipped() {
        let m = serde_json::json!({ "context": [
            { "size": 1024, "depth": 0.5, "passed": true, "answer": "4812731", "skipped": null },
            { "size": 4096, "depth": 0.1, "passed": false, "answer": "", "skipped": "does not fit" }
        ]});
        let rows = recall_rows(&m).unwrap();
        assert_eq!(
            (rows[0].id.as_str(), rows[0].verdict),
            ("1024 tokens, fact at 50 %", "recalled")
        );
        assert_eq!(
            (rows[1].answer.as_str(), rows[1].verdict),
            ("(not asked: does not fit)", "skipped")
        );
    }
}
