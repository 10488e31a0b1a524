//! Quality: known-answer questions scored by keywords and patterns, asked
//! through the model's chat template (see [`crate::ask`]) and answered
//! greedily with a fixed seed so the same configuration gives the same
//! answers, and compared with a baseline configuration's answers. A thinking
//! model's reasoning is left out of what is judged, and counted.

use std::path::Path;
use std::time::Duration;

use regex::RegexBuilder;
use serde::{Deserialize, Serialize};

use super::ProbePlan;
use crate::ask::PromptStyle;
use crate::endpoints::{Endpoint, Endpoints};
use crate::engine::RunningEngine;
use crate::failure::Failure;

/// The built-in suite (`suites/default.toml`).
pub const DEFAULT_SUITE: &str = include_str!("../../suites/default.toml");

/// One known-answer prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Case {
    pub id: String,
    /// The question, as a user would write it to the model.
    pub prompt: String,
    /// Passes if any of these appears.
    #[serde(default)]
    pub any: Vec<String>,
    /// Passes only if all of these appear.
    #[serde(default)]
    pub all: Vec<String>,
    /// Passes only if this pattern matches.
    #[serde(default)]
    pub regex: Option<String>,
    /// Fails if any of these appears.
    #[serde(default)]
    pub must_not: Vec<String>,
    /// Longest answer, so a model cannot run on (a thinking model gets the
    /// probe's `thinking_budget` more).
    #[serde(default = "default_max_tokens")]
    pub max_tokens: u32,
}

fn default_max_tokens() -> u32 {
    64
}

/// A named set of cases.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Suite {
    pub name: String,
    #[serde(default)]
    pub description: String,
    #[serde(rename = "case")]
    pub cases: Vec<Case>,
}

/// A suite that cannot be used, with what is wrong.
#[derive(Debug, thiserror::Error)]
pub enum SuiteError {
    #[error("cannot read suite {path}: {source}")]
    Read { path: String, source: std::io::Error },
    #[error("suite is not valid TOML: {0}")]
    Parse(#[from] toml::de::Error),
    #[error("suite `{suite}`, case `{case}`: {message}")]
    Invalid { suite: String, case: String, message: String },
}

impl Suite {
    /// Parses and checks a suite.
    pub fn parse(text: &str) -> Result<Self, SuiteError> {
        let suite: Suite = toml::from_str(text)?;
        let invalid = |case: &Case, message: String| SuiteError::Invalid {
            suite: suite.name.clone(),
            case: case.id.clone(),
            message,
        };
        if suite.cases.is_empty() {
            return Err(SuiteError::Invalid {
                suite: suite.name.clone(),
                case: "-".into(),
                message: "the suite has no [[case]]".into(),
            });
        }
        let mut ids = std::collections::BTreeSet::new();
        for case in &suite.cases {
            if !ids.insert(case.id.as_str()) {
                return Err(invalid(case, "the id is used twice".into()));
            }
            if case.any.is_empty() && case.all.is_empty() && case.regex.is_none() {
                return Err(invalid(case, "give `any`, `all` or `regex` to score it".into()));
            }
            if let Some(r) = &case.regex {
                RegexBuilder::new(r).build().map_err(|e| invalid(case, format!("regex: {e}")))?;
            }
        }
        Ok(suite)
    }

    /// Reads a suite file.
    pub fn load(path: &Path) -> Result<Self, SuiteError> {
        let text = std::fs::read_to_string(path)
            .map_err(|source| SuiteError::Read { path: path.display().to_string(), source })?;
        Self::parse(&text)
    }

