//! A trial's pages in a real browser: a trial run from the home page on
//! the real engine, its row arriving without a reload and a rejected
//! setting in the engine's words; a trial measured at depth; the real
//! model's answers and log; a running trial followed live.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{Value, json};

use super::{Driver, drawn, fill, goto, open, screenshot, text_when};
use crate::common::{self, TestServer, eventually, http, require_demo_engine};

#[tokio::test]
async fn run_a_trial_from_the_page_and_watch_its_row_arrive() {
    let _engine = require_demo_engine();
    assert!(
        common::repo_root().join("target/site/pkg/tunebook_bg.wasm").is_file(),
        "the browser bundle is missing: run scripts/build-site.sh"
    );
    // A fork's profile: a cache type it names that this build lacks.
    let server = TestServer::start_forked().await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    let long = Duration::from_secs(120);

    open(&client, &server.url("/"), "main[data-hydrated='true']").await;
    client.find(Locator::Css("#no-trials")).await.expect("an empty history at first");
    // Survives only if the page is never reloaded.
    client.execute("window.tunebookMarker = 42;", vec![]).await.unwrap();

    fill(&client, "#ctx_size", "1024").await;
    fill(&client, "#threads", "2").await;
    // Cache types are chosen from the engine's list, the finest first.
    let offered = client
        .execute(
            "return [...document.querySelectorAll('#cache_type_k option')].map(o => o.value);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(offered[0], "f32", "{offered}");
    client
        .find(Locator::Css("#cache_type_k"))
        .await
        .unwrap()
        .select_by_value("q8_0")
        .await
        .unwrap();
    client
        .find(Locator::Css("#cache_type_v"))
        .await
        .unwrap()
        .select_by_value("q8_0")
        .await
        .unwrap();
    client
        .find(Locator::Css("#flash_attn option[value='on']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    client.find(Locator::Css("#run")).await.unwrap().click().await.unwrap();

    let row = client
        .wait()
        .at_most(long)
        .for_element(Locator::Css("tr[data-state='done'], tr[data-state='failed']"))
        .await
        .expect("the trial's row reaches a final state");
    if row.attr("data-state").await.unwrap().as_deref() != Some("done") {
        screenshot(&client, "trial-not-done").await;
        let api = http().get(server.url("/api/trials")).send().await.unwrap().text().await.unwrap();
        panic!("the trial failed: {api}");
    }
    let text = row.text().await.unwrap();
    assert!(text.contains("cache_type_k=q8_0") && text.contains("flash_attn=on"), "{text}");
    let decode = row.find(Locator::Css("td:nth-child(9)")).await.unwrap().text().await.unwrap();
    let study = row.find(Locator::Css("td.study")).await.unwrap().text().await.unwrap();
    assert_eq!(study, "—", "run on its own, not in a study");
    assert!(decode.parse::<f64>().unwrap() > 0.0, "decode tok/s shown: {decode:?}");
    screenshot(&client, "trial-done").await;

    // A value only the engine can refuse: its own message is shown.
    let k = client.find(Locator::Css("#cache_type_k")).await.unwrap();
    k.select_by_value("q3_bogus").await.unwrap();
    client.find(Locator::Css("#run")).await.unwrap().click().await.unwrap();
    let failure = client
        .wait()
        .at_most(long)
        .for_element(Locator::Css("tr.failure"))
        .await
        .expect("the failed trial's cause appears");
    let cause = failure.text().await.unwrap();
    assert!(cause.contains("setting rejected") && cause.contains("q3_bogus"), "{cause}");

    // A value Tunebook refuses never reaches the engine: the server's message
    // (a browser's request need not come from the page's list).
    client
        .execute(
            "const s = document.getElementById('cache_type_k'); s.add(new Option('--rpc', '--rpc')); \
             s.value = '--rpc'; s.dispatchEvent(new Event('change', { bubbles: true }));",
            vec![],
        )
        .await
        .unwrap();
    client.find(Locator::Css("#run")).await.unwrap().click().await.unwrap();
    let message =
        text_when(&client, "#run-error", "the validation message", |t| t.contains("--rpc")).await;
    assert!(message.contains("setting `cache_type_k`: `--rpc` is not one of"), "{message}");
    screenshot(&client, "trial-rejected").await;

    let marker = client.execute("return window.tunebookMarker;", vec![]).await.unwrap();
    assert_eq!(marker, json!(42), "the page was never reloaded");
    let rows = client.find_all(Locator::Css("tr[data-trial-id]")).await.unwrap();
    assert_eq!(rows.len(), 2, "two trials ran, the refused one was not stored");

    driver.assert_quiet(&client, "the home page", &[("/api/run_trial", 400)]).await;
    client.close().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_trial_measured_at_depth_plots_speed_against_context_depth() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let study = json!({
        "name": "depth",
        "profile": "demo",
        "model": "tiny-llama",
        "space": { "threads": [2] },
        "fixed": { "ctx_size": 1024 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 1 },
        "probes": {
            "speed": { "prompt_tokens": 16, "n_predict": 4, "repeats": 1, "warmup": 0 },
            "depth": { "depths": [0, 256, 4096], "n_predict": 4, "repeats": 2 }
        }
    });
    let created = http().post(server.url("/api/studies")).json(&study).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let trial = eventually(Duration::from_secs(120), "the study's trial", || {
        let url = server.url(&format!("/api/studies/{id}/trials"));
        async move {
            let trials: Vec<Value> = http().get(url).send().await.ok()?.json().await.ok()?;
            let t = trials.into_iter().next()?;
            (t["state"] == "done").then(|| t["id"].as_i64()).flatten()
        }
    })
    .await;

    let driver = Driver::start().await;
    let client = driver.browser().await;
    goto(&client, &server.url(&format!("/trials/{trial}"))).await;
    // Two depths fit the 1024-token context; the third is skipped. Decode
    // and prefill each get a point per depth.
    drawn(&client, "depth-plot", "4").await;
    let x = client
        .execute("return document.getElementById('depth-plot')._fullData[0].x;", vec![])
        .await
        .unwrap();
    assert_eq!(x, json!([0, 256]));
    screenshot(&client, "trial-depth").await;
    driver.assert_quiet(&client, "a trial page", &[]).await;

    // One objective: no front to choose axes for, but every trial in the
    // order it ran with the best so far (a marker and the line's step).
    open(&client, &server.url(&format!("/studies/{id}")), "main.study[data-hydrated='true']").await;
    drawn(&client, "pareto-plot", "2").await;
    let heading = client.find(Locator::Css("#pareto-plot")).await.unwrap();
    let panel = heading.find(Locator::XPath("./ancestor::section[1]/h2")).await.unwrap();
    assert_eq!(panel.text().await.unwrap(), "Each trial's decode tok/s, and the best so far");
    assert!(client.find(Locator::Css("#pareto-x")).await.is_err(), "no axes to choose");
    assert!(client.find(Locator::Css("#pareto-empty")).await.is_err(), "not said to be empty");
    driver.assert_quiet(&client, "a study of one objective", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_trial_of_the_real_model_hydrates_and_shows_each_answer_and_its_log() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let trial = json!({
        "profile": "demo",
        "model": "smollm2-135m",
        "settings": { "ctx_size": "1024", "threads": "2" }
    });
    let created = http().post(server.url("/api/trials")).json(&trial).send().await.unwrap();
    let id = created.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    // Eight questions on two busy cores: a deadline, not a timing.
    eventually(Duration::from_secs(300), "the trial's end", || {
        let url = server.url(&format!("/api/trials/{id}"));
        async move {
            let t: Value = http().get(url).send().await.ok()?.json().await.ok()?;
            (t["state"] == "done").then_some(())
        }
    })
    .await;

    let driver = Driver::start().await;
    let client = driver.browser().await;
    open(&client, &server.url(&format!("/trials/{id}")), "main.trial[data-hydrated='true']").await;
    let head = text_when(&client, "#quality-head", "the quality suite", |t| !t.is_empty()).await;
    assert!(head.contains("asked through the model's chat template"), "{head}");
    let rows = client.find_all(Locator::Css("#quality-cases tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 8);
    let capital = rows[2].text().await.unwrap();
    assert!(capital.contains("What is the capital of France?"), "{capital}");
    // The finished trial's log, read from its file once the page is live:
    // a page whose hydration panicked (a table body the browser added and
    // the page did not render) never gets this far.
    let log = text_when(&client, "#log-tail", "the engine's log", |t| {
        !t.contains("wrote nothing") && t.lines().count() > 3
    })
    .await;
    assert!(log.contains("print_timing"), "the engine's own lines: {log}");
    // Each speed's spread over the requests: percentiles, and every request
    // drawn with its measure's median.
    let samples: Vec<Value> = common::get_json(&server, &format!("/api/trials/{id}/samples")).await;
    let requests = samples.len();
    assert!(requests > 0, "no speed requests kept");
    for measure in ["ttft_ms", "tpot_ms", "decode_tps", "prefill_tps"] {
        let row = client
            .find(Locator::Css(&format!("#speed-spread tr[data-measure='{measure}']")))
            .await
            .unwrap_or_else(|e| panic!("{measure}: {e}"));
        let cells = row.find_all(Locator::Css("td")).await.unwrap();
        assert_eq!(cells[0].text().await.unwrap(), requests.to_string(), "{measure}");
    }
    drawn(&client, "samples-plot", &(4 * (requests + 2)).to_string()).await;
    screenshot(&client, "trial-real-model").await;
    driver.assert_quiet(&client, "the real model's trial page", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}

/// A trial's page opened as soon as it is queued moves on through its
/// phases by itself (never reloaded), following the engine's log as it
/// runs (one stream: the lines shown stay as the phases pass), and ends on
/// the finished trial with its measurements.
#[tokio::test]
async fn a_running_trials_page_follows_it_live_through_its_phases_and_its_log() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    // The real model answers its eight questions after the speed probe: a
    // trial long enough to be seen running.
    let trial = json!({
        "profile": "demo",
        "model": "smollm2-135m",
        "settings": { "ctx_size": "1024", "threads": "2" }
    });
    let created = http().post(server.url("/api/trials")).json(&trial).send().await.unwrap();
    let id = created.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    open(&client, &server.url(&format!("/trials/{id}")), "main.trial[data-hydrated='true']").await;
    client.execute("window.tunebookMarker = 9;", vec![]).await.unwrap();
    let mut seen: Vec<String> = Vec::new();
    let mut log_while_running = false;
    let mut most_lines = 0;
    let deadline = std::time::Instant::now() + Duration::from_secs(300);
    loop {
        let now = client
            .execute(
                "return [document.getElementById('trial-state')?.innerText || '',
                         document.getElementById('log-tail')?.innerText || ''];",
                vec![],
            )
            .await
            .unwrap();
        let (state, log) = (now[0].as_str().unwrap().to_string(), now[1].as_str().unwrap_or(""));
        let lines = log.lines().count();
        if state == "probing" && lines > 3 {
            log_while_running = true;
        }
        // One stream for the page: what it showed stays as the phases pass.
        assert!(lines >= most_lines, "the log went from {most_lines} lines to {lines} at {state}");
        most_lines = lines;
        if !state.is_empty() && seen.last() != Some(&state) {
            seen.push(state.clone());
        }
        if state == "done" || state == "failed" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the page stopped at {seen:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(seen.last().map(String::as_str), Some("done"), "{seen:?}");
    assert!(seen.len() >= 2, "a phase before the end was shown: {seen:?}");
    assert!(log_while_running, "the engine's log was followed while it probed: {seen:?}");
    let marker = client.execute("return window.tunebookMarker;", vec![]).await.unwrap();
    assert_eq!(marker, json!(9), "the page was never reloaded");
    text_when(&client, "#trial-metrics", "the finished trial's measurements", |t| {
        t.contains("decode tok/s") && t.contains("quality")
    })
    .await;
    driver.assert_quiet(&client, "a running trial's page", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}
