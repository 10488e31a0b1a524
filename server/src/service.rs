//! The server's side of the pages and the JSON API: profiles, trials, and
//! submitting a configuration to the runner.

use std::collections::BTreeMap;
use std::sync::Arc;

use engine_bridge::Profile;
use engine_bridge::catalog::CACHE_TYPES;
use tunebook_app::backend::Backend;
use tunebook_app::types::{
    BestView, CheckView, FindingsView, MachineBest, MetricPoint, MetricView, Notebook,
    ObjectiveView, ParamView, ParetoView, ProfileView, ReportSummary, ReportView, RunRequest,
    StudyProgress, StudySummary, StudyUpdate, StudyView, TrialDetail, TrialPage, TrialQuery,
    TrialState, TrialView, WorkerView,
};
use tunebook_study::{Goal, Measure, Metric, StudyDef};

use crate::db::Db;
use crate::db::studies::{self, StudyRow};
use crate::db::trials::{self, NewTrial};
use crate::error::{Error, Result};
use crate::trial_runner::Runner;

/// Trials in flight a study's page shows at most (one per worker).
const IN_FLIGHT_SHOWN: i64 = 32;

/// Profiles, database, runner and the event channel, shared by all requests.
pub struct Service {
    pub db: Db,
    pub profiles: Arc<Vec<Profile>>,
    pub runner: Runner,
    pub studies: Arc<crate::study_runner::Studies>,
    /// The endpoints studies may name (see `engine_bridge::endpoints`).
    pub endpoints: Arc<engine_bridge::endpoints::Endpoints>,
    pub events: Arc<crate::events::Hub>,
    /// Tokens each speed probe request generates, stored with each trial.
    pub n_predict: Option<u32>,
    /// Where engine output is kept, one file per launch (`trial-N.log`).
    pub logs_dir: std::path::PathBuf,
    /// The data folder (machine facts, model hashes).
    pub data_dir: std::path::PathBuf,
    /// Holds `pkg/plotly.min.js`, inlined into exported reports.
    pub site_root: std::path::PathBuf,
    /// Measured memory read bandwidth, bytes per second.
    pub bandwidth: Option<f64>,
    /// Where reports' findings are rewritten as prose, if anywhere.
    pub writer: Option<tunebook_study::study::Endpoint>,
    /// What workers measure on each trial they take, and how long their
    /// lease on it lasts between renewals.
    pub probes: engine_bridge::ProbePlan,
    pub lease: std::time::Duration,
}

impl Service {
    /// Checks a request, stores it as a queued trial, and hands it to the
    /// runner. Nothing is stored when the request is wrong.
    pub async fn submit(&self, request: RunRequest) -> Result<TrialView> {
        let profile =
            self.profiles.iter().find(|p| p.name == request.profile).ok_or_else(|| {
                Error::BadRequest(format!("unknown engine profile `{}`", request.profile))
            })?;
        // A blank value means "leave it to the engine".
        let settings = request
            .settings
            .into_iter()
            .map(|(k, v)| (k, v.trim().to_string()))
            .filter(|(_, v)| !v.is_empty())
            .collect();
        if request.target.is_some() {
            // A worker runs it with its own binary and model files: check
            // the model's name and every setting, not files here.
            if profile.model(&request.model).is_none() {
                return Err(Error::BadRequest(format!(
                    "profile `{}` has no model `{}`",
                    profile.name, request.model
                )));
            }
            profile.catalog().render(&settings).map_err(|e| Error::BadRequest(e.to_string()))?;
        } else {
            // Planning checks the model, every setting, and that the files exist.
            engine_bridge::plan(profile, &request.model, &settings, 0)
                .map_err(|e| Error::BadRequest(e.to_string()))?;
        }
        if let Some(target) = request.target.as_deref().filter(|t| *t != "any") {
            let known = crate::db::queue::workers(&self.db).await?;
            if !known.iter().any(|w| w.name == target && !w.revoked) {
                return Err(Error::BadRequest(format!(
                    "no worker named `{target}`: use `any` or one of {}",
                    known
                        .iter()
                        .filter(|w| !w.revoked)
                        .map(|w| format!("`{}`", w.name))
                        .collect::<Vec<_>>()
                        .join(", ")
                )));
            }
        }
        let id = trials::insert(
            &self.db,
            &NewTrial {
                profile: &profile.name,
                model: &request.model,
                settings: &settings,
                tokens_requested: self.n_predict,
                study: None,
                // A worker takes it from the queue.
                target: request.target.as_deref(),
                machine: None,
            },
        )
        .await?;
        // Published as queued before the runner may move it on: watchers
        // never see it queued after launching.
        let view = trials::get(&self.db, id).await?.ok_or(Error::NotFound)?;
        self.events.publish(crate::events::Payload::Trial(view.clone()));
        if request.target.is_none() {
            self.runner.enqueue(id);
        }
        Ok(view)
    }

