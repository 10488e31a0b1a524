//! How a study searches: bisection to the largest context that fits, trials
//! cut short when they cannot reach the front, a pick run again against the
//! baseline before it is named, and llama.cpp's own fit as the baseline.

use serde_json::{Value, json};
use tunebook::db::studies::StudyRow;
use tunebook_views::types::{Metric, TrialView};

use super::{demo_study, post, run_to_the_end};
use crate::common::{self, TestServer, get_json, on_fake_engine};

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
