//! The SQL statements of the PostgreSQL backend and its stored row type.
//!
//! Standard SQL only — `INSERT … ON CONFLICT`, `SELECT … FOR UPDATE [SKIP
//! LOCKED]`, partial indexes — so Postgres-wire distributed engines can serve
//! the same schema. `docs/ledger.md` lists them.

use crate::row::{OperationRow, attempt_columns, operation_columns, operation_data_columns};

/// `SELECT` of a record and its row version.
macro_rules! op_select {
    () => {
        concat!(
            "SELECT ",
            $crate::row::operation_columns!(),
            ", version FROM operations "
        )
    };
}
pub(super) use op_select;

/// Placeholders of the operation data columns (after `scope, key`).
macro_rules! op_data_values {
    () => {
        "$3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, $19, $20, \
         $21, $22, $23, $24"
    };
}

/// A record as stored, with the row version every write is conditional on.
#[derive(Debug, sqlx::FromRow)]
pub(super) struct Stored {
    #[sqlx(flatten)]
    pub(super) row: OperationRow,
    pub(super) version: i64,
}

/// One record, no lock (reads outside a write transaction).
pub(super) const GET: &str = concat!(op_select!(), "WHERE scope = $1 AND key = $2");

/// One record, row-locked until the transaction ends: every command that
/// writes a record reads it this way first, so check-and-write is atomic.
pub(super) const LOAD: &str = concat!(op_select!(), "WHERE scope = $1 AND key = $2 FOR UPDATE");

/// Another unresolved operation of the action, in the scope (`$2`, width
/// `scope`) or in any scope (`$2` NULL, width `action`). Served by the
/// partial index `operations_unresolved`.
pub(super) const BLOCKER: &str = concat!(
    op_select!(),
    "WHERE action = $1 AND (CAST($2 AS TEXT) IS NULL OR scope = $2) AND NOT (scope = $3 AND key = $4) \
     AND (state = 'unknown' OR (state = 'dispatched' AND (lease_until <= $5 OR dispatch_count > 1)) \
          OR (state = 'claimed' AND dispatch_count > 0)) \
     ORDER BY created_at, scope, key LIMIT 1"
);

/// Lease expiries to record. Rows another transaction holds are skipped: that
/// transaction records the expiry itself (every command settles what it loads).
pub(super) const DUE_EXPIRED: &str = concat!(
    op_select!(),
    "WHERE (state = 'dispatched' AND lease_until <= $1) \
     OR (state = 'claimed' AND dispatch_count > 0 AND lease_until <= $1) \
     FOR UPDATE SKIP LOCKED"
);

/// Whether any lease expiry is due (cheap check before `list`).
pub(super) const ANY_DUE: &str = "SELECT 1 FROM operations \
     WHERE (state = 'dispatched' AND lease_until <= $1) \
     OR (state = 'claimed' AND dispatch_count > 0 AND lease_until <= $1) LIMIT 1";

/// Unknown operations due for a check, for one reconciler: rows another
/// reconciler has locked are skipped, so several share the work.
pub(super) const TAKE_DUE_UNKNOWN: &str = concat!(
    op_select!(),
    "WHERE state = 'unknown' AND next_check_at <= $1 \
     AND ($3::text IS NULL OR scope = $3) \
     AND ($4::text[] IS NULL OR action = ANY($4)) \
     AND NOT (action = ANY($5::text[])) \
     ORDER BY next_check_at, created_at, scope, key LIMIT $2 FOR UPDATE SKIP LOCKED"
);

/// A new identity. `DO NOTHING` + the affected-row count tell the caller
/// whether another transaction inserted it first (then the command is re-run
/// against the stored row).
pub(super) const INSERT: &str = concat!(
    "INSERT INTO operations (",
    operation_columns!(),
    ") VALUES ($1, $2, ",
    op_data_values!(),
    ") ON CONFLICT (scope, key) DO NOTHING"
);

/// Every transition writes the whole row, guarded by the row version it was
/// computed from: under the row lock this always matches; for a command
/// computed from the ledger's cache, or if an engine ever let two writers
/// through, a changed row matches nothing and the command is re-run.
pub(super) const UPDATE: &str = concat!(
    "UPDATE operations SET (",
    operation_data_columns!(),
    ") = (",
    op_data_values!(),
    "), version = version + 1 WHERE scope = $1 AND key = $2 AND version = $25"
);

pub(super) const INSERT_ATTEMPT: &str = concat!(
    "INSERT INTO attempts (",
    attempt_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)"
);

pub(super) const FINISH_ATTEMPT: &str = "UPDATE attempts SET outcome = $1, finished_at = $2, \
     evidence = COALESCE($3, evidence) \
     WHERE scope = $4 AND key = $5 AND epoch = $6 AND kind = 'dispatch' AND outcome = 'pending'";

pub(super) const ATTEMPTS: &str = concat!(
    "SELECT ",
    attempt_columns!(),
    " FROM attempts WHERE scope = $1 AND key = $2 ORDER BY seq"
);

pub(super) const PURGE_ATTEMPTS: &str = "DELETE FROM attempts WHERE EXISTS (SELECT 1 \
     FROM operations o WHERE o.scope = attempts.scope AND o.key = attempts.key \
     AND o.decided_at IS NOT NULL AND o.decided_at <= $1)";

pub(super) const PURGE_DELETE: &str =
    "DELETE FROM operations WHERE decided_at IS NOT NULL AND decided_at <= $1";

pub(super) const PURGE_TOMBSTONE: &str = "UPDATE operations SET params = NULL, \
     result = CASE WHEN state = 'confirmed' THEN 'null' ELSE NULL END, \
     evidence = NULL, tombstone = TRUE, version = version + 1 \
     WHERE decided_at IS NOT NULL AND decided_at <= $1 AND tombstone = FALSE";

/// One task budget, row-locked until the transaction ends.
pub(super) const LOAD_TASK: &str = concat!(
    "SELECT ",
    crate::task_row::task_columns!(),
    " FROM task_budgets WHERE scope = $1 AND task = $2 FOR UPDATE"
);

/// A new task budget; inserts nothing if another transaction inserted it first.
pub(super) const INSERT_TASK: &str = concat!(
    "INSERT INTO task_budgets (",
    crate::task_row::task_columns!(),
    ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) ON CONFLICT (scope, task) DO NOTHING"
);

/// A task budget read `FOR UPDATE` in this transaction.
pub(super) const UPDATE_TASK: &str = concat!(
    "UPDATE task_budgets SET (",
    crate::task_row::task_data_columns!(),
    ") = ($3, $4, $5, $6, $7, $8, $9, $10) WHERE scope = $1 AND task = $2"
);

/// Task budgets past their deadline plus grace.
pub(super) const PURGE_TASKS: &str = "DELETE FROM task_budgets WHERE expires_at <= $1";
