//! The live feed under load: a hundred watchers on loopback see every event
//! of a study running on the real engine, in the same order, without
//! slowing it much; a watcher that reconnects with its last event id gets
//! exactly what it missed; an id from another run is answered with a reset;
//! a page's first connection starts where the feed stood when the page was
//! rendered.

use crate::common;

use std::time::{Duration, Instant};

use common::{TestServer, eventually, http};
use futures::StreamExt;
use serde_json::{Value, json};
use tunebook::db::studies::StudyRow;

const WATCHERS: usize = 100;

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    id: String,
    event: String,
    data: String,
}

/// Reads events from `/api/events` until `stop` says so or `limit` passes.
async fn watch(
    response: reqwest::Response,
    limit: Duration,
    stop: impl Fn(&Sse) -> bool,
) -> Vec<Sse> {
    use eventsource_stream::Eventsource;
    let mut events = response.bytes_stream().eventsource();
    let mut out = Vec::new();
    let deadline = tokio::time::Instant::now() + limit;
    while let Ok(Some(Ok(e))) = tokio::time::timeout_at(deadline, events.next()).await {
        let event = Sse { id: e.id, event: e.event, data: e.data };
        let done = stop(&event);
        out.push(event);
        if done {
            break;
        }
    }
    out
}

async fn connect(server: &TestServer, last_id: Option<&str>) -> reqwest::Response {
    let mut request = http().get(server.url("/api/events"));
    if let Some(id) = last_id {
        request = request.header("Last-Event-ID", id);
    }
    let response = request.send().await.unwrap();
    assert!(response.status().is_success());
    response
}

