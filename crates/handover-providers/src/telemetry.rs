//! One `tracing` span per attempt (one HTTP request), with OpenTelemetry
//! GenAI semantic-convention attribute names.
//!
//! Span `chat` fields: `gen_ai.operation.name`, `gen_ai.provider.name` and
//! (its older name, still read by many backends) `gen_ai.system`,
//! `gen_ai.request.model`, `gen_ai.request.max_tokens`,
//! `gen_ai.request.temperature`, `gen_ai.response.model`,
//! `gen_ai.response.finish_reasons`, `gen_ai.usage.input_tokens`,
//! `gen_ai.usage.output_tokens`, `http.response.status_code`, `error.type`
//! (the [`crate::ErrorClass`] name), plus `handover.provider` (configured
//! name), `handover.stream`, `handover.request_id`, `handover.stream.events`,
//! `handover.attempt` (the try of a routed call, 1-based) and
//! `handover.outcome` (`answered` or `failed`).
//! No field ever holds a key, a header or a body.

use tracing::{Span, field::Empty};

use crate::{
    error::ProviderError,
    request::ChatRequest,
    types::{ChatResponse, Usage},
};

pub(crate) fn attempt_span(
    provider: &str,
    system: &'static str,
    model: &str,
    req: &ChatRequest,
    stream: bool,
    attempt: Option<u32>,
) -> Span {
    // An absent `Option` records nothing, as `Empty` would.
    tracing::info_span!(
        "chat",
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = system,
        "gen_ai.system" = system,
        "gen_ai.request.model" = model,
        "gen_ai.request.max_tokens" = req.max_tokens,
        "gen_ai.request.temperature" = req.temperature.map(f64::from),
        "gen_ai.response.model" = Empty,
        "gen_ai.response.finish_reasons" = Empty,
        "gen_ai.usage.input_tokens" = Empty,
        "gen_ai.usage.output_tokens" = Empty,
        "http.response.status_code" = Empty,
        "error.type" = Empty,
        "handover.provider" = provider,
        "handover.stream" = stream,
        "handover.request_id" = Empty,
        "handover.stream.events" = Empty,
        "handover.attempt" = attempt,
        "handover.outcome" = Empty,
    )
}

// Each function below records its fields in one `record_all!`: every
// `Span::record` is a separate trip through the subscriber's layers (a span
// lookup and a format per layer), so one call per phase, not one per field.

/// A stream's response head arrived.
pub(crate) fn record_status(span: &Span, status: u16, request_id: Option<&str>) {
    tracing::record_all!(
        span,
        "http.response.status_code" = status,
        "handover.request_id" = request_id,
    );
}

/// A whole (non-streamed) answer arrived with `status`.
pub(crate) fn record_response(span: &Span, status: u16, resp: &ChatResponse) {
    if span.is_disabled() {
        return;
    }
    let usage = resp.usage.as_ref();
    tracing::record_all!(
        span,
        "http.response.status_code" = status,
        "handover.request_id" = resp.request_id.as_deref(),
        "handover.outcome" = "answered",
        "gen_ai.response.model" = resp.model.as_str(),
        "gen_ai.response.finish_reasons" = resp.finish_reason.as_ref().map(|f| f.as_str()),
        "gen_ai.usage.input_tokens" = usage.map(|u| u.input_tokens),
        "gen_ai.usage.output_tokens" = usage.map(|u| u.output_tokens),
    );
}

/// A stream ended; `outcome` is `Some("answered")` when it completed (a
/// failed one has its outcome from [`record_error`]).
pub(crate) fn record_stream_end(
    span: &Span,
    outcome: Option<&'static str>,
    model: Option<&str>,
    usage: Option<&Usage>,
    finish: Option<&str>,
    events: usize,
) {
    if span.is_disabled() {
        return;
    }
    tracing::record_all!(
        span,
        "handover.outcome" = outcome,
        "gen_ai.response.model" = model,
        "gen_ai.response.finish_reasons" = finish,
        "gen_ai.usage.input_tokens" = usage.map(|u| u.input_tokens),
        "gen_ai.usage.output_tokens" = usage.map(|u| u.output_tokens),
        "handover.stream.events" = events,
    );
}

pub(crate) fn record_error(span: &Span, err: &ProviderError) {
    if span.is_disabled() {
        return;
    }
    tracing::record_all!(
        span,
        "handover.outcome" = "failed",
        "error.type" = err.class().as_str(),
        "http.response.status_code" = err.status(),
        "handover.request_id" = err.request_id(),
    );
}
