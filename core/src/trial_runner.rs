//! The trial runner: one worker per engine slot takes queued trials in
//! order, launches the engine, probes it, stores what it measured, and
//! stops it. Every phase change is stored, then announced.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use engine_bridge::llama_server::Health;
use engine_bridge::pipeline::{self, AfterDirs, Start};
use engine_bridge::probes::Gate;
use engine_bridge::profile::EngineKind;
use engine_bridge::{Failure, FailureKind, ProbePlan, Profile, RunningEngine};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tunebook_domain::Role;

use crate::db::Db;
use crate::db::trials::{self, Measured, State};
use crate::trial::Trial;

/// Grace between SIGTERM and SIGKILL when stopping an engine.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// What the worker needs.
#[derive(Clone)]
pub struct RunnerContext {
    pub db: Db,
    pub profiles: Arc<Vec<Profile>>,
    /// Where trial and study updates go to their watchers.
    pub events: Arc<crate::events::Hub>,
    pub probes: ProbePlan,
    /// The endpoints of this machine's configuration, by name.
    pub endpoints: Arc<engine_bridge::endpoints::Endpoints>,
    pub load_timeout: Duration,
    /// Engine output is kept here, one file per trial.
    pub logs_dir: PathBuf,
    /// Running engines are recorded here (see `engine_bridge::registry`).
    pub engines_dir: PathBuf,
    /// Users' workload files (`NAME.jsonl`), which load probes name.
    pub workloads_dir: PathBuf,
    /// Memory read bandwidth in bytes per second, for the decode ceiling.
    pub bandwidth: Option<f64>,
    pub shutdown: CancellationToken,
    /// Held while an engine runs: one engine at a time on this machine,
    /// whether its trial came alone or from a study. Between a study's
    /// trials it may hold that study's engine, still running.
    pub slot: Arc<tokio::sync::Mutex<Option<Warm>>>,
    /// The data folder's lock, held as long as any copy of the context.
    pub data_lock: Arc<crate::data_lock::DataLock>,
    /// The server's turns at CPU work a request or a study asks for.
    pub heavy: crate::heavy::Turns,
    /// The studies checked against `profiles`, each once.
    pub checked: Arc<crate::checked::Checked>,
    /// What the runners count for Prometheus.
    pub telemetry: crate::telemetry::Telemetry,
}

/// A study's engine kept running after its trial, for a next trial that
/// differs from it only in request-time settings.
pub struct Warm {
    /// What a launch depends on: profile, model, load-time settings.
    key: (String, String, engine_bridge::Settings),
    engine: RunningEngine,
    study_id: i64,
    /// The trial that launched it, and the command line stored for it.
    launched_by: i64,
    command: serde_json::Value,
}

/// What a launch of `trial` depends on.
fn launch_key(profile: &Profile, trial: &Trial) -> (String, String, engine_bridge::Settings) {
    let load_time = profile.catalog().load_time(&trial.settings);
    (trial.profile.clone(), trial.model.clone(), load_time)
}

/// Stops the engine kept for study `study_id`, if one is.
pub async fn release(ctx: &RunnerContext, study_id: i64) {
    let mut slot = ctx.slot.lock().await;
    if slot.as_ref().is_some_and(|w| w.study_id == study_id)
        && let Some(warm) = slot.take()
    {
        warm.engine.stop(STOP_GRACE).await;
    }
}

/// Hands trials to the worker.
#[derive(Clone)]
pub struct Runner {
    queue: mpsc::UnboundedSender<i64>,
}

impl Runner {
    /// Settles what an earlier run left behind (trials cut off mid-run are
    /// marked interrupted, queued ones are queued again), then starts the
    /// worker. The worker ends when the shutdown token is cancelled, and any
    /// engine it ran is stopped by the time its handle resolves.
    pub async fn start(ctx: RunnerContext) -> Result<(Self, JoinHandle<()>), sqlx::Error> {
        let (queue, rx) = mpsc::unbounded_channel();
        for state in [State::Launching, State::Loading, State::Probing] {
            for id in trials::ids_in_state(&ctx.db, state).await? {
                let failure = Failure::new(
                    FailureKind::Interrupted,
                    format!("Tunebook stopped while this trial was {}", state.as_str()),
                );
                trials::finish_failed(&ctx.db, id, &failure).await?;
            }
        }
        for id in trials::ids_in_state(&ctx.db, State::Queued).await? {
            // A study's queued trial is its study runner's to run again;
            // one queued to settle a finding still waits for it there.
            let trial = trials::get(&ctx.db, id).await?;
            let settling = trial.as_ref().and_then(trials::TrialRow::role) == Some(Role::Settle);
            match trial.and_then(|t| t.study_id) {
                Some(_) if settling => {}
                Some(_) => {
                    let failure = Failure::new(
                        FailureKind::Interrupted,
                        "Tunebook stopped before this trial started",
                    );
                    trials::finish_failed(&ctx.db, id, &failure).await?;
                }
                None => {
                    let _ = queue.send(id);
                }
            }
        }
        let worker = tokio::spawn(work(ctx, rx));
        Ok((Self { queue }, worker))
    }

