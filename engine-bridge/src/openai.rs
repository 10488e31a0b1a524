//! Talking to OpenAI-compatible servers (llama-cpp-python, vLLM, SGLang,
//! custom engines): streamed `/v1/completions`, timed on the client, since
//! these servers report no timings of their own.

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::failure::{Failure, FailureKind};
use crate::llama_server::{
    Completion, CompletionRequest, CompletionSample, EngineTimings, Prompt, chain,
};

/// The id of the first model the server lists (`GET /v1/models`), and its
/// context length where the server reports one (vLLM's `max_model_len`).
pub async fn first_model(
    client: &reqwest::Client,
    base_url: &str,
) -> Option<(String, Option<u64>)> {
    let v: Value =
        client.get(format!("{base_url}/v1/models")).send().await.ok()?.json().await.ok()?;
    let m = v.pointer("/data/0")?;
    Some((m.get("id")?.as_str()?.to_string(), m.get("max_model_len").and_then(Value::as_u64)))
}

/// Token ids of `text` from whichever tokenize endpoint the server has
/// (vLLM's `/tokenize`, llama-cpp-python's `/extras/tokenize`), or `None`.
pub async fn tokenize(
    client: &reqwest::Client,
    base_url: &str,
    model: &str,
    text: &str,
) -> Option<Vec<u32>> {
    let tries = [
        // vLLM reads `prompt`, llama-server `content`.
        (
            format!("{base_url}/tokenize"),
            json!({ "model": model, "prompt": text, "content": text }),
        ),
        (format!("{base_url}/extras/tokenize"), json!({ "input": text })),
    ];
    for (url, body) in tries {
        let Ok(r) = client.post(url).json(&body).send().await else { continue };
        if !r.status().is_success() {
            continue;
        }
        let Ok(v) = r.json::<Value>().await else { continue };
        if let Some(tokens) = v.get("tokens").and_then(Value::as_array) {
            return Some(tokens.iter().filter_map(|t| t.as_u64().map(|t| t as u32)).collect());
        }
    }
    None
}

/// One streamed completion, timed on the client: time to first token from
/// the first text chunk, prefill speed as prompt tokens over that time,
/// decode speed over the rest.
pub async fn completion(
    client: &reqwest::Client,
    base_url: &str,
    model: &str,
    request: &CompletionRequest<'_>,
    extra: &serde_json::Map<String, Value>,
    timeout: Duration,
) -> Result<Completion, Failure> {
    let probe_err = |kind, message: String| Failure::new(kind, message);
    let (prompt, known_prompt_n) = match request.prompt {
        Prompt::Tokens(t) => (json!(t), Some(t.len() as u32)),
        Prompt::Text(t) => (json!(t), None),
    };
    let mut body = json!({
        "model": model,
        "prompt": prompt,
        "max_tokens": request.n_predict,
        "temperature": 0.0,
        "seed": 42,
        "stream": true,
        "stream_options": { "include_usage": true },
    });
    if request.ignore_eos {
        // vLLM and SGLang honour it; others ignore it.
        body["ignore_eos"] = json!(true);
    }
    crate::llama_server::with_fields(&mut body, extra);
    let run = async {
        let sent = Instant::now();
        let response = client
            .post(format!("{base_url}/v1/completions"))
            .json(&body)
            .send()
            .await
            .map_err(|e| {
            probe_err(FailureKind::ProbeFailed, format!("completion request: {}", chain(&e)))
        })?;
        if !response.status().is_success() {
            let status = response.status();
            let text = response.text().await.unwrap_or_default();
            return Err(probe_err(
                FailureKind::ProbeFailed,
                format!("completion: {status}: {text}"),
            ));
        }
        let mut events = response.bytes_stream().eventsource();
        let (mut first, mut last) = (None::<Duration>, Duration::ZERO);
        let (mut text, mut chunks, mut usage) = (String::new(), 0u32, None::<Value>);
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| {
                probe_err(FailureKind::ProbeFailed, format!("completion stream: {e}"))
            })?;
            if event.data.trim() == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(&event.data).map_err(|e| {
                probe_err(FailureKind::ProbeFailed, format!("completion stream chunk: {e}"))
            })?;
            let piece = chunk.pointer("/choices/0/text").and_then(Value::as_str);
            if let Some(piece) = piece.filter(|p| !p.is_empty()) {
                let now = sent.elapsed();
                first.get_or_insert(now);
                last = now;
                chunks += 1;
                text.push_str(piece);
            }
            if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
                usage = Some(u.clone());
            }
        }
        let total = sent.elapsed();
        let count = |key: &str| usage.as_ref().and_then(|u| u.get(key)).and_then(Value::as_u64);
        let predicted_n = count("completion_tokens").map_or(chunks, |n| n as u32);
        let prompt_n = count("prompt_tokens").map(|n| n as u32).or(known_prompt_n).unwrap_or(0);
        let ttft = first.unwrap_or(total);
        let decode = (last.saturating_sub(ttft)).as_secs_f64();
        let per_second = |n: f64, secs: f64| if secs > 0.0 { n / secs } else { f64::NAN };
        let decode_tps = per_second(predicted_n.saturating_sub(1) as f64, decode);
        let timings = EngineTimings {
            prompt_n,
            prompt_ms: ttft.as_secs_f64() * 1e3,
            prompt_per_second: per_second(prompt_n as f64, ttft.as_secs_f64()),
            predicted_n,
            predicted_ms: decode * 1e3,
            predicted_per_second: decode_tps,
            draft_n: None,
            draft_n_accepted: None,
            from_client: true,
        };
        let sample = CompletionSample {
            ttft_ms: ttft.as_secs_f64() * 1e3,
            total_ms: total.as_secs_f64() * 1e3,
            client_decode_tps: decode_tps.is_finite().then_some(decode_tps),
            timings,
        };
        Ok(Completion { sample, text, settings: None })
    };
    tokio::time::timeout(timeout, run).await.unwrap_or_else(|_| {
        Err(probe_err(FailureKind::ProbeTimeout, format!("no complete answer within {timeout:?}")))
    })
}
