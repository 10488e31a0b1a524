//! Asking a model a question the way its users do: through its chat
//! template where it has one (llama-server renders the model's own template
//! with `/apply-template`; OpenAI-compatible servers take the messages), as
//! a raw completion where it has none, and with a thinking model's
//! reasoning kept apart from the answer it gives. The quality and
//! context-recall probes ask this way.

use std::path::Path;
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::engine::RunningEngine;
use crate::failure::{Failure, FailureKind};
use crate::llama_server::{self, CompletionRequest, Prompt};
use crate::profile::Api;

/// How a question reached the model.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum PromptStyle {
    /// As a plain completion of `QUESTION\nAnswer:`: the model has no chat
    /// template (or the result was stored before templates were used).
    #[default]
    Raw,
    /// As a user's message in the model's chat template.
    Chat,
}

/// What a user's message is wrapped in before the model reads it.
#[derive(Debug, Clone, PartialEq)]
pub struct Frame {
    pub style: PromptStyle,
    /// Text before and after the message (the rendered template around it;
    /// nothing and `\nAnswer:` for a raw completion).
    pub prefix: String,
    pub suffix: String,
    /// Whether the model may think before answering (its template speaks
    /// of `<think>`); it then gets a larger token budget.
    pub thinks: bool,
    /// Why the model is asked raw, where it is.
    pub note: Option<String>,
}

/// A [`Frame`] as token ids.
#[derive(Debug, Clone, PartialEq)]
pub struct TokenFrame {
    pub prefix: Vec<u32>,
    pub suffix: Vec<u32>,
}

impl TokenFrame {
    /// Tokens the frame adds to a message.
    pub fn len(&self) -> usize {
        self.prefix.len() + self.suffix.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// A model's answer to one question.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// What it answered, its thinking left out.
    pub text: String,
    /// What it thought before answering, where it did.
    pub thinking: Option<String>,
    /// Tokens it spent thinking, where it did and they could be counted.
    pub thinking_tokens: Option<u32>,
    /// Tokens of the prompt as the engine read it.
    pub prompt_tokens: u32,
    pub ms: f64,
}

/// A marker no template contains, to find where the message goes.
const MARK: &str = "\u{1F9ED}TUNEBOOK-MESSAGE\u{1F9ED}";

/// The model file's own chat template (`tokenizer.chat_template`), if any.
pub fn template_of(model: &Path) -> Option<String> {
    let gguf = crate::gguf::read::read(model).ok()?;
    let template = gguf.metadata.get("tokenizer.chat_template")?.as_str()?.trim().to_string();
    (!template.is_empty()).then_some(template)
}

/// The raw frame: the message, then `Answer:` for the model to complete.
pub fn raw_frame(note: impl Into<String>) -> Frame {
    Frame {
        style: PromptStyle::Raw,
        prefix: String::new(),
        suffix: "\nAnswer:".into(),
        thinks: false,
        note: Some(note.into()),
    }
}

/// Splits a reply into its thinking and its answer: the answer is what
/// follows the last `</think>`; a reply whose `<think>` never closed was
/// cut off while thinking and has no answer. A template that opens the
/// thinking itself leaves a reply with only the closing tag.
pub fn split_thinking(reply: &str) -> (Option<String>, String) {
    if let Some(end) = reply.rfind("</think>") {
        let before = &reply[..end];
        let thinking = before.find("<think>").map_or(before, |s| &before[s + "<think>".len()..]);
        let answer = reply[end + "</think>".len()..].trim_start();
        return (Some(thinking.trim().to_string()), answer.to_string());
    }
    if let Some(start) = reply.find("<think>") {
        let thinking = reply[start + "<think>".len()..].trim();
        return (Some(thinking.to_string()), reply[..start].trim_start().to_string());
    }
    (None, reply.to_string())
}

impl RunningEngine {
    /// How this engine's model takes a user's message: its chat template
    /// where it has one, else a raw completion (and why).
    pub async fn frame(&self) -> Result<Frame, Failure> {
        if self.spec.api == Api::OpenAi {
            // The server applies whatever template it serves the model with.
            let frame = Frame {
                style: PromptStyle::Chat,
                prefix: String::new(),
                suffix: String::new(),
                thinks: false,
                note: None,
            };
            return Ok(frame);
        }
        let template = match self.spec.model.clone() {
            Some(model) => {
                tokio::task::spawn_blocking(move || template_of(&model)).await.ok().flatten()
            }
            None => None,
        };
        let Some(template) = template else {
            return Ok(raw_frame("the model file has no chat template: asked as a raw completion"));
        };
        let messages = json!([{ "role": "user", "content": MARK }]);
        let rendered = match llama_server::apply_template(&self.client, &self.base_url, &messages)
            .await
        {
            Ok(r) => r,
            // An older build without the endpoint, or a template it cannot
            // render: the questions still get asked, and the trial says how.
            Err(e) if e.is_status() => {
                let why = llama_server::chain(&e);
                return Ok(raw_frame(format!(
                    "the engine did not render the chat template ({why}): asked as a raw completion"
                )));
            }
            Err(e) => {
                let why = format!("apply-template: {}", llama_server::chain(&e));
                return Err(self.explain(Failure::new(FailureKind::ProbeFailed, why)).await);
            }
        };
        let Some((prefix, suffix)) = rendered.split_once(MARK) else {
            return Ok(raw_frame("the chat template dropped the message: asked raw"));
        };
        Ok(Frame {
            style: PromptStyle::Chat,
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
            thinks: template.contains("<think>") || suffix.trim_end().ends_with("<think>"),
            note: None,
        })
    }

