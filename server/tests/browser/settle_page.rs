//! "Settle this" on the study page: a study cut short lists what its
//! findings left open, each with a button; a click queues the runs that
//! would settle it, the page says which trials, and the study, which had
//! ended, runs them live and ends again.

use std::time::Duration;

use fantoccini::Locator;
use serde_json::Value;

use super::{Driver, open, screenshot, text_when};
use crate::common::{TestServer, eventually, get_json, http, require_demo_engine};

#[tokio::test]
async fn an_open_finding_is_settled_from_the_study_page() {
    let _engine = require_demo_engine();
    let server = TestServer::start().await;
    let study = crate::common::cut_short_study();
    let created = http().post(server.url("/api/studies")).json(&study).send().await.unwrap();
    let id = created.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let state = |want: &'static str| {
        let url = server.url(&format!("/api/studies/{id}"));
        eventually(Duration::from_secs(180), want, move || {
            let url = url.clone();
            async move {
                let s: Value = http().get(url).send().await.ok()?.json().await.ok()?;
                (s["state"] == want).then_some(())
            }
        })
    };
    state("done").await;

    let driver = Driver::start().await;
    let client = driver.browser().await;
    let button =
        "#open-findings li[data-setting='ubatch_size'][data-metric='peak_rss_bytes'] button.settle";
    open(
        &client,
        &server.url(&format!("/studies/{id}")),
        "main.study[data-hydrated='true'] #study-state",
    )
    .await;
    let label = text_when(&client, button, "the settle button", |t| !t.is_empty()).await;
    assert_eq!(label, "Settle this (4 runs)");
    client
        .execute("document.getElementById('open-findings').scrollIntoView()", vec![])
        .await
        .unwrap();
    screenshot(&client, "study-open-findings").await;
    client.find(Locator::Css(button)).await.unwrap().click().await.unwrap();
    let said =
        text_when(&client, "#settle-queued", "the queued trials", |t| t.contains("Queued trials"))
            .await;
    assert_eq!(said, "Queued trials 4–7 to settle `ubatch_size` on peak_rss_bytes.");
    // Live: the ended study runs again, and ends again, without a reload.
    text_when(&client, "#study-state", "running again", |t| t == "running" || t == "done").await;
    state("done").await;
    text_when(&client, "#study-state", "done again", |t| t == "done").await;
    let trials: Vec<Value> = get_json(&server, &format!("/api/studies/{id}/trials")).await;
    assert_eq!(trials.len(), 7);
    assert!(trials[3..].iter().all(|t| t["role"] == "settle" && t["state"] == "done"));
    screenshot(&client, "study-settled").await;
    driver.assert_quiet(&client, "the study page", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}
