//! The acceptance study: a real instruct model (SmolLM2-135M-Instruct) on
//! the real llama-server, its K cache type × threads, judged on decode
//! speed, KL divergence from the baseline and the quality suite. Beside
//! it, llama.cpp's own tools run on their own: `llama-perplexity
//! --kl-divergence` over a text of this test must order the cache types as
//! the study's findings do, and `llama-bench`'s decode at each thread count
//! must agree with the study's. Speeds are compared only with the machine
//! to itself, so the test is left out of a plain `cargo test` and run
//! after the rest by `scripts/test.sh` (`cargo test --workspace --test
//! suite -- --ignored acceptance::`).

use crate::common;
use tunebook_views::types::Metric;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use common::{TestServer, eventually, get_json, http, repo_root};
use serde_json::{Value, json};
use tunebook::db::studies::{StudyRow, StudyState};
use tunebook_views::types::{TrialState, TrialView};

const MODEL: &str = "smollm2-135m";
const MODEL_FILE: &str = ".tools/models/SmolLM2-135M-Instruct.Q4_1.gguf";
const CACHE_TYPES: [&str; 3] = ["f16", "q8_0", "q4_0"];

/// The text llama-perplexity reads here: not the study's own reference
/// text, so the tool's verdict does not lean on the study's inputs.
const TEXT: &str = "Every spring the river rose over its banks and the lower fields turned \
into a shallow lake. The farmers had learned to wait. They mended fences on the higher ground, \
sharpened their tools, and traded stories in the long evenings about the years the water had \
come into the houses. When it drew back it left a fine grey silt that made the soil rich, and \
by midsummer the barley stood taller there than anywhere else in the valley. Children were \
warned away from the banks, which did little good: they built rafts from old doors and poled \
them between the drowned hedges, counting herons and arguing over who had seen the otter first. \
The schoolteacher, who had come from the city and never quite stopped being surprised by the \
place, kept a notebook of the river's heights, one line for every morning, and by the tenth \
year she could tell from the colour of the water how high it would climb. The mill at the \
narrows kept turning through all of it. Its owner was a patient man who repaired the wheel \
himself, paddle by paddle, and who said that a river was like a neighbour: you could not \
choose it, but you could learn its habits. In the autumn the carts came down from the hills \
loaded with apples, and the whole village smelled of cider for a month. Travellers who crossed \
the bridge in that season remembered the smell long after they had forgotten the name of the \
place. The railway reached the valley late, and when it did it brought newspapers a day old, \
letters, a doctor twice a week, and young people who left on it and mostly did not return. \
Those who stayed said the valley was quieter for it, and meant it both as a complaint and as \
praise. On the longest night of the year the church bell rang once for every family that had \
lived there a hundred years, and the count grew shorter every decade. ";

fn study() -> Value {
    json!({
        "name": "acceptance: K cache × threads on a real model",
        "profile": "demo",
        "model": MODEL,
        "space": { "cache_type_k": CACHE_TYPES, "threads": [1, 2] },
        "fixed": { "cache_type_v": "f16", "flash_attn": "on", "ctx_size": 1024 },
        "baseline": { "cache_type_k": "f16", "threads": 2 },
        "objectives": [{ "metric": "decode_tps" }, { "metric": "kld_mean" }],
        "strategy": { "kind": "grid" },
        "budget": { "max_trials": 6, "confirm_pairs": 0, "skip_dominated": false },
        "probes": {
            "speed": { "prompt_tokens": 16, "n_predict": 64, "repeats": 5, "warmup": 1 },
            "quality": {},
            "kld": { "ctx": 128, "chunks": 4 }
        }
    })
}

/// Runs one of llama.cpp's tools built beside the demo llama-server and
/// returns what it printed, both streams.
fn tool(name: &str, args: &[&str]) -> String {
    let bin = repo_root().join(".tools/engine-bin");
    let out = Command::new(bin.join(name))
        .args(args)
        .env("LD_LIBRARY_PATH", &bin)
        .output()
        .unwrap_or_else(|e| panic!("{name} runs: {e}"));
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name} {args:?} failed: {text}");
    text
}

