//! The SQL statements of the SQLite backend ([`Store`] over one connection,
//! inside a transaction opened by the caller). Standard SQL only
//! (`INSERT … ON CONFLICT`), so the PostgreSQL backend can follow it.

use std::collections::HashMap;

use async_trait::async_trait;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, SqliteConnection};

use super::map_err;
use crate::clock::Timestamp;
use crate::error::LedgerError;
use crate::exec::Store;
use crate::identity::{ActionName, OperationId, Scope};
use crate::ledger::ListFilter;
use crate::machine::AttemptFinish;
use crate::model::{AttemptRecord, OperationRecord};
use crate::retention::PurgeReport;
use crate::row::{AttemptRow, OperationRow};

macro_rules! op_cols {
    () => {
        "SELECT scope, key, action, params, fingerprint, state, epoch, holder, lease_until, \
         dispatched_at, result, reason, evidence, decided_at, unknown_owner, unknown_since, \
         next_check_at, diverged, destination_key, created_at, updated_at, \
         first_dispatched_at, dispatch_count, tombstone FROM operations "
    };
}

const LOAD: &str = concat!(op_cols!(), "WHERE scope = ?1 AND key = ?2");

const BLOCKER_ANY_SCOPE: &str = concat!(
    op_cols!(),
    "WHERE action = ?1 AND NOT (scope = ?2 AND key = ?3) \
     AND (state = 'unknown' OR (state = 'dispatched' AND lease_until <= ?4)) \
     ORDER BY created_at, scope, key LIMIT 1"
);

const BLOCKER_SAME_SCOPE: &str = concat!(
    op_cols!(),
    "WHERE action = ?1 AND scope = ?2 AND key <> ?3 \
     AND (state = 'unknown' OR (state = 'dispatched' AND lease_until <= ?4)) \
     ORDER BY created_at, scope, key LIMIT 1"
);

const DUE_EXPIRED: &str = concat!(
    op_cols!(),
    "WHERE (state = 'dispatched' AND lease_until <= ?1) \
     OR (state = 'claimed' AND dispatch_count > 0 AND lease_until <= ?1)"
);

pub(super) const ANY_DUE: &str = "SELECT 1 FROM operations \
     WHERE (state = 'dispatched' AND lease_until <= ?1) \
     OR (state = 'claimed' AND dispatch_count > 0 AND lease_until <= ?1) LIMIT 1";

pub(super) const LIST: &str = concat!(
    op_cols!(),
    "WHERE (?1 IS NULL OR state = ?1) \
     AND (?2 IS NULL OR diverged = ?2) \
     AND (?3 IS NULL OR scope = ?3) \
     AND (?4 IS NULL OR action = ?4) \
     AND (?5 IS NULL OR COALESCE(unknown_since, updated_at) <= ?5) \
     AND (?6 IS NULL OR (state = 'unknown' AND next_check_at <= ?6)) \
     ORDER BY created_at, scope, key LIMIT ?7"
);

const UPSERT: &str = "INSERT INTO operations (scope, key, action, params, fingerprint, state, \
     epoch, holder, lease_until, dispatched_at, result, reason, evidence, decided_at, \
     unknown_owner, unknown_since, next_check_at, diverged, destination_key, created_at, \
     updated_at, first_dispatched_at, dispatch_count, tombstone) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, \
     ?19, ?20, ?21, ?22, ?23, ?24) \
     ON CONFLICT (scope, key) DO UPDATE SET action = excluded.action, params = excluded.params, \
     fingerprint = excluded.fingerprint, state = excluded.state, epoch = excluded.epoch, \
     holder = excluded.holder, lease_until = excluded.lease_until, \
     dispatched_at = excluded.dispatched_at, result = excluded.result, \
     reason = excluded.reason, evidence = excluded.evidence, decided_at = excluded.decided_at, \
     unknown_owner = excluded.unknown_owner, unknown_since = excluded.unknown_since, \
     next_check_at = excluded.next_check_at, diverged = excluded.diverged, \
     destination_key = excluded.destination_key, created_at = excluded.created_at, \
     updated_at = excluded.updated_at, first_dispatched_at = excluded.first_dispatched_at, \
     dispatch_count = excluded.dispatch_count, tombstone = excluded.tombstone";

