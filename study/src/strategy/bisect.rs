//! Bisection for a monotone goal: the largest context that still fits and
//! recalls, the fewest GPU layers that still reach a decode target. The
//! study's first objective is a setting (`setting.ctx_size`, `max`); the
//! bounds say what must hold. Every other setting stays at the baseline.
//!
//! The ends are tried first: if the most ambitious value holds, it is the
//! answer in one trial; if the least ambitious fails, nothing will. Then the
//! gap between the best value known to hold and the nearest known to fail
//! is halved until they are neighbours: about log₂ of the values in all.
//! The answer is then measured once more before it is named: a value that
//! held by luck (a bound met within noise) fails the second time, and the
//! search goes on below it. It assumes what it searches for is monotone
//! (more context never fits better); measured noise that breaks that
//! still ends at a boundary.

use async_trait::async_trait;
use engine_bridge::Settings;

use super::{Proposal, Strategy};
use crate::study::{Goal, Measure, Observation, Study};

pub struct Bisect;

/// The setting a bisection moves and which way is better; `None` when the
/// study's first objective is not a varied setting.
pub fn axis(study: &Study) -> Option<(&str, Goal)> {
    let first = study.objectives.first()?;
    let Measure::Setting(name) = &first.measure else { return None };
    study.space.param(name).map(|_| (name.as_str(), first.goal))
}

/// The values to bisect, least ambitious first, each as the baseline with
/// the setting changed (those the constraints allow).
fn ladder(study: &Study, name: &str, goal: Goal) -> Vec<Settings> {
    let param = study.space.param(name).expect("the axis is varied");
    let mut values: Vec<(f64, String)> = param
        .domain
        .grid()
        .into_iter()
        .filter_map(|v| Some((v.trim().parse::<f64>().ok()?, v)))
        .collect();
    values.sort_by(|a, b| goal.oriented(a.0).total_cmp(&goal.oriented(b.0)));
    values
        .into_iter()
        .map(|(_, v)| {
            let mut c = study.space.complete(study.baseline.clone());
            c.insert(name.to_string(), v);
            c
        })
        .filter(|c| study.space.allows(c))
        .collect()
}

