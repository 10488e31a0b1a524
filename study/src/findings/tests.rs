//! The findings on small planted studies: each claim checked against what
//! was planted.

use rand::{Rng, SeedableRng};

use super::*;

/// A study of `threads` × `cache` × `mlock` (each combination `reps`
/// times) whose decode speed is `speed(threads, cache, mlock)` plus
/// noise of about 2 %.
fn study(reps: usize, speed: impl Fn(u32, &str, bool) -> f64) -> Vec<TrialFacts> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut out = Vec::new();
    for threads in [1u32, 2, 4, 8, 16] {
        for cache in ["f16", "q8_0"] {
            for mlock in [false, true] {
                for _ in 0..reps {
                    let noise = 1.0 + rng.random_range(-0.02..0.02);
                    let settings: Settings = [
                        ("threads".to_string(), threads.to_string()),
                        ("cache_type_k".to_string(), cache.to_string()),
                        ("mlock".to_string(), mlock.to_string()),
                    ]
                    .into();
                    out.push(TrialFacts {
                        id: out.len() as i64 + 1,
                        role: out.is_empty().then_some(Role::Baseline),
                        settings,
                        done: true,
                        failure: None,
                        metrics: [(Metric::DecodeTps, speed(threads, cache, mlock) * noise)].into(),
                        ..Default::default()
                    });
                }
            }
        }
    }
    out
}

fn varied() -> Vec<String> {
    ["threads", "cache_type_k", "mlock"].map(String::from).to_vec()
}

const DECODE: [(Measure, Goal); 1] = [(Measure::Metric(Metric::DecodeTps), Goal::Max)];

