//! A study's life on the real engine: checked against its profile, run as
//! a grid, exported and imported back; refused with every reason when it
//! cannot run; paused, resumed and stopped; going on past a trial that ran
//! out of memory.

use serde_json::{Value, json};
use tunebook::db::studies::{StudyRow, StudyState};
use tunebook::study_cli;
use tunebook_views::types::{Metric, TrialState, TrialView};

use super::{LIMIT, demo_study, post, run_to_the_end, wait_state};
use crate::common::{self, TestServer, eventually, get_json, http, on_fake_engine};

#[test]
fn the_example_study_checks_against_the_demo_profile() {
    let root = common::repo_root();
    let text = std::fs::read_to_string(root.join("examples/study.toml")).unwrap();
    let def = tunebook_study::StudyDef::from_toml(&text).unwrap();
    let profiles = engine_bridge::Profile::load_dir(&root.join("profiles")).unwrap();
    let checked = tunebook::checked::Checked::new(std::sync::Arc::new(profiles));
    let study = checked.study(&def).unwrap();
    assert_eq!(study.def.model, "smollm2-135m", "the real model, whose divergence means something");
    assert!(study.probes.kld.is_some());
}

#[tokio::test]
async fn a_grid_study_on_the_real_engine_exports_and_imports() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let check: Value =
        post(&server, "/api/studies/check", &demo_study()).await.json().await.unwrap();
    assert_eq!(check["grid_size"], 18);
    assert_eq!(check["allowed"], 6);
    assert_eq!(check["planned_trials"], 6, "the space is smaller than the budget");
    assert_eq!(check["not_fit"], 0);
    assert!(check["toml"].as_str().unwrap().contains("cache_type_k == cache_type_v"));

    let created = post(&server, "/api/studies", &demo_study()).await;
    assert_eq!(created.status(), 201);
    let study: StudyRow = created.json().await.unwrap();
    let row = wait_state(&server, study.id, |s| s.is_final()).await;
    assert_eq!(row.state, StudyState::Done);
    assert!(row.stop_reason.unwrap().contains("every configuration"));

    let trials: Vec<TrialView> =
        get_json(&server, &format!("/api/studies/{}/trials", study.id)).await;
    assert_eq!(trials.len(), 6, "the six allowed configurations, the baseline first");
    assert_eq!(trials[0].role.map(|r| r.as_str()), Some("baseline"));
    assert_eq!(trials[0].settings["cache_type_k"], "f16");
    for t in &trials {
        assert_eq!(t.state, TrialState::Done, "{t:?}");
        assert_eq!(t.settings["cache_type_k"], t.settings["cache_type_v"], "the constraint holds");
        assert!(
            t.metrics.get(Metric::DecodeTps).unwrap() > 0.0
                && t.metrics.get(Metric::PeakRssBytes).map(|v| v as i64).unwrap() > 0
        );
        assert!(t.note.is_some());
    }
    let configs: std::collections::BTreeSet<_> =
        trials.iter().map(|t| t.settings.clone()).collect();
    assert_eq!(configs.len(), 6, "no configuration ran twice");

    // The findings name the fastest trial as the best on decode speed.
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", study.id)).await;
    let fastest = trials
        .iter()
        .max_by(|a, b| {
            a.metrics
                .get(Metric::DecodeTps)
                .unwrap()
                .total_cmp(&b.metrics.get(Metric::DecodeTps).unwrap())
        })
        .unwrap();
    let best = &found["findings"][0];
    assert_eq!(
        (best["kind"].as_str(), best["metric"].as_str()),
        (Some("best"), Some("decode_tps"))
    );
    assert_eq!(best["trial"], fastest.id);
    let markdown = found["markdown"].as_str().unwrap();
    assert!(markdown.starts_with("## Best configurations"), "{markdown}");
    // Ready to run: the command line and a unit for the best trial.
    assert!(
        markdown.contains(&format!("### Trial {} (best decode tok/s)", fastest.id)),
        "{markdown}"
    );
    assert!(markdown.contains("--port 8080") && markdown.contains("ExecStart=/"), "{markdown}");
    assert!(
        markdown.contains("TimeoutStartSec=60"),
        "a quick load still gets a minute: {markdown}"
    );
    // And as the tools that serve it take it: llama-swap's entry on the
    // port it picks, a compose service on llama.cpp's image.
    assert!(
        markdown.contains("<summary>llama-swap entry</summary>")
            && markdown.contains("--port ${PORT}"),
        "{markdown}"
    );
    assert!(
        markdown.contains("<summary>docker compose service</summary>")
            && markdown.contains("ghcr.io/ggml-org/llama.cpp:server"),
        "{markdown}"
    );

    let pareto: Value = get_json(&server, &format!("/api/studies/{}/pareto", study.id)).await;
    let points = pareto["points"].as_array().unwrap();
    assert_eq!(points.len(), 6);
    let on_front = points.iter().filter(|p| p["on_front"] == true).count();
    assert!(on_front >= 1);
    // No point off the front beats a front point on both objectives.
    for p in points.iter().filter(|p| p["on_front"] == false) {
        let (d, m) = (p["values"][0].as_f64().unwrap(), p["values"][1].as_f64().unwrap());
        assert!(points.iter().filter(|q| q["on_front"] == true).any(|q| {
            q["values"][0].as_f64().unwrap() >= d && q["values"][1].as_f64().unwrap() <= m
        }));
    }
    // The page's figure of it: the front its own trace, joined in order,
    // every other point faded; the axes named.
    let url = format!("/api/studies/{}/pareto/figure", study.id);
    let figure: Value = get_json(&server, &url).await;
    assert_eq!(figure["points"], 6);
    let ids = |on: bool| -> Vec<i64> {
        let mut ids: Vec<i64> = points
            .iter()
            .filter(|p| p["on_front"] == on)
            .map(|p| p["trial_id"].as_i64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    let traces = figure["figure"]["data"].as_array().unwrap();
    let drawn = |i: usize| -> Vec<i64> {
        let mut ids: Vec<i64> = traces[i]["customdata"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_i64().unwrap())
            .collect();
        ids.sort();
        ids
    };
    assert_eq!((drawn(0), drawn(1)), (ids(false), ids(true)));
    assert_eq!(traces[1]["name"], "Pareto front");
    assert_eq!(figure["figure"]["layout"]["xaxis"]["title"]["text"], "decode tok/s");
    // A third metric makes it three-dimensional; a wrong one is refused.
    let three: Value =
        get_json(&server, &format!("{url}?metrics=decode_tps,peak_rss_bytes,ttft_ms")).await;
    assert_eq!(three["figure"]["data"][0]["type"], "scatter3d");
    let r = common::http().get(server.url(&format!("{url}?metrics=speed"))).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("unknown metric `speed`"));

    // Export both ways and read the files back into another database.
    let settings = TestServer::settings(server.data.path().to_path_buf());
    let mut jsonl = Vec::new();
    study_cli::export(
        &settings,
        study_cli::Export::Trials { study: Some(study.id), csv: false },
        &mut jsonl,
    )
    .await
    .unwrap();
    let text = String::from_utf8(jsonl).unwrap();
    assert_eq!(text.lines().count(), 6);
    let first: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(first["samples"].as_array().unwrap().len(), 1, "every sample is exported");
    assert!(first["measurement"]["speed"].is_object());
    let mut csv = Vec::new();
    study_cli::export(
        &settings,
        study_cli::Export::Trials { study: Some(study.id), csv: true },
        &mut csv,
    )
    .await
    .unwrap();
    let csv = String::from_utf8(csv).unwrap();
    assert!(csv.lines().next().unwrap().contains("setting.cache_type_k"));

    let other = tempfile::tempdir().unwrap();
    let other_settings = TestServer::settings(other.path().to_path_buf());
    for (name, content) in [("t.jsonl", &text), ("t.csv", &csv)] {
        let path = other.path().join(name);
        std::fs::write(&path, content).unwrap();
        let ids = study_cli::import(&other_settings, &path, "unused").await.unwrap();
        assert_eq!(ids.len(), 6, "{name}");
    }
    let db = tunebook::db::Db::connect(&other_settings.database_url).await.unwrap();
    let imported: Vec<tunebook_views::types::TrialView> =
        tunebook::views::all(tunebook::db::trials::list(&db).await.unwrap());
    assert_eq!(imported.len(), 12);
    for t in &imported {
        let original = trials.iter().find(|o| o.settings == t.settings).expect("same settings");
        assert_eq!(t.metrics.get(Metric::DecodeTps), original.metrics.get(Metric::DecodeTps));
        assert_eq!(
            t.metrics.get(Metric::PeakRssBytes).map(|v| v as i64),
            original.metrics.get(Metric::PeakRssBytes).map(|v| v as i64)
        );
        assert!(t.note.as_deref().unwrap().contains(&format!("imported from study {}", study.id)));
    }
    server.stop().await;
}

