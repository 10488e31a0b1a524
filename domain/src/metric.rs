//! The metrics a trial is measured by, listed once: each one's name (its
//! column, and its name in study files and the JSON API), how pages name
//! it, which way is better, and how its changes are modelled. Storage,
//! the findings, the views and the pages all read their metrics here; a
//! new metric is a variant here and its migration.

use serde::{Deserialize, Serialize};

/// What a trial is judged on; the names are the trials' own columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Metric {
    DecodeTps,
    PrefillTps,
    TtftMs,
    LoadMs,
    PeakRssBytes,
    MemAvailableDropBytes,
    PeakGpuBytes,
    QualityScore,
    ContextPassRate,
    /// The largest probed context size whose recall passed at every depth.
    ContextTokens,
    PctOfCeiling,
    Perplexity,
    /// Mean KL divergence of the next-token distribution from the study's
    /// reference configuration (llama-perplexity), in nats.
    KldMean,
    /// Its 99th percentile over the scored tokens.
    KldP99,
    /// How often the likeliest next token is the reference's, as a share.
    SameTopRate,
    /// Requests a second answered within the load probe's latency
    /// objective, at the highest rate that held it (0: none did).
    GoodputRps,
}

/// How a metric's changes are modelled and told.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scale {
    /// Positive quantities compared by ratio, modelled on a log scale:
    /// speeds, times, sizes, perplexity.
    Ratio,
    /// Shares from 0 to 1 compared by difference, told in points.
    Rate,
    /// Values compared by plain difference: a KL divergence is exactly 0
    /// for the reference itself, so no ratio of it means anything.
    Difference,
}

impl Metric {
    pub const ALL: [Metric; 16] = [
        Metric::DecodeTps,
        Metric::PrefillTps,
        Metric::TtftMs,
        Metric::LoadMs,
        Metric::PeakRssBytes,
        Metric::MemAvailableDropBytes,
        Metric::PeakGpuBytes,
        Metric::QualityScore,
        Metric::ContextPassRate,
        Metric::ContextTokens,
        Metric::PctOfCeiling,
        Metric::Perplexity,
        Metric::KldMean,
        Metric::KldP99,
        Metric::SameTopRate,
        Metric::GoodputRps,
    ];

