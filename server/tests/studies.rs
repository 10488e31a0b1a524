//! Studies end to end: designed through the API, run against the real
//! engine, paused, resumed and stopped, exported and imported back, and
//! llama-bench's own output read as trials.

use crate::common;
use tunebook_views::types::Metric;
mod model_files;
mod settling;

use std::time::Duration;

use common::{TestServer, eventually, get_json, http, on_fake_engine};
use serde_json::{Value, json};
use tunebook::db::studies::{StudyRow, StudyState};
use tunebook::study_cli;
use tunebook_views::types::{TrialState, TrialView};

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

/// "The largest context that still recalls": the context size itself an
/// objective, at least 512 of it, and recall counted in tokens.
#[tokio::test]
async fn the_context_size_is_an_objective_and_recall_is_counted_in_tokens() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let def = json!({
        "name": "largest context",
        "profile": "demo",
        "model": "tiny-llama",
        "space": { "ctx_size": [256, 512, 1024] },
        "fixed": { "threads": 2 },
        "baseline": { "ctx_size": 256 },
        "objectives": [{ "metric": "decode_tps" }, { "metric": "setting.ctx_size" }],
        "bounds": [{ "metric": "setting.ctx_size", "min": "512" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 10, "confirm_pairs": 0, "skip_dominated": false },
        "probes": {
            "speed": { "prompt_tokens": 16, "n_predict": 4, "repeats": 1, "warmup": 0 },
            "context": { "sizes": [200, 400, 800], "depths": [0.5], "max_tokens": 4 }
        }
    });
    let created = post(&server, "/api/studies", &def).await;
    assert_eq!(created.status(), 201);
    let study: StudyRow = created.json().await.unwrap();
    let row = wait_state(&server, study.id, |s| s.is_final()).await;
    assert_eq!(row.state, StudyState::Done, "{row:?}");
    let trials: Vec<TrialView> =
        get_json(&server, &format!("/api/studies/{}/trials", study.id)).await;
    let ctx = |t: &TrialView| t.settings["ctx_size"].parse::<i64>().unwrap();
    assert_eq!(trials.len(), 3, "the baseline, then the two sizes the bound allows");
    for t in &trials {
        assert_eq!(t.state, TrialState::Done, "{t:?}");
        if t.role.map(|r| r.as_str()) != Some("baseline") {
            assert!(ctx(t) >= 512, "the search kept within the bound: {t:?}");
        }
        // Only a size that fits the context (with the answer) can count.
        let tokens =
            t.metrics.get(Metric::ContextTokens).map(|v| v as i64).expect("context probed");
        assert!([0, 200, 400, 800].contains(&tokens), "{t:?}");
        assert!(tokens == 0 || tokens + 4 <= ctx(t), "{t:?}");
    }
    assert_eq!(
        trials[0].metrics.get(Metric::ContextTokens).map(|v| v as i64),
        Some(0),
        "256 tokens fit no probed size"
    );
    // The front is drawn on the setting as on a metric.
    let pareto: Value = get_json(&server, &format!("/api/studies/{}/pareto", study.id)).await;
    assert_eq!(pareto["metrics"], json!(["decode_tps", "setting.ctx_size"]));
    for p in pareto["points"].as_array().unwrap() {
        let t = trials.iter().find(|t| p["trial_id"] == t.id).unwrap();
        assert_eq!(p["values"][1].as_f64(), Some(ctx(t) as f64));
    }
    // The findings name the best of the setting as of a metric.
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", study.id)).await;
    let markdown = found["markdown"].as_str().unwrap();
    let largest = trials.iter().find(|t| ctx(t) == 1024).unwrap().id;
    assert!(
        markdown.contains(&format!("**Best setting ctx_size** (highest): 1024 — trial {largest},")),
        "{markdown}"
    );
    let url = format!("/api/studies/{}/pareto?metrics=decode_tps,setting.top_k", study.id);
    let r = http().get(server.url(&url)).send().await.unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("neither varies nor fixes `top_k`"));
    server.stop().await;
}

