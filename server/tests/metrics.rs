//! `/metrics` as Prometheus scrapes it, after a study on the fake engine:
//! trials and studies by state, the queue, the time between the study's
//! trials, and request latencies labelled by route.

use std::collections::BTreeMap;

use tunebook::db::studies::StudyState;
use tunebook_views::types::{TrialState, TrialView};

use crate::common;
use common::{get_json, http};

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
    let def = common::fake_grid_study("scraped", &[128, 256, 512]);
    let study = common::run_study(&server, &def).await;
    let path = format!("/api/studies/{}", study["id"]);
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
