//! The same storage operations on SQLite (the default) and on a real
//! PostgreSQL (127.0.0.1:5432 on this machine, or TUNEBOOK_TEST_POSTGRES_URL).

use crate::common;

use common::postgres::{drop_postgres, fresh_postgres};

use std::collections::BTreeMap;

use engine_bridge::llama_server::{CompletionSample, EngineTimings};
use engine_bridge::memory::MemoryReport;
use engine_bridge::probes::QualityResult;
use engine_bridge::probes::quality::CaseResult;
use engine_bridge::{Failure, FailureKind, Measurement, Outcome};
use sqlx::Connection;
use std::time::Duration;
use tunebook::db::Db;
use tunebook::db::studies::{self, StudyRow, StudyState};
use tunebook::db::trials::{self, Measured, NewTrial, StudyPart};
use tunebook::views::{
    self,
    trials::{page_query, row_of},
};
use tunebook_study::{Goal, Measure, Metric, StudyDef};
use tunebook_views::types::{TrialQuery, TrialState, TrialView};

fn sample(predicted_n: u32, tps: f64) -> CompletionSample {
    CompletionSample {
        ttft_ms: 12.5,
        total_ms: 40.0,
        client_decode_tps: Some(tps * 0.98),
        timings: EngineTimings {
            prompt_n: 128,
            prompt_ms: 10.0,
            prompt_per_second: 12800.0,
            predicted_n,
            predicted_ms: predicted_n as f64 / tps * 1e3,
            predicted_per_second: tps,
            draft_n: None,
            draft_n_accepted: None,
            from_client: false,
        },
    }
}

/// Stores a done and a failed trial and reads everything back.
async fn exercise(db: &Db) {
    let settings: BTreeMap<String, String> =
        [("cache_type_k".to_string(), "q4_0".to_string()), ("ctx_size".into(), "4096".into())]
            .into();
    let new = NewTrial {
        profile: "demo",
        model: "tiny",
        settings: &settings,
        tokens_requested: Some(32),
        study: None,
        target: None,
        machine: None,
    };
    let done = trials::insert(db, &new).await.unwrap();
    let failed = trials::insert(db, &new).await.unwrap();
    assert!(failed > done);

    trials::set_state(db, done, tunebook::db::trials::State::Probing).await.unwrap();
    trials::set_command(db, done, &serde_json::json!({"display": "llama-server -ctk q4_0"}))
        .await
        .unwrap();
    let samples = vec![sample(32, 100.0), sample(32, 110.0), sample(32, 90.0)];
    let quality = QualityResult {
        suite: "default".into(),
        style: engine_bridge::ask::PromptStyle::Chat,
        note: None,
        score: 0.75,
        judge_score: Some(0.5),
        cases: vec![CaseResult {
            id: "add".into(),
            prompt: "What is 17 + 25?".into(),
            passed: true,
            answer: " 42".into(),
            thinking_tokens: None,
            ms: 3.0,
            judge_grade: Some(0.5),
            judge_error: None,
        }],
    };
    let measurement = Measurement {
        speed: Some(engine_bridge::probes::speed::summarize(samples)),
        quality: Some(quality),
        ..Measurement::default()
    };
    let memory = MemoryReport {
        peak_rss_bytes: 123 << 20,
        mem_available_drop_bytes: Some(100 << 20),
        peak_gpu_bytes: None,
        samples: 10,
    };
    let outcome =
        Outcome { load_time: Duration::from_millis(250), props: None, measurement, memory };
    let measured = Measured { outcome: &outcome, ceiling_tps: Some(200.0), reused: false };
    trials::finish_done(db, done, &measured).await.unwrap();
    let failure = Failure {
        kind: FailureKind::Rejected,
        message: "error: unsupported cache type".into(),
        log_tail: vec!["line 1".into(), "line 2".into()],
    };
    trials::finish_failed(db, failed, &failure).await.unwrap();

    let all: Vec<TrialView> = views::all(trials::list(db).await.unwrap());
    assert_eq!(all.iter().map(|t| t.id).collect::<Vec<_>>(), [failed, done], "newest first");
    let d = TrialView::from(trials::get(db, done).await.unwrap().unwrap());
    assert_eq!(d.state, TrialState::Done);
    assert_eq!(d.settings, settings);
    assert_eq!(d.command.as_deref(), Some("llama-server -ctk q4_0"));
    assert_eq!(d.metrics.get(Metric::DecodeTps), Some(100.0), "the median of 90, 100, 110");
    assert_eq!(d.metrics.get(Metric::QualityScore), Some(0.75));
    assert_eq!(d.metrics.get(Metric::PctOfCeiling), Some(50.0), "100 tok/s of a 200 tok/s ceiling");
    assert_eq!(d.metrics.get(Metric::ContextPassRate), None, "context was not probed");
    let stored = trials::measurement(db, done).await.unwrap().unwrap();
    assert_eq!(stored["quality"]["cases"][0]["answer"], " 42");
    assert_eq!(stored["quality"]["cases"][0]["prompt"], "What is 17 + 25?");
    assert_eq!(stored["quality"]["style"], "chat");
    assert_eq!(stored["speed"]["decode_tps"]["p90"].as_f64().unwrap().round(), 108.0);
    assert_eq!(d.tokens_generated, Some(32));
    assert_eq!(d.metrics.get(Metric::LoadMs), Some(250.0));
    assert_eq!(d.metrics.get(Metric::PeakRssBytes).map(|v| v as i64), Some(123 << 20));
    assert_eq!(d.metrics.get(Metric::MemAvailableDropBytes).map(|v| v as i64), Some(100 << 20));
    assert_eq!(d.metrics.get(Metric::PeakGpuBytes).map(|v| v as i64), None);
    let f = trials::get(db, failed).await.unwrap().unwrap();
    assert_eq!(f.failure_kind.as_deref(), Some("setting rejected"));
    assert_eq!(f.error.as_deref(), Some("error: unsupported cache type"));
    let rows = trials::samples(db, done).await.unwrap();
    assert_eq!(rows.iter().map(|r| r.predicted_tps).collect::<Vec<_>>(), [100.0, 110.0, 90.0]);
    assert!(trials::get(db, 999_999).await.unwrap().is_none());
}

