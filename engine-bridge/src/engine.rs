//! One configuration from profile to a running engine: plan the command
//! line, launch the engine, wait until it is ready, talk to it, stop it.
//! Measuring it is [`crate::measure`]'s, which the probes serve.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use rand::Rng;

use crate::catalog::{Domain, SettingError, Settings};
use crate::failure::{Failure, FailureKind, classify_exit};
use crate::llama_server::{self, Completion, CompletionRequest, CompletionSample, Prompt, Props};
use crate::memory::{MemoryReport, MemorySampler};
use crate::openai;
use crate::process::{EngineProcess, ExitInfo, LaunchSpec};
use crate::profile::{Api, EngineKind, Profile};

/// How often an engine's memory is sampled.
const MEMORY_SAMPLE: Duration = Duration::from_millis(100);

/// How long a failed probe waits to see whether the engine is exiting.
const EXIT_SETTLE: Duration = Duration::from_millis(500);

/// A configuration that cannot be launched as asked.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    #[error("profile `{profile}` has no model named `{model}`")]
    UnknownModel { profile: String, model: String },
    #[error(transparent)]
    Setting(#[from] SettingError),
    #[error("engine binary {0} does not exist (has the engine been built?)")]
    MissingBinary(PathBuf),
    #[error("model file {0} does not exist")]
    MissingModel(PathBuf),
}

/// Builds the exact command line for a configuration: the profile's fixed
/// arguments, the model, the address, then the checked settings.
pub fn plan(
    profile: &Profile,
    model: &str,
    settings: &Settings,
    port: u16,
) -> Result<LaunchSpec, PlanError> {
    spec(profile, model, settings, port, true)
}

/// The launch [`plan`] would make, without looking for the binary and the
/// model files: the command line to show for a machine whose files are its
/// own (a worker's trial, as the server's profile writes it).
pub fn plan_elsewhere(
    profile: &Profile,
    model: &str,
    settings: &Settings,
    port: u16,
) -> Result<LaunchSpec, PlanError> {
    spec(profile, model, settings, port, false)
}

fn spec(
    profile: &Profile,
    model: &str,
    settings: &Settings,
    port: u16,
    files_here: bool,
) -> Result<LaunchSpec, PlanError> {
    // A configuration may name which of the profile's files it loads.
    let model = settings
        .get(crate::catalog::MODEL_SETTING)
        .map(|m| m.trim())
        .filter(|m| !m.is_empty())
        .unwrap_or(model);
    let entry = profile.model(model).ok_or_else(|| PlanError::UnknownModel {
        profile: profile.name.clone(),
        model: model.into(),
    })?;
    let catalog = profile.catalog();
    let mut rendered = catalog.render(settings)?;
    // A draft model is named like the main one and becomes its path.
    let drafts = catalog.params.iter().filter(|p| p.name != crate::catalog::MODEL_SETTING);
    for param in drafts.filter(|p| matches!(p.domain, Domain::Model)) {
        let Some(name) = settings.get(param.name.as_ref()) else { continue };
        if param.is_unset(name.trim()) {
            continue;
        }
        let draft = profile.model(name.trim()).ok_or_else(|| PlanError::UnknownModel {
            profile: profile.name.clone(),
            model: name.clone(),
        })?;
        let at = rendered.args.iter().position(|a| *a == param.flag).expect("rendered flag");
        rendered.args[at + 1] = draft.path.display().to_string();
    }
    if profile.kind == EngineKind::External {
        // Nothing to launch: the spec only says how to talk to it.
        let mut spec = LaunchSpec::new(PathBuf::new(), vec![]);
        spec.api = Api::OpenAi;
        spec.health_path = profile.health_path().to_string();
        spec.request = rendered.request;
        return Ok(spec);
    }
    if files_here && !profile.binary.is_file() {
        return Err(PlanError::MissingBinary(profile.binary.clone()));
    }
    // vLLM and SGLang take model folders too.
    if files_here && !entry.path.exists() {
        return Err(PlanError::MissingModel(entry.path.clone()));
    }
    let host = Ipv4Addr::LOCALHOST.to_string();
    let mut args = match profile.kind {
        // The model and address go first for Python module launches.
        EngineKind::LlamaServer => profile.fixed_args(&entry.path, &host, port),
        _ => vec![],
    };
    args.extend(profile.launch_args(&entry.path, &host, port));
    if profile.kind != EngineKind::LlamaServer {
        args.extend(profile.fixed_args(&entry.path, &host, port));
    }
    args.extend(rendered.args);
    // The profile's own variables win: a study never changes them.
    let mut env = rendered.env;
    env.extend(profile.env.clone());
    if !profile.library_path.is_empty() {
        let mut dirs: Vec<String> =
            profile.library_path.iter().map(|p| p.display().to_string()).collect();
        if let Ok(existing) = std::env::var("LD_LIBRARY_PATH") {
            dirs.push(existing);
        }
        env.insert("LD_LIBRARY_PATH".into(), dirs.join(":"));
    }
    Ok(LaunchSpec {
        program: profile.binary.clone(),
        args,
        env,
        log_file: None,
        registry_dir: None,
        api: profile.kind.api(),
        health_path: profile.health_path().to_string(),
        request: rendered.request,
        model: Some(entry.path.clone()),
    })
}

