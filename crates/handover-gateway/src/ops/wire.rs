//! Request bodies and answer shapes of the operations API.

use axum::extract::{FromRequest, Request};
use handover_ledger::{ApproveOutcome, OperationRequest, StateKind};
use handover_router::protocol::{NotStarted, Started};
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};

use crate::api_error::ApiError;
use crate::body;

/// A JSON body of type `T` whose values the ledger records (params,
/// results, metadata): parsed naming any top-level field that is given
/// twice, missing, unknown or of the wrong type (`crate::fields`), then
/// every number in it is
/// checked *as sent* against I-JSON, before a parser could round it
/// (`params.items[2].batch: integer 9007199254740993 is outside …`).
/// Nothing is done with a body that fails.
#[derive(Debug)]
pub(crate) struct LedgerBody<T>(pub(crate) T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for LedgerBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> Result<Self, Self::Rejection> {
        let bytes = body::read(req, state).await?;
        let text = std::str::from_utf8(&bytes).ok();
        let unrecordable = |e: handover_ledger::ValidationError| {
            // The I-JSON hint ("send it as a string") is wrong for the one
            // number the API itself hands out.
            if e.field() == "epoch" {
                return ApiError::invalid(
                    "invalid_field",
                    "epoch",
                    "epoch: not an epoch a claim was given (epochs are whole numbers below 2^53)",
                );
            }
            ApiError::invalid("invalid_field", e.field(), e.to_string())
        };
        let value: T = crate::fields::parse(&bytes).map_err(|e| {
            // A number past a double (`1e400`) fails the parse itself, as
            // a body that is not JSON; the scan names where it is and why.
            // An error that already names a field stays as it is.
            if !matches!(e.param.as_deref(), None | Some("body")) {
                return e;
            }
            text.and_then(|t| handover_ledger::validate_json_text(t).err())
                .map_or(e, unrecordable)
        })?;
        // Parsed, so the text is valid JSON (UTF-8 included).
        handover_ledger::validate_json_text(text.unwrap_or_default()).map_err(unrecordable)?;
        Ok(Self(value))
    }
}

/// `POST /v1/operations` body. The scope is never here: it is the client's.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct BeginBody {
    pub(crate) action: String,
    pub(crate) params: Value,
}

/// `POST /v1/operations/{key}/approve` body: what the user approved.
pub(crate) type ApproveBody = BeginBody;

/// `POST /v1/operations/{key}/dispatch` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct DispatchBody {
    pub(crate) epoch: u64,
    pub(crate) executor: Option<String>,
    pub(crate) metadata: Option<Value>,
}

/// What the holder learned from the destination.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum OutcomeKind {
    Confirmed,
    Rejected,
    Unknown,
    NotSent,
    Abandoned,
}

/// `POST /v1/operations/{key}/outcome` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct OutcomeBody {
    pub(crate) epoch: u64,
    pub(crate) outcome: OutcomeKind,
    pub(crate) result: Option<Value>,
    pub(crate) reason: Option<String>,
    pub(crate) evidence: Option<String>,
}

/// An operator's decision.
#[derive(Debug, Clone, Copy, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Decision {
    Confirmed,
    Rejected,
}

/// `POST /v1/admin/operations/{scope}/{key}/resolve` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct ResolveBody {
    pub(crate) outcome: Decision,
    pub(crate) result: Option<Value>,
    pub(crate) reason: Option<String>,
    /// Required (a missing field is named like any other: see `fields`),
    /// and not empty.
    pub(crate) evidence: String,
}

/// `?state=…&limit=…&after_key=…` (`state=all` lists every state; the
/// admin list also takes `scope` and `after_scope`).
#[derive(Debug, Default)]
pub(crate) struct ListQuery {
    pub(crate) state: Option<String>,
    pub(crate) limit: Option<usize>,
    pub(crate) scope: Option<String>,
    /// Where the previous page ended: its answer's `next`.
    pub(crate) after_scope: Option<String>,
    pub(crate) after_key: Option<String>,
}

impl ListQuery {
    /// The query's parameters, each named in the error when it is
    /// unknown, given twice or no number (serde's query reader names
    /// none of them: "invalid digit found in string").
    pub(crate) fn from_pairs(pairs: Vec<(String, String)>) -> Result<Self, ApiError> {
        let bad = |param: &str, message: String| ApiError::invalid("invalid_query", param, message);
        let mut q = Self::default();
        for (name, value) in pairs {
            let given_twice = match name.as_str() {
                "state" => q.state.replace(value).is_some(),
                "scope" => q.scope.replace(value).is_some(),
                "after_scope" => q.after_scope.replace(value).is_some(),
                "after_key" => q.after_key.replace(value).is_some(),
                "limit" => {
                    let n = value.parse().map_err(|_| {
                        bad(
                            "limit",
                            format!("limit: {value:?} is not a whole number 1 to 1000"),
                        )
                    })?;
                    q.limit.replace(n).is_some()
                }
                _ => {
                    let shown: String = name.chars().take(64).collect();
                    return Err(bad(
                        &shown,
                        format!(
                            "{shown}: unknown query parameter; expected one of state, limit, after_key (and for operators scope, after_scope)"
                        ),
                    ));
                }
            };
            if given_twice {
                return Err(bad(&name, format!("{name}: given twice; give it once")));
            }
        }
        Ok(q)
    }

