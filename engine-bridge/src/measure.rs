//! Measuring a running engine: what it says it runs, the probe plan's
//! results and its memory peaks, as one [`Outcome`]. The engine
//! ([`crate::engine`]) knows nothing of probes; the probes take the engine.

use std::time::Duration;

use crate::catalog::Settings;
use crate::engine::RunningEngine;
use crate::failure::Failure;
use crate::llama_server::Props;
use crate::memory::MemoryReport;
use crate::probes::{Gate, Measurement, ProbePlan};
use crate::profile::Profile;

/// What one configuration measured, from launch to stop.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Outcome {
    /// Spawn to first healthy answer.
    #[serde(with = "crate::probes::secs")]
    pub load_time: Duration,
    /// What the engine said it runs.
    pub props: Option<Props>,
    pub measurement: Measurement,
    pub memory: MemoryReport,
}

impl Outcome {
    /// Runs the plan's perplexity probe (after the engine has stopped);
    /// a failure is noted in the measurement, and nothing else is lost.
    /// With `registry`, the tool is recorded there while it runs, like an
    /// engine (see [`crate::registry`]).
    pub async fn add_perplexity(
        &mut self,
        plan: &ProbePlan,
        profile: &Profile,
        model: &str,
        settings: &Settings,
        scratch: &std::path::Path,
        registry: Option<&std::path::Path>,
    ) {
        let Some(probe) = &plan.perplexity else { return };
        // A configuration the gate found clearly beaten is not worth a
        // second load of the model.
        if self.measurement.skipped.is_some() {
            return;
        }
        let Some(entry) = profile.model(model) else { return };
        match probe.run(profile, &entry.path, settings, scratch, registry).await {
            Ok(r) => self.measurement.perplexity = Some(r),
            Err(f) => self.measurement.probe_errors.push(format!("perplexity: {f}")),
        }
    }
}

impl Outcome {
    /// Runs the plan's KL-divergence probe (after the engine has stopped),
    /// keeping the reference's logits in `dir`; a failure is noted in the
    /// measurement, and nothing else is lost.
    pub async fn add_kld(
        &mut self,
        plan: &ProbePlan,
        profile: &Profile,
        model: &str,
        settings: &Settings,
        dir: &std::path::Path,
        registry: Option<&std::path::Path>,
    ) {
        let Some(probe) = &plan.kld else { return };
        if self.measurement.skipped.is_some() {
            return;
        }
        let Some(entry) = profile.model(model) else { return };
        match probe.run(profile, &entry.path, settings, dir, registry).await {
            Ok(r) => self.measurement.kld = Some(r),
            Err(f) => self.measurement.probe_errors.push(format!("kl divergence: {f}")),
        }
    }
}

impl RunningEngine {
    /// Reads back what runs, runs the probe plan, takes the memory peaks,
    /// and stops the engine whatever the probes' result.
    pub async fn measure_and_stop(
        self,
        plan: &ProbePlan,
        grace: Duration,
    ) -> Result<Outcome, Failure> {
        self.measure_and_stop_gated(plan, grace, None).await
    }

    /// As [`Self::measure_and_stop`], with a [`Gate`] on the slower probes.
    pub async fn measure_and_stop_gated(
        self,
        plan: &ProbePlan,
        grace: Duration,
        gate: Option<Gate<'_>>,
    ) -> Result<Outcome, Failure> {
        let outcome = self.measure_gated(plan, gate).await;
        self.stop(grace).await;
        outcome
    }

    /// Reads back what runs and runs the probe plan, leaving the engine
    /// running (to be measured again with other request-time settings).
    /// Memory peaks count from the launch.
    pub async fn measure_gated(
        &self,
        plan: &ProbePlan,
        gate: Option<Gate<'_>>,
    ) -> Result<Outcome, Failure> {
        let props = self.props().await;
        let result = plan.run_gated(self, props.as_ref().and_then(|p| p.n_ctx), gate).await;
        let memory = self.memory();
        Ok(Outcome { load_time: self.load_time, props, measurement: result?, memory })
    }
}
