//! Asks a language model behind any OpenAI-compatible endpoint for the next
//! configuration, given the space and the history; checks the answer, and
//! falls back to two-phase search when there is no endpoint or the answer
//! is unusable, saying why in the proposal's note.

use std::fmt::Write as _;
use std::time::Duration;

use async_trait::async_trait;
use engine_bridge::Settings;
use serde_json::{Value, json};

use super::{Proposal, Strategy, TwoPhase};
use crate::space::{Domain, scalar_text};
use crate::study::{Endpoint, Observation, Study};

pub struct Llm {
    pub endpoint: Option<Endpoint>,
    pub seed: u64,
}

/// How long the model may think: a writer on the CPU at a few tokens a
/// second takes minutes for the prose's 700 tokens.
const TIMEOUT: Duration = Duration::from_secs(300);
/// The most recent trials shown to the model.
const SHOWN: usize = 40;

/// The prompt: the space, the goals and the history, and the answer's form.
pub fn prompt(study: &Study, history: &[Observation]) -> String {
    let mut p = String::from(
        "You are tuning an LLM inference engine. Propose the next configuration to measure.\n\nSettings and their allowed values:\n",
    );
    for param in &study.space.params {
        let domain = match &param.domain {
            Domain::Values(v) => format!("one of {}", v.join(", ")),
            Domain::Int { min, max, step, log: false } => {
                format!("an integer from {min} to {max} in steps of {step}")
            }
            Domain::Int { .. } => format!("one of {}", param.domain.grid().join(", ")),
            Domain::Float { min, max, .. } => format!("a number from {min} to {max}"),
        };
        let _ = writeln!(p, "- {}: {domain}", param.name);
    }
    if !study.space.constraints.is_empty() {
        p.push_str("Constraints every configuration must satisfy:\n");
        for c in &study.space.constraints {
            let _ = writeln!(p, "- {}", c.text);
        }
    }
    p.push_str("Objectives:\n");
    for t in &study.objectives {
        let _ = writeln!(p, "- {} ({:?})", t.measure.name(), t.goal);
    }
    p.push_str("Configurations tried so far, with their objective values (none = failed):\n");
    let names: Vec<&str> = study.space.params.iter().map(|p| p.name.as_str()).collect();
    for o in history.iter().rev().take(SHOWN).rev() {
        let config: Vec<String> = names
            .iter()
            .map(|n| format!("{n}={}", o.config.get(*n).map_or("default", |v| v)))
            .collect();
        let values = o.values.as_ref().map_or("none".to_string(), |v| {
            v.iter().map(|x| format!("{x:.4}")).collect::<Vec<_>>().join(", ")
        });
        let _ = writeln!(
            p,
            "- {} -> {values}{}",
            config.join(" "),
            if o.feasible { "" } else { " (out of bounds)" }
        );
    }
    p.push_str(
        "\nAnswer with one JSON object mapping every setting name to its value, untried, and nothing else.",
    );
    p
}

/// The configuration in a model's answer: the first JSON object in it,
/// checked against the space and the history.
pub fn parse_answer(
    study: &Study,
    history: &[Observation],
    answer: &str,
) -> Result<Settings, String> {
    let start = answer.find('{').ok_or("the answer holds no JSON object")?;
    let end =
        answer.rfind('}').filter(|e| *e > start).ok_or("the answer's JSON object is not closed")?;
    let object: serde_json::Map<String, Value> = serde_json::from_str(&answer[start..=end])
        .map_err(|e| format!("the answer's JSON does not parse: {e}"))?;
    let mut config = study.space.fixed.clone();
    for (name, value) in &object {
        config.insert(name.clone(), scalar_text(value).map_err(|e| format!("`{name}`: {e}"))?);
    }
    study.space.check(&config)?;
    if Study::tried(history, &config) {
        return Err("it proposed a configuration already tried".into());
    }
    Ok(config)
}

