//! The real instruct model (SmolLM2-135M-Instruct, Q4_1) on the real
//! llama-server: questions reach it through its own chat template, a
//! working configuration passes a good part of the default suite, the same
//! model asked raw (a wrong template: a broken configuration) does not, and
//! recall prompts are exactly the size asked with the template counted.

use std::time::Duration;

use engine_bridge::ask::PromptStyle;
use engine_bridge::probes::{ContextProbe, QualityProbe};

use crate::common::{demo_profile, launch_model, settings};

const MODEL: &str = "smollm2-135m";

#[tokio::test]
async fn the_real_model_answers_through_its_chat_template() {
    let profile = demo_profile();
    let engine = launch_model(&profile, MODEL, &settings(&[("ctx_size", "2048")])).await;
    let frame = engine.frame().await.unwrap();
    assert_eq!(frame.style, PromptStyle::Chat);
    assert!(frame.prefix.contains("<|im_start|>user"), "{frame:?}");
    assert!(frame.suffix.contains("<|im_start|>assistant"), "{frame:?}");
    assert!(!frame.thinks);

    let chat = QualityProbe::default().run(&engine).await.unwrap();
    let raw = QualityProbe { raw: true, ..QualityProbe::default() }.run(&engine).await.unwrap();
    let answers = |r: &engine_bridge::probes::QualityResult| {
        r.cases.iter().map(|c| format!("{}: {:?} {}", c.id, c.answer, c.passed)).collect::<Vec<_>>()
    };
    assert_eq!((chat.style, chat.note.as_deref()), (PromptStyle::Chat, None));
    assert_eq!(raw.style, PromptStyle::Raw);
    // A working configuration passes a good part of the suite …
    assert!(chat.score >= 0.4, "through the template: {:?}", answers(&chat));
    // … and the model fed the wrong prompt format does clearly worse.
    assert!(raw.score < 0.4 && raw.score < chat.score, "raw: {:?}", answers(&raw));
    // Each case keeps its question and the answer judged.
    let capital = chat.cases.iter().find(|c| c.id == "capital").unwrap();
    assert_eq!(capital.prompt, "What is the capital of France?");
    assert!(chat.cases.iter().all(|c| c.thinking_tokens.is_none()), "it does not think");
    assert!(chat.cases.iter().any(|c| !c.answer.trim().is_empty()));

    // Recall: the fact asked for inside the template, the template's own
    // tokens counted toward the size.
    let context = ContextProbe { sizes: vec![512], depths: vec![0.5], ..Default::default() };
    let points = context.run(&engine, Some(2048)).await.unwrap();
    assert_eq!(points[0].style, PromptStyle::Chat);
    assert_eq!(points[0].prompt_tokens, 512, "{:?}", points[0]);
    assert!(points[0].skipped.is_none() && points[0].ms > 0.0, "{:?}", points[0]);
    engine.stop(Duration::from_secs(5)).await;
}

#[tokio::test]
async fn a_model_without_a_template_is_asked_raw_and_the_result_says_so() {
    let profile = demo_profile();
    let engine = launch_model(&profile, "tiny-llama", &settings(&[("ctx_size", "2048")])).await;
    let result = QualityProbe::default().run(&engine).await.unwrap();
    assert_eq!(result.style, PromptStyle::Raw);
    assert!(result.note.as_deref().unwrap().contains("no chat template"), "{result:?}");
    engine.stop(Duration::from_secs(5)).await;
}
