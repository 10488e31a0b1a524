//! Prometheus's `/metrics`, in the OpenMetrics text format
//! (prometheus-client's registry and encoder): trials and studies by state,
//! the queue, engines running (read when scraped, see
//! `tunebook_core::ops::status`), the time between a study's trials
//! (counted by the runner, see `tunebook_core::telemetry`), and every
//! request's latency by method, route (the router's pattern, never the
//! path a client sent: its values are bounded) and status.

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::AppState;
use crate::api_error::Result;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    method: &'static str,
    route: String,
    status: u16,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabel {
    state: &'static str,
}

/// The methods a request is labelled by; any other is `other`.
const METHODS: [&str; 7] = ["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"];

/// The server's metrics: registered once, set or observed as they change.
pub struct Metrics {
    registry: Registry,
    requests: Family<RequestLabels, Histogram>,
    trials: Family<StateLabel, Gauge>,
    studies: Family<StateLabel, Gauge>,
    queue: Gauge,
    studies_running: Gauge,
    engines: Gauge,
}

impl Metrics {
    pub fn new(telemetry: &tunebook_core::telemetry::Telemetry) -> Arc<Self> {
        let mut registry = Registry::with_prefix("tunebook");
        let requests = Family::<RequestLabels, Histogram>::new_with_constructor(|| {
            // 0.5 ms to about 16 s, doubling.
            Histogram::new(exponential_buckets(0.0005, 2.0, 16))
        });
        registry.register(
            "http_request_duration_seconds",
            "Time to answer a request, by method, route and status",
            requests.clone(),
        );
        let trials = Family::<StateLabel, Gauge>::default();
        registry.register("trials", "Trials by state", trials.clone());
        let queue = Gauge::default();
        registry.register("queue_length", "Trials queued, not yet started", queue.clone());
        let studies = Family::<StateLabel, Gauge>::default();
        registry.register("studies", "Studies by state", studies.clone());
        let studies_running = Gauge::default();
        registry.register("studies_running", "Studies running", studies_running.clone());
        let engines = Gauge::default();
        registry.register(
            "engines_running",
            "Engines this server started that are running",
            engines.clone(),
        );
        registry.register(
            "trial_gap_seconds",
            "Time from a study trial's end to the next one's start",
            telemetry.trial_gap.clone(),
        );
        Arc::new(Self { registry, requests, trials, studies, queue, studies_running, engines })
    }
}

/// Times every request that reached a route.
pub async fn track(State(metrics): State<Arc<Metrics>>, request: Request, next: Next) -> Response {
    let start = Instant::now();
    // HTTP's own methods by name, any other as one: a client cannot add
    // labels by making methods up.
    let method = METHODS.into_iter().find(|m| *m == request.method().as_str()).unwrap_or("other");
    // Unrouted requests share one label: a client cannot add labels.
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched".to_string(), |m| m.as_str().to_string());
    let response = next.run(request).await;
    let labels = RequestLabels { method, route, status: response.status().as_u16() };
    metrics.requests.get_or_create(&labels).observe(start.elapsed().as_secs_f64());
    response
}

/// `GET /metrics`.
pub async fn scrape(State(state): State<AppState>) -> Result<Response> {
    let status = tunebook_core::ops::status::status(&state.service).await?;
    let m = &state.metrics;
    for (s, n) in &status.trials {
        m.trials.get_or_create(&StateLabel { state: s.as_str() }).set(*n);
        if *s == tunebook_core::db::trials::State::Queued {
            m.queue.set(*n);
        }
    }
    for (s, n) in &status.studies {
        m.studies.get_or_create(&StateLabel { state: s.as_str() }).set(*n);
        if *s == tunebook_core::db::studies::StudyState::Running {
            m.studies_running.set(*n);
        }
    }
    m.engines.set(status.engines as i64);
    let mut text = String::new();
    if encode(&mut text, &m.registry).is_err() {
        return Ok(StatusCode::INTERNAL_SERVER_ERROR.into_response());
    }
    let kind = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    Ok(([(header::CONTENT_TYPE, HeaderValue::from_static(kind))], text).into_response())
}
