//! PostgreSQL backend: one ledger shared by many agent-backend replicas
//! (processes or machines), with the same pure state machine and the same
//! conformance suite as the other backends.
//!
//! * Every write command is one `READ COMMITTED` transaction that reads the
//!   record `FOR UPDATE`, runs the machine and writes the effect; a new
//!   identity is inserted with `INSERT … ON CONFLICT DO NOTHING` and the
//!   command re-run if another replica inserted it first (see `tx`). Every
//!   post-claim write is fenced by the claim's epoch, checked under the row
//!   lock, and the `UPDATE` itself is guarded by the `(epoch, state)` it was
//!   computed from.
//! * Versioned migrations (`migrations/postgres`) run on connect under
//!   sqlx's database-wide advisory lock, so replicas may start together.
//! * Indexes: begin and every post-claim write use the primary key only;
//!   blockers, lease expiries and reconciliation read partial indexes that
//!   hold only in-flight or unknown rows, so their cost does not grow with
//!   the number of settled operations.
//! * Fail closed: an unreachable server, a lost connection, a statement
//!   timeout or a failed COMMIT is [`LedgerError::Unavailable`].
//!
//! Standard SQL only; `docs/ledger.md` lists the statements.

mod cache;
mod connect;
mod conns;
mod error;
mod sql;
mod store;
mod tx;

use std::time::Duration;

use async_trait::async_trait;
use sqlx::{Connection, QueryBuilder};

use cache::Cache;
use conns::Conns;

pub use connect::PostgresOptions;
use error::unavailable;

use crate::clock::Timestamp;
use crate::error::LedgerError;
use crate::exec::{Answer, Command, Config, execute};
use crate::identity::{OperationId, OperationRequest};
use crate::ledger::{
    BeginOptions, BeginOutcome, Dispatch, Ledger, ListFilter, NewAttempt, ReleaseReason,
    Resolution, UnknownReport, UnknownUpdate,
};
use crate::machine;
use crate::model::{AttemptRecord, Claim, OperationRecord, State};
use crate::retention::PurgeReport;

/// The ledger on PostgreSQL, shared by any number of replicas.
///
/// ```no_run
/// # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
/// use handover_ledger::*;
/// use serde_json::json;
/// use std::time::Duration;
///
/// let url = std::env::var("DATABASE_URL").expect("a postgres:// URL");
/// let ledger = PostgresLedger::connect(&url, PostgresOptions::default()).await?;
/// let req = OperationRequest::new("tenant-1", "K-701", "create_shipment",
///     &json!({"order": 42}), &Limits::default())?;
/// let opts = BeginOptions::new("replica-a", Duration::from_secs(30));
/// match ledger.begin(&req, &opts).await? {
///     BeginOutcome::Started(claim) => { /* mark_dispatched, send, confirm */ }
///     other => println!("not ours to run: {other:?}"),
/// }
/// # Ok::<(), LedgerError>(()) }).unwrap();
/// ```
#[derive(Debug)]
pub struct PostgresLedger {
    pool: Conns,
    cfg: Config,
    cache: Cache,
}

impl PostgresLedger {
    /// Connects to `url` (`postgres://user[:password]@host[:port]/db`),
    /// creates `opts.schema` if given, applies migrations and opens a pool.
    ///
    /// Fails with [`LedgerError::Unavailable`] if the server cannot be
    /// reached within `opts.connect_timeout`, and with a validation error
    /// naming `url`, `schema`, `max_connections` or `statement_timeout` for
    /// bad settings (the URL is never echoed: it may hold a password).
    pub async fn connect(url: &str, opts: PostgresOptions) -> Result<Self, LedgerError> {
        let pool = connect::open(url, &opts).await?;
        Ok(Self {
            pool,
            cache: Cache::default(),
            cfg: Config {
                clock: opts.clock,
                retention: opts.retention,
                limits: opts.limits,
            },
        })
    }

    /// Closes the idle connections; calls after this fail with `Unavailable`.
    pub async fn close(self) {
        self.pool.close().await;
    }

