//! Every combination in odometer order (the last setting changes fastest,
//! like llama-bench's comma lists).

use async_trait::async_trait;

use super::{Proposal, Strategy};
use crate::study::{Observation, Study};

pub struct Grid;

#[async_trait]
impl Strategy for Grid {
    async fn propose(&self, study: &Study, history: &[Observation]) -> Option<Proposal> {
        let total = study.space.grid_size();
        let (n, config) = study
            .space
            .grid()
            .enumerate()
            .find(|(_, c)| study.space.allows(c) && !Study::tried(history, c))?;
        Some(Proposal { config, note: format!("grid point {} of {total}", n + 1) })
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;

    #[tokio::test]
    async fn grid_visits_everything_once_and_finds_the_optimum() {
        let study = testing::study("grid", "constraints = ['threads >= 4']");
        let history = testing::run(&study, 1000).await;
        // threads 4..=16 (13) × batch sizes 64..2048 (6) × 3 cache types, the baseline among them.
        assert_eq!(history.len(), 13 * 6 * 3);
        let best = study.best(&history).unwrap();
        assert_eq!(best.config["threads"], "12");
        assert_eq!(best.config["batch_size"], "512");
        assert_eq!(best.config["cache_type_k"], "q8_0");
    }
}
