//! What the engine says of itself while a load step runs, and what binds:
//! llama-server's `/slots` (which slots are busy) and `/metrics` (requests
//! waiting, with `--metrics`), vLLM's and SGLang's `/metrics` (requests
//! running and waiting, K/V cache use), read a few times a second; then the
//! resource that limits the step, named for the reader.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::load::{LoadStep, Slo};

/// How often the engine is asked while a step runs.
const EVERY: Duration = Duration::from_millis(250);

/// The engine's own account of a step, averaged over its readings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EngineLoad {
    pub readings: u32,
    /// Slots (llama-server's `parallel`), and the mean share busy.
    pub slots: Option<u32>,
    pub busy_share: Option<f64>,
    /// Mean requests waiting for a slot.
    pub waiting: Option<f64>,
    /// Mean share of the K/V cache in use, where the engine says.
    pub kv_share: Option<f64>,
}

/// Reads the engine at `base_url` until `stop` is cancelled.
pub async fn watch(
    client: reqwest::Client,
    base_url: String,
    stop: CancellationToken,
) -> EngineLoad {
    let (mut busy, mut slots, mut waiting, mut kv) = (Vec::new(), None, Vec::new(), Vec::new());
    let mut readings = 0;
    loop {
        tokio::select! {
            _ = stop.cancelled() => break,
            _ = tokio::time::sleep(EVERY) => {}
        }
        readings += 1;
        let get = |path: &str| client.get(format!("{base_url}{path}")).timeout(EVERY * 4).send();
        if let Ok(r) = get("/slots").await
            && let Ok(Value::Array(list)) = r.json::<Value>().await
            && !list.is_empty()
        {
            let on = list.iter().filter(|s| s["is_processing"] == Value::Bool(true)).count();
            slots = Some(list.len() as u32);
            busy.push(on as f64 / list.len() as f64);
        }
        if let Ok(r) = get("/metrics").await
            && r.status().is_success()
            && let Ok(text) = r.text().await
        {
            let read = read_metrics(&text);
            waiting.extend(read.waiting);
            kv.extend(read.kv_share);
        }
    }
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    EngineLoad {
        readings,
        slots,
        busy_share: mean(&busy),
        waiting: mean(&waiting),
        kv_share: mean(&kv),
    }
}

/// One reading of a Prometheus text page.
#[derive(Debug, Default, PartialEq)]
pub struct Metrics {
    pub waiting: Option<f64>,
    pub kv_share: Option<f64>,
}

/// Requests waiting and K/V cache use from llama-server's, vLLM's or
/// SGLang's metric names; others are ignored.
pub fn read_metrics(text: &str) -> Metrics {
    let mut m = Metrics::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let mut parts = line.split_whitespace();
        let (Some(name), Some(value)) = (parts.next(), parts.next()) else { continue };
        let Ok(value) = value.parse::<f64>() else { continue };
        // A labelled series counts by its name.
        let name = name.split('{').next().unwrap_or(name);
        match name {
            "llamacpp:requests_deferred"
            | "vllm:num_requests_waiting"
            | "sglang:num_queue_reqs" => {
                *m.waiting.get_or_insert(0.0) += value;
            }
            "llamacpp:kv_cache_usage_ratio"
            | "vllm:gpu_cache_usage_perc"
            | "vllm:kv_cache_usage_perc" => {
                m.kv_share = Some(value);
            }
            "sglang:token_usage" => m.kv_share = Some(value),
            _ => {}
        }
    }
    m
}