    /// Adds a worker named `name`; its token. The name is checked and must be new.
    pub async fn new_worker(&self, name: &str) -> Result<String> {
        let name = name.trim();
        if name.is_empty()
            || name == "any"
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        {
            return Err(Error::BadRequest(format!(
                "a worker's name is letters, digits, `-`, `_` and `.` (and not `any`): `{name}`"
            )));
        }
        if crate::db::queue::workers(&self.db).await?.iter().any(|w| w.name == name) {
            return Err(Error::Conflict(format!("there is a worker named `{name}` already")));
        }
        Ok(crate::db::queue::create_worker(&self.db, name).await?)
    }

    /// The profiles as the browser may see them (names, not paths).
    pub fn profile_views(&self) -> Vec<ProfileView> {
        self.profiles
            .iter()
            .map(|p| ProfileView {
                name: p.name.clone(),
                engine: p.kind.name().to_string(),
                description: p.description.clone(),
                models: p.models.iter().map(|m| m.name.clone()).collect(),
                cache_types: CACHE_TYPES.iter().map(|s| s.to_string()).collect(),
                params: {
                    let catalog = p.catalog();
                    let env = catalog.env.iter().map(env_param);
                    catalog.params.iter().cloned().chain(env).map(|p| param_view(&p)).collect()
                },
            })
            .collect()
    }
}

/// An error for the user from a server error: a bad request says what was
/// wrong, anything else is logged and summed up.
fn user_error(what: &'static str) -> impl Fn(Error) -> String {
    move |e| match e {
        Error::BadRequest(m)
        | Error::Conflict(m)
        | Error::Gone(m)
        | Error::Unavailable(m)
        | Error::Unauthorized(m) => m,
        Error::NotFound => format!("{what}: not found"),
        other => {
            tracing::error!(error = ?other, "{what}");
            format!("{what}: the database could not be read or written")
        }
    }
}

/// An environment variable a study may set, as the setting `env.NAME`.
fn env_param(v: &engine_bridge::catalog::EnvVar) -> engine_bridge::catalog::Param {
    engine_bridge::catalog::Param {
        name: format!("{}{}", engine_bridge::catalog::ENV_PREFIX, v.name).into(),
        flag: v.name.into(),
        domain: v.domain.clone(),
        default: "unset",
        phase: engine_bridge::catalog::Phase::LoadTime,
        help: v.help,
    }
}

fn param_view(p: &engine_bridge::catalog::Param) -> ParamView {
    use engine_bridge::catalog::{Domain, Phase};
    let (kind, choices, min, max) = match &p.domain {
        Domain::Int { min, max } => ("int", vec![], Some(*min as f64), Some(*max as f64)),
        Domain::Float { min, max } => ("float", vec![], Some(*min), Some(*max)),
        Domain::Choice { choices, .. } => {
            ("choice", choices.iter().map(|c| c.to_string()).collect(), None, None)
        }
        Domain::Mapped { map } => {
            ("choice", map.iter().map(|(k, _)| k.to_string()).collect(), None, None)
        }
        Domain::Bool | Domain::BoolValue | Domain::Negatable { .. } => {
            ("bool", vec!["false".into(), "true".into()], None, None)
        }
        Domain::Model => ("model", vec![], None, None),
        Domain::Text | Domain::Devices => ("text", vec![], None, None),
    };
    ParamView {
        name: p.name.to_string(),
        flag: p.flag.to_string(),
        kind: kind.into(),
        choices,
        min,
        max,
        default: p.default.into(),
        phase: match p.phase {
            Phase::LoadTime => "load_time",
            Phase::RequestTime => "request_time",
        }
        .into(),
        help: p.help.into(),
    }
}

