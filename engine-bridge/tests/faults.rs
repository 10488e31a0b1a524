//! Failures a real engine produces only by accident, produced on demand by
//! the fake engine: each must end as the right failure kind, with the
//! engine's words as evidence, and leave no process behind.

use std::path::Path;
use std::time::{Duration, Instant};

use engine_bridge::{
    Failure, FailureKind, Profile, RunningEngine, Settings, SpeedProbe, free_port, plan,
};

const FAKE: &str = env!("CARGO_BIN_EXE_tunebook-fake-engine");

/// A profile running the fake engine in `mode`, with a placeholder model.
fn fake_profile(dir: &Path, mode: &str, extra: &[&str]) -> Profile {
    let model = dir.join("model.gguf");
    std::fs::write(&model, b"placeholder").unwrap();
    let mut args = vec!["--fake".to_string(), mode.to_string()];
    args.extend(extra.iter().map(|s| s.to_string()));
    let text = format!(
        "name = \"fake\"\nkind = \"llama-server\"\nbinary = {FAKE:?}\nargs = {args:?}\n\
         [[models]]\nname = \"m\"\npath = {:?}\n",
        model.display().to_string()
    );
    let path = dir.join("fake.toml");
    std::fs::write(&path, text).unwrap();
    Profile::load(&path).unwrap()
}

async fn launch(mode: &str, extra: &[&str], timeout: Duration) -> Result<RunningEngine, Failure> {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), mode, extra);
    let port = free_port().unwrap();
    let spec = plan(&profile, "m", &Settings::new(), port).unwrap();
    RunningEngine::launch(spec, port, timeout).await
}

fn alive(pid: u32) -> bool {
    // A zombie has been killed but not reaped; it counts as gone.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.split(") ").nth(1).unwrap_or("").starts_with('Z'))
        .unwrap_or(false)
}

#[tokio::test]
async fn crash_during_load() {
    let f = launch("crash-on-load", &[], Duration::from_secs(20)).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::Crashed, "{f:?}");
    assert!(f.message.contains("SIGABRT"), "{}", f.message);
    assert!(
        f.log_tail.iter().any(|l| l.contains("something went badly wrong")),
        "{:?}",
        f.log_tail
    );
}

#[tokio::test]
async fn out_of_memory_during_load() {
    let f = launch("oom", &[], Duration::from_secs(20)).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::OutOfMemory, "{f:?}");
    assert!(f.message.contains("failed to allocate buffer"), "{}", f.message);
}

#[tokio::test]
async fn rejected_flag_keeps_the_engine_message() {
    let f = launch("reject", &[], Duration::from_secs(20)).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::Rejected, "{f:?}");
    assert!(f.message.contains("Unsupported cache type: q3_fake"), "{}", f.message);
    assert!(!f.message.contains("usage"), "usage text is not the message: {}", f.message);
}

#[tokio::test]
async fn engine_that_cannot_bind_its_port() {
    let f = launch("port-taken", &[], Duration::from_secs(20)).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::PortConflict, "{f:?}");
}

#[tokio::test]
async fn a_port_someone_else_holds_is_never_shared() {
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = squatter.local_addr().unwrap().port();
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), "ok", &[]);
    let spec = plan(&profile, "m", &Settings::new(), port).unwrap();
    let f = RunningEngine::launch(spec, port, Duration::from_secs(5)).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::PortConflict);
    assert!(f.message.contains(&format!("port {port}")), "{}", f.message);
}

#[tokio::test]
async fn slow_load_is_waited_for() {
    let engine = launch("slow-load", &["--fake-ms", "700"], Duration::from_secs(20)).await.unwrap();
    assert!(engine.load_time >= Duration::from_millis(700), "{:?}", engine.load_time);
    engine.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn load_timeout_stops_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let profile = fake_profile(dir.path(), "never-ready", &[]);
    let port = free_port().unwrap();
    let spec = plan(&profile, "m", &Settings::new(), port).unwrap();
    let started = Instant::now();
    let f = RunningEngine::launch(spec, port, Duration::from_millis(600)).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::LoadTimeout, "{f:?}");
    assert!(started.elapsed() >= Duration::from_millis(600));
    // The engine is gone: its port is free again.
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("the timed-out engine was stopped");
}

#[tokio::test]
async fn a_hung_probe_times_out() {
    let engine = launch("hang-probe", &[], Duration::from_secs(20)).await.unwrap();
    let probe = SpeedProbe { request_timeout: Duration::from_millis(400), ..SpeedProbe::default() };
    let f = probe.run(&engine).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::ProbeTimeout, "{f:?}");
    engine.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn a_crash_under_probe_is_the_engine_crash() {
    let engine = launch("crash-in-probe", &[], Duration::from_secs(20)).await.unwrap();
    let f = SpeedProbe::default().run(&engine).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::Crashed, "{f:?}");
    assert!(f.log_tail.iter().any(|l| l.contains("GGML_ASSERT")), "{:?}", f.log_tail);
}