fn study(name: &str) -> Value {
    json!({
        "name": name,
        "profile": "demo",
        "model": "tiny-llama",
        "space": { "ubatch_size": [64, 128, 256] },
        "fixed": { "ctx_size": 1024, "threads": 2 },
        "baseline": { "ubatch_size": 256 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        // The grid alone: the trials are counted.
        "budget": { "settle_trials": 0 },
        "probes": { "speed": { "prompt_tokens": 16, "n_predict": 8, "repeats": 1, "warmup": 0 } }
    })
}

/// Runs a study to its end; returns its id and how long it ran.
async fn run_study(server: &TestServer, name: &str) -> (i64, Duration) {
    let started = Instant::now();
    let row: StudyRow = http()
        .post(server.url("/api/studies"))
        .json(&study(name))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let id = row.id;
    eventually(Duration::from_secs(180), "the study's end", || async move {
        let url = server.url(&format!("/api/studies/{id}"));
        let row: StudyRow = http().get(url).send().await.ok()?.json().await.ok()?;
        row.state.is_final().then_some(())
    })
    .await;
    (id, started.elapsed())
}

fn ends_study(id: i64) -> impl Fn(&Sse) -> bool + Clone {
    move |e: &Sse| {
        e.event == "study"
            && serde_json::from_str::<Value>(&e.data)
                .is_ok_and(|v| v["study_id"] == id && v["state"] == "done")
    }
}

#[tokio::test]
async fn a_hundred_watchers_see_every_event_and_a_reconnecting_one_catches_up() {
    let _engine = common::require_demo_engine();
    let server = TestServer::start().await;
    // The same study alone first: what the watchers may not slow.
    let (_, alone) = run_study(&server, "alone").await;

    // The next study's id is known: the watchers can stop at its end.
    let next = 2;
    let mut watchers = Vec::new();
    for _ in 0..WATCHERS {
        let response = connect(&server, None).await;
        watchers.push(tokio::spawn(watch(response, Duration::from_secs(240), ends_study(next))));
    }
    let (id, watched) = run_study(&server, "watched").await;
    assert_eq!(id, next);
    let mut seen = Vec::new();
    for w in watchers {
        seen.push(w.await.unwrap());
    }
    println!(
        "a 3-trial study took {:.2} s alone and {:.2} s with {WATCHERS} watchers",
        alone.as_secs_f64(),
        watched.as_secs_f64()
    );
    let first = &seen[0];
    assert!(ends_study(id)(first.last().unwrap()), "the study's end arrived");
    assert!(first.iter().all(|e| e.event != "reset"), "no watcher fell behind");
    let trial_states: Vec<(i64, String)> = first
        .iter()
        .filter(|e| e.event == "message")
        .map(|e| {
            let t: Value = serde_json::from_str(&e.data).unwrap();
            (t["id"].as_i64().unwrap(), t["state"].as_str().unwrap().to_string())
        })
        .collect();
    for trial in [4, 5, 6] {
        for state in ["queued", "launching", "loading", "probing", "done"] {
            assert!(
                trial_states.contains(&(trial, state.to_string())),
                "trial {trial} {state} was announced: {trial_states:?}"
            );
        }
    }
    let seqs: Vec<u64> =
        first.iter().map(|e| e.id.rsplit('-').next().unwrap().parse().unwrap()).collect();
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "numbered without gaps: {seqs:?}");
    for (i, other) in seen.iter().enumerate() {
        assert_eq!(other, first, "watcher {i} saw the same events as the first");
    }
    // Generous: loopback watchers cost little, but this machine has 2 cores.
    assert!(
        watched < alone * 3 + Duration::from_secs(5),
        "watchers slowed the study: {watched:?} against {alone:?}"
    );

    // Reconnecting after the fourth event: exactly the rest, then live.
    let rest = &first[4..];
    let response = connect(&server, Some(&first[3].id)).await;
    let caught_up = watch(response, Duration::from_secs(20), ends_study(id)).await;
    assert_eq!(caught_up, rest, "the missed events, in order, once each");

    // An id from another run of the server: start over.
    let response = connect(&server, Some("1-1")).await;
    let reset = watch(response, Duration::from_secs(20), |_| true).await;
    assert_eq!(reset[0].event, "reset");
    assert!(reset[0].id.contains('-'), "a reset says where the feed stands: {:?}", reset[0]);

    // Each of the study's events as the feed sent it is the one stored: a
    // page that read it with the study knows the replayed one for it.
    let view: Value = common::get_json(&server, &format!("/api/studies/{id}")).await;
    let key = |e: &Value| (e["kind"].clone(), e["message"].clone(), e["at_ms"].clone());
    let stored: Vec<_> =
        view["events"].as_array().expect("the study's events").iter().map(key).collect();
    let sent: Vec<Value> = first
        .iter()
        .filter(|e| e.event == "study")
        .map(|e| serde_json::from_str(&e.data).unwrap())
        .filter(|e: &Value| e["study_id"] == id)
        .collect();
    assert!(!sent.is_empty());
    for e in &sent {
        assert!(stored.contains(&key(e)), "{e} among {stored:?}");
    }

    // A page names where the feed stood when it was rendered: at or past
    // every event so far.
    let page = http().get(server.url("/")).send().await.unwrap().text().await.unwrap();
    let rendered = page
        .split(r#"<meta name="tunebook-feed" content=""#)
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .unwrap_or_else(|| panic!("the feed's position in the page's head: {page}"));
    let seq = |id: &str| id.rsplit('-').next().unwrap().parse::<u64>().unwrap();
    assert!(seq(rendered) >= seq(&first.last().unwrap().id), "{rendered}");
    // A first connection from such a position gets what came after it;
    // the browser's Last-Event-ID, where it sends one, is newer and wins.
    let after = |id: &str| server.url(&format!("/api/events?after={id}"));
    let response = http().get(after(&first[3].id)).send().await.unwrap();
    let caught_up = watch(response, Duration::from_secs(20), ends_study(id)).await;
    assert_eq!(caught_up, rest, "what came after the page's position");
    let response =
        http().get(after(&first[3].id)).header("Last-Event-ID", &first[5].id).send().await.unwrap();
    let caught_up = watch(response, Duration::from_secs(20), ends_study(id)).await;
    assert_eq!(caught_up, &first[6..], "the header's id, not the page's");
    for wrong in ["1", "a-1", "1-2-3", "-1", &"9".repeat(60)] {
        let response = http().get(after(wrong)).send().await.unwrap();
        assert_eq!(response.status(), 400, "{wrong}");
        let body: Value = response.json().await.unwrap();
        assert!(body["error"].as_str().unwrap().starts_with("after: "), "{body}");
    }
    server.stop().await;
}