#[tokio::test]
async fn a_wrong_study_is_refused_with_every_reason_and_nothing_is_stored() {
    let server = TestServer::start().await;
    let mut bad = demo_study();
    bad["space"]["cache_type_k"] = json!([]);
    bad["space"]["threads"] = json!({ "min": 8, "max": 2 });
    bad["constraints"] = json!(["cache_type_k = cache_type_v"]);
    bad["objectives"] = json!([]);
    bad["profile"] = json!("demo");
    let response = post(&server, "/api/studies", &bad).await;
    assert_eq!(response.status(), 400);
    let error = response.json::<Value>().await.unwrap()["error"].as_str().unwrap().to_string();
    for expected in [
        "`cache_type_k`: the list of values is empty",
        "min 8 is above max 2",
        "cannot parse `cache_type_k = cache_type_v`",
        "no objective",
    ] {
        assert!(error.contains(expected), "missing `{expected}` in {error}");
    }
    let mut unknown = demo_study();
    unknown["profile"] = json!("nope");
    let error: Value = post(&server, "/api/studies", &unknown).await.json().await.unwrap();
    assert!(error["error"].as_str().unwrap().contains("unknown engine profile `nope`"));
    let studies: Vec<StudyRow> = get_json(&server, "/api/studies").await;
    assert!(studies.is_empty(), "nothing half-saved");
    server.stop().await;
}

