//! A report edited, published and read through its link, and a worker
//! added, seen up and revoked, in a real browser.

use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::json;

use super::{Driver, fill, goto, open, screenshot, text_when};
use crate::common::{self, TestServer, eventually, http};

#[tokio::test]
async fn a_report_is_edited_published_and_read_through_its_link_elsewhere() {
    assert!(
        common::repo_root().join("target/site/pkg/tunebook_bg.wasm").is_file(),
        "the browser bundle is missing: run scripts/build-site.sh"
    );
    let (server, study) = common::planted_server(|_| {}).await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    let wait = Duration::from_secs(60);

    // From the study's page: write a report from the findings.
    open(&client, &server.url(&format!("/studies/{study}")), "main[data-hydrated='true']").await;
    client.find(Locator::Css("#write-report")).await.unwrap().click().await.unwrap();
    client
        .wait()
        .at_most(wait)
        .for_element(Locator::Css(
            "main.report[data-hydrated='true'] section[data-origin='section:best']",
        ))
        .await
        .expect("the new report opens");
    let url = client.current_url().await.unwrap();
    assert!(url.path().starts_with("/reports/"), "{url}");

    // Edit the best configurations' cell, a script in the text.
    let best = "section[data-origin='section:best']";
    client.find(Locator::Css(&format!("{best} .cell-edit"))).await.unwrap().click().await.unwrap();
    fill(&client, &format!("{best} textarea.cell-text"), "## Our pick\n\nEight threads. <script>window.pwned = 1</script><img src=x onerror=\"window.pwned = 2\">").await;
    client.find(Locator::Css(&format!("{best} .cell-save"))).await.unwrap().click().await.unwrap();
    let text = text_when(
        &client,
        &format!("{best}[data-edited='true'] .cell-body"),
        "the edited cell",
        |t| t.contains("Eight threads."),
    )
    .await;
    assert!(text.starts_with("Our pick"), "{text}");
    let version = client.find(Locator::Css("#report-version")).await.unwrap();
    assert_eq!(version.attr("data-version").await.unwrap().as_deref(), Some("2"));
    // No writer model on this server: no "Rewrite as prose" that could only fail.
    assert!(
        client.find(Locator::Css("#report-prose")).await.is_err(),
        "prose offered with no writer"
    );
    // Plots are drawn in the report.
    let drawn = |client: Client| async move {
        let v = client
            .execute("return [...document.querySelectorAll('section[data-kind=plot] .plot')].filter(d => d.dataset.drawn).length;", vec![])
            .await
            .ok()?;
        v.as_u64().filter(|n| *n > 0)
    };
    eventually(wait, "a plot drawn in the report", || drawn(client.clone())).await;

    // Publish, and open the link in a browser of its own (nothing shared).
    client.find(Locator::Css("#report-publish")).await.unwrap().click().await.unwrap();
    let link = client.wait().at_most(wait).for_element(Locator::Css("a.share-link")).await.unwrap();
    let href = link.attr("href").await.unwrap().unwrap();
    assert!(href.starts_with("/share/") && href.len() == "/share/".len() + 64, "{href}");
    let elsewhere = Driver::start().await;
    let reader = elsewhere.browser().await;
    open(&reader, &server.url(&href), "main.shared[data-hydrated='true']").await;
    let text =
        text_when(&reader, "#cells", "the shared cells", |t| t.contains("Eight threads.")).await;
    assert!(text.contains("Free win"), "{text}");
    eventually(wait, "a plot drawn on the shared page", || drawn(reader.clone())).await;
    assert!(reader.find(Locator::Css(".cell-edit")).await.is_err(), "read-only");
    let pwned = reader.execute("return window.pwned === undefined;", vec![]).await.unwrap();
    assert_eq!(pwned, json!(true), "the typed script never ran for the reader");
    let pwned = client.execute("return window.pwned === undefined;", vec![]).await.unwrap();
    assert_eq!(pwned, json!(true), "nor for the owner");
    screenshot(&reader, "report-shared").await;

    // Revoked: the reader's next visit says so.
    client.find(Locator::Css("li.share .revoke")).await.unwrap().click().await.unwrap();
    client
        .wait()
        .at_most(wait)
        .for_element(Locator::Css("li.share[data-revoked='true']"))
        .await
        .unwrap();
    goto(&reader, &server.url(&href)).await;
    let error =
        text_when(&reader, "#shared-error", "the revoked link's message", |t| !t.is_empty()).await;
    assert!(error.contains("revoked"), "{error}");

    elsewhere.assert_quiet(&reader, "the shared report", &[]).await;
    reader.close().await.unwrap();
    driver.assert_quiet(&client, "the report", &[]).await;
    client.close().await.unwrap();
    server.stop().await;
}

