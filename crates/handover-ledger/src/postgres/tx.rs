//! How PostgreSQL write transactions are run.
//!
//! Each command runs in its own `READ COMMITTED` transaction on a pooled
//! connection: load with `FOR UPDATE` → the pure machine → write → `COMMIT`.
//! Nobody is answered before the COMMIT returns. If the transaction lost a
//! race it could not lock against (two inserts of one new identity) or the
//! server aborted it (serialization failure, deadlock), nothing of it
//! committed and the command is re-run from the start, at most
//! [`MAX_TRIES`] times. A failed COMMIT is never re-run: its outcome is
//! unknown, so the caller gets `Unavailable` (for `mark_dispatched`: do not
//! send).
//!
//! A holder's command (`renew`, `mark_dispatched`, `confirm`, `reject`,
//! `mark_unknown`, `release`) may start from the record this ledger last
//! committed for the operation instead of reading it `FOR UPDATE`; its
//! `UPDATE` is conditional on that row version, so if the row changed the
//! write matches nothing and the command is re-run the normal way (see
//! `cache`).
//!
//! `begin` of an identity with block width `operation` first tries a single
//! autocommit `INSERT … ON CONFLICT DO NOTHING` of the record the machine
//! computes for an absent identity: if it inserts a row, that *is* the
//! atomic check-and-claim (the identity was absent at that instant). If not,
//! it reads the row without a lock and, when the machine's answer writes
//! nothing (someone else holds it, a replay, a conflict …), answers from
//! that read. Only an answer that writes runs the full transaction, so
//! racing losers never queue on the row lock.

use sqlx::Connection;

use super::cache::{Cache, Versioned};
use super::conns::Conns;

use super::error::{Retry, map_err, unavailable};
use super::sql;
use super::store::PgStore;
use crate::error::LedgerError;
use crate::exec::{Answer, Command, Config, execute};
use crate::identity::{OperationId, OperationRequest};
use crate::ledger::{BeginOptions, BeginOutcome, BlockWidth};
use crate::machine::{self, Ctx};
use crate::row::OperationRow;

/// Attempts per command before giving up with `Unavailable`.
pub(super) const MAX_TRIES: usize = 8;

type Tried = Result<(Result<Answer, LedgerError>, Vec<Versioned>), (LedgerError, Option<Retry>)>;

/// Runs the command `make()` builds, re-running it after a safe abort.
/// `cached`: the operation a holder command acts on, whose record may come
/// from `cache` (first try only; see [`Cache`]).
pub(super) async fn run(
    pool: &Conns,
    cfg: &Config,
    cache: &Cache,
    cached: Option<&OperationId>,
    make: impl Fn() -> Command,
) -> Result<Answer, LedgerError> {
    let mut preload = cached.and_then(|id| cache.get(id));
    let mut last = None;
    for _ in 0..MAX_TRIES {
        match run_once(pool, cfg, make(), preload.take()).await {
            Ok((answer, written)) => {
                cache.put(written);
                return answer;
            }
            Err((e, retry)) => {
                if let Some(id) = cached {
                    cache.forget(id);
                }
                if retry.is_none() {
                    return Err(e);
                }
                last = Some(e);
            }
        }
    }
    Err(last.unwrap_or_else(|| LedgerError::unavailable("writing", "no attempt was made")))
}

async fn run_once(pool: &Conns, cfg: &Config, cmd: Command, preloaded: Option<Versioned>) -> Tried {
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
    let executed = execute(&mut store, cmd, cfg).await;
    let mut retry = store.retry;
    // An answer computed from the cache that no write confirmed is re-run
    // against the row; a failed write (e.g. a lost connection) is not.
    if retry.is_none() && executed.is_ok() && store.preloaded_unconfirmed() {
        retry = Some(Retry::Unconfirmed);
    }
    let written = std::mem::take(&mut store.written);
    let answer = match (executed, retry) {
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
        (Ok(answer), None) => answer,
    };
    match tx.commit().await {
        Ok(()) => {
            conn.done();
            Ok((answer, written))
        }
        // Only a server-side abort (40001/40P01) proves nothing committed.
        Err(e) => Err(map_err("committing", e)),
    }
}

/// `begin` without a transaction where one statement decides it; `None` =
/// run the full transaction. Only for block width `operation` (no other
/// rows are involved).
pub(super) async fn begin_fast(
    pool: &Conns,
    cfg: &Config,
    cache: &Cache,
    req: &OperationRequest,
    opts: &BeginOptions,
) -> Result<Option<BeginOutcome>, LedgerError> {
    if opts.block != BlockWidth::Operation {
        return Ok(None);
    }
    let ctx = Ctx {
        now: cfg.clock.now(),
        retention: &cfg.retention,
        limits: &cfg.limits,
    };
    // 1. Absent: the record the machine computes for a new identity, inserted
    //    only if the identity is still absent — that insert is the atomic
    //    check-and-claim.
    let step = machine::begin(None, None, req, opts, ctx);
    let e = &step.effect;
    let (Ok(BeginOutcome::Started(_)), [rec]) = (&step.answer, e.saves.as_slice()) else {
        return Ok(None);
    };
    if !e.attempts.is_empty() || !e.finishes.is_empty() {
        return Ok(None);
    }
    let mut conn = pool.get().await?;
    let inserted = sql::bind_row(sqlx::query(sql::INSERT), OperationRow::from_record(rec))
        .execute(&mut *conn)
        .await
        .map_err(|e| unavailable("claiming an operation", e))?
        .rows_affected();
    if inserted == 1 {
        conn.done();
        cache.put(vec![(rec.clone(), 1)]);
        return Ok(step.answer.ok());
    }
    // 2. Present: if the machine answers from the committed row without
    //    writing anything (in progress, replayed, unresolved, conflict,
    //    cancelled), that answer is the row's state at the read, as a
    //    serial execution would give it. Anything that writes takes the lock.
    let row = sqlx::query(sql::GET)
        .bind(req.id().scope.as_str())
        .bind(req.id().key.as_str())
        .fetch_optional(&mut *conn)
        .await
        .map_err(|e| unavailable("reading an operation", e))?;
    conn.done();
    let Some(cur) = row.as_ref().map(sql::op_from_row).transpose()? else {
        return Ok(None);
    };
    let step = machine::begin(Some(&cur), None, req, opts, ctx);
    if step.effect.is_empty() {
        return step.answer.map(Some);
    }
    Ok(None)
}
