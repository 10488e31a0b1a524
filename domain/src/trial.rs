//! Where a trial is in its life ([`TrialState`]), why a study ran it
//! ([`Role`]): one type each, stored as their words, sent as their words;
//! and what its numbers rest on ([`TrialSupport`]).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// Where a trial is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
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

    /// As stored and sent.
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

/// Why a study ran a trial.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The reference every trial is compared with, run first.
    Baseline,
    /// Proposed by the study's strategy.
    Search,
    /// The baseline again, between search trials: the machine's drift.
    Rerun,
    /// Run to settle a finding left open.
    Settle,
    /// The recommended configuration, measured again to confirm it.
    Confirm,
    /// The balanced recommendation, measured again.
    ConfirmBalanced,
    /// The baseline, measured beside a confirmation.
    ConfirmBase,
}

impl Role {
    pub const ALL: [Role; 7] = [
        Role::Baseline,
        Role::Search,
        Role::Rerun,
        Role::Settle,
        Role::Confirm,
        Role::ConfirmBalanced,
        Role::ConfirmBase,
    ];

    /// As stored and sent.
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Baseline => "baseline",
            Role::Search => "search",
            Role::Rerun => "rerun",
            Role::Settle => "settle",
            Role::Confirm => "confirm",
            Role::ConfirmBalanced => "confirm_balanced",
            Role::ConfirmBase => "confirm_base",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|r| r.as_str() == s)
    }
}

/// What a trial's numbers rest on, by metric name: each speed's value per
/// measured request (the trial's value is their median), the number of
/// pass/fail items (questions, recall points) behind each share, and each
/// question's verdict.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "schema", derive(schemars::JsonSchema))]
pub struct TrialSupport {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub repeats: BTreeMap<String, Vec<f64>>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub items: BTreeMap<String, u32>,
    /// Each item's verdict behind a share, in the suite's order: `1`
    /// passed, `0` failed.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub verdicts: BTreeMap<String, String>,
}

impl TrialSupport {
    pub fn is_empty(&self) -> bool {
        self.repeats.is_empty() && self.items.is_empty() && self.verdicts.is_empty()
    }
}
