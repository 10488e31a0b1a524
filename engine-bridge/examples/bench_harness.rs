//! Measures the harness itself, on this machine (run it with
//! `scripts/bench-engine.sh`):
//!
//! 1. health-poll latency: how long after an engine becomes ready the
//!    harness notices (the fake engine turns ready at a known moment);
//! 2. harness overhead per trial: engine ready → first probe request, and
//!    probe end → port free again;
//! 3. agreement of decode and prefill speed: the client's view against the
//!    engine's own timings, and both against `llama-bench` (the number
//!    llama.cpp users trust) at the same settings, on a model large enough
//!    to be memory-bound.
//!
//! Usage: bench_harness LLAMA_SERVER LLAMA_BENCH FAKE_ENGINE MODEL [THREADS] [NGL] [PROMPT]
//! (NGL: layers offloaded to the GPU, for a GPU build; both engines get it.
//! PROMPT: prompt tokens, 128 by default; the decode runs at that depth.)

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use engine_bridge::engine::PromptInput;
use engine_bridge::probes::Stats;
use engine_bridge::process::LaunchSpec;
use engine_bridge::{RunningEngine, SpeedProbe, free_port};

const ROUNDS: usize = 10;
const GEN: u32 = 64;

fn spec(program: &Path, args: &[String], port: u16) -> LaunchSpec {
    let mut args = args.to_vec();
    args.extend(["--host".into(), "127.0.0.1".into(), "--port".into(), port.to_string()]);
    LaunchSpec::new(program.to_path_buf(), args)
}

fn ms(s: &Stats) -> String {
    format!("{:.1} ms (p10 {:.1}, p90 {:.1}, n {})", s.median, s.p10, s.p90, s.n)
}

/// How much `a` differs from `b`, in percent.
fn diff(a: f64, b: f64) -> f64 {
    100.0 * (a - b) / b
}

