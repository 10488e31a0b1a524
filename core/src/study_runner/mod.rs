//! The study runner: for each running study, asks its strategy for the next
//! configuration, prunes what the planner says cannot fit, runs the trial,
//! re-runs the baseline now and then to catch drift, and stops on its
//! budget, its patience, an exhausted space, or a request. Everything it
//! decides from is in the database, so a restarted Tunebook picks a study up
//! where it was: the trial a crash cut off runs again, nothing finished is
//! lost.

mod history;
mod next;
mod on_workers;
mod settling;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use tunebook_domain::Role;

use engine_bridge::{FailureKind, Settings};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tunebook_study::{Study, StudyDef, confirm, settle, strategy};
use tunebook_views::types::StudyUpdate;

use crate::db::studies::{self, StudyState};
use crate::db::trials::{self, NewTrial, StudyPart};
use crate::events::Payload;
use crate::study_checks::{FitCheck, check_endpoints};
use crate::study_facts::facts_of;
use crate::trial_runner::{self as runner, RunnerContext};
use history::{History, stop_reason};
pub(crate) use on_workers::WORKER_UP_MS;

/// How a running study is told to pause, resume or stop.
#[derive(Clone, Default)]
struct Control {
    /// Cancels the trial in flight (stop).
    stop: CancellationToken,
    /// Wakes a paused study.
    wake: Arc<Notify>,
    /// Set when trials were queued for the study while its loop may have
    /// been ending: the loop looks again before it lets go of the study.
    again: Arc<AtomicBool>,
    /// When its last trial here ended: the time to the next one's start
    /// is counted (see [`crate::telemetry`]).
    ended: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
}

/// Running studies, one task each; trials still run one at a time (the
/// runner's engine slot).
pub struct Studies {
    ctx: RunnerContext,
    running: Mutex<HashMap<i64, Control>>,
    tasks: TaskTracker,
}

impl Studies {
    pub fn new(ctx: RunnerContext) -> Arc<Self> {
        Arc::new(Self { ctx, running: Mutex::new(HashMap::new()), tasks: TaskTracker::new() })
    }

    /// Picks up every study that was running or paused when Tunebook stopped.
    pub async fn resume_all(self: &Arc<Self>) -> Result<(), sqlx::Error> {
        for state in [StudyState::Running, StudyState::Paused] {
            for id in studies::ids_in_state(&self.ctx.db, state).await? {
                tracing::info!(study = id, "resuming study");
                self.spawn(id);
            }
        }
        Ok(())
    }

    /// Waits for every study task to end (after shutdown), so that no
    /// engine outlives the caller.
    pub async fn wait(&self) {
        self.tasks.close();
        self.tasks.wait().await;
    }

    /// Checks and stores a study, and starts it. Nothing is stored when the
    /// study is wrong.
    pub async fn create(
        self: &Arc<Self>,
        def: &StudyDef,
    ) -> Result<(i64, JoinHandle<()>), crate::Error> {
        check_endpoints(&self.ctx.endpoints, def).map_err(crate::Error::Invalid)?;
        // CPU work: off the request threads.
        let (checked, owned) = (self.ctx.checked.clone(), def.clone());
        let bound = crate::study_checks::CHECK_FOR;
        self.ctx
            .heavy
            .run("checking the study", bound, move || checked.study(&owned).map(drop))
            .await?
            .map_err(crate::Error::Invalid)?;
        crate::study_checks::check_machine(&self.ctx.profiles, def)
            .await
            .map_err(crate::Error::Invalid)?;
        let (def, fitted) = match def.fit_baseline {
            true => self.fitted_baseline(def).await?,
            false => (def.clone(), None),
        };
        let id = studies::insert(&self.ctx.db, &def).await?;
        record(&self.ctx, id, "created", &format!("study `{}` created", def.name)).await?;
        if let Some(args) = fitted {
            let said = format!("baseline from llama.cpp's own fit (llama-fit-params): {args}");
            record(&self.ctx, id, "baseline", &said).await?;
        }
        Ok((id, self.spawn(id)))
    }

