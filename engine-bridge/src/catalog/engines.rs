//! The catalogs of each engine kind. The same setting names (`ctx_size`,
//! `threads`, `cache_type_k`) mean the same on every engine; each catalog
//! spells them with its engine's own flags.

use std::borrow::Cow;
use std::collections::BTreeMap;

use super::{
    CACHE_TYPES, Catalog, Domain, EnvVar, MODEL_SETTING, Param, Phase, int, param, request_param,
};

/// ggml type numbers for cache type names, as llama-cpp-python takes them.
pub const GGML_TYPE_NUMBERS: &[(&str, &str)] = &[
    ("f32", "0"),
    ("f16", "1"),
    ("q4_0", "2"),
    ("q4_1", "3"),
    ("q5_0", "6"),
    ("q5_1", "7"),
    ("q8_0", "8"),
    ("iq4_nl", "20"),
    ("bf16", "30"),
];

/// A variable that is on when set to `1`.
const SWITCH: Domain = Domain::Choice { choices: &["0", "1"], open: false };

const fn var(name: &'static str, domain: Domain, help: &'static str) -> EnvVar {
    EnvVar { name, domain, help }
}

/// Which GPUs a CUDA program sees, and in what order.
const CUDA_ENV: &[EnvVar] = &[
    var("CUDA_VISIBLE_DEVICES", Domain::Devices, "GPUs the engine may use, by index or UUID."),
    var(
        "CUDA_DEVICE_ORDER",
        Domain::Choice { choices: &["FASTEST_FIRST", "PCI_BUS_ID"], open: false },
        "How CUDA numbers the GPUs.",
    ),
];

/// llama.cpp's own run-time switches (ggml), and the other backends'
/// device lists and OpenMP threads.
const GGML_ENV: &[EnvVar] = &[
    var("GGML_CUDA_ENABLE_UNIFIED_MEMORY", SWITCH, "Let CUDA spill into system memory."),
    var("GGML_CUDA_DISABLE_GRAPHS", SWITCH, "Turn CUDA graphs off."),
    var("GGML_CUDA_DISABLE_FUSION", SWITCH, "Turn kernel fusion off."),
    var("GGML_VK_VISIBLE_DEVICES", Domain::Devices, "Vulkan devices the engine may use."),
    var("GGML_VK_DISABLE_COOPMAT", SWITCH, "Vulkan: no cooperative-matrix kernels."),
    var("HIP_VISIBLE_DEVICES", Domain::Devices, "AMD GPUs the engine may use."),
    var("ROCR_VISIBLE_DEVICES", Domain::Devices, "AMD GPUs the runtime exposes."),
    var("OMP_NUM_THREADS", Domain::Int { min: 1, max: 1024 }, "OpenMP threads."),
    var(
        "OMP_PROC_BIND",
        Domain::Choice { choices: &["true", "false", "close", "spread", "primary"], open: false },
        "OpenMP thread pinning.",
    ),
];

/// Switches of the Python engines' GPU stacks.
const TORCH_ENV: &[EnvVar] = &[
    var("NCCL_P2P_DISABLE", SWITCH, "No peer-to-peer GPU transfers."),
    var("NCCL_IB_DISABLE", SWITCH, "No InfiniBand."),
    var(
        "PYTORCH_CUDA_ALLOC_CONF",
        Domain::Choice {
            choices: &["expandable_segments:True", "expandable_segments:False"],
            open: false,
        },
        "PyTorch's CUDA allocator.",
    ),
];

const VLLM_ENV: &[EnvVar] = &[
    var(
        "VLLM_ATTENTION_BACKEND",
        Domain::Choice {
            choices: &["FLASH_ATTN", "FLASHINFER", "TRITON_ATTN", "FLEX_ATTENTION", "XFORMERS"],
            open: true,
        },
        "Attention kernels.",
    ),
    var("VLLM_FLASH_ATTN_VERSION", Domain::Choice { choices: &["2", "3"], open: false }, ""),
    var("VLLM_USE_FLASHINFER_SAMPLER", SWITCH, "Sample with FlashInfer's kernels."),
    var("VLLM_ENABLE_V1_MULTIPROCESSING", SWITCH, "Run the engine core in its own process."),
];

const SGLANG_ENV: &[EnvVar] =
    &[var("SGL_ENABLE_JIT_DEEPGEMM", SWITCH, "DeepGEMM kernels compiled at start.")];

fn env(lists: &[&[EnvVar]]) -> Vec<EnvVar> {
    lists.iter().flat_map(|l| l.iter().cloned()).collect()
}

