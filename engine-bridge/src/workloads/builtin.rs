//! The workloads the project writes itself, the same on every machine
//! (drawn from a fixed seed): their lengths are those of real use, their
//! words are not meant to be read.
//!
//! - `chat`: short questions, short answers.
//! - `summary`: a long document to summarize (about a thousand words).
//! - `code`: a function to review, a longer answer.
//! - `agent`: conversations of six turns, each repeating the ones before
//!   after a long system prompt (tools, rules): later turns share a growing
//!   prefix, as an agent's do.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use super::{Message, Request, Role, Workload};

pub(super) const WORDS: &[&str] = &[
    "the",
    "model",
    "server",
    "memory",
    "cache",
    "layer",
    "token",
    "request",
    "answer",
    "team",
    "report",
    "data",
    "system",
    "value",
    "speed",
    "price",
    "market",
    "river",
    "city",
    "garden",
    "winter",
    "light",
    "number",
    "reason",
    "result",
    "plan",
    "budget",
    "customer",
    "order",
    "delivery",
    "week",
    "morning",
    "meeting",
    "project",
    "design",
    "test",
    "error",
    "file",
    "network",
    "user",
    "page",
    "search",
    "quickly",
    "carefully",
    "often",
    "rarely",
    "because",
    "although",
    "while",
    "after",
    "before",
    "should",
    "could",
    "would",
    "must",
    "improve",
    "compare",
    "explain",
    "measure",
    "change",
    "keep",
    "move",
    "build",
    "read",
    "write",
    "check",
    "small",
    "large",
    "early",
    "late",
    "simple",
    "careful",
    "useful",
    "strange",
    "common",
    "new",
];

fn sentence(rng: &mut StdRng, words: std::ops::Range<usize>) -> String {
    let n = rng.random_range(words);
    let mut s: Vec<&str> = (0..n).map(|_| WORDS[rng.random_range(0..WORDS.len())]).collect();
    let first = s[0].to_string();
    let capital = first[..1].to_uppercase() + &first[1..];
    s[0] = &capital;
    format!("{}.", s.join(" "))
}

fn paragraph(rng: &mut StdRng, sentences: std::ops::Range<usize>) -> String {
    let n = rng.random_range(sentences);
    (0..n).map(|_| sentence(rng, 8..17)).collect::<Vec<_>>().join(" ")
}

fn say(role: Role, content: String) -> Message {
    Message { role, content }
}

fn one(system: &str, user: String, max_tokens: u32) -> Request {
    Request {
        messages: vec![say(Role::System, system.into()), say(Role::User, user)],
        max_tokens,
        turn: 0,
    }
}

fn chat(rng: &mut StdRng) -> Vec<Request> {
    (0..48)
        .map(|i| {
            one(
                "You are a helpful assistant.",
                format!("Question {i}: {}", paragraph(rng, 2..5)),
                64,
            )
        })
        .collect()
}

fn summary(rng: &mut StdRng) -> Vec<Request> {
    (0..12)
        .map(|_| {
            let n = rng.random_range(12..21);
            let doc: Vec<String> = (0..n).map(|_| paragraph(rng, 4..7)).collect();
            let ask = "Summarize the document above in five bullet points.";
            one(
                "You summarize documents faithfully.",
                format!("{}\n\n{ask}", doc.join("\n\n")),
                160,
            )
        })
        .collect()
}

fn code(rng: &mut StdRng) -> Vec<Request> {
    (0..24)
        .map(|i| {
            let lines = rng.random_range(25..61);
            let mut body = format!("fn step_{i}(input: &[i64]) -> i64 {{\n    let mut total = 0;\n");
            for l in 0..lines {
                let (a, b) = (rng.random_range(0..l + 1), rng.random_range(1..100));
                let op = ["+", "-", "*", "%"][rng.random_range(0..4)];
                body.push_str(&format!(
                    "    let v{l} = input.get({a}).copied().unwrap_or({b}) {op} {b};\n    total += v{l};\n"
                ));
            }
            body.push_str("    total\n}\n");
            let ask = "Find the bug in this function and explain the fix.";
            one("You review code.", format!("```rust\n{body}```\n\n{ask}"), 128)
        })
        .collect()
}

fn agent(rng: &mut StdRng) -> Vec<Request> {
    let mut out = Vec::new();
    for _ in 0..6 {
        let tools: Vec<String> =
            (0..8).map(|t| format!("Tool {t}: {}", sentence(rng, 10..18))).collect();
        let system = format!(
            "You are an agent. Use the tools below; answer with one tool call a turn.\n{}\nRules: {}",
            tools.join("\n"),
            paragraph(rng, 3..5)
        );
        let mut messages = vec![say(Role::System, system)];
        for turn in 0..6u32 {
            messages.push(say(Role::User, format!("Observation {turn}: {}", paragraph(rng, 2..4))));
            out.push(Request { messages: messages.clone(), max_tokens: 48, turn });
            messages.push(say(
                Role::Assistant,
                format!("call tool {}: {}", turn % 8, sentence(rng, 8..14)),
            ));
        }
    }
    out
}

/// The built-in workload `name`, if it is one.
pub fn named(name: &str) -> Option<Workload> {
    let mut rng = StdRng::seed_from_u64(20_261_124);
    let requests = match name {
        "chat" => chat(&mut rng),
        "summary" => summary(&mut rng),
        "code" => code(&mut rng),
        "agent" => agent(&mut rng),
        _ => return None,
    };
    Some(Workload { name: name.to_string(), requests })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(r: &Request) -> usize {
        r.messages.iter().map(|m| m.content.split_whitespace().count()).sum()
    }

    #[test]
    fn each_workload_has_the_lengths_of_its_use() {
        let median = |name: &str| {
            let w = named(name).unwrap();
            let mut n: Vec<usize> = w.requests.iter().map(words).collect();
            n.sort();
            n[n.len() / 2]
        };
        assert!((20..120).contains(&median("chat")), "{}", median("chat"));
        assert!((700..1600).contains(&median("summary")), "{}", median("summary"));
        assert!(median("code") > 150, "{}", median("code"));
        assert_eq!(named("chat"), named("chat"), "the same every time");
        assert!(named("nope").is_none());
    }

    #[test]
    fn an_agent_s_turns_repeat_the_ones_before() {
        let w = named("agent").unwrap();
        let (first, second) = (&w.requests[0], &w.requests[1]);
        assert_eq!((first.turn, second.turn), (0, 1));
        assert_eq!(second.messages[..first.messages.len()], first.messages[..], "a shared prefix");
        assert_eq!(second.messages[first.messages.len()].role, Role::Assistant);
        assert_eq!(w.requests.iter().filter(|r| r.turn == 5).count(), 6, "six conversations");
    }
}