    /// The built-in suite.
    pub fn default_suite() -> Self {
        Self::parse(DEFAULT_SUITE).expect("the built-in suite is valid")
    }
}

impl Case {
    /// Whether an answer passes this case.
    pub fn passes(&self, answer: &str) -> bool {
        let lower = answer.to_lowercase();
        let has = |k: &String| lower.contains(&k.to_lowercase());
        let any = self.any.is_empty() || self.any.iter().any(has);
        let all = self.all.iter().all(has);
        let regex = self.regex.as_ref().is_none_or(|r| {
            RegexBuilder::new(r).case_insensitive(true).build().is_ok_and(|re| re.is_match(answer))
        });
        let clean = !self.must_not.iter().any(has);
        any && all && regex && clean
    }
}

/// Known-answer prompts, one greedy answer each.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct QualityProbe {
    pub suite: Suite,
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub request_timeout: Duration,
    /// Tokens a thinking model may spend before its answer, on top of each
    /// case's `max_tokens`.
    pub thinking_budget: u32,
    /// How long a thinking model's answer may take.
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub thinking_timeout: Duration,
    /// Ask as raw completions even where the model has a chat template
    /// (to see what the template is worth).
    pub raw: bool,
    /// A second model that grades each answer against a rubric.
    pub judge: Option<Judge>,
}

impl Default for QualityProbe {
    fn default() -> Self {
        Self {
            suite: Suite::default_suite(),
            request_timeout: Duration::from_secs(120),
            thinking_budget: 2048,
            thinking_timeout: Duration::from_secs(900),
            raw: false,
            judge: None,
        }
    }
}

/// A judge model behind an OpenAI-compatible endpoint of the server's
/// configuration (see [`crate::endpoints`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Judge {
    /// The name of a configured endpoint.
    pub endpoint: String,
    /// The model id to ask; the endpoint's own choice when absent.
    #[serde(default)]
    pub model: Option<String>,
    /// What a good answer is.
    #[serde(default = "default_rubric")]
    pub rubric: String,
    /// The endpoint itself, looked up in the configuration of the machine
    /// that runs the probe (never read from a plan).
    #[serde(skip)]
    pub resolved: Option<Endpoint>,
}

impl ProbePlan {
    /// The plan with its judge's endpoint looked up in `endpoints`; a judge
    /// whose endpoint is not there says so when it is asked.
    pub fn with_endpoints(mut self, endpoints: &Endpoints) -> Self {
        if let Some(judge) = self.quality.as_mut().and_then(|q| q.judge.as_mut()) {
            judge.resolved = endpoints.get(&judge.endpoint).cloned();
        }
        self
    }
}

fn default_rubric() -> String {
    "A good answer is correct, direct and complete; a wrong or rambling answer is poor.".into()
}

impl Judge {
    /// A grade from 0 to 1 for one answer, or why there is none.
    pub async fn grade(
        &self,
        client: &reqwest::Client,
        case: &Case,
        answer: &str,
        timeout: Duration,
    ) -> Result<f64, String> {
        let endpoint = self.resolved.as_ref().ok_or_else(|| {
            format!("endpoint `{}` is not configured on this machine", self.endpoint)
        })?;
        let url = endpoint.url.trim_end_matches('/');
        let model = match self.model.as_ref().or(endpoint.model.as_ref()) {
            Some(m) => m.clone(),
            None => crate::openai::first_model(client, url)
                .await
                .map(|(id, _)| id)
                .ok_or_else(|| format!("the judge at {url} lists no model"))?,
        };
        let prompt = format!(
            "Grade the answer to the question below.\nRubric: {}\nQuestion: {}\nAnswer: {}\n\
             Reply with one digit from 0 (worst) to 9 (best) and nothing else.",
            self.rubric,
            case.prompt.trim(),
            answer.trim()
        );
        let body = serde_json::json!({
            "model": model,
            "messages": [{ "role": "user", "content": prompt }],
            "max_tokens": 4,
            "temperature": 0.0,
            "seed": 42,
            // llama.cpp servers: force a single digit.
            "grammar": "root ::= [0-9]",
        });
        let mut request = client.post(format!("{url}/v1/chat/completions")).timeout(timeout);
        if let Some(key) = endpoint.api_key()? {
            request = request.bearer_auth(key);
        }
        let reply: serde_json::Value = request
            .json(&body)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .map_err(|e| format!("judge request: {}", crate::llama_server::chain(&e)))?
            .json()
            .await
            .map_err(|e| format!("judge reply: {e}"))?;
        let text =
            reply.pointer("/choices/0/message/content").and_then(|c| c.as_str()).unwrap_or("");
        parse_grade(text).ok_or_else(|| format!("the judge answered {text:?}, not a digit"))
    }
}

