//! engine-bridge against the real llama-server and the tiny model: launch,
//! health, read-back, speed, stop, and the planner's K/V cache prediction
//! checked against the engine's own log line.

use std::path::PathBuf;
use std::time::Duration;

use engine_bridge::planner::{ModelInfo, logged_kv_bytes};
use engine_bridge::{Profile, RunningEngine, Settings, SpeedProbe, free_port, plan};

fn demo_profile() -> Profile {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let profile = Profile::load(&root.join("profiles/demo.toml")).unwrap();
    assert!(
        profile.binary.is_file() && profile.models[0].path.is_file(),
        "the demo engine and model are missing: run scripts/setup.sh first"
    );
    profile
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn launch(profile: &Profile, s: &Settings) -> RunningEngine {
    let port = free_port().unwrap();
    let spec = plan(profile, "tiny-llama", s, port).unwrap();
    RunningEngine::launch(spec, port, Duration::from_secs(60)).await.expect("the engine starts")
}

#[tokio::test]
async fn kv_cache_prediction_matches_the_engine_within_5_percent() {
    let mut profile = demo_profile();
    // The K/V line is printed at log verbosity 4.
    profile.args.extend(["-lv".to_string(), "4".to_string()]);
    let model = ModelInfo::read(&profile.models[0].path).unwrap();
    for (ctx, k, v) in [
        ("4096", "f16", "f16"),
        ("3000", "q8_0", "q8_0"),
        ("2048", "q4_0", "q4_0"),
        ("4096", "q8_0", "q4_0"),
    ] {
        let s = settings(&[
            ("ctx_size", ctx),
            ("cache_type_k", k),
            ("cache_type_v", v),
            ("flash_attn", "on"),
            ("parallel", "1"),
        ]);
        let engine = launch(&profile, &s).await;
        let logged =
            logged_kv_bytes(&engine.process.tail(400)).expect("the engine logs its K/V cache size");
        let predicted = model.kv_bytes(ctx.parse().unwrap(), k, v).unwrap();
        let error = (predicted as f64 / logged as f64 - 1.0).abs();
        assert!(error < 0.05, "ctx {ctx} {k}/{v}: predicted {predicted} B, engine {logged} B");
        engine.stop(Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn launch_probe_and_stop_free_the_port() {
    let profile = demo_profile();
    let s = settings(&[("ctx_size", "2048"), ("threads", "2")]);
    let engine = launch(&profile, &s).await;
    let port: u16 = engine.base_url.rsplit(':').next().unwrap().parse().unwrap();
    assert!(engine.load_time > Duration::ZERO);
    let props = engine.props().await.expect("/props answers");
    assert_eq!(props.n_ctx, Some(2048));

    let probe = SpeedProbe {
        prompt_tokens: 64,
        n_predict: 16,
        warmup: 1,
        repeats: 2,
        ..SpeedProbe::default()
    };
    let (samples, summary) = probe.run(&engine).await.unwrap();
    assert_eq!(samples.len(), 2);
    assert_eq!(summary.tokens_generated, 16);
    assert_eq!(summary.prompt_tokens, 64);
    assert!(summary.decode_tps > 0.0 && summary.prefill_tps > 0.0 && summary.ttft_ms > 0.0);

    let pid = engine.process.pid();
    let exit = engine.stop(Duration::from_secs(5)).await;
    assert!(exit.code.is_some() || exit.signal.is_some());
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "the engine process is gone");
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free again");
}