/// `llama-perplexity --kl-divergence`'s mean KLD of each cache type from
/// f16's logits over [`TEXT`].
fn tool_divergences(dir: &Path) -> Vec<(String, f64)> {
    let model = repo_root().join(MODEL_FILE).display().to_string();
    let text = dir.join("text.txt");
    std::fs::write(&text, TEXT.repeat(3)).unwrap();
    let (text, base) = (text.display().to_string(), dir.join("base.kld").display().to_string());
    let common = ["-m", &model, "-f", &text, "-c", "128", "--chunks", "4", "-t", "2", "-fa", "on"];
    let mut first: Vec<&str> = common.to_vec();
    first.extend(["-ctk", "f16", "--kl-divergence-base", &base]);
    tool("llama-perplexity", &first);
    CACHE_TYPES[1..]
        .iter()
        .map(|k| {
            let mut args: Vec<&str> = common.to_vec();
            args.extend(["-ctk", k, "--kl-divergence-base", &base, "--kl-divergence"]);
            let out = tool("llama-perplexity", &args);
            let (mean, _, _) = engine_bridge::probes::kld::parse_kld(&out).expect("KLD printed");
            (k.to_string(), mean)
        })
        .collect()
}

/// `llama-bench`'s decode (tokens a second, mean and standard deviation)
/// at 1 and 2 threads, f16 cache, after a 16-token prompt as the study's.
fn bench_decode() -> Vec<(u32, f64, f64)> {
    let model = repo_root().join(MODEL_FILE).display().to_string();
    let out = tool(
        "llama-bench",
        &[
            "-m", &model, "-t", "1,2", "-fa", "1", "-ctk", "f16", "-p", "0", "-n", "64", "-r", "5",
            "-o", "json",
        ],
    );
    let start = out.find('[').expect("llama-bench's JSON");
    let rows: Vec<Value> = serde_json::from_str(&out[start..out.rfind(']').unwrap() + 1]).unwrap();
    rows.iter()
        .map(|r| {
            let n = |k: &str| r[k].as_f64().unwrap_or_else(|| panic!("{k} in {r}"));
            (n("n_threads") as u32, n("avg_ts"), n("stddev_ts"))
        })
        .collect()
}

