use std::collections::BTreeMap;

use super::*;
use crate::strategy::testing;

fn with(base: &Settings, setting: &str, value: &str) -> Settings {
    let mut s = base.clone();
    s.insert(setting.into(), value.into());
    s
}

fn done(id: i64, settings: Settings) -> TrialFacts {
    let metrics = testing::metrics(&settings);
    TrialFacts { id, settings, done: true, metrics, ..Default::default() }
}

#[test]
fn a_plan_interleaves_the_baseline_with_each_value_run_alone() {
    let study = testing::study("random", "");
    let base = study.baseline.clone();
    let trials = vec![
        done(1, base.clone()),
        done(2, with(&with(&base, "cache_type_k", "q8_0"), "threads", "8")),
        done(3, with(&with(&base, "cache_type_k", "q4_0"), "threads", "8")),
    ];
    let why = Undetermined::Aliased { with: vec!["threads".into()] };
    let plan = plan(&study, &trials, "cache_type_k", Metric::DecodeTps, &why).unwrap();
    let configs: Vec<&Settings> = plan.runs.iter().map(|r| &r.0).collect();
    // Two rounds of three arms: the baseline, then each value alone.
    assert_eq!(configs.len(), 6, "{plan:#?}");
    for round in configs.chunks(3) {
        assert_eq!(round[0], &base);
        let values: Vec<&str> = round[1..].iter().map(|c| c["cache_type_k"].as_str()).collect();
        assert_eq!(values, ["q4_0", "q8_0"]);
        for c in &round[1..] {
            assert_eq!(c["threads"], base["threads"], "only the setting itself moves");
        }
    }
    assert!(
        plan.runs
            .iter()
            .all(|(_, note)| asked(note) == Some(ask("cache_type_k", Metric::DecodeTps, false)))
    );
    assert_eq!(
        plan.runs[4].1,
        "settle `cache_type_k` on decode_tps: `cache_type_k` = q4_0, 2 of 2"
    );
}

#[test]
fn more_trials_spread_over_the_arms_within_the_bound() {
    let study = testing::study("random", "");
    let base = study.baseline.clone();
    let mut trials = vec![done(1, base.clone())];
    for (k, t) in [1, 2, 3, 6, 8, 12, 16].into_iter().enumerate() {
        trials.push(done(k as i64 + 2, with(&base, "threads", &t.to_string())));
    }
    let why = Undetermined::MoreTrials { about: Some(9) };
    let p = plan(&study, &trials, "threads", Metric::DecodeTps, &why).unwrap();
    // A number tried at many values: its ends and its middle.
    let values: BTreeMap<&str, usize> = p.runs.iter().fold(BTreeMap::new(), |mut m, (c, _)| {
        *m.entry(c["threads"].as_str()).or_default() += 1;
        m
    });
    assert_eq!(values.keys().copied().collect::<Vec<_>>(), ["1", "16", "4", "6"]);
    assert!(values.values().all(|n| *n == 3), "{values:?}");
    assert!(p.settles(), "twelve runs for about nine");
    // Many more asked for than one plan may take: still within it.
    let why = Undetermined::MoreTrials { about: Some(500) };
    let p = plan(&study, &trials, "threads", Metric::DecodeTps, &why).unwrap();
    assert!(p.runs.len() <= MAX_RUNS && p.runs.len() >= 8, "{}", p.runs.len());
    assert!(!p.settles(), "it only goes toward it");
    assert_eq!(p.needed, Some(500));
}

