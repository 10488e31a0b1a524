//! One configuration from profile to numbers: plan the command line, launch
//! the engine, wait until it is ready, probe its speed, stop it.

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::catalog::{SettingError, Settings};
use crate::failure::{Failure, FailureKind, classify_exit};
use crate::llama_server::{self, CompletionSample, Props};
use crate::memory::{MemoryReport, MemorySampler};
use crate::process::{EngineProcess, ExitInfo, LaunchSpec};
use crate::profile::Profile;

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
    let entry = profile.model(model).ok_or_else(|| PlanError::UnknownModel {
        profile: profile.name.clone(),
        model: model.into(),
    })?;
    let rendered = profile.kind.catalog().render(settings)?;
    if !profile.binary.is_file() {
        return Err(PlanError::MissingBinary(profile.binary.clone()));
    }
    if !entry.path.is_file() {
        return Err(PlanError::MissingModel(entry.path.clone()));
    }
    let mut args = profile.args.clone();
    args.extend([
        "-m".into(),
        entry.path.display().to_string(),
        "--host".into(),
        Ipv4Addr::LOCALHOST.to_string(),
        "--port".into(),
        port.to_string(),
    ]);
    args.extend(rendered);
    let mut env = profile.env.clone();
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
    })
}

/// A port on 127.0.0.1 that nothing listens on right now.
pub fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?.local_addr()?.port())
}

/// An engine that answered its health check.
pub struct RunningEngine {
    pub process: EngineProcess,
    memory: MemorySampler,
    pub base_url: String,
    pub spec: LaunchSpec,
    /// Spawn to first healthy answer.
    pub load_time: Duration,
    client: reqwest::Client,
}

impl RunningEngine {
    /// Starts the engine and waits until it is ready, at most `load_timeout`.
    /// On failure the engine is stopped and the cause comes with its log.
    pub async fn launch(
        spec: LaunchSpec,
        port: u16,
        load_timeout: Duration,
    ) -> Result<Self, Failure> {
        let base_url = format!("http://{}:{port}", Ipv4Addr::LOCALHOST);
        // A fresh connection per request: llama-server (cpp-httplib) closes a
        // keep-alive connection after a few requests, and a request sent on
        // one it is closing fails. Loopback connections cost microseconds.
        let client =
            reqwest::Client::builder().no_proxy().pool_max_idle_per_host(0).build().map_err(
                |e| Failure { kind: FailureKind::Spawn, message: e.to_string(), log_tail: vec![] },
            )?;
        // Something already answering here is not ours: never measure it.
        if tokio::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).await.is_ok() {
            return Err(Failure {
                kind: FailureKind::PortConflict,
                message: format!("another process already answers on port {port}"),
                log_tail: vec![],
            });
        }
        let available_before = crate::memory::mem_available();
        let process = EngineProcess::spawn(&spec).map_err(|e| Failure {
            kind: FailureKind::Spawn,
            message: format!("{e}: {}", e.source),
            log_tail: vec![],
        })?;
        let memory = MemorySampler::start(process.pid(), MEMORY_SAMPLE, available_before);
        match llama_server::wait_ready(&client, &base_url, &process, load_timeout).await {
            Ok(load_time) => Ok(Self { process, memory, base_url, spec, load_time, client }),
            Err(failure) => {
                process.stop(Duration::from_secs(2)).await;
                Err(failure)
            }
        }
    }

    /// Memory peaks from launch until now.
    pub fn memory(&self) -> MemoryReport {
        self.memory.report()
    }

    /// What the engine says it runs.
    pub async fn props(&self) -> Option<Props> {
        llama_server::props(&self.client, &self.base_url).await.ok()
    }

    /// Stops the engine (SIGTERM, `grace`, SIGKILL).
    pub async fn stop(self, grace: Duration) -> ExitInfo {
        self.process.stop(grace).await
    }

    /// Turns a probe error into the engine's own failure when the engine
    /// died under the probe. A dropped connection often arrives a moment
    /// before the exit is seen, so the exit is given a moment.
    async fn explain(&self, mut failure: Failure) -> Failure {
        match tokio::time::timeout(EXIT_SETTLE, self.process.wait()).await {
            Ok(exit) => classify_exit(exit, self.process.tail(60)),
            Err(_) => {
                failure.log_tail = self.process.tail(60);
                failure
            }
        }
    }
}

