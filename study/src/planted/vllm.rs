//! A search world on another engine, built after every change to the
//! default strategy so far, `cpu`'s included, and kept out of all of
//! them: its figures are a strategy's first sight of it.
//!
//! `vllm`: a 14B model in bf16 (28 GiB of weights) served by vLLM on a
//! 48 GiB GPU to many users at once, measured by the load probe (the
//! `agent` workload, within 60 ms a token). vLLM
//! takes the share `gpu_memory_utilization` of the GPU up front; what the
//! weights, the activations of one scheduler step (which grow with
//! `max_num_batched_tokens`) and the CUDA graphs (none with
//! `enforce_eager`; more the more sequences are captured) leave of it is
//! the K/V cache. Too little for the weights and activations and the load
//! runs out of memory; too little cache for one sequence of the context
//! (`max_model_len`) and vLLM refuses to start: a cliff that moves with
//! four settings. vLLM also refuses a step smaller than the batch
//! (`max_num_batched_tokens < max_num_seqs`, a diagonal).
//!
//! The requests share a 1,000-token system prompt: with prefix caching
//! each holds and prefills only its own 2,000 tokens. How many run at
//! once is the least of `max_num_seqs` and what the cache holds (a
//! ceiling one number sets only below the other's: an interaction
//! through a minimum), and past the point where each one's tokens come
//! slower than the service objective (60 ms a token) more do not count.
//! A larger scheduler step prefills a prompt in fewer chunks (a faster
//! first token) but stalls the running sequences longer each step (fewer
//! requests within the objective): a trade between two objectives. An
//! fp8 cache holds twice the tokens and decodes a little slower; without
//! CUDA graphs small batches decode slower. Requests are slowed now and
//! then (a heavy tail) while the machine gets slower (a drift).
//! Goodput ↑, time to first token ↓, GPU memory ↓.

use engine_bridge::{Catalog, Settings};

use super::formula::{GIB, get, number, within_objective};
use super::{Noise, Truth, World};
use crate::study::Metric;

const GPU: f64 = 48.0 * GIB;
const WEIGHTS: f64 = 28.0 * GIB;
/// K/V cache bytes a token takes in bf16 (48 layers, 8 K/V heads of 128).
const KV_TOKEN: f64 = 192.0 * 1024.0;
/// The load probe's requests: the shared prefix, each one's own prompt,
/// and the tokens it generates.
const SHARED: f64 = 1000.0;
const OWN: f64 = 2000.0;
const OUTPUT: f64 = 300.0;

fn vllm(s: &Settings) -> Truth {
    let share = number(s, "gpu_memory_utilization");
    let seqs = number(s, "max_num_seqs");
    let step = number(s, "max_num_batched_tokens");
    let fp8 = get(s, "kv_cache_dtype") == "fp8";
    let eager = get(s, "enforce_eager") == "true";
    let prefix = get(s, "enable_prefix_caching") == "true";
    let context = number(s, "ctx_size");
    if step < seqs {
        return Truth::Fails("rejected");
    }
    let activations = step / 8192.0 * 1.5 * GIB;
    let graphs = if eager { 0.0 } else { 0.4 * GIB + seqs.min(512.0) * 2.0 * 1024.0 * 1024.0 };
    let cache = share * GPU - WEIGHTS - activations - graphs;
    if cache <= 0.0 {
        return Truth::Fails("out_of_memory");
    }
    let tokens = cache / (KV_TOKEN * if fp8 { 0.5 } else { 1.0 });
    if tokens < context {
        return Truth::Fails("rejected");
    }
    let per_request = OWN + OUTPUT + if prefix { 0.0 } else { SHARED };
    let held = (tokens / per_request).floor().min(seqs).max(1.0);
    // Each sequence's decode speed with `b` running: slower the more run,
    // slower still without graphs at small batches, with an fp8 cache,
    // and with a larger prefill chunk in every step.
    let speed = |b: f64| {
        let graphs = if eager { 0.75 + 0.25 * (b / 64.0).min(1.0) } else { 1.0 };
        let cache = if fp8 { 0.95 } else { 1.0 };
        38.0 / (1.0 + b / 48.0).powf(0.6) * graphs * cache / (1.0 + step / 32768.0)
    };
    let (running, goodput) = within_objective(held, speed, OUTPUT);
    let prompt = OWN + if prefix { 0.0 } else { SHARED };
    let chunks = (prompt / step).ceil();
    let step_ms = 20.0 + step.min(prompt) * 0.03 + running * 0.15;
    let ttft = chunks * step_ms * if eager { 1.05 } else { 1.0 };
    let memory = share * GPU + if eager { 0.0 } else { 0.5 * GIB };
    Truth::Runs(
        [(Metric::GoodputRps, goodput), (Metric::TtftMs, ttft), (Metric::PeakGpuBytes, memory)]
            .into(),
    )
}

