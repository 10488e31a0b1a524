//! Every strategy's real proposals on planted worlds, and the findings
//! drawn from them checked claim by claim against the truth: no claim the
//! truth contradicts (on a real machine's heavy tails, drift and a
//! quality suite of eight questions too), the planted facts found wherever
//! the design can show them, and on pure noise no claim of any effect at all.

use tunebook_study::findings::{self, Finding, Margins};
use tunebook_study::planted::{self, Fact, Score, World};

const BUDGET: usize = 80;
const SEEDS: [u64; 2] = [1, 2];

async fn run(world: &World, strategy: &str, seed: u64) -> (Vec<Finding>, Score) {
    run_for(world, strategy, seed, BUDGET).await
}

async fn run_for(world: &World, strategy: &str, seed: u64, budget: usize) -> (Vec<Finding>, Score) {
    let study = world.study(strategy, seed, budget);
    let trials = world.run(&study, seed).await;
    assert!(trials.len() >= budget.min(40), "{strategy} ran {} trials", trials.len());
    let varied: Vec<String> = study.def.space.keys().cloned().collect();
    let objectives = study.measures();
    let margins = Margins::default();
    let planner = world.planner();
    let found =
        findings::findings_planned(&trials, &varied, &objectives, &margins, planner.as_ref());
    let score = planted::score(world, &study, &trials, &found, &margins);
    (found, score)
}

fn world(name: &str) -> World {
    planted::worlds().into_iter().find(|w| w.name == name).unwrap()
}

fn missed(score: &Score) -> Vec<&Fact> {
    score.facts.iter().filter(|(_, ok)| !ok).map(|(f, _)| f).collect()
}

/// Worlds whose findings must hold claim by claim. `region` is left to
/// `scripts/bench-findings.sh` (its memory and a corner are held below):
/// one search on one seed of six still invents an interaction on time to
/// first token there.
const HELD: [&str; 7] = ["llama8", "noise", "ranges", "kvcache", "suite", "machine", "noisy"];

/// No finding of these strategies' contradicts a held world's truth.
async fn none_contradicts_the_truth(strategies: &[&str]) {
    for w in planted::worlds().into_iter().filter(|w| HELD.contains(&w.name)) {
        for &strategy in strategies {
            for seed in SEEDS {
                let (found, score) = run(&w, strategy, seed).await;
                assert!(
                    score.wrong.is_empty(),
                    "{} {strategy} seed {seed}: {:#?}\n{}",
                    w.name,
                    score.wrong,
                    findings::markdown(&found)
                );
            }
        }
    }
}

// Every strategy, in two halves that the suite runs side by side.
#[tokio::test]
async fn no_findings_of_grid_random_or_two_phase_contradict_the_truth() {
    none_contradicts_the_truth(&["grid", "random", "two_phase"]).await;
}

#[tokio::test]
async fn no_findings_of_motpe_bayes_or_llm_contradict_the_truth() {
    none_contradicts_the_truth(&["motpe", "bayes", "llm"]).await;
}

#[tokio::test]
async fn the_searches_that_vary_every_setting_find_what_was_planted() {
    let llama8 = world("llama8");
    let ranges = world("ranges");
    for strategy in ["random", "two_phase", "motpe", "bayes", "llm"] {
        for seed in SEEDS {
            let (found, score) = run(&llama8, strategy, seed).await;
            // Found by every search: the interaction, the peak, the lossy
            // quantization, the effects; the free win of q8_0 K and V
            // together and the exact failure rule only where the search
            // ran enough trials around them.
            let must = |f: &Fact| !matches!(f, Fact::Lossless { .. } | Fact::FailureRule { .. });
            let lost: Vec<&Fact> = missed(&score).into_iter().filter(|f| must(f)).collect();
            assert!(
                lost.is_empty(),
                "llama8 {strategy} seed {seed}: {lost:#?}\n{}",
                findings::markdown(&found)
            );
            let (found, score) = run(&ranges, strategy, seed).await;
            let lost: Vec<&Fact> = missed(&score)
                .into_iter()
                .filter(|f| !matches!(f, Fact::NoEffect { .. }))
                .collect();
            assert!(
                lost.is_empty(),
                "ranges {strategy} seed {seed}: {lost:#?}\n{}",
                findings::markdown(&found)
            );
        }
    }
}

