//! The SQL statements of the SQLite backend ([`Store`] over one connection,
//! inside a transaction opened by the caller). Standard SQL only
//! (`INSERT … ON CONFLICT`), so the PostgreSQL backend can follow it.

use async_trait::async_trait;
use sqlx::{FromRow, Row, SqliteConnection};

use super::map_err;
use super::pending::{Pending, chunks, sized, values};
use crate::cache::RecordCache;
use crate::clock::Timestamp;
use crate::driver::Store;
use crate::error::LedgerError;
use crate::identity::{ActionName, OperationId, Scope};
use crate::ledger::ListFilter;
use crate::machine::{AttemptFinish, Retire};
use crate::model::{AttemptRecord, OperationRecord};
use crate::retention::PurgeReport;
use crate::row::{OperationRow, attempt_columns, operation_columns};
use crate::task::{TaskBudget, TaskId};
use crate::task_row::{TaskRow, task_columns, task_data_columns};

macro_rules! op_cols {
    () => {
        concat!("SELECT ", operation_columns!(), " FROM operations ")
    };
}

const LOAD: &str = concat!(op_cols!(), "WHERE scope = ?1 AND key = ?2");

/// Width `scope` binds the scope, width `action` NULL.
const BLOCKER: &str = concat!(
    op_cols!(),
    "WHERE action = ?1 AND (?2 IS NULL OR scope = ?2) AND NOT (scope = ?3 AND key = ?4) \
     AND (state = 'unknown' OR (state = 'dispatched' AND (lease_until <= ?5 OR dispatch_count > 1)) \
          OR (state = 'claimed' AND dispatch_count > 0)) \
     ORDER BY created_at, scope, key LIMIT 1"
);

const DUE_EXPIRED: &str = concat!(
    op_cols!(),
    "WHERE (state = 'dispatched' AND lease_until <= ?1) \
     OR (state = 'claimed' AND dispatch_count > 0 AND lease_until <= ?1)"
);

const DUE_UNKNOWN: &str = concat!(
    op_cols!(),
    "WHERE state = 'unknown' AND next_check_at <= ?1 \
     AND (?3 IS NULL OR scope = ?3) \
     AND (?4 IS NULL OR action IN (SELECT value FROM json_each(?4))) \
     AND action NOT IN (SELECT value FROM json_each(?5)) \
     ORDER BY next_check_at, created_at, scope, key LIMIT ?2"
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
     AND (?8 IS NULL OR (created_at, scope, key) > \
          (SELECT created_at, scope, key FROM operations WHERE scope = ?8 AND key = ?9)) \
     ORDER BY created_at, scope, key LIMIT ?7"
);

pub(super) const ATTEMPTS: &str = concat!(
    "SELECT ",
    attempt_columns!(),
    " FROM attempts WHERE scope = ?1 AND key = ?2 ORDER BY seq"
);

const PURGE_ATTEMPTS: &str = "DELETE FROM attempts WHERE EXISTS (SELECT 1 FROM operations o \
     WHERE o.scope = attempts.scope AND o.key = attempts.key \
     AND o.decided_at IS NOT NULL AND o.decided_at <= ?1)";

const PURGE_DELETE: &str =
    "DELETE FROM operations WHERE decided_at IS NOT NULL AND decided_at <= ?1";

const PURGE_TOMBSTONE: &str = "UPDATE operations SET params = NULL, \
     result = CASE WHEN state = 'confirmed' THEN 'null' ELSE NULL END, \
     evidence = NULL, tombstone = 1 \
     WHERE decided_at IS NOT NULL AND decided_at <= ?1 AND tombstone = 0";

const LOAD_TASK: &str = concat!(
    "SELECT ",
    task_columns!(),
    " FROM task_budgets WHERE scope = ?1 AND task = ?2"
);

const UPSERT_TASK: &str = concat!(
    "INSERT INTO task_budgets (",
    task_columns!(),
    ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT (scope, task) DO UPDATE SET (",
    task_data_columns!(),
    ") = (?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)"
);

const PURGE_TASKS: &str = "DELETE FROM task_budgets WHERE expires_at <= ?1";

/// Binds of [`LIST`] for `filter` at `now`.
pub(super) fn list_query(
    filter: &ListFilter,
    now: Timestamp,
) -> sqlx::query::QueryAs<'static, sqlx::Sqlite, OperationRow, sqlx::sqlite::SqliteArguments> {
    sqlx::query_as(LIST)
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
        .bind(filter.after.as_ref().map(|id| id.scope.to_string()))
        .bind(filter.after.as_ref().map(|id| id.key.to_string()))
}

/// Records as of the last commit of the group-commit connection (`None`:
/// known absent), valid only while no other connection has written to the
/// file: checked with `PRAGMA data_version` inside each write transaction.
pub(super) type Cache = RecordCache<Option<OperationRecord>>;

