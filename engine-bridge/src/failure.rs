//! Why an engine failed, told from how it exited and what it printed last.

use serde::{Deserialize, Serialize};

use crate::process::ExitInfo;

/// The cause of a failed launch or probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The engine refused a setting (bad flag or value) and exited.
    Rejected,
    /// Memory ran out: an allocation failed or the kernel killed the engine.
    OutOfMemory,
    /// The engine died from a signal it did not ask for (segfault, abort).
    Crashed,
    /// The engine exited during load for another reason.
    LoadFailed,
    /// The engine did not answer its health check in time.
    LoadTimeout,
    /// A probe request got no answer in time.
    ProbeTimeout,
    /// A probe request failed or the answer made no sense.
    ProbeFailed,
    /// Another process already listens on the chosen port.
    PortConflict,
    /// The binary could not be started at all.
    Spawn,
    /// Tunebook itself stopped while the trial ran.
    Interrupted,
}

impl FailureKind {
    pub const ALL: [FailureKind; 10] = [
        FailureKind::Rejected,
        FailureKind::OutOfMemory,
        FailureKind::Crashed,
        FailureKind::LoadFailed,
        FailureKind::LoadTimeout,
        FailureKind::ProbeTimeout,
        FailureKind::ProbeFailed,
        FailureKind::PortConflict,
        FailureKind::Spawn,
        FailureKind::Interrupted,
    ];

    /// A short label for tables.
    pub fn label(self) -> &'static str {
        match self {
            FailureKind::Rejected => "setting rejected",
            FailureKind::OutOfMemory => "out of memory",
            FailureKind::Crashed => "crashed",
            FailureKind::LoadFailed => "load failed",
            FailureKind::LoadTimeout => "load timeout",
            FailureKind::ProbeTimeout => "probe timeout",
            FailureKind::ProbeFailed => "probe failed",
            FailureKind::PortConflict => "port conflict",
            FailureKind::Spawn => "cannot start",
            FailureKind::Interrupted => "interrupted",
        }
    }

    /// The kind a stored word names: its label (`out of memory`), as
    /// failures are stored, or its name (`out_of_memory`), as a worker may
    /// send it.
    pub fn parse(word: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| {
            k.label() == word
                || serde_json::to_value(k).ok().and_then(|v| v.as_str().map(|s| s == word))
                    == Some(true)
        })
    }
}

/// A failure with its evidence.
#[derive(
    Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error, schemars::JsonSchema,
)]
#[error("{}: {message}", kind.label())]
pub struct Failure {
    pub kind: FailureKind,
    /// What went wrong, in the engine's own words where it gave any.
    pub message: String,
    /// The last lines the engine printed.
    pub log_tail: Vec<String>,
}

impl Failure {
    /// A failure with no engine output to show (one Tunebook saw itself).
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        Failure { kind, message: message.into(), log_tail: vec![] }
    }
}

const OOM_MARKERS: &[&str] = &[
    "out of memory",
    "failed to allocate",
    "cudamalloc failed",
    "unable to allocate",
    "cannot allocate memory",
    "std::bad_alloc",
];

const PORT_MARKERS: &[&str] = &["couldn't bind", "address already in use"];

const REJECT_MARKERS: &[&str] = &[
    "invalid argument",
    "error while handling argument",
    "unknown argument",
    "unsupported",
    "invalid value",
    "unrecognized",
    "usage:",
];

/// Classifies an engine that exited before it was ready.
pub fn classify_exit(exit: ExitInfo, tail: Vec<String>) -> Failure {
    let lower: Vec<String> = tail.iter().map(|l| l.to_lowercase()).collect();
    let has = |markers: &[&str]| lower.iter().any(|l| markers.iter().any(|m| l.contains(m)));
    let kind = if has(PORT_MARKERS) {
        FailureKind::PortConflict
    } else if has(OOM_MARKERS) || exit.signal == Some(libc_sigkill()) {
        FailureKind::OutOfMemory
    } else if exit.signal.is_some() {
        FailureKind::Crashed
    } else if has(REJECT_MARKERS) {
        FailureKind::Rejected
    } else {
        FailureKind::LoadFailed
    };
    let message = match engine_message(&tail) {
        Some(m) => format!("{m} ({exit})"),
        None => format!("engine ended with {exit} before it was ready"),
    };
    Failure { kind, message, log_tail: tail }
}

fn libc_sigkill() -> i32 {
    nix::sys::signal::Signal::SIGKILL as i32
}

/// The engine's own error lines: the lines that say "error" (or an
/// allocation failure), without the usage text that often follows.
pub fn engine_message(tail: &[String]) -> Option<String> {
    let lines: Vec<&str> = tail
        .iter()
        .map(|l| l.trim())
        .filter(|l| {
            let l = l.to_lowercase();
            l.contains("error") || OOM_MARKERS.iter().any(|m| l.contains(m))
        })
        .collect();
    if lines.is_empty() {
        return None;
    }
    // Keep the last few: the first error usually explains the rest.
    let start = lines.len().saturating_sub(3);
    Some(lines[start..].join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kind_is_read_back_from_its_label_and_from_its_name() {
        for kind in FailureKind::ALL {
            assert_eq!(FailureKind::parse(kind.label()), Some(kind));
            let name = serde_json::to_value(kind).unwrap();
            assert_eq!(FailureKind::parse(name.as_str().unwrap()), Some(kind));
        }
        assert_eq!(FailureKind::parse("x\" onmouseover=\"alert(1)"), None);
    }

    fn lines(s: &[&str]) -> Vec<String> {
        s.iter().map(|l| l.to_string()).collect()
    }

    #[test]
    fn rejected_flag_keeps_the_engine_words() {
        let exit = ExitInfo { code: Some(1), signal: None };
        let f = classify_exit(
            exit,
            lines(&[
                "build: 1",
                "error while handling argument \"-ctk\": Unsupported cache type: q3",
                "usage:",
            ]),
        );
        assert_eq!(f.kind, FailureKind::Rejected);
        assert!(f.message.contains("Unsupported cache type: q3"), "{}", f.message);
        assert!(f.message.contains("exit code 1"), "{}", f.message);
    }

    #[test]
    fn oom_and_crash() {
        let f = classify_exit(
            ExitInfo { code: Some(1), signal: None },
            lines(&[
                "ggml_backend_cpu_buffer_type_alloc_buffer: failed to allocate buffer of size 9999",
            ]),
        );
        assert_eq!(f.kind, FailureKind::OutOfMemory);
        let f = classify_exit(ExitInfo { code: None, signal: Some(9) }, vec![]);
        assert_eq!(f.kind, FailureKind::OutOfMemory, "a SIGKILL we did not send is the OOM killer");
        let f = classify_exit(ExitInfo { code: None, signal: Some(11) }, vec![]);
        assert_eq!(f.kind, FailureKind::Crashed);
        assert!(f.message.contains("SIGSEGV"), "{}", f.message);
        let f = classify_exit(ExitInfo { code: Some(3), signal: None }, lines(&["bye"]));
        assert_eq!(f.kind, FailureKind::LoadFailed);
    }
}
