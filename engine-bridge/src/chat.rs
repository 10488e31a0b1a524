//! One streamed chat completion (`/v1/chat/completions`, which llama-server,
//! vLLM and SGLang all serve), timed on the client chunk by chunk: time to
//! first token, the gaps between tokens after it, and the whole latency;
//! with how much of the prompt the engine found in its cache.

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde_json::{Value, json};

use crate::failure::{Failure, FailureKind};
use crate::llama_server::chain;
use crate::workloads::Request;

/// What a client saw of one chat request.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatSample {
    /// Sent to first generated text.
    pub ttft_ms: f64,
    /// Between successive pieces of text after the first (inter-token
    /// latency: one token a piece where the engine streams token by token).
    pub gaps_ms: Vec<f64>,
    /// Sent to the final event.
    pub total_ms: f64,
    pub prompt_tokens: Option<u32>,
    pub completion_tokens: Option<u32>,
    /// Prompt tokens the engine took from its cache (llama-server's
    /// `cache_n`, OpenAI's `cached_tokens`), where it says.
    pub cached_tokens: Option<u32>,
}

/// What a chat request needs of a running engine, cheap to clone into
/// each of many requests in flight.
#[derive(Debug, Clone)]
pub struct ChatClient {
    pub(crate) client: reqwest::Client,
    pub(crate) base_url: String,
    pub(crate) model: String,
    pub(crate) extra: serde_json::Map<String, Value>,
}

impl ChatClient {
    pub async fn chat(&self, request: &Request, timeout: Duration) -> Result<ChatSample, Failure> {
        chat(&self.client, &self.base_url, &self.model, request, &self.extra, timeout).await
    }
}

/// Sends `request` to the chat endpoint at `base_url`; `model` names the
/// served model where the server needs it, `extra` adds request-time
/// settings.
pub async fn chat(
    client: &reqwest::Client,
    base_url: &str,
    model: &str,
    request: &Request,
    extra: &serde_json::Map<String, Value>,
    timeout: Duration,
) -> Result<ChatSample, Failure> {
    let fail = |m: String| Failure::new(FailureKind::ProbeFailed, m);
    let mut body = json!({
        "messages": request.messages,
        "max_tokens": request.max_tokens,
        "temperature": 0.0,
        "stream": true,
        "stream_options": { "include_usage": true },
        // Exactly the tokens asked for, where the server honours it.
        "ignore_eos": true,
    });
    if !model.is_empty() {
        body["model"] = json!(model);
    }
    crate::llama_server::with_fields(&mut body, extra);
    let run = async {
        let sent = Instant::now();
        let response = client
            .post(format!("{base_url}/v1/chat/completions"))
            .json(&body)
            .send()
            .await
            .map_err(|e| fail(format!("chat request: {}", chain(&e))))?;
        if !response.status().is_success() {
            let status = response.status();
            let text: String =
                response.text().await.unwrap_or_default().chars().take(500).collect();
            return Err(fail(format!("chat: {status}: {text}")));
        }
        let mut events = response.bytes_stream().eventsource();
        let (mut first, mut last, mut gaps) = (None::<Duration>, Duration::ZERO, Vec::new());
        let (mut usage, mut timings) = (None::<Value>, None::<Value>);
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| fail(format!("chat stream: {e}")))?;
            if event.data.trim() == "[DONE]" {
                break;
            }
            let chunk: Value = serde_json::from_str(&event.data)
                .map_err(|e| fail(format!("chat stream chunk: {e}")))?;
            let piece = chunk.pointer("/choices/0/delta/content").and_then(Value::as_str);
            if piece.is_some_and(|p| !p.is_empty()) {
                let now = sent.elapsed();
                if first.is_some() {
                    gaps.push((now - last).as_secs_f64() * 1e3);
                }
                first.get_or_insert(now);
                last = now;
            }
            if let Some(u) = chunk.get("usage").filter(|u| !u.is_null()) {
                usage = Some(u.clone());
            }
            if let Some(t) = chunk.get("timings").filter(|t| !t.is_null()) {
                timings = Some(t.clone());
            }
        }
        let total = sent.elapsed();
        let count = |v: &Option<Value>, pointer: &str| {
            v.as_ref().and_then(|v| v.pointer(pointer)).and_then(Value::as_u64).map(|n| n as u32)
        };
        Ok(ChatSample {
            ttft_ms: first.unwrap_or(total).as_secs_f64() * 1e3,
            gaps_ms: gaps,
            total_ms: total.as_secs_f64() * 1e3,
            prompt_tokens: count(&usage, "/prompt_tokens"),
            completion_tokens: count(&usage, "/completion_tokens"),
            cached_tokens: count(&timings, "/cache_n")
                .or_else(|| count(&usage, "/prompt_tokens_details/cached_tokens")),
        })
    };
    tokio::time::timeout(timeout, run).await.unwrap_or_else(|_| {
        Err(Failure::new(
            FailureKind::ProbeTimeout,
            format!("no complete answer within {timeout:?}"),
        ))
    })
}
