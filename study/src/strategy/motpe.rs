//! Multi-objective model-based search: the optimizer crate's MOTPE sampler
//! (Pareto-sorted good and bad trials, a Parzen estimator of each, the
//! candidate with the best ratio), one setting at a time.

use async_trait::async_trait;
use engine_bridge::Settings;
use optimizer::distribution::{
    CategoricalDistribution, Distribution, FloatDistribution, IntDistribution,
};
use optimizer::multi_objective::{MultiObjectiveSampler, MultiObjectiveTrial};
use optimizer::param::ParamValue;
use optimizer::parameter::ParamId;
use optimizer::sampler::motpe::MotpeSampler;
use optimizer::{Direction, TrialState};

use super::{Proposal, Strategy, rng_for, untried_random};
use crate::space::{Domain, Param, fmt_float};
use crate::study::{Goal, Observation, Study};

pub struct Motpe {
    pub seed: u64,
    /// Random trials before the model takes over; by default one more than
    /// twice the number of settings, at least 5 and at most 11.
    pub startup: Option<usize>,
}

fn distribution(domain: &Domain) -> Distribution {
    match domain {
        Domain::Values(v) => {
            Distribution::Categorical(CategoricalDistribution { n_choices: v.len() })
        }
        Domain::Int { min, max, step, log } => Distribution::Int(IntDistribution {
            low: *min,
            high: *max,
            log_scale: *log,
            step: (!log).then_some(*step),
        }),
        Domain::Float { min, max, log, .. } => Distribution::Float(FloatDistribution {
            low: *min,
            high: *max,
            log_scale: *log,
            step: None,
        }),
    }
}

fn encode(domain: &Domain, value: &str) -> Option<ParamValue> {
    match domain {
        Domain::Values(v) => v.iter().position(|x| x == value).map(ParamValue::Categorical),
        Domain::Int { .. } => value.parse().ok().map(ParamValue::Int),
        Domain::Float { .. } => value.parse().ok().map(ParamValue::Float),
    }
}

fn decode(domain: &Domain, value: ParamValue) -> String {
    match (domain, value) {
        (Domain::Values(v), ParamValue::Categorical(i)) => v[i.min(v.len() - 1)].clone(),
        // Log ranges stay on their doublings.
        (Domain::Int { log: true, .. }, ParamValue::Int(i)) => {
            let distance = |g: &String| {
                g.parse::<f64>().map_or(f64::MAX, |g| (g.ln() - (i.max(1) as f64).ln()).abs())
            };
            domain
                .grid()
                .into_iter()
                .min_by(|a, b| distance(a).total_cmp(&distance(b)))
                .unwrap_or(i.to_string())
        }
        (_, ParamValue::Int(i)) => i.to_string(),
        (_, ParamValue::Float(f)) => fmt_float(f),
        (_, ParamValue::Categorical(i)) => i.to_string(),
    }
}

/// The history as the sampler sees one setting: each trial holding that
/// setting alone, so settings with equal domains are never confused.
fn history_of(param: &Param, history: &[Observation]) -> Vec<MultiObjectiveTrial> {
    let dist = distribution(&param.domain);
    let id = ParamId::new();
    history
        .iter()
        .enumerate()
        .filter_map(|(n, o)| {
            let values = o.values.clone()?;
            let value = encode(&param.domain, o.config.get(&param.name)?)?;
            Some(MultiObjectiveTrial {
                id: n as u64,
                params: [(id, value)].into(),
                distributions: [(id, dist.clone())].into(),
                param_labels: Default::default(),
                values,
                state: TrialState::Complete,
                user_attrs: Default::default(),
                constraints: vec![if o.feasible { 0.0 } else { 1.0 }],
            })
        })
        .collect()
}

#[async_trait]
impl Strategy for Motpe {
    async fn propose(&self, study: &Study, history: &[Observation]) -> Option<Proposal> {
        let mut rng = rng_for(self.seed, history);
        let measured = history.iter().filter(|o| o.values.is_some()).count();
        let startup = self.startup.unwrap_or((2 * study.space.params.len() + 1).clamp(5, 11));
        if measured < startup {
            let config = untried_random(study, history, &mut rng)?;
            return Some(Proposal {
                config,
                note: format!("model warm-up: random draw {} of {startup}", measured + 1),
            });
        }
        let directions: Vec<Direction> = study
            .objectives
            .iter()
            .map(|t| match t.goal {
                Goal::Max => Direction::Maximize,
                Goal::Min => Direction::Minimize,
            })
            .collect();
        let histories: Vec<_> = study.space.params.iter().map(|p| history_of(p, history)).collect();
        let seed = self.seed ^ (history.len() as u64).wrapping_mul(0x2545_F491_4F6C_DD1D);
        let sampler = MotpeSampler::builder().n_startup_trials(0).seed(seed).build();
        for attempt in 0..64u64 {
            let mut config: Settings = study.space.fixed.clone();
            for (p, h) in study.space.params.iter().zip(&histories) {
                let value = sampler.sample(
                    &distribution(&p.domain),
                    history.len() as u64 + attempt,
                    h,
                    &directions,
                );
                config.insert(p.name.clone(), decode(&p.domain, value));
            }
            if study.space.allows(&config) && !Study::tried(history, &config) {
                return Some(Proposal {
                    config,
                    note: "MOTPE: most promising of the sampled candidates".into(),
                });
            }
        }
        let config = untried_random(study, history, &mut rng)?;
        Some(Proposal {
            config,
            note: "MOTPE proposed only tried configurations; a random draw".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use crate::pareto;

    #[tokio::test]
    async fn motpe_finds_a_good_front() {
        let study = testing::study("motpe", "");
        let history = testing::run(&study, 40).await;
        assert_eq!(history.len(), 40);
        let best = study.best(&history).unwrap().values.as_ref().unwrap()[0];
        assert!(best > 40.0, "{best}");
        let points: Vec<Vec<f64>> = history.iter().filter_map(|o| o.values.clone()).collect();
        let goals: Vec<_> = study.objectives.iter().map(|t| t.goal).collect();
        assert!(pareto::front(&points, &goals).len() >= 2);
    }
}