    /// `def` with what llama.cpp's `llama-fit-params` chooses for its model
    /// and the memory free now written into its baseline (where the baseline
    /// and the fixed settings leave a setting unset), and the tool's answer.
    async fn fitted_baseline(
        &self,
        def: &StudyDef,
    ) -> Result<(StudyDef, Option<String>), crate::Error> {
        let refuse = |why: String| crate::Error::BadRequest(format!("fit_baseline: {why}"));
        if !def.machines.is_empty() {
            return Err(refuse(
                "llama.cpp fits to this server's memory; a study on workers cannot take it".into(),
            ));
        }
        let study = self.ctx.checked.study(def).map_err(crate::Error::Invalid)?;
        let profile = self.ctx.profiles.iter().find(|p| p.name == def.profile).expect("checked");
        let model = &profile.model(&def.model).expect("checked").path;
        let fitted = engine_bridge::fit::fitted(profile, model, &study.baseline)
            .await
            .map_err(refuse)?
            .ok_or_else(|| refuse(format!("profile `{}` has no llama-fit-params", profile.name)))?;
        let mut def = def.clone();
        for (name, value) in fitted.settings {
            if !study.baseline.contains_key(&name) {
                def.baseline.insert(name, serde_json::Value::String(value));
            }
        }
        // What llama.cpp chose must make a baseline this study can run.
        self.ctx.checked.study(&def).map_err(crate::Error::Invalid)?;
        Ok((def, Some(fitted.args.join(" "))))
    }

    pub async fn pause(&self, id: i64) -> Result<(), crate::Error> {
        self.transition(id, StudyState::Paused, "paused on request").await
    }

    pub async fn resume(self: &Arc<Self>, id: i64) -> Result<(), crate::Error> {
        self.transition(id, StudyState::Running, "resumed on request").await?;
        if !self.running.lock().expect("lock").contains_key(&id) {
            self.spawn(id);
        }
        Ok(())
    }

    /// Stops a study; the trial in flight is stopped too, and recorded as
    /// interrupted.
    pub async fn stop(&self, id: i64) -> Result<(), crate::Error> {
        self.transition(id, StudyState::Stopped, "stopped on request").await?;
        if let Some(c) = self.running.lock().expect("lock").get(&id) {
            c.stop.cancel();
        }
        Ok(())
    }

    async fn transition(&self, id: i64, to: StudyState, message: &str) -> Result<(), crate::Error> {
        let row = studies::get(&self.ctx.db, id).await?.ok_or(crate::Error::NotFound)?;
        if row.state.is_final() {
            return Err(crate::Error::BadRequest(format!(
                "study {id} has ended ({}) and cannot be {}",
                row.state.as_str(),
                to.as_str()
            )));
        }
        studies::set_state(&self.ctx.db, id, to, (to == StudyState::Stopped).then_some(message))
            .await?;
        record(&self.ctx, id, to.as_str(), message).await?;
        if let Some(c) = self.running.lock().expect("lock").get(&id) {
            c.wake.notify_one();
        }
        Ok(())
    }

    fn spawn(self: &Arc<Self>, id: i64) -> JoinHandle<()> {
        let control = Control::default();
        self.running.lock().expect("lock").insert(id, control.clone());
        self.start(id, control)
    }

    /// Starts the loop of study `id`, whose `control` is already in
    /// `running`.
    fn start(self: &Arc<Self>, id: i64, control: Control) -> JoinHandle<()> {
        let this = self.clone();
        self.tasks.spawn(async move {
            let shutdown = this.ctx.shutdown.clone();
            tokio::select! {
                // Dropping the loop drops the trial in flight and its engine.
                _ = shutdown.cancelled() => {}
                result = this.run_while_asked(id, &control) => match result {
                    // It let go of the study itself.
                    Ok(()) => return,
                    Err(e) => {
                        tracing::error!(study = id, error = %e, "study could not be recorded");
                        // Say so where the user looks, if the database lets us.
                        let reason = format!("the study could not be recorded: {e}");
                        let _ = conclude(&this.ctx, id, StudyState::Failed, &reason).await;
                    }
                }
            }
            runner::release(&this.ctx, id).await;
            let mut running = this.running.lock().expect("lock");
            if running.get(&id).is_some_and(|c| Arc::ptr_eq(&c.again, &control.again)) {
                running.remove(&id);
            }
        })
    }

