//! Parameter catalogs: which settings an engine accepts, their domains, and
//! how each renders on the engine's command line.
//!
//! Users name settings (`ctx_size`, `cache_type_k`) and give values as text;
//! the catalog checks them and turns them into arguments. Nothing a user
//! types ever becomes a flag of its own: values are checked against the
//! domain and may not start with `-`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;

/// Settings chosen for one configuration: setting name to value, as text.
pub type Settings = BTreeMap<String, String>;

/// The values a parameter accepts.
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Domain {
    /// An integer in `min..=max`.
    Int { min: i64, max: i64 },
    /// One of `choices`; with `open`, any other plain word too (new cache
    /// types appear in engine builds faster than catalogs change).
    Choice { choices: &'static [&'static str], open: bool },
    /// A switch: `true` renders the flag alone, `false` renders nothing.
    Bool,
    /// The name of another model of the same profile (a draft model); it
    /// renders as that model's path.
    Model,
    /// A number in `min..=max`.
    Float { min: f64, max: f64 },
    /// A switch written as a value: `--flag true` / `--flag false`.
    BoolValue,
    /// A switch with a flag for each side: `--x` / `--no-x`.
    Negatable { off_flag: &'static str },
    /// One of the names in `map`, written as its mapped value (cache type
    /// names to ggml type numbers, say).
    Mapped { map: &'static [(&'static str, &'static str)] },
    /// Free text on one argument (JSON, say); never a flag.
    Text,
}

/// Whether changing the parameter needs the engine restarted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Read when the engine starts; changing it means a new launch.
    LoadTime,
    /// Sent with each request; the running engine can be reused.
    RequestTime,
}

/// One setting of an engine.
#[derive(Debug, Clone, Serialize)]
pub struct Param {
    /// The name users and studies refer to.
    pub name: Cow<'static, str>,
    /// The command-line flag.
    pub flag: Cow<'static, str>,
    pub domain: Domain,
    /// The engine's own default, for display.
    pub default: &'static str,
    pub phase: Phase,
    /// One line for the user.
    pub help: &'static str,
}

/// A setting the catalog refused, with what was wrong.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingError {
    #[error("unknown setting `{name}` for {engine}")]
    Unknown { engine: &'static str, name: String },
    #[error("setting `{name}`: `{value}` is not a whole number")]
    NotAnInteger { name: String, value: String },
    #[error("setting `{name}`: {value} is outside {min}..={max}")]
    OutOfRange { name: String, value: i64, min: i64, max: i64 },
    #[error("setting `{name}`: `{value}` is not one of {choices}")]
    NotAChoice { name: String, value: String, choices: String },
    #[error("setting `{name}`: `{value}` must be true or false")]
    NotABool { name: String, value: String },
    #[error("setting `{name}`: `{value}` is not a number")]
    NotANumber { name: String, value: String },
    #[error("setting `{name}`: {value} is outside {min}..={max}")]
    FloatOutOfRange { name: String, value: f64, min: f64, max: f64 },
    #[error(
        "environment variable `{name}` may not be set: allowed are names starting with {prefixes}"
    )]
    EnvNotAllowed { name: String, prefixes: String },
}

/// The parameters of one engine kind.
#[derive(Debug, Clone, Serialize)]
pub struct Catalog {
    pub engine: &'static str,
    pub params: Vec<Param>,
    /// Environment variables a setting `env.NAME` may set: names starting
    /// with one of these.
    pub env_prefixes: &'static [&'static str],
}

/// Settings turned into what the engine is given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rendered {
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
}

/// A setting read when the engine starts (every catalog's settings are).
fn param(
    name: &'static str,
    flag: &'static str,
    domain: Domain,
    default: &'static str,
    help: &'static str,
) -> Param {
    Param {
        name: Cow::Borrowed(name),
        flag: Cow::Borrowed(flag),
        domain,
        default,
        phase: Phase::LoadTime,
        help,
    }
}

fn int(min: i64, max: i64) -> Domain {
    Domain::Int { min, max }
}

/// Settings named `env.NAME` set the environment variable NAME.
pub const ENV_PREFIX: &str = "env.";

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

