//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it. The first that chooses a draft model for speculative
//! decoding, and the first where a number matters only beside one value
//! of a word.
//!
//! `speculative`: a 27B dense model (4-bit, 64 blocks and the output,
//! 17 GB) on a 24 GiB GPU, the layers left over on 8 cores. A draft
//! model proposes up to `draft_max` tokens a step and the big model
//! checks them in one batch: a step yields (1 − αᵏ⁺¹)/(1 − α) tokens,
//! α the chance that a drafted token is accepted (0.60, 0.70 and 0.80
//! for the three drafts of its family, larger ones slower to draft). A
//! draft of another family has another vocabulary, and llama-server
//! refuses it. Checking a batch costs the GPU's layers little more than
//! one token, but the CPU's layers a quarter more a drafted token: the
//! best `draft_max` is smaller with layers left on the CPU (two numbers
//! interacting), and `draft_max` does nothing without a draft (an effect
//! confined to a region). The draft's weights and cache, the main
//! cache (by context and K/V types) and the compute buffer (by
//! micro-batch) all share the GPU with the main layers: past 23.6 GiB
//! the load runs out of memory, so a longer context or a larger draft
//! pushes layers onto the CPU (four layers there halve decode, eight
//! leave a third of it). The prompt
//! runs a micro-batch at a time, the CPU's layers copied to the GPU for
//! each (larger micro-batches prompt faster, and fill more memory); the
//! draft reads the prompt too. The threads matter only for the CPU's
//! layers. A heavy tail, and a machine slowing a little. Decode ↑, time
//! to the first token ↓, context ↑.

use std::sync::LazyLock;

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

/// The main model's layers (64 blocks and the output) and weights.
const LAYERS: f64 = 65.0;
const BLOCKS: f64 = 64.0;
const WEIGHTS: f64 = 17.0e9;
/// The main model's f16 K/V cache a token of context takes.
const CACHE_TOKEN: f64 = 262_144.0;
/// The conversation a decoded token attends to, and the time-to-first
/// token probe's prompt, in tokens.
const DEPTH: f64 = 4096.0;
const PROMPT: f64 = 2048.0;
/// What the GPU may hold, and read rates (bytes a second) of the GPU,
/// of the CPU with every core reading, and of the bus to the GPU.
const GPU_MEMORY: f64 = 23.6 * GIB;
const GPU_READ: f64 = 900e9;
const CPU_READ: f64 = 55e9;
const BUS: f64 = 25e9;

/// A draft model: its weights and cache a token (bytes), the chance a
/// drafted token is accepted, and its prompt time a token (ms).
struct Draft {
    weights: f64,
    cache_token: f64,
    accepted: f64,
    prompt_ms: f64,
}

fn draft(name: &str) -> Option<Draft> {
    let (weights, cache_token, accepted, prompt_ms) = match name {
        "qwen-0.5b" => (0.5e9, 12_288.0, 0.60, 0.02),
        "qwen-1.5b" => (1.1e9, 28_672.0, 0.70, 0.05),
        "qwen-3b" => (2.0e9, 36_864.0, 0.80, 0.09),
        _ => return None,
    };
    Some(Draft { weights, cache_token, accepted, prompt_ms })
}

fn speculative(s: &Settings) -> Truth {
    let drafting = get(s, "draft_model");
    if drafting == "llama-1b" {
        return Truth::Fails("rejected");
    }
    let draft = draft(drafting);
    let most = number(s, "draft_max");
    let layers = number(s, "n_gpu_layers").clamp(0.0, LAYERS);
    let share = layers.min(BLOCKS) / BLOCKS;
    let ctx = number(s, "ctx_size");
    let threads = number(s, "threads");
    let ubatch = number(s, "ubatch_size");
    let k_type = get(s, "cache_type_k");
    let types = (cache_bytes(k_type) + cache_bytes(get(s, "cache_type_v"))) / 2.0;

    // The GPU's memory.
    let on_gpu = WEIGHTS * layers / LAYERS;
    let buffer = 0.6 * GIB * (ubatch / 512.0).powf(0.8);
    let cache = ctx * CACHE_TOKEN * types * share;
    let draft_bytes = draft.as_ref().map_or(0.0, |d| d.weights + d.cache_token * ctx + 0.15 * GIB);
    if buffer + on_gpu + cache + draft_bytes > GPU_MEMORY {
        return Truth::Fails("out_of_memory");
    }

    // One step: the GPU's and the CPU's layers, each reading its weights
    // and its share of the cache to the conversation's depth.
    let attended = DEPTH * CACHE_TOKEN * types;
    let gpu_s = (on_gpu + attended * share) / GPU_READ;
    let cpu_read =
        CPU_READ * (1.0 - (-threads / 3.0).exp()) * (1.0 - 0.04 * (threads - 8.0).max(0.0));
    let cpu_s = (WEIGHTS - on_gpu + attended * (1.0 - share)) / cpu_read;
    let overhead = 0.0003 + if layers < LAYERS { 0.0002 } else { 0.00002 * threads };
    let decode = match &draft {
        None => 1.0 / (gpu_s + cpu_s + overhead),
        Some(d) => {
            let tokens = (1.0 - d.accepted.powf(most + 1.0)) / (1.0 - d.accepted);
            let drafting = (d.weights + d.cache_token * DEPTH) / GPU_READ + 0.0009;
            let check = gpu_s * (1.0 + 0.015 * most) + cpu_s * (1.0 + 0.25 * most);
            tokens / (check + overhead + most * drafting)
        }
    };

    // The prompt: the GPU's layers a micro-batch at a time, the CPU's
    // copied over the bus for each micro-batch, and the draft's.
    let efficiency = ubatch / (ubatch + 160.0);
    let quantized_k = if k_type == "f16" { 1.0 } else { 1.1 };
    let gpu_ms = PROMPT * layers * 0.3 / LAYERS * quantized_k / efficiency;
    let bus_ms = (WEIGHTS - on_gpu) / BUS * 1000.0 * (PROMPT / ubatch).ceil();
    let draft_ms = draft.as_ref().map_or(0.0, |d| PROMPT * d.prompt_ms);
    let ttft = 60.0 + gpu_ms + bus_ms + draft_ms;
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::TtftMs, ttft)].into())
}