    /// Queues a stored trial.
    pub fn enqueue(&self, id: i64) {
        let _ = self.queue.send(id);
    }
}

async fn work(ctx: RunnerContext, mut rx: mpsc::UnboundedReceiver<i64>) {
    loop {
        let id = tokio::select! {
            _ = ctx.shutdown.cancelled() => return,
            id = rx.recv() => match id { Some(id) => id, None => return },
        };
        tokio::select! {
            // Dropping the trial drops its engine, which kills its process group.
            _ = ctx.shutdown.cancelled() => return,
            result = run_trial(&ctx, id, &ctx.probes, None) => {
                if let Err(e) = result {
                    tracing::error!(trial = id, error = %e, "trial could not be recorded");
                }
            }
        }
    }
}

/// Runs one stored, queued trial with `probes` (asking `gate` before the
/// slow ones), once the engine slot is free, and records the result.
pub async fn run_trial(
    ctx: &RunnerContext,
    id: i64,
    probes: &ProbePlan,
    gate: Option<Gate<'_>>,
) -> Result<(), sqlx::Error> {
    let Some(trial) = trials::get(&ctx.db, id).await? else {
        return Ok(());
    };
    if trial.state() != State::Queued {
        return Ok(());
    }
    let trial = Trial::from(trial);
    let mut slot = ctx.slot.lock().await;
    match measure(ctx, &trial, probes, gate, &mut slot).await? {
        Ok(()) => {}
        Err(failure) => {
            tracing::info!(trial = id, cause = failure.kind.label(), "trial failed");
            trials::finish_failed(&ctx.db, id, &failure).await?;
        }
    }
    publish(ctx, id).await
}

/// Runs one trial on the engine `slot` holds when it was launched with the
/// same load-time settings, else on a new launch; a study's engine stays
/// in `slot` afterwards. The outer error is the database's, the inner the
/// trial's.
async fn measure(
    ctx: &RunnerContext,
    trial: &Trial,
    probes: &ProbePlan,
    gate: Option<Gate<'_>>,
    slot: &mut Option<Warm>,
) -> Result<Result<(), Failure>, sqlx::Error> {
    let fail = |kind, message: String| Ok(Err(Failure::new(kind, message)));
    let mut probes = probes.clone().with_endpoints(&ctx.endpoints);
    if let Some(load) = &mut probes.load {
        load.workloads_dir = Some(ctx.workloads_dir.clone());
    }
    let probes = &probes;
    set_state(ctx, trial.id, State::Launching).await?;
    let Some(profile) = ctx.profiles.iter().find(|p| p.name == trial.profile) else {
        return fail(
            FailureKind::Spawn,
            format!("engine profile `{}` no longer exists", trial.profile),
        );
    };
    let key = launch_key(profile, trial);
    let (engine, command, reused_from) = match slot.take() {
        Some(mut warm) if warm.key == key && !warm.engine.has_exited() => {
            // This trial's request-time settings on the running engine (a
            // new launch gets them from its plan).
            match profile.catalog().render(&trial.settings) {
                Ok(rendered) => warm.engine.spec.request = rendered.request,
                Err(e) => {
                    *slot = Some(warm);
                    return fail(FailureKind::Rejected, e.to_string());
                }
            }
            trials::set_command(&ctx.db, trial.id, &warm.command).await?;
            let note = format!(
                "ran on the engine launched for trial {}: only request-time settings differ",
                warm.launched_by
            );
            trials::append_note(&ctx.db, trial.id, &note).await?;
            (warm.engine, warm.command, Some(warm.launched_by))
        }
        other => {
            if let Some(warm) = other {
                warm.engine.stop(STOP_GRACE).await;
            }
            match start_engine(ctx, profile, trial).await? {
                Ok(launched) => (launched.0, launched.1, None),
                Err(failure) => return Ok(Err(failure)),
            }
        }
    };
    set_state(ctx, trial.id, State::Probing).await?;
    let measured = engine.measure_gated(probes, gate).await;
    let applied = engine_bridge::applied::read_back(&trial.settings, engine.startup_log());
    // Kept for the study's next trial, unless something runs after the
    // engine (perplexity needs its memory) or the engine is in doubt.
    let keep = trial
        .study_id
        .filter(|_| measured.is_ok() && probes.perplexity.is_none() && probes.kld.is_none())
        .filter(|_| !engine.has_exited());
    match keep {
        Some(study_id) => {
            let launched_by = reused_from.unwrap_or(trial.id);
            *slot = Some(Warm { key, engine, study_id, launched_by, command });
        }
        None => {
            engine.stop(STOP_GRACE).await;
        }
    }
    let mut outcome = match measured {
        Ok(o) => o,
        Err(failure) => return Ok(Err(failure)),
    };
    let wrong = engine_bridge::applied::mismatched(&applied);
    if !wrong.is_empty() {
        let said: Vec<String> = wrong
            .iter()
            .map(|a| {
                format!("{} {} (asked {})", a.setting, a.ran.as_deref().unwrap_or("?"), a.asked)
            })
            .collect();
        let note = format!("the engine did not run as asked: {}", said.join(", "));
        trials::append_note(&ctx.db, trial.id, &note).await?;
        let ran = wrong
            .iter()
            .map(|a| (a.setting.clone(), a.ran.clone().unwrap_or_else(|| "?".into())))
            .collect();
        trials::set_mismatched(&ctx.db, trial.id, &ran).await?;
    }
    outcome.measurement.applied = applied;
    // The reference's logits are kept beside the logs, in the data folder.
    let kld_dir = ctx.logs_dir.with_file_name("kld");
    let dirs = AfterDirs {
        scratch: &ctx.logs_dir,
        kld: &kld_dir,
        registry: Some(ctx.engines_dir.as_path()),
    };
    let configuration = (profile, trial.model.as_str(), &trial.settings);
    let ceiling_tps =
        pipeline::after_engine(&mut outcome, probes, configuration, dirs, ctx.bandwidth).await;
    if let Some(why) = &outcome.measurement.skipped {
        trials::append_note(&ctx.db, trial.id, why).await?;
    }
    let measured = Measured { outcome: &outcome, ceiling_tps, reused: reused_from.is_some() };
    trials::finish_done(&ctx.db, trial.id, &measured).await?;
    Ok(Ok(()))
}