#[tokio::test]
async fn a_study_judges_quality_by_kl_divergence_from_its_baseline() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let def = json!({
        "name": "divergence",
        "profile": "demo",
        "model": "tiny-llama",
        "space": { "cache_type_k": ["f16", "q4_0"], "cache_type_v": ["f16", "q4_0"] },
        "constraints": ["cache_type_k == cache_type_v"],
        "fixed": { "threads": 2, "flash_attn": "on", "ctx_size": 512 },
        "baseline": { "cache_type_k": "f16", "cache_type_v": "f16" },
        "objectives": [{ "metric": "decode_tps" }, { "metric": "kld_mean" }],
        "bounds": [{ "metric": "same_top_rate", "min": "0.5" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 2, "confirm_pairs": 0, "skip_dominated": false },
        "probes": {
            "speed": { "prompt_tokens": 16, "n_predict": 4, "repeats": 1, "warmup": 0 },
            "kld": { "ctx": 128, "chunks": 3 }
        }
    });
    // Without its probe, a divergence cannot be judged: refused, with why.
    let mut unprobed = def.clone();
    unprobed["probes"].as_object_mut().unwrap().remove("kld");
    let refused = post(&server, "/api/studies", &unprobed).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("add [probes.kld]"));

    let (row, mut trials) = run_to_the_end(&server, &def).await;
    trials.sort_by_key(|t| t.id);
    assert_eq!(trials.len(), 2, "{trials:?}");
    let (base, q4) = (&trials[0], &trials[1]);
    assert_eq!(base.settings["cache_type_k"], "f16");
    // The baseline is the reference: it diverges from itself by nothing.
    let same = base.metrics.get(Metric::KldMean).expect("divergence stored");
    assert!(same < 1e-4, "{base:?}");
    assert!(base.metrics.get(Metric::SameTopRate).unwrap() > 0.99, "{base:?}");
    // A 4-bit K/V cache moves the distribution, as llama.cpp measures it.
    let moved = q4.metrics.get(Metric::KldMean).expect("divergence stored");
    assert!(moved > 1e-3, "{q4:?}");
    assert!(q4.metrics.get(Metric::KldP99).unwrap() >= moved, "{q4:?}");
    assert!(q4.metrics.get(Metric::SameTopRate).unwrap() < 1.0, "{q4:?}");
    // The front is drawn on it, and the findings name it.
    let pareto: Value = get_json(&server, &format!("/api/studies/{}/pareto", row.id)).await;
    assert_eq!(pareto["metrics"], json!(["decode_tps", "kld_mean"]));
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", row.id)).await;
    let markdown = found["markdown"].as_str().unwrap();
    // The reference is the yardstick, never the best: the best divergence
    // is the 4-bit cache's, the only configuration compared with it.
    let best = format!(
        "**Best mean KL divergence** (lowest of those that differ from the reference): {} — trial {},",
        tunebook_study::findings::value_text(tunebook_study::Metric::KldMean, moved),
        q4.id
    );
    assert!(markdown.contains(&best), "{best}\n{markdown}");
    server.stop().await;
}

