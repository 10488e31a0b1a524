//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it.
//!
//! `split`: a dense model of 48 layers (0.4 GiB each) split between two
//! GPUs of different sizes and speeds, a 12 GiB one that reads 450 GB/s
//! and a 16 GiB one that reads 900. `tensor_split` gives the first GPU's
//! share of the offloaded layers, as a list of words whose order the
//! study does not declare (`1,3` … `3,1`). With `split_mode = "layer"`
//! the GPUs take turns, so the faster one should hold as much as fits;
//! with `"row"` both read each layer at once and wait for the slower, so
//! the share that matches their speeds (`1,2`) is best, less a step of
//! synchronization a layer (an interaction between a list and a word).
//! The layers left on the CPU wait on its memory bandwidth, which the
//! thread count sets only there (an effect confined to a region), up to 8
//! threads, past which they contend. The K/V cache goes with the layers
//! and grows with the context; q8_0 halves a cache and slows decoding a
//! little. Either GPU past its memory runs out (a cliff that moves with
//! the share, the layers, the context, both cache types and the split
//! mode): the longest contexts need quantized caches, layers left on the
//! CPU, or a share that fills both GPUs. Decode ↑, context ↑.

use std::sync::LazyLock;

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

const LAYERS: f64 = 48.0;
const LAYER: f64 = 0.4 * GIB;
/// Bytes each GPU holds and reads a millisecond.
const MEMORY: [f64; 2] = [12.0 * GIB, 16.0 * GIB];
const READS: [f64; 2] = [0.45 * GIB, 0.9 * GIB];

/// The first GPU's share of `a,b`.
fn share(split: &str) -> f64 {
    let parts: Vec<f64> = split.split(',').filter_map(|p| p.parse().ok()).collect();
    match parts[..] {
        [a, b] if a + b > 0.0 => a / (a + b),
        _ => 0.5,
    }
}

fn split(s: &Settings) -> Truth {
    let first = share(get(s, "tensor_split"));
    let row = get(s, "split_mode") == "row";
    let on_gpu = number(s, "n_gpu_layers").min(LAYERS);
    let threads = number(s, "threads");
    let ctx = number(s, "ctx_size");
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    // Half a GiB each for K and V over all layers at 8,192 tokens.
    let kv = ctx / 8192.0 * 0.5 * GIB * (cache_bytes(k) + cache_bytes(v));
    let offloaded = on_gpu * LAYER + kv * on_gpu / LAYERS;
    let buffer = if row { 0.8 * GIB } else { 0.5 * GIB };
    let held = [first * offloaded + buffer, (1.0 - first) * offloaded + buffer];
    if held.iter().zip(MEMORY).any(|(h, m)| *h > m) {
        return Truth::Fails("out_of_memory");
    }
    // Each token reads the weights and a quarter of the cache.
    let read = on_gpu * LAYER + 0.25 * kv * on_gpu / LAYERS;
    let (a, b) = (first * read / READS[0], (1.0 - first) * read / READS[1]);
    let gpu_ms = if row { a.max(b) + 0.02 * on_gpu } else { a + b };
    let quantized = [k, v].iter().filter(|c| **c == "q8_0").count() as f64;
    let gpu_ms = gpu_ms * (1.0 + 0.03 * quantized);
    let cpu_read = (LAYERS - on_gpu) * LAYER + 0.25 * kv * (1.0 - on_gpu / LAYERS);
    let bandwidth = 0.04 * GIB * threads.min(8.0) / 8.0 * (1.0 - 0.03 * (threads - 8.0).max(0.0));
    let cpu_ms = cpu_read / bandwidth;
    Truth::Runs([(Metric::DecodeTps, 1000.0 / (1.0 + gpu_ms + cpu_ms))].into())
}

/// The model file: 48 blocks of [`LAYER`] bytes and 4 K/V heads of 171 a
/// block (an f16 cache of 1 GiB at 8,192 tokens), with a small output
/// layer. The planner deals its bytes among the GPUs by `tensor_split`
/// alone, as llama.cpp does; the row split's larger buffers are the
/// world's, not the plan's.
static MODEL: LazyLock<super::model_file::File> =
    LazyLock::new(|| super::model_file::dense(48, LAYER, 0.02 * GIB, (4, 171), 131072));

fn plan(s: &Settings) -> Option<f64> {
    MODEL.gpu_bytes(s)
}

/// The fuller GPU's share of its memory, as the server plans it with each
/// GPU's size from `nvidia-smi`.
fn fill(s: &Settings) -> Option<f64> {
    MODEL.fullest(s, &MEMORY.map(|m| m as u64))
}

