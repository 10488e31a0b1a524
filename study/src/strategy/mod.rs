//! Search strategies behind one trait. A strategy is rebuilt from the
//! stored history before every proposal, so a study resumed after a restart
//! continues exactly where it was.

mod bayes;
mod bisect;
mod grid;
mod llm;
mod motpe;
mod random;
mod two_phase;

use async_trait::async_trait;
use engine_bridge::Settings;

pub(crate) use bayes::normal;
pub use bayes::{Bayes, GpuFillFn};
pub use bisect::Bisect;
pub use grid::Grid;
pub use llm::{Llm, chat};
pub use motpe::Motpe;
pub use random::Random;
pub use two_phase::TwoPhase;

use crate::study::{Endpoint, Observation, StrategyKind, Study};

/// The next configuration, and why it was picked.
#[derive(Debug, Clone, PartialEq)]
pub struct Proposal {
    pub config: Settings,
    pub note: String,
}

/// Picks the next configuration from what was tried.
#[async_trait]
pub trait Strategy: Send + Sync {
    /// `None` when the strategy has nothing left to try.
    async fn propose(&self, study: &Study, history: &[Observation]) -> Option<Proposal>;
}

/// The strategy a study asks for; `endpoint` is the configured endpoint
/// the study's `strategy.endpoint` names, if any (for `llm`); `plan` how
/// full the study's planner predicts a configuration leaves the GPUs,
/// where it can tell (for `bayes`).
pub fn for_study(
    study: &Study,
    endpoint: Option<Endpoint>,
    plan: Option<GpuFillFn>,
) -> Box<dyn Strategy> {
    let seed = study.def.strategy.seed;
    match study.def.strategy.kind {
        StrategyKind::Grid => Box::new(Grid),
        StrategyKind::Random => Box::new(Random { seed }),
        StrategyKind::TwoPhase => Box::new(TwoPhase { seed }),
        StrategyKind::Motpe => Box::new(Motpe { seed, startup: None }),
        StrategyKind::Bayes => Box::new(Bayes::planned(seed, plan)),
        StrategyKind::Bisect => Box::new(Bisect),
        StrategyKind::Llm => Box::new(Llm { endpoint, seed }),
    }
}

/// An untried configuration the constraints allow, drawn at random; the
/// grid's first such one when random draws keep missing.
pub(crate) fn untried_random(
    study: &Study,
    history: &[Observation],
    rng: &mut impl rand::Rng,
) -> Option<Settings> {
    let fresh = |c: &Settings| study.space.allows(c) && !Study::tried(history, c);
    (0..2000)
        .map(|_| study.space.sample(rng))
        .find(fresh)
        .or_else(|| study.space.grid().find(fresh))
}

/// A generator seeded by the study's seed and the history's length, so a
/// resumed study proposes what the uninterrupted one would have.
pub(crate) fn rng_for(seed: u64, history: &[Observation]) -> rand::rngs::StdRng {
    use rand::SeedableRng;
    rand::rngs::StdRng::seed_from_u64(
        seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ history.len() as u64,
    )
}

#[cfg(test)]
pub(crate) mod testing {
    //! Synthetic studies with known optima, no engine needed.

    use std::collections::BTreeMap;

    use engine_bridge::Catalog;

    use super::*;
    use crate::study::{Metric, StudyDef};

    /// A study over threads (1..16) and batch size (64..2048, log) with a
    /// cache-type switch: decode peaks at threads 12, batch 512, q8_0, and
    /// memory falls with the quantized cache.
    pub fn study(strategy: &str, extra: &str) -> Study {
        let text = format!(
            r#"
name = "synthetic"
profile = "p"
model = "m"
strategy = {{ kind = "{strategy}", seed = 7 }}
budget = {{ max_trials = 60 }}
{extra}
[baseline]
threads = 4
batch_size = 2048
cache_type_k = "f16"
[space]
threads = {{ min = 1, max = 16, step = 1 }}
batch_size = {{ min = 64, max = 2048, log = true }}
cache_type_k = ["f16", "q8_0", "q4_0"]
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#
        );
        StudyDef::from_toml(&text).unwrap().check(&Catalog::llama_server(), &["m".into()]).unwrap()
    }

    pub fn metrics(c: &Settings) -> BTreeMap<Metric, f64> {
        let t: f64 = c["threads"].parse().unwrap();
        let b: f64 = c["batch_size"].parse().unwrap();
        let (bonus, mem) = match c["cache_type_k"].as_str() {
            "f16" => (0.0, 8.0),
            "q8_0" => (3.0, 6.0),
            _ => (-2.0, 5.0),
        };
        let tps = 40.0 - (t - 12.0).powi(2) * 0.5 - (b.log2() - 9.0).powi(2) * 2.0 + bonus;
        [(Metric::DecodeTps, tps), (Metric::PeakRssBytes, mem + b / 1024.0)].into()
    }

    /// Runs a strategy for `n` trials on the synthetic objective.
    pub async fn run(study: &Study, n: usize) -> Vec<Observation> {
        let strategy = for_study(study, None, None);
        // As the runner does: the baseline first.
        let base = metrics(&full(study, &study.baseline));
        let mut history = vec![study.observe(study.baseline.clone(), Some(&base), Some(&base))];
        let baseline_metrics = Some(base);
        for _ in 1..n {
            let Some(p) = strategy.propose(study, &history).await else { break };
            assert!(study.space.check(&p.config).is_ok() || p.config == study.baseline, "{p:?}");
            assert!(!Study::tried(&history, &p.config), "proposed twice: {p:?}");
            let m = metrics(&full(study, &p.config));
            history.push(study.observe(p.config, Some(&m), baseline_metrics.as_ref()));
        }
        history
    }

    /// A configuration with every unset varied setting at its first value.
    pub fn full(study: &Study, c: &Settings) -> Settings {
        let mut out = c.clone();
        for p in &study.space.params {
            out.entry(p.name.clone()).or_insert_with(|| p.domain.grid()[0].clone());
        }
        out
    }
}