#[tokio::test]
async fn goodput_under_a_latency_objective_is_a_study_metric() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let def = json!({
        "name": "serve a team",
        "profile": "demo",
        "model": "tiny-llama",
        "space": { "parallel": [1, 2] },
        "fixed": { "threads": 2, "ctx_size": 2048 },
        "baseline": { "parallel": 1 },
        "objectives": [{ "metric": "goodput_rps" }, { "metric": "peak_rss_bytes" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 2, "confirm_pairs": 0, "skip_dominated": false },
        "probes": {
            "load": {
                "workload": "chat",
                "rates": [2, 4],
                "duration": 1,
                "search_steps": 0,
                // Bounds no request misses on a busy machine (a bound left
                // out takes its default, 200 ms between tokens): this is a
                // test of goodput stored and used, not of the machine's speed.
                "slo": { "ttft_p99_ms": 60000, "itl_p99_ms": 60000 }
            }
        }
    });
    let (row, trials) = run_to_the_end(&server, &def).await;
    assert_eq!(trials.len(), 2, "{trials:?}");
    for t in &trials {
        let goodput = t.metrics.get(Metric::GoodputRps).expect("goodput stored");
        let m: Value = get_json(&server, &format!("/api/trials/{}/measurement", t.id)).await;
        assert!(goodput > 0.0, "{t:?}\n{}", m["load"]);
        let steps = m["load"]["steps"].as_array().expect("each rate's run");
        assert_eq!(m["load"]["workload"], "chat");
        assert!(steps.iter().all(|s| s["completed"].as_u64().unwrap() > 0), "{steps:?}");
        assert_eq!(m["load"]["goodput_rps"].as_f64(), Some(goodput));
    }
    let pareto: Value = get_json(&server, &format!("/api/studies/{}/pareto", row.id)).await;
    assert_eq!(pareto["metrics"], json!(["goodput_rps", "peak_rss_bytes"]));
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", row.id)).await;
    let markdown = found["markdown"].as_str().unwrap();
    assert!(
        markdown.contains("**Best goodput (req/s within the objective)** (highest)"),
        "{markdown}"
    );
    assert!(markdown.contains("## Serving load") && markdown.contains("/s: "), "{markdown}");
    // The trial's page shows each rate, as the server renders it.
    let page = http().get(server.url(&format!("/trials/{}", trials[0].id))).send().await.unwrap();
    let html = page.text().await.unwrap();
    assert!(html.contains("Serving load") && html.contains("id=\"load-steps\""), "{html}");
    // A workload is named, never a path.
    let mut wrong = def.clone();
    wrong["probes"]["load"]["workload"] = json!("../../../etc/passwd");
    let refused = post(&server, "/api/studies", &wrong).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("probes.load.workload"));
    server.stop().await;
}

#[tokio::test]
async fn request_time_settings_reuse_the_running_engine() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let mut def = demo_study();
    def["name"] = json!("sampling");
    def["space"] = json!({ "top_k": [1, 40], "threads": [1, 2] });
    def["fixed"] = json!({ "ctx_size": 1024 });
    def["baseline"] = json!({ "threads": 1, "top_k": 40 });
    def["constraints"] = json!([]);
    let created = post(&server, "/api/studies", &def).await;
    assert_eq!(created.status(), 201);
    let study: StudyRow = created.json().await.unwrap();
    let row = wait_state(&server, study.id, |s| s.is_final()).await;
    assert_eq!(row.state, StudyState::Done, "{:?}", row.stop_reason);

    let mut trials: Vec<TrialView> =
        get_json(&server, &format!("/api/studies/{}/trials", study.id)).await;
    trials.sort_by_key(|t| t.id);
    let order: Vec<(&str, &str)> = trials
        .iter()
        .map(|t| (t.settings["threads"].as_str(), t.settings["top_k"].as_str()))
        .collect();
    // The baseline, then grid order with the request-time setting fastest.
    assert_eq!(order, [("1", "40"), ("1", "1"), ("2", "1"), ("2", "40")]);
    let launched: Vec<i64> =
        trials.iter().filter(|t| t.metrics.get(Metric::LoadMs).is_some()).map(|t| t.id).collect();
    assert_eq!(launched, [trials[0].id, trials[2].id], "two launches for two thread counts");
    for (t, by) in [(&trials[1], &trials[0]), (&trials[3], &trials[2])] {
        assert_eq!(t.state, TrialState::Done, "{t:?}");
        assert!(t.metrics.get(Metric::DecodeTps).unwrap() > 0.0);
        let note = t.note.as_deref().unwrap_or_default();
        assert!(note.contains(&format!("the engine launched for trial {}", by.id)), "{note}");
        assert_eq!(t.command, by.command, "the same command line ran");
    }
    // Each trial's top_k reached the engine: it reports what it sampled with.
    for t in &trials {
        let m: Value = get_json(&server, &format!("/api/trials/{}/measurement", t.id)).await;
        let sent: i64 = t.settings["top_k"].parse().unwrap();
        assert_eq!(m["speed"]["read_back"]["top_k"], json!(sent), "trial {}", t.id);
    }
    // The study is over: the engine it kept between trials is stopped.
    let engines = server.data.path().join("engines");
    common::eventually(LIMIT, "no engine left running", || async {
        let left = std::fs::read_dir(&engines).map(|d| d.count()).unwrap_or(0);
        (left == 0).then_some(())
    })
    .await;
    server.stop().await;
}

