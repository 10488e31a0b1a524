//! Large studies made up without an engine: deterministic, varied numbers
//! with a small Pareto front, for the history benchmark and for the page
//! of a study too large to run in a test.

use serde_json::json;
use tunebook::db::Db;
use tunebook::db::{studies, trials};
use tunebook_study::StudyDef;
use tunebook_views::types::{Metric, Metrics, Role, TrialState, TrialView};

/// The `i`-th made-up trial of a study.
pub fn trial(study_id: i64, i: usize) -> TrialView {
    let x = (i as f64 * 0.618_033_988_7).fract();
    let y = (i as f64 * 0.414_213_562_3).fract();
    let settings = [
        ("threads".to_string(), (1 + i % 16).to_string()),
        ("ubatch_size".to_string(), (64 << (i % 6)).to_string()),
        ("cache_type_k".to_string(), ["f16", "q8_0", "q4_0"][i % 3].to_string()),
    ]
    .into();
    TrialView {
        created_ms: i as i64,
        metrics: Metrics::of([
            (Metric::LoadMs, Some(100.0 + y * 50.0)),
            (Metric::TtftMs, Some(10.0 + x)),
            (Metric::PrefillTps, Some(500.0 * (1.0 + y))),
            (Metric::DecodeTps, Some(30.0 + 20.0 * x)),
            (
                Metric::PeakRssBytes,
                Some(((4.0 + 4.0 * y + 2.0 * x) * 1e9) as i64).map(|v| v as f64),
            ),
            (Metric::QualityScore, Some(0.8)),
            (Metric::PctOfCeiling, Some((30.0 + 20.0 * x) / 0.6)),
        ]),
        client_decode_tps: Some(30.0 + 20.0 * x),
        prompt_tokens: Some(512),
        tokens_requested: Some(128),
        tokens_generated: Some(128),
        n_ctx: Some(4096),
        ceiling_tps: Some(60.0),
        study_id: Some(study_id),
        role: Some(Role::Search),
        note: Some("random draw".into()),
        ..TrialView::new("demo", "tiny", settings, TrialState::Done)
    }
}

