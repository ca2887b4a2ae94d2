//! The pull API, for agents that must run a destination's lookup
//! themselves (the destination is reachable only from them, or needs their
//! credentials): lease the due unknown operations of the caller's own scope
//! whose action has a lookup contract but no HTTP lookup Handover runs,
//! run the lookup, report what it found. The report goes through the
//! reconciler's own rules (`Reconciler::apply_lookup`): found with the
//! approved parameters confirms, other parameters or several records go to
//! review as diverged, an empty answer inside the visibility lag proves
//! nothing, an error proves nothing. Leased operations are held for
//! `lease_s` (default 60 s): no other client, and not `serve`'s own
//! reconciler, gets them meanwhile; after it they are due again.

use std::time::Duration;

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, State};
use axum::response::Response;
use handover_ledger::{ActionName, DueFilter, State as OpState};
use handover_router::config::Config;
use handover_router::reconcile::FoundRecord;
use serde::Deserialize;
use serde_json::{Value, json};

use super::{LedgerBody, from_router, json_status, misplaced, not_found, path_error, path_id};
use crate::api_error::ApiError;
use crate::auth::Client;
use crate::state::GatewayState;

/// Actions whose lookup agents run: a lookup contract without a `url` and
/// without an MCP lookup tool (those `handover mcp` runs itself).
pub(crate) fn pulled_actions(config: &Config) -> Vec<ActionName> {
    let mcp_looked_up = |name: &str| {
        mcp_lookup_actions(config)
            .iter()
            .any(|a| a.as_str() == name)
    };
    config
        .actions()
        .iter()
        .filter(|(name, a)| {
            a.lookup.is_some() && a.http_lookup.is_none() && !mcp_looked_up(name.as_str())
        })
        .filter_map(|(name, _)| ActionName::new(name).ok())
        .collect()
}

/// Actions `handover mcp` looks up through an MCP tool: neither agents
/// (the pull API) nor `serve`'s reconciler touch their unknown operations.
pub(crate) fn mcp_lookup_actions(config: &Config) -> Vec<ActionName> {
    config
        .mcp()
        .map(|m| {
            m.tools
                .iter()
                .filter(|(_, t)| t.lookup.is_some())
                .filter_map(|(name, _)| ActionName::new(name).ok())
                .collect()
        })
        .unwrap_or_default()
}

/// `POST /v1/reconcile/lease` body.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct LeaseBody {
    limit: Option<usize>,
    lease_s: Option<u64>,
}

/// `POST /v1/reconcile/{key}/report` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ReportBody {
    outcome: LookupAnswer,
    #[serde(default)]
    records: Vec<ReportedRecord>,
    error: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize)]
#[serde(rename_all = "snake_case")]
enum LookupAnswer {
    Found,
    NotFound,
    Error,
}

/// One record the agent found, with its parameters mapped back into the
/// approved form (compared as JSON) and the result to record.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReportedRecord {
    params: Value,
    result: Value,
}

pub(crate) async fn lease(
    State(state): State<GatewayState>,
    client: Client,
    LedgerBody(body): LedgerBody<LeaseBody>,
) -> Result<Response, ApiError> {
    let limit = body.limit.unwrap_or(10);
    if !(1..=100).contains(&limit) {
        return Err(ApiError::invalid(
            "invalid_field",
            "limit",
            "limit: must be 1 to 100",
        ));
    }
    let lease_s = body.lease_s.unwrap_or(60);
    if !(1..=3600).contains(&lease_s) {
        return Err(ApiError::invalid(
            "invalid_field",
            "lease_s",
            "lease_s: must be 1 to 3600 seconds",
        ));
    }
    let filter = DueFilter {
        scope: Some(client.scope.clone()),
        actions: Some(pulled_actions(state.config())),
        except_actions: Vec::new(),
    };
    let taken = state
        .ledger()
        .take_due_unknown(&filter, limit, Duration::from_secs(lease_s))
        .await
        .map_err(|e| ApiError::ledger(&e))?;
    let ops: Vec<Value> = taken
        .iter()
        .filter_map(|rec| {
            let OpState::Unknown(info) = &rec.state else {
                return None;
            };
            Some(json!({
                "key": rec.id.key,
                "action": rec.action,
                "params": rec.params,
                "destination_key": rec.destination_key,
                "unknown": info,
                "lease_until": info.next_check_at,
            }))
        })
        .collect();
    Ok(json_status(200, json!({"operations": ops})))
}

pub(crate) async fn report(
    State(state): State<GatewayState>,
    client: Client,
    key: Result<Path<String>, PathRejection>,
    LedgerBody(body): LedgerBody<ReportBody>,
) -> Result<Response, ApiError> {
    let Path(key) = key.map_err(path_error)?;
    let id = path_id(client.scope.as_str(), &key)?;
    // What the outcome does not record is refused, not dropped (see
    // `misplaced`): records with a miss, an error text with an answer.
    let (name, records) = match body.outcome {
        LookupAnswer::Found => ("found", "its records"),
        LookupAnswer::NotFound => ("not_found", "nothing but the miss"),
        LookupAnswer::Error => ("error", "its error"),
    };
    if !matches!(body.outcome, LookupAnswer::Found) && !body.records.is_empty() {
        return Err(misplaced("records", name, records));
    }
    if !matches!(body.outcome, LookupAnswer::Error) && body.error.is_some() {
        return Err(misplaced("error", name, records));
    }
    let answer = match body.outcome {
        LookupAnswer::Found if body.records.is_empty() => {
            return Err(ApiError::invalid(
                "invalid_field",
                "records",
                "records: at least one record is required for outcome \"found\"",
            ));
        }
        LookupAnswer::Found => Ok(body
            .records
            .into_iter()
            .map(|r| FoundRecord {
                params: r.params,
                result: r.result,
            })
            .collect()),
        LookupAnswer::NotFound => Ok(Vec::new()),
        LookupAnswer::Error => {
            Err(body.error.filter(|e| !e.trim().is_empty()).ok_or_else(|| {
                ApiError::invalid(
                    "invalid_field",
                    "error",
                    "error: required for outcome \"error\"",
                )
            })?)
        }
    };
    let rec = state
        .ledger()
        .get(&id)
        .await
        .map_err(|e| ApiError::ledger(&e))?
        .ok_or_else(|| not_found(&id))?;
    if !pulled_actions(state.config()).contains(&rec.action) {
        return Err(not_pullable(&key));
    }
    let reconciler = state
        .reconciler()
        .with_name(format!("client:{}", client.name));
    let Some(report) = reconciler
        .apply_lookup(&rec, answer)
        .await
        .map_err(from_router)?
    else {
        return Err(not_pullable(&key));
    };
    let rec = state
        .ledger()
        .get(&id)
        .await
        .map_err(|e| ApiError::ledger(&e))?
        .ok_or_else(|| not_found(&id))?;
    let outcome = if report.confirmed > 0 {
        "confirmed"
    } else if report.rejected > 0 {
        "rejected"
    } else if report.diverged > 0 {
        "diverged"
    } else {
        "still_unknown"
    };
    Ok(json_status(
        200,
        json!({"status": rec.state.kind(), "reconciliation": outcome, "operation": rec}),
    ))
}

fn not_pullable(key: &str) -> ApiError {
    ApiError::new(
        axum::http::StatusCode::CONFLICT,
        "conflict_error",
        "not_reconcilable",
        format!(
            "operation {key} is not an unknown operation awaiting a lookup by its agent \
             (resolved, in review, or its action's lookup is run by Handover)"
        ),
    )
}