/// The first digit of a judge's reply, as a grade from 0 to 1.
pub fn parse_grade(text: &str) -> Option<f64> {
    text.chars().find(|c| c.is_ascii_digit()).and_then(|c| c.to_digit(10)).map(|d| d as f64 / 9.0)
}

/// One case's answer and verdict.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CaseResult {
    pub id: String,
    /// The question as asked (the user's message, before any template).
    #[serde(default)]
    pub prompt: String,
    pub passed: bool,
    /// The answer judged, a thinking model's reasoning left out.
    pub answer: String,
    /// Tokens spent thinking before the answer, where the model thought.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub thinking_tokens: Option<u32>,
    pub ms: f64,
    /// The judge's grade, 0 to 1, where a judge was asked.
    #[serde(default)]
    pub judge_grade: Option<f64>,
    /// Why the judge gave no grade.
    #[serde(default)]
    pub judge_error: Option<String>,
}

/// A suite's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QualityResult {
    pub suite: String,
    /// How the questions reached the model: its chat template, or raw.
    #[serde(default)]
    pub style: PromptStyle,
    /// Why the questions were asked raw, where they were.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// Passed cases over all cases, 0 to 1.
    pub score: f64,
    /// The judge's mean grade over the graded cases, 0 to 1.
    #[serde(default)]
    pub judge_score: Option<f64>,
    pub cases: Vec<CaseResult>,
}

impl QualityResult {
    /// Mean similarity (1 − normalized edit distance) of the answers to
    /// another result's answers for the same cases; `None` if none match.
    pub fn similarity_to(&self, baseline: &QualityResult) -> Option<f64> {
        let pairs: Vec<f64> = self
            .cases
            .iter()
            .filter_map(|c| {
                let b = baseline.cases.iter().find(|b| b.id == c.id)?;
                Some(strsim::normalized_levenshtein(&c.answer, &b.answer))
            })
            .collect();
        (!pairs.is_empty()).then(|| pairs.iter().sum::<f64>() / pairs.len() as f64)
    }
}

impl QualityProbe {
    pub async fn run(&self, engine: &RunningEngine) -> Result<QualityResult, Failure> {
        let mut frame = match self.raw {
            true => crate::ask::raw_frame("the plan asks for raw completions"),
            false => engine.frame().await?,
        };
        let mut cases = Vec::new();
        for case in &self.suite.cases {
            let mut answer = self.ask(engine, &frame, case).await?;
            // A model that thinks though its template does not say so: it
            // ran out of tokens mid-thought. Ask again with room to think,
            // and give every later question that room.
            if !frame.thinks && answer.thinking.is_some() && answer.text.trim().is_empty() {
                frame.thinks = true;
                answer = self.ask(engine, &frame, case).await?;
            }
            let graded = match &self.judge {
                Some(judge) => Some(
                    judge.grade(&engine.client, case, &answer.text, self.request_timeout).await,
                ),
                None => None,
            };
            cases.push(CaseResult {
                id: case.id.clone(),
                prompt: case.prompt.clone(),
                passed: case.passes(&answer.text),
                answer: answer.text,
                thinking_tokens: answer.thinking_tokens,
                ms: answer.ms,
                judge_grade: graded.as_ref().and_then(|g| g.as_ref().ok().copied()),
                judge_error: graded.and_then(|g| g.err()),
            });
        }
        let passed = cases.iter().filter(|c| c.passed).count();
        let grades: Vec<f64> = cases.iter().filter_map(|c| c.judge_grade).collect();
        Ok(QualityResult {
            suite: self.suite.name.clone(),
            style: frame.style,
            note: frame.note.clone(),
            score: passed as f64 / cases.len().max(1) as f64,
            judge_score: (!grades.is_empty())
                .then(|| grades.iter().sum::<f64>() / grades.len() as f64),
            cases,
        })
    }

