//! Concurrent requests: aggregate throughput and what each request sees
//! when several share the engine (its `parallel` slots).

use std::time::{Duration, Instant};

use futures::future::try_join_all;
use serde::{Deserialize, Serialize};

use super::stats::Stats;
use crate::engine::RunningEngine;
use crate::failure::Failure;

/// Batches of simultaneous streamed completions.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ConcurrencyProbe {
    /// How many requests at once, one batch each.
    pub clients: Vec<u32>,
    pub prompt_tokens: usize,
    pub n_predict: u32,
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
}

impl Default for ConcurrencyProbe {
    fn default() -> Self {
        Self {
            clients: vec![1, 2, 4],
            prompt_tokens: 128,
            n_predict: 64,
            request_timeout: Duration::from_secs(300),
        }
    }
}

/// One batch of simultaneous requests.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ConcurrencyPoint {
    pub clients: u32,
    /// All generated tokens over the batch's wall time.
    pub aggregate_tps: f64,
    pub wall_ms: f64,
    /// Per-request decode speed (engine timings) and time to first token.
    pub decode_tps: Stats,
    pub ttft_ms: Stats,
}

impl ConcurrencyProbe {
    pub async fn run(&self, engine: &RunningEngine) -> Result<Vec<ConcurrencyPoint>, Failure> {
        let prompt = engine.prompt_of_len(self.prompt_tokens).await?;
        let mut points = Vec::new();
        for &clients in &self.clients {
            let clients = clients.max(1);
            let started = Instant::now();
            let requests = (0..clients)
                .map(|_| engine.completion(&prompt, self.n_predict, self.request_timeout));
            let samples = try_join_all(requests).await?;
            let wall = started.elapsed().as_secs_f64();
            let generated: u32 = samples.iter().map(|s| s.timings.predicted_n).sum();
            points.push(ConcurrencyPoint {
                clients,
                aggregate_tps: generated as f64 / wall,
                wall_ms: wall * 1e3,
                decode_tps: Stats::of(samples.iter().map(|s| s.timings.predicted_per_second))
                    .expect("at least one request"),
                ttft_ms: Stats::of(samples.iter().map(|s| s.ttft_ms))
                    .expect("at least one request"),
            });
        }
        Ok(points)
    }
}
