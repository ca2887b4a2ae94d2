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
    let span = tracing::info_span!(
        "chat",
        "gen_ai.operation.name" = "chat",
        "gen_ai.provider.name" = system,
        "gen_ai.system" = system,
        "gen_ai.request.model" = model,
        "gen_ai.request.max_tokens" = Empty,
        "gen_ai.request.temperature" = Empty,
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
    );
    if !span.is_disabled() {
        if let Some(n) = req.max_tokens {
            span.record("gen_ai.request.max_tokens", n);
        }
        if let Some(t) = req.temperature {
            span.record("gen_ai.request.temperature", f64::from(t));
        }
    }
    span
}

pub(crate) fn record_status(span: &Span, status: u16, request_id: Option<&str>) {
    span.record("http.response.status_code", status);
    if let Some(id) = request_id {
        span.record("handover.request_id", id);
    }
}

fn record_usage(span: &Span, usage: Option<&Usage>) {
    if let Some(u) = usage {
        span.record("gen_ai.usage.input_tokens", u.input_tokens);
        span.record("gen_ai.usage.output_tokens", u.output_tokens);
    }
}

pub(crate) fn record_response(span: &Span, resp: &ChatResponse) {
    if span.is_disabled() {
        return;
    }
    span.record("handover.outcome", "answered");
    span.record("gen_ai.response.model", resp.model.as_str());
    if let Some(f) = &resp.finish_reason {
        span.record("gen_ai.response.finish_reasons", f.as_str());
    }
    record_usage(span, resp.usage.as_ref());
}

pub(crate) fn record_stream_end(
    span: &Span,
    model: Option<&str>,
    usage: Option<&Usage>,
    finish: Option<&str>,
    events: usize,
) {
    if span.is_disabled() {
        return;
    }
    if let Some(m) = model {
        span.record("gen_ai.response.model", m);
    }
    if let Some(f) = finish {
        span.record("gen_ai.response.finish_reasons", f);
    }
    record_usage(span, usage);
    span.record("handover.stream.events", events);
}

pub(crate) fn record_error(span: &Span, err: &ProviderError) {
    if span.is_disabled() {
        return;
    }
    span.record("handover.outcome", "failed");
    span.record("error.type", err.class().as_str());
    if let Some(s) = err.status() {
        span.record("http.response.status_code", s);
    }
    if let Some(id) = err.request_id() {
        span.record("handover.request_id", id);
    }
}
