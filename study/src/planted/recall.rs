//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it. The first whose quality is counted over a suite of eight
//! questions.
//!
//! `recall`: a 7B model trained on 32,768 tokens, on a 16 GiB GPU, its
//! quality a context-recall suite of eight questions asked at the
//! context the server is given. Each question passes or fails the same
//! way every time a configuration runs, and most questions are as hard
//! for every configuration: the score moves in eighths, and a setting
//! that costs less than the gap between two questions' difficulties
//! shows nothing. Past the 32,768 tokens it was trained on the model
//! recalls less and less (a cliff in quality along the context); a
//! q4_0 K cache costs recall that grows with the context, a q4_0 V cache
//! a little, and a quantized V cache needs flash attention (refused
//! otherwise). The GPU holds its layers' weights and their share of the
//! K/V cache and a compute buffer that grows with the context unless
//! flash attention is on; past 15 GiB it runs out of memory, a cliff
//! that moves with the layers, the context, both cache types and flash
//! attention. The layers left on the CPU wait on its memory, where the
//! thread count matters, up to 8 of them and less past (an effect
//! confined to a region: with every layer on the GPU, threads do
//! nothing). Reading a longer cache slows every token. Decode ↑,
//! recall ↑, context ↑.

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

/// The model's layers, every one of them on the GPU at 33.
const LAYERS: f64 = 33.0;
/// The weights, in bytes.
const WEIGHTS: f64 = 4.1e9;
/// The K/V cache a token takes at f16 (32 layers, 8 K/V heads of 128).
const CACHE_TOKEN: f64 = 131_072.0;
/// The GPU's memory past which a load runs out of it.
const GPU: f64 = 15.0 * GIB;
/// Memory bandwidth of the GPU and of the CPU with 8 threads, bytes a second.
const GPU_BANDWIDTH: f64 = 700e9;
const CPU_BANDWIDTH: f64 = 40e9;
/// The context the model was trained on.
const TRAINED: f64 = 32_768.0;

/// The share of the suite a configuration passes, in truth.
fn recall(ctx: f64, k: &str, v: &str) -> f64 {
    let past = (ctx / TRAINED).log2().max(0.0);
    let base = 0.95 * 0.45f64.powf(past * 1.2);
    let k_cost = match k {
        "q4_0" => 0.08 * (ctx / 8192.0).sqrt(),
        "q8_0" => 0.01,
        _ => 0.0,
    };
    let v_cost = if v == "q4_0" { 0.04 } else { 0.0 };
    (base - k_cost - v_cost).clamp(0.0, 1.0)
}

fn recall_world_truth(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let fa = get(s, "flash_attn") == "on";
    if v != "f16" && !fa {
        return Truth::Fails("rejected");
    }
    let ctx = number(s, "ctx_size");
    let on_gpu = number(s, "n_gpu_layers").clamp(0.0, LAYERS) / LAYERS;
    let cache = ctx * CACHE_TOKEN * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let buffer = if fa { 0.3 * GIB } else { ctx / 8192.0 * 0.5 * GIB };
    if (WEIGHTS + cache) * on_gpu + buffer > GPU {
        return Truth::Fails("out_of_memory");
    }
    let threads = number(s, "threads");
    let cpu = CPU_BANDWIDTH * (threads / 8.0).min(1.0) * (1.0 - 0.03 * (threads - 8.0).max(0.0));
    // A token reads the weights and half the cache (the probe's
    // conversation), each layer where it lives.
    let read = WEIGHTS + cache / 2.0 * if fa { 0.7 } else { 1.0 };
    let token = read * on_gpu / GPU_BANDWIDTH + read * (1.0 - on_gpu) / cpu + 0.004;
    Truth::Runs(
        [(Metric::DecodeTps, 1.0 / token), (Metric::QualityScore, recall(ctx, k, v))].into(),
    )
}

const RECALL: &str = r#"
name = "recall"
profile = "p"
model = "m"
[space]
n_gpu_layers = { min = 0, max = 33, step = 1 }
ctx_size = [8192, 16384, 32768, 65536, 131072]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
flash_attn = ["off", "on"]
threads = { min = 1, max = 16, step = 1 }
[baseline]
n_gpu_layers = 33
ctx_size = 8192
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = "off"
threads = 8
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "quality_score"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
"#;

/// The world, with `noise`, eight questions most of which are as hard
/// for every configuration, and a heavy tail on top.
pub(super) fn recall_world(noise: Noise) -> World {
    let noise = Noise { items: Some(8), alike: 0.9, tail: 0.05, ..noise };
    World::for_search("recall", RECALL, recall_world_truth, noise)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against llama-server's settings; less than half
    /// the grid fails; the front has more than three configurations;
    /// recall falls past the trained context and with a q4_0 K cache,
    /// more at a longer context; a quantized V cache needs flash
    /// attention; threads matter only with layers on the CPU; the longest
    /// context fits every layer only with quantized caches.
    #[test]
    fn recall_has_what_it_says() {
        let w = recall_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let runs = |changes: &[(&str, &str)]| at(changes).expect("runs");
        // Half the layers on the GPU: every context fits.
        let ctx =
            |c: &str| runs(&[("ctx_size", c), ("flash_attn", "on"), ("n_gpu_layers", "16")])[1];
        assert!(ctx("32768") > 0.9 && ctx("65536") < 0.5 && ctx("131072") < ctx("65536"));
        let k4 = |c: &str| {
            ctx(c)
                - runs(&[
                    ("ctx_size", c),
                    ("flash_attn", "on"),
                    ("n_gpu_layers", "16"),
                    ("cache_type_k", "q4_0"),
                ])[1]
        };
        assert!(k4("32768") > 1.5 * k4("8192") && k4("8192") > 0.05);
        assert!(at(&[("cache_type_v", "q8_0")]).is_none());
        let decode = |changes: &[(&str, &str)]| runs(changes)[0];
        assert_eq!(decode(&[("threads", "2")]), decode(&[]));
        let cpu = |t: &str| decode(&[("n_gpu_layers", "10"), ("threads", t)]);
        assert!(cpu("8") > 1.5 * cpu("2") && cpu("8") > cpu("16"));
        let longest = [("ctx_size", "131072"), ("flash_attn", "on")];
        assert!(at(&longest).is_none());
        assert!(
            at(&[longest[0], longest[1], ("cache_type_k", "q4_0"), ("cache_type_v", "q4_0")])
                .is_some()
        );
    }
}
