//! Each search strategy, run with its real proposals on the planted search
//! worlds, finds what is planted there within a generous budget. (How
//! fast, against each other and against Optuna, is measured by
//! `scripts/bench-strategies.sh`, not asserted here.)

use tunebook_study::planted::{Cost, Judge, search, search_worlds};

fn world(name: &str) -> tunebook_study::planted::World {
    search_worlds().into_iter().find(|w| w.name == name).unwrap()
}

#[tokio::test]
async fn every_strategy_reaches_most_of_the_front_on_structured_worlds() {
    for name in ["llama8", "ten"] {
        let w = world(name);
        let judge = Judge::new(&w, &w.study("random", 0, 10), Cost::default());
        for strategy in ["random", "two_phase", "motpe", "bayes"] {
            let r = search(&w, &judge, strategy, 3, 0.9, 150).await;
            assert!(
                r.trials.is_some(),
                "{strategy} on {name}: {:.3} of the true hypervolume after 150 trials",
                r.share
            );
            // The hours follow the trials: at least the probes of each.
            let (trials, hours) = (r.trials.unwrap(), r.hours.unwrap());
            assert!(hours * 60.0 >= trials as f64, "{strategy} on {name}: {hours} h");
        }
    }
}

#[tokio::test]
async fn the_model_based_search_finds_a_mid_range_optimum_past_a_failing_region() {
    let w = world("midrange");
    let study = w.study("bayes", 1, 10);
    let judge = Judge::new(&w, &study, Cost::default());
    let r = search(&w, &judge, "bayes", 1, 0.9, 120).await;
    assert!(r.trials.is_some(), "{:.3} of the true hypervolume after 120 trials", r.share);
}
