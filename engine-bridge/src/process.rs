//! Engine processes: launched in their own process group with stdin closed,
//! output drained into a bounded tail (and optionally a log file), stopped
//! with SIGTERM, a grace period, then SIGKILL to the whole group.
//!
//! Nothing here goes through a shell: the program and each argument are
//! passed to the kernel as they are.

use std::collections::{BTreeMap, VecDeque};
use std::os::unix::process::ExitStatusExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::StreamExt;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::Serialize;
use tokio::io::{AsyncRead, AsyncWriteExt};
use tokio::process::Child;
use tokio::sync::watch;
use tokio_util::codec::FramedRead;

use crate::output_lines::CappedLines;
use crate::profile::Api;
use crate::registry;

/// Lines kept of an engine's output.
pub const TAIL_LINES: usize = 400;
/// Longest line kept, in bytes; engines sometimes print whole tensors.
const MAX_LINE: usize = 2000;

/// What to run.
#[derive(Debug, Clone, Serialize)]
pub struct LaunchSpec {
    pub program: PathBuf,
    pub args: Vec<String>,
    /// Variables added to (or replacing) Tunebook's own environment.
    pub env: BTreeMap<String, String>,
    /// Where to append the engine's output, if anywhere.
    #[serde(skip)]
    pub log_file: Option<PathBuf>,
    /// Where to record the running engine (see [`crate::registry`]), so a
    /// later start can stop it if Tunebook dies first.
    #[serde(skip)]
    pub registry_dir: Option<PathBuf>,
    /// How to talk to it once it runs.
    #[serde(skip)]
    pub api: Api,
    /// The path that answers 200 once it is ready.
    pub health_path: String,
    /// Request-time settings: fields added to every request sent to it.
    /// Changing them needs no new launch.
    #[serde(skip_serializing_if = "serde_json::Map::is_empty")]
    pub request: serde_json::Map<String, serde_json::Value>,
    /// The model file it serves, where it is one Tunebook knows (its chat
    /// template is read from there).
    #[serde(skip)]
    pub model: Option<PathBuf>,
}

impl LaunchSpec {
    /// A llama-server-like engine: its own API, ready when `/health` says so.
    pub fn new(program: PathBuf, args: Vec<String>) -> Self {
        Self {
            program,
            args,
            env: BTreeMap::new(),
            log_file: None,
            registry_dir: None,
            api: Api::LlamaServer,
            health_path: "/health".into(),
            request: serde_json::Map::new(),
            model: None,
        }
    }

    /// The command line as one readable string (for display only: it is
    /// never given to a shell).
    pub fn display(&self) -> String {
        std::iter::once(self.program.display().to_string())
            .chain(self.args.iter().cloned())
            .collect::<Vec<_>>()
            .join(" ")
    }
}

/// How a process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct ExitInfo {
    pub code: Option<i32>,
    pub signal: Option<i32>,
}

impl std::fmt::Display for ExitInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.code, self.signal) {
            (Some(c), _) => write!(f, "exit code {c}"),
            (None, Some(s)) => match Signal::try_from(s) {
                Ok(sig) => write!(f, "killed by {sig}"),
                Err(_) => write!(f, "killed by signal {s}"),
            },
            (None, None) => write!(f, "unknown exit"),
        }
    }
}

/// The last lines an engine printed on stdout and stderr, interleaved.
#[derive(Debug, Default)]
pub struct LogTail {
    lines: VecDeque<String>,
}

impl LogTail {
    /// Keeps `line` (at most [`MAX_LINE`] bytes and `…`, as
    /// [`CappedLines`] reads them), dropping the oldest beyond [`TAIL_LINES`].
    fn push(&mut self, line: String) {
        if self.lines.len() == TAIL_LINES {
            self.lines.pop_front();
        }
        self.lines.push_back(line);
    }

    /// The kept lines, oldest first.
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.lines.iter().map(String::as_str)
    }
}

/// A process could not be started.
#[derive(Debug, thiserror::Error)]
#[error("cannot start {program}")]
pub struct SpawnError {
    pub program: String,
    #[source]
    pub source: std::io::Error,
}

/// A running (or finished) engine process.
pub struct EngineProcess {
    pid: Pid,
    registry_dir: Option<PathBuf>,
    tail: Arc<Mutex<LogTail>>,
    exit: watch::Receiver<Option<ExitInfo>>,
}

impl EngineProcess {
    /// Starts the process as [`crate::children`] starts every child: its own
    /// process group, stdin closed, dying with Tunebook.
    pub fn spawn(spec: &LaunchSpec) -> Result<Self, SpawnError> {
        let mut cmd = crate::children::command(&spec.program);
        cmd.args(&spec.args).envs(&spec.env).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = crate::children::spawn(cmd)
            .map_err(|source| SpawnError { program: spec.program.display().to_string(), source })?;
        let pid = Pid::from_raw(child.id().expect("a just-spawned child has a pid") as i32);
        let tail = Arc::new(Mutex::new(LogTail::default()));
        let (tx, exit) = watch::channel(None);
        let raw_pid = pid.as_raw() as u32;
        if let Some(dir) = &spec.registry_dir {
            let program = spec.program.display().to_string();
            if let Err(e) = registry::register(dir, raw_pid, &program) {
                tracing::warn!(error = %e, "cannot record the engine; it may outlive a crash");
            }
        }
        let pipes = (child.stdout.take(), child.stderr.take());
        let record = spec.registry_dir.clone().map(|d| (d, raw_pid));
        let log_file = spec.log_file.clone();
        tokio::spawn(supervise(pipes, child, tail.clone(), log_file, record, tx));
        Ok(Self { pid, registry_dir: spec.registry_dir.clone(), tail, exit })
    }

