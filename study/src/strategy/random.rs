//! Untried configurations drawn at random, reproducibly from the seed.

use async_trait::async_trait;

use super::{Proposal, Strategy, rng_for, untried_random};
use crate::study::{Observation, Study};

pub struct Random {
    pub seed: u64,
}

#[async_trait]
impl Strategy for Random {
    async fn propose(&self, study: &Study, history: &[Observation]) -> Option<Proposal> {
        let mut rng = rng_for(self.seed, history);
        let config = untried_random(study, history, &mut rng)?;
        Some(Proposal { config, note: "random draw".into() })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;

    #[tokio::test]
    async fn random_is_reproducible_and_never_repeats() {
        let study = testing::study("random", "");
        let a = testing::run(&study, 40).await;
        let b = testing::run(&study, 40).await;
        assert_eq!(a.len(), 40);
        assert_eq!(a, b, "the same seed gives the same sequence");
        // With 16×6×3 = 288 points, 40 draws land within 3 tok/s of the best (43).
        let best = study.best(&a).unwrap().values.as_ref().unwrap()[0];
        assert!(best > 40.0, "{best}");
    }
}
