//! What a load probe sends, as people use a model: named workloads the
//! project writes itself (`chat`, `summary`, `code`, `agent`, see
//! [`builtin`]) and a user's own file of prompts or conversations, kept in
//! the server's workloads folder and named by its file name alone
//! ([`file`]), or requests of drawn lengths ([`synthetic`]). Every request
//! is a chat: it goes through the engine's chat template
//! (`/v1/chat/completions`).

pub mod builtin;
pub mod file;
pub mod synthetic;

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Who says a message, as chat templates know them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    System,
    User,
    Assistant,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Message {
    pub role: Role,
    pub content: String,
}

/// One request of a workload.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    pub messages: Vec<Message>,
    /// Tokens to generate.
    pub max_tokens: u32,
    /// Its turn in a conversation whose earlier turns it repeats (0: the
    /// first, or no conversation): later turns may find their prefix in
    /// the engine's cache.
    pub turn: u32,
}

/// Requests in the order they are sent (cycling when a run needs more).
#[derive(Debug, Clone, PartialEq)]
pub struct Workload {
    pub name: String,
    pub requests: Vec<Request>,
}

/// The workloads the project writes itself.
pub const BUILTIN: [&str; 5] = ["chat", "summary", "code", "agent", "synthetic"];

/// The longest workload file name.
const MAX_NAME: usize = 64;

/// The workload `name`: a built-in one (`synthetic` of `lengths`), or the
/// file of that name in the server's workloads folder `dir` (a bare
/// `NAME.jsonl`, never a path).
pub fn load(
    name: &str,
    dir: Option<&Path>,
    lengths: &synthetic::Lengths,
) -> Result<Workload, String> {
    if name == "synthetic" {
        return Ok(synthetic::workload(lengths));
    }
    if let Some(w) = builtin::named(name) {
        return Ok(w);
    }
    file_name_error(name).map_or(Ok(()), Err)?;
    let dir = dir.ok_or_else(|| {
        format!("workload `{name}`: this server has no workloads folder (--workloads)")
    })?;
    let requests = file::read(&dir.join(name)).map_err(|e| format!("workload `{name}`: {e}"))?;
    Ok(Workload { name: name.to_string(), requests })
}

/// What is wrong with `name` as a workload, if anything: a built-in name,
/// or a file name of letters, digits, `_`, `-` and `.` ending in `.jsonl`.
pub fn name_error(name: &str) -> Option<String> {
    if BUILTIN.contains(&name) { None } else { file_name_error(name) }
}

fn file_name_error(name: &str) -> Option<String> {
    let plain = name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    let ok = plain
        && name.len() <= MAX_NAME
        && name.ends_with(".jsonl")
        && name.len() > ".jsonl".len()
        && !name.starts_with('.');
    (!ok).then(|| {
        format!(
            "workload `{}`: not one of {} nor a file name (NAME.jsonl, letters, digits, `_`, `-`, `.`; at most {MAX_NAME} characters)",
            name.chars().take(80).collect::<String>(),
            BUILTIN.join(", ")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_workload_is_named_never_a_path() {
        for ok in ["chat", "agent", "team-prompts.jsonl", "v2.prompts.jsonl"] {
            assert_eq!(name_error(ok), None, "{ok}");
        }
        for bad in [
            "../x.jsonl",
            "/etc/passwd",
            "a/b.jsonl",
            ".jsonl",
            ".hidden.jsonl",
            "x.json",
            "x y.jsonl",
        ] {
            assert!(name_error(bad).is_some(), "{bad}");
        }
        let lengths = synthetic::Lengths::default();
        let e = load("prompts.jsonl", None, &lengths).unwrap_err();
        assert!(e.contains("no workloads folder"), "{e}");
        let e = load("../../etc/passwd", Some(Path::new("/tmp")), &lengths).unwrap_err();
        assert!(e.contains("not one of chat, summary, code, agent, synthetic"), "{e}");
        assert_eq!(load("synthetic", None, &lengths).unwrap().requests.len(), 256);
    }
}
