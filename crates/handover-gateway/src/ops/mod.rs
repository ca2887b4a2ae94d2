//! The operations API: tool calls executed by agents in any language go
//! through the ledger exactly as the Rust write gate does.
//!
//! `POST /v1/operations/{key}/approve` (body = action and params) records
//! what the user approved before any agent proposes it
//! ([`handover_ledger::Ledger::approve`]): from then on a begin under that
//! key with other parameters gets 422, whichever agent or model sends it.
//!
//! `POST /v1/operations` (`Idempotency-Key` = the operation key; body =
//! action and params) is [`handover_ledger::Ledger::begin`]; the holder then
//! marks the operation dispatched **before** calling the destination,
//! calls it with the claim's `destination_key`, and records what happened
//! (`confirmed`, `rejected`, `unknown`, or `not_sent` with proof), every
//! write fenced by the claim's epoch. The scope is always the calling
//! client's: one client can neither see, replay nor write another's
//! operations. Status codes follow the IETF Idempotency-Key draft where it
//! has one (409 in progress, 422 key reused with other parameters). Every
//! number in params, results and metadata must be recordable exactly
//! (I-JSON): otherwise 400 naming its path, and nothing is written.

pub(crate) mod admin;
pub(crate) mod list;
pub(crate) mod pull;
mod wire;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use handover_ledger::{Claim, Dispatch, LedgerError, OperationId, OperationRecord};
use handover_router::RouterError;
use handover_router::protocol::{Begun, NotStarted, Report};
use serde_json::{Value, json};

use crate::api_error::ApiError;
use crate::auth::Client;
use crate::state::GatewayState;
pub(crate) use wire::LedgerBody;
use wire::{ApproveBody, BeginBody, DispatchBody, OutcomeBody, OutcomeKind};

/// The request header carrying the operation key.
pub(crate) const KEY_HEADER: &str = "Idempotency-Key";

/// The operation a path names (`/v1/operations/{key}/...`): a bad key is
/// named as the path's `key`.
pub(crate) fn path_id(scope: &str, key: &str) -> Result<OperationId, ApiError> {
    OperationId::new(scope, key).map_err(|e| ApiError::ledger(&e.into()))
}

/// A protocol error; a bad operation key is named as the begin's
/// `Idempotency-Key` header, where it came from.
pub(crate) fn from_router(e: RouterError) -> ApiError {
    let mut err = ledger_error(e);
    if err.param.as_deref() == Some("key") {
        err.param = Some("Idempotency-Key".to_owned());
    }
    err
}

/// A protocol error in the ledger's HTTP terms (the key named as `key`).
fn ledger_error(e: RouterError) -> ApiError {
    match e.ledger_error() {
        Some(l) => ApiError::ledger(l),
        None => ApiError::internal(e.to_string()),
    }
}

pub(crate) fn path_error(e: PathRejection) -> ApiError {
    ApiError::invalid(
        "invalid_path",
        "path",
        format!("invalid path: {}", e.body_text()),
    )
}

pub(crate) fn query_error(e: QueryRejection) -> ApiError {
    ApiError::invalid(
        "invalid_query",
        "query",
        format!("invalid query: {}", e.body_text()),
    )
}

fn json_status(status: u16, body: Value) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

