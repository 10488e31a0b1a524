//! Probes: what is measured on a ready engine. Each is configurable and
//! optional; a [`ProbePlan`] runs the chosen ones in order and gathers a
//! [`Measurement`].

pub mod concurrency;
pub mod context;
pub mod depth;
pub mod kld;
pub mod limits;
pub mod load;
pub mod load_watch;
pub mod perplexity;
pub mod quality;
pub mod speed;
pub mod stats;

use serde::{Deserialize, Serialize};

pub use concurrency::{ConcurrencyPoint, ConcurrencyProbe};
pub use context::{ContextProbe, RecallPoint};
pub use depth::{DepthPoint, DepthProbe};
pub use kld::{KldProbe, KldResult};
pub use load::{LoadProbe, LoadResult, LoadStep, Slo};
pub use perplexity::{PerplexityProbe, PerplexityResult};
pub use quality::{Judge, QualityProbe, QualityResult, Suite};
pub use speed::{SpeedProbe, SpeedResult, SpeedSummary};
pub use stats::Stats;

use crate::engine::RunningEngine;
use crate::failure::Failure;

/// Which probes to run, and how. A plan runs only the probes it names; the
/// default names none, [`ProbePlan::standard`] the quick ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct ProbePlan {
    pub speed: Option<SpeedProbe>,
    pub depth: Option<DepthProbe>,
    pub concurrency: Option<ConcurrencyProbe>,
    pub quality: Option<QualityProbe>,
    pub context: Option<ContextProbe>,
    /// Serving capacity under a latency objective (see [`load`]).
    pub load: Option<LoadProbe>,
    /// Runs after the engine stops (see [`perplexity`]); llama-server only.
    pub perplexity: Option<PerplexityProbe>,
    /// KL divergence from a reference configuration (see [`kld`]); after
    /// the engine stops, llama-server only.
    pub kld: Option<KldProbe>,
}

impl ProbePlan {
    /// Speed and the default quality suite: quick on any model.
    pub fn standard() -> Self {
        Self {
            speed: Some(SpeedProbe::default()),
            quality: Some(QualityProbe::default()),
            ..Self::default()
        }
    }
}

/// Everything the probes measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Measurement {
    pub speed: Option<SpeedResult>,
    pub depth: Option<Vec<DepthPoint>>,
    pub concurrency: Option<Vec<ConcurrencyPoint>>,
    pub quality: Option<QualityResult>,
    pub context: Option<Vec<RecallPoint>>,
    pub perplexity: Option<PerplexityResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kld: Option<KldResult>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadResult>,
    /// Probes that failed without failing the trial (perplexity), and why.
    #[serde(default)]
    pub probe_errors: Vec<String>,
    /// Why the slower probes did not run, where a [`Gate`] stopped them.
    #[serde(default)]
    pub skipped: Option<String>,
    /// Each setting as asked and as the engine said it ran it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub applied: Vec<crate::applied::Applied>,
}

/// Looks at the speed result so far and says whether the rest of the speed
/// repeats and the slower probes (quality, depth, concurrency, context,
/// perplexity) are worth their time: `Some(reason)` skips them (a
/// configuration already clearly beaten on speed, say).
pub type Gate<'a> = &'a (dyn Fn(&SpeedResult) -> Option<String> + Send + Sync);

impl Measurement {
    /// Context recall passed over measured (size, depth) points.
    pub fn context_pass_rate(&self) -> Option<f64> {
        let measured: Vec<_> =
            self.context.as_ref()?.iter().filter(|p| p.skipped.is_none()).collect();
        let passed = measured.iter().filter(|p| p.passed).count();
        (!measured.is_empty()).then(|| passed as f64 / measured.len() as f64)
    }

    /// How many pass/fail items the quality score and the context pass
    /// rate were counted over: questions asked, recall points measured.
    pub fn items(&self) -> (Option<u32>, Option<u32>) {
        let questions = self.quality.as_ref().map(|q| q.cases.len() as u32);
        let points = self
            .context
            .as_ref()
            .map(|c| c.iter().filter(|p| p.skipped.is_none()).count() as u32)
            .filter(|n| *n > 0);
        (questions, points)
    }

    /// Requests a second answered within the load probe's objective, at
    /// the highest rate that held it.
    pub fn goodput_rps(&self) -> Option<f64> {
        self.load.as_ref().map(|l| l.goodput_rps)
    }

    /// The largest probed context size whose recall passed at every depth
    /// measured there; 0 when none did. A size that did not fit is not a
    /// pass, so a 4K configuration scores 4K where a 64K one scores 64K.
    pub fn context_tokens(&self) -> Option<u64> {
        let points = self.context.as_ref()?;
        let mut sizes: Vec<usize> = points.iter().map(|p| p.size).collect();
        sizes.sort_unstable();
        sizes.dedup();
        let passed = |size: usize| {
            points.iter().filter(|p| p.size == size).all(|p| p.skipped.is_none() && p.passed)
        };
        Some(sizes.into_iter().rev().find(|s| passed(*s)).unwrap_or(0) as u64)
    }
}

