//! Model files as a setting: a profile lists several quantizations of the
//! real instruct model (made here with llama.cpp's own `llama-quantize`),
//! a study varies which one loads, each trial runs its own file, and the
//! divergence is measured from the highest-precision file's logits.

use std::path::Path;
use std::process::Command;
use tunebook_views::types::Metric;

use serde_json::{Value, json};
use tunebook_views::types::TrialState;

use super::{post, run_to_the_end};
use crate::common::{TestServer, get_json, repo_root};

/// Writes `out` as `kind` from the demo's SmolLM2 file with llama-quantize.
fn quantize(out: &Path, kind: &str) {
    let bin = repo_root().join(".tools/engine-bin");
    let source = repo_root().join(".tools/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    let done = Command::new(bin.join("llama-quantize"))
        .arg("--allow-requantize")
        .args([source.as_os_str(), out.as_os_str()])
        .args([kind, "2"])
        .env("LD_LIBRARY_PATH", &bin)
        .output()
        .expect("llama-quantize runs");
    assert!(done.status.success(), "{}", String::from_utf8_lossy(&done.stderr));
}

#[tokio::test]
async fn a_study_compares_model_files_against_the_finest() {
    let _engine = crate::common::require_demo_engine();
    let models = tempfile::tempdir().unwrap();
    let file = |name: &str| models.path().join(name);
    // F16 holds the Q4_1 weights exactly, dequantized: the finest file.
    quantize(&file("f16.gguf"), "F16");
    quantize(&file("q4_0.gguf"), "Q4_0");
    let original = repo_root().join(".tools/models/SmolLM2-135M-Instruct.Q4_1.gguf");
    std::os::unix::fs::symlink(&original, file("q4_1.gguf")).unwrap();
    let profiles = tempfile::tempdir().unwrap();
    let engine = repo_root().join(".tools/engine-bin/llama-server");
    let mut toml = format!(
        "name = \"quants\"\nkind = \"llama-server\"\nbinary = {engine:?}\nargs = [\"--fit\", \"off\"]\n"
    );
    for q in ["f16", "q4_1", "q4_0"] {
        toml += &format!(
            "[[models]]\nname = \"smollm2-{q}\"\npath = {:?}\n",
            file(&format!("{q}.gguf"))
        );
    }
    std::fs::write(profiles.path().join("quants.toml"), toml).unwrap();
    let data = tempfile::tempdir().unwrap();
    let mut settings = TestServer::settings(data.path().to_path_buf());
    settings.profiles_dir = profiles.path().to_path_buf();
    let server = TestServer::start_with(settings, data).await;

    let def = json!({
        "name": "which quantization",
        "profile": "quants",
        "model": "smollm2-q4_1",
        "space": { "model": ["smollm2-f16", "smollm2-q4_1", "smollm2-q4_0"] },
        "fixed": { "ctx_size": 512, "threads": 2, "flash_attn": "on" },
        "objectives": [{ "metric": "decode_tps" }, { "metric": "kld_mean" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 3, "confirm_pairs": 0, "skip_dominated": false },
        "probes": {
            "speed": { "prompt_tokens": 16, "n_predict": 8, "repeats": 1, "warmup": 0 },
            "kld": { "ctx": 128, "chunks": 3 }
        }
    });
    // Only the profile's files may be named.
    let mut elsewhere = def.clone();
    elsewhere["space"]["model"] = json!(["smollm2-q4_1", "/etc/passwd"]);
    let refused = post(&server, "/api/studies", &elsewhere).await;
    assert_eq!(refused.status(), 400);
    let why = refused.text().await.unwrap();
    assert!(why.contains("`/etc/passwd` is not a model of profile `quants`"), "{why}");

    let (row, trials) = run_to_the_end(&server, &def).await;
    assert_eq!(trials.len(), 3, "{trials:?}");
    let mut kld = std::collections::BTreeMap::new();
    for t in &trials {
        assert_eq!(t.state, TrialState::Done, "{t:?}");
        // The trial records, and its engine loaded, the file it names.
        let name = &t.settings["model"];
        assert_eq!(&t.model, name, "{t:?}");
        let q = name.trim_start_matches("smollm2-");
        let path = file(&format!("{q}.gguf")).display().to_string();
        let command = t.command.clone().unwrap_or_default();
        assert!(command.contains(&format!(" -m {path} ")), "{command}");
        assert_eq!(command.matches(" -m ").count(), 1, "no flag of its own: {command}");
        kld.insert(
            q.to_string(),
            (
                t.metrics.get(Metric::KldMean).unwrap(),
                t.metrics.get(Metric::PeakRssBytes).map(|v| v as i64).unwrap(),
            ),
        );
    }
    // The finest file is the reference, whatever the baseline loads …
    assert_eq!(kld["f16"].0, 0.0, "{kld:?}");
    // … and a coarser requantization moves further from it.
    assert!(kld["q4_0"].0 > kld["q4_1"].0, "{kld:?}");
    // Each file costs its own memory.
    assert!(kld["f16"].1 > kld["q4_1"].1, "{kld:?}");
    // The reference is never the best divergence.
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", row.id)).await;
    let best = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "best" && f["metric"] == "kld_mean");
    let best = best.unwrap_or_else(|| panic!("{}", found["markdown"]));
    assert_ne!(best["settings"]["model"], "smollm2-f16", "{best}");
    // What each file costs and saves, against the baseline's file.
    let markdown = found["markdown"].as_str().unwrap();
    let line = markdown
        .lines()
        .find(|l| l.contains("**What each model file costs and saves**"))
        .unwrap_or_else(|| panic!("{markdown}"));
    eprintln!("{line}");
    assert!(line.contains("against the baseline's `smollm2-q4_1`"), "{line}");
    assert!(
        line.contains("`smollm2-f16` (trials") && line.contains("`smollm2-q4_0` (trials"),
        "{line}"
    );
    assert!(line.contains("peak RSS (bytes)") && line.contains("mean KL divergence"), "{line}");
    server.stop().await;
}