const VLLM: &str = r#"
name = "vllm"
profile = "p"
model = "m"
[space]
gpu_memory_utilization = [0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95]
max_num_seqs = [8, 16, 32, 64, 128, 256, 512, 1024]
max_num_batched_tokens = [512, 1024, 2048, 4096, 8192, 16384]
kv_cache_dtype = ["auto", "fp8"]
enforce_eager = [false, true]
enable_prefix_caching = [true, false]
ctx_size = [8192, 16384, 32768]
[baseline]
gpu_memory_utilization = 0.9
max_num_seqs = 256
max_num_batched_tokens = 8192
kv_cache_dtype = "auto"
enforce_eager = false
enable_prefix_caching = true
ctx_size = 16384
[probes.load]
workload = "agent"
slo = { ttft_p99_ms = 2000, itl_p99_ms = 60 }
[[objectives]]
metric = "goodput_rps"
[[objectives]]
metric = "ttft_ms"
[[objectives]]
metric = "peak_gpu_bytes"
"#;

/// The world, with `noise` and a heavy tail and drift on top.
pub(super) fn vllm_world(noise: Noise) -> World {
    World::for_search("vllm", VLLM, vllm, Noise { tail: 0.1, drift: -0.002, ..noise })
        .on(Catalog::vllm)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against vLLM's settings; less than half the space
    /// fails; the front has more than three configurations; the cache's
    /// ceiling binds below `max_num_seqs` and not above it; an fp8 cache
    /// or prefix caching holds more; a larger step speeds the first token
    /// and costs goodput; a low share of the GPU runs out of memory and a
    /// long context at a middling share is refused.
    #[test]
    fn vllm_has_what_it_says() {
        let w = vllm_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let goodput = |changes: &[(&str, &str)]| at(changes).expect("runs")[0];
        assert!(goodput(&[]) > 0.0);
        assert_eq!(goodput(&[("max_num_seqs", "128")]), goodput(&[]));
        assert!(goodput(&[("max_num_seqs", "8")]) < 0.5 * goodput(&[]));
        assert!(goodput(&[("kv_cache_dtype", "fp8")]) > goodput(&[]));
        assert!(goodput(&[("enable_prefix_caching", "false")]) < goodput(&[]));
        let ttft = |step: &str| at(&[("max_num_batched_tokens", step)]).expect("runs")[1];
        assert!(ttft("4096") < ttft("1024"));
        assert!(goodput(&[("max_num_batched_tokens", "2048")]) > goodput(&[]));
        assert!(at(&[("gpu_memory_utilization", "0.6")]).is_none());
        assert!(at(&[("gpu_memory_utilization", "0.7"), ("ctx_size", "32768")]).is_none());
        assert!(at(&[("gpu_memory_utilization", "0.7"), ("ctx_size", "8192")]).is_some());
        assert!(at(&[("max_num_seqs", "1024"), ("max_num_batched_tokens", "512")]).is_none());
    }
}