/// Records the user's approval of `action` with exactly `params` under `key`.
pub(crate) async fn approve(
    State(state): State<GatewayState>,
    client: Client,
    key: Result<Path<String>, PathRejection>,
    LedgerBody(body): LedgerBody<ApproveBody>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    // The key is in the path here, not in the Idempotency-Key header.
    let protocol = state.protocol();
    let req = protocol
        .request(client.scope.as_str(), &key, &body.action, &body.params)
        .map_err(ledger_error)?;
    let outcome = protocol.approve(&req).await.map_err(ledger_error)?;
    let replayed = matches!(outcome, handover_ledger::ApproveOutcome::Replayed(_));
    let (status, body) = wire::approved(outcome, &req, &client.scope);
    let mut resp = json_status(status, body);
    if replayed {
        resp.headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    Ok(resp)
}

pub(crate) async fn begin(
    State(state): State<GatewayState>,
    client: Client,
    headers: HeaderMap,
    LedgerBody(body): LedgerBody<BeginBody>,
) -> Result<Response, ApiError> {
    let key = crate::headers::one(&headers, KEY_HEADER)
        .map_err(|m| ApiError::invalid("invalid_field", "Idempotency-Key", m))?
        .ok_or_else(|| {
            ApiError::invalid(
                "missing_idempotency_key",
                "Idempotency-Key",
                "the Idempotency-Key header (the operation key) is required",
            )
        })?
        .to_str()
        .map_err(|_| {
            ApiError::invalid(
                "invalid_field",
                "Idempotency-Key",
                "Idempotency-Key must be visible ASCII",
            )
        })?;
    let protocol = state.protocol();
    let req = protocol
        .request(client.scope.as_str(), key, &body.action, &body.params)
        .map_err(from_router)?;
    let task = crate::task::for_operation(&state, &client, &headers, true).await?;
    match protocol
        .begin(&req, &holder(&client))
        .await
        .map_err(from_router)?
    {
        Begun::Started(started) => {
            let mut resp = json_status(201, wire::started(&req, &started));
            crate::task::add_view(resp.headers_mut(), task.as_ref());
            Ok(resp)
        }
        Begun::NotStarted(answer) => {
            let replayed = matches!(answer, NotStarted::Replayed(_));
            let (status, body) = wire::not_started(answer, &client.scope);
            let mut resp = json_status(status, body);
            if replayed {
                resp.headers_mut()
                    .insert("idempotent-replayed", HeaderValue::from_static("true"));
            }
            crate::task::add_view(resp.headers_mut(), task.as_ref());
            Ok(resp)
        }
    }
}

/// The holder name a client's claims carry.
fn holder(client: &Client) -> String {
    format!("client:{}", client.name)
}

/// The caller's claim, rebuilt from the epoch it presents (the protocol's
/// fencing decides whether it still holds).
async fn claim_for(
    state: &GatewayState,
    client: &Client,
    key: &str,
    epoch: u64,
) -> Result<(Claim, OperationRecord), ApiError> {
    let id = path_id(client.scope.as_str(), key)?;
    state
        .protocol()
        .presented_claim(&id, epoch, &holder(client))
        .await
        .map_err(|e| match e.ledger_error() {
            Some(handover_ledger::LedgerError::NotFound { .. }) => not_found(&id),
            _ => from_router(e),
        })
}

pub(crate) fn not_found(id: &OperationId) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found_error",
        "operation_not_found",
        format!("operation {} was never begun in this scope", id.key),
    )
}

pub(crate) fn record_answer(rec: &OperationRecord) -> Response {
    json_status(200, json!({"status": rec.state.kind(), "operation": rec}))
}

pub(crate) async fn dispatch(
    State(state): State<GatewayState>,
    client: Client,
    key: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    LedgerBody(body): LedgerBody<DispatchBody>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    let (claim, _) = claim_for(&state, &client, &key, body.epoch).await?;
    // Past the task's deadline nothing is dispatched (the claim stays the
    // caller's to give back with `abandoned`).
    let task = crate::task::for_operation(&state, &client, &headers, true).await?;
    // The attempt names the client, whatever it calls its executor: a
    // client must not be able to write `operator:alice` or `reconciler`
    // into the attempt log a reviewer reads.
    let executor = match body.executor {
        Some(own) => format!("{}/{own}", holder(&client)),
        None => holder(&client),
    };
    let dispatch = Dispatch {
        executor,
        metadata: body.metadata,
    };
    let attempt = match state.protocol().mark_dispatched(&claim, dispatch).await {
        Ok(attempt) => attempt,
        // A sibling became unknown since the claim was taken: the same
        // answer `begin` gives then, and nothing may be sent.
        Err(e) => {
            return match e.ledger_error() {
                Some(LedgerError::Blocked {
                    blocked_by, info, ..
                }) => {
                    let suspended = NotStarted::Suspended {
                        blocked_by: blocked_by.clone(),
                        info: (**info).clone(),
                    };
                    let (status, body) = wire::not_started(suspended, &client.scope);
                    Ok(json_status(status, body))
                }
                _ => Err(from_router(e)),
            };
        }
    };
    let mut resp = json_status(
        200,
        json!({"status": "dispatched", "attempt_id": attempt,
            "destination_key": claim.destination_key}),
    );
    crate::task::add_view(resp.headers_mut(), task.as_ref());
    Ok(resp)
}

