//! A trial as the application reasons about it: its configuration, where
//! it is in its life, why its study ran it, what it measured (by metric),
//! how it failed, and what its numbers rest on; each typed, built from
//! storage's row in one place ([`Trial::from`]). The runners, the findings
//! and the reports work on it; the pages and the JSON API show it as
//! `TrialView` (see [`crate::views::trials`]), which only maps it.

use std::collections::BTreeMap;

use engine_bridge::FailureKind;
use tunebook_domain::{Metric, Metrics, Role, TrialState, TrialSupport};

use crate::db::trials::TrialRow;

/// One trial.
#[derive(Debug, Clone, PartialEq)]
pub struct Trial {
    pub id: i64,
    /// The study it belongs to, if any, and why the study ran it.
    pub study_id: Option<i64>,
    pub role: Option<Role>,
    pub profile: String,
    pub model: String,
    pub settings: BTreeMap<String, String>,
    pub state: TrialState,
    /// What it measured, by metric (medians over the measured requests).
    pub metrics: Metrics,
    /// What its numbers rest on.
    pub support: TrialSupport,
    /// How it failed, where it did, and the failure in the engine's words.
    pub failure_kind: Option<FailureKind>,
    pub error: Option<String>,
    /// Settings the engine did not run as asked, with what it ran instead.
    pub mismatched: BTreeMap<String, String>,
    /// Decode speed memory bandwidth allows for this model and cache.
    pub ceiling_tps: Option<f64>,
    /// How far the baseline had drifted when it ran (percent), where it had.
    pub drift_pct: Option<f64>,
    /// Why it was run (the strategy's reason), and what was skipped.
    pub note: Option<String>,
    /// The class of machine it ran on and the worker that ran it, where a
    /// worker did.
    pub machine: Option<String>,
    pub worker: Option<String>,
    /// The command line as shown to a user, once launched.
    pub command: Option<String>,
    pub created_ms: i64,
    /// When it left the queue (ms since the epoch).
    pub started_ms: Option<i64>,
    /// Mean load time of earlier trials of the same model.
    pub expected_load_ms: Option<f64>,
    /// While loading: `not_listening` (starting) or `loading` (the model).
    pub load_state: Option<String>,
    pub client_decode_tps: Option<f64>,
    pub prompt_tokens: Option<i64>,
    pub tokens_requested: Option<i64>,
    pub tokens_generated: Option<i64>,
    /// Context size the engine reports it allocated.
    pub n_ctx: Option<i64>,
}

impl Trial {
    /// A trial with a configuration and a state and nothing measured yet.
    pub fn new(
        profile: &str,
        model: &str,
        settings: BTreeMap<String, String>,
        state: TrialState,
    ) -> Self {
        Self {
            id: 0,
            study_id: None,
            role: None,
            profile: profile.into(),
            model: model.into(),
            settings,
            state,
            metrics: Metrics::default(),
            support: TrialSupport::default(),
            failure_kind: None,
            error: None,
            mismatched: BTreeMap::new(),
            ceiling_tps: None,
            drift_pct: None,
            note: None,
            machine: None,
            worker: None,
            command: None,
            created_ms: 0,
            started_ms: None,
            expected_load_ms: None,
            load_state: None,
            client_decode_tps: None,
            prompt_tokens: None,
            tokens_requested: None,
            tokens_generated: None,
            n_ctx: None,
        }
    }

    /// What it measured of metric `m`.
    pub fn value(&self, m: Metric) -> Option<f64> {
        self.metrics.get(m)
    }

    /// A metric's value by its name (`decode_tps`, `peak_rss_bytes`, …),
    /// or a numeric setting's as `setting.ctx_size`.
    pub fn metric(&self, name: &str) -> Option<f64> {
        if let Some(setting) = name.strip_prefix("setting.") {
            return self.settings.get(setting)?.trim().parse().ok().filter(|v: &f64| v.is_finite());
        }
        Metric::parse(name).and_then(|m| self.value(m))
    }

    /// Its metrics, by metric.
    pub fn measured(&self) -> BTreeMap<Metric, f64> {
        Metric::ALL.into_iter().filter_map(|m| Some((m, self.value(m)?))).collect()
    }

    /// Whether it was cut off (by a stop or a restart) rather than run to
    /// an end.
    pub fn interrupted(&self) -> bool {
        self.failure_kind == Some(FailureKind::Interrupted)
    }

    /// Whether it counts against its study's budget: run to an end, not
    /// pruned, not cut off.
    pub fn counts_against_budget(&self) -> bool {
        self.state.is_final() && self.state != TrialState::Pruned && !self.interrupted()
    }
}

impl From<TrialRow> for Trial {
    fn from(row: TrialRow) -> Self {
        let command = row.command_display();
        let settings = row.settings();
        let state = row.state();
        let role = row.role();
        let mismatched = row
            .mismatched
            .as_deref()
            .and_then(|m| serde_json::from_str(m).ok())
            .unwrap_or_default();
        let support = support_of(row.support.as_deref());
        Trial {
            id: row.id,
            study_id: row.study_id,
            role,
            profile: row.profile,
            model: row.model,
            settings,
            state,
            metrics: row.metrics.0,
            support,
            failure_kind: row.failure_kind.as_deref().and_then(FailureKind::parse),
            error: row.error,
            mismatched,
            ceiling_tps: row.ceiling_tps,
            drift_pct: row.drift_pct,
            note: row.note,
            machine: row.machine,
            worker: row.worker,
            command,
            created_ms: row.created_ms,
            started_ms: row.started_ms,
            expected_load_ms: row.expected_load_ms,
            load_state: row.load_state,
            client_decode_tps: row.client_decode_tps,
            prompt_tokens: row.prompt_tokens,
            tokens_requested: row.tokens_requested,
            tokens_generated: row.tokens_generated,
            n_ctx: row.n_ctx,
        }
    }
}

/// Most repeats of one metric, and metrics, a stored support is read with:
/// a worker's result is untrusted.
pub(crate) const MAX_SUPPORT: usize = 100;

/// A stored support (JSON), bounded; empty when absent or unreadable.
pub(crate) fn support_of(text: Option<&str>) -> TrialSupport {
    let mut s: TrialSupport = text.and_then(|t| serde_json::from_str(t).ok()).unwrap_or_default();
    s.repeats = std::mem::take(&mut s.repeats).into_iter().take(MAX_SUPPORT).collect();
    for values in s.repeats.values_mut() {
        values.truncate(MAX_SUPPORT);
        values.retain(|v| v.is_finite());
    }
    s.items = std::mem::take(&mut s.items).into_iter().take(MAX_SUPPORT).collect();
    // Verdicts are kept only as the findings read them: `0`s and `1`s,
    // at most a suite's cap of them.
    s.verdicts = std::mem::take(&mut s.verdicts)
        .into_iter()
        .take(MAX_SUPPORT)
        .filter(|(_, v)| tunebook_study::findings::parse_verdicts(v).is_some())
        .collect();
    s
}
