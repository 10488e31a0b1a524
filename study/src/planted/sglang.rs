//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it. The first world with a continuous setting.
//!
//! `sglang`: an 8B model in bf16 (16 GiB of weights) served by SGLang on
//! a 24 GiB GPU to many users at once, measured by the load probe (the
//! `agent` workload, within 60 ms a token). `mem_fraction_static`, a
//! number anywhere from 0.7 to 0.95, is the share of the GPU for the
//! weights and the K/V cache; the rest must hold one prefill chunk's
//! activations and the CUDA graphs. Too small a share and the cache
//! cannot hold one 16k context (SGLang refuses to start); too large and
//! the activations run out of memory: a band that a larger chunk
//! (`chunked_prefill_size`, with -1 prefilling each prompt whole) or a
//! larger graph batch narrows from above and an fp8 cache widens from
//! below. Each objective's best share lies just under that moving cliff.
//!
//! The requests share a 2,000-token system prompt that the radix cache
//! keeps, so with it each prefills only its own 6,000 tokens. How many
//! run at once is the least of `max_running_requests` and what the cache
//! holds, and past the point where each one's tokens come slower than
//! 60 ms more do not count. A larger chunk prefills a prompt in fewer
//! steps (a faster first token) but stalls the running sequences longer
//! (fewer requests within the objective) and, by lowering the band's top,
//! leaves less to the cache: a trade between the objectives through memory. The attention kernels:
//! `triton` is a tenth slower, `torch_native` runs without CUDA graphs at a third of the
//! speed (a plateau of bad configurations), and `fa3` needs a newer GPU
//! (always refused). Goodput ↑, time to first token ↓.

use engine_bridge::{Catalog, Settings};

use super::formula::{GIB, get, number, within_objective};
use super::{Noise, Truth, World};
use crate::study::Metric;

const GPU: f64 = 24.0 * GIB;
const WEIGHTS: f64 = 16.0 * GIB;
/// K/V cache bytes a token takes in bf16 (32 layers, 8 K/V heads of 128).
const KV_TOKEN: f64 = 128.0 * 1024.0;
/// The context one sequence must fit in the cache.
const CONTEXT: f64 = 16384.0;
/// The load probe's requests: the shared prefix, each one's own prompt,
/// and the tokens it generates.
const SHARED: f64 = 2000.0;
const OWN: f64 = 6000.0;
const OUTPUT: f64 = 300.0;

fn sglang(s: &Settings) -> Truth {
    let share = number(s, "mem_fraction_static");
    let most = number(s, "max_running_requests");
    let chunk = match number(s, "chunked_prefill_size") {
        c if c <= 0.0 => 16384.0,
        c => c,
    };
    let kv = get(s, "kv_cache_dtype");
    let backend = get(s, "attention_backend");
    let radix = get(s, "disable_radix_cache") != "true";
    if backend == "fa3" {
        return Truth::Fails("rejected");
    }
    let graphs = backend != "torch_native";
    let activations = chunk / 2048.0 * 0.45 * GIB;
    let graph_memory =
        if graphs { 0.25 * GIB + most.min(160.0) * 4.0 * 1024.0 * 1024.0 } else { 0.0 };
    if (1.0 - share) * GPU < 0.6 * GIB + activations + graph_memory {
        return Truth::Fails("out_of_memory");
    }
    let per_token = KV_TOKEN * if kv == "auto" { 1.0 } else { 0.5 };
    let tokens = (share * GPU - WEIGHTS) / per_token;
    if tokens < CONTEXT {
        return Truth::Fails("rejected");
    }
    let per_request = OWN + OUTPUT + if radix { 0.0 } else { SHARED };
    let held = (tokens / per_request).floor().min(most).max(1.0);
    let kernels = match backend {
        "triton" => 0.9,
        "torch_native" => 0.35,
        _ => 1.0,
    };
    let cache = match kv {
        "fp8_e5m2" => 0.96,
        "fp8_e4m3" => 0.98,
        _ => 1.0,
    };
    // Each sequence's decode speed with `b` running: slower the more run,
    // and the longer each step's prefill chunk stalls them.
    let speed = |b: f64| {
        let small = if graphs { 1.0 } else { 0.8 + 0.2 * (b / 64.0).min(1.0) };
        44.0 / (1.0 + b / 40.0).powf(0.6) * kernels * cache * small / (1.0 + chunk / 16384.0)
    };
    let (running, goodput) = within_objective(held, speed, OUTPUT);
    let prompt = OWN + if radix { 0.0 } else { SHARED };
    let steps = (prompt / chunk).ceil();
    let step_ms = (15.0 + chunk.min(prompt) * 0.025) / kernels + running * 0.2;
    Truth::Runs([(Metric::GoodputRps, goodput), (Metric::TtftMs, steps * step_ms)].into())
}

const SGLANG: &str = r#"
name = "sglang"
profile = "p"
model = "m"
[space]
mem_fraction_static = { min = 0.7, max = 0.95, points = 11 }
max_running_requests = { min = 8, max = 512, log = true }
chunked_prefill_size = [-1, 512, 1024, 2048, 4096, 8192]
kv_cache_dtype = ["auto", "fp8_e5m2", "fp8_e4m3"]
attention_backend = ["flashinfer", "triton", "torch_native", "fa3"]
disable_radix_cache = [false, true]
[baseline]
mem_fraction_static = 0.88
max_running_requests = 64
chunked_prefill_size = 2048
kv_cache_dtype = "auto"
attention_backend = "flashinfer"
disable_radix_cache = false
[probes.load]
workload = "agent"
slo = { ttft_p99_ms = 2000, itl_p99_ms = 60 }
[[objectives]]
metric = "goodput_rps"
[[objectives]]
metric = "ttft_ms"
"#;

/// The world, with `noise` and a heavy tail on top.
pub(super) fn sglang_world(noise: Noise) -> World {
    World::for_search("sglang", SGLANG, sglang, Noise { tail: 0.05, ..noise }).on(Catalog::sglang)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against SGLang's settings; less than half the
    /// grid fails; the front has more than three configurations; the
    /// share's band closes from above with a larger chunk and opens from
    /// below with an fp8 cache; a larger chunk speeds the first token and
    /// costs goodput; the radix cache and a larger share hold more.
    #[test]
    fn sglang_has_what_it_says() {
        let w = sglang_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let goodput = |changes: &[(&str, &str)]| at(changes).expect("runs")[0];
        let ttft = |changes: &[(&str, &str)]| at(changes).expect("runs")[1];
        assert!(goodput(&[]) > 0.0);
        assert!(at(&[("mem_fraction_static", "0.74")]).is_none(), "too small for 16k");
        assert!(at(&[("mem_fraction_static", "0.74"), ("kv_cache_dtype", "fp8_e5m2")]).is_some());
        // Whole prompts at once fit only in a narrow band of shares.
        let whole = |share| at(&[("chunked_prefill_size", "-1"), ("mem_fraction_static", share)]);
        assert!(whole("0.88").is_none() && whole("0.85").is_none() && whole("0.7").is_none());
        assert!(whole("0.8").is_some());
        assert!(ttft(&[("chunked_prefill_size", "512")]) > ttft(&[]));
        assert!(goodput(&[("chunked_prefill_size", "512")]) > goodput(&[]));
        assert!(goodput(&[("disable_radix_cache", "true")]) <= goodput(&[]));
        assert!(goodput(&[("mem_fraction_static", "0.92")]) > goodput(&[]));
        assert!(goodput(&[("attention_backend", "torch_native")]) < 0.5 * goodput(&[]));
        assert!(at(&[("attention_backend", "fa3")]).is_none());
    }
}