/// Stores a study, its trials and events, and reads them back.
async fn exercise_studies(db: &Db) {
    let def = StudyDef::from_toml(
        "name = \"s\"\nprofile = \"demo\"\nmodel = \"tiny\"\n[space]\nthreads = [1, 2]\n\
         [[objectives]]\nmetric = \"decode_tps\"\n",
    )
    .unwrap();
    let id = studies::insert(db, &def).await.unwrap();
    let row = studies::get(db, id).await.unwrap().unwrap();
    assert_eq!((row.state, row.definition.clone()), (StudyState::Running, def));
    studies::add_event(db, id, "created", "hello").await.unwrap();
    studies::set_state(db, id, StudyState::Paused, None).await.unwrap();
    assert_eq!(studies::ids_in_state(db, StudyState::Paused).await.unwrap(), vec![id]);
    let settings: BTreeMap<String, String> = [("threads".to_string(), "1".to_string())].into();
    let part = |role| Some(StudyPart { study_id: id, role, note: "why" });
    let new = NewTrial {
        profile: "demo",
        model: "tiny",
        settings: &settings,
        tokens_requested: None,
        study: part(tunebook_views::types::Role::Baseline),
        target: None,
        machine: None,
    };
    let a = trials::insert(db, &new).await.unwrap();
    let b =
        trials::insert(db, &NewTrial { study: part(tunebook_views::types::Role::Search), ..new })
            .await
            .unwrap();
    trials::finish_pruned(db, b, "predicted not to fit").await.unwrap();
    trials::append_note(db, b, "and more").await.unwrap();
    trials::set_drift(db, id, a, b, -7.5).await.unwrap();
    let list: Vec<TrialView> = views::all(trials::of_study(db, id).await.unwrap());
    assert_eq!(list.iter().map(|t| t.id).collect::<Vec<_>>(), vec![a, b]);
    assert_eq!(list[0].role.map(|r| r.as_str()), Some("baseline"));
    assert_eq!(list[1].state, TrialState::Pruned);
    assert_eq!(list[1].error.as_deref(), Some("predicted not to fit"));
    assert_eq!(list[1].note.as_deref(), Some("why; and more"));
    assert!(list.iter().all(|t| t.drift_pct == Some(-7.5)));
    let mut copy = list[0].clone();
    copy.metrics.set(Metric::DecodeTps, Some(123.456));
    copy.study_id = None;
    let ids = trials::import(db, &[row_of(&copy)]).await.unwrap();
    assert_eq!(
        trials::get(db, ids[0]).await.unwrap().unwrap().metrics.get(Metric::DecodeTps),
        Some(123.456)
    );
    // The packed history query gives exactly what row-by-row decoding gives,
    // every digit of a float included.
    let mut exact = list[1].clone();
    exact.metrics.set(Metric::DecodeTps, Some(1.0 / 3.0));
    exact.metrics.set(Metric::PeakRssBytes, (Some(i64::MAX / 3)).map(|v| v as f64));
    exact.settings.insert("quote".into(), "a \"b\" \\ c".into());
    exact.machine = Some("box-a".into());
    exact.metrics.set(Metric::ContextTokens, (Some(4096)).map(|v| v as f64));
    exact.state = TrialState::Done;
    let exact_id = trials::import(db, &[row_of(&exact)]).await.unwrap()[0];
    // Plots of one class of machine take only its trials.
    let decode = [Measure::Metric(Metric::DecodeTps)];
    let on_a = trials::points(db, id, &decode, Some("box-a")).await.unwrap();
    assert_eq!(on_a.iter().map(|p| p.0).collect::<Vec<_>>(), vec![exact_id]);
    assert!(trials::points(db, id, &decode, Some("box-b")).await.unwrap().is_empty());
    let read = trials::get(db, exact_id).await.unwrap().unwrap();
    assert_eq!(
        read.metrics.get(Metric::ContextTokens).map(|v| v as i64),
        Some(4096),
        "context tokens kept through an import"
    );
    assert_eq!((read.machine.as_deref(), read.worker), (Some("box-a"), None));
    let history = trials::history(db, id).await.unwrap();
    assert_eq!(history.len(), 3);
    assert_eq!(history, trials::history_rows(db, id).await.unwrap());
    assert_eq!(history[2].metrics.get(Metric::DecodeTps), Some(1.0 / 3.0));
    assert_eq!(trials::of_study(db, id).await.unwrap().len(), 3);
    assert!(trials::history(db, id + 1000).await.unwrap().is_empty());
    studies::set_state(db, id, StudyState::Done, Some("budget spent")).await.unwrap();
    let row = studies::get(db, id).await.unwrap().unwrap();
    assert_eq!(row.stop_reason.as_deref(), Some("budget spent"));
    assert!(row.finished_ms.is_some());
    let events = studies::events(db, id).await.unwrap();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].message, "hello");
}

