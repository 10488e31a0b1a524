//! Where a trial is in its life ([`TrialState`]) and why a study ran it
//! ([`Role`]): one type each, stored as their words, sent as their words.

use serde::{Deserialize, Serialize};

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
