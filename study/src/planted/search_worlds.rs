//! Worlds for judging search strategies (not findings): what a strategy
//! must find is each world's true Pareto front, worked out by running the
//! truth over the whole grid ([`super::search`]).
//!
//! - `midrange`: six settings and 92,160 configurations; decode peaks at
//!   12 threads and a middle batch size, mixed K/V cache types halve it
//!   (an interaction), and configurations past 12 GiB run out of memory.
//!   Decode ↑, memory ↓, quality ↑.
//! - `ten`: ten settings, three of which matter (threads, the K cache
//!   type, flash attention); decode ↑, memory ↓.
//! - `llama8`: the findings' world (864 configurations, a failing region).
//! - `noise`: the llama8 space with no structure: each configuration's
//!   truth is a hash of it, so no model can beat drawing at random.
//! - `offload`, `ridge`, `pocket`: worlds built after the strategies were
//!   tuned, to differ from these (see [`super::held_out`]).
//! - `experts`, `draft`: built after the default strategy was tuned on
//!   all of the above, and kept out of it; `layers`, built after the
//!   next change, which was measured on those two (see
//!   [`super::unseen`]).
//! - `serving`: built after those and kept out of every change until its
//!   first figures were taken ([`super::serving`]); `cpu`, built after
//!   every change so far ([`super::cpu_only`]); `vllm`, the first on
//!   another engine, built after `cpu` ([`super::vllm`]); `split`, a
//!   model across two GPUs, built after every change so far
//!   ([`super::split`]); `sglang`, the first with a continuous setting,
//!   built after every change so far ([`super::sglang`]); `spill`, the
//!   first with environment variables and three objectives that trade
//!   through the GPU's memory, built after that ([`super::spill`]);
//!   `numa`, the first with a load time and two NUMA nodes, built after
//!   every change so far ([`super::numa`]); `hybrid`, the first on
//!   llama-cpp-python's server and the first whose number has two peaks,
//!   built after every change so far ([`super::hybrid`]); `recall`, the
//!   first whose quality is counted over a suite of eight questions,
//!   built after that ([`super::recall`]); `igpu`, the first on an
//!   integrated GPU and the first whose best layer count lies inside its
//!   range, built after that ([`super::igpu`]); `speculative`, the first
//!   that chooses a draft model, built after that
//!   ([`super::speculative`]).

use engine_bridge::Settings;

use super::worlds::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World, worlds};
use crate::study::Metric;

fn midrange(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let fa = get(s, "flash_attn") == "on";
    let ctx = number(s, "ctx_size");
    let threads = number(s, "threads");
    let batch = number(s, "batch_size");
    let ubatch = number(s, "ubatch_size");
    let kv = ctx / 4096.0 * 0.3 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let scratch = if fa { 0.0 } else { ctx * ubatch * 4.0 * 32.0 };
    let rss = 3.0 * GIB + kv + scratch + ubatch * 1.5e6;
    if rss > 12.0 * GIB {
        return Truth::Fails("out_of_memory");
    }
    let thread_curve = 1.0 - 0.6 * ((threads - 12.0) / 20.0).powi(2) * 4.0;
    let batch_curve = 1.0 - 0.08 * (batch.log2() - 9.0).powi(2);
    let mixed = if k != v { 0.5 } else { 1.0 };
    let decode = 45.0
        * thread_curve.max(0.05)
        * batch_curve.max(0.05)
        * mixed
        * if fa { 1.15 } else { 1.0 }
        * (1.0 - 0.04 * (ctx / 4096.0).log2());
    let quality =
        0.75 - if k == "q4_0" { 0.08 } else { 0.0 } - if v == "q4_0" { 0.02 } else { 0.0 };
    Truth::Runs(
        [(Metric::DecodeTps, decode), (Metric::PeakRssBytes, rss), (Metric::QualityScore, quality)]
            .into(),
    )
}