/// The study page's queries: pages sorted and filtered by the database,
/// the best so far, the budget count and the plot's points.
async fn exercise_pages(db: &Db) {
    let n = 300;
    let id = common::synthetic::big_study(db, n).await.unwrap();
    let made: Vec<TrialView> = (0..n).map(|i| common::synthetic::trial(id, i)).collect();
    let page = |q: TrialQuery| async move {
        let (rows, n) = trials::page(db, id, &page_query(&q)).await.unwrap();
        (views::all::<_, TrialView>(rows), n)
    };

    let (rows, matching) = page(TrialQuery::default()).await;
    assert_eq!((rows.len(), matching), (50, n as u64), "one page, newest first");
    assert!(rows.windows(2).all(|w| w[0].id > w[1].id));
    let (rows, _) = page(TrialQuery {
        sort: "peak_rss_bytes".into(),
        descending: false,
        offset: 100,
        limit: 20,
        ..TrialQuery::default()
    })
    .await;
    let mut rss: Vec<i64> =
        made.iter().filter_map(|t| t.metrics.get(Metric::PeakRssBytes).map(|v| v as i64)).collect();
    rss.sort();
    let got: Vec<i64> =
        rows.iter().filter_map(|t| t.metrics.get(Metric::PeakRssBytes).map(|v| v as i64)).collect();
    assert_eq!(got, rss[100..120], "a later page, sorted on a metric");

    let q8 = made.iter().filter(|t| t.settings["cache_type_k"] == "q8_0").count();
    let filtered =
        |text: &str| TrialQuery { filter: text.into(), limit: 1000, ..TrialQuery::default() };
    let (rows, matching) = page(filtered("CACHE_type_k=q8")).await;
    assert_eq!((rows.len(), matching as usize), (q8, q8), "`setting=value`, any case");
    assert!(rows.iter().all(|t| t.settings["cache_type_k"] == "q8_0"));
    assert_eq!(page(filtered("cache%k")).await.1, 0, "`%` is no wildcard");
    assert_eq!(page(filtered("cache_type_k=q_")).await.1, 0, "nor is `_`");
    assert_eq!(page(filtered("search")).await.1, n as u64, "the role");

    let fastest =
        made.iter().filter_map(|t| t.metrics.get(Metric::DecodeTps)).fold(f64::MIN, f64::max);
    let best = trials::best(db, id, Metric::DecodeTps, Goal::Max, None).await.unwrap().unwrap();
    assert_eq!(best.1, fastest);
    let best = trials::best(db, id, Metric::PeakRssBytes, Goal::Min, None).await.unwrap().unwrap();
    assert_eq!(best.1, rss[0] as f64);
    assert_eq!(trials::counted(db, id).await.unwrap(), n as u64);
    assert!(trials::in_flight(db, id, 10).await.unwrap().is_empty());
    let measures = [
        Measure::Metric(Metric::DecodeTps),
        Measure::Metric(Metric::PeakRssBytes),
        Measure::Setting("threads".into()),
    ];
    let points = trials::points(db, id, &measures, None).await.unwrap();
    assert_eq!(points.len(), n);
    let first = &made[0];
    assert_eq!(points[0].1, first.settings);
    let threads: f64 = first.settings["threads"].parse().unwrap();
    assert_eq!(
        points[0].2,
        vec![
            first.metrics.get(Metric::DecodeTps).unwrap(),
            first.metrics.get(Metric::PeakRssBytes).map(|v| v as i64).unwrap() as f64,
            threads
        ],
        "metrics from their columns, a setting from the settings"
    );
    // A setting that is not a number leaves every trial out.
    let words = [Measure::Setting("cache_type_k".into())];
    assert!(trials::points(db, id, &words, None).await.unwrap().is_empty());
}

