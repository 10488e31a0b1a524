//! Talking to llama.cpp's `llama-server`: readiness (`/health`), what
//! actually runs (`/props`), and timed streamed completions (`/completion`).

use std::time::{Duration, Instant};

use eventsource_stream::Eventsource;
use futures::StreamExt;
use serde::{Deserialize, Serialize};
use serde_json::json;

use crate::failure::{Failure, FailureKind};
use crate::process::EngineProcess;

/// How often `/health` is asked while the engine loads.
const HEALTH_POLL: Duration = Duration::from_millis(25);

/// Readiness as `/health` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Health {
    /// Nothing answers on the port yet.
    NotListening,
    /// The server answers 503: the model is still loading.
    Loading,
    Ready,
}

/// Asks the health path (llama-server's `/health`) once.
pub async fn health(client: &reqwest::Client, base_url: &str, path: &str) -> Health {
    match client.get(format!("{base_url}{path}")).timeout(Duration::from_secs(2)).send().await {
        Ok(r) if r.status().is_success() => Health::Ready,
        Ok(_) => Health::Loading,
        Err(_) => Health::NotListening,
    }
}

/// Polls the health path until the engine is ready, it exits, or `timeout`
/// passes; each change of readiness is sent on `progress`. Returns how long
/// the load took.
pub async fn wait_ready(
    client: &reqwest::Client,
    base_url: &str,
    health_path: &str,
    process: &EngineProcess,
    timeout: Duration,
    progress: Option<&tokio::sync::watch::Sender<Health>>,
) -> Result<Duration, Failure> {
    let start = Instant::now();
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        tokio::select! {
            exit = process.wait() => {
                return Err(crate::failure::classify_exit(exit, process.tail(60)));
            }
            state = health(client, base_url, health_path) => {
                if let Some(tx) = progress {
                    tx.send_if_modified(|s| std::mem::replace(s, state) != state);
                }
                if state == Health::Ready {
                    return Ok(start.elapsed());
                }
            }
        }
        if tokio::time::Instant::now() >= deadline {
            return Err(Failure {
                kind: FailureKind::LoadTimeout,
                message: format!("no healthy answer from {base_url} within {timeout:?}"),
                log_tail: process.tail(60),
            });
        }
        tokio::time::sleep(HEALTH_POLL).await;
    }
}

/// What the engine says it is running (`/props`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Props {
    /// Context size per slot actually allocated.
    pub n_ctx: Option<u64>,
    pub total_slots: Option<u64>,
    pub build_info: Option<String>,
}

/// Reads `/props`.
pub async fn props(client: &reqwest::Client, base_url: &str) -> Result<Props, reqwest::Error> {
    let v: serde_json::Value =
        client.get(format!("{base_url}/props")).send().await?.error_for_status()?.json().await?;
    Ok(Props {
        n_ctx: v.pointer("/default_generation_settings/n_ctx").and_then(|x| x.as_u64()),
        total_slots: v.get("total_slots").and_then(|x| x.as_u64()),
        build_info: v.get("build_info").and_then(|x| x.as_str()).map(str::to_string),
    })
}

/// Turns text into token ids with the engine's own tokenizer.
pub async fn tokenize(
    client: &reqwest::Client,
    base_url: &str,
    text: &str,
) -> Result<Vec<u32>, reqwest::Error> {
    tokenize_with(client, base_url, text, false).await
}

/// As [`tokenize`], with the model's start-of-text token first where it
/// wants one (`add_special`); special tokens written in the text (a chat
/// template's `<|im_start|>`) are read as themselves.
pub async fn tokenize_with(
    client: &reqwest::Client,
    base_url: &str,
    text: &str,
    add_special: bool,
) -> Result<Vec<u32>, reqwest::Error> {
    #[derive(Deserialize)]
    struct Tokens {
        tokens: Vec<u32>,
    }
    let body = json!({ "content": text, "add_special": add_special, "parse_special": true });
    let t: Tokens = client
        .post(format!("{base_url}/tokenize"))
        .json(&body)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(t.tokens)
}

/// The prompt the model's chat template makes of `messages`
/// (`/apply-template`): exactly what a chat request would feed it.
pub async fn apply_template(
    client: &reqwest::Client,
    base_url: &str,
    messages: &serde_json::Value,
) -> Result<String, reqwest::Error> {
    #[derive(Deserialize)]
    struct Rendered {
        prompt: String,
    }
    let r: Rendered = client
        .post(format!("{base_url}/apply-template"))
        .json(&json!({ "messages": messages }))
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    Ok(r.prompt)
}

/// llama-server's own `timings` block of a finished completion.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EngineTimings {
    pub prompt_n: u32,
    pub prompt_ms: f64,
    pub prompt_per_second: f64,
    pub predicted_n: u32,
    pub predicted_ms: f64,
    pub predicted_per_second: f64,
    #[serde(default)]
    pub draft_n: Option<u32>,
    #[serde(default)]
    pub draft_n_accepted: Option<u32>,
    /// Measured by Tunebook on the client, for servers that report no
    /// timings of their own (OpenAI-compatible ones).
    #[serde(default)]
    pub from_client: bool,
}