    /// Asks `message` in `frame`, greedily, at most `max_tokens` generated.
    pub async fn ask(
        &self,
        frame: &Frame,
        message: &str,
        max_tokens: u32,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        if self.spec.api == Api::OpenAi && frame.style == PromptStyle::Chat {
            return self.ask_chat(message, max_tokens, timeout).await;
        }
        let prompt = format!("{}{message}{}", frame.prefix, frame.suffix);
        self.complete(Prompt::Text(&prompt), max_tokens, timeout).await
    }

    /// The frame's text as token ids (llama-server), the model's start
    /// token first where it wants one, for prompts of exact lengths.
    pub async fn token_frame(&self, frame: &Frame) -> Result<TokenFrame, Failure> {
        Ok(TokenFrame {
            prefix: self.tokenize_special(&frame.prefix, true).await?,
            suffix: self.tokenize_special(&frame.suffix, false).await?,
        })
    }

    /// Asks with the prompt given as token ids: `message` is the user's
    /// message already tokenized, put between the frame's tokens.
    pub async fn ask_tokens(
        &self,
        frame: &TokenFrame,
        message: &[u32],
        max_tokens: u32,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        let mut prompt = frame.prefix.clone();
        prompt.extend_from_slice(message);
        prompt.extend_from_slice(&frame.suffix);
        self.complete(Prompt::Tokens(&prompt), max_tokens, timeout).await
    }

    /// One greedy completion that stops where the model stops, as an answer.
    async fn complete(
        &self,
        prompt: Prompt<'_>,
        max_tokens: u32,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        let request = CompletionRequest { prompt, n_predict: max_tokens, ignore_eos: false };
        let done = self.generate(&request, timeout).await?;
        let prompt_tokens = done.sample.timings.prompt_n;
        self.answer_of(&done.text, prompt_tokens, done.sample.total_ms).await
    }

    /// Frame text as token ids, its special tokens read as such; `start`
    /// adds the model's start-of-text token where it wants one.
    async fn tokenize_special(&self, text: &str, start: bool) -> Result<Vec<u32>, Failure> {
        if text.is_empty() && !start {
            return Ok(vec![]);
        }
        let tokens = llama_server::tokenize_with(&self.client, &self.base_url, text, start).await;
        match tokens {
            Ok(t) => Ok(t),
            Err(e) => {
                let why = format!("tokenize: {}", llama_server::chain(&e));
                Err(self.explain(Failure::new(FailureKind::ProbeFailed, why)).await)
            }
        }
    }

    async fn answer_of(&self, reply: &str, prompt_tokens: u32, ms: f64) -> Result<Answer, Failure> {
        let (thinking, text) = split_thinking(reply);
        let thinking_tokens = match &thinking {
            Some(t) => self.tokenize(t).await?.map(|t| t.len() as u32),
            None => None,
        };
        Ok(Answer { text, thinking, thinking_tokens, prompt_tokens, ms })
    }