impl Service {
    async fn summary(&self, row: &StudyRow) -> Result<StudySummary> {
        let by_state = trials::state_counts(&self.db, row.id).await?;
        Ok(StudySummary {
            id: row.id,
            name: row.name.clone(),
            profile: row.definition.profile.clone(),
            model: row.definition.model.clone(),
            state: row.state.as_str().into(),
            stop_reason: row.stop_reason.clone(),
            created_ms: row.created_ms,
            finished_ms: row.finished_ms,
            trials: by_state,
        })
    }

    async fn study_view(&self, id: i64) -> Result<StudyView> {
        let row = studies::get(&self.db, id).await?.ok_or(Error::NotFound)?;
        let summary = self.summary(&row).await?;
        let baseline = self.baseline_of(&row).unwrap_or_default();
        let progress = self.progress(&row, &summary.trials).await?;
        let events = studies::events(&self.db, id)
            .await?
            .into_iter()
            .map(|e| StudyUpdate {
                study_id: id,
                state: summary.state.clone(),
                kind: e.kind,
                message: e.message,
                at_ms: e.at_ms,
            })
            .collect();
        Ok(StudyView {
            objectives: crate::study_views::measures_of(&row.definition)
                .into_iter()
                .map(|(m, g)| ObjectiveView {
                    metric: m.name(),
                    label: m.label(),
                    goal: goal_name(g).into(),
                })
                .collect(),
            baseline,
            definition_toml: toml::to_string(&row.definition).unwrap_or_default(),
            max_trials: row.definition.budget.max_trials,
            events,
            summary,
            progress,
            first_page: self.trial_page(id, &TrialQuery::default()).await?,
        })
    }

    async fn trial_page(&self, id: i64, query: &TrialQuery) -> Result<TrialPage> {
        let (rows, matching) = trials::page(&self.db, id, query).await?;
        Ok(TrialPage { rows, offset: query.offset, matching })
    }

    /// The settings of a study's baseline, where the study still checks
    /// against this server's profiles.
    fn baseline_of(&self, row: &StudyRow) -> Option<BTreeMap<String, String>> {
        crate::study_checks::check(&self.profiles, &row.definition).ok().map(|s| s.baseline)
    }

    /// `by_state`: the study's trial counts by state, as its summary has them.
    async fn progress(
        &self,
        row: &StudyRow,
        by_state: &BTreeMap<String, usize>,
    ) -> Result<StudyProgress> {
        let objectives = crate::study_views::objectives_of(&row.definition);
        let best_of = |machine: Option<String>| {
            let objectives = &objectives;
            async move {
                let mut best = Vec::new();
                for (metric, goal) in objectives {
                    let found =
                        trials::best(&self.db, row.id, *metric, *goal, machine.as_deref()).await?;
                    best.push(found.map(|(trial_id, value)| BestView { trial_id, value }));
                }
                Ok::<_, sqlx::Error>(best)
            }
        };
        // Never a best across classes of machine: each class's own.
        let machines = trials::machines(&self.db, row.id).await?;
        let (best, best_by_machine) = if machines.len() > 1 {
            let mut each = Vec::new();
            for machine in machines {
                let best = best_of(Some(machine.clone())).await?;
                each.push(MachineBest { machine, best });
            }
            (vec![None; objectives.len()], each)
        } else {
            (best_of(None).await?, vec![])
        };
        let finished = by_state
            .iter()
            .filter(|(state, _)| TrialState::parse(state).is_some_and(TrialState::is_final))
            .map(|(_, n)| *n as u64)
            .sum();
        Ok(StudyProgress {
            counted: trials::counted(&self.db, row.id).await?,
            finished,
            in_flight: trials::in_flight(&self.db, row.id, IN_FLIGHT_SHOWN).await?,
            best,
            best_by_machine,
        })
    }

