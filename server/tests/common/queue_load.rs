//! Trials queued for workers and drained by many of them at once: what the
//! queue's test and its benchmark share.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Instant;
use tunebook_views::types::Metric;

use serde_json::json;
use tunebook::db::queue::{self, TrialResult};
use tunebook::db::trials::State;
use tunebook::db::{Db, trials};

/// `n` trials queued for any worker; their ids.
pub async fn queued(db: &Db, n: usize, profile: &str) -> Vec<i64> {
    let settings = BTreeMap::new();
    let mut ids = Vec::new();
    for _ in 0..n {
        let new = trials::NewTrial {
            profile,
            model: "m",
            settings: &settings,
            tokens_requested: None,
            study: None,
            target: Some("any"),
            machine: None,
        };
        let id = trials::insert(db, &new).await.unwrap();
        ids.push(id);
    }
    ids
}

pub fn done(decode: f64) -> TrialResult {
    TrialResult {
        columns: [("state".to_string(), json!("done")), ("decode_tps".to_string(), json!(decode))]
            .into(),
        samples: vec![],
        log: String::new(),
    }
}

/// `workers` workers take trials until none is left, each finishing what
/// it takes; every trial taken once. Returns trials per second.
///
/// Every worker is registered before any starts, and all start together
/// behind a barrier: otherwise the first could drain the queue while the
/// others were still being registered, and the test would not be about
/// workers racing for trials.
pub async fn drain(db: &Db, ids: &[i64], workers: usize) -> f64 {
    let mut registered = Vec::new();
    for w in 0..workers {
        let name = format!("w{w}");
        queue::create_worker(db, &name).await.unwrap();
        let id = queue::workers(db).await.unwrap().into_iter().find(|x| x.name == name).unwrap().id;
        registered.push((id, name));
    }
    let together = Arc::new(tokio::sync::Barrier::new(workers));
    let mut tasks = Vec::new();
    let start = Instant::now();
    for (id, name) in registered {
        let db = db.clone();
        let together = together.clone();
        tasks.push(tokio::spawn(async move {
            together.wait().await;
            let mut took = Vec::new();
            while let Some(trial) =
                queue::claim(&db, id, &name, &["p".to_string()], 60_000).await.unwrap()
            {
                assert!(queue::heartbeat(&db, trial, id, State::Probing, 60_000).await.unwrap());
                assert!(queue::finish(&db, trial, id, &done(trial as f64)).await.unwrap());
                took.push(trial);
            }
            took
        }));
    }
    let mut all = Vec::new();
    let mut busy = 0;
    for t in tasks {
        let took = t.await.unwrap();
        busy += usize::from(!took.is_empty());
        all.extend(took);
    }
    let rate = ids.len() as f64 / start.elapsed().as_secs_f64();
    let unique: BTreeSet<i64> = all.iter().copied().collect();
    assert_eq!(all.len(), unique.len(), "a trial was taken twice");
    assert_eq!(unique, ids.iter().copied().collect::<BTreeSet<_>>(), "every trial taken");
    assert!(busy > 1, "more than one worker took trials");
    for id in ids {
        let t = trials::get(db, *id).await.unwrap().unwrap();
        assert_eq!((t.state(), t.metrics.get(Metric::DecodeTps)), (State::Done, Some(*id as f64)));
    }
    rate
}
