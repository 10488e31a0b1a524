//! Memory an engine uses, sampled from launch to stop: the resident set of
//! its whole process group, how far the machine's MemAvailable fell (what
//! matters on unified-memory machines, where GPU memory is system memory),
//! and GPU memory from `nvidia-smi` where there is one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use procfs::Current;
use serde::{Deserialize, Serialize};
use tokio::task::JoinHandle;

/// GPU memory is asked for at most this often (`nvidia-smi` takes a while).
const GPU_EVERY: Duration = Duration::from_secs(1);

/// The peaks seen so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MemoryReport {
    /// Largest resident set of the engine's process group, in bytes.
    pub peak_rss_bytes: u64,
    /// MemAvailable before launch minus its lowest value since, in bytes.
    pub mem_available_drop_bytes: Option<u64>,
    /// Largest GPU memory used by the group's processes, in bytes.
    pub peak_gpu_bytes: Option<u64>,
    /// Samples taken.
    pub samples: u32,
}

/// Resident bytes of every process in a process group.
pub fn group_rss_bytes(pgid: u32) -> u64 {
    let page = procfs::page_size();
    let Ok(all) = procfs::process::all_processes() else {
        return 0;
    };
    all.flatten()
        .filter_map(|p| p.stat().ok())
        .filter(|s| s.pgrp == pgid as i32)
        .map(|s| s.rss * page)
        .sum()
}

/// Pids of every process in a process group.
pub fn group_pids(pgid: u32) -> Vec<u32> {
    let Ok(all) = procfs::process::all_processes() else {
        return vec![];
    };
    all.flatten()
        .filter_map(|p| p.stat().ok())
        .filter(|s| s.pgrp == pgid as i32)
        .map(|s| s.pid as u32)
        .collect()
}

/// The machine's MemAvailable in bytes.
pub fn mem_available() -> Option<u64> {
    procfs::Meminfo::current().ok()?.mem_available
}

/// Parses `nvidia-smi --query-compute-apps=pid,used_memory
/// --format=csv,noheader,nounits` and sums the MiB of the given pids.
pub fn parse_gpu_apps(csv: &str, pids: &[u32]) -> u64 {
    csv.lines()
        .filter_map(|line| {
            let (pid, mib) = line.split_once(',')?;
            let pid: u32 = pid.trim().parse().ok()?;
            let mib: u64 = mib.trim().parse().ok()?;
            pids.contains(&pid).then_some(mib * 1024 * 1024)
        })
        .sum()
}

/// Longest `nvidia-smi` may take: a wedged driver can hang it for minutes.
const NVIDIA_SMI_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(10);

/// What `nvidia-smi` prints with `args`; `None` where there is none, it
/// fails, or it hangs past [`NVIDIA_SMI_TIMEOUT`].
async fn nvidia_smi(args: &[&str]) -> Option<String> {
    let mut cmd = crate::children::command("nvidia-smi");
    cmd.args(args);
    let out = crate::children::output(cmd, NVIDIA_SMI_TIMEOUT, None).await.ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).into_owned())
}

/// GPU memory used by the given pids; `None` when there is no `nvidia-smi`.
pub async fn gpu_used_bytes(pids: &[u32]) -> Option<u64> {
    let csv =
        nvidia_smi(&["--query-compute-apps=pid,used_memory", "--format=csv,noheader,nounits"])
            .await?;
    Some(parse_gpu_apps(&csv, pids))
}

/// Free memory of every GPU together, from `nvidia-smi` (`None` without
/// one). llama.cpp spreads offloaded layers over all visible GPUs.
pub async fn gpu_free_bytes() -> Option<u64> {
    parse_gpu_mib(&nvidia_smi(&["--query-gpu=memory.free", "--format=csv,noheader,nounits"]).await?)
}

/// Each GPU's memory, in the order `nvidia-smi` (and llama.cpp) number
/// them; empty without one.
pub async fn gpu_sizes() -> Vec<u64> {
    let csv = nvidia_smi(&["--query-gpu=memory.total", "--format=csv,noheader,nounits"]).await;
    csv.map(|csv| parse_gpu_mib_each(&csv)).unwrap_or_default()
}