#[tokio::test]
async fn llama_bench_output_becomes_trials() {
    let _engine = common::require_demo_engine();
    let root = common::repo_root();
    let out = std::process::Command::new(root.join(".tools/engine-bin/llama-bench"))
        .args([
            "-m",
            ".tools/models/tiny-llama.gguf",
            "-p",
            "16",
            "-n",
            "8",
            "-t",
            "1,2",
            "-d",
            "0,32",
            "-r",
            "2",
            "-o",
            "jsonl",
        ])
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8(out.stdout).unwrap();
    let trials = tunebook::import::parse_import(&text, false, "bench").unwrap();
    assert_eq!(trials.len(), 2, "one trial per thread count, prefill and decode merged");
    for (t, threads) in trials.iter().zip(["1", "2"]) {
        assert_eq!(t.settings["threads"], threads);
        assert_eq!(t.model, "tiny-llama");
        assert!(
            t.metrics.get(Metric::PrefillTps).unwrap() > 0.0
                && t.metrics.get(Metric::DecodeTps).unwrap() > 0.0,
            "{t:?}"
        );
        assert_eq!((t.prompt_tokens, t.tokens_generated), (Some(16), Some(8)));
    }
    // llama-bench's JSON array form reads the same.
    let array = format!(
        "[{}]",
        text.lines().filter(|l| !l.trim().is_empty()).collect::<Vec<_>>().join(",")
    );
    assert_eq!(tunebook::import::parse_import(&array, false, "bench").unwrap().len(), 2);
    // Depth rows are kept beside, not over, the decode at depth 0; each
    // test's spread is kept too.
    for t in &trials {
        let note = t.note.as_deref().unwrap();
        assert!(note.contains("tg8 @ depth 32: ") && note.contains("pp16: "), "{note}");
        assert!(note.contains(" ± "), "{note}");
        let at_0: f64 =
            note.split("tg8: ").nth(1).unwrap().split(' ').next().unwrap().parse().unwrap();
        assert!(
            (at_0 - t.metrics.get(Metric::DecodeTps).unwrap()).abs() < 0.01,
            "{note} vs {:?}",
            t.metrics.get(Metric::DecodeTps)
        );
        assert!(!t.settings.contains_key("n_gpu_layers"), "-1 is the engine's choice");
        assert!(!t.settings.contains_key("flash_attn"), "-1 is auto");
    }
    // And llama-bench's CSV reads to the same trials.
    let csv = std::process::Command::new(root.join(".tools/engine-bin/llama-bench"))
        .args(["-m", ".tools/models/tiny-llama.gguf", "-p", "16", "-n", "8", "-t", "1,2"])
        .args(["-d", "0,32", "-r", "1", "-o", "csv"])
        .current_dir(&root)
        .output()
        .unwrap();
    let text = String::from_utf8(csv.stdout).unwrap();
    let from_csv = tunebook::import::parse_import(&text, true, "bench").unwrap();
    assert_eq!(from_csv.len(), 2);
    for (a, b) in from_csv.iter().zip(&trials) {
        assert_eq!((&a.settings, &a.model), (&b.settings, &b.model));
        assert!(
            a.metrics.get(Metric::DecodeTps).unwrap() > 0.0
                && a.note.as_deref().unwrap().contains("@ depth 32")
        );
    }
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

/// Bisection on a memory boundary: the ends first, then halves, the answer
/// measured again, and the findings name the largest size that ran (twice)
/// and the nearest that did not.
#[tokio::test]
async fn bisection_finds_the_largest_context_that_fits() {
    let (server, _profiles) =
        on_fake_engine("small", &["--fake", "ok", "--fake-oom-ctx", "5000"]).await;
    let def = json!({
        "name": "largest context",
        "profile": "small",
        "model": "m",
        "space": { "ctx_size": { "min": 1024, "max": 8192, "step": 1024 } },
        "baseline": { "ctx_size": 1024 },
        "objectives": [{ "metric": "setting.ctx_size" }],
        "strategy": { "kind": "bisect" },
        "budget": { "max_trials": 20 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let (study, trials) = run_to_the_end(&server, &def).await;
    let sizes: Vec<&str> = trials.iter().map(|t| t.settings["ctx_size"].as_str()).collect();
    assert_eq!(
        sizes,
        ["1024", "8192", "4096", "6144", "5120", "4096"],
        "the ends, then halves, then the answer again"
    );
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", study.id)).await;
    let markdown = found["markdown"].as_str().unwrap();
    let (ran, oom, again) = (trials[2].id, trials[4].id, trials[5].id);
    assert!(
        markdown.contains(&format!(
            "**Largest `ctx_size` that holds every bound: 4096** — trial {ran}, and again in trial {again}; the nearest value beyond it that was tried, 5120, did not (trial {oom}: out of memory)."
        )),
        "{markdown}"
    );
    // A bisection needs a setting to bisect.
    let mut wrong = def.clone();
    wrong["objectives"] = json!([{ "metric": "decode_tps" }]);
    let r = post(&server, "/api/studies", &wrong).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("strategy `bisect` needs the first objective"));
    server.stop().await;
}

#[tokio::test]
async fn a_trial_that_cannot_reach_the_front_is_cut_short_and_one_that_may_is_not() {
    // Decode at 100 tok/s a thread: two threads are four times slower
    // than eight.
    let (server, _profiles) =
        on_fake_engine("threads", &["--fake", "ok", "--fake-tps-per-thread", "100"]).await;
    let def = |name: &str, objectives: Value| {
        json!({
            "name": name,
            "profile": "threads",
            "model": "m",
            "space": { "threads": [8, 2] },
            "baseline": { "threads": 8 },
            "objectives": objectives,
            "strategy": { "kind": "grid" },
            "budget": { "max_trials": 2, "confirm_pairs": 0 },
            "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 3, "warmup": 0 } }
        })
    };
    let cut = |t: &TrialView| t.note.as_deref().is_some_and(|n| n.contains("repeats cut short"));
    // On decode alone the slow trial cannot reach the front.
    let (_, trials) =
        run_to_the_end(&server, &def("speed", json!([{ "metric": "decode_tps" }]))).await;
    assert_eq!(trials.len(), 2);
    assert!(
        (trials[0].metrics.get(Metric::DecodeTps).unwrap() - 800.0).abs() < 1.0,
        "{:?}",
        trials[0]
    );
    assert!(!cut(&trials[0]) && cut(&trials[1]), "{trials:?}");
    let note = trials[1].note.as_deref().unwrap();
    assert!(note.contains(&format!("trial {} is faster in decode", trials[0].id)), "{note}");
    // With memory an objective too, it might: nothing is cut short.
    let both = json!([{ "metric": "decode_tps" }, { "metric": "peak_rss_bytes" }]);
    let (_, trials) = run_to_the_end(&server, &def("speed and memory", both)).await;
    assert_eq!(trials.len(), 2);
    assert!(trials.iter().all(|t| !cut(t)), "{trials:?}");
    server.stop().await;
}

#[tokio::test]
async fn a_pick_is_run_again_against_the_baseline_before_it_is_named() {
    let (server, _profiles) = on_fake_engine("even", &["--fake", "ok"]).await;
    // Fifteen configurations the fake engine runs alike, a budget of 22:
    // the search's best is only the luckiest, and three A-B pairs say so.
    let def = json!({
        "name": "confirm",
        "profile": "even",
        "model": "m",
        "space": { "threads": [1, 2, 3, 4, 5], "ctx_size": [1024, 2048, 4096] },
        "baseline": { "threads": 1, "ctx_size": 1024 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        // No re-runs of the baseline between: the grid's order is the point.
        "budget": { "max_trials": 22, "confirm_pairs": 3, "rerun_baseline_every": 0 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let (study, trials) = run_to_the_end(&server, &def).await;
    let roles: Vec<&str> =
        trials.iter().map(|t| t.role.map(|r| r.as_str()).unwrap_or("")).collect();
    // The grid's fifteen, then the best of them and the baseline in turn;
    // a second candidate would not fit in the one trial left.
    assert_eq!(roles.len(), 21, "{roles:?}");
    assert_eq!(roles[15..], ["confirm", "confirm_base"].repeat(3), "{roles:?}");
    // The best search trial, the first of equals.
    let best = trials[..15]
        .iter()
        .filter(|t| t.role.map(|r| r.as_str()) == Some("search"))
        .reduce(|a, b| {
            if b.metrics.get(Metric::DecodeTps) > a.metrics.get(Metric::DecodeTps) { b } else { a }
        })
        .unwrap();
    for pair in trials[15..].chunks(2) {
        assert_eq!(pair[0].settings, best.settings, "the pick: {pair:?}");
        assert_eq!(pair[1].settings, trials[0].settings, "the baseline: {pair:?}");
    }
    // The findings say whether it held up, with the paired ratio.
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", study.id)).await;
    let confirmed = found["findings"].as_array().unwrap().iter().find(|f| f["kind"] == "confirmed");
    let confirmed = confirmed.unwrap_or_else(|| panic!("{found}"));
    assert_eq!(confirmed["pairs"], 3);
    assert_eq!(confirmed["trials"].as_array().unwrap().len(), 6);
    let markdown = found["markdown"].as_str().unwrap();
    let held = confirmed["held"].as_bool().unwrap();
    let expected = if held { "**Confirmed pick**" } else { "**Not confirmed (pick)**" };
    assert!(
        markdown.contains(expected) && markdown.contains("interleaved with the baseline"),
        "{markdown}"
    );
    server.stop().await;
}

#[tokio::test]
async fn llama_cpps_own_fit_can_be_the_baseline() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let mut def = demo_study();
    def["fit_baseline"] = json!(true);
    // Nothing says how much context: llama.cpp's fit chooses it.
    def["fixed"] = json!({ "threads": 2 });
    def["strategy"] = json!({ "kind": "grid" });
    def["budget"] = json!({ "max_trials": 1 });
    let created = post(&server, "/api/studies", &def).await;
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let row: StudyRow = created.json().await.unwrap();
    let baseline = &row.definition.baseline;
    let ctx = baseline.get("ctx_size").and_then(|v| v.as_str()).expect("a fitted context");
    assert!(ctx.parse::<u64>().unwrap() > 0, "{baseline:?}");
    assert_eq!(baseline["cache_type_k"], json!("f16"), "what the study gave is kept");
    let detail: Value = get_json(&server, &format!("/api/studies/{}", row.id)).await;
    let events = detail["events"].as_array().unwrap();
    assert!(
        events.iter().any(|e| e["message"].as_str().unwrap().contains("(llama-fit-params): -c ")),
        "{events:?}"
    );
    // On workers, llama.cpp's fit of this server's memory means nothing.
    def["machines"] = json!(["any"]);
    let refused = post(&server, "/api/studies", &def).await;
    assert_eq!(refused.status(), 400);
    assert!(refused.text().await.unwrap().contains("fit_baseline"));
    server.stop().await;
}

/// The study page's download: every trial a row, every setting a column,
/// the same rows the API lists.
#[tokio::test]
async fn a_studys_trials_download_as_csv() {
    let (server, study) = common::planted_server(|_| {}).await;
    let r =
        http().get(server.url(&format!("/api/studies/{study}/trials.csv"))).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "text/csv; charset=utf-8");
    let file = r.headers()["content-disposition"].to_str().unwrap().to_string();
    assert_eq!(file, format!("attachment; filename=\"study-{study}-trials.csv\""));
    let text = r.text().await.unwrap();
    let listed: Vec<TrialView> = get_json(&server, &format!("/api/studies/{study}/trials")).await;
    let mut rows = csv::Reader::from_reader(text.as_bytes());
    let header = rows.headers().unwrap().clone();
    let ids: Vec<i64> = rows.records().map(|r| r.unwrap()[0].parse().unwrap()).collect();
    let mut expected: Vec<i64> = listed.iter().map(|t| t.id).collect();
    expected.sort();
    assert_eq!(ids, expected);
    for name in listed[0].settings.keys() {
        assert!(header.iter().any(|h| h == format!("setting.{name}")), "{name}: {header:?}");
    }
    let r = http().get(server.url("/api/studies/999999/trials.csv")).send().await.unwrap();
    assert_eq!(r.status(), 404);
    server.stop().await;
}