const MIDRANGE: &str = r#"
name = "midrange"
profile = "p"
model = "m"
[space]
threads = { min = 1, max = 32, step = 1 }
batch_size = { min = 64, max = 8192, log = true }
ubatch_size = [128, 256, 512, 1024]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
flash_attn = ["off", "on"]
ctx_size = [4096, 8192, 16384, 32768, 65536]
[baseline]
threads = 4
batch_size = 2048
ubatch_size = 512
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = "off"
ctx_size = 8192
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
[[objectives]]
metric = "quality_score"
"#;

fn ten(s: &Settings) -> Truth {
    let k = get(s, "cache_type_k");
    let fa = get(s, "flash_attn") == "on";
    let threads = number(s, "threads");
    let thread_curve = (-((threads.log2() - 3.0).powi(2)) / 2.0).exp();
    let decode = 30.0
        * (0.3 + 0.7 * thread_curve)
        * if fa { 1.2 } else { 1.0 }
        * if k == "q4_0" { 0.9 } else { 1.0 };
    let rss = 4.0 * GIB + 2.0 * GIB * cache_bytes(k);
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::PeakRssBytes, rss)].into())
}

const TEN: &str = r#"
name = "ten"
profile = "p"
model = "m"
[space]
threads = { min = 1, max = 32, step = 1 }
cache_type_k = ["f16", "q8_0", "q4_0"]
flash_attn = ["off", "on"]
threads_batch = [1, 2, 4, 8, 16]
batch_size = { min = 128, max = 4096, log = true }
ubatch_size = [128, 256, 512]
parallel = [1, 2, 4]
mlock = [false, true]
no_mmap = [false, true]
top_k = [1, 20, 40, 80]
[baseline]
threads = 4
cache_type_k = "f16"
flash_attn = "off"
threads_batch = 4
batch_size = 2048
ubatch_size = 512
parallel = 1
mlock = false
no_mmap = false
top_k = 40
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#;

/// A number in [0, 1) from a configuration and a salt: FNV-1a over its
/// text, then MurmurHash3's finalizer. FNV-1a alone moves the high bits
/// little for a change in the last bytes, so configurations differing in
/// their last setting came out within a few percent of each other: a
/// structure a model-based search could find, in a world meant to have none.
fn hashed(s: &Settings, salt: u64) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ salt;
    for (k, v) in s {
        for b in k.bytes().chain([b'=']).chain(v.bytes()).chain([b';']) {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
    }
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^= h >> 33;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

fn structureless(s: &Settings) -> Truth {
    Truth::Runs(
        [
            (Metric::DecodeTps, 20.0 + 20.0 * hashed(s, 1)),
            (Metric::PeakRssBytes, (4.0 + 4.0 * hashed(s, 2)) * GIB),
        ]
        .into(),
    )
}

/// The worlds a search is judged on.
pub fn search_worlds() -> Vec<World> {
    let noise =
        Noise { speed: 0.02, memory: 0.005, quality: 0.005, divergence: 2e-4, ..Noise::default() };
    let llama8 = worlds().into_iter().find(|w| w.name == "llama8").expect("llama8");
    let llama8_space = llama8.study.clone();
    let mut all = vec![
        World::for_search("midrange", MIDRANGE, midrange, noise),
        World::for_search("ten", TEN, ten, noise),
        llama8,
        World::for_search("noise", &llama8_space.replace("llama8", "noise"), structureless, noise),
    ];
    all.extend(super::held_out::held_out(noise));
    all.extend(super::unseen::unseen(noise));
    all.push(super::serving::serving_world(noise));
    all.push(super::cpu_only::cpu_world(noise));
    all.push(super::vllm::vllm_world(noise));
    all.push(super::split::split_world(noise));
    all.push(super::sglang::sglang_world(noise));
    all.push(super::spill::spill_world(noise));
    all.push(super::numa::numa_world(noise));
    all.push(super::hybrid::hybrid_world(noise));
    all.push(super::recall::recall_world(noise));
    all.push(super::igpu::igpu_world(noise));
    all.push(super::speculative::speculative_world(noise));
    all.extend(super::bounded::bounded_worlds(noise));
    all
}
