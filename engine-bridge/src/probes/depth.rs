//! Decode speed against context depth: the same generation after prompts
//! of growing length, the curve of speed falling as the K/V cache fills.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::stats::Stats;
use crate::engine::RunningEngine;
use crate::failure::Failure;

/// Generation after prompts of each depth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct DepthProbe {
    /// Prompt lengths in tokens.
    pub depths: Vec<usize>,
    pub n_predict: u32,
    pub repeats: u32,
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
}

impl Default for DepthProbe {
    fn default() -> Self {
        Self {
            depths: vec![128, 1024, 4096],
            n_predict: 32,
            repeats: 2,
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// The speeds at one depth, or why it was skipped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DepthPoint {
    pub depth: usize,
    pub decode_tps: Option<Stats>,
    pub prefill_tps: Option<Stats>,
    pub ttft_ms: Option<Stats>,
    /// Set when the depth could not be measured (it does not fit the context).
    pub skipped: Option<String>,
}

impl DepthProbe {
    /// Runs every depth that fits in `n_ctx` (the engine's context per slot).
    pub async fn run(
        &self,
        engine: &RunningEngine,
        n_ctx: Option<u64>,
    ) -> Result<Vec<DepthPoint>, Failure> {
        let mut points = Vec::new();
        for &depth in &self.depths {
            let need = depth as u64 + self.n_predict as u64;
            if let Some(ctx) = n_ctx.filter(|ctx| need > *ctx) {
                points.push(DepthPoint {
                    depth,
                    decode_tps: None,
                    prefill_tps: None,
                    ttft_ms: None,
                    skipped: Some(format!("{need} tokens do not fit a context of {ctx}")),
                });
                continue;
            }
            let prompt = engine.prompt_of_len(depth.max(1)).await?;
            let mut samples = Vec::new();
            for _ in 0..self.repeats.max(1) {
                samples
                    .push(engine.completion(&prompt, self.n_predict, self.request_timeout).await?);
            }
            points.push(DepthPoint {
                depth,
                decode_tps: Stats::of(samples.iter().map(|s| s.timings.predicted_per_second)),
                prefill_tps: Stats::of(samples.iter().map(|s| s.timings.prompt_per_second)),
                ttft_ms: Stats::of(samples.iter().map(|s| s.ttft_ms)),
                skipped: None,
            });
        }
        Ok(points)
    }
}
