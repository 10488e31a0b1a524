//! What every operation may need, shared by all requests: the database,
//! the engine profiles, the runners, the events feed and the machine's
//! settings. The operations themselves are [`crate::ops`].

use std::sync::Arc;

use engine_bridge::Profile;

use crate::db::Db;
use crate::trial_runner::Runner;

/// Profiles, database, runner and the event channel, shared by all requests.
pub struct Service {
    pub db: Db,
    pub profiles: Arc<Vec<Profile>>,
    pub runner: Runner,
    pub studies: Arc<crate::study_runner::Studies>,
    /// The endpoints studies may name (see `engine_bridge::endpoints`).
    pub endpoints: Arc<engine_bridge::endpoints::Endpoints>,
    pub events: Arc<crate::events::Hub>,
    /// Tokens each speed probe request generates, stored with each trial.
    pub n_predict: Option<u32>,
    /// Where engine output is kept, one file per launch (`trial-N.log`).
    pub logs_dir: std::path::PathBuf,
    /// The data folder (machine facts, model hashes).
    pub data_dir: std::path::PathBuf,
    /// Holds `pkg/plotly.min.js`, inlined into exported reports.
    pub site_root: std::path::PathBuf,
    /// Measured memory read bandwidth, bytes per second.
    pub bandwidth: Option<f64>,
    /// Where reports' findings are rewritten as prose, if anywhere.
    pub writer: Option<tunebook_study::study::Endpoint>,
    /// What workers measure on each trial they take, and how long their
    /// lease on it lasts between renewals.
    pub probes: engine_bridge::ProbePlan,
    pub lease: std::time::Duration,
    /// How long a worker's request for work waits for one (see
    /// [`crate::settings::Settings::claim_wait`]).
    pub claim_wait: std::time::Duration,
    /// The server's turns at CPU work (the study runner's too).
    pub heavy: crate::heavy::Turns,
    /// The studies checked against `profiles`, each once.
    pub checked: Arc<crate::checked::Checked>,
    /// What the runners count, and where they record running engines.
    pub telemetry: crate::telemetry::Telemetry,
    pub engines_dir: std::path::PathBuf,
}

impl Service {
    /// What reports need of the server.
    pub fn reports(&self) -> crate::report::Reports {
        crate::report::Reports {
            db: self.db.clone(),
            profiles: self.profiles.clone(),
            data_dir: self.data_dir.clone(),
            bandwidth: self.bandwidth,
            writer: self.writer.clone(),
            heavy: self.heavy.clone(),
            checked: self.checked.clone(),
        }
    }
}
