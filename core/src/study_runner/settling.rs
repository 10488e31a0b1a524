//! Settling findings on this server: the runs of a plan (see
//! [`tunebook_study::settle`]) stored as queued trials of the study, which
//! its loop runs before anything else; the study's own share of them once
//! its search is over; and "settle this", asked of one finding by a user.
//! Queued trials are on disk before the request is answered, so a restart
//! runs them still.

use tunebook_domain::Role;
use tunebook_domain::TrialState;
use tunebook_study::settle::{self, Plan};
use tunebook_study::{Metric, Study};

use super::history::History;
use super::{Studies, record};
use crate::db::studies::{self, StudyState};
use crate::db::trials::{self, NewTrial, StudyPart};
use crate::study_facts::{facts_of, findings_of};
use crate::trial::Trial;
use crate::trial_runner::{self as runner, RunnerContext};

/// Most settling trials a study may have queued at once.
pub const MAX_QUEUED: usize = 48;

/// The findings settling trials were run or queued for, once each plan
/// (its first run, the baseline's, names it).
pub(super) fn asked(trials: &[Trial]) -> Vec<settle::Asked> {
    trials
        .iter()
        .filter(|t| t.role == Some(Role::Settle))
        .filter(|t| {
            t.note.as_deref().is_some_and(|n| settle::FIRST_OF.iter().any(|f| n.contains(f)))
        })
        .filter_map(|t| settle::asked(t.note.as_deref()?))
        .collect()
}

/// The last trial that ran, where it was settling a finding and a restart
/// cut it off: it runs again before anything else, as it was asked for.
pub(super) fn cut_off(h: &History) -> Option<&Trial> {
    h.trials
        .iter()
        .rev()
        .find(|t| t.state != TrialState::Queued)
        .filter(|t| t.role == Some(Role::Settle) && t.interrupted())
}

/// The oldest trial queued to settle a finding, if any.
pub(super) fn queued(h: &History) -> Option<&Trial> {
    h.trials.iter().find(|t| t.state == TrialState::Queued && t.role == Some(Role::Settle))
}

/// Stores `plan`'s runs as queued trials of study `id`; their ids.
async fn queue(
    ctx: &RunnerContext,
    study: &Study,
    id: i64,
    plan: &Plan,
) -> Result<Vec<i64>, sqlx::Error> {
    let mut ids = Vec::new();
    for (config, note) in &plan.runs {
        let new = NewTrial {
            profile: &study.def.profile,
            model: study.model_of(config),
            settings: config,
            tokens_requested: study.probes.speed.as_ref().map(|s| s.n_predict),
            study: Some(StudyPart { study_id: id, role: Role::Settle, note }),
            target: None,
            machine: None,
        };
        let trial = trials::insert(&ctx.db, &new).await?;
        runner::publish(ctx, trial).await?;
        ids.push(trial);
    }
    Ok(ids)
}

impl Studies {
    /// Runs [`cut_off`]'s trial again, as a new trial; `false` when the
    /// study was stopped while it ran.
    pub(super) async fn settle_again(
        &self,
        study: &Study,
        id: i64,
        h: &History,
        fit: &crate::study_checks::FitCheck,
        control: &super::Control,
    ) -> Result<Option<bool>, sqlx::Error> {
        let Some(cut) = cut_off(h) else { return Ok(None) };
        let note = format!(
            "{} (again: trial {} was interrupted)",
            cut.note.as_deref().unwrap_or(Role::Settle.as_str()),
            cut.id
        );
        let new = NewTrial {
            profile: &study.def.profile,
            model: study.model_of(&cut.settings),
            settings: &cut.settings,
            tokens_requested: study.probes.speed.as_ref().map(|s| s.n_predict),
            study: Some(StudyPart { study_id: id, role: Role::Settle, note: &note }),
            target: None,
            machine: None,
        };
        let trial = trials::insert(&self.ctx.db, &new).await?;
        self.run_stored(study, h, fit, control, trial, &cut.settings).await.map(Some)
    }

