//! Tunebook's application layer, below every door: the operations the
//! JSON API and the pages' server functions both call ([`ops`]), storage
//! ([`db`]), the trial and study runners, events, reports and the findings'
//! write-up, and the views the pages show. The web server (`tunebook`) and
//! the app's server functions sit on top of it.

#![recursion_limit = "512"]

pub mod announce;
pub mod checked;
pub mod data_lock;
pub mod db;
pub mod dominance;
pub mod error;
pub mod events;
pub mod heavy;
pub mod import;
pub mod machine;
pub mod machine_class;
pub mod markdown;
pub mod memory_plan;
pub mod ops;
pub mod optuna_journal;
pub mod places;
pub mod provenance;
pub mod recipe;
pub mod remote;
pub mod report;
pub mod service;
pub mod settings;
pub mod shutdown;
pub mod study_checks;
pub mod study_facts;
pub mod study_runner;
pub mod telemetry;
pub mod trial;
pub mod trial_changes;
pub mod trial_runner;
pub mod trials_csv;
pub mod views;
pub mod write_up;

use std::sync::Arc;

use engine_bridge::Profile;
use tokio_util::sync::CancellationToken;

pub use error::{Error, Result};
pub use settings::Settings;

use crate::db::Db;
use crate::trial_runner::RunnerContext;

/// A new secret: 256 random bits in hex (report links, worker tokens,
/// login sessions).
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Connects the database, loads the profiles, stops engines an earlier
/// Tunebook left running, and knows the memory bandwidth: what the trial
/// runner and the study runner need, for the server and the command line.
pub async fn prepare(settings: &Settings, shutdown: CancellationToken) -> Result<RunnerContext> {
    // Before anything else: the engines recorded here may be another
    // Tunebook's, running.
    let lock =
        Arc::new(data_lock::take(&settings.data_dir)?.with_database(&settings.database_url).await?);
    let db = Db::connect(&settings.database_url).await?;
    let profiles = Arc::new(Profile::load_dir(&settings.profiles_dir)?);
    // Engines a killed Tunebook left running hold memory and ports: stop them.
    let engines_dir = settings.data_dir.join("engines");
    for leftover in engine_bridge::registry::reap_leftovers(&engines_dir)? {
        tracing::warn!(pid = leftover.pid, program = %leftover.program, "stopped an engine left running by an earlier Tunebook");
    }
    let bandwidth = match settings.bandwidth {
        Some(b) => b,
        None => machine::Machine::load_or_measure(&settings.data_dir).await?.bandwidth_bytes_per_s,
    };
    Ok(RunnerContext {
        db,
        checked: Arc::new(checked::Checked::new(profiles.clone())),
        profiles,
        events: Default::default(),
        probes: settings.probes.clone(),
        endpoints: Arc::new(settings.endpoints.clone()),
        load_timeout: settings.load_timeout,
        logs_dir: settings.data_dir.join("logs"),
        engines_dir,
        workloads_dir: settings.data_dir.join("workloads"),
        bandwidth: Some(bandwidth),
        shutdown,
        slot: Default::default(),
        data_lock: lock,
        heavy: Default::default(),
        telemetry: Default::default(),
    })
}