#[test]
fn pure_noise_makes_no_effect_claim() {
    let trials = study(2, |_, _, _| 40.0);
    let found = findings(&trials, &varied(), &DECODE);
    assert!(!found.iter().any(|f| matches!(f, Finding::Effect { .. })), "{found:#?}");
    let none: Vec<&str> = found
        .iter()
        .filter_map(|f| match f {
            Finding::NoEffect { setting, .. } => Some(setting.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(none, ["threads", "cache_type_k", "mlock"]);
}

#[test]
fn a_planted_effect_is_found_and_a_bystander_is_not() {
    // Threads peak at 8 (non-monotonic); the cache type costs 30 %; mlock nothing.
    let peak = |t: u32| match t {
        1 => 10.0,
        2 => 20.0,
        4 => 35.0,
        8 => 40.0,
        _ => 30.0,
    };
    let trials = study(2, |t, c, _| peak(t) * if c == "q8_0" { 0.7 } else { 1.0 });
    let found = findings(&trials, &varied(), &DECODE);
    let effect = |name: &str| {
        found.iter().find_map(|f| match f {
            Finding::Effect { setting, levels, peak, .. } if setting == name => {
                Some((levels[0].value.clone(), *peak))
            }
            _ => None,
        })
    };
    assert_eq!(effect("threads"), Some(("8".to_string(), true)), "{found:#?}");
    assert_eq!(effect("cache_type_k"), Some(("f16".to_string(), false)));
    assert_eq!(effect("mlock"), None, "mlock does nothing");
    let text = markdown(&found);
    assert!(text.contains("**`threads` changes decode tok/s**: 8 is best ("), "{text}");
    assert!(text.contains("It peaks in between"), "{text}");
    assert!(!text.contains("`mlock` changes"), "{text}");
    assert!(matches!(found[0], Finding::Noise { metric: Metric::DecodeTps, .. }), "noise heads");
    let best = found.iter().find(|f| matches!(f, Finding::Best { .. })).unwrap();
    assert!(
        matches!(best, Finding::Best { settings, .. } if settings["threads"] == "8" && settings["cache_type_k"] == "f16")
    );
}

#[test]
fn a_small_effect_shows_under_a_large_one() {
    // Threads move decode 16-fold; the cache type only 6 %, which the
    // 2 % noise cannot explain once the threads' effect is taken out.
    let trials = study(2, |t, c, _| 5.0 * t as f64 * if c == "q8_0" { 0.94 } else { 1.0 });
    let found = findings(&trials, &varied(), &DECODE);
    let cache = found.iter().find_map(|f| match f {
        Finding::Effect { setting, levels, size_pct, .. } if setting == "cache_type_k" => {
            Some((levels[0].value.clone(), *size_pct))
        }
        _ => None,
    });
    let (best, size) = cache.expect("the cache type's effect");
    assert_eq!(best, "f16");
    assert!(size > 0.0, "{size}");
}

#[test]
fn an_effect_that_shows_only_away_from_the_baseline_is_stated_there() {
    // q8_0 is 1 % faster at one thread (the baseline's), inside the 3 %
    // margin, and 30 % faster at every other thread count.
    let trials = study(2, |threads, cache, _| {
        let gain = match (cache, threads) {
            ("q8_0", 1) => 1.01,
            ("q8_0", _) => 1.3,
            _ => 1.0,
        };
        40.0 * gain
    });
    let found = findings(&trials, &varied(), &DECODE);
    let effect = found.iter().find_map(|f| match f {
        Finding::Effect { setting, levels, at, given, .. } if setting == "cache_type_k" => {
            Some((levels.clone(), at.clone(), given.clone()))
        }
        _ => None,
    });
    let Some((levels, at, given)) = effect else { panic!("no effect of the cache: {found:#?}") };
    assert_eq!(given, ["threads"]);
    let (partner, value) = at.expect("compared away from the baseline");
    assert_eq!(partner, "threads");
    assert_ne!(value, "1", "where it shows");
    assert_eq!(levels[0].value, "q8_0", "the faster one first");
    let ratio = levels[0].vs_base.as_ref().unwrap().est;
    assert!((ratio - 1.3).abs() < 0.05, "{ratio}");
    let text = found
        .iter()
        .find(|f| matches!(f, Finding::Effect { setting, .. } if setting == "cache_type_k"))
        .unwrap()
        .markdown();
    assert!(text.contains(&format!("with `threads` = {value}")), "{text}");
}

#[test]
fn no_effect_is_claimed_of_a_setting_that_acts_with_another_only_within_the_margin_everywhere() {
    // mlock speeds up decode by 1 % with the q8_0 cache and not at all
    // with f16: a real interaction, inside the 3 % margin at both cache
    // types. A 6 % one is not "no effect".
    let no_effect = |gain: f64| {
        let trials =
            study(4, |_, cache, mlock| 40.0 * if cache == "q8_0" && mlock { gain } else { 1.0 });
        let found = findings(&trials, &varied(), &DECODE);
        let claim = found
            .iter()
            .find(|f| matches!(f, Finding::NoEffect { setting, .. } if setting == "mlock"))
            .cloned();
        (claim, found)
    };
    let (claim, found) = no_effect(1.01);
    let Some(claim) = claim else { panic!("no claim on mlock: {found:#?}") };
    let Finding::NoEffect { given, .. } = &claim else { unreachable!() };
    assert_eq!(given, &["cache_type_k"], "the interaction is in the model");
    let text = claim.markdown();
    assert!(text.contains("also with `cache_type_k` at each value tried"), "{text}");
    let (claim, found) = no_effect(1.06);
    assert!(claim.is_none(), "{found:#?}");
}

#[test]
fn an_out_of_memory_boundary_is_drawn() {
    let mut trials = study(1, |_, _, _| 40.0);
    for t in trials.iter_mut() {
        let ctx = if t.id % 4 == 0 { "32768" } else { "8192" };
        t.settings.insert("ctx_size".into(), ctx.into());
        if ctx == "32768" {
            t.done = false;
            t.failure = Some(("out_of_memory".into(), "cudaMalloc failed: out of memory".into()));
            t.metrics.clear();
        }
    }
    let varied: Vec<String> = ["threads", "ctx_size"].map(String::from).to_vec();
    let found = findings(&trials, &varied, &DECODE);
    let failures = found.iter().find(|f| matches!(f, Finding::Failures { .. })).unwrap();
    let text = failures.markdown();
    assert!(
        text.starts_with("**out of memory whenever `ctx_size` ≥ 32768**: the 5 trials run there all failed so; all 15 trials that ran lie outside it."),
        "{text}"
    );
    assert!(text.contains("“cudaMalloc failed: out of memory”"), "{text}");
}

/// Sets `metric` on every trial to `f(trial)`.
fn measure(trials: &mut [TrialFacts], metric: Metric, mut f: impl FnMut(&TrialFacts) -> f64) {
    for t in trials.iter_mut() {
        let v = f(t);
        t.metrics.insert(metric, v);
    }
}

#[test]
fn a_lossless_setting_is_a_free_win_and_a_lossy_one_is_not() {
    // q8_0 K/V: 25 % less memory, same speed, same quality. A second
    // study where it also costs quality must not call it free.
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    let mut trials = study(2, |t, _, _| 5.0 * t as f64);
    measure(&mut trials, Metric::PeakRssBytes, |t| {
        let base = 800e6 * if t.settings["cache_type_k"] == "q8_0" { 0.75 } else { 1.0 };
        base * (1.0 + (t.id % 7) as f64 * 0.002)
    });
    measure(&mut trials, Metric::QualityScore, |_| 0.625);
    let mut lossy = trials.clone();
    let found = findings(&trials, &varied(), &DECODE);
    // More threads are a free win too (faster, quality the same); the
    // cache type's is the one planted.
    let wins: Vec<&Finding> = found
        .iter()
        .filter(|f| matches!(f, Finding::FreeWin { changes, .. } if changes[0].setting == "cache_type_k"))
        .collect();
    assert_eq!(wins.len(), 1, "{found:#?}");
    let Finding::FreeWin { changes, gains, .. } = wins[0] else { unreachable!() };
    let Change { setting, value, over } = &changes[0];
    assert_eq!((setting.as_str(), value.as_str(), over.as_str()), ("cache_type_k", "q8_0", "f16"));
    assert_eq!(gains.len(), 1);
    assert_eq!(gains[0].metric, Metric::PeakRssBytes);
    assert!((gains[0].pct - 25.0).abs() < 2.0, "{gains:?}");
    let text = wins[0].markdown();
    assert!(
        text.starts_with("**Free win: `cache_type_k` = q8_0 instead of f16**: peak RSS"),
        "{text}"
    );
    assert!(text.contains("quality score +0.0 points [-0.1, +0.1]"), "{text}");

    measure(&mut lossy, Metric::QualityScore, |t| {
        let q = if t.settings["cache_type_k"] == "q8_0" { 0.55 } else { 0.625 };
        q + rng.random_range(-0.005..0.005)
    });
    let found = findings(&lossy, &varied(), &DECODE);
    let cache_win = |f: &Finding| matches!(f, Finding::FreeWin { changes, .. } if changes[0].setting == "cache_type_k");
    assert!(!found.iter().any(cache_win), "{found:#?}");

    // Without any quality measure, nothing is called free.
    for t in trials.iter_mut() {
        t.metrics.remove(&Metric::QualityScore);
    }
    let found = findings(&trials, &varied(), &DECODE);
    assert!(!found.iter().any(|f| matches!(f, Finding::FreeWin { .. })), "{found:#?}");
}

#[test]
fn one_combination_far_slower_than_its_neighbours_is_an_anomaly() {
    let mut trials = study(1, |t, c, _| 5.0 * t as f64 * if c == "q8_0" { 0.9 } else { 1.0 });
    // threads=8, q8_0, mlock on: four times slower than the rest predict.
    let odd = trials
        .iter_mut()
        .find(|t| {
            t.settings["threads"] == "8"
                && t.settings["cache_type_k"] == "q8_0"
                && t.settings["mlock"] == "true"
        })
        .unwrap();
    *odd.metrics.get_mut(&Metric::DecodeTps).unwrap() /= 4.0;
    let odd = odd.id;
    let found = findings(&trials, &varied(), &DECODE);
    let anomalies: Vec<&Finding> =
        found.iter().filter(|f| matches!(f, Finding::Anomaly { .. })).collect();
    assert_eq!(anomalies.len(), 1, "{found:#?}");
    let Finding::Anomaly { trial, value, expected, .. } = anomalies[0] else { unreachable!() };
    assert_eq!(*trial, odd);
    let ratio = expected / value;
    assert!((3.0..5.0).contains(&ratio), "{ratio}");
    let text = anomalies[0].markdown();
    assert!(text.starts_with(&format!("**Trial {odd} is an anomaly on decode tok/s**")), "{text}");
    assert!(text.contains("× lower"), "{text}");

    // The same study without the odd trial has no anomaly.
    let clean = study(1, |t, c, _| 5.0 * t as f64 * if c == "q8_0" { 0.9 } else { 1.0 });
    let found = findings(&clean, &varied(), &DECODE);
    assert!(!found.iter().any(|f| matches!(f, Finding::Anomaly { .. })), "{found:#?}");
}

#[test]
fn the_balanced_pick_sits_between_the_extremes() {
    // Decode rises with threads, memory too: the front is every thread
    // count; the balanced pick is neither end.
    let mut trials = study(1, |t, _, _| 10.0 * (t as f64).sqrt());
    measure(&mut trials, Metric::PeakRssBytes, |t| {
        let threads: f64 = t.settings["threads"].parse().unwrap();
        let cache = if t.settings["cache_type_k"] == "q8_0" { 1.0 } else { 1.1 };
        100e6 * threads * cache
    });
    let objectives = [
        (Measure::Metric(Metric::DecodeTps), Goal::Max),
        (Measure::Metric(Metric::PeakRssBytes), Goal::Min),
    ];
    let found = findings(&trials, &varied(), &objectives);
    let Some(Finding::Balanced { trial, front, settings, .. }) =
        found.iter().find(|f| matches!(f, Finding::Balanced { .. }))
    else {
        panic!("{found:#?}")
    };
    assert!(front.contains(trial));
    assert!(!["1", "16"].contains(&settings["threads"].as_str()), "{settings:?}");
}

#[test]
fn a_setting_objective_has_its_best_and_a_place_in_the_balanced_pick() {
    // Fast decode wants few threads here, the study also asks for many:
    // the best of each is an end, the balanced pick lies between, and
    // both name the setting as what it is.
    let trials = study(1, |t, _, _| 100.0 - 0.3 * f64::from(t * t));
    let threads = Measure::Setting("threads".into());
    let objectives =
        [(Measure::Metric(Metric::DecodeTps), Goal::Max), (threads.clone(), Goal::Max)];
    let found = findings(&trials, &varied(), &objectives);
    let best = |m: &Measure| {
        found.iter().find_map(|f| match f {
            Finding::Best { measure, value, .. } if measure == m => Some(*value),
            _ => None,
        })
    };
    assert_eq!(best(&threads), Some(16.0), "{found:#?}");
    assert!(best(&objectives[0].0).is_some_and(|v| v > 90.0), "{found:#?}");
    let Some(Finding::Balanced { values, settings, .. }) =
        found.iter().find(|f| matches!(f, Finding::Balanced { .. }))
    else {
        panic!("no balanced pick: {found:#?}")
    };
    assert_eq!(values[1].0, threads);
    assert!(!["1", "16"].contains(&settings["threads"].as_str()), "{settings:?}");
    let text = markdown(&found);
    assert!(text.contains("**Best setting threads** (highest): 16 — trial"), "{text}");
    // Written as study files name it, a metric or a setting.
    let written = serde_json::to_value(&found).unwrap();
    assert_eq!(written[0]["metric"], "decode_tps", "{written}");
    assert_eq!(written[1]["metric"], "setting.threads", "{written}");
}

#[test]
fn the_ceiling_and_drift_are_reported() {
    let mut trials = study(1, |_, _, _| 40.0);
    for t in trials.iter_mut() {
        t.ceiling_tps = Some(44.0);
    }
    let found = findings(&trials, &varied(), &DECODE);
    let ceiling = found.iter().find(|f| matches!(f, Finding::Ceiling { .. })).unwrap();
    let text = ceiling.markdown();
    assert!(text.starts_with("**Decode is at the memory-bandwidth wall**"), "{text}");
    assert!(text.contains("No setting moved decode beyond the noise."), "{text}");

    // The baseline (trial 1) run again as trials 6 and 12, 10 % slower
    // the second time; trials 7–12 flagged.
    for t in trials.iter_mut() {
        if [1, 6, 12].contains(&t.id) {
            t.role = Some(if t.id == 1 { Role::Baseline } else { Role::Rerun });
        }
        if [1, 6].contains(&t.id) {
            t.metrics.insert(Metric::DecodeTps, 40.0);
        }
        if t.id == 12 {
            t.metrics.insert(Metric::DecodeTps, 36.0);
        }
        if (7..=12).contains(&t.id) {
            t.drift_pct = Some(-10.0);
        }
    }
    let found = findings(&trials, &varied(), &DECODE);
    let drift = found.iter().find(|f| matches!(f, Finding::Drift { .. })).unwrap();
    let text = drift.markdown();
    assert!(text.starts_with("**Drift during the study**"), "{text}");
    assert!(text.contains("-10.0 %"), "{text}");
    assert!(text.contains("7, 8, 9, 10, 11, 12"), "{text}");
}

#[test]
fn values_read_as_people_read_them() {
    assert_eq!(value_text(Metric::PeakRssBytes, 33.9e6), "32 MiB");
    assert_eq!(value_text(Metric::PeakRssBytes, 5.0 * (1u64 << 30) as f64), "5.00 GiB");
    assert_eq!(value_text(Metric::QualityScore, 0.875), "87.5 %");
    assert_eq!(value_text(Metric::DecodeTps, 45.123), "45.1");
    assert_eq!(value_text(Metric::DecodeTps, 4.5678), "4.57");
}

#[test]
fn the_reference_is_the_yardstick_of_a_divergence_never_its_best() {
    // The reference (0 by construction) and a configuration whose output
    // is its to the digit, then two that diverge.
    let trial = |id: i64, cache: &str, kld: f64| TrialFacts {
        id,
        role: (id == 1).then_some(Role::Baseline),
        settings: [("cache_type_k".to_string(), cache.to_string())].into(),
        done: true,
        metrics: [(Metric::KldMean, kld), (Metric::DecodeTps, 50.0 + id as f64)].into(),
        ..Default::default()
    };
    let trials = [
        trial(1, "f16", 0.0),
        trial(2, "bf16", 0.0),
        trial(3, "q8_0", 0.004),
        trial(4, "q4_0", 0.04),
    ];
    let objectives = [
        (Measure::Metric(Metric::DecodeTps), Goal::Max),
        (Measure::Metric(Metric::KldMean), Goal::Min),
    ];
    let found = findings(&trials, &["cache_type_k".to_string()], &objectives);
    let best = |m: Metric| {
        found.iter().find_map(|f| match f {
            Finding::Best { measure, trial, .. } if measure.metric() == Some(m) => Some(*trial),
            _ => None,
        })
    };
    assert_eq!(best(Metric::KldMean), Some(3), "{found:#?}");
    assert_eq!(best(Metric::DecodeTps), Some(4), "speed has no yardstick");
    let text = markdown(&found);
    assert!(
        text.contains("**Best mean KL divergence** (lowest of those that differ from the reference): 0.0040 — trial 3"),
        "{text}"
    );
}

/// Every trial of a cache type ran with mlock on: whatever it measured
/// there may be the two together, so no effect of the cache type at it,
/// nor its absence, is claimed; once it also ran with mlock off, it is.
#[test]
fn a_value_run_only_with_another_setting_s_same_other_value_carries_no_claim() {
    // q8_0 slows decode only with mlock on: a pair the trials cannot see.
    let speed =
        |_: u32, cache: &str, mlock: bool| if cache == "q8_0" && mlock { 28.0 } else { 40.0 };
    let mut trials: Vec<TrialFacts> = study(2, speed)
        .into_iter()
        .filter(|t| t.settings["cache_type_k"] == "f16" || t.settings["mlock"] == "true")
        .collect();
    let found = findings(&trials, &varied(), &DECODE);
    let on_cache = |found: &[Finding]| {
        found
            .iter()
            .find(|f| match f {
                Finding::Effect { setting, .. }
                | Finding::NoEffect { setting, .. }
                | Finding::NotDetermined { setting, .. } => setting == "cache_type_k",
                _ => false,
            })
            .cloned()
    };
    match on_cache(&found) {
        Some(Finding::NotDetermined { reason: Undetermined::Aliased { with }, .. }) => {
            assert_eq!(with, ["mlock"]);
        }
        other => panic!("not determined, tangled with mlock: {other:#?}"),
    }
    // The same values with mlock off too: q8_0 is shown within the margin there.
    trials.extend(
        study(2, speed)
            .into_iter()
            .filter(|t| t.settings["cache_type_k"] == "q8_0" && t.settings["mlock"] == "false"),
    );
    for (k, t) in trials.iter_mut().enumerate() {
        t.id = k as i64 + 1;
    }
    let found = findings(&trials, &varied(), &DECODE);
    assert!(
        !matches!(
            on_cache(&found),
            Some(Finding::NotDetermined { reason: Undetermined::Aliased { .. }, .. })
        ),
        "{found:#?}"
    );
}

#[test]
fn a_contrast_the_noise_hides_is_told_so_not_given_a_count_in_the_thousands() {
    let mut trials = study(1, |_, _, _| 40.0);
    let mut rng = rand::rngs::StdRng::seed_from_u64(5);
    // A busy machine: each trial off by up to a factor of 2.
    measure(&mut trials, Metric::DecodeTps, |_| 40.0 * rng.random_range(-0.7f64..0.7).exp());
    let found = findings(&trials, &varied(), &DECODE);
    let told = (4 * trials.len()).max(100);
    let reasons: Vec<&Undetermined> = found
        .iter()
        .filter_map(|f| match f {
            Finding::NotDetermined { reason, .. } => Some(reason),
            _ => None,
        })
        .collect();
    assert!(!reasons.is_empty(), "{found:#?}");
    for r in &reasons {
        if let Undetermined::MoreTrials { about: Some(n) } = r {
            assert!(*n <= told, "a count of {n} is no plan: {r:?}");
        }
    }
    let hidden = reasons
        .iter()
        .find(|r| matches!(r, Undetermined::MoreTrials { about: None }))
        .unwrap_or_else(|| panic!("{reasons:?}"));
    assert!(hidden.text().starts_with("the noise hides it"), "{}", hidden.text());
}