    /// For reconcilers sharing the work: locks up to `limit` `unknown`
    /// operations whose `next_check_at` has passed, skipping rows another
    /// reconciler holds (`FOR UPDATE SKIP LOCKED`), moves their
    /// `next_check_at` to `now + hold` (owner, reason and divergence kept)
    /// and returns them as updated. Two reconcilers calling at once get
    /// disjoint sets; one that dies simply lets `hold` pass.
    pub async fn take_due_unknown(
        &self,
        limit: usize,
        hold: Duration,
    ) -> Result<Vec<OperationRecord>, LedgerError> {
        let now = self.cfg.clock.now();
        let mut conn = self.pool.get().await?;
        let mut tx = conn
            .begin()
            .await
            .map_err(|e| unavailable("opening a transaction", e))?;
        let mut store = store::PgStore::new(&mut tx, None);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let due = store.take_due_unknown(now, limit).await?;
        let mut taken = Vec::with_capacity(due.len());
        for rec in due {
            let State::Unknown(info) = rec.state else {
                continue;
            };
            let update = UnknownUpdate {
                owner: info.owner,
                reason: info.reason,
                next_check_at: Some(now.plus(hold)),
                diverged: info.diverged,
            };
            let cmd = Command::UpdateUnknown(rec.id, update);
            taken.push(Answer::record(execute(&mut store, cmd, &self.cfg).await?)?);
        }
        let written = std::mem::take(&mut store.written);
        tx.commit()
            .await
            .map_err(|e| unavailable("committing", e))?;
        conn.done();
        self.cache.put(written);
        Ok(taken)
    }

    async fn run(&self, make: impl Fn() -> Command) -> Result<Answer, LedgerError> {
        tx::run(&self.pool, &self.cfg, &self.cache, None, make).await
    }

    /// A holder's command on `id`, which may start from the cached record.
    async fn run_holder(
        &self,
        id: &OperationId,
        make: impl Fn() -> Command,
    ) -> Result<Answer, LedgerError> {
        tx::run(&self.pool, &self.cfg, &self.cache, Some(id), make).await
    }

    async fn read(&self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        let mut conn = self.pool.get().await?;
        let row = sqlx::query(sql::GET)
            .bind(id.scope.as_str())
            .bind(id.key.as_str())
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| unavailable("reading an operation", e))?;
        conn.done();
        let rec = row.as_ref().map(sql::op_from_row).transpose()?;
        match rec {
            Some(r) if machine::settle(&r, self.cfg.clock.now()).is_some() => {
                Answer::maybe_record(self.run(|| Command::Get(id.clone())).await)
            }
            other => Ok(other),
        }
    }
}

/// The `list` query with only the filters that are set, so the planner can
/// use the partial indexes (the state is inlined: it is one of a closed set
/// of literals).
fn list_query(filter: &ListFilter, now: Timestamp) -> QueryBuilder<sqlx::Postgres> {
    let mut q = QueryBuilder::new(concat!(sql::op_cols!(), "WHERE TRUE"));
    if let Some(state) = filter.state {
        q.push(format_args!(" AND state = '{}'", state.as_str()));
    }
    if let Some(d) = filter.diverged {
        q.push(" AND diverged = ").push_bind(d);
    }
    if let Some(scope) = &filter.scope {
        q.push(" AND scope = ").push_bind(scope.to_string());
    }
    if let Some(action) = &filter.action {
        q.push(" AND action = ").push_bind(action.to_string());
    }
    if let Some(age) = filter.older_than {
        q.push(" AND COALESCE(unknown_since, updated_at) <= ")
            .push_bind(now.minus(age).0);
    }
    if let Some(t) = filter.due_at {
        q.push(" AND state = 'unknown' AND next_check_at <= ")
            .push_bind(t.0);
    }
    q.push(" ORDER BY created_at, scope, key");
    if let Some(n) = filter.limit {
        q.push(" LIMIT ")
            .push_bind(i64::try_from(n).unwrap_or(i64::MAX));
    }
    q
}

