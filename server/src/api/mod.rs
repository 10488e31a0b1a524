//! The JSON API: every route with its handler, and the same list described
//! as OpenAPI 3.1 from the handlers' own types (aide reads each handler's
//! extractors and answer; schemars gives the types' schemas), served at
//! `/api/openapi.json`. A route is added here once and is described by
//! being added. The two event streams (`/api/events`,
//! `/api/trials/{id}/log`) are routed beside it, undescribed: OpenAPI has
//! no words for a stream of server-sent events.

mod answers;

use aide::axum::ApiRouter;
use aide::axum::routing::{delete_with, get_with, post_with};
use aide::openapi::{Info, OpenApi, SecurityScheme};
use axum::Json;

use self::answers::{created, file, no_content};
use crate::AppState;
use crate::routes::{reports, studies, trials, workers};

/// The worker API's security requirement: its token as a bearer.
const WORKER: &str = "worker";

/// Every described route of the JSON API.
fn routes() -> ApiRouter<AppState> {
    ApiRouter::new()
        .api_route(
            "/api/profiles",
            get_with(trials::profiles, |op| {
                op.tag("trials").summary("The engine profiles: each one's models and settings")
            }),
        )
        .api_route(
            "/api/trials",
            get_with(trials::list, |op| op.tag("trials").summary("Every trial")).post_with(
                trials::create,
                |op| {
                    created::<tunebook_views::types::TrialView>(
                        op.tag("trials").summary("Queues one configuration"),
                    )
                },
            ),
        )
        .api_route(
            "/api/trials/{id}",
            get_with(trials::get, |op| op.tag("trials").summary("A trial")),
        )
        .api_route(
            "/api/trials/{id}/samples",
            get_with(trials::samples, |op| op.tag("trials").summary("A trial's samples over time")),
        )
        .api_route(
            "/api/trials/{id}/measurement",
            get_with(trials::measurement, |op| {
                op.tag("trials").summary("Everything a trial's probes measured")
            }),
        )
        .api_route(
            "/api/trials/{id}/handoff/{format}",
            get_with(trials::handoff, |op| {
                file(
                    op.tag("trials"),
                    &["text/plain"],
                    "The configuration as a llama-swap entry, a compose service or a systemd unit",
                )
                .summary("A trial's configuration, to run elsewhere")
            }),
        )
        .api_route(
            "/api/studies",
            get_with(studies::list, |op| op.tag("studies").summary("Every study")).post_with(
                studies::create,
                |op| {
                    created::<crate::db::studies::StudyRow>(
                        op.tag("studies").summary("Checks a study, stores it and starts it"),
                    )
                },
            ),
        )
        .api_route(
            "/api/studies/check",
            post_with(studies::check, |op| {
                op.tag("studies").summary("Checks a study without storing it")
            }),
        )
        .api_route(
            "/api/studies/{id}",
            get_with(studies::get, |op| {
                op.tag("studies").summary("A study, its events and trial counts")
            }),
        )
        .api_route(
            "/api/studies/{id}/trials",
            get_with(studies::trials, |op| op.tag("studies").summary("A study's trials")),
        )
        .api_route(
            "/api/studies/{id}/trials.csv",
            get_with(studies::trials_csv, |op| {
                file(
                    op.tag("studies"),
                    &["text/csv"],
                    "A row per trial, a column per setting and metric",
                )
                .summary("A study's trials as CSV")
            }),
        )
        .api_route(
            "/api/studies/{id}/optuna-journal",
            get_with(studies::optuna_journal, |op| {
                file(
                    op.tag("studies"),
                    &["text/plain"],
                    "A journal that Optuna's JournalStorage loads",
                )
                .summary("A study as an Optuna journal")
            }),
        )
        .api_route(
            "/api/studies/{id}/pareto",
            get_with(studies::pareto, |op| op.tag("studies").summary("A study's Pareto front")),
        )
        .api_route(
            "/api/studies/{id}/pareto/figure",
            get_with(studies::pareto_figure, |op| {
                op.tag("studies").summary("The study page's Pareto plot, as a figure")
            }),
        )
        .api_route(
            "/api/studies/{id}/findings",
            get_with(studies::findings, |op| {
                op.tag("studies").summary("What a study's trials show, and what they leave open")
            }),
        )
        .api_route(
            "/api/studies/{id}/settle",
            post_with(studies::settle, |op| {
                op.tag("studies")
                    .summary("Queues the runs that settle a finding left open")
                    .response::<202, Json<tunebook_views::types::Settling>>()
            }),
        )
        .api_route(
            "/api/studies/{id}/reports",
            get_with(reports::list, |op| op.tag("reports").summary("A study's reports")).post_with(
                reports::create,
                |op| {
                    created::<tunebook_views::types::ReportView>(
                        op.tag("reports").summary("Drafts a report"),
                    )
                },
            ),
        )
        .api_route(
            "/api/studies/{id}/{action}",
            post_with(studies::control, |op| {
                op.tag("studies").summary("Pauses, resumes or stops a study")
            }),
        )
        .api_route(
            "/api/reports/{id}",
            get_with(reports::get, |op| op.tag("reports").summary("A report, at a version"))
                .put_with(reports::save, |op| {
                    op.tag("reports")
                        .summary("Saves a report's edits over the version they began from")
                }),
        )
        .api_route(
            "/api/reports/{id}/regenerate",
            post_with(reports::regenerate, |op| {
                op.tag("reports").summary("Writes a report's generated cells anew")
            }),
        )
        .api_route(
            "/api/reports/{id}/shares",
            post_with(reports::publish, |op| {
                created::<reports::Published>(op.tag("reports").summary("Makes a read-only link"))
            }),
        )
        .api_route(
            "/api/reports/{id}/prose",
            post_with(reports::prose, |op| {
                op.tag("reports").summary("Asks the configured writer for the report's prose")
            }),
        )
        .api_route(
            "/api/reports/{id}/{file}",
            get_with(reports::export_own, |op| {
                file(
                    op.tag("reports"),
                    &["text/markdown", "text/html"],
                    "The report as one markdown or HTML file",
                )
                .summary("Exports a report")
            }),
        )
        .api_route(
            "/api/shares/{token}",
            delete_with(reports::revoke, |op| no_content(op.tag("reports").summary("Ends a link"))),
        )
        .api_route(
            "/api/shared/{token}",
            get_with(reports::shared, |op| op.tag("reports").summary("A shared report")),
        )
        .api_route(
            "/api/shared/{token}/{file}",
            get_with(reports::export_shared, |op| {
                file(
                    op.tag("reports"),
                    &["text/markdown", "text/html"],
                    "The report as one markdown or HTML file",
                )
                .summary("Exports a shared report")
            }),
        )
        .api_route(
            "/api/workers",
            get_with(workers::list, |op| op.tag("workers").summary("The worker machines"))
                .post_with(workers::create, |op| {
                    created::<workers::WorkerToken>(
                        op.tag("workers").summary("Adds a worker and gives its token, once"),
                    )
                }),
        )
        .api_route(
            "/api/workers/{name}",
            delete_with(workers::revoke, |op| {
                no_content(op.tag("workers").summary("Revokes a worker's token"))
            }),
        )
        .api_route(
            "/api/worker/register",
            post_with(workers::register, |op| {
                op.tag("worker protocol")
                    .summary("A worker says what it has")
                    .security_requirement(WORKER)
            }),
        )
        .api_route(
            "/api/worker/claim",
            post_with(workers::claim, |op| {
                op.tag("worker protocol")
                    .summary("A worker asks for a trial (waits a while for one)")
                    .security_requirement(WORKER)
            }),
        )
        .api_route(
            "/api/worker/trials/{id}/heartbeat",
            post_with(workers::heartbeat, |op| {
                no_content(op.tag("worker protocol").summary("A worker renews its lease"))
                    .security_requirement(WORKER)
            }),
        )
        .api_route(
            "/api/worker/trials/{id}/result",
            post_with(workers::result, |op| {
                no_content(op.tag("worker protocol").summary("A worker sends what it measured"))
                    .security_requirement(WORKER)
            }),
        )
}

