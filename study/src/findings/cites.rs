//! What a finding rests on (its trials) and the name it keeps while the
//! study's data changes its numbers (how reports find it again).

use std::collections::BTreeSet;

use super::Finding;

impl Finding {
    /// The trials it rests on.
    pub fn trials(&self) -> Vec<i64> {
        match self {
            Finding::Best { trial, .. } | Finding::Anomaly { trial, .. } => vec![*trial],
            Finding::Balanced { front, .. } => front.clone(),
            Finding::Effect { levels, .. } | Finding::NoEffect { levels, .. } => {
                levels.iter().flat_map(|l| l.trials.iter().copied()).collect()
            }
            Finding::Failures { trials, .. }
            | Finding::FreeWin { trials, .. }
            | Finding::Confirmed { trials, .. } => trials.clone(),
            Finding::Ceiling { trial, .. } | Finding::AtPick { trial, .. } => vec![*trial],
            Finding::Planned { trials, .. } => trials.clone(),
            Finding::Boundary { held, again, failed, .. } => {
                held.iter().map(|h| h.0).chain(*again).chain(failed.iter().map(|f| f.0)).collect()
            }
            Finding::Files { base_trials, rows, .. } => {
                base_trials.iter().chain(rows.iter().flat_map(|r| &r.trials)).copied().collect()
            }
            Finding::NotDetermined { .. } | Finding::Interaction { .. } | Finding::Noise { .. } => {
                vec![]
            }
            Finding::Drift { baseline, flagged, .. } => {
                let mut ids: BTreeSet<i64> = baseline.iter().map(|(id, _)| *id).collect();
                ids.extend(flagged);
                ids.into_iter().collect()
            }
        }
    }

    /// A name for the finding that stays the same when the study's data
    /// changes its numbers: which best, which setting on which metric.
    pub fn key(&self) -> String {
        match self {
            Finding::Best { measure, .. } => format!("best:{}", measure.name()),
            Finding::Balanced { .. } => "balanced".into(),
            Finding::Boundary { setting, .. } => format!("boundary:{setting}"),
            Finding::Confirmed { trials, .. } => {
                format!("confirmed:{}", trials.first().copied().unwrap_or_default())
            }
            Finding::Effect { setting, metric, .. } => {
                format!("effect:{setting}:{}", metric.name())
            }
            Finding::NoEffect { setting, metric, .. } => {
                format!("no_effect:{setting}:{}", metric.name())
            }
            Finding::NotDetermined { setting, metric, .. } => {
                format!("not_determined:{setting}:{}", metric.name())
            }
            Finding::Interaction { settings: (a, b), metric, .. } => {
                format!("interaction:{a}:{b}:{}", metric.name())
            }
            Finding::FreeWin { changes, .. } => {
                let names: Vec<&str> = changes.iter().map(|c| c.setting.as_str()).collect();
                format!("free_win:{}", names.join("+"))
            }
            Finding::Anomaly { trial, metric, .. } => format!("anomaly:{trial}:{}", metric.name()),
            Finding::Failures { cause, .. } => format!("failures:{cause}"),
            Finding::Ceiling { .. } => "ceiling".into(),
            Finding::Planned { metric, .. } => format!("planned:{}", metric.name()),
            Finding::Drift { .. } => "drift".into(),
            Finding::AtPick { metric, .. } => format!("at_pick:{}", metric.name()),
            Finding::Noise { metric, .. } => format!("noise:{}", metric.name()),
            Finding::Files { setting, .. } => format!("files:{setting}"),
        }
    }
}