/// Memory in use on every GPU together, from `nvidia-smi` (`None` without
/// one): what the device says, whoever holds it.
pub async fn gpu_used_total_bytes() -> Option<u64> {
    parse_gpu_mib(&nvidia_smi(&["--query-gpu=memory.used", "--format=csv,noheader,nounits"]).await?)
}

/// Sums a one-column `nvidia-smi --query-gpu=memory.free` (or `.used`)
/// output, MiB a line.
pub fn parse_gpu_mib(csv: &str) -> Option<u64> {
    let each = parse_gpu_mib_each(csv);
    (!each.is_empty()).then(|| each.iter().sum())
}

/// A one-column `nvidia-smi --query-gpu=memory.*` output, MiB a line, in
/// bytes a GPU; empty where a line is not a number.
pub fn parse_gpu_mib_each(csv: &str) -> Vec<u64> {
    let mib: Option<Vec<u64>> =
        csv.lines().filter(|l| !l.trim().is_empty()).map(|l| l.trim().parse().ok()).collect();
    mib.unwrap_or_default().into_iter().map(|m: u64| m << 20).collect()
}

/// Each GPU's name and memory, from `nvidia-smi` (empty without one).
pub async fn gpu_names() -> Vec<String> {
    let args = ["--query-gpu=name,memory.total,driver_version", "--format=csv,noheader,nounits"];
    nvidia_smi(&args).await.map(|csv| parse_gpu_names(&csv)).unwrap_or_default()
}

/// Parses `nvidia-smi --query-gpu=name,memory.total,driver_version
/// --format=csv,noheader,nounits` (MiB) into "name, 79.6 GiB, driver 550.54".
pub fn parse_gpu_names(csv: &str) -> Vec<String> {
    csv.lines()
        .filter_map(|line| {
            let mut fields = line.rsplitn(3, ',').map(str::trim);
            let (driver, mib, name) = (fields.next()?, fields.next()?, fields.next()?);
            let gib = mib.parse::<f64>().ok()? / 1024.0;
            Some(format!("{name}, {gib:.1} GiB, driver {driver}"))
        })
        .collect()
}

/// The CPU's model name and the machine's total memory, from `/proc`.
pub fn cpu_and_ram() -> (Option<String>, Option<u64>) {
    let cpu = procfs::CpuInfo::current().ok().and_then(|c| c.model_name(0).map(str::to_string));
    let ram = procfs::Meminfo::current().ok().map(|m| m.mem_total);
    (cpu, ram)
}

/// Samples an engine's memory in the background until dropped.
pub struct MemorySampler {
    report: Arc<Mutex<MemoryReport>>,
    task: JoinHandle<()>,
    pgid: u32,
    available_before: Option<u64>,
}

impl MemorySampler {
    /// Starts sampling the process group `pgid` every `interval`;
    /// `available_before` is MemAvailable taken just before the launch.
    pub fn start(pgid: u32, interval: Duration, available_before: Option<u64>) -> Self {
        let report = Arc::new(Mutex::new(MemoryReport::default()));
        let shared = report.clone();
        let task = tokio::spawn(async move {
            let mut gpu_present = true;
            let mut last_gpu: Option<tokio::time::Instant> = None;
            let mut ticker = tokio::time::interval(interval);
            loop {
                ticker.tick().await;
                let gpu_due = last_gpu.is_none_or(|t| t.elapsed() >= GPU_EVERY);
                let gpu = if gpu_present && gpu_due {
                    last_gpu = Some(tokio::time::Instant::now());
                    let g = gpu_used_bytes(&group_pids(pgid)).await;
                    gpu_present = g.is_some();
                    g
                } else {
                    None
                };
                let mut r = shared.lock().expect("memory report lock");
                take_sample(&mut r, pgid, available_before);
                if let Some(g) = gpu {
                    r.peak_gpu_bytes = Some(r.peak_gpu_bytes.unwrap_or(0).max(g));
                }
            }
        });
        Self { report, task, pgid, available_before }
    }