    async fn detail(&self, id: i64) -> Result<TrialDetail> {
        let trial = trials::get(&self.db, id).await?.ok_or(Error::NotFound)?;
        let extras = trials::extras(&self.db, id).await?.unwrap_or_default();
        let command: serde_json::Value = extras
            .command
            .as_deref()
            .and_then(|c| serde_json::from_str(c).ok())
            .unwrap_or_default();
        let mut argv: Vec<String> =
            command["program"].as_str().map(String::from).into_iter().collect();
        argv.extend(
            command["args"]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|a| a.as_str().map(String::from)),
        );
        let env = command["env"]
            .as_object()
            .into_iter()
            .flatten()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_string()))
            .collect();
        let pretty = |text: Option<String>| {
            text.and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
                .and_then(|v| serde_json::to_string_pretty(&v).ok())
        };
        let measurement = trials::measurement(&self.db, id)
            .await?
            .and_then(|v| serde_json::to_string_pretty(&v).ok());
        let baseline = match trial.study_id {
            Some(study) => {
                studies::get(&self.db, study).await?.and_then(|row| self.baseline_of(&row))
            }
            None => None,
        };
        Ok(TrialDetail {
            argv,
            env,
            read_back: pretty(extras.props),
            samples: trials::samples(&self.db, id).await?,
            log_tail: extras
                .log_tail
                .map(|t| t.lines().map(String::from).collect())
                .unwrap_or_default(),
            measurement,
            baseline,
            trial,
        })
    }
}

fn goal_name(g: Goal) -> &'static str {
    match g {
        Goal::Max => "max",
        Goal::Min => "min",
    }
}

#[async_trait::async_trait]
impl Backend for Service {
    fn profiles(&self) -> Vec<ProfileView> {
        self.profile_views()
    }

    fn metrics(&self) -> Vec<MetricView> {
        Metric::ALL
            .iter()
            .map(|m| MetricView {
                name: m.name().into(),
                label: m.label().into(),
                goal: goal_name(m.natural_goal()).into(),
            })
            .collect()
    }

    async fn list_trials(&self) -> Result<Vec<TrialView>, String> {
        trials::list(&self.db).await.map_err(|e| user_error("listing trials")(e.into()))
    }

    async fn submit_trial(&self, request: RunRequest) -> Result<TrialView, String> {
        self.submit(request).await.map_err(user_error("storing the trial"))
    }

    async fn trial_detail(&self, id: i64) -> Result<TrialDetail, String> {
        self.detail(id).await.map_err(user_error("trial"))
    }

    async fn list_studies(&self) -> Result<Vec<StudySummary>, String> {
        let rows = studies::list(&self.db).await.map_err(|e| user_error("studies")(e.into()))?;
        let mut out = Vec::with_capacity(rows.len());
        for row in &rows {
            out.push(self.summary(row).await.map_err(user_error("studies"))?);
        }
        Ok(out)
    }

    async fn study(&self, id: i64) -> Result<StudyView, String> {
        self.study_view(id).await.map_err(user_error("study"))
    }

    async fn study_trials(&self, id: i64, query: TrialQuery) -> Result<TrialPage, String> {
        self.trial_page(id, &query).await.map_err(user_error("study trials"))
    }

    async fn study_progress(&self, id: i64) -> Result<StudyProgress, String> {
        let what = user_error("study");
        let row = studies::get(&self.db, id).await.map_err(|e| what(e.into()))?;
        let row = row.ok_or_else(|| what(Error::NotFound))?;
        let by_state = trials::state_counts(&self.db, id).await.map_err(|e| what(e.into()))?;
        self.progress(&row, &by_state).await.map_err(what)
    }

