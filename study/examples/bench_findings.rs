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
        "{budget} trials a study, {seeds} seeds; facts found / planted, wrong claims (total over seeds)"
    );
    println!(
        "before: each trial's value alone, as the findings saw it until they modelled each metric's \
         measurement (no baseline re-runs, no requests, no item counts); after: all of it\n"
    );
    println!(
        "{:<10} {:<10} {:>14} {:>7} {:>14} {:>7}",
        "world", "strategy", "found before", "wrong", "found after", "wrong"
    );
    let margins = Margins::default();
    let (mut total_before, mut total_after) = (0, 0);
    for world in planted::worlds() {
        for strategy in STRATEGIES {
            let mut cells = Vec::new();
            for before in [true, false] {
                let (mut found, mut planted_n, mut wrong) = (0, 0, 0);
                for seed in 0..seeds {
                    let mut study = world.study(strategy, seed + 1, budget);
                    if before {
                        study.def.budget.rerun_baseline_every = None;
                    }
                    let mut trials = world.run(&study, seed + 1).await;
                    if before {
                        for t in &mut trials {
                            t.repeats.clear();
                            t.items.clear();
                        }
                    }
                    let varied: Vec<String> = study.def.space.keys().cloned().collect();
                    let objectives = study.measures();
                    let claims = findings::findings_with(&trials, &varied, &objectives, &margins);
                    let score = planted::score(&world, &study, &trials, &claims, &margins);
                    let when = if before { "before" } else { "after" };
                    if std::env::var("DUMP").ok().as_deref()
                        == Some(&format!("{},{strategy},{},{when}", world.name, seed + 1))
                    {
                        println!("{}", findings::markdown(&claims));
                    }
                    found += score.found();
                    planted_n += score.facts.len();
                    wrong += score.wrong.len();
                    if verbose {
                        for (fact, ok) in score.facts.iter().filter(|(_, ok)| !ok) {
                            let _ = ok;
                            println!(
                                "    {} {strategy} seed {} {when}: missed {fact:?}",
                                world.name,
                                seed + 1
                            );
                        }
                        for w in &score.wrong {
                            println!(
                                "    {} {strategy} seed {} {when}: WRONG {w}",
                                world.name,
                                seed + 1
                            );
                        }
                    }
                }
                if before {
                    total_before += wrong;
                } else {
                    total_after += wrong;
                }
                cells.push(format!("{:>8}/{:<5} {:>7}", found, planted_n, wrong));
            }
            println!("{:<10} {:<10} {} {}", world.name, strategy, cells[0], cells[1]);
        }
    }
    println!("\nwrong claims in all: {total_before} before, {total_after} after");
}
