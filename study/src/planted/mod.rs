//! Planted worlds: studies whose engine is a formula with noise, run
//! in-process with a strategy's real proposals, so that the findings
//! drawn from them can be checked claim by claim against the truth
//! ([`score`]). Tests and `scripts/bench-findings.sh` use them; nothing
//! here touches an engine.

mod score;
mod search;
mod search_worlds;
mod worlds;

use std::collections::BTreeMap;

use engine_bridge::{Catalog, Settings};
use rand::{Rng, SeedableRng};

pub use score::{Score, score};
pub use search::{Cost, Judge, Reached, search};
pub use search_worlds::search_worlds;
pub use worlds::all as worlds;

use crate::findings::TrialFacts;
use crate::study::{Metric, Study, StudyDef};

/// What a configuration truly does.
#[derive(Debug, Clone, PartialEq)]
pub enum Truth {
    /// Its true (noise-free) metrics.
    Runs(BTreeMap<Metric, f64>),
    /// It fails so, every time.
    Fails(&'static str),
}

/// The measurement noise: relative standard deviations for speeds and
/// memory, an absolute one for rates.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Noise {
    pub speed: f64,
    pub memory: f64,
    pub quality: f64,
    /// Of a KL divergence, in nats.
    pub divergence: f64,
}

/// Something a reader should learn from a world.
#[derive(Debug, Clone, PartialEq)]
pub enum Fact {
    /// The setting moves the metric (at the baseline).
    Effect { setting: String, metric: Metric },
    /// The setting's best value for the metric lies inside its range.
    Peak { setting: String, metric: Metric, best: Vec<String> },
    /// The two settings act together on the metric.
    Interaction { a: String, b: String, metric: Metric },
    /// The value saves speed or memory and costs no quality: a free win.
    Lossless { setting: String, value: String },
    /// The value costs quality.
    Lossy { setting: String, value: String, metric: Metric },
    /// The cause's failures follow a rule over the settings.
    FailureRule { cause: String },
    /// The setting does nothing to the metric.
    NoEffect { setting: String, metric: Metric },
}

/// A planted world.
pub struct World {
    pub name: &'static str,
    /// The study's TOML, without strategy or budget.
    pub study: String,
    pub truth: fn(&Settings) -> Truth,
    pub noise: Noise,
    pub facts: Vec<Fact>,
}

impl World {
    /// The world's study searched by `strategy` for `budget` trials.
    pub fn study(&self, strategy: &str, seed: u64, budget: usize) -> Study {
        let text = format!(
            "strategy = {{ kind = \"{strategy}\", seed = {seed} }}\nbudget = {{ max_trials = {budget} }}\n{}",
            self.study
        );
        StudyDef::from_toml(&text)
            .and_then(|d| d.check(&Catalog::llama_server(), &["m".to_string()]))
            .unwrap_or_else(|e| panic!("world {}: {e}", self.name))
    }

    /// One measurement of `settings`: the truth with noise.
    pub fn measure(
        &self,
        settings: &Settings,
        rng: &mut impl Rng,
    ) -> Result<BTreeMap<Metric, f64>, String> {
        match (self.truth)(settings) {
            Truth::Fails(cause) => Err(cause.to_string()),
            Truth::Runs(metrics) => Ok(metrics
                .into_iter()
                .map(|(m, v)| {
                    let z = crate::strategy::normal(rng);
                    let noisy = match m {
                        m if m.is_rate() => (v + z * self.noise.quality).clamp(0.0, 1.0),
                        Metric::KldMean | Metric::KldP99 => {
                            (v + z * self.noise.divergence).max(0.0)
                        }
                        m if m.name().ends_with("_bytes") => v * (z * self.noise.memory).exp(),
                        _ => v * (z * self.noise.speed).exp(),
                    };
                    (m, noisy)
                })
                .collect()),
        }
    }

    /// Runs `study` as the runner does: the baseline first, then the
    /// strategy's proposals until the budget or the strategy runs out.
    pub async fn run(&self, study: &Study, seed: u64) -> Vec<TrialFacts> {
        let strategy = crate::strategy::for_study(study, None);
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5EED);
        let budget = study.def.budget.max_trials as usize;
        let mut history = Vec::new();
        let mut trials: Vec<TrialFacts> = Vec::new();
        let mut baseline_metrics = None;
        let mut next = Some(study.baseline.clone());
        while let Some(config) = next.take() {
            let mut settings = study.baseline.clone();
            settings.extend(config.clone());
            let measured = self.measure(&settings, &mut rng);
            let metrics = measured.as_ref().ok();
            if trials.is_empty() {
                baseline_metrics = metrics.cloned();
            }
            history.push(study.observe(config, metrics, baseline_metrics.as_ref()));
            trials.push(TrialFacts {
                id: trials.len() as i64 + 1,
                settings,
                done: measured.is_ok(),
                failure: measured.as_ref().err().map(|c| (c.clone(), format!("planted {c}"))),
                metrics: metrics.cloned().unwrap_or_default(),
                role: Some(if trials.is_empty() { "baseline" } else { "search" }.to_string()),
                ..Default::default()
            });
            if trials.len() < budget {
                next = strategy.propose(study, &history).await.map(|p| p.config);
            }
        }
        crate::findings::mark_missed(&study.def, &mut trials);
        trials
    }
}
