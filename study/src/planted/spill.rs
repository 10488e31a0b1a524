//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it. The first whose space holds environment variables, and
//! the first with three objectives that trade through the GPU's memory.
//!
//! `spill`: a dense 14B model in Q4_K_M (48 layers of 0.165 GiB and an
//! output layer of 0.45 GiB) on a 12 GiB GPU beside an 8-core CPU, with a
//! 32k context whose f16 K/V cache alone takes 6 GiB. What fits on the GPU
//! turns on the layers offloaded (`n_gpu_layers`, 49 with the output
//! layer), both cache types and the micro-batch's compute buffer, which
//! without flash attention holds a score for every token of the context
//! (five times as large). Past 12 GiB the engine runs out of memory,
//! unless `env.GGML_CUDA_ENABLE_UNIFIED_MEMORY` lets CUDA spill into
//! system memory: then it runs, but every token reads the spilled bytes
//! over PCIe (a cliff turned into a slope of slow configurations), and
//! every kernel is 2 % slower.
//!
//! Decoding reads each layer where it lives: the GPU's at 504 GB/s, the
//! CPU's at a memory bandwidth that the thread count sets (only there: an
//! effect confined to a region), best at the 8 physical cores and 5 %
//! lower for each hyper-thread past them. CUDA graphs
//! (`env.GGML_CUDA_DISABLE_GRAPHS = "0"`) cut the launch overhead only
//! where the whole model is on the GPU and nothing spills. Flash attention
//! keeps the cache's types together: a K and a V of different types have
//! no GPU kernel, and attention falls back to the CPU (a plateau). A
//! quantized V needs flash attention (refused otherwise). The first token
//! of a 4,096-token prompt comes after the GPU has computed every layer,
//! a micro-batch at a time, and copied the CPU's layers over PCIe for
//! each micro-batch: a larger one computes more efficiently and copies
//! fewer times (more so the more layers the CPU holds: an interaction
//! between two numbers), but its buffer leaves fewer layers room. The
//! cache's quantization costs the model's output: q4_0 K most.
//! Decode ↑, time to first token ↓, mean KL divergence ↓.
//!
//! The world has a model file ([`super::model_file`]), whose GPU bytes
//! the planner predicts.

use std::sync::LazyLock;

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, divergence, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

const LAYERS: f64 = 48.0;
const LAYER: f64 = 0.165 * GIB;
const OUTPUT: f64 = 0.45 * GIB;
const GPU: f64 = 12.0 * GIB;
/// Bytes read a millisecond: the GPU's memory, the CPU's with every
/// core reading, and PCIe.
const GPU_READ: f64 = 0.469 * GIB;
const CPU_READ: f64 = 0.052 * GIB;
const PCIE_READ: f64 = 0.023 * GIB;
/// The f16 K/V cache of one layer at the 32k context, and the share of
/// it a token reads at a depth of 4,096.
const KV_LAYER: f64 = 0.125 * GIB;
const DEPTH: f64 = 4096.0 / 32768.0;
const PROMPT: f64 = 4096.0;

