//! The one typed driver every backend runs its write transactions through:
//! a [`Job`] reads what it needs through a [`Store`] and runs the pure
//! [`crate::machine`]; [`execute`] writes the resulting effect; the job's
//! own `Output` type is what the caller gets, so a wrong answer cannot
//! compile.
//!
//! A backend implements [`Store`] (row access inside one transaction) and
//! [`Backend`] (how a job's transaction is opened, retried and committed,
//! and the plain read paths); the [`Ledger`](crate::Ledger) methods are
//! written once, in [`ledger`], on top of it.
//!
//! Adding a command: write a type that implements [`Job`] (most commands
//! act on one record and are a [`jobs::OnRecord`] with a machine function);
//! if it needs rows no existing [`Store`] method reads, add the method and
//! its statement to each backend's store. The job then runs on every
//! backend, in their transactions, retries and group commits, unchanged.

pub(crate) mod jobs;
mod ledger;
mod tasks;

use std::future::Future;
use std::sync::Arc;

use async_trait::async_trait;

use crate::clock::{Clock, Timestamp};
use crate::error::LedgerError;
use crate::identity::{ActionName, Limits, OperationId, Scope};
use crate::ledger::ListFilter;
use crate::machine::{AttemptFinish, Ctx, Effect, Retire, Step};
use crate::model::{AttemptRecord, OperationRecord};
use crate::retention::{PurgeReport, Retention};
use crate::task::{TaskBudget, TaskId};

/// Row access inside one transaction. A [`Job`] only reads; [`execute`]
/// writes. Reads come first in every job, so a read error means nothing of
/// the job was written.
#[async_trait]
pub(crate) trait Store: Send {
    /// The stored record (not settled).
    async fn load(&mut self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError>;
    /// Another operation of `action` (in `scope`, if given), not `except`,
    /// that is `unknown` or `dispatched` with `lease_until <= now`; the first
    /// by `(created_at, scope, key)`.
    async fn find_blocker(
        &mut self,
        except: &OperationId,
        action: &ActionName,
        scope: Option<&Scope>,
        now: Timestamp,
    ) -> Result<Option<OperationRecord>, LedgerError>;
    /// Records whose lease expiry must be recorded as `unknown`
    /// (`dispatched`, or `claimed` with `dispatch_count > 0`, and `lease_until <= now`).
    async fn due_expired(&mut self, now: Timestamp) -> Result<Vec<OperationRecord>, LedgerError>;
    /// Up to `limit` `unknown` records with `next_check_at <= now`, by
    /// `(next_check_at, created_at, scope, key)`, that no other transaction
    /// holds for writing (each is then this transaction's to write).
    async fn take_due_unknown(
        &mut self,
        now: Timestamp,
        filter: &crate::ledger::DueFilter,
        limit: usize,
    ) -> Result<Vec<OperationRecord>, LedgerError>;
    /// Inserts or replaces a record.
    async fn save(&mut self, rec: &OperationRecord) -> Result<(), LedgerError>;
    /// Appends an attempt.
    async fn insert_attempt(&mut self, a: &AttemptRecord) -> Result<(), LedgerError>;
    /// Closes the pending dispatch attempt of `(id, epoch)`, if there is one.
    async fn finish_attempt(&mut self, f: &AttemptFinish) -> Result<(), LedgerError>;
    /// The stored task budget (expired or not), read for writing.
    async fn load_task(&mut self, id: &TaskId) -> Result<Option<TaskBudget>, LedgerError>;
    /// Inserts or replaces a task budget (one read by `load_task` in this
    /// transaction).
    async fn save_task(&mut self, budget: &TaskBudget) -> Result<(), LedgerError>;
    /// Tombstones terminal records decided at or before `retire.tombstone_cutoff`
    /// (see [`crate::machine::tombstone`]) and deletes those decided at or
    /// before `retire.delete_cutoff`, with their attempts; deletes task
    /// budgets expired at or before `retire.tasks_expired`.
    async fn retire(&mut self, retire: Retire) -> Result<PurgeReport, LedgerError>;
}

/// One ledger command, typed by its answer.
///
/// `plan` reads through the store and returns the machine's [`Step`]; it
/// never writes (the driver does), so it can be run again after a
/// transaction was rolled back, or against rows read without a lock. It
/// must therefore be deterministic given the rows it reads and the time.
pub(crate) trait Job: Send + Sync {
    /// What the caller is answered.
    type Output: Send;

    /// Reads what the command needs and decides what to write and answer.
    fn plan<S: Store + ?Sized>(
        &self,
        store: &mut S,
        ctx: Ctx<'_>,
    ) -> impl Future<Output = Step<Self::Output>> + Send;

    /// For a claim holder's command: the operation it writes. A backend may
    /// start it from the record it last committed for that operation
    /// (PostgreSQL does, guarded by the row version).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    fn holder_of(&self) -> Option<&OperationId> {
        None
    }

    /// The record `plan` loads first, when known before it runs. A backend
    /// may read those of a whole batch in one query (SQLite's group commit
    /// does).
    #[cfg_attr(not(feature = "sqlite"), allow(dead_code))]
    fn loads(&self) -> Option<&OperationId> {
        None
    }

