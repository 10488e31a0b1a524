//! A user's own workload: a JSONL file in the server's workloads folder,
//! one request a line, either a prompt or a conversation:
//!
//! ```text
//! {"prompt": "Summarize: …", "max_tokens": 200}
//! {"messages": [{"role": "system", "content": "…"}, {"role": "user", "content": "…"}]}
//! ```
//!
//! Everything is bounded before it is kept, and a line that is not one of
//! those is refused with its number.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use serde::Deserialize;

use super::{Message, Request, Role};

/// The largest workload file.
pub const MAX_BYTES: u64 = 16 << 20;
/// The most requests a file may hold.
pub const MAX_LINES: usize = 10_000;
/// The most messages one request may hold.
pub const MAX_MESSAGES: usize = 256;
/// Tokens one request may ask for.
pub const MAX_TOKENS: u32 = 8192;
const DEFAULT_TOKENS: u32 = 128;

#[derive(Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
struct Line {
    prompt: Option<String>,
    messages: Option<Vec<Message>>,
    max_tokens: Option<u32>,
}

/// The requests of the workload file at `path`.
pub fn read(path: &Path) -> Result<Vec<Request>, String> {
    let file = std::fs::File::open(path).map_err(|e| format!("cannot read it: {e}"))?;
    let size = file.metadata().map_err(|e| e.to_string())?.len();
    if size > MAX_BYTES {
        return Err(format!("{size} bytes, more than the {MAX_BYTES} a workload may have"));
    }
    parse(BufReader::new(file.take(MAX_BYTES)))
}

/// Requests from JSONL text.
pub fn parse(text: impl BufRead) -> Result<Vec<Request>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let number = i + 1;
        let line = line.map_err(|e| format!("line {number}: {e}"))?;
        if line.trim().is_empty() {
            continue;
        }
        if out.len() == MAX_LINES {
            return Err(format!("more than {MAX_LINES} requests"));
        }
        out.push(request(&line).map_err(|e| format!("line {number}: {e}"))?);
    }
    if out.is_empty() {
        return Err("no request in it".into());
    }
    Ok(out)
}

fn request(line: &str) -> Result<Request, String> {
    let l: Line = serde_json::from_str(line).map_err(|e| {
        format!("{e} (expected {{\"prompt\": …}} or {{\"messages\": […]}}, and `max_tokens`)")
    })?;
    let messages = match (l.prompt, l.messages) {
        (Some(p), None) => vec![Message { role: Role::User, content: p }],
        (None, Some(m)) if !m.is_empty() && m.len() <= MAX_MESSAGES => m,
        (None, Some(m)) => return Err(format!("{} messages: 1 to {MAX_MESSAGES}", m.len())),
        _ => return Err("give either `prompt` or `messages`".into()),
    };
    let max_tokens = l.max_tokens.unwrap_or(DEFAULT_TOKENS);
    if !(1..=MAX_TOKENS).contains(&max_tokens) {
        return Err(format!("max_tokens {max_tokens}: 1 to {MAX_TOKENS}"));
    }
    Ok(Request { messages, max_tokens, turn: 0 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_and_conversations_are_read_and_a_bad_line_is_named() {
        let text = "{\"prompt\": \"hi\", \"max_tokens\": 9}\n\n\
                    {\"messages\": [{\"role\": \"system\", \"content\": \"s\"}, {\"role\": \"user\", \"content\": \"u\"}]}\n";
        let r = parse(text.as_bytes()).unwrap();
        assert_eq!(r.len(), 2);
        assert_eq!((r[0].max_tokens, r[0].messages[0].role), (9, Role::User));
        assert_eq!((r[1].max_tokens, r[1].messages.len()), (128, 2));
        for (bad, why) in [
            ("{\"prompt\": \"a\"}\n{\"prompt\": 3}\n", "line 2:"),
            (
                "{\"prompt\": \"a\"}\n{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}",
                "line 2:",
            ),
            ("\n\n{\"prompt\": \"a\", \"stream\": true}", "line 3: unknown field `stream`"),
            ("{\"prompt\": \"a\", \"max_tokens\": 0}", "line 1: max_tokens 0"),
            ("{\"prompt\": \"a\", \"messages\": []}", "line 1: give either"),
            ("not json", "line 1:"),
            ("\n", "no request"),
        ] {
            let e = parse(bad.as_bytes()).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
        let many = "{\"prompt\": \"a\"}\n".repeat(MAX_LINES + 1);
        assert!(parse(many.as_bytes()).unwrap_err().contains("more than 10000 requests"));
    }

    #[test]
    fn a_file_too_large_is_refused_before_it_is_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("big.jsonl");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(MAX_BYTES + 1).unwrap();
        assert!(read(&path).unwrap_err().contains("more than"), "refused by its size");
    }
}
