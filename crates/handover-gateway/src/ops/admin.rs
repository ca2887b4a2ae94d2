//! Operator endpoints (`/v1/admin`, operator token): every scope's
//! operations, and resolving an unknown one with evidence. The operator's
//! name from the token is recorded as the actor.

use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use axum::response::Response;
use handover_ledger::{ListFilter, OperationId, ResolvedAs, Scope};
use serde_json::Value;

use super::wire::{self, Decision, ListQuery, ResolveBody};
use super::{LedgerBody, from_router, misplaced, path_error, path_id, query_error, record_answer};
use crate::api_error::ApiError;
use crate::auth::Operator;
use crate::state::GatewayState;

pub(crate) async fn list(
    State(state): State<GatewayState>,
    _op: Operator,
    query: Result<Query<Vec<(String, String)>>, QueryRejection>,
) -> Result<Response, ApiError> {
    let Query(pairs) = query.map_err(query_error)?;
    let q = ListQuery::from_pairs(pairs)?;
    let scope = match q.scope.as_deref() {
        None => None,
        Some(s) => Some(
            Scope::new(s)
                .map_err(|e| ApiError::invalid("invalid_query", "scope", e.to_string()))?,
        ),
    };
    let after = match (&q.after_scope, &q.after_key) {
        (None, None) => None,
        (Some(s), Some(k)) => Some(OperationId::new(s, k).map_err(|e| {
            let param = format!("after_{}", e.field());
            ApiError::invalid("invalid_query", param, e.to_string())
        })?),
        (None, Some(_)) => return Err(together("after_scope")),
        (Some(_), None) => return Err(together("after_key")),
    };
    let filter = ListFilter {
        state: wire::state_filter(q.state.as_deref())
            .map_err(|m| ApiError::invalid("invalid_query", "state", m))?,
        scope,
        limit: Some(q.limit()?),
        after,
        ..ListFilter::default()
    };
    super::list::list_answer(&state, &filter, true).await
}

pub(crate) async fn get(
    State(state): State<GatewayState>,
    _op: Operator,
    path: Result<Path<(String, String)>, PathRejection>,
) -> Result<Response, ApiError> {
    let Path((scope, key)) = path.map_err(path_error)?;
    super::show(&state, &path_id(&scope, &key)?).await
}

pub(crate) async fn resolve(
    State(state): State<GatewayState>,
    op: Operator,
    path: Result<Path<(String, String)>, PathRejection>,
    LedgerBody(body): LedgerBody<ResolveBody>,
) -> Result<Response, ApiError> {
    let Path((scope, key)) = path.map_err(path_error)?;
    let id = path_id(&scope, &key)?;
    let decision = body.outcome;
    if body.evidence.trim().is_empty() {
        return Err(ApiError::invalid(
            "invalid_field",
            "evidence",
            "evidence: required to resolve an operation",
        ));
    }
    // A confirmation records a result, a rejection a reason (what a retry
    // is told); each with the evidence. A field the decision has no place
    // for is refused rather than dropped, as `ops resolve` refuses it:
    // the operator would believe it recorded.
    match decision {
        Decision::Confirmed if body.reason.is_some() => {
            return Err(misplaced(
                "reason",
                "confirmed",
                "its result and evidence (say why in evidence)",
            ));
        }
        Decision::Rejected if body.result.is_some() => {
            return Err(misplaced("result", "rejected", "its reason and evidence"));
        }
        _ => {}
    }
    let outcome = match decision {
        Decision::Confirmed => ResolvedAs::Confirmed {
            result: body.result.unwrap_or(Value::Null),
        },
        Decision::Rejected => ResolvedAs::Rejected {
            reason: body
                .reason
                .filter(|r| !r.trim().is_empty())
                .ok_or_else(|| {
                    ApiError::invalid(
                        "invalid_field",
                        "reason",
                        "reason: required for outcome \"rejected\"",
                    )
                })?,
        },
    };
    let rec = state
        .gate()
        .resolve(
            &id,
            outcome,
            &body.evidence,
            &format!("operator:{}", op.name),
        )
        .await
        .map_err(from_router)?;
    Ok(record_answer(&rec))
}

/// `missing` is needed with the other half of the page cursor.
fn together(missing: &str) -> ApiError {
    ApiError::invalid(
        "invalid_query",
        missing,
        format!(
            "{missing}: required with the other after_* parameter (both come from the previous page's next)"
        ),
    )
}
