//! Task budgets (DESIGN §7): one budget per user task, kept in the ledger's
//! store so every replica that serves a call of the task draws from it.
//!
//! A task is named by the client (`(scope, task)`, validated like an
//! operation identity). The first call opens it under a policy, fixing its
//! absolute deadline, its maximum number of HTTP requests and its optional
//! cost ceiling; every later call joins it. Requests are **reserved** one
//! at a time before they are sent (atomic: the store never hands out more
//! than `max_requests`, however many replicas ask at once); a reservation
//! that was provably not used can be given back; cost is charged after an
//! answer. After `deadline + grace` the record has **expired**: it answers
//! as absent (the name may open a new task) and [`crate::Ledger::purge`]
//! deletes it.
//!
//! The transitions are pure functions (no I/O) that every backend runs
//! through the one job driver, like the operation state machine.

use std::time::Duration;

use crate::clock::Timestamp;
use crate::error::{LedgerError, ValidationError};
use crate::identity::{Scope, TaskName};
use crate::machine::{Change, Effect, Step};

/// The identity of a task budget: the client's scope and its task name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub struct TaskId {
    /// Whose task (e.g. the gateway client's scope).
    pub scope: Scope,
    /// The client's name for its user task.
    pub task: TaskName,
}

impl TaskId {
    /// Validates both parts; the error names `scope` or `task`.
    pub fn new(scope: &str, task: &str) -> Result<Self, ValidationError> {
        Ok(Self {
            scope: Scope::new(scope)?,
            task: TaskName::new(task)?,
        })
    }
}

impl std::fmt::Display for TaskId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "scope={} task={}", self.scope, self.task)
    }
}

/// What a task is opened with (taken from the policy of its first call).
#[derive(Clone, Debug, PartialEq)]
pub struct TaskLimits {
    /// The policy's name; a later call naming another policy is refused.
    pub policy: String,
    /// Time from the first call to the absolute deadline.
    pub deadline: Duration,
    /// HTTP requests the whole task may send.
    pub max_requests: u32,
    /// Cost ceiling in USD, if any.
    pub max_cost: Option<f64>,
    /// How long after the deadline the record is kept (then it expires).
    pub grace: Duration,
}

/// A task budget as stored, and as every answer reports it.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct TaskBudget {
    /// Its identity.
    pub id: TaskId,
    /// The policy of its first call.
    pub policy: String,
    /// When the first call opened it.
    pub created_at: Timestamp,
    /// The absolute deadline.
    pub deadline_at: Timestamp,
    /// After this the record is gone (deadline plus grace).
    pub expires_at: Timestamp,
    /// HTTP requests the task may send.
    pub max_requests: u32,
    /// HTTP requests reserved so far (sent, or held by a call in flight).
    pub requests: u32,
    /// Cost ceiling in USD, if any.
    pub max_cost: Option<f64>,
    /// Cost charged so far, in USD.
    pub cost: f64,
    /// The store's time when this copy was read: what remains is computed
    /// from it, so callers never compare clocks of different machines.
    pub as_of: Timestamp,
}

impl TaskBudget {
    /// Requests still available.
    pub fn requests_left(&self) -> u32 {
        self.max_requests.saturating_sub(self.requests)
    }

    /// Time left before the deadline, as of [`TaskBudget::as_of`].
    pub fn time_left(&self) -> Duration {
        self.deadline_at.saturating_since(self.as_of)
    }

    /// Cost still available (`None`: no ceiling).
    pub fn cost_left(&self) -> Option<f64> {
        self.max_cost.map(|m| (m - self.cost).max(0.0))
    }

    /// Why no further request may be reserved, if none may.
    pub fn exhausted(&self) -> Option<TaskExhausted> {
        if self.time_left().is_zero() {
            Some(TaskExhausted::Deadline)
        } else if self.requests >= self.max_requests {
            Some(TaskExhausted::Requests)
        } else if self.max_cost.is_some_and(|m| self.cost >= m) {
            Some(TaskExhausted::Cost)
        } else {
            None
        }
    }

    fn at(&self, now: Timestamp) -> Self {
        Self {
            as_of: now,
            ..self.clone()
        }
    }
}

/// Why a task's budget refuses another request.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub enum TaskExhausted {
    /// Its deadline has passed.
    Deadline,
    /// `max_requests` have been reserved.
    Requests,
    /// Its cost ceiling has been reached.
    Cost,
}

/// The answer to [`crate::TaskBudgets::open_task`].
#[derive(Clone, Debug, PartialEq)]
pub enum TaskOpen {
    /// No live task of that name: opened now, with these limits.
    Opened(TaskBudget),
    /// The task exists under the same policy: its budget (possibly exhausted).
    Joined(TaskBudget),
    /// The task exists under another policy. Nothing changed.
    PolicyMismatch(TaskBudget),
}

/// The answer to [`crate::TaskBudgets::reserve_request`].
#[derive(Clone, Debug, PartialEq)]
pub enum Reservation {
    /// One request is now reserved for the caller.
    Reserved(TaskBudget),
    /// Nothing reserved: the budget is spent.
    Exhausted(TaskExhausted, TaskBudget),
}

