//! Runs real trials against llama.cpp's own llama-server and the tiny model:
//! the stored numbers must be positive and consistent with what was asked.

use crate::common;
use tunebook_views::types::Metric;

use std::collections::BTreeMap;

use common::{TestServer, get_json, http, require_demo_engine, wait_final};
use tunebook_views::types::{RunRequest, SampleView, TrialState, TrialView};

fn request(settings: &[(&str, &str)]) -> RunRequest {
    RunRequest {
        profile: "demo".into(),
        model: "tiny-llama".into(),
        settings: settings
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect::<BTreeMap<_, _>>(),
        target: None,
    }
}

async fn submit(server: &TestServer, req: &RunRequest) -> reqwest::Response {
    http().post(server.url("/api/trials")).json(req).send().await.unwrap()
}

#[tokio::test]
async fn a_real_trial_stores_consistent_measurements() {
    let _engine = require_demo_engine();
    let server = TestServer::start().await;
    let settings = [
        ("ctx_size", "1024"),
        ("threads", "2"),
        ("cache_type_k", "q8_0"),
        ("cache_type_v", "q8_0"),
        ("flash_attn", "on"),
    ];
    let response = submit(&server, &request(&settings)).await;
    assert_eq!(response.status(), 201);
    let queued: TrialView = response.json().await.unwrap();
    assert_eq!(queued.state, TrialState::Queued);

    let t = wait_final(&server, queued.id).await;
    assert_eq!(t.state, TrialState::Done, "failed: {:?} {:?}", t.failure_kind, t.error);
    let probe = engine_bridge::SpeedProbe::default();
    let ceiling = t.ceiling_tps.expect("a decode ceiling");
    let share = t.metrics.get(Metric::PctOfCeiling).expect("the share of the ceiling reached");
    assert!((share - 100.0 * t.metrics.get(Metric::DecodeTps).unwrap() / ceiling).abs() < 1e-6);
    let quality = t.metrics.get(Metric::QualityScore).expect("the standard plan scores quality");
    assert!((0.0..=1.0).contains(&quality), "{quality}");
    let measurement: serde_json::Value =
        get_json(&server, &format!("/api/trials/{}/measurement", t.id)).await;
    let cases = measurement["quality"]["cases"].as_array().unwrap();
    assert_eq!(cases.len(), engine_bridge::probes::Suite::default_suite().cases.len());

    // What the engine ran is read back from it, setting by setting.
    let applied = measurement["applied"].as_array().expect("settings read back");
    assert_eq!(applied.len(), settings.len(), "{applied:?}");
    assert!(applied.iter().all(|a| a["matches"] == true), "{applied:?}");
    assert!(t.note.is_none(), "nothing to say: {:?}", t.note);

    // The engine ran exactly what was asked, and says so.
    let command = t.command.clone().unwrap();
    for fragment in ["-c 1024", "-t 2", "-ctk q8_0", "-ctv q8_0", "-fa on", "--host 127.0.0.1"] {
        assert!(command.contains(fragment), "{fragment} missing from {command}");
    }
    assert_eq!(t.n_ctx, Some(1024), "context size read back from /props");

    // Positive numbers, and the token counts we asked for.
    for (name, v) in [
        ("load_ms", t.metrics.get(Metric::LoadMs)),
        ("ttft_ms", t.metrics.get(Metric::TtftMs)),
        ("prefill_tps", t.metrics.get(Metric::PrefillTps)),
        ("decode_tps", t.metrics.get(Metric::DecodeTps)),
        ("client_decode_tps", t.client_decode_tps),
    ] {
        let v = v.unwrap_or_else(|| panic!("{name} missing"));
        assert!(v.is_finite() && v > 0.0, "{name} = {v}");
    }
    assert_eq!(t.tokens_requested, Some(probe.n_predict as i64));
    assert_eq!(t.tokens_generated, Some(probe.n_predict as i64));
    assert_eq!(t.prompt_tokens, Some(probe.prompt_tokens as i64));

    // The weights are mapped and read while decoding: they count as resident.
    let model = common::repo_root().join(".tools/models/tiny-llama.gguf");
    let weights = engine_bridge::planner::ModelInfo::read(&model).unwrap().weight_bytes() as i64;
    let rss = t.metrics.get(Metric::PeakRssBytes).map(|v| v as i64).expect("peak RSS recorded");
    assert!(rss > weights * 9 / 10 && rss < 4 << 30, "peak RSS {rss} B for {weights} B of weights");

    let samples: Vec<SampleView> =
        get_json(&server, &format!("/api/trials/{}/samples", t.id)).await;
    assert_eq!(samples.len(), probe.repeats as usize, "warm-up is not recorded");
    for s in &samples {
        assert_eq!(s.predicted_n, probe.n_predict as i64);
        assert_eq!(s.prompt_n, probe.prompt_tokens as i64, "the prompt cache was off");
        // The engine's rate is its own count over its own time.
        let rate = s.predicted_n as f64 / (s.predicted_ms / 1e3);
        assert!((rate / s.predicted_tps - 1.0).abs() < 0.05, "{rate} vs {}", s.predicted_tps);
        // The client saw the whole answer after the first token arrived.
        assert!(s.total_ms >= s.ttft_ms, "{s:?}");
    }
    server.stop().await;
}