const INSERT_ATTEMPT: &str = "INSERT INTO attempts (attempt_id, scope, key, kind, epoch, \
     executor, destination_key, sent_at, finished_at, outcome, evidence, metadata) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)";

const FINISH_ATTEMPT: &str = "UPDATE attempts SET outcome = ?1, finished_at = ?2, \
     evidence = COALESCE(?3, evidence) \
     WHERE scope = ?4 AND key = ?5 AND epoch = ?6 AND kind = 'dispatch' AND outcome = 'pending'";

pub(super) const ATTEMPTS: &str = "SELECT attempt_id, scope, key, kind, epoch, executor, \
     destination_key, sent_at, finished_at, outcome, evidence, metadata \
     FROM attempts WHERE scope = ?1 AND key = ?2 ORDER BY seq";

const PURGE_ATTEMPTS: &str = "DELETE FROM attempts WHERE EXISTS (SELECT 1 FROM operations o \
     WHERE o.scope = attempts.scope AND o.key = attempts.key \
     AND o.decided_at IS NOT NULL AND o.decided_at <= ?1)";

const PURGE_DELETE: &str =
    "DELETE FROM operations WHERE decided_at IS NOT NULL AND decided_at <= ?1";

const PURGE_TOMBSTONE: &str = "UPDATE operations SET params = NULL, \
     result = CASE WHEN state = 'confirmed' THEN 'null' ELSE NULL END, \
     evidence = NULL, tombstone = 1 \
     WHERE decided_at IS NOT NULL AND decided_at <= ?1 AND tombstone = 0";

pub(super) fn op_from_row(r: &SqliteRow) -> Result<OperationRecord, LedgerError> {
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

pub(super) fn attempt_from_row(r: &SqliteRow) -> Result<AttemptRecord, LedgerError> {
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

/// Binds of [`LIST`] for `filter` at `now`.
pub(super) fn list_query(
    filter: &ListFilter,
    now: Timestamp,
) -> sqlx::query::Query<'static, sqlx::Sqlite, sqlx::sqlite::SqliteArguments> {
    sqlx::query(LIST)
        .bind(filter.state.map(|s| s.as_str()))
        .bind(filter.diverged)
        .bind(filter.scope.as_ref().map(|s| s.to_string()))
        .bind(filter.action.as_ref().map(|a| a.to_string()))
        .bind(filter.older_than.map(|d| now.minus(d).0))
        .bind(filter.due_at.map(|t| t.0))
        .bind(
            filter
                .limit
                .map_or(-1, |n| i64::try_from(n).unwrap_or(i64::MAX)),
        )
}

/// Records as of the last commit of the group-commit connection, valid only
/// while no other connection has written to the file (checked with
/// `PRAGMA data_version` inside each write transaction). Saves one `SELECT`
/// per command on the hot path; cleared on any doubt.
#[derive(Debug, Default)]
pub(super) struct RecordCache {
    records: HashMap<OperationId, Option<OperationRecord>>,
    data_version: Option<i64>,
}

/// Entries kept before the cache is simply emptied.
const CACHE_LIMIT: usize = 16_384;

impl RecordCache {
    /// Call right after `BEGIN IMMEDIATE`: drops everything if another
    /// connection committed since this one last looked.
    pub(super) async fn validate(
        &mut self,
        conn: &mut SqliteConnection,
    ) -> Result<(), LedgerError> {
        let v: i64 = sqlx::query_scalar("PRAGMA data_version")
            .fetch_one(&mut *conn)
            .await
            .map_err(|e| map_err("checking for other writers", e))?;
        if self.data_version != Some(v) || self.records.len() > CACHE_LIMIT {
            self.records.clear();
            self.data_version = Some(v);
        }
        Ok(())
    }

    /// Forgets everything (after a rollback or a bulk change).
    pub(super) fn clear(&mut self) {
        self.records.clear();
        self.data_version = None;
    }
}

/// [`Store`] over a connection that is inside `BEGIN IMMEDIATE`, with an
/// optional [`RecordCache`] (group-commit writer only).
pub(super) struct SqlStore<'c> {
    pub(super) conn: &'c mut SqliteConnection,
    pub(super) cache: Option<&'c mut RecordCache>,
}

