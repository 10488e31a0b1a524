//! How close counts as "the same" in a study's findings: the equivalence
//! margins a "no effect" or a free win must be shown within. A study may
//! set its own (`[margins]`).

use serde::{Deserialize, Serialize};

use crate::metric::Metric;

/// How close counts as "the same": the equivalence margins a "no effect"
/// or a free win must be shown within.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(default, deny_unknown_fields)]
pub struct Margins {
    /// Speeds and times, in percent either way.
    pub speed_pct: f64,
    /// Memory, in percent either way.
    pub memory_pct: f64,
    /// Rates (quality score, context pass rate), as a share: 0.02 is two
    /// points in a hundred.
    pub quality_rate: f64,
    /// Perplexity, in percent either way.
    pub perplexity_pct: f64,
    /// Mean KL divergence from the reference, in nats either way: 0.01 is
    /// about where llama.cpp's users stop telling a quantization from the
    /// unquantized model.
    pub kld_mean: f64,
    /// The 99th percentile of KL divergence, in nats either way.
    pub kld_p99: f64,
}

impl Default for Margins {
    fn default() -> Self {
        Margins {
            speed_pct: 3.0,
            memory_pct: 3.0,
            quality_rate: 0.02,
            perplexity_pct: 1.0,
            kld_mean: 0.01,
            kld_p99: 0.1,
        }
    }
}

impl Margins {
    /// The margin of `metric` on the scale its model is fitted on: a log
    /// ratio for speeds, memory and perplexity, a share for rates, nats for
    /// divergences.
    pub fn on_model_scale(&self, metric: Metric) -> f64 {
        let pct = |p: f64| (1.0 + p / 100.0).ln();
        match metric {
            m if m.is_rate() => self.quality_rate,
            Metric::KldMean => self.kld_mean,
            Metric::KldP99 => self.kld_p99,
            Metric::Perplexity => pct(self.perplexity_pct),
            m if m.name().ends_with("_bytes") => pct(self.memory_pct),
            _ => pct(self.speed_pct),
        }
    }

    /// What is wrong with these margins, if anything.
    pub fn error(&self) -> Option<String> {
        let pcts = [
            ("speed_pct", self.speed_pct),
            ("memory_pct", self.memory_pct),
            ("perplexity_pct", self.perplexity_pct),
        ];
        for (name, v) in pcts {
            if !(v > 0.0 && v <= 50.0) {
                return Some(format!("margins.{name}: {v} is not between 0 and 50 percent"));
            }
        }
        for (name, v) in [("kld_mean", self.kld_mean), ("kld_p99", self.kld_p99)] {
            if !(v > 0.0 && v <= 10.0) {
                return Some(format!("margins.{name}: {v} is not between 0 and 10 nats"));
            }
        }
        if !(self.quality_rate > 0.0 && self.quality_rate <= 0.5) {
            return Some(format!(
                "margins.quality_rate: {} is not a share between 0 and 0.5",
                self.quality_rate
            ));
        }
        None
    }
}
