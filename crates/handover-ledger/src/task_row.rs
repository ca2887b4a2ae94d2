//! Flat row form of a [`TaskBudget`], shared by the SQL backends (one
//! column order for SQLite and PostgreSQL; no statements here).

use crate::clock::Timestamp;
use crate::error::LedgerError;
use crate::row::sql_row;
use crate::task::{TaskBudget, TaskId};

/// The columns of [`TaskRow`], in its field (and bind) order.
macro_rules! task_columns {
    () => {
        "scope, task, policy, created_at, deadline_at, expires_at, max_requests, requests, \
         max_cost, cost"
    };
}
pub(crate) use task_columns;

/// The columns a write may change (all but the identity), in bind order
/// after `scope, task`.
macro_rules! task_data_columns {
    () => {
        "policy, created_at, deadline_at, expires_at, max_requests, requests, max_cost, cost"
    };
}
pub(crate) use task_data_columns;

sql_row! {
    /// Column values of one `task_budgets` row.
    #[derive(Clone, Debug, PartialEq)]
    pub(crate) struct TaskRow {
        scope: String,
        task: String,
        policy: String,
        created_at: i64,
        deadline_at: i64,
        expires_at: i64,
        max_requests: i64,
        requests: i64,
        max_cost: Option<f64>,
        cost: f64,
    }
}

impl TaskRow {
    pub(crate) fn from_budget(b: &TaskBudget) -> Self {
        Self {
            scope: b.id.scope.to_string(),
            task: b.id.task.to_string(),
            policy: b.policy.clone(),
            created_at: b.created_at.0,
            deadline_at: b.deadline_at.0,
            expires_at: b.expires_at.0,
            max_requests: i64::from(b.max_requests),
            requests: i64::from(b.requests),
            max_cost: b.max_cost,
            cost: b.cost,
        }
    }

    /// The budget as stored (`as_of` is set by the transition that reads it).
    pub(crate) fn into_budget(self) -> Result<TaskBudget, LedgerError> {
        let corrupt = |what: &str, e: &dyn std::fmt::Display| {
            LedgerError::corrupt(format!("task_budgets.{what}: {e}"))
        };
        let count = |what: &str, v: i64| u32::try_from(v).map_err(|e| corrupt(what, &e));
        Ok(TaskBudget {
            id: TaskId::new(&self.scope, &self.task).map_err(|e| corrupt("scope/task", &e))?,
            max_requests: count("max_requests", self.max_requests)?,
            requests: count("requests", self.requests)?,
            policy: self.policy,
            created_at: Timestamp(self.created_at),
            deadline_at: Timestamp(self.deadline_at),
            expires_at: Timestamp(self.expires_at),
            max_cost: self.max_cost,
            cost: self.cost,
            as_of: Timestamp(self.created_at),
        })
    }
}