/// One timed completion.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CompletionSample {
    /// Request sent to first generated token, on the client.
    pub ttft_ms: f64,
    /// Request sent to the final event, on the client.
    pub total_ms: f64,
    /// Decode speed seen by the client: tokens after the first over the
    /// time from the first token to the end.
    pub client_decode_tps: Option<f64>,
    /// The engine's own account.
    pub timings: EngineTimings,
}

/// What to send as the prompt.
#[derive(Debug, Clone, Copy)]
pub enum Prompt<'a> {
    /// Token ids: an exact length, whatever the tokenizer.
    Tokens(&'a [u32]),
    /// Text, tokenized by the engine.
    Text(&'a str),
}

/// One completion request: greedy, seeded, the prompt cache off.
#[derive(Debug, Clone, Copy)]
pub struct CompletionRequest<'a> {
    pub prompt: Prompt<'a>,
    /// Most tokens to generate.
    pub n_predict: u32,
    /// Generate exactly `n_predict` tokens, ignoring end-of-text (speed
    /// probes); otherwise stop where the model stops (quality probes).
    pub ignore_eos: bool,
}

/// A finished completion: its timing and the text it produced.
#[derive(Debug, Clone, PartialEq)]
pub struct Completion {
    pub sample: CompletionSample,
    pub text: String,
    /// The sampling settings the engine says it used (llama-server's
    /// `generation_settings`), where it reports them.
    pub settings: Option<serde_json::Value>,
}

/// Adds request-time settings to a request body (they win over its own).
pub(crate) fn with_fields(
    body: &mut serde_json::Value,
    fields: &serde_json::Map<String, serde_json::Value>,
) {
    if let Some(body) = body.as_object_mut() {
        body.extend(fields.clone());
    }
}

/// Sends one streamed completion and times it on the client: the first
/// token from the stream, the end from the final event, which also carries
/// the engine's own timings.
pub async fn completion(
    client: &reqwest::Client,
    base_url: &str,
    request: &CompletionRequest<'_>,
    extra: &serde_json::Map<String, serde_json::Value>,
    timeout: Duration,
) -> Result<Completion, Failure> {
    let probe_err = |kind, message: String| Failure::new(kind, message);
    let prompt = match request.prompt {
        Prompt::Tokens(t) => json!(t),
        Prompt::Text(t) => json!(t),
    };
    let mut body = json!({
        "prompt": prompt,
        "n_predict": request.n_predict,
        "stream": true,
        "cache_prompt": false,
        "ignore_eos": request.ignore_eos,
        "temperature": 0.0,
        "seed": 42,
    });
    with_fields(&mut body, extra);
    let run = async {
        let sent = Instant::now();
        let response = client
            .post(format!("{base_url}/completion"))
            .json(&body)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| {
                probe_err(FailureKind::ProbeFailed, format!("completion request: {}", chain(&e)))
            })?;
        let mut events = response.bytes_stream().eventsource();
        let mut first_token: Option<Duration> = None;
        let mut text = String::new();
        while let Some(event) = events.next().await {
            let event = event.map_err(|e| {
                probe_err(FailureKind::ProbeFailed, format!("completion stream: {e}"))
            })?;
            let chunk: serde_json::Value = serde_json::from_str(&event.data).map_err(|e| {
                probe_err(FailureKind::ProbeFailed, format!("completion stream chunk: {e}"))
            })?;
            let now = sent.elapsed();
            if let Some(piece) = chunk.get("content").and_then(|c| c.as_str()) {
                text.push_str(piece);
            }
            if !chunk.get("stop").and_then(|s| s.as_bool()).unwrap_or(false) {
                first_token.get_or_insert(now);
                continue;
            }
            let timings: EngineTimings =
                serde_json::from_value(chunk.get("timings").cloned().unwrap_or_default())
                    .map_err(|e| probe_err(FailureKind::ProbeFailed, format!("timings: {e}")))?;
            let ttft = first_token.unwrap_or(now);
            let decode_time = (now - ttft).as_secs_f64();
            let client_decode_tps = (timings.predicted_n > 1 && decode_time > 0.0)
                .then(|| (timings.predicted_n - 1) as f64 / decode_time);
            let sample = CompletionSample {
                ttft_ms: ttft.as_secs_f64() * 1e3,
                total_ms: now.as_secs_f64() * 1e3,
                client_decode_tps,
                timings,
            };
            let settings = chunk.get("generation_settings").cloned();
            return Ok(Completion { sample, text, settings });
        }
        Err(probe_err(FailureKind::ProbeFailed, "stream ended without a final event".into()))
    };
    tokio::time::timeout(timeout, run).await.unwrap_or_else(|_| {
        Err(probe_err(FailureKind::ProbeTimeout, format!("no complete answer within {timeout:?}")))
    })
}

/// An error with its causes, `outer: inner: innermost`.
pub fn chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// Plain text to build prompts of a given length from.
pub const FILLER_TEXT: &str = "Local inference engines trade speed, memory and quality against each \
    other through their settings. A careful study measures each configuration, repeats the \
    measurement, and keeps only what is better beyond the noise. ";
