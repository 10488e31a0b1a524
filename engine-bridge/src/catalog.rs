//! Parameter catalogs: which settings an engine accepts, their domains, and
//! how each renders on the engine's command line.
//!
//! Users name settings (`ctx_size`, `cache_type_k`) and give values as text;
//! the catalog checks them and turns them into arguments. Nothing a user
//! types ever becomes a flag of its own: values are checked against the
//! domain and may not start with `-`.

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
    pub name: &'static str,
    /// The command-line flag.
    pub flag: &'static str,
    pub domain: Domain,
    /// The engine's own default, for display.
    pub default: &'static str,
    pub phase: Phase,
    /// One line for the user.
    pub help: &'static str,
}

/// A setting the catalog refused, with what was wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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

/// Settings named `env.NAME` set the environment variable NAME.
pub const ENV_PREFIX: &str = "env.";

/// K/V cache types llama.cpp accepts (`-ctk`, `-ctv`).
pub const CACHE_TYPES: &[&str] =
    &["f16", "bf16", "f32", "q8_0", "q5_1", "q5_0", "q4_1", "q4_0", "iq4_nl"];

impl Catalog {
    /// llama.cpp's `llama-server`.
    pub fn llama_server() -> Self {
        use Domain::*;
        use Phase::*;
        let int = |min, max| Int { min, max };
        let cache = Choice { choices: CACHE_TYPES, open: true };
        let p = |name, flag, domain, default, phase, help| Param {
            name,
            flag,
            domain,
            default,
            phase,
            help,
        };
        Self {
            engine: "llama-server",
            params: vec![
                p(
                    "ctx_size",
                    "-c",
                    int(0, 1 << 24),
                    "model's own",
                    LoadTime,
                    "Context size in tokens (0: the model's trained context).",
                ),
                p(
                    "threads",
                    "-t",
                    int(1, 1024),
                    "all cores",
                    LoadTime,
                    "CPU threads for generation.",
                ),
                p(
                    "threads_batch",
                    "-tb",
                    int(1, 1024),
                    "= threads",
                    LoadTime,
                    "CPU threads for prompt processing.",
                ),
                p("cache_type_k", "-ctk", cache.clone(), "f16", LoadTime, "K cache data type."),
                p(
                    "cache_type_v",
                    "-ctv",
                    cache,
                    "f16",
                    LoadTime,
                    "V cache data type (quantized V needs flash attention).",
                ),
                p(
                    "flash_attn",
                    "-fa",
                    Choice { choices: &["on", "off", "auto"], open: false },
                    "auto",
                    LoadTime,
                    "Flash attention.",
                ),
                p(
                    "n_gpu_layers",
                    "-ngl",
                    int(0, 999),
                    "auto",
                    LoadTime,
                    "Layers offloaded to the GPU.",
                ),
                p("batch_size", "-b", int(1, 1 << 20), "2048", LoadTime, "Logical batch size."),
                p("ubatch_size", "-ub", int(1, 1 << 20), "512", LoadTime, "Physical batch size."),
                p(
                    "parallel",
                    "-np",
                    int(1, 256),
                    "auto",
                    LoadTime,
                    "Server slots (parallel sequences).",
                ),
                p("mlock", "--mlock", Bool, "false", LoadTime, "Lock the model in RAM."),
                p(
                    "no_mmap",
                    "--no-mmap",
                    Bool,
                    "false",
                    LoadTime,
                    "Read the model into memory instead of mapping it.",
                ),
                p(
                    "numa",
                    "--numa",
                    Choice { choices: &["distribute", "isolate", "numactl"], open: false },
                    "off",
                    LoadTime,
                    "NUMA placement.",
                ),
                p(
                    "draft_model",
                    "-md",
                    Model,
                    "none",
                    LoadTime,
                    "Draft model for speculative decoding (a model of this profile).",
                ),
                p("draft_max", "--draft-max", int(0, 256), "16", LoadTime, "Most tokens drafted."),
                p("draft_min", "--draft-min", int(0, 256), "0", LoadTime, "Fewest tokens drafted."),
            ],
            env_prefixes: &["CUDA_", "GGML_", "HIP_", "ROCR_", "OMP_", "LLAMA_"],
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
            if let Some(value) = settings.get(param.name) {
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
        match &self.domain {
            Domain::Int { min, max } => {
                let v: i64 = value.parse().map_err(|_| SettingError::NotAnInteger {
                    name: name.clone(),
                    value: value.into(),
                })?;
                if v < *min || v > *max {
                    return Err(SettingError::OutOfRange { name, value: v, min: *min, max: *max });
                }
                Ok(vec![self.flag.into(), v.to_string()])
            }
            Domain::Choice { choices, open } => {
                let plain_word = !value.is_empty()
                    && value.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
                if choices.contains(&value) || (*open && plain_word) {
                    Ok(vec![self.flag.into(), value.into()])
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
                Ok(vec![self.flag.into(), value.into()])
            }
            Domain::Bool => match value {
                "true" | "on" | "1" => Ok(vec![self.flag.into()]),
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
