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
mod wire;

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use handover_ledger::{
    BeginOptions, BeginOutcome, BlockWidth, Claim, Dispatch, Epoch, ListFilter, OperationId,
    OperationRecord, Owner, ReleaseReason, Timestamp, UnknownReport,
};
use handover_router::RouterError;
use handover_router::config::{ActionContract, BlockSetting};
use serde_json::{Value, json};

use crate::api_error::ApiError;
use crate::auth::Client;
use crate::state::GatewayState;
pub(crate) use wire::LedgerBody;
use wire::{ApproveBody, BeginBody, DispatchBody, ListQuery, OutcomeBody, OutcomeKind};

/// The request header carrying the operation key.
pub(crate) const KEY_HEADER: &str = "idempotency-key";

pub(crate) fn from_router(e: RouterError) -> ApiError {
    match e {
        RouterError::Ledger(l) => {
            let mut err = ApiError::ledger(&l);
            if err.param.as_deref() == Some("key") {
                err.param = Some("Idempotency-Key".to_owned());
            }
            err
        }
        other => ApiError::internal(other.to_string()),
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

fn begin_options(holder: String, c: &ActionContract) -> BeginOptions {
    BeginOptions {
        holder,
        lease: c.lease,
        block: match c.block {
            BlockSetting::Operation => BlockWidth::Operation,
            BlockSetting::Scope => BlockWidth::Scope,
            BlockSetting::Action => BlockWidth::Action,
        },
    }
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
    let error = |e: RouterError| match e {
        RouterError::Ledger(l) => ApiError::ledger(&l),
        other => from_router(other),
    };
    let gate = state.gate();
    let req = gate
        .request(client.scope.as_str(), &key, &body.action, &body.params)
        .map_err(error)?;
    let outcome = gate.approve(&req).await.map_err(error)?;
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
    let key = headers
        .get(KEY_HEADER)
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
    let req = state
        .gate()
        .request(client.scope.as_str(), key, &body.action, &body.params)
        .map_err(from_router)?;
    let contract = state.gate().contract(&body.action);
    let opts = begin_options(format!("client:{}", client.name), &contract);
    let ledger = state.ledger();
    let outcome = ledger
        .begin(&req, &opts)
        .await
        .map_err(|e| ApiError::ledger(&e))?;
    let (claim, resend) = match outcome {
        BeginOutcome::Started(claim) => (claim, false),
        // Within the destination's idempotency window a re-send with the
        // same destination key is safe: hand out a claim for exactly that.
        BeginOutcome::Unresolved(info) => {
            let Some(window) = contract.idempotency.as_ref().map(|i| i.retention) else {
                return Ok(answer(
                    BeginOutcome::Unresolved(info),
                    &req,
                    &contract,
                    &client,
                ));
            };
            let resend = ledger
                .claim_for_resend(req.id(), &opts, window)
                .await
                .map_err(|e| ApiError::ledger(&e))?;
            match resend {
                Some(c) => (c, true),
                None => {
                    return Ok(answer(
                        BeginOutcome::Unresolved(info),
                        &req,
                        &contract,
                        &client,
                    ));
                }
            }
        }
        other => return Ok(answer(other, &req, &contract, &client)),
    };
    Ok(json_status(
        201,
        wire::started(&req, &claim, &contract, resend),
    ))
}

fn answer(
    outcome: BeginOutcome,
    req: &handover_ledger::OperationRequest,
    contract: &ActionContract,
    client: &Client,
) -> Response {
    if let BeginOutcome::Started(claim) = &outcome {
        return json_status(201, wire::started(req, claim, contract, false));
    }
    let replayed = matches!(outcome, BeginOutcome::Replayed(_));
    let (status, body) = wire::other(outcome, &client.scope);
    let mut resp = json_status(status, body);
    if replayed {
        resp.headers_mut()
            .insert("idempotent-replayed", HeaderValue::from_static("true"));
    }
    resp
}

/// Rebuilds the caller's claim from the record and the epoch it presents;
/// the ledger's fencing decides whether it still holds.
async fn claim_for(
    state: &GatewayState,
    client: &Client,
    key: &str,
    epoch: u64,
) -> Result<Claim, ApiError> {
    let id = OperationId::new(client.scope.as_str(), key)
        .map_err(|e| from_router(RouterError::Ledger(e.into())))?;
    let rec = state
        .ledger()
        .get(&id)
        .await
        .map_err(|e| ApiError::ledger(&e))?
        .ok_or_else(|| not_found(&id))?;
    Ok(Claim {
        fingerprint: rec.fingerprint,
        epoch: Epoch(epoch),
        holder: format!("client:{}", client.name),
        lease_until: Timestamp(0),
        destination_key: rec.destination_key.clone(),
        attempt_number: rec.dispatch_count + 1,
        id,
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
    LedgerBody(body): LedgerBody<DispatchBody>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    let claim = claim_for(&state, &client, &key, body.epoch).await?;
    let dispatch = Dispatch {
        executor: body
            .executor
            .unwrap_or_else(|| format!("client:{}", client.name)),
        metadata: body.metadata,
    };
    let attempt = state
        .ledger()
        .mark_dispatched(&claim, dispatch)
        .await
        .map_err(|e| ApiError::ledger(&e))?;
    Ok(json_status(
        200,
        json!({"status": "dispatched", "attempt_id": attempt,
            "destination_key": claim.destination_key}),
    ))
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

pub(crate) async fn outcome(
    State(state): State<GatewayState>,
    client: Client,
    key: Result<Path<String>, PathRejection>,
    LedgerBody(body): LedgerBody<OutcomeBody>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    let claim = claim_for(&state, &client, &key, body.epoch).await?;
    let ledger = state.ledger();
    let rec = match body.outcome {
        OutcomeKind::Confirmed => {
            let result = body.result.unwrap_or(Value::Null);
            ledger.confirm(&claim, result, body.evidence).await
        }
        OutcomeKind::Rejected => {
            let reason = required(body.reason, "reason", "rejected")?;
            ledger.reject(&claim, reason, body.evidence).await
        }
        OutcomeKind::Unknown => {
            let reason = required(body.reason, "reason", "unknown")?;
            let rec = ledger
                .get(&claim.id)
                .await
                .map_err(|e| ApiError::ledger(&e))?
                .ok_or_else(|| not_found(&claim.id))?;
            let contract = state.gate().contract(rec.action.as_str());
            let (owner, next_check_at) = match contract.lookup {
                Some(l) => (
                    Owner::Reconciler,
                    Some(state.clock().now().plus(l.check_every)),
                ),
                None => (Owner::Review, None),
            };
            let report = UnknownReport {
                reason,
                evidence: body.evidence,
                owner,
                next_check_at,
            };
            ledger.mark_unknown(&claim, report).await
        }
        OutcomeKind::NotSent => {
            let evidence = required(body.evidence, "evidence", "not_sent")?;
            ledger
                .release(&claim, ReleaseReason::NotSent { evidence })
                .await
        }
        OutcomeKind::Abandoned => ledger.release(&claim, ReleaseReason::Abandoned).await,
    }
    .map_err(|e| ApiError::ledger(&e))?;
    Ok(record_answer(&rec))
}

pub(crate) async fn get(
    State(state): State<GatewayState>,
    client: Client,
    key: Result<Path<String>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    let id = OperationId::new(client.scope.as_str(), &key)
        .map_err(|e| from_router(RouterError::Ledger(e.into())))?;
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

pub(crate) async fn list(
    State(state): State<GatewayState>,
    client: Client,
    query: Result<Query<ListQuery>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(q) = query.map_err(query_error)?;
    if q.scope.is_some() {
        return Err(ApiError::invalid(
            "invalid_query",
            "scope",
            "scope comes from the client token and cannot be chosen",
        ));
    }
    let filter = ListFilter {
        state: wire::state_filter(q.state.as_deref())
            .map_err(|m| ApiError::invalid("invalid_query", "state", m))?,
        scope: Some(client.scope.clone()),
        limit: Some(q.limit.unwrap_or(100).min(1000)),
        ..ListFilter::default()
    };
    list_answer(&state, &filter).await
}

pub(crate) async fn list_answer(
    state: &GatewayState,
    filter: &ListFilter,
) -> Result<Response, ApiError> {
    let ops = state
        .ledger()
        .list(filter)
        .await
        .map_err(|e| ApiError::ledger(&e))?;
    Ok(json_status(200, json!({"operations": ops})))
}
