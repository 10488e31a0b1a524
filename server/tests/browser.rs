//! The pages in a real browser (Debian's Chromium, headless, through
//! chromedriver): a trial run from the home page on the real engine, its
//! row arriving without a reload and a rejected setting in the engine's
//! words; a study designed in the form, watched live and its Pareto plot
//! clicked through; a study of 10,000 trials opened, sorted and paged; an
//! open finding settled from the study page.

use crate::common;
mod settle_page;

use std::process::Stdio;
use std::time::Duration;

use common::{TestServer, eventually, http, require_demo_engine};
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

/// Opens `url` and waits (30 s at most) for `css` to be on the page.
async fn open(client: &Client, url: &str, css: &str) {
    client.goto(url).await.unwrap();
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
    let at = client
        .execute(
            "const gd = document.getElementById('pareto-plot');
             const fl = gd._fullLayout, t = gd._fullData.find(t => t.x.length > 0);
             const r = gd.getBoundingClientRect();
             return [Math.round(r.left + fl._size.l + fl.xaxis.d2p(t.x[0])),
                     Math.round(r.top + fl._size.t + fl.yaxis.d2p(t.y[0])), t.customdata[0]];",
            vec![],
        )
        .await
        .unwrap();
    let (x, y, trial) = (at[0].as_f64().unwrap(), at[1].as_f64().unwrap(), at[2].as_i64().unwrap());
    use fantoccini::actions::{InputSource, MOUSE_BUTTON_LEFT, MouseActions, PointerAction};
    let click = MouseActions::new("mouse".into())
        .then(PointerAction::MoveTo { duration: None, x, y })
        .then(PointerAction::MoveTo { duration: Some(Duration::from_millis(100)), x: x + 1.0, y })
        .then(PointerAction::Down { button: MOUSE_BUTTON_LEFT })
        .then(PointerAction::Up { button: MOUSE_BUTTON_LEFT });
    client.perform_actions(click).await.unwrap();
    let path = eventually(Duration::from_secs(20), "the trial page", || {
        let client = client.clone();
        async move {
            let path = client.current_url().await.ok()?.path().to_string();
            path.starts_with("/trials/").then_some(path)
        }
    })
    .await;
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

/// Before plotly.js starts (and should it never load), the study page's
/// Pareto plot shows its points on a canvas: hovering one names its trial
/// and configuration, clicking it opens that trial.
#[tokio::test]
async fn the_pareto_plot_works_before_plotly_starts() {
    // The site without plotly.js: the first look is all the page has.
    let site = tempfile::tempdir().unwrap();
    let pkg = common::repo_root().join("target/site/pkg");
    copy_tree(&pkg, &site.path().join("pkg"), &|name| !name.starts_with("plotly"));
    let (server, study) = common::planted_server(|s| s.site_root = site.path().to_path_buf()).await;
    let figure: Value =
        common::get_json(&server, &format!("/api/studies/{study}/pareto/figure")).await;
    let points = figure["points"].as_u64().unwrap();
    assert!(points > 0, "{figure}");
    let driver = Driver::start().await;
    let client = driver.browser().await;
    open(&client, &server.url(&format!("/studies/{study}")), "#pareto-plot").await;
    let script = "return document.getElementById('pareto-plot').dataset.preview || null;";
    let shown = eventually(Duration::from_secs(30), "the Pareto plot's first look", || {
        let client = client.clone();
        async move { client.execute(script, vec![]).await.ok()?.as_str().map(String::from) }
    })
    .await;
    assert_eq!(shown, points.to_string(), "every point on the first look");

    // Over the canvas until a point answers: its hover text, and where it is.
    let found = client
        .execute(
            "const canvas = document.querySelector('#pareto-plot .plot-preview canvas');
             const tip = document.querySelector('#pareto-plot .plot-preview-tip');
             const rect = canvas.getBoundingClientRect();
             for (let y = rect.top; y < rect.bottom; y += 3) {
               for (let x = rect.left; x < rect.right; x += 3) {
                 canvas.dispatchEvent(new MouseEvent('mousemove', { clientX: x, clientY: y, bubbles: true }));
                 if (!tip.hidden) return [x, y, tip.textContent];
               }
             }
             return null;",
            vec![],
        )
        .await
        .unwrap();
    let (x, y, text) = (&found[0], &found[1], found[2].as_str().unwrap_or_default());
    let trial: i64 = text
        .strip_prefix("trial ")
        .and_then(|rest| rest.split('\n').next())
        .and_then(|id| id.parse().ok())
        .unwrap_or_else(|| panic!("the hover text names a trial: {found}"));
    assert!(text.contains("threads=") || text.contains("the baseline"), "{text}");
    let plotted = figure["figure"]["data"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["customdata"].as_array().unwrap().contains(&json!(trial)));
    assert!(plotted, "trial {trial} is on the figure");
    assert_eq!(client.execute(script, vec![]).await.unwrap(), json!(shown), "still the first look");
    screenshot(&client, "pareto-first-look").await;

    client
        .execute(
            "const canvas = document.querySelector('#pareto-plot .plot-preview canvas');
             canvas.dispatchEvent(new MouseEvent('click', { clientX: arguments[0], clientY: arguments[1], bubbles: true }));",
            vec![x.clone(), y.clone()],
        )
        .await
        .unwrap();
    let path = format!("/trials/{trial}");
    eventually(Duration::from_secs(30), "the clicked point's trial page", || {
        let client = client.clone();
        let path = path.clone();
        async move { (client.current_url().await.ok()?.path() == path).then_some(()) }
    })
    .await;
    driver
        .assert_quiet(&client, "the study page without plotly", &[("/pkg/plotly-gl2d.min.js", 404)])
        .await;
    client.close().await.unwrap();
    server.stop().await;
}

/// Copies the files under `from` whose names `keep` accepts to `to`.
fn copy_tree(from: &std::path::Path, to: &std::path::Path, keep: &dyn Fn(&str) -> bool) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().to_string();
        if entry.file_type().unwrap().is_dir() {
            copy_tree(&entry.path(), &to.join(&name), keep);
        } else if keep(&name) {
            std::fs::copy(entry.path(), to.join(&name)).unwrap();
        }
    }
}