    /// Once the search is over: queues the plan for the most valuable
    /// finding still open, out of the study's share; whether it queued one.
    /// The findings are worked out off the async threads.
    pub(super) async fn settle_share(
        &self,
        study: &Study,
        id: i64,
        h: &History,
    ) -> Result<bool, sqlx::Error> {
        if settle::reserve(study) == 0 {
            return Ok(false);
        }
        let facts = facts_of(&study.def, &h.trials);
        let asked = asked(&h.trials);
        let left = settle::left(study, &facts, h.spent());
        let study_copy = study.clone();
        let checked = self.ctx.checked.clone();
        let plan = tokio::task::spawn_blocking(move || {
            let planner = crate::memory_plan::planner(&checked, &study_copy.def);
            settle::next(&study_copy, &facts, left, &asked, planner.as_ref())
        })
        .await
        .ok()
        .flatten();
        let Some(plan) = plan else { return Ok(false) };
        let n = plan.runs.len();
        queue(&self.ctx, study, id, &plan).await?;
        let message = match &plan.target {
            settle::Target::Effect(metric) => format!(
                "the findings' share: {n} runs to settle `{}` on {}, left open by the search",
                plan.setting,
                metric.label()
            ),
            settle::Target::AtPick(metric) => format!(
                "the findings' share: {n} runs to settle `{}` on {} at the pick",
                plan.setting,
                metric.label()
            ),
            settle::Target::Rule { cause } => format!(
                "the findings' share: {n} run to settle the rule for {cause}: a failure with `{}` changed",
                plan.setting
            ),
        };
        record(&self.ctx, id, "settle", &message).await?;
        Ok(true)
    }

    /// "Settle this": queues the runs that would settle `setting` on
    /// `metric` in study `id`, which the findings hold not determined (at
    /// the baseline, or with `at_pick` at the pick), and sets the study
    /// running again if it had ended; the trials' ids.
    pub async fn settle(
        self: &std::sync::Arc<Self>,
        id: i64,
        setting: &str,
        metric: &str,
        at_pick: bool,
    ) -> Result<Vec<i64>, crate::Error> {
        let bad = |why: String| crate::Error::BadRequest(why);
        let limit = tunebook_study::limits::MAX_NAME;
        if setting.chars().count() > limit || metric.chars().count() > limit {
            return Err(bad(format!("a setting or metric of over {limit} characters")));
        }
        let ctx = &self.ctx;
        let row = studies::get(&ctx.db, id).await?.ok_or(crate::Error::NotFound)?;
        let metric =
            Metric::parse(metric).ok_or_else(|| bad(format!("unknown metric `{metric}`")))?;
        if !row.definition.machines.is_empty() {
            return Err(bad("settling runs on this server; a study on workers has a baseline per class of machine".into()));
        }
        if row.state == StudyState::Failed {
            return Err(bad(format!(
                "study {id} failed ({}); it cannot run more trials",
                row.stop_reason.clone().unwrap_or_default()
            )));
        }
        let study = ctx.checked.study(&row.definition).map_err(crate::Error::Invalid)?;
        let list: Vec<Trial> = crate::views::all(trials::of_study(&ctx.db, id).await?);
        let waiting = list
            .iter()
            .filter(|t| t.state == TrialState::Queued && t.role == Some(Role::Settle))
            .count();
        let (def, owned, checked) = (row.definition.clone(), list.clone(), ctx.checked.clone());
        let (found, facts) = tokio::task::spawn_blocking(move || {
            (findings_of(&def, &owned, &checked), facts_of(&def, &owned))
        })
        .await
        .map_err(|e| {
            crate::Error::Unavailable(format!("the findings could not be worked out: {e}"))
        })?;
        let asked = settle::Asked { setting: setting.to_string(), metric, at_pick };
        let plan = settle::plan_for(&study, &facts, &found, &asked).map_err(bad)?;
        if waiting + plan.runs.len() > MAX_QUEUED {
            return Err(bad(format!(
                "{waiting} settling trials are already queued; at most {MAX_QUEUED} may wait at once"
            )));
        }
        let ids = queue(ctx, &study, id, &plan).await?;
        let message = format!(
            "settle this: {} runs queued to settle `{setting}` on {}{}",
            ids.len(),
            metric.label(),
            if at_pick { " at the pick" } else { "" }
        );
        record(ctx, id, "settle", &message).await?;
        if row.state.is_final() {
            studies::set_state(&ctx.db, id, StudyState::Running, None).await?;
            record(ctx, id, "running", "running again to settle a finding").await?;
        }
        self.wake_or_spawn(id, row.state == StudyState::Paused);
        Ok(ids)
    }
}
