//! The memory planner: what a model needs before it is loaded.
//!
//! A GGUF file's own metadata (layers, KV heads, head sizes) and tensor
//! table give the weight bytes and the K/V cache bytes per token for each
//! cache type, so a configuration that cannot fit is known before a
//! ten-minute load.

use std::path::Path;

use serde::Serialize;

use crate::placement::{Place, Placement};
use serde_json::Value;

/// llama.cpp rounds the context (K/V cache cells) up to a multiple of this.
pub const CTX_PAD: u64 = 256;

/// Bytes per element of a K/V cache type: block bytes over block size.
pub fn cache_type_bytes(name: &str) -> Option<f64> {
    Some(match name {
        "f32" => 4.0,
        "f16" | "bf16" => 2.0,
        "q8_0" => 34.0 / 32.0,
        "q5_1" => 24.0 / 32.0,
        "q5_0" => 22.0 / 32.0,
        "q4_1" => 20.0 / 32.0,
        "q4_0" | "iq4_nl" => 18.0 / 32.0,
        _ => return None,
    })
}

/// The settings whose ratio is what each request of llama-server gets:
/// the context (`ctx_size`) is divided among the slots (`parallel`), so a
/// prompt fits, and attention costs, by `ctx_size / parallel` (unless the
/// slots share one cache, `--kv-unified`, which the catalog does not
/// offer).
pub const SLOT_CONTEXT: (&str, &str) = ("ctx_size", "parallel");

/// The settings that count a model's layers (those on the GPU; those
/// whose experts stay on the CPU): what they move, the bytes each device
/// holds and the time each spends, goes by the share of the layers, so
/// a strategy reads them along a line, not by their ratios as it reads
/// other counts (threads, drafted tokens).
pub const LAYER_COUNTS: [&str; 2] = ["n_gpu_layers", "n_cpu_moe"];

/// The settings that count CPU threads. No buffer an engine allocates
/// grows with them by more than a thread's scratch space (kilobytes to a
/// few megabytes), so they never decide whether a configuration runs out
/// of memory, though a search that proposes its favourite thread count
/// beside every layer count it tries would see them fail together.
pub const THREAD_COUNTS: [&str; 2] = ["threads", "threads_batch"];

/// One tensor of a model file.
#[derive(Debug, Clone, Serialize)]
pub struct TensorInfo {
    pub name: String,
    /// ggml type id.
    pub ggml_type: u32,
    /// Dimensions, ggml order.
    pub dims: Vec<u64>,
    pub bytes: u64,
}

/// What the planner knows about a model.
#[derive(Debug, Clone, Serialize)]
pub struct ModelInfo {
    pub architecture: String,
    pub name: Option<String>,
    pub layers: u32,
    pub embedding: u32,
    pub heads: u32,
    /// K/V heads of each layer (models may vary them per layer).
    pub kv_heads: Vec<u32>,
    /// Size of one key head.
    pub key_length: u32,
    /// Size of one value head.
    pub value_length: u32,
    /// The context the model was trained for.
    pub context_length: Option<u64>,
    /// Experts per MoE layer, and how many are used per token.
    pub experts: Option<u32>,
    pub experts_used: Option<u32>,
    /// Bytes of its files together.
    pub file_bytes: u64,
    /// Its files: several for a model split across files.
    pub files: Vec<std::path::PathBuf>,
    pub tensors: Vec<TensorInfo>,
}

/// A model file that could not be read or understood.
#[derive(Debug, thiserror::Error)]
pub enum ModelError {
    #[error("cannot read model {path}: {message}")]
    Read { path: String, message: String },
    #[error("model {path} lacks `{key}`")]
    Missing { path: String, key: String },
}

