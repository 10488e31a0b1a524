//! engine-bridge against the real llama-server and the tiny model: launch,
//! health, read-back, speed, stop, and the planner's K/V cache prediction
//! checked against the engine's own log line.

use crate::common;
mod real_model;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::{demo_profile, launch, settings};
use engine_bridge::endpoints::Endpoint;
use engine_bridge::gguf::{LlamaSpec, write_random_llama};
use engine_bridge::placement::Placement;
use engine_bridge::planner::{LoggedBuffer, ModelInfo, logged_buffers, logged_kv_bytes};
use engine_bridge::probes::quality::Judge;
use engine_bridge::probes::{ConcurrencyProbe, ContextProbe, DepthProbe, QualityProbe};
use engine_bridge::{RunningEngine, Settings, SpeedProbe, free_port, plan};

#[tokio::test]
async fn kv_cache_prediction_matches_the_engine_within_5_percent() {
    let mut profile = demo_profile();
    // The K/V line is printed at log verbosity 4.
    profile.args.extend(["-lv".to_string(), "4".to_string()]);
    let model = ModelInfo::read(&common::model_path(&profile, "tiny-llama")).unwrap();
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
        // The log is drained by its own task: the line may land just after
        // the health check passes.
        let deadline = Instant::now() + Duration::from_secs(5);
        let logged = loop {
            if let Some(bytes) = logged_kv_bytes(&engine.log_tail(400)) {
                break bytes;
            }
            assert!(Instant::now() < deadline, "the engine never logged its K/V cache size");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let predicted = model.kv_bytes(ctx.parse().unwrap(), k, v).unwrap();
        let error = (predicted as f64 / logged as f64 - 1.0).abs();
        assert!(error < 0.05, "ctx {ctx} {k}/{v}: predicted {predicted} B, engine {logged} B");
        engine.stop(Duration::from_secs(5)).await;
    }
}

/// The buffers the engine logs, once it has logged its model buffers.
async fn logged_model_buffers(engine: &RunningEngine) -> Vec<LoggedBuffer> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found = logged_buffers(&engine.log_tail(400));
        if found.iter().any(|b| b.what == "model") {
            return found;
        }
        assert!(Instant::now() < deadline, "the engine never logged its model buffers");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The engine's model buffers for `settings`, summed.
async fn logged_weights(profile: &engine_bridge::Profile, settings: &Settings) -> u64 {
    let engine = launch(profile, settings).await;
    let logged = logged_model_buffers(&engine)
        .await
        .iter()
        .filter(|b| b.what == "model")
        .map(|b| b.bytes)
        .sum();
    // It runs, not only loads.
    let prompt = engine.prompt_of_len(16).await.unwrap();
    engine.completion(&prompt, 4, Duration::from_secs(30)).await.expect("a completion");
    engine.stop(Duration::from_secs(5)).await;
    logged
}

#[tokio::test]
async fn models_of_mixed_tensor_types_are_planned_as_the_engine_loads_them() {
    // A dense and a mixture-of-experts model as quantized models come:
    // attention in f16, feed-forward and embeddings in q8_0, norms in f32.
    let dir = tempfile::tempdir().unwrap();
    for (name, spec) in [("dense", LlamaSpec::tiny()), ("moe", LlamaSpec::tiny_moe())] {
        let path = dir.path().join(format!("{name}-q8.gguf"));
        write_random_llama(&path, &LlamaSpec { quantized: true, ..spec }, 5).unwrap();
        let model = ModelInfo::read(&path).unwrap();
        let types: std::collections::BTreeSet<&str> = model
            .tensors
            .iter()
            .map(|t| engine_bridge::gguf::types::by_id(t.ggml_type).unwrap().name)
            .collect();
        assert_eq!(types, ["f16", "f32", "q8_0"].into(), "{name}");
        let mut profile = demo_profile();
        common::tiny_model(&mut profile).path = path.clone();
        // Without repacking: on CPUs with AMX the engine moves q8_0
        // weights into AMX buffers, and its AMX kernels crash at warmup on
        // this model's tiny rows (SIGSEGV, every time). Repacking changes
        // which buffer holds a weight, not the weights the plan counts.
        profile.args.extend(["-lv", "4", "--no-repack"].map(String::from));
        let logged = logged_weights(&profile, &settings(&[])).await;
        let plan = model.placed_plan(1024, ("f16", "f16"), &Placement::layers(0), (0, u64::MAX));
        let planned = plan.host.weights + plan.gpu.weights;
        let error = (planned as f64 / logged as f64 - 1.0).abs();
        assert!(error < 0.005, "{name}: planned {planned} B, engine {logged} B");
    }
}

