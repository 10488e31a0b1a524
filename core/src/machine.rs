//! Facts about this machine that trials are judged against, measured once
//! and kept in the data folder: memory read bandwidth, for the decode
//! ceiling (bandwidth ÷ bytes read per token).

use std::path::Path;

use serde::{Deserialize, Serialize};

/// Bytes read in one bandwidth pass: far beyond any CPU cache.
const PASS_BYTES: usize = 512 << 20;

/// What was measured, and when.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Machine {
    pub bandwidth_bytes_per_s: f64,
    pub threads: usize,
    pub measured_ms: i64,
}

impl Machine {
    /// Reads `machine.json` from the data folder, or measures and writes it.
    pub async fn load_or_measure(data_dir: &Path) -> std::io::Result<Self> {
        let path = data_dir.join("machine.json");
        if let Some(m) = std::fs::read(&path).ok().and_then(|b| serde_json::from_slice(&b).ok()) {
            return Ok(m);
        }
        let threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
        let bandwidth = tokio::task::spawn_blocking(move || {
            engine_bridge::planner::measure_bandwidth(PASS_BYTES, threads, 3)
        })
        .await
        .map_err(std::io::Error::other)?;
        let machine =
            Machine { bandwidth_bytes_per_s: bandwidth, threads, measured_ms: crate::db::now_ms() };
        tracing::info!(gb_per_s = bandwidth / 1e9, threads, "measured memory read bandwidth");
        std::fs::create_dir_all(data_dir)?;
        std::fs::write(&path, serde_json::to_vec_pretty(&machine).expect("serializes"))?;
        Ok(machine)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn measured_once_then_read_back() {
        let dir = tempfile::tempdir().unwrap();
        let first = Machine::load_or_measure(dir.path()).await.unwrap();
        assert!(first.bandwidth_bytes_per_s > 1e8, "{first:?}");
        assert!(dir.path().join("machine.json").is_file());
        let second = Machine::load_or_measure(dir.path()).await.unwrap();
        assert_eq!(first, second, "read back, not measured again");
    }
}
