//! The pages' server functions answered by the application layer
//! ([`crate::ops`]): the adapter between the app's [`Backend`] trait and
//! the operations, each error turned into what a user may read
//! ([`Error::for_user`]). Nothing is decided here.

use tunebook_app::backend::Backend;
use tunebook_views::types::{
    CheckView, FindingsView, MetricPoint, MetricView, Notebook, ParetoView, ProfileView,
    ReportSummary, ReportView, RunRequest, StudyProgress, StudySummary, StudyView, TrialDetail,
    TrialPage, TrialQuery, TrialView, WorkerView,
};

use crate::error::Error;
use crate::ops;
use crate::service::Service;

type Answer<T> = Result<T, String>;

#[async_trait::async_trait]
impl Backend for Service {
    fn profiles(&self) -> Vec<ProfileView> {
        ops::catalog::profiles(&self.profiles)
    }

    fn metrics(&self) -> Vec<MetricView> {
        ops::catalog::metrics()
    }

    async fn list_trials(&self) -> Answer<Vec<TrialView>> {
        ops::trials::list(&self.db).await.map_err(Error::for_user)
    }

    async fn submit_trial(&self, request: RunRequest) -> Answer<TrialView> {
        ops::trials::submit(self, request).await.map_err(Error::for_user)
    }

    async fn trial_detail(&self, id: i64) -> Answer<TrialDetail> {
        ops::trials::detail(self, id).await.map_err(Error::for_user)
    }

    async fn list_studies(&self) -> Answer<Vec<StudySummary>> {
        ops::studies::list(&self.db).await.map_err(Error::for_user)
    }

    async fn study(&self, id: i64) -> Answer<StudyView> {
        ops::studies::view(self, id).await.map_err(Error::for_user)
    }

    async fn study_trials(&self, id: i64, query: TrialQuery) -> Answer<TrialPage> {
        ops::studies::trial_page(&self.db, id, &query).await.map_err(Error::for_user)
    }

    async fn study_progress(&self, id: i64) -> Answer<StudyProgress> {
        ops::studies::study_progress(&self.db, id).await.map_err(Error::for_user)
    }

    async fn check_study(&self, text: String) -> Answer<CheckView> {
        let def = ops::studies::parse(&text).map_err(Error::for_user)?;
        ops::studies::check(self, &def).await.map_err(Error::for_user)
    }

    async fn create_study(&self, text: String) -> Answer<i64> {
        let def = ops::studies::parse(&text).map_err(Error::for_user)?;
        ops::studies::create(self, &def).await.map_err(Error::for_user)
    }

    async fn pareto(
        &self,
        id: i64,
        metrics: Vec<String>,
        machine: Option<String>,
    ) -> Answer<ParetoView> {
        ops::pareto::front(self, id, &metrics, machine.as_deref()).await.map_err(Error::for_user)
    }

    async fn findings(&self, id: i64) -> Answer<FindingsView> {
        ops::studies::findings(&self.db, id).await.map(|(_, view)| view).map_err(Error::for_user)
    }

    async fn metric_points(&self, id: i64, metric: String) -> Answer<Vec<MetricPoint>> {
        ops::studies::metric_points(&self.db, id, &metric).await.map_err(Error::for_user)
    }

    async fn study_reports(&self, study_id: i64) -> Answer<Vec<ReportSummary>> {
        ops::reports::list(&self.reports(), study_id).await.map_err(Error::for_user)
    }

    async fn create_report(&self, study_id: i64) -> Answer<i64> {
        let created = ops::reports::create(&self.reports(), study_id).await;
        created.map(|view| view.id).map_err(Error::for_user)
    }

    async fn report(&self, id: i64, version: Option<i64>) -> Answer<ReportView> {
        ops::reports::open(&self.reports(), id, version).await.map_err(Error::for_user)
    }

    async fn save_report(
        &self,
        id: i64,
        base: i64,
        title: String,
        notebook: Notebook,
    ) -> Answer<ReportView> {
        let saved = ops::reports::save(&self.reports(), id, base, &title, notebook).await;
        saved.map_err(Error::for_user)
    }

    async fn regenerate_report(&self, id: i64, base: i64) -> Answer<ReportView> {
        ops::reports::regenerate(&self.reports(), id, base).await.map_err(Error::for_user)
    }

    async fn restore_report(&self, id: i64, base: i64, version: i64) -> Answer<ReportView> {
        ops::reports::restore(&self.reports(), id, base, version).await.map_err(Error::for_user)
    }

    async fn publish_report(&self, id: i64) -> Answer<ReportView> {
        let published = ops::reports::publish(&self.reports(), id).await;
        published.map(|(_, view)| view).map_err(Error::for_user)
    }

    async fn revoke_link(&self, id: i64, token: String) -> Answer<ReportView> {
        let ctx = self.reports();
        ops::reports::revoke_link(&ctx, &token).await.map_err(Error::for_user)?;
        ops::reports::open(&ctx, id, None).await.map_err(Error::for_user)
    }

    async fn write_prose(&self, id: i64, base: i64) -> Answer<ReportView> {
        ops::reports::prose(&self.reports(), id, base).await.map_err(Error::for_user)
    }

    async fn shared_report(&self, token: String) -> Answer<ReportView> {
        ops::reports::shared(&self.reports(), &token).await.map_err(Error::for_user)
    }

    async fn workers(&self) -> Answer<Vec<WorkerView>> {
        ops::workers::list(&self.db).await.map_err(Error::for_user)
    }

    async fn add_worker(&self, name: String) -> Answer<String> {
        ops::workers::add(&self.db, &name).await.map_err(Error::for_user)
    }

    async fn revoke_worker(&self, name: String) -> Answer<()> {
        ops::workers::revoke(&self.db, &name).await.map_err(Error::for_user)
    }

    async fn control_study(&self, id: i64, action: String) -> Answer<()> {
        ops::studies::control(self, id, &action).await.map_err(Error::for_user)
    }
}
