//! Perplexity on a reference text, with llama.cpp's own `llama-perplexity`
//! at the trial's settings (threads, K/V cache types, flash attention,
//! offload): how much a setting such as a quantized cache costs in quality,
//! in the number the llama.cpp community reports. It runs after the server
//! has stopped, so the two never share memory.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use regex::Regex;
use serde::{Deserialize, Serialize};

use crate::catalog::Settings;
use crate::children::RunError;
use crate::failure::{Failure, FailureKind, classify_exit};
use std::os::unix::process::ExitStatusExt;

use crate::process::{ExitInfo, LaunchSpec};
use crate::profile::{EngineKind, Profile};

/// The built-in reference text (`suites/reference.txt`).
pub const REFERENCE_TEXT: &str = include_str!("../../suites/reference.txt");

/// Runs of llama-perplexity that may lose their output before one counts as
/// failed. On a busy two-core machine six runs in a row have lost it; a
/// lost estimate costs only the rerun, and only when it happens.
const LOST_OUTPUT_RETRIES: u32 = 12;

/// Past [`LOST_OUTPUT_RETRIES`], runs go on being retried while all of
/// them together took less than this. The tool loses its last lines when
/// it exits before its logger thread is scheduled: a small model, freed in
/// an instant, lost them in 23 of 30 runs beside six busy processes, while
/// each run took a tenth of a second.
const LOST_OUTPUT_TIME: Duration = Duration::from_secs(30);

/// The file name of the library in [`PerplexityProbe::log_flush_for`].
pub const LOG_FLUSH_LIBRARY: &str = "libtunebook-log-flush.so";

/// Settings that mean the same to `llama-perplexity` as to the server.
const SHARED_SETTINGS: &[&str] = &[
    "threads",
    "threads_batch",
    "cache_type_k",
    "cache_type_v",
    "flash_attn",
    "n_gpu_layers",
    "ubatch_size",
    "mlock",
    "no_mmap",
    "numa",
];

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct PerplexityProbe {
    /// Tokens per chunk.
    pub ctx: u32,
    /// Chunks scored (the text must hold `ctx × chunks` tokens).
    pub chunks: u32,
    /// A text file to score instead of the built-in one.
    pub text: Option<PathBuf>,
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub timeout: Duration,
}

impl Default for PerplexityProbe {
    fn default() -> Self {
        Self { ctx: 512, chunks: 3, text: None, timeout: Duration::from_secs(1800) }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct PerplexityResult {
    pub ppl: f64,
    /// The estimate's uncertainty, as llama-perplexity reports it.
    pub plus_minus: Option<f64>,
    pub ctx: u32,
    pub chunks: u32,
    pub ms: f64,
}

/// What a run of llama-perplexity is about: the engine's profile, the
/// model, the configuration, where to write the text, and where the tool is
/// recorded while it runs (see [`crate::registry`]).
pub(crate) struct Run<'a> {
    pub profile: &'a Profile,
    pub model: &'a Path,
    pub settings: &'a Settings,
    pub scratch: &'a Path,
    pub registry: Option<&'a Path>,
}

/// The final estimate from llama-perplexity's output.
pub fn parse_estimate(output: &str) -> Option<(f64, Option<f64>)> {
    let re = Regex::new(r"Final estimate: PPL = ([0-9.]+)(?: \+/- ([0-9.]+))?").expect("regex");
    let caps = re.captures_iter(output).last()?;
    Some((caps[1].parse().ok()?, caps.get(2).and_then(|m| m.as_str().parse().ok())))
}

/// The estimate after the last of `chunks` chunks, from the per-chunk lines
/// `--ppl-output-type 1` prints (`offset  ppl  mean-nll  its-standard-error`)
/// while it works. The last of them is the final estimate: the same running
/// mean, and `ppl × standard error` is the final line's `+/-`. It is the
/// fallback for when the final line is lost at exit (llama.cpp's logger
/// thread is left unjoined when the tool returns, so on a busy machine its
/// last lines may never be written).
pub fn parse_last_chunk(output: &str, chunks: u32) -> Option<(f64, Option<f64>)> {
    let re = Regex::new(r"(?m)^\s*\d+\s+([0-9.]+)\s+[0-9.]+\s+([0-9.]+)\s*$").expect("regex");
    let lines: Vec<_> = re.captures_iter(output).collect();
    let last = lines.last().filter(|_| lines.len() == chunks as usize)?;
    let ppl: f64 = last[1].parse().ok()?;
    let se: f64 = last[2].parse().ok()?;
    Some((ppl, Some(se * ppl).filter(|pm| *pm > 0.0)))
}

impl PerplexityProbe {
    /// `llama-perplexity` beside the profile's `llama-server`, if there is one.
    pub fn binary_for(profile: &Profile) -> Option<PathBuf> {
        let candidate = profile.binary.with_file_name("llama-perplexity");
        (profile.kind == EngineKind::LlamaServer && candidate.is_file()).then_some(candidate)
    }

