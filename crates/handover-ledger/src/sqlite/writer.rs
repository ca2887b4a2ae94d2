//! How SQLite write transactions are run.
//!
//! **Group commit** (default): one task owns one write connection and runs
//! every queued command of a batch inside one `BEGIN IMMEDIATE … COMMIT`,
//! one after another. Nobody is answered before the COMMIT (and its fsync)
//! returns, so each answer is exactly as durable as with one transaction per
//! command, and each command still sees the effects of the ones before it
//! (two `begin`s of one key in one batch: one `started`, one `in_progress`).
//! If any write or the COMMIT fails, the whole batch is rolled back and every
//! caller in it gets [`LedgerError::Unavailable`]: fail closed.
//!
//! **Direct**: each command takes a pool connection and its own
//! `BEGIN IMMEDIATE` transaction; SQLite's write lock serialises them.

use sqlx::{Executor, SqliteConnection, SqlitePool};
use tokio::sync::{mpsc, oneshot};

use super::map_err;
use super::store::{RecordCache, SqlStore};
use crate::error::LedgerError;
use crate::exec::{Answer, Command, Config, execute};

type Reply = oneshot::Sender<Result<Answer, LedgerError>>;

pub(super) struct Job {
    pub(super) cmd: Command,
    pub(super) reply: Reply,
}

/// Runs one command in its own transaction on `conn`.
pub(super) async fn run_direct(
    conn: &mut SqliteConnection,
    cmd: Command,
    cfg: &Config,
) -> Result<Answer, LedgerError> {
    conn.execute("BEGIN IMMEDIATE")
        .await
        .map_err(|e| map_err("opening a write transaction", e))?;
    match execute(&mut SqlStore { conn, cache: None }, cmd, cfg).await {
        Ok(answer) => {
            if let Err(e) = conn.execute("COMMIT").await {
                let _ = conn.execute("ROLLBACK").await;
                tracing::warn!(error = %e, "ledger commit failed; transaction rolled back");
                return Err(map_err("committing", e));
            }
            answer
        }
        Err(e) => {
            let _ = conn.execute("ROLLBACK").await;
            tracing::warn!(error = %e, "ledger write failed; transaction rolled back");
            Err(e)
        }
    }
}

/// Direct mode over a pool.
pub(super) async fn run_pooled(
    pool: &SqlitePool,
    cmd: Command,
    cfg: &Config,
) -> Result<Answer, LedgerError> {
    let mut conn = pool
        .acquire()
        .await
        .map_err(|e| map_err("acquiring a connection", e))?;
    run_direct(&mut conn, cmd, cfg).await
}

/// The group-commit loop; ends when every sender is dropped.
pub(super) async fn group_commit(
    mut conn: SqliteConnection,
    mut rx: mpsc::Receiver<Job>,
    cfg: Config,
    max_batch: usize,
) {
    let mut batch: Vec<Job> = Vec::with_capacity(max_batch);
    let mut cache = RecordCache::default();
    while let Some(first) = rx.recv().await {
        batch.push(first);
        // Gather: callers answered by the previous commit are usually about
        // to enqueue their next command. Yield (never sleep) while new jobs
        // keep arriving, so one commit serves all of them.
        loop {
            while batch.len() < max_batch {
                match rx.try_recv() {
                    Ok(job) => batch.push(job),
                    Err(_) => break,
                }
            }
            if batch.len() >= max_batch {
                break;
            }
            tokio::task::yield_now().await;
            if rx.is_empty() {
                break;
            }
        }
        run_batch(&mut conn, &mut cache, &mut batch, &cfg).await;
    }
    let _ = sqlx::Connection::close(conn).await;
}

async fn run_batch(
    conn: &mut SqliteConnection,
    cache: &mut RecordCache,
    batch: &mut Vec<Job>,
    cfg: &Config,
) {
    if let Err(e) = conn.execute("BEGIN IMMEDIATE").await {
        fail_all(
            batch.drain(..).map(|j| j.reply),
            "opening a write transaction",
            &e,
        );
        return;
    }
    if let Err(e) = cache.validate(conn).await {
        let _ = conn.execute("ROLLBACK").await;
        cache.clear();
        fail_all(
            batch.drain(..).map(|j| j.reply),
            "opening a write transaction",
            &e,
        );
        return;
    }
    let mut done: Vec<(Reply, Result<Answer, LedgerError>)> = Vec::with_capacity(batch.len());
    let mut jobs = batch.drain(..);
    for job in jobs.by_ref() {
        let mut store = SqlStore {
            conn: &mut *conn,
            cache: Some(&mut *cache),
        };
        match execute(&mut store, job.cmd, cfg).await {
            Ok(answer) => done.push((job.reply, answer)),
            Err(e) => {
                let _ = conn.execute("ROLLBACK").await;
                cache.clear();
                let replies = done
                    .into_iter()
                    .map(|(r, _)| r)
                    .chain(std::iter::once(job.reply))
                    .chain(jobs.map(|j| j.reply));
                fail_all(replies, "writing a batch", &e);
                return;
            }
        }
    }
    drop(jobs);
    if let Err(e) = conn.execute("COMMIT").await {
        let _ = conn.execute("ROLLBACK").await;
        cache.clear();
        fail_all(done.into_iter().map(|(r, _)| r), "committing a batch", &e);
        return;
    }
    for (reply, answer) in done {
        let _ = reply.send(answer);
    }
}

fn fail_all(
    replies: impl Iterator<Item = Reply>,
    context: &'static str,
    e: &dyn std::fmt::Display,
) {
    let message = e.to_string();
    tracing::warn!(context, error = %message, "ledger write failed; transaction rolled back");
    for r in replies {
        let _ = r.send(Err(LedgerError::Unavailable {
            context,
            message: message.clone(),
        }));
    }
}
