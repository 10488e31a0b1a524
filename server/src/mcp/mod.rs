//! `tunebook mcp`: a Model Context Protocol server over stdio, so that an
//! agent can drive Tunebook as its instrument: list the profiles and
//! models, check and create a study, follow it, read its findings and
//! trials, and pause, resume or stop it. Each tool is one or two requests
//! to a running server's JSON API ([`api`]), which applies every check it
//! applies to anyone; the tools add only bounds of their own on what they
//! send back (a page of trials at a time, a wait of at most five minutes).

pub mod api;

use std::time::{Duration, Instant};

use reqwest::Method;
use rmcp::handler::server::wrapper::Parameters;
use rmcp::model::{CallToolResult, ContentBlock, Implementation, ServerCapabilities, ServerConfig};
use rmcp::{ErrorData, ServerHandler, ServiceExt, tool, tool_handler, tool_router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::{Value, json};

use self::api::{Answer, Api};

/// The most trials one `list_trials` call returns.
pub const MAX_PAGE: usize = 200;
/// The longest `wait_for_study` waits.
pub const MAX_WAIT_S: u64 = 300;
/// How often `wait_for_study` looks.
const POLL: Duration = Duration::from_secs(1);

/// A study definition, as `POST /api/studies` takes it.
#[derive(Deserialize, JsonSchema)]
pub struct StudyArg {
    /// The study: name, profile, model, space, objectives, strategy,
    /// budget, probes (the JSON form of a study file).
    #[schemars(with = "tunebook_study::StudyDef")]
    pub study: Value,
}

/// A study's number.
#[derive(Deserialize, JsonSchema)]
pub struct StudyId {
    pub study_id: i64,
}

/// A trial's number.
#[derive(Deserialize, JsonSchema)]
pub struct TrialId {
    pub trial_id: i64,
}

/// Waits for a study to end, or for so long.
#[derive(Deserialize, JsonSchema)]
pub struct Wait {
    pub study_id: i64,
    /// Seconds to wait at most (1 to 300; 60 when left out).
    pub seconds: Option<u64>,
}

/// A page of a study's trials, in the order they were created.
#[derive(Deserialize, JsonSchema)]
pub struct TrialPage {
    pub study_id: i64,
    /// Trials to skip (0 when left out).
    pub offset: Option<usize>,
    /// Trials to return (1 to 200; 50 when left out).
    pub limit: Option<usize>,
}

/// What to do with a running study.
#[derive(Deserialize, JsonSchema, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Pause,
    Resume,
    Stop,
}

#[derive(Deserialize, JsonSchema)]
pub struct Control {
    pub study_id: i64,
    pub action: Action,
}

/// The MCP server: its tools, over one server's API.
pub struct Tunebook {
    api: Api,
}

/// A tool's answer: the API's JSON, or its refusal as a tool error the
/// agent reads (a 400 says what to change).
fn answer(result: anyhow::Result<Answer>) -> CallToolResult {
    match result {
        Ok(Answer::Ok(value)) => json_result(&value),
        Ok(Answer::Refused(status, why)) => {
            CallToolResult::error(vec![ContentBlock::text(format!("{status}: {why}"))])
        }
        Err(e) => CallToolResult::error(vec![ContentBlock::text(format!("{e:#}"))]),
    }
}

fn json_result(value: &Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(value).unwrap_or_else(|_| value.to_string());
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn refused(why: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(why)])
}

#[tool_router]
impl Tunebook {
    pub fn new(api: Api) -> Tunebook {
        Tunebook { api }
    }

