//! Studies end to end through the API, on the real engine: a study's life
//! ([`lifecycle`]), what it measures ([`measures`]), how it searches
//! ([`search`]), files in and out ([`files`]), model files as a setting
//! ([`model_files`]) and findings settled by the runs they name
//! ([`settling`]). This module holds what they share: the demo study and
//! waiting on a study.

mod files;
mod lifecycle;
mod measures;
mod model_files;
mod search;
mod settling;

use std::time::Duration;

use serde_json::{Value, json};
use tunebook::db::studies::{StudyRow, StudyState};
use tunebook_views::types::TrialView;

use crate::common::{TestServer, eventually, get_json, http};

const LIMIT: Duration = Duration::from_secs(180);

fn demo_study() -> Value {
    json!({
        "name": "cache types",
        "profile": "demo",
        "model": "tiny-llama",
        "space": {
            "cache_type_k": ["f16", "q8_0", "q4_0"],
            "cache_type_v": ["f16", "q8_0", "q4_0"],
            "ubatch_size": [128, 512]
        },
        "fixed": { "ctx_size": 1024, "threads": 2 },
        "baseline": { "cache_type_k": "f16", "cache_type_v": "f16", "ubatch_size": 512 },
        "constraints": ["cache_type_k == cache_type_v"],
        "objectives": [{ "metric": "decode_tps" }, { "metric": "peak_rss_bytes" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 20 },
        "probes": { "speed": { "prompt_tokens": 32, "n_predict": 8, "repeats": 1, "warmup": 0 } }
    })
}

async fn post(server: &TestServer, path: &str, body: &Value) -> reqwest::Response {
    http().post(server.url(path)).json(body).send().await.unwrap()
}

/// Creates the study `def`, waits until it is done (it must not fail) and
/// reads its trials.
async fn run_to_the_end(server: &TestServer, def: &Value) -> (StudyRow, Vec<TrialView>) {
    let study: StudyRow = post(server, "/api/studies", def).await.json().await.unwrap();
    let row = wait_state(server, study.id, |s| s.is_final()).await;
    assert_eq!(row.state, StudyState::Done, "{row:?}");
    let trials = get_json(server, &format!("/api/studies/{}/trials", study.id)).await;
    (row, trials)
}

async fn wait_state(server: &TestServer, id: i64, done: impl Fn(StudyState) -> bool) -> StudyRow {
    eventually(LIMIT, "the study's state", || async {
        let row: StudyRow = http()
            .get(server.url(&format!("/api/studies/{id}")))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        done(row.state).then_some(row)
    })
    .await
}
