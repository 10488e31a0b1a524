//! Checks the GPU side against a CUDA build of llama.cpp on a machine with
//! an NVIDIA GPU (run it with `scripts/check-gpu.sh`):
//!
//! 1. the planner's split of a model between GPU and host at several
//!    `-ngl` values, against the buffers llama-server says it allocated
//!    (`CUDA0 model buffer`, `CUDA0 KV buffer`): within 5 %;
//! 2. the memory sampler's GPU peak (nvidia-smi, the engine's processes)
//!    against what the device itself says is in use, and the planner's
//!    whole GPU prediction (weights, K/V, margin) against both.
//!
//! 3. a mixture-of-experts model with every layer offloaded and its experts
//!    kept on the CPU by count (`--n-cpu-moe`), by switch (`--cpu-moe`) and
//!    by pattern (`-ot`): the planner's GPU weights against the engine's.
//!
//! 4. llama.cpp's own fit (`llama-fit-params`) of that model into a GPU
//!    budget made tight on purpose (`--fit-target`): what it chose, the
//!    planner's GPU side for that choice, and the engine's buffers when run
//!    with it.
//!
//! Prints markdown tables and exits 1 if a prediction is more than 5 % off.
//! Also writes `large-llama.gguf` (4.3 GB) beside the checked model: big
//! enough that decoding on a data-centre GPU is bound by memory bandwidth,
//! for the harness benchmark that follows.
//! Usage: gpu_check LLAMA_SERVER MODEL_DIR

use std::path::PathBuf;
use std::time::Duration;

use engine_bridge::gguf::{LlamaSpec, write_random_llama};
use engine_bridge::memory::gpu_used_total_bytes;
use engine_bridge::placement::Placement;
use engine_bridge::planner::{LoggedBuffer, ModelInfo, logged_buffers};
use engine_bridge::process::LaunchSpec;
use engine_bridge::{RunningEngine, free_port};

const CTX: u64 = 4096;
const TOLERANCE_PCT: f64 = 5.0;

fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / 1048576.0)
}

/// How far `measured` is from `predicted`, in percent of `measured`.
fn off_pct(predicted: u64, measured: u64) -> f64 {
    if measured == 0 {
        return if predicted == 0 { 0.0 } else { f64::INFINITY };
    }
    100.0 * (predicted as f64 - measured as f64) / measured as f64
}

