//! The server's side of the pages and the JSON API: profiles, trials,
//! studies' views, and submitting a configuration to the runner. The JSON
//! routes call it directly, the pages through [`crate::backend`].

use std::collections::BTreeMap;
use std::sync::Arc;

use engine_bridge::Profile;
use engine_bridge::catalog::CACHE_TYPES;
use tunebook_app::types::{
    BestView, MachineBest, ObjectiveView, ParamView, ProfileView, RunRequest, StudyProgress,
    StudySummary, StudyUpdate, StudyView, TrialDetail, TrialPage, TrialQuery, TrialState,
    TrialView,
};
use tunebook_study::Goal;

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
        let view = crate::announce::trial(&self.db, &self.events, id).await?;
        let view = view.ok_or(Error::NotFound)?;
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
    pub(crate) async fn summary(&self, row: &StudyRow) -> Result<StudySummary> {
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

    pub(crate) async fn study_view(&self, id: i64) -> Result<StudyView> {
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

    pub(crate) async fn trial_page(&self, id: i64, query: &TrialQuery) -> Result<TrialPage> {
        let (rows, matching) = trials::page(&self.db, id, query).await?;
        Ok(TrialPage { rows, offset: query.offset, matching })
    }

    /// The settings of a study's baseline, where the study still checks
    /// against this server's profiles.
    pub(crate) fn baseline_of(&self, row: &StudyRow) -> Option<BTreeMap<String, String>> {
        crate::study_checks::check(&self.profiles, &row.definition).ok().map(|s| s.baseline)
    }

    /// `by_state`: the study's trial counts by state, as its summary has them.
    pub(crate) async fn progress(
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

    pub(crate) async fn detail(&self, id: i64) -> Result<TrialDetail> {
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

impl Service {
    /// What reports need of the server.
    pub fn reports(&self) -> crate::report::Reports {
        crate::report::Reports {
            db: self.db.clone(),
            profiles: self.profiles.clone(),
            data_dir: self.data_dir.clone(),
            bandwidth: self.bandwidth,
            writer: self.writer.clone(),
        }
    }
}

/// A goal as study files write it.
pub(crate) fn goal_name(g: Goal) -> &'static str {
    match g {
        Goal::Max => "max",
        Goal::Min => "min",
    }
}