/// The described routes, and their description.
pub fn described() -> (axum::Router<AppState>, OpenApi) {
    aide::generate::on_error(|error| {
        // The rejections' answers ([`answers`]) are described on purpose in
        // place of those aide infers from the extractors; that it kept ours
        // is no error, and a warning for each at every start hid real ones.
        if !matches!(error, aide::Error::InferredResponseConflict(_)) {
            tracing::warn!(%error, "the API's description");
        }
    });
    aide::generate::extract_schemas(true);
    let mut api = OpenApi {
        info: Info {
            title: "Tunebook".into(),
            version: env!("CARGO_PKG_VERSION").into(),
            description: Some(
                "Tunebook's JSON API: what the pages do, as JSON. With a password set, every \
                 route but `/api/shared/…` wants the session cookie the login page sets; the \
                 worker protocol wants a worker's token instead. Two more routes stream \
                 server-sent events: `/api/events` and `/api/trials/{id}/log`."
                    .into(),
            ),
            ..Info::default()
        },
        ..OpenApi::default()
    };
    let router = routes().finish_api_with(&mut api, |doc| {
        doc.security_scheme(
            WORKER,
            SecurityScheme::Http {
                scheme: "bearer".into(),
                bearer_format: None,
                description: Some("A worker's token, from `POST /api/workers`".into()),
                extensions: Default::default(),
            },
        )
    });
    (router, api)
}

/// `GET /api/openapi.json`, answered from the description written once.
pub fn serve(api: &OpenApi) -> axum::routing::MethodRouter<AppState> {
    let body = axum::body::Bytes::from(serde_json::to_vec(api).expect("a description is JSON"));
    axum::routing::get(move || {
        let body = body.clone();
        async move { ([(axum::http::header::CONTENT_TYPE, "application/json")], body) }
    })
}