impl ModelInfo {
    /// Reads a GGUF file's header, metadata and tensor table (not the
    /// weights), with every part of a split model.
    pub fn read(path: &Path) -> Result<Self, ModelError> {
        let shown = path.display().to_string();
        let model = crate::gguf::read::read(path)
            .map_err(|e| ModelError::Read { path: e.path, message: e.message })?;
        let meta = &model.metadata;
        let arch = meta
            .get("general.architecture")
            .and_then(Value::as_str)
            .ok_or_else(|| ModelError::Missing {
                path: shown.clone(),
                key: "general.architecture".into(),
            })?
            .to_string();
        let num = |key: &str| meta.get(&format!("{arch}.{key}")).and_then(Value::as_u64);
        let need = |key: &str| {
            num(key).ok_or_else(|| ModelError::Missing {
                path: shown.clone(),
                key: format!("{arch}.{key}"),
            })
        };
        let layers = need("block_count")? as u32;
        let embedding = need("embedding_length")? as u32;
        let heads = need("attention.head_count")? as u32;
        let kv_heads = match meta.get(&format!("{arch}.attention.head_count_kv")) {
            Some(Value::Array(per_layer)) => {
                per_layer.iter().map(|v| v.as_u64().unwrap_or(0) as u32).collect()
            }
            Some(v) => vec![v.as_u64().unwrap_or(heads as u64) as u32; layers as usize],
            None => vec![heads; layers as usize],
        };
        let head = embedding / heads.max(1);
        let tensors = model
            .tensors
            .iter()
            .map(|t| TensorInfo {
                name: t.name.clone(),
                ggml_type: t.ggml_type,
                dims: t.dims.clone(),
                bytes: t.bytes,
            })
            .collect();
        Ok(Self {
            name: meta.get("general.name").and_then(Value::as_str).map(str::to_string),
            layers,
            embedding,
            heads,
            kv_heads,
            key_length: num("attention.key_length").map_or(head, |v| v as u32),
            value_length: num("attention.value_length").map_or(head, |v| v as u32),
            context_length: num("context_length"),
            experts: num("expert_count").map(|v| v as u32),
            experts_used: num("expert_used_count").map(|v| v as u32),
            file_bytes: model.file_bytes,
            files: model.parts.clone(),
            tensors,
            architecture: arch,
        })
    }

    /// Bytes of all weights.
    pub fn weight_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.bytes).sum()
    }

    /// K/V cache bytes for one token (one cell) with the given cache types;
    /// `None` for a cache type the planner does not know.
    pub fn kv_bytes_per_token(&self, type_k: &str, type_v: &str) -> Option<f64> {
        let (bk, bv) = (cache_type_bytes(type_k)?, cache_type_bytes(type_v)?);
        let per_layer =
            |kv: u32| kv as f64 * (self.key_length as f64 * bk + self.value_length as f64 * bv);
        Some(self.kv_heads.iter().map(|kv| per_layer(*kv)).sum())
    }

    /// K/V cache bytes for a context of `ctx` tokens (rounded up as
    /// llama.cpp does; 0 means the trained context).
    pub fn kv_bytes(&self, ctx: u64, type_k: &str, type_v: &str) -> Option<u64> {
        let ctx = if ctx == 0 { self.context_length? } else { ctx };
        let cells = ctx.div_ceil(CTX_PAD) * CTX_PAD;
        Some((self.kv_bytes_per_token(type_k, type_v)? * cells as f64).round() as u64)
    }
}

impl ModelInfo {
    /// Weight bytes read to generate one token: every tensor except the
    /// token embedding (one row is looked up) and, in a mixture of
    /// experts, only the used share of the expert tensors (`*_exps`).
    pub fn weight_bytes_per_token(&self) -> f64 {
        let share = match (self.experts, self.experts_used) {
            (Some(n), Some(k)) if n > 0 => k as f64 / n as f64,
            _ => 1.0,
        };
        self.tensors
            .iter()
            .map(|t| {
                if t.name == "token_embd.weight" {
                    t.bytes as f64 / t.dims.last().copied().unwrap_or(1).max(1) as f64
                } else if t.name.contains("_exps") {
                    t.bytes as f64 * share
                } else {
                    t.bytes as f64
                }
            })
            .sum()
    }

    /// The memory a configuration needs, and whether it fits in
    /// `available` bytes (MemAvailable, or GPU memory when fully offloaded).
    pub fn memory_plan(&self, ctx: u64, type_k: &str, type_v: &str, available: u64) -> MemoryPlan {
        let weights = self.weight_bytes();
        let kv = self.kv_bytes(ctx, type_k, type_v);
        // Compute buffers and runtime overhead: a margin, not a prediction.
        let overhead = (weights / 20).max(256 << 20);
        let total = weights + kv.unwrap_or(0) + overhead;
        MemoryPlan { weights, kv, overhead, total, available, fits: total <= available }
    }

