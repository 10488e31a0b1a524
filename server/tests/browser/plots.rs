//! A study's plots in a real browser: the Pareto plot before plotly.js
//! starts, and a study of 10,000 trials opened, sorted and paged.

use std::time::Duration;

use fantoccini::{Client, Locator};
use serde_json::{Value, json};

use super::{Driver, fill, goto, open, screenshot, text_when};
use crate::common::{self, TestServer, eventually};

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
        goto(&client, &server.url(&format!("/studies/{id}"))).await;
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
