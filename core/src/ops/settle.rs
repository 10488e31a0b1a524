//! Settling what the findings left open, as the page and the API offer
//! it: each open finding with the runs that would settle it (or why runs
//! cannot), and "settle this", which queues those runs on the study.

use tunebook_study::findings::{Finding, TrialFacts};
use tunebook_study::settle;
use tunebook_study::{Metric, StudyDef};
use tunebook_views::types::{OpenQuestion, Settling, TrialState, TrialView};

use crate::error::Result;
use crate::service::Service;
use crate::study_checks::check;

/// Most open findings a page lists.
const MAX_SHOWN: usize = 32;

/// "Settle this": queues the runs that settle `setting` on `metric` in
/// study `id`, and sets it running again if it had ended.
pub async fn settle(service: &Service, id: i64, setting: &str, metric: &str) -> Result<Settling> {
    let trials = service.studies.settle(id, setting, metric).await?;
    Ok(Settling { study_id: id, setting: setting.into(), metric: metric.into(), trials })
}

/// The findings still open, each with what would settle it; none for a
/// study on workers (each class of machine has a baseline of its own) or
/// one that no longer checks.
pub fn open_questions(
    service: &Service,
    def: &StudyDef,
    found: &[Finding],
    facts: &[TrialFacts],
    trials: &[TrialView],
) -> Vec<OpenQuestion> {
    if !def.machines.is_empty() {
        return vec![];
    }
    let Ok(study) = check(&service.profiles, def) else { return vec![] };
    let queued = |setting: &str, metric: Metric| {
        trials
            .iter()
            .filter(|t| t.state == TrialState::Queued)
            .filter_map(|t| settle::asked(t.note.as_deref()?))
            .filter(|a| a.setting == setting && a.metric == metric && !a.at_pick)
            .count()
    };
    settle::open(found, &study)
        .into_iter()
        .take(MAX_SHOWN)
        .map(|(setting, metric, reason)| {
            let plan = settle::plan(&study, facts, &setting, metric, &reason);
            OpenQuestion {
                queued: queued(&setting, metric),
                metric: metric.name().to_string(),
                label: metric.label().to_string(),
                why: reason.text(),
                runs: plan.as_ref().ok().map(|p| p.runs.len()),
                needed: plan.as_ref().ok().filter(|p| !p.settles()).and_then(|p| p.needed),
                cannot: plan.err(),
                setting,
            }
        })
        .collect()
}