/// A field the outcome has no place for, refused (400 naming it) rather
/// than dropped: the caller would believe it recorded — a destination's
/// id sent with a rejection, say. `records` says what the outcome keeps.
pub(crate) fn misplaced(field: &str, outcome: &str, records: &str) -> ApiError {
    ApiError::invalid(
        "invalid_field",
        field,
        format!("{field}: not recorded with outcome {outcome:?}, which records {records}"),
    )
}

fn required(value: Option<String>, field: &str, outcome: &str) -> Result<String, ApiError> {
    value.filter(|v| !v.trim().is_empty()).ok_or_else(|| {
        ApiError::invalid(
            "invalid_field",
            field,
            format!("{field}: required for outcome {outcome:?}"),
        )
    })
}

/// An outcome's fields that it does not record (see [`misplaced`]); a
/// `null` is an absent field.
fn refuse_misplaced(body: &OutcomeBody) -> Result<(), ApiError> {
    let (name, records, allowed): (_, _, &[&str]) = match body.outcome {
        OutcomeKind::Confirmed => (
            "confirmed",
            "its result and evidence",
            &["result", "evidence"],
        ),
        OutcomeKind::Rejected => (
            "rejected",
            "its reason and evidence",
            &["reason", "evidence"],
        ),
        OutcomeKind::Unknown => (
            "unknown",
            "its reason and evidence",
            &["reason", "evidence"],
        ),
        OutcomeKind::NotSent => ("not_sent", "its evidence", &["evidence"]),
        OutcomeKind::Abandoned => ("abandoned", "nothing but the outcome", &[]),
    };
    let given = [
        ("result", body.result.is_some()),
        ("reason", body.reason.is_some()),
        ("evidence", body.evidence.is_some()),
    ];
    match given
        .into_iter()
        .find(|(field, present)| *present && !allowed.contains(field))
    {
        Some((field, _)) => Err(misplaced(field, name, records)),
        None => Ok(()),
    }
}

pub(crate) async fn outcome(
    State(state): State<GatewayState>,
    client: Client,
    key: Result<Path<String>, PathRejection>,
    headers: HeaderMap,
    LedgerBody(body): LedgerBody<OutcomeBody>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    refuse_misplaced(&body)?;
    let (claim, rec) = claim_for(&state, &client, &key, body.epoch).await?;
    let report = match body.outcome {
        OutcomeKind::Confirmed => Report::Confirmed {
            result: body.result.unwrap_or(Value::Null),
            evidence: body.evidence,
        },
        OutcomeKind::Rejected => Report::Rejected {
            reason: required(body.reason, "reason", "rejected")?,
            evidence: body.evidence,
        },
        OutcomeKind::Unknown => Report::Unknown {
            reason: required(body.reason, "reason", "unknown")?,
            evidence: body.evidence,
        },
        OutcomeKind::NotSent => Report::NotSent {
            evidence: required(body.evidence, "evidence", "not_sent")?,
        },
        OutcomeKind::Abandoned => Report::Abandoned,
    };
    let rec = state
        .protocol()
        .record(&claim, &rec.action, report)
        .await
        .map_err(from_router)?;
    let mut resp = record_answer(&rec);
    // An outcome is recorded whatever is left of the task's budget (and
    // whatever its header says); the answer only reports what is left.
    let task = crate::task::for_operation(&state, &client, &headers, false).await;
    crate::task::add_view(resp.headers_mut(), task.ok().flatten().as_ref());
    Ok(resp)
}

pub(crate) async fn get(
    State(state): State<GatewayState>,
    client: Client,
    key: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    let id = path_id(client.scope.as_str(), &key)?;
    show(&state, &id).await
}

pub(crate) async fn show(state: &GatewayState, id: &OperationId) -> Result<Response, ApiError> {
    let ledger = state.ledger();
    let rec = ledger
        .get(id)
        .await
        .map_err(|e| ApiError::ledger(&e))?
        .ok_or_else(|| not_found(id))?;
    let attempts = ledger
        .attempts(id)
        .await
        .map_err(|e| ApiError::ledger(&e))?;
    Ok(json_status(
        200,
        json!({"status": rec.state.kind(), "operation": rec, "attempts": attempts}),
    ))
}