    /// The memory a configuration with `n_gpu_layers` layers offloaded
    /// needs on the GPU and on the host, as llama.cpp splits it. llama.cpp
    /// counts the output layer as one more layer after the last block and
    /// offloads the *last* `n_gpu_layers` of these: `-ngl 1` moves only the
    /// output layer, `-ngl N` (N ≤ blocks) the last N − 1 blocks and the
    /// output layer, and blocks + 1 or more moves everything. An offloaded
    /// block keeps its share of the K/V cache on the GPU; the token
    /// embedding stays on the host (a model without an output matrix reads
    /// it again as its output layer, so the GPU gets a copy). Each side
    /// gets the same overhead margin as [`Self::memory_plan`], the GPU
    /// [`GPU_RUNTIME_BYTES`] more.
    pub fn offload_plan(
        &self,
        ctx: u64,
        types: (&str, &str),
        n_gpu_layers: u64,
        available: (u64, u64),
    ) -> OffloadPlan {
        self.placed_plan(ctx, types, &Placement::layers(n_gpu_layers), available)
    }

    /// As [`Self::offload_plan`], with tensors placed as `placement` says:
    /// expert tensors kept on the CPU (`n_cpu_moe`, `cpu_moe`) and tensor
    /// overrides (`override_tensor`) as well as offloaded layers.
    pub fn placed_plan(
        &self,
        ctx: u64,
        (type_k, type_v): (&str, &str),
        placement: &Placement,
        (gpu_free, host_available): (u64, u64),
    ) -> OffloadPlan {
        let blocks = self.layers as u64;
        let on_gpu = |name: &str| placement.place(name, blocks) == Place::Gpu;
        let gpu_weights: u64 =
            self.tensors.iter().filter(|t| on_gpu(&t.name)).map(|t| t.bytes).sum();
        let host_weights = self.weight_bytes() - gpu_weights;
        let output_on_gpu = placement.gpu_layers.min(blocks + 1) >= 1;
        let tied = !self.tensors.iter().any(|t| t.name == "output.weight");
        let tied_copy: u64 = if output_on_gpu && tied {
            self.tensors.iter().filter(|t| t.name == "token_embd.weight").map(|t| t.bytes).sum()
        } else {
            0
        };
        let kv = self.kv_bytes(ctx, type_k, type_v);
        let share = placement.kv_blocks_on_gpu(blocks) as f64 / blocks.max(1) as f64;
        let gpu_kv = kv.map(|kv| (kv as f64 * share).round() as u64);
        let side = |weights: u64, kv: Option<u64>, available: u64, runtime: u64| {
            let overhead = (weights / 20).max(256 << 20) + runtime;
            let total = weights + kv.unwrap_or(0) + overhead;
            MemoryPlan { weights, kv, overhead, total, available, fits: total <= available }
        };
        let host_kv = kv.zip(gpu_kv).map(|(all, gpu)| all - gpu);
        OffloadPlan {
            gpu: side(gpu_weights + tied_copy, gpu_kv, gpu_free, GPU_RUNTIME_BYTES),
            host: side(host_weights, host_kv, host_available, 0),
            gpus: self.gpu_shares(placement, tied_copy, kv),
        }
    }

    /// Each GPU's part of what `placement` offloads: a tensor goes with its
    /// block (the output layer's, for tensors of no block), and so does a
    /// block's K/V cache.
    fn gpu_shares(&self, placement: &Placement, tied_copy: u64, kv: Option<u64>) -> Vec<GpuShare> {
        let blocks = self.layers as u64;
        let mut gpus = vec![GpuShare::default(); placement.gpus()];
        let mut add = |layer: u64, bytes: u64, kv: bool| {
            for (gpu, share) in placement.gpu_shares(layer, blocks) {
                let part = (bytes as f64 * share).round() as u64;
                if kv { gpus[gpu].kv += part } else { gpus[gpu].weights += part }
            }
        };
        for t in self.tensors.iter().filter(|t| placement.place(&t.name, blocks) == Place::Gpu) {
            let block = t.name.strip_prefix("blk.").and_then(|r| r.split('.').next()?.parse().ok());
            add(block.unwrap_or(blocks), t.bytes, false);
        }
        add(blocks, tied_copy, false);
        let per_block = kv.unwrap_or(0) / blocks.max(1);
        for b in placement.gpu_blocks(blocks) {
            add(b, per_block, true);
        }
        gpus
    }

