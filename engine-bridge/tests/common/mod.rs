//! Helpers shared by engine-bridge's integration tests: the repository's
//! demo profile (the real llama-server and the tiny model), settings from
//! pairs, and a launch of the tiny model.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use engine_bridge::{Profile, RunningEngine, Settings, free_port, plan};

pub fn demo_profile() -> Profile {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let profile = Profile::load(&root.join("profiles/demo.toml")).unwrap();
    assert!(
        profile.binary.is_file() && profile.models[0].path.is_file(),
        "the demo engine and model are missing: run scripts/setup.sh first"
    );
    profile
}

pub fn settings(pairs: &[(&str, &str)]) -> Settings {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The tiny model on `profile` with `s`, as planned (no flags adapted).
pub async fn launch(profile: &Profile, s: &Settings) -> RunningEngine {
    let port = free_port().unwrap();
    let spec = plan(profile, "tiny-llama", s, port).unwrap();
    RunningEngine::launch(spec, port, Duration::from_secs(60)).await.expect("the engine starts")
}