impl Catalog {
    /// llama.cpp's `llama-server`.
    pub fn llama_server() -> Self {
        use Domain::*;
        // The types llama.cpp takes; a fork's others are the profile's to name.
        let cache = Choice { choices: CACHE_TYPES, open: false };
        Self {
            engine: "llama-server",
            params: vec![
                param(
                    MODEL_SETTING,
                    "",
                    Model,
                    "the study's model",
                    "Which of the profile's model files to load (quantizations of one model, say).",
                ),
                param(
                    "ctx_size",
                    "-c",
                    int(0, 1 << 24),
                    "model's own",
                    "Context size in tokens (0: the model's trained context).",
                ),
                param("threads", "-t", int(1, 1024), "all cores", "CPU threads for generation."),
                param(
                    "threads_batch",
                    "-tb",
                    int(1, 1024),
                    "= threads",
                    "CPU threads for prompt processing.",
                ),
                param("cache_type_k", "-ctk", cache.clone(), "f16", "K cache data type."),
                param(
                    "cache_type_v",
                    "-ctv",
                    cache,
                    "f16",
                    "V cache data type (quantized V needs flash attention).",
                ),
                param(
                    "flash_attn",
                    "-fa",
                    Choice { choices: &["on", "off", "auto"], open: false },
                    "auto",
                    "Flash attention.",
                ),
                param("n_gpu_layers", "-ngl", int(0, 999), "auto", "Layers offloaded to the GPU."),
                param(
                    "fit",
                    "--fit",
                    Choice { choices: &["on", "off"], open: false },
                    "on",
                    "Let the engine set what is left unset (context, layers, experts) to fit device memory.",
                ),
                param(
                    "fit_target",
                    "--fit-target",
                    int(0, 1 << 20),
                    "1024",
                    "Memory in MiB that --fit leaves free on each device.",
                ),
                param(
                    "fit_ctx",
                    "--fit-ctx",
                    int(0, 1 << 24),
                    "4096",
                    "The smallest context --fit may choose.",
                ),
                param(
                    "n_cpu_moe",
                    "--n-cpu-moe",
                    int(0, 999),
                    "0",
                    "Expert weights of the first N layers kept on the CPU (mixture of experts).",
                ),
                param("cpu_moe", "--cpu-moe", Bool, "false", "Every expert weight on the CPU."),
                param(
                    "override_tensor",
                    "-ot",
                    TensorOverrides,
                    "none",
                    "Tensors placed by name: PATTERN=BUFFER by commas (`exps=CPU`).",
                ),
                param(
                    "split_mode",
                    "-sm",
                    Choice { choices: &["none", "layer", "row", "tensor"], open: false },
                    "layer",
                    "How a model splits across GPUs.",
                ),
                param("tensor_split", "-ts", Proportions, "even", "Each GPU's share (`3,1`)."),
                param("main_gpu", "-mg", int(0, 63), "0", "The GPU for a model not split."),
                param("device", "-dev", Devices, "all", "Devices to use (`CUDA0,CUDA1`, `none`)."),
                param("batch_size", "-b", int(1, 1 << 20), "2048", "Logical batch size."),
                param("ubatch_size", "-ub", int(1, 1 << 20), "512", "Physical batch size."),
                param("parallel", "-np", int(1, 256), "auto", "Server slots (parallel sequences)."),
                param("mlock", "--mlock", Bool, "false", "Lock the model in RAM."),
                param(
                    "no_mmap",
                    "--no-mmap",
                    Bool,
                    "false",
                    "Read the model into memory instead of mapping it.",
                ),
                param(
                    "numa",
                    "--numa",
                    Choice { choices: &["distribute", "isolate", "numactl"], open: false },
                    "off",
                    "NUMA placement.",
                ),
                param(
                    "draft_model",
                    "-md",
                    Model,
                    "none",
                    "Draft model for speculative decoding (a model of this profile).",
                ),
                param("draft_max", "--draft-max", int(0, 256), "16", "Most tokens drafted."),
                param("draft_min", "--draft-min", int(0, 256), "0", "Fewest tokens drafted."),
                // Sent with each request: changing it keeps the engine running.
                // (Per-request speculative settings exist in llama-server's
                // source but are compiled out, so drafting stays load-time.)
                request_param(
                    "top_k",
                    "top_k",
                    int(0, 1 << 20),
                    "40",
                    "Sampling: keep the k likeliest tokens (0: all); costs a sort per token.",
                ),
            ],
            env: env(&[CUDA_ENV, GGML_ENV]),
            pinned_env: vec![],
            extra_choices: BTreeMap::new(),
        }
    }