/// Opens a batch's write transaction and readies `cache` for it: emptied
/// if another connection committed since this one last looked (`PRAGMA
/// data_version`), then given the records of `ids` it does not hold
/// (`None` for those absent), in one query per chunk. `BEGIN IMMEDIATE`,
/// the pragma and the first chunk's query share one statement text: each
/// text sqlx runs is a round trip to its SQLite thread, and a batch of
/// `begin`s used to open in three.
pub(super) async fn open_batch<'i>(
    cache: &mut Cache,
    conn: &mut SqliteConnection,
    ids: impl Iterator<Item = &'i OperationId>,
) -> Result<(), LedgerError> {
    let mut seen = std::collections::HashSet::new();
    // Chosen before the pragma is read: if it empties the cache, a record
    // left out here is loaded when its job asks for it.
    let missing: Vec<&OperationId> = ids
        .filter(|id| !cache.contains(id) && seen.insert(*id))
        .collect();
    let mut sizes = chunks(missing.len());
    let mut missing = missing.into_iter();
    let first: Vec<&OperationId> = missing.by_ref().take(sizes.next().unwrap_or(0)).collect();
    let mut rows = read_chunk(
        conn,
        open_sql(first.len()),
        &first,
        "opening a write transaction",
    )
    .await?
    .into_iter();
    let version: i64 = rows
        .next()
        .ok_or_else(|| LedgerError::unavailable("checking for other writers", "no data_version"))?
        .try_get(0)
        .map_err(|e| map_err("checking for other writers", e))?;
    cache.validate(version);
    keep_chunk(cache, &first, rows)?;
    for n in sizes {
        let chunk: Vec<&OperationId> = missing.by_ref().take(n).collect();
        let rows = read_chunk(
            conn,
            sized(&PRELOAD, n, preload_sql),
            &chunk,
            "loading operations",
        );
        keep_chunk(cache, &chunk, rows.await?.into_iter())?;
    }
    Ok(())
}

/// Runs `sql` with the scope and key of each of `ids` bound in turn.
async fn read_chunk(
    conn: &mut SqliteConnection,
    sql: &'static str,
    ids: &[&OperationId],
    context: &'static str,
) -> Result<Vec<sqlx::sqlite::SqliteRow>, LedgerError> {
    ids.iter()
        .fold(sqlx::query(sql), |q, id| {
            q.bind(id.scope.as_str()).bind(id.key.as_str())
        })
        .fetch_all(&mut *conn)
        .await
        .map_err(|e| map_err(context, e))
}

/// Keeps in `cache` the records read for `ids`, and `None` for those absent.
fn keep_chunk(
    cache: &mut Cache,
    ids: &[&OperationId],
    rows: impl Iterator<Item = sqlx::sqlite::SqliteRow>,
) -> Result<(), LedgerError> {
    for id in ids {
        cache.put((*id).clone(), None);
    }
    for row in rows {
        let rec = OperationRow::from_row(&row)
            .map_err(|e| map_err("loading operations", e))?
            .into_record()?;
        cache.put(rec.id.clone(), Some(rec));
    }
    Ok(())
}

/// `BEGIN IMMEDIATE; PRAGMA data_version`, then the preload of `n` records.
fn open_sql(n: usize) -> &'static str {
    const OPEN: &str = "BEGIN IMMEDIATE; PRAGMA data_version";
    static SQL: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    if n == 0 {
        return OPEN;
    }
    sized(&SQL, n, |n| format!("{OPEN}; {}", preload_sql(n)))
}

static PRELOAD: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();

fn preload_sql(n: usize) -> String {
    format!(
        "SELECT {} FROM (VALUES {}) AS v JOIN operations ON scope = v.column1 AND key = v.column2",
        operation_columns!(),
        values(2, n)
    )
}

/// One row of `q`, decoded.
async fn fetch_one_op(
    q: sqlx::query::QueryAs<'_, sqlx::Sqlite, OperationRow, sqlx::sqlite::SqliteArguments>,
    conn: &mut SqliteConnection,
    context: &'static str,
) -> Result<Option<OperationRecord>, LedgerError> {
    q.fetch_optional(conn)
        .await
        .map_err(|e| map_err(context, e))?
        .map(OperationRow::into_record)
        .transpose()
}

/// Every row of `q`, decoded.
async fn fetch_all_ops(
    q: sqlx::query::QueryAs<'_, sqlx::Sqlite, OperationRow, sqlx::sqlite::SqliteArguments>,
    conn: &mut SqliteConnection,
    context: &'static str,
) -> Result<Vec<OperationRecord>, LedgerError> {
    q.fetch_all(conn)
        .await
        .map_err(|e| map_err(context, e))?
        .into_iter()
        .map(OperationRow::into_record)
        .collect()
}