    /// Whether the command is usually decided without writing an existing
    /// row — by inserting a new identity, or with an answer that writes
    /// nothing (racing losers, replays, reads). A backend may then try it
    /// without the row lock first (PostgreSQL does; see `postgres::tx`).
    #[cfg_attr(not(feature = "postgres"), allow(dead_code))]
    fn try_unlocked(&self) -> bool {
        false
    }

    /// The answer once the effect is written, for a command whose answer
    /// counts what the writes did (only retention does).
    fn written(&self, answer: Self::Output, _retired: PurgeReport) -> Self::Output {
        answer
    }
}

/// What a backend is configured with.
#[derive(Clone, Debug)]
pub(crate) struct Config {
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) retention: Retention,
    pub(crate) limits: Limits,
}

impl Config {
    /// The machine's inputs at the clock's current time.
    pub(crate) fn ctx(&self) -> Ctx<'_> {
        Ctx {
            now: self.clock.now(),
            retention: &self.retention,
            limits: &self.limits,
        }
    }
}

/// The outcome of running one job: `Err` means a write failed and the
/// transaction must be rolled back; `Ok` carries the caller's answer (which
/// may be a refusal: then nothing was written).
pub(crate) type Executed<T> = Result<Result<T, LedgerError>, LedgerError>;

/// Runs `job` against `store` at the clock's current time and writes its effect.
pub(crate) async fn execute<J: Job, S: Store + ?Sized>(
    job: &J,
    store: &mut S,
    cfg: &Config,
) -> Executed<J::Output> {
    let change = match job.plan(store, cfg.ctx()).await {
        Ok(change) => change,
        Err(refused) => return Ok(Err(refused)),
    };
    let retired = persist(store, change.effect).await?;
    Ok(Ok(job.written(change.answer, retired)))
}

/// The answer of `job` planned on rows read outside a write transaction,
/// when it writes nothing (a refusal writes nothing either); `None` when
/// it would write, so it must run in a transaction.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) async fn answer_read_only<J: Job, S: Store + ?Sized>(
    job: &J,
    store: &mut S,
    cfg: &Config,
) -> Option<Result<J::Output, LedgerError>> {
    match job.plan(store, cfg.ctx()).await {
        Ok(change) if change.effect.is_empty() => Some(Ok(change.answer)),
        Ok(_) => None,
        Err(e) => Some(Err(e)),
    }
}

/// Every write on a ledger opened read-only (either backend).
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn read_only_refused() -> LedgerError {
    LedgerError::unavailable("writing", "the ledger was opened read-only")
}

/// `job`'s answer planned on the stored rows, whatever it would write:
/// what a read-only ledger answers.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) async fn answer_unrecorded<J: Job, S: Store + ?Sized>(
    job: &J,
    store: &mut S,
    cfg: &Config,
) -> Result<J::Output, LedgerError> {
    job.plan(store, cfg.ctx()).await.map(|change| change.answer)
}

/// `rec` as a read-write ledger would settle it now (lease expiries),
/// unrecorded: what a read-only ledger answers.
#[cfg_attr(not(any(feature = "sqlite", feature = "postgres")), allow(dead_code))]
pub(crate) fn settled(rec: OperationRecord, cfg: &Config) -> OperationRecord {
    match crate::machine::get(Some(&rec), cfg.ctx()) {
        Ok(change) => change.answer.unwrap_or(rec),
        Err(_) => rec,
    }
}

async fn persist<S: Store + ?Sized>(
    store: &mut S,
    effect: Effect,
) -> Result<PurgeReport, LedgerError> {
    for rec in &effect.saves {
        store.save(rec).await?;
    }
    for a in &effect.attempts {
        store.insert_attempt(a).await?;
    }
    for f in &effect.finishes {
        store.finish_attempt(f).await?;
    }
    for t in &effect.tasks {
        store.save_task(t).await?;
    }
    match effect.retire {
        Some(r) => store.retire(r).await,
        None => Ok(PurgeReport::default()),
    }
}

/// What a backend provides; the [`Ledger`](crate::Ledger) methods are
/// written once on top of it (see [`ledger`]).
pub(crate) trait Backend: Send + Sync + std::fmt::Debug {
    /// Runs `job` in one write transaction: atomic with respect to every
    /// other job on the same store, durable before it returns. Any error
    /// means nothing of it was written.
    fn run<J: Job + 'static>(
        &self,
        job: J,
    ) -> impl Future<Output = Result<J::Output, LedgerError>> + Send;
    /// The settled record (see [`jobs::get`]), read without the write lock
    /// unless a lease expiry must be recorded.
    fn get_record(
        &self,
        id: &OperationId,
    ) -> impl Future<Output = Result<Option<OperationRecord>, LedgerError>> + Send;
    /// The records `filter` selects, after recording due lease expiries.
    fn list_records(
        &self,
        filter: &ListFilter,
    ) -> impl Future<Output = Result<Vec<OperationRecord>, LedgerError>> + Send;
    /// The attempt log of one operation, oldest first.
    fn attempt_log(
        &self,
        id: &OperationId,
    ) -> impl Future<Output = Result<Vec<AttemptRecord>, LedgerError>> + Send;
    /// [`Ledger::close`](crate::Ledger::close).
    fn close_store(&self) -> impl Future<Output = ()> + Send;
}