/// The engine's own decode speed over 5 requests answered whole rather
/// than streamed: whether sending each token as it comes costs the engine
/// anything (the probes stream, to time the first token).
async fn decode_not_streamed(engine: &RunningEngine, prompt_len: usize) -> Stats {
    let prompt = match engine.prompt_of_len(prompt_len).await.unwrap() {
        PromptInput::Tokens(t) => serde_json::json!(t),
        PromptInput::Text(t) => serde_json::json!(t),
    };
    let body = serde_json::json!({
        "prompt": prompt, "n_predict": GEN, "ignore_eos": true, "cache_prompt": false, "stream": false,
    });
    let client = engine_bridge::http::client().no_proxy().build().unwrap();
    let mut tps = Vec::new();
    for _ in 0..5 {
        let answer: serde_json::Value = client
            .post(format!("{}/completion", engine.base_url))
            .json(&body)
            .send()
            .await
            .and_then(|r| r.error_for_status())
            .expect("a completion")
            .json()
            .await
            .expect("its JSON");
        tps.push(answer["timings"]["predicted_per_second"].as_f64().expect("timings"));
    }
    Stats::of(tps).unwrap()
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    let [_, server, bench, fake, model, ..] = args.as_slice() else {
        eprintln!(
            "usage: bench_harness LLAMA_SERVER LLAMA_BENCH FAKE_ENGINE MODEL [THREADS] [NGL] [PROMPT]"
        );
        std::process::exit(2);
    };
    let threads = args.get(5).cloned().unwrap_or_else(|| "2".into());
    let offload: Vec<String> = match args.get(6).filter(|n| !n.is_empty()) {
        Some(ngl) => vec!["-ngl".into(), ngl.clone()],
        None => vec![],
    };
    let prompt_len: usize = args.get(7).map_or(128, |p| p.parse().expect("PROMPT is a number"));
    let (server, fake) = (PathBuf::from(server), PathBuf::from(fake));

    // 1. Health-poll latency: the fake engine answers 503 until exactly
    //    READY after it starts, then 200.
    const READY: Duration = Duration::from_millis(300);
    let mut latency = Vec::new();
    for _ in 0..ROUNDS {
        let port = free_port().unwrap();
        let fake_args = ["--fake", "slow-load", "--fake-ms", "300"].map(String::from);
        let engine =
            RunningEngine::launch(spec(&fake, &fake_args, port), port, Duration::from_secs(10))
                .await
                .expect("fake engine starts");
        latency.push((engine.load_time.saturating_sub(READY)).as_secs_f64() * 1e3);
        engine.stop(Duration::from_secs(2)).await;
    }
    let latency = Stats::of(latency).unwrap();

    // 2. Overhead per trial on the real engine and the memory-bound model.
    let server_args: Vec<String> =
        ["-m", model, "-c", "2048", "-t", &threads, "-fa", "on", "-np", "1", "--fit", "off"]
            .iter()
            .map(|s| s.to_string())
            .chain(offload.iter().cloned())
            .collect();
    let (mut before_probe, mut after_probe, mut loads) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..ROUNDS / 2 {
        let port = free_port().unwrap();
        let engine = RunningEngine::launch(
            spec(&server, &server_args, port),
            port,
            Duration::from_secs(120),
        )
        .await
        .expect("llama-server starts");
        loads.push(engine.load_time.as_secs_f64() * 1e3);
        // Ready → first probe request: what measure_and_stop does first.
        let t = Instant::now();
        let _ = engine.props().await;
        let prompt = engine.prompt_of_len(prompt_len).await.unwrap();
        before_probe.push(t.elapsed().as_secs_f64() * 1e3);
        engine.completion(&prompt, 4, Duration::from_secs(60)).await.unwrap();
        // Probe end → port free.
        let t = Instant::now();
        engine.stop(Duration::from_secs(5)).await;
        while TcpListener::bind(("127.0.0.1", port)).is_err() {
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        after_probe.push(t.elapsed().as_secs_f64() * 1e3);
    }
    let (before_probe, after_probe) =
        (Stats::of(before_probe).unwrap(), Stats::of(after_probe).unwrap());

    // 3. Agreement with the engine's timings and with llama-bench.
    let port = free_port().unwrap();
    let engine =
        RunningEngine::launch(spec(&server, &server_args, port), port, Duration::from_secs(120))
            .await
            .expect("llama-server starts");
    let probe = SpeedProbe {
        prompt_tokens: prompt_len,
        n_predict: GEN,
        warmup: 1,
        repeats: 5,
        ..Default::default()
    };
    let speed = probe.run(&engine).await.expect("speed probe");
    let plain = decode_not_streamed(&engine, prompt_len).await;
    engine.stop(Duration::from_secs(5)).await;

    let bench_out = Command::new(bench)
        .args(["-m", model, "-t", &threads, "-fa", "on", "-r", "10", "-o", "json"])
        .args(&offload)
        .args(["-p", &prompt_len.to_string(), "-n", "0", "-d", "0"])
        .output()
        .expect("llama-bench runs");
    let pp: serde_json::Value =
        serde_json::from_slice(&bench_out.stdout).expect("llama-bench JSON");
    let bench_out = Command::new(bench)
        .args(["-m", model, "-t", &threads, "-fa", "on", "-r", "10", "-o", "json"])
        .args(&offload)
        .args(["-p", "0", "-n", &GEN.to_string(), "-d", &prompt_len.to_string()])
        .output()
        .expect("llama-bench runs");
    let tg: serde_json::Value =
        serde_json::from_slice(&bench_out.stdout).expect("llama-bench JSON");
    let bench_pp = pp[0]["avg_ts"].as_f64().unwrap();
    let bench_pp_sd = pp[0]["stddev_ts"].as_f64().unwrap();
    let bench_tg = tg[0]["avg_ts"].as_f64().unwrap();
    let bench_tg_sd = tg[0]["stddev_ts"].as_f64().unwrap();

    let engine_tg = speed.decode_tps.median;
    let engine_pp = speed.prefill_tps.median;
    let client_tg = speed.client_decode_tps.map(|s| s.median).unwrap_or(f64::NAN);
    // The client's prefill: prompt tokens over the time to the first token.
    let client_pp =
        Stats::of(speed.samples.iter().map(|s| s.timings.prompt_n as f64 / (s.ttft_ms / 1e3)))
            .unwrap()
            .median;

    println!("# Harness benchmark ({threads} threads, model {model} {})\n", offload.join(" "));
    println!("| what | value |\n| --- | --- |");
    println!("| health-poll latency (ready → noticed) | {} |", ms(&latency));
    println!("| ready → first probe request | {} |", ms(&before_probe));
    println!("| probe end → port free | {} |", ms(&after_probe));
    println!(
        "| overhead per trial (sum of medians) | {:.1} ms |",
        before_probe.median + after_probe.median + latency.median
    );
    println!("| load time, llama-server | {} |", ms(&Stats::of(loads).unwrap()));
    println!(
        "| decode: engine timings | {engine_tg:.2} tok/s (cv {:.1} %) |",
        speed.decode_tps.cv * 100.0
    );
    println!(
        "| decode: client | {client_tg:.2} tok/s ({:+.2} % vs engine) |",
        diff(client_tg, engine_tg)
    );
    println!(
        "| decode: engine timings, not streamed | {:.2} tok/s ({:+.2} % vs streamed) |",
        plain.median,
        diff(plain.median, engine_tg)
    );
    println!(
        "| decode: llama-bench tg{GEN} @ d{prompt_len} | {bench_tg:.2} ± {bench_tg_sd:.2} tok/s (engine {:+.2} %) |",
        diff(engine_tg, bench_tg)
    );
    println!(
        "| prefill: engine timings | {engine_pp:.1} tok/s (cv {:.1} %) |",
        speed.prefill_tps.cv * 100.0
    );
    println!(
        "| prefill: client (prompt ÷ TTFT) | {client_pp:.1} tok/s ({:+.2} % vs engine) |",
        diff(client_pp, engine_pp)
    );
    println!(
        "| prefill: llama-bench pp{prompt_len} | {bench_pp:.1} ± {bench_pp_sd:.1} tok/s (engine {:+.2} %) |",
        diff(engine_pp, bench_pp)
    );
}
