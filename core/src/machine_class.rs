//! A machine's class: what makes two machines measure alike (CPU, GPUs,
//! memory), read from the hardware a worker registers. Studies compare
//! speeds only within a class.

use std::collections::BTreeMap;

use serde_json::Value;

/// A machine's class from its hardware as a worker registers it: CPU,
/// GPUs and memory, e.g. `AMD EPYC 7763 (64 threads), 2× NVIDIA H100, 503 GiB`.
/// Machines of one class are taken to measure alike.
pub fn of(hardware: &Value) -> String {
    let cpu = hardware["cpu"].as_str().filter(|c| !c.is_empty()).unwrap_or("unknown CPU");
    let mut parts = vec![match hardware["threads"].as_u64() {
        Some(n) => format!("{cpu} ({n} threads)"),
        None => cpu.to_string(),
    }];
    let gpus: Vec<String> = hardware["gpus"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        // "NVIDIA H100 80GB HBM3, 79.6 GiB, driver 550.54": the driver is not the machine.
        .map(|g| g.split(", driver").next().unwrap_or(g).to_string())
        .collect();
    let mut counted: BTreeMap<String, usize> = BTreeMap::new();
    for g in gpus {
        *counted.entry(g).or_default() += 1;
    }
    parts.extend(counted.into_iter().map(|(g, n)| format!("{n}× {g}")));
    if let Some(ram) = hardware["ram_bytes"].as_u64() {
        parts.push(format!("{} GiB", (ram as f64 / (1u64 << 30) as f64).round()));
    }
    parts.join(", ")
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_class_names_cpu_gpus_and_memory_but_not_the_driver() {
        let hardware = serde_json::json!({
            "cpu": "AMD EPYC 7763",
            "threads": 64,
            "gpus": ["NVIDIA H100, 79.6 GiB, driver 550.54", "NVIDIA H100, 79.6 GiB, driver 550.54"],
            "ram_bytes": 540_000_000_000u64,
        });
        assert_eq!(
            super::of(&hardware),
            "AMD EPYC 7763 (64 threads), 2× NVIDIA H100, 79.6 GiB, 503 GiB"
        );
        assert_eq!(super::of(&serde_json::json!({})), "unknown CPU");
    }
}
