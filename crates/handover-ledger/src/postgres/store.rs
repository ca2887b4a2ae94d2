//! [`Store`] over one PostgreSQL connection inside a transaction.
//!
//! Every record a command may write is read with `FOR UPDATE` first (or
//! `FOR UPDATE SKIP LOCKED` for lease-expiry sweeps), so the row is locked
//! from check to commit. A record that does not exist yet cannot be locked;
//! its insert uses `ON CONFLICT DO NOTHING`, and if another transaction won
//! that race the command is re-run against the stored row ([`Retry`]).

use std::collections::HashMap;

use async_trait::async_trait;
use sqlx::PgConnection;

use super::cache::Versioned;
use super::error::{Retry, map_err};
use super::sql::{self, Stored};
use crate::clock::Timestamp;
use crate::driver::Store;
use crate::error::LedgerError;
use crate::identity::{ActionName, OperationId, Scope};
use crate::machine::{self, AttemptFinish, Retire};
use crate::model::{AttemptRecord, OperationRecord};
use crate::retention::PurgeReport;
use crate::row::{AttemptRow, OperationRow};
use crate::task::{TaskBudget, TaskId};
use crate::task_row::TaskRow;

/// Row access inside one transaction; remembers the version of every row it
/// read for writing.
pub(super) struct PgStore<'c> {
    conn: &'c mut PgConnection,
    /// Identities read for writing in this transaction: `None` = absent.
    versions: HashMap<OperationId, Option<i64>>,
    /// Task budgets read for writing in this transaction: whether they exist.
    tasks: HashMap<TaskId, bool>,
    /// A record (from the ledger's cache) to use instead of reading it.
    preloaded: Option<Versioned>,
    /// The command was computed from `preloaded`.
    pub(super) used_preloaded: Option<OperationId>,
    /// Records written, with their new row versions.
    pub(super) written: Vec<Versioned>,
    /// Set when the transaction must be rolled back and the command re-run.
    pub(super) retry: Option<Retry>,
    /// Rows were rewritten in bulk (retention): no cached record survives.
    pub(super) bulk: bool,
}

impl<'c> PgStore<'c> {
    pub(super) fn new(conn: &'c mut PgConnection, preloaded: Option<Versioned>) -> Self {
        Self {
            conn,
            versions: HashMap::new(),
            tasks: HashMap::new(),
            preloaded,
            used_preloaded: None,
            written: Vec::new(),
            retry: None,
            bulk: false,
        }
    }

    /// Whether an answer computed from the preloaded record was confirmed by
    /// a write conditional on its version.
    pub(super) fn preloaded_unconfirmed(&self) -> bool {
        self.used_preloaded
            .as_ref()
            .is_some_and(|id| !self.written.iter().any(|(r, _)| r.id == *id))
    }

    /// Maps a driver error, noting whether the command may be re-run.
    fn fail(&mut self, context: &'static str, e: sqlx::Error) -> LedgerError {
        let (err, retry) = map_err(context, e);
        if retry.is_some() {
            self.retry = retry;
        }
        err
    }

    fn lost_race(&mut self, why: Retry) -> LedgerError {
        self.retry = Some(why);
        LedgerError::unavailable("writing an operation", why.as_str())
    }

    /// Records read for writing: their versions are kept for the writes.
    fn locked(&mut self, rows: Vec<Stored>) -> Result<Vec<OperationRecord>, LedgerError> {
        let mut recs = Vec::with_capacity(rows.len());
        for Stored { row, version } in rows {
            let rec = row.into_record()?;
            self.versions.insert(rec.id.clone(), Some(version));
            recs.push(rec);
        }
        Ok(recs)
    }

    /// Fetches the rows of `q` and keeps their versions for writing.
    async fn fetch_locked(
        &mut self,
        q: sqlx::query::QueryAs<'_, sqlx::Postgres, Stored, sqlx::postgres::PgArguments>,
        context: &'static str,
    ) -> Result<Vec<OperationRecord>, LedgerError> {
        match q.fetch_all(&mut *self.conn).await {
            Ok(rows) => self.locked(rows),
            Err(e) => Err(self.fail(context, e)),
        }
    }

