//! Search worlds built after the default strategy was tuned on every
//! world of [`super::search_worlds`] before these. `experts` and `draft`
//! were kept out of that tuning; the strategy's next change (a column for
//! whether a number is 0, see its encoder) came from a trace of `draft`
//! and was measured on both. `layers` was built after that change and
//! kept out of it: its figures are a strategy's first sight of it.
//!
//! - `experts`: a mixture-of-experts model on a 24 GiB GPU. Expert weights
//!   of the first `n_cpu_moe` layers stay on the CPU, where decode then
//!   waits on memory bandwidth, which the thread count sets only there (an
//!   effect confined to a region: with every expert on the GPU, threads do
//!   nothing); the fewer kept on the CPU, the more the GPU holds, until
//!   with the K/V cache and the compute buffer (which grows with the
//!   micro-batch, and without flash attention with the context too) it
//!   runs out of memory, a cliff that moves with the context, both cache
//!   types, the micro-batch and flash attention.
//!   Prefill gains from a larger micro-batch in steps. Decode ↑, prefill
//!   ↑, context ↑.
//! - `draft`: speculative decoding. Each drafted token is accepted with a
//!   chance that falls as the draft runs on, so decode peaks at a middle
//!   `draft_max` and each drafted token costs memory; a `draft_min` above
//!   2 wastes drafts (a plateau, then a slope); drafting with 4 slots is
//!   refused (a failing region of an interaction); threads past 6 add no
//!   speed (a plateau) while each costs a little memory, and the batch
//!   size does nothing at all. Requests are slowed now and then (a heavy
//!   tail) while the machine drifts. Decode ↑, memory ↓.
//! - `layers`: a dense model split between a 12 GiB GPU and the CPU by
//!   `n_gpu_layers`, where 0 is no different in kind from 1 (a range
//!   from 0 with no step at 0). The layers left on the CPU wait on memory
//!   bandwidth, and the thread count that serves them best grows with
//!   how many there are (an interaction between two numbers: a diagonal);
//!   past it, threads contend. The GPU holds its layers, their share of
//!   the K/V cache and a compute buffer that grows with the micro-batch:
//!   past 12 GiB it runs out of memory, a cliff that moves with the
//!   context, both cache types and the micro-batch. Quantized caches
//!   move the next-token distribution (the V cache less), and the batch
//!   size does nothing. Decode ↑, KL divergence ↓, context ↑.

use std::sync::LazyLock;

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, divergence, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

fn experts(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let fa = get(s, "flash_attn") == "on";
    let on_cpu = number(s, "n_cpu_moe").min(48.0);
    let ctx = number(s, "ctx_size");
    let threads = number(s, "threads");
    let ubatch = number(s, "ubatch_size");
    let kv = ctx / 4096.0 * 0.1 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let compute = ubatch / 512.0 * 0.3 * GIB + if fa { 0.0 } else { ctx * 4e4 };
    let vram = 48.0 * 0.08 * GIB + (48.0 - on_cpu) * 0.38 * GIB + kv + compute;
    if vram > 24.0 * GIB {
        return Truth::Fails("out_of_memory");
    }
    // Bandwidth rises with threads to 8, then contention takes some back.
    let bandwidth = 40.0 * (threads / 8.0).min(1.0) * (1.0 - 0.02 * (threads - 8.0).max(0.0));
    let cpu_seconds = on_cpu * 0.38 / 8.0 / bandwidth;
    let gpu_seconds = 0.012 + ctx / 131072.0 * if fa { 0.002 } else { 0.008 };
    let decode = 1.0 / (cpu_seconds + gpu_seconds);
    let steps = match ubatch {
        u if u < 512.0 => 0.6,
        u if u < 2048.0 => 1.0,
        _ => 1.25,
    };
    let prefill = 2500.0 * steps / (1.0 + on_cpu / 12.0);
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::PrefillTps, prefill)].into())
}