    /// llama-cpp-python's server (`python -m llama_cpp.server`): the same
    /// setting names as llama-server, its own flags, cache types as ggml
    /// type numbers.
    pub fn llama_cpp_python() -> Self {
        use Domain::*;
        let cache = Mapped { map: GGML_TYPE_NUMBERS };
        Self {
            engine: "llama-cpp-python",
            params: vec![
                param("ctx_size", "--n_ctx", int(0, 1 << 24), "2048", "Context size in tokens."),
                param(
                    "threads",
                    "--n_threads",
                    int(1, 1024),
                    "half the cores",
                    "CPU threads for generation.",
                ),
                param(
                    "threads_batch",
                    "--n_threads_batch",
                    int(1, 1024),
                    "all cores",
                    "CPU threads for prompts.",
                ),
                param("cache_type_k", "--type_k", cache.clone(), "f16", "K cache data type."),
                param("cache_type_v", "--type_v", cache, "f16", "V cache data type."),
                param("flash_attn", "--flash_attn", BoolValue, "false", "Flash attention."),
                param(
                    "n_gpu_layers",
                    "--n_gpu_layers",
                    int(-1, 999),
                    "0",
                    "Layers offloaded to the GPU (-1: all).",
                ),
                param("batch_size", "--n_batch", int(1, 1 << 20), "512", "Logical batch size."),
                param("ubatch_size", "--n_ubatch", int(1, 1 << 20), "512", "Physical batch size."),
                param("mmap", "--use_mmap", BoolValue, "true", "Map the model file."),
                param("mlock", "--use_mlock", BoolValue, "false", "Lock the model in RAM."),
            ],
            env: env(&[CUDA_ENV, GGML_ENV]),
            pinned_env: vec![],
            extra_choices: BTreeMap::new(),
        }
    }

    /// vLLM (`vllm serve`).
    pub fn vllm() -> Self {
        use Domain::*;
        Self {
            engine: "vllm",
            params: vec![
                param(
                    "ctx_size",
                    "--max-model-len",
                    int(1, 1 << 24),
                    "model's own",
                    "Context length.",
                ),
                param(
                    "gpu_memory_utilization",
                    "--gpu-memory-utilization",
                    Float { min: 0.05, max: 1.0 },
                    "0.9",
                    "Share of GPU memory vLLM may take.",
                ),
                param(
                    "max_num_seqs",
                    "--max-num-seqs",
                    int(1, 4096),
                    "256",
                    "Sequences batched at once.",
                ),
                param(
                    "max_num_batched_tokens",
                    "--max-num-batched-tokens",
                    int(1, 1 << 22),
                    "auto",
                    "Tokens per scheduler step.",
                ),
                param(
                    "kv_cache_dtype",
                    "--kv-cache-dtype",
                    Choice { choices: &["auto", "fp8", "fp8_e4m3", "fp8_e5m2"], open: true },
                    "auto",
                    "K/V cache data type.",
                ),
                param(
                    "enable_prefix_caching",
                    "--enable-prefix-caching",
                    Negatable { off_flag: "--no-enable-prefix-caching" },
                    "on",
                    "Reuse cached prompt prefixes.",
                ),
                param(
                    "tensor_parallel_size",
                    "-tp",
                    int(1, 64),
                    "1",
                    "GPUs to split each layer over.",
                ),
                param(
                    "dtype",
                    "--dtype",
                    Choice {
                        choices: &["auto", "half", "float16", "bfloat16", "float"],
                        open: false,
                    },
                    "auto",
                    "Weight and activation type.",
                ),
                param(
                    "quantization",
                    "--quantization",
                    Choice { choices: &["awq", "gptq", "fp8", "bitsandbytes"], open: true },
                    "none",
                    "Weight quantization method.",
                ),
                param("enforce_eager", "--enforce-eager", Bool, "false", "Disable CUDA graphs."),
                param(
                    "speculative_config",
                    "--speculative-config",
                    Text,
                    "none",
                    "Speculative decoding, as JSON.",
                ),
            ],
            env: env(&[CUDA_ENV, TORCH_ENV, VLLM_ENV]),
            pinned_env: vec![],
            extra_choices: BTreeMap::new(),
        }
    }

