//! Workers as separate processes (`tunebook worker`) against a server on a
//! real PostgreSQL: three workers share the queue, one is killed in the
//! middle of a trial and that trial completes on another, nothing lost or
//! run to completion twice; tokens are required and revocable. A study
//! spread over workers of two classes of machine runs trials in parallel
//! and keeps the classes apart.

use crate::common;

use std::collections::{BTreeMap, BTreeSet};
use std::process::Stdio;
use std::time::Duration;

use common::postgres::{drop_postgres, fresh_postgres};
use common::{TestServer, eventually, http};
use reqwest::StatusCode;
use serde_json::{Value, json};
use tunebook::db::Db;
use tunebook_views::types::{TrialState, TrialView};

/// A worker process; its process group is killed when dropped.
struct WorkerProcess {
    child: tokio::process::Child,
    data: tempfile::TempDir,
}

impl WorkerProcess {
    fn start(server: &TestServer, token: &str, profiles: &std::path::Path) -> Self {
        Self::start_as(server, token, profiles, &[])
    }

    /// With more arguments (`--class …`).
    fn start_as(
        server: &TestServer,
        token: &str,
        profiles: &std::path::Path,
        more: &[&str],
    ) -> Self {
        let data = tempfile::tempdir().unwrap();
        let child = tokio::process::Command::new(env!("CARGO_BIN_EXE_tunebook"))
            .args(["worker", "--server", &server.url(""), "--bandwidth-gbps", "20"])
            .args(more)
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

/// Adds workers by name on the server; their tokens.
async fn add_workers(server: &TestServer, names: &[&str]) -> BTreeMap<String, String> {
    let mut tokens = BTreeMap::new();
    for name in names {
        let r = http()
            .post(server.url("/api/workers"))
            .json(&json!({ "name": name }))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::CREATED);
        let token = r.json::<Value>().await.unwrap()["token"].as_str().unwrap().to_string();
        tokens.insert(name.to_string(), token);
    }
    tokens
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
    let tokens = add_workers(&server, &["w1", "w2", "w3"]).await;
    let r = http()
        .post(server.url("/api/workers"))
        .json(&json!({ "name": "w1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CONFLICT, "names are unique");
    let mut workers: BTreeMap<&str, WorkerProcess> = tokens
        .iter()
        .map(|(n, t)| (n.as_str(), WorkerProcess::start(&server, t, profiles.path())))
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

/// A trial of a study as the test reads it back.
#[derive(Debug)]
struct Ran {
    id: i64,
    state: String,
    machine: Option<String>,
    worker: Option<String>,
    role: String,
    started_ms: i64,
    finished_ms: i64,
    settings: String,
}

impl<'r> sqlx::FromRow<'r, sqlx::any::AnyRow> for Ran {
    fn from_row(row: &'r sqlx::any::AnyRow) -> Result<Self, sqlx::Error> {
        use sqlx::Row as _;
        Ok(Self {
            id: row.try_get("id")?,
            state: row.try_get("state")?,
            machine: row.try_get("machine")?,
            worker: row.try_get("worker")?,
            role: row.try_get("role")?,
            started_ms: row.try_get("started_ms")?,
            finished_ms: row.try_get("finished_ms")?,
            settings: row.try_get("settings")?,
        })
    }
}

#[tokio::test]
async fn a_study_on_two_classes_of_machine_runs_in_parallel_and_keeps_them_apart() {
    let _engine = common::require_demo_engine();
    let (url, db_name) = fresh_postgres().await;
    let data = tempfile::tempdir().unwrap();
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.database_url = url.clone();
    settings.lease = Duration::from_secs(5);
    let server = TestServer::start_with(settings, data).await;
    let tokens = add_workers(&server, &["a1", "a2", "b1"]).await;
    let profiles = common::repo_root().join("profiles");
    // Two machines of one class and one of another (`--class`: the test
    // has one machine to stand for both).
    let workers: Vec<WorkerProcess> = [("a1", "box-a"), ("a2", "box-a"), ("b1", "box-b")]
        .iter()
        .map(|(name, class)| {
            WorkerProcess::start_as(&server, &tokens[*name], &profiles, &["--class", class])
        })
        .collect();
    let study = json!({
        "name": "threads on two machines",
        "profile": "demo",
        "model": "tiny-llama",
        "machines": ["a1", "a2", "b1"],
        "space": { "threads": [1, 2], "ubatch_size": [64, 128, 256] },
        "fixed": { "ctx_size": 512 },
        "baseline": { "threads": 1, "ubatch_size": 128 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 5 },
        "probes": { "speed": { "prompt_tokens": 16, "n_predict": 8, "repeats": 2, "warmup": 0 } }
    });
    let mut wrong = study.clone();
    wrong["machines"] = json!(["any", "a1"]);
    let r = http().post(server.url("/api/studies")).json(&wrong).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("`any` already means every worker"));
    let r = http().post(server.url("/api/studies")).json(&study).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();

    let db = Db::connect(&url).await.unwrap();
    let state = eventually(Duration::from_secs(300), "the study to end", || {
        let db = db.clone();
        async move {
            let state: String = sqlx::query_scalar("SELECT state FROM studies WHERE id = $1")
                .bind(id)
                .fetch_one(&db.pool)
                .await
                .ok()?;
            (state != "running").then_some(state)
        }
    })
    .await;
    assert_eq!(state, "done");
    let rows: Vec<Ran> = sqlx::query_as(
        "SELECT t.id, t.state, t.machine, w.name AS worker, t.role, t.started_ms, t.finished_ms, \
         t.settings FROM trials t LEFT JOIN workers w ON w.id = t.worker_id \
         WHERE t.study_id = $1 ORDER BY t.id",
    )
    .bind(id)
    .fetch_all(&db.pool)
    .await
    .unwrap();
    for class in ["box-a", "box-b"] {
        let mine: Vec<_> = rows.iter().filter(|r| r.machine.as_deref() == Some(class)).collect();
        // Each class searched on its own: its own baseline first, its budget.
        assert_eq!(mine.len(), 5, "{class}: {rows:?}");
        assert!(mine.iter().all(|r| r.state == "done"), "{rows:?}");
        assert_eq!(mine[0].role, "baseline", "{class}");
        assert_eq!(mine.iter().filter(|r| r.role == "baseline").count(), 1, "{class}");
        let configs: BTreeSet<&str> = mine.iter().map(|r| r.settings.as_str()).collect();
        assert_eq!(configs.len(), 5, "{class}: no configuration twice");
        let ran_on: BTreeSet<&str> = mine.iter().filter_map(|r| r.worker.as_deref()).collect();
        let expected: BTreeSet<&str> =
            if class == "box-a" { ["a1", "a2"].into() } else { ["b1"].into() };
        assert_eq!(ran_on, expected, "{class}: only its own machines");
    }
    // The two machines of box-a ran its trials at the same time.
    let a: Vec<_> = rows.iter().filter(|r| r.machine.as_deref() == Some("box-a")).collect();
    let overlapped = a.iter().any(|x| {
        a.iter()
            .any(|y| x.id < y.id && y.started_ms < x.finished_ms && x.started_ms < y.finished_ms)
    });
    assert!(overlapped, "two trials of box-a in flight at once: {a:?}");

    // Findings per machine, side by side; never one list of speeds.
    let found: Value = common::get_json(&server, &format!("/api/studies/{id}/findings")).await;
    let text = found["markdown"].as_str().unwrap();
    assert!(text.contains("## Per machine, side by side"), "{text}");
    // Names a worker gave are shown as they are, never read as markdown.
    // The classes in the order they first ran, whichever that was.
    let (head, who) = if text.contains("| | `box-a` | `box-b` |") {
        ("| | `box-a` | `box-b` |", "| Workers | `a1`, `a2` | `b1` |")
    } else {
        ("| | `box-b` | `box-a` |", "| Workers | `b1` | `a1`, `a2` |")
    };
    assert!(text.contains(head) && text.contains(who), "{text}");
    assert!(text.contains("## On `box-a`") && text.contains("## On `box-b`"), "{text}");
    assert_eq!(text.matches("### Best configurations").count(), 2, "one per machine: {text}");

    // The Pareto front is one class's at a time, the first unless asked.
    let ids_on = |class: &str| -> BTreeSet<i64> {
        rows.iter().filter(|r| r.machine.as_deref() == Some(class)).map(|r| r.id).collect()
    };
    for (query, class) in [("", "box-a"), ("?machine=box-b", "box-b")] {
        let v: Value = common::get_json(&server, &format!("/api/studies/{id}/pareto{query}")).await;
        assert_eq!(v["machines"], json!(["box-a", "box-b"]));
        assert_eq!(v["machine"], class);
        let shown: BTreeSet<i64> = v["points"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["trial_id"].as_i64().unwrap())
            .collect();
        assert_eq!(shown, ids_on(class), "{query}");
    }
    let r = http()
        .get(server.url(&format!("/api/studies/{id}/pareto?machine=box-c")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("ran on `box-c`"));

    // A report draws each plot from one class of machine.
    let r = http().post(server.url(&format!("/api/studies/{id}/reports"))).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let report: Value = r.json().await.unwrap();
    let cells = report["cells"].as_array().unwrap();
    let plots: Vec<&Value> = cells.iter().filter(|c| c["figure"].is_object()).collect();
    assert!(!plots.is_empty());
    for class in ["box-a", "box-b"] {
        assert!(plots.iter().any(|c| c["cell"]["machine"] == class), "{class} has its plots");
    }
    assert!(plots.iter().all(|c| c["cell"]["machine"].is_string()), "no plot mixes machines");

    // The engine's output came back to the server as the trial ran.
    let trial = rows.last().unwrap().id;
    let log = http().get(server.url(&format!("/api/trials/{trial}/log"))).send().await.unwrap();
    let log = log.text().await.unwrap();
    assert!(log.contains("llama"), "the engine's own lines: {log}");

    // A study on `any` worker, stopped while its trials run: nothing of it
    // stays queued, what ran is interrupted, and the workers move on.
    let mut long = study.clone();
    long["name"] = json!("stopped");
    long["machines"] = json!(["any"]);
    long["budget"] = json!({ "max_trials": 50 });
    // Long enough (32 configurations a class, each measured for a while)
    // that it is still running when the test stops it.
    long["space"]["ubatch_size"] = json!((1..=16).map(|i| i * 32).collect::<Vec<_>>());
    long["probes"]["speed"]["n_predict"] = json!(48);
    long["probes"]["speed"]["repeats"] = json!(3);
    let r = http().post(server.url("/api/studies")).json(&long).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let second = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let count = |sql: &'static str| {
        let db = db.clone();
        async move { sqlx::query_scalar::<_, i64>(sql).bind(second).fetch_one(&db.pool).await.unwrap() }
    };
    eventually(Duration::from_secs(120), "a trial of the second study loading", || async {
        let sql =
            "SELECT COUNT(*) FROM trials WHERE study_id = $1 AND state IN ('loading', 'probing')";
        (count(sql).await > 0).then_some(())
    })
    .await;
    // Nothing of the study queued or running any more.
    let settled = || {
        eventually(Duration::from_secs(60), "nothing of it queued or running", || async {
            let sql = "SELECT COUNT(*) FROM trials WHERE study_id = $1 \
                       AND state IN ('queued', 'launching', 'loading', 'probing')";
            (count(sql).await == 0).then_some(())
        })
    };
    // Paused: what no worker took is withdrawn, what runs finishes.
    let r = http().post(server.url(&format!("/api/studies/{second}/pause"))).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    settled().await;
    let before = count("SELECT MAX(id) FROM trials WHERE study_id = $1").await;
    // Resumed: it goes on where it was.
    let r = http().post(server.url(&format!("/api/studies/{second}/resume"))).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    eventually(Duration::from_secs(120), "a new trial of it loading", || async {
        let sql = "SELECT COUNT(*) FROM trials WHERE study_id = $1 \
                   AND state IN ('loading', 'probing') AND id > $2";
        let n: i64 =
            sqlx::query_scalar(sql).bind(second).bind(before).fetch_one(&db.pool).await.unwrap();
        (n > 0).then_some(())
    })
    .await;
    let r = http().post(server.url(&format!("/api/studies/{second}/stop"))).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    settled().await;
    let sql = "SELECT COUNT(*) FROM trials WHERE study_id = $1 AND failure_kind = 'interrupted'";
    assert!(count(sql).await >= 1, "what ran was interrupted");
    // The workers stopped those engines and take new work.
    let r = http()
        .post(server.url("/api/trials"))
        .json(&json!({ "profile": "demo", "model": "tiny-llama", "settings": {}, "target": "b1" }))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let after = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let t = common::wait_final(&server, after).await;
    assert_eq!(t.state, TrialState::Done, "{t:?}");
    assert_eq!(t.worker.as_deref(), Some("b1"));

    drop(workers);
    db.pool.close().await;
    server.stop().await;
    drop_postgres(&db_name).await;
}

#[tokio::test]
async fn a_trial_for_workers_needs_no_engine_on_the_server() {
    // The server's profile names an engine and model only the workers have.
    let profiles = tempfile::tempdir().unwrap();
    std::fs::write(
        profiles.path().join("remote.toml"),
        "name = \"remote\"\nkind = \"llama-server\"\nbinary = \"/opt/nowhere/llama-server\"\n\
         [[models]]\nname = \"big\"\npath = \"/models/nowhere.gguf\"\n",
    )
    .unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.profiles_dir = profiles.path().to_path_buf();
    let server = TestServer::start_with(settings, data).await;
    let submit = |body: Value| {
        let url = server.url("/api/trials");
        async move { http().post(url).json(&body).send().await.unwrap() }
    };
    // Here it could not run: refused, naming what is missing.
    let r = submit(json!({ "profile": "remote", "model": "big", "settings": { "threads": "4" } }))
        .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("/opt/nowhere/llama-server"));
    // For a worker: the settings are checked against the engine's catalog…
    let r = submit(json!({ "profile": "remote", "model": "big", "settings": { "threads": "many" },
                           "target": "any" }))
    .await;
    assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    assert!(r.text().await.unwrap().contains("threads"));
    // …and the files are the worker's business: queued.
    let r = submit(json!({ "profile": "remote", "model": "big", "settings": { "threads": "4" },
                           "target": "any" }))
    .await;
    assert_eq!(r.status(), StatusCode::CREATED);
    let t: Value = r.json().await.unwrap();
    assert_eq!(t["state"], "queued");
    server.stop().await;
}

#[tokio::test]
async fn a_worker_trial_with_megabytes_of_engine_output_finishes_with_its_end_kept() {
    let (url, db_name) = fresh_postgres().await;
    let data = tempfile::tempdir().unwrap();
    let profiles = tempfile::tempdir().unwrap();
    common::write_fake_profile(profiles.path(), "chatty", &["--fake-log-kb", "3072"]);
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.database_url = url.clone();
    settings.profiles_dir = profiles.path().to_path_buf();
    let server = TestServer::start_with(settings, data).await;
    let tokens = add_workers(&server, &["noisy"]).await;
    let worker = WorkerProcess::start_as(&server, &tokens["noisy"], profiles.path(), &[]);
    let study = json!({
        "name": "3 MB of output", "profile": "chatty", "model": "m", "machines": ["noisy"],
        "space": { "threads": [1, 2] }, "baseline": { "threads": 1 },
        "objectives": [{ "metric": "decode_tps" }], "strategy": { "kind": "grid" },
        "budget": { "max_trials": 1 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let r = http().post(server.url("/api/studies")).json(&study).send().await.unwrap();
    assert_eq!(r.status(), StatusCode::CREATED);
    let id = r.json::<Value>().await.unwrap()["id"].as_i64().unwrap();
    let trial = eventually(Duration::from_secs(120), "the worker's trial to end", || async {
        let list: Vec<TrialView> =
            common::get_json(&server, &format!("/api/studies/{id}/trials")).await;
        list.into_iter().next().filter(|t| t.state.is_final())
    })
    .await;
    assert_eq!(trial.state, TrialState::Done, "{trial:?}");
    let log =
        std::fs::read_to_string(server.data.path().join(format!("logs/trial-{}.log", trial.id)))
            .unwrap();
    let tail: String = log.chars().rev().take(300).collect::<Vec<_>>().into_iter().rev().collect();
    assert!(
        log.contains("end of the noise"),
        "the end of the output is kept: {} bytes, ending {tail:?}",
        log.len()
    );
    // The result carries the last chunk of what no report carried (3 MB
    // in one body would be refused); the reports carry a chunk a second
    // while the trial runs, so on a busy machine, where the trial takes
    // longer, they may carry it all. Either way nothing is lost unsaid.
    assert!(
        log.len() >= 3 << 20 || log.contains("bytes of output left out"),
        "the server's copy is the whole output or says what it left out: {} bytes",
        log.len()
    );
    drop(worker);
    server.stop().await;
    drop_postgres(&db_name).await;
}