const EXPERTS: &str = r#"
name = "experts"
profile = "p"
model = "m"
[space]
n_cpu_moe = { min = 0, max = 48, step = 2 }
threads = { min = 1, max = 16, step = 1 }
ctx_size = [8192, 16384, 32768, 65536, 131072]
ubatch_size = [256, 512, 1024, 4096]
flash_attn = ["off", "on"]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
[baseline]
n_cpu_moe = 48
threads = 4
ctx_size = 8192
ubatch_size = 512
flash_attn = "on"
cache_type_k = "f16"
cache_type_v = "f16"
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "prefill_tps"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
"#;

fn draft(s: &Settings) -> Truth {
    let most = number(s, "draft_max");
    let fewest = number(s, "draft_min");
    let slots = number(s, "parallel");
    let threads = number(s, "threads");
    if most > 0.0 && slots >= 4.0 {
        return Truth::Fails("rejected");
    }
    // Tokens accepted per step: each further draft is accepted with a
    // chance that falls from 0.85 by 0.04 a token.
    let mut accepted = 1.0;
    let mut chance = 1.0;
    for i in 0..most as usize {
        chance *= (0.85 - 0.04 * i as f64).max(0.0);
        accepted += chance;
    }
    let step = 1.0 + 0.09 * most;
    let wasted = 1.0 - 0.04 * (fewest - 2.0).max(0.0);
    let cpu = (threads / 6.0).min(1.0).sqrt();
    let decode = 40.0 * accepted / step * wasted * cpu * (1.0 - 0.08 * slots.log2());
    let rss = 3.0 * GIB
        + slots * 0.5 * GIB
        + if most > 0.0 { 0.6 * GIB + most * 40.0 * 1024.0 * 1024.0 } else { 0.0 }
        + threads * 10.0 * 1024.0 * 1024.0;
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::PeakRssBytes, rss)].into())
}

const DRAFT: &str = r#"
name = "draft"
profile = "p"
model = "m"
constraints = ["draft_min <= draft_max"]
[space]
draft_max = { min = 0, max = 24, step = 1 }
draft_min = { min = 0, max = 8, step = 1 }
threads = { min = 1, max = 16, step = 1 }
parallel = [1, 2, 4]
batch_size = [512, 1024, 2048, 4096]
[baseline]
draft_max = 0
draft_min = 0
threads = 4
parallel = 1
batch_size = 2048
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#;

fn layers(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let on_gpu = number(s, "n_gpu_layers").min(32.0);
    let threads = number(s, "threads");
    let ctx = number(s, "ctx_size");
    let ubatch = number(s, "ubatch_size");
    let share = on_gpu / 32.0;
    let kv = ctx / 4096.0 * 0.25 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let vram = 0.3 * GIB + on_gpu * 0.3 * GIB + kv * share + ubatch / 512.0 * 0.4 * GIB;
    if vram > 12.0 * GIB {
        return Truth::Fails("out_of_memory");
    }
    // The CPU's layers are served best by 2 threads and one more for
    // every 3 of them; each thread past that takes 4 % back.
    let best = 2.0 + (32.0 - on_gpu) / 3.0;
    let bandwidth = 25.0 * (threads / best).min(1.0) * (1.0 - 0.04 * (threads - best).max(0.0));
    let cpu_seconds = (1.0 - share) * 9.6 / bandwidth.max(0.5);
    let gpu_seconds = 0.004 + share * 0.016 + ctx / 32768.0 * 0.004;
    let kld = divergence(k, 0.003, 0.04) + divergence(v, 0.001, 0.012);
    Truth::Runs(
        [(Metric::DecodeTps, 1.0 / (cpu_seconds + gpu_seconds)), (Metric::KldMean, kld)].into(),
    )
}

/// `layers`' model file: 32 blocks of 0.3 GiB and 4 K/V heads of 128 a
/// block (an f16 cache of 0.25 GiB at 4,096 tokens), with a small output
/// layer.
static LAYERS_MODEL: LazyLock<super::model_file::File> =
    LazyLock::new(|| super::model_file::dense(32, 0.3 * GIB, 0.02 * GIB, (4, 128), 65536));

