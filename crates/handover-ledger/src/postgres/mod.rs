//! PostgreSQL backend: one ledger shared by many agent-backend replicas
//! (processes or machines), with the same pure state machine and the same
//! conformance suite as the other backends.
//!
//! * Every command is a typed job of the crate's driver, run in one `READ
//!   COMMITTED` transaction that reads the record `FOR UPDATE`, runs the
//!   machine and writes the effect; a new identity is inserted with `INSERT
//!   … ON CONFLICT DO NOTHING` and the job re-run if another replica
//!   inserted it first (see `tx`, which also has the unlocked path for
//!   `begin` and `get`, and the holder writes from the cache). Every
//!   post-claim write is fenced by the claim's epoch, checked under the row
//!   lock, and the `UPDATE` itself is guarded by the row version it was
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

use std::future::Future;
use std::time::Duration;

use sqlx::QueryBuilder;

use cache::Cache;
use conns::Conns;

pub use connect::PostgresOptions;
use error::unavailable;

use crate::clock::Timestamp;
use crate::driver::jobs::{self, SettleDue};
use crate::driver::{Backend, Config, Job};
use crate::error::LedgerError;
use crate::identity::OperationId;
use crate::ledger::ListFilter;
use crate::model::{AttemptRecord, OperationRecord};
use crate::row::{AttemptRow, OperationRow};

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
    call_timeout: Duration,
    /// `PostgresOptions::read_only`: nothing is written.
    read_only: bool,
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
            call_timeout: opts.call_timeout,
            read_only: opts.read_only,
            cache: Cache::default(),
            cfg: Config {
                clock: opts.clock,
                retention: opts.retention,
                limits: opts.limits,
            },
        })
    }

    /// Closes the idle connections; calls after this fail with `Unavailable`.
    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The `list` query with only the filters that are set, so the planner can
/// use the partial indexes (the state is inlined: it is one of a closed set
/// of literals).
fn list_query(filter: &ListFilter, now: Timestamp) -> QueryBuilder<sqlx::Postgres> {
    let mut q = QueryBuilder::new(concat!(sql::op_select!(), "WHERE TRUE"));
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
    if let Some(after) = &filter.after {
        q.push(
            " AND (created_at, scope, key) > \
             (SELECT created_at, scope, key FROM operations WHERE scope = ",
        )
        .push_bind(after.scope.to_string())
        .push(" AND key = ")
        .push_bind(after.key.to_string())
        .push(")");
    }
    q.push(" ORDER BY created_at, scope, key");
    if let Some(n) = filter.limit {
        q.push(" LIMIT ")
            .push_bind(i64::try_from(n).unwrap_or(i64::MAX));
    }
    q
}

impl PostgresLedger {
    /// `call` within `call_timeout`. On expiry `call` is dropped, and with
    /// it the connection it holds (closed, never reused: see `conns`), so
    /// the server rolls back whatever it had not committed.
    async fn within<T>(
        &self,
        context: &'static str,
        call: impl Future<Output = Result<T, LedgerError>>,
    ) -> Result<T, LedgerError> {
        tokio::time::timeout(self.call_timeout, call)
            .await
            .unwrap_or_else(|_| {
                Err(LedgerError::unavailable(
                    context,
                    format_args!(
                        "no answer from PostgreSQL within ledger.call_timeout ({} ms)",
                        self.call_timeout.as_millis()
                    ),
                ))
            })
    }
}

impl Backend for PostgresLedger {
    async fn close_store(&self) {
        self.close().await;
    }

    async fn run<J: Job + 'static>(&self, job: J) -> Result<J::Output, LedgerError> {
        if self.read_only {
            return Err(crate::driver::read_only_refused());
        }
        self.within(
            "running a ledger command",
            tx::run(&self.pool, &self.cfg, &self.cache, &job),
        )
        .await
    }

    /// Without a lock unless a lease expiry must be recorded (see `tx`).
    async fn get_record(&self, id: &OperationId) -> Result<Option<OperationRecord>, LedgerError> {
        if self.read_only {
            let job = jobs::get(id);
            let read = tx::read_unrecorded(&self.pool, &self.cfg, &job);
            return self.within("reading an operation", read).await;
        }
        self.run(jobs::get(id)).await
    }

    async fn list_records(&self, filter: &ListFilter) -> Result<Vec<OperationRecord>, LedgerError> {
        self.within("listing operations", self.list_now(filter))
            .await
    }

    async fn attempt_log(&self, id: &OperationId) -> Result<Vec<AttemptRecord>, LedgerError> {
        self.within("reading attempts", self.attempts_of(id)).await
    }
}

impl PostgresLedger {
    async fn list_now(&self, filter: &ListFilter) -> Result<Vec<OperationRecord>, LedgerError> {
        let now = self.cfg.clock.now();
        let mut conn = self.pool.get().await?;
        let due = sqlx::query(sql::ANY_DUE)
            .bind(now.0)
            .fetch_optional(&mut *conn)
            .await
            .map_err(|e| unavailable("listing operations", e))?;
        if due.is_some() && !self.read_only {
            // The settling transaction needs a connection of its own.
            conn.done();
            self.run(SettleDue).await?;
            conn = self.pool.get().await?;
        }
        let rows = list_query(filter, now)
            .build_query_as::<OperationRow>()
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| unavailable("listing operations", e))?;
        conn.done();
        let records = rows.into_iter().map(OperationRow::into_record);
        if self.read_only {
            // Settled in memory only; the filter ran on the stored state.
            return records
                .map(|r| r.map(|r| crate::driver::settled(r, &self.cfg)))
                .collect();
        }
        records.collect()
    }

    async fn attempts_of(&self, id: &OperationId) -> Result<Vec<AttemptRecord>, LedgerError> {
        self.get_record(id).await?;
        let mut conn = self.pool.get().await?;
        let rows = sqlx::query_as::<_, AttemptRow>(sql::ATTEMPTS)
            .bind(id.scope.as_str())
            .bind(id.key.as_str())
            .fetch_all(&mut *conn)
            .await
            .map_err(|e| unavailable("reading attempts", e))?;
        conn.done();
        rows.into_iter().map(AttemptRow::into_record).collect()
    }
}
