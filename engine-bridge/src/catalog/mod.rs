//! Parameter catalogs: which settings an engine accepts, their domains, and
//! how each renders on the engine's command line.
//!
//! Users name settings (`ctx_size`, `cache_type_k`) and give values as text;
//! the catalog checks them and turns them into arguments. Nothing a user
//! types ever becomes a flag of its own: values are checked against the
//! domain and may not start with `-`.

mod engines;

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Serialize;

/// Settings chosen for one configuration: setting name to value, as text.
pub type Settings = BTreeMap<String, String>;

/// The values a parameter accepts.
/// The setting that picks which of a profile's model files a
/// configuration loads: a study varies it to compare quantizations.
pub const MODEL_SETTING: &str = "model";

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
    /// A comma-separated list of device ids or UUIDs (`0,1`,
    /// `GPU-8f2c…`): letters, digits and `-` only.
    Devices,
    /// Tensors placed by name: `PATTERN=BUFFER` by commas, each pattern a
    /// regular expression on tensor names, each buffer a device's buffer
    /// type (`CPU`, `CUDA0`, …): letters, digits and `_`.
    TensorOverrides,
    /// Shares by commas (`3,1`): how a model splits across devices.
    Proportions,
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
    #[error("environment variable `{name}` may not be set for {engine}: allowed are {allowed}")]
    EnvNotAllowed { engine: &'static str, name: String, allowed: String },
    #[error("environment variable `{name}` is set by the engine profile and may not be changed")]
    EnvPinned { name: String },
    #[error("setting `{name}`: control characters (newlines, tabs, …) are not allowed")]
    ControlCharacter { name: String },
    #[error("setting `{name}`: backticks are not allowed")]
    Backtick { name: String },
    #[error("setting `{name}`: the value is {len} bytes long, over the limit of {MAX_VALUE_LEN}")]
    TooLong { name: String, len: usize },
    #[error(
        "setting `{name}`: `{value}` is not a list of device ids (letters, digits, `-`, by commas)"
    )]
    NotDevices { name: String, value: String },
    #[error("setting `{name}`: `{value}` {why}")]
    NotPlacement { name: String, value: String, why: String },
}

/// The longest value any setting may have, in bytes.
pub const MAX_VALUE_LEN: usize = 4096;

/// An environment variable a study may set (`env.NAME`), with the values
/// it takes. Only variables listed this way, by exact name, ever reach an
/// engine from a study: whole families (`LLAMA_ARG_*` turns on any flag,
/// `GGML_BACKEND_PATH` loads a library) are never allowed.
#[derive(Debug, Clone, Serialize)]
pub struct EnvVar {
    pub name: &'static str,
    pub domain: Domain,
    pub help: &'static str,
}

/// The parameters of one engine kind.
#[derive(Debug, Clone, Serialize)]
pub struct Catalog {
    pub engine: &'static str,
    pub params: Vec<Param>,
    /// The environment variables a setting `env.NAME` may set.
    pub env: Vec<EnvVar>,
    /// Variables the engine profile sets: a study may not change them
    /// (the GPUs a profile is given, say).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pinned_env: Vec<String>,
    /// Words the profile's build takes beyond a closed choice's own (a
    /// fork's cache types, `turbo3`, say), by setting: see
    /// [`crate::Profile::choices`].
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub extra_choices: BTreeMap<String, Vec<String>>,
}

/// Settings turned into what the engine is given.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Rendered {
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    /// Request-time settings: fields added to every request's JSON body.
    pub request: serde_json::Map<String, serde_json::Value>,
}

