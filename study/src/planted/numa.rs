//! A search world built after every change to the default strategy so
//! far and kept out of all of them: its figures are a strategy's first
//! sight of it. The first with a model's load time as an objective, and
//! the first on two NUMA nodes.
//!
//! `numa`: a 15 GiB model decoded on the CPUs of a two-socket machine
//! (16 cores and 90 GB/s of memory bandwidth a node), where decode waits
//! on memory. A node's bandwidth rises with its threads to 8, then
//! contention takes some back: a narrow peak. With `numa` off (or `numactl`
//! without a `numactl` launcher, a little slower) the threads spread over
//! both nodes while the weights sit in the first node's memory, so the
//! second node's threads read them across a 35 GB/s link; `isolate` keeps
//! every thread on the first node (past 16 they share its cores);
//! `distribute` spreads them, and with `no_mmap` it spreads the weights
//! too, so both nodes read at full speed: the best thread count moves
//! with the placement (an interaction between a number and a choice, and
//! the placement matters only past a few threads, an effect confined to a
//! region). Mapped weights load in a second from the page cache; pinning
//! them (`mlock`) takes three more and saves a little decode from page
//! faults; reading them in (`no_mmap`) takes four; each thread adds
//! 25 ms to start and warm up, so more threads trade load time for
//! decode up to the peak, and past it cost both. Locking them on one
//! node (`isolate` with `mlock`) runs out of memory, a failing region.
//! The micro-batch and `threads_batch` act on prompts only: nothing
//! measured here. Decode ↑, load time ↓.

use engine_bridge::Settings;

use super::formula::{GIB, get, number};
use super::{Noise, Truth, World};
use crate::study::Metric;

/// The weights' size.
const MODEL: f64 = 15.0 * GIB;
/// What crosses between the nodes, in GB/s.
const LINK: f64 = 35.0;

/// The memory bandwidth `n` threads draw from one node, in GB/s.
fn node(n: f64) -> f64 {
    if n <= 0.0 {
        return 0.0;
    }
    90.0 * (n / 8.0).min(1.0) * (1.0 - 0.04 * (n - 8.0).max(0.0))
}

fn numa(s: &Settings) -> Truth {
    let threads = number(s, "threads");
    let placement = get(s, "numa");
    let mapped = get(s, "no_mmap") != "true";
    let locked = get(s, "mlock") == "true";
    if placement == "isolate" && locked {
        return Truth::Fails("out_of_memory");
    }
    let half = threads / 2.0;
    let bandwidth = match placement {
        "isolate" => node(threads.min(16.0)) * 0.97f64.powf((threads - 16.0).max(0.0)),
        "distribute" if !mapped => 2.0 * node(half) * 0.92,
        "distribute" => node(half) + node(half).min(LINK) * 1.05,
        "numactl" => (node(half) + node(half).min(LINK)) * 0.98,
        _ => node(half) + node(half).min(LINK),
    };
    let faults = if mapped && !locked { 0.97 } else { 1.0 };
    let decode = bandwidth * 1e9 / MODEL * 0.8 * faults;
    let load_ms = 25.0 * threads
        + match (mapped, locked) {
            (true, false) => 1200.0,
            (true, true) => 1200.0 + MODEL / 6e9 * 1e3,
            (false, _) => 400.0 + MODEL / 4e9 * 1e3 + if locked { 600.0 } else { 0.0 },
        };
    Truth::Runs([(Metric::DecodeTps, decode), (Metric::LoadMs, load_ms)].into())
}

const NUMA: &str = r#"
name = "numa"
profile = "p"
model = "m"
[space]
threads = { min = 1, max = 32, step = 1 }
numa = ["off", "distribute", "isolate", "numactl"]
no_mmap = [false, true]
mlock = [false, true]
ubatch_size = [128, 256, 512, 1024, 2048]
threads_batch = { min = 1, max = 32, step = 1 }
[baseline]
threads = 8
numa = "off"
no_mmap = false
mlock = false
ubatch_size = 512
threads_batch = 8
[[objectives]]
metric = "decode_tps"
[[objectives]]
metric = "load_ms"
"#;

/// The world, with `noise`, a heavy tail and drift on top.
pub(super) fn numa_world(noise: Noise) -> World {
    World::for_search("numa", NUMA, numa, Noise { tail: 0.05, drift: -0.002, ..noise })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The study checks against llama-server's settings; less than half
    /// the grid fails; the front has more than three configurations; the
    /// best thread count moves with the placement; spreading the weights
    /// is fastest and slow to load; only locking on one node fails.
    #[test]
    fn numa_has_what_it_says() {
        let w = numa_world(Noise::default());
        w.assert_fails_in_part_with_a_front();
        let at = w.beside_baseline();
        let decode = |changes: &[(&str, &str)]| at(changes).expect("runs")[0];
        let load = |changes: &[(&str, &str)]| at(changes).expect("runs")[1];
        let best_threads = |placement: &str, no_mmap: &str| {
            (1..=32)
                .max_by(|a, b| {
                    let at = |t: i32| {
                        let t = t.to_string();
                        decode(&[("numa", placement), ("no_mmap", no_mmap), ("threads", &t)])
                    };
                    at(*a).total_cmp(&at(*b)).then(b.cmp(a))
                })
                .expect("a count")
        };
        assert_eq!(best_threads("isolate", "false"), 8);
        assert_eq!(best_threads("distribute", "true"), 16);
        let spread = [("numa", "distribute"), ("no_mmap", "true"), ("threads", "16")];
        assert!(decode(&spread) > 1.25 * decode(&[("threads", "16")]));
        assert!(load(&spread) > 3.0 * load(&[]));
        // Few threads: the placement hardly matters.
        let two = |placement| decode(&[("numa", placement), ("threads", "2")]);
        assert!((two("isolate") / two("off") - 1.0).abs() < 0.01);
        assert!(at(&[("numa", "isolate"), ("mlock", "true")]).is_none());
        assert!(at(&[("numa", "distribute"), ("mlock", "true")]).is_some());
        assert!(decode(&[("mlock", "true")]) > decode(&[]));
        assert_eq!(at(&[("threads_batch", "30"), ("ubatch_size", "2048")]), at(&[]));
    }
}
