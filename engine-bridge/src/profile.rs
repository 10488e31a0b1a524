//! Engine profiles: server-side TOML files naming an engine binary, its
//! models and environment. A profile is the allowlist of what may run: the
//! browser picks a profile and a model by name, never a path.
//!
//! ```toml
//! name = "demo"
//! kind = "llama-server"
//! binary = "../.tools/engine-bin/llama-server"   # relative to this file
//! library_path = ["../.tools/engine-bin"]         # prepended to LD_LIBRARY_PATH
//! args = ["--fit", "off"]                         # always passed
//!
//! [env]
//! GGML_SCHED_MAX_COPIES = "1"
//!
//! [[models]]
//! name = "tiny-llama"
//! path = "../.tools/models/tiny-llama.gguf"
//! ```

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use crate::catalog::Catalog;

/// The engine kinds Tunebook can launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum EngineKind {
    /// llama.cpp's `llama-server`.
    LlamaServer,
    /// llama-cpp-python's server: `binary` is the Python interpreter.
    LlamaCppPython,
    /// vLLM: `binary` is the `vllm` command.
    Vllm,
    /// SGLang: `binary` is the Python interpreter.
    Sglang,
    /// Any OpenAI-compatible server: `args` is the command line, with
    /// `{model}`, `{host}` and `{port}` filled in; `[params]` declares
    /// its settings.
    Custom,
    /// A server Tunebook does not launch, only measures: `url` is its
    /// OpenAI-compatible address and each model's `name` its model id.
    External,
}

/// How Tunebook talks to a running engine.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Api {
    #[default]
    /// llama-server's own endpoints: `/completion` with timings, `/tokenize`, `/props`.
    LlamaServer,
    /// The OpenAI-compatible `/v1/completions`, timed on the client.
    OpenAi,
}

impl EngineKind {
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::LlamaServer => "llama-server",
            EngineKind::LlamaCppPython => "llama-cpp-python",
            EngineKind::Vllm => "vllm",
            EngineKind::Sglang => "sglang",
            EngineKind::Custom => "custom",
            EngineKind::External => "external",
        }
    }

    pub fn api(self) -> Api {
        match self {
            EngineKind::LlamaServer => Api::LlamaServer,
            _ => Api::OpenAi,
        }
    }
}

/// A model a profile may load.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub name: String,
    /// The model file or folder (not for external endpoints).
    #[serde(default)]
    pub path: PathBuf,
}

/// One engine installation and the models it may run.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub kind: EngineKind,
    #[serde(default)]
    pub description: String,
    /// The program to run (not for external endpoints).
    #[serde(default)]
    pub binary: PathBuf,
    /// External endpoints: where the server answers, `http://host:port`.
    #[serde(default)]
    pub url: Option<String>,
    /// Folders prepended to `LD_LIBRARY_PATH` (engines built with shared
    /// libraries beside the binary).
    #[serde(default)]
    pub library_path: Vec<PathBuf>,
    /// Arguments always passed, before the configuration's own.
    #[serde(default)]
    pub args: Vec<String>,
    /// Environment set for the engine.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Custom engines: the path answering 200 once the engine is ready.
    #[serde(default)]
    pub health_path: Option<String>,
    /// Custom engines: setting name to command-line flag.
    #[serde(default)]
    pub params: BTreeMap<String, String>,
    /// Values the profile's build takes beyond the catalog's own, by
    /// setting: a fork's cache types (`cache_type_k = ["turbo3"]`). Plain
    /// words only; any other value of a listed setting is still refused.
    #[serde(default)]
    pub choices: BTreeMap<String, Vec<String>>,
    pub models: Vec<ModelEntry>,
}

/// A profile that could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProfileError {
    #[error("cannot read profile {path}")]
    Read {
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("profile {path} is not valid")]
    Parse {
        path: String,
        #[source]
        source: toml::de::Error,
    },
    #[error("profile {path}: {message}")]
    Invalid { path: String, message: String },
}