#[tokio::test]
async fn sqlite_stores_trials_in_wal_mode() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/nested/t.db?mode=rwc", dir.path().display());
    let db = Db::connect(&url).await.unwrap();
    let mode: String = sqlx::query_scalar("PRAGMA journal_mode").fetch_one(&db.pool).await.unwrap();
    assert_eq!(mode, "wal");
    exercise(&db).await;
    exercise_studies(&db).await;
    exercise_reports(&db).await;
    // Reopening applies no migration twice and keeps the data.
    drop(db);
    let db = Db::connect(&url).await.unwrap();
    assert_eq!(
        trials::list(&db).await.unwrap().len(),
        6,
        "two trials, three of a study (one imported), one imported alone"
    );
    exercise_pages(&db).await;
}

#[tokio::test]
async fn postgres_stores_trials() {
    let (url, name) = fresh_postgres().await;
    let db = Db::connect(&url).await.unwrap();
    exercise(&db).await;
    exercise_studies(&db).await;
    exercise_pages(&db).await;
    exercise_reports(&db).await;
    db.pool.close().await;
    drop_postgres(&name).await;
}

/// On one connection, a statement run first with a NULL float and then with
/// a number (see `Db::connect_options`).
#[tokio::test]
async fn postgres_takes_a_number_where_it_took_a_null() {
    let (url, name) = fresh_postgres().await;
    Db::connect(&url).await.unwrap().pool.close().await;
    let mut conn =
        sqlx::AnyConnection::connect_with(&Db::connect_options(&url).unwrap()).await.unwrap();
    let id: i64 = sqlx::query_scalar(
        "INSERT INTO trials (profile, model, settings, state, created_ms) VALUES ('p', 'm', '{}', 'done', 0) RETURNING id",
    )
    .fetch_one(&mut conn)
    .await
    .unwrap();
    for ms in [None, Some(1234.5), None, Some(99.25)] {
        sqlx::query("UPDATE trials SET expected_load_ms = $1 WHERE id = $2")
            .bind(ms)
            .bind(id)
            .execute(&mut conn)
            .await
            .unwrap();
    }
    let stored: Option<f64> =
        sqlx::query_scalar("SELECT expected_load_ms FROM trials WHERE id = $1")
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .unwrap();
    assert_eq!(stored, Some(99.25));
    conn.close().await.unwrap();
    drop_postgres(&name).await;
}