#[tokio::test]
async fn a_mixture_of_experts_is_planned_as_the_engine_loads_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("tiny-moe.gguf");
    write_random_llama(&path, &LlamaSpec::tiny_moe(), 5).unwrap();
    let mut profile = demo_profile();
    common::tiny_model(&mut profile).path = path.clone();
    // The buffer lines are printed at log verbosity 4.
    profile.args.extend(["-lv".to_string(), "4".to_string()]);
    let model = ModelInfo::read(&path).unwrap();
    assert_eq!((model.experts, model.experts_used), (Some(8), Some(2)));
    // A token reads a quarter of the experts: far less than every weight.
    assert!(model.weight_bytes_per_token() < 0.5 * model.weight_bytes() as f64);
    for asked in [
        vec![],
        vec![("n_cpu_moe", "2")],
        vec![("cpu_moe", "true")],
        vec![("override_tensor", r"blk\.3\.ffn_.*_exps=CPU")],
    ] {
        let s = settings(&asked);
        let engine = launch(&profile, &s).await;
        let logged: u64 = logged_model_buffers(&engine)
            .await
            .iter()
            .filter(|b| b.what == "model")
            .map(|b| b.bytes)
            .sum();
        let placement = Placement::of(&s, 0).unwrap();
        let plan = model.placed_plan(1024, ("f16", "f16"), &placement, (0, u64::MAX));
        // The engine logs MiB to two decimals: 5 KiB either way.
        let planned = plan.host.weights + plan.gpu.weights;
        let error = (planned as f64 / logged as f64 - 1.0).abs();
        assert!(error < 0.005, "{asked:?}: planned {planned} B, engine {logged} B");
        engine.stop(Duration::from_secs(5)).await;
    }
}

