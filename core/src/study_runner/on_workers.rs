//! A study on workers: each class of machine searched on its own, with as
//! many trials queued for a class as it has workers up.

use std::collections::BTreeMap;
use tunebook_domain::Role;

use engine_bridge::Settings;
use tunebook_study::{Study, StudyDef, strategy};

use super::history::{History, stop_reason};
use super::{Control, Studies, conclude, record};
use crate::db::queue;
use crate::db::studies::{self, StudyState};
use crate::db::trials::{self, NewTrial, StudyPart};
use crate::trial_runner as runner;

impl Studies {
    /// A study on workers: each class of machine among its machines
    /// searched on its own (its own baseline, history and budget), with as
    /// many trials queued for a class as it has workers up, any of which
    /// may take each. Waits for trials to end, for workers to come up, or
    /// for a request; ends when every class's search has.
    pub(super) async fn run_on_workers(
        &self,
        id: i64,
        study: &Study,
        strategy: &dyn strategy::Strategy,
        control: &Control,
    ) -> Result<(), sqlx::Error> {
        let ctx = &self.ctx;
        // Listening before looking: a trial that ends in between is not missed.
        let mut changes = ctx.events.changes.subscribe();
        let mut histories: BTreeMap<String, History> = BTreeMap::new();
        // Classes whose search has ended, and why.
        let mut ended: BTreeMap<String, String> = BTreeMap::new();
        let mut said_waiting = false;
        loop {
            let Some(row) = studies::get(&ctx.db, id).await? else { return Ok(()) };
            if row.state.is_final() {
                // Stopped: what no worker took is withdrawn, what runs is stopped.
                let withdrawn = queue::unqueue(
                    &ctx.db,
                    id,
                    "withdrawn: the study was stopped before a worker took it",
                )
                .await?;
                let why = "the study was stopped while this trial ran";
                for trial in withdrawn.into_iter().chain(queue::interrupt(&ctx.db, id, why).await?)
                {
                    runner::publish(ctx, trial).await?;
                }
                return Ok(());
            }
            let paused = row.state == StudyState::Paused;
            let classes = if paused {
                // Trials already running finish; nothing new starts.
                let why = "withdrawn: the study was paused before a worker took it";
                for trial in queue::unqueue(&ctx.db, id, why).await? {
                    runner::publish(ctx, trial).await?;
                }
                BTreeMap::new()
            } else {
                machine_classes(&ctx.db, &study.def).await?
            };
            for class in classes.keys() {
                histories.entry(class.clone()).or_insert_with(|| History {
                    machine: Some(class.clone()),
                    ..History::default()
                });
            }
            let mut in_flight = 0;
            for (class, h) in histories.iter_mut() {
                h.refresh(ctx, study, id).await?;
                let mut running: Vec<Settings> = h
                    .trials
                    .iter()
                    .filter(|t| !t.state.is_final())
                    .map(|t| t.settings.clone())
                    .collect();
                in_flight += running.len();
                // What the strategy has not seen yet: running, or ended
                // after a trial still running (observed in order).
                let mut unseen: Vec<Settings> = h
                    .trials
                    .iter()
                    .filter(|t| t.id > h.settled && t.state.is_final())
                    .map(|t| t.settings.clone())
                    .chain(running.iter().cloned())
                    .collect();
                if ended.contains_key(class) {
                    continue;
                }
                // Workers' picks are not confirmed (see `stop_reason`).
                let mut end =
                    stop_reason(study, h, row.created_ms, false).map(|(r, _)| r).or_else(|| {
                        let failed = h
                            .trials
                            .iter()
                            .find(|t| t.role == Some(Role::Baseline) && t.state.is_final());
                        match (&h.baseline, failed) {
                            (None, Some(t)) => Some(format!(
                                "the baseline (trial {}) did not run: {}",
                                t.id,
                                t.error.clone().unwrap_or_else(|| t.state.as_str().into())
                            )),
                            _ => None,
                        }
                    });
                let workers = classes.get(class).map_or(&[][..], Vec::as_slice);
                while end.is_none() && running.len() < workers.len() {
                    // Everything is compared with the class's baseline: it runs first, alone.
                    let budget = study.def.budget.max_trials as usize;
                    if (h.baseline.is_none() && !running.is_empty())
                        || h.spent() + running.len() >= budget
                    {
                        break;
                    }
                    let Some((config, role, note)) = self.next(study, h, &unseen, strategy).await
                    else {
                        if running.is_empty() {
                            end =
                                Some("every configuration the space allows has been tried".into());
                        }
                        break;
                    };
                    let target = queue::target_of(workers);
                    let new = NewTrial {
                        profile: &study.def.profile,
                        model: study.model_of(&config),
                        settings: &config,
                        tokens_requested: study.probes.speed.as_ref().map(|s| s.n_predict),
                        study: Some(StudyPart { study_id: id, role, note: &note }),
                        target: Some(&target),
                        machine: Some(class),
                    };
                    let trial_id = trials::insert(&ctx.db, &new).await?;
                    runner::publish(ctx, trial_id).await?;
                    unseen.push(config.clone());
                    running.push(config);
                    in_flight += 1;
                }
                if let Some(reason) = end.filter(|_| running.is_empty()) {
                    record(ctx, id, "machine_done", &format!("on {class}: {reason}")).await?;
                    ended.insert(class.clone(), reason);
                }
            }
            if in_flight == 0 && !histories.is_empty() && histories.len() == ended.len() {
                let reason: Vec<String> =
                    ended.iter().map(|(c, r)| format!("on {c}: {r}")).collect();
                return conclude(ctx, id, StudyState::Done, &reason.join("; ")).await;
            }
            if histories.is_empty() && !paused && !said_waiting {
                said_waiting = true;
                let message = format!(
                    "waiting for a worker ({}) with profile `{}` and model `{}`",
                    study.def.machines.join(", "),
                    study.def.profile,
                    study.def.model
                );
                record(ctx, id, "waiting", &message).await?;
            }
            tokio::select! {
                _ = control.stop.cancelled() => {}
                _ = control.wake.notified() => {}
                _ = changes.until(|c| c.study == Some(id) && c.state.is_final()) => {}
                // Workers come and go without a word to the study.
                _ = tokio::time::sleep(WORKERS_LOOKED_AT_EVERY) => {}
            }
        }
    }
}