#[tokio::test]
async fn the_server_runs_on_postgres() {
    let (url, name) = fresh_postgres().await;
    let data = tempfile::tempdir().unwrap();
    let mut settings = common::TestServer::settings(data.path().to_path_buf());
    settings.database_url = url;
    let server = common::TestServer::start_with(settings, data).await;
    let body = common::eventually(std::time::Duration::from_secs(20), "the API", || {
        let url = server.url("/api/trials");
        async move { common::http().get(url).send().await.ok()?.text().await.ok() }
    })
    .await;
    assert_eq!(body, "[]");

    // A study on the real engine runs to its end on PostgreSQL too.
    let _engine = common::require_demo_engine();
    let study = serde_json::json!({
        "name": "ubatch on postgres",
        "profile": "demo",
        "model": "tiny-llama",
        "space": { "ubatch_size": [128, 256] },
        "fixed": { "ctx_size": 1024, "threads": 2 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        // The grid alone: the trials are counted.
        "budget": { "settle_trials": 0 },
        "probes": { "speed": { "prompt_tokens": 16, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let created =
        common::http().post(server.url("/api/studies")).json(&study).send().await.unwrap();
    assert_eq!(created.status(), 201);
    let id = created.json::<StudyRow>().await.unwrap().id;
    let row = common::eventually(Duration::from_secs(180), "the study's end", || {
        let url = server.url(&format!("/api/studies/{id}"));
        async move {
            let row: StudyRow = common::http().get(url).send().await.ok()?.json().await.ok()?;
            row.state.is_final().then_some(row)
        }
    })
    .await;
    assert_eq!(row.state, StudyState::Done, "{:?}", row.stop_reason);
    let list: Vec<TrialView> =
        common::get_json(&server, &format!("/api/studies/{id}/trials")).await;
    // The baseline leaves ubatch_size to the engine; then both values.
    assert_eq!(list.len(), 3, "the baseline and the two values: {list:#?}");
    assert!(list.iter().all(|t| t.state == TrialState::Done), "{list:?}");
    server.stop().await;
    drop_postgres(&name).await;
}

#[tokio::test]
async fn an_unknown_database_scheme_is_a_clear_error() {
    let err = Db::connect("mysql://localhost/x").await.err().unwrap();
    assert!(err.to_string().contains("use sqlite://… or postgres://…"), "{err}");
}

/// A damaged SQLite file is said at once, in words, not retried until the
/// pool gives up.
#[tokio::test]
async fn a_damaged_database_file_is_said_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("tunebook.db");
    std::fs::write(&file, vec![0x5au8; 20_000]).unwrap();
    let url = format!("sqlite://{}?mode=rwc", file.display());
    let err = Db::connect(&url).await.err().unwrap().to_string();
    assert!(err.contains(&format!("the database file {} is damaged", file.display())), "{err}");
    assert!(err.contains("restore it from a backup"), "{err}");
}

/// Reports: versions made only from the newest, any version read back,
/// links shown until revoked.
async fn exercise_reports(db: &Db) {
    use tunebook::db::reports::{self, SaveError};
    use tunebook_views::types::{Cell, CellBody, Notebook};
    let def = StudyDef::from_toml(
        "name = \"r\"\nprofile = \"demo\"\nmodel = \"m\"\n[space]\nthreads = [1, 2]\n",
    )
    .unwrap();
    let study = studies::insert(db, &def).await.unwrap();
    let notebook = |text: &str| Notebook {
        cells: vec![Cell {
            id: "a".into(),
            body: CellBody::Markdown { text: text.into() },
            origin: Some("summary".into()),
            edited: false,
            machine: None,
        }],
        dismissed: vec![],
    };
    let id = reports::insert(db, study, "first", &notebook("one")).await.unwrap();
    assert_eq!(reports::save(db, id, 1, "second", &notebook("two"), "edited").await.unwrap(), 2);
    assert!(matches!(
        reports::save(db, id, 1, "lost", &notebook("x"), "edited").await,
        Err(SaveError::Stale { base: 1, latest: 2 })
    ));
    assert!(matches!(
        reports::save(db, id + 99, 1, "t", &notebook("x"), "e").await,
        Err(SaveError::NotFound)
    ));
    let newest = reports::get::<Notebook>(db, id, None).await.unwrap().unwrap();
    assert_eq!((newest.version, newest.latest, newest.title.as_str()), (2, 2, "second"));
    assert_eq!(newest.notebook, notebook("two"));
    let first = reports::get(db, id, Some(1)).await.unwrap().unwrap();
    assert_eq!((first.version, first.latest, first.notebook), (1, 2, notebook("one")));
    assert_eq!(reports::of_study(db, study).await.unwrap(), [(id, "second".to_string(), 2)]);
    assert_eq!(reports::versions(db, id).await.unwrap().len(), 2);
    reports::share(db, id, 2, "tok").await.unwrap();
    assert_eq!(reports::shared(db, "tok").await.unwrap(), Ok((id, 2)));
    assert!(reports::revoke(db, "tok").await.unwrap());
    assert_eq!(reports::shared(db, "tok").await.unwrap(), Err(true));
    assert_eq!(reports::shared(db, "nope").await.unwrap(), Err(false));
    assert!(!reports::revoke(db, "nope").await.unwrap());
    assert!(reports::shares(db, id).await.unwrap()[0].revoked);
}