#[tokio::test]
async fn what_the_engine_ran_is_read_back_and_a_capped_setting_is_caught() {
    let profile = demo_profile();
    let asked = settings(&[
        ("ctx_size", "1000"),
        ("threads", "2"),
        ("batch_size", "64"),
        // More than the batch: llama.cpp runs it at the batch size.
        ("ubatch_size", "512"),
        ("cache_type_k", "q8_0"),
        ("flash_attn", "on"),
        ("parallel", "2"),
    ]);
    let port = free_port().unwrap();
    let spec = plan(&profile, "tiny-llama", &asked, port).unwrap();
    // As a trial launches it: adapted to the build, which logs what it runs.
    let spec = engine_bridge::flags::adapt(spec).await.unwrap();
    let engine = RunningEngine::launch(spec, port, Duration::from_secs(60)).await.unwrap();
    let applied = engine_bridge::applied::read_back(&asked, engine.startup_log());
    engine.stop(Duration::from_secs(5)).await;
    let ran = |name: &str| applied.iter().find(|a| a.setting == name).unwrap().clone();
    assert_eq!(applied.len(), asked.len(), "each setting read back: {applied:?}");
    let wrong = engine_bridge::applied::mismatched(&applied);
    assert_eq!(wrong.len(), 1, "{applied:?}");
    assert_eq!((wrong[0].setting.as_str(), wrong[0].ran.as_deref()), ("ubatch_size", Some("64")));
    assert_eq!(ran("ctx_size").ran.as_deref(), Some("1024"), "1000 rounded up, as asked");
    assert_eq!(ran("flash_attn").ran.as_deref(), Some("enabled"));
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

    // Long enough a stream that a test beside this one, taking the cores
    // for a moment, cannot make the client see it all arrive at once.
    let probe = SpeedProbe {
        prompt_tokens: 64,
        n_predict: 96,
        warmup: 1,
        repeats: 3,
        ..SpeedProbe::default()
    };
    let result = probe.run(&engine).await.unwrap();
    let summary = &result.summary;
    assert_eq!(result.samples.len(), 3);
    assert!(result.decode_tps.p10 <= result.decode_tps.median);
    assert!(result.decode_tps.median <= result.decode_tps.p90);
    let ratio = result.client_engine_ratio.unwrap();
    assert!(ratio > 0.2 && ratio < 5.0, "client and engine decode speeds roughly agree: {ratio}");
    assert_eq!(summary.tokens_generated, 96);
    assert_eq!(summary.prompt_tokens, 64);
    assert!(summary.decode_tps > 0.0 && summary.prefill_tps > 0.0 && summary.ttft_ms > 0.0);

    // A gate that finds the configuration beaten after one sample stops
    // the repeats there, and the plan skips its slow probes.
    let probe = SpeedProbe { repeats: 5, ..probe };
    let beaten = |s: &engine_bridge::probes::SpeedResult| {
        (s.samples.len() == 1).then(|| "trial 1 is faster".to_string())
    };
    let gated = probe.run_gated(&engine, Some(&beaten)).await.unwrap();
    assert_eq!(gated.samples.len(), 1, "four repeats saved");
    assert_eq!(gated.cut_short.as_deref(), Some("trial 1 is faster; 1 of 5 repeats run"));
    let plan = engine_bridge::ProbePlan {
        speed: Some(probe.clone()),
        quality: Some(QualityProbe::default()),
        ..Default::default()
    };
    let m = plan.run_gated(&engine, None, Some(&beaten)).await.unwrap();
    assert!(m.quality.is_none(), "the slow probes are skipped");
    assert!(m.skipped.as_deref().unwrap().starts_with("repeats cut short"), "{m:?}");
    let never = |_: &engine_bridge::probes::SpeedResult| None;
    assert_eq!(probe.run_gated(&engine, Some(&never)).await.unwrap().samples.len(), 5);

    let pid = engine.pid().unwrap();
    let exit = engine.stop(Duration::from_secs(5)).await;
    assert!(exit.code.is_some() || exit.signal.is_some());
    assert!(!PathBuf::from(format!("/proc/{pid}")).exists(), "the engine process is gone");
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the port is free again");
}

