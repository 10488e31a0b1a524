//! What a study measures: the context size as an objective with recall
//! counted in tokens, quality as the divergence from the baseline, goodput
//! under a latency objective, and settings read at request time that keep
//! the engine running.

use serde_json::{Value, json};
use tunebook::db::studies::{StudyRow, StudyState};
use tunebook_views::types::{Metric, TrialState, TrialView};

use super::{LIMIT, demo_study, post, run_to_the_end, wait_state};
use crate::common::{self, TestServer, get_json, http};

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
