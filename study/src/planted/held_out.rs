//! Search worlds built after the strategies were tuned, to differ from the
//! worlds they were tuned on ([`super::search_worlds`]'s first three).
//! The default strategy's floor and draws were later tuned on these too;
//! [`super::unseen`]'s worlds came after that.
//!
//! - `offload`: layers on a 16 GiB GPU. Decode is the harmonic mix of the
//!   CPU's and the GPU's layers (it rises steeply as the last layers move
//!   over), the CPU part peaks at 8 threads, and the K/V cache shares the
//!   GPU with the layers: past what fits, out of memory, so the largest
//!   context allows the fewest layers unless the cache is quantized (an
//!   interaction of two numbers and a choice, ending at a cliff). Decode
//!   ↑, host memory ↓, context ↑.
//! - `ridge`: the best thread count follows the batch size (a diagonal
//!   ridge no setting finds alone), a larger batch is faster on its ridge
//!   but costs memory, and the micro-batch acts in steps (plateaus).
//!   Decode ↑, memory ↓.
//! - `pocket`: flash attention pays only at long contexts (an effect
//!   confined to a region), a quantized V cache without it is refused (a
//!   failing region), and requests are slowed now and then (a heavy tail)
//!   while the machine drifts. Decode ↑, memory ↓, context ↑.

use std::sync::LazyLock;

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

fn offload(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let layers = number(s, "n_gpu_layers");
    let ctx = number(s, "ctx_size");
    let threads = number(s, "threads");
    let batch = number(s, "batch_size");
    let kv = ctx / 4096.0 * 0.5 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let on_gpu = layers > 0.0;
    let vram = layers * 0.4 * GIB + if on_gpu { kv + 0.5 * GIB } else { 0.0 };
    if vram > 16.0 * GIB {
        return Truth::Fails("out_of_memory");
    }
    let share = layers / 40.0;
    let cpu = (1.0 - 0.5 * ((threads.log2() - 3.0) / 2.0).powi(2)).max(0.1);
    let seconds = (1.0 - share) / (8.0 * cpu) + share / 60.0;
    let decode =
        1.0 / seconds * if k != v { 0.85 } else { 1.0 } * if batch >= 1024.0 { 1.0 } else { 0.97 };
    let rss = 1.5 * GIB + (40.0 - layers) * 0.4 * GIB + if on_gpu { 0.0 } else { kv } + batch * 1e5;
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::PeakRssBytes, rss)].into())
}

/// `offload`'s model file: 40 blocks of 0.4 GiB and 8 K/V heads of 100
/// a block (an f16 cache of 0.49 GiB at 4,096 tokens, where the truth
/// holds 0.5), with a small output layer.
static OFFLOAD_MODEL: LazyLock<super::model_file::File> =
    LazyLock::new(|| super::model_file::dense(40, 0.4 * GIB, 0.02 * GIB, (8, 100), 65536));

fn offload_plan(s: &Settings) -> Option<f64> {
    OFFLOAD_MODEL.gpu_bytes(s)
}

const OFFLOAD: &str = r#"
name = "offload"
profile = "p"
model = "m"
[space]
n_gpu_layers = { min = 0, max = 40, step = 1 }
ctx_size = [4096, 8192, 16384, 32768, 65536]
threads = { min = 1, max = 16, step = 1 }
batch_size = [512, 1024, 2048]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
[baseline]
n_gpu_layers = 0
ctx_size = 8192
threads = 4
batch_size = 2048
cache_type_k = "f16"
cache_type_v = "f16"
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
"#;

fn ridge(s: &Settings) -> Truth {
    let threads = number(s, "threads");
    let batch = number(s, "batch_size");
    let ubatch = number(s, "ubatch_size");
    let parallel = number(s, "parallel");
    // Best at threads = batch / 256: 1 thread at 256, 32 at 8192.
    let off = threads.log2() - (batch.log2() - 8.0);
    let steps = match ubatch {
        u if u < 256.0 => 0.8,
        u if u <= 1024.0 => 1.0,
        _ => 0.9,
    };
    // A larger batch is faster, on its ridge.
    let peak = 20.0 + 8.0 * (batch / 128.0).log2();
    let decode = 3.0 + peak * (-off * off / 0.8).exp() * steps * (1.0 - 0.05 * parallel.log2());
    let rss = 2.0 * GIB
        + batch * 0.5 * 1024.0 * 1024.0
        + ubatch * 2.0 * 1024.0 * 1024.0
        + parallel * 0.3 * GIB
        + threads * 30.0 * 1024.0 * 1024.0;
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::PeakRssBytes, rss)].into())
}

const RIDGE: &str = r#"
name = "ridge"
profile = "p"
model = "m"
constraints = ["ubatch_size <= batch_size"]
[space]
threads = { min = 1, max = 32, step = 1 }
batch_size = { min = 128, max = 8192, log = true }
ubatch_size = [64, 128, 256, 512, 1024, 2048]
parallel = [1, 2, 4, 8]
top_k = [1, 20, 40, 80]
[baseline]
threads = 4
batch_size = 2048
ubatch_size = 512
parallel = 1
top_k = 40
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#;

fn pocket(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let fa = get(s, "flash_attn") == "on";
    if v != "f16" && !fa {
        return Truth::Fails("rejected");
    }
    let ctx = number(s, "ctx_size");
    let threads = number(s, "threads");
    let long = ctx >= 32768.0;
    let thread_curve = (1.0 - 0.4 * ((threads - 6.0) / 6.0).powi(2)).max(0.1);
    let decode = 30.0 * thread_curve / (1.0 + ctx / 65536.0)
        * if fa && long { 1.5 } else { 1.0 }
        * if get(s, "no_mmap") == "true" { 1.02 } else { 1.0 };
    let kv = ctx / 4096.0 * 0.25 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let rss = 2.0 * GIB
        + kv
        + if get(s, "no_mmap") == "true" { 0.5 * GIB } else { 0.0 }
        + if fa { 0.0 } else { ctx * 2e3 };
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::PeakRssBytes, rss)].into())
}

const POCKET: &str = r#"
name = "pocket"
profile = "p"
model = "m"
[space]
flash_attn = ["off", "on"]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
ctx_size = [2048, 4096, 8192, 16384, 32768, 65536, 131072]
threads = { min = 1, max = 16, step = 1 }
mlock = [false, true]
no_mmap = [false, true]
[baseline]
flash_attn = "off"
cache_type_k = "f16"
cache_type_v = "f16"
ctx_size = 8192
threads = 4
mlock = false
no_mmap = false
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
"#;

/// The held-out worlds, with `noise` (and, in `pocket`, a heavy tail and
/// drift on top).
pub(super) fn held_out(noise: Noise) -> Vec<World> {
    vec![
        World::for_search("offload", OFFLOAD, offload, noise).with_gpu_plan(offload_plan),
        World::for_search("ridge", RIDGE, ridge, noise),
        World::for_search("pocket", POCKET, pocket, Noise { tail: 0.1, drift: -0.002, ..noise }),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each world's study checks, and its truth has what its description
    /// says: a failing region, and a front of more than one configuration.
    #[test]
    fn each_held_out_world_has_a_failing_region_or_a_trade_off() {
        for w in held_out(Noise::default()) {
            let (fails, front) = w.failures_and_front();
            let configs = w.study("random", 0, 10).space.grid_size() as usize;
            match w.name {
                "ridge" => assert_eq!(fails, 0, "{}", w.name),
                _ => assert!(fails > 0 && fails < configs / 2, "{}: {fails}", w.name),
            }
            assert!(front > 3, "{}: a front of {}", w.name, front);
        }
    }
}
