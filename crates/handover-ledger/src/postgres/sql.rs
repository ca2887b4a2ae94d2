//! The SQL statements of the PostgreSQL backend, and row decoding.
//!
//! Standard SQL only — `INSERT … ON CONFLICT`, `SELECT … FOR UPDATE [SKIP
//! LOCKED]`, partial indexes — so Postgres-wire distributed engines can serve
//! the same schema. `docs/ledger.md` lists them.

use sqlx::Row;
use sqlx::postgres::PgRow;

use crate::error::LedgerError;
use crate::model::{AttemptRecord, OperationRecord};
use crate::row::{AttemptRow, OperationRow};

macro_rules! op_cols {
    () => {
        "SELECT scope, key, action, params, fingerprint, state, epoch, holder, lease_until, \
         dispatched_at, result, reason, evidence, decided_at, unknown_owner, unknown_since, \
         next_check_at, diverged, destination_key, created_at, updated_at, \
         first_dispatched_at, dispatch_count, tombstone, version FROM operations "
    };
}
pub(super) use op_cols;

/// One record, no lock (reads outside a write transaction).
pub(super) const GET: &str = concat!(op_cols!(), "WHERE scope = $1 AND key = $2");

/// One record, row-locked until the transaction ends: every command that
/// writes a record reads it this way first, so check-and-write is atomic.
pub(super) const LOAD: &str = concat!(op_cols!(), "WHERE scope = $1 AND key = $2 FOR UPDATE");

/// Width `action`: another unresolved operation of the action, any scope.
/// Served by the partial index `operations_unresolved`.
pub(super) const BLOCKER_ANY_SCOPE: &str = concat!(
    op_cols!(),
    "WHERE action = $1 AND NOT (scope = $2 AND key = $3) \
     AND (state = 'unknown' OR (state = 'dispatched' AND lease_until <= $4)) \
     ORDER BY created_at, scope, key LIMIT 1"
);

/// Width `scope`: another unresolved operation of the action in the scope.
pub(super) const BLOCKER_SAME_SCOPE: &str = concat!(
    op_cols!(),
    "WHERE action = $1 AND scope = $2 AND key <> $3 \
     AND (state = 'unknown' OR (state = 'dispatched' AND lease_until <= $4)) \
     ORDER BY created_at, scope, key LIMIT 1"
);

/// Lease expiries to record. Rows another transaction holds are skipped: that
/// transaction records the expiry itself (every command settles what it loads).
pub(super) const DUE_EXPIRED: &str = concat!(
    op_cols!(),
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
    op_cols!(),
    "WHERE state = 'unknown' AND next_check_at <= $1 \
     ORDER BY next_check_at, created_at, scope, key LIMIT $2 FOR UPDATE SKIP LOCKED"
);

/// A new identity. `DO NOTHING` + the affected-row count tell the caller
/// whether another transaction inserted it first (then the command is re-run
/// against the stored row).
pub(super) const INSERT: &str = "INSERT INTO operations (scope, key, action, params, fingerprint, \
     state, epoch, holder, lease_until, dispatched_at, result, reason, evidence, decided_at, \
     unknown_owner, unknown_since, next_check_at, diverged, destination_key, created_at, \
     updated_at, first_dispatched_at, dispatch_count, tombstone) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $18, \
     $19, $20, $21, $22, $23, $24) ON CONFLICT (scope, key) DO NOTHING";

/// Every transition writes the whole row, guarded by the row version it was
/// computed from: under the row lock this always matches; for a command
/// computed from the ledger's cache, or if an engine ever let two writers
/// through, a changed row matches nothing and the command is re-run.
pub(super) const UPDATE: &str = "UPDATE operations SET action = $3, params = $4, \
     fingerprint = $5, state = $6, epoch = $7, holder = $8, lease_until = $9, \
     dispatched_at = $10, result = $11, reason = $12, evidence = $13, decided_at = $14, \
     unknown_owner = $15, unknown_since = $16, next_check_at = $17, diverged = $18, \
     destination_key = $19, created_at = $20, updated_at = $21, first_dispatched_at = $22, \
     dispatch_count = $23, tombstone = $24, version = version + 1 \
     WHERE scope = $1 AND key = $2 AND version = $25";

pub(super) const INSERT_ATTEMPT: &str = "INSERT INTO attempts (attempt_id, scope, key, kind, \
     epoch, executor, destination_key, sent_at, finished_at, outcome, evidence, metadata) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)";

pub(super) const FINISH_ATTEMPT: &str = "UPDATE attempts SET outcome = $1, finished_at = $2, \
     evidence = COALESCE($3, evidence) \
     WHERE scope = $4 AND key = $5 AND epoch = $6 AND kind = 'dispatch' AND outcome = 'pending'";

