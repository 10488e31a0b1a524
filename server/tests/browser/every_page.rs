//! Every page opened in a real browser, failing on any console error.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::{Value, json};

use super::{Driver, open, screenshot};
use crate::common::{self, TestServer, eventually, http};

/// Every page, as a person finds them after a study: each is opened in
/// Chromium, waited on until its code has taken over (hydrated) and its
/// data has arrived, and the test fails on any console error it left: an
/// uncaught exception, a panic (a hydration mismatch among them) or a
/// resource that failed to load.
#[tokio::test]
async fn every_page_opens_without_a_console_error() {
    assert!(
        common::repo_root().join("target/site/pkg/tunebook_bg.wasm").is_file(),
        "the browser bundle is missing: run scripts/build-site.sh"
    );
    let data = tempfile::tempdir().unwrap();
    let settings = TestServer::settings(data.path().to_path_buf());
    let db = tunebook::db::Db::connect(&settings.database_url).await.unwrap();
    let study = common::synthetic::planted_study(&db).await.unwrap();
    let other = common::synthetic::planted_study(&db).await.unwrap();
    db.pool.close().await;
    let server = TestServer::start_with(settings, data).await;
    let trials: Vec<Value> =
        common::get_json(&server, &format!("/api/studies/{study}/trials")).await;
    let id_of = |state: &str| {
        trials.iter().find(|t| t["state"] == state).map(|t| t["id"].as_i64().unwrap()).unwrap()
    };
    let (done, failed) = (id_of("done"), id_of("failed"));
    let three: Vec<String> = trials.iter().take(3).map(|t| t["id"].to_string()).collect();
    let r = http().post(server.url(&format!("/api/studies/{study}/reports"))).send().await.unwrap();
    let report = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let r = http().post(server.url(&format!("/api/reports/{report}/shares"))).send().await.unwrap();
    let shared = r.json::<Value>().await.unwrap()["path"].as_str().unwrap().to_string();

    let driver = Driver::start().await;
    let client = driver.browser().await;
    let pages = [
        ("/".to_string(), "main.home[data-hydrated='true']"),
        ("/studies".into(), "main.studies[data-hydrated='true'] #studies input.pick"),
        ("/studies/new".into(), "main.designer[data-hydrated='true']"),
        (format!("/studies/{study}"), "main.study[data-hydrated='true'] #findings li"),
        (format!("/trials/{done}"), "main.trial[data-hydrated='true'] #trial-metrics"),
        (format!("/trials/{failed}"), "main.trial[data-hydrated='true'] #failure"),
        (format!("/compare?trials={}", three.join(",")), "#compare tbody tr"),
        (format!("/compare?studies={study},{other}"), "#compare-studies tbody tr"),
        (format!("/reports/{report}"), "main.report[data-hydrated='true'] section"),
        (shared, "main.shared[data-hydrated='true'] #cells section"),
        ("/workers".into(), "main.workers[data-hydrated='true']"),
    ];
    // The console's log reaches the test: an error put there is read back.
    open(&client, &server.url("/"), "main.home[data-hydrated='true']").await;
    // No password, no session: nothing to log out of.
    let logout = client.find(Locator::Css("header form.logout")).await.unwrap();
    assert!(!logout.is_displayed().await.unwrap(), "no login, no \"Log out\"");
    client.execute("console.error('a planted error')", vec![]).await.unwrap();
    let errors = driver.console_errors(&client).await;
    assert!(errors.iter().any(|e| e.contains("a planted error")), "{errors:?}");
    for (path, ready) in pages {
        open(&client, &server.url(&path), ready).await;
        // What the page fetches once live comes after its first paint.
        let settled = "return document.readyState === 'complete' \
                       && !document.body.innerText.includes('Loading');";
        eventually(Duration::from_secs(30), &format!("{path} settled"), || {
            let client = client.clone();
            async move { (client.execute(settled, vec![]).await.ok()? == json!(true)).then_some(()) }
        })
        .await;
        driver.assert_quiet(&client, &path, &[]).await;
    }

    // The study's findings, drawn: each setting on each objective, the
    // planted effects among them; and the trials as a file to download.
    open(&client, &server.url(&format!("/studies/{study}")), "#digest li").await;
    let script = "return [...document.querySelectorAll('.plot-importance')]\
                  .map(d => Number(d.dataset.drawn || 0));";
    let drawn = eventually(Duration::from_secs(60), "the importance plots", || {
        let client = client.clone();
        async move {
            let v: Vec<u64> =
                serde_json::from_value(client.execute(script, vec![]).await.ok()?).ok()?;
            (!v.is_empty() && v.iter().all(|n| *n > 0)).then_some(v)
        }
    })
    .await;
    let findings: Value =
        common::get_json(&server, &format!("/api/studies/{study}/findings")).await;
    let effects = findings["findings"].as_array().unwrap().iter().filter(|f| f["kind"] == "effect");
    assert!(effects.count() > 0, "the planted study shows effects");
    let importance = findings["importance"].as_array().unwrap();
    assert_eq!(importance.len(), drawn.len(), "a plot for each objective");
    assert!(importance.iter().any(|v| v["rows"][0]["verdict"] == "effect"), "{importance:?}");
    assert!(drawn.iter().sum::<u64>() > 0, "{drawn:?}");
    client
        .execute("document.querySelector('.importance').scrollIntoView();", vec![])
        .await
        .unwrap();
    screenshot(&client, "study-importance").await;
    let href = client.find(Locator::Css("#trials-csv")).await.unwrap().attr("href").await.unwrap();
    assert_eq!(href.as_deref(), Some(format!("/api/studies/{study}/trials.csv").as_str()));
    driver.assert_quiet(&client, "the study's drawn findings", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}
