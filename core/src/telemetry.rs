//! What the server counts of its own work as it happens, for Prometheus:
//! the time between a study's trials (one trial's end to the next one's
//! start: the proposal, the findings' share of the turn, the
//! bookkeeping). What can be read at any moment instead (trials and
//! studies by state, engines running) is read when scraped
//! ([`crate::ops::status`]); the registry and its route are the server's.

use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};

/// Counted as it happens; cloning shares the counts.
#[derive(Clone, Debug)]
pub struct Telemetry {
    /// Seconds from a study trial's end to the next one's start.
    pub trial_gap: Histogram,
}

impl Default for Telemetry {
    fn default() -> Self {
        // 5 ms to about 80 s, doubling.
        Self { trial_gap: Histogram::new(exponential_buckets(0.005, 2.0, 15)) }
    }
}