/// A worker counts as up while it was heard from this recently: an idle
/// worker asks for work again as soon as its last request (answered within
/// the server's `claim_wait`, 20 s) comes back, a busy one reports
/// every second.
pub(crate) const WORKER_UP_MS: i64 = 60_000;

/// How often a study on workers looks again at which are up.
const WORKERS_LOOKED_AT_EVERY: std::time::Duration = std::time::Duration::from_secs(2);

/// The workers a study may use now, by class of machine: those it names
/// (all, for `any`), up, not revoked, with its profile and model.
async fn machine_classes(
    db: &crate::db::Db,
    def: &StudyDef,
) -> Result<BTreeMap<String, Vec<String>>, sqlx::Error> {
    let now = crate::db::now_ms();
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for w in queue::workers(db).await? {
        let named = def.machines.iter().any(|m| m == "any" || *m == w.name);
        let up = w.last_seen_ms.is_some_and(|t| now - t < WORKER_UP_MS);
        let has = w.profiles.as_ref().and_then(|p| p.as_array()).is_some_and(|list| {
            list.iter().any(|p| {
                p["name"] == def.profile.as_str()
                    && p["models"].as_array().is_some_and(|m| m.iter().any(|m| m == &def.model))
            })
        });
        if named && up && has && !w.revoked {
            let class = w.machine_class.clone().unwrap_or_else(|| w.name.clone());
            out.entry(class).or_default().push(w.name);
        }
    }
    Ok(out)
}
