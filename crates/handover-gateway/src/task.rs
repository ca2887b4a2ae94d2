//! `x-handover-task`: one budget per user task across HTTP calls.
//!
//! Without the header every call is its own task with a fresh budget (the
//! policy's deadline, `max_requests` and cost ceiling). With it, every call
//! naming the same task id — scoped by the client's token, like operation
//! keys — draws from one budget kept in the ledger's store, so replicas
//! sharing the store share it exactly. The first call fixes the policy and
//! starts the deadline; a call naming another policy is refused (409
//! `task_policy_mismatch`). Answers under a task carry
//! `x-handover-budget-remaining: requests=N, ms=N, cost=X` (`cost=unlimited`
//! without a ceiling). See `docs/gateway.md`, "Task budgets".

use std::sync::Arc;

use axum::http::{HeaderMap, HeaderValue, StatusCode};
use handover_ledger::{TaskBudget, TaskBudgets, TaskId};
use handover_router::RouterError;
use handover_router::config::{CommitPoint, Route};
use handover_router::route::Task;

use crate::api_error::ApiError;
use crate::auth::Client;
use crate::state::GatewayState;

/// The request header naming the user task.
pub(crate) const TASK_HEADER: &str = "x-handover-task";
/// The request header choosing where this call's stream is committed
/// (`first_token` or `complete`), overriding the policy's `commit_point`.
pub(crate) const COMMIT_POINT_HEADER: &str = "x-handover-commit-point";
/// The response header with what is left of the task's budget.
pub(crate) const REMAINING_HEADER: &str = "x-handover-budget-remaining";

/// The task id a request names, in the client's scope (`None`: no header).
fn task_id(headers: &HeaderMap, client: &Client) -> Result<Option<TaskId>, ApiError> {
    let invalid = |reason: &str| {
        ApiError::invalid(
            "invalid_header",
            TASK_HEADER,
            format!("{TASK_HEADER}: {reason}"),
        )
    };
    // `one`'s message names the header already.
    let one = crate::headers::one(headers, TASK_HEADER)
        .map_err(|m| ApiError::invalid("invalid_header", TASK_HEADER, m))?;
    let Some(value) = one else {
        return Ok(None);
    };
    let text = value
        .to_str()
        .map_err(|_| invalid("must be visible ASCII (0x21..=0x7e)"))?;
    TaskId::new(client.scope.as_str(), text)
        .map(Some)
        .map_err(|e| invalid(e.reason()))
}

/// The commit point a request asks for in `x-handover-commit-point`
/// (`None`: no header, the policy's applies).
fn commit_point(headers: &HeaderMap) -> Result<Option<CommitPoint>, ApiError> {
    let one = crate::headers::one(headers, COMMIT_POINT_HEADER)
        .map_err(|m| ApiError::invalid("invalid_header", COMMIT_POINT_HEADER, m))?;
    let Some(value) = one else {
        return Ok(None);
    };
    value
        .to_str()
        .ok()
        .and_then(CommitPoint::from_name)
        .map(Some)
        .ok_or_else(|| {
            ApiError::invalid(
                "invalid_header",
                COMMIT_POINT_HEADER,
                format!("{COMMIT_POINT_HEADER}: expected \"first_token\" or \"complete\""),
            )
        })
}

/// The task a call runs under: the one its `x-handover-task` names (joined
/// in the ledger's store), or a fresh one of `route`; with the commit point
/// `x-handover-commit-point` asks for. Both headers are checked before
/// anything is opened.
pub(crate) async fn open(
    state: &GatewayState,
    route: &Route,
    client: &Client,
    headers: &HeaderMap,
) -> Result<Task, ApiError> {
    let point = commit_point(headers)?;
    let task = match task_id(headers, client)? {
        None => state.router().task_for(route).map_err(|e| refused(&e))?,
        Some(id) => {
            let store: Arc<dyn TaskBudgets> = state.ledger().clone();
            state
                .router()
                .join_task_for(route, store, &id)
                .await
                .map_err(|e| refused(&e))?
        }
    };
    Ok(match point {
        Some(p) => task.with_commit_point(p),
        None => task,
    })
}

