//! How long a strategy takes to propose as its study grows, in process:
//! a planted search world measured with its noise, the strategy asked for
//! each next trial, the mean time of its proposals printed every 25
//! trials. The engine-side counterpart, with the study runner's own
//! bookkeeping, is `scripts/bench-gap.sh`.
//!
//! Run: cargo run --release -p tunebook-study --example propose_time --
//! [WORLD (the first)] [TRIALS (300)] [STRATEGY (bayes)]

use std::time::Instant;

use rand::SeedableRng;
use tunebook_study::planted::{World, search_worlds};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let name = args.get(1).cloned().unwrap_or_default();
    let max: usize = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(300);
    let kind = args.get(3).cloned().unwrap_or_else(|| "bayes".into());
    let Some(world) = search_worlds().into_iter().find(|w| name.is_empty() || w.name == name)
    else {
        eprintln!("no world `{name}`");
        std::process::exit(2);
    };
    let study = world.study(&kind, 1, max);
    let strategy = tunebook_study::strategy::for_study(&study, None, None);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let (mut history, mut baseline) = (Vec::new(), None);
    let mut next = Some(study.baseline.clone());
    let (mut spent, mut asked) = (0.0, 0);
    while let Some(config) = next.take() {
        let mut settings = study.baseline.clone();
        settings.extend(config.iter().map(|(k, v)| (k.clone(), v.clone())));
        let result = world.measure(&settings, &mut rng);
        let failure = World::failure(&result);
        let measured = result.ok();
        if history.is_empty() {
            baseline = measured.clone();
        }
        let mut seen = study.observe(config, measured.as_ref(), baseline.as_ref());
        seen.failure = failure;
        history.push(seen);
        if history.len() >= max {
            break;
        }
        let started = Instant::now();
        next = strategy.propose(&study, &history).await.map(|p| p.config);
        spent += started.elapsed().as_secs_f64();
        asked += 1;
        if history.len() % 25 == 0 {
            let mean = spent / f64::from(asked);
            println!("{} {kind}: {} trials, mean proposal {mean:.3} s", world.name, history.len());
            (spent, asked) = (0.0, 0);
        }
    }
}