impl ProbePlan {
    /// Runs the chosen probes; `n_ctx` (the engine's context per slot) lets
    /// the long-context probes skip what cannot fit.
    pub async fn run(
        &self,
        engine: &RunningEngine,
        n_ctx: Option<u64>,
    ) -> Result<Measurement, Failure> {
        self.run_gated(engine, n_ctx, None).await
    }

    /// Runs the chosen probes, asking `gate` after each speed sample but
    /// the last whether the repeats should go on, and after the speed probe
    /// whether the slower ones should run.
    pub async fn run_gated(
        &self,
        engine: &RunningEngine,
        n_ctx: Option<u64>,
        gate: Option<Gate<'_>>,
    ) -> Result<Measurement, Failure> {
        let mut m = Measurement::default();
        if let Some(p) = &self.speed {
            let speed = p.run_gated(engine, gate).await?;
            // Beaten before its repeats were done: beaten for the slow
            // probes too.
            if let Some(why) = &speed.cut_short {
                m.skipped = Some(format!("repeats cut short and slow probes skipped: {why}"));
                m.speed = Some(speed);
                return Ok(m);
            }
            m.speed = Some(speed);
        }
        let slow = self.quality.is_some()
            || self.depth.is_some()
            || self.concurrency.is_some()
            || self.context.is_some()
            || self.load.is_some();
        if let (true, Some(gate), Some(speed)) = (slow, gate, &m.speed)
            && let Some(why) = gate(speed)
        {
            m.skipped = Some(format!("slow probes skipped: {why}"));
            return Ok(m);
        }
        if let Some(p) = &self.quality {
            m.quality = Some(p.run(engine).await?);
        }
        if let Some(p) = &self.depth {
            m.depth = Some(p.run(engine, n_ctx).await?);
        }
        if let Some(p) = &self.concurrency {
            m.concurrency = Some(p.run(engine).await?);
        }
        if let Some(p) = &self.context {
            m.context = Some(p.run(engine, n_ctx).await?);
        }
        if let Some(p) = &self.load {
            m.load = Some(p.run(engine).await?);
        }
        Ok(m)
    }
}

/// Durations as seconds (a float) in probe plans.
pub(crate) mod secs {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_f64(d.as_secs_f64())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
        let secs = f64::deserialize(d)?;
        Duration::try_from_secs_f64(secs).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans_read_from_toml_with_defaults() {
        let plan: ProbePlan = toml::from_str(
            "[speed]\nrepeats = 5\nrequest_timeout = 2.5\n[context]\nsizes = [512]\n",
        )
        .unwrap();
        let speed = plan.speed.unwrap();
        assert_eq!(speed.repeats, 5);
        assert_eq!(speed.n_predict, SpeedProbe::default().n_predict);
        assert_eq!(speed.request_timeout, std::time::Duration::from_millis(2500));
        assert_eq!(plan.context.unwrap().sizes, [512]);
        assert!(plan.quality.is_none(), "a plan runs only what it names");
        let err = toml::from_str::<ProbePlan>("[sped]\n").unwrap_err();
        assert!(err.to_string().contains("unknown field `sped`"), "{err}");
    }

    fn point(size: usize, depth: f64, passed: bool, skipped: bool) -> RecallPoint {
        RecallPoint {
            size,
            depth,
            passed,
            prompt_tokens: 0,
            answer: String::new(),
            ms: 0.0,
            skipped: skipped.then(|| "does not fit".to_string()),
            style: Default::default(),
        }
    }

    #[test]
    fn context_tokens_is_the_largest_size_recalled_at_every_depth() {
        let with = |points| Measurement { context: Some(points), ..Measurement::default() };
        // 16K did not fit: a 4K configuration scores 4K, not "all passed".
        let fits_4k = with(vec![
            point(1024, 0.5, true, false),
            point(4096, 0.1, true, false),
            point(4096, 0.9, true, false),
            point(16384, 0.5, false, true),
        ]);
        assert_eq!(fits_4k.context_pass_rate(), Some(1.0));
        assert_eq!(fits_4k.context_tokens(), Some(4096));
        // One depth missed at 4K: the size does not count.
        let missed = with(vec![
            point(1024, 0.5, true, false),
            point(4096, 0.1, true, false),
            point(4096, 0.9, false, false),
        ]);
        assert_eq!(missed.context_tokens(), Some(1024));
        assert_eq!(with(vec![point(1024, 0.5, false, false)]).context_tokens(), Some(0));
        assert_eq!(Measurement::default().context_tokens(), None, "not probed");
    }
}