/// Where [`free_port`] looks first: below the ranges from which the
/// system hands out ports for outgoing connections and for a bind to port
/// 0 (Linux's 32768–60999, IANA's 49152–65535). A port the system handed
/// out may go to someone's next connection in the moment between being
/// found free and the engine binding it, and the engine then fails to
/// start (a test saw it, among many clients connecting at once); a port
/// from here is taken only by someone who picks it by number.
const QUIET_PORTS: std::ops::Range<u16> = 15000..25000;
/// Random ports of [`QUIET_PORTS`] tried before the system is asked.
const QUIET_TRIES: usize = 32;

/// A port on 127.0.0.1 that nothing listens on right now: a random one of
/// [`QUIET_PORTS`] that binds, else one the system hands out.
pub fn free_port() -> std::io::Result<u16> {
    let mut rng = rand::rng();
    for _ in 0..QUIET_TRIES {
        let port = rng.random_range(QUIET_PORTS);
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return Ok(port);
        }
    }
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// An engine that answered its health check.
pub struct RunningEngine {
    /// `None` for an external endpoint, which Tunebook does not run.
    process: Option<EngineProcess>,
    memory: Option<MemorySampler>,
    pub base_url: String,
    pub spec: LaunchSpec,
    /// Spawn to first healthy answer.
    pub load_time: Duration,
    pub(crate) client: reqwest::Client,
    /// OpenAI-compatible servers: the model id requests name, and the
    /// context length the server reports.
    pub(crate) model_id: String,
    served_ctx: Option<u64>,
    /// What the engine logged up to being ready: what it says it runs
    /// (see [`crate::applied`]), kept before requests push it out of the tail.
    startup_log: Vec<String>,
}

/// How long, once ready, the engine's start-up lines may take to be read.
const STARTUP_LOG_WAIT: Duration = Duration::from_secs(2);

/// A prompt as the engine's API takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum PromptInput {
    Tokens(Vec<u32>),
    Text(String),
}

impl PromptInput {
    pub fn as_prompt(&self) -> Prompt<'_> {
        match self {
            PromptInput::Tokens(t) => Prompt::Tokens(t),
            PromptInput::Text(t) => Prompt::Text(t),
        }
    }
}

impl RunningEngine {
    /// Starts the engine and waits until it is ready, at most `load_timeout`.
    /// On failure the engine is stopped and the cause comes with its log.
    pub async fn launch(
        spec: LaunchSpec,
        port: u16,
        load_timeout: Duration,
    ) -> Result<Self, Failure> {
        Self::launch_watched(spec, port, load_timeout, None).await
    }

