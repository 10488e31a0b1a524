//! The study runner: for each running study, asks its strategy for the next
//! configuration, prunes what the planner says cannot fit, runs the trial,
//! re-runs the baseline now and then to catch drift, and stops on its
//! budget, its patience, an exhausted space, or a request. Everything it
//! decides from is in the database, so a restarted Tunebook picks a study up
//! where it was: the trial a crash cut off runs again, nothing finished is
//! lost.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use engine_bridge::planner::ModelInfo;
use engine_bridge::profile::EngineKind;
use engine_bridge::{FailureKind, Profile, Settings};
use tokio::sync::Notify;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tunebook_app::types::{
    CheckView, ParetoPointView, ParetoView, SettingValues, StudyUpdate, TrialState, TrialView,
};
use tunebook_study::findings::{self, Finding, TrialFacts};
use tunebook_study::{
    Goal, Measure, Metric, Observation, Study, StudyDef, StudyError, confirm, pareto, strategy,
};

use crate::db::queue;
use crate::db::studies::{self, StudyState};
use crate::db::trials::{self, NewTrial, StudyPart};
use crate::hub::Payload;
use crate::runner::{self, RunnerContext};

/// How a running study is told to pause, resume or stop.
#[derive(Clone, Default)]
struct Control {
    /// Cancels the trial in flight (stop).
    stop: CancellationToken,
    /// Wakes a paused study.
    wake: Arc<Notify>,
}

/// Running studies, one task each; trials still run one at a time (the
/// runner's engine slot).
pub struct Studies {
    ctx: RunnerContext,
    running: Mutex<HashMap<i64, Control>>,
    tasks: TaskTracker,
}

/// A trial's metrics by name.
pub fn metrics(t: &TrialView) -> BTreeMap<Metric, f64> {
    let pairs = [
        (Metric::DecodeTps, t.decode_tps),
        (Metric::PrefillTps, t.prefill_tps),
        (Metric::TtftMs, t.ttft_ms),
        (Metric::LoadMs, t.load_ms),
        (Metric::PeakRssBytes, t.peak_rss_bytes.map(|b| b as f64)),
        (Metric::MemAvailableDropBytes, t.mem_available_drop_bytes.map(|b| b as f64)),
        (Metric::PeakGpuBytes, t.peak_gpu_bytes.map(|b| b as f64)),
        (Metric::QualityScore, t.quality_score),
        (Metric::ContextPassRate, t.context_pass_rate),
        (Metric::ContextTokens, t.context_tokens.map(|t| t as f64)),
        (Metric::PctOfCeiling, t.pct_of_ceiling),
        (Metric::Perplexity, t.perplexity),
    ];
    pairs.into_iter().filter_map(|(m, v)| Some((m, v?))).collect()
}

fn interrupted(t: &TrialView) -> bool {
    t.failure_kind.as_deref() == Some(FailureKind::Interrupted.label())
}

/// Whether a trial counts against the budget: run to an end, not pruned,
/// not cut off.
pub fn counts_against_budget(t: &TrialView) -> bool {
    t.state.is_final() && t.state != TrialState::Pruned && !interrupted(t)
}

/// A study's objectives as written: what each reads, with its goal.
pub fn measures_of(def: &StudyDef) -> Vec<(Measure, Goal)> {
    def.objectives
        .iter()
        .filter_map(|t| {
            let m = Measure::parse(&t.metric)?;
            let goal = t.goal.unwrap_or(m.natural_goal());
            Some((m, goal))
        })
        .collect()
}

/// The objectives that read a metric, with their goals: what findings
/// judge (a setting's value is no effect to find).
pub fn objectives_of(def: &StudyDef) -> Vec<(Metric, Goal)> {
    measures_of(def).into_iter().filter_map(|(m, g)| Some((m.metric()?, g))).collect()
}

/// The done trials that measured every chosen metric, with those values.
pub fn points<'a>(
    trials: &'a [TrialView],
    chosen: &[(Metric, Goal)],
) -> Vec<(&'a TrialView, Vec<f64>)> {
    trials
        .iter()
        .filter(|t| t.state == TrialState::Done)
        .filter_map(|t| {
            let m = metrics(t);
            Some((t, chosen.iter().map(|(k, _)| m.get(k).copied()).collect::<Option<Vec<f64>>>()?))
        })
        .collect()
}

