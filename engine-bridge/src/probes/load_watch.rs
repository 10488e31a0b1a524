//! What the engine says of itself while a load step runs, and what binds:
//! llama-server's `/slots` (which slots are busy) and `/metrics` (requests
//! waiting, with `--metrics`), vLLM's and SGLang's `/metrics` (requests
//! running and waiting, K/V cache use), read a few times a second; then the
//! resource that limits the step, named for the reader.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// How often the engine is asked while a step runs.
const EVERY: Duration = Duration::from_millis(250);

/// The engine's own account of a step, averaged over its readings.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
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

/// How a step went, as far as naming what binds needs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Outcome {
    pub rate: f64,
    /// The objective held.
    pub held: bool,
    /// The time to first token missed its bound.
    pub first_token_missed: bool,
    /// Arrivals found the load generator's limit of requests in flight.
    pub client_limited: bool,
}

/// What limits a step that missed its objective (or ran at the client's
/// limit, or filled the engine), in a sentence; `None` where it held and
/// nothing was full.
pub fn binding(engine: Option<&EngineLoad>, o: &Outcome) -> Option<String> {
    let busy = engine.and_then(|e| e.busy_share);
    let waiting = engine.and_then(|e| e.waiting).unwrap_or(0.0);
    let rate = o.rate;
    if o.client_limited {
        return Some(format!(
            "client-bound: at {rate:.2}/s the load generator's limit of requests in flight was reached"
        ));
    }
    if let Some(kv) = engine.and_then(|e| e.kv_share).filter(|k| *k >= 0.9) {
        return Some(format!(
            "K/V cache full: at {rate:.2}/s it was {:.0} % used; a smaller or quantized cache, or less context per slot, would let more requests run",
            kv * 100.0
        ));
    }
    if let (Some(busy), Some(slots)) = (busy, engine.and_then(|e| e.slots))
        && busy >= 0.9
        && (waiting >= 0.5 || !o.held)
    {
        return Some(format!(
            "all {slots} slots busy {:.0} % of the time at {rate:.2}/s{}: more `parallel` would help while the K/V cache has room",
            busy * 100.0,
            if waiting > 0.0 { format!(", {waiting:.1} requests waiting") } else { String::new() }
        ));
    }
    if o.held {
        return None;
    }
    Some(if o.first_token_missed {
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
        let missed =
            Outcome { rate: 4.0, held: false, first_token_missed: true, client_limited: false };
        let busy = EngineLoad {
            readings: 40,
            slots: Some(2),
            busy_share: Some(0.96),
            waiting: Some(3.0),
            kv_share: None,
        };
        let why = binding(Some(&busy), &missed).unwrap();
        assert!(
            why.starts_with("all 2 slots busy 96 % of the time at 4.00/s, 3.0 requests waiting"),
            "{why}"
        );
        let full = EngineLoad { kv_share: Some(0.97), ..busy.clone() };
        assert!(binding(Some(&full), &missed).unwrap().starts_with("K/V cache full"));
        let idle = EngineLoad { busy_share: Some(0.3), waiting: Some(0.0), ..busy };
        assert!(binding(Some(&idle), &missed).unwrap().starts_with("prefill-bound"));
        let slow = Outcome { first_token_missed: false, ..missed };
        assert!(binding(Some(&idle), &slow).unwrap().starts_with("decode-bound"));
        let held = Outcome { held: true, ..missed };
        assert_eq!(binding(Some(&idle), &held), None);
        let limited = Outcome { client_limited: true, ..held };
        assert!(binding(None, &limited).unwrap().starts_with("client-bound"));
    }
}