#[async_trait]
impl Ledger for PostgresLedger {
    async fn begin(
        &self,
        req: &OperationRequest,
        opts: &BeginOptions,
    ) -> Result<BeginOutcome, LedgerError> {
        if let Some(outcome) = tx::begin_fast(&self.pool, &self.cfg, &self.cache, req, opts).await?
        {
            return Ok(outcome);
        }
        Answer::begin(self.run(|| Command::Begin(req.clone(), opts.clone())).await)
    }
    async fn renew(&self, claim: &Claim, lease: Duration) -> Result<Claim, LedgerError> {
        Answer::claim(
            self.run_holder(&claim.id, || Command::Renew(claim.clone(), lease))
                .await,
        )
    }
    async fn mark_dispatched(
        &self,
        claim: &Claim,
        dispatch: Dispatch,
    ) -> Result<uuid::Uuid, LedgerError> {
        Answer::uuid(
            self.run_holder(&claim.id, || {
                Command::MarkDispatched(claim.clone(), dispatch.clone())
            })
            .await,
        )
    }
    async fn confirm(
        &self,
        claim: &Claim,
        result: serde_json::Value,
        evidence: Option<String>,
    ) -> Result<OperationRecord, LedgerError> {
        Answer::record(
            self.run_holder(&claim.id, || {
                Command::Confirm(claim.clone(), result.clone(), evidence.clone())
            })
            .await,
        )
    }
    async fn reject(
        &self,
        claim: &Claim,
        reason: String,
        evidence: Option<String>,
    ) -> Result<OperationRecord, LedgerError> {
        Answer::record(
            self.run_holder(&claim.id, || {
                Command::Reject(claim.clone(), reason.clone(), evidence.clone())
            })
            .await,
        )
    }
    async fn mark_unknown(
        &self,
        claim: &Claim,
        report: UnknownReport,
    ) -> Result<OperationRecord, LedgerError> {
        Answer::record(
            self.run_holder(&claim.id, || {
                Command::MarkUnknown(claim.clone(), report.clone())
            })
            .await,
        )
    }
    async fn release(
        &self,
        claim: &Claim,
        why: ReleaseReason,
    ) -> Result<OperationRecord, LedgerError> {
        Answer::record(
            self.run_holder(&claim.id, || Command::Release(claim.clone(), why.clone()))
                .await,
        )
    }
    async fn claim_for_resend(
        &self,
        id: &OperationId,
        opts: &BeginOptions,
        window: Duration,
    ) -> Result<Option<Claim>, LedgerError> {
        Answer::maybe_claim(
            self.run(|| Command::ClaimForResend(id.clone(), opts.clone(), window))
                .await,
        )
    }
    async fn resolve(
        &self,
        id: &OperationId,
        resolution: Resolution,
    ) -> Result<OperationRecord, LedgerError> {
        Answer::record(
            self.run(|| Command::Resolve(id.clone(), resolution.clone()))
                .await,
        )
    }
    async fn update_unknown(
        &self,
        id: &OperationId,
        update: UnknownUpdate,
    ) -> Result<OperationRecord, LedgerError> {
        Answer::record(
            self.run(|| Command::UpdateUnknown(id.clone(), update.clone()))
                .await,
        )
    }
    async fn append_attempt(
        &self,
        id: &OperationId,
        attempt: NewAttempt,
    ) -> Result<uuid::Uuid, LedgerError> {
        Answer::uuid(
            self.run(|| Command::AppendAttempt(id.clone(), attempt.clone()))
                .await,
        )
    }
    async fn cancel(
        &self,
        id: &OperationId,
        reason: String,
    ) -> Result<OperationRecord, LedgerError> {
        Answer::record(
            self.run(|| Command::Cancel(id.clone(), reason.clone()))
                .await,
        )
    }
    async fn get(&self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        self.read(id).await
    }
    async fn list(&self, filter: &ListFilter) -> Result<Vec<OperationRecord>, LedgerError> {
        let now = self.cfg.clock.now();
        let mut conn = self.pool.get().await?;
        let due = sqlx::query(sql::ANY_DUE)
            .bind(now.0)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| unavailable("listing operations", e))?;
        if due.is_some() {
            // The settling transaction needs a connection of its own.
            conn.done();
            self.run(|| Command::SettleDue).await?;
            conn = self.pool.get().await?;
        }
        let rows = list_query(filter, now)
            .build()
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| unavailable("listing operations", e))?;
        conn.done();
        rows.iter().map(sql::op_from_row).collect()
    }
    async fn attempts(&self, id: &OperationId) -> Result<Vec<AttemptRecord>, LedgerError> {
        self.read(id).await?;
        let mut conn = self.pool.get().await?;
        let rows = sqlx::query(sql::ATTEMPTS)
            .bind(id.scope.as_str())
            .bind(id.key.as_str())
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| unavailable("reading attempts", e))?;
        conn.done();
        rows.iter().map(sql::attempt_from_row).collect()
    }
    async fn purge(&self) -> Result<PurgeReport, LedgerError> {
        // Purge rewrites rows in bulk: nothing cached survives it.
        self.cache.clear();
        let report = Answer::purge(self.run(|| Command::Purge).await);
        self.cache.clear();
        report
    }
}
