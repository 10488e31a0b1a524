//! The pages in a real browser (Debian's Chromium, headless, through
//! chromedriver), failing on any console error: a trial's pages
//! ([`trials`]), a study's ([`studies`]) and its plots ([`plots`]),
//! reports and workers ([`reports_and_workers`]), an open finding settled
//! from the study page ([`settle_page`]), and every page at once
//! ([`every_page`]). This module holds what they share: chromedriver,
//! the console's errors, and waiting on the page.

mod every_page;
mod plots;
mod reports_and_workers;
mod settle_page;
mod studies;
mod trials;

use std::process::Stdio;
use std::time::Duration;

use crate::common::{self, eventually, http};
use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

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
        // Kept so that a test can read the console (see `console_errors`).
        caps.insert("goog:loggingPrefs".into(), json!({ "browser": "ALL" }));
        let page_load = PAGE_LOAD.as_millis() as u64;
        caps.insert("timeouts".into(), json!({ "pageLoad": page_load }));
        ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&self.url)
            .await
            .expect("a Chromium session")
    }
}

impl Driver {
    /// The console's errors since the last call (chromedriver hands its log
    /// over once): uncaught exceptions, `console.error` (a panic in the
    /// page's code, a hydration mismatch) and resources that failed to load.
    async fn console_errors(&self, client: &Client) -> Vec<String> {
        let session = client.session_id().await.unwrap().expect("a session");
        let url = format!("{}/session/{session}/se/log", self.url);
        let log: Value = http()
            .post(url)
            .json(&json!({ "type": "browser" }))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        log["value"]
            .as_array()
            .expect("chromedriver's log")
            .iter()
            .filter(|e| e["level"] == "SEVERE")
            .map(|e| e["message"].as_str().unwrap_or_default().to_string())
            .collect()
    }

    /// Fails the test if the console took an error since the last look,
    /// other than an `expected` answer: a path and its status (a refused
    /// input answered 400, which Chromium logs as an error).
    async fn assert_quiet(&self, client: &Client, pages: &str, expected: &[(&str, u16)]) {
        let errors: Vec<String> = self
            .console_errors(client)
            .await
            .into_iter()
            .filter(|e| {
                // A script that is missing (404) is also refused as not a
                // script (the server says `nosniff`): the same missing file.
                !expected.iter().any(|(path, status)| {
                    e.contains(path)
                        && (e.contains(&format!("status of {status} "))
                            || (*status == 404 && e.contains("is not executable")))
                })
            })
            .collect();
        assert!(errors.is_empty(), "console errors on {pages}:\n{}", errors.join("\n"));
    }
}

/// How long the browser may take to load a page before [`goto`] asks why
/// (chromedriver's own limit is five minutes).
const PAGE_LOAD: Duration = Duration::from_secs(90);

/// Opens `url` in the browser. Chromium on a busy machine has been seen to
/// never end a page's load (chromedriver: "timed out receiving message from
/// renderer"); past [`PAGE_LOAD`] the server is asked for the page itself:
/// if it answers, the browser loads the page once more, and if it does not,
/// the test fails naming the server.
async fn goto(client: &Client, url: &str) {
    let Err(first) = client.goto(url).await else { return };
    assert!(first.is_timeout(), "opening {url}: {first}");
    let asked = tokio::time::timeout(Duration::from_secs(30), async {
        http().get(url).send().await?.error_for_status()?.text().await
    })
    .await;
    match asked {
        Ok(Ok(_)) => {
            eprintln!("{url}: the browser's load timed out ({first}); the server answers it")
        }
        Ok(Err(e)) => {
            panic!("{url}: the browser's load timed out ({first}) and the server said {e}")
        }
        Err(_) => {
            panic!("{url}: the browser's load timed out ({first}) and the server took over 30 s")
        }
    }
    client
        .goto(url)
        .await
        .unwrap_or_else(|e| panic!("{url} timed out in the browser twice ({first}; {e})"));
}

/// Opens `url` and waits (30 s at most) for `css` to be on the page.
async fn open(client: &Client, url: &str, css: &str) {
    goto(client, url).await;
    let found = client.wait().at_most(Duration::from_secs(30)).for_element(Locator::Css(css)).await;
    found.unwrap_or_else(|e| panic!("{css} on {url}: {e}"));
}

/// Waits (60 s at most) until the plot in `#id` has drawn `points` points.
async fn drawn(client: &Client, id: &str, points: &str) {
    let script = format!("const d = document.getElementById('{id}'); return d && d.dataset.drawn;");
    let what = format!("{points} points on {id}");
    eventually(Duration::from_secs(60), &what, || {
        let (client, script) = (client.clone(), script.clone());
        async move {
            let v = client.execute(&script, vec![]).await.ok()?;
            (v == json!(points)).then_some(())
        }
    })
    .await;
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

/// The text of an element, once `ok` holds for it.
async fn text_when(client: &Client, css: &str, what: &str, ok: impl Fn(&str) -> bool) -> String {
    let limit = Duration::from_secs(60);
    eventually(limit, what, || {
        let client = client.clone();
        let ok = &ok;
        async move {
            let text = client.find(Locator::Css(css)).await.ok()?.text().await.ok()?;
            ok(&text).then_some(text)
        }
    })
    .await
}