fn spill(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let flash = get(s, "flash_attn") == "on";
    if v != "f16" && !flash {
        return Truth::Fails("rejected");
    }
    let offloaded = number(s, "n_gpu_layers");
    let on_gpu = offloaded.min(LAYERS);
    let output_on_gpu = offloaded > LAYERS;
    let threads = number(s, "threads");
    let ubatch = number(s, "ubatch_size");
    let unified = get(s, "env.GGML_CUDA_ENABLE_UNIFIED_MEMORY") == "1";
    let graphs = get(s, "env.GGML_CUDA_DISABLE_GRAPHS") != "1";

    let kv_layer = KV_LAYER * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let compute = 0.15 * GIB + ubatch / 512.0 * GIB * if flash { 0.12 } else { 0.6 };
    let output = if output_on_gpu { OUTPUT } else { 0.0 };
    let vram = 0.35 * GIB + on_gpu * (LAYER + kv_layer) + output + compute;
    let spilled = (vram - GPU).max(0.0);
    if spilled > 0.0 && !unified {
        return Truth::Fails("out_of_memory");
    }
    let slower = if unified { 1.02 } else { 1.0 };

    // One token: each layer's weights and a 4,096-token depth of its cache.
    let kv_read = DEPTH * kv_layer;
    let attention_on_cpu = flash && k != v;
    let attention = if !flash {
        1.3
    } else if attention_on_cpu {
        GPU_READ / (0.4 * CPU_READ)
    } else {
        1.0 + 0.1 * [k, v].iter().filter(|t| **t != "f16").count() as f64
    };
    let gpu_ms = (on_gpu * LAYER + output + on_gpu * kv_read * attention) / GPU_READ;
    let cpu_bytes = (LAYERS - on_gpu) * (LAYER + kv_read) + (OUTPUT - output);
    let bandwidth =
        CPU_READ * (threads.min(8.0) / 8.0).powf(0.7) * (1.0 - 0.05 * (threads - 8.0).max(0.0));
    let cpu_ms = cpu_bytes / bandwidth;
    let whole = output_on_gpu && spilled == 0.0;
    let overhead = if whole && graphs { 0.3 } else { 1.5 } + if whole { 0.0 } else { 0.5 };
    let token_ms = (overhead + gpu_ms + cpu_ms + spilled / (0.6 * PCIE_READ)) * slower;

    // The prompt: computed on the GPU a micro-batch at a time, the CPU's
    // layers and the spilled bytes copied over for each.
    let efficiency = match ubatch as u32 {
        256 => 0.62,
        512 => 0.85,
        1024 => 0.97,
        _ => 1.0,
    };
    let quantized_k = if k == "f16" { 1.0 } else { 1.03 };
    let compute_ms = PROMPT * 0.5 / efficiency * if flash { 1.0 } else { 1.15 } * quantized_k;
    let copies = (PROMPT / ubatch).ceil();
    let copy_ms = copies * ((LAYERS - on_gpu) * LAYER + OUTPUT - output + spilled) / PCIE_READ;
    let cpu_attention_ms = if attention_on_cpu { PROMPT * 0.4 } else { 0.0 };
    let ttft = (30.0 + compute_ms + copy_ms + cpu_attention_ms) * slower;

    let kld = divergence(k, 0.004, 0.04) + divergence(v, 0.002, 0.012);
    Truth::Runs(
        [(Metric::DecodeTps, 1000.0 / token_ms), (Metric::TtftMs, ttft), (Metric::KldMean, kld)]
            .into(),
    )
}

const SPILL: &str = r#"
name = "spill"
profile = "p"
model = "m"
[space]
n_gpu_layers = { min = 0, max = 49, step = 1 }
threads = { min = 1, max = 16, step = 1 }
ubatch_size = [256, 512, 1024, 2048]
flash_attn = ["off", "on"]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
"env.GGML_CUDA_DISABLE_GRAPHS" = ["0", "1"]
"env.GGML_CUDA_ENABLE_UNIFIED_MEMORY" = ["0", "1"]
[baseline]
n_gpu_layers = 20
threads = 4
ubatch_size = 512
flash_attn = "off"
cache_type_k = "f16"
cache_type_v = "f16"
"env.GGML_CUDA_DISABLE_GRAPHS" = "0"
"env.GGML_CUDA_ENABLE_UNIFIED_MEMORY" = "0"
[probes.kld]
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "ttft_ms"
[[objectives]]
metric = "kld_mean"
"#;

/// The model file: 48 blocks of [`LAYER`] bytes, an output layer of
/// [`OUTPUT`], and 8 K/V heads of 128 a block (an f16 cache of
/// [`KV_LAYER`] a block at the trained 32k context).
static MODEL: LazyLock<super::model_file::File> =
    LazyLock::new(|| super::model_file::dense(48, LAYER, OUTPUT, (8, 128), 32768));

fn spill_plan(s: &Settings) -> Option<f64> {
    MODEL.gpu_bytes(s)
}