/// [`Store`] over a connection that is inside `BEGIN IMMEDIATE`, with an
/// optional [`RecordCache`] (group-commit writer only). Writes are held in
/// `pending` until [`SqlStore::flush`] (see [`super::pending`]).
pub(super) struct SqlStore<'c> {
    pub(super) conn: &'c mut SqliteConnection,
    pub(super) cache: Option<&'c mut Cache>,
    pub(super) pending: &'c mut Pending,
}

impl SqlStore<'_> {
    /// Writes what is held; before COMMIT and before any query that reads
    /// rows a held write may change.
    pub(super) async fn flush(&mut self) -> Result<(), LedgerError> {
        self.pending.flush(self.conn).await
    }
}

#[async_trait]
impl Store for SqlStore<'_> {
    async fn load(&mut self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        // Not held: the stored row is current.
        if let Some(held) = self.pending.record(id) {
            return Ok(Some(held.clone()));
        }
        if let Some(hit) = self.cache.as_ref().and_then(|c| c.get(id)) {
            return Ok(hit);
        }
        let q = sqlx::query_as(LOAD)
            .bind(id.scope.as_str())
            .bind(id.key.as_str());
        let rec = fetch_one_op(q, self.conn, "loading an operation").await?;
        if let Some(c) = self.cache.as_mut() {
            c.put(id.clone(), rec.clone());
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
        self.flush().await?;
        let q = sqlx::query_as(BLOCKER)
            .bind(action.as_str())
            .bind(scope.map(Scope::as_str))
            .bind(except.scope.as_str())
            .bind(except.key.as_str())
            .bind(now.0);
        fetch_one_op(q, self.conn, "looking for blocking operations").await
    }

    async fn due_expired(&mut self, now: Timestamp) -> Result<Vec<OperationRecord>, LedgerError> {
        self.flush().await?;
        let q = sqlx::query_as(DUE_EXPIRED).bind(now.0);
        fetch_all_ops(q, self.conn, "looking for expired leases").await
    }

    async fn take_due_unknown(
        &mut self,
        now: Timestamp,
        filter: &crate::ledger::DueFilter,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, LedgerError> {
        // Under `BEGIN IMMEDIATE` no other connection writes until COMMIT.
        self.flush().await?;
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (only, except) = filter.action_names();
        let json = |l: &[String]| serde_json::Value::from(l.to_vec()).to_string();
        let q = sqlx::query_as(DUE_UNKNOWN)
            .bind(now.0)
            .bind(limit)
            .bind(filter.scope.as_ref().map(ToString::to_string))
            .bind(only.as_deref().map(json))
            .bind(json(&except));
        fetch_all_ops(q, self.conn, "taking unknown operations due for a check").await
    }

    async fn save(&mut self, rec: &OperationRecord) -> Result<(), LedgerError> {
        self.pending.save(rec);
        if let Some(c) = self.cache.as_mut() {
            c.put(rec.id.clone(), Some(rec.clone()));
        }
        Ok(())
    }

    async fn insert_attempt(&mut self, a: &AttemptRecord) -> Result<(), LedgerError> {
        if self.pending.must_flush_before_attempt() {
            self.flush().await?;
        }
        self.pending.attempt(a);
        Ok(())
    }

    async fn finish_attempt(&mut self, f: &AttemptFinish) -> Result<(), LedgerError> {
        self.pending.finish(f);
        Ok(())
    }

    async fn load_task(&mut self, id: &TaskId) -> Result<Option<TaskBudget>, LedgerError> {
        sqlx::query_as::<_, TaskRow>(LOAD_TASK)
            .bind(id.scope.as_str())
            .bind(id.task.as_str())
            .fetch_optional(&mut *self.conn)
            .await
            .map_err(|e| map_err("loading a task budget", e))?
            .map(TaskRow::into_budget)
            .transpose()
    }

    async fn save_task(&mut self, budget: &TaskBudget) -> Result<(), LedgerError> {
        TaskRow::from_budget(budget)
            .bind(sqlx::query(UPSERT_TASK))
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err("writing a task budget", e))?;
        Ok(())
    }

    async fn retire(&mut self, retire: Retire) -> Result<PurgeReport, LedgerError> {
        let Retire {
            tombstone_cutoff,
            delete_cutoff,
            tasks_expired,
        } = retire;
        let ctx = "applying retention";
        self.flush().await?;
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
        let tasks_expired = sqlx::query(PURGE_TASKS)
            .bind(tasks_expired.0)
            .execute(&mut *self.conn)
            .await
            .map_err(|e| map_err(ctx, e))?
            .rows_affected();
        Ok(PurgeReport {
            tombstoned,
            deleted,
            tasks_expired,
        })
    }
}
