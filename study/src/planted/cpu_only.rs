//! A search world built after every change to the default strategy so
//! far, `serving`'s and `draft`'s included, and kept out of all of them:
//! its figures are a strategy's first sight of it.
//!
//! `cpu`: a dense model on a machine with no GPU, 16 cores and two
//! hardware threads each. Decoding waits on memory bandwidth, which 10
//! threads saturate (a plateau); past the 16 cores the threads share
//! cores and decoding falls by a third (a cliff inside a number's range).
//! Prefill is compute: it grows with `threads_batch` to the 16 cores and
//! a little past them, but only as far as the micro-batch gives each
//! thread work (a micro-batch of 64 keeps 4 threads busy, 256 all 16: an
//! interaction between two numbers), and the micro-batch speeds it in
//! steps up to a plateau. A quantized K cache saves memory and slows
//! both (the CPU dequantizes it). `mlock` spares decoding its page faults
//! but cannot lock more than 9.8 GiB: past it the load fails, a cliff
//! that moves with the K cache type, the micro-batch and the batch.
//! Requests are slowed now and then (a heavy tail) while the machine
//! gets slower (a drift). Decode ↑, prefill ↑, memory ↓.

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

/// Bytes `mlock` can hold: the machine's free memory less a margin.
const LOCKABLE: f64 = 9.8 * GIB;

fn cpu(s: &Settings) -> Truth {
    let k = get(s, "cache_type_k");
    let threads = number(s, "threads");
    let batch_threads = number(s, "threads_batch");
    let ubatch = number(s, "ubatch_size");
    let batch = number(s, "batch_size");
    let locked = get(s, "mlock") == "true";
    // 7.5 GiB of weights, an f16 V cache of 1 GiB and a K cache of 1 GiB
    // at f16, and buffers that grow with the micro-batch and the batch.
    let rss = 7.5 * GIB
        + 1.0 * GIB
        + cache_bytes(k) * GIB
        + ubatch / 512.0 * 0.35 * GIB
        + batch / 2048.0 * 0.1 * GIB;
    if locked && rss > LOCKABLE {
        return Truth::Fails("out_of_memory");
    }
    let (decode_k, prefill_k) = match k {
        "q8_0" => (0.97, 0.98),
        "q4_0" => (0.9, 0.95),
        _ => (1.0, 1.0),
    };
    let bandwidth = (threads.min(10.0) / 10.0).sqrt();
    let shared = if threads > 16.0 { 0.67 } else { 1.0 };
    let faults = if locked { 1.06 } else { 1.0 };
    let decode = 14.0 * bandwidth * shared * decode_k * faults;
    // Each thread needs 16 tokens of the micro-batch to work on.
    let busy = batch_threads.min(ubatch / 16.0);
    let cores = busy.min(16.0) / 16.0;
    let siblings = 1.0 + 0.15 * (busy - 16.0).max(0.0) / 16.0;
    let steps = match ubatch {
        u if u < 128.0 => 0.35,
        u if u < 256.0 => 0.55,
        u if u < 512.0 => 0.8,
        u if u < 1024.0 => 1.0,
        _ => 1.05,
    };
    let prefill = 180.0 * cores.powf(0.9) * siblings * steps * prefill_k;
    Truth::Runs(
        [(Metric::DecodeTps, decode), (Metric::PrefillTps, prefill), (Metric::PeakRssBytes, rss)]
            .into(),
    )
}

const CPU: &str = r#"
name = "cpu"
profile = "p"
model = "m"
constraints = ["ubatch_size <= batch_size"]
[space]
threads = { min = 1, max = 32, step = 1 }
threads_batch = { min = 1, max = 32, step = 1 }
ubatch_size = [64, 128, 256, 512, 1024]
batch_size = [256, 512, 1024, 2048, 4096]
cache_type_k = ["f16", "q8_0", "q4_0"]
mlock = [false, true]
[baseline]
threads = 4
threads_batch = 4
ubatch_size = 512
batch_size = 2048
cache_type_k = "f16"
mlock = false
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "prefill_tps"
[[objectives]]
metric = "peak_rss_bytes"
"#;

/// The world, with `noise` and a heavy tail and drift on top.
pub(super) fn cpu_world(noise: Noise) -> World {
    World::for_search("cpu", CPU, cpu, Noise { tail: 0.05, drift: -0.003, ..noise })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks; less than half the space fails; the front has
    /// more than three configurations; decoding falls past the 16 cores
    /// and is flat from 10 threads to 16; the threads prefill can use
    /// follow the micro-batch; `mlock` fails with an f16 K cache at a
    /// micro-batch of 512 and runs with `q4_0`.
    #[test]
    fn cpu_has_what_it_says() {
        let w = cpu_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let decode = |t: &str| at(&[("threads", t)]).expect("runs")[0];
        assert_eq!(decode("10"), decode("16"));
        assert!(decode("17") < 0.7 * decode("16"));
        assert!(decode("10") > 1.5 * decode("4"));
        let prefill =
            |tb: &str, u: &str| at(&[("threads_batch", tb), ("ubatch_size", u)]).expect("runs")[1];
        assert_eq!(prefill("4", "64"), prefill("32", "64"));
        assert!(prefill("16", "256") > 3.0 * prefill("4", "256"));
        assert!(prefill("32", "1024") > prefill("16", "1024"));
        assert!(at(&[("mlock", "true")]).is_none());
        assert!(at(&[("mlock", "true"), ("cache_type_k", "q4_0")]).is_some());
    }
}