#[tokio::test]
async fn divergence_tells_a_lossless_cache_type_from_a_lossy_one() {
    // Judged by KL divergence from the f16 baseline: q8_0 K saves memory
    // within the divergence margins (a free win, shown equivalent on
    // every divergence measure), q4_0 K moves the distribution, and
    // threads leave it alone (equivalence).
    let kvcache = world("kvcache");
    for strategy in ["grid", "random", "two_phase", "motpe", "bayes"] {
        for seed in SEEDS {
            let (found, score) = run(&kvcache, strategy, seed).await;
            assert!(score.wrong.is_empty(), "{strategy} seed {seed}: {:#?}", score.wrong);
            let lost = missed(&score);
            assert!(
                lost.is_empty(),
                "kvcache {strategy} seed {seed}: {lost:#?}\n{}",
                findings::markdown(&found)
            );
            let free = found.iter().find_map(|f| match f {
                Finding::FreeWin { changes, quality, .. }
                    if changes.iter().all(|c| c.setting == "cache_type_k" && c.value == "q8_0") =>
                {
                    Some(quality)
                }
                _ => None,
            });
            let quality = free.expect("q8_0 K as a free win");
            let judged: Vec<&str> = quality.iter().map(|(m, _)| m.name()).collect();
            assert_eq!(judged, ["kld_mean", "kld_p99", "same_top_rate"], "{strategy} seed {seed}");
        }
    }
}

#[tokio::test]
async fn on_pure_noise_nothing_is_claimed_to_matter() {
    let noise = world("noise");
    for strategy in ["grid", "random", "two_phase", "motpe", "bayes", "llm"] {
        for seed in SEEDS {
            let (found, _) = run(&noise, strategy, seed).await;
            let claims: Vec<&Finding> = found
                .iter()
                .filter(|f| {
                    matches!(
                        f,
                        Finding::Effect { .. }
                            | Finding::Interaction { .. }
                            | Finding::FreeWin { .. }
                            | Finding::Anomaly { .. }
                            | Finding::Failures { .. }
                    )
                })
                .collect();
            assert!(claims.is_empty(), "noise {strategy} seed {seed}: {claims:#?}");
            // What it can say: no effect, shown within the margin.
            assert!(
                found.iter().any(|f| matches!(f, Finding::NoEffect { .. })),
                "noise {strategy} seed {seed}: {}",
                findings::markdown(&found)
            );
        }
    }
}

#[tokio::test]
async fn a_grid_cut_short_says_what_it_cannot_tell() {
    // The grid's first 80 points never change the K cache type: the
    // findings say nothing of it, and the failures' rule names the values
    // every failure shared.
    let llama8 = world("llama8");
    let (found, score) = run(&llama8, "grid", 1).await;
    assert!(score.wrong.is_empty(), "{:#?}", score.wrong);
    assert!(
        !found.iter().any(|f| f.key().contains("cache_type_k")),
        "{}",
        findings::markdown(&found)
    );
    let rule = found.iter().find_map(|f| match f {
        Finding::Failures { rule: Some(r), .. } => Some(r),
        _ => None,
    });
    let rule = rule.expect("a rule for the out-of-memory failures");
    assert!(rule.also.iter().any(|c| c.setting == "cache_type_k"), "{rule:?}");
}

#[tokio::test]
async fn an_interaction_the_design_cannot_tell_from_another_is_not_claimed() {
    // The grid's first 120 points try a 32k context with flash attention
    // off only with a q8_0 K cache (f16 runs out of memory there) and with
    // it on only with f16: the memory's K × context interaction looks the
    // same as a context × flash attention one, which is not there.
    let llama8 = world("llama8");
    let (found, score) = run_for(&llama8, "grid", 1, 120).await;
    assert!(score.wrong.is_empty(), "{:#?}\n{}", score.wrong, findings::markdown(&found));
    let claimed = |a: &str, b: &str| {
        found
            .iter()
            .any(|f| matches!(f, Finding::Interaction { settings: (x, y), .. } if x == a && y == b))
    };
    assert!(!claimed("ctx_size", "flash_attn"), "{}", findings::markdown(&found));
}

#[tokio::test]
async fn a_real_machine_s_noise_is_measured_and_heads_the_findings() {
    // Requests slowed now and then, the machine 0.4 % slower each trial,
    // and eight questions: the drift is found and taken out, and quality
    // is never claimed either way.
    let machine = world("machine");
    let (found, score) = run(&machine, "random", 1).await;
    assert!(score.wrong.is_empty(), "{:#?}", score.wrong);
    let Some(Finding::Noise { metric, drift, .. }) = found.first() else {
        panic!("no noise first: {}", findings::markdown(&found))
    };
    assert_eq!(metric.name(), "decode_tps");
    let drift = drift.expect("the drift is found");
    assert!((-45.0..-15.0).contains(&drift), "80 trials at −0.4 %: {drift}");
    let quality = found.iter().find_map(|f| match f {
        Finding::Noise { metric, items, .. } if metric.name() == "quality_score" => *items,
        _ => None,
    });
    let (n, chance) = quality.expect("the quality score's items are stated");
    assert_eq!(n, 8);
    assert!(chance > 20.0, "eight questions differ by chance by more than 20 points: {chance}");
    let undecided = found.iter().any(|f| {
        matches!(f, Finding::NotDetermined { metric, reason: findings::Undetermined::FewItems { items: 8, .. }, .. } if metric.name() == "quality_score")
    });
    assert!(undecided, "{}", findings::markdown(&found));
}

