//! `POST /v1/chat/completions`.
//!
//! `model` names a policy (or a `[gateway.models]` alias); the router runs
//! the call under that policy's budget and chain. The answer's `model` and
//! `usage` are those of the provider that answered; every attempt (failed
//! ones included) is listed in `x-handover-attempts`, the answering provider
//! in `x-handover-provider`. A failed call answers with the router's reason
//! and `x-should-retry: false`: the router already spent the task's budget
//! on retries and fallbacks, and an SDK retrying on top would multiply it.
//! The router call runs to its end even when the client hangs up (its
//! breaker bookkeeping must complete; see `detach.rs`).

use std::time::{SystemTime, UNIX_EPOCH};

use axum::extract::State;
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use handover_providers::{ChatRequest, ErrorClass, ProviderError};
use handover_router::RouterError;
use handover_router::budget::Exhausted;
use handover_router::route::{Attempt, AttemptResult, Caller, Completion, FailureReason, Task};
use tracing::{Instrument, Span};

use super::request;
use super::response::{Chunker, attempts_header};
use crate::api_error::ApiError;
use crate::auth::Client;
use crate::body::RawBody;
use crate::state::GatewayState;

/// Header carrying the request's data class (the router's data policy).
pub(crate) const DATA_CLASS_HEADER: &str = "x-handover-data-class";

pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

pub(crate) async fn completions(
    State(state): State<GatewayState>,
    client: Client,
    headers: HeaderMap,
    RawBody(body): RawBody,
) -> Result<Response, ApiError> {
    let mut parsed = request::parse(&body)?;
    let task = start(
        &state,
        &client,
        &headers,
        &parsed.model,
        &mut parsed.request,
    )
    .await?;
    drop(headers); // see `start`
    let id = format!("chatcmpl-{}", task.id().simple());
    if parsed.stream {
        let chunker = Chunker::new(id, now_secs(), parsed.include_usage);
        // Boxed: see `start`.
        return Ok(Box::pin(super::stream::respond(state, task, parsed.request, chunker)).await);
    }
    match call(&state, &task, parsed.request).await? {
        Ok(c) => {
            // Written as text, not built as a `Value` (see `openai_json`).
            let body = c.response.openai_json(&id, now_secs());
            let json = HeaderValue::from_static("application/json");
            let mut resp = ([(axum::http::header::CONTENT_TYPE, json)], body).into_response();
            let h = resp.headers_mut();
            super::response::answer_headers(h, &c.provider, &c.attempts, &c.skipped);
            crate::task::add_remaining(h, &task);
            Ok(resp)
        }
        Err(e) => Err(router_error(&e).with_remaining(&task)),
    }
}

/// The router's plain (not streamed) call of `task`, shared by every API
/// over the router. It runs to its end even if the client goes away (the
/// router's breakers must hear how a probe ended), but starts nothing more
/// once it has; see `detach.rs`.
pub(crate) async fn call(
    state: &GatewayState,
    task: &Task,
    request: ChatRequest,
) -> Result<Result<Completion, RouterError>, ApiError> {
    let router = state.router().clone();
    let caller = Caller::new();
    let call_task = task.clone().with_caller(&caller);
    // In the request's span, so an exported trace keeps request → task → attempts.
    let call = async move { router.chat(&call_task, &request).await }.instrument(Span::current());
    crate::detach::to_the_end(call, caller)
        .await
        .map_err(|p| ApiError::internal(format!("the router call panicked: {}", p.0)))
}

/// Checks a request (data class header, the request itself, the model)
/// and opens its task (a named task's shared budget, or a fresh one):
/// shared by every API over the router. After it, a handler drops the
/// request's `HeaderMap`: its values are slices of the connection's first
/// read buffer, which they would keep allocated for the whole call.
pub(crate) async fn start(
    state: &GatewayState,
    client: &Client,
    headers: &HeaderMap,
    model: &str,
    request: &mut ChatRequest,
) -> Result<Task, ApiError> {
    // Which providers may receive the request: a second copy (a proxy's
    // label beside the client's) is refused, never resolved by order.
    let class = crate::headers::one(headers, DATA_CLASS_HEADER)
        .map_err(|m| ApiError::invalid("invalid_header", DATA_CLASS_HEADER, m))?;
    if let Some(class) = class {
        let class = class
            .to_str()
            .ok()
            .filter(|c| !c.is_empty())
            .ok_or_else(|| {
                ApiError::invalid(
                    "invalid_header",
                    DATA_CLASS_HEADER,
                    "x-handover-data-class must be visible ASCII",
                )
            })?;
        request.data_class = Some(class.to_owned());
    }
    if let Err(ProviderError::InvalidRequest { field, reason }) = request.validate() {
        return Err(ApiError::invalid(
            "invalid_field",
            field.clone(),
            format!("{field}: {reason}"),
        ));
    }
    let route = state.config().route(model).map_err(|e| router_error(&e))?;
    crate::metrics::record_policy(route.policy.as_deref().unwrap_or(&route.name));
    // Boxed (as is the stream path): a handler's future is as large as its
    // largest await and stays allocated for the whole call, so a large
    // state used only here would be carried by every waiting request.
    Box::pin(crate::task::open(state, &route, client, headers)).await
}

