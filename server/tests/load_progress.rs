//! While an engine loads, the trial says so (starting, then loading the
//! model) and how long earlier loads of the same model took; an engine
//! that finds its port taken is started again on another.

use crate::common;
use tunebook_views::types::Metric;

use std::time::Duration;

use common::{TestServer, eventually, http, wait_final, write_fake_profile};
use tunebook_views::types::{TrialState, TrialView};

async fn submit(server: &TestServer) -> TrialView {
    let body = serde_json::json!({"profile": "slow", "model": "m", "settings": {}});
    http().post(server.url("/api/trials")).json(&body).send().await.unwrap().json().await.unwrap()
}

async fn seen_loading(server: &TestServer, id: i64) -> TrialView {
    eventually(Duration::from_secs(30), "the trial loading its model", || async move {
        let t: TrialView = http()
            .get(server.url(&format!("/api/trials/{id}")))
            .send()
            .await
            .ok()?
            .json()
            .await
            .ok()?;
        (t.state == TrialState::Loading && t.load_state.as_deref() == Some("loading")).then_some(t)
    })
    .await
}

#[tokio::test]
async fn loading_state_and_expected_time() {
    let data = tempfile::tempdir().unwrap();
    let profiles = tempfile::tempdir().unwrap();
    // The fake engine answers 503 for 1.5 s, like llama-server loading a model.
    write_fake_profile(profiles.path(), "slow", &["--fake", "slow-load", "--fake-ms", "1500"]);
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.profiles_dir = profiles.path().to_path_buf();
    let server = TestServer::start_with(settings, data).await;

    let first = submit(&server).await;
    let loading = seen_loading(&server, first.id).await;
    assert_eq!(loading.expected_load_ms, None, "nothing to expect before the first load");
    assert!(loading.started_ms.is_some());
    let done = wait_final(&server, first.id).await;
    assert_eq!(done.state, TrialState::Done, "{:?}", done.error);
    let took = done.metrics.get(Metric::LoadMs).unwrap();
    // The engine counts its 1.5 s from its own start, a moment before the
    // runner's clock (started once the spawn returns) does: a load of a
    // few milliseconds less is the same load.
    assert!(took >= 1400.0, "{took}");

    let second = submit(&server).await;
    let loading = seen_loading(&server, second.id).await;
    assert_eq!(loading.expected_load_ms, Some(took), "expected from the earlier load");
    assert_eq!(wait_final(&server, second.id).await.state, TrialState::Done);
    server.stop().await;
}

#[tokio::test]
async fn a_port_taken_before_the_engine_binds_it_is_tried_again_elsewhere() {
    // Another program binds the port found free before the engine does:
    // the first launch fails so, and the trial starts again on another
    // port rather than failing for a cause that is not its configuration's.
    let data = tempfile::tempdir().unwrap();
    let profiles = tempfile::tempdir().unwrap();
    let mark = data.path().join("taken-once");
    let mark_arg = mark.to_str().unwrap();
    write_fake_profile(profiles.path(), "slow", &["--fake", "ok", "--fake-taken-once", mark_arg]);
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.profiles_dir = profiles.path().to_path_buf();
    let server = TestServer::start_with(settings, data).await;

    let trial = submit(&server).await;
    let done = wait_final(&server, trial.id).await;
    assert!(mark.exists(), "the first launch found its port taken");
    assert_eq!(done.state, TrialState::Done, "{:?} {:?}", done.failure_kind, done.error);
    server.stop().await;
}