/// K/V cache types llama.cpp accepts (`-ctk`, `-ctv`).
pub const CACHE_TYPES: &[&str] =
    &["f16", "bf16", "f32", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"];

impl Catalog {
    /// llama.cpp's `llama-server`.
    pub fn llama_server() -> Self {
        use Domain::*;
        let cache = Choice { choices: CACHE_TYPES, open: true };
        Self {
            engine: "llama-server",
            params: vec![
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
            ],
            env_prefixes: &["CUDA_", "GGML_", "HIP_", "ROCR_", "OMP_", "LLAMA_"],
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
            env_prefixes: &["CUDA_", "GGML_", "LLAMA_", "OMP_"],
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
            env_prefixes: &["CUDA_", "VLLM_", "NCCL_", "PYTORCH_"],
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
            env_prefixes: &["CUDA_", "SGLANG_", "NCCL_", "PYTORCH_"],
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
            env_prefixes: &["CUDA_"],
        }
    }

    /// Looks up a parameter by name.
    pub fn get(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Checks every setting and renders them: flags in catalog order, and
    /// `env.NAME` settings as environment variables.
    pub fn render(&self, settings: &Settings) -> Result<Rendered, SettingError> {
        let mut out = Rendered::default();
        for (name, value) in settings {
            if let Some(var) = name.strip_prefix(ENV_PREFIX) {
                let allowed = self.env_prefixes.iter().any(|p| var.starts_with(p))
                    && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if !allowed {
                    return Err(SettingError::EnvNotAllowed {
                        name: var.into(),
                        prefixes: self.env_prefixes.join(", "),
                    });
                }
                if value.contains('\0') {
                    return Err(SettingError::NotAChoice {
                        name: name.clone(),
                        value: value.escape_debug().to_string(),
                        choices: "text without NUL".into(),
                    });
                }
                out.env.insert(var.to_string(), value.clone());
            } else if self.get(name).is_none() {
                return Err(SettingError::Unknown { engine: self.engine, name: name.clone() });
            }
        }
        for param in &self.params {
            if let Some(value) = settings.get(param.name.as_ref()) {
                out.args.extend(param.render(value.trim())?);
            }
        }
        Ok(out)
    }
}

impl Param {
    /// Checks one value and renders it as arguments.
    pub fn render(&self, value: &str) -> Result<Vec<String>, SettingError> {
        let name = self.name.to_string();
        let flag = || self.flag.to_string();
        match &self.domain {
            Domain::Int { min, max } => {
                let v: i64 = value.parse().map_err(|_| SettingError::NotAnInteger {
                    name: name.clone(),
                    value: value.into(),
                })?;
                if v < *min || v > *max {
                    return Err(SettingError::OutOfRange { name, value: v, min: *min, max: *max });
                }
                Ok(vec![flag(), v.to_string()])
            }
            Domain::Choice { choices, open } => {
                let plain_word = !value.is_empty()
                    && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if choices.contains(&value) || (*open && plain_word) {
                    Ok(vec![flag(), value.into()])
                } else {
                    let what = if *open { " or a plain word" } else { "" };
                    Err(SettingError::NotAChoice {
                        name,
                        value: value.into(),
                        choices: format!("{}{what}", choices.join(", ")),
                    })
                }
            }
            Domain::Model => {
                if value.is_empty() || value.starts_with('-') {
                    return Err(SettingError::NotAChoice {
                        name,
                        value: value.into(),
                        choices: "the name of a model of this profile".into(),
                    });
                }
                Ok(vec![flag(), value.into()])
            }
            Domain::Float { min, max } => {
                let v: f64 =
                    value.parse().ok().filter(|v: &f64| v.is_finite()).ok_or_else(|| {
                        SettingError::NotANumber { name: name.clone(), value: value.into() }
                    })?;
                if v < *min || v > *max {
                    return Err(SettingError::FloatOutOfRange {
                        name,
                        value: v,
                        min: *min,
                        max: *max,
                    });
                }
                Ok(vec![flag(), value.into()])
            }
            Domain::BoolValue => match value {
                "true" | "on" | "1" => Ok(vec![flag(), "true".into()]),
                "false" | "off" | "0" => Ok(vec![flag(), "false".into()]),
                _ => Err(SettingError::NotABool { name, value: value.into() }),
            },
            Domain::Negatable { off_flag } => match value {
                "true" | "on" | "1" => Ok(vec![flag()]),
                "false" | "off" | "0" => Ok(vec![off_flag.to_string()]),
                _ => Err(SettingError::NotABool { name, value: value.into() }),
            },
            Domain::Mapped { map } => match map.iter().find(|(k, _)| *k == value) {
                Some((_, v)) => Ok(vec![flag(), v.to_string()]),
                None => Err(SettingError::NotAChoice {
                    name,
                    value: value.into(),
                    choices: map.iter().map(|(k, _)| *k).collect::<Vec<_>>().join(", "),
                }),
            },
            Domain::Text => {
                if value.is_empty() || value.starts_with('-') || value.contains('\0') {
                    return Err(SettingError::NotAChoice {
                        name,
                        value: value.escape_debug().to_string(),
                        choices: "text that does not start with `-`".into(),
                    });
                }
                Ok(vec![flag(), value.into()])
            }
            Domain::Bool => match value {
                "true" | "on" | "1" => Ok(vec![flag()]),
                "false" | "off" | "0" => Ok(vec![]),
                _ => Err(SettingError::NotABool { name, value: value.into() }),
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn renders_in_catalog_order() {
        let cat = Catalog::llama_server();
        let args = cat
            .render(&settings(&[
                ("flash_attn", "on"),
                ("cache_type_v", "q4_0"),
                ("ctx_size", "2048"),
                ("cache_type_k", "q4_0"),
                ("mlock", "true"),
                ("no_mmap", "false"),
            ]))
            .unwrap()
            .args;
        assert_eq!(args, ["-c", "2048", "-ctk", "q4_0", "-ctv", "q4_0", "-fa", "on", "--mlock"]);
    }

    #[test]
    fn rejects_unknown_settings_and_bad_values() {
        let cat = Catalog::llama_server();
        let err = cat.render(&settings(&[("model", "/etc/passwd")])).unwrap_err();
        assert!(matches!(err, SettingError::Unknown { .. }), "{err}");
        let err = cat.render(&settings(&[("threads", "two")])).unwrap_err();
        assert_eq!(err.to_string(), "setting `threads`: `two` is not a whole number");
        let err = cat.render(&settings(&[("threads", "0")])).unwrap_err();
        assert!(matches!(err, SettingError::OutOfRange { value: 0, .. }), "{err}");
        let err = cat.render(&settings(&[("flash_attn", "maybe")])).unwrap_err();
        assert!(err.to_string().contains("on, off, auto"), "{err}");
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
    }

    #[test]
    fn environment_variables_within_the_allowed_families() {
        let cat = Catalog::llama_server();
        let r = cat
            .render(&settings(&[
                ("env.CUDA_VISIBLE_DEVICES", "0,1"),
                ("env.GGML_SCHED_MAX_COPIES", "1"),
            ]))
            .unwrap();
        assert_eq!(r.env.get("CUDA_VISIBLE_DEVICES").map(String::as_str), Some("0,1"));
        assert_eq!(r.env.len(), 2);
        assert!(r.args.is_empty());
        for bad in ["env.LD_PRELOAD", "env.PATH", "env.GGML_X=Y"] {
            let err = cat.render(&settings(&[(bad, "x")])).unwrap_err();
            assert!(matches!(err, SettingError::EnvNotAllowed { .. }), "{bad}: {err}");
        }
    }

    #[test]
    fn open_choices_accept_new_words_but_never_flags() {
        let cat = Catalog::llama_server();
        let args = cat.render(&settings(&[("cache_type_k", "turbo3")])).unwrap().args;
        assert_eq!(args, ["-ctk", "turbo3"]);
        for bad in ["--rpc", "q4_0 -m x", ""] {
            let err = cat.render(&settings(&[("cache_type_k", bad)])).unwrap_err();
            assert!(matches!(err, SettingError::NotAChoice { .. }), "{bad}: {err}");
        }
    }
}
