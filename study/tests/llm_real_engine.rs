//! The language-model strategy against the real engine: the demo model has
//! random weights, so only the answer's schema makes its answer usable —
//! which is what this checks, end to end, through the chat endpoint.

use std::path::PathBuf;
use std::time::Duration;

use engine_bridge::{Profile, RunningEngine, Settings, free_port, plan};
use tunebook_study::strategy::{Llm, Strategy};
use tunebook_study::study::{Endpoint, StudyDef};

#[tokio::test]
async fn a_schema_constrained_answer_from_the_real_engine_is_a_configuration_of_the_space() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf();
    let profile = Profile::load(&root.join("profiles/demo.toml")).unwrap();
    assert!(
        profile.binary.is_file() && profile.model("tiny-llama").is_some_and(|m| m.path.is_file()),
        "the demo engine and model are missing: run scripts/setup.sh first"
    );
    let settings: Settings = [("ctx_size".to_string(), "2048".to_string())].into();
    let port = free_port().unwrap();
    let spec = plan(&profile, "tiny-llama", &settings, port).unwrap();
    let engine = RunningEngine::launch(spec, port, Duration::from_secs(60)).await.unwrap();

    let study = StudyDef::from_toml(
        r#"
name = "asked"
profile = "demo"
model = "tiny-llama"
strategy = { kind = "llm", seed = 3 }
[space]
threads = { min = 1, max = 4 }
ubatch_size = { min = 64, max = 512, log = true }
cache_type_k = ["f16", "q8_0", "q4_0"]
[baseline]
threads = 2
ubatch_size = 512
cache_type_k = "f16"
[[objectives]]
metric = "decode_tps"
"#,
    )
    .unwrap()
    .check(&profile.catalog(), &["tiny-llama".to_string()])
    .unwrap();
    let endpoint = Endpoint { url: engine.base_url.clone(), model: None, api_key_env: None };
    let strategy = Llm { endpoint: Some(endpoint), seed: 3 };
    let proposal = strategy.propose(&study, &[]).await.expect("a proposal");
    eprintln!("proposed: {:?} ({})", proposal.config, proposal.note);
    engine.stop(Duration::from_secs(5)).await;
    assert_eq!(proposal.note, "proposed by the language model", "it fell back");
    study.space.check(&proposal.config).unwrap();
    assert!(["64", "128", "256", "512"].contains(&proposal.config["ubatch_size"].as_str()));
}