    /// The column (and the name in study files).
    pub fn name(self) -> &'static str {
        match self {
            Metric::DecodeTps => "decode_tps",
            Metric::PrefillTps => "prefill_tps",
            Metric::TtftMs => "ttft_ms",
            Metric::LoadMs => "load_ms",
            Metric::PeakRssBytes => "peak_rss_bytes",
            Metric::MemAvailableDropBytes => "mem_available_drop_bytes",
            Metric::PeakGpuBytes => "peak_gpu_bytes",
            Metric::QualityScore => "quality_score",
            Metric::ContextPassRate => "context_pass_rate",
            Metric::ContextTokens => "context_tokens",
            Metric::PctOfCeiling => "pct_of_ceiling",
            Metric::Perplexity => "perplexity",
            Metric::KldMean => "kld_mean",
            Metric::KldP99 => "kld_p99",
            Metric::SameTopRate => "same_top_rate",
            Metric::GoodputRps => "goodput_rps",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == name)
    }

    /// How pages and reports name it.
    pub fn label(self) -> &'static str {
        match self {
            Metric::DecodeTps => "decode tok/s",
            Metric::PrefillTps => "prefill tok/s",
            Metric::TtftMs => "time to first token (ms)",
            Metric::LoadMs => "load time (ms)",
            Metric::PeakRssBytes => "peak RSS (bytes)",
            Metric::MemAvailableDropBytes => "drop in available memory (bytes)",
            Metric::PeakGpuBytes => "peak GPU memory (bytes)",
            Metric::QualityScore => "quality score",
            Metric::ContextPassRate => "context recall",
            Metric::ContextTokens => "context recalled (tokens)",
            Metric::PctOfCeiling => "% of bandwidth ceiling",
            Metric::Perplexity => "perplexity",
            Metric::KldMean => "mean KL divergence",
            Metric::KldP99 => "99th-percentile KL divergence",
            Metric::SameTopRate => "same top token",
            Metric::GoodputRps => "goodput (req/s within the objective)",
        }
    }

    /// Stored and sent as a whole number: bytes and tokens.
    pub fn whole(self) -> bool {
        matches!(
            self,
            Metric::PeakRssBytes
                | Metric::MemAvailableDropBytes
                | Metric::PeakGpuBytes
                | Metric::ContextTokens
        )
    }

    /// How a table or a menu names it, in the unit pages show it in
    /// (bytes as MiB, shares as percent).
    pub fn short_label(self) -> &'static str {
        match self {
            Metric::DecodeTps => "decode tok/s",
            Metric::PrefillTps => "prefill tok/s",
            Metric::TtftMs => "time to first token (ms)",
            Metric::LoadMs => "load time (ms)",
            Metric::PeakRssBytes => "peak RSS",
            Metric::MemAvailableDropBytes => "drop in available memory",
            Metric::PeakGpuBytes => "peak GPU memory",
            Metric::QualityScore => "quality",
            Metric::ContextPassRate => "context recall",
            Metric::ContextTokens => "context recalled (tokens)",
            Metric::PctOfCeiling => "% of the bandwidth ceiling",
            Metric::Perplexity => "perplexity",
            Metric::KldMean => "mean KL divergence",
            Metric::KldP99 => "99th-percentile KL divergence",
            Metric::SameTopRate => "same top token",
            Metric::GoodputRps => "goodput (req/s)",
        }
    }

    /// Whether it measures the answers (their quality, recall, or how far
    /// they stray from the reference's) rather than speed or memory.
    pub fn measures_quality(self) -> bool {
        matches!(
            self,
            Metric::QualityScore
                | Metric::ContextPassRate
                | Metric::Perplexity
                | Metric::KldMean
                | Metric::KldP99
                | Metric::SameTopRate
        )
    }

    /// Whether a user explores it beside a study's objectives without
    /// asking: the speeds, memory and the answers' quality.
    pub fn explored(self) -> bool {
        matches!(
            self,
            Metric::DecodeTps
                | Metric::PrefillTps
                | Metric::TtftMs
                | Metric::PeakRssBytes
                | Metric::QualityScore
                | Metric::SameTopRate
                | Metric::KldMean
                | Metric::KldP99
        )
    }

    /// How its changes are modelled and told.
    pub fn scale(self) -> Scale {
        match self {
            Metric::QualityScore | Metric::ContextPassRate | Metric::SameTopRate => Scale::Rate,
            Metric::KldMean | Metric::KldP99 => Scale::Difference,
            _ => Scale::Ratio,
        }
    }

    /// Measured against the study's reference configuration (its
    /// baseline): the reference scores perfectly by construction, so it is
    /// never the best of these, only the yardstick.
    pub fn against_reference(self) -> bool {
        matches!(self, Metric::KldMean | Metric::KldP99 | Metric::SameTopRate)
    }

    /// A share from 0 to 1, shown in percent.
    pub fn is_rate(self) -> bool {
        self.scale() == Scale::Rate
    }

    /// Which way is better, unless the study says otherwise.
    pub fn natural_goal(self) -> Goal {
        match self {
            Metric::DecodeTps
            | Metric::PrefillTps
            | Metric::QualityScore
            | Metric::ContextPassRate
            | Metric::ContextTokens
            | Metric::PctOfCeiling
            | Metric::SameTopRate
            | Metric::GoodputRps => Goal::Max,
            _ => Goal::Min,
        }
    }
}

/// Which way an objective is better.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Goal {
    #[serde(alias = "maximize")]
    Max,
    #[serde(alias = "minimize")]
    Min,
}

impl Goal {
    /// `value` turned so that larger is better.
    pub fn oriented(self, value: f64) -> f64 {
        match self {
            Goal::Max => value,
            Goal::Min => -value,
        }
    }
}