/// Launches the trial's engine and waits until it is ready (or, for an
/// external endpoint, waits until it answers), recording the command line,
/// the expected load time and readiness changes as it goes; again on
/// another port while the port was taken ([`pipeline::PORT_TRIES`]). Gives the
/// engine and the command line stored.
async fn start_engine(
    ctx: &RunnerContext,
    profile: &Profile,
    trial: &Trial,
) -> Result<Result<(RunningEngine, serde_json::Value), Failure>, sqlx::Error> {
    let mut tries = 1;
    loop {
        let launched = start_once(ctx, profile, trial).await?;
        match launched {
            Err(f) if pipeline::try_another_port(&f, tries) => {
                tracing::warn!(trial = trial.id, "{}; starting again on another port", f.message);
                tries += 1;
            }
            launched => return Ok(launched),
        }
    }
}

/// One launch of [`start_engine`].
async fn start_once(
    ctx: &RunnerContext,
    profile: &Profile,
    trial: &Trial,
) -> Result<Result<(RunningEngine, serde_json::Value), Failure>, sqlx::Error> {
    let start = match Start::plan(profile, &trial.model, &trial.settings) {
        Ok(start) => start.adapt().await,
        // An external endpoint refuses only what it cannot take.
        Err(e) if profile.kind == EngineKind::External => {
            Err(Failure::new(FailureKind::Rejected, e.to_string()))
        }
        Err(e) => Err(e.failure()),
    };
    let mut start = match start {
        Ok(start) => start,
        Err(failure) => return Ok(Err(failure)),
    };
    if let Some(spec) = start.spec_mut() {
        spec.registry_dir = Some(ctx.engines_dir.clone());
        if std::fs::create_dir_all(&ctx.logs_dir).is_ok() {
            spec.log_file = Some(ctx.logs_dir.join(format!("trial-{}.log", trial.id)));
        }
    }
    let command = start.command();
    trials::set_command(&ctx.db, trial.id, &command).await?;
    if let Start::Attach { .. } = start {
        set_state(ctx, trial.id, State::Loading).await?;
        return Ok(start.run(ctx.load_timeout, None).await.map(|engine| (engine, command)));
    }
    let expected = trials::mean_load_ms(&ctx.db, &trial.profile, &trial.model).await?;
    trials::set_expected_load(&ctx.db, trial.id, expected).await?;
    set_state(ctx, trial.id, State::Loading).await?;
    // Readiness changes (listening, model loading) go to the trial as they come.
    let (progress, mut watch) = tokio::sync::watch::channel(Health::NotListening);
    let forward = {
        let (ctx, id) = (ctx.clone(), trial.id);
        tokio::spawn(async move {
            while watch.changed().await.is_ok() {
                let state = match *watch.borrow_and_update() {
                    Health::NotListening => "not_listening",
                    Health::Loading => "loading",
                    Health::Ready => "ready",
                };
                if trials::set_load_state(&ctx.db, id, state).await.is_ok() {
                    let _ = publish(&ctx, id).await;
                }
            }
        })
    };
    let launched = start.run(ctx.load_timeout, Some(&progress)).await;
    drop(progress);
    let _ = forward.await;
    Ok(launched.map(|engine| (engine, command)))
}

async fn set_state(ctx: &RunnerContext, id: i64, state: State) -> Result<(), sqlx::Error> {
    trials::set_state(&ctx.db, id, state).await?;
    publish(ctx, id).await
}

/// Announces a trial's stored state to every listener.
pub async fn publish(ctx: &RunnerContext, id: i64) -> Result<(), sqlx::Error> {
    crate::announce::trial(&ctx.db, &ctx.events, id).await.map(drop)
}
