//! What a study's numbers were measured on, so a reader can tell whether
//! they apply to their own setup: the machine (CPU, memory, GPUs, measured
//! memory bandwidth), the engine and the build it reported, and the model
//! file with its SHA-256.

use std::collections::{BTreeMap, BTreeSet};
use std::io::Read as _;
use std::path::{Path, PathBuf};

use engine_bridge::Profile;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

/// Where it was measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Provenance {
    pub cpu: Option<String>,
    pub threads: usize,
    pub ram_bytes: Option<u64>,
    pub gpus: Vec<String>,
    pub bandwidth_bytes_per_s: Option<f64>,
    pub os: String,
    pub profile: String,
    pub engine_kind: String,
    pub binary: Option<String>,
    /// Every build string the engine reported during the study (more than
    /// one: it was changed midway).
    pub builds: Vec<String>,
    pub model: String,
    pub model_file: Option<String>,
    pub model_bytes: Option<u64>,
    pub model_sha256: Option<String>,
}

impl Provenance {
    /// The machine as it is now, the profile's engine and model, and the
    /// builds its trials' engines reported (`props` of each trial).
    pub async fn gather(
        data_dir: &Path,
        bandwidth: Option<f64>,
        profile: Option<&Profile>,
        profile_name: &str,
        model: &str,
        props: &[Option<String>],
    ) -> Self {
        let (cpu, ram_bytes) = engine_bridge::memory::cpu_and_ram();
        let gpus = engine_bridge::memory::gpu_names().await;
        let builds: BTreeSet<String> = props
            .iter()
            .flatten()
            .filter_map(|p| serde_json::from_str::<serde_json::Value>(p).ok())
            .filter_map(|p| p.get("build_info")?.as_str().map(str::to_string))
            .collect();
        let model_path = profile.and_then(|p| p.model(model)).map(|m| m.path.clone());
        let model_bytes =
            model_path.as_ref().and_then(|p| std::fs::metadata(p).ok()).map(|m| m.len());
        let model_sha256 = match &model_path {
            Some(path) => model_sha256(data_dir, path).await.ok(),
            None => None,
        };
        Provenance {
            cpu,
            threads: std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1),
            ram_bytes,
            gpus,
            bandwidth_bytes_per_s: bandwidth,
            os: format!(
                "{} {} {}",
                std::env::consts::OS,
                std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim(),
                std::env::consts::ARCH
            ),
            profile: profile_name.to_string(),
            engine_kind: profile.map_or("unknown".into(), |p| p.kind.name().to_string()),
            binary: profile
                .filter(|p| !p.binary.as_os_str().is_empty())
                .map(|p| p.binary.display().to_string()),
            builds: builds.into_iter().collect(),
            model: model.to_string(),
            model_file: model_path.map(|p| p.display().to_string()),
            model_bytes,
            model_sha256,
        }
    }

    /// A markdown section.
    pub fn markdown(&self) -> String {
        let gib = |b: u64| format!("{:.1} GiB", b as f64 / (1u64 << 30) as f64);
        let mut lines = vec![
            format!(
                "- **Machine**: {}, {} threads, {} memory; {}",
                self.cpu.as_deref().unwrap_or("CPU not known"),
                self.threads,
                self.ram_bytes.map_or("unknown".into(), gib),
                self.os
            ),
            format!(
                "- **GPUs**: {}",
                if self.gpus.is_empty() { "none found".into() } else { self.gpus.join("; ") }
            ),
            format!(
                "- **Memory bandwidth** (measured, reading): {}",
                self.bandwidth_bytes_per_s
                    .map_or("not measured".into(), |b| format!("{:.1} GB/s", b / 1e9))
            ),
            format!(
                "- **Engine**: {} (profile `{}`){}; build {}",
                self.engine_kind,
                self.profile,
                self.binary.as_ref().map_or(String::new(), |b| format!(", `{b}`")),
                match self.builds.as_slice() {
                    [] => "not reported".to_string(),
                    [one] => format!("`{one}`"),
                    many => format!(
                        "changed during the study: {}",
                        many.iter().map(|b| format!("`{b}`")).collect::<Vec<_>>().join(", ")
                    ),
                }
            ),
            format!(
                "- **Model**: `{}`{}{}",
                self.model,
                self.model_file.as_ref().map_or(String::new(), |f| format!(", file `{f}`")),
                self.model_bytes.map_or(String::new(), |b| format!(" ({})", gib(b))),
            ),
        ];
        if let Some(hash) = &self.model_sha256 {
            lines.push(format!("- **Model SHA-256**: `{hash}`"));
        }
        format!("## Measured on\n\n{}\n", lines.join("\n"))
    }
}

/// A model file's hash, computed once per file (path, size and change
/// time) and kept in the data folder: models are large.
pub async fn model_sha256(data_dir: &Path, path: &Path) -> std::io::Result<String> {
    let cache_path = data_dir.join("model-hashes.json");
    let meta = std::fs::metadata(path)?;
    let stamp = format!(
        "{}:{}",
        meta.len(),
        meta.modified()?.duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_millis()
    );
    let key = path.display().to_string();
    let read_cache = || -> BTreeMap<String, (String, String)> {
        std::fs::read(&cache_path)
            .ok()
            .and_then(|b| serde_json::from_slice(&b).ok())
            .unwrap_or_default()
    };
    if let Some((s, hash)) = read_cache().get(&key)
        && *s == stamp
    {
        return Ok(hash.clone());
    }
    let file: PathBuf = path.to_path_buf();
    let hash = tokio::task::spawn_blocking(move || -> std::io::Result<String> {
        let mut f = std::fs::File::open(&file)?;
        let mut hasher = Sha256::new();
        let mut buf = vec![0u8; 1 << 20];
        loop {
            let n = f.read(&mut buf)?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok(format!("{:x}", hasher.finalize()))
    })
    .await
    .map_err(std::io::Error::other)??;
    let mut cache = read_cache();
    cache.insert(key, (stamp, hash.clone()));
    std::fs::create_dir_all(data_dir)?;
    std::fs::write(&cache_path, serde_json::to_vec_pretty(&cache).expect("serializes"))?;
    Ok(hash)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_model_is_hashed_once_and_again_when_it_changes() {
        let dir = tempfile::tempdir().unwrap();
        let model = dir.path().join("m.gguf");
        std::fs::write(&model, b"abc").unwrap();
        let first = model_sha256(dir.path(), &model).await.unwrap();
        // SHA-256 of "abc".
        assert_eq!(first, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert!(dir.path().join("model-hashes.json").is_file());
        std::fs::write(&model, b"abcd").unwrap();
        let second = model_sha256(dir.path(), &model).await.unwrap();
        assert_ne!(first, second, "a changed file is hashed again");
    }
}
