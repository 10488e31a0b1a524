//! What a study's trials say so far, as its runner reads them turn by
//! turn, and why its search should end.

use std::collections::BTreeMap;

use tunebook_domain::{Role, TrialState};
use tunebook_study::{Metric, Observation, Study, confirm, settle};

use crate::db::trials;
use crate::trial::Trial;
use crate::trial_runner::RunnerContext;

/// What the study's trials say so far, kept between the study loop's
/// turns: each turn reads only the trials it has not yet seen ended.
#[derive(Default)]
pub(super) struct History {
    /// On workers: the class of machine whose trials these are (each class
    /// is searched on its own). `None`: all of the study's trials.
    pub machine: Option<String>,
    pub trials: Vec<Trial>,
    pub observations: Vec<Observation>,
    pub baseline: Option<Trial>,
    /// Every trial up to this id had ended when it was read (and ended
    /// trials do not change); later ones are read again.
    pub settled: i64,
}

impl History {
    pub async fn refresh(
        &mut self,
        ctx: &RunnerContext,
        study: &Study,
        id: i64,
    ) -> Result<(), sqlx::Error> {
        let before = self.settled;
        let mut fresh =
            crate::views::all::<_, Trial>(trials::of_study_after(&ctx.db, id, before).await?);
        if let Some(class) = &self.machine {
            fresh.retain(|t| t.machine.as_ref() == Some(class));
        }
        self.trials.retain(|t| t.id <= before);
        self.settled =
            fresh.iter().take_while(|t| t.state.is_final()).last().map_or(before, |t| t.id);
        self.trials.extend(fresh);
        let settled = self.settled;
        let ended = |t: &&Trial| t.id <= settled;
        let from = if self.baseline.is_none() {
            self.baseline = self
                .trials
                .iter()
                .filter(ended)
                .find(|t| t.role == Some(Role::Baseline) && t.state == TrialState::Done)
                .cloned();
            // Observations are relative to the baseline: all again once it is known.
            if self.baseline.is_some() {
                self.observations.clear();
                0
            } else {
                before
            }
        } else {
            before
        };
        let base_metrics = self.baseline.as_ref().map(Trial::measured);
        let observed = self
            .trials
            .iter()
            .filter(|t| t.id > from && ended(t))
            .filter(|t| !t.interrupted() && t.role != Some(Role::Rerun))
            .map(|t| observe(study, t, base_metrics.as_ref()));
        self.observations.extend(observed);
        Ok(())
    }

    /// Trials that count against the budget: run to an end, not cut off.
    pub fn spent(&self) -> usize {
        self.trials.iter().filter(|t| t.counts_against_budget()).count()
    }
}

/// What trial `t` tells the study's search: its objectives (against the
/// baseline's `base` metrics), and why it failed where it did, so that
/// each kind of failure is modelled on its own.
fn observe(study: &Study, t: &Trial, base: Option<&BTreeMap<Metric, f64>>) -> Observation {
    let m = (t.state == TrialState::Done).then(|| t.measured());
    let mut seen = study.observe(t.settings.clone(), m.as_ref(), base);
    seen.failure = t.failure_kind;
    seen
}

/// Why the search should end now, if it should, and whether the pick may
/// still be confirmed (not when time is up). The trials reserved for
/// confirmation (see [`tunebook_study::confirm`]) are not the search's,
/// nor, while `settling` is to come, the findings' share (see
/// [`tunebook_study::settle`]).
pub(super) fn stop_reason(
    study: &Study,
    h: &History,
    created_ms: i64,
    settling: bool,
) -> Option<(String, bool)> {
    let budget = &study.def.budget;
    let share = if settling { settle::reserve(study) } else { 0 };
    let reserve = match h.machine {
        Some(_) => 0,
        None => confirm::reserve(study) + share,
    };
    if h.spent() + reserve >= budget.max_trials as usize {
        return Some((format!("budget spent: {} trials", budget.max_trials), true));
    }
    if let Some(minutes) = budget.max_minutes {
        let elapsed = (crate::db::now_ms() - created_ms) as f64 / 60_000.0;
        if elapsed >= minutes {
            return Some((format!("time budget spent: {minutes} minutes"), false));
        }
    }
    search_over(study, h).map(|reason| (reason, true))
}

/// Why the search has nothing more to gain, if so: too much of the space
/// out of reach, or no improvement for `patience` trials.
fn search_over(study: &Study, h: &History) -> Option<String> {
    let budget = &study.def.budget;
    let pruned = h.trials.iter().filter(|t| t.state == TrialState::Pruned).count();
    if pruned > 10 * budget.max_trials as usize + 100 {
        return Some(format!(
            "{pruned} configurations were predicted not to fit; the space is mostly out of reach"
        ));
    }
    if let (Some(patience), Some(first)) = (budget.patience, study.objectives.first()) {
        let mut best: Option<f64> = None;
        let mut since = 0u32;
        for o in h.observations.iter().filter(|o| o.feasible) {
            let v = first.goal.oriented(o.values.as_ref()?[0]);
            match best {
                Some(b) if v <= b + budget.min_gain => since += 1,
                _ => {
                    best = Some(v);
                    since = 0;
                }
            }
        }
        if since >= patience {
            return Some(format!(
                "no improvement of {} beyond {} in {patience} trials",
                first.measure.name(),
                budget.min_gain
            ));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use engine_bridge::{Catalog, FailureKind};
    use tunebook_domain::TrialState;
    use tunebook_study::{Study, StudyDef};

    use crate::trial::Trial;

    fn study() -> Study {
        let text = r#"
name = "s"
profile = "p"
model = "m"
[space]
threads = { min = 1, max = 16, step = 1 }
[baseline]
threads = 4
[[objectives]]
metric = "decode_tps"
"#;
        StudyDef::from_toml(text).unwrap().check(&Catalog::llama_server(), &["m".into()]).unwrap()
    }

    #[test]
    fn the_search_is_told_why_a_trial_failed() {
        let study = study();
        let settings: std::collections::BTreeMap<String, String> =
            [("threads".to_string(), "16".to_string())].into();
        let mut failed = Trial::new("p", "m", settings.clone(), TrialState::Failed);
        failed.failure_kind = Some(FailureKind::OutOfMemory);
        let seen = super::observe(&study, &failed, None);
        assert_eq!(seen.failure, Some(FailureKind::OutOfMemory));
        assert!(seen.values.is_none() && !seen.feasible);
        let ran = Trial::new("p", "m", settings, TrialState::Done);
        assert_eq!(super::observe(&study, &ran, None).failure, None);
    }
}
