//! Workers as separate processes (`tunebook worker`) against a server on a
//! real PostgreSQL: three workers share the queue, one is killed in the
//! middle of a trial and that trial completes on another, nothing lost or
//! run to completion twice; tokens are required and revocable.

mod common;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use common::postgres::{drop_postgres, fresh_postgres};
use common::{TestServer, eventually, http};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tunebook::db::Db;

/// A worker process; its process group is killed when dropped.
struct WorkerProcess {
    child: tokio::process::Child,
    data: tempfile::TempDir,
}

impl WorkerProcess {
    fn start(server: &TestServer, token: &str, profiles: &std::path::Path) -> Self {
        let data = tempfile::tempdir().unwrap();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tunebook"))
            .args(["worker", "--server", &server.url(""), "--bandwidth-gbps", "20"])
            .arg("--profiles")
            .arg(profiles)
            .arg("--data-dir")
            .arg(data.path())
            .env("TUNEBOOK_WORKER_TOKEN", token)
            .env("RUST_LOG", "info")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        WorkerProcess { child, data }
    }

    /// Kills it at once, as a crash or a power cut would.
    fn kill(&mut self) {
        let pid = self.child.id().unwrap() as i32;
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

impl Drop for WorkerProcess {
    fn drop(&mut self) {
        self.kill();
        // Engines run in process groups of their own: stop what it left.
        let _ = engine_bridge::registry::reap_leftovers(&self.data.path().join("engines"));
    }
}

#[tokio::test]
async fn a_worker_killed_mid_trial_loses_nothing_and_runs_nothing_twice() {
    let (url, db_name) = fresh_postgres().await;
    let profiles = tempfile::tempdir().unwrap();
    // Slow to load, so there is time to kill a worker in the middle.
    common::write_fake_profile(
        profiles.path(),
        "slow",
        &["--fake", "slow-load", "--fake-ms", "2500"],
    );
    let data = tempfile::tempdir().unwrap();
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.database_url = url.clone();
    settings.profiles_dir = profiles.path().to_path_buf();
    settings.lease = Duration::from_millis(1500);
    settings.probes = serde_json::from_value(json!({
        "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 }
    }))
    .unwrap();
    let server = TestServer::start_with(settings, data).await;

    // The worker API wants a token.
    let r = http()
        .post(server.url("/api/worker/claim"))
        .json(&json!({ "profiles": ["slow"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
    let mut tokens = BTreeMap::new();
    for name in ["w1", "w2", "w3"] {
        let r = http()
            .post(server.url("/api/workers"))
            .json(&json!({ "name": name }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        tokens
            .insert(name, r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_string());
    }
    let r = http()
        .post(server.url("/api/workers"))
        .json(&json!({ "name": "w1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT, "names are unique");
    let mut workers: BTreeMap<&str, WorkerProcess> = tokens
        .iter()
        .map(|(n, t)| (*n, WorkerProcess::start(&server, t, profiles.path())))
        .collect();

    let mut ids = Vec::new();
    for _ in 0..4 {
        let r = http()
            .post(server.url("/api/trials"))
            .json(&json!({ "profile": "slow", "model": "m", "settings": {}, "target": "any" }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        ids.push(r.json::<Value>().await.unwrap()["id"].as_i64().unwrap());
    }
    let r = http()
        .post(server.url("/api/trials"))
        .json(&json!({ "profile": "slow", "model": "m", "settings": {}, "target": "nobody" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("no worker named `nobody`"));

    // Kill whichever worker is loading an engine.
    let db = Db::connect(&url).await.unwrap();
    let (victim_trial, victim) =
        eventually(Duration::from_secs(60), "a worker loading a trial", || {
            let db = db.clone();
            async move {
                let row: Option<(i64, String)> = sqlx::query_as(
                    "SELECT t.id, w.name FROM trials t JOIN workers w ON w.id = t.worker_id \
                 WHERE t.state = 'loading' ORDER BY t.id LIMIT 1",
                )
                .fetch_optional(&db.pool)
                .await
                .ok()?;
                row
            }
        })
        .await;
    workers.get_mut(victim.as_str()).unwrap().kill();

    // Every trial ends done, the victim's on another worker, each once.
    let ended = eventually(Duration::from_secs(120), "every trial done", || {
        let db = db.clone();
        async move {
            let rows: Vec<(i64, String, i64, Option<String>)> = sqlx::query_as(
                "SELECT t.id, t.state, t.attempts, w.name FROM trials t \
                 LEFT JOIN workers w ON w.id = t.worker_id ORDER BY t.id",
            )
            .fetch_all(&db.pool)
            .await
            .ok()?;
            rows.iter().all(|r| r.1 == "done" || r.1 == "failed").then_some(rows)
        }
    })
    .await;
    assert_eq!(ended.iter().map(|r| r.0).collect::<Vec<_>>(), ids);
    for (id, state, attempts, worker) in &ended {
        assert_eq!(state, "done", "trial {id}");
        if *id == victim_trial {
            assert_eq!(*attempts, 2, "taken again once its lease ran out");
            assert_ne!(worker.as_deref(), Some(victim.as_str()), "finished elsewhere");
        } else {
            assert_eq!(*attempts, 1, "trial {id} ran once");
        }
    }
    let samples: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT trial_id, COUNT(*) FROM samples GROUP BY trial_id ORDER BY trial_id",
    )
    .fetch_all(&db.pool)
    .await
    .unwrap();
    assert_eq!(
        samples,
        ids.iter().map(|id| (*id, 1)).collect::<Vec<_>>(),
        "one set of samples each"
    );
    let t: Value = common::get_json(&server, &format!("/api/trials/{victim_trial}")).await;
    assert!(t["decode_tps"].as_f64().unwrap() > 0.0, "{t}");
    // The workers registered what they run on.
    let listed: Vec<Value> = common::get_json(&server, "/api/workers").await;
    assert!(
        listed.iter().all(|w| w["hardware"]["bandwidth_bytes_per_s"] == json!(20e9)),
        "{listed:?}"
    );
    assert!(listed.iter().all(|w| w["profiles"][0]["name"] == "slow"));

    // A revoked token is refused.
    let r = http().delete(server.url("/api/workers/w3")).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let r = http()
        .post(server.url("/api/worker/claim"))
        .bearer_auth(&tokens["w3"])
        .json(&json!({ "profiles": ["slow"] }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::UNAUTHORIZED);

    drop(workers);
    db.pool.close().await;
    server.stop().await;
    drop_postgres(&db_name).await;
}
