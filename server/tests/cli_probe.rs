//! The command line on the real engine: `tunebook probe` (JSON for
//! machines, a report for people, a clear error for a bad setting, a port
//! taken under it tried again) and `tunebook run` (a study headless from a
//! file).

use crate::common;

use std::process::Command;

use common::{repo_root, require_demo_engine};

fn probe(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .arg("probe")
        .arg(format!("--profiles={}", repo_root().join("profiles").display()))
        .args(["--profile", "demo", "--model", "tiny-llama", "--bandwidth-gbps", "20"])
        .args(args)
        // Logs, of which there are many at this level, go to stderr, never
        // into the JSON on stdout.
        .env("RUST_LOG", "debug")
        .output()
        .unwrap()
}

#[test]
fn json_report_of_one_configuration() {
    let _engine = require_demo_engine();
    let out = probe(&["--json", "--", "ctx_size=1024", "threads=2", "cache_type_k=q4_0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stderr.windows(5).any(|w| w == b"DEBUG"), "logs at debug level on stderr");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(report["command"].as_str().unwrap().contains("-ctk q4_0"));
    let speed = &report["outcome"]["measurement"]["speed"];
    assert_eq!(speed["summary"]["tokens_generated"], 32);
    assert!(speed["decode_tps"]["median"].as_f64().unwrap() > 0.0);
    assert_eq!(report["outcome"]["props"]["n_ctx"], 1024);
    assert!(report["outcome"]["memory"]["peak_rss_bytes"].as_u64().unwrap() > 0);
    assert!(report["ceiling_tps"].as_f64().unwrap() > 0.0);
    assert_eq!(report["bandwidth_bytes_per_s"], 20e9);
}

#[test]
fn readable_report_and_errors() {
    let _engine = require_demo_engine();
    let out = probe(&["--", "ctx_size=1024"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let text = String::from_utf8_lossy(&out.stdout);
    for label in ["load", "memory", "TTFT", "prefill", "decode", "ceiling", "quality"] {
        assert!(text.lines().any(|l| l.starts_with(label)), "{label} missing from:\n{text}");
    }

    // Exit statuses a script can tell apart: 3, the settings are not
    // valid (nothing ran); 4, the engine refused one.
    let out = probe(&["--", "threads=lots"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("setting `threads`: `lots` is not a whole number"), "{err}");

    // A type the catalog does not know is refused before anything runs; one
    // a profile names (a fork's) that this build lacks, by the engine.
    let out = probe(&["--", "cache_type_k=q3_bogus"]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("`q3_bogus` is not one of f32, f16"), "{err}");
    let fork = tempfile::tempdir().unwrap();
    let profiles = common::fork_profiles(fork.path());
    let out = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .arg("probe")
        .arg(format!("--profiles={}", profiles.display()))
        .args(["--profile", "demo", "--model", "tiny-llama", "--bandwidth-gbps", "20"])
        .args(["--", "cache_type_k=q3_bogus"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("setting rejected") && err.contains("Unsupported cache type"), "{err}");
}

#[test]
fn a_port_taken_before_the_engine_binds_it_is_tried_again_elsewhere() {
    // Another program binds the port found free before the engine does:
    // the probe launches again on another port rather than failing.
    let dir = tempfile::tempdir().unwrap();
    let mark = dir.path().join("taken-once");
    let args = ["--fake", "ok", "--fake-taken-once", mark.to_str().unwrap()];
    common::write_fake_profile(dir.path(), "fake", &args);
    let out = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .arg("probe")
        .arg(format!("--profiles={}", dir.path().display()))
        .args(["--profile", "fake", "--model", "m", "--bandwidth-gbps", "20", "--json"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{err}");
    assert!(mark.exists(), "the first launch found its port taken");
    assert_eq!(err.matches("starting again on another port").count(), 1, "{err}");
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(
        report["outcome"]["measurement"]["speed"]["decode_tps"]["median"].as_f64().unwrap() > 0.0
    );
}

fn tunebook_command(args: &[&str], data: &std::path::Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_tunebook"));
    command
        .args(args)
        .arg(format!("--profiles={}", repo_root().join("profiles").display()))
        .arg(format!("--data-dir={}", data.display()));
    command
}

fn tunebook(args: &[&str], data: &std::path::Path) -> std::process::Output {
    tunebook_command(args, data).output().unwrap()
}

/// A grid study of the demo model over `ubatch_size`, written to `dir`;
/// the grid alone, without the findings' share (what a run counts stays
/// what the grid holds).
fn write_study(
    dir: &std::path::Path,
    name: &str,
    ubatch_sizes: &str,
    n_predict: u32,
    repeats: u32,
) -> std::path::PathBuf {
    let file = dir.join("study.toml");
    let text = format!(
        r#"
name = "{name}"
profile = "demo"
model = "tiny-llama"
strategy = {{ kind = "grid" }}
budget = {{ settle_trials = 0 }}
[space]
ubatch_size = {ubatch_sizes}
[fixed]
ctx_size = 1024
threads = 2
[[objectives]]
metric = "decode_tps"
[probes.speed]
prompt_tokens = 16
n_predict = {n_predict}
repeats = {repeats}
warmup = 0
"#
    );
    std::fs::write(&file, text).unwrap();
    file
}

#[test]
fn a_study_runs_headless_from_a_file() {
    let _engine = require_demo_engine();
    let data = tempfile::tempdir().unwrap();
    let file = write_study(data.path(), "from the command line", "[128, 256]", 4, 1);
    let out = tunebook(&["run", file.to_str().unwrap()], data.path());
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        stdout.contains("study 1 `from the command line`: done — every configuration the space allows has been tried"),
        "{stdout}"
    );
    // The engine's default, then both values; the fastest on the front.
    assert!(stdout.contains(r#"trials: {"done": 3}"#), "{stdout}");
    assert!(stdout.contains("Pareto front (decode_tps):\n  trial"), "{stdout}");
    // And what the trials show, as the study's page writes it.
    assert!(stdout.contains("## Best configurations"), "{stdout}");

    let out = tunebook(&["run", "--resume", "1"], data.path());
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("study 1 has ended (done)"), "{err}");

    std::fs::write(
        &file,
        std::fs::read_to_string(&file).unwrap().replace("threads = 2", "threads = \"lots\""),
    )
    .unwrap();
    let out = tunebook(&["run", file.to_str().unwrap()], data.path());
    assert_eq!(out.status.code(), Some(3), "an invalid study");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("the study is not valid") && err.contains("`lots` is not a whole number"),
        "{err}"
    );
    // A file that does not parse is an invalid study; one that is not
    // there is an error of another kind.
    std::fs::write(&file, "name = ").unwrap();
    let out = tunebook(&["run", file.to_str().unwrap()], data.path());
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let missing = data.path().join("missing.toml");
    let out = tunebook(&["run", missing.to_str().unwrap()], data.path());
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn sigterm_pauses_a_headless_study_and_says_it_was_interrupted() {
    let _engine = require_demo_engine();
    let data = tempfile::tempdir().unwrap();
    // Long enough to be stopped in the middle: 50 repeats a trial.
    let file = write_study(data.path(), "long", "[64, 128, 256, 512]", 64, 50);
    let mut child = tunebook_command(&["run", file.to_str().unwrap()], data.path())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The first trial's engine log appears once its engine starts.
    let log = data.path().join("logs/trial-1.log");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !log.exists() {
        assert!(std::time::Instant::now() < deadline, "no trial started");
        assert!(child.try_wait().unwrap().is_none(), "the command ended early");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert!(err.contains("study 1 paused; go on with: tunebook run --resume 1"), "{err}");
    // Paused, not ended: it can go on.
    let url = tunebook::Settings::with_data_dir(data.path().to_path_buf()).database_url;
    let state = tokio::runtime::Runtime::new().unwrap().block_on(async {
        let db = tunebook::db::Db::connect(&url).await.unwrap();
        tunebook::db::studies::get(&db, 1).await.unwrap().unwrap().state
    });
    assert_eq!(state, tunebook::db::studies::StudyState::Paused);
}

#[test]
fn outside_a_checkout_profiles_and_data_live_in_the_users_folders() {
    let home = tempfile::tempdir().unwrap();
    let (config, data) = (home.path().join("config"), home.path().join("share"));
    let profiles = config.join("tunebook/profiles");
    std::fs::create_dir_all(&profiles).unwrap();
    common::write_fake_profile(&profiles, "mine", &[]);
    let out = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["export", "--format", "csv"])
        .current_dir(home.path())
        .env("XDG_CONFIG_HOME", &config)
        .env("XDG_DATA_HOME", &data)
        .env_remove("TUNEBOOK_PROFILES")
        .env_remove("TUNEBOOK_DATA_DIR")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(data.join("tunebook/tunebook.db").is_file(), "the database in the user's data folder");
    let out = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["probe", "--profile", "nope", "--model", "m"])
        .current_dir(home.path())
        .env("XDG_CONFIG_HOME", &config)
        .env_remove("TUNEBOOK_PROFILES")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no engine profile `nope` (have: mine)"), "{err}");
}