    /// As [`RunningEngine::launch`], sending each change of readiness (not
    /// listening yet, loading, ready) on `progress`.
    pub async fn launch_watched(
        spec: LaunchSpec,
        port: u16,
        load_timeout: Duration,
        progress: Option<&tokio::sync::watch::Sender<llama_server::Health>>,
    ) -> Result<Self, Failure> {
        let base_url = format!("http://{}:{port}", Ipv4Addr::LOCALHOST);
        // A fresh connection per request: llama-server (cpp-httplib) closes a
        // keep-alive connection after a few requests, and a request sent on
        // one it is closing fails. Loopback connections cost microseconds.
        let client = crate::http::client()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| Failure::new(FailureKind::Spawn, e.to_string()))?;
        // Something already answering here is not ours: never measure it.
        if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.is_ok() {
            return Err(Failure::new(
                FailureKind::PortConflict,
                format!("another process already answers on port {port}"),
            ));
        }
        let available_before = crate::memory::mem_available();
        let process = EngineProcess::spawn(&spec)
            .map_err(|e| Failure::new(FailureKind::Spawn, format!("{e}: {}", e.source)))?;
        let memory = MemorySampler::start(process.pid(), MEMORY_SAMPLE, available_before);
        let ready = llama_server::wait_ready(
            &client,
            &base_url,
            &spec.health_path,
            &process,
            load_timeout,
            progress,
        )
        .await;
        match ready {
            Ok(load_time) => {
                let (model_id, served_ctx) = match spec.api {
                    Api::LlamaServer => (String::new(), None),
                    Api::OpenAi => {
                        openai::first_model(&client, &base_url).await.unwrap_or_default()
                    }
                };
                // The log is drained by its own task: wait (briefly) for the
                // line llama-server writes once it listens.
                let deadline = tokio::time::Instant::now() + STARTUP_LOG_WAIT;
                while spec.api == Api::LlamaServer
                    && !process
                        .tail(crate::process::TAIL_LINES)
                        .iter()
                        .any(|l| l.contains("listening on"))
                    && tokio::time::Instant::now() < deadline
                {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let startup_log = process.tail(crate::process::TAIL_LINES);
                Ok(Self {
                    process: Some(process),
                    memory: Some(memory),
                    base_url,
                    spec,
                    load_time,
                    client,
                    model_id,
                    served_ctx,
                    startup_log,
                })
            }
            Err(failure) => {
                process.stop(Duration::from_secs(2)).await;
                Err(failure)
            }
        }
    }

