//! Tunebook's server: the web app and the JSON API mounted on the
//! application layer (`tunebook-core`, whose modules are re-exported here),
//! the remote worker and the commands (`cli`). `main.rs` runs them;
//! everything else is here so tests can start a server on `127.0.0.1:0`.

#![recursion_limit = "512"]

pub mod api;
pub mod api_error;
pub mod cli;
pub mod exit_status;
pub mod login;
pub mod mcp;
pub mod metrics;
pub mod plan_cli;
pub mod probe_cli;
pub mod room;
pub mod routes;
pub mod same_origin;
pub mod study_cli;
pub mod worker;

use std::future::Future;
use std::sync::Arc;

use axum::Router;
use axum::extract::FromRef;
use axum::http::{HeaderValue, header};
use axum::routing::{get, post};
use leptos::prelude::*;
use leptos_axum::{LeptosRoutes, generate_route_list};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tower_http::compression::CompressionLayer;
use tower_http::services::ServeDir;
use tower_http::set_header::SetResponseHeaderLayer;
use tunebook_app::{App, OUTPUT_NAME, shell};

pub use tunebook_core::{
    Error, Result, Settings, announce, checked, data_lock, db, dominance, error, events, import,
    machine, machine_class, markdown, new_token, ops, places, prepare, provenance, recipe, remote,
    report, service, settings, shutdown, study_checks, study_facts, study_runner, telemetry, trial,
    trial_changes, trial_runner, trials_csv, views, write_up,
};

use crate::service::Service;
use crate::study_runner::Studies;
use crate::trial_runner::Runner;

/// Shared by every request.
#[derive(Clone)]
pub struct AppState {
    pub leptos_options: LeptosOptions,
    pub service: Arc<Service>,
    /// Cancelled when the server stops: ends event streams and the runner.
    pub shutdown: CancellationToken,
    /// The login every page wants, when a password is set.
    pub login: Option<Arc<login::Login>>,
    /// What `/metrics` reports.
    pub metrics: Arc<metrics::Metrics>,
}

impl FromRef<AppState> for LeptosOptions {
    fn from_ref(state: &AppState) -> Self {
        state.leptos_options.clone()
    }
}

