//! Helpers shared by engine-bridge's integration tests: the repository's
//! demo profile (the real llama-server, the real small instruct model and
//! the tiny random one), settings from pairs, and a launch of a model.

#![allow(dead_code)]

use std::ops::{Deref, DerefMut};
use std::path::PathBuf;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use engine_bridge::{Profile, RunningEngine, Settings, free_port, plan};

/// The demo profile, held for one test at a time: the tests that start
/// llama-server take turns (see [`Demo`]).
pub fn demo_profile() -> Demo {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let profile = Profile::load(&root.join("profiles/demo.toml")).unwrap();
    assert!(
        profile.binary.is_file() && profile.models.iter().all(|m| m.path.is_file()),
        "the demo engine and models are missing: run scripts/setup.sh first"
    );
    Demo { profile, _turn: engine_turn() }
}

/// This test's turn with a real engine (see [`Demo`]), for the tests that
/// start one from a profile of their own.
pub fn engine_turn() -> EngineTurn {
    static ENGINE: Mutex<()> = Mutex::new(());
    // A test that failed holding it hands it on all the same.
    EngineTurn(ENGINE.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
}

/// A turn with the real engine, held across the test's awaits: each test
/// has a runtime and a thread of its own, so a test waiting for its turn
/// blocks only itself.
#[must_use = "the turn ends when it is dropped: bind it for the whole test"]
pub struct EngineTurn(#[allow(dead_code)] MutexGuard<'static, ()>);

/// The demo profile and this test's turn with the real engine, until it is
/// dropped. Each engine spins its threads at every step, and two engines on
/// two cores spend most of their time waiting for each other's threads:
/// this suite took 355 s of wall time and 577 s of CPU two tests at a time,
/// 149 s and 157 s one at a time. The tests of the fake engine run beside.
pub struct Demo {
    profile: Profile,
    _turn: EngineTurn,
}

impl Deref for Demo {
    type Target = Profile;
    fn deref(&self) -> &Profile {
        &self.profile
    }
}

impl DerefMut for Demo {
    fn deref_mut(&mut self) -> &mut Profile {
        &mut self.profile
    }
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