/// Stores a finished study of `n` made-up trials, maximizing decode speed
/// and minimizing peak memory; returns its id.
pub async fn big_study(db: &Db, n: usize) -> anyhow::Result<i64> {
    let def = StudyDef::from_toml(
        "name = \"big\"\nprofile = \"demo\"\nmodel = \"tiny\"\n[space]\n\
         threads = { min = 1, max = 16 }\nubatch_size = { min = 64, max = 2048, log = true }\n\
         cache_type_k = [\"f16\", \"q8_0\", \"q4_0\"]\n\
         [[objectives]]\nmetric = \"decode_tps\"\n[[objectives]]\nmetric = \"peak_rss_bytes\"\n",
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let study = studies::insert(db, &def).await?;
    for chunk in (0..n).collect::<Vec<_>>().chunks(10_000) {
        let batch: Vec<TrialView> = chunk.iter().map(|&i| trial(study, i)).collect();
        trials::import(db, &rows(&batch)).await?;
    }
    studies::set_state(db, study, studies::StudyState::Done, Some("made up")).await?;
    Ok(study)
}

/// Stores a finished study with planted effects and returns its id:
/// `threads` (1, 2, 4, 8) speeds decoding up in proportion; `q8_0` K/V
/// saves a quarter of the memory at the same speed and quality (a free
/// win); trial `threads=8, q8_0`'s third run is four times slower than its
/// neighbours (an anomaly); two trials at 16 threads ran out of memory.
#[allow(dead_code, reason = "the tests use it, the history benchmark does not")]
pub async fn planted_study(db: &Db) -> anyhow::Result<i64> {
    let def = StudyDef::from_toml(
        "name = \"planted\"\nprofile = \"demo\"\nmodel = \"tiny-llama\"\n[space]\n\
         threads = [1, 2, 4, 8, 16]\ncache_type_k = [\"f16\", \"q8_0\"]\n\
         [[objectives]]\nmetric = \"decode_tps\"\n[[objectives]]\nmetric = \"peak_rss_bytes\"\n",
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let study = studies::insert(db, &def).await?;
    let mut batch = Vec::new();
    for rep in 0..3 {
        for threads in [1u32, 2, 4, 8] {
            for cache in ["f16", "q8_0"] {
                let i = batch.len();
                // ±1.5 %, deterministic.
                let noise = 1.0 + 0.015 * ((i as f64 * 0.618_033_988_7).fract() * 2.0 - 1.0);
                let slow = if threads == 8 && cache == "q8_0" && rep == 2 { 0.25 } else { 1.0 };
                let settings = [
                    ("threads".to_string(), threads.to_string()),
                    ("cache_type_k".to_string(), cache.to_string()),
                ]
                .into();
                let rss = 800e6 * if cache == "q8_0" { 0.75 } else { 1.0 } * noise;
                batch.push(TrialView {
                    created_ms: i as i64,
                    metrics: Metrics::of([
                        (Metric::LoadMs, Some(1200.0)),
                        (Metric::DecodeTps, Some(5.0 * threads as f64 * noise * slow)),
                        (Metric::PrefillTps, Some(200.0 * threads as f64 * noise)),
                        (Metric::PeakRssBytes, Some(rss as i64).map(|v| v as f64)),
                        (Metric::QualityScore, Some(0.625)),
                    ]),
                    ceiling_tps: Some(60.0),
                    study_id: Some(study),
                    role: Some(if i == 0 { Role::Baseline } else { Role::Search }),

                    ..TrialView::new("demo", "tiny-llama", settings, TrialState::Done)
                });
            }
        }
    }
    for cache in ["f16", "q8_0"] {
        let settings =
            [("threads".to_string(), "16".to_string()), ("cache_type_k".to_string(), cache.into())]
                .into();
        batch.push(TrialView {
            created_ms: batch.len() as i64,
            failure_kind: Some("out_of_memory".into()),
            error: Some("failed to allocate compute buffers".into()),
            study_id: Some(study),
            role: Some(Role::Search),
            ..TrialView::new("demo", "tiny-llama", settings, TrialState::Failed)
        });
    }
    let ids = trials::import(db, &rows(&batch)).await?;
    // The command each ran with, as the runner stores it.
    for (id, t) in ids.iter().zip(&batch) {
        let command = json!({
            "program": "/opt/llama/llama-server",
            "args": ["-m", "/models/tiny.gguf", "--threads", t.settings["threads"],
                     "--cache-type-k", t.settings["cache_type_k"], "--port", "41234"],
            "env": {},
        });
        sqlx::query("UPDATE trials SET command = $1 WHERE id = $2")
            .bind(command.to_string())
            .bind(id)
            .execute(&db.pool)
            .await?;
    }
    studies::set_state(db, study, studies::StudyState::Done, Some("planted")).await?;
    Ok(study)
}

/// Stores a finished study that ran on two classes of machine: `box-a`
/// (three trials, about 10 tok/s) and `box-b` (four, about ten times as
/// fast), each with its own baseline; returns its id.
#[allow(dead_code, reason = "the tests use it, the history benchmark does not")]
pub async fn two_machine_study(db: &Db) -> anyhow::Result<i64> {
    let def = StudyDef::from_toml(
        "name = \"two machines\"\nprofile = \"demo\"\nmodel = \"tiny-llama\"\n\
         machines = [\"any\"]\n[space]\nthreads = [1, 2, 4, 8]\n\
         [[objectives]]\nmetric = \"decode_tps\"\n[[objectives]]\nmetric = \"peak_rss_bytes\"\n",
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let study = studies::insert(db, &def).await?;
    let mut batch = Vec::new();
    for (machine, n, speed) in [("box-a", 3, 10.0), ("box-b", 4, 100.0)] {
        for i in 0..n {
            let threads = 1u32 << i;
            batch.push(TrialView {
                created_ms: batch.len() as i64,
                metrics: Metrics::of([
                    (Metric::DecodeTps, Some(speed * (1.0 + i as f64 / 10.0))),
                    (
                        Metric::PeakRssBytes,
                        Some(800_000_000 + i as i64 * 1_000_000).map(|v| v as f64),
                    ),
                ]),
                study_id: Some(study),
                role: Some(if i == 0 { Role::Baseline } else { Role::Search }),
                machine: Some(machine.into()),
                ..TrialView::new(
                    "demo",
                    "tiny-llama",
                    [("threads".to_string(), threads.to_string())].into(),
                    TrialState::Done,
                )
            });
        }
    }
    trials::import(db, &rows(&batch)).await?;
    studies::set_state(db, study, studies::StudyState::Done, Some("made up")).await?;
    Ok(study)
}

/// Trials as rows to import.
pub fn rows(batch: &[TrialView]) -> Vec<tunebook::db::trials::TrialRow> {
    batch.iter().map(tunebook::views::trials::row_of).collect()
}
