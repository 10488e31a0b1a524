//! Settling what the findings left open, as the page and the API offer
//! it: each open finding, at the baseline or at the pick, with the runs
//! that would settle it (or why runs cannot), and "settle this", which
//! queues those runs on the study.

use tunebook_domain::TrialState;
use tunebook_study::findings::{Finding, TrialFacts};
use tunebook_study::settle;
use tunebook_study::{Metric, StudyDef};
use tunebook_views::types::{OpenQuestion, Settling};

use crate::error::Result;
use crate::service::Service;
use crate::trial::Trial;

/// Most open findings a page lists.
const MAX_SHOWN: usize = 32;

/// "Settle this": queues the runs that settle `setting` on `metric` in
/// study `id` (at the pick, with `at_pick`), and sets it running again if
/// it had ended.
pub async fn settle(
    service: &Service,
    id: i64,
    setting: &str,
    metric: &str,
    at_pick: bool,
) -> Result<Settling> {
    let trials = service.studies.settle(id, setting, metric, at_pick).await?;
    Ok(Settling { study_id: id, setting: setting.into(), metric: metric.into(), at_pick, trials })
}

/// The findings still open, each with what would settle it; none for a
/// study on workers (each class of machine has a baseline of its own) or
/// one that no longer checks.
pub fn open_questions(
    service: &Service,
    def: &StudyDef,
    found: &[Finding],
    facts: &[TrialFacts],
    trials: &[Trial],
) -> Vec<OpenQuestion> {
    if !def.machines.is_empty() {
        return vec![];
    }
    let Ok(study) = service.checked.study(def) else { return vec![] };
    let queued = |setting: &str, metric: Metric, at_pick: bool| {
        trials
            .iter()
            .filter(|t| t.state == TrialState::Queued)
            .filter_map(|t| settle::asked(t.note.as_deref()?))
            .filter(|a| a.setting == setting && a.metric == metric && a.at_pick == at_pick)
            .count()
    };
    let at_baseline = settle::open(found, &study).into_iter().map(|(setting, metric, reason)| {
        let plan = settle::plan(&study, facts, &setting, metric, &reason);
        (setting, metric, reason, plan, false)
    });
    let at_pick =
        settle::open_at_pick(found, &study).into_iter().filter_map(|(pick, row, metric)| {
            let reason = row.open.clone()?;
            let plan = settle::plan_at_pick(&study, facts, &pick, &row, metric);
            Some((row.setting, metric, reason, plan, true))
        });
    at_baseline
        .chain(at_pick)
        .take(MAX_SHOWN)
        .map(|(setting, metric, reason, plan, at_pick)| OpenQuestion {
            queued: queued(&setting, metric, at_pick),
            metric: metric.name().to_string(),
            label: metric.label().to_string(),
            why: reason.text(),
            runs: plan.as_ref().ok().map(|p| p.runs.len()),
            needed: plan.as_ref().ok().filter(|p| !p.settles()).and_then(|p| p.needed),
            cannot: plan.err(),
            at_pick,
            setting,
        })
        .collect()
}