/// Timed completions: warm-up requests, then measured repeats.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SpeedProbe {
    /// Prompt length in tokens (built with the engine's own tokenizer).
    pub prompt_tokens: usize,
    /// Tokens to generate per request.
    pub n_predict: u32,
    /// Unrecorded requests first (caches, lazy allocation).
    pub warmup: u32,
    /// Recorded requests.
    pub repeats: u32,
    /// Longest a single request may take.
    pub request_timeout: Duration,
}

impl Default for SpeedProbe {
    fn default() -> Self {
        Self {
            prompt_tokens: 128,
            n_predict: 32,
            warmup: 1,
            repeats: 3,
            request_timeout: Duration::from_secs(120),
        }
    }
}

/// Medians over a probe's recorded samples.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SpeedSummary {
    pub ttft_ms: f64,
    /// Prompt tokens per second, from the engine's timings.
    pub prefill_tps: f64,
    /// Generated tokens per second, from the engine's timings.
    pub decode_tps: f64,
    /// Generated tokens per second, seen by the client.
    pub client_decode_tps: Option<f64>,
    pub prompt_tokens: u32,
    pub tokens_generated: u32,
}

impl SpeedProbe {
    /// Runs the probe; every recorded sample is returned with the medians.
    pub async fn run(
        &self,
        engine: &RunningEngine,
    ) -> Result<(Vec<CompletionSample>, SpeedSummary), Failure> {
        let prompt =
            llama_server::prompt_of_len(&engine.client, &engine.base_url, self.prompt_tokens).await;
        let prompt = match prompt {
            Ok(p) => p,
            Err(e) => {
                let failure = Failure {
                    kind: FailureKind::ProbeFailed,
                    message: format!("tokenize: {}", llama_server::chain(&e)),
                    log_tail: vec![],
                };
                return Err(engine.explain(failure).await);
            }
        };
        let mut samples = Vec::new();
        for i in 0..self.warmup + self.repeats {
            let sample = llama_server::timed_completion(
                &engine.client,
                &engine.base_url,
                &prompt,
                self.n_predict,
                self.request_timeout,
            )
            .await;
            let sample = match sample {
                Ok(s) => s,
                Err(f) => return Err(engine.explain(f).await),
            };
            if i >= self.warmup {
                samples.push(sample);
            }
        }
        let summary = summarize(&samples);
        Ok((samples, summary))
    }
}

fn summarize(samples: &[CompletionSample]) -> SpeedSummary {
    let med = |f: &dyn Fn(&CompletionSample) -> f64| {
        median(samples.iter().map(f).collect()).unwrap_or(f64::NAN)
    };
    let client: Vec<f64> = samples.iter().filter_map(|s| s.client_decode_tps).collect();
    SpeedSummary {
        ttft_ms: med(&|s| s.ttft_ms),
        prefill_tps: med(&|s| s.timings.prompt_per_second),
        decode_tps: med(&|s| s.timings.predicted_per_second),
        client_decode_tps: median(client),
        prompt_tokens: med(&|s| s.timings.prompt_n as f64) as u32,
        tokens_generated: samples.iter().map(|s| s.timings.predicted_n).min().unwrap_or(0),
    }
}

/// The median, or `None` for no values.
pub fn median(mut values: Vec<f64>) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    Some(if values.len() % 2 == 1 { values[mid] } else { (values[mid - 1] + values[mid]) / 2.0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_even_and_none() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(vec![]), None);
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
