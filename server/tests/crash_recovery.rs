//! `kill -9` Tunebook in the middle of a trial, start it again: the engine it
//! left running is stopped, and the cut-off trial is marked interrupted.

mod common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{eventually, http};
use engine_bridge::registry::start_ticks;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tunebook_app::types::{TrialState, TrialView};

fn serve(data: &Path, profiles: &Path, port: u16) -> tokio::process::Child {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .arg("serve")
        .arg(format!("--addr=127.0.0.1:{port}"))
        .arg(format!("--data-dir={}", data.display()))
        .arg(format!("--profiles={}", profiles.display()))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap()
}

async fn get_trial(base: &str, id: i64) -> Option<TrialView> {
    http().get(format!("{base}/api/trials/{id}")).send().await.ok()?.json().await.ok()
}

fn signal(pid: u32, signal: Signal) {
    let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), signal);
}

/// Kills the engine if the test fails before Tunebook does.
struct KillOnDrop(u32);
impl Drop for KillOnDrop {
    fn drop(&mut self) {
        signal(self.0, Signal::SIGKILL);
    }
}

#[tokio::test]
async fn a_killed_server_leaves_no_engine_and_no_lost_trial() {
    let data = tempfile::tempdir().unwrap();
    let profiles = tempfile::tempdir().unwrap();
    common::write_fake_profile(profiles.path(), "stuck", &["--fake", "never-ready"]);
    let port = engine_bridge::free_port().unwrap();
    let base = format!("http://127.0.0.1:{port}");
    let limit = Duration::from_secs(30);

    let mut first = serve(data.path(), profiles.path(), port);
    eventually(limit, "the server", || async {
        http()
            .get(format!("{base}/api/profiles"))
            .send()
            .await
            .ok()
            .filter(|r| r.status().is_success())
    })
    .await;
    let body = serde_json::json!({"profile": "stuck", "model": "m", "settings": {}});
    let trial: TrialView = http()
        .post(format!("{base}/api/trials"))
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();

    // The engine is recorded once it runs; the trial waits for it to load.
    let engines = data.path().join("engines");
    let pid: u32 = eventually(limit, "the engine record", || {
        let engines = engines.clone();
        async move {
            let entry = std::fs::read_dir(&engines)
                .ok()?
                .flatten()
                .find(|e| e.path().extension().is_some_and(|x| x == "json"))?;
            entry.path().file_stem()?.to_str()?.parse().ok()
        }
    })
    .await;
    let _guard = KillOnDrop(pid);
    eventually(limit, "the trial to be loading", || async {
        get_trial(&base, trial.id).await.filter(|t| t.state == TrialState::Loading)
    })
    .await;

    first.kill().await.unwrap(); // SIGKILL: no chance to clean up.
    first.wait().await.unwrap();
    assert!(start_ticks(pid).is_some(), "without recovery the engine {pid} would still be running");

    let mut second = serve(data.path(), profiles.path(), port);
    let t = eventually(limit, "the trial to be settled", || async {
        get_trial(&base, trial.id).await.filter(|t| t.state.is_final())
    })
    .await;
    assert_eq!(t.state, TrialState::Failed);
    assert_eq!(t.failure_kind.as_deref(), Some("interrupted"));
    assert!(t.error.unwrap().contains("while this trial was loading"));
    eventually(limit, "the leftover engine to be stopped", || async {
        start_ticks(pid).is_none().then_some(())
    })
    .await;

    signal(second.id().unwrap(), Signal::SIGTERM);
    let status = tokio::time::timeout(limit, second.wait()).await.expect("a clean stop").unwrap();
    assert!(status.success(), "{status:?}");
}
