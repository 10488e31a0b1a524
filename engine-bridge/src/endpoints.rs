//! OpenAI-compatible endpoints that Tunebook itself talks to (a judge model,
//! a model that proposes configurations, a writer), configured on the
//! server only (`--endpoints FILE`):
//!
//! ```toml
//! [judge]
//! url = "http://127.0.0.1:8081"
//! model = "qwen3-8b"             # optional: the endpoint's first model
//! api_key_env = "JUDGE_API_KEY"  # optional: a variable of Tunebook's own
//! ```
//!
//! A study names an endpoint (`endpoint = "judge"`); it never gives a URL or
//! the name of a variable, so nothing a study says can send a key, or any
//! request, anywhere the server's owner did not choose.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

/// One endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Endpoint {
    /// `http://host:port` (or `https://`).
    pub url: String,
    /// The model id to ask; the first one the endpoint lists when absent.
    #[serde(default)]
    pub model: Option<String>,
    /// The name of an environment variable of Tunebook's own holding an API
    /// key, sent as a bearer token.
    #[serde(default)]
    pub api_key_env: Option<String>,
}

/// Endpoints by name.
pub type Endpoints = BTreeMap<String, Endpoint>;

impl Endpoint {
    /// The API key, if the endpoint wants one.
    pub fn api_key(&self) -> Result<Option<String>, String> {
        match &self.api_key_env {
            None => Ok(None),
            Some(var) => std::env::var(var)
                .map(Some)
                .map_err(|_| format!("environment variable {var} is not set")),
        }
    }

    /// Why the URL cannot be used, if it cannot.
    fn url_error(&self) -> Option<String> {
        let ok = ["http://", "https://"].iter().any(|s| self.url.starts_with(s))
            && !self.url.chars().any(|c| c.is_control() || c.is_whitespace());
        (!ok).then(|| format!("`{}` is not an http:// or https:// address", self.url))
    }
}

/// Reads the endpoints file.
pub fn load(path: &Path) -> Result<Endpoints, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read endpoints {}: {e}", path.display()))?;
    let endpoints: Endpoints = toml::from_str(&text)
        .map_err(|e| format!("endpoints {} are not valid: {}", path.display(), e.message()))?;
    for (name, endpoint) in &endpoints {
        if let Some(why) = endpoint.url_error() {
            return Err(format!("endpoint `{name}` in {}: {why}", path.display()));
        }
    }
    Ok(endpoints)
}

/// The endpoint a study names, or why there is none.
pub fn named<'a>(endpoints: &'a Endpoints, name: &str) -> Result<&'a Endpoint, String> {
    endpoints.get(name).ok_or_else(|| {
        let known: Vec<&str> = endpoints.keys().map(String::as_str).collect();
        format!(
            "endpoint `{}` is not configured on this server ({}); endpoints are set with --endpoints",
            name.escape_debug(),
            if known.is_empty() { "it has none".to_string() } else { known.join(", ") }
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn endpoints_are_read_by_name_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("endpoints.toml");
        std::fs::write(&path, "[judge]\nurl = \"http://127.0.0.1:9\"\nmodel = \"m\"\n").unwrap();
        let all = load(&path).unwrap();
        assert_eq!(named(&all, "judge").unwrap().model.as_deref(), Some("m"));
        let e = named(&all, "other").unwrap_err();
        assert!(e.contains("not configured") && e.contains("judge"), "{e}");
        std::fs::write(&path, "[judge]\nurl = \"file:///etc/passwd\"\n").unwrap();
        assert!(load(&path).unwrap_err().contains("not an http://"));
        std::fs::write(&path, "[judge]\nurl = \"http://x\"\nkey = \"k\"\n").unwrap();
        assert!(load(&path).unwrap_err().contains("unknown field"));
    }
}
