//! How PostgreSQL runs a [`Job`].
//!
//! Each job runs in its own `READ COMMITTED` transaction on a pooled
//! connection: load with `FOR UPDATE` → the pure machine → write → `COMMIT`.
//! Nobody is answered before the COMMIT returns. If the transaction lost a
//! race it could not lock against (two inserts of one new identity) or the
//! server aborted it (serialization failure, deadlock), nothing of it
//! committed and the job is re-run from the start, at most [`MAX_TRIES`]
//! times. A failed COMMIT is never re-run: its outcome is unknown, so the
//! caller gets `Unavailable` (for `mark_dispatched`: do not send).
//!
//! A holder's job ([`Job::holder_of`]: `renew`, `mark_dispatched`,
//! `confirm`, `reject`, `mark_unknown`, `release`) may start from the record
//! this ledger last committed for the operation instead of reading it `FOR
//! UPDATE`; its `UPDATE` is conditional on that row version, so if the row
//! changed the write matches nothing and the job is re-run the normal way
//! (see `cache`).
//!
//! A job that is usually decided without writing an existing row
//! ([`Job::try_unlocked`]: `begin` of width `operation`, `get`) is first
//! planned outside a transaction ([`run_unlocked`]): on a presumed-absent
//! record, where a single autocommit `INSERT … ON CONFLICT DO NOTHING` of
//! the new record *is* the atomic check-and-claim if it inserts a row; then
//! on the committed row read without a lock, where an answer that writes
//! nothing is the row's state at the read, as a serial execution would give
//! it. Only a job that must write an existing row takes the lock, so racing
//! losers never queue on it.

use async_trait::async_trait;
use sqlx::{Connection, PgConnection};

use super::cache::{Cache, Versioned};
use super::conns::Conns;
use super::error::{Retry, map_err, unavailable};
use super::sql::{self, Stored};
use super::store::PgStore;
use crate::clock::Timestamp;
use crate::driver::{Config, Job, Store, answer_read_only, execute};
use crate::error::LedgerError;
use crate::identity::{ActionName, OperationId, Scope};
use crate::machine::{AttemptFinish, Change, Retire};
use crate::model::{AttemptRecord, OperationRecord};
use crate::retention::PurgeReport;
use crate::row::OperationRow;
use crate::task::{TaskBudget, TaskId};

/// Attempts per job before giving up with `Unavailable`.
pub(super) const MAX_TRIES: usize = 8;

/// A committed answer and the records it wrote, or why the try failed
/// (with `Some` when running the job again is safe).
type Tried<T> =
    Result<(Result<T, LedgerError>, Vec<Versioned>, bool), (LedgerError, Option<Retry>)>;

/// Runs `job`, unlocked first when it asks for that, re-running it after a
/// safe abort.
pub(super) async fn run<J: Job>(
    pool: &Conns,
    cfg: &Config,
    cache: &Cache,
    job: &J,
) -> Result<J::Output, LedgerError> {
    if job.try_unlocked()
        && let Some(answer) = run_unlocked(pool, cfg, cache, job).await?
    {
        return answer;
    }
    let cached = job.holder_of();
    let mut preload = cached.and_then(|id| cache.get(id));
    let mut last = None;
    for _ in 0..MAX_TRIES {
        let (e, retry) = match run_once(pool, cfg, job, preload.take()).await {
            Ok((answer, written, bulk)) => {
                if bulk {
                    cache.clear();
                }
                cache.put(written);
                return answer;
            }
            Err(failed) => failed,
        };
        if let Some(id) = cached {
            cache.forget(id);
        }
        if retry.is_none() {
            return Err(e);
        }
        last = Some(e);
    }
    Err(last.unwrap_or_else(|| LedgerError::unavailable("writing", "no attempt was made")))
}