    /// One case, with a thinking model's budget and time where it thinks.
    async fn ask(
        &self,
        engine: &RunningEngine,
        frame: &crate::ask::Frame,
        case: &Case,
    ) -> Result<crate::ask::Answer, Failure> {
        let (tokens, timeout) = if frame.thinks {
            (case.max_tokens.saturating_add(self.thinking_budget), self.thinking_timeout)
        } else {
            (case.max_tokens, self.request_timeout)
        };
        engine.ask(frame, case.prompt.trim(), tokens, timeout).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(toml_text: &str) -> Case {
        let suite = Suite::parse(&format!(
            "name = \"t\"\n[[case]]\nid = \"c\"\nprompt = \"p\"\n{toml_text}"
        ))
        .unwrap();
        suite.cases[0].clone()
    }

    #[test]
    fn keywords_patterns_and_exclusions() {
        let c = case("any = [\"Paris\"]\nmust_not = [\"London\"]");
        assert!(c.passes(" paris, of course"));
        assert!(!c.passes(" Paris or London"));
        assert!(!c.passes(" Lyon"));
        let c = case("all = [\"red\", \"blue\"]");
        assert!(c.passes("Red and blue") && !c.passes("red only"));
        let c = case("regex = '^\\s*\\d{3}\\b'");
        assert!(c.passes(" 144 is the answer") && !c.passes("it is 144"));
    }

    #[test]
    fn the_default_suite_is_valid_and_bad_suites_say_why() {
        let s = Suite::default_suite();
        assert!(s.cases.len() >= 8);
        // A keyword that is also a word of the question turned round does
        // not pass (SmolLM2 asked raw: "the opposite of cold is warm").
        let opposite = s.cases.iter().find(|c| c.id == "opposite").unwrap();
        assert!(opposite.passes(r#"The opposite of "hot" is "cold""#));
        assert!(opposite.passes("Cold."));
        assert!(!opposite.passes(r#"The opposite of "cold" is "warm""#));
        let err = Suite::parse("name = \"x\"\n[[case]]\nid = \"a\"\nprompt = \"p\"\n").unwrap_err();
        assert!(err.to_string().contains("give `any`, `all` or `regex`"), "{err}");
        let err =
            Suite::parse("name = \"x\"\n[[case]]\nid = \"a\"\nprompt = \"p\"\nregex = \"(\"\n")
                .unwrap_err();
        assert!(err.to_string().contains("case `a`: regex"), "{err}");
        let err = Suite::parse("name = \"x\"\ncase = []\n").unwrap_err();
        assert!(err.to_string().contains("no [[case]]"), "{err}");
        assert!(matches!(Suite::parse("name = "), Err(SuiteError::Parse(_))));
    }

    #[test]
    fn judge_grades_are_the_first_digit() {
        assert_eq!(parse_grade("9"), Some(1.0));
        assert_eq!(parse_grade(" Grade: 0."), Some(0.0));
        assert_eq!(parse_grade("excellent"), None);
    }

    #[test]
    fn similarity_to_a_baseline() {
        let r = |answers: &[(&str, &str)]| QualityResult {
            suite: "s".into(),
            score: 0.0,
            judge_score: None,
            style: PromptStyle::Chat,
            note: None,
            cases: answers
                .iter()
                .map(|(id, a)| CaseResult {
                    id: id.to_string(),
                    prompt: String::new(),
                    passed: false,
                    answer: a.to_string(),
                    thinking_tokens: None,
                    ms: 1.0,
                    judge_grade: None,
                    judge_error: None,
                })
                .collect(),
        };
        let base = r(&[("a", "Paris"), ("b", "42")]);
        assert_eq!(r(&[("a", "Paris"), ("b", "42")]).similarity_to(&base), Some(1.0));
        let half = r(&[("a", "Paris"), ("b", "xx")]).similarity_to(&base).unwrap();
        assert!((half - 0.5).abs() < 1e-9, "{half}");
        assert_eq!(r(&[("z", "Paris")]).similarity_to(&base), None);
    }
}
