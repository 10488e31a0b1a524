//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it. The first on an integrated GPU, whose memory is the
//! machine's own, and the first whose best layer count lies inside its
//! range.
//!
//! `igpu`: an 8B model on a laptop's integrated GPU through Vulkan, 8
//! cores and 32 GiB shared by both. The firmware sets 4 GiB aside for
//! the GPU (read at 90 GB/s); what the GPU needs past that it maps from
//! system memory (read at 32 GB/s, up to 10 GiB more; past it the load
//! runs out of memory). The compute buffer takes the carve-out first,
//! then the offloaded layers' weights, then their K/V cache: a layer
//! that spills past it is read slower than the CPU would read it, so
//! decode peaks at the layer count that fills the carve-out, a count
//! that moves with the context and the micro-batch (without flash
//! attention the buffer grows with both). While the GPU works, the CPU
//! threads of the layers left on the CPU spin on the same memory and
//! take bandwidth from it: the best thread count is smaller with more
//! layers offloaded (an interaction between two numbers), and with every
//! layer on the GPU threads hardly matter for decode. Prompts run on the
//! GPU's cooperative-matrix kernels unless
//! `GGML_VK_DISABLE_COOPMAT` turns them off (2.2 times slower), and the
//! CPU's layers use every thread; with the cooperative-matrix kernels,
//! flash attention at a micro-batch of 1,024 or more crashes the driver.
//! A heavy tail, and a laptop warming up. Decode ↑, time to the first
//! token ↓, context ↑.

use engine_bridge::Settings;

use super::formula::{GIB, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

/// The model's layers (32 blocks and the output), all offloaded at 33.
const LAYERS: f64 = 33.0;
/// The weights, in bytes.
const WEIGHTS: f64 = 4.6e9;
/// The f16 K/V cache a token of context takes (32 blocks, 8 K/V heads of
/// 128).
const CACHE_TOKEN: f64 = 131_072.0;
/// The conversation a decoded token attends to, in tokens.
const DEPTH: f64 = 4096.0;
/// The GPU's carve-out, and what it may map from system memory past it.
const CARVE_OUT: f64 = 4.0 * GIB;
const MAPPED: f64 = 10.0 * GIB;
/// Read rates of the carve-out, of mapped memory and of the CPU with
/// every core reading, bytes a second.
const LOCAL_READ: f64 = 90e9;
const MAPPED_READ: f64 = 32e9;
const CPU_READ: f64 = 60e9;
/// The prompt of the time-to-first-token probe, in tokens.
const PROMPT: f64 = 2048.0;

fn igpu(s: &Settings) -> Truth {
    let offloaded = number(s, "n_gpu_layers").clamp(0.0, LAYERS);
    let share = offloaded / LAYERS;
    let threads = number(s, "threads");
    let ctx = number(s, "ctx_size");
    let ubatch = number(s, "ubatch_size");
    let flash = get(s, "flash_attn") == "on";
    let coopmat = get(s, "env.GGML_VK_DISABLE_COOPMAT") != "1";
    if coopmat && flash && ubatch >= 1024.0 {
        return Truth::Fails("crashed");
    }

    // The GPU's memory: the buffer first, then weights, then cache.
    let buffer = GIB * ubatch / 512.0 * if flash { 0.25 } else { 0.25 + 0.35 * ctx / 8192.0 };
    let weights = WEIGHTS * share;
    let cache = ctx * CACHE_TOKEN * share;
    if buffer + weights + cache > CARVE_OUT + MAPPED {
        return Truth::Fails("out_of_memory");
    }
    let room = (CARVE_OUT - buffer).max(0.0);
    let weights_local = weights.min(room);
    let cache_local = cache.min(room - weights_local);

    // One token: each layer's weights and its cache to the conversation's
    // depth, read where they live; the CPU's threads spin meanwhile.
    let attended = DEPTH * CACHE_TOKEN * if flash { 0.7 } else { 1.0 };
    let cache_read = attended * share;
    let cache_read_local = if cache > 0.0 { cache_read * cache_local / cache } else { 0.0 };
    let spinning = if offloaded < LAYERS { 0.012 } else { 0.004 };
    let stolen = 1.0 - spinning * threads;
    let gpu_s = ((weights_local + cache_read_local) / LOCAL_READ
        + (weights - weights_local + cache_read - cache_read_local) / MAPPED_READ)
        / stolen;
    let cpu_read =
        CPU_READ * (1.0 - (-threads / 3.0).exp()) * (1.0 - 0.05 * (threads - 8.0).max(0.0));
    let cpu_s = (WEIGHTS + attended) * (1.0 - share) / cpu_read;
    let split = if offloaded > 0.0 && offloaded < LAYERS { 0.001 } else { 0.0 };
    let decode = 1.0 / (0.0005 + split + gpu_s + cpu_s);

    // The prompt: the GPU's layers a micro-batch at a time, the CPU's on
    // every thread (the second hardware threads add a little).
    let efficiency = ubatch / (ubatch + 192.0);
    let kernels = match (coopmat, flash) {
        (true, true) => 0.9,
        (true, false) => 1.0,
        (false, true) => 2.2 * 1.25,
        (false, false) => 2.2,
    };
    let gpu_ms = PROMPT * offloaded * 0.1 * kernels / efficiency;
    let cores = threads.min(8.0) + 0.3 * (threads - 8.0).max(0.0);
    let cpu_ms = PROMPT * (LAYERS - offloaded) * 3.0 / cores;
    let ttft = 50.0 + gpu_ms + cpu_ms;
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::TtftMs, ttft)].into())
}