#[tokio::test]
async fn pause_resume_and_stop() {
    let (server, profiles) =
        on_fake_engine("slow", &["--fake", "slow-load", "--fake-ms", "300"]).await;
    let mut def = json!({
        "name": "threads",
        "profile": "slow",
        "model": "m",
        "space": { "threads": { "min": 1, "max": 6 } },
        "baseline": { "threads": 1 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        "budget": { "settle_trials": 0 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let study: StudyRow = post(&server, "/api/studies", &def).await.json().await.unwrap();
    let trials_of = |id: i64| {
        let url = server.url(&format!("/api/studies/{id}/trials"));
        async move { http().get(url).send().await.unwrap().json::<Vec<TrialView>>().await.unwrap() }
    };
    eventually(LIMIT, "a first finished trial", || async {
        trials_of(study.id).await.iter().any(|t| t.state == TrialState::Done).then_some(())
    })
    .await;
    let paused: StudyRow = post(&server, &format!("/api/studies/{}/pause", study.id), &json!({}))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(paused.state, StudyState::Paused);
    // The trial in flight finishes; no other starts.
    let settled = eventually(LIMIT, "the trial in flight to finish", || async {
        let list = trials_of(study.id).await;
        list.iter().all(|t| t.state.is_final()).then_some(list)
    })
    .await;
    assert!(settled.len() < 6);
    let row: StudyRow = get_json(&server, &format!("/api/studies/{}", study.id)).await;
    assert_eq!(row.state, StudyState::Paused);

    post(&server, &format!("/api/studies/{}/resume", study.id), &json!({}))
        .await
        .error_for_status()
        .unwrap();
    let row = wait_state(&server, study.id, |s| s.is_final()).await;
    assert_eq!(row.state, StudyState::Done);
    assert_eq!(trials_of(study.id).await.len(), 6);
    let again = post(&server, &format!("/api/studies/{}/resume", study.id), &json!({})).await;
    assert_eq!(again.status(), 400, "an ended study cannot be resumed");

    // Stop in the middle of a trial: the engine goes, the trial is interrupted.
    def["name"] = json!("stopped");
    def["profile"] = json!("slow");
    common::write_fake_profile(profiles.path(), "stuck", &["--fake", "never-ready"]);
    def["profile"] = json!("slow");
    let second: StudyRow = post(&server, "/api/studies", &def).await.json().await.unwrap();
    eventually(LIMIT, "a trial loading", || async {
        trials_of(second.id).await.iter().any(|t| t.state == TrialState::Loading).then_some(())
    })
    .await;
    post(&server, &format!("/api/studies/{}/stop", second.id), &json!({}))
        .await
        .error_for_status()
        .unwrap();
    let row = wait_state(&server, second.id, |s| s.is_final()).await;
    assert_eq!(row.state, StudyState::Stopped);
    let list = eventually(LIMIT, "the cut-off trial to be recorded", || async {
        let list = trials_of(second.id).await;
        list.iter().all(|t| t.state.is_final()).then_some(list)
    })
    .await;
    let last = list.last().unwrap();
    assert_eq!(last.failure_kind.as_deref(), Some("interrupted"), "{last:?}");
    let engines = server.data.path().join("engines");
    eventually(LIMIT, "no engine left running", || async {
        let left = std::fs::read_dir(&engines).map(|d| d.flatten().count()).unwrap_or(0);
        (left == 0).then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn an_out_of_memory_trial_fails_with_its_cause_and_the_study_goes_on() {
    let (server, _profiles) =
        on_fake_engine("small", &["--fake", "ok", "--fake-oom-ctx", "2048"]).await;
    let mut def = json!({
        "name": "context",
        "profile": "small",
        "model": "m",
        "space": { "ctx_size": [1024, 2048, 4096, 8192] },
        "baseline": { "ctx_size": 1024 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "two_phase" },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let (study, trials) = run_to_the_end(&server, &def).await;
    assert_eq!(trials.len(), 4);
    for t in &trials {
        let ctx: u64 = t.settings["ctx_size"].parse().unwrap();
        if ctx > 2048 {
            assert_eq!(t.failure_kind.as_deref(), Some("out of memory"), "{t:?}");
        } else {
            assert_eq!(t.state, TrialState::Done, "{t:?}");
        }
    }
    // The findings state the rule and cite the trials.
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", study.id)).await;
    let markdown = found["markdown"].as_str().unwrap();
    assert!(
        markdown.contains(
            "**out of memory whenever `ctx_size` ≥ 4096**: the 2 trials run there all failed so; all 2 trials that ran lie outside it."
        ),
        "{markdown}"
    );
    let failures =
        found["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "failures").unwrap();
    let mut cited: Vec<i64> =
        failures["trials"].as_array().unwrap().iter().map(|t| t.as_i64().unwrap()).collect();
    cited.sort();
    let mut oom: Vec<i64> =
        trials.iter().filter(|t| t.state == TrialState::Failed).map(|t| t.id).collect();
    oom.sort();
    assert_eq!(cited, oom);

    // A baseline that cannot run ends the study, saying so.
    def["baseline"] = json!({ "ctx_size": 8192 });
    let study: StudyRow = post(&server, "/api/studies", &def).await.json().await.unwrap();
    let row = wait_state(&server, study.id, |s| s.is_final()).await;
    assert_eq!(row.state, StudyState::Failed);
    assert!(row.stop_reason.as_deref().unwrap().contains("the baseline"), "{row:?}");
    server.stop().await;
}
