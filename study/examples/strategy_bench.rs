//! How many trials each strategy needs to reach 95 % of the true
//! hypervolume on a synthetic two-objective problem whose Pareto front is
//! known (the whole grid is evaluated once to find it).
//!
//! The problem looks like a llama.cpp study: threads 1–16, batch size
//! 64–2048 (doublings) and three K/V cache types; decode speed peaks at 12
//! threads and batch 512 and depends on the cache type, and memory grows
//! with batch size and falls with quantized caches.
//!
//! Run: cargo run --release -p tunebook-study --example strategy_bench

use std::collections::BTreeMap;

use engine_bridge::{Catalog, Settings};
use tunebook_study::strategy::{self, Strategy};
use tunebook_study::{Goal, Metric, Study, StudyDef, pareto};

const SEEDS: u64 = 10;

fn study(kind: &str, seed: u64) -> Study {
    let text = format!(
        r#"
name = "synthetic"
profile = "p"
model = "m"
strategy = {{ kind = "{kind}", seed = {seed} }}
[baseline]
threads = 4
batch_size = 2048
cache_type_k = "f16"
[space]
threads = {{ min = 1, max = 16 }}
batch_size = {{ min = 64, max = 2048, log = true }}
cache_type_k = ["f16", "q8_0", "q4_0"]
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#
    );
    StudyDef::from_toml(&text).unwrap().check(&Catalog::llama_server(), &["m".into()]).unwrap()
}

fn metrics(c: &Settings) -> BTreeMap<Metric, f64> {
    let t: f64 = c["threads"].parse().unwrap();
    let b: f64 = c["batch_size"].parse().unwrap();
    let (bonus, gib) = match c["cache_type_k"].as_str() {
        "f16" => (0.0, 8.0),
        "q8_0" => (3.0, 6.0),
        _ => (-2.0, 5.0),
    };
    let tps = 40.0 - (t - 12.0).powi(2) * 0.5 - (b.log2() - 9.0).powi(2) * 2.0 + bonus;
    [(Metric::DecodeTps, tps), (Metric::PeakRssBytes, gib + b / 512.0)].into()
}

fn values(c: &Settings) -> Vec<f64> {
    let m = metrics(c);
    vec![m[&Metric::DecodeTps], m[&Metric::PeakRssBytes]]
}

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let goals = [Goal::Max, Goal::Min];
    let all: Vec<Vec<f64>> = study("grid", 0).space.grid().map(|c| values(&c)).collect();
    let worst_tps = all.iter().map(|v| v[0]).fold(f64::MAX, f64::min);
    let worst_mem = all.iter().map(|v| v[1]).fold(f64::MIN, f64::max);
    let reference = [worst_tps - 1.0, worst_mem + 1.0];
    let truth = pareto::hypervolume(&all, &goals, &reference);
    println!(
        "{} configurations, {} on the true front, hypervolume {truth:.2}; trials to reach 95 %, over {SEEDS} seeds:",
        all.len(),
        pareto::front(&all, &goals).len()
    );
    println!("{:<10} {:>7} {:>7} {:>7}", "strategy", "median", "best", "worst");
    for kind in ["grid", "random", "two_phase", "motpe", "bayes"] {
        let mut needed = Vec::new();
        for seed in 1..=SEEDS {
            let s = study(kind, seed);
            let strategy: Box<dyn Strategy> = strategy::for_study(&s, None, None);
            let base = metrics(&s.baseline);
            let mut history = vec![s.observe(s.baseline.clone(), Some(&base), Some(&base))];
            let mut points = vec![values(&s.baseline)];
            while pareto::hypervolume(&points, &goals, &reference) < 0.95 * truth {
                let Some(p) = strategy.propose(&s, &history).await else { break };
                points.push(values(&p.config));
                let m = metrics(&p.config);
                history.push(s.observe(p.config, Some(&m), Some(&base)));
            }
            needed.push(history.len());
            if kind == "grid" {
                break; // deterministic: one run says it all
            }
        }
        needed.sort_unstable();
        println!(
            "{kind:<10} {:>7} {:>7} {:>7}",
            needed[needed.len() / 2],
            needed[0],
            needed[needed.len() - 1]
        );
    }
}