/// The events of a trial's log stream until `end` (or `limit`).
async fn follow_log(
    server: &TestServer,
    id: i64,
    limit: std::time::Duration,
) -> Vec<(String, String)> {
    use eventsource_stream::Eventsource;
    use futures::StreamExt;
    let response = http().get(server.url(&format!("/api/trials/{id}/log"))).send().await.unwrap();
    assert_eq!(response.status(), 200);
    let mut events = response.bytes_stream().eventsource();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while let Ok(Some(Ok(e))) = tokio::time::timeout_at(deadline, events.next()).await {
        out.push((e.event.clone(), e.data.clone()));
        if e.event == "end" {
            break;
        }
    }
    out
}

#[tokio::test]
async fn the_engine_log_is_followed_while_the_trial_runs() {
    let _engine = require_demo_engine();
    let server = TestServer::start().await;
    let response = submit(&server, &request(&[("ctx_size", "1024"), ("threads", "2")])).await;
    let queued: TrialView = response.json().await.unwrap();
    let limit = std::time::Duration::from_secs(120);
    let events = follow_log(&server, queued.id, limit).await;
    let (last, lines) = events.split_last().expect("events");
    assert_eq!(last.0, "end", "the stream ends with the trial: {events:?}");
    let text: String = lines.iter().map(|(_, d)| format!("{d}\n")).collect();
    // llama-server's own words as it served. (The stream starts from the
    // log's last lines: at verbosity 4 the loading may already be further
    // back than that when the stream opens.)
    assert!(text.contains("print_timing") && text.contains("eval time ="), "{text}");
    let t: TrialView = get_json(&server, &format!("/api/trials/{}", queued.id)).await;
    assert!(t.state.is_final(), "the end comes once the trial has ended: {:?}", t.state);
    // Asked again afterwards: the last lines, then the end at once.
    let again = follow_log(&server, queued.id, std::time::Duration::from_secs(10)).await;
    assert_eq!(again.last().map(|e| e.0.as_str()), Some("end"));
    assert!(again.len() >= 2 && again[0].1.lines().count() <= 100, "{again:?}");
    let missing = http().get(server.url("/api/trials/999999/log")).send().await.unwrap();
    assert_eq!(missing.status(), 404);
    server.stop().await;
}

#[tokio::test]
async fn a_setting_the_engine_capped_is_said_on_the_trial() {
    let _engine = require_demo_engine();
    let server = TestServer::start().await;
    // llama.cpp runs a physical batch larger than the logical one at the
    // logical one's size.
    let req = request(&[("ctx_size", "1024"), ("batch_size", "64"), ("ubatch_size", "512")]);
    let queued: TrialView = submit(&server, &req).await.json().await.unwrap();
    let t = wait_final(&server, queued.id).await;
    assert_eq!(t.state, TrialState::Done, "failed: {:?} {:?}", t.failure_kind, t.error);
    let note = t.note.unwrap_or_default();
    assert!(note.contains("did not run as asked: ubatch_size 64 (asked 512)"), "{note}");
    // Stored, so that the findings leave the trial out.
    assert_eq!(t.mismatched, BTreeMap::from([("ubatch_size".to_string(), "64".to_string())]));
}

