//! What a study on this server runs next when nothing is queued: a trial
//! a restart cut off, again; the baseline; a due re-run of the baseline;
//! or the strategy's proposal; and, after a re-run, whether the baseline
//! drifted.

use engine_bridge::Settings;
use tunebook_domain::Role;
use tunebook_study::{Study, strategy};
use tunebook_views::types::TrialState;

use super::history::History;
use super::{Studies, record};
use crate::db::trials;

impl Studies {
    /// The next trial: an interrupted one again, the baseline, a due
    /// re-run of the baseline, or the strategy's proposal, which is none
    /// of the configurations `running` (or run but not yet observed).
    pub(super) async fn next(
        &self,
        study: &Study,
        h: &History,
        running: &[Settings],
        strategy: &dyn strategy::Strategy,
    ) -> Option<(Settings, Role, String)> {
        let on_workers = h.machine.is_some();
        // Queued trials (to settle a finding) have not run: the last that did.
        let last = h.trials.iter().rev().find(|t| t.state != TrialState::Queued);
        if let Some(last) = last.filter(|t| t.interrupted() && !on_workers) {
            // Run again in the role it had; a trial of none was the search's.
            let role = last.role.unwrap_or(Role::Search);
            return Some((
                last.settings.clone(),
                role,
                format!("re-run of trial {}, which was interrupted", last.id),
            ));
        }
        if h.baseline.is_none() {
            return Some((study.baseline.clone(), Role::Baseline, "the baseline".into()));
        }
        let rerun_every = study.def.budget.rerun_baseline_every.filter(|e| *e > 0 && !on_workers);
        if let Some(every) = rerun_every {
            let since = h
                .trials
                .iter()
                .rev()
                .take_while(|t| !matches!(t.role, Some(Role::Baseline | Role::Rerun)))
                .count();
            if since >= every as usize {
                return Some((
                    study.baseline.clone(),
                    Role::Rerun,
                    format!("the baseline again after {since} trials, to catch drift"),
                ));
            }
        }
        let p = if running.is_empty() {
            strategy.propose(study, &h.observations).await?
        } else {
            // Configurations running count as tried, not yet measured.
            let mut seen = h.observations.clone();
            seen.extend(running.iter().map(|config| tunebook_study::Observation {
                config: config.clone(),
                values: None,
                feasible: false,
                failure: None,
                slack: None,
            }));
            strategy.propose(study, &seen).await?
        };
        Some((p.config, Role::Search, p.note))
    }

    /// Compares a re-run baseline with the first on the first objective and
    /// flags drift on the trials since the previous baseline run.
    pub(super) async fn check_drift(
        &self,
        study: &Study,
        id: i64,
        h: &History,
        rerun_id: i64,
    ) -> Result<(), sqlx::Error> {
        // Drift is in what is measured: the first objective that is a metric.
        let (Some((first, _)), Some(base)) =
            (study.metric_objectives().first().copied(), &h.baseline)
        else {
            return Ok(());
        };
        let Some(rerun) = trials::get(&self.ctx.db, rerun_id).await? else { return Ok(()) };
        let rerun = crate::trial::Trial::from(rerun);
        let (Some(before), Some(now)) = (base.value(first), rerun.value(first)) else {
            return Ok(());
        };
        let pct = (now - before) / before.abs().max(f64::MIN_POSITIVE) * 100.0;
        if pct.abs() <= study.def.budget.drift_pct {
            return Ok(());
        }
        let from = h
            .trials
            .iter()
            .rev()
            .find(|t| matches!(t.role, Some(Role::Baseline | Role::Rerun)))
            .map_or(rerun_id, |t| t.id + 1);
        trials::set_drift(&self.ctx.db, id, from, rerun_id, pct).await?;
        let message = format!(
            "drift: the baseline's {} moved {pct:+.1} % ({before:.2} → {now:.2}); trials {from}–{rerun_id} are flagged",
            first.name()
        );
        tracing::warn!(study = id, "{message}");
        record(&self.ctx, id, "drift", &message).await
    }
}