/// A setting read when the engine starts (every catalog's settings are).
pub(crate) fn param(
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

/// A setting sent with each request: `key` is its field in the request's
/// JSON body, and the running engine is kept when only these change.
pub(crate) fn request_param(
    name: &'static str,
    key: &'static str,
    domain: Domain,
    default: &'static str,
    help: &'static str,
) -> Param {
    Param { phase: Phase::RequestTime, ..param(name, key, domain, default, help) }
}

pub(crate) fn int(min: i64, max: i64) -> Domain {
    Domain::Int { min, max }
}

pub use engines::GGML_TYPE_NUMBERS;

/// Settings named `env.NAME` set the environment variable NAME.
pub const ENV_PREFIX: &str = "env.";

/// K/V cache types llama.cpp accepts (`-ctk`, `-ctv`).
pub const CACHE_TYPES: &[&str] =
    &["f32", "f16", "bf16", "q8_0", "q5_1", "q5_0", "q4_1", "iq4_nl", "q4_0"];

impl Catalog {
    /// Looks up a parameter by name.
    pub fn get(&self, name: &str) -> Option<&Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// The settings that need a new launch when they change: everything
    /// but the request-time settings (environment variables included).
    pub fn load_time(&self, settings: &Settings) -> Settings {
        settings
            .iter()
            .filter(|(name, _)| self.get(name).is_none_or(|p| p.phase == Phase::LoadTime))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// The environment variable a setting `env.NAME` may set, checked
    /// against the profile's own.
    fn env_var(&self, name: &str) -> Result<&EnvVar, SettingError> {
        if self.pinned_env.iter().any(|p| p == name) {
            return Err(SettingError::EnvPinned { name: name.into() });
        }
        self.env.iter().find(|v| v.name == name).ok_or_else(|| {
            let allowed: Vec<&str> = self.env.iter().map(|v| v.name).collect();
            SettingError::EnvNotAllowed {
                engine: self.engine,
                name: name.escape_debug().to_string(),
                allowed: if allowed.is_empty() { "none".into() } else { allowed.join(", ") },
            }
        })
    }

    /// Checks every setting and renders them: flags in catalog order,
    /// `env.NAME` settings as environment variables, request-time settings
    /// as request fields.
    pub fn render(&self, settings: &Settings) -> Result<Rendered, SettingError> {
        let mut out = Rendered::default();
        for (name, value) in settings {
            check_text(name, value)?;
            if let Some(var) = name.strip_prefix(ENV_PREFIX) {
                let env = self.env_var(var)?;
                let param = param(env.name, "", env.domain.clone(), "", env.help);
                let rendered = param.render(value.trim())?;
                out.env.insert(var.to_string(), rendered.last().cloned().unwrap_or_default());
            } else if self.get(name).is_none() {
                return Err(SettingError::Unknown { engine: self.engine, name: name.clone() });
            }
        }
        for param in &self.params {
            let Some(value) = settings.get(param.name.as_ref()) else { continue };
            let value = value.trim();
            if param.name == MODEL_SETTING {
                // Not a flag: the launch puts the named model's path where
                // the engine takes its model (see `engine::plan`).
                param.render(value)?;
                continue;
            }
            if param.is_unset(value) {
                continue;
            }
            let extra = self.extra_choices.get(param.name.as_ref());
            if let (Some(words), Domain::Choice { .. }) = (extra, &param.domain)
                && words.iter().any(|w| w == value)
            {
                // Checked as plain words where the profile was read.
                out.args.extend([param.flag.to_string(), value.to_string()]);
                continue;
            }
            match param.phase {
                Phase::LoadTime => out.args.extend(param.render(value)?),
                Phase::RequestTime => {
                    out.request.insert(param.flag.to_string(), param.request_value(value)?);
                }
            }
        }
        Ok(out)
    }
}

/// Refuses control characters (a newline would start a new line in every
/// command line, unit file and report that shows the value), backticks
/// and values past [`MAX_VALUE_LEN`], whatever the setting.
fn check_text(name: &str, value: &str) -> Result<(), SettingError> {
    let shown = || name.escape_debug().to_string();
    if name.len() > 200 || value.len() > MAX_VALUE_LEN {
        return Err(SettingError::TooLong { name: shown(), len: value.len().max(name.len()) });
    }
    if name.chars().chain(value.chars()).any(char::is_control) {
        return Err(SettingError::ControlCharacter { name: shown() });
    }
    // Reports show values as code: a backtick would end it.
    if name.contains('`') || value.contains('`') {
        return Err(SettingError::Backtick { name: shown() });
    }
    Ok(())
}

impl Param {
    /// Whether `value` is the engine's default written as the word the
    /// catalog shows for it where the flag takes no such value (`--numa`'s
    /// `off`, a draft model's `none`, `-np`'s `auto`): the setting then
    /// passes nothing, which is how the engine comes to that default, so
    /// a study can set it beside the flag's values.
    pub fn is_unset(&self, value: &str) -> bool {
        value == self.default
            && self.name != MODEL_SETTING
            && (matches!(self.domain, Domain::Model) || self.render(value).is_err())
    }

    /// Checks one value and writes it as a JSON request field: numbers as
    /// numbers, switches as `true`/`false`, anything else as text.
    pub fn request_value(&self, value: &str) -> Result<serde_json::Value, SettingError> {
        let rendered = self.render(value)?;
        Ok(match &self.domain {
            Domain::Int { .. } => value.parse::<i64>().map(Into::into).expect("checked"),
            Domain::Float { .. } => value.parse::<f64>().map(Into::into).expect("checked"),
            Domain::Bool | Domain::BoolValue | Domain::Negatable { .. } => {
                matches!(value, "true" | "on" | "1").into()
            }
            _ => rendered.last().cloned().unwrap_or_default().into(),
        })
    }

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
                    let unset = if choices.contains(&self.default) || self.default.is_empty() {
                        String::new()
                    } else {
                        format!(", or {} (no flag: the engine's default)", self.default)
                    };
                    Err(SettingError::NotAChoice {
                        name,
                        value: value.into(),
                        choices: format!("{}{what}{unset}", choices.join(", ")),
                    })
                }
            }
            Domain::Model => {
                // A name of the profile's, never a path: plan() looks it up.
                let path_like = value.contains(['/', '\\']) || value.starts_with('.');
                if value.is_empty() || value.starts_with('-') || path_like {
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
            Domain::TensorOverrides => match tensor_overrides(value) {
                Ok(_) => Ok(vec![flag(), value.into()]),
                Err(why) => Err(SettingError::NotPlacement { name, value: value.into(), why }),
            },
            Domain::Proportions => {
                let share = |s: &str| s.parse::<f64>().is_ok_and(|v| v.is_finite() && v >= 0.0);
                if value.split(',').count() <= 64 && value.split(',').all(share) {
                    Ok(vec![flag(), value.into()])
                } else {
                    let why = "is not shares by commas (`3,1`)".to_string();
                    Err(SettingError::NotPlacement { name, value: value.into(), why })
                }
            }
            Domain::Devices => {
                let id = |d: &str| {
                    !d.is_empty()
                        && d.len() <= 64
                        && d.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
                };
                if value.split(',').count() <= 64 && value.split(',').all(id) {
                    Ok(vec![flag(), value.into()])
                } else {
                    Err(SettingError::NotDevices { name, value: value.into() })
                }
            }
        }
    }
}