#[async_trait]
impl Strategy for Bisect {
    async fn propose(&self, study: &Study, history: &[Observation]) -> Option<Proposal> {
        let (name, goal) = axis(study)?;
        let rungs = ladder(study, name, goal);
        // A value holds while its latest measurement did.
        let held = |i: usize| -> Option<bool> {
            history.iter().rev().find(|o| o.config == rungs[i]).map(|o| o.feasible)
        };
        let runs = |i: usize| history.iter().filter(|o| o.config == rungs[i]).count();
        let propose = |i: usize, why: String| {
            Some(Proposal {
                config: rungs[i].clone(),
                note: format!("bisection on {name}: {} = {}, {why}", name, rungs[i][name]),
            })
        };
        // The answer `i`, measured again unless it was.
        let confirm = |i: usize| {
            (runs(i) < 2).then(|| propose(i, "measured again before it is named".into())).flatten()
        };
        let top = rungs.len().checked_sub(1)?;
        match held(top) {
            None => return propose(top, "the most ambitious end first".into()),
            Some(true) => return confirm(top),
            Some(false) => {}
        }
        match held(0) {
            None => return propose(0, "the least ambitious end".into()),
            Some(false) => return None,
            Some(true) => {}
        }
        // The most ambitious value known to hold, and the nearest beyond it
        // known to fail.
        let good = (0..=top).rev().find(|&i| held(i) == Some(true))?;
        let bad = (good + 1..=top).find(|&i| held(i) == Some(false))?;
        if bad - good <= 1 {
            return confirm(good);
        }
        let mid = good + (bad - good) / 2;
        let why =
            format!("between {} (holds) and {} (does not)", rungs[good][name], rungs[bad][name]);
        propose(mid, why)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use engine_bridge::Catalog;

    use crate::study::{Metric, Observation, Study, StudyDef};

    fn study(space: &str, baseline: &str, objectives: &str) -> Study {
        let text = format!(
            "name = \"b\"\nprofile = \"p\"\nmodel = \"m\"\nstrategy = {{ kind = \"bisect\" }}\n\
             [space]\n{space}\n[baseline]\n{baseline}\n{objectives}"
        );
        StudyDef::from_toml(&text).unwrap().check(&Catalog::llama_server(), &["m".into()]).unwrap()
    }

    /// Runs the bisection on `world` (`None`: the configuration fails),
    /// the baseline first as the runner does; returns the trials and the
    /// most ambitious configuration that held.
    async fn run(
        study: &Study,
        world: impl Fn(f64) -> Option<f64>,
        name: &str,
    ) -> (usize, Option<f64>) {
        let strategy = super::super::for_study(study, None, None);
        let observe = |c: &engine_bridge::Settings, base: Option<&BTreeMap<Metric, f64>>| {
            let x: f64 = c[name].parse().unwrap();
            let m = world(x).map(|v| BTreeMap::from([(Metric::DecodeTps, v)]));
            study.observe(c.clone(), m.as_ref(), base)
        };
        let first = observe(&study.baseline, None);
        let base = world(study.baseline[name].parse().unwrap())
            .map(|v| BTreeMap::from([(Metric::DecodeTps, v)]));
        let mut history: Vec<Observation> = vec![first];
        while let Some(p) = strategy.propose(study, &history).await {
            let runs = history[1..].iter().filter(|o| o.config == p.config).count();
            assert!(runs < 2, "proposed a third time: {p:?}");
            history.push(observe(&p.config, base.as_ref()));
            assert!(history.len() < 40, "the bisection does not end");
        }
        let (_, goal) = super::axis(study).unwrap();
        let best = history
            .iter()
            .filter(|o| o.feasible)
            .map(|o| o.config[name].parse::<f64>().unwrap())
            .max_by(|a, b| goal.oriented(*a).total_cmp(&goal.oriented(*b)));
        (history.len(), best)
    }

    #[tokio::test]
    async fn the_largest_context_that_fits_in_about_log2_trials() {
        // 128 sizes; out of memory above 45,000 tokens.
        let s = study(
            "ctx_size = { min = 1024, max = 131072, step = 1024 }",
            "ctx_size = 4096",
            "[[objectives]]\nmetric = \"setting.ctx_size\"\n",
        );
        let (trials, best) = run(&s, |ctx| (ctx <= 45_000.0).then_some(20.0), "ctx_size").await;
        assert_eq!(best, Some(44_032.0));
        assert!(trials <= 1 + 2 + 7 + 1, "{trials} trials for 128 values");
    }

    #[tokio::test]
    async fn the_fewest_gpu_layers_that_reach_a_decode_target() {
        let s = study(
            "n_gpu_layers = { min = 0, max = 40, step = 1 }",
            "n_gpu_layers = 0",
            "[[objectives]]\nmetric = \"setting.n_gpu_layers\"\ngoal = \"min\"\n\
             [[bounds]]\nmetric = \"decode_tps\"\nmin = \"30\"\n",
        );
        let (trials, best) = run(&s, |layers| Some(10.0 + layers), "n_gpu_layers").await;
        assert_eq!(best, Some(20.0));
        assert!(trials <= 1 + 2 + 6 + 1, "{trials} trials for 41 values");
    }

    #[tokio::test]
    async fn the_ends_settle_it_when_everything_or_nothing_holds() {
        let s = study(
            "ctx_size = { min = 1024, max = 131072, step = 1024 }",
            "ctx_size = 4096",
            "[[objectives]]\nmetric = \"setting.ctx_size\"\n",
        );
        let (trials, best) = run(&s, |_| Some(20.0), "ctx_size").await;
        assert_eq!((trials, best), (3, Some(131_072.0)), "the largest holds, twice");
        let (trials, best) = run(&s, |_| None, "ctx_size").await;
        assert_eq!((trials, best), (3, None), "the smallest fails too: nothing holds");
    }

    #[tokio::test]
    async fn a_value_that_held_by_luck_fails_its_second_run_and_the_search_goes_on_below() {
        // Up to 40 layers hold; 41 to 45 hold only on their first run (a
        // bound met within noise); above 45 nothing holds.
        let s = study(
            "n_gpu_layers = { min = 0, max = 60, step = 1 }",
            "n_gpu_layers = 0",
            "[[objectives]]\nmetric = \"setting.n_gpu_layers\"\n",
        );
        let seen = std::sync::Mutex::new(std::collections::BTreeSet::new());
        let world = |layers: f64| {
            let first = seen.lock().unwrap().insert(layers.to_bits());
            (layers <= 40.0 || (layers <= 45.0 && first)).then_some(20.0)
        };
        let strategy = super::super::for_study(&s, None, None);
        let measure = |c: &engine_bridge::Settings| {
            world(c["n_gpu_layers"].parse().unwrap())
                .map(|v| BTreeMap::from([(Metric::DecodeTps, v)]))
        };
        let mut history = vec![s.observe(s.baseline.clone(), measure(&s.baseline).as_ref(), None)];
        while let Some(p) = strategy.propose(&s, &history).await {
            let m = measure(&p.config);
            history.push(s.observe(p.config, m.as_ref(), None));
            assert!(history.len() < 40, "the bisection does not end");
        }
        let last = history.last().unwrap();
        assert_eq!(last.config["n_gpu_layers"], "40", "ends re-measuring the answer");
        assert!(last.feasible);
        let runs = history.iter().filter(|o| o.config["n_gpu_layers"] == "40").count();
        assert_eq!(runs, 2);
    }
}
