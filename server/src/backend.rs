//! The app's server functions answered from the [`Service`]: the adapter
//! between the pages' [`Backend`] trait and the server's operations, with
//! errors turned into what a user may read.

use tunebook_app::backend::Backend;
use tunebook_app::types::{
    CheckView, FindingsView, MetricPoint, MetricView, Notebook, ParetoView, ProfileView,
    ReportSummary, ReportView, RunRequest, StudyProgress, StudySummary, StudyView, TrialDetail,
    TrialPage, TrialQuery, TrialView, WorkerView,
};
use tunebook_study::{Goal, Measure, Metric, StudyDef};

use crate::db::studies::{self};
use crate::db::trials::{self};
use crate::error::{Error, Result};

use crate::service::{Service, goal_name};

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
        crate::report::create(&self.reports(), study_id).await.map_err(user_error("study"))
    }

    async fn report(&self, id: i64, version: Option<i64>) -> Result<ReportView, String> {
        crate::report::view(&self.reports(), id, version, true).await.map_err(user_error("report"))
    }

    async fn save_report(
        &self,
        id: i64,
        base: i64,
        title: String,
        notebook: Notebook,
    ) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::save(&self.reports(), id, base, &title, notebook).await.map_err(&what)?;
        crate::report::view(&self.reports(), id, None, true).await.map_err(what)
    }

    async fn regenerate_report(&self, id: i64, base: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::regenerate(&self.reports(), id, base).await.map_err(&what)?;
        crate::report::view(&self.reports(), id, None, true).await.map_err(what)
    }

    async fn restore_report(&self, id: i64, base: i64, version: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::restore(&self.reports(), id, base, version).await.map_err(&what)?;
        crate::report::view(&self.reports(), id, None, true).await.map_err(what)
    }

    async fn publish_report(&self, id: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::publish(&self.reports(), id).await.map_err(&what)?;
        crate::report::view(&self.reports(), id, None, true).await.map_err(what)
    }

    async fn revoke_link(&self, id: i64, token: String) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::db::reports::revoke(&self.db, &token).await.map_err(|e| what(e.into()))?;
        crate::report::view(&self.reports(), id, None, true).await.map_err(what)
    }

    async fn write_prose(&self, id: i64, base: i64) -> Result<ReportView, String> {
        let what = user_error("report");
        crate::report::prose(&self.reports(), id, base).await.map_err(&what)?;
        crate::report::view(&self.reports(), id, None, true).await.map_err(what)
    }

    async fn shared_report(&self, token: String) -> Result<ReportView, String> {
        crate::report::shared(&self.reports(), &token).await.map_err(user_error("shared report"))
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
                    format!("{}{bandwidth}", crate::machine_class::of(h))
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
