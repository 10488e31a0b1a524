//! A planted world of what the simple worlds lack: an effect confined to
//! one region of the space, two numbers acting together, memory that is a
//! constant plus a product of settings, and a cliff of failures that
//! needs three conditions at once, next to a bystander the failures
//! happen to share values of.

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Fact, Truth};
use crate::study::Metric;

/// Decode peaks at 6 threads, and a q4_0 K cache slows it by 30 % only at
/// the longest context; prefill grows with the micro-batch more steeply
/// the more threads there are (numbers acting together); memory is a
/// constant plus the K cache (context × its bytes, less with flash
/// attention) plus a compute buffer of micro-batch × context; without
/// flash attention, the longest context with a micro-batch of 512 or more
/// runs out of memory. `batch_size` does nothing.
pub fn truth(s: &Settings) -> Truth {
    let k = get(s, "cache_type_k");
    let fa = get(s, "flash_attn") == "on";
    let (ctx, threads, ubatch) =
        (number(s, "ctx_size"), number(s, "threads"), number(s, "ubatch_size"));
    if ctx >= 65536.0 && !fa && ubatch >= 512.0 {
        return Truth::Fails("out_of_memory");
    }
    let slow_k = if k == "q4_0" && ctx >= 65536.0 { 0.7 } else { 1.0 };
    let decode = 30.0
        * (1.0 - 0.6 * ((threads - 6.0) / 10.0).powi(2))
        * slow_k
        * if fa { 1.05 } else { 1.0 };
    let (u, t) = ((ubatch / 512.0).log2(), (threads / 8.0).log2());
    let prefill =
        400.0 * (ubatch / 512.0).powf(0.3) * (threads / 8.0).powf(0.5) * (1.0 + 0.15 * u * t);
    let rss = 3.0 * GIB
        + ctx * 96.0 * 1024.0 * cache_bytes(k) * if fa { 0.8 } else { 1.0 }
        + ubatch * ctx * 60.0;
    Truth::Runs(
        [
            (Metric::DecodeTps, decode),
            (Metric::PrefillTps, prefill),
            (Metric::TtftMs, 512.0 / prefill * 1000.0),
            (Metric::PeakRssBytes, rss),
        ]
        .into(),
    )
}

/// What a planner knows of region's memory: the weights (it misses a
/// sixth of the constant) and the K cache's arithmetic; not the
/// flash-attention factor, nor the compute buffer.
pub fn plan(s: &Settings) -> f64 {
    2.5 * GIB + number(s, "ctx_size") * 96.0 * 1024.0 * cache_bytes(get(s, "cache_type_k"))
}

pub const STUDY: &str = r#"
name = "region"
profile = "p"
model = "m"
[space]
ctx_size = [4096, 16384, 65536]
cache_type_k = ["f16", "q8_0", "q4_0"]
flash_attn = ["off", "on"]
threads = { min = 1, max = 16, step = 1 }
ubatch_size = [128, 256, 512, 1024]
batch_size = [1024, 2048]
[baseline]
ctx_size = 16384
cache_type_k = "f16"
flash_attn = "on"
threads = 4
ubatch_size = 512
batch_size = 2048
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "prefill_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#;

pub fn facts() -> Vec<Fact> {
    use Fact::*;
    let s = String::from;
    vec![
        Peak {
            setting: s("threads"),
            metric: Metric::DecodeTps,
            best: (4..=8).map(|t| t.to_string()).collect(),
        },
        Interaction { a: s("threads"), b: s("ubatch_size"), metric: Metric::PrefillTps },
        Effect { setting: s("ubatch_size"), metric: Metric::PrefillTps },
        Effect { setting: s("ctx_size"), metric: Metric::PeakRssBytes },
        Effect { setting: s("cache_type_k"), metric: Metric::PeakRssBytes },
        FailureRule { cause: s("out_of_memory") },
        NoEffect { setting: s("batch_size"), metric: Metric::DecodeTps },
    ]
}