/// The world, with `noise` and a heavy tail on top.
pub(super) fn spill_world(noise: Noise) -> World {
    World::for_search("spill", SPILL, spill, Noise { tail: 0.05, ..noise })
        .with_gpu_plan(spill_plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against llama-server's settings and variables;
    /// less than half the grid fails; the front has more than three
    /// configurations; unified memory turns running out into a slow run;
    /// graphs and threads each matter only in their region; mixed cache
    /// types under flash attention fall to a plateau; a larger micro-batch
    /// shortens the first token the more, the more layers the CPU holds.
    #[test]
    fn spill_has_what_it_says() {
        let w = spill_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let decode = |changes: &[(&str, &str)]| at(changes).expect("runs")[0];
        let ttft = |changes: &[(&str, &str)]| at(changes).expect("runs")[1];
        assert!(at(&[("cache_type_v", "q8_0")]).is_none(), "quantized V needs flash attention");
        let fa = ("flash_attn", "on");
        let um = ("env.GGML_CUDA_ENABLE_UNIFIED_MEMORY", "1");
        let no_graphs = ("env.GGML_CUDA_DISABLE_GRAPHS", "1");
        // Every layer with an f16 cache runs out, or with unified memory
        // runs slower than the most layers that fit.
        let all = ("n_gpu_layers", "49");
        assert!(at(&[all, fa]).is_none());
        assert!(decode(&[all, fa, um]) < decode(&[("n_gpu_layers", "38"), fa]));
        // Graphs matter only with the whole model on the GPU.
        let q4 = [fa, ("cache_type_k", "q4_0"), ("cache_type_v", "q4_0")];
        assert!(
            decode(&[&q4[..], &[all]].concat()) > decode(&[&q4[..], &[all, no_graphs]].concat())
        );
        assert_eq!(decode(&[fa, no_graphs]), decode(&[fa]));
        // Threads matter only with layers on the CPU, best at 8.
        let threads =
            |layers, t| decode(&[&q4[..], &[("n_gpu_layers", layers), ("threads", t)]].concat());
        assert_eq!(threads("49", "2"), threads("49", "12"));
        assert!(
            threads("30", "8") > threads("30", "4") && threads("30", "8") > threads("30", "12")
        );
        // Different types under flash attention: attention on the CPU.
        let types =
            |k, v| decode(&[fa, ("n_gpu_layers", "40"), ("cache_type_k", k), ("cache_type_v", v)]);
        assert!(types("q8_0", "f16") < 0.8 * types("q8_0", "q8_0"));
        // A larger micro-batch: fewer copies of the CPU's layers.
        let gain = |layers| {
            let layers = ("n_gpu_layers", layers);
            ttft(&[&q4[..], &[layers]].concat())
                / ttft(&[&q4[..], &[layers, ("ubatch_size", "2048")]].concat())
        };
        assert!(gain("10") > gain("49") && gain("49") > 1.0);
        let kld = |changes: &[(&str, &str)]| at(changes).expect("runs")[2];
        assert!(kld(&q4) > kld(&[fa, ("cache_type_k", "q8_0"), ("cache_type_v", "q8_0")]));
    }

    /// The planner's bytes: the f16 cache of all 49 layers past the GPU's
    /// 12 GiB, the q4_0 cache's within it, none with no layer offloaded,
    /// and the same for settings it does not read.
    #[test]
    fn the_planner_reads_the_model_file() {
        let plan = spill_world(Noise::default()).planner().expect("a planner");
        let gpu = |pairs: &[(&str, &str)]| {
            let s: Settings = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            plan(&s, Metric::PeakGpuBytes)
        };
        let all = ("n_gpu_layers", "49");
        let f16 = gpu(&[all]).unwrap();
        let q4 = gpu(&[all, ("cache_type_k", "q4_0"), ("cache_type_v", "q4_0")]).unwrap();
        assert!(f16 > GPU && q4 < GPU && q4 > 0.5 * GPU, "{f16} {q4}");
        assert_eq!(gpu(&[all, ("threads", "3")]), Some(f16));
        assert_eq!(gpu(&[("n_gpu_layers", "0")]), None);
        assert!(gpu(&[("n_gpu_layers", "30")]).unwrap() < f16);
    }
}
