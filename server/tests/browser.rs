//! The page in a real browser (Debian's Chromium, headless, through
//! chromedriver): it hydrates, runs a trial on the real engine, and the new
//! row appears without a reload; a rejected setting shows the engine's words.

mod common;

use std::process::Stdio;
use std::time::Duration;

use common::{TestServer, eventually, http, require_demo_engine};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::json;

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";

/// chromedriver on a free port, killed when dropped.
struct Driver {
    _child: tokio::process::Child,
    url: String,
    _profile: tempfile::TempDir,
}

impl Driver {
    async fn start() -> Self {
        for bin in [CHROMIUM, CHROMEDRIVER] {
            assert!(
                std::path::Path::new(bin).exists(),
                "{bin} is missing: run scripts/test.sh, which installs Debian's chromium"
            );
        }
        let port = engine_bridge::free_port().unwrap();
        let child = tokio::process::Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let url = format!("http://127.0.0.1:{port}");
        let status = format!("{url}/status");
        eventually(Duration::from_secs(20), "chromedriver", || {
            let status = status.clone();
            async move { http().get(status).send().await.ok().filter(|r| r.status().is_success()) }
        })
        .await;
        Self { _child: child, url, _profile: tempfile::tempdir().unwrap() }
    }

    async fn browser(&self) -> Client {
        let options = json!({
            "binary": CHROMIUM,
            "args": [
                "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--disable-component-update",
                "--no-first-run", "--disable-sync", "--disable-quic",
                "--window-size=1400,1000",
                format!("--user-data-dir={}", self._profile.path().display()),
            ],
        });
        let mut caps = serde_json::Map::new();
        caps.insert("goog:chromeOptions".into(), options);
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a Chromium session")
    }
}

async fn fill(client: &Client, css: &str, value: &str) {
    let input = client.find(Locator::Css(css)).await.unwrap();
    input.clear().await.unwrap();
    input.send_keys(value).await.unwrap();
}

async fn screenshot(client: &Client, name: &str) {
    let dir = common::repo_root().join("target/screenshots");
    std::fs::create_dir_all(&dir).unwrap();
    let png = client.screenshot().await.unwrap();
    std::fs::write(dir.join(format!("{name}.png")), png).unwrap();
}

#[tokio::test]
async fn run_a_trial_from_the_page_and_watch_its_row_arrive() {
    require_demo_engine();
    assert!(
        common::repo_root().join("target/site/pkg/tunebook_bg.wasm").is_file(),
        "the browser bundle is missing: run scripts/build-site.sh"
    );
    let server = TestServer::start().await;
    let driver = Driver::start().await;
    let client = driver.browser().await;
    let long = Duration::from_secs(120);

    client.goto(&server.url("/")).await.unwrap();
    client
        .wait()
        .at_most(Duration::from_secs(30))
        .for_element(Locator::Css("main[data-hydrated='true']"))
        .await
        .expect("the page hydrates");
    client.find(Locator::Css("#no-trials")).await.expect("an empty history at first");
    // Survives only if the page is never reloaded.
    client.execute("window.tunebookMarker = 42;", vec![]).await.unwrap();

    fill(&client, "#ctx_size", "1024").await;
    fill(&client, "#threads", "2").await;
    fill(&client, "#cache_type_k", "q8_0").await;
    fill(&client, "#cache_type_v", "q8_0").await;
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
    let decode = row.find(Locator::Css("td:nth-child(8)")).await.unwrap().text().await.unwrap();
    assert!(decode.parse::<f64>().unwrap() > 0.0, "decode tok/s shown: {decode:?}");
    screenshot(&client, "trial-done").await;

    // A value only the engine can refuse: its own message is shown.
    fill(&client, "#cache_type_k", "q3_bogus").await;
    client.find(Locator::Css("#run")).await.unwrap().click().await.unwrap();
    let failure = client
        .wait()
        .at_most(long)
        .for_element(Locator::Css("tr.failure"))
        .await
        .expect("the failed trial's cause appears");
    let cause = failure.text().await.unwrap();
    assert!(cause.contains("setting rejected") && cause.contains("q3_bogus"), "{cause}");

    // A value Tunebook refuses never reaches the engine: the server's message.
    fill(&client, "#cache_type_k", "--rpc").await;
    client.find(Locator::Css("#run")).await.unwrap().click().await.unwrap();
    let message = eventually(Duration::from_secs(20), "the validation message", || {
        let client = client.clone();
        async move {
            let text = client.find(Locator::Css("#run-error")).await.ok()?.text().await.ok()?;
            (!text.is_empty()).then_some(text)
        }
    })
    .await;
    assert!(message.contains("setting `cache_type_k`: `--rpc` is not one of"), "{message}");
    screenshot(&client, "trial-rejected").await;

    let marker = client.execute("return window.tunebookMarker;", vec![]).await.unwrap();
    assert_eq!(marker, json!(42), "the page was never reloaded");
    let rows = client.find_all(Locator::Css("tr[data-trial-id]")).await.unwrap();
    assert_eq!(rows.len(), 2, "two trials ran, the refused one was not stored");

    client.close().await.unwrap();
    server.stop().await;
}
