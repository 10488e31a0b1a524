//! A search world built after every change to the default strategy that
//! the worlds before it led to, and kept out of all of them: its figures
//! are a strategy's first sight of it.
//!
//! `serving`: a model wholly on a 12 GiB GPU serving several users at
//! once. The context is shared by the slots (`parallel`), and a slot too
//! small for the probe's 2,000-token prompt fails it: a failing region
//! bounded by a diagonal between two numbers. A quantized V cache without
//! flash attention is refused. The GPU holds the weights, the K/V cache
//! and a compute buffer that grows with the micro-batch and, without
//! flash attention, with the context too: past 12 GiB it runs out of
//! memory, a cliff that moves with five settings. Throughput over all
//! slots grows with their number, less than in proportion, while each
//! slot's speed falls with its context (far less with flash attention)
//! and a quantized K cache slows decoding unless flash attention is on;
//! the CPU threads that sample for the slots matter only once there are
//! many slots (an effect confined to a region, its edge moving with
//! `parallel`). The first token waits on prefill, which the micro-batch
//! speeds in steps up to a plateau, and on the other slots' decoding.
//! Requests are slowed now and then (a heavy tail) while the machine gets
//! faster (the drift the other way from `draft`'s). Throughput ↑, time
//! to first token ↓, GPU memory ↓.

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

fn serving(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let fa = get(s, "flash_attn") == "on";
    let slots = number(s, "parallel");
    let ctx = number(s, "ctx_size");
    let threads = number(s, "threads");
    let ubatch = number(s, "ubatch_size");
    let per_slot = ctx / slots;
    if per_slot < 2048.0 {
        // llama-server answers a prompt longer than a slot's context with
        // an error: the probe fails.
        return Truth::Fails("probe_failed");
    }
    if v != "f16" && !fa {
        return Truth::Fails("rejected");
    }
    let kv = ctx / 4096.0 * 0.125 * GIB * (cache_bytes(k) + cache_bytes(v)) / 2.0;
    let scratch = if fa { 0.0 } else { ubatch / 512.0 * ctx / 32768.0 * 0.6 * GIB };
    let gpu = 6.0 * GIB + kv + ubatch / 512.0 * 0.2 * GIB + scratch;
    if gpu > 12.0 * GIB {
        return Truth::Fails("out_of_memory");
    }
    let attention = 1.0 + per_slot / 65536.0 * if fa { 0.3 } else { 1.0 };
    let k_cost = match (k, fa) {
        ("f16", _) => 1.0,
        (_, false) => 0.8,
        ("q4_0", true) => 0.95,
        _ => 0.98,
    };
    // Sampling for the slots wants a thread per four of them.
    let sampling = (threads / (slots / 4.0)).min(1.0).sqrt();
    let decode = 50.0 / attention * k_cost * slots.powf(0.75) * sampling;
    let steps = match ubatch {
        u if u < 256.0 => 0.45,
        u if u < 512.0 => 0.7,
        u if u < 1024.0 => 0.9,
        _ => 1.0,
    };
    let prefill = 2000.0 * steps * if fa { 1.15 } else { 1.0 };
    let ttft = 2000.0 / prefill * 1000.0 * (1.0 + 0.15 * (slots - 1.0).sqrt());
    Truth::Runs(
        [(Metric::DecodeTps, decode), (Metric::TtftMs, ttft), (Metric::PeakGpuBytes, gpu)].into(),
    )
}

const SERVING: &str = r#"
name = "serving"
profile = "p"
model = "m"
[space]
parallel = [1, 2, 4, 8, 16]
ctx_size = [8192, 16384, 32768, 65536, 131072]
flash_attn = ["off", "on"]
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
ubatch_size = [128, 256, 512, 1024, 2048]
threads = { min = 1, max = 16, step = 1 }
[baseline]
parallel = 1
ctx_size = 8192
flash_attn = "off"
cache_type_k = "f16"
cache_type_v = "f16"
ubatch_size = 512
threads = 4
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "ttft_ms"
[[objectives]]
metric = "peak_gpu_bytes"
"#;

/// The world, with `noise` and a heavy tail and drift on top.
pub(super) fn serving_world(noise: Noise) -> World {
    World::for_search("serving", SERVING, serving, Noise { tail: 0.1, drift: 0.002, ..noise })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planted::{Cost, Judge};

    /// The study checks; less than half the space fails; the front has
    /// more than three configurations; 16 slots fail at a context of
    /// 16,384 and run at 32,768 (the diagonal); threads matter with 16
    /// slots and not with one or four.
    #[test]
    fn serving_has_what_it_says() {
        let w = serving_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let study = w.study("random", 0, 10);
        let judge = Judge::new(&w, &study, Cost::default());
        let decode = |slots: &str, threads: &str| {
            let mut c = study.baseline.clone();
            c.extend([
                ("parallel".to_string(), slots.to_string()),
                ("ctx_size".into(), "131072".into()),
                ("flash_attn".into(), "on".into()),
                ("threads".into(), threads.into()),
            ]);
            judge.values(&study, &c).expect("runs")[0]
        };
        assert_eq!(decode("1", "1"), decode("1", "16"));
        assert!(decode("16", "8") > 1.5 * decode("16", "1"));
        assert_eq!(decode("4", "1"), decode("4", "16"));
        let runs_at = |ctx: &str| {
            let mut c = study.baseline.clone();
            c.extend([("parallel".to_string(), "16".to_string()), ("ctx_size".into(), ctx.into())]);
            judge.values(&study, &c).is_some()
        };
        assert!(!runs_at("16384") && runs_at("32768"));
    }
}
