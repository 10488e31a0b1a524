//! With 100,000 stored trials in one study: how long the study page's
//! history queries take (one page of the trials table, sorted on a metric
//! or filtered; the best so far), how long reading every trial takes (a
//! study's loop does it once, then reads only new trials at each turn), and
//! the Pareto front over two objectives.
//!
//! Run: cargo run --release -p tunebook --example history_bench [-- DATABASE_URL]
//! (default: a fresh SQLite file; give a postgres:// URL of an empty
//! database to measure PostgreSQL).

use std::time::Instant;

use tunebook::db::Db;
use tunebook::db::trials;
use tunebook::views::trials::page_query;
use tunebook_views::types::TrialQuery;

use tunebook_study::{Goal, Measure, Metric, pareto};

#[path = "../tests/common/synthetic.rs"]
mod synthetic;

const TRIALS: usize = 100_000;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let url = std::env::args()
        .nth(1)
        .unwrap_or_else(|| format!("sqlite://{}/bench.db?mode=rwc", dir.path().display()));
    let db = Db::connect(&url).await?;
    let started = Instant::now();
    let study = synthetic::big_study(&db, TRIALS).await?;
    println!("stored {TRIALS} trials in {:.1} s ({url})", started.elapsed().as_secs_f64());

    let mut rows_ms = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let rows = trials::history_rows(&db, study).await?;
        rows_ms.push(t.elapsed().as_secs_f64() * 1e3);
        assert_eq!(rows.len(), TRIALS);
    }
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
            .filter_map(|t| {
                Some(vec![t.metrics.get(Metric::DecodeTps)?, t.metrics.get(Metric::PeakRssBytes)?])
            })
            .collect();
        front_len = pareto::front(&points, &[Goal::Max, Goal::Min]).len();
        front_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let median = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    let queries = [
        ("newest first", TrialQuery::default()),
        ("by decode tok/s", TrialQuery { sort: "decode_tps".into(), ..TrialQuery::default() }),
        (
            "filtered on cache_type_k=q8",
            TrialQuery { filter: "cache_type_k=q8".into(), ..TrialQuery::default() },
        ),
        (
            "page 1000, by peak RSS",
            TrialQuery {
                sort: "peak_rss_bytes".into(),
                descending: false,
                offset: 50_000,
                ..TrialQuery::default()
            },
        ),
    ];
    for (what, query) in queries {
        let mut ms = Vec::new();
        for _ in 0..5 {
            let t = Instant::now();
            let (rows, matching) = trials::page(&db, study, &page_query(&query)).await?;
            ms.push(t.elapsed().as_secs_f64() * 1e3);
            assert_eq!(rows.len(), 50);
            assert!(matching >= 50);
        }
        println!(
            "history page ({what}): median {:.1} ms over 5 runs (target < 200 ms)",
            median(&mut ms)
        );
    }
    let mut best_ms = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        trials::best(&db, study, Metric::DecodeTps, Goal::Max, None).await?.expect("a best trial");
        trials::best(&db, study, Metric::PeakRssBytes, Goal::Min, None)
            .await?
            .expect("a best trial");
        trials::counted(&db, study).await?;
        best_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!("best so far and trials counted: median {:.1} ms", median(&mut best_ms));
    let mut points_ms = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let chosen = [Measure::Metric(Metric::DecodeTps), Measure::Metric(Metric::PeakRssBytes)];
        let points = trials::points(&db, study, &chosen, None).await?;
        assert_eq!(points.len(), TRIALS);
        points_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "the Pareto plot's points (id, settings, 2 metrics): median {:.0} ms over 3 runs",
        median(&mut points_ms)
    );
    // A study's loop reads its whole history once, then at each turn only
    // the trials it has not seen end (here: the newest one).
    let newest = trials::page(&db, study, &page_query(&TrialQuery::default())).await?.0[0].id;
    let mut first_ms = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        assert_eq!(trials::of_study_after(&db, study, 0).await?.len(), TRIALS);
        first_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let mut turn_ms = Vec::new();
    for _ in 0..5 {
        let t = Instant::now();
        assert_eq!(trials::of_study_after(&db, study, newest - 1).await?.len(), 1);
        turn_ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "study loop history: first read {:.0} ms, each later turn {:.2} ms (target < 200 ms)",
        median(&mut first_ms),
        median(&mut turn_ms)
    );
    println!("history decoded row by row: median {:.0} ms over 3 runs", median(&mut rows_ms));
    println!("every trial, packed: median {:.0} ms over 5 runs", median(&mut history_ms));
    println!(
        "Pareto front of {TRIALS} trials ({front_len} on it): median {:.1} ms (target < 100 ms)",
        median(&mut front_ms)
    );
    Ok(())
}
