//! The one way Tunebook starts a program: engines, `llama-perplexity`,
//! `--help` readers, `nvidia-smi`. Every child
//!
//! - runs in a process group of its own, with stdin closed, so a stop
//!   reaches everything it started;
//! - dies with Tunebook: the kernel sends it SIGKILL when Tunebook's process
//!   ends, however it ends (`kill -9` included);
//! - does not inherit `LLAMA_ARG_*`: llama-server reads any flag from such a
//!   variable, so only what the configuration says may reach it.
//!
//! Nothing goes through a shell.
//!
//! Linux sends the parent-death signal when the *thread* that forked the
//! child ends, not the process. Tokio's blocking threads come and go, so
//! children are forked on one thread that lives as long as the process.

use std::ffi::{OsStr, OsString};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::sync::{LazyLock, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

/// Variables never passed on from Tunebook's own environment.
const NOT_INHERITED: &[&str] = &["LLAMA_ARG_"];

/// A command for `program`, set up as every child of Tunebook must be.
/// Callers add arguments, variables and pipes, then [`spawn`] it.
pub fn command(program: impl AsRef<OsStr>) -> Command {
    let mut cmd = Command::new(program);
    cmd.env_clear().envs(passed_on(std::env::vars_os()));
    cmd.stdin(Stdio::null()).process_group(0).kill_on_drop(true);
    die_with_parent(&mut cmd);
    cmd
}

/// Tunebook's variables a child gets: all but [`NOT_INHERITED`].
fn passed_on(
    vars: impl Iterator<Item = (OsString, OsString)>,
) -> impl Iterator<Item = (OsString, OsString)> {
    vars.filter(|(name, _)| {
        !name.to_str().is_some_and(|n| NOT_INHERITED.iter().any(|p| n.starts_with(p)))
    })
}

/// Asks the kernel to SIGKILL the child when this process ends.
#[allow(unsafe_code)]
fn die_with_parent(cmd: &mut Command) {
    let parent = nix::unistd::getpid();
    // SAFETY: the closure runs in the forked child before exec and calls
    // only prctl(2) and getppid(2), both async-signal-safe; it allocates
    // nothing and takes no lock.
    unsafe {
        cmd.pre_exec(move || {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)?;
            // The parent may have died before the signal was asked for.
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::other("Tunebook ended while starting this"));
            }
            Ok(())
        });
    }
}

type Job = (Command, tokio::runtime::Handle, mpsc::Sender<std::io::Result<Child>>);

/// The thread that forks every child (see the module's note).
static SPAWNER: LazyLock<Mutex<mpsc::Sender<Job>>> = LazyLock::new(|| {
    let (tx, rx) = mpsc::channel::<Job>();
    std::thread::Builder::new()
        .name("tunebook-spawner".into())
        .spawn(move || {
            for (mut cmd, runtime, reply) in rx {
                // The child is watched by the caller's runtime.
                let _entered = runtime.enter();
                let _ = reply.send(cmd.spawn());
            }
        })
        .expect("the spawner thread starts");
    Mutex::new(tx)
});

/// Starts a command made by [`command`], from the long-lived spawner thread.
pub fn spawn(cmd: Command) -> std::io::Result<Child> {
    let (tx, rx) = mpsc::channel();
    let job = (cmd, tokio::runtime::Handle::current(), tx);
    SPAWNER
        .lock()
        .expect("spawner lock")
        .send(job)
        .map_err(|_| std::io::Error::other("the spawner thread is gone"))?;
    rx.recv().map_err(|_| std::io::Error::other("the spawner thread is gone"))?
}

/// SIGKILL to a child's whole process group (its pid is the group's id).
pub fn kill_group(pid: u32) {
    // ESRCH (no such group) just means everything is already gone.
    let _ = killpg(Pid::from_raw(pid as i32), Signal::SIGKILL);
}

/// How a program run to its end went.
#[derive(Debug)]
pub enum RunError {
    /// It could not be started.
    Start(std::io::Error),
    /// It ran past its time and was killed, with everything it started.
    TimedOut,
}

/// Runs a command to its end with stdout and stderr captured, at most
/// `timeout`; on a timeout its whole group is killed. With `registry`, the
/// child is recorded there while it runs (see [`crate::registry`]).
pub async fn output(
    mut cmd: Command,
    timeout: Duration,
    registry: Option<&Path>,
) -> Result<std::process::Output, RunError> {
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    let child = spawn(cmd).map_err(RunError::Start)?;
    let pid = child.id().unwrap_or(0);
    if let Some(dir) = registry
        && let Err(e) = crate::registry::register(dir, pid, "helper")
    {
        tracing::warn!(error = %e, "cannot record a helper process; it may outlive a crash");
    }
    let result = tokio::time::timeout(timeout, child.wait_with_output()).await;
    // Whatever it started goes too, finished or not.
    kill_group(pid);
    if let Some(dir) = registry {
        crate::registry::unregister(dir, pid);
    }
    match result {
        Ok(out) => out.map_err(RunError::Start),
        Err(_) => Err(RunError::TimedOut),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llama_arg_variables_are_not_passed_on() {
        let vars = [("PATH", "/bin"), ("LLAMA_ARG_TOOLS", "all"), ("LLAMA_ARGS", "x")]
            .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let kept: Vec<_> = passed_on(vars.into_iter()).map(|(k, _)| k).collect();
        assert_eq!(kept, ["PATH", "LLAMA_ARGS"]);
    }

    #[tokio::test]
    async fn a_child_gets_what_it_is_given() {
        let mut cmd = command("/usr/bin/env");
        cmd.env("KEPT_FOR_THE_TEST", "1");
        let out = output(cmd, Duration::from_secs(10), None).await.unwrap();
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("KEPT_FOR_THE_TEST=1") && text.contains("PATH="), "{text}");
    }

    #[tokio::test]
    async fn a_child_past_its_time_is_killed_with_its_group() {
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = command("/bin/sleep");
        cmd.arg("30");
        let started = std::time::Instant::now();
        let err = output(cmd, Duration::from_millis(200), Some(dir.path())).await.unwrap_err();
        assert!(matches!(err, RunError::TimedOut), "{err:?}");
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "record cleared");
    }
}
