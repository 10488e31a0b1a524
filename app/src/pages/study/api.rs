//! The study page's calls to the server: the study, its trials a page at
//! a time, its progress, its Pareto front, its findings, and the controls.

use leptos::prelude::*;

#[cfg(feature = "ssr")]
use super::super::{answer, ops, service};
use crate::types::{
    FindingsView, ParetoView, Settling, StudyProgress, StudyView, TrialPage, TrialQuery,
};

#[server]
pub async fn get_study(id: i64) -> Result<StudyView, ServerFnError> {
    answer(ops::studies::view(&*service()?, id).await)
}

/// One page of the study's trials, sorted and filtered by the database.
#[server]
pub async fn study_trials(id: i64, query: TrialQuery) -> Result<TrialPage, ServerFnError> {
    answer(ops::studies::trial_page(&service()?.db, id, &query).await)
}

#[server]
pub async fn get_progress(id: i64) -> Result<StudyProgress, ServerFnError> {
    answer(ops::studies::study_progress(&service()?.db, id).await)
}

/// `metrics`: comma-separated metric names; `settings`: with each point's
/// values of the varied settings.
#[server]
pub async fn study_pareto(
    id: i64,
    metrics: String,
    settings: bool,
    machine: String,
) -> Result<ParetoView, ServerFnError> {
    let metrics: Vec<String> =
        metrics.split(',').map(|m| m.trim().to_string()).filter(|m| !m.is_empty()).collect();
    let machine = Some(machine).filter(|m| !m.is_empty());
    let mut view =
        answer(ops::pareto::front(&*service()?, id, &metrics, machine.as_deref()).await)?;
    if !settings {
        // Not needed by the Pareto plot: a lighter answer for large studies.
        view.settings.clear();
        view.points.iter_mut().for_each(|p| p.config.clear());
    }
    Ok(view)
}

/// What the study's trials show so far, written out.
#[server]
pub async fn study_findings(id: i64) -> Result<FindingsView, ServerFnError> {
    answer(ops::studies::findings(&*service()?, id).await.map(|(_, view)| view))
}

/// "Settle this": queues the runs that would settle `setting` on `metric`,
/// a finding left open (at the pick, with `at_pick`).
#[server]
pub async fn settle_finding(
    id: i64,
    setting: String,
    metric: String,
    at_pick: bool,
) -> Result<Settling, ServerFnError> {
    answer(ops::settle::settle(&*service()?, id, &setting, &metric, at_pick).await)
}

/// `pause`, `resume` or `stop`.
#[server]
pub async fn control_study(id: i64, action: String) -> Result<(), ServerFnError> {
    answer(ops::studies::control(&*service()?, id, &action).await)
}