    /// The study's loop, again as long as trials were queued for it while
    /// it ended; lets go of the study (its engine, then its place among
    /// the running, under the lock that queuing takes) when none were.
    async fn run_while_asked(&self, id: i64, control: &Control) -> Result<(), sqlx::Error> {
        loop {
            self.run(id, control).await?;
            runner::release(&self.ctx, id).await;
            let mut running = self.running.lock().expect("lock");
            if !control.again.swap(false, Ordering::SeqCst) {
                running.remove(&id);
                return Ok(());
            }
        }
    }

    /// After trials were queued for study `id`: wakes its loop, or starts
    /// one (unless it is paused: it runs them once resumed).
    fn wake_or_spawn(self: &Arc<Self>, id: i64, paused: bool) {
        let mut running = self.running.lock().expect("lock");
        if let Some(c) = running.get(&id) {
            c.again.store(true, Ordering::SeqCst);
            c.wake.notify_one();
            return;
        }
        if paused {
            return;
        }
        let control = Control::default();
        running.insert(id, control.clone());
        drop(running);
        drop(self.start(id, control));
    }

    async fn run(&self, id: i64, control: &Control) -> Result<(), sqlx::Error> {
        let ctx = &self.ctx;
        let Some(row) = studies::get(&ctx.db, id).await? else { return Ok(()) };
        let (study, profile) = match ctx.checked.study(&row.definition) {
            Ok(s) => {
                let profile =
                    ctx.profiles.iter().find(|p| p.name == row.definition.profile).cloned();
                (s, profile.expect("checked"))
            }
            Err(e) => {
                let reason = format!("the study no longer checks: {e}");
                return conclude(ctx, id, StudyState::Failed, &reason).await;
            }
        };
        let endpoint = study.def.strategy.endpoint.as_ref().and_then(|n| ctx.endpoints.get(n));
        // How full the plan leaves the GPUs, by each one's memory where the
        // study runs here. The planner reads the model files' headers: off
        // the runtime.
        let sizes = match study.def.machines.is_empty() {
            true => engine_bridge::memory::gpu_sizes().await,
            false => Vec::new(),
        };
        let (checked, def) = (ctx.checked.clone(), row.definition.clone());
        let plan = tokio::task::spawn_blocking(move || {
            crate::memory_plan::gpu_fill(&checked, &def, sizes)
        })
        .await
        .ok()
        .flatten();
        let strategy = strategy::for_study(&study, endpoint.cloned(), plan);
        if !study.def.machines.is_empty() {
            return self.run_on_workers(id, &study, strategy.as_ref(), control).await;
        }
        let fit = FitCheck::new(&profile, &study).await;
        let mut history = History::default();
        // Whether the findings' share has found nothing more to settle.
        let mut share_spent = false;
        loop {
            let Some(row) = studies::get(&ctx.db, id).await? else { return Ok(()) };
            match row.state {
                StudyState::Paused => {
                    // A paused study holds no engine.
                    runner::release(ctx, id).await;
                    control.wake.notified().await;
                    continue;
                }
                s if s.is_final() => return Ok(()),
                _ => {}
            }
            history.refresh(ctx, &study, id).await?;
            // Trials queued to settle a finding run first, whatever the
            // budget says: they were asked for (one a restart cut off, again).
            match self.settle_again(&study, id, &history, &fit, control).await? {
                Some(false) => return Ok(()),
                Some(true) => continue,
                None => {}
            }
            if let Some(t) = settling::queued(&history) {
                let (trial_id, config) = (t.id, t.settings.clone());
                if !self.run_stored(&study, &history, &fit, control, trial_id, &config).await? {
                    return Ok(());
                }
                continue;
            }
            let stop = stop_reason(&study, &history, row.created_ms, !share_spent);
            if let Some((reason, false)) = &stop {
                return conclude(ctx, id, StudyState::Done, reason).await;
            }
            // Everything is compared with the baseline: without it, stop.
            let failed_baseline = history
                .trials
                .iter()
                .find(|t| t.role == Some(Role::Baseline) && t.state.is_final() && !t.interrupted());
            if let (None, Some(t)) = (&history.baseline, failed_baseline) {
                let reason = format!(
                    "the baseline (trial {}) did not run: {}",
                    t.id,
                    t.error.clone().unwrap_or_else(|| t.state.as_str().into())
                );
                return conclude(ctx, id, StudyState::Failed, &reason).await;
            }
            let searched = match &stop {
                Some(_) => None,
                None => self.next(&study, &history, &[], strategy.as_ref()).await,
            };
            // The search is over: the findings' share goes to what they
            // left open, then the pick is confirmed before it is named.
            if searched.is_none() && !share_spent {
                if self.settle_share(&study, id, &history).await? {
                    continue;
                }
                // Nothing (more) worth settling: what is left of the share
                // goes back to a search its budget stopped.
                share_spent = true;
                if stop.is_some() && settle::reserve(&study) > 0 {
                    continue;
                }
            }
            let step = searched.or_else(|| {
                let facts = facts_of(&study.def, &history.trials);
                confirm::next(&study, &facts, history.spent())
            });
            let Some((config, role, note)) = step else {
                let reason = stop.map_or_else(
                    || "every configuration the space allows has been tried".to_string(),
                    |(reason, _)| reason,
                );
                return conclude(ctx, id, StudyState::Done, &reason).await;
            };
            let part = StudyPart { study_id: id, role, note: &note };
            let new = NewTrial {
                profile: &study.def.profile,
                model: study.model_of(&config),
                settings: &config,
                tokens_requested: study.probes.speed.as_ref().map(|s| s.n_predict),
                study: Some(part),
                target: None,
                machine: None,
            };
            let trial_id = trials::insert(&ctx.db, &new).await?;
            if !self.run_stored(&study, &history, &fit, control, trial_id, &config).await? {
                return Ok(());
            }
            if role == Role::Rerun {
                self.check_drift(&study, id, &history, trial_id).await?;
            }
        }
    }