#[tokio::test]
#[ignore = "needs the machine to itself: scripts/test.sh runs it after the rest"]
async fn a_real_study_agrees_with_llama_perplexity_and_llama_bench() {
    let _engine = common::require_demo_engine();
    assert!(repo_root().join(MODEL_FILE).is_file(), "run scripts/setup.sh: the real model");
    let server = TestServer::start().await;
    let created = http().post(server.url("/api/studies")).json(&study()).send().await.unwrap();
    assert_eq!(created.status(), 201, "{}", created.text().await.unwrap());
    let row: StudyRow = created.json().await.unwrap();
    let done: StudyRow = eventually(Duration::from_secs(900), "the study's end", || async {
        let row: StudyRow = get_json(&server, &format!("/api/studies/{}", row.id)).await;
        row.state.is_final().then_some(row)
    })
    .await;
    assert_eq!(done.state, StudyState::Done, "{done:?}");
    let trials: Vec<TrialView> =
        get_json(&server, &format!("/api/studies/{}/trials", row.id)).await;
    assert_eq!(trials.len(), 6, "{trials:?}");
    assert!(trials.iter().all(|t| t.state == TrialState::Done), "{trials:?}");

    // The real model at an f16 cache passes a good part of the suite, asked
    // through its chat template.
    let base = trials.iter().find(|t| t.role.map(|r| r.as_str()) == Some("baseline")).unwrap();
    assert!(base.metrics.get(Metric::QualityScore).unwrap() >= 0.4, "{base:?}");
    let measured: Value = get_json(&server, &format!("/api/trials/{}/measurement", base.id)).await;
    assert_eq!(measured["quality"]["style"], "chat", "{}", measured["quality"]);
    // The reference diverges from itself by nothing, never below it.
    assert_eq!(base.metrics.get(Metric::KldMean), Some(0.0), "{base:?}");

    // The findings' order of the K cache types by divergence …
    let found: Value = get_json(&server, &format!("/api/studies/{}/findings", row.id)).await;
    let markdown = found["markdown"].as_str().unwrap().to_string();
    let effect = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["kind"] == "effect" && f["setting"] == "cache_type_k" && f["metric"] == "kld_mean"
        })
        .unwrap_or_else(|| panic!("an effect of the K cache on divergence: {markdown}"));
    let median = |value: &str| {
        let levels = effect["levels"].as_array().unwrap();
        let level = levels.iter().find(|l| l["value"] == value).unwrap();
        level["median"].as_f64().unwrap()
    };
    let study_order = sorted(CACHE_TYPES.iter().map(|k| (k.to_string(), median(k))).collect());
    // … is llama-perplexity's own, over another text.
    let dir = tempfile::tempdir().unwrap();
    let mut divergences = tool_divergences(dir.path());
    divergences.push(("f16".into(), 0.0));
    let tool_order = sorted(divergences.clone());
    assert_eq!(study_order, tool_order, "study: {markdown}\nllama-perplexity: {divergences:?}");

    // llama-bench's decode agrees with the study's at each thread count:
    // within the spread of both (the study's 10th to 90th percentiles, the
    // bench's mean ± 2 sd) widened by a quarter for a machine whose load
    // moves between the two. A served engine also runs its HTTP thread,
    // which llama-bench does not: with a thread on every core it shares
    // them, so there the study may only be slower than the bench, never
    // faster.
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as u32;
    for (threads, mean, sd) in bench_decode() {
        let trial = trials
            .iter()
            .find(|t| {
                t.settings["threads"] == threads.to_string() && t.settings["cache_type_k"] == "f16"
            })
            .unwrap();
        let m: Value = get_json(&server, &format!("/api/trials/{}/measurement", trial.id)).await;
        let stats = &m["speed"]["decode_tps"];
        let at = |k: &str| stats[k].as_f64().unwrap();
        let (median, p10, p90) = (at("median"), at("p10"), at("p90"));
        let (lo, hi) = (p10.min(mean - 2.0 * sd) * 0.75, p90.max(mean + 2.0 * sd) * 1.25);
        let seen = format!(
            "threads {threads}: study decode {median:.1} tok/s [p10 {p10:.1}, p90 {p90:.1}], \
             llama-bench {mean:.1} ± {sd:.1}"
        );
        eprintln!("{seen}");
        assert!(median <= hi && mean <= hi, "{seen}");
        if threads < cores {
            assert!(median >= lo && mean >= lo, "{seen}");
        }
    }
    // Each trial keeps its verdict on every question, and the findings
    // compare the trials question by question.
    for t in &trials {
        let verdicts = &t.support.verdicts["quality_score"];
        let passed = verdicts.chars().filter(|c| *c == '1').count() as f64;
        assert_eq!(verdicts.len(), 8, "{t:?}");
        assert_eq!(Some(passed / 8.0), t.metrics.get(Metric::QualityScore), "{t:?}");
    }
    let paired = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .any(|f| f["kind"] == "noise" && f["metric"] == "quality_score" && f["paired"] == true);
    assert!(paired, "quality compared question by question: {markdown}");
    // Memory is told against the planner's prediction (weights and K/V
    // cache), which the engine's peak RSS must exceed by its buffers and
    // runtime, and not by several times: a planner that miscounted the
    // bytes of a weight or a cache element would be off by that much.
    let planned = found["findings"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["kind"] == "planned" && f["metric"] == "peak_rss_bytes")
        .unwrap_or_else(|| panic!("peak RSS against the plan: {markdown}"));
    let ratio = planned["base"].as_f64().unwrap() / planned["planned"].as_f64().unwrap();
    assert!((0.8..4.0).contains(&ratio), "measured ÷ planned {ratio}: {markdown}");
    eprintln!("{markdown}");
    eprintln!("study divergences {study_order:?}, llama-perplexity {divergences:?}");
    server.stop().await;
}

/// The names in increasing order of their values.
fn sorted(mut pairs: Vec<(String, f64)>) -> Vec<String> {
    pairs.sort_by(|a, b| a.1.total_cmp(&b.1));
    pairs.into_iter().map(|(k, _)| k).collect()
}
