//! A study's pages in a real browser: designed in the form, watched live
//! and its Pareto plot clicked through; two studies compared; a study on
//! two machines; the designer refusing what cannot run.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{Value, json};

use super::{Driver, drawn, fill, goto, open, screenshot, text_when};
use crate::common::{self, TestServer, eventually, http, require_demo_engine};

#[tokio::test]
async fn design_a_study_watch_it_run_and_click_through_its_pareto_plot() {
    let _engine = require_demo_engine();
    let server = TestServer::start().await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    let long = Duration::from_secs(180);

    open(&client, &server.url("/studies/new"), "main.designer[data-hydrated='true']").await;
    fill(&client, "#study-name", "ubatch in the browser").await;
    client.find(Locator::Css("#add-vary")).await.unwrap().click().await.unwrap();
    let setting = client.find(Locator::Css("#vary-rows select.setting")).await.unwrap();
    setting.select_by_value("ubatch_size").await.unwrap();
    // What the form cannot read is said at once, before the server sees it.
    fill(&client, "#vary-rows input.values", "128..x").await;
    // (Until the values are typed, the form says there are none: waited past.)
    let errors =
        text_when(&client, "#study-errors", "the form's error", |t| t.contains("`x`")).await;
    assert!(errors.contains("`ubatch_size`: `x` is not a number"), "{errors}");
    fill(&client, "#vary-rows input.values", "128, 256").await;
    fill(&client, "#vary-rows input.baseline", "256").await;
    for (name, value) in [("ctx_size", "1024"), ("threads", "2"), ("no_such_setting", "1")] {
        client.find(Locator::Css("#add-fixed")).await.unwrap().click().await.unwrap();
        fill(&client, "#fixed-rows tbody tr:last-child input.setting-name", name).await;
        fill(&client, "#fixed-rows tbody tr:last-child input.value", value).await;
    }
    // The server's own message, as you type.
    let errors = text_when(&client, "#study-errors", "the server's error", |t| {
        t.contains("no_such_setting")
    })
    .await;
    assert!(errors.contains("unknown setting `no_such_setting`"), "{errors}");
    assert!(
        client
            .find(Locator::Css("#launch"))
            .await
            .unwrap()
            .attr("disabled")
            .await
            .unwrap()
            .is_some(),
        "no launch while the study is wrong"
    );
    client
        .find(Locator::Css("#fixed-rows tbody tr:last-child button.remove"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The form's settings are offered as objectives, and a pick stays put
    // while the rest of the form changes.
    let second = "#objective-rows tbody tr:nth-child(2) select.metric";
    let pick = |value: &'static str| {
        let client = client.clone();
        async move {
            let select = client.find(Locator::Css(second)).await.unwrap();
            select.select_by_value(value).await.unwrap();
        }
    };
    pick("setting.ctx_size").await;
    fill(&client, "#repeats", "2").await;
    let shown = client.find(Locator::Css(second)).await.unwrap().prop("value").await.unwrap();
    assert_eq!(shown.as_deref(), Some("setting.ctx_size"));
    pick("peak_rss_bytes").await;
    client.find(Locator::Css("#strategy")).await.unwrap().select_by_value("grid").await.unwrap();
    fill(&client, "#prompt-tokens", "16").await;
    fill(&client, "#n-predict", "4").await;
    fill(&client, "#repeats", "1").await;
    // "No effect" within ±5 % on speeds, the pick confirmed in 4 pairs.
    fill(&client, "#margin-speed", "5").await;
    fill(&client, "#confirm-pairs", "4").await;
    let planned = text_when(&client, "#planned", "the planner's preview", |t| t == "2").await;
    assert_eq!(planned, "2");
    assert_eq!(client.find(Locator::Css("#not-fit")).await.unwrap().text().await.unwrap(), "0");
    screenshot(&client, "study-designed").await;

    client.find(Locator::Css("#launch")).await.unwrap().click().await.unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css("main.study[data-hydrated='true'] #study-state"))
        .await
        .expect("the study's live page opens");
    let path = client.current_url().await.unwrap().path().to_string();
    assert!(path.starts_with("/studies/"), "{path}");
    let row: Value = common::get_json(&server, &format!("/api{path}")).await;
    assert_eq!(row["definition"]["margins"]["speed_pct"], 5.0, "{row}");
    assert_eq!(row["definition"]["margins"]["memory_pct"], 3.0, "the default: {row}");
    assert_eq!(row["definition"]["budget"]["confirm_pairs"], 4, "{row}");
    client.execute("window.tunebookMarker = 7;", vec![]).await.unwrap();
    // Trials arrive without a reload, and the study ends by itself.
    let state = eventually(long, "the study's end on the page", || {
        let client = client.clone();
        async move {
            let done =
                client.find_all(Locator::Css("#study-trials tr[data-state='done']")).await.ok()?;
            let state = client.find(Locator::Css("#study-state")).await.ok()?.text().await.ok()?;
            (done.len() == 2 && state == "done").then_some(state)
        }
    })
    .await;
    assert_eq!(state, "done");
    let marker = client.execute("return window.tunebookMarker;", vec![]).await.unwrap();
    assert_eq!(marker, json!(7), "the live page was never reloaded");
    let events = client.find(Locator::Css("#events")).await.unwrap().text().await.unwrap();
    assert!(events.contains("every configuration the space allows"), "{events}");
    // The findings open in short, naming the best trial as not yet
    // confirmed, with each section folded under its title.
    let digest =
        text_when(&client, "#digest", "the findings in short", |t| t.contains("trial")).await;
    assert!(digest.contains("In short") && digest.contains("Not confirmed yet"), "{digest}");
    let findings = client.find(Locator::Css("#findings")).await.unwrap().text().await.unwrap();
    assert!(findings.contains("Best configurations"), "{findings}");
    assert!(!findings.contains("Best decode tok/s"), "folded: {findings}");
    let best = "//details[@class='section'][summary[contains(., 'Best configurations')]]";
    client.find(Locator::XPath(&format!("{best}/summary"))).await.unwrap().click().await.unwrap();
    let best = client.find(Locator::XPath(best)).await.unwrap().text().await.unwrap();
    assert!(best.contains("Best decode tok/s") && best.contains("— trial "), "{best}");

    // The Pareto plot draws both trials; a click on a point opens its trial.
    drawn(&client, "pareto-plot", "2").await;
    // A third axis turns the plot three-dimensional, and back.
    let kinds = |want: &'static str| {
        let client = client.clone();
        move || {
            let client = client.clone();
            async move {
                let v = client
                    .execute(
                        "const d = document.getElementById('pareto-plot');
                         return d && d._fullData ? [d._fullData.map(t => t.type), d.dataset.drawn] : null;",
                        vec![],
                    )
                    .await
                    .ok()?;
                (v[0][0] == json!(want) && v[1] == json!("2")).then_some(v)
            }
        }
    };
    let pareto_z = client.find(Locator::Css("#pareto-z")).await.unwrap();
    pareto_z.select_by_value("ttft_ms").await.unwrap();
    eventually(Duration::from_secs(60), "the three-dimensional view", kinds("scatter3d")).await;
    screenshot(&client, "pareto-3d").await;
    pareto_z.select_by_value("").await.unwrap();
    eventually(Duration::from_secs(60), "the two-dimensional view again", kinds("scatter")).await;
    // The explore plots show both trials too: by the varied setting's
    // value, in the order they ran, and on parallel axes.
    client.find(Locator::Css("#explore summary")).await.unwrap().click().await.unwrap();
    let explore = eventually(Duration::from_secs(60), "the explore plots", || {
        let client = client.clone();
        async move {
            let v = client
                .execute(
                    "return ['effect-plot', 'best-plot', 'parallel-plot']
                       .map(id => document.getElementById(id).dataset.drawn || '');",
                    vec![],
                )
                .await
                .ok()?;
            (v == json!(["2", "4", "2"])).then_some(v)
        }
    })
    .await;
    assert_eq!(explore, json!(["2", "4", "2"]));
    let boxes = client
        .execute(
            "return document.getElementById('effect-plot')._fullData.map(t => t.name);",
            vec![],
        )
        .await
        .unwrap();
    assert_eq!(boxes, json!(["128", "256"]), "one box per value of ubatch_size, in order");
    screenshot(&client, "study-done").await;

    // Both trials picked in the table and compared side by side.
    let study_url = client.current_url().await.unwrap();
    for pick in client.find_all(Locator::Css("#study-trials input.pick")).await.unwrap() {
        pick.click().await.unwrap();
    }
    client.find(Locator::Css("#compare-link")).await.unwrap().click().await.unwrap();
    let differs = text_when(
        &client,
        "#compare tr.differs[data-setting='ubatch_size']",
        "the comparison",
        |t| t.contains("128") && t.contains("256"),
    )
    .await;
    assert!(differs.starts_with("ubatch_size"), "{differs}");
    let best = client
        .find_all(Locator::Css("#compare tr[data-metric='decode_tps'] td.best"))
        .await
        .unwrap();
    assert_eq!(best.len(), 1, "one best decode speed marked");
    screenshot(&client, "compare").await;
    open(&client, study_url.as_str(), "main.study[data-hydrated='true'] #study-state").await;
    drawn(&client, "pareto-plot", "2").await;
    let (trial, path) = click_first_point(&client, "pareto-plot").await;
    assert_eq!(path, format!("/trials/{trial}"));
    let state = text_when(&client, "#trial-state", "the trial's state", |t| !t.is_empty()).await;
    assert_eq!(state, "done");
    let command = client.find(Locator::Css("#command")).await.unwrap().text().await.unwrap();
    assert!(command.contains("llama-server") && command.contains("-ub"), "{command}");
    let read_back = client.find(Locator::Css("#read-back")).await.unwrap().text().await.unwrap();
    assert!(read_back.contains("n_ctx"), "{read_back}");
    assert_eq!(client.find_all(Locator::Css("#samples tbody tr")).await.unwrap().len(), 1);
    // The engine's own output, from its log (its last lines: at verbosity
    // 4 the start scrolls out), for a trial that did not fail.
    let log = text_when(&client, "#log-tail[data-ended='true']", "the engine's log", |t| {
        t.contains("print_timing")
    })
    .await;
    assert!(log.contains("eval time =") && log.contains("tokens per second"), "{log}");
    screenshot(&client, "trial-page").await;

    driver
        .assert_quiet(&client, "the designer and the study page", &[("/api/check_study", 400)])
        .await;
    client.close().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn two_studies_of_the_same_space_compare_side_by_side() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    let mut ids = Vec::new();
    for (name, threads) in [("two threads", 2), ("one thread", 1)] {
        let study = json!({
            "name": name,
            "profile": "demo",
            "model": "tiny-llama",
            "space": { "ubatch_size": [128, 256] },
            "fixed": { "ctx_size": 1024, "threads": threads },
            "objectives": [{ "metric": "decode_tps" }],
            "strategy": { "kind": "grid" },
            "probes": { "speed": { "prompt_tokens": 16, "n_predict": 4, "repeats": 1, "warmup": 0 } }
        });
        let created = http().post(server.url("/api/studies")).json(&study).send().await.unwrap();
        assert_eq!(created.status(), 201);
        let id = created.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
        eventually(Duration::from_secs(120), "the study's end", || {
            let url = server.url(&format!("/api/studies/{id}"));
            async move {
                let row: Value = http().get(url).send().await.ok()?.json().await.ok()?;
                (row["state"] == "done").then_some(())
            }
        })
        .await;
        ids.push(id);
    }

    let driver = Driver::start().await;
    let client = driver.browser().await;
    open(&client, &server.url("/studies"), "#studies input.pick").await;
    // Hydrated once the link's hint is there and a click takes.
    let link = eventually(Duration::from_secs(30), "the compare link", || {
        let client = client.clone();
        async move {
            for pick in client.find_all(Locator::Css("#studies input.pick")).await.ok()? {
                if !pick.is_selected().await.ok()? {
                    pick.click().await.ok()?;
                }
            }
            client.find(Locator::Css("#compare-studies-link")).await.ok()
        }
    })
    .await;
    link.click().await.unwrap();
    // Each study held threads at its own value: that is the difference,
    // and the configurations are matched on the rest (the engine's default
    // ubatch size, 128 and 256).
    let summary = text_when(&client, "#compare-summary", "the comparison", |t| !t.is_empty()).await;
    assert!(summary.contains("The studies differ in threads 2 against 1."), "{summary}");
    assert!(summary.contains("3 configurations in common"), "{summary}");
    let rows = client.find_all(Locator::Css("#compare-studies tbody tr")).await.unwrap();
    assert_eq!(rows.len(), 3);
    screenshot(&client, "compare-studies").await;
    // Another metric, from the same page.
    client
        .find(Locator::Css("#compare-metrics a[href$='peak_rss_bytes']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let cell = text_when(
        &client,
        "#compare-studies tbody tr:first-child td:nth-child(2)",
        "memory",
        |t| t.ends_with("MiB"),
    )
    .await;
    assert!(cell.ends_with("MiB"), "{cell}");
    driver.assert_quiet(&client, "the comparison of two studies", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_study_on_two_machines_plots_one_at_a_time() {
    let data = tempfile::tempdir().unwrap();
    let settings = TestServer::settings(data.path().to_path_buf());
    let db = tunebook::db::Db::connect(&settings.database_url).await.unwrap();
    let id = common::synthetic::two_machine_study(&db).await.unwrap();
    db.pool.close().await;
    let server = TestServer::start_with(settings, data).await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    goto(&client, &server.url(&format!("/studies/{id}"))).await;
    // The first class's three trials, never the seven together.
    drawn(&client, "pareto-plot", "3").await;
    let select = client.find(Locator::Css("#pareto-machine")).await.unwrap();
    assert_eq!(select.prop("value").await.unwrap().as_deref(), Some("box-a"));
    client
        .find(Locator::Css("#pareto-machine option[value='box-b']"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    drawn(&client, "pareto-plot", "4").await;
    // The best so far is each class's own, and the budget is per class.
    let best_a = text_when(&client, "dl.best[data-machine='box-a']", "box-a's best", |t| {
        t.contains("trial")
    })
    .await;
    assert!(best_a.contains("12.0 — trial 3"), "{best_a}");
    let best_b = client.find(Locator::Css("dl.best[data-machine='box-b']")).await.unwrap();
    assert!(best_b.text().await.unwrap().contains("130.0 — trial 7"));
    let progress = client.find(Locator::Css("#progress")).await.unwrap().text().await.unwrap();
    assert_eq!(progress, "7 trials on 2 classes of machine, at most 30 each");
    // Each trial says where it ran; the findings put the machines side by side.
    let machine =
        text_when(&client, "#study-trials .machine", "a trial's machine", |t| !t.is_empty()).await;
    assert!(machine.starts_with("on box-"), "{machine}");
    let findings =
        text_when(&client, "#findings", "the findings", |t| t.contains("side by side")).await;
    assert!(findings.contains("On box-a") && findings.contains("On box-b"), "{findings}");
    screenshot(&client, "two-machines").await;
    driver.assert_quiet(&client, "a study run on two machines", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}

/// The designer refuses what cannot run, each time in words a user
/// understands (never the grammar's own names), and its form shows what a
/// study will do: a probe an objective needs is ticked and held, and
/// layers are offered to place only where trials run on a GPU.
#[tokio::test]
async fn the_designer_refuses_what_cannot_run_in_a_users_words() {
    let server = TestServer::start().await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    open(&client, &server.url("/studies/new"), "main.designer[data-hydrated='true']").await;

    // A divergence objective ticks its probe's box and holds it.
    let second = "#objective-rows tbody tr:nth-child(2) select.metric";
    client.find(Locator::Css(second)).await.unwrap().select_by_value("kld_mean").await.unwrap();
    let kld = client.find(Locator::Css("#kld")).await.unwrap();
    eventually(Duration::from_secs(10), "the KL box ticked", || {
        let kld = kld.clone();
        async move { (kld.prop("checked").await.ok()?.as_deref() == Some("true")).then_some(()) }
    })
    .await;
    assert!(kld.attr("disabled").await.unwrap().is_some(), "held while an objective needs it");
    // Without a GPU here, the llama.cpp preset places no layers.
    let profiles: Vec<Value> = common::get_json(&server, "/api/profiles").await;
    client.find(Locator::Css("button.preset")).await.unwrap().click().await.unwrap();
    text_when(&client, "#vary-rows", "the preset's rows", |t| !t.is_empty()).await;
    let names = client
        .execute(
            "return [...document.querySelectorAll('#vary-rows select.setting')].map(s => s.value);",
            vec![],
        )
        .await
        .unwrap();
    let names: Vec<String> = serde_json::from_value(names).unwrap();
    assert!(names.contains(&"cache_type_k".to_string()), "{names:?}");
    let gpu = profiles[0]["has_gpu"].as_bool().unwrap();
    assert_eq!(names.contains(&"n_gpu_layers".to_string()), gpu, "{names:?}");

    // A study file with what cannot run, one fault at a time.
    client.find(Locator::Css("#mode-file")).await.unwrap().click().await.unwrap();
    let head = "name = \"refused\"\nprofile = \"demo\"\nmodel = \"tiny-llama\"\n\
                [[objectives]]\nmetric = \"decode_tps\"\n";
    let cases = [
        (
            "[space]\ncache_type_k = [\"f16\", \"q9_0\"]\n",
            "setting `cache_type_k`: `q9_0` is not one of f32, f16",
        ),
        (
            "[space]\ncache_type_k = [\"f16\", \"q8_0\"]\n[baseline]\ncache_type_k = \"q4_0\"\n",
            "the baseline's `cache_type_k` = `q4_0` is not among the values the study tries (f16, q8_0)",
        ),
        (
            "constraints = [\"flash_attn = on\"]\n[space]\nflash_attn = [\"on\", \"off\"]\n",
            "(to compare, write `==`, not `=`)",
        ),
        (
            "constraints = [\"flash_attn == on\"]\n[space]\nflash_attn = [\"on\", \"off\"]\n",
            "if it is a value, quote it: \"on\"",
        ),
    ];
    for (body, says) in cases {
        // Top-level keys before the tables they would otherwise fall into.
        let (top, tables) = match body.split_once("[space]") {
            Some((top, rest)) => (top.to_string(), format!("[space]{rest}")),
            None => (String::new(), body.to_string()),
        };
        let text = format!("{top}{head}{tables}");
        fill(&client, "#study-file", &text).await;
        let errors = text_when(&client, "#study-errors", says, |t| t.contains(says)).await;
        for grammar in ["add op", "mul op", "kw when", "EOI"] {
            assert!(!errors.contains(grammar), "{errors}");
        }
    }
    if !gpu {
        let text = format!("{head}[space]\nn_gpu_layers = [0, 99]\n");
        fill(&client, "#study-file", &text).await;
        let says = "this engine's build has no GPU to place layers on";
        let errors = text_when(&client, "#study-errors", says, |t| t.contains(says)).await;
        assert!(errors.contains("run the study on workers that have GPUs"), "{errors}");
    }
    driver.assert_quiet(&client, "the designer", &[("/api/check_study", 400)]).await;
    client.close().await.unwrap();
    server.stop().await;
}

/// Clicks the first point of the 2D plot in `#id` with the mouse and waits
/// for the page it opens: the point's trial, and the page's path. plotly.js
/// takes a click as a point's only once its hover has found the point, and
/// a redraw (the live feed's, as the page connects) can drop the hover: on
/// a busy machine the button may go down before either has settled, and
/// the click is lost (the likely cause of a CI run's 20 s wait for the
/// trial page that ran out). The point is pointed at and clicked again
/// until a page opens or a minute passes.
async fn click_first_point(client: &fantoccini::Client, id: &str) -> (i64, String) {
    use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
    let script = format!(
        "const gd = document.getElementById('{id}');
         const fl = gd._fullLayout, t = gd._fullData.find(t => t.x.length > 0);
         const r = gd.getBoundingClientRect();
         return [Math.round(r.left + fl._size.l + fl.xaxis.d2p(t.x[0])),
                 Math.round(r.top + fl._size.t + fl.yaxis.d2p(t.y[0])), t.customdata[0]];"
    );
    let on_trial_page = || async {
        let path = client.current_url().await.unwrap().path().to_string();
        path.starts_with("/trials/").then_some(path)
    };
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let (mut clicks, mut clicked) = (0, None);
    loop {
        if let (Some(trial), Some(path)) = (clicked, on_trial_page().await) {
            return (trial, path);
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{clicks} clicks on the first point of #{id} opened no trial page"
        );
        // (Unreadable while a page opens: looked at again.)
        let at = client.execute(&script, vec![]).await.ok();
        let Some((x, y, trial)) =
            at.and_then(|a| Some((a[0].as_f64()?, a[1].as_f64()?, a[2].as_i64()?)))
        else {
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        };
        let click = MouseActions::new("mouse".into())
            .then(PointerAction::MoveTo { duration: None, x, y })
            .then(PointerAction::MoveTo {
                duration: Some(Duration::from_millis(100)),
                x: x + 1.0,
                y,
            })
            .then(PointerAction::Down { button: MOUSE_BUTTON_LEFT })
            .then(PointerAction::Up { button: MOUSE_BUTTON_LEFT });
        client.perform_actions(click).await.unwrap();
        (clicks, clicked) = (clicks + 1, Some(trial));
        // A few seconds for the page to open before the next click.
        let waited = tokio::time::timeout(Duration::from_secs(5), async {
            while on_trial_page().await.is_none() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
        .await;
        if waited.is_err() {
            eprintln!("#{id}: click {clicks} on trial {trial}'s point opened nothing: once more");
        }
    }
}