/// Where the model of a metric cannot follow the trials, many of them lie
/// far off what the rest predict; that is the model's failing, not theirs.
/// On this world and seed the prefill model named 22 trials anomalies,
/// each measured as it should have been; now it names none of them.
#[tokio::test]
async fn a_model_that_does_not_fit_names_no_crowd_of_anomalies() {
    let w = world("region");
    let mut study = w.study("two_phase", 4, BUDGET);
    study.def.budget.settle_trials = Some(0);
    let trials = w.run(&study, 4).await;
    let varied: Vec<String> = study.def.space.keys().cloned().collect();
    let margins = Margins::default();
    let planner = w.planner();
    let found =
        findings::findings_planned(&trials, &varied, &study.measures(), &margins, planner.as_ref());
    let score = planted::score(&w, &study, &trials, &found, &margins);
    let wrong: Vec<&String> = score.wrong.iter().filter(|w| w.starts_with("anomaly")).collect();
    assert!(wrong.len() <= 1, "{wrong:#?}\n{}", findings::markdown(&found));
    let on_prefill = found.iter().filter(|f| {
        matches!(f, Finding::Anomaly { metric, .. } if *metric == tunebook_study::Metric::PrefillTps)
    });
    assert_eq!(on_prefill.count(), 0, "{}", findings::markdown(&found));
}

/// In `region` (left out of the worlds held claim by claim), no "no
/// effect" claim reaches where the truth has one: a q4_0 K cache slows
/// decode only at the longest context, which a search barely visits, and
/// a claim of none must say it was not shown there. Two searches (a
/// region study costs seconds each): two-phase on seed 3 claimed none
/// there before such claims named where they were not shown.
#[tokio::test]
async fn no_effect_is_not_claimed_where_a_confined_effect_was_barely_tried() {
    let w = world("region");
    for (strategy, seed) in [("two_phase", 3), ("random", 1)] {
        let (found, score) = run(&w, strategy, seed).await;
        let wrong: Vec<&String> =
            score.wrong.iter().filter(|c| c.starts_with("\"no effect\"")).collect();
        assert!(
            wrong.is_empty(),
            "{strategy} seed {seed}: {wrong:#?}\n{}",
            findings::markdown(&found)
        );
    }
}

/// `region`'s memory is a constant, plus the K cache's bytes (context ×
/// bytes per element) times a flash-attention factor, plus a compute
/// buffer of micro-batch × context: a product no sum of settings' effects
/// and pairs fits. In bytes, what such a model left over passed for
/// interactions of settings that cannot move memory (`threads` ×
/// `ubatch_size` on these seeds). With the planner's prediction as a
/// column, and that column times each setting's as a candidate, the
/// product is fitted: no claim on memory is wrong, and the context's and
/// the K cache's effects, which the plan carries, are still found.
#[tokio::test]
async fn memory_modelled_with_the_plan_invents_no_interaction() {
    let w = world("region");
    for (strategy, seed) in [("two_phase", 3), ("llm", 3), ("bayes", 6)] {
        let (found, score) = run(&w, strategy, seed).await;
        let on_memory: Vec<&String> =
            score.wrong.iter().filter(|w| w.contains("peak_rss_bytes")).collect();
        assert!(on_memory.is_empty(), "{strategy} seed {seed}: {on_memory:#?}");
        for setting in ["ctx_size", "cache_type_k"] {
            let fact = Fact::Effect {
                setting: setting.into(),
                metric: tunebook_study::Metric::PeakRssBytes,
            };
            assert!(
                !missed(&score).contains(&&fact),
                "{strategy} seed {seed}: {setting} on memory\n{}",
                findings::markdown(&found)
            );
        }
    }
}