    /// The first other unresolved operation within the block width, read
    /// without a lock.
    async fn peek_blocker(
        &mut self,
        except: &OperationId,
        action: &ActionName,
        scope: Option<&Scope>,
        now: Timestamp,
    ) -> Result<Option<OperationRecord>, LedgerError> {
        let found = sqlx::query_as::<_, Stored>(sql::BLOCKER)
            .bind(action.as_str())
            .bind(scope.map(Scope::as_str))
            .bind(except.scope.as_str())
            .bind(except.key.as_str())
            .bind(now.0)
            .fetch_optional(&mut *self.conn)
            .await;
        match found {
            Ok(row) => row.map(|s| s.row.into_record()).transpose(),
            Err(e) => Err(self.fail("looking for blocking operations", e)),
        }
    }
}

#[async_trait]
impl Store for PgStore<'_> {
    async fn load(&mut self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        if self.preloaded.as_ref().is_some_and(|(r, _)| r.id == *id)
            && let Some((rec, v)) = self.preloaded.take()
        {
            self.versions.insert(id.clone(), Some(v));
            self.used_preloaded = Some(id.clone());
            return Ok(Some(rec));
        }
        let q = sqlx::query_as(sql::LOAD)
            .bind(id.scope.as_str())
            .bind(id.key.as_str());
        let rec = self.fetch_locked(q, "loading an operation").await?.pop();
        if rec.is_none() {
            self.versions.insert(id.clone(), None);
        }
        Ok(rec)
    }

    /// Found without a lock; a blocker the machine will write (a dispatched
    /// row past its lease becomes `unknown`) is then locked and checked again.
    async fn find_blocker(
        &mut self,
        except: &OperationId,
        action: &ActionName,
        scope: Option<&Scope>,
        now: Timestamp,
    ) -> Result<Option<OperationRecord>, LedgerError> {
        for _ in 0..4 {
            let Some(rec) = self.peek_blocker(except, action, scope, now).await? else {
                return Ok(None);
            };
            if machine::settle(&rec, now).is_none() {
                return Ok(Some(rec));
            }
            let locked = self.load(&rec.id).await?;
            let still = |r: &OperationRecord| {
                r.action == *action
                    && scope.is_none_or(|s| r.id.scope == *s)
                    && machine::blocks(r, now)
            };
            if let Some(r) = locked.filter(still) {
                return Ok(Some(r));
            }
        }
        Err(self.lost_race(Retry::ConcurrentWrite))
    }

    async fn due_expired(&mut self, now: Timestamp) -> Result<Vec<OperationRecord>, LedgerError> {
        let q = sqlx::query_as(sql::DUE_EXPIRED).bind(now.0);
        self.fetch_locked(q, "looking for expired leases").await
    }

    async fn take_due_unknown(
        &mut self,
        now: Timestamp,
        filter: &crate::ledger::DueFilter,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, LedgerError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let (only, except) = filter.action_names();
        let q = sqlx::query_as(sql::TAKE_DUE_UNKNOWN)
            .bind(now.0)
            .bind(limit)
            .bind(filter.scope.as_ref().map(ToString::to_string))
            .bind(only)
            .bind(except);
        self.fetch_locked(q, "taking unknown operations due for a check")
            .await
    }

    async fn save(&mut self, rec: &OperationRecord) -> Result<(), LedgerError> {
        let row = OperationRow::from_record(rec);
        let (written, next) = match self.versions.get(&rec.id).copied() {
            Some(None) => (
                row.bind(sqlx::query(sql::INSERT))
                    .execute(&mut *self.conn)
                    .await
                    .map(|r| r.rows_affected()),
                1,
            ),
            Some(Some(v)) => (
                row.bind(sqlx::query(sql::UPDATE))
                    .bind(v)
                    .execute(&mut *self.conn)
                    .await
                    .map(|r| r.rows_affected()),
                v + 1,
            ),
            None => {
                return Err(LedgerError::corrupt(format!(
                    "internal: operation {} written without being read for update",
                    rec.id
                )));
            }
        };
        match written {
            Ok(1) => {
                self.versions.insert(rec.id.clone(), Some(next));
                self.written.push((rec.clone(), next));
                Ok(())
            }
            Ok(_) => Err(self.lost_race(Retry::ConcurrentWrite)),
            Err(e) => Err(self.fail("writing an operation", e)),
        }
    }

    async fn insert_attempt(&mut self, a: &AttemptRecord) -> Result<(), LedgerError> {
        let res = AttemptRow::from_record(a)
            .bind(sqlx::query(sql::INSERT_ATTEMPT))
            .execute(&mut *self.conn)
            .await;
        res.map(|_| ())
            .map_err(|e| self.fail("appending an attempt", e))
    }

    async fn finish_attempt(&mut self, f: &AttemptFinish) -> Result<(), LedgerError> {
        let res = sqlx::query(sql::FINISH_ATTEMPT)
            .bind(f.outcome.as_str())
            .bind(f.at.0)
            .bind(f.evidence.clone())
            .bind(f.id.scope.as_str())
            .bind(f.id.key.as_str())
            .bind(i64::try_from(f.epoch.0).unwrap_or(i64::MAX))
            .execute(&mut *self.conn)
            .await;
        res.map(|_| ())
            .map_err(|e| self.fail("finishing an attempt", e))
    }

    async fn load_task(&mut self, id: &TaskId) -> Result<Option<TaskBudget>, LedgerError> {
        let row = sqlx::query_as::<_, TaskRow>(sql::LOAD_TASK)
            .bind(id.scope.as_str())
            .bind(id.task.as_str())
            .fetch_optional(&mut *self.conn)
            .await;
        match row {
            Ok(row) => {
                self.tasks.insert(id.clone(), row.is_some());
                row.map(TaskRow::into_budget).transpose()
            }
            Err(e) => Err(self.fail("loading a task budget", e)),
        }
    }

    /// A row that did not exist is inserted only if still absent: a
    /// concurrent insert of the same task makes the command run again
    /// against the stored row.
    async fn save_task(&mut self, budget: &TaskBudget) -> Result<(), LedgerError> {
        let statement = match self.tasks.get(&budget.id) {
            Some(true) => sql::UPDATE_TASK,
            Some(false) => sql::INSERT_TASK,
            None => {
                return Err(LedgerError::corrupt(format!(
                    "internal: task {} written without being read for update",
                    budget.id
                )));
            }
        };
        let written = TaskRow::from_budget(budget)
            .bind(sqlx::query(statement))
            .execute(&mut *self.conn)
            .await;
        match written {
            Ok(r) if r.rows_affected() == 1 => {
                self.tasks.insert(budget.id.clone(), true);
                Ok(())
            }
            Ok(_) => Err(self.lost_race(Retry::ConcurrentWrite)),
            Err(e) => Err(self.fail("writing a task budget", e)),
        }
    }

    async fn retire(&mut self, retire: Retire) -> Result<PurgeReport, LedgerError> {
        let Retire {
            tombstone_cutoff,
            delete_cutoff,
            tasks_expired,
        } = retire;
        let ctx = "applying retention";
        self.bulk = true;
        if let Err(e) = sqlx::query(sql::PURGE_ATTEMPTS)
            .bind(delete_cutoff.0)
            .execute(&mut *self.conn)
            .await
        {
            return Err(self.fail(ctx, e));
        }
        let deleted = match sqlx::query(sql::PURGE_DELETE)
            .bind(delete_cutoff.0)
            .execute(&mut *self.conn)
            .await
        {
            Ok(r) => r.rows_affected(),
            Err(e) => return Err(self.fail(ctx, e)),
        };
        let tombstoned = match sqlx::query(sql::PURGE_TOMBSTONE)
            .bind(tombstone_cutoff.0)
            .execute(&mut *self.conn)
            .await
        {
            Ok(r) => r.rows_affected(),
            Err(e) => return Err(self.fail(ctx, e)),
        };
        let tasks_expired = match sqlx::query(sql::PURGE_TASKS)
            .bind(tasks_expired.0)
            .execute(&mut *self.conn)
            .await
        {
            Ok(r) => r.rows_affected(),
            Err(e) => return Err(self.fail(ctx, e)),
        };
        Ok(PurgeReport {
            tombstoned,
            deleted,
            tasks_expired,
        })
    }
}