/// Task budgets in the ledger's store. Object-safe; every [`crate::Ledger`]
/// is one (hold an `Arc<dyn Ledger>` and upcast, or call through it).
///
/// Contract for every implementation (checked by the `conformance` suite):
/// * each method checks and writes in one atomic step: however many
///   callers (threads, processes, replicas on one store) reserve at once,
///   at most `max_requests` reservations succeed over the task's life,
///   less those given back;
/// * nothing is reserved once the deadline (store time) has passed or the
///   cost ceiling is reached;
/// * a record past `deadline + grace` answers as absent (`open_task` opens
///   a new task under that name) and is deleted by [`crate::Ledger::purge`];
/// * if the store cannot be reached the call fails with
///   [`LedgerError::Unavailable`]: treat it as exhausted (fail closed).
#[async_trait::async_trait]
pub trait TaskBudgets: Send + Sync + std::fmt::Debug {
    /// Opens the task with `limits` if no live task has that identity;
    /// joins it if one exists under the same policy; otherwise reports the
    /// mismatch and changes nothing.
    async fn open_task(&self, id: &TaskId, limits: &TaskLimits) -> Result<TaskOpen, LedgerError>;
    /// Reserves one HTTP request; call before sending it.
    async fn reserve_request(&self, id: &TaskId) -> Result<Reservation, LedgerError>;
    /// Gives back `n` reservations that were provably never sent.
    async fn release_requests(&self, id: &TaskId, n: u32) -> Result<TaskBudget, LedgerError>;
    /// Adds `usd` (finite, non-negative) to the task's cost.
    async fn charge_task(&self, id: &TaskId, usd: f64) -> Result<TaskBudget, LedgerError>;
    /// The live budget, if any.
    async fn task_budget(&self, id: &TaskId) -> Result<Option<TaskBudget>, LedgerError>;
}

fn live(cur: Option<&TaskBudget>, now: Timestamp) -> Option<&TaskBudget> {
    cur.filter(|b| b.expires_at > now)
}

fn found<'a>(
    cur: Option<&'a TaskBudget>,
    id: &TaskId,
    now: Timestamp,
) -> Result<&'a TaskBudget, LedgerError> {
    live(cur, now).ok_or_else(|| LedgerError::TaskNotFound { id: id.clone() })
}

fn save(b: TaskBudget) -> Effect {
    Effect {
        tasks: vec![b],
        ..Effect::default()
    }
}

fn check_limits(limits: &TaskLimits) -> Result<(), ValidationError> {
    if limits.policy.is_empty() {
        return Err(ValidationError::new("policy", "must not be empty"));
    }
    if limits.max_cost.is_some_and(|c| !c.is_finite() || c < 0.0) {
        return Err(ValidationError::new(
            "max_cost",
            "must be a finite, non-negative number",
        ));
    }
    Ok(())
}

/// Opens the task (absent or expired) or joins it (same policy).
pub(crate) fn open(
    cur: Option<&TaskBudget>,
    id: &TaskId,
    limits: &TaskLimits,
    now: Timestamp,
) -> Step<TaskOpen> {
    check_limits(limits)?;
    if let Some(b) = live(cur, now) {
        let b = b.at(now);
        return Ok(Change::answer(if b.policy == limits.policy {
            TaskOpen::Joined(b)
        } else {
            TaskOpen::PolicyMismatch(b)
        }));
    }
    let deadline_at = now.plus(limits.deadline);
    let b = TaskBudget {
        id: id.clone(),
        policy: limits.policy.clone(),
        created_at: now,
        deadline_at,
        expires_at: deadline_at.plus(limits.grace),
        max_requests: limits.max_requests,
        requests: 0,
        max_cost: limits.max_cost,
        cost: 0.0,
        as_of: now,
    };
    Ok(Change::new(save(b.clone()), TaskOpen::Opened(b)))
}

/// Reserves one request if the deadline, the request count and the cost
/// ceiling all allow it.
pub(crate) fn reserve(cur: Option<&TaskBudget>, id: &TaskId, now: Timestamp) -> Step<Reservation> {
    let b = found(cur, id, now)?.at(now);
    if let Some(why) = b.exhausted() {
        return Ok(Change::answer(Reservation::Exhausted(why, b)));
    }
    let b = TaskBudget {
        requests: b.requests + 1,
        ..b
    };
    Ok(Change::new(save(b.clone()), Reservation::Reserved(b)))
}

/// Gives back up to `n` reserved requests that were never sent.
pub(crate) fn release(
    cur: Option<&TaskBudget>,
    id: &TaskId,
    n: u32,
    now: Timestamp,
) -> Step<TaskBudget> {
    let b = found(cur, id, now)?.at(now);
    if n == 0 {
        return Ok(Change::answer(b));
    }
    let b = TaskBudget {
        requests: b.requests.saturating_sub(n),
        ..b
    };
    Ok(Change::new(save(b.clone()), b))
}

/// Adds `usd` to the task's cost.
pub(crate) fn charge(
    cur: Option<&TaskBudget>,
    id: &TaskId,
    usd: f64,
    now: Timestamp,
) -> Step<TaskBudget> {
    if !usd.is_finite() || usd < 0.0 {
        return Err(ValidationError::new("cost", "must be a finite, non-negative number").into());
    }
    let b = found(cur, id, now)?.at(now);
    if usd == 0.0 {
        return Ok(Change::answer(b));
    }
    let b = TaskBudget {
        cost: b.cost + usd,
        ..b
    };
    Ok(Change::new(save(b.clone()), b))
}

/// The live budget, if any.
pub(crate) fn read(cur: Option<&TaskBudget>, now: Timestamp) -> Step<Option<TaskBudget>> {
    Ok(Change::answer(live(cur, now).map(|b| b.at(now))))
}
