//! Context recall ("needle in a haystack"): fill the context to a target
//! size with filler text, plant a fact at a chosen depth, and ask for it,
//! as a user's message in the model's chat template (see [`crate::ask`]);
//! the template's own tokens count toward the size.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::ask::PromptStyle;
use crate::engine::RunningEngine;
use crate::failure::Failure;

const FILLER: &str = "The river bends twice before it reaches the old mill. Farmers bring \
    their grain in autumn, when the water runs high. The miller keeps a ledger of every sack, \
    written in a careful hand. Children watch the wheel turn from the wooden bridge. In winter \
    the pond freezes and the village skates on it until the thaw. A baker across the square \
    sells bread made from the mill's flour, and the smell fills the street each morning. ";

/// Recall at each size and depth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct ContextProbe {
    /// Prompt sizes in tokens.
    pub sizes: Vec<usize>,
    /// Where the fact goes, as a fraction of the filler (0 = start, 1 = end).
    pub depths: Vec<f64>,
    pub max_tokens: u32,
    /// Tokens a thinking model may spend before its answer, on top of
    /// `max_tokens`.
    pub thinking_budget: u32,
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
}

impl Default for ContextProbe {
    fn default() -> Self {
        Self {
            sizes: vec![1024, 4096],
            depths: vec![0.1, 0.5, 0.9],
            max_tokens: 16,
            thinking_budget: 2048,
            request_timeout: Duration::from_secs(600),
        }
    }
}

/// One size and depth.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RecallPoint {
    pub size: usize,
    pub depth: f64,
    pub passed: bool,
    /// Tokens the engine reports it read.
    pub prompt_tokens: u32,
    pub answer: String,
    pub ms: f64,
    /// Set when this size could not be measured.
    pub skipped: Option<String>,
    /// How the question reached the model: its chat template, or raw.
    #[serde(default)]
    pub style: PromptStyle,
}

/// The fact planted for a size and depth: a number that appears nowhere else.
pub fn passphrase(size: usize, depth: f64) -> String {
    let seed =
        (size as u64).wrapping_mul(2654435761) ^ ((depth * 1000.0) as u64).wrapping_mul(40503);
    format!("{}", 1_000_000 + seed % 9_000_000)
}

impl ContextProbe {
    pub async fn run(
        &self,
        engine: &RunningEngine,
        n_ctx: Option<u64>,
    ) -> Result<Vec<RecallPoint>, Failure> {
        const QUESTION: &str = "\n\nWhat is the secret passphrase mentioned above? \
             Answer with the passphrase only.";
        let count = |text: String| async move { engine.tokenize(&text).await };
        let Some(question) = count(QUESTION.into()).await? else {
            let why = "the engine offers no tokenizer to size prompts with".to_string();
            return Ok(self
                .points()
                .map(|(size, depth)| skipped(size, depth, why.clone()))
                .collect());
        };
        let frame = engine.frame().await?;
        let tokens_frame = match engine.takes_tokens() {
            true => Some(engine.token_frame(&frame).await?),
            false => None,
        };
        let overhead = tokens_frame.as_ref().map_or(0, |f| f.len());
        let max_tokens = match frame.thinks {
            true => self.max_tokens.saturating_add(self.thinking_budget),
            false => self.max_tokens,
        };
        let largest = self.sizes.iter().copied().max().unwrap_or(0);
        let per_copy = count(FILLER.into()).await?.unwrap_or_default().len().max(1);
        let filler_text = FILLER.repeat(largest / per_copy + 2);
        let filler = count(filler_text.clone()).await?.unwrap_or_default();
        // Text prompts (OpenAI-compatible servers) are sized by characters.
        let chars_per_token = FILLER.chars().count() as f64 / per_copy as f64;
        let mut points = Vec::new();
        for (size, depth) in self.points() {
            let code = passphrase(size, depth);
            let needle_text = format!(" The secret passphrase is {code}. ");
            let needle = count(needle_text.clone()).await?.unwrap_or_default();
            let need = size as u64 + max_tokens as u64;
            if let Some(ctx) = n_ctx.filter(|ctx| need > *ctx) {
                points.push(skipped(
                    size,
                    depth,
                    format!("{need} tokens do not fit a context of {ctx}"),
                ));
                continue;
            }
            let Some(fill) = size.checked_sub(needle.len() + question.len() + overhead) else {
                let why = format!("{size} tokens cannot hold the fact and question");
                points.push(skipped(size, depth, why));
                continue;
            };
            // The engine's tokenizer sized the filler; one that counts
            // oddly must not make the prompt read past it.
            if engine.takes_tokens() && fill > filler.len() {
                let why = format!(
                    "the tokenizer gave {} filler tokens, {fill} were needed",
                    filler.len()
                );
                points.push(skipped(size, depth, why));
                continue;
            }
            let answer = match &tokens_frame {
                Some(tokens_frame) => {
                    let at = (fill as f64 * depth.clamp(0.0, 1.0)).round() as usize;
                    let mut message = filler[..at].to_vec();
                    message.extend(&needle);
                    message.extend(&filler[at..fill]);
                    message.extend(&question);
                    engine
                        .ask_tokens(tokens_frame, &message, max_tokens, self.request_timeout)
                        .await?
                }
                None => {
                    let chars: Vec<char> = filler_text.chars().collect();
                    let end = ((fill as f64 * chars_per_token) as usize).min(chars.len());
                    let at = (end as f64 * depth.clamp(0.0, 1.0)) as usize;
                    let message: String = chars[..at].iter().collect::<String>()
                        + &needle_text
                        + &chars[at..end].iter().collect::<String>()
                        + QUESTION;
                    engine.ask(&frame, &message, max_tokens, self.request_timeout).await?
                }
            };
            points.push(RecallPoint {
                size,
                depth,
                passed: answer.text.contains(&code),
                prompt_tokens: answer.prompt_tokens,
                answer: answer.text,
                ms: answer.ms,
                skipped: None,
                style: frame.style,
            });
        }
        Ok(points)
    }

    fn points(&self) -> impl Iterator<Item = (usize, f64)> + '_ {
        self.sizes.iter().flat_map(|&s| self.depths.iter().map(move |&d| (s, d)))
    }
}

fn skipped(size: usize, depth: f64, why: String) -> RecallPoint {
    RecallPoint {
        size,
        depth,
        passed: false,
        prompt_tokens: 0,
        answer: String::new(),
        ms: 0.0,
        skipped: Some(why),
        style: PromptStyle::default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passphrases_differ_by_size_and_depth_and_are_not_in_the_filler() {
        let a = passphrase(1024, 0.1);
        assert_ne!(a, passphrase(1024, 0.5));
        assert_ne!(a, passphrase(4096, 0.1));
        assert_eq!(a.len(), 7);
        assert!(!FILLER.chars().any(|c| c.is_ascii_digit()));
    }
}