    /// The page size asked for: 100 when absent, refused (naming `limit`)
    /// outside 1..=1000 rather than silently answering an empty or a
    /// shorter page than asked.
    pub(crate) fn limit(&self) -> Result<usize, ApiError> {
        match self.limit.unwrap_or(100) {
            n @ 1..=1000 => Ok(n),
            _ => Err(ApiError::invalid(
                "invalid_query",
                "limit",
                "limit: must be 1 to 1000",
            )),
        }
    }
}

/// The `started` answer: the claim the caller now holds.
pub(crate) fn started(req: &OperationRequest, started: &Started) -> Value {
    let Started {
        claim,
        resend,
        contract: c,
    } = started;
    json!({
        "status": "started",
        "resend": resend,
        "operation": operation(req),
        "claim": {
            "epoch": claim.epoch,
            "lease_until": claim.lease_until,
            "destination_key": claim.destination_key,
            "attempt_number": claim.attempt_number,
        },
        "contract": {
            "idempotency_header": c.idempotency.as_ref().map(|i| &i.header),
            "idempotency_retention_s": c.idempotency.as_ref().map(|i| i.retention.as_secs()),
            "lease_s": c.lease.as_secs(),
            "timeout_s": c.timeout.as_secs(),
        },
    })
}

/// The operation as the caller named it.
fn operation(req: &OperationRequest) -> Value {
    json!({
        "scope": req.id().scope,
        "key": req.id().key,
        "action": req.action(),
        "fingerprint": req.fingerprint(),
    })
}

/// The answer to an approval: `(HTTP status, body)`, as `begin` answers
/// when it does not start.
pub(crate) fn approved(
    outcome: ApproveOutcome,
    req: &OperationRequest,
    own_scope: &handover_ledger::Scope,
) -> (u16, Value) {
    let as_begin = match outcome {
        ApproveOutcome::Planned => {
            return (
                201,
                json!({"status": "planned", "operation": operation(req)}),
            );
        }
        ApproveOutcome::AlreadyApproved { state } => {
            return (
                200,
                json!({"status": "already_approved", "state": state, "operation": operation(req)}),
            );
        }
        ApproveOutcome::Conflict {
            recorded,
            requested,
        } => NotStarted::Conflict {
            recorded,
            requested,
        },
        ApproveOutcome::Replayed(t) => NotStarted::Replayed(t),
        ApproveOutcome::Cancelled { reason } => NotStarted::Cancelled { reason },
    };
    not_started(as_begin, own_scope)
}

fn error(code: &str, message: &str) -> Value {
    json!({"message": message, "type": "conflict_error", "param": null, "code": code})
}

/// Every answer but `started`: `(HTTP status, body)`.
pub(crate) fn not_started(outcome: NotStarted, own_scope: &handover_ledger::Scope) -> (u16, Value) {
    match outcome {
        NotStarted::Replayed(terminal) => (200, json!({"status": "replayed", "outcome": terminal})),
        NotStarted::InProgress {
            holder,
            state,
            lease_until,
        } => (
            409,
            json!({"status": "in_progress", "holder": holder, "state": state,
                "lease_until": lease_until,
                "error": error("in_progress", "another request holds this operation; retry after lease_until")}),
        ),
        NotStarted::Conflict {
            recorded,
            requested,
        } => (
            422,
            json!({"status": "conflict", "recorded": recorded, "requested": requested,
                "error": error("params_mismatch",
                    "this Idempotency-Key was approved with other parameters; nothing was executed")}),
        ),
        NotStarted::Unresolved(info) => (
            423,
            json!({"status": "unresolved", "unknown": info,
                "error": error("unresolved",
                    "the outcome of this operation is unknown; writes are blocked until it is resolved")}),
        ),
        NotStarted::Suspended { blocked_by, info } => {
            // Never reveal another scope's operation (an `action`-wide
            // block): not its key, nor the reason its client reported
            // (free text), nor when; only who owns it and when it is
            // checked next.
            let (by, info) = if blocked_by.scope == *own_scope {
                (
                    json!({"scope": blocked_by.scope, "key": blocked_by.key}),
                    json!(info),
                )
            } else {
                (
                    json!({"scope": null, "key": null}),
                    json!({"owner": info.owner, "next_check_at": info.next_check_at}),
                )
            };
            (
                423,
                json!({"status": "suspended", "blocked_by": by, "unknown": info,
                    "error": error("suspended",
                        "another operation of this action has an unknown outcome; writes are blocked")}),
            )
        }
        NotStarted::Cancelled { reason } => (
            410,
            json!({"status": "cancelled", "reason": reason,
                "error": error("cancelled", "approval of this operation was withdrawn")}),
        ),
    }
}

/// Parses `?state=`: `None` for `all`, unknown by default.
pub(crate) fn state_filter(s: Option<&str>) -> Result<Option<StateKind>, String> {
    match s {
        None => Ok(Some(StateKind::Unknown)),
        Some("all") => Ok(None),
        Some(s) => s
            .parse::<StateKind>()
            .map(Some)
            .map_err(|_| format!("state: unknown state {s:?} (expected a state name or \"all\")")),
    }
}
