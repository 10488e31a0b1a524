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
}

impl EngineKind {
    /// The parameter catalog of this engine kind.
    pub fn catalog(self) -> Catalog {
        match self {
            EngineKind::LlamaServer => Catalog::llama_server(),
        }
    }
}

/// A model a profile may load.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelEntry {
    pub name: String,
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
    pub binary: PathBuf,
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
        if profile.models.is_empty() {
            return Err(ProfileError::Invalid { path: shown, message: "no [[models]]".into() });
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
    fn reports_unknown_fields_and_missing_models() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(
            &path,
            "name = \"p\"\nkind = \"llama-server\"\nbinary = \"x\"\nmodels = []\n",
        )
        .unwrap();
        assert!(Profile::load(&path).unwrap_err().to_string().contains("no [[models]]"));
        std::fs::write(&path, "name = \"p\"\nkind = \"vllm-nope\"\nbinary = \"x\"\n").unwrap();
        let err = Profile::load(&path).unwrap_err();
        assert!(matches!(err, ProfileError::Parse { .. }), "{err}");
    }
}