const SPLIT: &str = r#"
name = "split"
profile = "p"
model = "m"
[space]
tensor_split = ["1,3", "1,2", "2,3", "1,1", "3,2", "2,1", "3,1"]
split_mode = ["layer", "row"]
n_gpu_layers = { min = 0, max = 48, step = 4 }
threads = { min = 1, max = 16, step = 1 }
ctx_size = [8192, 16384, 32768, 65536, 131072]
cache_type_k = ["f16", "q8_0"]
cache_type_v = ["f16", "q8_0"]
[baseline]
tensor_split = "1,1"
split_mode = "layer"
n_gpu_layers = 24
threads = 4
ctx_size = 8192
cache_type_k = "f16"
cache_type_v = "f16"
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
"#;

/// The world, with `noise`.
pub(super) fn split_world(noise: Noise) -> World {
    World::for_search("split", SPLIT, split, noise).with_gpu_plan(plan).with_gpu_fill(fill)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks; less than half the space fails; the front has
    /// more than three configurations; with every layer on the GPUs the
    /// layer split is fastest with the most on the faster GPU that fits,
    /// the row split at the share of the GPUs' speeds, and faster than
    /// the layer split there; threads matter only with layers on the CPU;
    /// at the longest context 44 layers run on the GPUs only with
    /// quantized caches (48 never do).
    #[test]
    fn split_has_what_it_says() {
        let w = split_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let decode = |changes: &[(&str, &str)]| at(changes).map(|v| v[0]);
        let all = |split: &str, mode: &str| {
            decode(&[("n_gpu_layers", "48"), ("tensor_split", split), ("split_mode", mode)])
        };
        assert!(all("1,3", "layer") > all("1,2", "layer"));
        assert!(all("1,2", "layer") > all("1,1", "layer"));
        // At 32,768 tokens the faster GPU no longer holds three quarters.
        let at_32k = |split: &str| {
            decode(&[("n_gpu_layers", "48"), ("tensor_split", split), ("ctx_size", "32768")])
        };
        assert_eq!(at_32k("1,3"), None);
        assert!(at_32k("1,2").is_some());
        assert!(all("1,2", "row") > all("2,3", "row"));
        assert!(all("1,2", "row") > all("1,1", "row"));
        assert!(all("1,2", "row").unwrap() > 1.5 * all("1,2", "layer").unwrap());
        let threads = |layers: &str, t: &str| {
            decode(&[("n_gpu_layers", layers), ("threads", t), ("tensor_split", "1,2")]).unwrap()
        };
        assert_eq!(threads("48", "2"), threads("48", "12"));
        assert!(threads("24", "8") > 2.0 * threads("24", "2"));
        assert!(threads("24", "16") < threads("24", "8"));
        let longest = |cache: &str| {
            decode(&[
                ("n_gpu_layers", "44"),
                ("ctx_size", "131072"),
                ("tensor_split", "2,3"),
                ("cache_type_k", cache),
                ("cache_type_v", cache),
            ])
        };
        assert_eq!(longest("f16"), None);
        assert!(longest("q8_0").is_some());
        for split in ["1,3", "1,2", "2,3", "1,1", "3,2", "2,1", "3,1"] {
            let full = [("n_gpu_layers", "48"), ("ctx_size", "131072"), ("tensor_split", split)];
            let q8 = [("cache_type_k", "q8_0"), ("cache_type_v", "q8_0")];
            assert_eq!(decode(&[&full[..], &q8[..]].concat()), None, "{split}");
        }
    }

    /// The plan tells which GPU runs out where the bytes together are the
    /// same: all 48 layers dealt 3 to 1 fill the 12 GiB GPU past its
    /// memory, 1 to 3 the 16 GiB one nearly, 1 to 1 neither.
    #[test]
    fn the_planner_s_fill_is_the_fuller_gpu_s() {
        let s = |split: &str| -> Settings {
            [("n_gpu_layers", "48"), ("tensor_split", split), ("ctx_size", "8192")]
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .into()
        };
        assert_eq!(plan(&s("3,1")), plan(&s("1,1")));
        let filled = |split: &str| fill(&s(split)).unwrap();
        assert!(filled("3,1") > 1.0, "{}", filled("3,1"));
        assert!((0.9..1.0).contains(&filled("1,3")), "{}", filled("1,3"));
        assert!(filled("1,1") < filled("1,3"), "{}", filled("1,1"));
    }
}