#[tokio::test]
async fn quality_answers_are_deterministic_and_scored() {
    let profile = demo_profile();
    let engine = launch(&profile, &settings(&[("ctx_size", "2048")])).await;
    let probe = QualityProbe::default();
    let first = probe.run(&engine).await.unwrap();
    let second = probe.run(&engine).await.unwrap();
    assert_eq!(first.cases.len(), probe.suite.cases.len());
    assert!((0.0..=1.0).contains(&first.score));
    assert!(first.cases.iter().all(|c| c.ms > 0.0));
    // Greedy and seeded: the same configuration answers the same way.
    assert_eq!(first.similarity_to(&second), Some(1.0));
    assert!(first.judge_score.is_none() && first.cases.iter().all(|c| c.judge_grade.is_none()));

    // The engine under test is its own judge here: any OpenAI-compatible
    // endpoint will do, and a grammar holds the reply to one digit.
    let judged = QualityProbe {
        judge: Some(Judge {
            endpoint: "self".into(),
            model: None,
            rubric: "The answer names the right number.".into(),
            resolved: Some(Endpoint {
                url: engine.base_url.clone(),
                model: None,
                api_key_env: None,
            }),
        }),
        ..QualityProbe::default()
    };
    let graded = judged.run(&engine).await.unwrap();
    for case in &graded.cases {
        assert!(case.judge_error.is_none(), "{case:?}");
        assert!((0.0..=1.0).contains(&case.judge_grade.unwrap()), "{case:?}");
    }
    let mean =
        graded.cases.iter().filter_map(|c| c.judge_grade).sum::<f64>() / graded.cases.len() as f64;
    assert!((graded.judge_score.unwrap() - mean).abs() < 1e-9);

    // A judge that cannot be reached costs the grades, not the answers.
    let free = engine_bridge::engine::free_port().unwrap();
    let unreachable = QualityProbe {
        judge: Some(Judge {
            endpoint: "gone".into(),
            model: Some("judge".into()),
            rubric: String::new(),
            resolved: Some(Endpoint {
                url: format!("http://127.0.0.1:{free}"),
                model: None,
                api_key_env: None,
            }),
        }),
        ..QualityProbe::default()
    };
    let ungraded = unreachable.run(&engine).await.unwrap();
    assert_eq!(ungraded.similarity_to(&first), Some(1.0));
    assert!(ungraded.judge_score.is_none());
    assert!(ungraded.cases.iter().all(|c| c.judge_error.as_deref().unwrap().contains("judge")));
    // A judge named in a plan but not configured here: said, and nothing sent.
    let unknown = QualityProbe {
        judge: Some(Judge { resolved: None, ..judged.judge.clone().unwrap() }),
        ..QualityProbe::default()
    };
    let ungraded = unknown.run(&engine).await.unwrap();
    assert!(
        ungraded.cases.iter().all(|c| c.judge_error.as_deref().unwrap().contains("not configured")),
        "{:?}",
        ungraded.cases[0]
    );
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn context_depth_and_concurrency_probes() {
    let profile = demo_profile();
    let s = settings(&[("ctx_size", "1024"), ("parallel", "2")]);
    let engine = launch(&profile, &s).await;
    let n_ctx = engine.props().await.and_then(|p| p.n_ctx);
    assert_eq!(n_ctx, Some(512), "two slots share 1024 tokens");

    let context =
        ContextProbe { sizes: vec![256, 4096], depths: vec![0.0, 0.5], ..Default::default() };
    let points = context.run(&engine, n_ctx).await.unwrap();
    assert_eq!(points.len(), 4);
    for p in points.iter().filter(|p| p.size == 256) {
        assert_eq!(p.prompt_tokens, 256, "the prompt is filled to exactly the size asked");
        assert!(p.skipped.is_none() && p.ms > 0.0);
    }
    for p in points.iter().filter(|p| p.size == 4096) {
        assert!(p.skipped.as_deref().unwrap().contains("do not fit a context of 512"), "{p:?}");
    }

    let depth =
        DepthProbe { depths: vec![16, 400], n_predict: 8, repeats: 1, ..Default::default() };
    let curve = depth.run(&engine, n_ctx).await.unwrap();
    assert_eq!(curve.len(), 2);
    assert!(curve.iter().all(|p| p.decode_tps.unwrap().median > 0.0));

    let conc = ConcurrencyProbe {
        clients: vec![1, 2],
        prompt_tokens: 32,
        n_predict: 16,
        ..Default::default()
    };
    let batches = conc.run(&engine).await.unwrap();
    assert_eq!(batches.iter().map(|b| b.clients).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(batches[1].decode_tps.n, 2);
    assert!(batches.iter().all(|b| b.aggregate_tps > 0.0));
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn renamed_flags_draft_model_and_environment_reach_the_engine() {
    let profile = demo_profile();
    let s = settings(&[
        ("mlock", "true"),
        ("no_mmap", "true"),
        ("draft_model", "tiny-llama"),
        ("draft_max", "4"),
        ("env.GGML_CUDA_DISABLE_GRAPHS", "1"),
    ]);
    let port = free_port().unwrap();
    let planned = plan(&profile, "tiny-llama", &s, port).unwrap();
    assert_eq!(planned.env.get("GGML_CUDA_DISABLE_GRAPHS").map(String::as_str), Some("1"));
    let flags = engine_bridge::flags::flags_of(&planned).await;
    assert!(flags.is_known(), "the demo llama-server lists its flags");
    let spec = engine_bridge::flags::adapt(planned).await.unwrap();
    // Every flag given is one this binary lists.
    for arg in spec.args.iter().filter(|a| a.starts_with('-')) {
        assert!(flags.supports(arg), "{arg} is not accepted by this build: {:?}", spec.args);
    }
    let draft = &common::model_path(&profile, "tiny-llama").display().to_string();
    assert!(spec.args.windows(2).any(|w| w[0] == "-md" && &w[1] == draft), "{:?}", spec.args);
    let engine =
        RunningEngine::launch(spec, port, Duration::from_secs(60)).await.expect("it starts");
    let probe = SpeedProbe { repeats: 1, ..SpeedProbe::default() };
    assert!(probe.run(&engine).await.unwrap().summary.decode_tps > 0.0);
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn perplexity_at_the_trial_settings() {
    let profile = demo_profile();
    let scratch = tempfile::tempdir().unwrap();
    let model = &common::model_path(&profile, "tiny-llama");
    let probe =
        engine_bridge::probes::PerplexityProbe { ctx: 128, chunks: 2, ..Default::default() };
    // The setup builds the library that keeps the tool's last lines.
    let flush = engine_bridge::probes::PerplexityProbe::log_flush_for(&profile);
    assert!(
        flush.is_some(),
        "no {} beside the engine",
        engine_bridge::probes::perplexity::LOG_FLUSH_LIBRARY
    );
    let mut ppl = Vec::new();
    for cache in ["f16", "q4_0"] {
        let s = settings(&[
            ("cache_type_k", cache),
            ("cache_type_v", cache),
            ("flash_attn", "on"),
            ("threads", "2"),
        ]);
        let r = probe
            .run(&profile, model, &s, scratch.path(), None)
            .await
            .expect("llama-perplexity runs");
        assert_eq!((r.ctx, r.chunks), (128, 2));
        assert!(r.plus_minus.unwrap() > 0.0);
        ppl.push(r.ppl);
    }
    // A random model over 260 tokens is about as unsure as uniform guessing.
    assert!(ppl.iter().all(|p| *p > 50.0 && *p < 1000.0), "{ppl:?}");
    assert_ne!(ppl[0], ppl[1], "a 4-bit cache changes the numbers");
    // A setting llama-perplexity rejects is the engine's failure, in its words.
    let bad = settings(&[("cache_type_k", "q3_bogus")]);
    let f = probe.run(&profile, model, &bad, scratch.path(), None).await.unwrap_err();
    assert!(f.message.contains("q3_bogus"), "{}", f.message);
}

#[tokio::test]
async fn kl_divergence_from_the_reference_grows_as_the_cache_shrinks() {
    let profile = demo_profile();
    let dir = tempfile::tempdir().unwrap();
    let model = &common::model_path(&profile, "tiny-llama");
    let probe = engine_bridge::probes::KldProbe {
        ctx: 128,
        chunks: 3,
        reference: settings(&[("flash_attn", "on"), ("threads", "2")]),
        ..Default::default()
    };
    let mut found = Vec::new();
    for cache in ["f16", "q8_0", "q4_0"] {
        let s = settings(&[
            ("cache_type_k", cache),
            ("cache_type_v", cache),
            ("flash_attn", "on"),
            ("threads", "2"),
        ]);
        let r = probe.run(&profile, model, &s, dir.path(), None).await.expect("the probe runs");
        assert_eq!((r.ctx, r.chunks), (128, 3));
        eprintln!(
            "{cache}: mean KLD {:.6}, p99 {:.6}, same top {:.2} %",
            r.mean, r.p99, r.same_top_pct
        );
        found.push(r);
    }
    // The reference against itself: nothing moves.
    assert!(found[0].mean < 1e-6 && found[0].same_top_pct > 99.9, "{:?}", found[0]);
    // Each halving of the cache moves the distribution further.
    assert!(found[0].mean < found[1].mean && found[1].mean < found[2].mean, "{found:?}");
    assert!(found[1].same_top_pct > found[2].same_top_pct, "{found:?}");
    assert!(found.iter().all(|r| r.p99 >= r.mean), "{found:?}");
    // The reference's logits were written once and kept.
    let kept: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.starts_with("kld-"))
        .collect();
    assert_eq!(kept.len(), 1, "{kept:?}");
    assert!(kept[0].ends_with(".bin"), "{kept:?}");
}