const SPECULATIVE: &str = r#"
name = "speculative"
profile = "p"
model = "m"
[space]
draft_model = ["none", "qwen-0.5b", "qwen-1.5b", "qwen-3b", "llama-1b"]
draft_max = { min = 1, max = 10, step = 1 }
n_gpu_layers = { min = 41, max = 65, step = 4 }
ctx_size = [8192, 16384, 32768, 65536, 131072]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0"]
threads = [1, 2, 4, 8, 12, 16]
ubatch_size = [256, 512, 1024, 2048]
[baseline]
draft_model = "none"
draft_max = 8
n_gpu_layers = 65
ctx_size = 16384
cache_type_k = "f16"
cache_type_v = "f16"
threads = 8
ubatch_size = 512
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "ttft_ms"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
"#;

/// The main model's file, as llama-server's planner reads it: 64 blocks,
/// an output layer and a token embedding, 8 K/V heads of 128 a block.
static MODEL: LazyLock<super::model_file::File> = LazyLock::new(|| {
    super::model_file::dense(64, (WEIGHTS - 0.8e9) / BLOCKS, 0.4e9, (8, 128), 131_072)
});

/// The planner's GPU bytes: the main model's, as a study of a GGUF model
/// has them; it knows nothing of the draft.
fn plan(s: &Settings) -> Option<f64> {
    MODEL.gpu_bytes(s)
}

/// The world, with `noise`, a heavy tail and a machine slowing a little.
pub(super) fn speculative_world(noise: Noise) -> World {
    World::for_search(
        "speculative",
        SPECULATIVE,
        speculative,
        Noise { tail: 0.06, drift: -0.001, ..noise },
    )
    .with_gpu_plan(plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against llama-server's settings; less than half
    /// the grid fails; the front has more than three configurations; a
    /// draft of another family is refused; drafting speeds decode with
    /// every layer on the GPU, best at more drafted tokens there than
    /// with layers on the CPU; a draft and a long f16 cache do not fit
    /// together where quantized caches do; larger drafts prompt slower
    /// and larger micro-batches faster; threads matter only for the
    /// CPU's layers.
    #[test]
    fn speculative_has_what_it_says() {
        let w = speculative_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let runs = |changes: &[(&str, &str)]| at(changes).expect("runs");
        assert!(at(&[("draft_model", "llama-1b")]).is_none());
        let decode = |draft: &str, most: u32, layers: &str| {
            let most = most.to_string();
            runs(&[
                ("draft_model", draft),
                ("draft_max", &most),
                ("n_gpu_layers", layers),
                ("ctx_size", "8192"),
            ])[0]
        };
        assert!(decode("qwen-1.5b", 4, "65") > 1.6 * decode("none", 4, "65"));
        assert_eq!(decode("none", 2, "65"), decode("none", 9, "65"));
        let best = |layers: &str| {
            (1..=10).max_by(|a, b| {
                decode("qwen-0.5b", *a, layers).total_cmp(&decode("qwen-0.5b", *b, layers))
            })
        };
        assert!(best("65") > best("45"), "{:?}", [best("65"), best("45")]);
        let long = [("draft_model", "qwen-1.5b"), ("ctx_size", "32768")];
        assert!(at(&long).is_none());
        assert!(
            at(&[long[0], long[1], ("cache_type_k", "q4_0"), ("cache_type_v", "q8_0")]).is_some()
        );
        let ttft = |changes: &[(&str, &str)]| runs(changes)[1];
        assert!(ttft(&[("draft_model", "qwen-3b")]) > ttft(&[("draft_model", "qwen-0.5b")]));
        assert!(ttft(&[("ubatch_size", "2048")]) < ttft(&[]));
        let threads = |layers: &str, t: &str| runs(&[("n_gpu_layers", layers), ("threads", t)])[0];
        assert!((threads("65", "2") / threads("65", "8") - 1.0).abs() < 0.05);
        assert!(threads("45", "8") > 1.5 * threads("45", "2"));
    }
}
