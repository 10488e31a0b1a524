//! The workers' queue on SQLite and on a real PostgreSQL: many workers
//! take every trial exactly once; a lease that runs out sends the trial to
//! another worker and the first can no longer finish it; tokens are
//! checked and revoked; a worker's result arrives whole.

use crate::common;
use tunebook_views::types::Metric;

use std::time::{Duration, Instant};

use common::postgres::{drop_postgres, fresh_postgres};
use common::queue_load::{done, drain, queued};
use serde_json::{Value, json};
use tunebook::db::queue::{self, MAX_ATTEMPTS, TrialResult};
use tunebook::db::trials::State;
use tunebook::db::{Db, trials};

fn sqlite_url(dir: &tempfile::TempDir) -> String {
    format!("sqlite://{}/q.db?mode=rwc", dir.path().display())
}

#[tokio::test]
async fn eight_workers_take_a_thousand_trials_once_each_on_postgres() {
    let (url, name) = fresh_postgres().await;
    let db = Db::connect(&url).await.unwrap();
    let ids = queued(&db, 1000, "p").await;
    // A trial of a profile no worker has stays queued.
    let other = queued(&db, 1, "elsewhere").await[0];
    let rate = drain(&db, &ids, 8).await;
    eprintln!("PostgreSQL: 1,000 trials by 8 workers, {rate:.0} trials/s");
    assert_eq!(trials::get(&db, other).await.unwrap().unwrap().state(), State::Queued);
    db.pool.close().await;
    drop_postgres(&name).await;
}

#[tokio::test]
async fn several_workers_take_every_trial_once_on_sqlite() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&sqlite_url(&dir)).await.unwrap();
    let ids = queued(&db, 200, "p").await;
    drain(&db, &ids, 4).await;
}

async fn lost_lease(db: &Db) {
    let a_token = queue::create_worker(db, "a").await.unwrap();
    queue::create_worker(db, "b").await.unwrap();
    let (a, _) = queue::authenticate(db, &a_token).await.unwrap().unwrap();
    let b = queue::workers(db).await.unwrap().into_iter().find(|w| w.name == "b").unwrap().id;
    let trial = queued(db, 1, "p").await[0];
    let p = ["p".to_string()];
    assert_eq!(queue::claim(db, a, "a", &p, 100).await.unwrap(), Some(trial));
    assert_eq!(queue::claim(db, b, "b", &p, 100).await.unwrap(), None, "leased to a");
    // a stops answering: once its lease runs out the trial is queued again.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if queue::expire(db).await.unwrap() == [trial] {
            break;
        }
        assert!(Instant::now() < deadline, "the lease never ran out");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(queue::claim(db, b, "b", &p, 60_000).await.unwrap(), Some(trial));
    assert!(!queue::heartbeat(db, trial, a, State::Probing, 60_000).await.unwrap(), "a lost it");
    assert!(!queue::finish(db, trial, a, &done(1.0)).await.unwrap(), "a cannot finish it");
    assert!(queue::finish(db, trial, b, &done(2.0)).await.unwrap());
    assert!(!queue::finish(db, trial, b, &done(3.0)).await.unwrap(), "finished once");
    let t = trials::get(db, trial).await.unwrap().unwrap();
    assert_eq!((t.state(), t.metrics.get(Metric::DecodeTps)), (State::Done, Some(2.0)));

    // A trial that takes every worker down fails after MAX_ATTEMPTS.
    let doomed = queued(db, 1, "p").await[0];
    for attempt in 1..=MAX_ATTEMPTS {
        assert_eq!(
            queue::claim(db, a, "a", &p, 1).await.unwrap(),
            Some(doomed),
            "attempt {attempt}"
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        while queue::expire(db).await.unwrap().is_empty() {
            assert!(Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let t = trials::get(db, doomed).await.unwrap().unwrap();
    assert_eq!(t.state(), State::Failed);
    assert!(t.error.unwrap().contains("stopped answering 3 times"));

    // Tokens: checked, revoked, never stored.
    assert!(queue::authenticate(db, "not-a-token").await.unwrap().is_none());
    assert!(queue::revoke_worker(db, "a").await.unwrap());
    assert!(queue::authenticate(db, &a_token).await.unwrap().is_none(), "revoked");
    assert!(queue::create_worker(db, "b").await.is_err(), "names are unique");
    let stored: Vec<String> =
        sqlx::query_scalar("SELECT token_sha256 FROM workers").fetch_all(&db.pool).await.unwrap();
    assert!(!stored.contains(&a_token));
}

#[tokio::test]
async fn a_lost_lease_goes_to_another_worker_on_both_databases() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::connect(&sqlite_url(&dir)).await.unwrap();
    lost_lease(&db).await;
    let (url, name) = fresh_postgres().await;
    let db = Db::connect(&url).await.unwrap();
    lost_lease(&db).await;
    db.pool.close().await;
    drop_postgres(&name).await;
}

#[tokio::test]
async fn a_result_moves_whole_from_the_workers_database_to_the_servers() {
    let dir = tempfile::tempdir().unwrap();
    let local = Db::connect(&sqlite_url(&dir)).await.unwrap();
    let (url, name) = fresh_postgres().await;
    let server = Db::connect(&url).await.unwrap();
    // On the worker: a trial with every kind of column and two samples.
    let id = queued(&local, 1, "p").await[0];
    sqlx::query(
        "UPDATE trials SET state = 'done', started_ms = 5, finished_ms = 9, decode_tps = 41.5, \
         prompt_tokens = 512, props = '{\"build_info\":\"b1\"}', measurement = '{}' WHERE id = $1",
    )
    .bind(id)
    .execute(&local.pool)
    .await
    .unwrap();
    for idx in 0..2i64 {
        sqlx::query(
            "INSERT INTO samples (trial_id, idx, ttft_ms, total_ms, client_decode_tps, prompt_n, \
             prompt_ms, prompt_tps, predicted_n, predicted_ms, predicted_tps) \
             VALUES ($1, $2, 1.5, 20.0, NULL, 512, 3.0, 170.0, 64, 15.0, 42.0)",
        )
        .bind(id)
        .bind(idx)
        .execute(&local.pool)
        .await
        .unwrap();
    }
    let result = queue::result_of(&local, id).await.unwrap();
    assert_eq!(result.columns["decode_tps"], json!(41.5));
    assert_eq!(result.columns["client_decode_tps"], Value::Null);
    // Through JSON, as it travels, into the server's queue.
    let result: TrialResult =
        serde_json::from_str(&serde_json::to_string(&result).unwrap()).unwrap();
    let token = queue::create_worker(&server, "gpu-1").await.unwrap();
    let (worker, _) = queue::authenticate(&server, &token).await.unwrap().unwrap();
    let trial = queued(&server, 1, "p").await[0];
    assert_eq!(
        queue::claim(&server, worker, "gpu-1", &["p".into()], 60_000).await.unwrap(),
        Some(trial)
    );
    assert!(queue::finish(&server, trial, worker, &result).await.unwrap());
    assert_eq!(queue::result_of(&server, trial).await.unwrap(), result, "the same on the server");
    server.pool.close().await;
    drop_postgres(&name).await;
}