/// Serves Tunebook on `listener` until `shutdown` resolves, then stops the
/// runner and any engine it has running.
pub async fn launch(
    settings: Settings,
    listener: TcpListener,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<()> {
    let token = CancellationToken::new();
    let ctx = prepare(&settings, token.clone()).await?;
    let (events, db, profiles) = (ctx.events.clone(), ctx.db.clone(), ctx.profiles.clone());
    let logs_dir = ctx.logs_dir.clone();
    let endpoints = ctx.endpoints.clone();
    let bandwidth = ctx.bandwidth;
    let (heavy, checked) = (ctx.heavy.clone(), ctx.checked.clone());
    let (telemetry, engines_dir) = (ctx.telemetry.clone(), ctx.engines_dir.clone());
    let (runner, worker) = Runner::start(ctx.clone()).await?;
    let studies = Studies::new(ctx);
    studies.resume_all().await?;
    let state_studies = studies.clone();
    let service = Arc::new(Service {
        db,
        profiles,
        runner,
        studies,
        endpoints,
        events,
        n_predict: settings.probes.speed.as_ref().map(|s| s.n_predict),
        logs_dir,
        data_dir: settings.data_dir.clone(),
        site_root: settings.site_root.clone(),
        bandwidth,
        writer: settings.writer.clone(),
        probes: settings.probes.clone(),
        lease: settings.lease,
        claim_wait: settings.claim_wait,
        heavy,
        checked,
        telemetry,
        engines_dir,
    });
    // Trials whose worker stopped renewing its lease go back to the queue.
    tokio::spawn(remote::sweep(service.clone(), token.clone()));

    let addr = listener.local_addr()?;
    let bundle = settings.site_root.join("pkg").join(format!("{OUTPUT_NAME}.js"));
    if !bundle.is_file() {
        tracing::warn!(path = %bundle.display(), "browser bundle missing: pages will not be interactive (run scripts/build-site.sh)");
    }
    let leptos_options = LeptosOptions::builder()
        .output_name(OUTPUT_NAME)
        .site_root(settings.site_root.display().to_string())
        .site_pkg_dir("pkg")
        .site_addr(addr)
        .build();
    let login = settings.password.as_deref().map(|p| Arc::new(login::Login::new(p)));
    let metrics = metrics::Metrics::new(&service.telemetry);
    let state = AppState { leptos_options, service, shutdown: token.clone(), login, metrics };
    tracing::info!("Tunebook listening on http://{addr}");
    let stop = token.clone();
    let allowed_hosts = same_origin::AllowedHosts(Arc::new(settings.allowed_hosts.clone()));
    let app =
        router(state, allowed_hosts).into_make_service_with_connect_info::<std::net::SocketAddr>();
    axum::serve(listener, app)
        .with_graceful_shutdown(async move {
            shutdown.await;
            stop.cancel();
        })
        .await?;
    token.cancel();
    let _ = worker.await;
    state_studies.wait().await;
    Ok(())
}

/// The pages' Content-Security-Policy: everything from this server alone
/// (an image or a request elsewhere is refused even if some text got past
/// the sanitizer), no plugins, and no framing by another site. Inline
/// scripts and styles stay allowed: the app's hydration starts from an
/// inline script, and plotly.js styles inline; WebAssembly needs its own
/// word.
const POLICY: &str = "default-src 'self'; script-src 'self' 'unsafe-inline' 'wasm-unsafe-eval'; \
    style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; font-src 'self' data:; \
    connect-src 'self'; object-src 'none'; base-uri 'self'; form-action 'self'; \
    frame-ancestors 'none'";

fn router(state: AppState, allowed_hosts: same_origin::AllowedHosts) -> Router {
    // The pages' server functions call the application layer with it.
    let service = state.service.clone();
    let options = state.leptos_options.clone();
    let with_login = state.login.is_some();
    // The browser bundle: the gzipped copy `scripts/build-site.sh` writes
    // beside each file is sent to browsers that take it (plotly.js is
    // 4.8 MB, 1.4 gzipped), without compressing on every request.
    let bundle = ServeDir::new(state.service.site_root.join("pkg")).precompressed_gzip();
    // The JSON API, and its description.
    let (api, description) = api::described();
    Router::new()
        .route("/api/events", get(routes::events::stream))
        .route("/api/trials/{id}/log", get(routes::log::follow))
        .merge(api)
        .route("/api/openapi.json", api::serve(&description))
        .leptos_routes_with_context(
            &state,
            generate_route_list(App),
            move || {
                provide_context(service.clone());
                if with_login {
                    provide_context(tunebook_app::LoginRequired);
                }
            },
            move || shell(options.clone()),
        )
        .route("/login", get(login::form).post(login::submit))
        .route("/logout", post(login::logout))
        .route("/metrics", get(metrics::scrape))
        // Every routed request timed, by its route's pattern.
        .route_layer(axum::middleware::from_fn_with_state(state.metrics.clone(), metrics::track))
        .nest_service("/pkg", bundle)
        .fallback(leptos_axum::file_and_error_handler_with_context::<AppState, _>(
            move || {
                if with_login {
                    provide_context(tunebook_app::LoginRequired);
                }
            },
            shell,
        ))
        // Pages and API answers gzipped for clients that take it (never the
        // live feeds: server-sent events are left as they are).
        .layer(CompressionLayer::new())
        // What a page may load and who may frame it (see `POLICY`).
        .layer(SetResponseHeaderLayer::if_not_present(
            header::CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(POLICY),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_FRAME_OPTIONS,
            HeaderValue::from_static("DENY"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::X_CONTENT_TYPE_OPTIONS,
            HeaderValue::from_static("nosniff"),
        ))
        .layer(SetResponseHeaderLayer::if_not_present(
            header::REFERRER_POLICY,
            HeaderValue::from_static("same-origin"),
        ))
        // Writes wait for room on the disk (after the login: no one else
        // learns how full it is).
        .layer(axum::middleware::from_fn_with_state(state.clone(), room::guard))
        .layer(axum::middleware::from_fn_with_state(state.clone(), login::require))
        // Outermost: nothing from another site reaches the login or a handler.
        .layer(axum::middleware::from_fn_with_state(allowed_hosts, same_origin::guard))
        .with_state(state)
}
