//! `tunebook plan`: what a configuration needs, read from the model file
//! alone (no engine is launched), for a mixture-of-experts model split
//! across files with experts kept on the CPU.

use std::process::Command;

use engine_bridge::gguf::{MetaValue, ModelSpec, TensorSpec, write_model};

fn moe_model(dir: &std::path::Path) -> (std::path::PathBuf, u64) {
    let meta = |k: &str, v: u32| (format!("llama.{k}"), MetaValue::U32(v));
    let mut tensors = vec![TensorSpec::new("token_embd.weight", "q8_0", &[512, 2000])];
    for b in 0..4 {
        tensors.push(TensorSpec::new(format!("blk.{b}.attn_q.weight"), "q8_0", &[512, 512]));
        for e in ["gate", "up"] {
            tensors.push(TensorSpec::new(
                format!("blk.{b}.ffn_{e}_exps.weight"),
                "mxfp4",
                &[512, 1024, 8],
            ));
        }
        tensors.push(TensorSpec::new(
            format!("blk.{b}.ffn_down_exps.weight"),
            "q4_K",
            &[1024, 512, 8],
        ));
    }
    tensors.push(TensorSpec::new("output.weight", "q6_K", &[512, 2000]));
    let expert_bytes: u64 = tensors
        .iter()
        .filter(|t| t.name.starts_with("blk.0.") && t.name.contains("_exps"))
        .map(|t| t.size().unwrap())
        .sum();
    let spec = ModelSpec {
        metadata: vec![
            ("general.architecture".into(), MetaValue::Str("llama".into())),
            ("general.name".into(), MetaValue::Str("little moe".into())),
            meta("block_count", 4),
            meta("embedding_length", 512),
            meta("attention.head_count", 8),
            meta("context_length", 4096),
            meta("expert_count", 8),
            meta("expert_used_count", 2),
        ],
        tensors,
    };
    let parts = write_model(&dir.join("moe.gguf"), &spec, 2).unwrap();
    (parts[0].clone(), expert_bytes)
}

fn plan(model: &std::path::Path, settings: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["plan", "--json", "--bandwidth-gbps", "10", "--model"])
        .arg(model)
        .arg("--")
        .args(settings)
        .output()
        .unwrap()
}

#[test]
fn plan_places_experts_and_reads_every_part() {
    let dir = tempfile::tempdir().unwrap();
    let (model, experts_per_block) = moe_model(dir.path());
    let out = plan(&model, &["ctx_size=2048", "n_gpu_layers=99", "n_cpu_moe=2"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["files"].as_array().unwrap().len(), 2, "both parts read");
    let weights = r["weight_bytes"].as_u64().unwrap();
    let (gpu, host) =
        (r["gpu"]["weights"].as_u64().unwrap(), r["host"]["weights"].as_u64().unwrap());
    assert_eq!(gpu + host, weights);
    // On the host: the embedding table and blocks 0 and 1's experts.
    let embedding = 512 * 2000 / 32 * 34;
    assert_eq!(host, embedding + 2 * experts_per_block);
    assert_eq!(r["ctx"], 2048);
    // A token reads two of eight experts: the ceiling is bandwidth over that.
    let per_token = r["bytes_per_token"].as_f64().unwrap();
    assert!(per_token < weights as f64 / 2.0, "{per_token} of {weights}");
    let ceiling = r["decode_ceiling_tps"].as_f64().unwrap();
    assert!((ceiling - 10e9 / per_token).abs() < 1e-6 * ceiling);

    let readable = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["plan", "--bandwidth-gbps", "10", "--model"])
        .arg(&model)
        .args(["--", "cpu_moe=true", "n_gpu_layers=99"])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&readable.stdout);
    assert!(text.contains("8 experts (2 used per token)") && text.contains("in 2 files"), "{text}");

    // Shared among two GPUs 3:1: each one's part, and together all of it.
    let out = plan(&model, &["n_gpu_layers=99", "tensor_split=3,1"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let gpus = r["gpus"].as_array().unwrap();
    assert_eq!(gpus.len(), 2, "{r}");
    let part = |i: usize, what: &str| gpus[i][what].as_u64().unwrap();
    assert_eq!(part(0, "weights") + part(1, "weights"), r["gpu"]["weights"].as_u64().unwrap());
    assert_eq!(part(0, "kv") + part(1, "kv"), r["gpu"]["kv"].as_u64().unwrap());
    assert!(part(0, "weights") > 2 * part(1, "weights"), "three quarters of the layers: {r}");
}

#[test]
fn a_setting_that_is_not_valid_is_an_invalid_command() {
    let dir = tempfile::tempdir().unwrap();
    let (model, _) = moe_model(dir.path());
    let out = plan(&model, &["override_tensor=exps=CPU;rm -rf"]);
    assert_eq!(out.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&out.stderr).contains("override_tensor"));
    let out = plan(&model, &["no_such_setting=1"]);
    assert_eq!(out.status.code(), Some(3));
}

#[test]
fn llama_cpps_own_fit_is_shown_beside_the_plan() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    assert!(
        root.join(".tools/engine-bin/llama-fit-params").is_file(),
        "the demo engine's build is missing: run scripts/setup.sh first"
    );
    // A model llama.cpp loads: the tiny mixture of experts.
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("tiny-moe.gguf");
    let spec = engine_bridge::gguf::LlamaSpec::tiny_moe();
    engine_bridge::gguf::write_random_llama(&model, &spec, 1).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tunebook"))
        .args(["plan", "--json", "--bandwidth-gbps", "10", "--profile", "demo", "--profiles"])
        .arg(root.join("profiles"))
        .arg("--model")
        .arg(&model)
        .args(["--", "ctx_size=2048", "threads=2"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let args: Vec<&str> =
        r["fitted"]["args"].as_array().unwrap().iter().map(|a| a.as_str().unwrap()).collect();
    // The context asked for is kept; the layers are llama.cpp's to choose.
    assert!(args.windows(2).any(|w| w == ["-c", "2048"]), "{args:?}");
    assert!(args.contains(&"-ngl"), "{args:?}");
    assert_eq!(r["fitted"]["settings"]["ctx_size"], "2048");
}
