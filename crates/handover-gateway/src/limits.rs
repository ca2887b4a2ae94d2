//! Per-client concurrency: a client token may have at most
//! `gateway.max_in_flight_per_client` requests in flight (a stream counts
//! until its last byte is written or the client goes away). One more is
//! answered `429` at once, with `Retry-After`, so one busy agent backend
//! cannot take every connection, ledger slot and provider slot from the
//! others. Unauthenticated requests are refused by their handlers; operator
//! requests are not limited here.

use axum::body::Body;
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::api_error::ApiError;
use crate::auth::{Known, Principal, principal_of};
use crate::conn::body::Held;
use crate::state::GatewayState;

/// Holds a slot of the calling client for as long as its response runs
/// (called by `metrics::track`, the gateway's one middleware layer).
pub(crate) async fn per_client(state: &GatewayState, mut req: Request, next: Next) -> Response {
    // A declared length over the limit is refused before any of the body
    // is waited for (the body is never read, so the connection closes).
    let declared = req
        .headers()
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > state.settings().max_body_bytes as u64) {
        return crate::body::too_large()
            .with_header("connection", HeaderValue::from_static("close"))
            .into_response();
    }
    let Ok(principal) = principal_of(req.headers(), state) else {
        return next.run(req).await;
    };
    req.extensions_mut().insert(Known(principal.clone()));
    let slots = match &*principal {
        Principal::Client { slots, .. } => slots.clone(),
        Principal::Operator { .. } => return next.run(req).await,
    };
    let Ok(slot) = slots.try_acquire_owned() else {
        metrics::counter!("handover_gateway_client_limited_total").increment(1);
        return ApiError::new(
            StatusCode::TOO_MANY_REQUESTS,
            "rate_limit_error",
            "client_concurrency_limit",
            "this client already has gateway.max_in_flight_per_client requests in flight; retry when one finishes",
        )
        .with_header("retry-after", HeaderValue::from_static("1"))
        .into_response();
    };
    next.run(req)
        .await
        .map(|body| Body::new(Held::new(body, slot)))
}
