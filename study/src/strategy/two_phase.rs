//! The seeds' search: first each setting alone from the baseline (low,
//! middle and high values), then the best value of each setting together,
//! then perturbations around the best configuration so far.

use async_trait::async_trait;
use engine_bridge::Settings;
use rand::seq::{IndexedRandom, SliceRandom};

use super::{Proposal, Strategy, rng_for, untried_random};
use crate::study::{Observation, Study};

pub struct TwoPhase {
    pub seed: u64,
}

#[async_trait]
impl Strategy for TwoPhase {
    async fn propose(&self, study: &Study, history: &[Observation]) -> Option<Proposal> {
        let fresh = |c: &Settings| study.space.allows(c) && !Study::tried(history, c);
        let with = |base: &Settings, name: &str, value: &str| {
            let mut c = base.clone();
            c.insert(name.to_string(), value.to_string());
            c
        };
        // Phase 1: one axis at a time.
        for p in &study.space.params {
            for v in p.domain.span() {
                let c = with(&study.baseline, &p.name, &v);
                if fresh(&c) {
                    return Some(Proposal {
                        config: c,
                        note: format!("phase 1: {} = {v} alone", p.name),
                    });
                }
            }
        }
        // Phase 2a: each axis's winner, together.
        let goal = study.objectives.first()?.goal;
        let score = |o: &Observation| {
            Some(goal.oriented(*o.values.as_ref()?.first()?)).filter(|_| o.feasible)
        };
        let mut combined = study.baseline.clone();
        for p in &study.space.params {
            let alone = history.iter().filter(|o| {
                o.config.iter().all(|(k, v)| k == &p.name || study.baseline.get(k) == Some(v))
                    && study.baseline.keys().all(|k| k == &p.name || o.config.contains_key(k))
            });
            let best =
                alone.filter_map(|o| Some((o, score(o)?))).max_by(|a, b| a.1.total_cmp(&b.1));
            if let Some(v) = best.and_then(|(o, _)| o.config.get(&p.name)) {
                combined.insert(p.name.clone(), v.clone());
            }
        }
        if fresh(&combined) {
            return Some(Proposal {
                config: combined,
                note: "phase 2: each setting's best value together".into(),
            });
        }
        // Phase 2b: one step from the best, then two.
        let mut rng = rng_for(self.seed, history);
        if let Some(best) = study.best(history) {
            let mut params: Vec<_> = study.space.params.iter().collect();
            params.shuffle(&mut rng);
            for p in &params {
                let current = best.config.get(&p.name).cloned().unwrap_or_default();
                for v in p.domain.neighbours(&current) {
                    let c = with(&best.config, &p.name, &v);
                    if fresh(&c) {
                        let note =
                            format!("phase 2: {} {current} → {v} from the best so far", p.name);
                        return Some(Proposal { config: c, note });
                    }
                }
            }
            for _ in 0..200 {
                let mut c = best.config.clone();
                for p in params.iter().take(2) {
                    let current = c.get(&p.name).cloned().unwrap_or_default();
                    if let Some(v) = p.domain.neighbours(&current).choose(&mut rng) {
                        c.insert(p.name.clone(), v.clone());
                    }
                }
                if fresh(&c) {
                    return Some(Proposal {
                        config: c,
                        note: "phase 2: two steps from the best so far".into(),
                    });
                }
                params.shuffle(&mut rng);
            }
        }
        let config = untried_random(study, history, &mut rng)?;
        Some(Proposal {
            config,
            note: "phase 2: nothing untried near the best; a random draw".into(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;

    #[tokio::test]
    async fn axes_first_then_the_best_together_then_around_it() {
        let study = testing::study("two_phase", "");
        let history = testing::run(&study, 40).await;
        // Baseline, then threads 1/8/16, batch 64/256/2048 (one is the
        // baseline's), then the three cache types less the baseline's.
        for (i, o) in history.iter().enumerate().take(8).skip(1) {
            let changed =
                o.config.iter().filter(|(k, v)| study.baseline.get(*k) != Some(v)).count();
            assert_eq!(changed, 1, "trial {i} varies one setting: {:?}", o.config);
        }
        let best = study.best(&history).unwrap();
        assert_eq!(best.config["cache_type_k"], "q8_0");
        assert_eq!(best.config["batch_size"], "512");
        let threads: i64 = best.config["threads"].parse().unwrap();
        assert!((11..=13).contains(&threads), "{threads}");
    }
}
