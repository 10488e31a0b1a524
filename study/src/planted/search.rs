//! How well a search does on a planted world: the trials, and the modelled
//! hours, until the configurations it tried reach a share of the true
//! Pareto front's hypervolume (true, noise-free values, so a lucky noisy
//! measurement earns nothing).
//!
//! The hours model a large model's cost: every trial runs its probes
//! ([`Cost::probe_minutes`]), and a trial whose load-time settings differ
//! from the trial before it first reloads the engine
//! ([`Cost::load_minutes`]); request-time settings keep the engine.

use std::collections::BTreeMap;

use engine_bridge::{Catalog, Settings};
use rand::SeedableRng;

use super::{Truth, World};
use crate::study::{Goal, Measure, Metric, Study, Target};

/// What a trial costs, in minutes.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cost {
    pub load_minutes: f64,
    pub probe_minutes: f64,
}

impl Default for Cost {
    fn default() -> Self {
        Cost { load_minutes: 5.0, probe_minutes: 1.0 }
    }
}

/// The world's true front, and the share of it a set of trials reaches.
pub struct Judge {
    measures: Vec<Measure>,
    goals: Vec<Goal>,
    /// The objectives and the bounds, each configuration's true values
    /// checked against their limits.
    targets: Vec<Target>,
    /// The baseline's true metrics, for limits set relative to it.
    baseline: Option<BTreeMap<Metric, f64>>,
    reference: Vec<f64>,
    truth: f64,
    world: fn(&Settings) -> Truth,
    catalog: Catalog,
    cost: Cost,
}

impl Judge {
    /// Runs the truth over the world's whole grid. A configuration that
    /// breaks a bound (of an objective or another metric) counts as one
    /// that fails: the front is of those within every bound.
    pub fn new(world: &World, study: &Study, cost: Cost) -> Self {
        let mut judge = Judge {
            measures: study.objectives.iter().map(|t| t.measure.clone()).collect(),
            goals: study.objectives.iter().map(|t| t.goal).collect(),
            targets: study.objectives.iter().chain(&study.bounds).cloned().collect(),
            baseline: None,
            reference: vec![],
            truth: 0.0,
            world: world.truth,
            catalog: (world.catalog)(),
            cost,
        };
        judge.baseline = match (world.truth)(&study.baseline) {
            Truth::Runs(m) => Some(m),
            Truth::Fails(_) => None,
        };
        let points: Vec<Vec<f64>> =
            study.space.grid().filter_map(|c| judge.values(study, &c)).collect();
        let goals = &judge.goals;
        // A reference point 5 % of each objective's range past its worst.
        let reference: Vec<f64> = (0..judge.measures.len())
            .map(|j| {
                let col = || points.iter().map(|p| goals[j].oriented(p[j]));
                let (lo, hi) = (col().fold(f64::MAX, f64::min), col().fold(f64::MIN, f64::max));
                goals[j].oriented(lo - 0.05 * (hi - lo).max(1e-9))
            })
            .collect();
        judge.truth = crate::pareto::hypervolume(&points, goals, &reference);
        judge.reference = reference;
        judge
    }

    /// The true objective values of a configuration; `None` if it fails
    /// or breaks a bound.
    pub fn values(&self, study: &Study, config: &Settings) -> Option<Vec<f64>> {
        let settings = full(study, config);
        let Truth::Runs(metrics) = (self.world)(&settings) else { return None };
        let within = self.targets.iter().all(|t| {
            let limit_of = |m: &BTreeMap<Metric, f64>| t.measure.value(m, &study.baseline);
            t.measure
                .value(&metrics, &settings)
                .is_some_and(|v| t.within(v, self.baseline.as_ref().and_then(limit_of)))
        });
        within.then(|| self.measures.iter().map(|k| k.value(&metrics, &settings)).collect())?
    }

    /// The share of the true hypervolume the points reach.
    pub fn share(&self, points: &[Vec<f64>]) -> f64 {
        if points.is_empty() {
            return 0.0;
        }
        crate::pareto::hypervolume(points, &self.goals, &self.reference) / self.truth
    }

    /// Minutes a trial of `config` costs after a trial of `previous`.
    pub fn minutes(&self, previous: Option<&Settings>, config: &Settings) -> f64 {
        let reload =
            previous.is_none_or(|p| self.catalog.load_time(p) != self.catalog.load_time(config));
        self.cost.probe_minutes + if reload { self.cost.load_minutes } else { 0.0 }
    }
}

/// A configuration with the baseline's values where it leaves a setting out.
fn full(study: &Study, c: &Settings) -> Settings {
    let mut out = study.baseline.clone();
    out.extend(c.iter().map(|(k, v)| (k.clone(), v.clone())));
    out
}

/// What one search reached.
#[derive(Debug, Clone, PartialEq)]
pub struct Reached {
    /// Trials (the baseline included) until the share was reached.
    pub trials: Option<usize>,
    /// Modelled hours until then.
    pub hours: Option<f64>,
    /// The share reached at the end.
    pub share: f64,
}

/// Runs `strategy` on `world` (the baseline first, as the runner does)
/// until its trials reach `target` of the true hypervolume or `max` trials.
pub async fn search(
    world: &World,
    judge: &Judge,
    strategy: &str,
    seed: u64,
    target: f64,
    max: usize,
) -> Reached {
    let study = world.study(strategy, seed, max);
    let chosen = crate::strategy::for_study(&study, None, world.gpu_fill());
    let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5EED);
    let mut history = Vec::new();
    let mut points = Vec::new();
    let mut baseline: Option<BTreeMap<Metric, f64>> = None;
    let (mut minutes, mut previous) = (0.0, None::<Settings>);
    let mut next = Some(study.baseline.clone());
    while let Some(config) = next.take() {
        let settings = full(&study, &config);
        minutes += judge.minutes(previous.as_ref(), &settings);
        previous = Some(settings.clone());
        let result = world.measure_in_search(&settings, history.len(), &mut rng);
        let failure = World::failure(&result);
        let measured = result.ok();
        if history.is_empty() {
            baseline = measured.clone();
        }
        if let Some(v) = judge.values(&study, &config) {
            points.push(v);
        }
        let mut seen = study.observe(config, measured.as_ref(), baseline.as_ref());
        seen.failure = failure;
        history.push(seen);
        let share = judge.share(&points);
        if share >= target {
            return Reached { trials: Some(history.len()), hours: Some(minutes / 60.0), share };
        }
        if history.len() < max {
            next = chosen.propose(&study, &history).await.map(|p| p.config);
        }
    }
    Reached { trials: None, hours: None, share: judge.share(&points) }
}
