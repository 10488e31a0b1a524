//! `kill -9` Tunebook in the middle of a trial: the engine dies with it; start
//! it again, and the cut-off trial is marked interrupted.

use crate::common;

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use common::{eventually, http};
use engine_bridge::registry::start_ticks;
use nix::sys::signal::Signal;
use nix::unistd::Pid;
use tunebook_views::types::{TrialState, TrialView};

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

/// The pid of the engine Tunebook recorded in `engines`, once it has.
async fn engine_pid(engines: &Path, limit: Duration) -> u32 {
    eventually(limit, "the engine record", || async move {
        let entry = std::fs::read_dir(engines)
            .ok()?
            .flatten()
            .find(|e| e.path().extension().is_some_and(|x| x == "json"))?;
        entry.path().file_stem()?.to_str()?.parse().ok()
    })
    .await
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
    let pid = engine_pid(&engines, limit).await;
    let _guard = KillOnDrop(pid);
    eventually(limit, "the trial to be loading", || async {
        get_trial(&base, trial.id).await.filter(|t| t.state == TrialState::Loading)
    })
    .await;

    first.kill().await.unwrap(); // SIGKILL: no chance to clean up.
    first.wait().await.unwrap();
    // The kernel ends the engine with Tunebook (its parent-death signal).
    eventually(limit, "the engine to die with Tunebook", || async move {
        start_ticks(pid).is_none().then_some(())
    })
    .await;

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

/// A data folder, a profile `slow` whose fake engine takes a moment to
/// load (time enough to kill Tunebook mid-trial), a free port and its URL.
struct Slow {
    data: tempfile::TempDir,
    profiles: tempfile::TempDir,
    port: u16,
    base: String,
}

fn slow() -> Slow {
    let (data, profiles) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    common::write_fake_profile(
        profiles.path(),
        "slow",
        &["--fake", "slow-load", "--fake-ms", "400"],
    );
    let port = engine_bridge::free_port().unwrap();
    Slow { data, profiles, port, base: format!("http://127.0.0.1:{port}") }
}

/// Whether the server at `base` answers.
async fn answers(base: &str) -> Option<reqwest::Response> {
    http().get(format!("{base}/api/studies")).send().await.ok().filter(|r| r.status().is_success())
}

/// Starts the study `def` on the server at `base`; returns its id.
async fn start_study(base: &str, def: &serde_json::Value) -> i64 {
    let r = http().post(format!("{base}/api/studies")).json(def).send().await.unwrap();
    let study: serde_json::Value = r.json().await.unwrap();
    study["id"].as_i64().unwrap_or_else(|| panic!("no study started: {study}"))
}

#[tokio::test]
async fn a_study_survives_kill_9_and_finishes_without_losing_or_repeating_a_trial() {
    let Slow { data, profiles, port, base } = slow();
    let limit = Duration::from_secs(60);
    let ready = || answers(&base);

    let mut first = serve(data.path(), profiles.path(), port);
    eventually(limit, "the server", ready).await;
    let def = serde_json::json!({
        "name": "threads",
        "profile": "slow",
        "model": "m",
        "space": { "threads": { "min": 1, "max": 5 } },
        "baseline": { "threads": 1 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        "budget": { "settle_trials": 0 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let id = start_study(&base, &def).await;
    let trials = || async {
        http()
            .get(format!("{base}/api/studies/{id}/trials"))
            .send()
            .await
            .ok()?
            .json::<Vec<TrialView>>()
            .await
            .ok()
    };
    // Kill it while the second trial loads, its first trial done.
    let cut = eventually(limit, "the second trial to be loading", || async {
        let list = trials().await?;
        (list.len() == 2
            && list[0].state == TrialState::Done
            && list[1].state == TrialState::Loading)
            .then(|| list[1].clone())
    })
    .await;
    let engines = data.path().join("engines");
    let pid = engine_pid(&engines, limit).await;
    let _guard = KillOnDrop(pid);
    first.kill().await.unwrap();
    first.wait().await.unwrap();

    let mut second = serve(data.path(), profiles.path(), port);
    eventually(limit, "the study to finish", || async {
        let row: serde_json::Value =
            http().get(format!("{base}/api/studies/{id}")).send().await.ok()?.json().await.ok()?;
        (row["state"] == "done").then_some(())
    })
    .await;
    assert!(start_ticks(pid).is_none(), "the engine of the cut-off trial was stopped");
    let list = trials().await.unwrap();
    let interrupted: Vec<_> = list.iter().filter(|t| t.state == TrialState::Failed).collect();
    assert_eq!(interrupted.len(), 1, "{list:?}");
    assert_eq!(interrupted[0].id, cut.id);
    assert_eq!(interrupted[0].failure_kind.as_deref(), Some("interrupted"));
    let done: Vec<_> = list.iter().filter(|t| t.state == TrialState::Done).collect();
    assert_eq!(done.len(), 5, "each of the five configurations done once: {list:?}");
    let configs: std::collections::BTreeSet<_> =
        done.iter().map(|t| t.settings["threads"].clone()).collect();
    assert_eq!(configs.len(), 5);
    let rerun = list
        .iter()
        .find(|t| t.id > cut.id && t.settings == cut.settings)
        .expect("the cut-off configuration ran again");
    assert!(rerun.note.as_deref().unwrap().contains("interrupted"));

    signal(second.id().unwrap(), Signal::SIGTERM);
    let status = tokio::time::timeout(limit, second.wait()).await.expect("a clean stop").unwrap();
    assert!(status.success(), "{status:?}");
    let left = std::fs::read_dir(&engines).map(|d| d.flatten().count()).unwrap_or(0);
    assert_eq!(left, 0, "no engine record left: no engine outlives Tunebook");
}

/// "Settle this" is on disk before it answers: `kill -9` while its first
/// run loads, start again, and every run it queued runs (the cut-off one
/// again), none lost, none run twice.
#[tokio::test]
async fn settling_runs_survive_kill_9() {
    let Slow { data, profiles, port, base } = slow();
    let limit = Duration::from_secs(60);
    let ready = || answers(&base);
    let state_is = |want: &'static str, id: i64| {
        let url = format!("{base}/api/studies/{id}");
        eventually(limit, want, move || {
            let url = url.clone();
            async move {
                let row: serde_json::Value =
                    http().get(url).send().await.ok()?.json().await.ok()?;
                (row["state"] == want).then_some(())
            }
        })
    };
    let mut first = serve(data.path(), profiles.path(), port);
    eventually(limit, "the server", ready).await;
    // Three trials, three values of one setting: too few to tell anything.
    let def = serde_json::json!({
        "name": "threads",
        "profile": "slow",
        "model": "m",
        "space": { "threads": [1, 2, 3] },
        "baseline": { "threads": 1 },
        "objectives": [{ "metric": "decode_tps" }],
        "strategy": { "kind": "grid" },
        // Asked for by hand only.
        "budget": { "settle_trials": 0 },
        "probes": { "speed": { "prompt_tokens": 8, "n_predict": 4, "repeats": 1, "warmup": 0 } }
    });
    let id = start_study(&base, &def).await;
    state_is("done", id).await;
    let asked = serde_json::json!({ "setting": "threads", "metric": "decode_tps" });
    let answer =
        http().post(format!("{base}/api/studies/{id}/settle")).json(&asked).send().await.unwrap();
    assert_eq!(answer.status(), 202);
    let queued: Vec<i64> = answer.json::<serde_json::Value>().await.unwrap()["trials"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_i64().unwrap())
        .collect();
    assert_eq!(queued.len(), 6, "two rounds of the baseline and threads = 2 and 3");
    let trial = |n: i64| {
        let base = base.clone();
        async move { get_trial(&base, n).await }
    };
    eventually(limit, "the first settling run to be loading", || async {
        (trial(queued[0]).await?.state == TrialState::Loading).then_some(())
    })
    .await;
    let pid = engine_pid(&data.path().join("engines"), limit).await;
    let _guard = KillOnDrop(pid);
    first.kill().await.unwrap();
    first.wait().await.unwrap();

    let mut second = serve(data.path(), profiles.path(), port);
    eventually(limit, "the server again", ready).await;
    state_is("done", id).await;
    let list: Vec<TrialView> = http()
        .get(format!("{base}/api/studies/{id}/trials"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let cut = list.iter().find(|t| t.id == queued[0]).unwrap();
    assert_eq!(cut.failure_kind.as_deref(), Some("interrupted"), "{cut:?}");
    for id in &queued[1..] {
        let t = list.iter().find(|t| t.id == *id).unwrap();
        assert_eq!(t.state, TrialState::Done, "queued before the kill, run after it: {t:?}");
    }
    let again: Vec<&TrialView> = list.iter().filter(|t| t.id > queued[5]).collect();
    assert_eq!(again.len(), 1, "the cut-off run once again, nothing else: {list:?}");
    assert_eq!(again[0].settings, cut.settings);
    assert_eq!(again[0].role.map(|r| r.as_str()), Some("settle"));
    assert!(again[0].note.as_deref().unwrap().contains("interrupted"), "{:?}", again[0].note);
    signal(second.id().unwrap(), Signal::SIGTERM);
    let status = tokio::time::timeout(limit, second.wait()).await.expect("a clean stop").unwrap();
    assert!(status.success(), "{status:?}");
}