fn layers_plan(s: &Settings) -> Option<f64> {
    LAYERS_MODEL.gpu_bytes(s)
}

const LAYERS: &str = r#"
name = "layers"
profile = "p"
model = "m"
[space]
n_gpu_layers = { min = 0, max = 32, step = 1 }
threads = { min = 1, max = 16, step = 1 }
ctx_size = [4096, 8192, 16384, 32768, 65536]
ubatch_size = [128, 256, 512, 1024]
batch_size = [512, 2048]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
[baseline]
n_gpu_layers = 0
threads = 4
ctx_size = 4096
ubatch_size = 512
batch_size = 2048
cache_type_k = "f16"
cache_type_v = "f16"
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "kld_mean"
[[objectives]]
metric = "setting.ctx_size"
goal = "max"
[probes.kld]
"#;

/// The unseen worlds, with `noise` (and, in `draft`, a heavy tail and
/// drift on top).
pub(super) fn unseen(noise: Noise) -> Vec<World> {
    vec![
        World::for_search("experts", EXPERTS, experts, noise),
        World::for_search("draft", DRAFT, draft, Noise { tail: 0.1, drift: -0.002, ..noise }),
        World::for_search("layers", LAYERS, layers, noise).with_gpu_plan(layers_plan),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planted::{Cost, Judge};

    /// Each world's study checks, its truth has a failing region (less
    /// than half the space) and a front of more than three
    /// configurations, and in `experts` threads matter only with experts
    /// on the CPU.
    #[test]
    fn each_unseen_world_has_what_it_says() {
        for w in unseen(Noise::default()) {
            w.assert_fails_in_part_with_a_front();
        }
        let w = &unseen(Noise::default())[0];
        let study = w.study("random", 0, 10);
        let judge = Judge::new(w, &study, Cost::default());
        let decode = |cpu: &str, threads: &str| {
            let mut c = study.baseline.clone();
            c.insert("n_cpu_moe".into(), cpu.into());
            c.insert("threads".into(), threads.into());
            judge.values(&study, &c).unwrap()[0]
        };
        assert_eq!(decode("0", "2"), decode("0", "12"));
        assert!(decode("24", "8") > 2.0 * decode("24", "2"));
        // Every expert on the GPU with the largest context fails with
        // f16 and q8_0 caches and runs with q4_0.
        let mut c = study.baseline.clone();
        c.extend([
            ("n_cpu_moe".to_string(), "0".to_string()),
            ("ctx_size".into(), "131072".into()),
        ]);
        for (cache, runs) in [("f16", false), ("q8_0", false), ("q4_0", true)] {
            c.insert("cache_type_k".into(), cache.into());
            c.insert("cache_type_v".into(), cache.into());
            assert_eq!(judge.values(&study, &c).is_some(), runs, "{cache}");
        }
    }

    /// In `layers`, 0 GPU layers is one step of a smooth curve, and the
    /// best thread count falls as layers move to the GPU.
    #[test]
    fn in_layers_the_best_thread_count_follows_the_layers() {
        let w = &unseen(Noise::default())[2];
        let study = w.study("random", 0, 10);
        let judge = Judge::new(w, &study, Cost::default());
        let decode = |layers: u32, threads: u32| {
            let mut c = study.baseline.clone();
            c.insert("n_gpu_layers".into(), layers.to_string());
            c.insert("threads".into(), threads.to_string());
            judge.values(&study, &c).unwrap()[0]
        };
        let best =
            |layers: u32| (1..=16).max_by(|a, b| decode(layers, *a).total_cmp(&decode(layers, *b)));
        assert_eq!(best(0), Some(13));
        assert_eq!(best(26), Some(4));
        let (zero, one, two) = (decode(0, 13), decode(1, 13), decode(2, 13));
        assert!((one / zero - two / one).abs() < 0.01, "{zero} {one} {two}");
    }
}
