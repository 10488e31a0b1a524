//! What the server is doing, read at any moment (for Prometheus's
//! `/metrics`): trials and studies by state, and the engines running.

use tunebook_domain::TrialState;

use crate::db::studies::StudyState;
use crate::db::{studies, trials};
use crate::error::Result;
use crate::service::Service;

/// Counts, each state listed (zero where none is in it).
#[derive(Debug, Clone, PartialEq)]
pub struct Status {
    pub trials: Vec<(TrialState, i64)>,
    pub studies: Vec<(StudyState, i64)>,
    /// Engines this server started that still run.
    pub engines: usize,
}

pub async fn status(service: &Service) -> Result<Status> {
    let stored = trials::state_counts_all(&service.db).await?;
    let count = |word: &str, of: &[(String, i64)]| {
        of.iter().filter(|(s, _)| s == word).map(|(_, n)| n).sum::<i64>()
    };
    let trials = TrialState::ALL.into_iter().map(|s| (s, count(s.as_str(), &stored))).collect();
    let stored = studies::state_counts(&service.db).await?;
    let studies = StudyState::ALL.into_iter().map(|s| (s, count(s.as_str(), &stored))).collect();
    let dir = service.engines_dir.clone();
    let engines = tokio::task::spawn_blocking(move || engine_bridge::registry::running(&dir).len())
        .await
        .unwrap_or_default();
    Ok(Status { trials, studies, engines })
}
