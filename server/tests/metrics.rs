//! `/metrics` as Prometheus scrapes it, after a study on the fake engine:
//! trials and studies by state, the queue, the time between the study's
//! trials, and request latencies labelled by route.

use std::collections::BTreeMap;
use std::time::Duration;

use serde_json::json;
use tunebook::db::studies::{StudyRow, StudyState};
use tunebook_views::types::{TrialState, TrialView};

use crate::common;
use common::{eventually, get_json, http};

/// The samples of an OpenMetrics text, by name with its labels.
fn samples(text: &str) -> BTreeMap<String, f64> {
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .filter_map(|l| {
            let (name, value) = l.rsplit_once(' ')?;
            Some((name.to_string(), value.parse().ok()?))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scrape_counts_the_trials_the_studies_and_the_time_between_trials() {
    let (server, _profiles) = common::on_fake_engine("fake", &[]).await;
    let def = json!({
        "name": "scraped",
        "profile": "fake",
        "model": "m",
        "space": { "ubatch_size": [128, 256, 512] },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 10, "confirm_pairs": 0, "settle_trials": 0 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let r = http().post(server.url("/api/studies")).json(&def).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
    let study: StudyRow = r.json().await.unwrap();
    let path = format!("/api/studies/{}", study.id);
    eventually(Duration::from_secs(120), "the study's end", || async {
        let row: StudyRow = http().get(server.url(&path)).send().await.ok()?.json().await.ok()?;
        row.state.is_final().then_some(())
    })
    .await;
    let trials: Vec<TrialView> = get_json(&server, &format!("{path}/trials")).await;
    let ran = trials.iter().filter(|t| t.state != TrialState::Pruned).count();
    assert!(ran >= 3, "{trials:?}");

    let r = http().get(server.url("/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    let kind = r.headers()["content-type"].to_str().unwrap().to_string();
    assert!(kind.starts_with("application/openmetrics-text"), "{kind}");
    let text = r.text().await.unwrap();
    let s = samples(&text);
    let done = trials.iter().filter(|t| t.state == TrialState::Done).count() as f64;
    assert_eq!(s.get(r#"tunebook_trials{state="done"}"#), Some(&done), "{text}");
    assert_eq!(s.get(r#"tunebook_trials{state="queued"}"#), Some(&0.0), "every state listed");
    assert_eq!(s.get("tunebook_queue_length"), Some(&0.0));
    let state = StudyState::Done.as_str();
    assert_eq!(s.get(&format!(r#"tunebook_studies{{state="{state}"}}"#)), Some(&1.0), "{text}");
    assert_eq!(s.get("tunebook_studies_running"), Some(&0.0));
    assert!(s.contains_key("tunebook_engines_running"), "{text}");
    // A gap before every trial but the first.
    assert_eq!(s.get("tunebook_trial_gap_seconds_count"), Some(&(ran as f64 - 1.0)), "{text}");
    // Requests by route pattern, never by the path sent.
    let polled = r#"tunebook_http_request_duration_seconds_count{method="GET",route="/api/studies/{id}",status="200"}"#;
    assert!(s.get(polled).is_some_and(|n| *n >= 1.0), "{text}");
    assert!(!text.contains(&format!("route=\"{path}\"")), "{text}");
    server.stop().await;
}
