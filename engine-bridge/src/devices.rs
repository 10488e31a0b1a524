//! The devices a llama.cpp build can place layers on, as the build itself
//! lists them (`--list-devices`): a CUDA, ROCm, Vulkan, SYCL or Metal build
//! names its GPUs, a CPU-only build none. Asked once per binary (again when
//! the file changes), never through a shell.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{LazyLock, Mutex};
use std::time::{Duration, SystemTime};

use crate::profile::{EngineKind, Profile};

type Cache = HashMap<(PathBuf, Option<SystemTime>), Option<Vec<String>>>;
static CACHE: LazyLock<Mutex<Cache>> = LazyLock::new(|| Mutex::new(HashMap::new()));

/// The devices `--list-devices` names after "Available devices:", each
/// line trimmed; none for "(none)".
pub fn parse(listing: &str) -> Option<Vec<String>> {
    let (_, after) = listing.split_once("Available devices:")?;
    Some(
        after
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && *l != "(none)")
            .map(str::to_string)
            .collect(),
    )
}

/// The offload devices of `profile`'s build; `None` where that cannot be
/// told (another kind of engine, a build without `--list-devices`, one
/// that does not start).
pub async fn offload_devices(profile: &Profile) -> Option<Vec<String>> {
    if profile.kind != EngineKind::LlamaServer {
        return None;
    }
    let modified = std::fs::metadata(&profile.binary).and_then(|m| m.modified()).ok();
    let key = (profile.binary.clone(), modified);
    if let Some(found) = CACHE.lock().expect("device cache").get(&key) {
        return found.clone();
    }
    let mut cmd = crate::children::command(&profile.binary);
    cmd.arg("--list-devices").envs(&profile.env);
    if !profile.library_path.is_empty() {
        cmd.env("LD_LIBRARY_PATH", std::env::join_paths(&profile.library_path).ok()?);
    }
    let found = match crate::children::output(cmd, Duration::from_secs(15), None).await {
        Ok(out) if out.status.success() => parse(&String::from_utf8_lossy(&out.stdout)),
        _ => None,
    };
    CACHE.lock().expect("device cache").insert(key, found.clone());
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_builds_own_list() {
        assert_eq!(parse("Available devices:\n  (none)\n"), Some(vec![]));
        let cuda = "ggml_cuda_init: found 1 CUDA devices\nAvailable devices:\n  CUDA0: NVIDIA H100 80GB HBM3 (81008 MiB, 80500 MiB free)\n";
        assert_eq!(
            parse(cuda).unwrap(),
            ["CUDA0: NVIDIA H100 80GB HBM3 (81008 MiB, 80500 MiB free)"]
        );
        assert_eq!(parse("usage: llama-server [options]"), None, "a build without the flag");
    }
}
