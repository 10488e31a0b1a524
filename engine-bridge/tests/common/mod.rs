//! Helpers shared by engine-bridge's integration tests: the repository's
//! demo profile (the real llama-server, the real small instruct model and
//! the tiny random one), settings from pairs, and a launch of a model.

#![allow(dead_code)]

use std::path::PathBuf;
use std::time::Duration;

use engine_bridge::{Profile, RunningEngine, Settings, free_port, plan};

pub fn demo_profile() -> Profile {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let profile = Profile::load(&root.join("profiles/demo.toml")).unwrap();
    assert!(
        profile.binary.is_file() && profile.models.iter().all(|m| m.path.is_file()),
        "the demo engine and models are missing: run scripts/setup.sh first"
    );
    profile
}

/// The demo profile's tiny random-weights model (speed, memory and fault
/// tests: its answers mean nothing).
pub fn tiny_model(profile: &mut Profile) -> &mut engine_bridge::profile::ModelEntry {
    profile.models.iter_mut().find(|m| m.name == "tiny-llama").expect("the demo's tiny model")
}

/// Where the demo profile's model `name` is.
pub fn model_path(profile: &Profile, name: &str) -> PathBuf {
    profile.model(name).expect("a model of the demo profile").path.clone()
}

pub fn settings(pairs: &[(&str, &str)]) -> Settings {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

/// The tiny model on `profile` with `s`, as planned (no flags adapted).
pub async fn launch(profile: &Profile, s: &Settings) -> RunningEngine {
    launch_model(profile, "tiny-llama", s).await
}

/// The model `name` on `profile` with `s`, as planned.
pub async fn launch_model(profile: &Profile, name: &str, s: &Settings) -> RunningEngine {
    let port = free_port().unwrap();
    let spec = plan(profile, name, s, port).unwrap();
    RunningEngine::launch(spec, port, Duration::from_secs(60)).await.expect("the engine starts")
}