    /// The decode speed memory bandwidth allows at a context `depth`:
    /// bandwidth over the weight and K/V bytes read per generated token.
    pub fn decode_ceiling(
        &self,
        bandwidth_bytes_per_s: f64,
        depth: u64,
        type_k: &str,
        type_v: &str,
    ) -> Option<f64> {
        let kv = self.kv_bytes_per_token(type_k, type_v)? * depth as f64;
        Some(bandwidth_bytes_per_s / (self.weight_bytes_per_token() + kv))
    }
}

/// The decode ceiling for a configuration's settings (cache types, default
/// f16) at the speed probe's mean context depth.
pub fn speed_ceiling(
    model: &ModelInfo,
    settings: &crate::catalog::Settings,
    speed: &crate::probes::SpeedSummary,
    bandwidth_bytes_per_s: f64,
) -> Option<f64> {
    let cache = |name: &str| settings.get(name).map_or("f16", String::as_str);
    let depth = speed.prompt_tokens as u64 + speed.tokens_generated as u64 / 2;
    model.decode_ceiling(bandwidth_bytes_per_s, depth, cache("cache_type_k"), cache("cache_type_v"))
}

/// GPU memory the CUDA runtime holds for an engine before any weight is
/// placed (context, cuBLAS workspace): 690 MiB measured on an H100 (driver
/// 580, CUDA 13) with nothing offloaded, by `scripts/check-gpu.sh`.
pub const GPU_RUNTIME_BYTES: u64 = 768 << 20;

/// What a configuration needs in memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MemoryPlan {
    pub weights: u64,
    /// `None` for a cache type the planner does not know.
    pub kv: Option<u64>,
    pub overhead: u64,
    pub total: u64,
    pub available: u64,
    pub fits: bool,
}

/// A configuration split between GPU and host memory.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct OffloadPlan {
    /// Every GPU together.
    pub gpu: MemoryPlan,
    pub host: MemoryPlan,
    /// Each GPU's weights and K/V bytes, by its index (`CUDA0`, `CUDA1`,
    /// …): one entry unless `tensor_split` shares them among several.
    pub gpus: Vec<GpuShare>,
}

/// What one GPU holds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct GpuShare {
    pub weights: u64,
    pub kv: u64,
}

/// Measures read bandwidth: the best of `passes` multi-threaded sums over
/// a buffer of `bytes` (larger than any cache), in bytes per second.
pub fn measure_bandwidth(bytes: usize, threads: usize, passes: u32) -> f64 {
    let words = vec![1u64; bytes / 8];
    let threads = threads.max(1);
    let chunk = words.len().div_ceil(threads);
    let mut best = 0.0f64;
    for _ in 0..passes.max(1) {
        let started = std::time::Instant::now();
        let total: u64 = std::thread::scope(|scope| {
            let handles: Vec<_> = words
                .chunks(chunk)
                .map(|part| scope.spawn(move || part.iter().fold(0u64, |a, w| a.wrapping_add(*w))))
                .collect();
            handles.into_iter().map(|h| h.join().expect("a summing thread")).sum()
        });
        let secs = started.elapsed().as_secs_f64();
        // Using the sum keeps the reads from being optimized away.
        assert_eq!(total, words.len() as u64);
        best = best.max(bytes as f64 / secs);
    }
    best
}

/// The K/V cache size llama.cpp reports in its log, in bytes:
/// `llama_kv_cache: size = 0.81 MiB (1024 cells, …)`.
pub fn logged_kv_bytes(log: &[String]) -> Option<u64> {
    log.iter().rev().find_map(|line| {
        let rest = line.split("llama_kv_cache: size =").nth(1)?;
        let mib: f64 = rest.split_whitespace().next()?.parse().ok()?;
        Some((mib * 1024.0 * 1024.0).round() as u64)
    })
}

/// A buffer llama.cpp says it allocated, read from its log.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LoggedBuffer {
    /// The backend buffer type: `CPU`, `CPU_Mapped`, `CUDA0`, `CUDA_Host`, ….
    pub device: String,
    /// `model`, `KV` or `compute`.
    pub what: String,
    pub bytes: u64,
}

