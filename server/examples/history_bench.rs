//! With 100,000 stored trials in one study: how long the history query
//! (every trial of the study, as the pages and the strategies read it) and
//! the Pareto front over two objectives take.
//!
//! Run: cargo run --release -p tunebook --example history_bench [-- DATABASE_URL]
//! (default: a fresh SQLite file; give a postgres:// URL of an empty
//! database to measure PostgreSQL).

use std::time::Instant;

use tunebook::db::Db;
use tunebook::db::studies;
use tunebook::db::trials;
use tunebook_app::types::{TrialState, TrialView};

use tunebook_study::{Goal, StudyDef, pareto};

const TRIALS: usize = 100_000;

fn trial(study_id: i64, i: usize) -> TrialView {
    // Deterministic, varied numbers: a front exists but is small.
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
        load_ms: Some(100.0 + y * 50.0),
        ttft_ms: Some(10.0 + x),
        prefill_tps: Some(500.0 * (1.0 + y)),
        decode_tps: Some(30.0 + 20.0 * x),
        client_decode_tps: Some(30.0 + 20.0 * x),
        prompt_tokens: Some(512),
        tokens_requested: Some(128),
        tokens_generated: Some(128),
        n_ctx: Some(4096),
        peak_rss_bytes: Some(((4.0 + 4.0 * y + 2.0 * x) * 1e9) as i64),
        quality_score: Some(0.8),
        ceiling_tps: Some(60.0),
        pct_of_ceiling: Some((30.0 + 20.0 * x) / 0.6),
        study_id: Some(study_id),
        role: Some("search".into()),
        note: Some("random draw".into()),
        ..TrialView::new("demo", "tiny", settings, TrialState::Done)
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("sqlite://{}/bench.db?mode=rwc", dir.path().display()));
    let db = Db::connect(&url).await?;
    let def = StudyDef::from_toml(
        "name = \"big\"\nprofile = \"demo\"\nmodel = \"tiny\"\n[space]\nthreads = [1]\n\
         [[objectives]]\nmetric = \"decode_tps\"\n[[objectives]]\nmetric = \"peak_rss_bytes\"\n",
    )
    .map_err(|e| anyhow::anyhow!("{e}"))?;
    let study = studies::insert(&db, &def).await?;
    let started = Instant::now();
    for chunk in (0..TRIALS).collect::<Vec<_>>().chunks(10_000) {
        let batch: Vec<TrialView> = chunk.iter().map(|&i| trial(study, i)).collect();
        trials::import(&db, &batch).await?;
    }
    println!("stored {TRIALS} trials in {:.1} s ({url})", started.elapsed().as_secs_f64());

    let mut history_ms = Vec::new();
    let mut front_ms = Vec::new();
    let mut front_len = 0;
    for _ in 0..5 {
        let t = Instant::now();
        let list = trials::history(&db, study).await?;
        history_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(list.len(), TRIALS);
        let t = Instant::now();
        let points: Vec<Vec<f64>> = list
            .iter()
            .filter(|t| t.state == "done")
            .filter_map(|t| Some(vec![t.decode_tps?, t.peak_rss_bytes? as f64]))
            .collect();
        front_len = pareto::front(&points, &[Goal::Max, Goal::Min]).len();
        front_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    println!(
        "history query: median {:.0} ms over 5 runs (target < 200 ms)",
        median(&mut history_ms)
    );
    println!(
        "Pareto front of {TRIALS} trials ({front_len} on it): median {:.1} ms (target < 100 ms)",
        median(&mut front_ms)
    );
    Ok(())
}
