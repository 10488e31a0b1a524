//! The planted worlds: llama-server studies whose true behaviour is a
//! formula, so that every claim about them can be checked. Each states
//! what a reader should learn from it ([`Fact`]s).

use std::collections::BTreeMap;

use engine_bridge::{Catalog, Settings};

use super::{Fact, Noise, Truth, World};
use crate::study::Metric;

pub(super) use super::formula::{GIB, cache_bytes, divergence, get, number};

/// Eight llama-server settings with the seeds' behaviour: decode peaks at
/// 8 threads; mixed K/V cache types fall off the fast kernel (0.4×);
/// flash attention helps both speeds; the batch size moves prefill only;
/// quantized caches save memory in proportion to the context; q8_0 is
/// lossless and q4_0 K costs quality; mlock does nothing; flash attention
/// off with an f16 K cache runs out of memory at 32k context.
fn llama8(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let fa = get(s, "flash_attn") == "on";
    let ctx = number(s, "ctx_size");
    if !fa && k == "f16" && ctx >= 32768.0 {
        return Truth::Fails("out_of_memory");
    }
    let threads = number(s, "threads");
    let batch = number(s, "batch_size");
    let thread_curve = (-((threads.log2() - 3.0).powi(2)) / 1.5).exp();
    let mixed = if k != v { 0.4 } else { 1.0 };
    let decode = 40.0 * (0.3 + 0.7 * thread_curve) * mixed * if fa { 1.1 } else { 1.0 };
    let prefill = 300.0
        * (batch.min(1024.0) / 1024.0).powf(0.5)
        * (threads / 16.0).powf(0.3)
        * if fa { 1.25 } else { 1.0 };
    let kv = ctx / 4096.0 * 0.25 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let rss = 4.0 * GIB + kv + batch * 2e5;
    let quality = 0.70 - if k == "q4_0" { 0.10 } else { 0.0 };
    Truth::Runs(
        [
            (Metric::DecodeTps, decode),
            (Metric::PrefillTps, prefill),
            (Metric::PeakRssBytes, rss),
            (Metric::QualityScore, quality),
        ]
        .into(),
    )
}

/// What a planner knows of llama8's memory: the weights and the K/V
/// cache's arithmetic, with a runtime margin it guesses a little high; not
/// the batch's buffers. The `noise` worlds take it too, where memory does
/// not follow it: the findings must measure that, not repeat the plan.
fn llama8_plan(s: &Settings) -> f64 {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let kv = number(s, "ctx_size") / 4096.0 * 0.25 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    4.2 * GIB + kv
}

const LLAMA8: &str = r#"
name = "llama8"
profile = "p"
model = "m"
[space]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
flash_attn = ["off", "on"]
threads = [2, 4, 8, 16]
batch_size = [128, 512, 2048]
mlock = [false, true]
ctx_size = [8192, 32768]
[baseline]
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = "on"
threads = 4
batch_size = 512
mlock = false
ctx_size = 8192
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#;

fn llama8_facts() -> Vec<Fact> {
    use Fact::*;
    let s = String::from;
    vec![
        Peak { setting: s("threads"), metric: Metric::DecodeTps, best: vec![s("8")] },
        Interaction { a: s("cache_type_k"), b: s("cache_type_v"), metric: Metric::DecodeTps },
        Effect { setting: s("flash_attn"), metric: Metric::DecodeTps },
        Effect { setting: s("batch_size"), metric: Metric::PrefillTps },
        Effect { setting: s("cache_type_k"), metric: Metric::PeakRssBytes },
        Lossless { setting: s("cache_type_k"), value: s("q8_0") },
        Lossy { setting: s("cache_type_k"), value: s("q4_0"), metric: Metric::QualityScore },
        FailureRule { cause: s("out_of_memory") },
        NoEffect { setting: s("mlock"), metric: Metric::DecodeTps },
    ]
}

/// llama8 on a real machine: a request in ten slowed up to 4×, every
/// speed 0.4 % lower each trial (the load rising under the study), and
/// the quality score counted over eight questions: what llama8 teaches of
/// speed and memory still shows, nothing of quality can.
fn machine_facts() -> Vec<Fact> {
    llama8_facts()
        .into_iter()
        .filter(|f| !matches!(f, Fact::Lossless { .. } | Fact::Lossy { .. }))
        .collect()
}

/// The same study where nothing matters: every claim of an effect, an
/// interaction, a free win or an anomaly is wrong.
fn noise(_: &Settings) -> Truth {
    Truth::Runs(
        [
            (Metric::DecodeTps, 40.0),
            (Metric::PrefillTps, 300.0),
            (Metric::PeakRssBytes, 5.0 * GIB),
            (Metric::QualityScore, 0.7),
        ]
        .into(),
    )
}

