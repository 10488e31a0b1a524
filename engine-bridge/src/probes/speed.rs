//! Speed: time to first token, prefill and decode speed from repeated
//! streamed completions, with warm-up, spread, and the client's decode
//! speed cross-checked against the engine's own timings.

use std::collections::BTreeMap;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::stats::Stats;
use crate::engine::RunningEngine;
use crate::failure::Failure;
use crate::llama_server::{CompletionRequest, CompletionSample};

/// Timed completions: warm-up requests, then measured repeats.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct SpeedProbe {
    /// Prompt length in tokens (built with the engine's own tokenizer).
    pub prompt_tokens: usize,
    /// Tokens to generate per request.
    pub n_predict: u32,
    /// Unrecorded requests first (caches, lazy allocation).
    pub warmup: u32,
    /// Recorded requests.
    pub repeats: u32,
    /// Longest a single request may take.
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
}

impl Default for SpeedProbe {
    fn default() -> Self {
        Self {
            prompt_tokens: 128,
            n_predict: 32,
            warmup: 1,
            repeats: 3,
            request_timeout: Duration::from_secs(120),
        }
    }
}

/// Medians over a probe's recorded samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeedSummary {
    pub ttft_ms: f64,
    /// Prompt tokens per second, from the engine's timings.
    pub prefill_tps: f64,
    /// Generated tokens per second, from the engine's timings.
    pub decode_tps: f64,
    /// Generated tokens per second, seen by the client.
    pub client_decode_tps: Option<f64>,
    pub prompt_tokens: u32,
    pub tokens_generated: u32,
}

/// Everything the speed probe measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SpeedResult {
    pub summary: SpeedSummary,
    pub ttft_ms: Stats,
    pub prefill_tps: Stats,
    pub decode_tps: Stats,
    pub client_decode_tps: Option<Stats>,
    /// Client decode speed over the engine's, median: near 1 when both agree.
    pub client_engine_ratio: Option<f64>,
    pub samples: Vec<CompletionSample>,
    /// The request-time settings as the engine reported using them (where
    /// it reports them): what was sent, read back.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read_back: BTreeMap<String, serde_json::Value>,
    /// Why the repeats stopped before the plan's count, where a gate
    /// found the configuration clearly beaten already.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_short: Option<String>,
}

impl SpeedProbe {
    /// Runs the probe on a ready engine.
    pub async fn run(&self, engine: &RunningEngine) -> Result<SpeedResult, Failure> {
        self.run_gated(engine, None).await
    }

    /// Runs the probe, asking `gate` after each measured request but the
    /// last whether the rest are worth their time: a configuration another
    /// clearly beats after one sample does not need its repeats.
    pub async fn run_gated(
        &self,
        engine: &RunningEngine,
        gate: Option<super::Gate<'_>>,
    ) -> Result<SpeedResult, Failure> {
        let prompt = engine.prompt_of_len(self.prompt_tokens).await?;
        let request = CompletionRequest {
            prompt: prompt.as_prompt(),
            n_predict: self.n_predict,
            ignore_eos: true,
        };
        let mut samples = Vec::new();
        let mut read_back = BTreeMap::new();
        for i in 0..self.warmup + self.repeats {
            let done = engine.generate(&request, self.request_timeout).await?;
            if let Some(used) = &done.settings {
                for key in engine.spec.request.keys() {
                    if let Some(value) = used.get(key) {
                        read_back.insert(key.clone(), value.clone());
                    }
                }
            }
            if i >= self.warmup {
                samples.push(done.sample);
                let more = (samples.len() as u32) < self.repeats;
                if let (true, Some(gate)) = (more, gate)
                    && let Some(why) = gate(&summarize(samples.clone()))
                {
                    let cut_short =
                        Some(format!("{why}; {} of {} repeats run", samples.len(), self.repeats));
                    return Ok(SpeedResult { read_back, cut_short, ..summarize(samples) });
                }
            }
        }
        Ok(SpeedResult { read_back, ..summarize(samples) })
    }
}

/// Statistics over recorded samples (at least one).
pub fn summarize(samples: Vec<CompletionSample>) -> SpeedResult {
    let of = |f: fn(&CompletionSample) -> f64| {
        Stats::of(samples.iter().map(f)).expect("at least one sample")
    };
    let ttft_ms = of(|s| s.ttft_ms);
    let prefill_tps = of(|s| s.timings.prompt_per_second);
    let decode_tps = of(|s| s.timings.predicted_per_second);
    let client_decode_tps = Stats::of(samples.iter().filter_map(|s| s.client_decode_tps));
    let client_engine_ratio = Stats::of(
        samples.iter().filter_map(|s| Some(s.client_decode_tps? / s.timings.predicted_per_second)),
    )
    .map(|s| s.median);
    let summary = SpeedSummary {
        ttft_ms: ttft_ms.median,
        prefill_tps: prefill_tps.median,
        decode_tps: decode_tps.median,
        client_decode_tps: client_decode_tps.map(|s| s.median),
        prompt_tokens: of(|s| s.timings.prompt_n as f64).median as u32,
        tokens_generated: samples.iter().map(|s| s.timings.predicted_n).min().unwrap_or(0),
    };
    SpeedResult {
        summary,
        ttft_ms,
        prefill_tps,
        decode_tps,
        client_decode_tps,
        client_engine_ratio,
        samples,
        read_back: BTreeMap::new(),
        cut_short: None,
    }
}
