//! A finished study handed off, as a user of the other tools would take
//! it: `tunebook export` writes the study as an Optuna journal, which
//! Optuna itself loads (the project's Python, `.tools/bench-venv`), and a
//! trial as a llama-swap entry whose command, run as llama-swap would run
//! it, serves; as a compose service and as a systemd unit.

use std::process::Command;

use crate::common;
use common::{repo_root, require_demo_engine};

fn tunebook(args: &[&str], data: &std::path::Path) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(args)
        .arg(format!("--profiles={}", repo_root().join("profiles").display()))
        .arg(format!("--data-dir={}", data.display()))
        .output()
        .unwrap()
}

/// What `tunebook export` wrote, where it succeeded.
fn exported(args: &[&str], data: &std::path::Path) -> String {
    let out = tunebook(&[&["export"], args].concat(), data);
    assert!(out.status.success(), "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8(out.stdout).unwrap()
}

/// The project's Python with Optuna (the test command sets it up).
fn python() -> std::path::PathBuf {
    let python = std::env::var_os("TUNEBOOK_OPTUNA_PYTHON")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| repo_root().join(".tools/bench-venv/bin/python"));
    assert!(python.exists(), "no Python with Optuna: run scripts/setup-bench-venv.sh");
    python
}

const STUDY: &str = r#"
name = "hand off"
profile = "demo"
model = "tiny-llama"
strategy = { kind = "grid" }
budget = { settle_trials = 0, confirm_pairs = 0 }
[space]
ubatch_size = [128, 256]
cache_type_k = ["f16", "q8_0"]
[fixed]
ctx_size = 1024
threads = 2
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
[probes.speed]
prompt_tokens = 16
n_predict = 4
repeats = 1
warmup = 0
"#;

