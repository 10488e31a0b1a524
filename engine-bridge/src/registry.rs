//! A record, on disk, of the engines Tunebook has running: one small file
//! per engine. Engines stop with Tunebook; when Tunebook itself is killed
//! (`kill -9`, a crash, a power cut) the files remain, and the next start
//! stops what they name.
//!
//! A process id can be reused after its process ends, so each record also
//! keeps the process start time (`/proc/PID/stat`); only a process with
//! the same id *and* start time is stopped.

use std::path::{Path, PathBuf};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// One running engine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EngineRecord {
    /// Process id, also its process group id.
    pub pid: u32,
    /// Start time in clock ticks since boot.
    pub start_ticks: u64,
    pub program: String,
}

/// The start time of a live process, if there is one with this id (a
/// zombie has ended and has none).
pub fn start_ticks(pid: u32) -> Option<u64> {
    let stat = procfs::process::Process::new(pid as i32).ok()?.stat().ok()?;
    (stat.state != 'Z').then_some(stat.starttime)
}

fn record_path(dir: &Path, pid: u32) -> PathBuf {
    dir.join(format!("{pid}.json"))
}

/// Notes a just-started engine.
pub fn register(dir: &Path, pid: u32, program: &str) -> std::io::Result<()> {
    let Some(start_ticks) = start_ticks(pid) else {
        return Ok(()); // Already gone: nothing to remember.
    };
    std::fs::create_dir_all(dir)?;
    let record = EngineRecord { pid, start_ticks, program: program.into() };
    let json = serde_json::to_vec(&record).expect("a record serializes");
    // Written whole, then renamed, so a crash never leaves half a record.
    let tmp = dir.join(format!("{pid}.json.tmp"));
    std::fs::write(&tmp, json)?;
    std::fs::rename(tmp, record_path(dir, pid))
}

/// Forgets an engine that has been stopped.
pub fn unregister(dir: &Path, pid: u32) {
    let _ = std::fs::remove_file(record_path(dir, pid));
}

/// The recorded engines whose processes still run.
pub fn running(dir: &Path) -> Vec<EngineRecord> {
    let Ok(entries) = std::fs::read_dir(dir) else { return vec![] };
    entries
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
        .filter_map(|e| std::fs::read(e.path()).ok())
        .filter_map(|b| serde_json::from_slice::<EngineRecord>(&b).ok())
        .filter(|r| start_ticks(r.pid) == Some(r.start_ticks))
        .collect()
}

/// Stops (SIGKILL to the process group) every recorded engine that still
/// runs, and clears the records. Returns the engines stopped.
pub fn reap_leftovers(dir: &Path) -> std::io::Result<Vec<EngineRecord>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(vec![]),
        Err(e) => return Err(e),
    };
    let mut reaped = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        let record: Option<EngineRecord> =
            std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok());
        if let Some(r) = record.filter(|r| start_ticks(r.pid) == Some(r.start_ticks)) {
            let _ = killpg(Pid::from_raw(r.pid as i32), Signal::SIGKILL);
            reaped.push(r);
        }
        let _ = std::fs::remove_file(&path);
    }
    Ok(reaped)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_live_record_is_running_and_a_stale_one_is_not() {
        let dir = tempfile::tempdir().unwrap();
        register(dir.path(), std::process::id(), "me").unwrap();
        let stale = EngineRecord { pid: u32::MAX / 2, start_ticks: 1, program: "x".into() };
        std::fs::write(dir.path().join("stale.json"), serde_json::to_vec(&stale).unwrap()).unwrap();
        let live = running(dir.path());
        assert_eq!(live.len(), 1);
        assert_eq!(live[0].program, "me");
    }

    #[test]
    fn own_process_has_a_start_time_and_a_dead_pid_has_none() {
        assert!(start_ticks(std::process::id()).is_some());
        assert_eq!(start_ticks(u32::MAX / 2), None);
    }

    #[test]
    fn a_record_whose_process_is_gone_is_cleared_without_killing() {
        let dir = tempfile::tempdir().unwrap();
        // Our own pid with the wrong start time stands for a reused pid.
        let me = std::process::id();
        let stale = EngineRecord { pid: me, start_ticks: 1, program: "x".into() };
        std::fs::write(dir.path().join(format!("{me}.json")), serde_json::to_vec(&stale).unwrap())
            .unwrap();
        std::fs::write(dir.path().join("garbage.json"), b"{").unwrap();
        assert!(reap_leftovers(dir.path()).unwrap().is_empty());
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0, "records cleared");
        assert!(reap_leftovers(&dir.path().join("missing")).unwrap().is_empty());
        assert!(running(&dir.path().join("missing")).is_empty());
    }
}
