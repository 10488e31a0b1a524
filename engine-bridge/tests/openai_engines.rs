//! Engines measured through the OpenAI-compatible API, for real:
//! llama-cpp-python's own server (its flag names, no /health, no timings),
//! and a custom command template (llama-server launched as a template).

use std::path::PathBuf;
use std::time::Duration;

use engine_bridge::probes::{ContextProbe, QualityProbe};
use engine_bridge::{Profile, RunningEngine, Settings, SpeedProbe, free_port, plan};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
}

fn profile(text: &str) -> Profile {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("p.toml");
    std::fs::write(&path, text).unwrap();
    let p = Profile::load(&path).unwrap();
    assert!(p.binary.exists(), "{} is missing: run scripts/setup.sh", p.binary.display());
    p
}

fn settings(pairs: &[(&str, &str)]) -> Settings {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

async fn launch(profile: &Profile, s: &Settings) -> RunningEngine {
    let port = free_port().unwrap();
    let spec = plan(profile, "tiny", s, port).unwrap();
    let spec = engine_bridge::flags::adapt(spec).await.unwrap();
    RunningEngine::launch(spec, port, Duration::from_secs(120)).await.expect("the engine starts")
}

#[tokio::test]
async fn llama_cpp_python_server() {
    let _turn = crate::common::engine_turn();
    let r = root();
    let p = profile(&format!(
        "name = \"py\"\nkind = \"llama-cpp-python\"\nbinary = {:?}\n[[models]]\nname = \"tiny\"\npath = {:?}\n",
        r.join(".tools/engine-venv/bin/python").display().to_string(),
        r.join(".tools/models/tiny-llama.gguf").display().to_string(),
    ));
    let s = settings(&[
        ("ctx_size", "1024"),
        ("threads", "2"),
        ("cache_type_k", "q8_0"),
        ("flash_attn", "on"),
    ]);
    let engine = launch(&p, &s).await;
    let args = engine.spec.args.join(" ");
    assert!(args.starts_with("-m llama_cpp.server --model "), "{args}");
    assert!(
        args.contains("--n_ctx 1024")
            && args.contains("--type_k 8")
            && args.contains("--flash_attn true")
    );

    let speed = SpeedProbe { prompt_tokens: 64, n_predict: 16, repeats: 2, ..Default::default() };
    let result = speed.run(&engine).await.unwrap();
    for s in &result.samples {
        assert!(
            s.timings.from_client,
            "llama-cpp-python reports no timings: the client's are used"
        );
        assert!(s.timings.predicted_n >= 1 && s.timings.predicted_n <= 16);
        assert!(s.ttft_ms > 0.0);
        // The prompt was cut to 64 tokens by the server's own tokenizer.
        assert!((60..=64).contains(&s.timings.prompt_n), "{s:?}");
        assert!(s.timings.prompt_per_second > 0.0);
    }
    let quality = QualityProbe::default().run(&engine).await.unwrap();
    assert_eq!(quality.cases.len(), QualityProbe::default().suite.cases.len());

    let context = ContextProbe { sizes: vec![300], depths: vec![0.5], ..Default::default() };
    let points = context.run(&engine, Some(1024)).await.unwrap();
    assert!(points[0].skipped.is_none(), "{:?}", points[0]);
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn custom_command_template() {
    let _turn = crate::common::engine_turn();
    let r = root();
    let p = profile(&format!(
        "name = \"custom\"\nkind = \"custom\"\nbinary = {:?}\n\
         args = [\"-m\", \"{{model}}\", \"--host\", \"{{host}}\", \"--port\", \"{{port}}\"]\n\
         health_path = \"/health\"\n[params]\ncontext = \"-c\"\n\
         [[models]]\nname = \"tiny\"\npath = {:?}\n",
        r.join(".tools/engine-bin/llama-server").display().to_string(),
        r.join(".tools/models/tiny-llama.gguf").display().to_string(),
    ));
    let err = plan(&p, "tiny", &settings(&[("ctx_size", "1")]), 1).unwrap_err();
    assert!(err.to_string().contains("unknown setting `ctx_size` for custom"), "{err}");
    let engine = launch(&p, &settings(&[("context", "1024")])).await;
    let args = engine.spec.args.join(" ");
    assert!(args.ends_with("-c 1024") && args.contains("--host 127.0.0.1 --port"), "{args}");
    let speed = SpeedProbe { prompt_tokens: 32, n_predict: 8, repeats: 1, ..Default::default() };
    let result = speed.run(&engine).await.unwrap();
    assert!(result.samples[0].timings.from_client);
    assert!(result.summary.decode_tps > 0.0);
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_external_endpoint_is_measured_not_launched() {
    let _turn = crate::common::engine_turn();
    let r = root();
    // Something Tunebook did not start: a llama-server launched here by hand.
    let server = profile(&format!(
        "name = \"s\"\nkind = \"llama-server\"\nbinary = {:?}\n[[models]]\nname = \"tiny\"\npath = {:?}\n",
        r.join(".tools/engine-bin/llama-server").display().to_string(),
        r.join(".tools/models/tiny-llama.gguf").display().to_string(),
    ));
    let running = launch(&server, &settings(&[("ctx_size", "1024")])).await;

    let attached =
        RunningEngine::attach(&running.base_url, "tiny", Duration::from_secs(10)).await.unwrap();
    assert_eq!(attached.pid(), None, "nothing was launched");
    let speed = SpeedProbe { prompt_tokens: 32, n_predict: 8, repeats: 1, ..Default::default() };
    let result = speed.run(&attached).await.unwrap();
    assert!(result.samples[0].timings.from_client);
    assert!(result.summary.decode_tps > 0.0);
    assert_eq!(attached.memory().samples, 0, "an external engine's memory is not ours to sample");
    attached.stop(Duration::from_secs(1)).await;
    assert!(running.props().await.is_some(), "stopping an attachment leaves the server running");
    running.stop(Duration::from_secs(5)).await;

    let port = free_port().unwrap();
    let err = RunningEngine::attach(
        &format!("http://127.0.0.1:{port}"),
        "tiny",
        Duration::from_millis(300),
    )
    .await
    .err()
    .unwrap();
    assert!(err.message.contains("did not answer"), "{}", err.message);
}