    /// One non-streamed `/v1/chat/completions` request; a reasoning model's
    /// `reasoning_content` is its thinking.
    async fn ask_chat(
        &self,
        message: &str,
        max_tokens: u32,
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        let fail = |m: String| Failure::new(FailureKind::ProbeFailed, m);
        let mut body = json!({
            "messages": [{ "role": "user", "content": message }],
            "max_tokens": max_tokens,
            "temperature": 0.0,
            "seed": 42,
        });
        if !self.model_id.is_empty() {
            body["model"] = json!(self.model_id);
        }
        llama_server::with_fields(&mut body, &self.spec.request);
        let sent = Instant::now();
        let request = self
            .client
            .post(format!("{}/v1/chat/completions", self.base_url))
            .json(&body)
            .timeout(timeout)
            .send();
        let reply: Result<Value, Failure> = async {
            let response = request.await.map_err(|e| {
                if e.is_timeout() {
                    let why = format!("no complete answer within {timeout:?}");
                    Failure::new(FailureKind::ProbeTimeout, why)
                } else {
                    fail(format!("chat request: {}", llama_server::chain(&e)))
                }
            })?;
            let status = response.status();
            if !status.is_success() {
                let text: String =
                    response.text().await.unwrap_or_default().chars().take(500).collect();
                return Err(fail(format!("chat: {status}: {text}")));
            }
            response.json().await.map_err(|e| fail(format!("chat reply: {e}")))
        }
        .await;
        let reply = match reply {
            Ok(r) => r,
            Err(f) => return Err(self.explain(f).await),
        };
        let ms = sent.elapsed().as_secs_f64() * 1e3;
        let text = |p: &str| reply.pointer(p).and_then(Value::as_str).map(str::to_string);
        let count = |p: &str| reply.pointer(p).and_then(Value::as_u64).map(|n| n as u32);
        let content = text("/choices/0/message/content").unwrap_or_default();
        let reasoning = text("/choices/0/message/reasoning_content")
            .or_else(|| text("/choices/0/message/reasoning"))
            .filter(|r| !r.trim().is_empty());
        let (inline, answer) = split_thinking(&content);
        let thinking = reasoning.or(inline);
        let thinking_tokens =
            match (&thinking, count("/usage/completion_tokens_details/reasoning_tokens")) {
                (Some(_), Some(n)) => Some(n),
                (Some(t), None) => self.tokenize(t).await?.map(|t| t.len() as u32),
                (None, _) => None,
            };
        Ok(Answer {
            text: answer,
            thinking,
            thinking_tokens,
            prompt_tokens: count("/usage/prompt_tokens").unwrap_or(0),
            ms,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_is_kept_apart_from_the_answer() {
        let (t, a) = split_thinking("<think>17 + 25: 7 + 5 = 12, carry…</think>\n\n42");
        assert_eq!((t.as_deref(), a.as_str()), (Some("17 + 25: 7 + 5 = 12, carry…"), "42"));
        // The template opened the thinking: only the closing tag comes back.
        let (t, a) = split_thinking("hmm, France… Paris.\n</think>\nParis");
        assert_eq!((t.as_deref(), a.as_str()), (Some("hmm, France… Paris."), "Paris"));
        // Cut off while thinking: no answer, whatever it was about to say.
        let (t, a) = split_thinking("<think>the answer might be 144");
        assert_eq!((t.as_deref(), a.as_str()), (Some("the answer might be 144"), ""));
        assert_eq!(split_thinking(" Paris"), (None, " Paris".to_string()));
    }

    #[test]
    fn a_model_without_a_template_is_asked_raw_and_says_why() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        crate::gguf::write_random_llama(&path, &crate::gguf::LlamaSpec::tiny(), 1).unwrap();
        assert_eq!(template_of(&path), None);
        let frame = raw_frame("no template");
        assert_eq!((frame.style, frame.suffix.as_str()), (PromptStyle::Raw, "\nAnswer:"));
        assert_eq!(template_of(&dir.path().join("missing.gguf")), None);
    }
}