    /// The library that makes llama.cpp's tools write their last lines
    /// before they exit (`engine-bridge/native/log_flush.c`, built by the
    /// engine's setup beside `llama-server`), if it is there. Without it a
    /// lost estimate is run again.
    pub fn log_flush_for(profile: &Profile) -> Option<PathBuf> {
        let candidate = profile.binary.with_file_name(LOG_FLUSH_LIBRARY);
        candidate.is_file().then_some(candidate)
    }

    /// Scores the text with the configuration's shared settings.
    pub async fn run(
        &self,
        profile: &Profile,
        model: &Path,
        settings: &Settings,
        scratch: &Path,
        registry: Option<&Path>,
    ) -> Result<PerplexityResult, Failure> {
        let started = Instant::now();
        let run = Run { profile, model, settings, scratch, registry };
        let per_chunk = ["--ppl-output-type".to_string(), "1".into()];
        let chunks = self.chunks;
        let read = |out: &str| parse_estimate(out).or_else(|| parse_last_chunk(out, chunks));
        let (ppl, plus_minus) = self.run_tool(&run, &per_chunk, read).await?;
        Ok(PerplexityResult {
            ppl,
            plus_minus,
            ctx: self.ctx,
            chunks: self.chunks,
            ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }

    /// Runs llama-perplexity on the text with the configuration's shared
    /// settings and `extra` arguments, until `parse` reads what it printed
    /// (its output can be lost on a busy machine: see
    /// [`LOST_OUTPUT_RETRIES`]).
    pub(crate) async fn run_tool<T>(
        &self,
        run: &Run<'_>,
        extra: &[String],
        parse: impl Fn(&str) -> Option<T>,
    ) -> Result<T, Failure> {
        let fail = |message: String| Failure::new(FailureKind::ProbeFailed, message);
        let binary = Self::binary_for(run.profile)
            .ok_or_else(|| fail("no llama-perplexity beside this profile's llama-server".into()))?;
        let text_path = match &self.text {
            Some(p) => p.clone(),
            None => {
                let p = run.scratch.join("tunebook-reference.txt");
                std::fs::write(&p, REFERENCE_TEXT)
                    .map_err(|e| fail(format!("writing the text: {e}")))?;
                p
            }
        };
        let shared: Settings = run
            .settings
            .iter()
            .filter(|(k, _)| SHARED_SETTINGS.contains(&k.as_str()))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        let rendered = run.profile.catalog().render(&shared).map_err(|e| fail(e.to_string()))?;
        let mut args = vec![
            "-m".to_string(),
            run.model.display().to_string(),
            "-f".into(),
            text_path.display().to_string(),
            "-c".into(),
            self.ctx.to_string(),
            "--chunks".into(),
            self.chunks.to_string(),
            // One chunk per batch: the same estimate, with the compute buffers
            // of one context rather than of many side by side.
            "-b".into(),
            self.ctx.to_string(),
        ];
        args.extend(rendered.args);
        args.extend(extra.iter().cloned());
        let mut spec = LaunchSpec::new(binary, args);
        spec.env = rendered.env;
        spec.env.extend(run.profile.env.clone());
        if let Some(flush) = Self::log_flush_for(run.profile) {
            let flush = flush.display().to_string();
            let preload = match spec.env.get("LD_PRELOAD") {
                Some(theirs) if !theirs.is_empty() => format!("{flush}:{theirs}"),
                _ => flush,
            };
            spec.env.insert("LD_PRELOAD".into(), preload);
        }
        let mut spec = crate::flags::adapt(spec).await?;
        spec.registry_dir = run.registry.map(Path::to_path_buf);
        let (mut attempt, started) = (0, Instant::now());
        loop {
            attempt += 1;
            let (status, text) = self.run_once(&spec).await?;
            if let (true, Some(found)) = (status.success(), parse(&text)) {
                return Ok(found);
            }
            // This llama.cpp logs from a background thread and, on a busy
            // machine, sometimes exits (successfully) before its last lines
            // are written: the result is lost, not wrong. Run it again.
            let again = attempt < LOST_OUTPUT_RETRIES || started.elapsed() < LOST_OUTPUT_TIME;
            if status.success() && again {
                continue;
            }
            let tail: Vec<String> = text.lines().rev().take(60).map(str::to_string).collect();
            let exit = ExitInfo { code: status.code(), signal: status.signal() };
            let mut failure = classify_exit(exit, tail.into_iter().rev().collect());
            if status.success() {
                failure.kind = FailureKind::ProbeFailed;
                failure.message = format!("llama-perplexity printed no result in {attempt} runs");
            }
            return Err(failure);
        }
    }

    /// Runs the tool to the end; its exit status and everything it printed.
    async fn run_once(
        &self,
        spec: &LaunchSpec,
    ) -> Result<(std::process::ExitStatus, String), Failure> {
        let mut cmd = crate::children::command(&spec.program);
        cmd.args(&spec.args).envs(&spec.env);
        match crate::children::output(cmd, self.timeout, spec.registry_dir.as_deref()).await {
            Ok(out) => {
                let text = format!(
                    "{}\n{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                Ok((out.status, text))
            }
            Err(RunError::Start(e)) => Err(Failure::new(
                FailureKind::ProbeFailed,
                format!("cannot run {}: {e}", spec.program.display()),
            )),
            Err(RunError::TimedOut) => Err(Failure::new(
                FailureKind::ProbeTimeout,
                format!("llama-perplexity took longer than {:?}", self.timeout),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_final_estimate() {
        let out = "[1]260.1,[2]258.9,\nFinal estimate: PPL = 259.4312 +/- 4.12345\n";
        assert_eq!(parse_estimate(out), Some((259.4312, Some(4.12345))));
        assert_eq!(parse_estimate("Final estimate: PPL = 7.5\n"), Some((7.5, None)));
        assert_eq!(parse_estimate("nothing"), None);
    }

    #[test]
    fn reads_the_last_chunk_when_the_final_line_is_lost() {
        let out = "perplexity: calculating perplexity over 2 chunks, n_ctx=128\n\
                        0  262.1234  5.568816  0.081234\n\
                      128  259.4312  5.558496  0.015890\n";
        let (ppl, pm) = parse_last_chunk(out, 2).unwrap();
        assert_eq!(ppl, 259.4312);
        assert!((pm.unwrap() - 0.015890 * 259.4312).abs() < 1e-9);
        // A run cut short is no estimate of the whole text.
        assert_eq!(parse_last_chunk(out, 3), None);
        assert_eq!(parse_last_chunk("nothing", 2), None);
    }

    #[test]
    fn the_reference_text_is_long_enough_for_the_default_chunks() {
        // About four characters a token for real tokenizers.
        let p = PerplexityProbe::default();
        assert!(REFERENCE_TEXT.len() / 4 >= (p.ctx * p.chunks) as usize);
    }
}