/// The JSON Schema of an answer: every setting of the space, each within
/// its domain, and nothing else. Engines that constrain decoding to a
/// schema (llama-server, vLLM, SGLang, OpenAI) can then only answer with a
/// configuration of the space; whether it is new and allowed is still
/// checked.
pub fn answer_schema(study: &Study) -> Value {
    let properties: serde_json::Map<String, Value> = study
        .space
        .params
        .iter()
        .map(|param| {
            let schema = match &param.domain {
                Domain::Int { min, max, step: 1, log: false } => {
                    json!({ "type": "integer", "minimum": min, "maximum": max })
                }
                Domain::Float { min, max, .. } => {
                    json!({ "type": "number", "minimum": min, "maximum": max })
                }
                // Listed values, log scales and steps: the grid's values.
                _ => json!({ "enum": param.domain.grid() }),
            };
            (param.name.clone(), schema)
        })
        .collect();
    let required: Vec<&String> = properties.keys().collect();
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

async fn ask(
    endpoint: &Endpoint,
    prompt: &str,
    schema: &Value,
    seed: u64,
) -> Result<String, String> {
    let extra = json!({
        "temperature": 0.0,
        "seed": seed,
        "max_tokens": 512,
        "response_format": {
            "type": "json_schema",
            "json_schema": { "name": "configuration", "schema": schema, "strict": true },
        },
    });
    chat(endpoint, prompt, extra).await.map(|(_, text)| text)
}

/// Sends one user message to `endpoint`'s chat completions, with the
/// request fields in `extra` (sampling, limits, answer format); the model
/// that answered (asked of the endpoint when not named) and its answer.
pub async fn chat(
    endpoint: &Endpoint,
    prompt: &str,
    extra: Value,
) -> Result<(String, String), String> {
    let client = engine_bridge::http::client().build().map_err(|e| e.to_string())?;
    let url = endpoint.url.trim_end_matches('/');
    let model = match &endpoint.model {
        Some(m) => m.clone(),
        None => engine_bridge::openai::first_model(&client, url)
            .await
            .map(|(id, _)| id)
            .ok_or("the endpoint lists no model")?,
    };
    let mut body = json!({
        "model": model,
        "messages": [{ "role": "user", "content": prompt }],
    });
    if let (Some(body), Some(extra)) = (body.as_object_mut(), extra.as_object()) {
        body.extend(extra.clone());
    }
    let mut request =
        client.post(format!("{url}/v1/chat/completions")).timeout(TIMEOUT).json(&body);
    if let Some(key) = endpoint.api_key()? {
        request = request.bearer_auth(key);
    }
    let response = request.send().await.map_err(|e| {
        if e.is_timeout() {
            format!("no answer within {} s", TIMEOUT.as_secs())
        } else {
            format!("the request failed: {}", engine_bridge::llama_server::chain(&e))
        }
    })?;
    let status = response.status();
    if !status.is_success() {
        // The endpoint's own words say why (a prompt over its context…),
        // cut short: it is not ours to trust at length.
        let said = response.text().await.unwrap_or_default();
        let said: String = said.chars().take(300).collect();
        return Err(format!("the request failed: {status}: {said}"));
    }
    let reply: Value = response.json().await.map_err(|e| format!("the reply is not JSON: {e}"))?;
    let text = reply
        .pointer("/choices/0/message/content")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| "the reply has no message".to_string())?;
    Ok((model, text))
}

#[async_trait]
impl Strategy for Llm {
    async fn propose(&self, study: &Study, history: &[Observation]) -> Option<Proposal> {
        let why = match &self.endpoint {
            None => "no endpoint is configured".to_string(),
            Some(endpoint) => {
                match ask(endpoint, &prompt(study, history), &answer_schema(study), self.seed).await
                {
                    Ok(answer) => match parse_answer(study, history, &answer) {
                        Ok(config) => {
                            return Some(Proposal {
                                config,
                                note: "proposed by the language model".into(),
                            });
                        }
                        Err(e) => format!("its answer was unusable: {e}"),
                    },
                    Err(e) => format!("the model could not be asked: {e}"),
                }
            }
        };
        let mut fallback = TwoPhase { seed: self.seed }.propose(study, history).await?;
        fallback.note = format!("{} (language model skipped: {why})", fallback.note);
        Some(fallback)
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing;
    use super::*;

    #[test]
    fn answers_are_checked() {
        let study = testing::study("llm", "");
        let history = vec![];
        let ok = parse_answer(
            &study,
            &history,
            "Sure! {\"threads\": 12, \"batch_size\": 512, \"cache_type_k\": \"q8_0\"} should be fast.",
        )
        .unwrap();
        assert_eq!(ok["threads"], "12");
        let e = |a: &str| parse_answer(&study, &history, a).unwrap_err();
        assert_eq!(e("no idea"), "the answer holds no JSON object");
        assert!(
            e("{\"threads\": 99, \"batch_size\": 512, \"cache_type_k\": \"f16\"}")
                .contains("outside")
        );
        assert!(
            e("{\"threads\": 2, \"cache_type_k\": \"f16\"}").contains("`batch_size` has no value")
        );
        assert!(
            e("{\"threads\": 2, \"batch_size\": 512, \"cache_type_k\": \"f16\", \"mlock\": true}")
                .contains("not a setting of this study")
        );
        assert!(e("{\"threads\": [1]}").contains("not a single value"));
        let schema = answer_schema(&study);
        assert_eq!(
            schema["properties"]["threads"],
            json!({"type": "integer", "minimum": 1, "maximum": 16})
        );
        assert_eq!(schema["required"], json!(["batch_size", "cache_type_k", "threads"]));
        assert_eq!(schema["additionalProperties"], json!(false));
        let p = prompt(&study, &history);
        assert!(
            p.contains("threads: an integer from 1 to 16") && p.contains("decode_tps (Max)"),
            "{p}"
        );
    }

    #[tokio::test]
    async fn without_an_endpoint_it_falls_back_and_says_so() {
        let study = testing::study("llm", "");
        let history = testing::run(&study, 3).await;
        assert_eq!(history.len(), 3);
        let p = Llm { endpoint: None, seed: 1 }.propose(&study, &history).await.unwrap();
        assert!(
            p.note.contains("phase 1") && p.note.contains("no endpoint is configured"),
            "{}",
            p.note
        );
        // An endpoint that is not there: the same fallback, with the reason.
        let port = engine_bridge::free_port().unwrap();
        let endpoint = Endpoint {
            url: format!("http://127.0.0.1:{port}"),
            model: Some("m".into()),
            api_key_env: None,
        };
        let p = Llm { endpoint: Some(endpoint), seed: 1 }.propose(&study, &history).await.unwrap();
        assert!(p.note.contains("could not be asked"), "{}", p.note);
    }
}