/// 499, the status nginx made common for a client that closed its request
/// before the answer: what the log line and metrics of such a request say.
pub(crate) fn client_closed() -> StatusCode {
    StatusCode::from_u16(499).unwrap_or(StatusCode::BAD_REQUEST)
}

/// The answer to a provider's refusal of the request itself (a 400 the
/// client must act on), if `class` is one.
fn refused_request(class: ErrorClass) -> Option<(StatusCode, &'static str, &'static str)> {
    let code = match class {
        ErrorClass::InvalidRequest => "invalid_request",
        ErrorClass::ContextLengthExceeded => "context_length_exceeded",
        ErrorClass::ContentFiltered => "content_filter",
        _ => return None,
    };
    Some((StatusCode::BAD_REQUEST, "invalid_request_error", code))
}

/// [`refused_request`] of the one class every attempt failed with, if the
/// call made attempts and all of them were such a refusal, alike.
fn same_refusal(attempts: &[Attempt]) -> Option<(StatusCode, &'static str, &'static str)> {
    let first = agreed(attempts, |a| match a.result {
        AttemptResult::Failed(class) => Some(class),
        _ => None,
    })?;
    refused_request(first)
}

/// What every attempt gives alike: `Some(v)` if each one gives `v`.
fn agreed<'a, T: PartialEq>(
    attempts: &'a [Attempt],
    field: impl Fn(&'a Attempt) -> Option<T>,
) -> Option<T> {
    let mut values = attempts.iter().map(field);
    let first = values.next()??;
    values.all(|v| v.as_ref() == Some(&first)).then_some(first)
}

/// A failed call as an HTTP error (see `docs/gateway.md` for the table).
pub(crate) fn router_error(e: &RouterError) -> ApiError {
    let message = e.to_string();
    let err = match e {
        RouterError::UnknownPolicy(_) | RouterError::UnknownModel { .. } => ApiError::new(
            StatusCode::NOT_FOUND,
            "invalid_request_error",
            "model_not_found",
            message,
        )
        .with_param("model"),
        RouterError::Task(f) => {
            let (status, kind, code) = match &f.reason {
                FailureReason::Budget(Exhausted::Deadline) => (
                    StatusCode::GATEWAY_TIMEOUT,
                    "server_error",
                    "budget_exhausted",
                ),
                FailureReason::Budget(Exhausted::StoreUnavailable) => (
                    StatusCode::SERVICE_UNAVAILABLE,
                    "server_error",
                    "ledger_unavailable",
                ),
                FailureReason::Budget(_) => {
                    (StatusCode::BAD_GATEWAY, "server_error", "budget_exhausted")
                }
                FailureReason::Failed { class, .. } => refused_request(*class).unwrap_or((
                    StatusCode::BAD_GATEWAY,
                    "server_error",
                    "provider_failed",
                )),
                // Every provider that was asked refused the request itself
                // for one reason (e.g. each one's context is too short, a
                // class the default table falls back from): the client's
                // request is the problem, and agent frameworks act on the
                // code (trim the history) where a 502 says "try later".
                FailureReason::ChainExhausted => same_refusal(&f.attempts).unwrap_or((
                    StatusCode::BAD_GATEWAY,
                    "server_error",
                    "all_providers_failed",
                )),
                FailureReason::NoAllowedProvider { .. } => (
                    StatusCode::FORBIDDEN,
                    "permission_error",
                    "data_class_not_allowed",
                ),
                FailureReason::Unsupported { .. } => (
                    StatusCode::BAD_REQUEST,
                    "invalid_request_error",
                    "unsupported_parameter",
                ),
                FailureReason::StreamBroken { .. } => {
                    (StatusCode::BAD_GATEWAY, "server_error", "stream_broken")
                }
                // Nobody reads this answer; the request's log line and
                // metrics do (499: nginx's "client closed request").
                FailureReason::CallerLeft => (client_closed(), "server_error", "caller_left"),
                _ => (
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "server_error",
                    "internal_error",
                ),
            };
            let mut err = ApiError::new(status, kind, code, message);
            // A call that tried and passed over nothing (its task's budget
            // was spent before it) has no attempts to list: no header, as
            // for a call refused before routing, never an empty one.
            if !f.attempts.is_empty() || !f.skipped.is_empty() {
                let attempts = attempts_header(&f.attempts, &f.skipped);
                err = err.with_header("x-handover-attempts", attempts);
            }
            if let Some(id) = super::response::request_id(&f.attempts) {
                err = err.with_header("x-request-id", id);
            }
            match &f.reason {
                FailureReason::Unsupported { parameter, .. } => err.with_param(parameter.clone()),
                // The provider's own 4xx (invalid request, context length,
                // content filter): its code and param, as it gave them.
                FailureReason::Failed { code, param, .. } if status == StatusCode::BAD_REQUEST => {
                    err.relaying(code.as_deref(), param.as_deref())
                }
                // A chain refused alike: each provider's code and param
                // where every one of them gave the same, else the
                // gateway's (one provider's word is not the chain's).
                FailureReason::ChainExhausted if status == StatusCode::BAD_REQUEST => err.relaying(
                    agreed(&f.attempts, Attempt::provider_code),
                    agreed(&f.attempts, Attempt::provider_param),
                ),
                _ => err,
            }
        }
        _ => ApiError::internal(message),
    };
    err.with_header("x-should-retry", HeaderValue::from_static("false"))
}