    /// Measures a server Tunebook does not run: waits (at most `timeout`)
    /// until `{base_url}/v1/models` answers, then talks to it as an
    /// OpenAI-compatible server about `model_id`.
    pub async fn attach(
        base_url: &str,
        model_id: &str,
        timeout: Duration,
    ) -> Result<Self, Failure> {
        let client = crate::http::client()
            .no_proxy()
            .pool_max_idle_per_host(0)
            .build()
            .map_err(|e| Failure::new(FailureKind::Spawn, e.to_string()))?;
        let started = std::time::Instant::now();
        let deadline = tokio::time::Instant::now() + timeout;
        while llama_server::health(&client, base_url, "/v1/models").await
            != llama_server::Health::Ready
        {
            if tokio::time::Instant::now() >= deadline {
                return Err(Failure::new(
                    FailureKind::LoadTimeout,
                    format!("{base_url}/v1/models did not answer within {timeout:?}"),
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let mut spec = LaunchSpec::new(PathBuf::new(), vec![]);
        spec.api = Api::OpenAi;
        spec.health_path = "/v1/models".into();
        let served_ctx = openai::first_model(&client, base_url).await.and_then(|(_, ctx)| ctx);
        Ok(Self {
            process: None,
            memory: None,
            base_url: base_url.trim_end_matches('/').to_string(),
            spec,
            load_time: started.elapsed(),
            client,
            model_id: model_id.to_string(),
            served_ctx,
            startup_log: vec![],
        })
    }

    /// The engine's process id (none for an external endpoint).
    pub fn pid(&self) -> Option<u32> {
        self.process.as_ref().map(EngineProcess::pid)
    }

    /// The last `n` lines the engine printed (none for an external endpoint).
    /// What the engine logged until it was ready (empty for an endpoint
    /// Tunebook does not run).
    pub fn startup_log(&self) -> &[String] {
        &self.startup_log
    }

    pub fn log_tail(&self, n: usize) -> Vec<String> {
        self.process.as_ref().map(|p| p.tail(n)).unwrap_or_default()
    }

    /// Memory peaks from launch until now (nothing for an external endpoint).
    pub fn memory(&self) -> MemoryReport {
        self.memory.as_ref().map(MemorySampler::report).unwrap_or_default()
    }

    /// What the engine says it runs.
    pub async fn props(&self) -> Option<Props> {
        match self.spec.api {
            Api::LlamaServer => llama_server::props(&self.client, &self.base_url).await.ok(),
            Api::OpenAi => {
                Some(Props { n_ctx: self.served_ctx, total_slots: None, build_info: None })
            }
        }
    }

    /// Token ids of `text` with the engine's own tokenizer, where it offers one.
    pub async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, Failure> {
        match self.spec.api {
            Api::LlamaServer => {
                match llama_server::tokenize(&self.client, &self.base_url, text).await {
                    Ok(t) => Ok(Some(t)),
                    Err(e) => {
                        let message = format!("tokenize: {}", llama_server::chain(&e));
                        let failure = Failure::new(FailureKind::ProbeFailed, message);
                        Err(self.explain(failure).await)
                    }
                }
            }
            Api::OpenAi => {
                Ok(openai::tokenize(&self.client, &self.base_url, &self.model_id, text).await)
            }
        }
    }

    /// Whether prompts may be sent as token ids (exact lengths).
    pub fn takes_tokens(&self) -> bool {
        self.spec.api == Api::LlamaServer
    }

    /// A prompt of `n` tokens: exact where the engine takes token ids,
    /// otherwise text cut to the nearest length its tokenizer counts (or
    /// about four characters a token when it has none).
    pub async fn prompt_of_len(&self, n: usize) -> Result<PromptInput, Failure> {
        let text = llama_server::FILLER_TEXT.repeat(n / 16 + 2);
        if self.takes_tokens() {
            let tokens = self.tokenize(&text).await?.unwrap_or_default();
            return Ok(PromptInput::Tokens(tokens.into_iter().take(n).collect()));
        }
        let cut = |chars: usize| text.chars().take(chars).collect::<String>();
        let Some(_) = self.tokenize("probe").await? else {
            return Ok(PromptInput::Text(cut(n * 4)));
        };
        // The longest prefix with at most n tokens, by bisection.
        let (mut lo, mut hi) = (0, text.chars().count());
        while lo < hi {
            let mid = (lo + hi).div_ceil(2);
            let count = self.tokenize(&cut(mid)).await?.map_or(usize::MAX, |t| t.len());
            if count <= n { lo = mid } else { hi = mid - 1 }
        }
        Ok(PromptInput::Text(cut(lo)))
    }

    /// One timed streamed completion of exactly `n_predict` tokens (see
    /// [`llama_server::completion`]); a failure is blamed on the engine if
    /// it died meanwhile.
    pub async fn completion(
        &self,
        prompt: &PromptInput,
        n_predict: u32,
        timeout: Duration,
    ) -> Result<CompletionSample, Failure> {
        let request = CompletionRequest { prompt: prompt.as_prompt(), n_predict, ignore_eos: true };
        Ok(self.generate(&request, timeout).await?.sample)
    }

    /// What sends this engine streamed chat requests (see [`crate::chat`]).
    pub fn chat_handle(&self) -> crate::chat::ChatClient {
        crate::chat::ChatClient {
            client: self.client.clone(),
            base_url: self.base_url.clone(),
            model: self.model_id.clone(),
            extra: self.spec.request.clone(),
        }
    }

    /// Any completion request, with the text it produced.
    pub async fn generate(
        &self,
        request: &CompletionRequest<'_>,
        timeout: Duration,
    ) -> Result<Completion, Failure> {
        let done = match self.spec.api {
            Api::LlamaServer => {
                let extra = &self.spec.request;
                llama_server::completion(&self.client, &self.base_url, request, extra, timeout)
                    .await
            }
            Api::OpenAi => {
                let (url, model, extra) = (&self.base_url, &self.model_id, &self.spec.request);
                openai::completion(&self.client, url, model, request, extra, timeout).await
            }
        };
        let mut done = match done {
            Ok(c) => c,
            Err(f) => return Err(self.explain(f).await),
        };
        // A server that reports no usage: count the prompt with its tokenizer.
        let t = &mut done.sample.timings;
        if let (0, Prompt::Text(text)) = (t.prompt_n, request.prompt)
            && let Some(tokens) = self.tokenize(text).await?
        {
            t.prompt_n = tokens.len() as u32;
            t.prompt_per_second = t.prompt_n as f64 / (t.prompt_ms / 1e3);
        }
        Ok(done)
    }

    /// Whether the engine's process has exited (never, for an endpoint
    /// Tunebook does not run).
    pub fn has_exited(&self) -> bool {
        self.process.as_ref().is_some_and(|p| p.exit_info().is_some())
    }

    /// Stops the engine (SIGTERM, `grace`, SIGKILL).
    pub async fn stop(self, grace: Duration) -> ExitInfo {
        match &self.process {
            Some(p) => p.stop(grace).await,
            None => ExitInfo { code: Some(0), signal: None },
        }
    }

    /// Turns a probe error into the engine's own failure when the engine
    /// died under the probe. A dropped connection often arrives a moment
    /// before the exit is seen, so the exit is given a moment.
    pub(crate) async fn explain(&self, mut failure: Failure) -> Failure {
        let Some(process) = &self.process else { return failure };
        match tokio::time::timeout(EXIT_SETTLE, process.wait()).await {
            Ok(exit) => classify_exit(exit, process.tail(60)),
            Err(_) => {
                failure.log_tail = process.tail(60);
                failure
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_free_port_is_one_the_system_does_not_hand_out() {
        // Bound to port 0, the system hands out ports of its own range,
        // which no quiet port is in; every port offered binds.
        let handed = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap().local_addr().unwrap();
        assert!(!QUIET_PORTS.contains(&handed.port()), "{handed}");
        for _ in 0..20 {
            let port = free_port().unwrap();
            assert!(QUIET_PORTS.contains(&port), "{port}");
            TcpListener::bind((Ipv4Addr::LOCALHOST, port)).expect("the port offered is free");
        }
    }

    #[test]
    fn each_kind_names_model_and_address_its_own_way() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().display().to_string();
        let profile = |kind: &str| -> Profile {
            toml::from_str(&format!(
                "name = \"p\"\nkind = \"{kind}\"\nbinary = \"/bin/true\"\n\
                 [[models]]\nname = \"m\"\npath = {model:?}\n"
            ))
            .unwrap()
        };
        let s: Settings = [("ctx_size".to_string(), "8192".to_string())].into();
        let args = |kind| plan(&profile(kind), "m", &s, 9000).unwrap().args.join(" ");
        let at = "--host 127.0.0.1 --port 9000";
        assert_eq!(args("vllm"), format!("serve {model} {at} --max-model-len 8192"));
        assert_eq!(
            args("sglang"),
            format!("-m sglang.launch_server --model-path {model} {at} --context-length 8192")
        );
        assert_eq!(
            args("llama-cpp-python"),
            format!("-m llama_cpp.server --model {model} {at} --n_ctx 8192")
        );
        let spec = plan(&profile("vllm"), "m", &s, 9000).unwrap();
        assert_eq!((spec.api, spec.health_path.as_str()), (crate::profile::Api::OpenAi, "/health"));
    }

    #[test]
    fn a_configuration_may_name_which_model_file_it_loads() {
        let dir = tempfile::tempdir().unwrap();
        let (bin, q8, q4) = (
            dir.path().join("llama-server"),
            dir.path().join("q8.gguf"),
            dir.path().join("q4.gguf"),
        );
        for f in [&bin, &q8, &q4] {
            std::fs::write(f, b"").unwrap();
        }
        let profile: Profile = toml::from_str(&format!(
            "name = \"p\"\nkind = \"llama-server\"\nbinary = {bin:?}\n\
             [[models]]\nname = \"q8\"\npath = {q8:?}\n[[models]]\nname = \"q4\"\npath = {q4:?}\n"
        ))
        .unwrap();
        let s: Settings = [("model".to_string(), "q4".to_string())].into();
        let spec = plan(&profile, "q8", &s, 9000).unwrap();
        let model_at = spec.args.iter().position(|a| a == "-m").unwrap();
        assert_eq!(spec.args[model_at + 1], q4.display().to_string());
        assert_eq!(spec.args.iter().filter(|a| *a == "-m").count(), 1, "{:?}", spec.args);
        assert_eq!(spec.model.as_deref(), Some(q4.as_path()));
        assert_eq!(plan(&profile, "q8", &Settings::new(), 9000).unwrap().model, Some(q8.clone()));
        let other: Settings = [("model".to_string(), "f16".to_string())].into();
        let err = plan(&profile, "q8", &other, 9000).unwrap_err();
        assert_eq!(err.to_string(), "profile `p` has no model named `f16`");
    }

    #[test]
    fn plan_rejects_unknown_model_and_bad_setting_before_touching_disk() {
        let profile: Profile = toml::from_str(
            "name = \"p\"\nkind = \"llama-server\"\nbinary = \"/nonexistent/llama-server\"\n\
             [[models]]\nname = \"m\"\npath = \"/nonexistent/m.gguf\"\n",
        )
        .unwrap();
        let err = plan(&profile, "other", &Settings::new(), 1).unwrap_err();
        assert_eq!(err.to_string(), "profile `p` has no model named `other`");
        let bad: Settings = [("threads".to_string(), "-1".to_string())].into();
        assert!(matches!(plan(&profile, "m", &bad, 1), Err(PlanError::Setting(_))));
        let err = plan(&profile, "m", &Settings::new(), 1).unwrap_err();
        assert!(matches!(err, PlanError::MissingBinary(_)), "{err}");
    }
}
