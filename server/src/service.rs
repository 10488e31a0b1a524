//! The server's side of the pages and the JSON API: profiles, trials, and
//! submitting a configuration to the runner.

use std::sync::Arc;

use engine_bridge::Profile;
use engine_bridge::catalog::CACHE_TYPES;
use tokio::sync::broadcast;
use tunebook_app::backend::Backend;
use tunebook_app::types::{ProfileView, RunRequest, TrialView};

use crate::db::Db;
use crate::db::trials::{self, NewTrial};
use crate::error::{Error, Result};
use crate::runner::Runner;

/// Profiles, database, runner and the event channel, shared by all requests.
pub struct Service {
    pub db: Db,
    pub profiles: Arc<Vec<Profile>>,
    pub runner: Runner,
    pub studies: Arc<crate::studies::Studies>,
    pub events: broadcast::Sender<TrialView>,
    /// Tokens each speed probe request generates, stored with each trial.
    pub n_predict: Option<u32>,
}

impl Service {
    /// Checks a request, stores it as a queued trial, and hands it to the
    /// runner. Nothing is stored when the request is wrong.
    pub async fn submit(&self, request: RunRequest) -> Result<TrialView> {
        let profile =
            self.profiles.iter().find(|p| p.name == request.profile).ok_or_else(|| {
                Error::BadRequest(format!("unknown engine profile `{}`", request.profile))
            })?;
        // A blank value means "leave it to the engine".
        let settings = request
            .settings
            .into_iter()
            .map(|(k, v)| (k, v.trim().to_string()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        // Planning checks the model, every setting, and that the files exist.
        engine_bridge::plan(profile, &request.model, &settings, 0)
            .map_err(|e| Error::BadRequest(e.to_string()))?;
        let id = trials::insert(
            &self.db,
            &NewTrial {
                profile: &profile.name,
                model: &request.model,
                settings: &settings,
                tokens_requested: self.n_predict,
                study: None,
            },
        )
        .await?;
        let view = trials::get(&self.db, id).await?.ok_or(Error::NotFound)?;
        let _ = self.events.send(view.clone());
        self.runner.enqueue(id);
        Ok(view)
    }

    /// The profiles as the browser may see them (names, not paths).
    pub fn profile_views(&self) -> Vec<ProfileView> {
        self.profiles
            .iter()
            .map(|p| ProfileView {
                name: p.name.clone(),
                engine: p.kind.name().to_string(),
                description: p.description.clone(),
                models: p.models.iter().map(|m| m.name.clone()).collect(),
                cache_types: CACHE_TYPES.iter().map(|s| s.to_string()).collect(),
            })
            .collect()
    }
}

#[async_trait::async_trait]
impl Backend for Service {
    fn profiles(&self) -> Vec<ProfileView> {
        self.profile_views()
    }

    async fn list_trials(&self) -> Result<Vec<TrialView>, String> {
        trials::list(&self.db).await.map_err(|e| {
            tracing::error!(error = %e, "listing trials");
            "could not read trials from the database".to_string()
        })
    }

    async fn submit_trial(&self, request: RunRequest) -> Result<TrialView, String> {
        self.submit(request).await.map_err(|e| match e {
            Error::BadRequest(m) => m,
            other => {
                tracing::error!(error = ?other, "submitting a trial");
                "the trial could not be stored".to_string()
            }
        })
    }
}
