//! `/metrics` (Prometheus text), `/healthz`, and per-request counters.
//! The router and write gate record through the `metrics` facade; the
//! gateway installs the Prometheus recorder once per process.

use std::sync::OnceLock;
use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

use crate::api_error::ApiError;
use crate::state::GatewayState;

/// The process-wide Prometheus handle, installing the recorder on first
/// use; `None` if another global recorder was installed first.
pub(crate) fn install() -> Option<PrometheusHandle> {
    static HANDLE: OnceLock<Option<PrometheusHandle>> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new().build_recorder();
            let handle = recorder.handle();
            metrics::set_global_recorder(recorder).ok().map(|()| handle)
        })
        .clone()
}

/// Counts requests by route and status and records their duration.
pub(crate) async fn track(req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", |p| p.as_str())
        .to_owned();
    let start = Instant::now();
    let resp = next.run(req).await;
    let status = resp.status().as_u16().to_string();
    metrics::counter!("handover_gateway_requests_total", "route" => route.clone(), "status" => status)
        .increment(1);
    metrics::histogram!("handover_gateway_request_duration_seconds", "route" => route)
        .record(start.elapsed().as_secs_f64());
    resp
}

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
