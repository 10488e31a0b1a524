//! Serving load on the real llama-server and the tiny model: the load
//! probe's rates against a latency objective, what binds, and an agent's
//! warm cache. One at a time, and with the real engine's turn: hundreds of
//! requests a second take every core, and would slow the timings of
//! other tests running beside them.

use crate::common;

use std::time::Duration;

use common::{demo_profile, launch, settings};
use engine_bridge::{RunningEngine, free_port, plan};

/// Held by each test: they run one after another.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test]
async fn a_load_probe_finds_the_rate_the_objective_holds_at() {
    let _turn = ONE_AT_A_TIME.lock().await;
    // A user's workload: short prompts, a few tokens each, in the
    // server's workloads folder.
    let workloads = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..20)
        .map(|i| format!("{{\"prompt\": \"Say something about number {i}.\", \"max_tokens\": 8}}"))
        .collect();
    std::fs::write(workloads.path().join("team.jsonl"), lines.join("\n")).unwrap();
    let profile = demo_profile();
    let s = settings(&[("ctx_size", "2048"), ("parallel", "2"), ("threads", "2")]);
    // As trials launch it: with the flags this build takes (`--metrics`).
    let port = free_port().unwrap();
    let spec = engine_bridge::flags::adapt(plan(&profile, "tiny-llama", &s, port).unwrap());
    let spec = spec.await.unwrap();
    assert!(spec.args.iter().any(|a| a == "--metrics"), "{:?}", spec.args);
    let engine = RunningEngine::launch(spec, port, Duration::from_secs(60)).await.unwrap();
    let probe = engine_bridge::probes::LoadProbe {
        workload: "team.jsonl".into(),
        // One a second the tiny model answers at once, even beside other
        // tests (within 100 ms with two cores' worth of busy loops beside
        // it). Three hundred a second queue up for seconds: llama-server
        // answers fewer the more it holds (on an idle 2-core machine,
        // about 75 a second with 200 waiting, 45 with 400, 24 with 1,000),
        // and the last of these 300 first answered after 5 s there.
        rates: vec![1.0, 300.0],
        duration: Duration::from_secs(1),
        slo: engine_bridge::probes::Slo { ttft_p99_ms: Some(1000.0), itl_p99_ms: None },
        max_in_flight: 2048,
        // On a machine loaded past its cores (with two busy loops beside
        // it, three a second) the last answers take minutes, and time out
        // instead.
        request_timeout: Duration::from_secs(60),
        search_steps: 0,
        workloads_dir: Some(workloads.path().to_path_buf()),
        ..Default::default()
    };
    let r = probe.run(&engine).await.expect("the probe runs");
    assert_eq!(r.steps.len(), 2, "{r:?}");
    let (slow, fast) = (&r.steps[0], &r.steps[1]);
    assert!(slow.meets_slo && slow.errors == 0, "{slow:?}");
    assert!(!fast.meets_slo, "{fast:?}");
    assert!(fast.ttft_ms.unwrap().p99 > 1000.0, "queued: {fast:?}");
    // The only errors a queue may bring are answers that came too late, or
    // connections the engine closed unanswered: llama-server's HTTP layer
    // drops a connection whose request it has not read five seconds after
    // taking it, which a machine loaded past its cores brought to a
    // quarter of a thousand. Never the probe's own limit.
    let queued = fast.error.as_deref().is_some_and(|e| {
        e.contains("no complete answer within") || e.contains("closed before message completed")
    });
    assert!(fast.errors == 0 || queued, "{fast:?}");
    assert_eq!(r.best_rate, Some(1.0));
    // What bound the fast step, from the engine's own slots.
    let engine_side = fast.engine.as_ref().expect("the engine was read meanwhile");
    assert_eq!(engine_side.slots, Some(2), "{engine_side:?}");
    assert!(engine_side.waiting.is_some_and(|w| w > 0.0), "requests queued: {engine_side:?}");
    let why = fast.binding.as_deref().unwrap_or_default();
    assert!(why.contains("all 2 slots busy"), "{why}: {fast:?}");
    assert_eq!(slow.binding, None, "nothing binds where the objective holds: {slow:?}");
    assert!(r.goodput_rps > 0.0 && r.goodput_rps <= slow.throughput_rps + 1e-9, "{r:?}");
    // Every answer was as long as asked: the chat template ran, the
    // tokens were counted.
    assert!(slow.output_tps > 0.0, "{slow:?}");

    // A file with a bad line is refused with its number.
    std::fs::write(workloads.path().join("bad.jsonl"), "{\"prompt\": \"a\"}\n{\"prompt\": 1}\n")
        .unwrap();
    let bad = engine_bridge::probes::LoadProbe { workload: "bad.jsonl".into(), ..probe };
    let e = bad.run(&engine).await.unwrap_err();
    assert!(e.message.contains("workload `bad.jsonl`: line 2:"), "{}", e.message);
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn an_agent_s_later_turns_find_their_prefix_in_the_cache() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let profile = demo_profile();
    let s = settings(&[("ctx_size", "8192"), ("parallel", "1"), ("threads", "2")]);
    let engine = launch(&profile, &s).await;
    let probe = engine_bridge::probes::LoadProbe {
        workload: "agent".into(),
        // One conversation of six turns, each sent when the last is answered.
        rates: vec![0.1],
        duration: Duration::from_secs(1),
        slo: engine_bridge::probes::Slo { ttft_p99_ms: None, itl_p99_ms: None },
        search_steps: 0,
        seed: 1,
        ..Default::default()
    };
    let r = probe.run(&engine).await.expect("the probe runs");
    let step = &r.steps[0];
    assert!(step.completed == 6 && step.errors == 0, "{step:?}");
    // The engine reported cached tokens for the later turns (a warm
    // median exists only then) and none for the first. How much sooner a
    // warm turn answers is not asserted: it is one cold turn's time
    // against five, and on a machine loaded past its cores it was slower
    // (607 ms against 474).
    assert!(step.cold_ttft_ms.is_some(), "a first turn with nothing cached: {step:?}");
    assert!(step.warm_ttft_ms.is_some(), "later turns found their prefix: {step:?}");
    engine.stop(Duration::from_secs(5)).await;
}
