//! Search worlds with bounds on metrics that are not optimized, the way a
//! user asks "the fastest decode that fits in 8 GiB of VRAM and costs the
//! model no more than 0.01 nats" (`bounded`), or "the least memory and
//! divergence that still decodes 16 tokens a second" (`floor`, the same
//! machine). A configuration that breaks a bound counts for nothing.
//!
//! `bounded`: a model of 40 layers (0.16 GiB each) on one GPU of 12 GiB.
//! Decode is fastest with every layer on the GPU, but the bound is 8 GiB:
//! the layers that fit depend on both cache types (each layer's K/V cache
//! at 32k tokens of context), the micro-batch's compute buffer (halved by
//! flash attention) and nothing else. A quantized V cache needs flash
//! attention (the engine refuses it otherwise: a failing region), and
//! past 12 GiB the GPU runs out. The layers left on the CPU wait on its
//! memory bandwidth, which the thread count sets only there (an effect
//! confined to a region), best at two threads and one more for every
//! three layers, each thread past that taking 4 % back. The divergence
//! bound allows `q4_0` for V only beside an f16 K: `q8_0` for both is
//! best, at 36 layers, the smallest micro-batches and 3 to 6 threads.
//! Decode ↑; peak GPU memory ≤ 8 GiB, mean KL divergence ≤ 0.01.

use std::sync::LazyLock;

use engine_bridge::Settings;

