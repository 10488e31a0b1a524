//! Effects at the pick on a small planted grid where flash attention
//! speeds decode only with more than two threads: at the baseline (two
//! threads) it does nothing, at the pick (four) it is needed.

use rand::{Rng, SeedableRng};
use tunebook_domain::Role;

use super::*;
use crate::findings::{TrialFacts, findings, markdown};
use crate::metric::Measure;

/// Threads × flash attention × context × batch size, twice each; decode
/// measured within about 1 %.
fn grid(reps: usize) -> Vec<TrialFacts> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut out = Vec::new();
    for threads in ["2", "4", "8"] {
        for fa in ["off", "on"] {
            for ctx in ["4096", "32768"] {
                for batch in ["512", "256"] {
                    for _ in 0..reps {
                        let settings: Settings = [
                            ("threads", threads),
                            ("flash_attn", fa),
                            ("ctx_size", ctx),
                            ("batch_size", batch),
                        ]
                        .map(|(a, b)| (a.to_string(), b.to_string()))
                        .into();
                        let t = match threads {
                            "2" => 0.6,
                            "4" => 1.0,
                            _ => 0.9,
                        };
                        let flash = if fa == "on" && threads != "2" { 1.15 } else { 1.0 };
                        let long = if ctx == "32768" { 0.7 } else { 1.0 };
                        let noise = 1.0 + rng.random_range(-0.01..0.01);
                        out.push(TrialFacts {
                            id: out.len() as i64 + 1,
                            role: out.is_empty().then_some(Role::Baseline),
                            settings,
                            done: true,
                            metrics: [(Metric::DecodeTps, 10.0 * t * flash * long * noise)].into(),
                            ..Default::default()
                        });
                    }
                }
            }
        }
    }
    out
}

fn varied() -> Vec<String> {
    ["threads", "flash_attn", "ctx_size", "batch_size"].map(String::from).to_vec()
}

fn rows(found: &[Finding]) -> (Settings, Vec<PickRow>) {
    found
        .iter()
        .find_map(|f| match f {
            Finding::AtPick {
                settings, rows, metric: Metric::DecodeTps, balanced: false, ..
            } => Some((settings.clone(), rows.clone())),
            _ => None,
        })
        .expect("a finding at the pick")
}

fn row<'a>(rows: &'a [PickRow], setting: &str) -> &'a PickRow {
    rows.iter().find(|r| r.setting == setting).expect(setting)
}

#[test]
fn a_setting_the_baseline_could_spare_is_needed_at_the_pick() {
    let trials = grid(2);
    let objectives = [(Measure::Metric(Metric::DecodeTps), Goal::Max)];
    let found = findings(&trials, &varied(), &objectives);
    let (pick, rows) = rows(&found);
    assert_eq!(pick["threads"], "4");
    assert_eq!(pick["flash_attn"], "on");
    assert_eq!(pick["ctx_size"], "4096");
    let versus = |setting: &str| -> Vec<Versus> {
        row(&rows, setting).others.iter().map(|o| o.versus).collect()
    };
    // At two threads flash attention does nothing; at the pick's four,
    // turning it off costs about 13 %.
    assert_eq!(versus("flash_attn"), [Versus::Worse]);
    let off = row(&rows, "flash_attn").others[0].interval.unwrap();
    assert!(off.lo < 1.0 / 1.15 && off.hi > 1.0 / 1.15 && off.hi < 0.97, "{off:?}");
    assert_eq!(versus("threads"), [Versus::Worse, Versus::Worse]);
    assert_eq!(versus("ctx_size"), [Versus::Worse]);
    assert_eq!(versus("batch_size"), [Versus::Within], "batch size moves nothing");
    let text = markdown(&found);
    assert!(text.contains("## At the pick"), "{text}");
    assert!(text.contains("keep `threads` = 4 (2 gives 0.52×"), "{text}");
    assert!(text.contains("`flash_attn` = on (off gives 0.87×"), "{text}");
    assert!(text.contains("free within ±3 %: `batch_size`"), "{text}");
}

#[test]
fn what_few_trials_leave_open_at_the_pick_says_how_to_settle_it() {
    // One run of each configuration, with more noise than the grid
    // above: the pick's neighbours are within reach but not decided.
    let mut trials = grid(1);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    for t in &mut trials {
        let v = t.metrics[&Metric::DecodeTps] * (1.0 + rng.random_range(-0.08..0.08));
        t.metrics.insert(Metric::DecodeTps, v);
    }
    let objectives = [(Measure::Metric(Metric::DecodeTps), Goal::Max)];
    let found = findings(&trials, &varied(), &objectives);
    let (pick, rows) = rows(&found);
    let batch = row(&rows, "batch_size");
    let other = if pick["batch_size"] == "512" { "256" } else { "512" };
    assert_eq!(batch.open_values(), [other], "{rows:#?}");
    assert!(
        matches!(batch.open, Some(Undetermined::MoreTrials { about: Some(_) })),
        "{:?}",
        batch.open
    );
    assert!(markdown(&found).contains("not determined: `batch_size`"));
}

#[test]
fn no_finding_at_a_pick_that_is_the_baseline() {
    // Decode best at the baseline: every finding at the pick would repeat
    // the baseline's.
    let mut trials = grid(2);
    for t in &mut trials {
        let s = &t.settings;
        let at_base = s["threads"] == "2" && s["flash_attn"] == "off" && s["ctx_size"] == "4096";
        if at_base && s["batch_size"] == "512" {
            t.metrics.insert(Metric::DecodeTps, 100.0);
        }
    }
    let objectives = [(Measure::Metric(Metric::DecodeTps), Goal::Max)];
    let found = findings(&trials, &varied(), &objectives);
    assert!(!found.iter().any(|f| matches!(f, Finding::AtPick { .. })));
}