/// Done trials on chosen metrics (id, settings, one value per metric), the
/// Pareto front marked, what each differs in from the baseline, and the
/// values each took of the `varied` settings.
pub fn pareto_view(
    done: Vec<(i64, BTreeMap<String, String>, Vec<f64>)>,
    chosen: &[(Measure, Goal)],
    baseline: &BTreeMap<String, String>,
    varied: &[String],
) -> ParetoView {
    let values: Vec<Vec<f64>> = done.iter().map(|(_, _, v)| v.clone()).collect();
    let goals: Vec<Goal> = chosen.iter().map(|(_, g)| *g).collect();
    let front = pareto::front(&values, &goals);
    let mut settings: Vec<SettingValues> =
        varied.iter().map(|name| SettingValues { name: name.clone(), values: vec![] }).collect();
    let configs: Vec<Vec<u32>> = done
        .iter()
        .map(|(_, config, _)| {
            settings
                .iter_mut()
                .map(|s| {
                    let value = config.get(&s.name).map_or("", String::as_str);
                    let at = s.values.iter().position(|v| v == value).unwrap_or_else(|| {
                        s.values.push(value.to_string());
                        s.values.len() - 1
                    });
                    at as u32
                })
                .collect()
        })
        .collect();
    ParetoView {
        settings,
        machines: vec![],
        machine: None,
        metrics: chosen.iter().map(|(m, _)| m.name()).collect(),
        goals: goals
            .iter()
            .map(|g| if *g == Goal::Max { "max" } else { "min" }.to_string())
            .collect(),
        points: done
            .into_iter()
            .zip(configs)
            .enumerate()
            .map(|(i, ((trial_id, settings, values), config))| ParetoPointView {
                trial_id,
                values,
                on_front: front.binary_search(&i).is_ok(),
                differs: tunebook_app::design::differences(&settings, baseline).join(" "),
                config,
            })
            .collect(),
    }
}

/// What a study's trials show (see [`tunebook_study::findings`]): trials cut
/// off by a restart and configurations never run (pruned) are left out.
pub fn findings_of(def: &StudyDef, trials: &[TrialView]) -> Vec<Finding> {
    let facts = facts_of(def, trials);
    let varied: Vec<String> = def.space.keys().cloned().collect();
    let mut found: Vec<Finding> = findings::boundary(def, &facts).into_iter().collect();
    found.extend(findings::findings_with(&facts, &varied, &measures_of(def), &def.margins));
    found
}

/// Trials as the findings see them: those that ended, neither pruned nor
/// cut off by a restart, each marked with the bound of `def` it broke.
fn facts_of(def: &StudyDef, trials: &[TrialView]) -> Vec<TrialFacts> {
    let mut facts: Vec<TrialFacts> = trials
        .iter()
        .filter(|t| t.state.is_final() && t.state != TrialState::Pruned && !interrupted(t))
        .map(|t| TrialFacts {
            id: t.id,
            settings: t.settings.clone(),
            done: t.state == TrialState::Done,
            failure: (t.state == TrialState::Failed).then(|| {
                (t.failure_kind.clone().unwrap_or_default(), t.error.clone().unwrap_or_default())
            }),
            metrics: metrics(t),
            ceiling_tps: t.ceiling_tps,
            role: t.role.clone(),
            drift_pct: t.drift_pct,
            missed: None,
        })
        .collect();
    findings::mark_missed(def, &mut facts);
    facts
}

/// A study's trials by the class of machine they ran on, each class in
/// the order of its first trial. Speeds compare only within a class, so
/// findings are drawn per class. A study that ran on one class (or on this
/// server's engine) is one group, unnamed.
pub fn by_machine(list: &[TrialView]) -> Vec<(Option<String>, Vec<TrialView>)> {
    let mut groups: Vec<(Option<String>, Vec<TrialView>)> = Vec::new();
    for t in list {
        match groups.iter_mut().find(|(m, _)| *m == t.machine) {
            Some((_, g)) => g.push(t.clone()),
            None => groups.push((t.machine.clone(), vec![t.clone()])),
        }
    }
    if let [(name, _)] = groups.as_mut_slice() {
        *name = None;
    }
    groups
}

