//! Server settings, from the command line and `TUNEBOOK_*` variables.

use std::path::PathBuf;
use std::time::Duration;

use engine_bridge::ProbePlan;

/// Everything `launch` needs besides the listener.
#[derive(Debug, Clone)]
pub struct Settings {
    /// `sqlite://…` (created if missing) or `postgres://…`.
    pub database_url: String,
    /// Folder of engine profile TOML files.
    pub profiles_dir: PathBuf,
    /// Folder holding `pkg/` with the browser bundle and stylesheet.
    pub site_root: PathBuf,
    /// Engine logs and other files Tunebook writes.
    pub data_dir: PathBuf,
    /// Longest an engine may take to answer its health check.
    pub load_timeout: Duration,
    /// What is measured on each trial.
    pub probes: ProbePlan,
    /// Memory read bandwidth in bytes per second; `None`: measured once and
    /// kept in the data folder.
    pub bandwidth: Option<f64>,
    /// An OpenAI-compatible endpoint that may rewrite a report's findings
    /// as prose; `None`: reports stay as computed.
    pub writer: Option<tunebook_study::study::Endpoint>,
    /// How long a worker holds a trial without renewing its lease before
    /// the trial goes back to the queue.
    pub lease: Duration,
    /// How long a worker's request for work waits for a trial to be
    /// queued before it is answered with none: an idle worker is told of
    /// new work at once instead of asking again and again.
    pub claim_wait: Duration,
    /// OpenAI-compatible endpoints (a judge, a proposing model) that
    /// studies may name; studies never give a URL or a key themselves.
    pub endpoints: engine_bridge::endpoints::Endpoints,
    /// Names (besides IP addresses and `localhost`) that browsers may
    /// reach this server by; requests naming any other host are refused.
    pub allowed_hosts: Vec<String>,
    /// With a password, every page and API route but report links and the
    /// worker API wants a login.
    pub password: Option<String>,
}

impl Settings {
    /// Defaults for a data folder: an SQLite database inside it.
    pub fn with_data_dir(data_dir: PathBuf) -> Self {
        Self {
            database_url: format!("sqlite://{}/tunebook.db?mode=rwc", data_dir.display()),
            profiles_dir: PathBuf::from("profiles"),
            site_root: PathBuf::from("target/site"),
            data_dir,
            load_timeout: Duration::from_secs(600),
            probes: ProbePlan::standard(),
            bandwidth: None,
            writer: None,
            lease: Duration::from_secs(30),
            claim_wait: Duration::from_secs(20),
            password: None,
            endpoints: Default::default(),
            allowed_hosts: vec![],
        }
    }
}