fn noise_facts() -> Vec<Fact> {
    let s = String::from;
    vec![
        Fact::NoEffect { setting: s("mlock"), metric: Metric::DecodeTps },
        Fact::NoEffect { setting: s("batch_size"), metric: Metric::PeakRssBytes },
    ]
}

/// ranges' memory as a planner sees it: the weights alone; what the
/// micro-batch adds is the findings' to measure.
fn ranges_plan(_: &Settings) -> f64 {
    2.8 * GIB
}

/// Numbers sampled along ranges (what random and model-based searches
/// see): decode peaks at 12 threads and falls with the batch size beyond
/// 512; the micro-batch moves prefill; a bystander (`top_k`) does nothing.
fn ranges(s: &Settings) -> Truth {
    let threads = number(s, "threads");
    let batch = number(s, "batch_size");
    let ubatch = number(s, "ubatch_size");
    let decode = 50.0
        * (1.0 - 0.5 * ((threads - 12.0) / 11.0).powi(2))
        * (1.0 - 0.1 * (batch / 512.0).log2().max(0.0));
    let prefill = 400.0 * (ubatch / 512.0).powf(0.35);
    let rss = 3.0 * GIB + ubatch * 1e6;
    let mut m: BTreeMap<Metric, f64> =
        [(Metric::DecodeTps, decode), (Metric::PrefillTps, prefill), (Metric::PeakRssBytes, rss)]
            .into();
    m.insert(Metric::QualityScore, 0.8);
    Truth::Runs(m)
}

const RANGES: &str = r#"
name = "ranges"
profile = "p"
model = "m"
[space]
threads = { min = 1, max = 24, step = 1 }
batch_size = { min = 64, max = 4096, log = true }
ubatch_size = [64, 128, 256, 512, 1024]
top_k = [1, 20, 40, 80]
[baseline]
threads = 4
batch_size = 512
ubatch_size = 512
top_k = 40
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "prefill_tps"
"#;

fn ranges_facts() -> Vec<Fact> {
    use Fact::*;
    let s = String::from;
    vec![
        Peak {
            setting: s("threads"),
            metric: Metric::DecodeTps,
            best: (9..=15).map(|t| t.to_string()).collect(),
        },
        Effect { setting: s("batch_size"), metric: Metric::DecodeTps },
        Effect { setting: s("ubatch_size"), metric: Metric::PrefillTps },
        Effect { setting: s("ubatch_size"), metric: Metric::PeakRssBytes },
        NoEffect { setting: s("top_k"), metric: Metric::DecodeTps },
    ]
}

/// A K/V cache study judged by KL divergence from its f16 baseline, as
/// llama.cpp's users judge quantization: q8_0 saves memory and stays
/// within the divergence margins (a free win), q4_0 saves more and moves
/// the next-token distribution (lossy); threads and flash attention move
/// decode and leave the distribution alone.
fn kvcache(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let threads = number(s, "threads");
    let kld = divergence(k, 0.002, 0.03) + divergence(v, 0.001, 0.01);
    let fa = if get(s, "flash_attn") == "on" { 1.1 } else { 1.0 };
    let decode = 30.0 * fa * (0.3 + 0.7 * (-((threads.log2() - 3.0).powi(2)) / 1.5).exp());
    let rss = 4.0 * GIB + 2.0 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    Truth::Runs(
        [
            (Metric::DecodeTps, decode),
            (Metric::PeakRssBytes, rss),
            (Metric::KldMean, kld),
            (Metric::KldP99, 8.0 * kld),
            (Metric::SameTopRate, 1.0 - 2.5 * kld),
        ]
        .into(),
    )
}

/// kvcache's memory as a planner sees it: all of it.
fn kvcache_plan(s: &Settings) -> f64 {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    4.0 * GIB + 2.0 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0
}

const KVCACHE: &str = r#"
name = "kvcache"
profile = "p"
model = "m"
[space]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
threads = [2, 4, 8, 16]
flash_attn = ["off", "on"]
[baseline]
cache_type_k = "f16"
cache_type_v = "f16"
threads = 4
flash_attn = "off"
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
[[objectives]]
metric = "kld_mean"
[probes.kld]
"#;

