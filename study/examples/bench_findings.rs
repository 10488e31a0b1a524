//! Prints, per planted world and strategy, how many planted facts the
//! findings recovered, how many claims the truth contradicts and how many
//! findings on the objectives were left not determined, over several seeds
//! (`scripts/bench-findings.sh`): before, every trial of the budget goes to
//! the search; after, the findings' share of it goes to what the search
//! left open (`tunebook_study::settle`). With `--compare=plan`, before and
//! after both spend the share, and memory is modelled in bytes before and
//! against each world's planner after. With `--compare=paired`, a share's
//! items are counted alone before and compared one by one between trials
//! after (each trial's verdicts kept). With `--compare=pick`, the share
//! settles effects at the baseline only before, and at the pick too after;
//! "open" then counts what is open at the pick. `--verbose` lists each
//! missed fact and wrong claim.

use tunebook_study::findings::{self, Margins};
use tunebook_study::{planted, settle};

const STRATEGIES: [&str; 6] = ["grid", "random", "two_phase", "motpe", "bayes", "llm"];

#[tokio::main(flavor = "current_thread")]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let verbose = args.iter().any(|a| a == "--verbose");
    let seeds: u64 =
        args.iter().find_map(|a| a.strip_prefix("--seeds=")?.parse().ok()).unwrap_or(5);
    let only: Option<String> = args.iter().find_map(|a| Some(a.strip_prefix("--world=")?.into()));
    let budget: usize =
        args.iter().find_map(|a| a.strip_prefix("--budget=")?.parse().ok()).unwrap_or(80);
    let by_plan = args.iter().any(|a| a == "--compare=plan");
    let by_pairs = args.iter().any(|a| a == "--compare=paired");
    let by_pick = args.iter().any(|a| a == "--compare=pick");
    println!(
        "{budget} trials a study, {seeds} seeds; facts found / planted, wrong claims (total over seeds)"
    );
    if by_pick {
        println!(
            "before: the share settles effects at the baseline; after: at the pick too; \
             open: settings open at the pick on the objectives\n"
        );
    } else if by_pairs {
        println!(
            "before: a share's items counted alone (binomial); after: compared one by one \
             between trials; both spend a fifth of the budget settling what the findings left open\n"
        );
    } else if by_plan {
        println!(
            "before: memory modelled in bytes; after: against the world's planner (measured ÷ \
             planned); both spend a fifth of the budget settling what the findings left open\n"
        );
    } else {
        println!(
            "before: the whole budget searches; after: a fifth of it settles what the findings \
             left open (runs of the baseline interleaved with the baseline changed in one \
             setting)\n"
        );
    }
    println!(
        "{:<10} {:<10} {:>14} {:>7} {:>6} {:>14} {:>7} {:>6}",
        "world", "strategy", "found before", "wrong", "open", "found after", "wrong", "open"
    );
    let margins = Margins::default();
    let (mut total_before, mut total_after) = (0, 0);
    let (mut open_before, mut open_after) = (0, 0);
    for world in planted::worlds() {
        if only.as_ref().is_some_and(|w| w != world.name) {
            continue;
        }
        for strategy in STRATEGIES {
            let mut cells = Vec::new();
            for before in [true, false] {
                let (mut found, mut planted_n, mut wrong, mut open) = (0, 0, 0, 0);
                for seed in 0..seeds {
                    let mut study = world.study(strategy, seed + 1, budget);
                    if before && !by_plan && !by_pairs && !by_pick {
                        study.def.budget.settle_trials = Some(0);
                    }
                    let planner = world.planner().filter(|_| !(before && by_plan));
                    let at_pick = !(before && by_pick);
                    let mut trials =
                        world.run_settling(&study, seed + 1, planner.as_ref(), at_pick).await;
                    if before && by_pairs {
                        trials.iter_mut().for_each(|t| t.verdicts.clear());
                    }
                    let varied: Vec<String> = study.def.space.keys().cloned().collect();
                    let objectives = study.measures();
                    let claims = findings::findings_planned(
                        &trials,
                        &varied,
                        &objectives,
                        &margins,
                        planner.as_ref(),
                    );
                    let score = planted::score(&world, &study, &trials, &claims, &margins);
                    let when = if before { "before" } else { "after" };
                    if std::env::var("DUMP").ok().as_deref()
                        == Some(&format!("{},{strategy},{},{when}", world.name, seed + 1))
                    {
                        println!("{}", findings::markdown(&claims));
                    }
                    let objectives: Vec<_> = study.metric_objectives();
                    open += if by_pick {
                        settle::open_at_pick(&claims, &study).len()
                    } else {
                        settle::open(&claims, &study)
                            .iter()
                            .filter(|(_, m, _)| objectives.iter().any(|(o, _)| o == m))
                            .count()
                    };
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
                    open_before += open;
                } else {
                    total_after += wrong;
                    open_after += open;
                }
                cells.push(format!("{:>8}/{:<5} {:>7} {:>6}", found, planted_n, wrong, open));
            }
            println!("{:<10} {:<10} {} {}", world.name, strategy, cells[0], cells[1]);
        }
    }
    println!("\nwrong claims in all: {total_before} before, {total_after} after");
    println!("open on the objectives in all: {open_before} before, {open_after} after");
}
