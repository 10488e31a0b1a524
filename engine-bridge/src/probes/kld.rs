//! KL divergence from a reference configuration, with llama.cpp's own
//! `llama-perplexity --kl-divergence`: how far a configuration's next-token
//! distribution moves from the reference's over the same text (mean and
//! 99th-percentile KLD, and how often the likeliest token is the same).
//! A known-answer suite can pass while the distribution is damaged; this
//! sees it. The reference's logits are written once, kept under a name
//! drawn from everything they depend on, and read by every later trial.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::perplexity::{PerplexityProbe, REFERENCE_TEXT, Run};
use crate::catalog::Settings;
use crate::failure::{Failure, FailureKind};
use crate::profile::Profile;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default)]
pub struct KldProbe {
    /// Tokens per chunk.
    pub ctx: u32,
    /// Chunks scored.
    pub chunks: u32,
    #[serde(with = "super::secs")]
    #[schemars(with = "f64")]
    pub timeout: Duration,
    /// The configuration compared against: a study's baseline (its check
    /// sets it), else the engine's defaults; where it names a `model`,
    /// that file of the profile, else the trial's own.
    pub reference: Settings,
}

impl Default for KldProbe {
    fn default() -> Self {
        Self { ctx: 512, chunks: 3, timeout: Duration::from_secs(1800), reference: Settings::new() }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct KldResult {
    pub mean: f64,
    pub p99: f64,
    /// How often the likeliest next token is the reference's, in percent.
    pub same_top_pct: f64,
    pub ctx: u32,
    pub chunks: u32,
    pub ms: f64,
}

/// Mean KLD, its 99th percentile and the same-top-token share from
/// llama-perplexity's KL-divergence statistics.
pub fn parse_kld(output: &str) -> Option<(f64, f64, f64)> {
    let value = |label: &str| -> Option<f64> {
        let line = output.lines().rev().find(|l| l.trim_start().starts_with(label))?;
        line.split(':').nth(1)?.split_whitespace().next()?.parse().ok()
    };
    // A divergence is never below 0, and the tool prints six decimals: its
    // float sums put a configuration's divergence from itself at ±1e-6,
    // which is no divergence it can tell.
    let divergence = |label: &str| value(label).map(|v| if v <= 1e-6 { 0.0 } else { v });
    Some((divergence("Mean    KLD")?, divergence("99.0%   KLD")?, value("Same top p")?))
}

impl KldProbe {
    /// As the same text at the same chunks scores it: a perplexity run.
    fn tool(&self) -> PerplexityProbe {
        PerplexityProbe { ctx: self.ctx, chunks: self.chunks, text: None, timeout: self.timeout }
    }

    /// Where the reference's logits for `model` are kept in `dir`: named by
    /// the model, the reference settings, the chunks and the text.
    pub fn base_path(&self, dir: &Path, model: &Path) -> PathBuf {
        let mut hash = Sha256::new();
        hash.update(model.display().to_string());
        hash.update(serde_json::to_string(&self.reference).expect("a map serializes"));
        hash.update(format!("{} {}", self.ctx, self.chunks));
        hash.update(REFERENCE_TEXT);
        let digest = hash.finalize();
        let name: String = digest.iter().take(12).map(|b| format!("{b:02x}")).collect();
        dir.join(format!("kld-{name}.bin"))
    }

    /// The configuration's KLD from the reference, writing the reference's
    /// logits into `dir` first when they are not there yet.
    pub async fn run(
        &self,
        profile: &Profile,
        model: &Path,
        settings: &Settings,
        dir: &Path,
        registry: Option<&Path>,
    ) -> Result<KldResult, Failure> {
        let fail = |message: String| Failure::new(FailureKind::ProbeFailed, message);
        std::fs::create_dir_all(dir).map_err(|e| fail(format!("{}: {e}", dir.display())))?;
        // The reference may load another of the profile's files (the
        // highest-precision one of a study that compares files).
        let reference_model = match self.reference.get(crate::catalog::MODEL_SETTING) {
            Some(name) => {
                &profile
                    .model(name.trim())
                    .ok_or_else(|| {
                        fail(format!("the reference's model `{name}` is not in the profile"))
                    })?
                    .path
            }
            None => model,
        };
        let base = self.base_path(dir, reference_model);
        let started = Instant::now();
        if !base.is_file() {
            // Written under another name and moved: a half-written base
            // never stands at the name later trials read.
            let partial = base.with_extension("partial");
            let model = reference_model;
            let run = Run { profile, model, settings: &self.reference, scratch: dir, registry };
            let extra = ["--kl-divergence-base".to_string(), partial.display().to_string()];
            let wrote = |out: &str| out.contains("Final estimate").then_some(());
            self.tool().run_tool(&run, &extra, wrote).await?;
            std::fs::rename(&partial, &base).map_err(|e| fail(format!("keeping the base: {e}")))?;
        }
        let run = Run { profile, model, settings, scratch: dir, registry };
        let extra = [
            "--kl-divergence-base".to_string(),
            base.display().to_string(),
            "--kl-divergence".into(),
        ];
        let (mean, p99, same_top_pct) = self.tool().run_tool(&run, &extra, parse_kld).await?;
        Ok(KldResult {
            mean,
            p99,
            same_top_pct,
            ctx: self.ctx,
            chunks: self.chunks,
            ms: started.elapsed().as_secs_f64() * 1e3,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_kl_divergence_statistics() {
        let out = "====== KL divergence statistics ======\n\
            Mean    KLD:   0.003771 ±   0.000038\nMaximum KLD:   0.004735\n\
            99.9%   KLD:   0.004734\n99.0%   KLD:   0.004659\n\
            ====== Token probability statistics ======\nSame top p: 87.302 ± 2.428 %\n";
        assert_eq!(parse_kld(out), Some((0.003771, 0.004659, 87.302)));
        assert_eq!(parse_kld("Mean    KLD:   0.1\n"), None, "all three or nothing");
        let itself = "Mean    KLD:  -0.000001 ±   0.000000\n99.0%   KLD:  -0.000000\nSame top p: 100.000 ± 0.000 %\n";
        assert_eq!(parse_kld(itself), Some((0.0, 0.0, 100.0)), "never below 0");
        let rounded = itself.replace("-0.000001", "0.000001");
        assert_eq!(parse_kld(&rounded).unwrap().0, 0.0, "below what the tool can tell");
    }

    #[test]
    fn a_base_is_named_by_everything_it_depends_on() {
        let dir = Path::new("/data/kld");
        let p = KldProbe::default();
        let model = Path::new("/m/a.gguf");
        assert_eq!(p.base_path(dir, model), p.base_path(dir, model));
        assert_ne!(p.base_path(dir, model), p.base_path(dir, Path::new("/m/b.gguf")));
        let other =
            KldProbe { reference: [("cache_type_k".into(), "q8_0".into())].into(), ..p.clone() };
        assert_ne!(p.base_path(dir, model), other.base_path(dir, model));
        assert_ne!(p.base_path(dir, model), KldProbe { chunks: 4, ..p }.base_path(dir, model));
    }
}
