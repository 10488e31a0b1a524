//! Prints, per planted world and strategy, how many planted facts the
//! findings recovered and how many claims the truth contradicts, over
//! several seeds (`scripts/bench-findings.sh`). `--verbose` lists each
//! missed fact and wrong claim.

use tunebook_study::findings::{self, Margins};
use tunebook_study::planted;

const STRATEGIES: [&str; 6] = ["grid", "random", "two_phase", "motpe", "bayes", "llm"];

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let verbose = args.iter().any(|a| a == "--verbose");
    let seeds: u64 =
        args.iter().find_map(|a| a.strip_prefix("--seeds=")?.parse().ok()).unwrap_or(5);
    let budget: usize =
        args.iter().find_map(|a| a.strip_prefix("--budget=")?.parse().ok()).unwrap_or(80);
    println!(
        "{budget} trials a study, {seeds} seeds; facts found / planted, wrong claims (total over seeds)\n"
    );
    println!("{:<10} {:<10} {:>14} {:>8}", "world", "strategy", "facts found", "wrong");
    let margins = Margins::default();
    for world in planted::worlds() {
        for strategy in STRATEGIES {
            let (mut found, mut planted_n, mut wrong) = (0, 0, 0);
            for seed in 0..seeds {
                let study = world.study(strategy, seed + 1, budget);
                let trials = world.run(&study, seed + 1).await;
                let varied: Vec<String> = study.def.space.keys().cloned().collect();
                let objectives = study.measures();
                let claims = findings::findings_with(&trials, &varied, &objectives, &margins);
                let score = planted::score(&world, &study, &trials, &claims, &margins);
                if std::env::var("DUMP").ok().as_deref()
                    == Some(&format!("{},{strategy},{}", world.name, seed + 1))
                {
                    println!("{}", findings::markdown(&claims));
                }
                found += score.found();
                planted_n += score.facts.len();
                wrong += score.wrong.len();
                if verbose {
                    for (fact, ok) in &score.facts {
                        if !ok {
                            println!(
                                "    {} {strategy} seed {}: missed {fact:?}",
                                world.name,
                                seed + 1
                            );
                        }
                    }
                    for w in &score.wrong {
                        println!("    {} {strategy} seed {}: WRONG {w}", world.name, seed + 1);
                    }
                }
            }
            println!(
                "{:<10} {:<10} {:>8}/{:<5} {:>8}",
                world.name, strategy, found, planted_n, wrong
            );
        }
    }
}
