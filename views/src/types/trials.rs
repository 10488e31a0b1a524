//! Profiles, trials and workers as the browser sees them, and what it asks
//! for when it runs a configuration or pages through trials.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// An engine profile as the browser sees it: names only, never paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ProfileView {
    pub name: String,
    pub engine: String,
    pub description: String,
    pub models: Vec<String>,
    /// Known K/V cache types, offered as suggestions.
    pub cache_types: Vec<String>,
    /// The settings the engine takes, for the study designer.
    #[serde(default)]
    pub params: Vec<ParamView>,
    /// Whether the profile's engine can place layers on a GPU here (a
    /// CPU-only llama.cpp build cannot): the designer offers layers to
    /// place only where it can.
    #[serde(default)]
    pub has_gpu: bool,
}

/// One setting of an engine's catalog.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct ParamView {
    pub name: String,
    /// How it is written on the command line (`-ctk`).
    pub flag: String,
    /// `int`, `float`, `choice`, `bool`, `model` or `text`.
    pub kind: String,
    /// The values offered, where the domain is a list.
    pub choices: Vec<String>,
    pub min: Option<f64>,
    pub max: Option<f64>,
    pub default: String,
    /// Changing it needs a new launch (`load_time`) or not (`request_time`).
    pub phase: String,
    pub help: String,
}

/// A metric a study can optimize or bound.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct MetricView {
    pub name: String,
    pub label: String,
    /// `max` or `min`: which way is better.
    pub goal: String,
}

/// A request to run one configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct RunRequest {
    pub profile: String,
    pub model: String,
    /// Setting name to value; blank values mean "the engine's default".
    pub settings: BTreeMap<String, String>,
    /// Run by a worker instead of this server: `any` worker, or the one
    /// named. `None`: this server runs it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

pub use tunebook_domain::{
    Goal, Metric, Metrics, Role, Scale as MetricScale, TrialState, TrialSupport,
};

impl TrialView {
    /// A metric's value by its name (`decode_tps`, `peak_rss_bytes`, …),
    /// or a numeric setting's as `setting.ctx_size`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        if let Some(setting) = name.strip_prefix("setting.") {
            return self.settings.get(setting)?.trim().parse().ok().filter(|v: &f64| v.is_finite());
        }
        Metric::parse(name).and_then(|m| self.value(m))
    }

    /// What it measured of metric `m`.
    pub fn value(&self, m: Metric) -> Option<f64> {
        self.metrics.get(m)
    }

    /// A trial with a configuration and a state and nothing measured yet:
    /// what imports and tests fill in.
    pub fn new(
        profile: &str,
        model: &str,
        settings: BTreeMap<String, String>,
        state: TrialState,
    ) -> Self {
        Self {
            id: 0,
            profile: profile.into(),
            model: model.into(),
            settings,
            state,
            command: None,
            created_ms: 0,
            metrics: Metrics::default(),
            client_decode_tps: None,
            prompt_tokens: None,
            tokens_requested: None,
            tokens_generated: None,
            n_ctx: None,
            ceiling_tps: None,
            started_ms: None,
            expected_load_ms: None,
            load_state: None,
            failure_kind: None,
            error: None,
            study_id: None,
            role: None,
            note: None,
            drift_pct: None,
            machine: None,
            worker: None,
            mismatched: BTreeMap::new(),
            support: TrialSupport::default(),
        }
    }
}