#[test]
fn a_finished_study_loads_in_optuna_and_its_trials_serve_from_llama_swaps_command() {
    let _engine = require_demo_engine();
    let data = tempfile::tempdir().unwrap();
    let file = data.path().join("study.toml");
    std::fs::write(&file, STUDY).unwrap();
    let out = tunebook(&["run", file.to_str().unwrap()], data.path());
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let records: Vec<serde_json::Value> = exported(&["--study", "1"], data.path())
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(records.len(), 5, "the baseline and a grid of four");

    // Optuna reads back every trial, its parameters and both objectives.
    let journal = data.path().join("journal.log");
    let out = tunebook(
        &[
            "export",
            "--study",
            "1",
            "--format",
            "optuna-journal",
            "--out",
            journal.to_str().unwrap(),
        ],
        data.path(),
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let out = Command::new(python())
        .arg(repo_root().join("scripts/optuna_journal_dump.py"))
        .arg(&journal)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let loaded: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let study = &loaded[0];
    assert_eq!(study["name"], "hand off");
    assert_eq!(study["directions"], serde_json::json!(["MAXIMIZE", "MINIMIZE"]));
    let trials = study["trials"].as_array().unwrap();
    assert_eq!(trials.len(), records.len());
    for (t, r) in trials.iter().zip(&records) {
        // A record is the trial, flattened, with its samples.
        assert_eq!(t["user_attrs"]["tunebook_trial"], r["id"]);
        assert_eq!(t["state"], "COMPLETE", "{t}");
        assert_eq!(t["values"][0].as_f64(), r["decode_tps"].as_f64());
        assert_eq!(t["values"][1].as_f64(), r["peak_rss_bytes"].as_f64());
        assert!(t["has_times"].as_bool().unwrap());
        let settings = r["settings"].as_object().unwrap();
        match settings.get("ubatch_size") {
            // Whole numbers as whole numbers, choices as their text.
            Some(u) => {
                assert_eq!(t["params"]["ubatch_size"].to_string(), u.as_str().unwrap());
                assert_eq!(t["distributions"]["ubatch_size"], "CategoricalDistribution");
                assert_eq!(t["params"]["cache_type_k"], settings["cache_type_k"]);
            }
            // The baseline runs the engine's defaults: nothing it did not set.
            None => assert!(t["params"].get("ubatch_size").is_none(), "{t}"),
        }
    }
    assert!(!study["best"].as_array().unwrap().is_empty(), "a front to draw");

    // A trial's configuration as a llama-swap entry: its command, with the
    // port llama-swap picks, serves.
    let swap = exported(&["--trial", "2", "--format", "llama-swap"], data.path());
    let config: serde_norway::Value = serde_norway::from_str(&swap).unwrap();
    let entry = &config["models"]["tiny-llama"];
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let cmd = entry["cmd"].as_str().unwrap().replace("${PORT}", &port.to_string());
    let words = shlex::split(&cmd).unwrap();
    let mut server = Command::new(&words[0])
        .args(&words[1..])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let healthy = healthy_within(port, std::time::Duration::from_secs(60));
    server.kill().unwrap();
    server.wait().unwrap();
    assert!(healthy, "the llama-swap entry's command did not serve: {cmd}");
    assert_eq!(entry["checkEndpoint"].as_str(), Some("/health"));

    // As a compose service: the same arguments, the model mounted.
    let compose = exported(&["--trial", "2", "--format", "compose"], data.path());
    let file: serde_norway::Value = serde_norway::from_str(&compose).unwrap();
    let service = &file["services"]["tiny-llama"];
    let command: Vec<&str> =
        service["command"].as_sequence().unwrap().iter().filter_map(|w| w.as_str()).collect();
    let model = words.iter().position(|w| w == "-m").map(|at| &words[at + 1]).unwrap();
    let at = command.iter().position(|w| *w == "-m").unwrap();
    let mounted = std::path::Path::new(model);
    assert_eq!(
        command[at + 1],
        format!("/models/0/{}", mounted.file_name().unwrap().to_string_lossy())
    );
    assert_eq!(service["volumes"][0]["source"].as_str(), mounted.parent().and_then(|p| p.to_str()));
    let unit = exported(&["--trial", "2", "--format", "systemd"], data.path());
    assert!(unit.contains("ExecStart=") && unit.contains("[Install]"), "{unit}");

    // Each asks for what it needs.
    let out = tunebook(&["export", "--format", "optuna-journal"], data.path());
    assert!(String::from_utf8_lossy(&out.stderr).contains("give --study"));
    let out = tunebook(&["export", "--trial", "99", "--format", "compose"], data.path());
    assert!(!out.status.success());
}

/// Whether the server on `port` answers `/health` with 200 within `limit`.
fn healthy_within(port: u16, limit: std::time::Duration) -> bool {
    use std::io::{Read, Write};
    let deadline = std::time::Instant::now() + limit;
    while std::time::Instant::now() < deadline {
        let answer = std::net::TcpStream::connect(("127.0.0.1", port)).and_then(|mut s| {
            s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
            s.write_all(b"GET /health HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
            let mut text = String::new();
            s.read_to_string(&mut text)?;
            Ok(text)
        });
        if answer.is_ok_and(|a| a.starts_with("HTTP/1.1 200") || a.starts_with("HTTP/1.0 200")) {
            return true;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    false
}

/// The same from the JSON API (what the study page links to): a trial's
/// entry by an allowlisted format, a study's journal as a download.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_api_hands_off_a_trial_by_a_known_format_and_a_study_as_a_journal() {
    use common::http;
    let (server, _profiles) = common::on_fake_engine("fake", &[]).await;
    let study = common::run_study(&server, &common::fake_grid_study("handed", &[128, 256])).await;
    assert_eq!(study["state"], "done", "{study}");
    let id = study["id"].as_i64().unwrap();
    let path = format!("/api/studies/{id}");
    let at = &server;
    let get = |p: String| async move { http().get(at.url(&p)).send().await.unwrap() };

    let r = get(format!("{path}/optuna-journal")).await;
    assert_eq!(r.status(), 200);
    assert!(r.headers()["content-disposition"].to_str().unwrap().contains("optuna.log"));
    let journal = r.text().await.unwrap();
    assert_eq!(journal.lines().count(), 1 + 3, "the study, the baseline and two");

    let r = get("/api/trials/2/handoff/llama-swap".into()).await;
    assert_eq!(r.status(), 200);
    let entry: serde_norway::Value = serde_norway::from_str(&r.text().await.unwrap()).unwrap();
    assert!(entry["models"]["m"]["cmd"].as_str().unwrap().contains("--port ${PORT}"));
    // The fake engine is no llama-server: no image to run it in.
    let r = get("/api/trials/2/handoff/compose".into()).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("no container image"));
    let r = get("/api/trials/2/handoff/script".into()).await;
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("one of llama-swap, compose, systemd"));
    assert_eq!(get("/api/trials/999/handoff/systemd".into()).await.status(), 404);
    assert_eq!(get("/api/studies/999/optuna-journal".into()).await.status(), 404);
    server.stop().await;
}
