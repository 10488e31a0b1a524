//! Each metric's value from what the probes measured: the one place a
//! trial's metrics are taken from its engine's measurement. The match is
//! exhaustive, so a new metric says here where it comes from.

use engine_bridge::Outcome;
use tunebook_domain::{Metric, Metrics};

/// Everything a finished trial measured.
pub struct Measured<'a> {
    pub outcome: &'a Outcome,
    /// The decode speed memory bandwidth allows (see `planner`).
    pub ceiling_tps: Option<f64>,
    /// Measured on an engine an earlier trial launched: no load time of
    /// its own.
    pub reused: bool,
}

/// The metrics a finished trial measured.
pub fn metrics(m: &Measured<'_>) -> Metrics {
    let o = m.outcome;
    let speed = o.measurement.speed.as_ref().map(|s| &s.summary);
    let kld = o.measurement.kld.as_ref();
    Metrics::of(Metric::ALL.map(|metric| {
        let value = match metric {
            // A reused engine was not loaded for this trial.
            Metric::LoadMs => (!m.reused).then_some(o.load_time.as_secs_f64() * 1e3),
            Metric::TtftMs => speed.map(|s| s.ttft_ms),
            Metric::PrefillTps => speed.map(|s| s.prefill_tps),
            Metric::DecodeTps => speed.map(|s| s.decode_tps),
            Metric::PeakRssBytes => Some(o.memory.peak_rss_bytes as i64 as f64),
            Metric::MemAvailableDropBytes => {
                o.memory.mem_available_drop_bytes.map(|b| b as i64 as f64)
            }
            Metric::PeakGpuBytes => o.memory.peak_gpu_bytes.map(|b| b as i64 as f64),
            Metric::QualityScore => o.measurement.quality.as_ref().map(|q| q.score),
            Metric::ContextPassRate => o.measurement.context_pass_rate(),
            Metric::ContextTokens => o.measurement.context_tokens().map(|t| t as i64 as f64),
            Metric::PctOfCeiling => {
                m.ceiling_tps.zip(speed.map(|s| s.decode_tps)).map(|(c, d)| 100.0 * d / c)
            }
            Metric::Perplexity => o.measurement.perplexity.as_ref().map(|p| p.ppl),
            Metric::KldMean => kld.map(|k| k.mean),
            Metric::KldP99 => kld.map(|k| k.p99),
            Metric::SameTopRate => kld.map(|k| k.same_top_pct / 100.0),
            Metric::GoodputRps => o.measurement.goodput_rps(),
        };
        (metric, value)
    }))
}