/// Where a search barely visits a corner of the space (motpe on `region`,
/// seed 5: the longest context with few threads), a pair of curves
/// extrapolated there gave ratios in the thousands whose intervals still
/// excluded 1: "`threads` 1 is best (18614× [1.77, 195835054.81])",
/// "`ctx_size` 65536 is best (7.87× [1.33, 46.46])". A contrast known no
/// better than from a thirtieth of a trial is not stated: every interval
/// stated spans less than a factor of 4, and nothing said of decode is
/// wrong (q4_0 K slows it at the longest context, and only there).
#[tokio::test]
async fn a_corner_the_search_barely_ran_is_not_stated_as_a_measurement() {
    let w = world("region");
    let (found, score) = run(&w, "motpe", 5).await;
    let text = findings::markdown(&found);
    let on_decode: Vec<&String> = score.wrong.iter().filter(|w| w.contains("decode")).collect();
    assert!(on_decode.is_empty(), "{on_decode:#?}\n{text}");
    for f in &found {
        let intervals: Vec<(f64, f64)> = match f {
            Finding::Effect { levels, log: true, .. } => {
                levels.iter().filter_map(|l| Some((l.vs_base?.lo, l.vs_base?.hi))).collect()
            }
            Finding::Interaction { cells, log: true, .. } => {
                cells.iter().map(|c| (c.vs_base.lo, c.vs_base.hi)).collect()
            }
            _ => vec![],
        };
        for (lo, hi) in intervals {
            assert!(lo > 0.0 && hi / lo < 4.0, "[{lo}, {hi}]\n{text}");
        }
    }
}

/// On `region`, motpe seed 2 ran the large batch mostly with other
/// micro-batches at many threads, and `batch_size` × `threads` stood in
/// for the true `threads` × `ubatch_size` on time to first token. An
/// interaction that another sharing a setting with it leaves adding
/// nothing is not claimed: nothing said of time to first token is wrong.
#[tokio::test]
async fn an_interaction_another_could_stand_in_for_is_not_claimed() {
    let w = world("region");
    let (found, score) = run(&w, "motpe", 2).await;
    let on_ttft: Vec<&String> = score.wrong.iter().filter(|w| w.contains("ttft")).collect();
    assert!(on_ttft.is_empty(), "{on_ttft:#?}\n{}", findings::markdown(&found));
}

/// A suite of 200 questions, answered alike by every configuration that
/// leaves the model's answers alone: compared question by question, a K
/// cache at 8 bits is shown lossless (a free win) and one at 4 bits
/// costly, and `threads` is shown to leave quality alone. The same trials
/// with each question's verdict dropped (two binomial counts of 200 differ
/// by up to ±9 points by chance) show none of it.
#[tokio::test]
async fn a_large_suite_shows_a_cache_type_lossless_question_by_question() {
    let w = world("suite");
    let margins = Margins::default();
    for strategy in ["random", "motpe"] {
        let study = w.study(strategy, 1, 60);
        let mut trials = w.run(&study, 1).await;
        let varied: Vec<String> = study.def.space.keys().cloned().collect();
        let planner = w.planner();
        let judge = |trials: &[findings::TrialFacts]| {
            let found = findings::findings_planned(
                trials,
                &varied,
                &study.measures(),
                &margins,
                planner.as_ref(),
            );
            let score = planted::score(&w, &study, trials, &found, &margins);
            (found, score)
        };
        let (found, score) = judge(&trials);
        let text = findings::markdown(&found);
        assert!(score.wrong.is_empty(), "{strategy}: {:#?}\n{text}", score.wrong);
        assert!(missed(&score).is_empty(), "{strategy}: {:#?}\n{text}", missed(&score));
        let free_q8 = |found: &[Finding]| {
            found.iter().any(|f| {
                matches!(f, Finding::FreeWin { changes, quality, .. }
                if changes.iter().all(|c| c.setting == "cache_type_k" && c.value == "q8_0")
                    && quality.iter().any(|(m, _)| m.name() == "quality_score"))
            })
        };
        assert!(free_q8(&found), "{strategy}: {text}");
        assert!(text.contains("compared one by one"), "{text}");
        trials.iter_mut().for_each(|t| t.verdicts.clear());
        let (alone, score) = judge(&trials);
        assert!(score.wrong.is_empty(), "{strategy} unpaired: {:#?}", score.wrong);
        assert!(!free_q8(&alone), "{strategy}: {}", findings::markdown(&alone));
        assert!(missed(&score).iter().any(|f| matches!(f, Fact::NoEffect { .. })));
    }
}

/// At the pick, "the same" is claimed only where trials ran the value
/// beside the pick's own and did not deviate there: on `region`, bayes
/// seed 2, the model carried "`ctx_size` = 65536 changes decode within
/// ±3 %" over to a pick inside the region where long contexts slow it.
#[tokio::test]
async fn the_same_at_the_pick_is_not_carried_over_from_elsewhere() {
    let (found, score) = run(&world("region"), "bayes", 2).await;
    assert!(found.iter().any(|f| matches!(f, Finding::AtPick { .. })));
    let wrong: Vec<&String> = score.wrong.iter().filter(|c| c.contains("at the pick")).collect();
    assert!(wrong.is_empty(), "{wrong:#?}\n{}", findings::markdown(&found));
}