/// Most `PATTERN=BUFFER` pairs in one tensor override.
pub const MAX_OVERRIDES: usize = 64;

/// A tensor override (`-ot`) read: each pattern compiled (within a size
/// bound) with the buffer its tensors go to; why not, when it cannot be.
pub fn tensor_overrides(value: &str) -> Result<Vec<(regex::Regex, String)>, String> {
    let pairs: Vec<&str> = value.split(',').collect();
    if pairs.len() > MAX_OVERRIDES {
        return Err(format!("has more than {MAX_OVERRIDES} overrides"));
    }
    pairs
        .into_iter()
        .map(|pair| {
            let (pattern, buffer) =
                pair.rsplit_once('=').ok_or_else(|| format!("has `{pair}`, not PATTERN=BUFFER"))?;
            let named = !buffer.is_empty()
                && buffer.len() <= 32
                && buffer.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !named {
                return Err(format!("names the buffer `{buffer}`, not CPU, CUDA0 or the like"));
            }
            let regex = regex::RegexBuilder::new(pattern)
                .size_limit(1 << 16)
                .build()
                .map_err(|_| format!("has `{pattern}`, which is not a pattern this reads"))?;
            Ok((regex, buffer.to_string()))
        })
        .collect()
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

    /// The engine's default, where the flag takes no such word, passes no
    /// flag: a study can set `numa = "off"` beside its placements, a draft
    /// model to `none` or `parallel` to `auto`; other values are checked
    /// as before, and the error names the word.
    #[test]
    fn the_engine_s_default_word_passes_no_flag() {
        let cat = Catalog::llama_server();
        let args = |pairs: &[(&str, &str)]| cat.render(&settings(pairs)).unwrap().args;
        assert_eq!(args(&[("numa", "off"), ("threads", "8")]), ["-t", "8"]);
        assert_eq!(args(&[("numa", "distribute")]), ["--numa", "distribute"]);
        assert!(args(&[("draft_model", "none"), ("parallel", "auto")]).is_empty());
        assert_eq!(args(&[("parallel", "2")]), ["-np", "2"]);
        let err = cat.render(&settings(&[("numa", "of")])).unwrap_err().to_string();
        assert!(err.contains("distribute, isolate, numactl, or off (no flag"), "{err}");
        // A value the flag takes is passed, even where it is the default.
        assert_eq!(args(&[("batch_size", "2048")]), ["-b", "2048"]);
    }

    #[test]
    fn rejects_unknown_settings_and_bad_values() {
        let cat = Catalog::llama_server();
        // A model is named, never given as a path (plan() looks names up in
        // the profile).
        let err = cat.render(&settings(&[("model", "/etc/passwd")])).unwrap_err();
        assert!(err.to_string().contains("the name of a model of this profile"), "{err}");
        let err = cat.render(&settings(&[("model_path", "/etc/passwd")])).unwrap_err();
        assert!(matches!(err, SettingError::Unknown { .. }), "{err}");
        let err = cat.render(&settings(&[("threads", "two")])).unwrap_err();
        assert_eq!(err.to_string(), "setting `threads`: `two` is not a whole number");
        let err = cat.render(&settings(&[("threads", "0")])).unwrap_err();
        assert!(matches!(err, SettingError::OutOfRange { value: 0, .. }), "{err}");
        let err = cat.render(&settings(&[("flash_attn", "maybe")])).unwrap_err();
        assert!(err.to_string().contains("on, off, auto"), "{err}");
    }

    #[test]
    fn request_time_settings_become_request_fields() {
        let cat = Catalog::llama_server();
        let s = settings(&[("top_k", "1"), ("threads", "2")]);
        let r = cat.render(&s).unwrap();
        assert_eq!(r.args, ["-t", "2"]);
        assert_eq!(r.request["top_k"], serde_json::json!(1));
        let p_min = Param {
            phase: Phase::RequestTime,
            ..param("p_min", "speculative.p_min", Domain::Float { min: 0.0, max: 1.0 }, "", "")
        };
        assert_eq!(p_min.request_value("0.5").unwrap(), serde_json::json!(0.5));
        let on =
            Param { phase: Phase::RequestTime, ..param("c", "cache_prompt", Domain::Bool, "", "") };
        assert_eq!(on.request_value("on").unwrap(), serde_json::json!(true));
        assert_eq!(cat.load_time(&s), settings(&[("threads", "2")]));
        let err = cat.render(&settings(&[("top_k", "-3")])).unwrap_err();
        assert!(matches!(err, SettingError::OutOfRange { value: -3, .. }), "{err}");
        let err = p_min.request_value("x").unwrap_err();
        assert!(matches!(err, SettingError::NotANumber { .. }), "{err}");
    }

    #[test]
    fn only_listed_environment_variables_with_checked_values() {
        let cat = Catalog::llama_server();
        let r = cat
            .render(&settings(&[
                ("env.CUDA_VISIBLE_DEVICES", "0,1"),
                ("env.GGML_CUDA_DISABLE_GRAPHS", "1"),
            ]))
            .unwrap();
        assert_eq!(r.env.get("CUDA_VISIBLE_DEVICES").map(String::as_str), Some("0,1"));
        assert_eq!(r.env.len(), 2);
        assert!(r.args.is_empty());
        for bad in [
            "env.LLAMA_ARG_TOOLS",
            "env.LLAMA_ARG_LOG_FILE",
            "env.GGML_BACKEND_PATH",
            "env.CUDA_INJECTION64_PATH",
            "env.LD_PRELOAD",
            "env.PATH",
            "env.GGML_X=Y",
        ] {
            let err = cat.render(&settings(&[(bad, "1")])).unwrap_err();
            assert!(matches!(err, SettingError::EnvNotAllowed { .. }), "{bad}: {err}");
        }
        for (name, bad) in [
            ("env.CUDA_VISIBLE_DEVICES", "0;rm"),
            ("env.GGML_CUDA_DISABLE_GRAPHS", "yes"),
            ("env.OMP_NUM_THREADS", "100000"),
        ] {
            assert!(cat.render(&settings(&[(name, bad)])).is_err(), "{name}={bad}");
        }
        for cat in [Catalog::llama_cpp_python(), Catalog::vllm(), Catalog::sglang()] {
            for v in &cat.env {
                let bad = ["LLAMA_ARG_", "LD_", "PATH", "PLUGIN", "INJECTION", "LIBRARY"];
                assert!(!bad.iter().any(|b| v.name.contains(b)), "{}: {}", cat.engine, v.name);
            }
        }
    }

    #[test]
    fn variables_the_profile_pins_stay_as_the_profile_says() {
        let mut cat = Catalog::llama_server();
        cat.pinned_env = vec!["CUDA_VISIBLE_DEVICES".into()];
        let err = cat.render(&settings(&[("env.CUDA_VISIBLE_DEVICES", "1")])).unwrap_err();
        assert!(matches!(err, SettingError::EnvPinned { .. }), "{err}");
    }

    #[test]
    fn control_characters_and_huge_values_are_refused_everywhere() {
        let cat = Catalog::vllm();
        for (name, value) in [
            ("speculative_config", "{\"a\": 1}\nExecStartPre=/bin/sh"),
            ("kv_cache_dtype", "fp8\r"),
            ("env.CUDA_VISIBLE_DEVICES", "0\n1"),
        ] {
            let err = cat.render(&settings(&[(name, value)])).unwrap_err();
            assert!(matches!(err, SettingError::ControlCharacter { .. }), "{name}: {err}");
        }
        let long = "x".repeat(MAX_VALUE_LEN + 1);
        let err = cat.render(&settings(&[("speculative_config", &long)])).unwrap_err();
        assert!(matches!(err, SettingError::TooLong { .. }), "{err}");
    }

    #[test]
    fn open_choices_accept_new_words_but_never_flags() {
        let cat = Catalog::vllm();
        let args = cat.render(&settings(&[("kv_cache_dtype", "fp4_new")])).unwrap().args;
        assert_eq!(args, ["--kv-cache-dtype", "fp4_new"]);
        for bad in ["--rpc", "fp8 -m x", ""] {
            let err = cat.render(&settings(&[("kv_cache_dtype", bad)])).unwrap_err();
            assert!(matches!(err, SettingError::NotAChoice { .. }), "{bad}: {err}");
        }
    }
}