#[tokio::test]
async fn a_worker_is_added_seen_up_and_revoked_from_its_page() {
    let server = TestServer::start().await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    open(&client, &server.url("/workers"), "main.workers[data-hydrated='true']").await;
    let none = text_when(&client, "#no-workers", "the empty list", |t| !t.is_empty()).await;
    assert_eq!(none, "No workers yet.");
    fill(&client, "#worker-name", "gpu-1").await;
    client.find(Locator::Css("#add-worker")).await.unwrap().click().await.unwrap();
    let shown = text_when(&client, "#worker-token pre", "the token", |t| !t.is_empty()).await;
    // The command to run on the worker, with its token and this server.
    let token = shown
        .strip_prefix("TUNEBOOK_WORKER_TOKEN=")
        .and_then(|rest| rest.split_once(' '))
        .map(|(token, _)| token.to_string())
        .unwrap_or_else(|| panic!("{shown}"));
    assert_eq!(token.len(), 64, "{shown}");
    let command = format!(
        "tunebook worker --server {} --profiles ~/.config/tunebook/profiles",
        server.url("")
    );
    assert!(shown.ends_with(&command), "{shown}");
    let state =
        text_when(&client, "#workers tr[data-worker='gpu-1'] td:nth-child(2)", "its row", |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(state, "never connected");

    // The worker registers with its token: up, with its class of machine.
    let registered = http()
        .post(server.url("/api/worker/register"))
        .bearer_auth(&token)
        .json(&json!({
            "hardware": { "cpu": "Test CPU", "threads": 8, "ram_bytes": 17179869184u64,
                          "gpus": [], "bandwidth_bytes_per_s": 2.5e10 },
            "profiles": [{ "name": "demo", "engine": "llama-server", "models": ["tiny-llama"] }]
        }))
        .send()
        .await
        .unwrap();
    assert!(registered.status().is_success());
    // A name taken already is refused in words; the list is read again.
    fill(&client, "#worker-name", "gpu-1").await;
    client.find(Locator::Css("#add-worker")).await.unwrap().click().await.unwrap();
    let error = text_when(&client, "#worker-error", "the refusal", |t| !t.is_empty()).await;
    assert!(error.contains("there is a worker named `gpu-1` already"), "{error}");
    let row = "#workers tr[data-worker='gpu-1']";
    let class =
        text_when(&client, &format!("{row} td:nth-child(3)"), "its class", |t| !t.is_empty()).await;
    assert_eq!(class, "Test CPU (8 threads), 16 GiB");
    let state = text_when(&client, &format!("{row} td:nth-child(2)"), "up", |t| t == "up").await;
    assert_eq!(state, "up");
    let hardware = client.find(Locator::Css(&format!("{row} td:nth-child(4)"))).await.unwrap();
    assert!(hardware.text().await.unwrap().contains("25.0 GB/s"));
    screenshot(&client, "workers").await;

    client
        .find(Locator::Css(&format!("{row} button.revoke")))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let state =
        text_when(&client, &format!("{row} td:nth-child(2)"), "revoked", |t| t == "revoked").await;
    assert_eq!(state, "revoked");
    let refused = http()
        .post(server.url("/api/worker/claim"))
        .bearer_auth(&token)
        .json(&json!({ "profiles": ["demo"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(refused.status(), 401);
    driver.assert_quiet(&client, "the workers page", &[("/api/add_worker", 409)]).await;
    client.close().await.unwrap();
    server.stop().await;
}