    #[tool(
        description = "The engine profiles this Tunebook knows: each one's engine, models, and the settings a study may search with their allowed values."
    )]
    async fn list_profiles(&self) -> Result<CallToolResult, ErrorData> {
        Ok(answer(self.api.call(Method::GET, "/api/profiles", None).await))
    }

    #[tool(
        description = "Checks a study without storing it: its problems (an unknown setting, a value out of range, a bound no trial can meet) and what it would run."
    )]
    async fn check_study(
        &self,
        Parameters(arg): Parameters<StudyArg>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(self.api.call(Method::POST, "/api/studies/check", Some(&arg.study)).await))
    }

    #[tool(
        description = "Creates a study and starts it (after the same checks as check_study). Returns the stored study with its id."
    )]
    async fn create_study(
        &self,
        Parameters(arg): Parameters<StudyArg>,
    ) -> Result<CallToolResult, ErrorData> {
        Ok(answer(self.api.call(Method::POST, "/api/studies", Some(&arg.study)).await))
    }

    #[tool(description = "Every study, with its state (running, paused, done, stopped, failed).")]
    async fn list_studies(&self) -> Result<CallToolResult, ErrorData> {
        Ok(answer(self.api.call(Method::GET, "/api/studies", None).await))
    }

    #[tool(description = "A study: its definition, state, events and its trials counted by state.")]
    async fn get_study(
        &self,
        Parameters(StudyId { study_id }): Parameters<StudyId>,
    ) -> Result<CallToolResult, ErrorData> {
        let path = format!("/api/studies/{study_id}");
        Ok(answer(self.api.call(Method::GET, &path, None).await))
    }

    #[tool(
        description = "Follows a study: waits until it is no longer running (done, stopped, paused or failed) or the seconds have passed, then returns it as get_study does."
    )]
    async fn wait_for_study(
        &self,
        Parameters(Wait { study_id, seconds }): Parameters<Wait>,
    ) -> Result<CallToolResult, ErrorData> {
        let seconds = seconds.unwrap_or(60);
        if !(1..=MAX_WAIT_S).contains(&seconds) {
            return Ok(refused(format!("seconds: from 1 to {MAX_WAIT_S}, not {seconds}")));
        }
        let until = Instant::now() + Duration::from_secs(seconds);
        let path = format!("/api/studies/{study_id}");
        loop {
            let result = self.api.call(Method::GET, &path, None).await;
            let running = matches!(&result, Ok(Answer::Ok(v)) if v["state"] == "running");
            if !running || Instant::now() + POLL > until {
                return Ok(answer(result));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    #[tool(
        description = "A page of a study's trials in the order they were made: each one's settings, state, role and measured metrics. Returns the total, so further pages can be asked for."
    )]
    async fn list_trials(
        &self,
        Parameters(page): Parameters<TrialPage>,
    ) -> Result<CallToolResult, ErrorData> {
        let limit = page.limit.unwrap_or(50);
        if !(1..=MAX_PAGE).contains(&limit) {
            return Ok(refused(format!("limit: from 1 to {MAX_PAGE}, not {limit}")));
        }
        let path = format!("/api/studies/{}/trials", page.study_id);
        let mut trials = match self.api.call(Method::GET, &path, None).await {
            Ok(Answer::Ok(Value::Array(list))) => list,
            other => return Ok(answer(other)),
        };
        trials.sort_by_key(|t| t["id"].as_i64());
        let total = trials.len();
        let offset = page.offset.unwrap_or(0).min(total);
        let page: Vec<Value> = trials.into_iter().skip(offset).take(limit).collect();
        Ok(json_result(&json!({ "total": total, "offset": offset, "trials": page })))
    }

    #[tool(
        description = "One trial: its settings, state, measured metrics and why it failed, if it did."
    )]
    async fn get_trial(
        &self,
        Parameters(TrialId { trial_id }): Parameters<TrialId>,
    ) -> Result<CallToolResult, ErrorData> {
        let path = format!("/api/trials/{trial_id}");
        Ok(answer(self.api.call(Method::GET, &path, None).await))
    }

    #[tool(
        description = "What a study's trials show: its findings (each with the trials it cites), the same as one markdown document, what they leave open and each objective's settings by importance."
    )]
    async fn get_findings(
        &self,
        Parameters(StudyId { study_id }): Parameters<StudyId>,
    ) -> Result<CallToolResult, ErrorData> {
        let path = format!("/api/studies/{study_id}/findings");
        let result = self.api.call(Method::GET, &path, None).await;
        Ok(answer(result.map(|a| match a {
            // The page's HTML says what the markdown says.
            Answer::Ok(mut v) => {
                if let Some(o) = v.as_object_mut() {
                    o.remove("html");
                }
                Answer::Ok(v)
            }
            refused => refused,
        })))
    }

    #[tool(description = "Pauses, resumes or stops a study. Returns the study.")]
    async fn control_study(
        &self,
        Parameters(Control { study_id, action }): Parameters<Control>,
    ) -> Result<CallToolResult, ErrorData> {
        let word = match action {
            Action::Pause => "pause",
            Action::Resume => "resume",
            Action::Stop => "stop",
        };
        let path = format!("/api/studies/{study_id}/{word}");
        Ok(answer(self.api.call(Method::POST, &path, None).await))
    }
}

#[tool_handler]
impl ServerHandler for Tunebook {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
            .with_server_info(Implementation::new("tunebook", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "Tunebook tunes local LLM inference engines by measuring them. Start with \
                 list_profiles to see the engines, models and the settings you may search; \
                 write a study and check_study it until it has no problems; create_study runs \
                 it on this machine. Follow it with wait_for_study, read get_findings and \
                 list_trials, and pause, resume or stop it with control_study."
                    .to_string(),
            )
    }
}

/// Serves MCP on stdin and stdout until the client closes them.
pub async fn serve(server: &str, password: Option<&str>) -> anyhow::Result<()> {
    let api = Api::connect(server, password).await?;
    let running = Tunebook::new(api).serve(rmcp::transport::stdio()).await?;
    running.waiting().await?;
    Ok(())
}