impl Profile {
    /// Reads a profile file; relative paths in it are taken relative to the
    /// file's own folder.
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| ProfileError::Read { path: shown.clone(), source })?;
        let mut profile: Profile = toml::from_str(&text)
            .map_err(|source| ProfileError::Parse { path: shown.clone(), source })?;
        let invalid =
            |message: &str| ProfileError::Invalid { path: shown.clone(), message: message.into() };
        if profile.models.is_empty() {
            return Err(invalid("no [[models]]"));
        }
        for (name, words) in &profile.choices {
            let plain = |w: &String| {
                !w.is_empty()
                    && w.len() <= 64
                    && w.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
            };
            if let Some(bad) = words.iter().find(|w| !plain(w)) {
                return Err(invalid(&format!(
                    "choices of `{name}`: `{}` is not a plain word (letters, digits, _)",
                    bad.escape_debug()
                )));
            }
            let catalog = profile.catalog();
            let choice = catalog
                .get(name)
                .is_some_and(|p| matches!(p.domain, crate::catalog::Domain::Choice { .. }));
            if !choice {
                return Err(invalid(&format!(
                    "choices: `{name}` is not a setting of {} that takes a word from a list",
                    catalog.engine
                )));
            }
        }
        if profile.kind == EngineKind::External {
            match profile.url.as_deref() {
                Some(u) if u.starts_with("http://") => {}
                Some(_) => return Err(invalid("`url` must start with http://")),
                None => return Err(invalid("an external profile needs `url`")),
            }
            return Ok(profile);
        }
        if profile.binary.as_os_str().is_empty() {
            return Err(invalid("`binary` is missing"));
        }
        if profile.models.iter().any(|m| m.path.as_os_str().is_empty()) {
            return Err(invalid("every [[models]] needs a `path`"));
        }
        let base = path.parent().unwrap_or(Path::new("."));
        let resolve = |p: &Path| {
            if p.is_absolute() { p.to_path_buf() } else { base.join(p) }
        };
        profile.binary = resolve(&profile.binary);
        profile.library_path = profile.library_path.iter().map(|p| resolve(p)).collect();
        for model in &mut profile.models {
            model.path = resolve(&model.path);
        }
        Ok(profile)
    }

    /// Reads every `*.toml` file in a folder, sorted by name. A file that
    /// fails to load is reported, not skipped.
    pub fn load_dir(dir: &Path) -> Result<Vec<Self>, ProfileError> {
        let read_err = |source| ProfileError::Read { path: dir.display().to_string(), source };
        let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
            .map_err(read_err)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|e| e == "toml"))
            .collect();
        paths.sort();
        let profiles = paths.iter().map(|p| Self::load(p)).collect::<Result<Vec<_>, _>>()?;
        let mut names = std::collections::BTreeSet::new();
        for p in &profiles {
            if !names.insert(p.name.as_str()) {
                return Err(ProfileError::Invalid {
                    path: dir.display().to_string(),
                    message: format!("two profiles are named `{}`", p.name),
                });
            }
        }
        Ok(profiles)
    }

    /// The parameter catalog of this profile's engine; the variables the
    /// profile sets are pinned (a study may not change them).
    pub fn catalog(&self) -> Catalog {
        let mut catalog = match self.kind {
            EngineKind::LlamaServer => Catalog::llama_server(),
            EngineKind::LlamaCppPython => Catalog::llama_cpp_python(),
            EngineKind::Vllm => Catalog::vllm(),
            EngineKind::Sglang => Catalog::sglang(),
            EngineKind::Custom => Catalog::custom(&self.params),
            EngineKind::External => Catalog { env: vec![], ..Catalog::custom(&BTreeMap::new()) },
        };
        catalog.pinned_env = self.env.keys().cloned().collect();
        catalog.extra_choices = self.choices.clone();
        catalog
    }

    /// The path that answers 200 once the engine can serve.
    pub fn health_path(&self) -> &str {
        match self.kind {
            EngineKind::LlamaServer | EngineKind::Vllm | EngineKind::Sglang => "/health",
            // llama-cpp-python has no /health; its model list answers once loaded.
            EngineKind::LlamaCppPython => "/v1/models",
            EngineKind::Custom => self.health_path.as_deref().unwrap_or("/health"),
            EngineKind::External => "/v1/models",
        }
    }

    /// Arguments that name the model and the address, in this engine's words.
    pub fn launch_args(&self, model: &Path, host: &str, port: u16) -> Vec<String> {
        let (m, port) = (model.display().to_string(), port.to_string());
        let v = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        match self.kind {
            EngineKind::LlamaServer => v(&["-m", &m, "--host", host, "--port", &port]),
            EngineKind::LlamaCppPython => {
                v(&["-m", "llama_cpp.server", "--model", &m, "--host", host, "--port", &port])
            }
            EngineKind::Vllm => v(&["serve", &m, "--host", host, "--port", &port]),
            EngineKind::Sglang => v(&[
                "-m",
                "sglang.launch_server",
                "--model-path",
                &m,
                "--host",
                host,
                "--port",
                &port,
            ]),
            EngineKind::Custom | EngineKind::External => vec![],
        }
    }

    /// The profile's fixed arguments, with `{model}`, `{host}`, `{port}` filled in.
    pub fn fixed_args(&self, model: &Path, host: &str, port: u16) -> Vec<String> {
        self.args
            .iter()
            .map(|a| {
                a.replace("{model}", &model.display().to_string())
                    .replace("{host}", host)
                    .replace("{port}", &port.to_string())
            })
            .collect()
    }

    /// Looks up a model by name.
    pub fn model(&self, name: &str) -> Option<&ModelEntry> {
        self.models.iter().find(|m| m.name == name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_relative_paths_against_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "name = \"p\"\nkind = \"llama-server\"\nbinary = \"bin/llama-server\"\n\
             [[models]]\nname = \"m\"\npath = \"/abs/m.gguf\"\n",
        )
        .unwrap();
        let p = Profile::load(&path).unwrap();
        assert_eq!(p.binary, dir.path().join("bin/llama-server"));
        assert_eq!(p.model("m").unwrap().path, PathBuf::from("/abs/m.gguf"));
        assert!(p.model("other").is_none());
    }

    #[test]
    fn external_endpoints_need_a_url_and_nothing_to_run() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        let write = |text: &str| std::fs::write(&path, text).unwrap();
        write(
            "name = \"e\"\nkind = \"external\"\nurl = \"http://127.0.0.1:8000\"\n[[models]]\nname = \"qwen\"\n",
        );
        let p = Profile::load(&path).unwrap();
        assert_eq!(p.url.as_deref(), Some("http://127.0.0.1:8000"));
        write("name = \"e\"\nkind = \"external\"\n[[models]]\nname = \"qwen\"\n");
        assert!(Profile::load(&path).unwrap_err().to_string().contains("needs `url`"));
        write(
            "name = \"e\"\nkind = \"llama-server\"\n[[models]]\nname = \"m\"\npath = \"m.gguf\"\n",
        );
        assert!(Profile::load(&path).unwrap_err().to_string().contains("`binary` is missing"));
    }

    #[test]
    fn reports_unknown_fields_and_missing_models() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "name = \"p\"\nkind = \"llama-server\"\nbinary = \"x\"\nmodels = []\n",
        )
        .unwrap();
        assert!(Profile::load(&path).unwrap_err().to_string().contains("no [[models]]"));
        let models = "[[models]]\nname = \"m\"\npath = \"m.gguf\"\n";
        let head = "name = \"p\"\nkind = \"llama-server\"\nbinary = \"x\"\n";
        std::fs::write(&path, format!("{head}[choices]\ncache_type_k = [\"turbo3\"]\n{models}"))
            .unwrap();
        let p = Profile::load(&path).unwrap();
        assert!(p.catalog().render(&[("cache_type_k".into(), "turbo3".into())].into()).is_ok());
        for (bad, says) in [
            ("cache_type_k = [\"-m x\"]", "not a plain word"),
            ("ctx_size = [\"big\"]", "takes a word from a list"),
        ] {
            std::fs::write(&path, format!("{head}[choices]\n{bad}\n{models}")).unwrap();
            let err = Profile::load(&path).unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
        std::fs::write(&path, "name = \"p\"\nkind = \"vllm-nope\"\nbinary = \"x\"\n").unwrap();
        let err = Profile::load(&path).unwrap_err();
        assert!(matches!(err, ProfileError::Parse { .. }), "{err}");
    }
}