async fn run_once<J: Job>(
    pool: &Conns,
    cfg: &Config,
    job: &J,
    preloaded: Option<Versioned>,
) -> Tried<J::Output> {
    let mut conn = pool.get().await.map_err(|e| (e, None))?;
    let mut tx = match conn.begin().await {
        Ok(tx) => tx,
        // An idle connection broke (server restart, network): nothing was
        // started; it is closed and the next try opens another.
        Err(e) => {
            return Err((
                unavailable("opening a transaction", e),
                Some(Retry::NotStarted),
            ));
        }
    };
    let mut store = PgStore::new(&mut tx, preloaded);
    let executed = execute(job, &mut store, cfg).await;
    let mut retry = store.retry;
    // An answer computed from the cache that no write confirmed is re-run
    // against the row; a failed write (e.g. a lost connection) is not.
    if retry.is_none() && executed.is_ok() && store.preloaded_unconfirmed() {
        retry = Some(Retry::Unconfirmed);
    }
    let (written, bulk) = (std::mem::take(&mut store.written), store.bulk);
    let answer = match (executed, retry) {
        (Ok(answer), None) => answer,
        (Err(e), retry) | (Ok(Err(e)), retry @ Some(_)) => {
            if tx.rollback().await.is_ok() {
                conn.done();
            }
            return Err((e, retry));
        }
        (Ok(Ok(_)), Some(why)) => {
            if tx.rollback().await.is_ok() {
                conn.done();
            }
            return Err((LedgerError::unavailable("writing", why.as_str()), Some(why)));
        }
    };
    match tx.commit().await {
        Ok(()) => {
            conn.done();
            Ok((answer, written, bulk))
        }
        // Only a server-side abort (40001/40P01) proves nothing committed.
        Err(e) => Err(map_err("committing", e)),
    }
}

/// `job` without a transaction where one statement decides it; `None` =
/// run it in a transaction.
async fn run_unlocked<J: Job>(
    pool: &Conns,
    cfg: &Config,
    cache: &Cache,
    job: &J,
) -> Result<Option<Result<J::Output, LedgerError>>, LedgerError> {
    // 1. The record presumed absent: if the job then inserts exactly that
    //    record and nothing else, the conditional insert decides it.
    let mut presumed = Unlocked::presuming();
    let planned = job.plan(&mut presumed, cfg.ctx()).await;
    let mut conn = pool.get().await?;
    if let (Ok(change), Some(id)) = (&planned, presumed.presumed_alone())
        && let Some(rec) = only_insert(change, id)
    {
        let inserted = OperationRow::from_record(rec)
            .bind(sqlx::query(sql::INSERT))
            .execute(&mut *conn)
            .await
            .map_err(|e| unavailable("claiming an operation", e))?
            .rows_affected();
        if inserted == 1 {
            conn.done();
            cache.put(vec![(rec.clone(), 1)]);
            return Ok(planned
                .ok()
                .map(|c| Ok(job.written(c.answer, PurgeReport::default()))));
        }
    }
    // 2. The committed row, read without a lock: an answer that writes
    //    nothing (in progress, replayed, unresolved, conflict, cancelled, a
    //    refusal, a read) is that row's state at the read.
    let mut read = Unlocked::reading(&mut conn);
    let answer = answer_read_only(job, &mut read, cfg).await;
    let (failed, unsupported) = (read.failed, read.unsupported);
    if !failed {
        conn.done();
    }
    // A failed read answers with its error (the connection is closed).
    Ok(answer.filter(|_| failed || !unsupported))
}

/// `job`'s answer planned on the committed rows read without a lock,
/// whatever it would write (`driver::answer_unrecorded`): a read-only
/// ledger records nothing. A job this read cannot plan is refused.
pub(super) async fn read_unrecorded<J: Job>(
    pool: &Conns,
    cfg: &Config,
    job: &J,
) -> Result<J::Output, LedgerError> {
    let mut conn = pool.get().await?;
    let mut read = Unlocked::reading(&mut conn);
    let answer = crate::driver::answer_unrecorded(job, &mut read, cfg).await;
    let (failed, unsupported) = (read.failed, read.unsupported);
    if !failed {
        conn.done();
    }
    if unsupported && !failed {
        return Err(crate::driver::read_only_refused());
    }
    answer
}