fn refused(e: &RouterError) -> ApiError {
    match e {
        RouterError::TaskPolicyMismatch { .. } => ApiError::new(
            StatusCode::CONFLICT,
            "conflict_error",
            "task_policy_mismatch",
            e.to_string(),
        )
        .with_param(TASK_HEADER)
        .with_header("x-should-retry", HeaderValue::from_static("false")),
        // The budget store did not answer: nothing was sent and nothing
        // spent, so the answer's `Retry-After` stands (an SDK may retry).
        RouterError::Ledger(l) => ApiError::ledger(l),
        other => super::openai::chat::router_error(other),
    }
}

/// `requests=N, ms=N, cost=X` (`cost=unlimited` without a ceiling).
fn remaining_value(view: &TaskBudget, ms: u128) -> Option<HeaderValue> {
    let cost = view
        .cost_left()
        .map_or_else(|| "unlimited".to_owned(), |c| format!("{c:.6}"));
    let text = format!("requests={}, ms={ms}, cost={cost}", view.requests_left());
    HeaderValue::from_str(&text).ok()
}

/// `x-handover-budget-remaining` for a task whose budget lives in the store
/// (`None` for a call without `x-handover-task`).
pub(crate) fn remaining(task: &Task) -> Option<HeaderValue> {
    let view = task.budget().task_budget()?;
    remaining_value(&view, task.budget().remaining().as_millis())
}

/// For the operations API: the task a call names (`None`: no header, or
/// no budget yet). A task's budget is opened by its first model call (its
/// policy sets the budget); an operation under a task id no model call has
/// opened yet has no deadline to run on. Once the task exists, an
/// executor's work is timed against its deadline, so `check` refuses once
/// it has passed (504 `budget_exhausted`, nothing claimed or dispatched).
/// Recording an outcome is never refused.
pub(crate) async fn for_operation(
    state: &GatewayState,
    client: &Client,
    headers: &HeaderMap,
    check: bool,
) -> Result<Option<TaskBudget>, ApiError> {
    let Some(id) = task_id(headers, client)? else {
        return Ok(None);
    };
    let Some(view) = state
        .ledger()
        .task_budget(&id)
        .await
        .map_err(|e| ApiError::ledger(&e))?
    else {
        return Ok(None);
    };
    if check && view.time_left().is_zero() {
        let err = ApiError::new(
            StatusCode::GATEWAY_TIMEOUT,
            "server_error",
            "budget_exhausted",
            format!(
                "task {:?} is past its deadline; nothing was claimed or dispatched",
                id.task.as_str()
            ),
        )
        .with_header("x-should-retry", HeaderValue::from_static("false"));
        return Err(with_view(err, &view));
    }
    Ok(Some(view))
}

fn with_view(err: ApiError, view: &TaskBudget) -> ApiError {
    match remaining_value(view, view.time_left().as_millis()) {
        Some(v) => err.with_header(REMAINING_HEADER, v),
        None => err,
    }
}

/// Adds [`REMAINING_HEADER`] for an operations call under a task.
pub(crate) fn add_view(headers: &mut HeaderMap, view: Option<&TaskBudget>) {
    if let Some(v) = view.and_then(|v| remaining_value(v, v.time_left().as_millis())) {
        headers.insert(REMAINING_HEADER, v);
    }
}

/// Adds [`REMAINING_HEADER`] to `headers` for a task under `x-handover-task`.
pub(crate) fn add_remaining(headers: &mut HeaderMap, task: &Task) {
    if let Some(v) = remaining(task) {
        headers.insert(REMAINING_HEADER, v);
    }
}

impl ApiError {
    /// Adds [`REMAINING_HEADER`] for a task under `x-handover-task`.
    pub(crate) fn with_remaining(self, task: &Task) -> Self {
        match remaining(task) {
            Some(v) => self.with_header(REMAINING_HEADER, v),
            None => self,
        }
    }
}