#[tokio::test]
async fn the_fake_engine_answers_like_llama_server() {
    let engine = launch("ok", &[], Duration::from_secs(20)).await.unwrap();
    let result = SpeedProbe { repeats: 2, ..SpeedProbe::default() }.run(&engine).await.unwrap();
    assert_eq!(result.samples.len(), 2);
    assert_eq!(result.summary.decode_tps, 1000.0);
    assert_eq!(engine.props().await.unwrap().n_ctx, Some(2048));
    engine.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn output_that_is_not_text_or_is_one_huge_line_is_kept_and_the_engine_lives() {
    let engine = launch("ok", &["--fake-bad-bytes"], Duration::from_secs(20)).await.unwrap();
    // Output goes on being read: the engine, which writes after the bad
    // bytes, still answers.
    let result = SpeedProbe { repeats: 1, ..SpeedProbe::default() }.run(&engine).await.unwrap();
    assert_eq!(result.samples.len(), 1);
    let tail = engine.log_tail(400);
    let named = tail.iter().find(|l| l.contains("is not text")).expect("the bad line");
    assert!(named.contains("name \u{fffd}\u{fffd}\u{fffd} is"), "{named:?}");
    let long = tail.iter().find(|l| l.starts_with("###")).expect("the long line");
    assert!(long.len() < 4096 && long.ends_with('…'), "{} bytes", long.len());
    assert!(tail.iter().any(|l| l == "after the bad bytes"), "{tail:?}");
    engine.stop(Duration::from_secs(2)).await;
}

#[tokio::test]
async fn sigterm_ignored_means_sigkill_after_the_grace() {
    let engine = launch("ignore-sigterm", &[], Duration::from_secs(20)).await.unwrap();
    let pid = engine.pid().unwrap();
    let started = Instant::now();
    let exit = engine.stop(Duration::from_millis(500)).await;
    assert!(started.elapsed() >= Duration::from_millis(500));
    assert_eq!(exit.signal, Some(9), "{exit:?}");
    assert!(!alive(pid));
}

#[tokio::test]
async fn stop_kills_the_whole_process_group() {
    let engine = launch("spawn-child", &[], Duration::from_secs(20)).await.unwrap();
    // The line is printed before the engine binds its port, but the log is
    // drained by its own task, which may read it a moment after the health
    // check has passed (on a busy machine, seconds after).
    let deadline = Instant::now() + Duration::from_secs(30);
    let child: u32 = loop {
        let tail = engine.log_tail(50);
        let reported = tail
            .iter()
            .find_map(|l| l.strip_prefix("child pid ").and_then(|p| p.trim().parse().ok()));
        if let Some(pid) = reported {
            break pid;
        }
        assert!(Instant::now() < deadline, "the fake engine never reported its child: {tail:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert!(alive(child));
    engine.stop(Duration::from_secs(2)).await;
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(child) {
        assert!(Instant::now() < deadline, "the engine's child {child} outlived it");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_binary_that_cannot_run() {
    let dir = tempfile::tempdir().unwrap();
    let mut profile = fake_profile(dir.path(), "ok", &[]);
    let not_executable = dir.path().join("llama-server");
    std::fs::write(&not_executable, b"#!nothing").unwrap();
    profile.binary = not_executable;
    let port = free_port().unwrap();
    let spec = plan(&profile, "m", &Settings::new(), port).unwrap();
    let f = RunningEngine::launch(spec, port, Duration::from_secs(5)).await.err().unwrap();
    assert_eq!(f.kind, FailureKind::Spawn, "{f:?}");
    assert!(f.message.contains("Permission denied"), "{}", f.message);
}

#[tokio::test]
async fn a_thinking_model_cut_off_mid_thought_is_asked_again_with_room_to_think() {
    use engine_bridge::probes::{QualityProbe, Suite};
    let engine = launch("thinker", &[], Duration::from_secs(10)).await.unwrap();
    let suite = Suite::parse(
        "name = \"one\"\n[[case]]\nid = \"capital\"\nprompt = \"What is the capital of France?\"\n\
         any = [\"Paris\"]\nmax_tokens = 16\n",
    )
    .unwrap();
    let probe = QualityProbe { suite, thinking_budget: 200, ..QualityProbe::default() };
    let result = probe.run(&engine).await.unwrap();
    let case = &result.cases[0];
    // Sixteen tokens end inside its thinking; asked again with the budget
    // it answers, and only the answer is judged.
    assert!(case.passed, "{case:?}");
    assert_eq!(case.answer.trim(), "Paris.");
    assert!(case.thinking_tokens.is_some_and(|n| n > 0), "{case:?}");
    // Without the room, it is cut off: no answer, and it fails.
    let short = QualityProbe { thinking_budget: 0, ..probe };
    let result = short.run(&engine).await.unwrap();
    assert!(!result.cases[0].passed && result.cases[0].answer.is_empty(), "{result:?}");
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_template_the_engine_cannot_render_is_asked_raw_and_says_why() {
    use engine_bridge::ask::PromptStyle;
    use engine_bridge::gguf::{MetaValue, ModelSpec, write_model};
    // A model file with a chat template, on an engine (the fake) that has
    // no `/apply-template`, as older llama-server builds do.
    let dir = tempfile::tempdir().unwrap();
    let mut profile = fake_profile(dir.path(), "ok", &[]);
    let model = dir.path().join("templated.gguf");
    let template = "{% for m in messages %}<|user|>{{ m.content }}{% endfor %}<|assistant|>";
    let spec = ModelSpec {
        metadata: vec![("tokenizer.chat_template".into(), MetaValue::Str(template.into()))],
        tensors: vec![],
    };
    write_model(&model, &spec, 1).unwrap();
    profile.models[0].path = model;
    let port = free_port().unwrap();
    let spec = plan(&profile, "m", &Settings::new(), port).unwrap();
    let engine = RunningEngine::launch(spec, port, Duration::from_secs(10)).await.unwrap();
    let frame = engine.frame().await.unwrap();
    assert_eq!(frame.style, PromptStyle::Raw);
    let note = frame.note.unwrap();
    assert!(note.contains("did not render the chat template") && note.contains("404"), "{note}");
    engine.stop(Duration::from_secs(5)).await;
}
