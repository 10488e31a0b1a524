//! The parts findings are made of: an estimate with its interval, a
//! setting's value on a metric, a free win's gain and change, an
//! interaction's cell, and why something is not determined.

use serde::{Deserialize, Serialize};

use crate::metric::Metric;

/// An estimate against the baseline and its interval, in the metric's
/// own terms: a ratio (speeds, memory, perplexity) or a difference (rates).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Interval {
    pub est: f64,
    pub lo: f64,
    pub hi: f64,
}

/// One value of a setting on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Level {
    /// `""`: left to the engine.
    pub value: String,
    /// The median of the trials run with it (as they were, not adjusted).
    pub median: f64,
    pub trials: Vec<i64>,
    /// Against the baseline's value, the other settings held at the
    /// baseline; `None` for the baseline's value itself.
    pub vs_base: Option<Interval>,
}

/// How much a free win gains on one metric.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Gain {
    pub metric: Metric,
    /// The model's value with the winning value, and with the baseline's.
    pub with: f64,
    pub without: f64,
    /// How much better, in percent (points for rates).
    pub pct: f64,
    /// The ratio (or difference) and its 95 % interval.
    pub interval: Interval,
}

/// A setting changed from the baseline's value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Change {
    pub setting: String,
    pub value: String,
    /// The baseline's value.
    pub over: String,
}

/// Why a setting's effect on a metric is not determined.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(tag = "why", rename_all = "snake_case")]
pub enum Undetermined {
    /// The trials changed it only together with these settings.
    Aliased { with: Vec<String> },
    /// Neither an effect nor its absence is shown yet; about this many
    /// more trials like these would decide it.
    MoreTrials { about: Option<usize> },
    /// Too few trials to judge at all.
    TooFew,
    /// A share over too few items (questions, recall points) to tell: by
    /// chance alone two configurations differ by up to `chance` (a share,
    /// 95 %), whatever the number of trials; more items would decide it.
    FewItems { items: u32, chance: f64 },
    /// Not measured there: no trial ran it beside the other settings'
    /// values there (the pick's), so the model only carries it over from
    /// elsewhere, or cannot reach it at all.
    Unreached,
}

/// One combination of two settings that act together.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Cell {
    pub values: (String, String),
    /// Against the baseline, the other settings held there.
    pub vs_base: Interval,
    /// What the two settings' separate effects would have made of it.
    pub additive: f64,
}