    /// Runs stored, queued trial `trial_id` of the study (unless the
    /// planner says `config` cannot fit); `false` when the study was
    /// stopped while it ran.
    async fn run_stored(
        &self,
        study: &Study,
        history: &History,
        fit: &FitCheck,
        control: &Control,
        trial_id: i64,
        config: &Settings,
    ) -> Result<bool, sqlx::Error> {
        let ctx = &self.ctx;
        if let Some(reason) = fit.will_not_fit(config) {
            trials::finish_pruned(&ctx.db, trial_id, &reason).await?;
            runner::publish(ctx, trial_id).await?;
            return Ok(true);
        }
        runner::publish(ctx, trial_id).await?;
        let facts = facts_of(&study.def, &history.trials);
        let gate = crate::dominance::gate(study, &facts, config);
        let gate_ref: Option<engine_bridge::probes::Gate<'_>> =
            gate.as_ref().map(|g| g as engine_bridge::probes::Gate<'_>);
        let ended = control.ended.lock().expect("the last trial's end").take();
        if let Some(end) = ended {
            ctx.telemetry.trial_gap.observe(end.elapsed().as_secs_f64());
        }
        let ran = tokio::select! {
            _ = control.stop.cancelled() => {
                let failure = engine_bridge::Failure::new(FailureKind::Interrupted, "the study was stopped while this trial ran");
                trials::finish_failed(&ctx.db, trial_id, &failure).await?;
                runner::publish(ctx, trial_id).await?;
                Ok(false)
            }
            result = runner::run_trial(ctx, trial_id, &study.probes, gate_ref) => result.map(|()| true),
        };
        *control.ended.lock().expect("the last trial's end") = Some(std::time::Instant::now());
        ran
    }
}

/// Records something that happened to a study and tells its watchers.
async fn record(
    ctx: &RunnerContext,
    id: i64,
    kind: &str,
    message: &str,
) -> Result<(), sqlx::Error> {
    // The time as stored: a page that read the event with the study and
    // hears it again from the feed knows it for the same one.
    let at_ms = studies::add_event(&ctx.db, id, kind, message).await?;
    if let Some(row) = studies::get(&ctx.db, id).await? {
        ctx.events.publish(Payload::Study(StudyUpdate {
            study_id: id,
            state: row.state.as_str().into(),
            kind: kind.into(),
            message: message.into(),
            at_ms,
        }));
    }
    Ok(())
}

/// Moves a study to `state` for `reason`, recorded as an event.
async fn conclude(
    ctx: &RunnerContext,
    id: i64,
    state: StudyState,
    reason: &str,
) -> Result<(), sqlx::Error> {
    studies::set_state(&ctx.db, id, state, Some(reason)).await?;
    record(ctx, id, state.as_str(), reason).await
}
