//! What the server functions need from the server, as a trait so this crate
//! does not depend on the server's database or runner.

use std::sync::Arc;

use crate::types::{ProfileView, RunRequest, TrialView};

/// The server side of the pages; provided as context to server functions.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The engine profiles this server may run.
    fn profiles(&self) -> Vec<ProfileView>;
    /// Every trial, newest first.
    async fn list_trials(&self) -> Result<Vec<TrialView>, String>;
    /// Checks and queues one configuration; the error says what was wrong.
    async fn submit_trial(&self, request: RunRequest) -> Result<TrialView, String>;
}

/// The form in which the backend is provided as context.
pub type SharedBackend = Arc<dyn Backend>;