#[async_trait]
impl Store for SqlStore<'_> {
    async fn load(&mut self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.records.get(id)) {
            return Ok(hit.clone());
        }
        let row = sqlx::query(LOAD)
            .bind(id.scope.as_str())
            .bind(id.key.as_str())
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(|e| map_err("loading an operation", e))?;
        let rec = row.as_ref().map(op_from_row).transpose()?;
        if let Some(c) = self.cache.as_mut() {
            c.records.insert(id.clone(), rec.clone());
        }
        Ok(rec)
    }

    async fn find_blocker(
        &mut self,
        except: &OperationId,
        action: &ActionName,
        scope: Option<&Scope>,
        now: Timestamp,
    ) -> Result<Option<OperationRecord>, LedgerError> {
        let q = match scope {
            Some(s) => sqlx::query(BLOCKER_SAME_SCOPE)
                .bind(action.as_str())
                .bind(s.as_str())
                .bind(except.key.as_str()),
            None => sqlx::query(BLOCKER_ANY_SCOPE)
                .bind(action.as_str())
                .bind(except.scope.as_str())
                .bind(except.key.as_str()),
        };
        let row = q
            .bind(now.0)
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(|e| map_err("looking for blocking operations", e))?;
        row.as_ref().map(op_from_row).transpose()
    }

    async fn due_expired(&mut self, now: Timestamp) -> Result<Vec<OperationRecord>, LedgerError> {
        let rows = sqlx::query(DUE_EXPIRED)
            .bind(now.0)
            .fetch_all(&mut *self.conn)
            .await
            .map_err(|e| map_err("looking for expired leases", e))?;
        rows.iter().map(op_from_row).collect()
    }

    async fn save(&mut self, rec: &OperationRecord) -> Result<(), LedgerError> {
        let r = OperationRow::from_record(rec);
        sqlx::query(UPSERT)
            .bind(r.scope)
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
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err("writing an operation", e))?;
        if let Some(c) = self.cache.as_mut() {
            c.records.insert(rec.id.clone(), Some(rec.clone()));
        }
        Ok(())
    }

    async fn insert_attempt(&mut self, a: &AttemptRecord) -> Result<(), LedgerError> {
        let r = AttemptRow::from_record(a);
        sqlx::query(INSERT_ATTEMPT)
            .bind(r.attempt_id)
            .bind(r.scope)
            .bind(r.key)
            .bind(r.kind)
            .bind(r.epoch)
            .bind(r.executor)
            .bind(r.destination_key)
            .bind(r.sent_at)
            .bind(r.finished_at)
            .bind(r.outcome)
            .bind(r.evidence)
            .bind(r.metadata)
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err("appending an attempt", e))?;
        Ok(())
    }

    async fn finish_attempt(&mut self, f: &AttemptFinish) -> Result<(), LedgerError> {
        sqlx::query(FINISH_ATTEMPT)
            .bind(f.outcome.as_str())
            .bind(f.at.0)
            .bind(f.evidence.clone())
            .bind(f.id.scope.as_str())
            .bind(f.id.key.as_str())
            .bind(i64::try_from(f.epoch.0).unwrap_or(i64::MAX))
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err("finishing an attempt", e))?;
        Ok(())
    }

    async fn purge(
        &mut self,
        tombstone_cutoff: Timestamp,
        delete_cutoff: Timestamp,
    ) -> Result<PurgeReport, LedgerError> {
        let ctx = "applying retention";
        if let Some(c) = self.cache.as_mut() {
            c.clear();
        }
        sqlx::query(PURGE_ATTEMPTS)
            .bind(delete_cutoff.0)
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err(ctx, e))?;
        let deleted = sqlx::query(PURGE_DELETE)
            .bind(delete_cutoff.0)
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err(ctx, e))?
            .rows_affected();
        let tombstoned = sqlx::query(PURGE_TOMBSTONE)
            .bind(tombstone_cutoff.0)
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err(ctx, e))?
            .rows_affected();
        Ok(PurgeReport {
            tombstoned,
            deleted,
        })
    }
}