    async fn check_study(&self, text: String) -> Result<CheckView, String> {
        // One problem a line: the designer lists them.
        let def = StudyDef::from_text(&text).map_err(|e| e.0.join("\n"))?;
        crate::study_checks::preview(&self.db, &self.profiles, &self.endpoints, &def)
            .await
            .map_err(|e| user_error("checking the study")(e.into()))?
            .map_err(|e| e.0.join("\n"))
    }

    async fn create_study(&self, text: String) -> Result<i64, String> {
        let def = StudyDef::from_text(&text).map_err(|e| e.0.join("\n"))?;
        self.studies.create(&def).await.map(|(id, _)| id).map_err(user_error("creating the study"))
    }

    async fn pareto(
        &self,
        id: i64,
        metrics: Vec<String>,
        machine: Option<String>,
    ) -> Result<ParetoView, String> {
        let what = user_error("study");
        let row = studies::get(&self.db, id).await.map_err(|e| what(e.into()))?;
        let row = row.ok_or_else(|| what(Error::NotFound))?;
        let objectives = crate::study_views::measures_of(&row.definition);
        let def = &row.definition;
        let chosen: Vec<(Measure, Goal)> = if metrics.is_empty() {
            objectives
        } else {
            metrics
                .iter()
                .map(|name| {
                    let m = match Measure::parse(name) {
                        Some(Measure::Setting(s))
                            if !def.space.contains_key(&s) && !def.fixed.contains_key(&s) =>
                        {
                            return Err(format!("study {id} neither varies nor fixes `{s}`"));
                        }
                        Some(m) => m,
                        None => return Err(format!("unknown metric `{name}`")),
                    };
                    let goal = objectives
                        .iter()
                        .find(|(o, _)| *o == m)
                        .map_or(m.natural_goal(), |(_, g)| *g);
                    Ok((m, goal))
                })
                .collect::<Result<_, String>>()?
        };
        let metrics: Vec<Measure> = chosen.iter().map(|(m, _)| m.clone()).collect();
        // Never a front across classes of machine: one at a time.
        let machines = trials::machines(&self.db, id).await.map_err(|e| what(e.into()))?;
        let shown = match machine {
            Some(m) if machines.contains(&m) => Some(m),
            Some(m) => return Err(format!("no trial of study {id} ran on `{m}`")),
            None if machines.len() > 1 => machines.first().cloned(),
            None => None,
        };
        let done = trials::points(&self.db, id, &metrics, shown.as_deref())
            .await
            .map_err(|e| what(e.into()))?;
        let baseline = self.baseline_of(&row).unwrap_or_default();
        let varied: Vec<String> = row.definition.space.keys().cloned().collect();
        let mut view = crate::study_views::pareto_view(done, &chosen, &baseline, &varied);
        if machines.len() > 1 {
            view.machines = machines;
            view.machine = shown;
        }
        Ok(view)
    }

    async fn findings(&self, id: i64) -> Result<FindingsView, String> {
        let what = user_error("study");
        let written = crate::write_up::write_up(&self.db, id).await.map_err(|e| what(e.into()))?;
        let (found, markdown) = written.ok_or_else(|| what(Error::NotFound))?;
        let html = crate::markdown::to_safe_html(&markdown);
        Ok(FindingsView { markdown, html, count: found.len() })
    }

    async fn metric_points(&self, id: i64, metric: String) -> Result<Vec<MetricPoint>, String> {
        let what = user_error("study");
        studies::get(&self.db, id)
            .await
            .map_err(|e| what(e.into()))?
            .ok_or_else(|| what(Error::NotFound))?;
        let m = Metric::parse(&metric).ok_or_else(|| format!("unknown metric `{metric}`"))?;
        let points = trials::points(&self.db, id, &[Measure::Metric(m)], None)
            .await
            .map_err(|e| what(e.into()))?;
        Ok(points
            .into_iter()
            .map(|(trial_id, settings, values)| MetricPoint {
                trial_id,
                settings,
                value: values[0],
            })
            .collect())
    }

    async fn study_reports(&self, study_id: i64) -> Result<Vec<ReportSummary>, String> {
        let what = user_error("reports");
        let list =
            crate::db::reports::of_study(&self.db, study_id).await.map_err(|e| what(e.into()))?;
        Ok(list
            .into_iter()
            .map(|(id, title, version)| ReportSummary { id, title, version })
            .collect())
    }

