//! How long the findings take as a study grows: a made-up study of three
//! settings (threads, a batch size, a K cache type) with decode speed and
//! peak memory, light noise and a few trials far off, its findings worked
//! out at 1,000, 3,000 and 10,000 trials. The server works them out each
//! time a study's page asks, on two threads at most (`core/src/heavy.rs`).
//!
//! Run: cargo run --release -p tunebook-study --example findings_time --
//! [LARGEST (10000)]

use std::time::Instant;

use tunebook_study::findings::{self, TrialFacts};
use tunebook_study::{Goal, Measure, Metric};

/// Trial `i` of the made-up study: decode grows with threads up to 8 and
/// falls with a smaller K cache type; memory grows with the batch and
/// shrinks with the cache type; one trial in 500 ran four times slower
/// and took twice the memory.
fn trial(i: usize) -> TrialFacts {
    let threads = 1 + i % 16;
    let batch = 64usize << (i / 16 % 6);
    let (cache, bytes) = [("f16", 1.0), ("q8_0", 0.53), ("q4_0", 0.28)][i / 96 % 3];
    // Deterministic noise of ±2 %.
    let noise = 1.0 + 0.02 * ((i as f64 * 0.618_033_988_7).fract() * 2.0 - 1.0);
    let off = if i % 500 == 499 { 4.0 } else { 1.0 };
    let decode = 10.0 * (threads.min(8) as f64).sqrt() * (1.0 - 0.05 * (1.0 - bytes)) * noise / off;
    let rss = (600e6 + 200e6 * bytes + batch as f64 * 1e5) * noise * off.sqrt();
    TrialFacts {
        id: i as i64 + 1,
        settings: [
            ("threads".to_string(), threads.to_string()),
            ("batch_size".to_string(), batch.to_string()),
            ("cache_type_k".to_string(), cache.to_string()),
        ]
        .into(),
        done: true,
        metrics: [(Metric::DecodeTps, decode), (Metric::PeakRssBytes, rss)].into(),
        ..Default::default()
    }
}

fn main() {
    let largest: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(10_000);
    let varied: Vec<String> = ["threads", "batch_size", "cache_type_k"].map(String::from).to_vec();
    let objectives = [
        (Measure::Metric(Metric::DecodeTps), Goal::Max),
        (Measure::Metric(Metric::PeakRssBytes), Goal::Min),
    ];
    for n in [1_000, 3_000, 10_000].into_iter().filter(|n| *n <= largest) {
        let trials: Vec<TrialFacts> = (0..n).map(trial).collect();
        let started = Instant::now();
        let found = findings::findings(&trials, &varied, &objectives);
        println!(
            "{n:>6} trials: findings in {:>8.3} s ({} findings)",
            started.elapsed().as_secs_f64(),
            found.len()
        );
    }
}