/// The classes of machine side by side, as a markdown table: the workers
/// that ran each, trials run, and per objective the baseline's value and
/// the best found, each against its own class's baseline.
pub fn side_by_side(def: &StudyDef, groups: &[(Option<String>, Vec<TrialView>)]) -> String {
    let cell = |s: String| s.replace('|', "\\|");
    let names: Vec<String> = groups
        .iter()
        .map(|(m, _)| cell(m.clone().unwrap_or_else(|| "this server".into())))
        .collect();
    let mut rows = vec![
        format!("| | {} |", names.join(" | ")),
        format!("|---|{}", "---|".repeat(groups.len())),
    ];
    let row = |label: &str, f: &dyn Fn(&[TrialView]) -> String| {
        let cells: Vec<String> = groups.iter().map(|(_, list)| cell(f(list))).collect();
        format!("| {label} | {} |", cells.join(" | "))
    };
    rows.push(row("Workers", &|list| {
        let names: BTreeSet<&str> = list.iter().filter_map(|t| t.worker.as_deref()).collect();
        names.into_iter().collect::<Vec<_>>().join(", ")
    }));
    rows.push(row("Trials done / failed", &|list| {
        let n = |s: TrialState| list.iter().filter(|t| t.state == s).count();
        format!("{} / {}", n(TrialState::Done), n(TrialState::Failed))
    }));
    for (metric, goal) in objectives_of(def) {
        let base = |list: &[TrialView]| {
            list.iter()
                .find(|t| t.role.as_deref() == Some("baseline") && t.state == TrialState::Done)
                .and_then(|t| Some((t.id, *metrics(t).get(&metric)?)))
        };
        rows.push(row(&format!("Baseline {}", metric.label()), &|list| match base(list) {
            Some((id, v)) => format!("{} (trial {id})", findings::value_text(metric, v)),
            None => "—".into(),
        }));
        rows.push(row(&format!("Best {}", metric.label()), &|list| {
            let best = list
                .iter()
                .filter(|t| t.state == TrialState::Done)
                .filter_map(|t| Some((t, *metrics(t).get(&metric)?)))
                .max_by(|a, b| goal.oriented(a.1).total_cmp(&goal.oriented(b.1)));
            let Some((t, v)) = best else { return "—".into() };
            let against = base(list)
                .filter(|(_, b)| *b != 0.0)
                .map(|(_, b)| format!(", {:+.1} % on its baseline", (v - b) / b.abs() * 100.0))
                .unwrap_or_default();
            let settings: Vec<String> =
                t.settings.iter().map(|(k, v)| format!("{k}={v}")).collect();
            format!(
                "{} (trial {}{against}): `{}`",
                findings::value_text(metric, v),
                t.id,
                settings.join(" ")
            )
        }));
    }
    format!(
        "{}\n\nEach class of machine was searched on its own, from its own baseline: numbers compare down a column, not across.\n",
        rows.join("\n")
    )
}