    async fn create_report(&self, study_id: i64) -> Result<i64, String> {
        crate::report::create(self, study_id).await.map_err(user_error("study"))
    }

    async fn report(&self, id: i64, version: Option<i64>) -> Result<ReportView, String> {
        crate::report::view(self, id, version, true).await.map_err(user_error("report"))
    }

    async fn save_report(
        &self,
        id: i64,
        base: i64,
        title: String,
        notebook: Notebook,
    ) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::save(self, id, base, &title, notebook).await.map_err(&what)?;
        crate::report::view(self, id, None, true).await.map_err(what)
    }

    async fn regenerate_report(&self, id: i64, base: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::regenerate(self, id, base).await.map_err(&what)?;
        crate::report::view(self, id, None, true).await.map_err(what)
    }

    async fn restore_report(&self, id: i64, base: i64, version: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::restore(self, id, base, version).await.map_err(&what)?;
        crate::report::view(self, id, None, true).await.map_err(what)
    }

    async fn publish_report(&self, id: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::publish(self, id).await.map_err(&what)?;
        crate::report::view(self, id, None, true).await.map_err(what)
    }

    async fn revoke_link(&self, id: i64, token: String) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::db::reports::revoke(&self.db, &token).await.map_err(|e| what(e.into()))?;
        crate::report::view(self, id, None, true).await.map_err(what)
    }

    async fn write_prose(&self, id: i64, base: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::prose(self, id, base).await.map_err(&what)?;
        crate::report::view(self, id, None, true).await.map_err(what)
    }

    async fn shared_report(&self, token: String) -> Result<ReportView, String> {
        crate::report::shared(self, &token).await.map_err(user_error("shared report"))
    }

    async fn workers(&self) -> Result<Vec<WorkerView>, String> {
        let what = user_error("workers");
        let list = crate::db::queue::workers(&self.db).await.map_err(|e| what(e.into()))?;
        let now = crate::db::now_ms();
        Ok(list
            .into_iter()
            .map(|w| {
                let hardware = w.hardware.as_ref().map_or_else(String::new, |h| {
                    let bandwidth = h["bandwidth_bytes_per_s"]
                        .as_f64()
                        .map(|b| format!("; memory read {:.1} GB/s", b / 1e9))
                        .unwrap_or_default();
                    format!("{}{bandwidth}", crate::db::queue::class_of(h))
                });
                let profiles = w
                    .profiles
                    .as_ref()
                    .and_then(|p| p.as_array())
                    .into_iter()
                    .flatten()
                    .filter_map(|p| p["name"].as_str().map(String::from))
                    .collect();
                WorkerView {
                    up: !w.revoked
                        && w.last_seen_ms
                            .is_some_and(|t| now - t < crate::study_runner::WORKER_UP_MS),
                    name: w.name,
                    machine_class: w.machine_class,
                    hardware,
                    profiles,
                    last_seen_ms: w.last_seen_ms,
                    revoked: w.revoked,
                }
            })
            .collect())
    }

    async fn add_worker(&self, name: String) -> Result<String, String> {
        self.new_worker(&name).await.map_err(user_error("adding a worker"))
    }

    async fn revoke_worker(&self, name: String) -> Result<(), String> {
        let what = user_error("worker");
        match crate::db::queue::revoke_worker(&self.db, &name).await {
            Ok(true) => Ok(()),
            Ok(false) => Err(what(Error::NotFound)),
            Err(e) => Err(what(e.into())),
        }
    }

    async fn control_study(&self, id: i64, action: String) -> Result<(), String> {
        let what = user_error("study");
        match action.as_str() {
            "pause" => self.studies.pause(id).await.map_err(what),
            "resume" => self.studies.resume(id).await.map_err(what),
            "stop" => self.studies.stop(id).await.map_err(what),
            other => Err(format!("unknown action `{other}`: use pause, resume or stop")),
        }
    }
}