#[tokio::test]
async fn a_setting_the_engine_rejects_fails_with_its_own_message() {
    let _engine = require_demo_engine();
    // A profile may name a fork's cache types; this build rejects it.
    let server = TestServer::start_forked().await;
    let response = submit(&server, &request(&[("cache_type_k", "q3_bogus")])).await;
    assert_eq!(response.status(), 201);
    let queued: TrialView = response.json().await.unwrap();
    let t = wait_final(&server, queued.id).await;
    assert_eq!(t.state, TrialState::Failed);
    assert_eq!(t.failure_kind.as_deref(), Some("setting rejected"));
    let error = t.error.unwrap();
    assert!(error.contains("q3_bogus"), "the engine's message names the value: {error}");
    server.stop().await;
}

#[tokio::test]
async fn invalid_requests_are_refused_and_nothing_is_stored() {
    let server = TestServer::start().await;
    let cases = [
        (request(&[("model_path", "/etc/passwd")]), "unknown setting `model_path`"),
        (request(&[("threads", "many")]), "`many` is not a whole number"),
        (request(&[("flash_attn", "--rpc")]), "is not one of on, off, auto"),
        (RunRequest { profile: "nope".into(), ..request(&[]) }, "unknown engine profile `nope`"),
        (RunRequest { model: "nope".into(), ..request(&[]) }, "has no model named `nope`"),
    ];
    for (req, expected) in cases {
        let response = submit(&server, &req).await;
        assert_eq!(response.status(), 400);
        let body: serde_json::Value = response.json().await.unwrap();
        let message = body["error"].as_str().unwrap();
        assert!(message.contains(expected), "{message:?} should contain {expected:?}");
    }
    let all: Vec<TrialView> = get_json(&server, "/api/trials").await;
    assert!(all.is_empty(), "nothing half-saved: {all:?}");
    server.stop().await;
}

#[tokio::test]
async fn an_external_endpoint_is_measured_without_being_launched() {
    let _engine = require_demo_engine();
    // A llama-server started outside Tunebook.
    let demo =
        engine_bridge::Profile::load(&common::repo_root().join("profiles/demo.toml")).unwrap();
    let port = engine_bridge::free_port().unwrap();
    let spec = engine_bridge::plan(&demo, "tiny-llama", &Default::default(), port).unwrap();
    let outside =
        engine_bridge::RunningEngine::launch(spec, port, std::time::Duration::from_secs(60))
            .await
            .unwrap();
    let profiles = tempfile::tempdir().unwrap();
    std::fs::write(
        profiles.path().join("remote.toml"),
        format!(
            "name = \"remote\"\nkind = \"external\"\nurl = {:?}\n[[models]]\nname = \"tiny\"\n",
            outside.base_url
        ),
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.profiles_dir = profiles.path().to_path_buf();
    let server = TestServer::start_with(settings, data).await;

    let req = RunRequest { profile: "remote".into(), model: "tiny".into(), ..Default::default() };
    let queued: TrialView = submit(&server, &req).await.json().await.unwrap();
    let t = wait_final(&server, queued.id).await;
    assert_eq!(t.state, TrialState::Done, "{:?}", t.error);
    assert!(t.command.unwrap().starts_with("external endpoint http://127.0.0.1:"));
    assert!(
        t.metrics.get(Metric::DecodeTps).unwrap() > 0.0
            && t.metrics.get(Metric::TtftMs).unwrap() > 0.0
    );
    assert!(outside.props().await.is_some(), "the endpoint is still up: Tunebook did not stop it");
    let bad = RunRequest { settings: [("threads".into(), "2".into())].into(), ..req };
    let response = submit(&server, &bad).await;
    assert_eq!(response.status(), 400, "an external endpoint takes no launch settings");
    server.stop().await;
    outside.stop(std::time::Duration::from_secs(5)).await;
}