/// Every buffer llama.cpp reports allocating, in log order, from lines like
/// `load_tensors: CUDA0 model buffer size = 450.00 MiB`,
/// `llama_kv_cache: CUDA0 KV buffer size = 24.00 MiB` and
/// `sched_reserve: CUDA0 compute buffer size = 98.01 MiB`.
pub fn logged_buffers(log: &[String]) -> Vec<LoggedBuffer> {
    log.iter()
        .filter_map(|line| {
            let (head, size) = line.split_once(" buffer size =")?;
            let mut words = head.split_whitespace().rev();
            let what = words.next()?.to_string();
            let device = words.next()?.to_string();
            let mib: f64 = size.split_whitespace().next()?.parse().ok()?;
            Some(LoggedBuffer { device, what, bytes: (mib * 1048576.0).round() as u64 })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gguf::{LlamaSpec, write_random_llama};

    #[test]
    fn reads_the_shape_of_a_written_model() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        let spec = LlamaSpec::tiny();
        let size = write_random_llama(&path, &spec, 3).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        assert_eq!(info.architecture, "llama");
        assert_eq!(info.layers, spec.layers);
        assert_eq!(info.kv_heads, vec![spec.kv_heads; spec.layers as usize]);
        assert_eq!(info.key_length, spec.width / spec.heads);
        assert_eq!(info.context_length, Some(spec.context_length as u64));
        assert_eq!(info.file_bytes, size);
        assert_eq!(info.tensors.len(), 3 + 9 * spec.layers as usize);
        // F32 weights: four bytes a parameter; the file adds only its header.
        assert!(info.weight_bytes() < size && size - info.weight_bytes() < 64 * 1024);
    }

    #[test]
    fn offloaded_layers_and_their_cache_go_to_the_gpu() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_random_llama(&path, &LlamaSpec::tiny(), 3).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        let layer: u64 =
            info.tensors.iter().filter(|t| t.name.starts_with("blk.0.")).map(|t| t.bytes).sum();
        let output: u64 =
            info.tensors.iter().filter(|t| t.name.starts_with("output")).map(|t| t.bytes).sum();
        let kv = info.kv_bytes(1024, "f16", "f16").unwrap();
        let big = 1 << 40;
        let none = info.offload_plan(1024, ("f16", "f16"), 0, (big, big));
        assert_eq!((none.gpu.weights, none.gpu.kv), (0, Some(0)));
        assert_eq!(none.host.weights, info.weight_bytes());
        // One layer: the output layer, which holds no K/V cache.
        let one = info.offload_plan(1024, ("f16", "f16"), 1, (big, big));
        assert_eq!((one.gpu.weights, one.gpu.kv), (output, Some(0)));
        // Three: the last two blocks (2 and 3) and the output layer.
        let three = info.offload_plan(1024, ("f16", "f16"), 3, (big, big));
        assert_eq!(three.gpu.weights, 2 * layer + output);
        assert_eq!(three.gpu.kv, Some(kv / 2));
        assert_eq!(three.gpu.weights + three.host.weights, info.weight_bytes());
        assert_eq!(three.gpu.kv.unwrap() + three.host.kv.unwrap(), kv);
        // Blocks + 1 (5) moves everything but the embedding; more changes nothing.
        let all = info.offload_plan(1024, ("f16", "f16"), 5, (big, big));
        assert_eq!((all.gpu.weights, all.gpu.kv), (4 * layer + output, Some(kv)));
        assert_eq!(info.offload_plan(1024, ("f16", "f16"), 999, (big, big)), all);
        // Not enough GPU memory for the overhead margin alone.
        let small = info.offload_plan(1024, ("f16", "f16"), 4, (100 << 20, big));
        assert!(!small.gpu.fits && small.host.fits);
        // One GPU holds all of it.
        assert_eq!(all.gpus, [GpuShare { weights: 4 * layer + output, kv }]);
        // Two, evenly: the split points are 0.5 and 1 and the five layers
        // sit at 0, 0.2, 0.4 (GPU 0), 0.6 and 0.8 (block 3 and the output
        // layer, GPU 1); each block's cache goes with it.
        let two: crate::Settings = [("n_gpu_layers", "99"), ("tensor_split", "1,1")]
            .map(|(k, v)| (k.into(), v.into()))
            .into();
        let placed = Placement::of(&two, 0).unwrap();
        let split = info.placed_plan(1024, ("f16", "f16"), &placed, (big, big));
        assert_eq!(
            split.gpus,
            [
                GpuShare { weights: 3 * layer, kv: kv / 4 * 3 },
                GpuShare { weights: layer + output, kv: kv / 4 }
            ]
        );
        assert_eq!(split.gpu, all.gpu, "together, what one GPU would hold");
    }

    #[test]
    fn kv_bytes_follow_cache_types_and_padding() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_random_llama(&path, &LlamaSpec::tiny(), 3).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        // 4 layers × 2 KV heads × 64 wide × (K + V).
        assert_eq!(info.kv_bytes_per_token("f16", "f16"), Some(4.0 * 2.0 * 64.0 * 4.0));
        assert_eq!(
            info.kv_bytes(1000, "q8_0", "q4_0"),
            Some(851_968),
            "1000 rounds up to 1024 cells"
        );
        assert_eq!(info.kv_bytes(0, "f16", "f16"), Some(4096 * 2048));
        assert_eq!(info.kv_bytes(1024, "turbo3", "f16"), None);
    }

    #[test]
    fn memory_plan_and_decode_ceiling() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_random_llama(&path, &LlamaSpec::tiny(), 3).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        let plan = info.memory_plan(4096, "f16", "f16", 1 << 30);
        assert_eq!(plan.kv, Some(4096 * 2048));
        assert_eq!(plan.total, plan.weights + plan.kv.unwrap() + plan.overhead);
        assert!(plan.fits);
        assert!(!info.memory_plan(4096, "f16", "f16", 1 << 20).fits);
        // Everything but the embedding table is read for each token.
        let embd = info.tensors.iter().find(|t| t.name == "token_embd.weight").unwrap().bytes;
        let per_token = info.weight_bytes_per_token();
        assert!(per_token < (info.weight_bytes() - embd) as f64 + 4096.0);
        let at_0 = info.decode_ceiling(1e10, 0, "f16", "f16").unwrap();
        assert!((at_0 - 1e10 / per_token).abs() < 1e-6);
        assert!(info.decode_ceiling(1e10, 4096, "f16", "f16").unwrap() < at_0, "deeper is slower");
    }

    #[test]
    fn bandwidth_is_measured_in_a_plausible_range() {
        let bw = measure_bandwidth(64 << 20, 2, 2);
        assert!(bw > 1e8 && bw < 1e13, "{bw} B/s");
    }

    #[test]
    fn reads_the_engine_kv_line() {
        let log = vec![
            "llama_kv_cache:        CPU KV buffer size =     0.81 MiB".to_string(),
            "0.00.007 I llama_kv_cache: size =    0.81 MiB (  1024 cells,   4 layers,  4/1 seqs), K (q8_0):    0.53 MiB".into(),
        ];
        assert_eq!(logged_kv_bytes(&log), Some((0.81f64 * 1048576.0).round() as u64));
        assert_eq!(logged_kv_bytes(&[]), None);
    }

    #[test]
    fn reads_every_buffer_the_engine_allocates() {
        let log: Vec<String> = [
            "load_tensors: offloaded 7/13 layers to GPU",
            "load_tensors:        CUDA0 model buffer size =   230.27 MiB",
            "load_tensors:   CPU_Mapped model buffer size =   262.79 MiB",
            "llama_kv_cache:      CUDA0 KV buffer size =    40.00 MiB",
            "llama_kv_cache:        CPU KV buffer size =    56.00 MiB",
            "sched_reserve:      CUDA0 compute buffer size =    98.01 MiB",
            "sched_reserve:  CUDA_Host compute buffer size =    12.02 MiB",
            "llama_kv_cache: size =   96.00 MiB (  4096 cells,  12 layers,  1/1 seqs)",
        ]
        .map(String::from)
        .to_vec();
        let found = logged_buffers(&log);
        assert_eq!(found.len(), 6);
        assert_eq!(
            found[2],
            LoggedBuffer { device: "CUDA0".into(), what: "KV".into(), bytes: 40 << 20 }
        );
        assert_eq!((found[1].device.as_str(), found[1].what.as_str()), ("CPU_Mapped", "model"));
        assert_eq!(found[5].device, "CUDA_Host");
        assert!(logged_buffers(&["no buffers here".into()]).is_empty());
    }

    #[test]
    fn weights_of_every_tensor_type_count_at_their_size() {
        use crate::gguf::{MetaValue, ModelSpec, TensorSpec, write_model};
        let meta = |k: &str, v: u32| (format!("llama.{k}"), MetaValue::U32(v));
        let spec = ModelSpec {
            metadata: vec![
                ("general.architecture".into(), MetaValue::Str("llama".into())),
                meta("block_count", 1),
                meta("embedding_length", 256),
                meta("attention.head_count", 4),
                meta("expert_count", 8),
                meta("expert_used_count", 2),
            ],
            tensors: vec![
                TensorSpec::new("token_embd.weight", "bf16", &[256, 1000]),
                TensorSpec::new("blk.0.attn_q.weight", "iq4_nl", &[256, 256]),
                TensorSpec::new("blk.0.ffn_gate_exps.weight", "mxfp4", &[256, 512, 8]),
                TensorSpec::new("blk.0.ffn_down_exps.weight", "q4_K", &[512, 256, 8]),
                TensorSpec::new("output.weight", "q6_K", &[256, 1000]),
            ],
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("moe.gguf");
        write_model(&path, &spec, 1).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        let written: u64 = spec.tensors.iter().map(|t| t.size().unwrap()).sum();
        assert_eq!(info.weight_bytes(), written);
        assert_eq!((info.experts, info.experts_used), (Some(8), Some(2)));
        // BF16's two bytes a value, not a block size guessed from its number.
        assert_eq!(info.tensors[0].bytes, 256 * 1000 * 2);
    }

    #[test]
    fn experts_kept_on_the_cpu_leave_the_gpu_their_bytes() {
        use crate::gguf::{MetaValue, ModelSpec, TensorSpec, write_model};
        let meta = |k: &str, v: u32| (format!("llama.{k}"), MetaValue::U32(v));
        let mut tensors = vec![TensorSpec::new("token_embd.weight", "q8_0", &[256, 1000])];
        for b in 0..4 {
            tensors.push(TensorSpec::new(format!("blk.{b}.attn_q.weight"), "q8_0", &[256, 256]));
            tensors.push(TensorSpec::new(format!("blk.{b}.ffn_gate_inp.weight"), "f32", &[256, 8]));
            for e in ["gate", "up"] {
                let name = format!("blk.{b}.ffn_{e}_exps.weight");
                tensors.push(TensorSpec::new(name, "mxfp4", &[256, 512, 8]));
            }
            tensors.push(TensorSpec::new(
                format!("blk.{b}.ffn_down_exps.weight"),
                "q4_K",
                &[512, 256, 8],
            ));
        }
        tensors.push(TensorSpec::new("output.weight", "q8_0", &[256, 1000]));
        let spec = ModelSpec {
            metadata: vec![
                ("general.architecture".into(), MetaValue::Str("llama".into())),
                meta("block_count", 4),
                meta("embedding_length", 256),
                meta("attention.head_count", 4),
            ],
            tensors,
        };
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("moe.gguf");
        write_model(&path, &spec, 1).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        let experts_of = |b: u64| -> u64 {
            let prefix = format!("blk.{b}.");
            info.tensors
                .iter()
                .filter(|t| t.name.starts_with(&prefix) && t.name.contains("_exps"))
                .map(|t| t.bytes)
                .sum()
        };
        let big = (1 << 40, 1 << 40);
        let plan = |pairs: &[(&str, &str)]| {
            let settings = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            info.placed_plan(1024, ("f16", "f16"), &Placement::of(&settings, 0).unwrap(), big)
        };
        let all = plan(&[("n_gpu_layers", "99")]);
        let two = plan(&[("n_gpu_layers", "99"), ("n_cpu_moe", "2")]);
        assert_eq!(all.gpu.weights - two.gpu.weights, experts_of(0) + experts_of(1));
        assert_eq!(two.host.weights - all.host.weights, experts_of(0) + experts_of(1));
        let every = plan(&[("n_gpu_layers", "99"), ("cpu_moe", "true")]);
        assert_eq!(all.gpu.weights - every.gpu.weights, (0..4).map(experts_of).sum::<u64>());
        assert_eq!(every.gpu.kv, all.gpu.kv, "the K/V cache stays with its layers");
    }

    #[test]
    fn a_file_that_is_not_gguf_is_a_clear_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.gguf");
        std::fs::write(&path, b"not a model at all").unwrap();
        let err = ModelInfo::read(&path).unwrap_err();
        assert!(err.to_string().starts_with("cannot read model"), "{err}");
    }
}