use super::formula::{GIB, cache_bytes, divergence, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

const LAYERS: f64 = 40.0;

fn bounded(s: &Settings) -> Truth {
    let (k, v) = (get(s, "cache_type_k"), get(s, "cache_type_v"));
    let flash = get(s, "flash_attn") == "on";
    if v != "f16" && !flash {
        return Truth::Fails("rejected");
    }
    let on_gpu = number(s, "n_gpu_layers").min(LAYERS);
    let threads = number(s, "threads");
    let ubatch = number(s, "ubatch_size");
    let cache = 0.04 * GIB * (cache_bytes(k) + cache_bytes(v));
    let compute = 0.2 * GIB + 0.25 * GIB * ubatch / 512.0 * if flash { 0.5 } else { 1.0 };
    let vram = 0.4 * GIB + on_gpu * (0.16 * GIB + cache) + compute;
    if vram > 12.0 * GIB {
        return Truth::Fails("out_of_memory");
    }
    let best = 2.0 + (LAYERS - on_gpu) / 3.0;
    let bandwidth =
        (threads / best).min(1.0).sqrt() * (1.0 - 0.04 * (threads - best).max(0.0)).max(0.05);
    let cpu_seconds = (LAYERS - on_gpu) * 0.0015 / bandwidth;
    let gpu_seconds = 0.02 + on_gpu * 0.0006 * if flash { 0.97 } else { 1.0 };
    let kld = divergence(k, 0.002, 0.03) + divergence(v, 0.001, 0.009);
    Truth::Runs(
        [
            (Metric::DecodeTps, 1.0 / (cpu_seconds + gpu_seconds)),
            (Metric::PeakGpuBytes, vram),
            (Metric::KldMean, kld),
        ]
        .into(),
    )
}

/// The machine both worlds search: the space and the baseline.
const MACHINE: &str = r#"
profile = "p"
model = "m"
[space]
n_gpu_layers = { min = 0, max = 40, step = 1 }
threads = { min = 1, max = 16, step = 1 }
cache_type_k = ["f16", "q8_0", "q4_0"]
cache_type_v = ["f16", "q8_0", "q4_0"]
flash_attn = ["off", "on"]
ubatch_size = [128, 256, 512, 1024, 2048]
[baseline]
n_gpu_layers = 0
threads = 4
cache_type_k = "f16"
cache_type_v = "f16"
flash_attn = "off"
ubatch_size = 512
[probes.kld]
"#;

/// The model file: 40 blocks of 0.16 GiB and 4 K/V heads of 164 a block
/// (an f16 cache of 0.08 GiB a block at the trained 32k context), with a
/// small output layer.
static MODEL: LazyLock<super::model_file::File> =
    LazyLock::new(|| super::model_file::dense(40, 0.16 * GIB, 0.02 * GIB, (4, 164), 32768));

fn plan(s: &Settings) -> Option<f64> {
    MODEL.gpu_bytes(s)
}

/// `bounded`'s objective and bounds.
const BOUNDED: &str = r#"
[[objectives]]
metric = "decode_tps"
[[bounds]]
metric = "peak_gpu_bytes"
max = "8 GiB"
[[bounds]]
metric = "kld_mean"
max = "0.01"
"#;

/// The same machine asked the other way round: the least GPU memory and
/// divergence that still decodes 16 tokens a second. The bound is on a
/// speed, measured with a heavy tail; the front is each pair of cache
/// types at the fewest layers that reach the speed, with the thread count
/// that serves the layers left on the CPU best (9 at 20 layers).
const FLOOR: &str = r#"
[[objectives]]
metric = "peak_gpu_bytes"
[[objectives]]
metric = "kld_mean"
[[bounds]]
metric = "decode_tps"
min = "16"
"#;

/// The worlds, with `noise` (and, in `floor`, a heavy tail on top).
pub(super) fn bounded_worlds(noise: Noise) -> Vec<World> {
    let study = |name: &str, targets: &str| format!("name = {name:?}\n{MACHINE}{targets}");
    vec![
        World::for_search("bounded", &study("bounded", BOUNDED), bounded, noise)
            .with_gpu_plan(plan),
        World::for_search("floor", &study("floor", FLOOR), bounded, Noise { tail: 0.1, ..noise })
            .with_gpu_plan(plan),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::planted::{Cost, Judge};
    use crate::study::Study;

    fn with_baseline(study: &Study, c: &Settings) -> Settings {
        let mut out = study.baseline.clone();
        out.extend(c.iter().map(|(k, v)| (k.clone(), v.clone())));
        out
    }

    /// The best configuration within the bounds is the one the module
    /// names, the fastest of all breaks the memory bound, and the bounds
    /// leave the judge a part of what runs.
    #[test]
    fn the_bounds_decide_the_best_configuration() {
        let w = &bounded_worlds(Noise::default())[0];
        let study = w.study("random", 0, 10);
        let grid: Vec<_> = study.space.grid().collect();
        let fails =
            grid.iter().filter(|c| matches!(bounded(&with_baseline(&study, c)), Truth::Fails(_)));
        assert!((1..grid.len() / 2).contains(&fails.count()));
        let judge = Judge::new(w, &study, Cost::default());
        let with = |changes: &[(&str, &str)]| {
            let mut c = study.baseline.clone();
            c.extend(changes.iter().map(|(k, v)| (k.to_string(), v.to_string())));
            c
        };
        let decode = |c: &Settings| judge.values(&study, c).map(|v| v[0]);
        let within: Vec<_> = grid.iter().filter_map(|c| Some((decode(c)?, c))).collect();
        let (_, best) = within.iter().max_by(|a, b| a.0.total_cmp(&b.0)).unwrap();
        for (k, v) in [("n_gpu_layers", "36"), ("cache_type_k", "q8_0"), ("cache_type_v", "q8_0")] {
            assert_eq!(best[k], v, "{best:?}");
        }
        // The two smallest micro-batches leave room for the same layers.
        assert_eq!(best["flash_attn"], "on");
        assert!(["128", "256"].contains(&best["ubatch_size"].as_str()), "{best:?}");
        // Every layer on the GPU runs, faster, but over the bound.
        let all = with(&[("n_gpu_layers", "40"), ("flash_attn", "on"), ("ubatch_size", "128")]);
        assert!(matches!(bounded(&all), Truth::Runs(_)));
        assert_eq!(decode(&all), None);
        // q4_0 for V passes the divergence bound beside an f16 K only.
        let q4v = [("flash_attn", "on"), ("cache_type_v", "q4_0")];
        assert!(decode(&with(&q4v)).is_some());
        assert!(decode(&with(&[q4v[0], q4v[1], ("cache_type_k", "q8_0")])).is_none());
    }

    /// In `floor`, every configuration on the front decodes at 16 tokens a
    /// second or more, at 20 layers and 9 threads, one for each pair of
    /// cache types the divergence tells apart.
    #[test]
    fn the_speed_floor_sets_the_layers_and_threads() {
        let w = &bounded_worlds(Noise::default())[1];
        let study = w.study("random", 0, 10);
        let judge = Judge::new(w, &study, Cost::default());
        let grid: Vec<_> = study.space.grid().collect();
        let within: Vec<_> = grid.iter().filter(|c| judge.values(&study, c).is_some()).collect();
        let points: Vec<_> = within.iter().map(|c| judge.values(&study, c).unwrap()).collect();
        let goals: Vec<_> = study.objectives.iter().map(|t| t.goal).collect();
        let front = crate::pareto::front(&points, &goals);
        assert_eq!(front.len(), 5);
        for i in front {
            let c = with_baseline(&study, within[i]);
            let Truth::Runs(m) = bounded(&c) else { panic!("{c:?} fails") };
            assert!(m[&Metric::DecodeTps] >= 16.0);
            assert_eq!((c["n_gpu_layers"].as_str(), c["threads"].as_str()), ("20", "9"));
        }
    }
}