/// The bytes of buffers on CUDA devices of one kind (`model`, `KV`, `compute`).
fn on_gpu(buffers: &[LoggedBuffer], what: &str) -> u64 {
    buffers
        .iter()
        .filter(|b| b.what == what && b.device.starts_with("CUDA") && b.device != "CUDA_Host")
        .map(|b| b.bytes)
        .sum()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, server, dir, ..] = args.as_slice() else {
        eprintln!("usage: gpu_check LLAMA_SERVER MODEL_DIR");
        std::process::exit(2);
    };
    let model = PathBuf::from(dir).join("bench-llama.gguf");
    if !model.exists() {
        write_random_llama(&model, &LlamaSpec::memory_bound(), 7).expect("model written");
    }
    let large = PathBuf::from(dir).join("large-llama.gguf");
    if !large.exists() {
        let spec = LlamaSpec {
            layers: 24,
            width: 2048,
            heads: 16,
            kv_heads: 4,
            feed_forward: 5632,
            context_length: 4096,
            experts: 0,
            experts_used: 0,
            quantized: false,
        };
        write_random_llama(&large, &spec, 7).expect("large model written");
    }
    let info = ModelInfo::read(&model).expect("model read");
    let layers = info.layers as u64;
    let idle = gpu_used_total_bytes().await.expect("nvidia-smi answers");

    println!("# GPU check: {} ({} blocks, context {CTX}, f16 K/V)\n", model.display(), layers);
    println!(
        "| -ngl | weights planned / logged MiB | off | K/V planned / logged MiB | off | \
         compute MiB | sampler peak MiB | device use MiB | GPU planned MiB | samples |"
    );
    println!("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |");
    let mut worst: f64 = 0.0;
    for ngl in [0, 1, layers / 2, layers, layers + 1] {
        let port = free_port().unwrap();
        let args: Vec<String> = [
            "-m",
            &model.display().to_string(),
            "-c",
            &CTX.to_string(),
            "-ngl",
            &ngl.to_string(),
            "-fa",
            "on",
            "-np",
            "1",
            "--fit",
            "off",
            // The buffer lines are printed at log verbosity 4.
            "-lv",
            "4",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let spec = LaunchSpec::new(PathBuf::from(server), args);
        let engine = RunningEngine::launch(spec, port, Duration::from_secs(120))
            .await
            .unwrap_or_else(|f| panic!("-ngl {ngl}: {f}\n{}", f.log_tail.join("\n")));
        // The log is drained by its own task: the lines may land just after
        // the health check passes.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let mut buffers = logged_buffers(&engine.log_tail(400));
        while !buffers.iter().any(|b| b.what == "compute") {
            assert!(tokio::time::Instant::now() < deadline, "-ngl {ngl}: no buffer lines logged");
            tokio::time::sleep(Duration::from_millis(20)).await;
            buffers = logged_buffers(&engine.log_tail(400));
        }
        // Work the engine so its compute buffers are in use.
        let prompt = engine.prompt_of_len(512).await.unwrap();
        engine.completion(&prompt, 32, Duration::from_secs(60)).await.unwrap();
        let device = gpu_used_total_bytes().await.unwrap_or(0).saturating_sub(idle);
        // Let the sampler take a GPU reading (it asks nvidia-smi once a second).
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let mut memory = engine.memory();
        while memory.peak_gpu_bytes.unwrap_or(0) == 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(100)).await;
            memory = engine.memory();
        }
        engine.stop(Duration::from_secs(5)).await;

        let plan = info.offload_plan(CTX, ("f16", "f16"), ngl, (u64::MAX, u64::MAX));
        let (weights, kv) = (on_gpu(&buffers, "model"), on_gpu(&buffers, "KV"));
        let planned_kv = plan.gpu.kv.unwrap_or(0);
        let (w_off, kv_off) = (off_pct(plan.gpu.weights, weights), off_pct(planned_kv, kv));
        worst = worst.max(w_off.abs()).max(kv_off.abs());
        println!(
            "| {ngl} | {} / {} | {w_off:+.1} % | {} / {} | {kv_off:+.1} % | {} | {} | {} | {} | {} |",
            mib(plan.gpu.weights),
            mib(weights),
            mib(planned_kv),
            mib(kv),
            mib(on_gpu(&buffers, "compute")),
            memory.peak_gpu_bytes.map_or("none".into(), mib),
            mib(device),
            mib(plan.gpu.total),
            memory.samples,
        );
    }
    println!(
        "\nweights and K/V: the planner against llama-server's own buffers (worst {worst:.1} %, \
         bound {TOLERANCE_PCT} %)"
    );
    worst = worst.max(moe_placements(server, dir).await);
    worst = worst.max(fit_against_plan(server, dir).await);
    if worst > TOLERANCE_PCT {
        std::process::exit(1);
    }
}

/// Offloads every layer of a mixture-of-experts model while keeping
/// experts on the CPU in each of llama.cpp's three ways; prints the GPU
/// weights planned against those the engine allocated, and returns the
/// worst difference in percent.
async fn moe_placements(server: &str, dir: &str) -> f64 {
    let model = PathBuf::from(dir).join("moe-llama.gguf");
    if !model.exists() {
        let spec = LlamaSpec {
            layers: 12,
            width: 1024,
            heads: 16,
            kv_heads: 4,
            feed_forward: 1024,
            context_length: 4096,
            experts: 8,
            experts_used: 2,
            quantized: false,
        };
        write_random_llama(&model, &spec, 7).expect("MoE model written");
    }
    let info = ModelInfo::read(&model).expect("model read");
    println!("\n# Experts on the CPU: {} (8 experts, 2 used)\n", model.display());
    println!("| placement | GPU weights planned / logged MiB | off |");
    println!("| --- | --- | --- |");
    let cases: [&[(&str, &str)]; 4] = [
        &[],
        &[("n_cpu_moe", "6")],
        &[("cpu_moe", "true")],
        &[("override_tensor", r"blk\.[0-3]\.ffn_.*_exps=CPU")],
    ];
    let mut worst: f64 = 0.0;
    for case in cases {
        let mut settings: engine_bridge::Settings =
            case.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        settings.insert("n_gpu_layers".into(), "99".into());
        let rendered = engine_bridge::catalog::Catalog::llama_server().render(&settings).unwrap();
        let port = free_port().unwrap();
        let mut args: Vec<String> = ["-m", &model.display().to_string(), "-c", &CTX.to_string()]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(rendered.args);
        let tail = ["--fit", "off", "-lv", "4", "--host", "127.0.0.1", "--port", &port.to_string()];
        args.extend(tail.iter().map(|s| s.to_string()));
        let spec = LaunchSpec::new(PathBuf::from(server), args);
        let engine = RunningEngine::launch(spec, port, Duration::from_secs(120))
            .await
            .unwrap_or_else(|f| panic!("{case:?}: {f}\n{}", f.log_tail.join("\n")));
        let buffers = logged_buffers(engine.startup_log());
        engine.stop(Duration::from_secs(5)).await;
        let placement = Placement::of(&settings, 0).unwrap();
        let plan = info.placed_plan(CTX, ("f16", "f16"), &placement, (u64::MAX, u64::MAX));
        let logged = on_gpu(&buffers, "model");
        let off = off_pct(plan.gpu.weights, logged);
        worst = worst.max(off.abs());
        let shown =
            if case.is_empty() { "all on the GPU".to_string() } else { format!("{case:?}") };
        println!("| {shown} | {} / {} | {off:+.1} % |", mib(plan.gpu.weights), mib(logged));
    }
    worst
}