pub(super) const ATTEMPTS: &str = "SELECT attempt_id, scope, key, kind, epoch, executor, \
     destination_key, sent_at, finished_at, outcome, evidence, metadata \
     FROM attempts WHERE scope = $1 AND key = $2 ORDER BY seq";

pub(super) const PURGE_ATTEMPTS: &str = "DELETE FROM attempts WHERE EXISTS (SELECT 1 \
     FROM operations o WHERE o.scope = attempts.scope AND o.key = attempts.key \
     AND o.decided_at IS NOT NULL AND o.decided_at <= $1)";

pub(super) const PURGE_DELETE: &str =
    "DELETE FROM operations WHERE decided_at IS NOT NULL AND decided_at <= $1";

pub(super) const PURGE_TOMBSTONE: &str = "UPDATE operations SET params = NULL, \
     result = CASE WHEN state = 'confirmed' THEN 'null' ELSE NULL END, \
     evidence = NULL, tombstone = TRUE, version = version + 1 \
     WHERE decided_at IS NOT NULL AND decided_at <= $1 AND tombstone = FALSE";

/// Decodes a row selected with the `op_cols!` column list.
pub(super) fn op_from_row(r: &PgRow) -> Result<OperationRecord, LedgerError> {
    let g = |e: sqlx::Error| LedgerError::corrupt(format!("decoding an operation row: {e}"));
    OperationRow {
        scope: r.try_get(0).map_err(g)?,
        key: r.try_get(1).map_err(g)?,
        action: r.try_get(2).map_err(g)?,
        params: r.try_get(3).map_err(g)?,
        fingerprint: r.try_get(4).map_err(g)?,
        state: r.try_get(5).map_err(g)?,
        epoch: r.try_get(6).map_err(g)?,
        holder: r.try_get(7).map_err(g)?,
        lease_until: r.try_get(8).map_err(g)?,
        dispatched_at: r.try_get(9).map_err(g)?,
        result: r.try_get(10).map_err(g)?,
        reason: r.try_get(11).map_err(g)?,
        evidence: r.try_get(12).map_err(g)?,
        decided_at: r.try_get(13).map_err(g)?,
        unknown_owner: r.try_get(14).map_err(g)?,
        unknown_since: r.try_get(15).map_err(g)?,
        next_check_at: r.try_get(16).map_err(g)?,
        diverged: r.try_get(17).map_err(g)?,
        destination_key: r.try_get(18).map_err(g)?,
        created_at: r.try_get(19).map_err(g)?,
        updated_at: r.try_get(20).map_err(g)?,
        first_dispatched_at: r.try_get(21).map_err(g)?,
        dispatch_count: r.try_get(22).map_err(g)?,
        tombstone: r.try_get(23).map_err(g)?,
    }
    .into_record()
}

/// The row version of a row selected with the `op_cols!` column list.
pub(super) fn version_of(r: &PgRow) -> Result<i64, LedgerError> {
    r.try_get(24)
        .map_err(|e| LedgerError::corrupt(format!("decoding an operation row: {e}")))
}

/// Decodes a row selected by [`ATTEMPTS`].
pub(super) fn attempt_from_row(r: &PgRow) -> Result<AttemptRecord, LedgerError> {
    let g = |e: sqlx::Error| LedgerError::corrupt(format!("decoding an attempt row: {e}"));
    AttemptRow {
        attempt_id: r.try_get(0).map_err(g)?,
        scope: r.try_get(1).map_err(g)?,
        key: r.try_get(2).map_err(g)?,
        kind: r.try_get(3).map_err(g)?,
        epoch: r.try_get(4).map_err(g)?,
        executor: r.try_get(5).map_err(g)?,
        destination_key: r.try_get(6).map_err(g)?,
        sent_at: r.try_get(7).map_err(g)?,
        finished_at: r.try_get(8).map_err(g)?,
        outcome: r.try_get(9).map_err(g)?,
        evidence: r.try_get(10).map_err(g)?,
        metadata: r.try_get(11).map_err(g)?,
    }
    .into_record()
}

/// Binds the 24 operation columns in `op_cols!` order.
pub(super) fn bind_row<'q>(
    q: sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>,
    r: OperationRow,
) -> sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments> {
    q.bind(r.scope)
        .bind(r.key)
        .bind(r.action)
        .bind(r.params)
        .bind(r.fingerprint)
        .bind(r.state)
        .bind(r.epoch)
        .bind(r.holder)
        .bind(r.lease_until)
        .bind(r.dispatched_at)
        .bind(r.result)
        .bind(r.reason)
        .bind(r.evidence)
        .bind(r.decided_at)
        .bind(r.unknown_owner)
        .bind(r.unknown_since)
        .bind(r.next_check_at)
        .bind(r.diverged)
        .bind(r.destination_key)
        .bind(r.created_at)
        .bind(r.updated_at)
        .bind(r.first_dispatched_at)
        .bind(r.dispatch_count)
        .bind(r.tombstone)
}