/// The new record `change` inserts, if inserting `id` is all it writes.
fn only_insert<'a, T>(change: &'a Change<T>, id: &OperationId) -> Option<&'a OperationRecord> {
    let e = &change.effect;
    match e.saves.as_slice() {
        [rec]
            if rec.id == *id
                && e.attempts.is_empty()
                && e.finishes.is_empty()
                && e.retire.is_none() =>
        {
            Some(rec)
        }
        _ => None,
    }
}

/// Row access outside a transaction, for [`run_unlocked`]: `load` presumes
/// the record absent (without reading) or reads the committed row without a
/// lock. Anything else (blockers, sweeps, writes) cannot be decided this
/// way and marks the plan unusable.
struct Unlocked<'c> {
    conn: Option<&'c mut PgConnection>,
    /// The identities `load` presumed absent.
    presumed: Vec<OperationId>,
    unsupported: bool,
    /// A read failed (its error is the answer).
    failed: bool,
}

impl<'c> Unlocked<'c> {
    fn presuming() -> Self {
        Self {
            conn: None,
            presumed: Vec::new(),
            unsupported: false,
            failed: false,
        }
    }

    fn reading(conn: &'c mut PgConnection) -> Self {
        Self {
            conn: Some(conn),
            ..Self::presuming()
        }
    }

    /// The one identity presumed absent, if the plan read nothing else.
    fn presumed_alone(&self) -> Option<&OperationId> {
        match self.presumed.as_slice() {
            [id] if !self.unsupported => Some(id),
            _ => None,
        }
    }

    fn unsupported<T>(&mut self) -> Result<T, LedgerError> {
        self.unsupported = true;
        Err(LedgerError::unavailable(
            "planning without a lock",
            "needs a transaction",
        ))
    }
}

#[async_trait]
impl Store for Unlocked<'_> {
    async fn load(&mut self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        let Some(conn) = self.conn.as_deref_mut() else {
            self.presumed.push(id.clone());
            return Ok(None);
        };
        let row = sqlx::query_as::<_, Stored>(sql::GET)
            .bind(id.scope.as_str())
            .bind(id.key.as_str())
            .fetch_optional(conn)
            .await;
        match row {
            Ok(row) => row.map(|s| s.row.into_record()).transpose(),
            Err(e) => {
                self.failed = true;
                Err(unavailable("reading an operation", e))
            }
        }
    }

    async fn find_blocker(
        &mut self,
        _except: &OperationId,
        _action: &ActionName,
        _scope: Option<&Scope>,
        _now: Timestamp,
    ) -> Result<Option<OperationRecord>, LedgerError> {
        self.unsupported()
    }

    async fn due_expired(&mut self, _now: Timestamp) -> Result<Vec<OperationRecord>, LedgerError> {
        self.unsupported()
    }

    async fn take_due_unknown(
        &mut self,
        _now: Timestamp,
        _filter: &crate::ledger::DueFilter,
        _limit: usize,
    ) -> Result<Vec<OperationRecord>, LedgerError> {
        self.unsupported()
    }

    async fn save(&mut self, _rec: &OperationRecord) -> Result<(), LedgerError> {
        self.unsupported()
    }

    async fn insert_attempt(&mut self, _a: &AttemptRecord) -> Result<(), LedgerError> {
        self.unsupported()
    }

    async fn finish_attempt(&mut self, _f: &AttemptFinish) -> Result<(), LedgerError> {
        self.unsupported()
    }

    async fn load_task(&mut self, _id: &TaskId) -> Result<Option<TaskBudget>, LedgerError> {
        self.unsupported()
    }

    async fn save_task(&mut self, _budget: &TaskBudget) -> Result<(), LedgerError> {
        self.unsupported()
    }

    async fn retire(&mut self, _retire: Retire) -> Result<PurgeReport, LedgerError> {
        self.unsupported()
    }
}
