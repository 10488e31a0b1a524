//! One configuration's way from a profile to what it measured, walked the
//! same way by the trial runner and by `tunebook probe`:
//!
//! 1. [`Start::plan`]: the command line for the settings on a free port
//!    (or, for an external endpoint, the address to attach to);
//! 2. [`Start::adapt`]: the command line fitted to the flags this build
//!    of the engine takes;
//! 3. [`Start::command`]: what runs, to record and show;
//! 4. [`Start::run`]: launch (or attach) and wait until ready; while the
//!    engine finds its port taken, again from step 1 ([`PORT_TRIES`]);
//! 5. the probes, on the [`RunningEngine`];
//! 6. [`after_engine`]: what needs the engine gone (perplexity, KL
//!    divergence), and the share of the bandwidth ceiling reached.
//!
//! Each caller records and tells what happens between the steps its own
//! way (the runner in its database, the command on the terminal).

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use crate::catalog::Settings;
use crate::engine::{PlanError, RunningEngine, free_port, plan};
use crate::failure::{Failure, FailureKind};
use crate::llama_server::Health;
use crate::measure::Outcome;
use crate::planner::{ModelInfo, speed_ceiling};
use crate::probes::ProbePlan;
use crate::process::LaunchSpec;
use crate::profile::{EngineKind, Profile};

/// Launches of one configuration, each planned on a port found free
/// afresh, while the engine finds its port taken. A port found free may be
/// bound by another program before the engine binds it; that is no fault
/// of the configuration, and it should not fail for it.
pub const PORT_TRIES: usize = 3;

/// Whether a launch that failed so is worth another try on another port
/// (see [`PORT_TRIES`]); `tries` counts the launches so far.
pub fn try_another_port(failure: &Failure, tries: usize) -> bool {
    failure.kind == FailureKind::PortConflict && tries < PORT_TRIES
}

/// A configuration ready to start.
pub enum Start {
    /// An engine Tunebook launches, on `port`.
    Launch { spec: LaunchSpec, port: u16 },
    /// A server Tunebook does not run, serving `model`.
    Attach { url: String, model: String },
}

impl Start {
    /// Plans `settings` for `model` with `profile`, on a free port.
    pub fn plan(profile: &Profile, model: &str, settings: &Settings) -> Result<Start, Planned> {
        if let (EngineKind::External, Some(url)) = (profile.kind, &profile.url) {
            plan(profile, model, settings, 0)?;
            return Ok(Start::Attach { url: url.clone(), model: model.to_string() });
        }
        let port = free_port().map_err(Planned::NoPort)?;
        Ok(Start::Launch { spec: plan(profile, model, settings, port)?, port })
    }

    /// Fits the command line to the flags this build of the engine takes.
    pub async fn adapt(self) -> Result<Start, Failure> {
        match self {
            Start::Launch { spec, port } => {
                Ok(Start::Launch { spec: crate::flags::adapt(spec).await?, port })
            }
            attach => Ok(attach),
        }
    }

    /// The launch, to say where its log goes and where it is recorded
    /// while it runs; none for an endpoint.
    pub fn spec_mut(&mut self) -> Option<&mut LaunchSpec> {
        match self {
            Start::Launch { spec, .. } => Some(spec),
            Start::Attach { .. } => None,
        }
    }

    /// The command line (or the endpoint) as shown to a user.
    pub fn display(&self) -> String {
        match self {
            Start::Launch { spec, .. } => spec.display(),
            Start::Attach { url, .. } => format!("external endpoint {url}"),
        }
    }

    /// What runs, as a trial records it: the program, its arguments and
    /// environment, or the endpoint's address; and `display`.
    pub fn command(&self) -> serde_json::Value {
        match self {
            Start::Launch { spec, .. } => json!({
                "program": spec.program,
                "args": spec.args,
                "env": spec.env,
                "display": spec.display(),
            }),
            Start::Attach { url, .. } => json!({ "url": url, "display": self.display() }),
        }
    }

    /// Launches the engine (or waits for the endpoint) until it is ready,
    /// at most `load_timeout`, telling `progress` of each change of a
    /// launch's readiness.
    pub async fn run(
        self,
        load_timeout: Duration,
        progress: Option<&tokio::sync::watch::Sender<Health>>,
    ) -> Result<RunningEngine, Failure> {
        match self {
            Start::Launch { spec, port } => {
                RunningEngine::launch_watched(spec, port, load_timeout, progress).await
            }
            Start::Attach { url, model } => RunningEngine::attach(&url, &model, load_timeout).await,
        }
    }
}

/// Why a configuration could not be planned.
#[derive(Debug, thiserror::Error)]
pub enum Planned {
    #[error(transparent)]
    Plan(#[from] PlanError),
    #[error("no free port: {0}")]
    NoPort(std::io::Error),
}

impl Planned {
    /// As a trial's failure: a setting the engine cannot take is refused
    /// (`Rejected`); anything else keeps it from starting.
    pub fn failure(self) -> Failure {
        let kind = match &self {
            Planned::Plan(PlanError::Setting(_)) => FailureKind::Rejected,
            Planned::Plan(_) => FailureKind::Spawn,
            Planned::NoPort(_) => FailureKind::PortConflict,
        };
        Failure::new(kind, self.to_string())
    }
}

/// Where what runs after the engine keeps its files.
pub struct AfterDirs<'a> {
    /// The perplexity tool's scratch files.
    pub scratch: &'a Path,
    /// The reference's logits for the KL divergence.
    pub kld: &'a Path,
    /// Where the tools are recorded while they run (see [`crate::registry`]).
    pub registry: Option<&'a Path>,
}

/// Runs what the plan measures after the engine has stopped (perplexity,
/// KL divergence) and gives the decode speed memory `bandwidth` allows
/// for this model and settings, where it can be known.
pub async fn after_engine(
    outcome: &mut Outcome,
    probes: &ProbePlan,
    (profile, model, settings): (&Profile, &str, &Settings),
    dirs: AfterDirs<'_>,
    bandwidth: Option<f64>,
) -> Option<f64> {
    outcome.add_perplexity(probes, profile, model, settings, dirs.scratch, dirs.registry).await;
    outcome.add_kld(probes, profile, model, settings, dirs.kld, dirs.registry).await;
    let info = ModelInfo::read(&profile.model(model)?.path).ok()?;
    let speed = &outcome.measurement.speed.as_ref()?.summary;
    speed_ceiling(&info, settings, speed, bandwidth?)
}