/// One trial with its measurements (medians over the recorded requests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrialView {
    pub id: i64,
    pub profile: String,
    pub model: String,
    pub settings: BTreeMap<String, String>,
    pub state: TrialState,
    /// The exact command line, for display.
    pub command: Option<String>,
    pub created_ms: i64,
    /// What it measured, by metric: sent as one field a metric, under
    /// its name (`decode_tps`, `peak_rss_bytes`, …), as it is stored.
    #[serde(flatten)]
    pub metrics: Metrics,
    pub client_decode_tps: Option<f64>,
    pub prompt_tokens: Option<i64>,
    pub tokens_requested: Option<i64>,
    pub tokens_generated: Option<i64>,
    /// Context size the engine reports it allocated.
    pub n_ctx: Option<i64>,
    /// Decode speed memory bandwidth allows for this model and cache.
    pub ceiling_tps: Option<f64>,
    /// When the trial left the queue (ms since the epoch).
    pub started_ms: Option<i64>,
    /// Mean load time of earlier trials of the same model.
    pub expected_load_ms: Option<f64>,
    /// While loading: `not_listening` (starting) or `loading` (the model).
    pub load_state: Option<String>,
    pub failure_kind: Option<String>,
    /// The failure in the engine's own words.
    pub error: Option<String>,
    /// The study the trial belongs to, if any.
    #[serde(default)]
    pub study_id: Option<i64>,
    /// In a study: `baseline`, `rerun` (of the baseline) or `search`.
    #[serde(default)]
    pub role: Option<Role>,
    /// Why it was run (the strategy's reason), and what was skipped.
    #[serde(default)]
    pub note: Option<String>,
    /// How far the baseline had drifted when it ran (percent), where it had.
    #[serde(default)]
    pub drift_pct: Option<f64>,
    /// The class of machine it runs on, where a worker runs it (see
    /// `tunebook worker --class`); speeds compare only within a class.
    #[serde(default)]
    pub machine: Option<String>,
    /// The worker that ran it, by name.
    #[serde(default)]
    pub worker: Option<String>,
    /// Settings the engine did not run as asked, with what it ran instead;
    /// such a trial is left out of the findings.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub mismatched: BTreeMap<String, String>,
    /// What its numbers rest on: each speed per measured request, and how
    /// many items each share was counted over.
    #[serde(default, skip_serializing_if = "TrialSupport::is_empty")]
    pub support: TrialSupport,
}

/// One recorded request of a trial.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct SampleView {
    pub idx: i64,
    pub ttft_ms: f64,
    pub total_ms: f64,
    pub client_decode_tps: Option<f64>,
    pub prompt_n: i64,
    pub prompt_ms: f64,
    pub prompt_tps: f64,
    pub predicted_n: i64,
    pub predicted_ms: f64,
    pub predicted_tps: f64,
}

/// Everything known about one trial, for its page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrialDetail {
    pub trial: TrialView,
    /// The program and arguments exactly as launched.
    pub argv: Vec<String>,
    /// Environment variables the configuration set.
    pub env: BTreeMap<String, String>,
    /// What the engine reported running (pretty JSON), where it did.
    pub read_back: Option<String>,
    pub samples: Vec<SampleView>,
    /// The last lines the engine wrote, where it failed.
    pub log_tail: Vec<String>,
    /// The full measurement (pretty JSON).
    pub measurement: Option<String>,
    /// The settings of its study's baseline, to show what differs.
    pub baseline: Option<BTreeMap<String, String>>,
}

/// Which of a study's trials a table shows: sorted, filtered, one page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrialQuery {
    /// `id` or a metric's name.
    pub sort: String,
    pub descending: bool,
    /// Case-insensitive text to find in the state, the role or the settings
    /// (`setting=value`); empty for every trial.
    pub filter: String,
    pub offset: u64,
    pub limit: u64,
}

impl Default for TrialQuery {
    fn default() -> Self {
        Self { sort: "id".into(), descending: true, filter: String::new(), offset: 0, limit: 50 }
    }
}

/// One page of a study's trials, and how many match the query in all.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrialPage {
    pub rows: Vec<TrialView>,
    /// Where in the matching trials the page begins.
    pub offset: u64,
    pub matching: u64,
}

/// A worker (`tunebook worker` on another machine) as its page shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct WorkerView {
    pub name: String,
    /// The class of machine it stands for: studies compare speeds within one.
    pub machine_class: Option<String>,
    /// Its memory bandwidth and GPUs as it registered them, in words.
    pub hardware: String,
    /// The engine profiles it can run.
    pub profiles: Vec<String>,
    pub last_seen_ms: Option<i64>,
    /// Heard from recently enough to be given trials.
    pub up: bool,
    pub revoked: bool,
}

/// Settings of `config` that differ from `baseline`, as `name=value`.
pub fn differences(
    config: &BTreeMap<String, String>,
    baseline: &BTreeMap<String, String>,
) -> Vec<String> {
    config
        .iter()
        .filter(|(k, v)| baseline.get(*k) != Some(*v))
        .map(|(k, v)| format!("{k}={v}"))
        .collect()
}