/// Findings in markdown, one level down (under a machine's heading).
fn nested(markdown: &str) -> String {
    markdown
        .lines()
        .map(|l| if l.starts_with('#') { format!("#{l}") } else { l.to_string() })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The findings of a study's trials in markdown: as they are, or, where
/// the trials ran on more than one class of machine, the classes side by
/// side and then each class's own findings. Returns the findings too.
pub fn findings_markdown(def: &StudyDef, list: &[TrialView]) -> (Vec<Finding>, String) {
    let groups = by_machine(list);
    if groups.len() <= 1 {
        let found = findings_of(def, list);
        let text = findings::markdown(&found);
        return (found, text);
    }
    let mut all = Vec::new();
    let mut text = format!("## Per machine, side by side\n\n{}\n", side_by_side(def, &groups));
    for (machine, trials) in &groups {
        let found = findings_of(def, trials);
        let name = machine.as_deref().unwrap_or("this server");
        text.push_str(&format!("## On {name}\n\n{}\n\n", nested(&findings::markdown(&found))));
        all.extend(found);
    }
    (all, text)
}

/// Study `id`'s findings and the write-up of them in markdown: the
/// findings (per class of machine, where it ran on several), then how to
/// run each best configuration outside Tunebook (command line and systemd
/// unit). `None` when there is no such study.
pub async fn write_up(
    db: &crate::db::Db,
    id: i64,
) -> Result<Option<(Vec<Finding>, String)>, sqlx::Error> {
    let Some(row) = studies::get(db, id).await? else { return Ok(None) };
    let list = trials::of_study(db, id).await?;
    let (found, mut text) = findings_markdown(&row.definition, &list);
    let mut shown = BTreeSet::new();
    let mut recipes = String::new();
    for f in &found {
        let (why, trial) = match f {
            Finding::Best { measure, trial, .. } => (format!("best {}", measure.label()), trial),
            Finding::Balanced { trial, .. } => ("balanced pick".to_string(), trial),
            Finding::Boundary { setting, held: Some((trial, _)), goal, .. } => {
                let most = if *goal == Goal::Max { "largest" } else { "smallest" };
                (format!("{most} {setting} that holds"), trial)
            }
            _ => continue,
        };
        let Some(t) = list.iter().find(|t| t.id == *trial) else { continue };
        if !shown.insert(*trial) {
            continue;
        }
        let Some(r) = crate::recipe::of_trial(db, id, t).await? else { continue };
        let why = match &t.machine {
            Some(m) => format!("{why}, on {m}"),
            None => why,
        };
        recipes.push_str(&format!(
            "### Trial {trial} ({})\n\n{}\n{}\n",
            why,
            crate::markdown::fenced("sh", &r.shell),
            crate::markdown::fenced("ini", &r.unit)
        ));
    }
    if !recipes.is_empty() {
        text.push_str(&format!(
            "## Run it

On port {}; the unit's start timeout is three times the measured load time.

{recipes}",
            crate::recipe::PORT
        ));
    }
    Ok(Some((found, text)))
}

/// Checks a study against the server's profiles and the engine's catalog.
pub fn check(profiles: &[Profile], def: &StudyDef) -> Result<Study, StudyError> {
    let profile = profiles.iter().find(|p| p.name == def.profile).ok_or_else(|| {
        let names: Vec<_> = profiles.iter().map(|p| p.name.as_str()).collect();
        StudyError(vec![format!(
            "unknown engine profile `{}` (there are: {})",
            def.profile,
            names.join(", ")
        )])
    })?;
    let models: Vec<String> = profile.models.iter().map(|m| m.name.clone()).collect();
    def.check(&profile.catalog(), &models)
}

/// Checks that every endpoint a study names (its `llm` strategy's, its
/// quality judge's) is one of the server's.
pub fn check_endpoints(
    endpoints: &engine_bridge::endpoints::Endpoints,
    def: &StudyDef,
) -> Result<(), StudyError> {
    let judge = def.probes.as_ref().and_then(|p| p.quality.as_ref()?.judge.as_ref());
    let named = def.strategy.endpoint.iter().chain(judge.map(|j| &j.endpoint));
    let errors: Vec<String> =
        named.filter_map(|name| engine_bridge::endpoints::named(endpoints, name).err()).collect();
    if errors.is_empty() { Ok(()) } else { Err(StudyError(errors)) }
}

/// What the study's trials say so far, kept between the study loop's
/// turns: each turn reads only the trials it has not yet seen ended.
#[derive(Default)]
struct History {
    /// On workers: the class of machine whose trials these are (each class
    /// is searched on its own). `None`: all of the study's trials.
    machine: Option<String>,
    trials: Vec<TrialView>,
    observations: Vec<Observation>,
    baseline: Option<TrialView>,
    /// Every trial up to this id had ended when it was read (and ended
    /// trials do not change); later ones are read again.
    settled: i64,
}

impl History {
    async fn refresh(
        &mut self,
        ctx: &RunnerContext,
        study: &Study,
        id: i64,
    ) -> Result<(), sqlx::Error> {
        let before = self.settled;
        let mut fresh = trials::of_study_after(&ctx.db, id, before).await?;
        if let Some(class) = &self.machine {
            fresh.retain(|t| t.machine.as_ref() == Some(class));
        }
        self.trials.retain(|t| t.id <= before);
        self.settled =
            fresh.iter().take_while(|t| t.state.is_final()).last().map_or(before, |t| t.id);
        self.trials.extend(fresh);
        let settled = self.settled;
        let ended = |t: &&TrialView| t.id <= settled;
        let from = if self.baseline.is_none() {
            self.baseline = self
                .trials
                .iter()
                .filter(ended)
                .find(|t| t.role.as_deref() == Some("baseline") && t.state == TrialState::Done)
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
        let base_metrics = self.baseline.as_ref().map(metrics);
        let observed = self
            .trials
            .iter()
            .filter(|t| t.id > from && ended(t))
            .filter(|t| !interrupted(t) && t.role.as_deref() != Some("rerun"))
            .map(|t| {
                let m = (t.state == TrialState::Done).then(|| metrics(t));
                study.observe(t.settings.clone(), m.as_ref(), base_metrics.as_ref())
            });
        self.observations.extend(observed);
        Ok(())
    }

    /// Trials that count against the budget: run to an end, not cut off.
    fn spent(&self) -> usize {
        self.trials.iter().filter(|t| counts_against_budget(t)).count()
    }
}

/// Why the search should end now, if it should, and whether the pick may
/// still be confirmed (not when time is up). The trials reserved for
/// confirmation (see [`tunebook_study::confirm`]) are not the search's.
fn stop_reason(study: &Study, h: &History, created_ms: i64) -> Option<(String, bool)> {
    let budget = &study.def.budget;
    let reserve = if h.machine.is_some() { 0 } else { confirm::reserve(study) };
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

/// The planner's memory check for one study: the model read once, the
/// machine's available memory and free GPU memory read once. It applies to
/// llama.cpp; a configuration that leaves the split between GPU and host
/// to the engine (no `n_gpu_layers` on a machine with a GPU) is not judged.
struct FitCheck {
    info: Option<(ModelInfo, u64)>,
    gpu_free: Option<u64>,
}

impl FitCheck {
    async fn new(profile: &Profile, model: &str) -> Self {
        let applies = matches!(profile.kind, EngineKind::LlamaServer | EngineKind::LlamaCppPython);
        let info = applies
            .then(|| {
                let info = ModelInfo::read(&profile.model(model)?.path).ok()?;
                Some((info, engine_bridge::memory::mem_available()?))
            })
            .flatten();
        let gpu_free =
            if info.is_some() { engine_bridge::memory::gpu_free_bytes().await } else { None };
        Self { info, gpu_free }
    }

    /// Why `config` cannot fit, if the planner says so.
    fn will_not_fit(&self, config: &Settings) -> Option<String> {
        let (info, available) = self.info.as_ref()?;
        let ctx: u64 = config.get("ctx_size")?.parse().ok()?;
        let cache = |k: &str| config.get(k).map_or("f16", String::as_str);
        let types = (cache("cache_type_k"), cache("cache_type_v"));
        let offloaded = match config.get("n_gpu_layers") {
            Some(n) => n.parse::<u64>().ok()?,
            None if self.gpu_free.is_some() => return None,
            None => 0,
        };
        let (plan, where_) = if offloaded == 0 {
            (info.memory_plan(ctx, types.0, types.1, *available), "")
        } else {
            let plan = info.offload_plan(ctx, types, offloaded, (self.gpu_free?, *available));
            if plan.gpu.fits { (plan.host, " in host memory") } else { (plan.gpu, " on the GPU") }
        };
        let gib = |b: u64| b as f64 / (1u64 << 30) as f64;
        let free = if where_ == " on the GPU" { "free" } else { "available" };
        (!plan.fits).then(|| {
            format!(
                "predicted not to fit{where_}: needs {:.2} GiB (weights {:.2}, K/V cache {:.2}, overhead {:.2}) with {:.2} GiB {free}",
                gib(plan.total),
                gib(plan.weights),
                gib(plan.kv.unwrap_or(0)),
                gib(plan.overhead),
                gib(plan.available)
            )
        })
    }
}

/// What the designer shows before a study runs: the size of its space, what
/// the planner rules out, and how long it should take going by earlier
/// trials of the same model.
pub async fn preview(
    db: &crate::db::Db,
    profiles: &[Profile],
    endpoints: &engine_bridge::endpoints::Endpoints,
    def: &StudyDef,
) -> Result<Result<CheckView, StudyError>, sqlx::Error> {
    if let Err(e) = check_endpoints(endpoints, def) {
        return Ok(Err(e));
    }
    let study = match check(profiles, def) {
        Ok(s) => s,
        Err(e) => return Ok(Err(e)),
    };
    let profile = profiles.iter().find(|p| p.name == def.profile).expect("checked");
    let fit = FitCheck::new(profile, &def.model).await;
    let grid_size = study.space.grid_size().min(u64::MAX as u128) as u64;
    let (mut allowed, mut not_fit, mut examples) = (None, 0, Vec::new());
    if study.space.grid_size() <= 200_000 {
        let mut n = 0;
        for config in study.space.grid().filter(|c| study.space.allows(c)) {
            n += 1;
            if let Some(reason) = fit.will_not_fit(&config) {
                not_fit += 1;
                if examples.len() < 3 {
                    let what: Vec<String> =
                        config.iter().map(|(k, v)| format!("{k}={v}")).collect();
                    examples.push(format!("{}: {reason}", what.join(" ")));
                }
            }
        }
        allowed = Some(n);
    }
    let budget = u64::from(def.budget.max_trials);
    let planned = allowed.map_or(budget, |a| a.min(budget));
    let runnable = allowed.map_or(planned, |a| planned.min(a - not_fit));
    let (mean_ms, n) = trials::mean_wall_ms(db, &def.profile, &def.model).await?;
    let (estimate_s, estimate_basis) = match mean_ms {
        Some(ms) => (
            Some(ms / 1e3 * runnable as f64),
            format!(
                "{runnable} trials at {:.1} s each, the mean of {n} earlier trials of this model (their probes may differ)",
                ms / 1e3
            ),
        ),
        None => (None, "no earlier trial of this model to go by".into()),
    };
    Ok(Ok(CheckView {
        grid_size,
        allowed,
        not_fit,
        not_fit_examples: examples,
        planned_trials: planned,
        estimate_s,
        estimate_basis,
        baseline: study.baseline.clone(),
        toml: toml::to_string(def).unwrap_or_default(),
    }))
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
        check_endpoints(&self.ctx.endpoints, def)
            .and_then(|()| check(&self.ctx.profiles, def).map(drop))
            .map_err(|e| crate::Error::BadRequest(e.to_string()))?;
        let id = studies::insert(&self.ctx.db, def).await?;
        record(&self.ctx, id, "created", &format!("study `{}` created", def.name)).await?;
        Ok((id, self.spawn(id)))
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
        let this = self.clone();
        self.tasks.spawn(async move {
            let shutdown = this.ctx.shutdown.clone();
            tokio::select! {
                // Dropping the loop drops the trial in flight and its engine.
                _ = shutdown.cancelled() => {}
                result = this.run(id, &control) => {
                    if let Err(e) = result {
                        tracing::error!(study = id, error = %e, "study could not be recorded");
                        // Say so where the user looks, if the database lets us.
                        let reason = format!("the study could not be recorded: {e}");
                        let _ = conclude(&this.ctx, id, StudyState::Failed, &reason).await;
                    }
                }
            }
            runner::release(&this.ctx, id).await;
            this.running.lock().expect("lock").remove(&id);
        })
    }

    async fn run(&self, id: i64, control: &Control) -> Result<(), sqlx::Error> {
        let ctx = &self.ctx;
        let Some(row) = studies::get(&ctx.db, id).await? else { return Ok(()) };
        let (study, profile) = match check(&ctx.profiles, &row.definition) {
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
        let strategy = strategy::for_study(&study, endpoint.cloned());
        if !study.def.machines.is_empty() {
            return self.run_on_workers(id, &study, strategy.as_ref(), control).await;
        }
        let fit = FitCheck::new(&profile, &study.def.model).await;
        let mut history = History::default();
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
            let stop = stop_reason(&study, &history, row.created_ms);
            if let Some((reason, false)) = &stop {
                return conclude(ctx, id, StudyState::Done, reason).await;
            }
            // Everything is compared with the baseline: without it, stop.
            let failed_baseline = history.trials.iter().find(|t| {
                t.role.as_deref() == Some("baseline") && t.state.is_final() && !interrupted(t)
            });
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
            // The search is over: the pick is confirmed before it is named.
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
                model: &study.def.model,
                settings: &config,
                tokens_requested: study.probes.speed.as_ref().map(|s| s.n_predict),
                study: Some(part),
                target: None,
                machine: None,
            };
            let trial_id = trials::insert(&ctx.db, &new).await?;
            if let Some(reason) = fit.will_not_fit(&config) {
                trials::finish_pruned(&ctx.db, trial_id, &reason).await?;
                runner::publish(ctx, trial_id).await?;
                continue;
            }
            runner::publish(ctx, trial_id).await?;
            let facts = facts_of(&study.def, &history.trials);
            let gate = crate::dominance::gate(&study, &facts, &config);
            let gate_ref: Option<engine_bridge::probes::Gate<'_>> =
                gate.as_ref().map(|g| g as engine_bridge::probes::Gate<'_>);
            tokio::select! {
                _ = control.stop.cancelled() => {
                    let failure = engine_bridge::Failure {
                        kind: FailureKind::Interrupted,
                        message: "the study was stopped while this trial ran".into(),
                        log_tail: vec![],
                    };
                    trials::finish_failed(&ctx.db, trial_id, &failure).await?;
                    runner::publish(ctx, trial_id).await?;
                    return Ok(());
                }
                result = runner::run_trial(ctx, trial_id, &study.probes, gate_ref) => result?,
            }
            if role == "rerun" {
                self.check_drift(&study, id, &history, trial_id).await?;
            }
        }
    }

    /// The next trial: an interrupted one again, the baseline, a due
    /// re-run of the baseline, or the strategy's proposal, which is none
    /// of the configurations `running` (or run but not yet observed).
    async fn next(
        &self,
        study: &Study,
        h: &History,
        running: &[Settings],
        strategy: &dyn strategy::Strategy,
    ) -> Option<(Settings, &'static str, String)> {
        let on_workers = h.machine.is_some();
        if let Some(last) = h.trials.last().filter(|t| interrupted(t) && !on_workers) {
            let role = match last.role.as_deref() {
                Some("baseline") => "baseline",
                Some("rerun") => "rerun",
                Some(confirm::ROLE_PICK) => confirm::ROLE_PICK,
                Some(confirm::ROLE_BALANCED) => confirm::ROLE_BALANCED,
                Some(confirm::ROLE_BASE) => confirm::ROLE_BASE,
                _ => "search",
            };
            return Some((
                last.settings.clone(),
                role,
                format!("re-run of trial {}, which was interrupted", last.id),
            ));
        }
        if h.baseline.is_none() {
            return Some((study.baseline.clone(), "baseline", "the baseline".into()));
        }
        let rerun_every = study.def.budget.rerun_baseline_every.filter(|e| *e > 0 && !on_workers);
        if let Some(every) = rerun_every {
            let since = h
                .trials
                .iter()
                .rev()
                .take_while(|t| !matches!(t.role.as_deref(), Some("baseline" | "rerun")))
                .count();
            if since >= every as usize {
                return Some((
                    study.baseline.clone(),
                    "rerun",
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
            }));
            strategy.propose(study, &seen).await?
        };
        Some((p.config, "search", p.note))
    }

    /// A study on workers: each class of machine among its machines
    /// searched on its own (its own baseline, history and budget), with as
    /// many trials queued for a class as it has workers up, any of which
    /// may take each. Waits for trials to end, for workers to come up, or
    /// for a request; ends when every class's search has.
    async fn run_on_workers(
        &self,
        id: i64,
        study: &Study,
        strategy: &dyn strategy::Strategy,
        control: &Control,
    ) -> Result<(), sqlx::Error> {
        let ctx = &self.ctx;
        let mut feed = ctx.events.subscribe();
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
                let mut end = stop_reason(study, h, row.created_ms).map(|(r, _)| r).or_else(|| {
                    let failed = h
                        .trials
                        .iter()
                        .find(|t| t.role.as_deref() == Some("baseline") && t.state.is_final());
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
                        model: &study.def.model,
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
                _ = trial_of_study_ended(&mut feed, id) => {}
                // Workers come and go without a word to the study.
                _ = tokio::time::sleep(WORKERS_LOOKED_AT_EVERY) => {}
            }
        }
    }

    /// Compares a re-run baseline with the first on the first objective and
    /// flags drift on the trials since the previous baseline run.
    async fn check_drift(
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
        let (Some(before), Some(now)) =
            (metrics(base).get(&first).copied(), metrics(&rerun).get(&first).copied())
        else {
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
            .find(|t| matches!(t.role.as_deref(), Some("baseline" | "rerun")))
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

/// A worker counts as up while it was heard from this recently: an idle
/// worker asks for work again as soon as its last request (answered within
/// 20 s, `routes::workers::CLAIM_WAIT`) comes back, a busy one reports
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

/// Waits until a trial of study `id` ends (or the feed lags, which may
/// have hidden one).
async fn trial_of_study_ended(
    feed: &mut tokio::sync::broadcast::Receiver<Arc<crate::hub::Update>>,
    id: i64,
) {
    loop {
        match feed.recv().await {
            Ok(u) => {
                if let Payload::Trial(t) = &u.payload
                    && t.study_id == Some(id)
                    && t.state.is_final()
                {
                    return;
                }
            }
            Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => return,
            Err(tokio::sync::broadcast::error::RecvError::Closed) => {
                std::future::pending::<()>().await
            }
        }
    }
}

/// Records something that happened to a study and tells its watchers.
async fn record(
    ctx: &RunnerContext,
    id: i64,
    kind: &str,
    message: &str,
) -> Result<(), sqlx::Error> {
    studies::add_event(&ctx.db, id, kind, message).await?;
    if let Some(row) = studies::get(&ctx.db, id).await? {
        ctx.events.publish(Payload::Study(StudyUpdate {
            study_id: id,
            state: row.state.as_str().into(),
            kind: kind.into(),
            message: message.into(),
            at_ms: crate::db::now_ms(),
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

#[cfg(test)]
mod tests {
    use engine_bridge::gguf::{LlamaSpec, write_random_llama};

    use super::*;

    fn config(pairs: &[(&str, &str)]) -> Settings {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn offloaded_layers_are_judged_against_free_gpu_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("m.gguf");
        write_random_llama(&path, &LlamaSpec::tiny(), 1).unwrap();
        let info = ModelInfo::read(&path).unwrap();
        let gib = 1u64 << 30;
        let fit = FitCheck { info: Some((info, 64 * gib)), gpu_free: Some(200 << 20) };
        // On the host alone it fits; every layer on a GPU with 200 MiB free
        // does not (the CUDA runtime and the overhead margin alone take 1 GiB).
        assert_eq!(fit.will_not_fit(&config(&[("ctx_size", "4096"), ("n_gpu_layers", "0")])), None);
        let why = fit
            .will_not_fit(&config(&[("ctx_size", "4096"), ("n_gpu_layers", "99")]))
            .expect("too big for the GPU");
        assert!(why.starts_with("predicted not to fit on the GPU: needs 1.02 GiB"), "{why}");
        assert!(why.ends_with("with 0.20 GiB free"), "{why}");
        // With a GPU and no layer count the engine decides: not judged.
        assert_eq!(fit.will_not_fit(&config(&[("ctx_size", "4096")])), None);
        // Without a GPU, offloading cannot be judged, host-only still is.
        let no_gpu = FitCheck { gpu_free: None, ..fit };
        assert_eq!(
            no_gpu.will_not_fit(&config(&[("ctx_size", "4096"), ("n_gpu_layers", "99")])),
            None
        );
        let (info, _) = no_gpu.info.unwrap();
        let tight = FitCheck { info: Some((info, 100 << 20)), gpu_free: None };
        let why = tight.will_not_fit(&config(&[("ctx_size", "4096")])).expect("too big");
        assert!(why.starts_with("predicted not to fit: needs"), "{why}");
    }
}
