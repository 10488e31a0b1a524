//! One search on one planted world, trial by trial: what the strategy
//! proposed and why, the configuration's true values `[…]`, what was
//! measured `(…)` (noise, drift and a heavy tail's slowed trials on top),
//! and the share of the true Pareto hypervolume reached so far. For
//! seeing where a strategy spends its trials.
//!
//! Usage: `trace_search WORLD STRATEGY [SEED (1)] [MAX TRIALS (60)]`

use std::collections::BTreeMap;

use rand::SeedableRng;
use tunebook_study::Metric;
use tunebook_study::planted::{Cost, Judge, World, search_worlds};

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (Some(name), Some(strategy)) = (args.first(), args.get(1)) else {
        eprintln!("usage: trace_search WORLD STRATEGY [SEED] [MAX TRIALS]");
        std::process::exit(2)
    };
    let seed: u64 = args.get(2).map_or(1, |s| s.parse().expect("a seed"));
    let max: usize = args.get(3).map_or(60, |s| s.parse().expect("a number of trials"));
    let Some(world) = search_worlds().into_iter().find(|w| w.name == name) else {
        eprintln!("no world `{name}`");
        std::process::exit(2)
    };
    let study = world.study(strategy, seed, max);
    let judge = Judge::new(&world, &study, Cost::default());
    let chosen = tunebook_study::strategy::for_study(&study, None, world.gpu_fill());
    // The same noise as the benchmark's search of this seed.
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5EED);
    let (mut history, mut points) = (Vec::new(), Vec::new());
    let mut baseline: Option<BTreeMap<Metric, f64>> = None;
    let mut next = Some((study.baseline.clone(), "the baseline".to_string()));
    while let Some((config, note)) = next.take() {
        let mut settings = study.baseline.clone();
        settings.extend(config.clone());
        let result = world.measure_in_search(&settings, history.len(), &mut rng);
        let failure = World::failure(&result);
        let measured = result.ok();
        if history.is_empty() {
            baseline.clone_from(&measured);
        }
        let truth = judge.values(&study, &config);
        points.extend(truth.clone());
        let mut seen = study.observe(config, measured.as_ref(), baseline.as_ref());
        seen.failure = failure;
        history.push(seen);
        let share = judge.share(&points);
        let values = truth.map_or("fails".into(), |v| {
            v.iter().map(|x| format!("{x:.4e}")).collect::<Vec<_>>().join(" ")
        });
        let shown: Vec<String> = settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
        // What the search saw: a heavy tail's slowed trial shows here, not
        // in the truth beside it.
        let seen = measured.as_ref().map_or("-".into(), |m| {
            let each = study.objectives.iter().map(|t| t.measure.value(m, &settings));
            each.map(|x| x.map_or("-".into(), |x| format!("{x:.4e}"))).collect::<Vec<_>>().join(" ")
        });
        println!("{:3} {share:.3} [{values}] ({seen}) {} | {note}", history.len(), shown.join(" "));
        if share >= 0.95 || history.len() >= max {
            break;
        }
        next = chosen.propose(&study, &history).await.map(|p| (p.config, p.note));
    }
}