fn kvcache_facts() -> Vec<Fact> {
    use Fact::*;
    let s = String::from;
    vec![
        Effect { setting: s("cache_type_k"), metric: Metric::PeakRssBytes },
        Lossless { setting: s("cache_type_k"), value: s("q8_0") },
        Lossy { setting: s("cache_type_k"), value: s("q4_0"), metric: Metric::KldMean },
        Lossy { setting: s("cache_type_k"), value: s("q4_0"), metric: Metric::SameTopRate },
        Peak { setting: s("threads"), metric: Metric::DecodeTps, best: vec![s("8")] },
        Effect { setting: s("flash_attn"), metric: Metric::DecodeTps },
        NoEffect { setting: s("threads"), metric: Metric::KldMean },
        NoEffect { setting: s("flash_attn"), metric: Metric::KldMean },
    ]
}

/// kvcache's speed and memory with a quality suite of 200 questions in
/// place of divergence: a quantized K cache at 4 bits fails the hardest
/// of them, at 8 bits it answers exactly as at 16 (lossless, to be shown
/// question by question), and nothing else touches the answers.
fn suite(s: &Settings) -> Truth {
    let Truth::Runs(mut metrics) = kvcache(s) else { unreachable!("kvcache always runs") };
    let cost = |t: &str, q4: f64| if t == "q4_0" { q4 } else { 0.0 };
    let quality = 0.7 - cost(get(s, "cache_type_k"), 0.1) - cost(get(s, "cache_type_v"), 0.04);
    metrics.retain(|m, _| matches!(m, Metric::DecodeTps | Metric::PeakRssBytes));
    metrics.insert(Metric::QualityScore, quality);
    Truth::Runs(metrics)
}

fn suite_facts() -> Vec<Fact> {
    use Fact::*;
    let s = String::from;
    vec![
        Effect { setting: s("cache_type_k"), metric: Metric::PeakRssBytes },
        Lossless { setting: s("cache_type_k"), value: s("q8_0") },
        Lossy { setting: s("cache_type_k"), value: s("q4_0"), metric: Metric::QualityScore },
        Peak { setting: s("threads"), metric: Metric::DecodeTps, best: vec![s("8")] },
        NoEffect { setting: s("threads"), metric: Metric::QualityScore },
        NoEffect { setting: s("flash_attn"), metric: Metric::QualityScore },
    ]
}

/// Every world, by name.
pub fn all() -> Vec<World> {
    let noise_level =
        Noise { speed: 0.02, memory: 0.005, quality: 0.005, divergence: 2e-4, ..Noise::default() };
    vec![
        World {
            name: "llama8",
            study: LLAMA8.into(),
            truth: llama8,
            noise: noise_level,
            facts: llama8_facts(),
            silent: vec![],
            plan: Some(llama8_plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
        World {
            name: "noise",
            study: LLAMA8.replace("llama8", "noise"),
            truth: noise,
            noise: noise_level,
            facts: noise_facts(),
            silent: vec![],
            plan: Some(llama8_plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
        World {
            name: "ranges",
            study: RANGES.into(),
            truth: ranges,
            noise: noise_level,
            facts: ranges_facts(),
            silent: vec![],
            plan: Some(ranges_plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
        World {
            name: "kvcache",
            study: KVCACHE.into(),
            truth: kvcache,
            noise: noise_level,
            facts: kvcache_facts(),
            silent: vec![],
            plan: Some(kvcache_plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
        World {
            name: "suite",
            study: KVCACHE.replace("\"kvcache\"", "\"suite\"").replace(
                "metric = \"kld_mean\"\n[probes.kld]",
                "metric = \"quality_score\"\n[probes.quality]",
            ),
            truth: suite,
            noise: Noise { items: Some(200), alike: 0.98, ..noise_level },
            facts: suite_facts(),
            silent: vec![],
            plan: Some(kvcache_plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
        World {
            name: "machine",
            study: LLAMA8.replace("llama8", "machine"),
            truth: llama8,
            noise: Noise { speed: 0.03, tail: 0.1, drift: -0.004, items: Some(8), ..noise_level },
            facts: machine_facts(),
            silent: vec![Metric::QualityScore],
            plan: Some(llama8_plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
        World {
            name: "noisy",
            study: LLAMA8.replace("llama8", "noisy"),
            truth: noise,
            noise: Noise { speed: 0.3, memory: 0.3, tail: 0.1, items: Some(8), ..noise_level },
            facts: vec![],
            silent: vec![Metric::QualityScore],
            plan: Some(llama8_plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
        World {
            name: "region",
            study: super::region::STUDY.into(),
            truth: super::region::truth,
            noise: Noise { speed: 0.03, tail: 0.05, ..noise_level },
            facts: super::region::facts(),
            silent: vec![],
            plan: Some(super::region::plan),
            catalog: Catalog::llama_server,
            gpu_plan: None,
            gpu_fill: None,
        },
    ]
}
