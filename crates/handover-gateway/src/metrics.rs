//! `/metrics` (Prometheus text), `/healthz`, and per-request counters.
//! The router and write gate record through the `metrics` facade; the
//! gateway installs the Prometheus recorder once per process.

use std::collections::HashMap;
use std::sync::{LazyLock, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};

use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics::{Counter, Histogram};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tracing::Instrument;

use crate::api_error::ApiError;
use crate::state::GatewayState;

/// The process-wide Prometheus handle, installing the recorder on first
/// use; `None` if another global recorder was installed first.
pub(crate) fn install() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            // Fixed buckets, not the exporter's default summaries: bucket
            // counts add up across replicas behind a load balancer (quantiles
            // of a summary cannot be combined), and their memory is a fixed
            // array per label set where a summary's sketches grow with the
            // latency range and are rebuilt every rolling window.
            // (`set_buckets` refuses only an empty list.)
            let recorder = PrometheusBuilder::new()
                .set_buckets(SECONDS_BUCKETS)
                .unwrap_or_else(|_| PrometheusBuilder::new())
                .build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|()| handle)
        })
        .clone()
}

/// Upper bounds (seconds) of every histogram's buckets: every Handover
/// histogram is a duration, from a cached answer (milliseconds) to an
/// unknown operation's recovery (an hour or more lands in `+Inf`).
const SECONDS_BUCKETS: &[f64] = &[
    0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
    300.0, 900.0, 3600.0,
];

/// Per request: counts it by route and status, records its duration, and
/// logs one `info` line (target `handover::request`): method, route
/// template (never the raw path, which carries operation keys), status,
/// latency to the response head, and for chat completions the policy, the
/// provider that answered and the attempts. Never a header value, a token
/// or a body. Handlers add `policy` to the request span (`record_policy`).
/// It runs as one layer with the per-client limit (`limits::per_client`,
/// inside the span): each `from_fn` layer costs a boxed future per request
/// in flight.
pub(crate) async fn track(State(state): State<GatewayState>, req: Request, next: Next) -> Response {
    let matched = req.extensions().get::<MatchedPath>().cloned();
    let route = matched.as_ref().map_or("unmatched", |p| p.as_str());
    let span = tracing::info_span!(
        "request",
        method = %req.method(),
        route = %route,
        policy = tracing::field::Empty,
    );
    let start = Instant::now();
    let mut unanswered = Unanswered {
        route,
        start,
        span: &span,
        answered: false,
    };
    let resp = crate::limits::per_client(&state, req, next)
        .instrument(span.clone())
        .await;
    unanswered.answered = true;
    let latency = start.elapsed();
    let status = resp.status().as_u16();
    let header = |name: &str| resp.headers().get(name).and_then(|v| v.to_str().ok());
    span.in_scope(|| {
        tracing::info!(
            target: "handover::request",
            status,
            latency_ms = latency.as_secs_f64() * 1e3,
            provider = header("x-handover-provider"),
            attempts = header("x-handover-attempts"),
            "request"
        );
    });
    record(route, status, latency);
    resp
}

/// A request dropped before its answer's head: its client hung up (hyper
/// drops the handler's future), or the shutdown's grace elapsed and the
/// gateway dropped its connection. [`track`] never reaches its own line
/// then; dropped unanswered, this writes it and counts the request: 499
/// for a hang-up (the status nginx made common for it), 503 for the
/// shutdown. Without it such a request left no trace in the log or the
/// metrics.
struct Unanswered<'a> {
    route: &'a str,
    start: Instant,
    span: &'a tracing::Span,
    answered: bool,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let latency = self.start.elapsed();
        let latency_ms = latency.as_secs_f64() * 1e3;
        let _entered = self.span.enter();
        let status = if crate::conn::dropped_by_shutdown() {
            let status = StatusCode::SERVICE_UNAVAILABLE.as_u16();
            tracing::warn!(
                target: "handover::request",
                status,
                latency_ms,
                "request: dropped unanswered at shutdown (gateway.shutdown_grace elapsed)"
            );
            status
        } else {
            let status = crate::openai::chat::client_closed().as_u16();
            tracing::info!(
                target: "handover::request",
                status,
                latency_ms,
                "request: the client closed it before the answer"
            );
            status
        };
        record(self.route, status, latency);
    }
}

/// The request metrics of one route: its duration histogram and a counter
/// per status seen.
struct RouteMetrics {
    duration: Histogram,
    by_status: HashMap<u16, Counter>,
}

/// Counts a request and records its duration through handles registered
/// once per route and status: recording is then an atomic add, where the
/// macros build, hash and look up a labelled key (allocating its label
/// strings) on every request. Handles stay valid: the global recorder is
/// set before the first request (`install`, when the state is built) and
/// never changes, and its series never expire (no idle timeout). Routes
/// are the router's templates and statuses a few codes, so the map stays
/// small.
fn record(route: &str, status: u16, latency: Duration) {
    static ROUTES: LazyLock<RwLock<HashMap<Box<str>, RouteMetrics>>> =
        LazyLock::new(RwLock::default);
    let seconds = latency.as_secs_f64();
    {
        let routes = ROUTES.read().unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = routes.get(route)
            && let Some(c) = r.by_status.get(&status)
        {
            c.increment(1);
            r.duration.record(seconds);
            return;
        }
    }
    let mut routes = ROUTES.write().unwrap_or_else(PoisonError::into_inner);
    let r = routes.entry(route.into()).or_insert_with(|| RouteMetrics {
        duration: metrics::histogram!("handover_gateway_request_duration_seconds", "route" => route.to_owned()),
        by_status: HashMap::new(),
    });
    r.by_status
        .entry(status)
        .or_insert_with(|| {
            metrics::counter!("handover_gateway_requests_total", "route" => route.to_owned(), "status" => status.to_string())
        })
        .increment(1);
    r.duration.record(seconds);
}

/// Names the policy serving the current request in its log line.
pub(crate) fn record_policy(policy: &str) {
    tracing::Span::current().record("policy", policy);
}

/// Drains histograms into their summaries every few seconds, so memory
/// stays flat when nobody scrapes `/metrics` (the recorder built with
/// `build_recorder` only does this on render otherwise).
pub(crate) async fn upkeep(handle: PrometheusHandle) {
    let mut tick = tokio::time::interval(UPKEEP_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        handle.run_upkeep();
    }
}

const UPKEEP_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

pub(crate) async fn healthz() -> impl IntoResponse {
    axum::Json(serde_json::json!({"status": "ok"}))
}

pub(crate) async fn render(State(state): State<GatewayState>) -> Response {
    match state.metrics() {
        Some(h) => (
            [(header::CONTENT_TYPE, "text/plain; version=0.0.4")],
            h.render(),
        )
            .into_response(),
        None => ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "server_error",
            "metrics_unavailable",
            "another metrics recorder is installed in this process",
        )
        .into_response(),
    }
}
