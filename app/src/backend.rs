//! What the server functions need from the server, as a trait so this crate
//! does not depend on the server's database or runner. Errors are messages
//! for the user, already worded.

use std::sync::Arc;

use crate::types::{
    CheckView, FindingsView, MetricPoint, MetricView, Notebook, ParetoView, ProfileView,
    ReportSummary, ReportView, RunRequest, StudyProgress, StudySummary, StudyView, TrialDetail,
    TrialPage, TrialQuery, TrialView, WorkerView,
};

/// The server side of the pages; provided as context to server functions.
#[async_trait::async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The engine profiles this server may run.
    fn profiles(&self) -> Vec<ProfileView>;
    /// The metrics a study can optimize or bound.
    fn metrics(&self) -> Vec<MetricView>;
    /// Every trial, newest first.
    async fn list_trials(&self) -> Result<Vec<TrialView>, String>;
    /// Checks and queues one configuration; the error says what was wrong.
    async fn submit_trial(&self, request: RunRequest) -> Result<TrialView, String>;
    /// One trial with its command, read-back, samples and log.
    async fn trial_detail(&self, id: i64) -> Result<TrialDetail, String>;
    /// Every study, newest first.
    async fn list_studies(&self) -> Result<Vec<StudySummary>, String>;
    async fn study(&self, id: i64) -> Result<StudyView, String>;
    /// One page of a study's trials.
    async fn study_trials(&self, id: i64, query: TrialQuery) -> Result<TrialPage, String>;
    /// Where a study stands: budget spent, trial in flight, best so far.
    async fn study_progress(&self, id: i64) -> Result<StudyProgress, String>;
    /// Checks a study written as JSON or TOML; the error lists every problem.
    async fn check_study(&self, text: String) -> Result<CheckView, String>;
    /// Checks and starts a study; returns its id.
    async fn create_study(&self, text: String) -> Result<i64, String>;
    /// Done trials on `metrics` (the objectives when empty), of one class
    /// of machine where the study ran on several (`machine`, or the first).
    async fn pareto(
        &self,
        id: i64,
        metrics: Vec<String>,
        machine: Option<String>,
    ) -> Result<ParetoView, String>;
    /// The workers this server knows, oldest first.
    async fn workers(&self) -> Result<Vec<WorkerView>, String>;
    /// Adds a worker named `name`; its token, which is shown this once.
    async fn add_worker(&self, name: String) -> Result<String, String>;
    /// Revokes a worker's token: it can take no more trials.
    async fn revoke_worker(&self, name: String) -> Result<(), String>;
    /// `pause`, `resume` or `stop`.
    async fn control_study(&self, id: i64, action: String) -> Result<(), String>;
    /// What the study's trials show (see the findings engine).
    async fn findings(&self, id: i64) -> Result<FindingsView, String>;
    /// The study's done trials with their settings and one metric.
    async fn metric_points(&self, id: i64, metric: String) -> Result<Vec<MetricPoint>, String>;
    /// The study's reports.
    async fn study_reports(&self, study_id: i64) -> Result<Vec<ReportSummary>, String>;
    /// Writes a new report from the study's findings; its id.
    async fn create_report(&self, study_id: i64) -> Result<i64, String>;
    /// A report at a version (the newest when `None`), for its owner.
    async fn report(&self, id: i64, version: Option<i64>) -> Result<ReportView, String>;
    /// Saves a new version made from version `base`.
    async fn save_report(
        &self,
        id: i64,
        base: i64,
        title: String,
        notebook: Notebook,
    ) -> Result<ReportView, String>;
    /// Rewrites the cells written from the findings, keeping the user's.
    async fn regenerate_report(&self, id: i64, base: i64) -> Result<ReportView, String>;
    /// Makes an earlier version the newest again.
    async fn restore_report(&self, id: i64, base: i64, version: i64) -> Result<ReportView, String>;
    /// A new read-only link to the newest version.
    async fn publish_report(&self, id: i64) -> Result<ReportView, String>;
    /// Withdraws a link.
    async fn revoke_link(&self, id: i64, token: String) -> Result<ReportView, String>;
    /// Adds the findings rewritten as prose by the server's writer model.
    async fn write_prose(&self, id: i64, base: i64) -> Result<ReportView, String>;
    /// What a read-only link shows.
    async fn shared_report(&self, token: String) -> Result<ReportView, String>;
}

/// The form in which the backend is provided as context.
pub type SharedBackend = Arc<dyn Backend>;
