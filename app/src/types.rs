//! The view types shared by the browser and the server.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// An engine profile as the browser sees it: names only, never paths.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProfileView {
    pub name: String,
    pub engine: String,
    pub description: String,
    pub models: Vec<String>,
    /// Known K/V cache types, offered as suggestions.
    pub cache_types: Vec<String>,
}

/// A request to run one configuration.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct RunRequest {
    pub profile: String,
    pub model: String,
    /// Setting name to value; blank values mean "the engine's default".
    pub settings: BTreeMap<String, String>,
}

/// Where a trial is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TrialState {
    Queued,
    Launching,
    Loading,
    Probing,
    Done,
    Failed,
    /// Never launched: the planner said it cannot fit, or the like.
    Pruned,
}

impl TrialState {
    pub const ALL: [TrialState; 7] = [
        TrialState::Queued,
        TrialState::Launching,
        TrialState::Loading,
        TrialState::Probing,
        TrialState::Done,
        TrialState::Failed,
        TrialState::Pruned,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            TrialState::Queued => "queued",
            TrialState::Launching => "launching",
            TrialState::Loading => "loading",
            TrialState::Probing => "probing",
            TrialState::Done => "done",
            TrialState::Failed => "failed",
            TrialState::Pruned => "pruned",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == s)
    }

    /// Done, failed or pruned: nothing more will happen to it.
    pub fn is_final(self) -> bool {
        matches!(self, TrialState::Done | TrialState::Failed | TrialState::Pruned)
    }
}

impl TrialView {
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
            load_ms: None,
            ttft_ms: None,
            prefill_tps: None,
            decode_tps: None,
            client_decode_tps: None,
            prompt_tokens: None,
            tokens_requested: None,
            tokens_generated: None,
            n_ctx: None,
            peak_rss_bytes: None,
            mem_available_drop_bytes: None,
            peak_gpu_bytes: None,
            quality_score: None,
            context_pass_rate: None,
            ceiling_tps: None,
            pct_of_ceiling: None,
            perplexity: None,
            started_ms: None,
            expected_load_ms: None,
            load_state: None,
            failure_kind: None,
            error: None,
            study_id: None,
            role: None,
            note: None,
            drift_pct: None,
        }
    }
}

/// One trial with its measurements (medians over the recorded requests).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TrialView {
    pub id: i64,
    pub profile: String,
    pub model: String,
    pub settings: BTreeMap<String, String>,
    pub state: TrialState,
    /// The exact command line, for display.
    pub command: Option<String>,
    pub created_ms: i64,
    pub load_ms: Option<f64>,
    pub ttft_ms: Option<f64>,
    pub prefill_tps: Option<f64>,
    pub decode_tps: Option<f64>,
    pub client_decode_tps: Option<f64>,
    pub prompt_tokens: Option<i64>,
    pub tokens_requested: Option<i64>,
    pub tokens_generated: Option<i64>,
    /// Context size the engine reports it allocated.
    pub n_ctx: Option<i64>,
    /// Largest resident set of the engine's processes, launch to stop.
    pub peak_rss_bytes: Option<i64>,
    /// How far the machine's available memory fell while it ran.
    pub mem_available_drop_bytes: Option<i64>,
    /// Largest GPU memory the engine used, where `nvidia-smi` reports it.
    pub peak_gpu_bytes: Option<i64>,
    /// Known-answer prompts passed, 0 to 1.
    pub quality_score: Option<f64>,
    /// Context recall points passed, 0 to 1.
    pub context_pass_rate: Option<f64>,
    /// Decode speed memory bandwidth allows for this model and cache.
    pub ceiling_tps: Option<f64>,
    /// Engine decode speed as a percentage of that ceiling.
    pub pct_of_ceiling: Option<f64>,
    /// Perplexity on the reference text, where the plan measures it.
    pub perplexity: Option<f64>,
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
    pub role: Option<String>,
    /// Why it was run (the strategy's reason), and what was skipped.
    #[serde(default)]
    pub note: Option<String>,
    /// How far the baseline had drifted when it ran (percent), where it had.
    #[serde(default)]
    pub drift_pct: Option<f64>,
}