    /// The peaks so far, a sample taken now included (a trial shorter than
    /// the interval still gets a reading of its engine at work).
    pub fn report(&self) -> MemoryReport {
        let mut r = self.report.lock().expect("memory report lock");
        take_sample(&mut r, self.pgid, self.available_before);
        r.clone()
    }
}

/// Adds one reading of RSS and MemAvailable to the peaks.
fn take_sample(r: &mut MemoryReport, pgid: u32, available_before: Option<u64>) {
    r.samples += 1;
    r.peak_rss_bytes = r.peak_rss_bytes.max(group_rss_bytes(pgid));
    if let (Some(before), Some(now)) = (available_before, mem_available()) {
        let drop = before.saturating_sub(now);
        r.mem_available_drop_bytes = Some(r.mem_available_drop_bytes.unwrap_or(0).max(drop));
    }
}

impl Drop for MemorySampler {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gpus_are_described_from_nvidia_smi() {
        let csv = "NVIDIA H100 80GB HBM3, 81559, 550.54.15\nNVIDIA RTX A6000, 49140, 550.54.15\n";
        assert_eq!(
            parse_gpu_names(csv),
            [
                "NVIDIA H100 80GB HBM3, 79.6 GiB, driver 550.54.15",
                "NVIDIA RTX A6000, 48.0 GiB, driver 550.54.15"
            ]
        );
        assert!(parse_gpu_names("").is_empty());
    }

    #[test]
    fn free_gpu_memory_adds_up_over_gpus() {
        assert_eq!(parse_gpu_mib("80000\n1000\n"), Some(81000 << 20));
        assert_eq!(parse_gpu_mib(""), None);
        assert_eq!(parse_gpu_mib("[N/A]\n"), None);
        assert_eq!(parse_gpu_mib_each("81559\n12288\n"), vec![81559 << 20, 12288 << 20]);
        assert!(parse_gpu_mib_each("12288\n[N/A]\n").is_empty());
    }

    #[test]
    fn sums_gpu_memory_of_our_processes_only() {
        let csv = "1234, 5000\n99, 700\n1235, 24\nNo running processes found\n";
        assert_eq!(parse_gpu_apps(csv, &[1234, 1235]), (5000 + 24) * 1024 * 1024);
        assert_eq!(parse_gpu_apps(csv, &[7]), 0);
    }

    #[test]
    fn own_group_has_resident_memory() {
        let me = procfs::process::Process::myself().unwrap().stat().unwrap();
        assert!(group_rss_bytes(me.pgrp as u32) > 0);
        assert!(group_pids(me.pgrp as u32).contains(&std::process::id()));
        assert!(mem_available().unwrap() > 0);
    }

    /// Polls the sampler until it has taken `n` samples (5 s at most).
    async fn samples_at_least(sampler: &MemorySampler, n: u32) -> MemoryReport {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        loop {
            let r = sampler.report();
            if r.samples >= n {
                return r;
            }
            assert!(tokio::time::Instant::now() < deadline, "sampler stalled at {r:?}");
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    #[tokio::test]
    async fn sampler_sees_a_growing_process() {
        let me = procfs::process::Process::myself().unwrap().stat().unwrap();
        let sampler =
            MemorySampler::start(me.pgrp as u32, Duration::from_millis(10), mem_available());
        let before = samples_at_least(&sampler, 1).await;
        // Touch 64 MiB so it becomes resident.
        let big = vec![1u8; 64 << 20];
        let after = samples_at_least(&sampler, before.samples + 2).await;
        assert!(big.iter().step_by(4096).all(|b| *b == 1));
        assert!(
            after.peak_rss_bytes >= before.peak_rss_bytes + (48 << 20),
            "before {before:?}, after {after:?}"
        );
        assert!(after.mem_available_drop_bytes.is_some());
    }
}