/// The page's requests and marks, in ms since navigation began.
async fn timeline(client: &Client) -> String {
    let lines = client
        .execute(
            "const nav = performance.getEntriesByType('navigation')[0];
             const res = performance.getEntriesByType('resource')
               .map(r => `  ${r.name.replace(location.origin, '')} ${Math.round(r.startTime)}–${Math.round(r.responseEnd)} ms`);
             const marks = performance.getEntriesByType('mark')
               .map(m => `  ${m.name} ${Math.round(m.startTime)} ms`);
             return [`  page ${Math.round(nav.responseEnd)} ms, DOM ready ${Math.round(nav.domContentLoadedEventEnd)} ms`, ...res, ...marks].join('\\n');",
            vec![],
        )
        .await
        .unwrap();
    lines.as_str().unwrap_or_default().to_string()
}

#[tokio::test]
async fn a_study_of_ten_thousand_trials_opens_quickly_and_pages_through_its_history() {
    const TRIALS: usize = 10_000;
    assert!(
        common::repo_root().join("target/site/pkg/tunebook_bg.wasm").is_file(),
        "the browser bundle is missing: run scripts/build-site.sh"
    );
    let data = tempfile::tempdir().unwrap();
    let settings = TestServer::settings(data.path().to_path_buf());
    let db = tunebook::db::Db::connect(&settings.database_url).await.unwrap();
    let id = common::synthetic::big_study(&db, TRIALS).await.unwrap();
    db.pool.close().await;
    let server = TestServer::start_with(settings, data).await;
    let driver = Driver::start().await;
    let client = driver.browser().await;

    // Twice: a first visit (nothing cached), then a second.
    let mut usable_ms = Vec::new();
    for visit in 0..2 {
        client.goto(&server.url(&format!("/studies/{id}"))).await.unwrap();
        let at = eventually(Duration::from_secs(60), "the table and the Pareto plot", || {
            let client = client.clone();
            async move {
                let v = client
                    .execute(
                        "const at = (n) => performance.getEntriesByName('tunebook:' + n)[0]?.startTime;
                         const d = document.getElementById('pareto-plot');
                         const rows = document.querySelectorAll('#study-trials tr[data-trial-id]').length;
                         return d && d.dataset.drawn && at('plot-drawn:pareto-plot') !== undefined
                           ? [Number(d.dataset.drawn), rows, at('hydrated'), at('plot-drawn:pareto-plot'),
                              Number(d.dataset.preview), at('preview-drawn:pareto-plot')] : null;",
                        vec![],
                    )
                    .await
                    .ok()?;
                v.as_array().map(|a| a.iter().map(|x| x.as_f64().unwrap_or(-1.0)).collect::<Vec<_>>())
            }
        })
        .await;
        let n = TRIALS as f64;
        assert_eq!(at[0], n, "every done trial on the plot");
        assert_eq!(at[1], 50.0, "one page of the table");
        assert_eq!(at[4], n, "every done trial on the plot's first look");
        let (hydrated, drawn, first_look) = (at[2], at[3], at[5]);
        println!(
            "visit {}: {TRIALS}-trial study: table interactive (hydrated) {hydrated:.0} ms, \
             Pareto plot usable (its first look: every point, hover and click) {first_look:.0} ms, \
             drawn by plotly.js {drawn:.0} ms after navigation began",
            visit + 1
        );
        usable_ms.extend([hydrated, first_look, drawn]);
        println!("{}", timeline(&client).await);
    }
    screenshot(&client, "big-study").await;
    // A generous bound; the figure itself goes in the output above.
    assert!(usable_ms.iter().all(|ms| *ms < 10_000.0), "{usable_ms:?}");

    // The explore panel, opened: every trial on each of its plots.
    client.execute("window.tunebookOpened = performance.now();", vec![]).await.unwrap();
    client.find(Locator::Css("#explore summary")).await.unwrap().click().await.unwrap();
    let explore = eventually(Duration::from_secs(60), "the explore plots", || {
        let client = client.clone();
        async move {
            let v = client
                .execute(
                    "const at = (n) => performance.getEntriesByName('tunebook:plot-drawn:' + n)[0]?.startTime;
                     const n = (id) => Number(document.getElementById(id).dataset.drawn || 0);
                     const ids = ['effect-plot', 'best-plot', 'parallel-plot'];
                     return ids.every(id => at(id) !== undefined)
                       ? [...ids.map(n), Math.max(...ids.map(at)) - window.tunebookOpened] : null;",
                    vec![],
                )
                .await
                .ok()?;
            v.as_array().map(|a| a.iter().map(|x| x.as_f64().unwrap_or(-1.0)).collect::<Vec<_>>())
        }
    })
    .await;
    let n = TRIALS as f64;
    assert_eq!(explore[..3], [n, 2.0 * n, n], "effect, best so far (points and line), parallel");
    // Two settings at once: a cell for each pair of values tried, fewer
    // than the trials.
    let cells = eventually(Duration::from_secs(60), "the two-settings grid", || {
        let client = client.clone();
        async move {
            let script = "return Number(document.getElementById('pair-plot').dataset.drawn || 0);";
            let cells = client.execute(script, vec![]).await.ok()?.as_f64()?;
            (cells > 0.0).then_some(cells)
        }
    })
    .await;
    assert!(cells > 1.0 && cells < n, "{cells} cells");
    println!(
        "explore panel opened: effect, best so far and parallel coordinates of {TRIALS} trials \
         drawn {:.0} ms after the click",
        explore[3]
    );
    println!("{}", timeline(&client).await);
    screenshot(&client, "big-study-explore").await;

    // Sorting asks the server: the fastest trial comes first.
    let fastest = (0..TRIALS)
        .filter_map(|i| {
            common::synthetic::trial(id, i).value(tunebook_views::types::Metric::DecodeTps)
        })
        .fold(f64::MIN, f64::max);
    client
        .find(Locator::Css("th[data-column='decode_tps'] button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    let first = text_when(
        &client,
        "#study-trials tbody tr:first-child td:nth-child(6)",
        "the table sorted by decode speed",
        |t| t == format!("{fastest:.1}"),
    )
    .await;
    assert_eq!(first, format!("{fastest:.1}"));
    // Filtering and paging, too.
    fill(&client, "#trial-filter", "cache_type_k=q8").await;
    let q8 = (0..TRIALS).filter(|i| i % 3 == 1).count();
    let shown = text_when(&client, "#trials-shown", "the filtered count", |t| {
        t.ends_with(&format!("of {q8}"))
    })
    .await;
    assert!(shown.starts_with("1–50 "), "{shown}");
    client.find(Locator::Css("#page-next")).await.unwrap().click().await.unwrap();
    let shown =
        text_when(&client, "#trials-shown", "the second page", |t| t.starts_with("51–100 ")).await;
    assert!(shown.starts_with("51–100"));
    let settings = client
        .find(Locator::Css("#study-trials tbody tr:first-child td.settings"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(settings.contains("cache_type_k=q8_0"), "{settings}");

    driver.assert_quiet(&client, "the page of a study of 10,000 trials", &[]).await;
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
    client.goto(&server.url(&format!("/trials/{trial}"))).await.unwrap();
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
    reader.goto(&server.url(&href)).await.unwrap();
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
    client.goto(&server.url(&format!("/studies/{id}"))).await.unwrap();
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
