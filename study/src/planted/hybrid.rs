//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it. The first on llama-cpp-python's server, and the first
//! whose number has two peaks.
//!
//! `hybrid`: a dense 8B model decoded on a desktop CPU with 8
//! performance cores (two hardware threads each) and 16 efficiency
//! cores, no GPU. The system puts the first 8 threads on the performance
//! cores, the next 16 on the efficiency cores and the rest on the
//! performance cores' second hardware threads. Decode splits each
//! operation evenly over the threads and waits for the slowest: 8 threads
//! decode well (a peak), the 9th, on an efficiency core, makes every
//! operation wait on it (a cliff down), and more of them draw more memory
//! bandwidth until, near 14 threads, they decode faster than the 8 did (a
//! second, higher peak, far from the first); each thread adds a little
//! to every operation's barrier, and the second hardware threads thrash
//! the caches. Prompts share their work by each thread's speed, so
//! `threads_batch` helps up to the last hardware thread, and the
//! micro-batch gives the threads work in steps. Quantized caches save
//! memory and cost a little speed (the CPU dequantizes them); a quantized
//! V cache needs flash attention (refused otherwise), which saves most
//! of the compute buffer; past 9.5 GiB the process is killed (a cliff
//! that moves with both cache types, the micro-batch and flash
//! attention). `mlock` spares decoding its page faults. Requests are
//! slowed now and then (a heavy tail) while the machine drifts.
//! Decode ↑, time to the first token ↓, memory ↓.

use engine_bridge::Settings;
use engine_bridge::catalog::Catalog;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

/// The weights' size, in GB, read once a token.
const WEIGHTS_GB: f64 = 4.9;
/// The K/V cache at the context size of every trial (16,384 tokens), f16.
const CACHE: f64 = 2.0 * GIB;
/// What the probe's conversation reads of the cache a token, in GB, f16.
const CACHE_READ_GB: f64 = 0.5;
/// Memory past which the process is killed.
const KILLED: f64 = 9.5 * GIB;
/// The prompt whose first token is timed.
const PROMPT: f64 = 2048.0;

/// Threads on the performance cores, the efficiency cores and the
/// performance cores' second hardware threads, in the order the system
/// fills them.
fn placed(threads: f64) -> (f64, f64, f64) {
    (threads.min(8.0), (threads - 8.0).clamp(0.0, 16.0), (threads - 24.0).clamp(0.0, 8.0))
}

/// The speed a K or V cache type leaves a kernel that reads it.
fn dequantized(t: &str, q8: f64, q4: f64) -> f64 {
    match t {
        "q8_0" => q8,
        "q4_0" => q4,
        _ => 1.0,
    }
}

fn hybrid(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let fa = get(s, "flash_attn") == "true";
    let locked = get(s, "mlock") == "true";
    let ubatch = number(s, "ubatch_size");
    if v != "f16" && !fa {
        return Truth::Fails("rejected");
    }
    let scratch = if fa { 0.5 } else { 2.0 } * ubatch * 1024.0 * 1024.0;
    let cache = CACHE * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let rss = WEIGHTS_GB * 1e9 + cache + scratch;
    if rss > KILLED {
        return Truth::Fails("out_of_memory");
    }
    let kernels = dequantized(k, 0.97, 0.92) * dequantized(v, 0.99, 0.96);

    // Decode: memory time or compute time, whichever is longer, and a
    // barrier a thread.
    let threads = number(s, "threads");
    let (p, e, smt) = placed(threads);
    let bandwidth = (9.0 * p + 4.0 * e).min(90.0);
    let slowest = if e > 0.0 { 0.45 } else { 1.0 };
    let compute = 0.36 / (threads * slowest) * (1.0 + 0.04 * smt) / kernels;
    let memory = (WEIGHTS_GB + CACHE_READ_GB * (cache_bytes(k) + cache_bytes(v)) / 2.0) / bandwidth;
    let token = (memory.max(compute) + 0.0004 * threads)
        * if fa { 0.97 } else { 1.0 }
        * if locked { 0.99 } else { 1.0 };
    let decode = 1.0 / token;

    // Prompts: work shared by each thread's speed.
    let (p, e, smt) = placed(number(s, "threads_batch"));
    let work = p + 0.45 * e + 0.25 * smt;
    let steps = match ubatch {
        u if u < 256.0 => 0.7,
        u if u < 512.0 => 0.85,
        u if u < 1024.0 => 1.0,
        u if u < 2048.0 => 1.06,
        _ => 1.08,
    };
    let prefill = 55.0 * work * steps * kernels * if fa { 1.08 } else { 1.0 };
    let ttft = 1000.0 * (PROMPT / prefill + token);
    Truth::Runs(
        [(Metric::DecodeTps, decode), (Metric::TtftMs, ttft), (Metric::PeakRssBytes, rss)].into(),
    )
}

const HYBRID: &str = r#"
name = "hybrid"
profile = "p"
model = "m"
[space]
threads = { min = 1, max = 32, step = 1 }
threads_batch = { min = 1, max = 32, step = 1 }
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
flash_attn = [false, true]
ubatch_size = [128, 256, 512, 1024, 2048]
mlock = [false, true]
[baseline]
threads = 8
threads_batch = 16
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = false
ubatch_size = 512
mlock = false
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "ttft_ms"
[[objectives]]
metric = "peak_rss_bytes"
"#;

/// The world, with `noise`, a heavy tail and drift on top.
pub(super) fn hybrid_world(noise: Noise) -> World {
    World::for_search("hybrid", HYBRID, hybrid, Noise { tail: 0.05, drift: -0.003, ..noise })
        .on(Catalog::llama_cpp_python)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against llama-cpp-python's settings; less than
    /// half the grid fails; the front has more than three
    /// configurations; decode peaks at 8 threads, falls at the 9th and
    /// peaks higher at 13 to 16; prompts gain to the last thread; a
    /// quantized V cache needs flash attention; the largest micro-batch
    /// without flash attention is killed.
    #[test]
    fn hybrid_has_what_it_says() {
        let w = hybrid_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let decode = |t: u32| at(&[("threads", &t.to_string())]).expect("runs")[0];
        assert!(decode(8) > decode(7) && decode(8) > decode(9) * 1.1);
        let best = (1..=32).max_by(|a, b| decode(*a).total_cmp(&decode(*b))).expect("a count");
        assert!((13..=16).contains(&best), "{best}");
        assert!(decode(best) > 1.15 * decode(8));
        let ttft = |t: u32| at(&[("threads_batch", &t.to_string())]).expect("runs")[1];
        assert!(ttft(32) < ttft(24) && ttft(24) < ttft(16));
        assert!(at(&[("cache_type_v", "q8_0")]).is_none());
        assert!(at(&[("cache_type_v", "q8_0"), ("flash_attn", "true")]).is_some());
        assert!(at(&[("ubatch_size", "2048")]).is_none());
        assert!(at(&[("ubatch_size", "2048"), ("flash_attn", "true")]).is_some());
    }
}