    /// SGLang (`python -m sglang.launch_server`).
    pub fn sglang() -> Self {
        use Domain::*;
        Self {
            engine: "sglang",
            params: vec![
                param(
                    "ctx_size",
                    "--context-length",
                    int(1, 1 << 24),
                    "model's own",
                    "Context length.",
                ),
                param(
                    "mem_fraction_static",
                    "--mem-fraction-static",
                    Float { min: 0.05, max: 1.0 },
                    "auto",
                    "Share of GPU memory for weights and K/V.",
                ),
                param(
                    "max_running_requests",
                    "--max-running-requests",
                    int(1, 4096),
                    "auto",
                    "Requests run at once.",
                ),
                param(
                    "chunked_prefill_size",
                    "--chunked-prefill-size",
                    int(-1, 1 << 22),
                    "auto",
                    "Prefill chunk in tokens (-1: off).",
                ),
                param(
                    "tensor_parallel_size",
                    "--tp-size",
                    int(1, 64),
                    "1",
                    "GPUs to split each layer over.",
                ),
                param(
                    "kv_cache_dtype",
                    "--kv-cache-dtype",
                    Choice { choices: &["auto", "fp8_e5m2", "fp8_e4m3"], open: true },
                    "auto",
                    "K/V cache data type.",
                ),
                param(
                    "attention_backend",
                    "--attention-backend",
                    Choice {
                        choices: &["flashinfer", "triton", "torch_native", "fa3"],
                        open: true,
                    },
                    "auto",
                    "Attention kernels.",
                ),
                param(
                    "disable_radix_cache",
                    "--disable-radix-cache",
                    Bool,
                    "false",
                    "Turn prefix caching off.",
                ),
                param(
                    "speculative_algorithm",
                    "--speculative-algorithm",
                    Choice { choices: &["EAGLE", "EAGLE3", "NEXTN"], open: true },
                    "none",
                    "Speculative decoding.",
                ),
            ],
            env: env(&[CUDA_ENV, TORCH_ENV, SGLANG_ENV]),
            pinned_env: vec![],
            extra_choices: BTreeMap::new(),
        }
    }

    /// A custom engine: the settings and flags its profile declares, each
    /// taking a plain word or number.
    pub fn custom(params: &BTreeMap<String, String>) -> Self {
        Self {
            engine: "custom",
            params: params
                .iter()
                .map(|(name, flag)| Param {
                    name: Cow::Owned(name.clone()),
                    flag: Cow::Owned(flag.clone()),
                    domain: Domain::Choice { choices: &[], open: true },
                    default: "",
                    phase: Phase::LoadTime,
                    help: "Declared by the profile.",
                })
                .collect(),
            env: env(&[CUDA_ENV]),
            pinned_env: vec![],
            extra_choices: BTreeMap::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::{SettingError, Settings};

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn other_engines_use_the_same_names_with_their_own_flags() {
        let s = settings(&[("ctx_size", "4096"), ("cache_type_k", "q8_0"), ("flash_attn", "on")]);
        let args = Catalog::llama_cpp_python().render(&s).unwrap().args;
        assert_eq!(args, ["--n_ctx", "4096", "--type_k", "8", "--flash_attn", "true"]);
        let s = settings(&[
            ("gpu_memory_utilization", "0.85"),
            ("enable_prefix_caching", "off"),
            ("ctx_size", "8192"),
            ("speculative_config", r#"{"method": "ngram", "num_speculative_tokens": 4}"#),
        ]);
        let args = Catalog::vllm().render(&s).unwrap().args;
        assert_eq!(
            args,
            [
                "--max-model-len",
                "8192",
                "--gpu-memory-utilization",
                "0.85",
                "--no-enable-prefix-caching",
                "--speculative-config",
                r#"{"method": "ngram", "num_speculative_tokens": 4}"#
            ]
        );
        let err =
            Catalog::vllm().render(&settings(&[("gpu_memory_utilization", "1.5")])).unwrap_err();
        assert!(matches!(err, SettingError::FloatOutOfRange { .. }), "{err}");
        let err =
            Catalog::sglang().render(&settings(&[("mem_fraction_static", "most")])).unwrap_err();
        assert_eq!(err.to_string(), "setting `mem_fraction_static`: `most` is not a number");
        let err = Catalog::llama_cpp_python()
            .render(&settings(&[("cache_type_k", "turbo3")]))
            .unwrap_err();
        assert!(err.to_string().contains("f32, f16, q4_0"), "{err}");
        let custom: BTreeMap<String, String> =
            [("batch".to_string(), "--max-batch".to_string())].into();
        let args = Catalog::custom(&custom).render(&settings(&[("batch", "64")])).unwrap().args;
        assert_eq!(args, ["--max-batch", "64"]);
        // llama-server's cache types are llama.cpp's, and a profile's own.
        let mut cat = Catalog::llama_server();
        let err = cat.render(&settings(&[("cache_type_k", "q9_0")])).unwrap_err();
        assert!(err.to_string().contains("`q9_0` is not one of f32, f16"), "{err}");
        cat.extra_choices.insert("cache_type_k".into(), vec!["turbo3".into()]);
        let args = cat.render(&settings(&[("cache_type_k", "turbo3")])).unwrap().args;
        assert_eq!(args, ["-ctk", "turbo3"]);
        assert!(cat.render(&settings(&[("cache_type_v", "turbo3")])).is_err(), "K only");
    }
}