/// What limits a step that missed its objective (or ran at the client's
/// limit), in a sentence; `None` where it held and nothing was full.
pub fn binding(step: &LoadStep, slo: &Slo, client_limited: bool) -> Option<String> {
    let e = step.engine.as_ref();
    let busy = e.and_then(|e| e.busy_share);
    let waiting = e.and_then(|e| e.waiting).unwrap_or(0.0);
    let rate = step.rate;
    if client_limited {
        return Some(format!(
            "client-bound: at {rate:.2}/s the load generator's limit of requests in flight was reached"
        ));
    }
    if let Some(kv) = e.and_then(|e| e.kv_share).filter(|k| *k >= 0.9) {
        return Some(format!(
            "K/V cache full: at {rate:.2}/s it was {:.0} % used; a smaller or quantized cache, or less context per slot, would let more requests run",
            kv * 100.0
        ));
    }
    if let (Some(busy), Some(slots)) = (busy, e.and_then(|e| e.slots))
        && busy >= 0.9
        && (waiting >= 0.5 || !step.meets_slo)
    {
        return Some(format!(
            "all {slots} slots busy {:.0} % of the time at {rate:.2}/s{}: more `parallel` would help while the K/V cache has room",
            busy * 100.0,
            if waiting > 0.0 { format!(", {waiting:.1} requests waiting") } else { String::new() }
        ));
    }
    if step.meets_slo {
        return None;
    }
    let ttft_missed = step.ttft_ms.is_some_and(|p| slo.ttft_p99_ms.is_some_and(|b| p.p99 > b));
    Some(if ttft_missed {
        format!(
            "prefill-bound: at {rate:.2}/s first tokens wait on prompt processing with slots free"
        )
    } else {
        format!("decode-bound: at {rate:.2}/s tokens come slower than the objective's gap")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engines_metrics_are_read_by_their_names() {
        let llama = "# HELP x\nllamacpp:requests_processing 2\nllamacpp:requests_deferred 3\n";
        assert_eq!(read_metrics(llama), Metrics { waiting: Some(3.0), kv_share: None });
        let vllm = "vllm:num_requests_waiting{model_name=\"m\"} 4.0\nvllm:kv_cache_usage_perc{model_name=\"m\"} 0.95\n";
        assert_eq!(read_metrics(vllm), Metrics { waiting: Some(4.0), kv_share: Some(0.95) });
        assert_eq!(read_metrics("garbage line\nfoo bar\n"), Metrics::default());
    }

    #[test]
    fn what_binds_is_named_from_the_engine_s_account() {
        use super::super::load::Percentiles;
        let slo = Slo { ttft_p99_ms: Some(1000.0), itl_p99_ms: None };
        let step = |meets: bool, ttft: f64, engine: EngineLoad| LoadStep {
            rate: 4.0,
            sent: 100,
            completed: 100,
            errors: 0,
            seconds: 25.0,
            throughput_rps: 4.0,
            output_tps: 100.0,
            ttft_ms: Some(Percentiles { p50: ttft, p90: ttft, p99: ttft }),
            itl_ms: None,
            latency_ms: None,
            cold_ttft_ms: None,
            warm_ttft_ms: None,
            goodput_rps: 4.0,
            meets_slo: meets,
            error: None,
            engine: Some(engine),
            binding: None,
        };
        let busy = EngineLoad {
            readings: 40,
            slots: Some(2),
            busy_share: Some(0.96),
            waiting: Some(3.0),
            kv_share: None,
        };
        let why = binding(&step(false, 5000.0, busy.clone()), &slo, false).unwrap();
        assert!(
            why.starts_with("all 2 slots busy 96 % of the time at 4.00/s, 3.0 requests waiting"),
            "{why}"
        );
        let full = EngineLoad { kv_share: Some(0.97), ..busy.clone() };
        assert!(
            binding(&step(false, 5000.0, full), &slo, false).unwrap().starts_with("K/V cache full")
        );
        let idle = EngineLoad { busy_share: Some(0.3), waiting: Some(0.0), ..busy.clone() };
        assert!(
            binding(&step(false, 5000.0, idle.clone()), &slo, false)
                .unwrap()
                .starts_with("prefill-bound")
        );
        assert!(
            binding(&step(false, 10.0, idle.clone()), &slo, false)
                .unwrap()
                .starts_with("decode-bound")
        );
        assert_eq!(binding(&step(true, 10.0, idle.clone()), &slo, false), None);
        assert!(binding(&step(true, 10.0, idle), &slo, true).unwrap().starts_with("client-bound"));
    }
}