/// Asks llama.cpp's `llama-fit-params` to fit the MoE model into a GPU
/// budget of a few hundred MiB (everything else left free by
/// `--fit-target`), runs the engine with what it chose, and compares the
/// planner's GPU weights for that choice with the engine's; returns the
/// difference in percent.
async fn fit_against_plan(server: &str, dir: &str) -> f64 {
    let model = PathBuf::from(dir).join("moe-llama.gguf");
    let info = ModelInfo::read(&model).expect("model read");
    let free = engine_bridge::memory::gpu_free_bytes().await.unwrap_or(0);
    let profile: engine_bridge::Profile = toml::from_str(&format!(
        "name = \"gpu\"\nkind = \"llama-server\"\nbinary = {:?}\nmodels = []\n",
        server
    ))
    .expect("a profile");
    println!("\n# llama.cpp's fit against the planner: {}\n", model.display());
    println!(
        "| GPU budget MiB | fit chose | GPU weights planned / logged MiB | off | planned GPU total MiB |"
    );
    println!("| --- | --- | --- | --- | --- |");
    let mut worst: f64 = 0.0;
    for budget_mib in [400u64, 800] {
        let target = (free >> 20).saturating_sub(budget_mib);
        let asked: engine_bridge::Settings = [
            ("ctx_size".to_string(), CTX.to_string()),
            ("fit_target".to_string(), target.to_string()),
        ]
        .into();
        let fitted = match engine_bridge::fit::fitted(&profile, &model, &asked).await {
            Ok(Some(f)) => f,
            Ok(None) => {
                println!("| {budget_mib} | no llama-fit-params beside {server} | | | |");
                return 0.0;
            }
            Err(e) => {
                println!("| {budget_mib} | failed: {e} | | | |");
                continue;
            }
        };
        // Its arguments run as it printed them.
        let port = free_port().unwrap();
        let mut args = vec!["-m".to_string(), model.display().to_string()];
        args.extend(fitted.args.iter().cloned());
        let tail = ["--fit", "off", "-lv", "4", "--host", "127.0.0.1", "--port", &port.to_string()];
        args.extend(tail.iter().map(|s| s.to_string()));
        let spec = LaunchSpec::new(PathBuf::from(server), args);
        let engine = RunningEngine::launch(spec, port, Duration::from_secs(120))
            .await
            .unwrap_or_else(|f| panic!("{:?}: {f}\n{}", fitted.args, f.log_tail.join("\n")));
        let buffers = logged_buffers(engine.startup_log());
        engine.stop(Duration::from_secs(5)).await;
        // `-ngl -1`, every layer, is not a count the settings keep.
        let all = fitted.args.windows(2).any(|w| w[0] == "-ngl" && w[1] == "-1");
        let placement = Placement::of(&fitted.settings, if all { 999 } else { 0 }).unwrap();
        let plan = info.placed_plan(CTX, ("f16", "f16"), &placement, (u64::MAX, u64::MAX));
        let logged = on_gpu(&buffers, "model");
        let off = off_pct(plan.gpu.weights, logged);
        worst = worst.max(off.abs());
        println!(
            "| {budget_mib} | `{}` | {} / {} | {off:+.1} % | {} |",
            fitted.args.join(" "),
            mib(plan.gpu.weights),
            mib(logged),
            mib(plan.gpu.total),
        );
    }
    worst
}