const IGPU: &str = r#"
name = "igpu"
profile = "p"
model = "m"
[space]
n_gpu_layers = { min = 0, max = 33, step = 1 }
threads = { min = 1, max = 16, step = 1 }
ctx_size = [4096, 8192, 16384, 32768, 65536]
flash_attn = ["off", "on"]
ubatch_size = [128, 256, 512, 1024, 2048]
"env.GGML_VK_DISABLE_COOPMAT" = ["0", "1"]
[baseline]
n_gpu_layers = 33
threads = 8
ctx_size = 8192
flash_attn = "off"
ubatch_size = 512
"env.GGML_VK_DISABLE_COOPMAT" = "0"
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "ttft_ms"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
"#;

/// The world, with `noise`, a heavy tail and a machine slowing as it
/// warms.
pub(super) fn igpu_world(noise: Noise) -> World {
    World::for_search("igpu", IGPU, igpu, Noise { tail: 0.05, drift: -0.003, ..noise })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against llama-server's settings; less than half
    /// the grid fails; the front has more than three configurations;
    /// decode peaks inside the layer count, at fewer layers with a
    /// longer context; the best thread count falls as layers move to the
    /// GPU; threads hardly matter with every layer there; the
    /// cooperative-matrix kernels speed prompts and crash with flash
    /// attention at large micro-batches.
    #[test]
    fn igpu_has_what_it_says() {
        let w = igpu_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let runs = |changes: &[(&str, &str)]| at(changes).expect("runs");
        let decode = |layers: u32, threads: u32, ctx: &str| {
            let (l, t) = (layers.to_string(), threads.to_string());
            runs(&[("n_gpu_layers", &l), ("threads", &t), ("ctx_size", ctx)])[0]
        };
        let peak = |ctx: &str| {
            (0..=33).max_by(|a, b| decode(*a, 6, ctx).total_cmp(&decode(*b, 6, ctx))).unwrap()
        };
        let (short, long) = (peak("4096"), peak("16384"));
        assert!(short > long && long > 0 && short < 33, "peaks at {short} and {long} layers");
        assert!(decode(short, 6, "4096") > 1.1 * decode(33, 6, "4096"));
        let best_threads = |layers: u32| {
            (1..=16)
                .max_by(|a, b| decode(layers, *a, "4096").total_cmp(&decode(layers, *b, "4096")))
        };
        assert!(best_threads(5) > best_threads(30), "{:?}", [best_threads(5), best_threads(30)]);
        let whole = |t: u32| decode(33, t, "8192");
        assert!((whole(2) / whole(8) - 1.0).abs() < 0.05);
        let ttft = |changes: &[(&str, &str)]| runs(changes)[1];
        assert!(ttft(&[("env.GGML_VK_DISABLE_COOPMAT", "1")]) > 2.0 * ttft(&[]));
        assert!(at(&[("flash_attn", "on"), ("ubatch_size", "1024")]).is_none());
        assert!(
            at(&[
                ("flash_attn", "on"),
                ("ubatch_size", "1024"),
                ("env.GGML_VK_DISABLE_COOPMAT", "1")
            ])
            .is_some()
        );
    }
}
