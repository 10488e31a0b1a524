//! Each search strategy, run with its real proposals on the planted search
//! worlds, finds what is planted there within a generous budget. (How
//! fast, against each other and against Optuna, is measured by
//! `scripts/bench-strategies.sh`, not asserted here.)

use tunebook_study::planted::{Cost, Judge, search, search_worlds};

fn world(name: &str) -> tunebook_study::planted::World {
    search_worlds().into_iter().find(|w| w.name == name).unwrap()
}

/// The default strategy's searches of world `name` with each of `seeds`
/// reach 95 % of the true front within `max` trials.
async fn reaches_95_percent(name: &str, seeds: &[u64], max: usize) {
    let w = world(name);
    let judge = Judge::new(&w, &w.study("bayes", 0, 10), Cost::default());
    for &seed in seeds {
        let r = search(&w, &judge, "bayes", seed, 0.95, max).await;
        assert!(
            r.trials.is_some(),
            "{name}, seed {seed}: {:.3} of the front after {max} trials",
            r.share
        );
    }
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

#[tokio::test]
async fn the_model_based_search_keeps_to_the_bounds_it_is_given() {
    // The fastest decode within 8 GiB of GPU memory and 0.01 nats: told
    // only which trials broke a bound, these two searches took 180 and
    // 121 trials, most of them a layer or two more than fits.
    reaches_95_percent("bounded", &[13, 15], 45).await;
}

#[tokio::test]
async fn the_model_based_search_reads_a_speed_bound_through_slow_requests() {
    // The least memory and divergence that still decodes 16 tokens a
    // second, a tenth of the speeds slowed 1.5 to 4 times. With the
    // bound's slack fitted as if its errors were Gaussian, seed 2 reached
    // 0.898 of the front in 60 trials; winsorized once, these two
    // searches took 98 and 184. Fixed, they took 31 and 38, and 77 and
    // 71 once the planner's GPU bytes became a number of the models (at
    // a budget of 80, the last fifth changes one setting at a time, and
    // seed 2 stopped at 0.942).
    reaches_95_percent("floor", &[2, 10], 100).await;
}