#[test]
fn what_runs_cannot_settle_says_why() {
    let study = testing::study("random", "");
    let base = study.baseline.clone();
    let trials = vec![done(1, base.clone()), done(2, with(&base, "cache_type_k", "q8_0"))];
    let few = Undetermined::FewItems { items: 8, chance: 0.48 };
    let e = plan(&study, &trials, "cache_type_k", Metric::QualityScore, &few).unwrap_err();
    assert!(e.contains("more than 8 items"), "{e}");
    // A constraint that moves K and V together: K never changes alone.
    let study = testing::study("random", r#"constraints = ['cache_type_k == "f16"']"#);
    let e = plan(&study, &trials, "cache_type_k", Metric::DecodeTps, &Undetermined::TooFew)
        .unwrap_err();
    assert!(e.contains("breaks a constraint"), "{e}");
}

#[test]
fn the_share_is_a_fifth_of_a_large_budget_and_none_of_a_small_one() {
    let mut study = testing::study("random", "");
    assert_eq!(reserve(&study), 12);
    study.def.budget.max_trials = 20;
    assert_eq!(reserve(&study), 0);
    study.def.budget.settle_trials = Some(6);
    assert_eq!(reserve(&study), 6);
    study.def.budget.settle_trials = Some(0);
    study.def.budget.max_trials = 100;
    assert_eq!(reserve(&study), 0);
    study.def.budget.settle_trials = None;
    study.def.machines = vec!["gpu-box".into()];
    assert_eq!(reserve(&study), 0, "no single baseline on workers");
}

#[test]
fn notes_that_are_not_a_plan_s_name_no_finding() {
    assert_eq!(asked("the baseline again after 10 trials, to catch drift"), None);
    assert_eq!(asked("settle `threads` on nonsense: x"), None);
    assert_eq!(
        asked("settle `threads` on peak_rss_bytes: the baseline, 1 of 2"),
        Some(ask("threads", Metric::PeakRssBytes, false))
    );
    assert_eq!(
        asked("settle `threads` on decode_tps at the pick: the pick, 1 of 2"),
        Some(ask("threads", Metric::DecodeTps, true))
    );
}

/// A setting open at the pick is settled by the pick interleaved with the
/// pick changed in it alone, to each value still open there, and its
/// notes name the pick.
#[test]
fn a_plan_at_the_pick_interleaves_the_pick_with_each_open_value() {
    let study = testing::study("random", "");
    let base = study.baseline.clone();
    let pick = with(&with(&base, "threads", "12"), "cache_type_k", "q8_0");
    let trials = vec![
        done(1, base.clone()),
        done(2, pick.clone()),
        done(3, with(&base, "cache_type_k", "q4_0")),
        done(4, with(&base, "cache_type_k", "q8_0")),
    ];
    let alternative = |value: &str, versus| findings::Alternative {
        value: value.into(),
        interval: None,
        versus,
        measured: false,
    };
    let row = findings::PickRow {
        setting: "cache_type_k".into(),
        value: "q8_0".into(),
        others: vec![
            alternative("f16", findings::Versus::Within),
            alternative("q4_0", findings::Versus::Open),
        ],
        open: Some(Undetermined::Unreached),
    };
    let p = plan_at_pick(&study, &trials, &pick, &row, Metric::DecodeTps).unwrap();
    assert_eq!(p.target, Target::AtPick(Metric::DecodeTps));
    let configs: Vec<&Settings> = p.runs.iter().map(|r| &r.0).collect();
    assert_eq!(configs.len(), 4, "two rounds of the pick and q4_0: {p:#?}");
    for round in configs.chunks(2) {
        assert_eq!(round[0], &pick);
        assert_eq!(round[1], &with(&pick, "cache_type_k", "q4_0"), "only the open value");
    }
    assert!(p.runs[0].1.contains(FIRST_OF[1]), "{}", p.runs[0].1);
    assert!(
        p.runs.iter().all(|(_, n)| asked(n) == Some(ask("cache_type_k", Metric::DecodeTps, true)))
    );
    // Nothing open: nothing to plan.
    let settled = findings::PickRow { open: None, ..row };
    assert!(plan_at_pick(&study, &trials, &pick, &settled, Metric::DecodeTps).is_err());
}

/// What a user asks to settle is planned where it is open: at the pick
/// from the findings at the pick, at the baseline from what is not
/// determined there; anything else is refused with why.
#[test]
fn a_finding_asked_for_is_planned_where_it_is_open() {
    let study = testing::study("random", "");
    let base = study.baseline.clone();
    let pick = with(&base, "cache_type_k", "q8_0");
    let trials = vec![
        done(1, base.clone()),
        done(2, pick.clone()),
        done(3, with(&base, "cache_type_k", "q4_0")),
        done(4, with(&base, "threads", "8")),
    ];
    let row = findings::PickRow {
        setting: "cache_type_k".into(),
        value: "q8_0".into(),
        others: vec![findings::Alternative {
            value: "q4_0".into(),
            interval: None,
            versus: findings::Versus::Open,
            measured: false,
        }],
        open: Some(Undetermined::Unreached),
    };
    let found = vec![
        Finding::AtPick {
            trial: 2,
            balanced: true,
            settings: pick.clone(),
            metric: Metric::DecodeTps,
            goal: crate::metric::Goal::Max,
            margin: 3.0,
            rows: vec![row],
        },
        Finding::NotDetermined {
            setting: "threads".into(),
            metric: Metric::PeakRssBytes,
            reason: Undetermined::MoreTrials { about: Some(4) },
        },
    ];
    let p = plan_for(&study, &trials, &found, &ask("cache_type_k", Metric::DecodeTps, true));
    let p = p.unwrap();
    assert_eq!(p.runs[0].0, pick);
    assert_eq!(p.runs[1].0, with(&pick, "cache_type_k", "q4_0"));
    let at_base = plan_for(&study, &trials, &found, &ask("threads", Metric::PeakRssBytes, false));
    assert_eq!(at_base.unwrap().runs[0].0, base);
    for (asked, why) in [
        (ask("cache_type_k", Metric::DecodeTps, false), "nothing to settle"),
        (ask("threads", Metric::PeakRssBytes, true), "at the pick: nothing to settle"),
        (ask("cache_type_k", Metric::PeakRssBytes, true), "at the pick: nothing to settle"),
    ] {
        let err = plan_for(&study, &trials, &found, &asked).unwrap_err();
        assert!(err.contains(why), "{asked:?}: {err}");
    }
}

/// A cause that failed once gives no rule (a rule needs two failures):
/// one run of its failure changed in the setting whose value most trials
/// that ran shared, the least suspect, which most likely fails again; and
/// no more than two such runs.
#[test]
fn a_cause_that_failed_once_is_run_again_changed_in_one_setting() {
    let study = testing::study("random", "");
    let base = study.baseline.clone();
    let mut trials = vec![
        done(1, base.clone()),
        done(2, with(&base, "threads", "8")),
        done(3, with(&base, "threads", "2")),
        done(4, with(&base, "batch_size", "512")),
    ];
    let failed = with(&with(&base, "threads", "12"), "cache_type_k", "q4_0");
    trials.push(TrialFacts {
        id: 5,
        settings: failed.clone(),
        failure: Some(("out_of_memory".into(), "no room".into())),
        ..Default::default()
    });
    let found = vec![Finding::Failures {
        cause: "out_of_memory".into(),
        trials: vec![5],
        message: "no room".into(),
        rule: None,
        undecided: vec![],
    }];
    let plans = rule_plans(&study, &trials, &found);
    assert_eq!(plans.len(), 1, "{plans:#?}");
    let (config, note) = &plans[0].runs[0];
    // Every run but one shared its batch size of 2048: that is changed.
    assert_eq!(plans[0].setting, "batch_size");
    assert_eq!(config, &with(&failed, "batch_size", "512"), "the most run other value");
    assert!(note.contains("trial 5 with `batch_size` = 512"), "{note}");
    // Two such runs made: no more.
    for (id, (setting, value)) in [(6, ("batch_size", "512")), (7, ("cache_type_k", "f16"))] {
        let mut t = done(id, with(&failed, setting, value));
        t.role = Some(Role::Settle);
        trials.push(t);
    }
    assert!(rule_plans(&study, &trials, &found).is_empty());
}

fn ask(setting: &str, metric: Metric, at_pick: bool) -> Asked {
    Asked { setting: setting.into(), metric, at_pick }
}

/// On a planted world whose search changes settings only together, the
/// share spent on what is open leaves fewer findings open on the
/// objectives, and its runs are all the baseline or the baseline changed
/// in one setting.
#[tokio::test]
async fn the_share_settles_findings_a_search_left_open() {
    let world = crate::planted::worlds().into_iter().find(|w| w.name == "llama8").unwrap();
    let open_on_objectives = |study: &Study, trials: &[TrialFacts]| {
        let varied: Vec<String> = study.def.space.keys().cloned().collect();
        let (measures, margins) = (study.measures(), &study.def.margins);
        let planner = world.planner();
        let found =
            findings::findings_planned(trials, &varied, &measures, margins, planner.as_ref());
        open(&found, study)
            .into_iter()
            .filter(|(_, m, _)| rank(study, &Target::Effect(*m)) < 3)
            .count()
    };
    let (mut before, mut after) = (0, 0);
    for seed in [1, 2] {
        let mut study = world.study("motpe", seed, 60);
        study.def.budget.settle_trials = Some(0);
        before += open_on_objectives(&study, &world.run(&study, seed).await);
        study.def.budget.settle_trials = Some(20);
        let trials = world.run(&study, seed).await;
        assert!(trials.len() <= 60, "{} trials", trials.len());
        let settling: Vec<&TrialFacts> =
            trials.iter().filter(|t| t.role == Some(Role::Settle)).collect();
        assert!(settling.len() >= 8, "{} settling runs", settling.len());
        // Each the baseline changed in one setting, or (a failure rule's
        // doubt) a failure changed in one.
        let moved = |from: &Settings, to: &Settings| {
            to.iter().filter(|(k, v)| from.get(*k) != Some(v)).count()
        };
        // Or the pick (a trial the search ran) changed in one setting.
        let picks: Vec<&Settings> = trials
            .iter()
            .filter(|t| t.done && t.role != Some(Role::Settle))
            .map(|t| &t.settings)
            .collect();
        for t in settling {
            let near_failure =
                trials.iter().any(|f| f.failure.is_some() && moved(&f.settings, &t.settings) == 1);
            let near_pick = picks.iter().any(|p| moved(p, &t.settings) <= 1);
            assert!(
                moved(&study.baseline, &t.settings) <= 1 || near_failure || near_pick,
                "{:?}",
                t.settings
            );
        }
        after += open_on_objectives(&study, &trials);
    }
    assert!(after < before, "open on the objectives: {before} without the share, {after} with");
}

/// A grid cut short never moved the K cache type or the batch size among
/// the configurations that ran out of memory, so its rule could only say
/// the failures "also had" them. One run of a failure with each changed
/// settles both: the batch size was never the cause, the K cache type is.
#[tokio::test]
async fn a_failure_rule_s_shared_values_are_settled_one_run_each() {
    let w = crate::planted::worlds().into_iter().find(|w| w.name == "llama8").unwrap();
    let mut study = w.study("grid", 1, 80);
    let rule_of = |study: &Study, trials: &[TrialFacts]| {
        let varied: Vec<String> = study.def.space.keys().cloned().collect();
        let found = findings::findings_planned(
            trials,
            &varied,
            &study.measures(),
            &study.def.margins,
            w.planner().as_ref(),
        );
        found.into_iter().find_map(|f| match f {
            Finding::Failures { rule, .. } => rule,
            _ => None,
        })
    };
    let names =
        |cs: &[findings::Condition]| cs.iter().map(|c| c.setting.clone()).collect::<Vec<_>>();
    study.def.budget.settle_trials = Some(0);
    let before = rule_of(&study, &w.run(&study, 1).await).expect("a rule");
    assert_eq!(names(&before.also), ["batch_size", "cache_type_k"], "{before:?}");
    // Each plan's run measured as the share would, until none is left.
    let mut trials = w.run(&study, 1).await;
    let mut rng = <rand::rngs::StdRng as rand::SeedableRng>::seed_from_u64(1);
    let mut runs = 0;
    loop {
        let varied: Vec<String> = study.def.space.keys().cloned().collect();
        let found = findings::findings_planned(
            &trials,
            &varied,
            &study.measures(),
            &study.def.margins,
            w.planner().as_ref(),
        );
        let Some(plan) = rule_plans(&study, &trials, &found).into_iter().next() else { break };
        for (settings, _) in plan.runs {
            let measured = w.measure(&settings, &mut rng);
            trials.push(TrialFacts {
                id: trials.len() as i64 + 1,
                done: measured.is_ok(),
                failure: measured.as_ref().err().map(|c| (c.clone(), c.clone())),
                metrics: measured.unwrap_or_default(),
                settings,
                role: Some(Role::Settle),
                ..Default::default()
            });
            runs += 1;
        }
        assert!(runs <= 4, "{runs} runs");
    }
    let after = rule_of(&study, &trials).expect("a rule");
    assert!(after.also.is_empty(), "{after:?}");
    assert_eq!(names(&after.conditions), ["cache_type_k", "ctx_size", "flash_attn"]);
    // Each doubt took one run: a failure with the one value changed.
    assert_eq!(runs, 2);
}