    /// The process id (also the process group id).
    pub fn pid(&self) -> u32 {
        self.pid.as_raw() as u32
    }

    /// How the process ended, if it has.
    pub fn exit_info(&self) -> Option<ExitInfo> {
        *self.exit.borrow()
    }

    /// Waits until the process has ended.
    pub async fn wait(&self) -> ExitInfo {
        let mut rx = self.exit.clone();
        let done = rx.wait_for(Option::is_some).await;
        match done {
            Ok(v) => v.expect("waited for Some"),
            // The supervisor only drops the sender after sending.
            Err(_) => self.exit_info().unwrap_or(ExitInfo { code: None, signal: None }),
        }
    }

    /// The last `n` lines of output.
    pub fn tail(&self, n: usize) -> Vec<String> {
        let tail = self.tail.lock().expect("log tail lock");
        let skip = tail.lines.len().saturating_sub(n);
        tail.lines().skip(skip).map(str::to_string).collect()
    }

    /// SIGTERM to the group, up to `grace` to exit, then SIGKILL.
    pub async fn stop(&self, grace: Duration) -> ExitInfo {
        if let Some(info) = self.exit_info() {
            self.kill_group(Signal::SIGKILL);
            return info;
        }
        self.kill_group(Signal::SIGTERM);
        match tokio::time::timeout(grace, self.wait()).await {
            Ok(info) => {
                // The leader is gone; make sure nothing it started stays.
                self.kill_group(Signal::SIGKILL);
                info
            }
            Err(_) => {
                tracing::warn!(pid = self.pid.as_raw(), "engine ignored SIGTERM; sending SIGKILL");
                self.kill_group(Signal::SIGKILL);
                self.wait().await
            }
        }
    }

    fn kill_group(&self, signal: Signal) {
        // ESRCH (no such group) just means everything is already gone.
        let _ = killpg(self.pid, signal);
    }
}

impl Drop for EngineProcess {
    fn drop(&mut self) {
        self.kill_group(Signal::SIGKILL);
        if let Some(dir) = &self.registry_dir {
            registry::unregister(dir, self.pid());
        }
    }
}

type Pipes = (Option<tokio::process::ChildStdout>, Option<tokio::process::ChildStderr>);

/// Drains both pipes and waits for the exit in one loop, then clears the
/// engine's record and publishes the exit once the output is read to its end.
async fn supervise(
    (stdout, stderr): Pipes,
    mut child: Child,
    tail: Arc<Mutex<LogTail>>,
    log_file: Option<PathBuf>,
    registry: Option<(PathBuf, u32)>,
    exit_tx: watch::Sender<Option<ExitInfo>>,
) {
    let mut log = match &log_file {
        Some(path) => tokio::fs::OpenOptions::new().create(true).append(true).open(path).await.ok(),
        None => None,
    };
    let mut out = stdout.map(|s| FramedRead::new(s, CappedLines::new(MAX_LINE)));
    let mut err = stderr.map(|s| FramedRead::new(s, CappedLines::new(MAX_LINE)));
    let mut status = None;
    loop {
        if status.is_some() && out.is_none() && err.is_none() {
            break;
        }
        let line = tokio::select! {
            // Output already there is read before anything else, so a slow
            // poll after the exit never drops the last lines.
            biased;
            l = next_line(&mut out) => l,
            l = next_line(&mut err) => l,
            s = child.wait(), if status.is_none() => {
                status = Some(s);
                continue;
            }
            // Children of the engine may hold the pipes open after it exits.
            _ = tokio::time::sleep(Duration::from_millis(500)), if status.is_some() => break,
        };
        if let Some(line) = line {
            if let Some(f) = log.as_mut() {
                let _ = f.write_all(format!("{line}\n").as_bytes()).await;
            }
            tail.lock().expect("log tail lock").push(line);
        }
    }
    let info = match status {
        Some(Ok(s)) => ExitInfo { code: s.code(), signal: s.signal() },
        _ => ExitInfo { code: None, signal: None },
    };
    if let Some((dir, pid)) = registry {
        registry::unregister(&dir, pid);
    }
    let _ = exit_tx.send(Some(info));
}

/// The next line of a pipe; at its end the pipe is set to `None` and this
/// future never resolves again, so `select!` moves on to the other branches.
async fn next_line<R: AsyncRead + Unpin>(
    pipe: &mut Option<FramedRead<R, CappedLines>>,
) -> Option<String> {
    let Some(lines) = pipe.as_mut() else {
        return std::future::pending().await;
    };
    match lines.next().await {
        Some(Ok(line)) => Some(line),
        _ => {
            *pipe = None;
            None
        }
    }
}
